"""The fault wrapper: plans, each fault kind, crashes between steps and inside a checkpoint."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
from hypothesis import given
from hypothesis import strategies as st
from tinker import types

from adapters.tinker.fake import FakeServiceClient, batch_fingerprint, load_state_file
from adapters.tinker.faults import (
    FAULT_KINDS,
    Fault,
    FaultPlan,
    InjectedError,
    SimulatedCrash,
    with_faults,
)

DATUM = types.Datum(
    model_input=tinker.ModelInput.from_ints([1, 2, 3]),
    loss_fn_inputs={"target_tokens": np.array([2, 3, 4], np.int64)},
)
PROMPT = tinker.ModelInput.from_ints([256, 259, 65, 261, 260])
PARAMS = types.SamplingParams(max_tokens=50)


@given(seed=st.integers(0, 2**32), k=st.integers(0, 1000), rate=st.floats(0, 1))
def test_plan_is_a_pure_function_of_seed_method_and_index(seed: int, k: int, rate: float) -> None:
    plan = FaultPlan(seed=seed, rates={"error": rate})
    assert plan.fault_for("sample", k) == FaultPlan(seed=seed, rates={"error": rate}).fault_for("sample", k)
    assert plan.fault_for("optim_step", k) is None  # random faults hit only plan.methods
    if rate == 1.0:
        assert plan.fault_for("sample", k) == Fault("error")


def test_plan_rates_are_roughly_honoured() -> None:
    plan = FaultPlan(seed=1, rates={"error": 0.2, "delay": 0.3})
    kinds = [f.kind if (f := plan.fault_for("sample", k)) else None for k in range(4000)]
    assert abs(kinds.count("error") / 4000 - 0.2) < 0.03 and abs(kinds.count("delay") / 4000 - 0.3) < 0.03
    faults = [plan.fault_for("sample", k) for k in range(200)]
    assert all(0 <= f.delay <= plan.max_delay for f in faults if f is not None)


def test_fixed_latency_applies_where_no_other_fault_does() -> None:
    plan = FaultPlan(at={("sample", 0): Fault("error")}, latency={"sample": 0.05, "forward_backward": 0.2})
    assert plan.fault_for("sample", 0) == Fault("error")
    assert plan.fault_for("sample", 1) == Fault("delay", 0.05)
    assert plan.fault_for("forward_backward", 7) == Fault("delay", 0.2)
    assert plan.fault_for("optim_step", 0) is None
    with pytest.raises(ValueError, match="latency: method must be one of"):
        FaultPlan(latency={"nope": 1.0})


def test_latency_runs_from_submission_not_from_the_first_await() -> None:
    """Requests submitted together complete together; work done before awaiting overlaps the latency.

    Checked by order, not by wall-clock windows: the client blocks past every deadline, and the loop's
    next turns deliver all three without further waiting, however late a loaded machine runs them."""

    async def main() -> tuple[list[bool], list[float], float]:
        service, injector = with_faults(FakeServiceClient(seed=0), FaultPlan(latency={"sample": 0.2}))
        tc = await service.create_lora_training_client("fake", 4)
        sampler = await tc.save_weights_and_get_sampling_client()
        prompt = tinker.ModelInput.from_ints([1, 2, 3])
        params = types.SamplingParams(max_tokens=4)
        futures = [sampler.sample(prompt, 1, params) for _ in range(3)]
        time.sleep(0.25)  # the client is busy past every deadline; the requests are in flight
        for _ in range(3):  # the loop's turns: the due timers fire, nothing waits for new ones
            await asyncio.sleep(0)
        done = [fut.done() for fut in futures]
        for fut in futures:
            await fut
        t0 = time.perf_counter()
        await sampler.sample(prompt, 1, params)
        return done, list(injector.delivered["sample"]), time.perf_counter() - t0

    done, delivered, alone = asyncio.run(main())
    assert done == [True, True, True]  # not 0.25 + 3 x 0.2 later, nor 0.25 + 0.2
    assert len(delivered) == 4 and min(delivered) >= 0.2
    assert alone >= 0.2


def test_forward_backward_compute_is_per_token_and_queued_behind_earlier_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``compute_per_token`` a request takes its tokens' compute after those submitted before it:
    two 3-token requests at 20 ms a token, submitted together, are due at 60 and 120 ms (plus latency).

    The due times are read on a clock the test holds (what the injector plans), not measured: a loaded
    machine delivers late, and epoll rounds a timer to whole milliseconds either way."""
    from adapters.tinker import faults as faults_module

    now = [100.0]
    planned: list[float] = []
    monkeypatch.setattr(faults_module, "_clock", lambda: now[0])

    def due(submitted: float, deadline: float, inner: Any, record: Any) -> Any:
        planned.append(deadline - submitted)
        return inner  # delivered at once: only the plan is under test here

    monkeypatch.setattr(faults_module, "_delayed", due)

    async def main() -> None:
        plan = FaultPlan(compute_per_token={"forward_backward": 0.02}, latency={"forward_backward": 0.03})
        service, _ = with_faults(FakeServiceClient(seed=0), plan)
        tc = await service.create_lora_training_client("fake", 4)
        futures = [tc.forward_backward([DATUM], "cross_entropy") for _ in range(2)]
        for fut in futures:
            await fut
        now[0] = 200.0  # the service's queue is empty again
        await tc.forward_backward([DATUM, DATUM], "cross_entropy")

    asyncio.run(main())
    assert planned == pytest.approx([0.09, 0.15, 0.15])  # 3 x 20 ms + 30 ms; 60 ms more; 6 x 20 + 30
    with pytest.raises(ValueError, match="compute_per_token: method must be forward_backward"):
        FaultPlan(compute_per_token={"sample": 0.1})
    with pytest.raises(ValueError, match=r"compute_per_token\['forward_backward'\] must be >= 0"):
        FaultPlan(compute_per_token={"forward_backward": -1.0})


