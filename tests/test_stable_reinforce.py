"""``loss_fn = "stable_reinforce"`` end to end (tinker 0.38): the loop samples with
``record_stability_info=True`` and sends every datum with provenance spans; the local service refuses a
datum without spans, naming a sequence it holds no stability record of or with a nonzero advantage on
a prompt token, and computes its documented stand-in (importance sampling, marked
``loss/stand_in:max = 1``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

import tinker
from tinker import types

from adapters.local import LocalServiceClient, LocalTrainingClient
from adapters.tinker.contract import (
    ContractError,
    ContractReport,
    check_contract,
    enforce_contract,
    judge_stable_reinforce,
)
from adapters.training import prepare
from adapters.training.config import TrainConfig
from adapters.training.train import run_training
from tests._served import MODEL, ServedFake

PROMPT = list(b"What is 2+3? ")
GREEDY = types.SamplingParams(max_tokens=6, temperature=0.0)


def _datum(sequence: types.SampledSequence, *, spans: bool = True, on_prompt: float = 0.0) -> types.Datum:
    """The RL datum of one sample of ``PROMPT``, advantage 1 on the sampled tokens (and ``on_prompt`` on
    the first target, a prompt token); with ``spans`` annotated as the cookbook does (the prompt's
    shifted positions, then the sampled ones)."""
    n, k = len(PROMPT), len(sequence.tokens)
    tokens = PROMPT + list(sequence.tokens)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [0.0] * (n - 1) + list(sequence.logprobs or []),
            "advantages": [on_prompt] + [0.0] * (n - 2) + [1.0] * k,
        },
    )
    if not spans:
        return datum
    sid = sequence.sequence_id or ""
    return datum.with_provenance(
        model_input=[
            types.PromptProvenanceSpan(sequence_id=sid, length=n),
            types.SampledProvenanceSpan(sequence_id=sid, length=k - 1),
        ],
        loss_fn_inputs=[
            types.PromptProvenanceSpan(sequence_id=sid, offset=1, length=n - 1),
            types.SampledProvenanceSpan(sequence_id=sid, length=k),
        ],
    )


async def _sample(trainer: LocalTrainingClient, *, stability: bool) -> types.SampledSequence:
    sampler = await trainer.save_weights_and_get_sampling_client(record_stability_info=stability)
    response = await sampler.sample(types.ModelInput.from_ints(PROMPT), 1, GREEDY)
    return response.sequences[0]


def test_the_local_service_refuses_what_tinker_refuses_and_marks_its_stand_in() -> None:
    async def main() -> None:
        trainer = await LocalServiceClient(seed=0).create_lora_training_client("tiny", rank=4)
        recorded = await _sample(trainer, stability=True)
        unrecorded = await _sample(trainer, stability=False)
        for data, match in (
            ([_datum(recorded), _datum(recorded, spans=False)], r"data\[1\] has none"),
            ([_datum(unrecorded)], rf"data\[0\] names sequence '{unrecorded.sequence_id}'.*no stability"),
            ([_datum(recorded, on_prompt=0.5)], r"data\[0\] has advantage 0.5 at position 0, a prompt"),
        ):
            with pytest.raises(tinker.RequestFailedError, match=match) as refused:
                await trainer.forward_backward(data, "stable_reinforce")
            assert refused.value.category == types.RequestErrorCategory.User
        data = [_datum(recorded)]
        with pytest.raises(ValueError, match=r"\['kl_coeff'\]: Tinker's option of 'stable_reinforce'"):
            await trainer.forward(data, "stable_reinforce", {"kl_coeff": 0.01})
        stand_in = await trainer.forward(data, "stable_reinforce")
        reference = await trainer.forward(data, "importance_sampling")
        assert stand_in.metrics["loss/stand_in:max"] == 1.0 and "loss/stand_in:max" not in reference.metrics
        assert stand_in.metrics["loss:sum"] == pytest.approx(reference.metrics["loss:sum"])
        trained = await trainer.forward_backward(data, "stable_reinforce")
        assert trained.metrics["loss/stand_in:max"] == 1.0

    asyncio.run(main())


def test_a_stable_reinforce_run_on_the_local_service_trains_with_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[list[types.Datum], str]] = []
    fb = LocalTrainingClient.forward_backward

    def recording(
        self: LocalTrainingClient, data: list[types.Datum], loss_fn: Any, config: Any = None
    ) -> Any:
        sent.append((list(data), loss_fn))
        return fb(self, data, loss_fn, config)

    monkeypatch.setattr(LocalTrainingClient, "forward_backward", recording)
    # every weight trained and no evaluation: what the spans need, with the fewest programs to compile
    # (a LoRA run with an evaluation: 16.4 s alone on a cold cache, this one 11.0 s)
    config = TrainConfig(
        model="tiny", lora_rank=0, batch_size=2, num_agents=2, max_rounds=1, max_tokens=4, steps=1,
        eval_questions=0,
        loss_fn="stable_reinforce", out=str(tmp_path / "run"),
    )  # fmt: skip
    service = LocalServiceClient(seed=0, root=tmp_path / "service")
    result = asyncio.run(run_training(config, service))
    assert len(result.metrics) == 1 and sent and all(loss == "stable_reinforce" for _, loss in sent)
    data = [d for batch, _ in sent for d in batch]
    assert data and all(d.loss_fn_input_spans and d.model_input_spans for d in data)
    named = {
        s.sequence_id for d in data for s in (*(d.loss_fn_input_spans or ()), *(d.model_input_spans or ()))
    }
    assert named and named <= service.recorded  # only sequences its samplers recorded


def test_a_batch_without_spans_is_refused_before_it_is_sent() -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]),
        loss_fn_inputs={"target_tokens": [2, 3], "logprobs": [0.0, 0.0], "advantages": [1.0, 1.0]},
    )
    with pytest.raises(ValueError, match=r"needs provenance spans on every datum, and datum 0 .*1 of 1"):
        prepare._check_spans([datum])


def test_serve_refuses_through_the_sdk_what_tinker_refuses_and_marks_its_stand_in(
    served_fake: ServedFake,
) -> None:
    service = served_fake.client()
    trainer = service.create_lora_training_client(MODEL, rank=4).result()

    def sample(stability: bool) -> types.SampledSequence:
        sampler = trainer.save_weights_and_get_sampling_client(record_stability_info=stability).result()
        return sampler.sample(types.ModelInput.from_ints(PROMPT), 1, GREEDY).result().sequences[0]

    recorded, unrecorded = sample(True), sample(False)
    kl: Any = {"kl_coeff": 0.01}
    for data, config, match in (
        ([_datum(recorded), _datum(recorded, spans=False)], None, r"data\[1\] has none"),
        ([_datum(unrecorded)], None, rf"data\[0\] names sequence '{unrecorded.sequence_id}'.*no stability"),
        ([_datum(recorded, on_prompt=0.5)], None, r"data\[0\] has advantage 0.5 at position 0, a prompt"),
        ([_datum(recorded)], kl, r"takes no loss_fn_config here \(got \['kl_coeff'\]\)"),
    ):
        with pytest.raises(tinker.RequestFailedError, match=match) as refused:
            trainer.forward_backward(data, "stable_reinforce", config).result()
        assert refused.value.category == types.RequestErrorCategory.User
    out = trainer.forward_backward([_datum(recorded)], "stable_reinforce").result()
    assert out.metrics["loss/stand_in:max"] == 1.0


def test_the_contract_check_reports_the_local_stand_in_and_a_refusal_refuses_the_loss() -> None:
    report = asyncio.run(
        check_contract(
            LocalServiceClient(seed=0),
            base_model="tiny",
            vocab_size=262,
            prompt=PROMPT,
            rank=4,
            max_tokens=6,
            loss_fn="stable_reinforce",
        )
    )
    assert report.passed, report.failures
    assert report.result("stable_reinforce").got.startswith("a stand-in (importance sampling")
    refused = judge_stable_reinforce(None, "RequestFailedError: data[0] has none")
    enforce_contract(ContractReport((refused,)), {"loss_fn": "ppo"})  # a run that does not need it
    with pytest.raises(ContractError, match="config key loss_fn = 'stable_reinforce' needs the stable_rein"):
        enforce_contract(ContractReport((refused,)), {"loss_fn": "stable_reinforce"})
