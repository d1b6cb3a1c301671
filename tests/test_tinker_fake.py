"""The fake Tinker service: real SDK types, determinism, snapshots, training records, saved states."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import tinker
from hypothesis import example, given
from hypothesis import strategies as st
from tinker import types

from adapters.tinker.fake import (
    FakePolicy,
    FakeServiceClient,
    ModelState,
    _stop_length,
    batch_fingerprint,
    load_state_file,
    token_logprobs,
)
from adapters.tinker.provenance import prompt_advantage_refusal
from adapters.tinker.renderers import ByteRenderer
from kernel import build_observation, initial_state, parse_response

T = TypeVar("T")
RENDERER = ByteRenderer()
PARAMS = types.SamplingParams(max_tokens=2000, stop=RENDERER.stop_sequences(), temperature=1.0)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _prompt(agent: int = 0, question: str = "What is 12 + 30?") -> tinker.ModelInput:
    state = initial_state(question, num_agents=3, max_rounds=2)
    return RENDERER.build_prompt(build_observation(state, agent).messages)


def _datum(prompt: tinker.ModelInput, seq: types.SampledSequence, advantage: float) -> types.Datum:
    tokens = [*prompt.to_ints(), *seq.tokens]
    n_prompt = prompt.length
    logprobs = np.zeros(len(tokens) - 1, np.float32)
    logprobs[n_prompt - 1 :] = seq.logprobs
    adv = np.zeros(len(tokens) - 1, np.float32)
    adv[n_prompt - 1 :] = advantage
    return types.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], np.int64),
            "logprobs": logprobs,
            "advantages": adv,
        },
    )


def test_samples_are_real_sdk_types_parse_and_repeat() -> None:
    async def main() -> None:
        tc = await FakeServiceClient(seed=3).create_lora_training_client("fake", rank=4)
        sampler = await tc.save_weights_and_get_sampling_client()
        first = await sampler.sample(_prompt(), 4, PARAMS)
        again = await sampler.sample(_prompt(), 4, PARAMS)
        assert isinstance(first, types.SampleResponse) and len(first.sequences) == 4
        for a, b in zip(first.sequences, again.sequences, strict=True):
            assert a.tokens == b.tokens and a.logprobs == b.logprobs
            assert a.stop_reason == "stop" and a.tokens[-1] == 261 and len(a.logprobs) == len(a.tokens)
            parsed = parse_response(RENDERER.text(a.tokens), author_id=0)
            assert parsed.ok and parsed.votes == ()  # agent 0 of round 1 judges nobody
        assert len({tuple(s.tokens) for s in first.sequences}) > 1  # samples differ by index

    run(main())


def test_max_tokens_cuts_with_length_reason_and_string_stops_are_kept() -> None:
    async def main() -> None:
        tc = await FakeServiceClient().create_lora_training_client("fake", rank=1)
        sampler = await tc.save_weights_and_get_sampling_client()
        short = await sampler.sample(_prompt(), 1, types.SamplingParams(max_tokens=5))
        assert short.sequences[0].stop_reason == "length" and len(short.sequences[0].tokens) == 5
        cut = await sampler.sample(_prompt(), 1, types.SamplingParams(stop=["</solution>"]))
        assert RENDERER.text(cut.sequences[0].tokens).endswith("</solution>")
        with pytest.raises(ValueError, match="num_samples"):
            await sampler.sample(_prompt(), 0, PARAMS)

    run(main())


def test_sampler_is_a_snapshot_and_on_policy_ratios_are_one() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=1)
        tc = await service.create_lora_training_client("fake", rank=4)
        old = await tc.save_weights_and_get_sampling_client()
        before = await old.sample(_prompt(), 2, PARAMS)
        datums = [_datum(_prompt(), s, 1.0) for s in before.sequences]
        out = await tc.forward_backward(datums, "importance_sampling")
        assert isinstance(out, types.ForwardBackwardOutput) and len(out.loss_fn_outputs) == 2
        for seq, datum, lp_out in zip(before.sequences, datums, out.loss_fn_outputs, strict=True):
            lp = lp_out["logprobs"].to_numpy()
            assert lp.shape == datum.loss_fn_inputs["target_tokens"].to_numpy().shape
            assert np.array_equal(lp[-len(seq.tokens) :], np.asarray(seq.logprobs, np.float32))
        # on-policy: the sampler's logprobs are the model's, so the IS loss is −Σ A over sampled tokens
        expected = -sum(len(s.tokens) for s in before.sequences)
        assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-5)
        step = await tc.optim_step(types.AdamParams(learning_rate=1e-4))
        assert isinstance(step, types.OptimStepResponse) and tc.state.version == 1
        assert (await old.sample(_prompt(), 2, PARAMS)).sequences[0].tokens == before.sequences[0].tokens
        new = await tc.save_weights_and_get_sampling_client()
        assert new.state.version == 1 and old.state.version == 0
        assert new.state.params != old.state.params

    run(main())


def test_training_is_recorded_in_the_lineage_and_the_event_log() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=2)
        tc = await service.create_lora_training_client("fake", rank=4)
        sampler = await tc.save_weights_and_get_sampling_client()
        seqs = (await sampler.sample(_prompt(), 3, PARAMS)).sequences
        batches = [[_datum(_prompt(), s, a)] for s, a in zip(seqs, [1.0, -1.0, 0.5], strict=True)]
        await tc.forward_backward(batches[0], "importance_sampling")
        await tc.forward_backward(batches[1], "ppo")
        await tc.optim_step(types.AdamParams())
        await tc.forward_backward(batches[2], "cross_entropy")
        assert [s.batches for s in tc.state.lineage] == [
            (batch_fingerprint(batches[0]), batch_fingerprint(batches[1]))
        ]
        assert tc.state.pending == (batch_fingerprint(batches[2]),)
        assert service.trained_batches() == [batch_fingerprint(b) for b in batches]
        assert [e.kind for e in service.events] == ["forward_backward"] * 2 + [
            "optim_step",
            "forward_backward",
        ]

    run(main())


def test_forward_backward_rejects_misaligned_data() -> None:
    async def main() -> None:
        tc = await FakeServiceClient().create_lora_training_client("fake", rank=1)
        bad = types.Datum(
            model_input=tinker.ModelInput.from_ints([1, 2, 3]),
            loss_fn_inputs={"target_tokens": np.array([2, 3], np.int64)},
        )
        with pytest.raises(ValueError, match="target_tokens must have"):
            await tc.forward_backward([bad], "cross_entropy")
        with pytest.raises(ValueError, match="loss_fn must be one of"):
            await tc.forward_backward([bad], "nope")  # type: ignore[arg-type]
        assert tc.state.pending == () and tc.service.events == []

    run(main())


def test_custom_loss_gets_logprobs_per_datum() -> None:
    async def main() -> None:
        tc = await FakeServiceClient().create_lora_training_client("fake", rank=1)
        d = types.Datum(
            model_input=tinker.ModelInput.from_ints([1, 2, 3]),
            loss_fn_inputs={"target_tokens": np.array([2, 3, 4], np.int64)},
        )
        seen: list[Any] = []

        def loss(data: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
            seen.extend(logprobs)
            return -sum(float(np.sum(lp)) for lp in logprobs), {"n": float(len(data))}

        out = await tc.forward_backward_custom([d], loss)
        assert len(seen) == 1 and seen[0].shape == (3,)
        assert np.array_equal(seen[0], token_logprobs(tc.state.params, [1, 2, 3, 4], 1))
        assert out.metrics["n"] == 1.0 and tc.state.pending == (batch_fingerprint([d]),)

    run(main())


def test_compute_logprobs_matches_token_logprobs() -> None:
    async def main() -> None:
        service = FakeServiceClient()
        ref = await service.create_sampling_client(base_model="fake")
        lps = await ref.compute_logprobs(tinker.ModelInput.from_ints([5, 6, 7]))
        assert lps[0] is None and lps[1:] == pytest.approx(token_logprobs(ref.state.params, [5, 6, 7], 1))
        with pytest.raises(ValueError, match="model_path or base_model"):
            await service.create_sampling_client()

    run(main())


def test_save_state_round_trips_in_memory_and_rejects_bad_paths() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=5)
        tc = await service.create_lora_training_client("fake", rank=2)
        await tc.optim_step(types.AdamParams())
        saved = await tc.save_state("ckpt-1")
        assert isinstance(saved, types.SaveWeightsResponse)
        again = await service.create_training_client_from_state_with_optimizer(saved.path)
        assert again.state == tc.state
        with pytest.raises(ValueError, match="not a readable saved state"):
            await service.create_training_client_from_state_with_optimizer("fake:///nowhere.json")
        with pytest.raises(ValueError, match="plain non-empty file name"):
            await tc.save_state("../escape")

    run(main())


def test_saved_state_resumes_in_a_new_process(tmp_path: Path) -> None:
    async def main() -> tuple[str, ModelState]:
        service = FakeServiceClient(seed=9, root=tmp_path)
        tc = await service.create_lora_training_client("fake", rank=2)
        sampler = await tc.save_weights_and_get_sampling_client()
        seq = (await sampler.sample(_prompt(), 1, PARAMS)).sequences[0]
        await tc.forward_backward([_datum(_prompt(), seq, 1.0)], "importance_sampling")
        await tc.optim_step(types.AdamParams())
        await tc.forward_backward([_datum(_prompt(), seq, 2.0)], "importance_sampling")  # not saved
        return (await tc.save_state("step-1")).path, tc.state

    path, state = run(main())
    code = (
        "import asyncio\n"
        "from adapters.tinker.fake import FakeServiceClient\n"
        "async def main():\n"
        f"    service = FakeServiceClient(root={str(tmp_path)!r})\n"
        f"    tc = await service.create_training_client_from_state_with_optimizer({path!r})\n"
        "    s = tc.state\n"
        "    print(s.version, s.params, len(s.trained_batches()), len(s.pending))\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", state.params, "1", "0"]
    assert load_state_file(path).lineage == state.lineage
    assert (tmp_path / "events.jsonl").read_text().count("forward_backward") == 2
    with pytest.raises(ValueError, match="not a saved fake model state"):
        ModelState.from_json('{"format": "other"}')


def test_policy_knobs() -> None:
    async def main() -> None:
        service = FakeServiceClient(policy=FakePolicy(malformed_rate=1.0))
        tc = await service.create_lora_training_client("fake", rank=1)
        sampler = await tc.save_weights_and_get_sampling_client()
        seq = (await sampler.sample(_prompt(), 1, PARAMS)).sequences[0]
        assert not parse_response(RENDERER.text(seq.tokens), author_id=0).ok

    run(main())
    with pytest.raises(ValueError, match="malformed_rate must be a probability"):
        FakePolicy(malformed_rate=1.5)


def test_base_model_sampler_matches_an_untrained_client() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=4)
        tc = await service.create_lora_training_client("fake", rank=16)
        ref = await service.create_sampling_client(base_model="fake")
        ids = tinker.ModelInput.from_ints([256, 65, 66, 67])
        mine = await (await tc.save_weights_and_get_sampling_client()).compute_logprobs(ids)
        assert await ref.compute_logprobs(ids) == mine  # KL to the reference is 0 before training
        await tc.optim_step(types.AdamParams())
        after = await (await tc.save_weights_and_get_sampling_client()).compute_logprobs(ids)
        assert after != mine

    run(main())


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("fb"), st.integers(0, 5)),
        st.tuples(st.just("step"), st.just(0)),
        st.tuples(st.just("save"), st.just(0)),
        st.tuples(st.just("restore"), st.just(0)),
    ),
    max_size=25,
)


@given(_OPS)
def test_lineage_follows_a_simple_model_through_saves_and_restores(ops: list[tuple[str, int]]) -> None:
    """The fake's record of training equals a list model: steps keep pending batches, restores drop them."""
    batches = [
        [
            types.Datum(
                model_input=tinker.ModelInput.from_ints([k, k + 1]),
                loss_fn_inputs={"target_tokens": np.array([k + 1, k + 2], np.int64)},
            )
        ]
        for k in range(6)
    ]

    async def main() -> None:
        service = FakeServiceClient(seed=0)
        tc = await service.create_lora_training_client("fake", rank=1)
        lineage: list[str] = []
        pending: list[str] = []
        saved: tuple[str, list[str]] | None = None
        for i, (op, k) in enumerate(ops):
            if op == "fb":
                await tc.forward_backward(batches[k], "cross_entropy")
                pending.append(batch_fingerprint(batches[k]))
            elif op == "step":
                await tc.optim_step(types.AdamParams())
                lineage, pending = lineage + pending, []
            elif op == "save":
                saved = ((await tc.save_state(f"s{i}")).path, list(lineage))
            elif saved is not None:
                tc = await service.create_training_client_from_state_with_optimizer(saved[0])
                lineage, pending = list(saved[1]), []
            assert tc.state.trained_batches() == lineage and list(tc.state.pending) == pending
        assert service.trained_batches() == [batch_fingerprint(batches[k]) for op, k in ops if op == "fb"]

    run(main())


