"""Eager calls of the JAX twins compile once a shape: a second call with new values compiles nothing.

Their control flow (``lax.cond``, ``lax.while_loop``, ``lax.scan``) takes closures made afresh on each
call, which an eager call used to trace and compile again every time (``grouped_advantages`` on 4,096
rows: 665 ms a call; now the cores are jitted inside the kernel)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import monitoring  # noqa: E402

import kernel.jax as kj  # noqa: E402
from kernel import vote_arrays  # noqa: E402

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
"""JAX's monitoring event of one XLA compilation (``jax._src.dispatch.BACKEND_COMPILE_EVENT``)."""


@contextmanager
def compilations() -> Iterator[list[str]]:
    seen: list[str] = []

    def listener(event: str, seconds: float, **kwargs: Any) -> None:
        if event == COMPILE_EVENT:
            seen.append(str(kwargs.get("fun_name", "")))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        monitoring.unregister_event_duration_listener(listener)


def _rewards(seed: int, n: int) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).standard_normal(n), jnp.float32)


def _votes(seed: int) -> Any:
    winners = np.random.default_rng(seed).integers(0, 2, 6)
    return vote_arrays([0] * 6, [-1] * 6, winners.tolist(), [">"] * 6, (1 - winners).tolist())


CALLS: dict[str, Callable[[int], Any]] = {
    "advantages, blocks": lambda s: kj.grouped_advantages(_rewards(s, 64), jnp.repeat(jnp.arange(8), 8), 8),
    "advantages, ragged": lambda s: kj.grouped_advantages(
        _rewards(s, 10), jnp.array([0, 1, 0, 2, 2, 1, 0, 3, 3, 3]), 4, scale="group"
    ),
    "advantages, trajectories": lambda s: kj.grouped_advantages(
        _rewards(s, 6), jnp.array([0, 0, 0, 1, 1, 1]), 2, trajectory_ids_PG=jnp.array([0, 0, 1, 0, 1, 1])
    ),
    "bradley_terry": lambda s: kj.bradley_terry_rewards(_votes(s), [2]),
    "rae spiral": lambda s: kj.rae_advantages(
        _rewards(s, 5), [0, 1, 0, 1, 0], [0.5, 0.0], decay=0.5, order="spiral"
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_second_eager_call_compiles_nothing(name: str) -> None:
    call = CALLS[name]
    first = jax.block_until_ready(call(0))
    with compilations() as seen:
        second = jax.block_until_ready(call(1))
    assert seen == [], f"{name}: the second call compiled {seen}"
    assert jax.tree_util.tree_structure(first) == jax.tree_util.tree_structure(second)
