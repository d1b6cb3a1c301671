"""The client's service boundary (:mod:`adapters.tinker.boundary`) alone and under the training loop, on
the in-repo fake behind the fault injector: hung calls end at their deadlines, transient SDK errors are
retried and counted, permanent ones named, malformed replies named, half-written saves caught, and a run
that stops resumes with every step and every debate exactly once. No network, no wall-clock assertions:
backoff waits are zero, and only calls that never complete meet a (small) deadline."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tinker import types

from adapters.cli import main
from adapters.futures import AwaitableFuture, CompletedFuture
from adapters.tinker.boundary import (
    Boundary,
    Failure,
    RetryPolicy,
    ServiceError,
    check_forward_backward,
    check_logprobs,
    check_sample,
    classify,
    parse_deadlines,
)
from adapters.tinker.contract import ContractError, check_contract, enforce_contract
from adapters.tinker.fake import FakeServiceClient
from adapters.tinker.faults import BAD_REPLIES, SDK_ERRORS, Fault, FaultPlan, sdk_error, with_faults
from adapters.training import checkpoint as ck
from adapters.training.config import CALL_KINDS, TrainConfig
from adapters.training.train import NothingToTrain, run_training
from adapters.transcripts import read_transcripts
from tests._profile import examples

TRANSIENT = {
    "rate_limit",
    "server_error",
    "connection",
    "timeout",
    "request_failed_server",
    "request_failed_unknown",
    "promise_expired",
}
SMALL = {"batch_size": 2, "num_agents": 2, "max_rounds": 2, "max_tokens": 128, "eval_questions": 1}
HANG_S = 0.05  # the deadline of a call that never completes (no other call meets a deadline this small)


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def _boundary(attempts: int = 3, **deadlines: float | None) -> Boundary:
    return Boundary(deadlines, RetryPolicy(max_attempts=attempts), rng=random.Random(0), sleep=_no_wait)


def _config(tmp: Path, **kw: Any) -> TrainConfig:
    return TrainConfig.from_mapping({**SMALL, "out": str(tmp / "run"), "eval_every": 0, **kw})


def _service(tmp: Path, plan: FaultPlan | None = None) -> Any:
    fake = FakeServiceClient(seed=0, root=tmp / "run" / "service")
    return fake if plan is None else with_faults(fake, plan)[0]


def _train(
    config: TrainConfig, service: Any, *, resume: bool = False, hung: dict[str, float] | None = None
) -> Any:
    """A run with zero backoff waits; ``hung``: the deadlines of the kinds a test hangs."""
    boundary = Boundary(
        {**config.call_deadlines, **(hung or {})},
        RetryPolicy(max_attempts=config.retry_attempts),
        rng=random.Random(0),
        sleep=_no_wait,
    )
    return asyncio.run(run_training(config, service, resume=resume, boundary=boundary))


def _never() -> AwaitableFuture[Any]:
    return AwaitableFuture(asyncio.Event().wait())


def _steps(run: Path) -> list[int]:
    return [m["step"] for m in ck.read_metrics(run)]


def _debate_ids(run: Path) -> Counter[str]:
    """Every debate record of every step's transcript file: the debates read, and the records without
    turns (debates that ended before their first turn), which the reader names ``no_turns``."""
    ids: Counter[str] = Counter()
    for path in sorted((run / ck.TRANSCRIPTS).glob("step-*.jsonl")):
        step = path.name.split(".")[0]
        read = read_transcripts(path.read_bytes())
        assert {e.reason for e in read.errors} <= {"no_turns"}, read.errors
        names = [d.id for d in read.debates] + [str(e.debate_id) for e in read.errors]
        ids.update(f"{step}/{name}" for name in names)
    return ids


def _assert_exactly_once(run: Path, total_steps: int, debates_per_step: int) -> None:
    assert _steps(run) == list(range(total_steps))
    ids = _debate_ids(run)
    assert set(ids.values()) <= {1}, ids
    per_step = Counter(key.split("/")[0] for key in ids)
    assert sorted(per_step.values()) == [debates_per_step] * total_steps, per_step


# ---- the policy, alone ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", SDK_ERRORS)
def test_each_sdk_error_class_is_transient_or_not(variant: str) -> None:
    failure = classify(sdk_error(variant, "boom"))
    assert failure.transient == (variant in TRANSIENT), failure
    assert failure.cause == variant or variant.startswith(failure.cause) or failure.cause in variant


@given(failed=st.integers(1, 80), u=st.floats(0, 1, exclude_max=True))
@settings(max_examples=examples(50))
def test_backoff_is_jittered_within_its_bound(failed: int, u: float) -> None:
    p = RetryPolicy(base_s=0.5, cap_s=8.0)
    wait = p.backoff(failed, u)
    assert 0.0 <= wait <= min(8.0, 0.5 * 2 ** (failed - 1))
    ok = Failure("rate_limit", True, "")
    assert p.decide("sample", ok, attempts=p.max_attempts, elapsed=0.0, wait=wait) is None
    assert p.decide("sample", ok, attempts=1, elapsed=p.max_total_s, wait=wait + 1.0) is None
    assert p.decide("sample", Failure("billing", False, ""), attempts=1, elapsed=0.0, wait=wait) is None


def test_deadlines_flag_parses_and_names_what_is_wrong() -> None:
    assert parse_deadlines("sample=1.5,optim-step=0") == {"sample": 1.5, "optim_step": 0.0}
    with pytest.raises(ValueError, match="KIND=SECONDS"):
        parse_deadlines("sampel=3")
    with pytest.raises(ValueError, match="finite number"):
        parse_deadlines("sample=-1")
    with pytest.raises(ValueError, match="unknown kind of call 'sampel'"):
        TrainConfig.from_mapping({"deadlines": {"sampel": 3.0}})
    config = TrainConfig.from_mapping({"deadlines": {"forward_backward": 0.0}, "sample_timeout_s": 7})
    assert config.call_deadlines["forward_backward"] is None and config.call_deadlines["sample"] == 7
    assert all(0 < (config.call_deadlines[k] or math.inf) for k in CALL_KINDS)
    assert TrainConfig().call_deadlines["sample"] == 600.0  # no infinite hang by default


# ---- the async part, alone ----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", SDK_ERRORS)
def test_a_transient_error_is_retried_then_succeeds_and_a_permanent_one_is_not(variant: str) -> None:
    calls: list[int] = []

    def request() -> CompletedFuture[str]:
        calls.append(1)
        if len(calls) == 1:
            return CompletedFuture(error=sdk_error(variant, "boom"))
        return CompletedFuture("ok")

    boundary = _boundary()
    if variant in TRANSIENT:
        assert asyncio.run(boundary.call("save_state", request)) == "ok"
        stats = boundary.stats.take()
        assert stats["service/retries"] == 1 and stats[f"service/retries/save_state/{variant}"] == 1
    else:
        with pytest.raises(ServiceError) as caught:
            asyncio.run(boundary.call("save_state", request, step=4))
        assert caught.value.attempts == 1 and not caught.value.transient
        assert "save_state call at step 4" in str(caught.value)
    assert len(calls) == (2 if variant in TRANSIENT else 1)


def test_retries_run_out_with_one_named_error() -> None:
    boundary = _boundary(attempts=3)

    def error() -> CompletedFuture[None]:
        return CompletedFuture(error=sdk_error("server_error", "503"))

    with pytest.raises(
        ServiceError, match=r"refresh call at step 2 failed after 3 attempts \(server_error\)"
    ):
        asyncio.run(boundary.call("refresh", error, step=2))


@pytest.mark.parametrize("kind", CALL_KINDS)
def test_a_hung_call_of_each_kind_ends_at_its_deadline(kind: str) -> None:
    boundary = _boundary(attempts=2, **{kind: HANG_S})
    with pytest.raises(ServiceError) as caught:
        asyncio.run(boundary.call(kind, _never, step=1))
    assert caught.value.cause == "deadline" and caught.value.kind == kind
    replayed = kind not in ("forward_backward", "optim_step")
    assert caught.value.attempts == (2 if replayed else 1)


def test_optim_step_is_never_replayed() -> None:
    calls: list[int] = []

    def request() -> CompletedFuture[None]:
        calls.append(1)
        return CompletedFuture(error=sdk_error("connection", "reply lost"))

    with pytest.raises(ServiceError, match="optim_step call at step 0 failed \\(connection\\)"):
        asyncio.run(_boundary().call("optim_step", request, step=0))
    assert calls == [1]


def test_the_callers_own_cancellation_is_not_a_service_failure() -> None:
    async def main() -> None:
        task = asyncio.create_task(_boundary().call("sample", _never))
        await asyncio.sleep(0)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


# ---- the reply checks ---------------------------------------------------------------------------------


def _seq(ids: list[int], lps: list[float] | None) -> types.SampledSequence:
    logprobs = None if lps is None else np.asarray(lps, np.float32)
    return types.SampledSequence("stop", "s", tokens_np=np.asarray(ids, np.int32), logprobs_np=logprobs)


@pytest.mark.parametrize(
    ("sequences", "problem"),
    [
        ([], "0 sequences for 1 asked"),
        ([_seq([], [])], "is empty"),
        ([_seq([1, 2], [-1.0, math.nan])], "logprob 1 is nan"),
        ([_seq([1, 2], [-math.inf, -1.0])], "logprob 0 is -inf"),
        ([_seq([1, 2], [-1.0])], "1 logprobs for 2 tokens"),
        ([_seq([1, 2], None)], "has no logprobs"),
        ([_seq([1, 300], [-1.0, -1.0])], "token id 300 at 1 is outside the vocabulary"),
        ([_seq([-1, 3], [-1.0, -1.0])], "token id -1 at 0"),
    ],
)
def test_each_malformed_sample_is_named(sequences: list[types.SampledSequence], problem: str) -> None:
    reason = check_sample(types.SampleResponse(sequences=sequences), num_samples=1, vocab_size=262)
    assert reason is not None and problem in reason
    assert check_sample(types.SampleResponse(sequences=[_seq([1], [-0.1])]), num_samples=1) is None


def test_malformed_logprobs_and_training_outputs_are_named() -> None:
    assert check_logprobs([None, -1.0, math.nan], prompt_length=3) == "logprob 2 is nan"
    assert check_logprobs([None, -1.0], prompt_length=3) == "2 logprobs for a prompt of 3 tokens"
    assert check_logprobs([-0.5, -1.0], prompt_length=2) == "the first logprob is -0.5, not None"
    out = types.ForwardBackwardOutput("x", [{}], {"loss:sum": math.nan})  # type: ignore[list-item]
    assert check_forward_backward(out, num_datums=1) == "metric 'loss:sum' is nan"
    assert check_forward_backward(types.ForwardBackwardOutput("x", [], {}), num_datums=1) == (
        "0 outputs for 1 datums"
    )
    empty = types.ForwardBackwardOutput("x", [{}], {})  # type: ignore[list-item]
    assert check_forward_backward(empty, num_datums=1) == "no metrics (no loss)"


# ---- under the training loop --------------------------------------------------------------------------

# the faulted method's calls, by call kind: (method, index of a call the 2-step run makes)
HUNG = {
    "sample": ("sample", 3),
    "compute_logprobs": ("compute_logprobs", 2),
    "forward_backward": ("forward_backward", 1),
    "optim_step": ("optim_step", 1),
    "save_state": ("save_state", 1),
    "refresh": ("save_weights_and_get_sampling_client", 1),
    "create": ("create_lora_training_client", 0),
}


@pytest.mark.parametrize("kind", sorted(HUNG))
def test_a_hung_call_under_training_is_retried_or_named_and_the_run_resumes(
    tmp_path: Path, kind: str
) -> None:
    method, index = HUNG[kind]
    config = _config(tmp_path, steps=2, save_every=1, kl_penalty_coef=0.1, retry_attempts=2)
    plan = FaultPlan(at={(method, index): Fault("hang")})
    if kind in ("forward_backward", "optim_step"):  # never replayed in place: restarted from step 0's
        # checkpoint in the same run (as --resume would), once; hung at every later call, the run stops
        result = _train(config, _service(tmp_path, plan), hung={kind: HANG_S})
        assert [m["step"] for m in result.metrics] == [0, 1]
        assert result.metrics[1][f"service/retries/{kind}/deadline"] == 1
        _assert_exactly_once(Path(config.out), 2, 2)
        again = tmp_path / "again"
        config = _config(again, steps=2, save_every=1, kl_penalty_coef=0.1, retry_attempts=2)
        always = FaultPlan(at={(method, k): Fault("hang") for k in range(index, index + 8)})
        with pytest.raises(ServiceError) as caught:
            _train(config, _service(again, always), hung={kind: HANG_S})
        assert (caught.value.kind, caught.value.cause, caught.value.step) == (kind, "deadline", 1)
        assert _steps(Path(config.out)) == [0]
        _train(config, _service(again), resume=True)
    else:
        result = _train(config, _service(tmp_path, plan), hung={kind: HANG_S})
        assert sum(m["service/retries"] for m in result.metrics) >= (0 if kind == "create" else 1)
    _assert_exactly_once(Path(config.out), 2, 2)


def test_a_hung_restore_ends_at_its_deadline_and_a_clean_resume_continues(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=1, save_every=1)
    _train(config, _service(tmp_path))
    more = TrainConfig.from_mapping({"steps": 2, "retry_attempts": 1}, base=config)
    plan = FaultPlan(at={("create_training_client_from_state_with_optimizer", 0): Fault("hang")})
    with pytest.raises(ServiceError, match=r"restore call failed \(deadline\)"):
        _train(more, _service(tmp_path, plan), resume=True, hung={"restore": HANG_S})
    _train(more, _service(tmp_path), resume=True)
    _assert_exactly_once(Path(config.out), 2, 2)


@pytest.mark.parametrize("variant", SDK_ERRORS)
def test_each_sdk_error_under_training_transient_then_persistent(tmp_path: Path, variant: str) -> None:
    config = _config(tmp_path, steps=2, save_every=1, retry_attempts=2)
    once = FaultPlan(at={("save_weights_and_get_sampling_client", 1): Fault("sdk_error", variant=variant)})
    if variant in TRANSIENT:
        result = _train(config, _service(tmp_path, once))
        assert [m["step"] for m in result.metrics] == [0, 1]
        assert sum(m.get(f"service/retries/refresh/{variant}", 0) for m in result.metrics) == 1
        return
    with pytest.raises(ServiceError) as caught:
        _train(config, _service(tmp_path, once))
    assert (caught.value.kind, caught.value.step, caught.value.attempts) == ("refresh", 0, 1)
    _train(config, _service(tmp_path), resume=True)
    _assert_exactly_once(Path(config.out), 2, 2)


def test_a_persistent_error_exits_3_naming_the_call_and_resume_continues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import adapters.cli.train as cli

    run = tmp_path / "run"
    always = {("save_state", k): Fault("sdk_error", variant="server_error") for k in range(2, 6)}

    def faulty(kind: str, config: TrainConfig, stack: Any) -> Any:
        service = with_faults(FakeServiceClient(seed=0, root=run / "service"), FaultPlan(at=always))[0]
        return service, cli._same_client(service)

    monkeypatch.setattr(cli, "_service", faulty)
    args = ["train", "--service", "fake", "--batch-size", "2", "--num-agents", "2", "--max-rounds", "1"]
    args += ["--max-tokens", "64", "--eval-every", "0", "--steps", "3", "--save-every", "1"]
    args += ["--retry-attempts", "2", "--retry-max-s", "0"]  # no backoff wait: retries end at once
    assert main([*args, "--out", str(run)]) == 3
    err = capsys.readouterr().err
    assert "save_state call at step 1 failed" in err and "(server_error)" in err
    assert f"--resume {run} continues the run" in err and "Traceback" not in err
    monkeypatch.undo()
    assert main([*args, "--resume", str(run)]) == 0
    assert _steps(run) == [0, 1, 2]


def test_a_user_category_failure_is_not_retried(tmp_path: Path) -> None:
    plan = FaultPlan(at={("save_state", 1): Fault("sdk_error", variant="request_failed_user")})
    service, faults = with_faults(FakeServiceClient(seed=0, root=tmp_path / "run" / "service"), plan)
    with pytest.raises(ServiceError, match="request_failed_user"):
        _train(_config(tmp_path, steps=2, save_every=1), service)
    assert faults.calls["save_state"] == 2  # the fixed policy's, then the failed one: no retry


@pytest.mark.parametrize("variant", BAD_REPLIES["sample"])
def test_each_malformed_sample_ends_its_debate_with_a_named_reason(tmp_path: Path, variant: str) -> None:
    config = _config(tmp_path, steps=1)
    result = _train(
        config, _service(tmp_path, FaultPlan(at={("sample", 0): Fault("bad_reply", variant=variant)}))
    )
    record = result.metrics[0]
    assert record["env/all/end/sampler_bad_reply"] == 1 and record["env/all/ended_early"] == 1
    # the first sample of a debate: its record has no turn, and says why
    lines = [json.loads(x) for x in ck.transcript_path(config.out, 0).read_text().splitlines()]
    ended = [x for x in lines if not x["turns"]]
    assert len(lines) == 2 and len(ended) == 1
    assert ended[0]["meta"]["end_reason"] == "sampler_bad_reply"
    assert ended[0]["meta"]["detail"].startswith("bad_reply: ")
    errors = read_transcripts(ck.transcript_path(config.out, 0).read_bytes()).errors
    assert [(e.reason, e.debate_id) for e in errors] == [("no_turns", ended[0]["id"])]
    _assert_exactly_once(Path(config.out), 1, 2)


@pytest.mark.parametrize(
    ("method", "variant", "problem"),
    [
        ("compute_logprobs", "nan", "logprob .* is nan"),
        ("compute_logprobs", "short", "logprobs for a prompt of"),
        ("compute_logprobs", "first_not_none", "the first logprob is"),
        ("forward_backward", "no_outputs", "0 outputs for"),
        ("forward_backward", "nan_loss", "metric 'loss:sum' is nan"),
        ("forward_backward", "no_metrics", "no metrics"),
    ],
)
def test_each_malformed_training_reply_is_named(
    tmp_path: Path, method: str, variant: str, problem: str
) -> None:
    config = _config(tmp_path, steps=2, save_every=1, kl_penalty_coef=0.1)
    plan = FaultPlan(at={(method, 1): Fault("bad_reply", variant=variant)})
    with pytest.raises(ServiceError, match=f"bad_reply.*{problem}"):
        _train(config, _service(tmp_path, plan))
    _train(config, _service(tmp_path), resume=True)
    _assert_exactly_once(Path(config.out), 2, 2)


def test_a_half_written_save_is_caught_and_saved_again_or_the_run_stops(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=2, save_every=1)
    once = FaultPlan(at={("save_state", 1): Fault("bad_reply", variant="half_written")})
    result = _train(config, _service(tmp_path, once))
    saved = json.loads((result.run_dir / "checkpoints" / "step-000001" / ck.LOOP_STATE).read_text())
    assert saved["state_check"]["size"] > 0 and len(saved["state_check"]["sha256"]) == 64
    twice = FaultPlan(at={("save_state", k): Fault("bad_reply", variant="half_written") for k in (1, 2)})
    again = tmp_path / "again"
    with pytest.raises(
        ServiceError, match="save_state call at step 0 failed after 2 attempts \\(unverified\\)"
    ):
        _train(_config(again, steps=2, save_every=1), _service(again, twice))
    assert not (again / "run" / "checkpoints" / "step-000001" / ck.COMPLETE).exists()


def test_a_saved_state_changed_after_its_checkpoint_stops_the_resume(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=1, save_every=1)
    _train(config, _service(tmp_path))
    state = tmp_path / "run" / "service" / "states" / "step-000001.json"
    state.write_text(state.read_text() + " ")
    with pytest.raises(ck.CheckpointError, match="not the file the run saved"):
        _train(TrainConfig.from_mapping({"steps": 2}, base=config), _service(tmp_path), resume=True)


def test_steps_with_nothing_to_train_stop_the_run_naming_the_reason(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=4, max_empty_steps=2, max_rounds=1)
    bad = {("sample", k): Fault("bad_reply", variant="nan_logprobs") for k in range(40)}
    with pytest.raises(NothingToTrain, match=r"2 consecutive RL steps .* sampler_bad_reply"):
        _train(config, _service(tmp_path, FaultPlan(at=bad)))
    assert _steps(Path(config.out)) == [0, 1]


# ---- random fault schedules ---------------------------------------------------------------------------


def test_an_unfrozen_sampler_follows_training_and_the_contract_check_names_it(tmp_path: Path) -> None:
    """The injector's ``unfrozen`` service: a sampler made before an optimizer step answers from the
    weights after it; the start-of-run check names ``frozen_snapshot`` and refuses the options that need
    it, and the same check passes on the plain fake."""

    async def logprobs_before_and_after(service: Any) -> tuple[list[Any], list[Any]]:
        tc = await service.create_lora_training_client("fake", rank=1)
        old = await tc.save_weights_and_get_sampling_client("old")
        prompt = types.ModelInput.from_ints(list(b"2 + 2 = 4"))
        before = await old.compute_logprobs(prompt)
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(list(b"2 + 2 = ")),
            loss_fn_inputs={"target_tokens": list(b" + 2 = 4"), "weights": [1.0] * 8},
        )
        await tc.forward_backward([datum], "cross_entropy")
        await tc.optim_step(types.AdamParams(learning_rate=0.1))
        return before, await old.compute_logprobs(prompt)

    frozen = asyncio.run(logprobs_before_and_after(FakeServiceClient(seed=0)))
    unfrozen, faults = with_faults(FakeServiceClient(seed=0), FaultPlan(unfrozen=True))
    followed = asyncio.run(logprobs_before_and_after(unfrozen))
    assert frozen[0] == frozen[1] == followed[0] != followed[1]
    assert faults.calls["compute_logprobs"] == 2 and not faults.injected

    def report(service: Any) -> Any:
        return asyncio.run(check_contract(service, base_model="fake", vocab_size=262))

    assert report(FakeServiceClient(seed=0)).passed
    broken = report(with_faults(FakeServiceClient(seed=0), FaultPlan(unfrozen=True))[0])
    assert [r.name for r in broken.failures] == ["frozen_snapshot"]
    enforce_contract(broken, {"kl_penalty_coef": 0.0, "max_steps_off_policy": 0, "eval_questions": 0})
    with pytest.raises(ContractError, match="frozen_snapshot") as refused:
        enforce_contract(broken, _config(tmp_path, kl_penalty_coef=0.05).to_dict())
    assert [r.key for r in refused.value.refused] == ["kl_penalty_coef", "eval_questions"]


def test_the_contract_check_goes_through_the_boundary() -> None:
    """A transient failure of one of the check's calls is retried; a persistent one is a ServiceError
    naming the call (train: exit 3, "nothing was written"), not a raw SDK exception."""
    once = FaultPlan(at={("compute_logprobs", 0): Fault("sdk_error", variant="request_failed_server")})
    service, faults = with_faults(FakeServiceClient(seed=0), once)
    report = asyncio.run(check_contract(service, base_model="fake", vocab_size=262, boundary=_boundary()))
    assert report.passed and faults.calls["compute_logprobs"] == 5  # 4 asked, one of them twice
    always = FaultPlan(
        at={("create_lora_training_client", k): Fault("sdk_error", variant="server_error") for k in range(3)}
    )
    service, _ = with_faults(FakeServiceClient(seed=0), always)
    with pytest.raises(ServiceError, match=r"create call failed after 3 attempts \(server_error\)"):
        asyncio.run(check_contract(service, base_model="fake", vocab_size=262, boundary=_boundary()))


_KINDS = ["sdk_error", "hang", "bad_reply", "error", "cancel"]
_KIND_OF = {
    "sample": "sample",
    "optim_step": "optim_step",
    "forward_backward": "forward_backward",
    "save_state": "save_state",
    "save_weights_and_get_sampling_client": "refresh",
}
_METHODS = list(_KIND_OF)


@st.composite
def schedules(draw: st.DrawFn) -> dict[tuple[str, int], Fault]:
    at: dict[tuple[str, int], Fault] = {}
    for _ in range(draw(st.integers(0, 4))):
        method = draw(st.sampled_from(_METHODS))
        kind = draw(st.sampled_from(_KINDS))
        variant = ""
        if kind == "sdk_error":
            variant = draw(st.sampled_from(SDK_ERRORS))
        elif kind == "bad_reply":
            if method not in BAD_REPLIES:
                kind = "error"
            else:
                variant = draw(st.sampled_from(BAD_REPLIES[method]))
        at[(method, draw(st.integers(0, 6)))] = Fault(kind, variant=variant)  # type: ignore[arg-type]
    return at


@given(at=schedules(), unfrozen=st.booleans(), kl=st.sampled_from([0.0, 0.05]))
@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
def test_random_fault_schedules_finish_or_name_the_error_and_resume_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, at: dict[tuple[str, int], Fault], unfrozen: bool, kl: float
) -> None:
    """A run starts as ``debate-kernel train`` starts one: the contract check on the service (samplers that
    follow training, when drawn), then the loop under the drawn faults; it finishes, or stops naming the
    error (the check's, before step 0 and before the run directory exists); then, on a clean service, a
    resume (or the fresh run the check had refused) has every step and every debate exactly once."""
    tmp = tmp_path_factory.mktemp("schedule")
    config = _config(tmp, steps=3, save_every=1, retry_attempts=2, max_rounds=1, kl_penalty_coef=kl)
    hang = {_KIND_OF[method]: HANG_S for (method, _), fault in at.items() if fault.kind == "hang"}
    plan = FaultPlan(at=at, unfrozen=unfrozen)
    report = asyncio.run(
        check_contract(
            with_faults(FakeServiceClient(seed=0), FaultPlan(unfrozen=unfrozen))[0],
            base_model=config.model,
            vocab_size=262,
        )
    )
    try:
        enforce_contract(report, config.to_dict())
    except ContractError as e:
        assert unfrozen and "frozen_snapshot" in str(e) and not Path(config.out).exists()
        event("refused before step 0")
        _train(config, _service(tmp))
    else:
        try:
            _train(config, _service(tmp, plan), hung=hang)
            event("finished")
        except (ServiceError, NothingToTrain) as e:
            assert str(e)
            event(f"stopped: {type(e).__name__}")
        _train(config, _service(tmp), resume=True)
    _assert_exactly_once(Path(config.out), 3, 2)


def test_the_progress_line_shows_debates_ended_early_and_retries() -> None:
    from adapters.cli._progress import step_line

    record = {"phase": "rl", "env/all/ended_early": 2, "env/all/end/sampler_timeout": 0}
    record |= {"env/all/end/sampler_bad_reply": 2, "service/retries": 3.0, "time/total": 0.5}
    line = step_line(0, 2, record, warm_start_steps=0)
    assert line == "step 1/2  RL  ended early 2 (sampler_bad_reply)  retries 3  0.50s"


def test_the_progress_line_counts_the_warm_start_and_rl_apart() -> None:
    from adapters.cli._progress import step_line

    phases = ["warm_start", "warm_start", "rl"]
    lines = [
        step_line(k, 3, {"phase": p, "time/total": 0.25}, warm_start_steps=2) for k, p in enumerate(phases)
    ]
    assert lines == [
        "step 1/3  warm start 1/2  0.25s",
        "step 2/3  warm start 2/2  0.25s",
        "step 3/3  RL 1/1  0.25s",
    ]


def test_a_remote_save_is_read_back_from_its_runs_checkpoint_list(tmp_path: Path) -> None:
    """A ``tinker://`` state counts as saved only once its run's checkpoint list (the SDK's REST client)
    holds it: missing once, it is saved again; missing twice, the run stops naming it; a resume checks
    it is still listed at the recorded size."""
    from datetime import UTC, datetime

    from adapters.training.train import _save_verified

    path = "tinker://run-1/weights/step-000002"

    def entry(size: int) -> types.Checkpoint:
        return types.Checkpoint(
            checkpoint_id="weights/step-000002",
            checkpoint_type="training",
            time=datetime.now(UTC),
            tinker_path=path,
            size_bytes=size,
        )

    class Training:
        saves = 0

        def save_state(self, name: str) -> CompletedFuture[types.SaveWeightsResponse]:
            self.saves += 1
            return CompletedFuture(types.SaveWeightsResponse(path=path))

    class Rest:
        def __init__(self, *listings: list[types.Checkpoint]) -> None:
            self.listings, self.asked = list(listings), []

        def list_checkpoints(self, run_id: str) -> CompletedFuture[types.CheckpointsListResponse]:
            self.asked.append(run_id)
            return CompletedFuture(types.CheckpointsListResponse(checkpoints=self.listings.pop(0)))

    training, rest = Training(), Rest([], [entry(4096)])
    _, record = asyncio.run(_save_verified(_boundary(), training, "step-000002", 2, rest))  # type: ignore[arg-type]
    assert record == {"listed": True, "size": 4096} and training.saves == 2 and rest.asked == ["run-1"] * 2
    with pytest.raises(ServiceError, match="unverified") as stopped:
        asyncio.run(_save_verified(_boundary(), Training(), "step-000002", 2, Rest([], [entry(0)])))  # type: ignore[arg-type]
    assert "0 bytes" in str(stopped.value) and "step 2" in str(stopped.value)
    where = tmp_path / "loop_state.json"
    ck.check_listed_state(path, record, [entry(4096)], checkpoint=where)
    for listing, problem in (([], "not in the service's checkpoint list"), ([entry(10)], "10 bytes")):
        with pytest.raises(ck.CheckpointError, match=problem):
            ck.check_listed_state(path, record, listing, checkpoint=where)
