"""Rollouts over the fake service: modes, end reasons, faults, concurrency, cancellation, transcripts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tinker import types

from adapters.pipeline import score
from adapters.tinker.convert import trajectories_from_samples
from adapters.tinker.fake import FakePolicy, FakeSamplingClient, FakeServiceClient
from adapters.tinker.faults import Fault, FaultPlan, SimulatedCrash, with_faults
from adapters.tinker.protocol import Future, SamplingClient
from adapters.tinker.renderers import ByteRenderer
from adapters.training.rollouts import (
    END_REASONS,
    DebateResult,
    RolloutConfig,
    RolloutsCancelled,
    fixed_opponents,
    run_debates,
    self_play,
    transcript_lines,
    turn_arrays,
)
from adapters.transcripts import dumps_debate, read_transcripts
from kernel import Message
from tests._profile import examples

T = TypeVar("T")
RENDERER = ByteRenderer()
QUESTIONS = [f"What is {a} + {b}?" for a, b in [(1, 2), (3, 4), (10, 5), (7, 7), (2, 9), (6, 1)]]
CONFIG = RolloutConfig(num_agents=3, max_rounds=2, max_concurrent=4, sample_timeout=0.05)
PIPELINE_END = {
    "consensus": "consensus",
    "max_rounds": "max_rounds",
    "parse_failure": "parse_error",
    "sampler_error": "open",
    "sampler_timeout": "open",
    "sampler_cancelled": "open",
    "cancelled": "open",
}


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` and checks that no task outlived it."""

    async def main() -> T:
        try:
            return await coro
        finally:
            current = asyncio.current_task()
            assert [t for t in asyncio.all_tasks() if t is not current] == []

    return asyncio.run(main())


async def _sampler(service: Any, *, seed_steps: int = 0) -> SamplingClient:
    tc = await service.create_lora_training_client("fake", 4)
    return await tc.save_weights_and_get_sampling_client()  # type: ignore[no-any-return]


def _check_ended(result: DebateResult) -> None:
    assert result.state.done and result.end_reason in END_REASONS
    assert result.state.consensus == (result.end_reason == "consensus")
    assert result.state.parse_failed == (result.end_reason == "parse_failure")
    if result.end_reason.startswith("sampler") or result.end_reason == "cancelled":
        assert result.state.abort_reason == result.end_reason
    # the turns are the accepted responses, plus the failed one that ended the debate
    accepted = [t for t in result.turns if t.parsed.ok]
    assert len(accepted) == result.state.turn
    assert [t.agent_id for t in result.turns] == [
        k % result.state.num_agents for k in range(len(result.turns))
    ]


def test_self_play_rolls_out_trains_and_scores() -> None:
    async def main() -> None:
        sampler = await _sampler(FakeServiceClient(seed=4))
        specs = self_play(QUESTIONS, sampler, num_agents=3, answers=["3", "7", "15", "14", "11", "7"])
        batch = await run_debates(specs, RENDERER, config=CONFIG, policy_version=7)
        assert len(batch.results) == len(QUESTIONS) and sum(batch.end_counts.values()) == len(QUESTIONS)
        assert set(batch.end_counts) <= {"consensus", "max_rounds"}
        for k, result in enumerate(batch.results):
            _check_ended(result)
            assert result.index == k and result.policy_version == 7
            assert all(t.by_policy and t.parsed.ok for t in result.turns)
            assert result.step_rewards_G == (0.0, 0.0, 0.0)
        # trajectories for training: one per (debate, agent)
        samples = [r.transitions(a) for r in batch.results for a in range(3)]
        packed = trajectories_from_samples(samples, np.zeros(len(samples)))
        total = sum(len(t.sequence.tokens) for r in batch.results for t in r.turns)
        traj = packed.trajectories
        assert traj.ac_tokens.shape == (total,) and traj.logprobs.shape == (total,)
        assert bool(traj.has_logprobs_N.all()) and traj.advantages_B.shape == (len(samples),)
        # transcripts: written with their policy version, read back and scored by the offline pipeline
        lines = "\n".join(dumps_debate(r.to_transcript()) for r in batch.results)
        read = read_transcripts(lines)
        assert read.errors == () and len(read.debates) == len(QUESTIONS)
        assert all(d.meta["policy_version"] == 7 for d in read.debates)
        # observation tokens: a read-only view of the prompt's ids, written and read back as the same ids
        for result, debate in zip(batch.results, read.debates, strict=True):
            for turn, back, live in zip(
                result.to_transcript().turns, debate.turns, result.turns, strict=True
            ):
                assert turn.observation_tokens is not None and back.observation_tokens is not None
                assert list(turn.observation_tokens) == live.prompt.to_ints() == list(back.observation_tokens)
                assert not np.asarray(turn.observation_tokens).flags.writeable
        scored = score(read.debates)
        assert scored.errors == ()
        assert [rd.end for rd in scored.replayed] == [PIPELINE_END[r.end_reason] for r in batch.results]
        assert [rd.state.turn for rd in scored.replayed] == [r.state.turn for r in batch.results]

    run(main())


