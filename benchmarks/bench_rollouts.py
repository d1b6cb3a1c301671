"""Rollout driver overhead on the fake service: against a plain loop, kernel share, and the latency bound.

``python -m benchmarks rollouts [--quick]``. Workload: 64 self-play debates × 4 agents × 3 rounds on
:class:`adapters.tinker.fake.FakeServiceClient` (the scripted policy, no consensus so every debate runs
all 12 turns).

1. Zero latency: the whole batch under :func:`adapters.training.rollouts.run_debates`, against its peer
   measured in the same run (interleaved rounds, best of each): a plain synchronous loop doing the same
   work debate after debate with no asyncio (observation, prompt, sample, text, parse, ``submit``).
   Driver overhead = driver / loop − 1. The loop's time splits into the fake service (every sample call
   replayed) and the kernel (observation, rendering, parse and ``submit`` replayed).
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
from adapters.training.rollouts import DebateResult, RolloutConfig, run_debates, self_play
from benchmarks._common import emit_json, print_table
from kernel import build_observation, current_agent, initial_state, parse_response, submit


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


def _sync_loop(sampler: SamplingClient, questions: list[str], config: RolloutConfig) -> float:
    """The same debates without asyncio: the fake answers at once (``CompletedFuture.result()``)."""
    renderer = ByteRenderer()
    params = config.sampling_params(renderer.stop_sequences())
    start = time.perf_counter()
    for q in questions:
        state = initial_state(q, num_agents=config.num_agents, max_rounds=config.max_rounds)
        while (agent := current_agent(state)) is not None:
            prompt = renderer.build_prompt(
                build_observation(state, agent, config=config.observation).messages
            )
            seq = sampler.sample(prompt, 1, params).result().sequences[0]  # type: ignore[attr-defined]
            parsed = parse_response(renderer.text(seq.tokens), author_id=agent)
            state = submit(state, agent, parsed).state
    return time.perf_counter() - start


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
    runs = [
        (_batch(sampler, questions, config), _sync_loop(sampler, questions, config)) for _ in range(repeat)
    ]
    total, results = min((r[0] for r in runs), key=lambda x: x[0])
    loop = min(r[1] for r in runs)
    turns = sum(len(r.turns) for r in results)
    service = min(_service_only(sampler, results, config) for _ in range(repeat))
    kernel = min(_kernel_only(results, config) for _ in range(repeat))
    print_table(
        f"Zero latency: {debates} debates x 4 agents x 3 rounds = {turns} turns",
        ["part", "seconds", "us / turn", "vs sync loop"],
        [
            ["run_debates (asyncio)", total, 1e6 * total / turns, total / loop],
            ["sync loop (peer)", loop, 1e6 * loop / turns, 1.0],
            ["  fake service", service, 1e6 * service / turns, service / loop],
            ["  kernel", kernel, 1e6 * kernel / turns, kernel / loop],
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
            "driver_over_sync_loop": total / loop,
            "kernel_share_of_loop": kernel / loop,
            "service_share_of_loop": service / loop,
            "latency_s": latency,
            "latency_ratio_to_bound": timed / bound,
            "latency_ratio_to_bound_plus_cpu": timed / cpu_bound,
        }
    )
    return 0
