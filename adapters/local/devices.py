"""Where a training call runs: JAX's CPU backend split into devices, and a call's rows split among the
default backend's devices (data-parallel: weights and gradients replicated, rows sharded)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["CPU_DEVICES", "compilation_cache", "split_cpu"]

CPU_DEVICES = 2
"""CPU devices :func:`split_cpu` makes by default (at most one per core): measured on 2 cores, where a
training step on two devices took 0.75-0.85 of its time on one; other counts are not measured."""


def compilation_cache(min_compile_seconds: float) -> str | None:
    """Turns on JAX's persistent compilation cache, as ``debate-kernel train`` and ``serve`` have it:
    ``DEBATE_KERNEL_JAX_CACHE`` names the folder (an empty value turns it off), else
    ``$XDG_CACHE_HOME/debate-kernel/jax`` (or ``~/.cache/…``); programs that took at least
    ``min_compile_seconds`` to compile are kept. Never fails: returns the folder, or None when off.

    Examples:
        >>> from unittest import mock
        >>> with mock.patch.dict("os.environ", {"DEBATE_KERNEL_JAX_CACHE": ""}):
        ...     compilation_cache(0.5) is None
        True
    """
    folder = os.environ.get("DEBATE_KERNEL_JAX_CACHE")
    if folder is None:
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(root, "debate-kernel", "jax")
    if not folder:
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", folder)  # type: ignore[no-untyped-call]
        seconds = "jax_persistent_cache_min_compile_time_secs"
        jax.config.update(seconds, min_compile_seconds)  # type: ignore[no-untyped-call]
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)  # type: ignore[no-untyped-call]
    except (OSError, AttributeError, ValueError):
        return None
    return folder


def split_cpu(devices: int | None = None) -> bool:
    """Splits JAX's CPU backend into ``devices`` devices (default ``min(CPU_DEVICES, cores)``), so that
    training calls on CPU run data-parallel (:func:`row_mesh`); sampling stays on one device.

    Must run before JAX's first computation in the process (JAX's ``jax_num_cpu_devices`` rule);
    ``debate-kernel train`` calls it. Returns whether it took effect: False when JAX is already running
    (nothing changes then). Other backends (a GPU) are not affected.

    Raises:
        ValueError: if ``devices`` is not an int >= 1.

    Examples:
        >>> split_cpu(0)
        Traceback (most recent call last):
        ValueError: devices must be an int >= 1, got 0
    """
    if devices is None:
        devices = max(1, min(CPU_DEVICES, os.cpu_count() or 1))
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be an int >= 1, got {devices!r}")
    try:
        jax.config.update("jax_num_cpu_devices", devices)  # type: ignore[no-untyped-call]
    except RuntimeError:  # JAX's backends are initialized already
        return False
    return True


def row_mesh() -> Mesh | None:
    """The devices a training call splits its rows among: every device of JAX's default backend, or
    None when there is one (the call then runs as a plain ``jit``).

    Several GPUs, or several CPU devices (``jax.config.update("jax_num_cpu_devices", n)`` before JAX's
    first use; ``debate-kernel train`` does this), train data-parallel: each device computes its rows'
    gradients and they are summed across devices. The sum's rounding depends on the device count, so
    runs are reproducible for a given count, and equal across counts up to float rounding.
    """
    devices = jax.devices()
    return None if len(devices) == 1 else _mesh_of(tuple(devices))


_ROWS = P("rows")  # type: ignore[no-untyped-call]  # split along the first (row) axis
_WHOLE = P()  # type: ignore[no-untyped-call]  # replicated on every device


@cache
def _mesh_of(devices: tuple[jax.Device, ...]) -> Mesh:
    return Mesh(np.array(devices), ("rows",))


def replicated(mesh: Mesh | None, tree: Any) -> Any:
    """``tree`` (weights, gradients) on every device of ``mesh``; as it is when there is no mesh."""
    return tree if mesh is None else jax.device_put(tree, NamedSharding(mesh, _WHOLE))


def rows_on(mesh: Mesh | None, arrays: tuple[np.ndarray, ...]) -> tuple[jax.Array, ...]:
    """Row arrays [B, T] as JAX arrays, split by rows over ``mesh`` (B padded with rows of mask False,
    which add nothing to the loss or the gradients, to a multiple of the device count)."""
    if mesh is None:
        return tuple(jnp.asarray(x) for x in arrays)
    pad = -arrays[0].shape[0] % mesh.size
    if pad:
        arrays = tuple(np.concatenate([x, np.zeros((pad, *x.shape[1:]), x.dtype)]) for x in arrays)
    return tuple(jax.device_put(arrays, NamedSharding(mesh, _ROWS)))