def test_fixed_opponents_put_the_policy_in_each_role() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=1)
        policy = await _sampler(service)
        opponent = await service.create_sampling_client(base_model="other")
        specs = fixed_opponents(QUESTIONS[:2], policy, opponent, num_agents=3)
        assert [s.policy_roles for s in specs] == [(0,), (1,), (2,)] * 2 and [s.group for s in specs] == [
            0
        ] * 3 + [1] * 3
        for s in specs:
            assert [x is policy for x in s.samplers] == [r in s.policy_roles for r in range(3)]
        batch = await run_debates(specs, RENDERER, config=CONFIG, policy_version=2)
        for spec, result in zip(specs, batch.results, strict=True):
            assert all(t.by_policy == (t.agent_id in spec.policy_roles) for t in result.turns)
        with pytest.raises(ValueError, match="opponents must be one sampler or N - 1"):
            fixed_opponents(QUESTIONS[:1], policy, [opponent, opponent, opponent], num_agents=3)

    run(main())


def test_parse_failure_ends_the_debate_with_minus_one() -> None:
    async def main() -> None:
        service = FakeServiceClient(policy=FakePolicy(malformed_rate=1.0))
        specs = self_play(QUESTIONS[:3], await _sampler(service), num_agents=3)
        batch = await run_debates(specs, RENDERER, config=CONFIG)
        for result in batch.results:
            _check_ended(result)
            assert result.end_reason == "parse_failure" and result.detail == "missing_solution"
            assert len(result.turns) == 1 and result.step_rewards_G == (-1.0, 0.0, 0.0)

    run(main())


def test_service_failures_end_only_their_debate() -> None:
    plan = FaultPlan(
        at={
            ("sample", 0): Fault("error"),
            ("sample", 1): Fault("hang"),
            ("sample", 2): Fault("cancel"),
            ("sample", 3): Fault("delay", delay=0.01),
        }
    )

    async def main() -> None:
        service, faults = with_faults(FakeServiceClient(seed=2), plan)
        specs = self_play(QUESTIONS, await _sampler(service), num_agents=3)
        # The first samples are the first turns of debates 0..3, in order. The deadline is far longer than
        # any stall of a loaded machine (the delayed and the cancelled replies arrive well within it); once
        # every other debate has ended, the test moves the loop's clock past it, so the hung sample meets
        # its deadline at once, whatever the load.
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()
        seen: list[int] = []

        def on_result(result: DebateResult) -> None:
            seen.append(result.index)
            if len(seen) == len(QUESTIONS) - 1:
                ended.set()

        async def expire() -> None:
            await ended.wait()
            real = loop.time
            loop.time = lambda: real() + 60.0  # type: ignore[method-assign]

        config = RolloutConfig(max_rounds=2, sample_timeout=30.0)
        clock = asyncio.ensure_future(expire())
        try:
            async with asyncio.timeout(120):  # a bound for a broken run only (a hang never timed out)
                batch = await run_debates(specs, RENDERER, config=config, on_result=on_result)
        finally:
            clock.cancel()
            await asyncio.gather(clock, return_exceptions=True)
            vars(loop).pop("time", None)  # the loop's own clock again
        assert seen[-1] == 1  # the hung debate ended last, on the moved clock
        reasons = [r.end_reason for r in batch.results]
        assert reasons[:3] == ["sampler_error", "sampler_timeout", "sampler_cancelled"]
        assert all(r in ("consensus", "max_rounds") for r in reasons[3:])
        assert "InjectedError" in batch.results[0].detail
        for r in batch.results:
            _check_ended(r)
        # the first three ended before any turn: lines without turns that say why, nothing else lost
        assert [len(r.turns) for r in batch.results[:3]] == [0, 0, 0]
        assert batch.results[0].to_transcript().meta["end_reason"] == "sampler_error"
        read = read_transcripts("\n".join(transcript_lines(batch.results)))
        assert [(e.reason, e.debate_id) for e in read.errors] == [("no_turns", s.id) for s in specs[:3]]
        assert [d.id for d in read.debates] == [s.id for s in specs[3:]]
        assert score(read.debates).errors == ()
        assert len(faults.injected) == 4

    run(main())


