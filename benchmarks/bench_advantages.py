"""Grouped advantages (GRPO, σ-normalised): ours against verl's vectorized GRPO, CPU time, 1 thread.

``python -m benchmarks advantages [--quick] [--heap steady|cold|both]``. Workloads, rows group-major
as the reward step emits them, float32 rewards, int32 group ids:

- ``ragged``: 1,000,000 rows in 250,000 groups of 1 to 8 rows (mean 4);
- ``blocks``: 65,536 groups of 16 rows (1,048,576 rows).

Every contender computes verl's estimator, A = (r − μ_g)/(σ_g + 1e-6), σ_g = √max(var_g, 1e-6) with
Bessel's var_g, and a group of one giving r/(1 + 1e-6) (the loop has no variance floor):

- ``numpy``: :func:`kernel.grouped_advantages` (``scale="group", singleton="raw", var_floor=1e-6``,
  exact arithmetic: float64 inside, exact zeros on constant groups, ids validated, NaN / mask
  handling);
- ``numpy preset verl_grpo_vectorized.norm`` / ``verl_grpo.norm``: our bit-exact reproductions of
  verl's vectorized form and of its loop (:func:`kernel.advantages_from_preset`);
- ``jax (jit)``: :func:`kernel.jax.grouped_advantages`, same options, float32, compile time apart;
- ``torch vectorized`` (the peer, ratio 1): verl's ``compute_grpo_vectorized_outcome_advantage``
  with its ``as_torch_index`` and ``group_mean_std``, transcribed formula for formula for 1-D scores
  (verl is not installed here; nothing of it is imported): the int64 index built from the ids
  (verl's integer path: a cast), the group count from ``torch.max``, counts, sums and sums of
  squares by ``index_add_``, the floored variance, singletons set to μ = 0, σ = 1 by a mask, then
  (s − μ[g])/(σ[g] + ε). All of it is inside the timer, as all of ours is;
- ``python loop``: verl / DrMAS ``compute_grpo_outcome_advantage`` transcribed (a dict of lists
  per index, ``torch.mean`` / ``torch.std`` per group, a per-row update), on a subset with
  ``--quick``.

Outputs are checked against numpy before timing (the vectorized form on groups with σ² ≥ 1e-3:
below that its float32 Σr² − (Σr)²/n is off by percents, a quirk of the reference; our
``verl_grpo_vectorized.norm`` preset reproduces it, and its largest difference from the peer is
printed).

Timing: CPU time of this process (``time.process_time``), so every thread a contender runs counts;
torch is set to 1 thread. Contenders run in interleaved rounds, best round each, and ratios are
against the peer measured in the same rounds.

Heap state. glibc returns the top of its heap to the kernel whenever more than its trim threshold is
free, and raises that threshold (and the mmap threshold) as large mmapped blocks are freed. In a
fresh process the row-sized temporaries of a 1 M-row call are therefore mapped and page-faulted on
every call; in a process that has already freed a large block (a training process) they are reused.
``--heap steady`` (one untouched 32 MiB block allocated and freed first) measures the second state,
``--heap cold`` the first; the default, ``both``, runs each in its own child process and prints both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from benchmarks._common import emit_json, print_table, single_thread, time_compile, time_cpu_rounds
from kernel import advantages_from_preset, grouped_advantages

EPS = 1e-6
_STEADY_HEAP_BLOCK = (32 << 20) - (64 << 10)  # just under glibc's 32 MiB cap on its mmap threshold
PEER = "torch vectorized (verl)"


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


def _preset(name: str, w: Workload) -> Callable[[], np.ndarray]:
    return lambda: advantages_from_preset(name, w.rewards, w.group_ids, w.num_groups).advantages


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


def verl_vectorized(rewards: np.ndarray, uid: np.ndarray) -> Any:
    """verl's vectorized GRPO on 1-D scores, transcribed for this benchmark (module docstring)."""
    import torch

    scores = torch.from_numpy(rewards)
    # as_torch_index, integer labels: a cast to int64.
    index = torch.from_numpy(np.asarray(uid).reshape(-1).astype(np.int64, copy=False))
    # group_mean_std
    num_groups = int(torch.max(index).item()) + 1
    ones = torch.ones_like(scores, dtype=torch.float32)
    count = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, index, ones)
    s1 = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, index, scores)
    s2 = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, index, scores * scores)
    mean = s1 / count.clamp_min(1.0)
    var = (s2 - (s1 * s1) / count.clamp_min(1.0)) / (count - 1.0).clamp_min(1.0)
    std = torch.sqrt(torch.clamp(var, min=EPS))
    single = count <= 1.0
    if torch.any(single):
        mean = mean.clone()
        std = std.clone()
        mean[single] = 0.0
        std[single] = 1.0
    return (scores - mean[index]) / (std[index] + EPS)


def verl_loop(rewards: np.ndarray, index: np.ndarray) -> Any:
    """verl / DrMAS per-row loop: dict of lists per index, torch.mean / torch.std per group."""
    import torch

    scores = torch.from_numpy(rewards).clone()
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


def _max_diff(got: Any, want: np.ndarray, rows: np.ndarray | None = None) -> float:
    delta = np.abs(np.asarray(got, dtype=np.float64) - want)
    if rows is not None:
        delta = delta[rows]
    return float(delta.max()) if delta.size else 0.0


