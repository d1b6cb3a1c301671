"""Grouped advantages (GRPO, σ-normalised): numpy and jitted JAX against verl's two algorithms.

``python -m benchmarks advantages [--quick]``. Workloads, rows group-major as the reward step emits
them, float32 rewards, int32 group ids:

- ``ragged``: 1,000,000 rows in 250,000 groups of 1 to 8 rows (mean 4);
- ``blocks``: 65,536 groups of 16 rows (1,048,576 rows).

Every contender computes verl's estimator, A = (r − μ_g)/(σ_g + 1e-6) with Bessel σ and a group of one
giving r/(1 + 1e-6); ours and the vectorized form floor σ² at 1e-6 as verl's vectorized form does (the
loop does not; its output is checked against ours without the floor):

- ``numpy``: :func:`kernel.grouped_advantages` (``scale="group", singleton="raw", var_floor=1e-6``;
  float64 inside, exact zeros on constant groups, NaN / mask handling);
- ``jax (jit)``: :func:`kernel.jax.grouped_advantages`, same options, float32, compile time reported
  apart;
- ``torch vectorized``: verl's vectorized form re-written here in torch (``index_add_`` counts, sums
  and sums of squares, variance floored at 1e-6, ``group_mean_std`` semantics), 1 thread; its int64
  index is built outside the timer (verl's ``as_torch_index`` and group count, a cast and a max,
  would add about 0.35 ms), while ours converts and validates its int32 ids inside;
- ``python loop``: verl / DrMAS ``compute_grpo_outcome_advantage`` re-written here: a dict of lists per
  index, ``torch.mean`` / ``torch.std`` per group, then a per-row update (timed on a subset of rows
  with ``--quick``; rows/s are reported either way).

Outputs are checked against numpy before timing (the vectorized form on groups with σ² ≥ 1e-3: below
that its float32 Σr² − (Σr)²/n is off by percents, a documented quirk of the reference). Ratios are
against the torch vectorized form measured in the same run. Without torch only numpy and JAX are timed.

Heap state. glibc returns the top of its heap to the kernel whenever more than twice its mmap
threshold is free, and raises that threshold to the largest mmapped block freed so far (at most
32 MiB). A call whose temporaries exceed twice the threshold therefore page-faults all of them in
again on every call: on the development VM about 2 µs per 4 KiB page, 12-15 ms for the 40 MB of
float64 temporaries of a 1 M-row numpy call, more than its arithmetic. Which state a process is in
depends on what it freed before (it used to make the first workload here run at half the speed of
the second). A training process has long since freed large blocks, so before timing this benchmark
allocates and frees one untouched 32 MiB block, which puts every contender in that steady state
(torch's float32 temporaries stay under the threshold either way). ``--cold-heap`` skips this.

On the 2-core development machine (shared, so ±30 %), steady heap: numpy 85-92 M rows/s on ragged
groups (1.0-1.05× the torch form, which runs float32 where we run float64 plus validation and NaN /
mask / constant-group handling; three row-order bincounts bound it) and 125-139 M rows/s on blocks
(1.55-1.75×: equal contiguous groups are reduced column by column, without gathers); JAX 93-137 M
rows/s (1.15-1.6×); verl's loop 0.05-0.09 M rows/s. Cold heap, numpy: 40 M rows/s on ragged groups
(0.47×), 77 M on blocks (0.96×).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from benchmarks._common import emit_json, print_table, time_call, time_compile
from kernel import grouped_advantages

EPS = 1e-6
_STEADY_HEAP_BLOCK = (32 << 20) - (64 << 10)  # just under glibc's 32 MiB cap on its mmap threshold


class Workload(NamedTuple):
    name: str
    rewards: np.ndarray  # [N] float32
    group_ids: np.ndarray  # [N] int32, group-major
    num_groups: int


def _ragged(rng: np.random.Generator, rows: int, groups: int) -> Workload:
    sizes = rng.integers(1, 8, groups)  # 1..7, mean 4
    excess = int(sizes.sum()) - rows
    while excess:  # nudge random groups (within 1..8) until the total is exact
        pick = rng.integers(0, groups, abs(excess))
        step = -1 if excess > 0 else 1
        ok = (sizes[pick] + step >= 1) & (sizes[pick] + step <= 8)
        np.add.at(sizes, np.unique(pick[ok]), step)
        excess = int(sizes.sum()) - rows
    ids = np.repeat(np.arange(groups, dtype=np.int32), sizes)
    return Workload("ragged", _rewards(rng, rows), ids, groups)


def _blocks(rng: np.random.Generator, groups: int, size: int) -> Workload:
    ids = np.repeat(np.arange(groups, dtype=np.int32), size)
    return Workload("blocks", _rewards(rng, groups * size), ids, groups)


def _rewards(rng: np.random.Generator, n: int) -> np.ndarray:
    """Win-rate-like rewards: multiples of 1/8 in [0, 1] (many constant groups) plus some noise."""
    r = rng.integers(0, 9, n) / 8.0
    noisy = rng.random(n) < 0.3
    r[noisy] += rng.normal(0.0, 0.05, int(noisy.sum()))
    return r.astype(np.float32)


def _numpy(w: Workload, var_floor: float = EPS) -> np.ndarray:
    out = grouped_advantages(
        w.rewards, w.group_ids, w.num_groups, scale="group", eps=EPS, singleton="raw", var_floor=var_floor
    )
    return out.advantages


def _jax_fn(w: Workload) -> tuple[Any, tuple[Any, Any]] | None:
    try:
        import jax
        import jax.numpy as jnp

        from kernel.jax import grouped_advantages as jax_grouped
    except ImportError:
        return None

    def fn(r: Any, g: Any) -> Any:
        out = jax_grouped(r, g, w.num_groups, scale="group", eps=EPS, singleton="raw", var_floor=EPS)
        return out.advantages

    return jax.jit(fn), (jnp.asarray(w.rewards), jnp.asarray(w.group_ids))


def _torch_vectorized(scores: Any, index: Any, num_groups: int) -> Any:
    """verl's vectorized GRPO (scatter form), written for this benchmark."""
    import torch

    ones = torch.ones_like(scores)
    count = torch.zeros(num_groups).index_add_(0, index, ones)
    total = torch.zeros(num_groups).index_add_(0, index, scores)
    squares = torch.zeros(num_groups).index_add_(0, index, scores * scores)
    safe = count.clamp_min(1.0)
    mean = total / safe
    var = (squares - total * total / safe) / (count - 1.0).clamp_min(1.0)
    std = torch.sqrt(torch.clamp(var, min=EPS))
    single = count <= 1.0
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return (scores - mean[index]) / (std[index] + EPS)


