"""Rollout driver overhead on the fake service: kernel share, asyncio share, and the latency bound.

``python -m benchmarks rollouts [--quick]``. Workload: 64 self-play debates × 4 agents × 3 rounds on
:class:`adapters.tinker.fake.FakeServiceClient` (the scripted policy, no consensus so every debate runs
all 12 turns).

1. Zero latency: the whole batch under :func:`adapters.tinker.rollouts.run_debates`, against its peers
   measured in the same run: the fake service alone (every sample call of the batch, replayed
   synchronously) and the kernel alone (observation, prompt rendering, parse and ``submit`` of every
   turn, replayed synchronously). asyncio share = driver − service − kernel.
2. Injected latency (50 ms per sample; ``--quick``: 5 ms): batch time against the critical-path bound of
   the waits (12 sequential turns × latency, every debate running concurrently), and against that bound
   plus the zero-latency batch time (debates advance in waves, and each wave's CPU work runs on one
   core between two waits).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from adapters.tinker.fake import FakePolicy, FakeServiceClient
from adapters.tinker.faults import FaultPlan, with_faults
from adapters.tinker.protocol import SamplingClient
from adapters.tinker.renderers import ByteRenderer
from adapters.tinker.rollouts import DebateResult, RolloutConfig, run_debates, self_play
from benchmarks._common import emit_json, print_table
from kernel import build_observation, initial_state, parse_response, submit


async def _sampler(latency: float = 0.0) -> SamplingClient:
    """The fake's sampler; with ``latency``, every answer arrives that many seconds after the request."""
    service, _ = with_faults(
        FakeServiceClient(seed=0, policy=FakePolicy(yes_rate=0.0)), FaultPlan(latency={"sample": latency})
    )
    tc = await service.create_lora_training_client("fake", 8)
    return await tc.save_weights_and_get_sampling_client()


def _batch(
    sampler: SamplingClient, questions: list[str], config: RolloutConfig
) -> tuple[float, list[DebateResult]]:
    specs = self_play(questions, sampler, num_agents=config.num_agents)
    start = time.perf_counter()
    batch = asyncio.run(run_debates(specs, ByteRenderer(), config=config))
    return time.perf_counter() - start, list(batch.results)


def _service_only(sampler: SamplingClient, results: list[DebateResult], config: RolloutConfig) -> float:
    params = config.sampling_params(ByteRenderer().stop_sequences())
    prompts = [t.prompt for r in results for t in r.turns]

    async def run() -> float:
        start = time.perf_counter()
        for p in prompts:
            await sampler.sample(p, 1, params)
        return time.perf_counter() - start

    return asyncio.run(run())


def _kernel_only(results: list[DebateResult], config: RolloutConfig) -> float:
    renderer = ByteRenderer()
    start = time.perf_counter()
    for r in results:
        state = initial_state(r.spec.question, num_agents=config.num_agents, max_rounds=config.max_rounds)
        for t in r.turns:
            obs = build_observation(state, t.agent_id, config=config.observation)
            renderer.build_prompt(obs.messages)
            parsed = parse_response(renderer.text(t.sequence.tokens), author_id=t.agent_id)
            state = submit(state, t.agent_id, parsed).state
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks rollouts")
    ap.add_argument("--quick", action="store_true", help="small sizes and 5 ms latency (CI smoke)")
    args = ap.parse_args(argv)
    debates, latency, repeat = (16, 0.005, 1) if args.quick else (64, 0.05, 3)
    config = RolloutConfig(num_agents=4, max_rounds=3, max_concurrent=debates, sample_timeout=None)
    questions = [f"What is {k} + {k + 1}?" for k in range(debates)]
    sampler = asyncio.run(_sampler())
    _batch(sampler, questions, config)  # warm-up
    best = min((_batch(sampler, questions, config) for _ in range(repeat)), key=lambda x: x[0])
    total, results = best
    turns = sum(len(r.turns) for r in results)
    service = min(_service_only(sampler, results, config) for _ in range(repeat))
    kernel = min(_kernel_only(results, config) for _ in range(repeat))
    rest = max(total - service - kernel, 0.0)
    print_table(
        f"Zero latency: {debates} debates x 4 agents x 3 rounds = {turns} turns",
        ["part", "seconds", "us / turn", "share"],
        [
            ["driver total", total, 1e6 * total / turns, 1.0],
            ["fake service", service, 1e6 * service / turns, service / total],
            ["kernel", kernel, 1e6 * kernel / turns, kernel / total],
            ["asyncio + driver", rest, 1e6 * rest / turns, rest / total],
        ],
    )
    slow = asyncio.run(_sampler(latency))
    timed, slow_results = min((_batch(slow, questions, config) for _ in range(repeat)), key=lambda x: x[0])
    longest = max(len(r.turns) for r in slow_results)
    bound = longest * latency
    # debates advance in waves: every wave's CPU (all debates' turns, one core) adds to the waits
    cpu_bound = bound + total
    print_table(
        f"Injected latency {1e3 * latency:.0f} ms per sample",
        ["batch s", "waits bound s", "ratio", "waits + CPU s", "ratio"],
        [[timed, bound, timed / bound, cpu_bound, timed / cpu_bound]],
    )
    emit_json(
        {
            "benchmark": "rollouts",
            "turns": turns,
            "us_per_turn": 1e6 * total / turns,
            "kernel_share": kernel / total,
            "service_share": service / total,
            "asyncio_share": rest / total,
            "latency_s": latency,
            "latency_ratio_to_bound": timed / bound,
            "latency_ratio_to_bound_plus_cpu": timed / cpu_bound,
        }
    )
    return 0
