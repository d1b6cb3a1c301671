"""``debate-kernel serve`` driven by the unmodified ``tinker`` SDK over 127.0.0.1.

One server (the ``tiny`` model, seed 0) per test process; every SDK call is checked against a fresh
in-process :class:`LocalServiceClient` with the same seed, which is what the server runs per training
run and per sampling session.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker import types
from tinker.lib.client_connection_pool_type import ClientConnectionPoolType
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import deserialize_forward_backward_output, deserialize_sample_response

from adapters.local import model as local_model
from adapters.local.service import LocalSamplingClient, LocalServiceClient, LocalTrainingClient
from adapters.serve import wire
from adapters.serve.app import BATCH_ROWS, _Worker, row_batches
from adapters.serve.process import ServerError, first_line, served
from adapters.serve.state import Job, ServeCore, ServeError
from adapters.tokenizers import ByteTokenizer
from tests._profile import examples

READY_TIMEOUT = 120.0
"""Seconds a server may take to print its ready line before the test fails (generous: a loaded machine
imports JAX slowly; a broken server fails instead of hanging)."""

API_KEY = "tml-local"
RANK = 4
TOKENS = list(b"2+3=5. 7*6=42.")


TRY_AGAIN_FIRST = 2
"""The session's server answers every future ``try_again`` this many times before its result (a fault
injected behind the routes: the SDK must keep polling, as with a busy Tinker)."""


def _start(root: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    serve = ["serve", "--model", "tiny", "--port", "0", "--root", str(root), *extra]
    cmd = [sys.executable, "-m", "adapters.cli", *serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    line = first_line(proc, READY_TIMEOUT)
    if not line.startswith("serving on http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"no ready line: {line!r}")
    return proc, line.removeprefix("serving on ").strip()


@pytest.fixture(scope="session")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("serve")
    extra = ("--try-again-first", str(TRY_AGAIN_FIRST))
    with served("tiny", root=root, log=root / "serve.log", extra=extra) as url:  # SIGTERM at the end
        yield url


@pytest.fixture(scope="session")
def service(base_url: str) -> Iterator[tinker.ServiceClient]:
    client = tinker.ServiceClient(base_url=base_url, api_key=API_KEY)
    yield client
    client.close("success").result()


@pytest.fixture
def trainer(service: tinker.ServiceClient) -> tinker.TrainingClient:
    return service.create_lora_training_client("tiny", rank=RANK).result()


def _local(tmp_path: Path) -> LocalTrainingClient:
    """The in-process twin of a fresh server run."""
    return LocalServiceClient(seed=0, root=tmp_path).create_lora_training_client("tiny", rank=RANK).result()


def ce_datum(tokens: list[int]) -> types.Datum:
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * n},
    )


def rl_datum(tokens: list[int]) -> types.Datum:
    n = len(tokens) - 1
    logprobs = [-1.0 - 0.1 * i for i in range(n)]
    advantages = [0.5 if i % 2 else -0.25 for i in range(n)]
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "logprobs": logprobs, "advantages": advantages},
    )


def _logprobs(out: types.ForwardBackwardOutput) -> list[np.ndarray]:
    return [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]


def _assert_same_output(remote: types.ForwardBackwardOutput, local: types.ForwardBackwardOutput) -> None:
    assert remote.metrics["loss:sum"] == pytest.approx(local.metrics["loss:sum"], rel=1e-5)
    for a, b in zip(_logprobs(remote), _logprobs(local), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --- the protobuf bodies against the SDK's own converters (no server) --------------------------------


def test_wire_round_trips_through_the_sdk_converters() -> None:
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=[ce_datum(TOKENS), rl_datum(TOKENS[:5])],
            loss_fn="ppo",
            loss_fn_config={"clip_low_threshold": 0.8},
        ),
        model_id="m",
        seq_id=3,
    )
    msg = forward_backward_request_to_proto(request)
    msg.forward_only = True
    back, forward_only = wire.parse_forward_backward_request(msg.SerializeToString())
    assert forward_only and back.model_id == "m" and back.seq_id == 3
    assert back.forward_backward_input.loss_fn_config == {"clip_low_threshold": 0.8}
    for a, b in zip(back.forward_backward_input.data, request.forward_backward_input.data, strict=True):
        assert a.model_input.to_ints() == b.model_input.to_ints()
        assert {k: v.tolist() for k, v in a.loss_fn_inputs.items()} == {
            k: v.tolist() for k, v in b.loss_fn_inputs.items()
        }
    out = types.ForwardBackwardOutput(
        "ArrayRecord",
        [{"logprobs": types.TensorData.from_numpy(np.arange(n, dtype=np.float32))} for n in (3, 0, 5)],
        {"loss:sum": 1.5},
    )
    decoded = deserialize_forward_backward_output(wire.encode_forward_backward_output(out))
    assert decoded.metrics == {"loss:sum": 1.5}
    assert [o["logprobs"].tolist() for o in decoded.loss_fn_outputs] == [[0, 1, 2], [], [0, 1, 2, 3, 4]]
    seq = types.SampledSequence(
        stop_reason="stop",
        sequence_id="s",
        tokens_np=np.array([1, 2], np.int32),
        logprobs_np=np.array([-1.0, -2.0], np.float32),
    )
    sample = types.SampleResponse(sequences=[seq], prompt_logprobs_np=np.array([np.nan, -0.5], np.float32))
    got = deserialize_sample_response(wire.encode_sample_response(sample))
    assert got.sequences[0].tokens == [1, 2] and got.sequences[0].logprobs == [-1.0, -2.0]
    assert got.sequences[0].stop_reason == "stop" and got.prompt_logprobs == [None, -0.5]


def test_core_refuses_unknown_models_and_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'Qwen/Qwen3-8B'"):
        ServeCore(model="Qwen/Qwen3-8B", root=tmp_path)
    core = ServeCore(model="tiny", root=tmp_path)
    for bad in ("/tmp/x", "tinker://run/other/x", "tinker://../weights/x", "tinker://run/weights/.x"):
        with pytest.raises(ServeError):
            core.resolve(bad)


def test_a_finished_session_frees_its_runs_and_samplers(tmp_path: Path) -> None:
    """``ServiceClient.close`` (``finish_session``) frees what the session holds, as the SDK has no call
    that frees one training client: its runs and samplers are gone, another session's stay, and a state
    it saved stays readable."""
    core = ServeCore(model="tiny", root=tmp_path)
    new = types.CreateSessionRequest(tags=[], user_metadata=None, sdk_version="0.38.0")
    closed, open_ = (core.create_session(new).session_id for _ in range(2))

    def run(session_id: str) -> str:
        lora = types.LoraConfig(rank=RANK)
        req = types.CreateModelRequest(
            session_id=session_id, model_seq_id=0, base_model="tiny", lora_config=lora
        )
        return str(core.create_model(req).work().model_id)

    gone, kept = run(closed), run(open_)
    core.save_weights_for_sampler(
        types.SaveWeightsForSamplerRequest(model_id=gone, sampling_session_seq_id=0)
    ).work()
    core.save_weights(types.SaveWeightsRequest(model_id=gone, path="state")).work()
    core.finish_session(closed)
    with pytest.raises(ServeError, match="unknown model_id"):
        core.get_info(types.GetInfoRequest(model_id=gone))
    with pytest.raises(ServeError, match="unknown sampler"):
        core.get_sampler(f"{closed}:sample:0")
    assert core.get_info(types.GetInfoRequest(model_id=kept)).lora_rank == RANK
    assert core.resolve(f"tinker://{gone}/weights/state", kind="weights")[0].is_file()


def _sample_requests(session_id: str, n: int = 7) -> list[types.SampleRequest]:
    """``n`` one-row requests of one sampler: numbered by the sampler (no seed) or seeded, with stops."""
    params = [
        types.SamplingParams(
            max_tokens=6, temperature=1.0, seed=None if i % 3 else 40 + i, stop=["e"] * (i % 2)
        )
        for i in range(n)
    ]
    return [
        types.SampleRequest(
            sampling_session_id=f"{session_id}:sample:0",
            seq_id=i,
            num_samples=1,
            prompt=types.ModelInput.from_ints(list(f"{i}+{i}=".encode())),
            sampling_params=params[i],
        )
        for i in range(n)
    ]


def _sampling_core(root: Path) -> tuple[ServeCore, str]:
    core = ServeCore(model="tiny", root=root)
    session = core.create_session(
        types.CreateSessionRequest(tags=[], user_metadata=None, sdk_version="0.38.0")
    )
    req = types.CreateSamplingSessionRequest(
        session_id=session.session_id, sampling_session_seq_id=0, base_model="tiny"
    )
    core.create_sampling_session(req)
    return core, session.session_id


def _sequences(response: types.SampleResponse) -> list[tuple[list[int], str, list[float]]]:
    return [(s.tokens, s.stop_reason, list(s.logprobs or [])) for s in response.sequences]


def test_concurrent_samples_are_batched_and_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samples waiting together run in batches of BATCH_ROWS rows (the tail of fewer rows in one call, which
    the service pads to 4 rows) and give what each request gives one by one, on a fresh server of the same
    seed: the same tokens and stop reasons, logprobs equal up to the float rounding of a differently
    shaped program (a batch of 4 rows against 1); a request's random
    stream (its seed, or its number in the sampler's requests) does not depend on the batch it is in."""
    calls: list[int] = []
    real = local_model.generate_rows

    def counting(cfg: Any, params: Any, rows: list[Any], **kw: Any) -> Any:
        calls.append(len(rows))
        return real(cfg, params, rows, **kw)

    monkeypatch.setattr(local_model, "generate_rows", counting)
    alone_core, alone_session = _sampling_core(tmp_path / "alone")
    one_by_one = [_sequences(alone_core.asample(r).work()) for r in _sample_requests(alone_session)]
    assert calls == [1] * 7
    calls.clear()

    core, session = _sampling_core(tmp_path / "batched")
    worker = _Worker(poll_seconds=1.0, try_again_first=0)
    gate = threading.Event()  # holds the worker, so that every sample waits before the first runs
    worker.submit(Job(types.UntypedAPIFuture(request_id="gate"), lambda: gate.wait()))
    jobs = [core.asample(r) for r in _sample_requests(session)]
    for job in jobs:
        worker.submit(job)
    gate.set()
    together = [_sequences(worker.pending[j.future.request_id].result(timeout=600)) for j in jobs]
    worker.pool.shutdown()
    assert calls == [4, 3]  # four requests in one call (a size of BATCH_ROWS), the last three in one (padded)
    for mine, theirs in zip(together, one_by_one, strict=True):
        assert [(t, why) for t, why, _ in mine] == [(t, why) for t, why, _ in theirs]
        for (_, _, lp_a), (_, _, lp_b) in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(lp_a, lp_b, atol=1e-5)
    assert len({tuple(t) for seqs in together for t, _, _ in seqs}) > 3  # the requests drew apart


