"""Hypothesis strategies and invariant suites for grouped-advantage estimators and friends.

Needs ``hypothesis`` (the ``test`` extra). Point the checks at your own estimator from your test suite.
"""

from kernel.testing import invariants, strategies
from kernel.testing.invariants import *  # noqa: F403
from kernel.testing.strategies import *  # noqa: F403

__all__ = sorted({*invariants.__all__, *strategies.__all__})
