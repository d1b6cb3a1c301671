"""Token-level datums: ``build_datums`` (+ conversion to ``tinker.Datum``) against tinker-cookbook.

``python -m benchmarks datums [--quick]``. Workloads (tokens = datum positions emitted):

- ``debate``: 144 trajectories (one agent of one debate each), 3 turns, every turn re-rendered from
  scratch (a shared system + question prefix, then a growing transcript): ~3 k observation + ~2 k action
  tokens per trajectory, one datum per turn (432 datums, ~0.7 M positions).
- ``large``: 640 trajectories × 4 re-rendered turns, ~4 k observation + ~4 k action tokens each.
- ``chat``: 144 trajectories × 8 turns where every observation extends the previous turn (one datum per
  trajectory): the prefix-merge path.

Rows: the copy floor (``np.copyto`` of output-sized arrays: two int64, two float32, one bool per
position); ``build_datums`` alone (packed arrays in, packed datums out); ``+ tinker.Datum`` (the same
then :func:`adapters.tinker.convert.datums_to_tinker` as called by default: the batch's arrays lent to the
datums and made read-only; ``copy=True``, a private copy, is measured for its peak alone);
``from SDK samples`` (:func:`adapters.tinker.convert.build_tinker_datums`: ModelInput prompts and
SampledSequences in, ``tinker.Datum`` out, as the peer); and the peer, tinker-cookbook's
``trajectory_to_data`` over every trajectory, measured in the same run. The peer's own input type,
tinker-cookbook ``Trajectory`` objects over the same ModelInput prompts and sampled tokens, is built
outside its timer, as the packed ``Trajectories`` are for the kernel rows; the ``from SDK samples`` row
starts from the same SDK objects as the peer. Without tinker-cookbook a pure-Python re-implementation of
the same algorithm stands in (labelled so). Outputs are checked equal to the peer's before timing.

Peak memory (``peak MiB``) is tracemalloc's peak while one call runs, its result included, measured
apart from the timed calls, plus the result's buffers that torch owns (tracemalloc does not see torch's
allocator).
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tinker
from tinker import types

from adapters.tinker.convert import build_tinker_datums, datums_to_tinker
from benchmarks._common import emit_json, print_table, time_call
from kernel import DatumBatch, Trajectories, build_datums

VOCAB = 151_936


class Workload(NamedTuple):
    name: str
    trajectories: Trajectories
    samples_B: list[list[tuple[tinker.ModelInput, types.SampledSequence]]]


def _pack(turns_B: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]], adv: np.ndarray) -> Trajectories:
    flat = [t for turns in turns_B for t in turns]

    def offsets(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)

    return Trajectories(
        ob_tokens=np.concatenate([t[0] for t in flat]),
        ob_offsets_N1=offsets([t[0] for t in flat]),
        ac_tokens=np.concatenate([t[1] for t in flat]),
        ac_offsets_N1=offsets([t[1] for t in flat]),
        logprobs=np.concatenate([t[2] for t in flat]),
        logprob_offsets_N1=offsets([t[2] for t in flat]),
        has_logprobs_N=np.ones(len(flat), bool),
        traj_ids_N=np.repeat(np.arange(len(turns_B)), [len(t) for t in turns_B]).astype(np.int64),
        advantages_B=adv,
    )


def make_workload(
    name: str, num: int, turns: int, ob_sizes: list[int], ac_size: int, *, merge: bool, seed: int
) -> Workload:
    """Random tokens; re-rendered turns share a 300-token prefix, merged turns extend ob ++ ac."""
    rng = np.random.default_rng(seed)
    system = rng.integers(0, VOCAB, 300)
    turns_B: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
    for _ in range(num):
        question = rng.integers(0, VOCAB, 200)
        traj: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for k in range(turns):
            n_ac = int(rng.integers(ac_size // 2, ac_size * 3 // 2))
            ac = rng.integers(0, VOCAB, n_ac)
            lp = -rng.exponential(0.5, n_ac).astype(np.float32)
            if merge and traj:
                ob = np.concatenate([traj[-1][0], traj[-1][1], rng.integers(0, VOCAB, ob_sizes[k])])
            else:
                body = max(ob_sizes[k] - 500, 1)
                ob = np.concatenate([system, question, rng.integers(0, VOCAB, body)])
            traj.append((ob, ac, lp))
        turns_B.append(traj)
    adv = rng.normal(size=num)
    samples_B = [
        [
            (
                tinker.ModelInput.from_ints(ob.tolist()),
                types.SampledSequence(
                    stop_reason="stop", sequence_id="s", tokens_np=ac.astype(np.int32), logprobs_np=lp
                ),
            )
            for ob, ac, lp in traj
        ]
        for traj in turns_B
    ]
    return Workload(name, _pack(turns_B, adv), samples_B)


# --- the peer ---------------------------------------------------------------------------------------------


def cookbook_peer() -> tuple[str, Any]:
    """tinker-cookbook's ``trajectory_to_data`` over a batch, or a pure-Python stand-in."""
    try:
        from tinker_cookbook.completers import TokensWithLogprobs
        from tinker_cookbook.rl.data_processing import trajectory_to_data
        from tinker_cookbook.rl.types import Trajectory, Transition
    except ImportError:
        return "python re-implementation", (_prepare_python, _run_python)

    def prepare(w: Workload) -> Any:
        trajs = [
            Trajectory(
                transitions=[
                    Transition(
                        ob=ob,
                        ac=TokensWithLogprobs(tokens=s.tokens, maybe_logprobs=s.logprobs),
                        reward=0.0,
                        episode_done=False,
                    )
                    for ob, s in traj
                ],
                final_ob=tinker.ModelInput.empty(),
            )
            for traj in w.samples_B
        ]
        return trajs, w.trajectories.advantages_B.tolist()

    def run(prepared: Any) -> list[tinker.Datum]:
        trajs, adv = prepared
        return [d for t, a in zip(trajs, adv, strict=True) for d in trajectory_to_data(t, a)]

    return "tinker-cookbook 0.5.8", (prepare, run)