class _Probe:
    """A sampler wrapper that measures in-flight samples overall and per debate (by prompt question)."""

    def __init__(self, inner: SamplingClient) -> None:
        self.inner = inner
        self.in_flight: dict[str, int] = {}
        self.max_total = 0
        self.max_per_debate = 0

    def sample(
        self, prompt: Any, num_samples: int, params: types.SamplingParams
    ) -> Future[types.SampleResponse]:
        text = RENDERER.text(prompt.to_ints())
        key = text.split("Question:\n", 1)[1].split("\n", 1)[0]

        async def go() -> types.SampleResponse:
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
            self.max_total = max(self.max_total, sum(self.in_flight.values()))
            self.max_per_debate = max(self.max_per_debate, self.in_flight[key])
            try:
                await asyncio.sleep(0.001)
                return await self.inner.sample(prompt, num_samples, params)
            finally:
                self.in_flight[key] -= 1

        from adapters.futures import AwaitableFuture

        return AwaitableFuture(go())

    def compute_logprobs(self, prompt: Any) -> Future[list[float | None]]:
        return self.inner.compute_logprobs(prompt)


def test_concurrency_limit_and_one_agent_at_a_time() -> None:
    async def main() -> None:
        probe = _Probe(await _sampler(FakeServiceClient(seed=3)))
        specs = self_play(QUESTIONS, probe, num_agents=3)
        await run_debates(specs, RENDERER, config=RolloutConfig(max_rounds=2, max_concurrent=2))
        assert probe.max_total == 2 and probe.max_per_debate == 1

    run(main())


def test_cancellation_keeps_finished_debates_and_leaks_no_task() -> None:
    # debate 0 hangs forever (no timeout); the others finish; then the batch is cancelled
    plan = FaultPlan(at={("sample", 0): Fault("hang")})
    seen: list[int] = []

    async def main() -> None:
        service, _ = with_faults(FakeServiceClient(seed=5), plan)
        specs = self_play(QUESTIONS, await _sampler(service), num_agents=3)
        config = RolloutConfig(max_rounds=2, sample_timeout=None, max_concurrent=3)
        task = asyncio.ensure_future(
            run_debates(specs, RENDERER, config=config, on_result=lambda r: seen.append(r.index))
        )
        while len(seen) < len(QUESTIONS) - 1:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(RolloutsCancelled) as info:
            await task
        assert [r.index for r in info.value.finished] == list(range(1, len(QUESTIONS)))
        assert [r.index for r in info.value.interrupted] == [0]
        assert info.value.interrupted[0].end_reason == "cancelled"
        for r in (*info.value.finished, *info.value.interrupted):
            _check_ended(r)

    run(main())


def test_a_crash_propagates_unwrapped_and_ends_every_debate() -> None:
    plan = FaultPlan(at={("sample", 5): Fault("crash")}, seed=1, rates={"delay": 1.0}, max_delay=0.002)

    async def main() -> None:
        service, _ = with_faults(FakeServiceClient(seed=6), plan)
        specs = self_play(QUESTIONS, await _sampler(service), num_agents=3)
        with pytest.raises(SimulatedCrash):
            await run_debates(specs, RENDERER, config=CONFIG)

    run(main())


