"""Argument checks shared by the kernel: a few lines that raise ValueError / TypeError naming the argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__: list[str] = []


def as_int_array(x: npt.ArrayLike, name: str, *, ndim: int = 1) -> npt.NDArray[np.int64]:
    """Converts ``x`` to an integer array of rank ``ndim``; raises naming ``name`` otherwise."""
    arr = np.asarray(x)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def as_float_array(x: npt.ArrayLike, name: str, *, ndim: int = 1) -> npt.NDArray[np.floating[Any]]:
    """Converts ``x`` to a float array of rank ``ndim`` keeping float64/float32 (never downcasts)."""
    arr = np.asarray(x)
    if arr.dtype.kind in "biu" or (arr.size == 0 and arr.dtype.kind not in "fc"):
        arr = arr.astype(np.float64)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must be a real float array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {arr.shape}")
    return arr


def as_bool_array(x: npt.ArrayLike, name: str, *, ndim: int = 1) -> npt.NDArray[np.bool_]:
    """Converts ``x`` to a boolean array of rank ``ndim``; raises naming ``name`` otherwise."""
    arr = np.asarray(x)
    if arr.dtype != np.bool_:
        raise TypeError(f"{name} must be a boolean array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {arr.shape}")
    return arr


def check_same_length(**arrays: npt.NDArray[Any]) -> int:
    """Checks all arrays share their leading length; returns it."""
    lengths = {k: int(v.shape[0]) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise ValueError(f"arrays must have the same length, got {detail}")
    return next(iter(lengths.values()), 0)


def check_same_shape(**arrays: Any) -> tuple[int, ...]:
    """Checks all arrays (numpy or JAX: only ``.shape`` is read) share one shape; returns it."""
    shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    if len(set(shapes.values())) > 1:
        detail = ", ".join(f"{k}={s}" for k, s in shapes.items())
        raise ValueError(f"arrays must have the same shape, got {detail}")
    return next(iter(shapes.values()), ())


def check_group_ids(group_ids: npt.NDArray[np.int64], num_groups: int, name: str = "group_ids") -> None:
    """Checks ``0 <= group_ids <= num_groups`` (``num_groups`` itself marks padding rows)."""
    if num_groups < 0:
        raise ValueError(f"num_groups must be >= 0, got {num_groups}")
    if group_ids.size and (group_ids.min() < 0 or group_ids.max() > num_groups):
        raise ValueError(
            f"{name} must lie in [0, num_groups] = [0, {num_groups}], "
            f"got values in [{group_ids.min()}, {group_ids.max()}]"
        )