def _python_loop(scores: Any, index: np.ndarray) -> Any:
    """verl / DrMAS per-row loop: dict of lists per index, torch.mean / torch.std per group."""
    import torch

    scores = scores.clone()
    by_index: dict[Any, list[Any]] = defaultdict(list)
    means: dict[Any, Any] = {}
    stds: dict[Any, Any] = {}
    for i in range(scores.shape[0]):
        by_index[index[i]].append(scores[i])
    for key, items in by_index.items():
        if len(items) == 1:
            means[key], stds[key] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            stacked = torch.stack(items)
            means[key], stds[key] = torch.mean(stacked), torch.std(stacked)
    for i in range(scores.shape[0]):
        scores[i] = (scores[i] - means[index[i]]) / (stds[index[i]] + EPS)
    return scores


def _subset(w: Workload, rows: int) -> Workload:
    """The first whole groups covering about ``rows`` rows (group-major layout)."""
    cut = int(np.searchsorted(w.group_ids, w.group_ids[min(rows, w.group_ids.size - 1)]))
    return Workload(w.name, w.rewards[:cut], w.group_ids[:cut], int(w.group_ids[cut - 1]) + 1)


def _check(name: str, got: Any, want: np.ndarray, tol: float, rows: np.ndarray | None = None) -> float:
    """Max |Δ| against numpy over ``rows`` (default all); raises above ``tol``."""
    delta = np.abs(np.asarray(got, dtype=np.float64) - want)
    if rows is not None:
        delta = delta[rows]
    diff = float(delta.max()) if delta.size else 0.0
    if not diff <= tol:
        raise AssertionError(f"{name} disagrees with numpy: max |Δ| = {diff:.3g}")
    return diff


def _well_conditioned(w: Workload) -> np.ndarray:
    """Rows of groups whose float32 Σr² − (Σr)²/n is accurate (σ² ≥ 1e-3 or a group of one)."""
    x = w.rewards.astype(np.float64)
    n = np.bincount(w.group_ids, minlength=w.num_groups)
    mean = np.bincount(w.group_ids, x, minlength=w.num_groups) / np.maximum(n, 1)
    m2 = np.bincount(w.group_ids, (x - mean[w.group_ids]) ** 2, minlength=w.num_groups)
    ok = (n == 1) | (m2 / np.maximum(n - 1, 1) >= 1e-3)
    return np.asarray(ok[w.group_ids])