def test_presets() -> None:
    from adapters.training.rollouts import ROLLOUT_PRESETS
    from kernel import ObservationConfig

    ref = ROLLOUT_PRESETS["reference"]
    assert (ref.num_agents, ref.max_rounds, ref.parse_policy) == (3, 3, "reference")
    assert ref.observation == ObservationConfig.REFERENCE and ROLLOUT_PRESETS["default"] == RolloutConfig()


def test_config_and_spec_validation() -> None:
    with pytest.raises(ValueError, match="max_concurrent must be >= 1"):
        RolloutConfig(max_concurrent=0)
    with pytest.raises(TypeError, match="num_agents must be an int"):
        RolloutConfig(num_agents=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="parse_policy"):
        RolloutConfig(parse_policy="strict")  # type: ignore[arg-type]
    sampler = FakeSamplingClient(FakeServiceClient()._new_client(_state()).state)
    with pytest.raises(ValueError, match="samplers must hold N = 3"):
        run(run_debates(self_play(QUESTIONS[:1], sampler, num_agents=2), RENDERER, config=CONFIG))
    with pytest.raises(ValueError, match="answers must have one entry per question"):
        self_play(QUESTIONS, sampler, num_agents=3, answers=["1"])


def _state() -> Any:
    from adapters.tinker.fake import initial_model_state

    return initial_model_state("fake", 1, 0)


_FAULT_RATES = st.fixed_dictionaries(
    {},
    optional={
        "error": st.floats(0, 0.2),
        "hang": st.floats(0, 0.1),
        "cancel": st.floats(0, 0.1),
        "delay": st.floats(0, 0.5),
    },
)


@settings(max_examples=examples(30))
@given(
    seed=st.integers(0, 2**16),
    rates=_FAULT_RATES,
    malformed=st.sampled_from([0.0, 0.1]),
    limit=st.integers(1, 4),
    n=st.integers(1, 3),
    rounds=st.integers(1, 3),
)
def test_every_debate_ends_under_random_faults(
    seed: int, rates: dict[str, float], malformed: float, limit: int, n: int, rounds: int
) -> None:
    plan = FaultPlan(seed=seed, rates=rates, max_delay=0.002)
    config = RolloutConfig(num_agents=n, max_rounds=rounds, max_concurrent=limit, sample_timeout=0.01)

    async def main() -> None:
        service, faults = with_faults(
            FakeServiceClient(seed=seed, policy=FakePolicy(malformed_rate=malformed)), plan
        )
        specs = self_play(QUESTIONS[:4], await _sampler(service), num_agents=n)
        batch = await run_debates(specs, RENDERER, config=config)
        assert len(batch.results) == 4
        for r in batch.results:
            _check_ended(r)
        ends = [r.end_reason for r in batch.results]
        kinds = [f.kind for _, _, f in faults.injected]
        assert ends.count("sampler_error") <= kinds.count("error")
        assert ends.count("sampler_cancelled") <= kinds.count("cancel")
        # a hang always times out; a delay or a cancel may too, on a machine slow enough
        slow = (
            kinds.count("hang")
            + kinds.count("delay")
            + kinds.count("cancel")
            - ends.count("sampler_cancelled")
        )
        assert ends.count("sampler_timeout") <= slow

    run(main())


@settings(max_examples=examples(20))
@given(seed=st.integers(0, 2**16), wait=st.integers(0, 40))
@example(seed=0, wait=1)  # cancelled after the tasks were created, before any of them ran
@example(seed=0, wait=0)  # cancelled before run_debates itself ran
def test_cancellation_at_any_moment_keeps_what_finished(seed: int, wait: int) -> None:
    plan = FaultPlan(seed=seed, rates={"delay": 0.7, "error": 0.05}, max_delay=0.002)
    seen: list[DebateResult] = []

    async def main() -> None:
        service, _ = with_faults(FakeServiceClient(seed=seed), plan)
        specs = self_play(QUESTIONS, await _sampler(service), num_agents=3)
        task = asyncio.ensure_future(run_debates(specs, RENDERER, config=CONFIG, on_result=seen.append))
        for _ in range(wait):
            await asyncio.sleep(0)
        task.cancel()
        try:
            batch = await task
        except RolloutsCancelled as e:
            finished, interrupted = e.finished, e.interrupted
        except asyncio.CancelledError:  # cancelled before run_debates began: nothing ran
            assert wait == 0 and seen == []
            return
        else:
            finished, interrupted = batch.results, ()
        assert sorted(r.index for r in seen) == [r.index for r in finished]
        assert sorted(r.index for r in (*finished, *interrupted)) == list(range(len(QUESTIONS)))
        assert all(r.end_reason != "cancelled" for r in finished)
        assert all(r.end_reason == "cancelled" for r in interrupted)
        for r in (*finished, *interrupted):
            _check_ended(r)

    run(main())