def _prepare_python(w: Workload) -> Any:
    return [[(ob.to_ints(), s.tokens, s.logprobs) for ob, s in traj] for traj in w.samples_B], (
        w.trajectories.advantages_B.tolist()
    )


def _run_python(prepared: Any) -> list[tinker.Datum]:
    """The reference algorithm with Python lists, then Datum construction from lists."""
    trajs, advs = prepared
    out: list[tinker.Datum] = []
    for traj, adv in zip(trajs, advs, strict=True):
        x: list[int] = []
        lp: list[float] = []
        av: list[float] = []
        segments = []
        for ob, ac, lps in traj:
            if x and not (len(x) <= len(ob) and ob[: len(x)] == x):
                segments.append((x, lp, av))
                x, lp, av = [], [], []
            delta = ob[len(x) :]
            x = x + delta + ac
            lp = lp + [0.0] * len(delta) + lps
            av = av + [0.0] * len(delta) + [adv] * len(ac)
        if x:
            segments.append((x, lp, av))
        for sx, slp, sav in segments:
            out.append(
                tinker.Datum(
                    model_input=tinker.ModelInput.from_ints(sx[:-1]),
                    loss_fn_inputs={"target_tokens": sx[1:], "logprobs": slp[1:], "advantages": sav[1:]},
                )
            )
    return out


# --- checks and timing ------------------------------------------------------------------------------------


def check_equal(ours: list[tinker.Datum], peer: list[tinker.Datum]) -> None:
    """Raises AssertionError unless both lists hold the same datums (tokens exact, float32 values exact)."""
    assert len(ours) == len(peer), (len(ours), len(peer))
    for a, b in zip(ours, peer, strict=True):
        assert [int(t) for t in a.model_input.to_ints()] == b.model_input.to_ints()
        for key in ("target_tokens", "logprobs", "advantages"):
            x = np.asarray(a.loss_fn_inputs[key].to_numpy(), dtype=np.float64)
            y = np.asarray(b.loss_fn_inputs[key].to_numpy(), dtype=np.float64)
            assert np.array_equal(x, y), key


def copy_floor(batch: DatumBatch) -> Any:
    n = batch.input_tokens.size
    dst = [
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.float32),
        np.empty(n, np.float32),
        np.empty(n, bool),
    ]
    src = [np.ones_like(d) for d in dst]

    def run() -> None:
        for d, s in zip(dst, src, strict=True):
            np.copyto(d, s)

    return run


def _foreign_bytes(data: list[tinker.Datum]) -> int:
    """Bytes of the loss-input buffers that no numpy array owns (torch's), each buffer once."""
    seen: dict[int, int] = {}
    for datum in data:
        for tensor in datum.loss_fn_inputs.values():
            array: Any = tensor.to_numpy()
            while isinstance(array.base, np.ndarray):
                array = array.base
            if array.base is not None:  # a numpy view of a foreign buffer
                seen[id(array.base)] = array.nbytes
    return sum(seen.values())


def peak_bytes(fn: Callable[[], list[tinker.Datum]]) -> int:
    """Peak heap while ``fn`` runs once, its result included; measured apart from the timed calls.

    tracemalloc sees Python objects and numpy buffers but not torch's allocator, so the buffers of the
    result that torch owns are added (the torch temporaries the peer frees along the way are not).
    """
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak + _foreign_bytes(out)