def _check(name: str, got: Any, want: np.ndarray, tol: float, rows: np.ndarray | None = None) -> float:
    """Max |Δ| against ``want`` over ``rows`` (default all); raises above ``tol``."""
    diff = _max_diff(got, want, rows)
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
    want = _numpy(w).astype(np.float64)
    out: dict[str, Any] = {"rows": n, "groups": w.num_groups}
    contenders: dict[str, Callable[[], Any]] = {"numpy": lambda: _numpy(w)}
    notes: dict[str, str] = {}
    for preset in ("verl_grpo_vectorized.norm", "verl_grpo.norm"):
        fn = _preset(preset, w)
        _check(preset, fn(), want, 2e-3, _well_conditioned(w))
        contenders[f"numpy preset {preset}"] = fn
    jax_fn = _jax_fn(w)
    if jax_fn is not None:
        jitted, args = jax_fn
        out["jax_compile_s"] = time_compile(lambda: jitted(*args))
        out["jax_max_abs_diff"] = _check("jax", jitted(*args), want, 1e-3)
        contenders["jax (jit)"] = lambda: jitted(*args)
        notes["jax (jit)"] = f"compile {out['jax_compile_s']:.2f} s"
    try:
        import torch  # noqa: F401
    except ImportError:
        has_torch = False
    else:
        has_torch = True
    if has_torch:
        peer = verl_vectorized(w.rewards, w.group_ids)
        out["peer_max_abs_diff"] = _check("torch", peer, want, 2e-3, _well_conditioned(w))
        vec_preset = contenders["numpy preset verl_grpo_vectorized.norm"]()
        out["preset_vectorized_vs_peer_max_abs_diff"] = _max_diff(vec_preset, peer.numpy().astype(np.float64))
        contenders[PEER] = lambda: verl_vectorized(w.rewards, w.group_ids)
        notes[PEER] = "1 thread; ratio 1"
        notes["numpy preset verl_grpo_vectorized.norm"] = (
            f"max |Δ| vs peer {out['preset_vectorized_vs_peer_max_abs_diff']:.1e}"
        )

    seconds = time_cpu_rounds(contenders, rounds=7 if quick else 21)
    rows: list[list[Any]] = []
    for name, s in seconds.items():
        ratio = seconds[PEER] / s if PEER in seconds else float("nan")
        rows.append([name, n, s * 1e3, n / s / 1e6, f"{ratio:.2f}", notes.get(name, "")])
        key = name.replace(" ", "_").replace("(", "").replace(")", "")
        out[f"{key}_rows_per_s"] = n / s
        if PEER in seconds:
            out[f"{key}_vs_peer"] = ratio

    if has_torch:
        loop_w = _subset(w, 20_000) if quick else w
        start = time.process_time()  # one run: it takes seconds
        loop_out = verl_loop(loop_w.rewards, loop_w.group_ids)
        loop_s = time.process_time() - start
        _check("python loop", loop_out, _numpy(loop_w, var_floor=0.0), 2e-3)
        loop_rows = loop_w.rewards.shape[0]
        rate = loop_rows / loop_s
        out["python_loop_rows"] = loop_rows
        out["python_loop_rows_per_s"] = rate
        note = f"on {loop_rows:,} rows" if quick else ""
        ratio = rate * seconds[PEER] / n
        rows.append(["verl python loop", loop_rows, loop_s * 1e3, rate / 1e6, f"{ratio:.3f}", note])
    print_table(
        f"{w.name}: {n:,} rows in {w.num_groups:,} groups (CPU ms per call, best of interleaved rounds)",
        ["contender", "rows", "CPU ms", "M rows/s", "× peer", "note"],
        rows,
    )
    return out


def _steady_heap() -> None:
    """Raises glibc's mmap and trim thresholds as a long-running process has (module docstring): one
    block is allocated and freed without a page of it being touched."""
    np.empty(_STEADY_HEAP_BLOCK, np.uint8)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks advantages")
    parser.add_argument("--quick", action="store_true", help="fewer rounds; the Python loop on 20 k rows")
    parser.add_argument(
        "--heap",
        choices=("steady", "cold", "both"),
        default="both",
        help="allocator state (module docstring); both: each in a child process",
    )
    parser.add_argument("--cold-heap", action="store_true", help="same as --heap cold")
    args = parser.parse_args(argv)
    heap = "cold" if args.cold_heap else args.heap
    if heap == "both":
        for state in ("steady", "cold"):
            print(f"\n=== heap: {state} ===", flush=True)
            command = [sys.executable, "-m", "benchmarks", "advantages", "--heap", state]
            rc = subprocess.run([*command, *(["--quick"] if args.quick else [])], check=False).returncode
            if rc:
                return rc
        return 0
    if heap == "steady":
        _steady_heap()
    threads = single_thread()
    rng = np.random.default_rng(0)
    workloads = [_ragged(rng, 1_000_000, 250_000), _blocks(rng, 65_536, 16)]
    figures: dict[str, Any] = {
        "benchmark": "advantages",
        "quick": args.quick,
        "heap": heap,
        "timer": "process_time",
        "threads": threads,
    }
    for w in workloads:
        for key, value in run(w, args.quick).items():
            figures[f"{w.name}.{key}"] = float(f"{value:.4g}") if isinstance(value, float) else value
    emit_json(figures)
    return 0