def test_plan_validation() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        Fault("boom")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method must be one of"):
        FaultPlan(at={("nope", 0): Fault("error")})
    with pytest.raises(ValueError, match="rates: kind must be one of"):
        FaultPlan(rates={"crash": 0.1})
    with pytest.raises(ValueError, match="rates must sum to at most 1"):
        FaultPlan(rates={"error": 0.6, "hang": 0.6})
    assert set(FAULT_KINDS) == {
        "error",
        "hang",
        "cancel",
        "delay",
        "crash",
        "sdk_error",
        "bad_reply",
        "pause",
    }
    with pytest.raises(ValueError, match="a pause's variant must be one of"):
        Fault("pause", variant="paused_forever")
    with pytest.raises(ValueError, match="rates: kind must be one of"):
        FaultPlan(rates={"pause": 0.1})
    with pytest.raises(ValueError, match="an sdk_error's variant must be one of"):
        Fault("sdk_error", variant="teapot")
    with pytest.raises(ValueError, match="a bad_reply's variant must be one of"):
        Fault("bad_reply")
    with pytest.raises(ValueError, match="a bad_reply of optim_step must be one of"):
        FaultPlan(at={("optim_step", 0): Fault("bad_reply", variant="nan")})
    with pytest.raises(ValueError, match="rates: kind must be one of"):
        FaultPlan(rates={"sdk_error": 0.1})


def test_sdk_error_and_bad_reply_faults_reach_the_caller_as_a_service_would_send_them() -> None:
    plan = FaultPlan(
        at={
            ("optim_step", 0): Fault("sdk_error", variant="request_failed_user"),
            ("sample", 0): Fault("bad_reply", variant="ids_outside"),
            ("compute_logprobs", 0): Fault("bad_reply", variant="short"),
        }
    )

    async def main() -> tuple[str, int, int]:
        service, _ = with_faults(FakeServiceClient(), plan)
        tc = await service.create_lora_training_client("fake", rank=1)
        try:
            await tc.optim_step(types.AdamParams())
            category = ""
        except tinker.RequestFailedError as e:
            category = str(e.category)
        sampler = await tc.save_weights_and_get_sampling_client()
        prompt = tinker.ModelInput.from_ints([1, 2, 3])
        seq = (await sampler.sample(prompt, 1, types.SamplingParams(max_tokens=4))).sequences[0]
        logprobs = await sampler.compute_logprobs(prompt)
        return category, int(max(seq.tokens)), len(logprobs)

    category, top, n = asyncio.run(main())
    assert category.lower() == "user" and top == 1_000_000 and n == 2


