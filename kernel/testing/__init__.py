"""Hypothesis strategies and invariant suites for grouped advantages, pairwise and judge rewards, and datums.

Needs ``hypothesis`` (the ``test`` extra). Point the suites at your own functions from your test suite.
"""

from kernel.testing import advantages, datums, judges, rewards, strategies
from kernel.testing.advantages import *  # noqa: F403
from kernel.testing.datums import *  # noqa: F403
from kernel.testing.judges import *  # noqa: F403
from kernel.testing.rewards import *  # noqa: F403
from kernel.testing.strategies import *  # noqa: F403

__all__ = sorted(
    {*advantages.__all__, *datums.__all__, *judges.__all__, *rewards.__all__, *strategies.__all__}
)
