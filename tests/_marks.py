"""Marks shared by several test modules."""

from __future__ import annotations

import pytest

__all__ = ["SHORT_SAMPLES"]

SHORT_SAMPLES = pytest.mark.filterwarnings(
    "ignore:max_tokens=.*shorter than a warm-start turn:RuntimeWarning"
)
"""For smoke runs that sample fewer tokens than a warm-start turn on purpose: the loop's warning about
that has its own test (``tests/test_train_loop.py``) and would only be noise there."""