def test_results_have_short_reprs() -> None:
    async def main() -> None:
        specs = self_play(QUESTIONS[:2], await _sampler(FakeServiceClient()), num_agents=3)
        batch = await run_debates(specs, RENDERER, config=CONFIG)
        assert repr(batch).startswith("RolloutBatch(2 debates, end_counts=")
        assert repr(batch.results[0]).startswith("DebateResult(index=0, id='q0', turns=")

    run(main())


_CTRL_C_SCRIPT = """
import asyncio, signal, sys
# Ctrl-C as on a terminal, even where the test runs in a background job, whose children inherit an
# ignored SIGINT (asyncio.run then installs no handler, and the signal would be lost)
signal.signal(signal.SIGINT, signal.default_int_handler)
from adapters.tinker.fake import FakeServiceClient
from adapters.tinker.faults import Fault, FaultPlan, with_faults
from adapters.tinker.renderers import ByteRenderer
from adapters.training.rollouts import RolloutConfig, RolloutsCancelled, run_debates, self_play

async def main():
    service, _ = with_faults(FakeServiceClient(), FaultPlan(at={("sample", 0): Fault("hang")}))
    tc = await service.create_lora_training_client("fake", 4)
    sampler = await tc.save_weights_and_get_sampling_client()
    specs = self_play([f"What is {k} + 1?" for k in range(4)], sampler, num_agents=2)
    done = []
    def finished(result):
        done.append(result)
        if len(done) == 3:
            print("ready", flush=True)
    try:
        await run_debates(specs, ByteRenderer(), config=RolloutConfig(num_agents=2, sample_timeout=None),
                          on_result=finished)
    except RolloutsCancelled as e:
        print("kept", [r.index for r in e.finished], [r.index for r in e.interrupted], flush=True)
        raise
    print("not interrupted", flush=True)

try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_stops_cleanly_and_keeps_finished_debates(tmp_path: Any) -> None:
    import signal
    import subprocess
    import sys

    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "kept [1, 2, 3] [0]" in out and "KeyboardInterrupt" in out


class _NoLogprobs:
    """A sampler that returns the fake's tokens without logprobs (some samplers do)."""

    def __init__(self, inner: SamplingClient) -> None:
        self.inner = inner

    def sample(
        self, prompt: Any, num_samples: int, params: types.SamplingParams
    ) -> Future[types.SampleResponse]:
        from adapters.futures import AwaitableFuture

        async def go() -> types.SampleResponse:
            response = await self.inner.sample(prompt, num_samples, params)
            return types.SampleResponse(
                [
                    types.SampledSequence(s.stop_reason, s.sequence_id, tokens_np=s.tokens_np)
                    for s in response.sequences
                ]
            )

        return AwaitableFuture(go())

    def compute_logprobs(self, prompt: Any) -> Future[list[float | None]]:
        return self.inner.compute_logprobs(prompt)


def test_transcripts_without_logprobs_carry_text_only() -> None:
    async def main() -> None:
        sampler = _NoLogprobs(await _sampler(FakeServiceClient(seed=8)))
        batch = await run_debates(self_play(QUESTIONS[:2], sampler, num_agents=3), RENDERER, config=CONFIG)
        read = read_transcripts("\n".join(transcript_lines(batch.results)))
        assert read.errors == () and all(not t.has_tokens for d in read.debates for t in d.turns)
        assert score(read.debates).errors == ()

    run(main())