def bench(w: Workload, peer_name: str, peer: Any, repeat: int) -> tuple[list[list[Any]], dict[str, float]]:
    t = w.trajectories
    batch = build_datums(t).datums
    tokens = batch.input_tokens.size
    prepare, run_peer = peer
    prepared = prepare(w)
    peer_out = run_peer(prepared)
    check_equal(datums_to_tinker(batch), peer_out)

    def from_samples() -> list[tinker.Datum]:
        return build_tinker_datums(w.samples_B, t.advantages_B)[0]

    def kernel_tinker() -> list[tinker.Datum]:
        return datums_to_tinker(build_datums(t).datums)

    def kernel_tinker_copy() -> list[tinker.Datum]:
        return datums_to_tinker(build_datums(t).datums, copy=True)

    check_equal(from_samples(), peer_out)
    # Keep the cyclic GC from traversing the benchmark's own inputs (millions of list items) during
    # timed calls: it would charge whichever implementation happens to allocate when it triggers.
    gc.collect()
    gc.freeze()
    times = {
        "copy": time_call(copy_floor(batch), repeat=repeat, min_time=0.05),
        "kernel": time_call(lambda: build_datums(t), repeat=repeat, min_time=0.05),
        "kernel+tinker": time_call(kernel_tinker, repeat=repeat, min_time=0.05),
        "samples->tinker": time_call(from_samples, repeat=repeat, min_time=0.05),
        "peer": time_call(lambda: run_peer(prepared), repeat=max(1, repeat // 2), warmup=0),
    }
    labels = {
        "copy": "copy floor (np.copyto)",
        "kernel": "build_datums",
        "kernel+tinker": "build_datums + tinker.Datum",
        "samples->tinker": "SDK samples -> tinker.Datum",
        "peer": peer_name,
    }
    rows = []
    for key, sec in times.items():
        rows.append(
            [
                labels[key],
                f"{sec * 1e3:.2f}",
                f"{tokens / sec / 1e6:.1f}",
                f"{times['peer'] / sec:.1f}x",
                f"{sec / times['copy']:.2f}x",
            ]
        )
    figures = {f"{w.name}.{k}.mtok_s": round(tokens / s / 1e6, 2) for k, s in times.items()}
    for k in ("kernel", "kernel+tinker", "samples->tinker"):
        figures[f"{w.name}.{k}.vs_peer"] = round(times["peer"] / times[k], 1)
        figures[f"{w.name}.{k}.vs_copy"] = round(times[k] / times["copy"], 2)
    gc.unfreeze()
    calls: dict[str, Callable[[], Any]] = {
        "kernel+tinker": kernel_tinker,
        "samples->tinker": from_samples,
        "peer": lambda: run_peer(prepared),
    }
    peaks = {k: peak_bytes(fn) for k, fn in calls.items()}
    copy_peak = peak_bytes(kernel_tinker_copy)
    figures[f"{w.name}.kernel+tinker_copy.peak_mib"] = round(copy_peak / 2**20, 1)
    figures[f"{w.name}.kernel+tinker_copy.peak_vs_peer"] = round(copy_peak / peaks["peer"], 2)
    for row, key in zip(rows, times, strict=True):
        peak, peer_peak = peaks.get(key), peaks["peer"]
        if peak is None:
            row += ["", ""]
            continue
        row += [f"{peak / 2**20:.0f}", f"{peak / peer_peak:.2f}x"]
        figures[f"{w.name}.{key}.peak_mib"] = round(peak / 2**20, 1)
        figures[f"{w.name}.{key}.peak_vs_peer"] = round(peak / peer_peak, 2)
    figures[f"{w.name}.tokens"] = tokens
    figures[f"{w.name}.datums"] = batch.num_datums
    return rows, figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks datums")
    parser.add_argument("--quick", action="store_true", help="smaller batches, fewer repeats (< 1 min)")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 7
    workloads = [
        make_workload("debate", 144, 3, [600, 1000, 1400], 667, merge=False, seed=0),
        make_workload(
            "large", 64 if args.quick else 640, 4, [700, 900, 1100, 1300], 1000, merge=False, seed=1
        ),
        make_workload("chat", 144, 8, [500, *[100] * 7], 200, merge=True, seed=2),
    ]
    peer_name, peer = cookbook_peer()
    figures: dict[str, Any] = {"peer": peer_name, "quick": args.quick}
    for w in workloads:
        rows, figs = bench(w, peer_name, peer, repeat)
        t = w.trajectories
        title = (
            f"{w.name}: {t.advantages_B.size} trajectories, {t.traj_ids_N.size} transitions, "
            f"{figs[f'{w.name}.datums']} datums, {figs[f'{w.name}.tokens']:,} positions "
            "(outputs checked equal to the peer's)"
        )
        print_table(
            title, ["implementation", "ms", "M tok/s", "vs peer", "vs copy", "peak MiB", "peak vs peer"], rows
        )
        figures.update(figs)
    emit_json(figures)
    return 0
