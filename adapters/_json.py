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

__all__ = ["dumps", "finite_or_none"]


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