@settings(max_examples=examples(30))
@given(st.lists(st.integers(1, 70), max_size=40))
def test_row_batches_cover_every_request_once_in_order_in_the_batch_sizes(rows: list[int]) -> None:
    batches = row_batches(rows)
    assert [i for b in batches for i in b] == list(range(len(rows)))
    for batch in batches:
        taken = sum(rows[i] for i in batch)
        assert len(batch) == 1 or taken <= BATCH_ROWS[0]
        left = sum(rows[batch[0] :])
        if left < BATCH_ROWS[-1]:  # the tail: every request left, in one batch (padded by the service)
            assert batch is batches[-1] and batch[-1] == len(rows) - 1
        elif len(batch) > 1:  # several requests: within the largest size the rows left can fill
            assert taken <= max(b for b in BATCH_ROWS if b <= left)
    if rows and all(r == 1 for r in rows):  # one row each: every batch is a size, but the tail
        assert all(len(b) in BATCH_ROWS for b in batches[:-1])
        assert len(batches[-1]) in BATCH_ROWS or len(batches[-1]) < BATCH_ROWS[-1]


# --- the server through the SDK ----------------------------------------------------------------------


def test_capabilities_list_the_served_model(base_url: str) -> None:
    caps = tinker.RestClient(base_url=base_url, api_key=API_KEY).get_server_capabilities().result()
    assert [(m.model_name, m.trainable, m.sampleable) for m in caps.supported_models] == [
        ("tiny", True, True)
    ]


