"""Argument checks: a few lines each that raise ValueError / TypeError naming the argument.

The kernel checks its own arguments with these; they are public so that code built on the kernel (the
adapters, a user's trainer) raises the same messages in the same words. Each returns the checked value
converted (``check_real`` a float, ``check_int`` an int) or nothing.

Examples:
  >>> from kernel.checks import check_int, did_you_mean
  >>> check_int(3, "num_agents", low=2)
  3
  >>> "unknown key 'stpes'" + did_you_mean("stpes", ["steps", "seed"])
  "unknown key 'stpes' (did you mean 'steps'?)"
"""

from kernel._checks import (
    check_bool,
    check_each,
    check_int,
    check_real,
    check_type,
    did_you_mean,
)
from kernel._datums import checked_batch as checked_datum_batch

__all__ = [
    "check_bool",
    "check_each",
    "check_int",
    "check_real",
    "check_type",
    "checked_datum_batch",
    "did_you_mean",
]
