"""Strict JSON out: every JSON text the adapters write parses with a strict parser (RFC 8259).

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` by default, which are not JSON. Here a
non-finite float (Python or numpy) becomes ``null`` (documented where a figure can be non-finite), and
``allow_nan=False`` guards whatever slips through; numpy scalars become Python numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["dumps", "finite_or_none", "round_or_none", "rounded_list"]


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, recursively; numpy scalars as Python ones.

    Examples:
      >>> finite_or_none({"a": [1.5, float("inf")], "b": np.float32("nan"), "c": np.int64(3)})
      {'a': [1.5, None], 'b': None, 'c': 3}
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` of ``value``, with ``allow_nan=False``.

    Examples:
      >>> dumps({"x": float("-inf"), "y": 2.0})
      '{"x": null, "y": 2.0}'
    """
    return json.dumps(finite_or_none(value), allow_nan=False, **kwargs)


def round_or_none(x: float, nd: int = 6) -> float | None:
    """``x`` rounded to ``nd`` decimals for a JSON record; None (JSON null) when it is not finite.

    Examples:
      >>> round_or_none(np.float32(0.1)), round_or_none(float("nan")), round_or_none(2 / 3, 2)
      (0.1, None, 0.67)
    """
    value = float(x)
    return round(value, nd) if math.isfinite(value) else None


def rounded_list(x: npt.ArrayLike, nd: int = 6) -> list[float | None]:
    """:func:`round_or_none` of every element of ``x``, as a list (one conversion per array, not per value).

    Examples:
      >>> rounded_list(np.array([1 / 3, np.inf, -0.5]))
      [0.333333, None, -0.5]
    """
    values: list[float] = np.asarray(x, dtype=np.float64).tolist()
    if all(map(math.isfinite, values)):
        return [round(v, nd) for v in values]
    return [round(v, nd) if math.isfinite(v) else None for v in values]
