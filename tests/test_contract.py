"""The start-of-run contract check (adapters.tinker.contract): passes on the in-repo services, and names
the check that a deliberately broken service fails (small wrappers around the fake, below)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import tinker
from tinker import types

from adapters.futures import CompletedFuture, completed
from adapters.local.service import LocalServiceClient
from adapters.tinker.contract import (
    CHECK_NAMES,
    OPTION_DEPENDENCIES,
    CheckResult,
    ContractError,
    ContractReport,
    check_contract,
    choose_stop_token,
    enforce_contract,
    judge_logprobs,
    judge_sample_count,
    judge_snapshot,
    judge_stop,
    refused_options,
)
from adapters.tinker.fake import FakeSamplingClient, FakeServiceClient, FakeTrainingClient

VOCAB = 262


def _seq(tokens: list[int], logprobs: list[float] | None = None) -> types.SampledSequence:
    lps = [-1.0] * len(tokens) if logprobs is None else logprobs
    return types.SampledSequence("length", "s", np.array(tokens, np.int32), np.array(lps, np.float32))


def _check(service: Any, **kwargs: Any) -> ContractReport:
    return asyncio.run(check_contract(service, base_model="fake", vocab_size=VOCAB, **kwargs))


def _failed(report: ContractReport) -> list[str]:
    return [r.name for r in report.failures]


# --- broken services: the fake, with one thing wrong -----------------------------------------------------


@dataclass(frozen=True)
class Breaks:
    """What the wrapped service gets wrong.

    Attributes:
        follow: a sampler reads the trainer's current weights (not a frozen snapshot).
        reload: using a sampler loads its weights into the trainer (the issue's "unfrozen" server).
        logprobs: rewrites each ``compute_logprobs`` reply.
        params: rewrites each ``sample`` request's parameters.
        response: rewrites each ``sample`` reply.
    """

    follow: bool = False
    reload: bool = False
    logprobs: Callable[[list[float | None]], list[Any]] | None = None
    params: Callable[[types.SamplingParams], types.SamplingParams] | None = None
    response: Callable[[types.SampleResponse], types.SampleResponse] | None = None


class BrokenSampler:
    def __init__(self, trainer: BrokenTraining, snapshot: FakeSamplingClient) -> None:
        self.trainer, self.snapshot = trainer, snapshot

    def _weights(self) -> FakeSamplingClient:
        breaks = self.trainer.breaks
        if breaks.reload:
            self.trainer.inner.state = self.snapshot.state
        if breaks.follow:
            return FakeSamplingClient(self.trainer.inner.state, self.snapshot.policy)
        return self.snapshot

    def sample(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> CompletedFuture[types.SampleResponse]:
        breaks = self.trainer.breaks
        params = breaks.params(sampling_params) if breaks.params else sampling_params
        out = self._weights().sample(prompt, num_samples, params).result()
        return completed(breaks.response(out) if breaks.response else out)

    def compute_logprobs(self, prompt: tinker.ModelInput) -> CompletedFuture[list[Any]]:
        out = self._weights().compute_logprobs(prompt).result()
        rewrite = self.trainer.breaks.logprobs
        return completed(rewrite(out) if rewrite else out)


class BrokenTraining:
    def __init__(self, inner: FakeTrainingClient, breaks: Breaks) -> None:
        self.inner, self.breaks = inner, breaks
        self.closed = False

    def forward_backward(
        self, data: list[types.Datum], loss_fn: Any, loss_fn_config: Mapping[str, float | str] | None = None
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        return self.inner.forward_backward(data, loss_fn, loss_fn_config)

    def optim_step(self, optim_params: types.AdamParams) -> CompletedFuture[types.OptimStepResponse]:
        return self.inner.optim_step(optim_params)

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> CompletedFuture[BrokenSampler]:
        return completed(BrokenSampler(self, self.inner.save_weights_and_get_sampling_client(name).result()))

    def close(self) -> None:
        self.closed = True


class BrokenService:
    def __init__(self, breaks: Breaks) -> None:
        self.inner = FakeServiceClient(seed=0)
        self.breaks = breaks
        self.clients: list[BrokenTraining] = []

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> CompletedFuture[BrokenTraining]:
        client = BrokenTraining(
            self.inner.create_lora_training_client(base_model, rank).result(), self.breaks
        )
        self.clients.append(client)
        return completed(client)


def _without_stop(p: types.SamplingParams) -> types.SamplingParams:
    return types.SamplingParams(max_tokens=p.max_tokens, temperature=p.temperature, seed=p.seed)


def _fewer(r: types.SampleResponse) -> types.SampleResponse:
    return types.SampleResponse(sequences=r.sequences[:-1])


def _outside(r: types.SampleResponse) -> types.SampleResponse:
    """The first token of each sequence moved past the vocabulary (a model of 512 ids)."""
    return types.SampleResponse(
        sequences=[
            dataclasses.replace(s, tokens_np=np.asarray([511, *s.tokens[1:]], np.int32)) for s in r.sequences
        ]
    )


# --- the check passes on the in-repo services --------------------------------------------------------


def test_passes_on_the_fake_service() -> None:
    report = _check(FakeServiceClient(seed=0))
    assert report.passed, report.failures
    assert [r.name for r in report.results] == list(CHECK_NAMES)
    enforce_contract(report, {"kl_penalty_coef": 0.1, "max_steps_off_policy": 2})


def test_passes_on_the_local_jax_service() -> None:
    report = asyncio.run(check_contract(LocalServiceClient(seed=0), base_model="tiny", vocab_size=VOCAB))
    assert report.passed, report.failures
    assert report.result("stop_sequences").got.endswith("cut there")


def test_the_runs_own_training_client_is_untouched() -> None:
    service = FakeServiceClient(seed=0)
    run_client = service.create_lora_training_client("fake", 8).result()
    before = run_client.state
    assert _check(service).passed
    assert run_client.state == before
    assert {e.client for e in service.events} == {run_client.client_id + 1}  # the throwaway client's


def test_the_throwaway_client_is_closed() -> None:
    service = BrokenService(Breaks())
    assert _check(service).passed
    assert [c.closed for c in service.clients] == [True]


# --- and names the check a broken service fails ------------------------------------------------------


@pytest.mark.parametrize(
    ("breaks", "check"),
    [
        (Breaks(follow=True), "frozen_snapshot"),
        (Breaks(reload=True), "frozen_snapshot"),
        (Breaks(logprobs=lambda lps: lps[:-1]), "compute_logprobs"),
        (Breaks(logprobs=lambda lps: [-1.0, *lps[1:]]), "compute_logprobs"),
        (Breaks(logprobs=lambda lps: [None, float("nan"), *lps[2:]]), "compute_logprobs"),
        (Breaks(params=_without_stop), "stop_sequences"),
        (Breaks(response=_fewer), "sample_count"),
        (Breaks(response=_outside), "vocabulary"),
    ],
    ids=["follows-trainer", "reloads-trainer", "short", "no-none", "nan", "ignores-stop", "fewer", "vocab"],
)
def test_a_broken_service_fails_the_named_check(breaks: Breaks, check: str) -> None:
    report = _check(BrokenService(breaks))
    assert _failed(report) == [check]
    config = {"kl_penalty_coef": 0.05} if check in OPTION_DEPENDENCIES else {}
    with pytest.raises(ContractError, match=rf"{check}.*expected .*; got \S"):
        enforce_contract(report, config)


def test_an_unfrozen_sampler_refuses_only_the_options_that_need_it() -> None:
    report = _check(BrokenService(Breaks(follow=True)))
    assert report.fatal == ()
    enforce_contract(report, {"kl_penalty_coef": 0.0, "max_steps_off_policy": 0, "eval_questions": 0})
    config = {"kl_penalty_coef": 0.1, "max_steps_off_policy": 2, "eval_questions": 0, "learning_rate": 1e-4}
    refusals = refused_options(report, config)
    assert [(r.key, r.value) for r in refusals] == [("kl_penalty_coef", 0.1), ("max_steps_off_policy", 2)]
    with pytest.raises(ContractError) as info:
        enforce_contract(report, config)
    message = str(info.value)
    assert "config key kl_penalty_coef = 0.1 needs the frozen_snapshot check" in message
    assert "set max_steps_off_policy = 0" in message
    assert "old sampler's logprobs moved" in message
    assert info.value.failures == () and len(info.value.refused) == 2


def test_a_reloading_sampler_is_named_as_changing_the_trainer() -> None:
    got = _check(BrokenService(Breaks(reload=True))).result("frozen_snapshot").got
    assert "changed the trainer's weights" in got


# --- the pure judges, on hand-made replies --------------------------------------------------------------


def test_judge_logprobs() -> None:
    assert judge_logprobs([None, -0.5, -2.0], prompt_length=3).passed
    assert judge_logprobs([None], prompt_length=1).passed
    assert judge_logprobs([None, 0.5, -2.0], prompt_length=3).got == "entry 1 is 0.5, above 0"
    assert judge_logprobs([None, "x", -2.0], prompt_length=3).got == "entry 1 is 'x' (str), not a float"
    assert (
        judge_logprobs([None, None, -2.0], prompt_length=3).got == "entry 1 is None (NoneType), not a float"
    )
    assert judge_logprobs([None, -1.0, float("-inf")], prompt_length=3).got == "entry 2 is -inf"


def test_judge_sample_count_refuses_an_empty_sequence() -> None:
    result = judge_sample_count(types.SampleResponse(sequences=[_seq([5]), _seq([])]), num_samples=2)
    assert (result.passed, result.got) == (False, "sequence 1 is empty")


def test_choose_stop_token_and_judge_stop() -> None:
    assert choose_stop_token(types.SampleResponse(sequences=[_seq([3, 3, 3])]), vocab_size=VOCAB) == 3
    assert (
        choose_stop_token(types.SampleResponse(sequences=[_seq([400]), _seq([4, 5])]), vocab_size=VOCAB) == 4
    )
    assert choose_stop_token(types.SampleResponse(sequences=[_seq([400])]), vocab_size=VOCAB) is None
    common = types.SampleResponse(sequences=[_seq([1, 2, 5, 6]), _seq([3, 5, 7]), _seq([8, 5, 9])])
    assert choose_stop_token(common, vocab_size=VOCAB) == 5  # in every sequence, with a token after it
    assert judge_stop(None, stop_token=None).name == "stop_sequences"
    assert not judge_stop(None, stop_token=None).passed
    none_ended = judge_stop(types.SampleResponse(sequences=[_seq([1, 2])]), stop_token=9)
    assert none_ended.got == "no sequence of 1 ends with stop token 9"
    ok = judge_stop(types.SampleResponse(sequences=[_seq([1, 9]), _seq([1, 2])]), stop_token=9)
    assert (ok.passed, ok.got) == (True, "1 of 2 cut there")


def test_judge_snapshot_cases() -> None:
    a, b, c = [None, -1.0, -2.0], [None, -1.5, -1.0], [None, -1.0005, -2.0005]
    assert judge_snapshot(a, c, b, b, tolerance=1e-2).passed  # within tolerance counts as the same
    assert "training showed nothing" in judge_snapshot(a, a, a, a, tolerance=1e-2).got
    assert "nothing to compare" in judge_snapshot([None], [None], [None], [None], tolerance=1e-2).got
    assert "changed the trainer's weights" in judge_snapshot(a, a, b, a, tolerance=1e-2).got
    nan = [None, float("nan"), -2.0]
    assert judge_snapshot(a, nan, b, b, tolerance=1e-2).passed  # compared where both are finite


def test_check_result_and_report_helpers() -> None:
    bad = CheckResult("vocabulary", False, "ids in [0, 4)", "id 7")
    report = ContractReport((CheckResult("sample_count", True, "2", "2"), bad))
    assert (report.passed, report.failures, report.fatal) == (False, (bad,), (bad,))
    assert report.result("vocabulary") is bad
    with pytest.raises(KeyError, match="no check named 'nope'"):
        report.result("nope")
    assert str(ContractError([bad])).endswith("contract check vocabulary: expected ids in [0, 4); got id 7")


def test_bad_arguments_raise_before_any_call() -> None:
    service = BrokenService(Breaks())
    with pytest.raises(ValueError, match=r"prompt must hold >= 2 ids in \[0, 262\)"):
        _check(service, prompt=[5, 300])
    with pytest.raises(ValueError, match="vocab_size must be an int >= 1"):
        asyncio.run(check_contract(service, base_model="fake", vocab_size=0))
    with pytest.raises(ValueError, match="num_samples and max_tokens must be >= 2"):
        _check(service, num_samples=1)
    assert service.clients == []