def test_the_sdk_finds_the_server_from_the_environment(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_BASE_URL", base_url)
    monkeypatch.setenv("TINKER_API_KEY", API_KEY)
    with tinker.ServiceClient() as client:
        assert client.holder.get_session_id().startswith("session-")


def test_sessions_and_heartbeats(service: tinker.ServiceClient, base_url: str) -> None:
    holder = service.holder  # creating the holder creates the session
    session_id = holder.get_session_id()

    async def beat(sid: str) -> Any:
        with holder.aclient(ClientConnectionPoolType.SESSION) as c:
            return await c.service.session_heartbeat(session_id=sid, max_retries=0)

    assert holder.run_coroutine_threadsafe(beat(session_id)).result().type == "session_heartbeat"
    with pytest.raises(tinker.NotFoundError, match="unknown session 'nope'"):
        holder.run_coroutine_threadsafe(beat("nope")).result()
    other = tinker.ServiceClient(base_url=base_url, api_key=API_KEY)
    other_id = other.holder.get_session_id()
    assert other_id != session_id
    other.close("success").result()
    with pytest.raises(tinker.APIStatusError, match="has finished") as info:
        holder.run_coroutine_threadsafe(beat(other_id)).result()
    assert info.value.status_code == 410  # the SDK's heartbeat loop stops on 410


def test_futures_that_answer_try_again_are_polled_until_done(
    trainer: tinker.TrainingClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tinker"):
        out = trainer.forward([ce_datum(TOKENS)], "cross_entropy").result()
    assert len(out.loss_fn_outputs) == 1
    assert caplog.text.count("because of try_again") == TRY_AGAIN_FIRST


def test_training_client_info_and_tokenizer(trainer: tinker.TrainingClient) -> None:
    info = trainer.get_info()
    assert (info.model_data.model_name, info.is_lora, info.lora_rank) == ("tiny", True, RANK)
    tok = trainer.get_tokenizer()  # a local folder the server wrote: no download
    byte = ByteTokenizer()
    for text in ("hé llo\n", "a<|eos|>b"):
        assert tok.encode(text, add_special_tokens=False) == byte.encode(text)
    ids = [byte.special_id("<|user|>"), 104, 105, byte.eos_token_id]
    assert tok.decode(ids) == byte.decode(ids) and tok.eos_token_id == byte.eos_token_id


def _ratio_masked(tokens: list[int]) -> types.Datum:
    """An RL datum with gspo's ``sequence_ratio_mask`` (its first three positions out of the ratio)."""
    inputs = {**rl_datum(tokens).loss_fn_inputs, "sequence_ratio_mask": [0.0] * 3 + [1.0] * (len(tokens) - 4)}
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)


_LOSS_CASES: list[tuple[types.LossFnType, list[types.Datum], dict[str, float] | None]] = [
    ("cross_entropy", [ce_datum(TOKENS), ce_datum(TOKENS[:6])], None),
    ("importance_sampling", [rl_datum(TOKENS)], None),
    ("ppo", [rl_datum(TOKENS)], {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
    ("cispo", [rl_datum(TOKENS)], None),
    ("dro", [rl_datum(TOKENS)], {"beta": 0.1}),
    (
        "gspo",
        [rl_datum(TOKENS), _ratio_masked(TOKENS[:8])],
        {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
    ),
]


@pytest.mark.parametrize(("loss_fn", "data", "config"), _LOSS_CASES, ids=[c[0] for c in _LOSS_CASES])
def test_forward_backward_every_loss_matches_the_local_service(
    trainer: tinker.TrainingClient,
    tmp_path: Path,
    loss_fn: types.LossFnType,
    data: list[types.Datum],
    config: dict[str, float] | None,
) -> None:
    """One loss a test (each compiles its own program: together they passed 20 s on a cold cache)."""
    remote = trainer.forward_backward(data, loss_fn, config).result()
    _assert_same_output(remote, _local(tmp_path).forward_backward(data, loss_fn, config).result())


def test_forward_and_optim_step_match_the_local_service(
    trainer: tinker.TrainingClient, tmp_path: Path
) -> None:
    local = _local(tmp_path)
    data = [ce_datum(TOKENS)]
    _assert_same_output(
        trainer.forward(data, "cross_entropy").result(), local.forward(data, "cross_entropy").result()
    )
    adam = types.AdamParams(learning_rate=1e-2)
    trainer.forward_backward(data, "cross_entropy").result()
    local.forward_backward(data, "cross_entropy").result()
    remote_step, local_step = trainer.optim_step(adam).result(), local.optim_step(adam).result()
    assert remote_step.metrics is not None and local_step.metrics is not None
    assert remote_step.metrics["grad_norm"] == pytest.approx(local_step.metrics["grad_norm"], rel=1e-5)
    _assert_same_output(
        trainer.forward(data, "cross_entropy").result(), local.forward(data, "cross_entropy").result()
    )


def test_lora_target_flags_reach_the_local_service(service: tinker.ServiceClient, tmp_path: Path) -> None:
    flags = {"train_attn": False, "train_unembed": False}  # the MLP's adapters only
    remote = service.create_lora_training_client("tiny", rank=RANK, **flags).result()
    local = LocalServiceClient(seed=0, root=tmp_path).create_lora_training_client("tiny", rank=RANK, **flags)
    every = LocalServiceClient(seed=0, root=tmp_path / "all").create_lora_training_client("tiny", rank=RANK)
    data, adam = [ce_datum(TOKENS)], types.AdamParams(learning_rate=1e-2)
    norms = []
    for client in (remote, local.result(), every.result()):
        client.forward_backward(data, "cross_entropy").result()
        metrics = client.optim_step(adam).result().metrics
        assert metrics is not None
        norms.append(metrics["grad_norm"])
    assert norms[0] == pytest.approx(norms[1], rel=1e-5)  # the served run trains the same adapters
    assert norms[0] < 0.99 * norms[2]  # fewer than every target's (a fresh adapter: only B has a gradient)


def test_forward_backward_custom_runs_as_forward_plus_a_linear_loss(
    trainer: tinker.TrainingClient, tmp_path: Path
) -> None:
    import jax.numpy as jnp
    import torch

    data = [ce_datum(TOKENS)]

    def torch_loss(batch: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        loss = sum((lp * lp).sum() for lp in logprobs)
        return loss, {"n": float(sum(lp.numel() for lp in logprobs))}

    def jax_loss(batch: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        return sum(jnp.sum(lp * lp) for lp in logprobs), {"n": float(sum(lp.size for lp in logprobs))}

    assert torch.is_grad_enabled()
    remote = trainer.forward_backward_custom(data, torch_loss).result()
    local = _local(tmp_path)
    expected = local.forward_backward_custom(data, jax_loss).result()
    for key in ("loss:sum", "surrogate_loss:sum", "n"):
        assert remote.metrics[key] == pytest.approx(expected.metrics[key], rel=1e-5), key
    adam = types.AdamParams(learning_rate=1e-2)
    trainer.optim_step(adam).result()
    local.optim_step(adam).result()  # the same gradient was accumulated: the same step
    _assert_same_output(
        trainer.forward(data, "cross_entropy").result(), local.forward(data, "cross_entropy").result()
    )


def test_save_state_load_state_and_resume_with_optimizer(
    service: tinker.ServiceClient, trainer: tinker.TrainingClient, base_url: str
) -> None:
    data = [ce_datum(TOKENS)]
    adam = types.AdamParams(learning_rate=1e-2)
    trainer.forward_backward(data, "cross_entropy").result()
    trainer.optim_step(adam).result()
    path = trainer.save_state("step1").result().path
    assert path == f"tinker://{trainer.model_id}/weights/step1"
    with pytest.raises(tinker.RequestFailedError, match="exists already"):
        trainer.save_state("step1").result()
    resumed = service.create_training_client_from_state_with_optimizer(path).result()
    assert resumed.get_info().lora_rank == RANK
    for client in (trainer, resumed):  # one more identical step from the same weights and Adam moments
        client.forward_backward(data, "cross_entropy").result()
        client.optim_step(adam).result()
    _assert_same_output(
        resumed.forward(data, "cross_entropy").result(), trainer.forward(data, "cross_entropy").result()
    )
    fresh = service.create_lora_training_client("tiny", rank=RANK).result()
    with pytest.warns(FutureWarning, match="load_state"):  # deprecated in the SDK, still served
        fresh.load_state_with_optimizer(path).result()
    weights_only = service.create_training_client_from_state(path).result()
    with pytest.warns(FutureWarning, match="load_state"):
        fresh.load_state(path).result()  # the same weights again, with a fresh optimizer
    _assert_same_output(
        fresh.forward(data, "cross_entropy").result(), weights_only.forward(data, "cross_entropy").result()
    )
    rest = tinker.RestClient(base_url=base_url, api_key=API_KEY)
    listed = rest.list_checkpoints(trainer.model_id).result().checkpoints
    assert [(c.checkpoint_id, c.checkpoint_type, c.tinker_path) for c in listed] == [
        ("weights/step1", "training", path)
    ]
    assert path in {c.tinker_path for c in rest.list_user_checkpoints().result().checkpoints}


def _local_sample(
    sampler: LocalSamplingClient, prompt: list[int], n: int, params: types.SamplingParams
) -> Any:
    return sampler.sample(types.ModelInput.from_ints(prompt), n, params).result()


def test_sampling_matches_the_local_service(trainer: tinker.TrainingClient, tmp_path: Path) -> None:
    remote = trainer.save_weights_and_get_sampling_client().result()
    local = _local(tmp_path).save_weights_and_get_sampling_client().result()
    prompt = list(b"Hi")
    cases = [  # stop strings, stop token ids, temperature and the top-k / top-p filters
        types.SamplingParams(
            max_tokens=8, seed=5, temperature=0.9, top_k=200, top_p=0.99, stop=[*"abcdefghijklm"]
        ),
        types.SamplingParams(max_tokens=8, seed=7, stop=list(range(0, 262, 4))),
    ]
    for params in cases:
        got = remote.sample(types.ModelInput.from_ints(prompt), 3, params).result()
        want = _local_sample(local, prompt, 3, params)
        assert [s.tokens for s in got.sequences] == [s.tokens for s in want.sequences]
        assert [s.stop_reason for s in got.sequences] == [s.stop_reason for s in want.sequences]
        assert "stop" in {s.stop_reason for s in got.sequences}  # the stops were met, not just sent
        for a, b in zip(got.sequences, want.sequences, strict=True):
            np.testing.assert_allclose(a.logprobs or [], b.logprobs or [], rtol=1e-5, atol=1e-6)
        assert len({s.sequence_id for s in got.sequences}) == 3


def test_compute_logprobs_and_prompt_logprobs(trainer: tinker.TrainingClient, tmp_path: Path) -> None:
    remote = trainer.save_weights_and_get_sampling_client().result()
    local = _local(tmp_path).save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(TOKENS)
    got = remote.compute_logprobs(prompt).result()
    want = local.compute_logprobs(prompt).result()
    assert got[0] is None and want[0] is None
    np.testing.assert_allclose(np.array(got[1:], float), np.array(want[1:], float), rtol=1e-5, atol=1e-6)
    last = remote.compute_logprobs(prompt, prompt_logprobs_last_n=3).result()
    assert last[:-3] == [None] * (len(TOKENS) - 3)
    np.testing.assert_allclose(np.array(last[-3:], float), np.array(want[-3:], float), rtol=1e-5, atol=1e-6)

    async def async_sample() -> types.SampleResponse:  # the SDK's async API: await the future
        return await remote.sample(
            prompt, 1, types.SamplingParams(max_tokens=2, seed=1), include_prompt_logprobs=True
        )

    response = asyncio.run(async_sample())
    assert response.prompt_logprobs is not None
    np.testing.assert_allclose(
        np.array(response.prompt_logprobs[1:], float), np.array(want[1:], float), rtol=1e-5
    )


def test_sampling_clients_from_the_base_model_and_from_saved_weights(
    service: tinker.ServiceClient, trainer: tinker.TrainingClient, tmp_path: Path
) -> None:
    params = types.SamplingParams(max_tokens=6, seed=11)
    prompt = types.ModelInput.from_ints(list(b"Q:"))
    base = service.create_sampling_client(base_model="tiny").result()
    assert base.get_base_model() == "tiny"
    local_base = LocalServiceClient(seed=0, root=tmp_path).create_sampling_client(base_model="tiny").result()
    want = local_base.sample(prompt, 2, params).result()
    assert [s.tokens for s in base.sample(prompt, 2, params).result().sequences] == [
        s.tokens for s in want.sequences
    ]
    saved = trainer.save_weights_for_sampler("w0").result().path
    assert saved == f"tinker://{trainer.model_id}/sampler_weights/w0"
    from_path = service.create_sampling_client(model_path=saved).result()
    snapshot = trainer.save_weights_and_get_sampling_client().result()
    got = [s.tokens for s in from_path.sample(prompt, 2, params).result().sequences]
    assert got == [s.tokens for s in snapshot.sample(prompt, 2, params).result().sequences]


def test_unsupported_requests_get_the_sdk_error_classes(
    service: tinker.ServiceClient, trainer: tinker.TrainingClient, base_url: str
) -> None:
    with pytest.raises(tinker.BadRequestError, match="unknown base model 'Qwen/Qwen3-8B'"):
        service.create_lora_training_client("Qwen/Qwen3-8B", rank=RANK).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints([1, 2, 3])
    with pytest.raises(tinker.BadRequestError, match="does not support sampling with topk_sample_logprobs"):
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=1), topk_sample_logprobs=2).result()
    with pytest.raises(tinker.NotFoundError, match="does not support GET /api/v1/training_runs/x"):
        tinker.RestClient(base_url=base_url, api_key=API_KEY).get_training_run("x").result()
    state = trainer.save_state("not-for-sampling").result().path
    with pytest.raises(tinker.BadRequestError, match="is not sampler weights"):
        service.create_sampling_client(model_path=state).result()
    with pytest.raises(tinker.NotFoundError, match="no checkpoint at"):
        service.create_sampling_client(
            model_path=f"tinker://{trainer.model_id}/sampler_weights/none"
        ).result()


def test_a_failed_request_raises_request_failed_with_the_message(service: tinker.ServiceClient) -> None:
    trainer = service.create_lora_training_client("tiny", rank=RANK).result()
    with pytest.raises(tinker.RequestFailedError, match="beta"):
        trainer.forward_backward([rl_datum(TOKENS)], "dro").result()  # dro needs loss_fn_config beta


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stops_the_server_with_exit_0(tmp_path: Path, stop: signal.Signals) -> None:
    proc, url = _start(tmp_path)
    caps = tinker.RestClient(base_url=url, api_key=API_KEY).get_server_capabilities().result()
    assert caps.supported_models[0].model_name == "tiny"
    proc.send_signal(stop)
    assert proc.wait(timeout=60) == 0
    assert proc.stdout is not None and proc.stdout.read() == ""  # the ready line was the only one
    assert os.path.isdir(tmp_path / "tokenizer")


def test_a_server_that_cannot_start_is_named_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(
        ServerError, match=r"did not start \(it exited with status 2\); its log ends:\n.*no-such"
    ):
        with served("no-such-model", root=tmp_path, log=tmp_path / "serve.log"):
            raise AssertionError("a server of an unknown model got ready")


def test_the_app_makes_fewer_gc_passes_and_keeps_freed_memory_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``train``'s loop does in its own process. Without the malloc settings a warm-start
    ``forward_backward`` in the server faulted XLA's buffers in afresh on every call: 0.70-0.78 s a call
    and 7 s of system time in 14 steps, against 0.56-0.67 s in process."""
    import gc

    from adapters._gc import GC_THRESHOLDS
    from adapters.serve.app import create_app
    from adapters.tinker import memory

    calls: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr(memory, "glibc_function", lambda name: lambda *args: calls.append((name, args)) or 1)
    app = create_app(ServeCore(model="fake", root=tmp_path))
    before = gc.get_threshold()
    assert before != GC_THRESHOLDS

    async def serving() -> tuple[tuple[int, int, int], list[tuple[str, tuple[int, ...]]]]:
        async with app.router.lifespan_context(app):  # what uvicorn runs around the serving
            return gc.get_threshold(), list(calls)

    thresholds, inside = asyncio.run(serving())
    assert thresholds == GC_THRESHOLDS
    assert inside == [("mallopt", (-3, 1 << 30)), ("mallopt", (-1, 1 << 31))]  # mmap, trim thresholds
    assert gc.get_threshold() == before
    assert calls[-1] == ("malloc_trim", (0,))  # set back when the server stops


def test_serve_runs_on_uvloop_where_installed_else_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    from adapters.cli.serve import _event_loop

    assert _event_loop() is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed: `import uvloop` raises ImportError
    assert _event_loop() is None