@given(
    st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=12), min_size=1, max_size=5),
    st.integers(1, 3),
)
def test_batched_logprobs_and_fingerprints_equal_the_per_datum_reference(
    seqs: list[list[int]], chunks: int
) -> None:
    """The one-pass batch hash and the chunk-wise token reading equal token_logprobs / to_ints per datum."""
    from adapters.tinker.fake import _batch_logprobs, datum_fingerprint

    data = []
    for seq in seqs:
        cut = [seq[i::chunks] for i in range(chunks)]  # several chunks, concatenated in order below
        pieces = [c for c in cut if c]
        model_input = tinker.ModelInput(chunks=[types.EncodedTextChunk(tokens=c) for c in pieces])
        flat = [t for c in pieces for t in c]
        targets = np.asarray([*flat[1:], 7], np.int64)
        data.append(types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": targets}))
    lps, _ = _batch_logprobs("0123456789abcdef", data)
    for datum, lp in zip(data, lps, strict=True):
        ints = datum.model_input.to_ints()
        ref = token_logprobs("0123456789abcdef", [*ints, 7], 1)
        assert np.array_equal(lp, ref)
        h = hashlib.sha256(np.asarray(ints, np.int64).tobytes())
        for name in sorted(datum.loss_fn_inputs):
            arr = np.ascontiguousarray(datum.loss_fn_inputs[name].to_numpy())
            h.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
            h.update(arr.tobytes())
        assert datum_fingerprint(datum) == h.hexdigest()[:32]


def test_sampled_logprobs_equal_token_logprobs_over_prompt_and_answer() -> None:
    async def main() -> None:
        service = FakeServiceClient(seed=3)
        tc = await service.create_lora_training_client("m", rank=1)
        sampler = await tc.save_weights_and_get_sampling_client()
        prompt = _prompt()
        out = await sampler.sample(prompt, 2, PARAMS)
        for seq in out.sequences:
            full = [*prompt.to_ints(), *seq.tokens]
            assert np.array_equal(
                seq.logprobs_np, token_logprobs(sampler.state.params, full, len(prompt.to_ints()))
            )

    run(main())


def _stop_length_by_scan(tokens: list[int], stop: Any) -> int | None:
    """The slow reference: a slice compare at every position for each string stop's bytes."""
    if stop is None:
        return None
    best = len(tokens) + 1
    for s in [stop] if isinstance(stop, str) else list(stop):
        if isinstance(s, str):
            pattern = list(s.encode())
            for i in range(len(tokens) - len(pattern) + 1):
                if tokens[i : i + len(pattern)] == pattern:
                    best = min(best, i + len(pattern))
                    break
        elif s in tokens:
            best = min(best, tokens.index(s) + 1)
    return best if best <= len(tokens) else None


_SMALL_ALPHABET = st.sampled_from([0, 60, 47, 97, 98, 255, 256, 300, -1])
_STOP = st.one_of(
    st.text(alphabet="</ab\x00\xff", max_size=4),
    st.sampled_from([256, 300, 97, -1]),
)


@given(
    tokens=st.lists(_SMALL_ALPHABET, max_size=24),
    stop=st.one_of(st.none(), st.text(alphabet="</ab\x00\xff", max_size=4), st.lists(_STOP, max_size=3)),
)
@example(tokens=[97, 256, 98], stop="\x00")  # the placeholder byte of a non-byte id matches nothing
@example(tokens=[256, 97, 0, 97], stop=["\x00a"])  # the search goes on past a match covering a non-byte id
def test_stop_search_equals_a_scan_of_the_tokens(tokens: list[int], stop: Any) -> None:
    # Non-byte ids are written as byte 0 for bytes.find; a match may not cover one (stop "\x00" included).
    assert _stop_length(np.asarray(tokens, np.int64), stop) == _stop_length_by_scan(tokens, stop)


# ---- tinker 0.38: sequence ids of a session, stable_reinforce's spans, gspo ------------------------------


def _turn_datum(service: FakeServiceClient, *, stability: bool, spans: bool = True) -> types.Datum:
    """One sampled turn of ``service`` as a datum, with its provenance spans when ``spans``."""
    from adapters.tinker.convert import datums_to_tinker
    from kernel import build_datums, trajectories_from_lists

    async def main() -> tuple[list[int], Any]:
        tc = await service.create_lora_training_client("fake", 4)
        sampler = await tc.save_weights_and_get_sampling_client(record_stability_info=stability)
        prompt = tinker.ModelInput.from_ints(list(b"Question:\nWhat is 2 + 2?\n"))
        return prompt.to_ints(), (await sampler.sample(prompt, 1, PARAMS)).sequences[0]

    prompt, seq = run(main())
    traj = trajectories_from_lists([[(prompt, seq.tokens, seq.logprobs)]], [1.0])
    built = build_datums(traj, sequence_ids_N=[0] if spans else None)
    return datums_to_tinker(built.datums, spans=built.spans, sequence_ids=[seq.sequence_id])[0]


def _refusal(service: FakeServiceClient, data: list[types.Datum], loss: str = "stable_reinforce") -> Any:
    async def main() -> Any:
        tc = await service.create_lora_training_client("fake", 4)
        try:
            await tc.forward_backward(data, loss)  # type: ignore[arg-type]
        except tinker.RequestFailedError as e:
            return e
        return None

    return run(main())


def test_sequence_ids_are_the_sessions_fixed_at_submission_and_distinct() -> None:
    service = FakeServiceClient(seed=0, session="s1")

    async def main() -> list[str]:
        tc = await service.create_lora_training_client("fake", 4)
        a, b = (
            await tc.save_weights_and_get_sampling_client(),
            await service.create_sampling_client(base_model="fake"),
        )
        prompt = tinker.ModelInput.from_ints([1, 2, 3])
        pending = [a.sample(prompt, 2, PARAMS), b.sample(prompt, 1, PARAMS)]  # ids fixed here, in order
        later = await a.sample(prompt, 1, PARAMS)
        return [s.sequence_id for f in pending for s in (await f).sequences] + [
            later.sequences[0].sequence_id
        ]

    assert run(main()) == ["s1-0", "s1-1", "s1-2", "s1-3"]
    assert FakeServiceClient(seed=7).session.name == "fake7"


def test_stable_reinforce_needs_spans_naming_sequences_of_this_session_with_stability_info() -> None:
    from adapters.tinker.boundary import classify

    service = FakeServiceClient(seed=1, session="now")
    recorded = _turn_datum(service, stability=True)
    assert run(_accepted(service, [recorded]))  # spans of a recorded sample: trained
    bare = _turn_datum(service, stability=True, spans=False)
    unrecorded = _turn_datum(service, stability=False)
    elsewhere = _turn_datum(FakeServiceClient(seed=1, session="before"), stability=True)  # another session
    advantages = recorded.loss_fn_inputs["advantages"].to_numpy().copy()
    advantages[0] = 0.5  # the first target is a prompt token
    on_prompt = replace(recorded, loss_fn_inputs={**recorded.loss_fn_inputs, "advantages": advantages})
    cases = {
        "data[1] has none": [recorded, bare],
        "data[0] has advantage 0.5 at position 0, a prompt token": [on_prompt],
        "no stability record of sequence 'now-2'": [unrecorded],
        "no stability record of sequence 'before-0'": [recorded, elsewhere],
    }
    for message, data in cases.items():
        error = _refusal(service, data)
        assert isinstance(error, tinker.RequestFailedError) and message in str(error), (message, error)
        assert error.category == types.RequestErrorCategory.User
        failure = classify(error)
        assert (failure.cause, failure.transient) == ("request_failed_user", False)  # never retried
    assert _refusal(service, [bare, unrecorded, elsewhere], "importance_sampling") is None  # spans optional

    async def kl_coeff() -> Any:
        tc = await service.create_lora_training_client("fake", 4)
        with pytest.raises(
            tinker.RequestFailedError, match=r"no loss_fn_config in the fake \(got \['kl_coeff'\]"
        ):
            await tc.forward_backward([recorded], "stable_reinforce", {"kl_coeff": 0.01})

    run(kl_coeff())


@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=5),
    st.lists(st.sampled_from([0.0, 0.0, 0.5, -1.0]), min_size=15, max_size=15),
)
def test_a_prompt_advantage_is_refused_exactly_where_the_spans_say_prompt(
    runs: list[tuple[bool, int]], values: list[float]
) -> None:
    """``prompt_advantage_refusal`` names the first nonzero advantage on a position its loss spans give to
    a prompt, and nothing when every nonzero one is on a sampled position."""
    n = sum(length for _, length in runs)
    advantages = np.asarray(values[:n], np.float32)
    span = {True: types.PromptProvenanceSpan, False: types.SampledProvenanceSpan}
    datum = types.Datum(
        model_input=tinker.ModelInput.from_ints(list(range(n))),
        loss_fn_inputs={"target_tokens": np.arange(1, n + 1), "advantages": advantages},
    ).with_provenance(
        model_input=[types.PromptProvenanceSpan(sequence_id="s", length=n)],
        loss_fn_inputs=[span[prompt](sequence_id="s", length=length) for prompt, length in runs],
    )
    on_prompt = np.concatenate([np.full(length, prompt) for prompt, length in runs])
    wrong = np.flatnonzero(on_prompt & (advantages != 0))
    refusal = prompt_advantage_refusal([datum], "stable_reinforce")
    if wrong.size:
        assert refusal is not None and f"at position {wrong[0]}," in refusal
    else:
        assert refusal is None
    assert prompt_advantage_refusal([datum], "importance_sampling") is None


