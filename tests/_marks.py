"""Marks shared by several test modules."""

from __future__ import annotations

import pytest

__all__ = ["EXHAUSTIVE", "SHORT_SAMPLES"]

SHORT_SAMPLES = pytest.mark.filterwarnings(
    "ignore:max_tokens=.*shorter than a warm-start turn:RuntimeWarning"
)
"""For smoke runs that sample fewer tokens than a warm-start turn on purpose: the loop's warning about
that has its own test (``tests/test_train_loop.py``) and would only be noise there."""

EXHAUSTIVE = pytest.mark.exhaustive
"""The opt-in tier (``pytest --exhaustive``, see ``tests/conftest.py``): sweeps over many sizes or devices and
long runs whose every path the fast tier already covers once."""