class _OddSampler:
    """A sampler whose one sequence holds the given tokens and logprobs."""

    def __init__(self, tokens: list[int], logprobs: list[float]) -> None:
        self.tokens, self.logprobs = tokens, logprobs

    async def sample(self, prompt: Any, num_samples: int, params: Any) -> Any:
        from tinker import types

        seq = types.SampledSequence(
            stop_reason="stop",
            sequence_id="s",
            tokens_np=np.array(self.tokens, np.int64),
            logprobs_np=np.array(self.logprobs, np.float32),
        )
        return types.SampleResponse(sequences=[seq])


def test_odd_sampler_output_ends_its_own_debate_and_nothing_else() -> None:
    """Found by review: a sampler returning a token id the renderer cannot decode crashed the whole batch
    (the other debates' results lost), and a NaN logprob made transcript_lines fail on the whole batch."""
    from adapters.tinker.fake import initial_model_state
    from adapters.training.rollouts import DebateSpec

    good = FakeSamplingClient(initial_model_state("fake", 1, 0))
    undecodable = _OddSampler([-5], [-1.0])
    nan_logprob = _OddSampler(list(b"<solution>1</solution>"), [float("nan")] * 22)
    specs = [
        DebateSpec("q?", (undecodable, undecodable), (0, 1), None, group=0, id="bad"),
        DebateSpec("q2?", (good, good), (0, 1), None, group=1, id="ok"),
        DebateSpec("q3?", (nan_logprob, good), (0, 1), None, group=2, id="nan"),
    ]
    config = RolloutConfig(num_agents=2, max_rounds=1)
    batch = asyncio.run(run_debates(specs, ByteRenderer(), config=config))
    by_id = {r.spec.id: r for r in batch.results}
    assert by_id["bad"].end_reason == "sampler_error" and "do not decode" in by_id["bad"].detail
    assert by_id["ok"].state.done and by_id["ok"].end_reason != "sampler_error"
    lines = transcript_lines(batch.results)
    read = read_transcripts(lines)
    assert not by_id["bad"].turns  # ended before its first turn: its line has no turn, and says why
    assert [(e.reason, e.debate_id) for e in read.errors] == [("no_turns", "bad")]
    assert json.loads(lines[0])["meta"]["end_reason"] == "sampler_error"
    assert [d.id for d in read.debates] == ["ok", "nan"]
    assert by_id["nan"].turns[0].arrays is None
    assert read.debates[1].turns[0].action_tokens is None  # its text kept, its tokens not


def test_debate_ids_must_be_unique() -> None:
    """Two self_play calls with the default prefix both made id q0: the reader then dropped the second."""
    from adapters.tinker.fake import initial_model_state

    sampler = FakeSamplingClient(initial_model_state("fake", 1, 0))
    specs = self_play(["a?"], sampler, num_agents=2) + self_play(["b?"], sampler, num_agents=2)
    with pytest.raises(ValueError, match=r"specs\[1\]\.id 'q0' is also specs\[0\]'s"):
        asyncio.run(run_debates(specs, ByteRenderer(), config=RolloutConfig(num_agents=2, max_rounds=1)))


def test_rollout_config_and_spec_helpers_name_bad_values() -> None:
    from adapters.tinker.fake import initial_model_state

    for name, value, kind in (
        ("temperature", "1", TypeError),
        ("sample_timeout", "5", TypeError),
        ("parse_failure_reward", float("nan"), ValueError),
        ("parse_failure_reward", float("inf"), ValueError),
        ("sample_timeout", float("nan"), ValueError),
    ):
        with pytest.raises(kind, match=name):
            RolloutConfig(**{name: value})
    sampler = FakeSamplingClient(initial_model_state("fake", 1, 0))
    with pytest.raises(TypeError, match="questions must be a sequence of question strings"):
        self_play("abc", sampler, num_agents=2)
    with pytest.raises(TypeError, match="answers must be a sequence"):
        self_play(["a?", "b?"], sampler, num_agents=2, answers="xy")
    with pytest.raises(TypeError, match="questions must be a sequence"):
        fixed_opponents("ab", sampler, sampler, num_agents=2)