async def _accepted(service: FakeServiceClient, data: list[types.Datum]) -> bool:
    tc = await service.create_lora_training_client("fake", 4)
    out = await tc.forward_backward(data, "stable_reinforce")
    # its value is importance sampling's, and the response says it is a stand-in (as the local service's)
    return out.loss_fn_output_type == "stable_reinforce" and out.metrics["loss/stand_in:max"] == 1.0


def test_gspo_is_the_kernels_and_needs_its_thresholds() -> None:
    from adapters.tinker.fake import forward_backward, initial_model_state
    from kernel import gspo_loss

    service = FakeServiceClient(seed=2)
    datum = _turn_datum(service, stability=False)
    state = initial_model_state("fake", 4, 3)  # weights other than the sampler's: the ratio s is not 1
    clip = {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}
    with pytest.raises(tinker.RequestFailedError, match="clip_low_threshold"):
        forward_backward(state, [datum], "gspo", {"clip_high_threshold": 1.1})
    _, out = forward_backward(state, [datum], "gspo", clip)
    lp = out.loss_fn_outputs[0]["logprobs"].to_numpy()
    inputs = {k: v.to_numpy() for k, v in datum.loss_fn_inputs.items()}
    want = gspo_loss(
        lp, inputs["logprobs"], inputs["advantages"], **clip, ratio_where=inputs["advantages"] != 0
    )
    assert out.metrics["loss:sum"] == pytest.approx(float(want.loss), rel=1e-6)
    _, is_out = forward_backward(state, [datum], "importance_sampling")
    assert is_out.metrics["loss:sum"] != pytest.approx(out.metrics["loss:sum"])