def run(w: Workload, quick: bool) -> dict[str, Any]:
    n = w.rewards.shape[0]
    repeat = 7 if quick else 21
    want = _numpy(w).astype(np.float64)
    out: dict[str, Any] = {"rows": n, "groups": w.num_groups}
    rows: list[list[Any]] = []

    t_np = time_call(lambda: _numpy(w), repeat=repeat)
    out["numpy_rows_per_s"] = n / t_np
    rows.append(["numpy", n, t_np * 1e3, n / t_np / 1e6, "", ""])

    jax_fn = _jax_fn(w)
    if jax_fn is not None:
        fn, args = jax_fn
        out["jax_compile_s"] = time_compile(lambda: fn(*args))
        out["jax_max_abs_diff"] = _check("jax", fn(*args), want, 1e-3)
        t_jax = time_call(lambda: fn(*args), repeat=repeat)
        out["jax_rows_per_s"] = n / t_jax
        rows.append(
            ["jax (jit)", n, t_jax * 1e3, n / t_jax / 1e6, "", f"compile {out['jax_compile_s']:.2f} s"]
        )

    try:
        import torch
    except ImportError:
        torch = None  # type: ignore[assignment]
    if torch is not None:
        torch.set_num_threads(1)
        scores = torch.from_numpy(w.rewards)
        index = torch.from_numpy(w.group_ids.astype(np.int64))
        vec = _torch_vectorized(scores, index, w.num_groups)
        out["torch_vectorized_max_abs_diff"] = _check("torch", vec, want, 2e-3, _well_conditioned(w))
        t_vec = time_call(lambda: _torch_vectorized(scores, index, w.num_groups), repeat=repeat)
        out["torch_vectorized_rows_per_s"] = n / t_vec

        loop_w = _subset(w, 20_000) if quick else w
        loop_scores = torch.from_numpy(loop_w.rewards)
        start = time.perf_counter()
        loop_out = _python_loop(loop_scores, loop_w.group_ids)
        t_loop = time.perf_counter() - start
        _check("python loop", loop_out, _numpy(loop_w, var_floor=0.0), 2e-3)
        out["python_loop_rows"] = int(loop_w.rewards.shape[0])
        out["python_loop_rows_per_s"] = loop_w.rewards.shape[0] / t_loop

        rows.append(["torch vectorized", n, t_vec * 1e3, n / t_vec / 1e6, "1.00", "1 thread"])
        loop_rate = out["python_loop_rows_per_s"]
        note = f"on {out['python_loop_rows']:,} rows" if quick else ""
        rows.append(["python loop", loop_w.rewards.shape[0], t_loop * 1e3, loop_rate / 1e6, "", note])
        for row in rows:
            rate = row[3] * 1e6
            row[4] = f"{rate / out['torch_vectorized_rows_per_s']:.2f}"
        out["numpy_vs_torch_vectorized"] = out["numpy_rows_per_s"] / out["torch_vectorized_rows_per_s"]
        out["numpy_vs_python_loop"] = out["numpy_rows_per_s"] / loop_rate
        if "jax_rows_per_s" in out:
            out["jax_vs_torch_vectorized"] = out["jax_rows_per_s"] / out["torch_vectorized_rows_per_s"]
            out["jax_vs_python_loop"] = out["jax_rows_per_s"] / loop_rate
    print_table(
        f"{w.name}: {n:,} rows in {w.num_groups:,} groups",
        ["contender", "rows", "ms", "M rows/s", "× torch vec", "note"],
        rows,
    )
    return out


def _steady_heap() -> None:
    """Raises glibc's mmap and trim thresholds as a long-running process has (module docstring): one
    block is allocated and freed without a page of it being touched."""
    np.empty(_STEADY_HEAP_BLOCK, np.uint8)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks advantages")
    parser.add_argument("--quick", action="store_true", help="fewer repeats; the Python loop on 20 k rows")
    parser.add_argument(
        "--cold-heap", action="store_true", help="leave the allocator as this process found it (docstring)"
    )
    args = parser.parse_args(argv)
    if not args.cold_heap:
        _steady_heap()
    rng = np.random.default_rng(0)
    workloads = [_ragged(rng, 1_000_000, 250_000), _blocks(rng, 65_536, 16)]
    figures: dict[str, Any] = {
        "benchmark": "advantages",
        "quick": args.quick,
        "steady_heap": not args.cold_heap,
    }
    for w in workloads:
        for key, value in run(w, args.quick).items():
            figures[f"{w.name}.{key}"] = float(f"{value:.4g}") if isinstance(value, float) else value
    emit_json(figures)
    return 0