def test_turn_arrays_keep_the_dtypes_they_are_given() -> None:
    """The byte renderer's int32 prompt and the sampler's int32 ids and float32 logprobs are kept as they
    are (no copy a turn; the step's packing widens them once); lists, as the SDK gives, become int64 and
    float64; ids that are not integers are cast as before."""
    prompt = ByteRenderer().build_prompt([Message("user", "2 + 2?")])
    tokens, logprobs = np.array([5, 6], np.int32), np.array([-0.5, -1.0], np.float32)
    arrays = turn_arrays(prompt, types.SampledSequence("stop", "s", tokens_np=tokens, logprobs_np=logprobs))
    assert arrays is not None
    ob, ac, lp = arrays
    assert ob.dtype == np.int32 and ob.tolist() == prompt.to_ints()
    assert ob is np.asarray(prompt.chunks[0].tokens)  # the prompt's own array
    assert ac is tokens and lp is logprobs
    listed = turn_arrays(
        types.ModelInput.from_ints([1, 2]), types.SampledSequence("stop", "s", [5, 6], [-0.5, 0])
    )
    assert listed is not None
    assert [a.dtype for a in listed] == [np.int64, np.int64, np.float64]
    assert [a.tolist() for a in listed] == [[1, 2], [5, 6], [-0.5, 0.0]]
    floats = types.SampledSequence("stop", "s", tokens_np=np.array([5.0]), logprobs_np=np.array([-0.5]))
    cast = turn_arrays(types.ModelInput.from_ints([1]), floats)
    assert cast is not None and cast[1].dtype == np.int64 and cast[1].tolist() == [5]


# ---- provenance: the SDK's sequence ids, from the samples to the datums and transcripts --------------


class _Ids:
    """A sampler that rewrites its sequences' ids: ``""`` (none) for every ``blank``-th sample."""

    def __init__(self, inner: SamplingClient, blank: int) -> None:
        self.inner, self.blank, self.count = inner, blank, 0

    async def sample(self, prompt: Any, num_samples: int, params: Any) -> Any:
        response = await self.inner.sample(prompt, num_samples, params)
        self.count += 1
        if self.count % self.blank:
            return response
        seqs = [
            types.SampledSequence(s.stop_reason, "", s.tokens_np, s.logprobs_np) for s in response.sequences
        ]
        return types.SampleResponse(sequences=seqs)


def _check_spans_claim_their_tokens(datum: types.Datum, turns: dict[str, Any]) -> None:
    """Each span claims tokens of the datum that are the tokens it names: the ``offset``-th on of its
    sequence's prompt (a prompt span) or of its sampled tokens (a sampled span); the spans tile both
    sides, input and target."""
    inputs = datum.model_input.to_ints()
    targets = datum.loss_fn_inputs["target_tokens"].to_numpy().tolist()
    sides = ((datum.model_input_spans, inputs), (datum.loss_fn_input_spans, targets))
    for spans, tokens in sides:
        assert spans, "a datum with provenance has spans on both sides"
        at = 0
        for span in spans:
            turn = turns[span.sequence_id]
            prompt = isinstance(span, types.PromptProvenanceSpan)
            source = turn.prompt.to_ints() if prompt else list(turn.sequence.tokens)
            assert tokens[at : at + span.length] == source[span.offset : span.offset + span.length]
            at += span.length
        assert at == len(tokens)


