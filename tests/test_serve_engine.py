"""``debate-kernel serve --model fake`` (:mod:`adapters.serve.engine`): the in-repo fake behind Tinker's
HTTP API, driven by the unmodified ``tinker`` SDK over 127.0.0.1 (the session's ``served_fake``), answers
as an in-process :class:`~adapters.tinker.fake.FakeServiceClient` of the same seed does, and the calls
only the server has (forward, sampler weights, loads, the checkpoint list) keep the fake's promises."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tinker
from tinker import types

from adapters.serve.engine import FAKE, engine
from adapters.serve.state import ServeCore
from adapters.tinker.fake import FakeServiceClient, batch_fingerprint
from tests._served import MODEL, SEED, ServedFake

PROMPT = types.ModelInput.from_ints(list(b"You are Agent 0, one of 2 agents.\nQuestion:\nWhat is 2 + 3?\n\n"))
PARAMS = types.SamplingParams(max_tokens=64, seed=3, stop=["</solution>"])


def _datum(tokens: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": np.array(tokens[1:], np.int64)},
    )


DATA = [_datum(list(b"2+3=5.")), _datum(list(b"7*6=42."))]


def _tokens(response: types.SampleResponse) -> list[list[int]]:
    return [list(s.tokens) for s in response.sequences]


def test_the_fake_engine_is_named_and_others_are_refused(tmp_path: Path) -> None:
    fake = engine(FAKE)
    assert (fake.suffix, fake.vocab_size) == (".json", 262)
    with pytest.raises(ValueError, match=r"unknown model 'Qwen/Qwen3-8B': .*or 'fake'"):
        engine("Qwen/Qwen3-8B")
    core = ServeCore(model=FAKE, root=tmp_path)
    assert [m.model_name for m in core.capabilities().supported_models] == [FAKE]


def test_training_and_sampling_answer_as_the_in_process_fake(served_fake: ServedFake) -> None:
    """forward_backward, optim_step, a snapshot's samples and compute_logprobs: equal to the in-process
    fake's, so a run computes the same whichever it trains on."""
    trainer = served_fake.client().create_lora_training_client(MODEL, rank=4).result()
    local = FakeServiceClient(seed=SEED).create_lora_training_client(MODEL, rank=4).result()
    for client in (trainer, local):
        client.forward_backward(DATA, "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    got = trainer.forward_backward(DATA, "cross_entropy").result()
    want = local.forward_backward(DATA, "cross_entropy").result()
    assert got.metrics["loss:sum"] == pytest.approx(want.metrics["loss:sum"], rel=1e-6)
    for a, b in zip(got.loss_fn_outputs, want.loss_fn_outputs, strict=True):
        np.testing.assert_array_equal(a["logprobs"].to_numpy(), b["logprobs"].to_numpy())
    remote_sampler = trainer.save_weights_and_get_sampling_client().result()
    local_sampler = local.save_weights_and_get_sampling_client().result()
    got_samples = remote_sampler.sample(PROMPT, 3, PARAMS).result()
    assert _tokens(got_samples) == _tokens(local_sampler.sample(PROMPT, 3, PARAMS).result())
    assert all(s.stop_reason == "stop" for s in got_samples.sequences)
    remote_lps = remote_sampler.compute_logprobs(PROMPT).result()
    local_lps = local_sampler.compute_logprobs(PROMPT).result()
    assert remote_lps[0] is None and len(remote_lps) == PROMPT.length
    np.testing.assert_allclose(np.array(remote_lps[1:], float), np.array(local_lps[1:], float), rtol=1e-6)


def test_forward_records_nothing_and_loads_and_sampler_weights_round_trip(served_fake: ServedFake) -> None:
    service = served_fake.client()
    trainer = service.create_lora_training_client(MODEL, rank=2).result()
    trainer.forward_backward(DATA, "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    path = trainer.save_state("one").result().path
    before = trainer.forward(DATA, "cross_entropy").result()
    trainer.forward(DATA, "cross_entropy").result()  # no gradient recorded: the next state is the same
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    state = served_fake.load_state(trainer.save_state("two").result().path)
    assert [step.batches for step in state.lineage] == [(batch_fingerprint(DATA),), ()]  # as sent
    loaded = service.create_training_client_from_state(path).result()  # the first state's weights
    again = loaded.forward(DATA, "cross_entropy").result()
    assert again.metrics["loss:sum"] == before.metrics["loss:sum"]
    sampler_path = trainer.save_weights_for_sampler("w").result().path
    assert sampler_path == f"tinker://{trainer.model_id}/sampler_weights/w"
    from_path = service.create_sampling_client(model_path=sampler_path).result()
    snapshot = trainer.save_weights_and_get_sampling_client().result()
    assert _tokens(from_path.sample(PROMPT, 2, PARAMS).result()) == _tokens(
        snapshot.sample(PROMPT, 2, PARAMS).result()
    )
    listed = tinker.RestClient(base_url=served_fake.url, api_key="tml-local")
    names = [c.checkpoint_id for c in listed.list_checkpoints(trainer.model_id).result().checkpoints]
    assert names == ["weights/one", "weights/two", "sampler_weights/w"]


def test_full_fine_tuning_is_refused_by_name(served_fake: ServedFake) -> None:
    with pytest.raises(tinker.RequestFailedError, match="the fake engine trains LoRA adapters only"):
        served_fake.client().create_lora_training_client(MODEL, rank=0).result()
