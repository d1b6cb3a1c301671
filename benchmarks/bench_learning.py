"""Learning on the local service: the default ``debate-kernel train`` run, measured; and batched sampling.

Part 1 runs the run ``debate-kernel train`` makes with no flags (:data:`adapters.cli.train.LOCAL_PRESET`
on the local JAX service; ``--quick``: the tiny model for a few steps) and prints, at the start of RL
(the evaluation after the warm start) and at its end (the last evaluation): parse-success rate,
correctness on the held-out questions with its standard error by question (``eval/correct_se``) and
what RL added (end − start, its standard error from the two), mean pairwise reward against the fixed
opponents (the warm-started policy), beside what no learning scores on those questions (``eval/chance``
and ``eval/majority_baseline``, always the most common training answer), the training debates'
correctness over the first and the last RL steps, the on-policy KL between the sampler's and the
trainer's logprobs of the sampled tokens (the same weights must give the same numbers: ~0), the
evaluation curve, and where the time went: the wall time with the machine's load average at the start
and the end (a shared machine's wall time is inflated), the process's CPU time, the warm-start steps,
RL steps and evaluations (``time/*`` of the metrics) and JAX's compilation (tracing, lowering and
compiling, summed from ``jax.monitoring``; it overlaps the three; near zero with a warm persistent
cache, ``DEBATE_KERNEL_JAX_CACHE=""`` turns that off).

Part 2 times batched sampling against its peer, the same requests one by one on the same service:
``concurrency`` concurrent ``sample()`` calls (one per debate, as rollouts make them) gathered into
batched calls vs each awaited before the next is submitted; both draw the same tokens.

``python -m benchmarks learning [--quick] [--out RUN_DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import emit_json, print_table

_QUICK = {
    "warm_start_steps": 2,
    "steps": 2,
    "batch_size": 2,
    "eval_every": 1,
    "eval_questions": 2,
    "max_tokens": 32,
}


def _mean(values: list[Any]) -> float:
    xs = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return float(np.mean(xs)) if xs else math.nan


def _learning(quick: bool, out: str | None) -> dict[str, Any]:
    import jax.monitoring

    from adapters.cli.train import LOCAL_PRESET
    from adapters.local import LocalServiceClient, split_cpu
    from adapters.local.devices import compilation_cache
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    compiling = {"s": 0.0, "programs": 0, "cache_hits": 0}

    def on_duration(event: str, duration_secs: float, **_: str | int) -> None:
        if event.startswith("/jax/core/compile/"):  # trace, lower to MLIR, backend compile (or cache load)
            compiling["s"] += duration_secs
            compiling["programs"] += event.endswith("backend_compile_duration")
        compiling["cache_hits"] += event == "/jax/compilation_cache/cache_retrieval_time_sec"

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    split_cpu()  # as the CLI does (no effect where JAX already ran in this process)
    run_dir = out or tempfile.mkdtemp(prefix="bench-learning-")
    values = {**LOCAL_PRESET, **(_QUICK if quick else {}), "out": run_dir}
    config = TrainConfig.from_mapping(values)
    compilation_cache(0.5)  # as the CLI does (its persistent cache; DEBATE_KERNEL_JAX_CACHE="" turns it off)
    service = LocalServiceClient(seed=config.seed, root=Path(run_dir) / "service")
    load_start = os.getloadavg()
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    result = asyncio.run(run_training(config, service))
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - cpu0
    load_end = os.getloadavg()
    records = result.metrics
    evals = [r for r in records if isinstance(r.get("eval/correct"), float)]
    rl = [r for r in records if r.get("phase") == "rl"]
    k = max(1, min(5, len(rl) // 2))  # windows of 5 RL steps at most (480 turns in the default run)
    start, end = (evals[0], evals[-1]) if evals else ({}, {})
    figures: dict[str, Any] = {
        "run_dir": run_dir,
        "wall_s": wall,
        "cpu_s": cpu,
        "compile_s": compiling["s"],
        "compiled_programs": compiling["programs"] - compiling["cache_hits"],
        "cached_programs": compiling["cache_hits"],
        "eval_s": sum(_num(r.get("time/eval")) for r in records),
        "warm_start_s": sum(
            _num(r.get("time/total")) - _num(r.get("time/eval")) for r in records if r.get("phase") != "rl"
        ),
        "rl_s": sum(
            _num(r.get("time/total")) - _num(r.get("time/eval")) for r in records if r.get("phase") == "rl"
        ),
        "load_avg_start": list(load_start),
        "load_avg_end": list(load_end),
        "dataset": config.dataset,
        "eval_split": config.eval_split,
        "warm_start_steps": config.warm_start_steps,
        "rl_steps": config.steps,
        "start_step": start.get("step"),
        "end_step": end.get("step"),
        "kl_sample_train_max": max(
            (abs(r["optim/kl_sample_train_v1"]) for r in rl if _finite(r.get("optim/kl_sample_train_v1"))),
            default=math.nan,
        ),
        "train_correct_first": _mean([r.get("env/all/correct") for r in rl[:k]]),
        "train_correct_last": _mean([r.get("env/all/correct") for r in rl[-k:]]),
    }
    for key in ("parse_ok", "correct", "correct_se", "pairwise_reward", "chance", "majority_baseline"):
        figures[f"eval_{key}_start"] = start.get(f"eval/{key}", math.nan)
        figures[f"eval_{key}_end"] = end.get(f"eval/{key}", math.nan)
    figures["rl_lift"] = figures["eval_correct_end"] - figures["eval_correct_start"]
    figures["rl_lift_se"] = math.hypot(figures["eval_correct_se_start"], figures["eval_correct_se_end"])
    figures["eval_curve"] = [
        [r["step"], r["eval/correct"], r.get("eval/parse_ok"), r.get("eval/pairwise_reward")] for r in evals
    ]
    return figures


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _num(v: Any) -> float:
    return float(v) if _finite(v) else 0.0


def _cpu_s() -> float:
    """User + system CPU seconds of this process so far (the in-process service's threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _batching(quick: bool) -> dict[str, float]:
    import jax
    from tinker import types

    from adapters.local import LocalServiceClient

    concurrency, max_tokens = (8, 32) if quick else (16, 128)
    rng = np.random.default_rng(0)
    prompts = [
        types.ModelInput.from_ints(rng.integers(32, 127, int(rng.integers(900, 1300))).tolist())
        for _ in range(concurrency)
    ]
    params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0)

    async def sampler() -> Any:
        trainer = await LocalServiceClient(seed=0).create_lora_training_client("tiny", rank=8)
        return await trainer.save_weights_and_get_sampling_client()

    async def batched(s: Any) -> list[Any]:
        return list(await asyncio.gather(*(s.sample(p, 1, params) for p in prompts)))

    async def one_by_one(s: Any) -> list[Any]:
        return [await s.sample(p, 1, params) for p in prompts]

    def timed(kind: Any) -> tuple[float, list[list[int]]]:
        s = asyncio.run(sampler())  # a fresh sampler: the same request counters, so the same draws
        asyncio.run(kind(s))  # warm-up (compiles)
        s = asyncio.run(sampler())
        t0 = time.perf_counter()
        out = asyncio.run(kind(s))
        jax.effects_barrier()
        return time.perf_counter() - t0, [r.sequences[0].tokens for r in out]

    best_b, best_s = math.inf, math.inf
    same = True
    for _ in range(2 if quick else 3):  # interleaved rounds, best of each
        tb, tokens_b = timed(batched)
        ts, tokens_s = timed(one_by_one)
        best_b, best_s = min(best_b, tb), min(best_s, ts)
        same = same and tokens_b == tokens_s
    tokens = concurrency * max_tokens
    return {
        "concurrency": float(concurrency),
        "batched_s": best_b,
        "one_by_one_s": best_s,
        "batched_speedup": best_s / best_b,
        "batched_tok_s": tokens / best_b,
        "same_tokens": float(same),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks learning")
    parser.add_argument("--quick", action="store_true", help="the tiny model for a few steps")
    parser.add_argument("--out", help="the run directory (default: a fresh temporary folder)")
    parser.add_argument("--skip-batching", action="store_true", help="only the learning run")
    args = parser.parse_args(argv)
    figures = _learning(args.quick, args.out)
    print_table(
        f"Learning: the default run ({figures['dataset']}, {figures['eval_split']:.0%} held out; "
        "fixed-opponent evaluation at the start and the end of RL)",
        ["figure", "start of RL", "end of RL"],
        [
            ["step", figures["start_step"], figures["end_step"]],
            ["eval parse-success", figures["eval_parse_ok_start"], figures["eval_parse_ok_end"]],
            ["eval correct (held out)", figures["eval_correct_start"], figures["eval_correct_end"]],
            [
                "  standard error (by question)",
                figures["eval_correct_se_start"],
                figures["eval_correct_se_end"],
            ],
            ["  chance", figures["eval_chance_start"], figures["eval_chance_end"]],
            [
                "  majority-answer baseline",
                figures["eval_majority_baseline_start"],
                figures["eval_majority_baseline_end"],
            ],
            [
                "eval pairwise reward",
                figures["eval_pairwise_reward_start"],
                figures["eval_pairwise_reward_end"],
            ],
            [
                "train correct (first/last steps)",
                figures["train_correct_first"],
                figures["train_correct_last"],
            ],
        ],
    )
    print_table(
        "Evaluation curve",
        ["step", "correct", "parse_ok", "pairwise"],
        [[s, c, p, w] for s, c, p, w in figures["eval_curve"]],
    )
    print(
        f"\nRL's lift of held-out correctness: {figures['rl_lift']:+.3f} ± {figures['rl_lift_se']:.3f} (s.e.)"
    )
    print(f"on-policy KL(sampler ‖ trainer), max over RL steps: {figures['kl_sample_train_max']:.3e}")
    load = "; load average (1, 5, 15 min) {} at the start, {} at the end".format(
        *(", ".join(f"{x:.2f}" for x in figures[k]) for k in ("load_avg_start", "load_avg_end"))
    )
    print(f"wall time: {figures['wall_s']:.1f} s on {os.cpu_count()} CPUs{load} ({figures['run_dir']})")
    print(
        "time: warm start {warm_start_s:.1f} s, RL {rl_s:.1f} s, evaluations {eval_s:.1f} s; JAX compiling "
        "{compile_s:.1f} s ({compiled_programs} programs compiled, {cached_programs} from the persistent "
        "cache; within the three); CPU {cpu_s:.1f} s".format(**figures)
    )
    if not args.skip_batching:
        b = _batching(args.quick)
        print_table(
            "Sampling: concurrent sample() calls batched vs one by one (same service, same tokens)",
            ["requests", "batched s", "one-by-one s", "speedup", "same tokens"],
            [
                [
                    int(b["concurrency"]),
                    b["batched_s"],
                    b["one_by_one_s"],
                    b["batched_speedup"],
                    bool(b["same_tokens"]),
                ]
            ],
        )
        figures.update({f"sampling_{k}": v for k, v in b.items()})
    emit_json(figures)
    return 0