@pytest.mark.parametrize("options", [{}, {"judge_rewards": "default"}, {"turn_groups": "round"}])
@pytest.mark.parametrize("blank", [1, 3, 10**9])
def test_every_datum_carries_the_spans_of_the_samples_it_is_made_of(
    options: dict[str, Any], blank: int
) -> None:
    """The loop's datums (``prepare_rl``: the scoring core's one ``build_datums``, then
    ``datums_to_tinker``) carry spans naming the SDK's sequence ids of their turns, pointing at those
    turns' own tokens; a datum made of a turn whose sample came without an id has none (the cookbook's
    rule), the others keep theirs."""
    from adapters.training.config import TrainConfig
    from adapters.training.prepare import prepare_rl

    async def main() -> list[DebateResult]:
        service = FakeServiceClient(seed=5, policy=FakePolicy(yes_rate=0.2))
        sampler = _Ids(await _sampler(service), blank)
        specs = self_play(QUESTIONS[:4], sampler, num_agents=3, answers=["3", "7", "15", "14"])
        return list((await run_debates(specs, RENDERER, config=CONFIG)).results)

    results = run(main())
    config = TrainConfig(num_agents=3, max_rounds=2, **options)
    prepared = prepare_rl(config, RENDERER, results, results, np.zeros(3))[0]
    turns = {t.sequence.sequence_id: t for r in results for t in r.turns if t.sequence.sequence_id}
    assert len(turns) == sum(1 for r in results for t in r.turns if t.sequence.sequence_id)  # distinct
    with_spans = [d for d in prepared.data if d.loss_fn_input_spans is not None]
    for datum in with_spans:
        _check_spans_claim_their_tokens(datum, turns)
    assert prepared.data
    if blank == 1:  # no sample has an id: no datum has provenance
        assert with_spans == [] and all(d.model_input_spans is None for d in prepared.data)
    elif blank > len(turns) + 10:  # every sample has one: every datum carries spans
        assert len(with_spans) == len(prepared.data)
    else:
        assert 0 < len(with_spans) < len(prepared.data)


def test_transcripts_keep_each_turns_sequence_id() -> None:
    async def main() -> list[DebateResult]:
        sampler = _Ids(await _sampler(FakeServiceClient(seed=3, session="run-a")), 4)
        return list(
            (
                await run_debates(self_play(QUESTIONS[:2], sampler, num_agents=3), RENDERER, config=CONFIG)
            ).results
        )

    results = run(main())
    read = read_transcripts("\n".join(transcript_lines(results)))
    assert read.errors == ()
    got = [t.sequence_id for d in read.debates for t in d.turns]
    want = [t.sequence.sequence_id or None for r in results for t in r.turns]
    assert got == want and None in got and all(i is None or i.startswith("run-a-") for i in got)


def test_every_datum_a_run_sends_carries_spans_of_its_session_also_after_a_resume(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gspo run on the fake: every datum of every forward_backward names, in its spans, sequences its
    own process sampled; after a crash, the resumed process (a new session) samples again what was not
    trained, so its datums name only its own sequences (nothing sampled before the crash is carried)."""
    from adapters.tinker import fake
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    sent: list[tuple[str, types.Datum]] = []
    original = fake.FakeTrainingClient.forward_backward

    def recording(self: Any, data: list[types.Datum], loss_fn: Any, config: Any = None) -> Any:
        sent.extend((self.service.session.name, d) for d in data)
        return original(self, data, loss_fn, config)

    monkeypatch.setattr(fake.FakeTrainingClient, "forward_backward", recording)
    keys = {"batch_size": 2, "num_agents": 2, "max_rounds": 2, "max_tokens": 128, "eval_every": 0}
    keys |= {"loss_fn": "gspo", "loss_fn_config": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}}
    config = TrainConfig.from_mapping({**keys, "steps": 4, "save_every": 2, "out": str(tmp_path / "run")})
    root = tmp_path / "service"
    plan = FaultPlan(at={("optim_step", 3): Fault("crash", after=True)})  # step 3 trained, then killed
    crashing, _ = with_faults(FakeServiceClient(seed=0, root=root, session="before"), plan)
    with pytest.raises(BaseExceptionGroup) as crash:  # the simulated SIGKILL, out of the loop's task group
        asyncio.run(run_training(config, crashing))
    assert crash.value.subgroup(SimulatedCrash) is not None
    before = len(sent)
    asyncio.run(run_training(config, FakeServiceClient(seed=0, root=root, session="after"), resume=True))
    assert 0 < before < len(sent)
    for k, (session, datum) in enumerate(sent):
        assert datum.loss_fn_input_spans and datum.model_input_spans, k
        named = {
            s.sequence_id.rsplit("-", 1)[0] for s in (*datum.model_input_spans, *datum.loss_fn_input_spans)
        }
        assert named == {session}, (k, named, session)
    assert {s for s, _ in sent[before:]} == {"after"}
