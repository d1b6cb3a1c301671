"""Argument checks shared by the JAX twins (the numpy ones live in :mod:`kernel._checks`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

__all__: list[str] = []


def as_float(x: ArrayLike, name: str) -> jax.Array:
    """Converts ``x`` to a JAX float array (bools and ints become float32); raises naming ``name``."""
    arr = jnp.asarray(x)
    if arr.dtype == jnp.bool_ or jnp.issubdtype(arr.dtype, jnp.integer):
        arr = arr.astype(jnp.float32)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        raise TypeError(f"{name} must be a real float array, got dtype {arr.dtype}")
    return arr