def test_each_fault_kind_on_sample() -> None:
    plan = FaultPlan(
        at={("sample", 0): Fault("error"), ("sample", 1): Fault("hang"), ("sample", 2): Fault("cancel")}
    )

    async def main() -> None:
        service, faults = with_faults(FakeServiceClient(), plan)
        tc = await service.create_lora_training_client("fake", 1)
        sampler = await tc.save_weights_and_get_sampling_client()
        with pytest.raises(InjectedError, match="sample call 0"):
            await sampler.sample(PROMPT, 1, PARAMS)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await sampler.sample(PROMPT, 1, PARAMS)
        with pytest.raises(asyncio.CancelledError):
            await sampler.sample(PROMPT, 1, PARAMS)
        ok = await sampler.sample(PROMPT, 1, PARAMS)
        assert isinstance(ok, types.SampleResponse)
        assert [(m, k, f.kind) for m, k, f in faults.injected] == [
            ("sample", 0, "error"),
            ("sample", 1, "hang"),
            ("sample", 2, "cancel"),
        ]

    asyncio.run(main())


def test_delays_complete_out_of_order_but_run_in_submission_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two requests are submitted at one instant of the injector's clock (held by the test), so a
    loaded machine that stalls between the two submissions cannot reorder their deadlines."""
    from adapters.tinker import faults as faults_module

    plan = FaultPlan(
        at={("forward_backward", 0): Fault("delay", 0.03), ("forward_backward", 1): Fault("delay", 0.0)}
    )

    async def main() -> None:
        service, _ = with_faults(FakeServiceClient(), plan)
        tc = await service.create_lora_training_client("fake", 1)
        submitted = asyncio.get_running_loop().time()
        monkeypatch.setattr(faults_module, "_clock", lambda: submitted)
        first = tc.forward_backward([DATUM], "cross_entropy")
        second = tc.forward_backward([DATUM, DATUM], "cross_entropy")
        done: list[str] = []

        async def wait(name: str, fut: Any) -> None:
            await fut
            done.append(name)

        async with asyncio.TaskGroup() as group:
            group.create_task(wait("first", first))
            group.create_task(wait("second", second))
        assert done == ["second", "first"]
        assert tc.state.pending == (batch_fingerprint([DATUM]), batch_fingerprint([DATUM, DATUM]))

    t0 = time.perf_counter()
    asyncio.run(main())
    assert time.perf_counter() - t0 >= 0.03


def test_crash_between_forward_backward_and_optim_step() -> None:
    plan = FaultPlan(at={("optim_step", 0): Fault("crash")})

    async def main() -> None:
        inner = FakeServiceClient()
        service, _ = with_faults(inner, plan)
        tc = await service.create_lora_training_client("fake", 1)
        await tc.forward_backward([DATUM], "cross_entropy")
        with pytest.raises(SimulatedCrash):
            tc.optim_step(types.AdamParams())
        assert tc.state.version == 0 and tc.state.pending == (batch_fingerprint([DATUM]),)
        assert [e.kind for e in inner.events] == ["forward_backward"]

    asyncio.run(main())


@pytest.mark.parametrize("after", [False, True])
def test_crash_in_the_middle_of_a_checkpoint(tmp_path: Path, after: bool) -> None:
    plan = FaultPlan(at={("save_state", 1): Fault("crash", after=after)})

    async def main() -> None:
        inner = FakeServiceClient(root=tmp_path)
        service, _ = with_faults(inner, plan)
        tc = await service.create_lora_training_client("fake", 1)
        await tc.optim_step(types.AdamParams())
        first = await tc.save_state("ckpt-1")
        await tc.optim_step(types.AdamParams())
        with pytest.raises(SimulatedCrash):
            await tc.save_state("ckpt-2")
        # the state written before the crash (or not at all) is never half a file
        written = tmp_path / "states" / "ckpt-2.json"
        assert written.exists() == after
        if after:
            assert load_state_file(str(written)).version == 2
        assert load_state_file(first.path).version == 1
        assert [p.name for p in (tmp_path / "states").iterdir() if p.name.endswith(".tmp")] == []

    asyncio.run(main())


def test_a_delayed_outcome_known_at_submission_is_delivered_once_and_survives_a_cancelled_awaiter() -> None:
    from adapters.futures import completed, failed
    from adapters.tinker import faults

    async def main() -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        value = faults._delayed(now, now + 0.02, completed(7))
        error = faults._delayed(now, now + 0.02, failed(KeyError("k")))
        dropped = faults._delayed(now, now + 0.01, completed(1))
        waiter = asyncio.ensure_future(dropped.result_async())
        await asyncio.sleep(0)
        waiter.cancel()  # the timer fires later on a cancelled future: nothing happens
        assert await value == 7 and await value.result_async() == 7  # any number of awaits
        assert loop.time() >= now + 0.015  # from submission (a lower bound: load only delays it)
        with pytest.raises(KeyError, match="k"):
            await error
        await asyncio.sleep(0.02)
        assert dropped.done()

    asyncio.run(main())


def test_a_deferred_outcome_is_computed_halfway_to_its_deadline_not_at_submission() -> None:
    from adapters.futures import DeferredFuture
    from adapters.tinker import faults

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ran: list[float] = []
        delivered: list[float] = []
        now = loop.time()
        fut = faults._delayed(
            now, now + 0.04, DeferredFuture(lambda: ran.append(loop.time()) or 5), delivered.append
        )
        bad = faults._delayed(now, now + 0.04, DeferredFuture(lambda: 1 // 0))
        assert ran == []  # nothing computed when it is sent
        assert await fut == 5 and len(ran) == 1 and loop.time() >= now + 0.035
        # Computed no earlier than halfway and before it was delivered (no upper bound in wall time: a
        # loaded machine fires both timers late, but in their order).
        assert now + 0.015 <= ran[0] < now + delivered[0]
        with pytest.raises(ZeroDivisionError):
            await bad

    asyncio.run(main())


# ---- tinker 0.38's queue-state pauses: waited out, not failures -------------------------------------------


def _paused_sample(watch: bool, *, then_hang: bool = False) -> tuple[Any, dict[str, float]]:
    """A sample whose queue is paused 0.15 s, under a 0.05 s deadline and no retry; with ``then_hang``, a
    second sample that never completes."""
    from adapters.tinker.boundary import Boundary, RetryPolicy, ServiceError

    at = {
        ("sample", 0): Fault("pause", delay=0.15, variant="paused_rate_limit"),
        ("sample", 1): Fault("hang"),
    }

    async def main() -> tuple[Any, dict[str, float]]:
        service, _ = with_faults(FakeServiceClient(seed=0), FaultPlan(at=at))
        tc = await service.create_lora_training_client("fake", 1)
        sampler = await tc.save_weights_and_get_sampling_client()
        boundary = Boundary({"sample": 0.05}, RetryPolicy(max_attempts=1))
        if watch:
            boundary.watch(sampler)
            boundary.watch(sampler)  # once per client: a second call changes nothing
        got: list[Any] = []
        for _ in range(2 if then_hang else 1):
            try:
                reply = await boundary.call("sample", lambda: sampler.sample(PROMPT, 1, PARAMS))
                got.append(len(reply.sequences))
            except ServiceError as e:
                got.append(e.cause)
        return got, boundary.stats.take()

    return asyncio.run(main())


def test_a_paused_queue_is_waited_out_and_counted_as_a_pause_not_a_failure() -> None:
    got, stats = _paused_sample(watch=True, then_hang=True)
    # the pause outlasts the deadline and the sample arrives; the next call's deadline runs again
    assert got == [1, "deadline"]
    assert stats["service/retries"] == 0 and stats["service/failures"] == 1  # the hang alone
    assert stats["service/pauses/paused_rate_limit"] == 1 and stats["time/paused"] > 0
    got, stats = _paused_sample(watch=False)  # unwatched, the deadline runs through the pause
    assert got == ["deadline"] and "time/paused" not in stats


def test_training_clients_report_pauses_too_and_reports_from_another_thread_count() -> None:
    import threading

    from tinker.lib.api_future_impl import QueueState
    from tinker.lib.queue_state_logger import QueueStateLogger

    from adapters.tinker.boundary import Boundary, RetryPolicy

    class SdkLike:  # the SDK's training client: its futures report to its QueueStateLogger
        def __init__(self) -> None:
            self._queue_state_logger = QueueStateLogger("model", "Training")

    async def main() -> dict[str, float]:
        client, boundary = SdkLike(), Boundary({"optim_step": 0.05}, RetryPolicy(max_attempts=1))
        boundary.watch(client)
        started, released = asyncio.Event(), asyncio.Event()

        async def step() -> str:  # a request whose reply arrives once the pause is over
            started.set()
            await released.wait()
            return "stepped"

        def report(state: QueueState) -> None:
            thread = threading.Thread(
                target=client._queue_state_logger.on_queue_state_change, args=(state, None)
            )
            thread.start()
            thread.join()

        report(QueueState.PAUSED_CAPACITY)
        call = asyncio.ensure_future(boundary.call("optim_step", step))
        await started.wait()  # the attempt's deadline is set: a window of two deadlines from here holds
        # it whatever the load (timers fire in order), so an unpaused deadline would end the call first
        done, _ = await asyncio.wait({call}, timeout=0.1)
        assert not done
        report(QueueState.ACTIVE)
        released.set()
        assert await call == "stepped"
        return boundary.stats.take()

    stats = asyncio.run(main())
    assert stats["service/pauses/paused_capacity"] == 1 and stats["service/failures"] == 0


def test_a_pause_in_a_rollout_does_not_end_its_debate() -> None:
    from adapters.tinker.renderers import ByteRenderer
    from adapters.training.rollouts import RolloutConfig, run_debates, self_play

    config = RolloutConfig(num_agents=2, max_rounds=1, sample_timeout=0.05)
    plan = FaultPlan(at={("sample", 1): Fault("pause", delay=0.15)})

    async def main() -> Any:
        service, _ = with_faults(FakeServiceClient(seed=0), plan)
        tc = await service.create_lora_training_client("fake", 1)
        sampler = await tc.save_weights_and_get_sampling_client()
        return await run_debates(
            self_play(["What is 1 + 2?"], sampler, num_agents=2), ByteRenderer(), config=config
        )

    batch = asyncio.run(main())
    assert batch.end_counts.keys() <= {"max_rounds", "consensus"} and len(batch.results[0].turns) == 2


def test_a_run_waits_out_a_paused_training_queue(tmp_path: Path) -> None:
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    keys = {"batch_size": 2, "num_agents": 2, "max_rounds": 1, "max_tokens": 64, "eval_every": 0, "steps": 2}
    config = TrainConfig.from_mapping(
        {**keys, "out": str(tmp_path / "run"), "deadlines": {"optim_step": 0.05}}
    )
    plan = FaultPlan(at={("optim_step", 0): Fault("pause", delay=0.15, variant="paused_capacity")})
    service, faults = with_faults(FakeServiceClient(seed=0), plan)
    result = asyncio.run(run_training(config, service))
    assert [m["step"] for m in result.metrics] == [0, 1] and faults.injected[0][2].kind == "pause"
    assert result.metrics[0]["service/pauses/paused_capacity"] == 1 and result.metrics[0]["time/paused"] > 0
    assert all(m["service/failures"] == 0 and m["service/retries"] == 0 for m in result.metrics)
