"""Example counts of properties whose ``@settings`` fix their own count: deeper under ``deep``."""

from __future__ import annotations

from hypothesis import settings

__all__ = ["examples"]

DEEP_FACTOR = 20
"""How many times more examples a fixed-count property draws under the opt-in ``deep`` profile."""


def examples(n: int) -> int:
    """``n``, or ``DEEP_FACTOR · n`` when the ``deep`` profile is loaded (``HYPOTHESIS_PROFILE=deep``).

    Read when a decorator runs, i.e. at import, after ``tests/conftest.py`` has loaded the profile.
    """
    return n * DEEP_FACTOR if settings.get_current_profile_name() == "deep" else n
