"""Argument checks shared by the kernel: a few lines that raise ValueError / TypeError naming the argument."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__: list[str] = []

_INT32_MIN = int(np.iinfo(np.int32).min)
_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)


def as_int_array(x: npt.ArrayLike, name: str, *, ndim: int = 1) -> npt.NDArray[np.int64]:
    """Converts ``x`` to an integer array of rank ``ndim``; raises naming ``name`` otherwise."""
    arr = np.asarray(x)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        if isinstance(x, (list, tuple)) and arr.ndim == 1 and all(_is_int(v) for v in x):
            # numpy reads [1, 2**63] as float64 and [1, 2**64] as object: integers beyond int64
            raise ValueError(f"{name} must fit int64, got values in [{min(x)}, {max(x)}]")
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {arr.shape}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:
        raise ValueError(f"{name} must fit int64, got a maximum of {int(arr.max())}")
    return arr.astype(np.int64, copy=False)


def as_id_array(x: npt.ArrayLike, name: str) -> npt.NDArray[np.integer[Any]]:
    """:func:`as_int_array` of rank 1 that keeps a narrower integer dtype as it is (int32 ids are not
    copied to int64); uint64 becomes int64, checked, so any two results compare and index exactly."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu" and arr.ndim == 1 and arr.dtype != np.uint64:
        return arr
    return as_int_array(x, name)


def as_int32_saturated(x: npt.ArrayLike, name: str) -> npt.NDArray[np.int32]:
    """Converts ``x`` to a rank-1 int32 array, clamping (never wrapping) integers beyond int32.

    Any integer is accepted, Python ints of any size included; a value beyond int32 becomes the nearest
    int32 bound, so an out-of-range id stays out of range. Floats, bools and strings are a TypeError
    naming ``name`` (an id is never truncated).
    """
    arr = np.asarray(x)
    if arr.dtype == object and arr.ndim == 1 and all(_is_int(v) for v in arr):
        arr = np.fromiter((min(max(int(v), _INT32_MIN), _INT32_MAX) for v in arr), np.int32, arr.size)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int32)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must have rank 1, got shape {arr.shape}")
    if arr.dtype == np.int32:
        return arr
    if arr.dtype.kind == "u":
        out: npt.NDArray[np.int32] = np.minimum(arr, np.uint64(_INT32_MAX)).astype(np.int32)
    else:
        out = np.clip(arr, _INT32_MIN, _INT32_MAX).astype(np.int32)
    return out


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


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


def as_mask(
    x: Any, name: str, *, shape: tuple[int, ...] | None = None, ndim: int | None = None, xp: Any = np
) -> Any:
    """The one boolean-mask check of the kernel, for numpy and JAX alike.

    Converts ``x`` with ``xp.asarray`` (``xp`` is ``numpy`` or ``jax.numpy``; a traced JAX array passes
    through: only its dtype and shape are read) and refuses anything but a boolean array of the given
    ``shape`` or rank ``ndim``. No implicit ``mask > 0``: an integer or float mask is a TypeError, so a
    0/1 float mask cannot be mistaken for weights. An empty list or tuple is an empty mask.

    Args:
      x: the mask.
      name: the argument's name, quoted in errors.
      shape: the exact shape required, if any.
      ndim: the rank required, if any (ignored when ``shape`` is given).
      xp: the array namespace to convert with (default numpy).

    Returns:
      ``xp.asarray(x)``, a boolean array.

    Raises:
      TypeError: ``x`` is not boolean.
      ValueError: ``x`` has the wrong shape or rank.
    """
    arr = xp.asarray(x)
    if arr.dtype != np.bool_ and isinstance(x, list | tuple) and len(x) == 0:
        arr = xp.zeros(arr.shape, bool)  # an empty list is float64 to numpy: no entries, whatever their type
    if arr.dtype != np.bool_:
        raise TypeError(f"{name} must be a boolean array (e.g. mask > 0), got dtype {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(arr.shape)}")
    if shape is None and ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {tuple(arr.shape)}")
    return arr


def as_bool_array(x: npt.ArrayLike, name: str, *, ndim: int = 1) -> npt.NDArray[np.bool_]:
    """Converts ``x`` to a numpy boolean array of rank ``ndim``; :func:`as_mask` with numpy."""
    arr: npt.NDArray[np.bool_] = as_mask(x, name, ndim=ndim)
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


def check_type(value: object, kind: type | tuple[type, ...], name: str) -> None:
    """Raises TypeError naming ``name`` unless ``value`` is an instance of ``kind``.

    Examples:
        >>> check_type("4", (int, float), "steps")
        Traceback (most recent call last):
        TypeError: steps must be an int or float, got str
    """
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(k.__name__ for k in kinds)
        article = "an" if wanted[0] in "AEIOUaeiou" else "a"
        raise TypeError(f"{name} must be {article} {wanted}, got {type(value).__name__}")


def check_each(values: Iterable[object], kind: type, name: str) -> None:
    """:func:`check_type` of every item of ``values``, named ``name[i]``.

    Examples:
        >>> check_each([1, 2, "3"], int, "ids")
        Traceback (most recent call last):
        TypeError: ids[2] must be an int, got str
    """
    for i, value in enumerate(values):
        if not isinstance(value, kind):  # the name is built only for the message
            check_type(value, kind, f"{name}[{i}]")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the choice closest to a misspelt ``word`` (difflib's ratio ≥ 0.6), or
    ``""`` when none is close: for errors that list what is valid.

    Examples:
        >>> did_you_mean("stpes", ["steps", "seed"]), did_you_mean("zzz", ["steps"])
        (" (did you mean 'steps'?)", '')
    """
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> None:
    """Checks that ``value`` is one of the strings ``choices`` (a closed ``Literal`` option)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_real(value: object, name: str, *, finite: bool = False, positive: bool = False) -> float:
    """Checks that ``value`` is a real number (not a bool or a string); returns it as a float.

    Examples:
        >>> check_real(3, "lr", positive=True)
        3.0
        >>> check_real(float("nan"), "lr", finite=True)
        Traceback (most recent call last):
        ValueError: lr must be finite, got nan
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    out = float(value)
    if finite and not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and not out > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def check_bool(value: object, name: str) -> bool:
    """Checks that ``value`` is a bool (Python or numpy): a flag given as ``"no"`` or ``0`` would read as
    its truth value otherwise. Returns it as a Python bool.

    Examples:
        >>> check_bool(True, "flag")
        True
        >>> check_bool("no", "flag")
        Traceback (most recent call last):
        TypeError: flag must be a bool, got str 'no'
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int(value: object, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Checks that ``value`` is an integer (not a bool) in ``[low, high]``; returns it as an int.

    Examples:
        >>> check_int(4, "rank", low=0)
        4
        >>> check_int(9, "agents", low=2, high=8)
        Traceback (most recent call last):
        ValueError: agents must lie in [2, 8], got 9
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    out = int(value)
    if (low is not None and out < low) or (high is not None and out > high):
        if high is None:
            raise ValueError(f"{name} must be >= {low}, got {out}")
        if low is None:
            raise ValueError(f"{name} must be <= {high}, got {out}")
        raise ValueError(f"{name} must lie in [{low}, {high}], got {out}")
    return out
