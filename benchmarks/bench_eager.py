"""Eager calls of the JAX twins against the same calls under the caller's ``jax.jit``.

A notebook calls ``kernel.jax`` functions eagerly. Their control flow (the advantages' layout and range
``lax.cond``s, Bradley–Terry's ``lax.while_loop``, RAE's SPIRAL ``lax.scan``) is jitted inside the
kernel, so that an eager call after the first of a shape runs one compiled program and the array ops
around it; before, those primitives took closures made afresh on each call and were traced and compiled
again every time. Per function: best-of eager call time, the same call jitted whole by the caller (the
peer: the least an eager call can cost), and their ratio. ``--quick``: fewer repeats.

Measured 2026-11-29, CPU, the 2-core machine, quiet (best of 20; "before": the kernel without its own
jit, best of 5), eager ms / the caller's jit ms:

- grouped_advantages, 4,096 rows in blocks of 8: before 568 / 0.08, after 0.18 / 0.10
- grouped_advantages, 4,096 ragged rows: before 571 / 0.09, after 0.14 / 0.04
- bradley_terry_rewards, 60 votes of 4 agents: before 106 / 0.12, after 7.7 / 0.06 (the array ops around
  the loop, run one by one, are the rest)
- rae_advantages spiral, 256 rows: before 50 / 0.03, after 0.93 / 0.04
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._common import emit_json, print_table, time_call


def calls() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name → (eager call, the same call under one ``jax.jit``), on fixed inputs."""
    import jax
    import jax.numpy as jnp

    import kernel.jax as kj
    from kernel import vote_arrays

    rng = np.random.default_rng(0)
    rewards = jnp.asarray(rng.standard_normal(4096), jnp.float32)
    ids = jnp.asarray(np.repeat(np.arange(512), 8), jnp.int32)
    ragged = jnp.asarray(rng.integers(0, 512, 4096), jnp.int32)
    winners = rng.integers(0, 4, 60)
    losers = (winners + 1 + rng.integers(0, 3, 60)) % 4
    votes = vote_arrays(
        [0] * 60, rng.integers(0, 4, 60).tolist(), winners.tolist(), [">"] * 60, losers.tolist()
    )
    x, keys = (
        jnp.asarray(rng.standard_normal(256), jnp.float32),
        jnp.asarray(rng.integers(0, 8, 256), jnp.int32),
    )
    base = jnp.zeros(8, jnp.float32)

    def adv(r: Any, g: Any) -> Any:
        return kj.grouped_advantages(r, g, 512).advantages

    def bt(v: Any) -> Any:
        return kj.bradley_terry_rewards(v, jnp.array([4]), max_agents=4, num_rows=4).rewards_PG

    def spiral(r: Any, k: Any, b: Any) -> Any:
        return kj.rae_advantages(r, k, b, decay=0.9, order="spiral").advantages

    jit_adv, jit_bt, jit_spiral = jax.jit(adv), jax.jit(bt), jax.jit(spiral)
    return {
        "grouped_advantages, 4,096 rows in blocks of 8": (
            lambda: adv(rewards, ids),
            lambda: jit_adv(rewards, ids),
        ),
        "grouped_advantages, 4,096 ragged rows": (
            lambda: adv(rewards, ragged),
            lambda: jit_adv(rewards, ragged),
        ),
        "bradley_terry_rewards, 60 votes of 4 agents": (lambda: bt(votes), lambda: jit_bt(votes)),
        "rae_advantages spiral, 256 rows": (lambda: spiral(x, keys, base), lambda: jit_spiral(x, keys, base)),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks eager", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else 20
    figures: dict[str, Any] = {"benchmark": "eager", "quick": args.quick}
    rows = []
    for name, (eager, jitted) in calls().items():
        eager_s = time_call(eager, repeat=repeat, warmup=1)
        jit_s = time_call(jitted, repeat=repeat, warmup=1)
        rows.append([name, eager_s * 1e3, jit_s * 1e3, eager_s / jit_s])
        figures[f"{name} eager ms"], figures[f"{name} jit ms"] = eager_s * 1e3, jit_s * 1e3
    print_table(
        "eager call vs the same call jitted whole (best of each)",
        ["call", "eager ms", "jit ms", "eager / jit"],
        rows,
    )
    emit_json(figures)
    return 0
