"""Argument checks shared by the JAX twins (the numpy ones live in :mod:`kernel._checks`)."""

from __future__ import annotations

from typing import Final

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from kernel._checks import as_int32_saturated
from kernel._namespace import Backend

__all__: list[str] = []

_INT32_MIN: Final = int(np.iinfo(np.int32).min)
_INT32_MAX: Final = int(np.iinfo(np.int32).max)


def as_float(x: ArrayLike, name: str) -> jax.Array:
    """Converts ``x`` to a JAX float array (bools and ints become float32); raises naming ``name``."""
    arr = jnp.asarray(x)
    if arr.dtype == jnp.bool_ or jnp.issubdtype(arr.dtype, jnp.integer):
        arr = arr.astype(jnp.float32)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        raise TypeError(f"{name} must be a real float array, got dtype {arr.dtype}")
    return arr


def as_int32(x: ArrayLike, name: str) -> jax.Array:
    """Converts ``x`` to a rank-1 int32 JAX array, saturating (never wrapping) values beyond int32.

    Host values (lists, numpy arrays) are checked and clamped in int64 on the host before JAX sees them,
    so 2³² + 1 stays 2³¹ − 1 (out of every agent range) instead of wrapping to 1. JAX arrays (traced or
    not) are clamped in their own dtype. Floats and bools are a TypeError naming ``name``: an id is never
    truncated.
    """
    if isinstance(x, jax.Array):
        if not jnp.issubdtype(x.dtype, jnp.integer):
            raise TypeError(f"{name} must be an integer array, got dtype {x.dtype}")
        if x.ndim != 1:
            raise ValueError(f"{name} must have rank 1, got shape {x.shape}")
        if x.dtype == jnp.int32:
            return x
        info = np.iinfo(x.dtype)
        low = max(_INT32_MIN, int(info.min))
        high = min(_INT32_MAX, int(info.max))
        return jnp.clip(x, low, high).astype(jnp.int32)
    return jnp.asarray(as_int32_saturated(x, name))


def host_ids_fit_int32(x: ArrayLike, name: str) -> None:
    """Raises ValueError naming ``name`` when host ids (not a JAX array) lie beyond int32: JAX, without
    x64, would wrap 2³² to 0 and merge that row into group, segment or trajectory 0."""
    if isinstance(x, jax.Array):
        return
    host = np.asarray(x)
    if host.size == 0 or host.dtype.kind not in "iu":
        return
    low, high = int(host.min()), int(host.max())
    if low < _INT32_MIN or high > _INT32_MAX:
        bad = high if high > _INT32_MAX else low
        raise ValueError(f"{name} must hold int32 ids (JAX would wrap them), got {bad}")


def _as_int(x: ArrayLike, name: str) -> jax.Array:
    host_ids_fit_int32(x, name)
    arr = jnp.asarray(x)
    if not jnp.issubdtype(arr.dtype, jnp.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr


JAX: Final = Backend(
    xp=jnp,
    as_float=as_float,
    as_int=_as_int,
    segment_sum=lambda data, ids, n: jax.ops.segment_sum(data, ids, num_segments=n),
    stop_gradient=jax.lax.stop_gradient,
    count_dtype=jnp.int32,
    eager=False,
)
"""The :class:`kernel._namespace.Backend` of the JAX twins: traced values are never range-checked."""
