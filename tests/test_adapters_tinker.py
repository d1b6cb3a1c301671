"""Tinker conversion: real SDK 0.38 types built offline (no client, no network)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import tinker
from hypothesis import given
from hypothesis import strategies as st
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto

from adapters.tinker.convert import (
    build_tinker_datums,
    datums_to_tinker,
    trajectories_from_samples,
    transitions_from_response,
    without_mask,
)
from adapters.tinker.tokens import TokenArray
from kernel import DATUM_STATUS, build_datums, trajectories_from_lists
from kernel.testing.strategies import token_trajectories


def seq(tokens: list[int], logprobs: list[float] | None, *, arrays: bool = True) -> types.SampledSequence:
    if arrays:
        return types.SampledSequence(
            stop_reason="stop",
            sequence_id="s",
            tokens_np=np.asarray(tokens, np.int32),
            logprobs_np=None if logprobs is None else np.asarray(logprobs, np.float32),
        )
    return types.SampledSequence(
        stop_reason="stop", sequence_id="s", _tokens_list=tokens, _logprobs_list=logprobs
    )


def image(data: bytes, n: int) -> types.ImageChunk:
    return types.ImageChunk(data=data, format="png", expected_tokens=n)


def text(tokens: list[int]) -> types.EncodedTextChunk:
    return types.EncodedTextChunk(tokens=tokens)


def wire(data: list[tinker.Datum]) -> bytes:
    """The bytes the SDK sends for a forward_backward request with these datums."""
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="importance_sampling"),
        model_id="m",
        seq_id=1,
    )
    return forward_backward_request_to_proto(request).SerializeToString()


class ShortSegment(Exception):
    """The reference's "need at least 2 tokens for input/target split"."""


# --- a slow reference with opaque chunks: the flat element list of tinker-cookbook ----------------------


def chunked_oracle(
    transitions: list[tuple[types.ModelInput, list[int], list[float]]], adv: float
) -> list[dict[str, Any]]:
    """Per datum: input chunks (text merged), targets (0 on chunk positions), logprobs, advantages."""

    def flat(mi: types.ModelInput) -> list[Any]:
        out: list[Any] = []
        for c in mi.chunks:
            out.extend(c.tokens if isinstance(c, types.EncodedTextChunk) else [c])
        return out

    def width(e: Any) -> int:
        return 1 if isinstance(e, int) else int(e.length)

    datums: list[dict[str, Any]] = []
    x: list[Any] = []
    lp: list[float] = []
    av: list[float] = []

    def emit() -> None:
        if sum(map(width, x)) < 2:
            raise ShortSegment
        chunks: list[Any] = []
        for e in x[:-1]:
            if isinstance(e, int):
                if chunks and isinstance(chunks[-1], list):
                    chunks[-1].append(e)
                else:
                    chunks.append([e])
            else:
                chunks.append(e)
        targets = [t for e in x for t in ([e] if isinstance(e, int) else [0] * width(e))][1:]
        datums.append({"chunks": chunks, "target": targets, "logprobs": lp[1:], "advantages": av[1:]})

    for ob, ac, lps in transitions:
        o = flat(ob)
        if x and not (len(x) <= len(o) and o[: len(x)] == x):
            emit()
            x, lp, av = [], [], []
        delta = o[len(x) :]
        n = sum(map(width, delta))
        x = x + delta + ac
        lp = lp + [0.0] * n + [float(np.float32(v)) for v in lps]
        av = av + [0.0] * n + [float(np.float32(adv))] * len(ac)
    if x:
        emit()
    return datums


def as_comparable(d: tinker.Datum) -> dict[str, Any]:
    chunks = [
        [int(t) for t in c.tokens] if isinstance(c, types.EncodedTextChunk) else c
        for c in d.model_input.chunks
    ]
    return {
        "chunks": chunks,
        "target": d.loss_fn_inputs["target_tokens"].tolist(),
        "logprobs": d.loss_fn_inputs["logprobs"].tolist(),
        "advantages": d.loss_fn_inputs["advantages"].tolist(),
    }


# --- text ---------------------------------------------------------------------------------------------


def test_text_samples_to_datums_with_sdk_dtypes_and_no_mask() -> None:
    prompt = tinker.ModelInput.from_ints([1, 2, 3])
    samples = [[(prompt, seq([4, 5], [-0.5, -0.25]))], [(prompt, seq([6], [-1.0], arrays=False))]]
    data, result = build_tinker_datums(samples, [1.0, -2.0])
    assert result.report.datums == 2 and len(data) == 2
    d0 = data[0]
    assert d0.model_input.length == 4 and [int(t) for t in d0.model_input.to_ints()] == [1, 2, 3, 4]
    assert set(d0.loss_fn_inputs) == {"target_tokens", "logprobs", "advantages"}
    assert d0.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert (
        d0.loss_fn_inputs["logprobs"].dtype == "float32"
        and d0.loss_fn_inputs["advantages"].dtype == "float32"
    )
    assert d0.loss_fn_inputs["target_tokens"].tolist() == [2, 3, 4, 5]
    assert d0.loss_fn_inputs["advantages"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert data[1].loss_fn_inputs["advantages"].tolist() == [0.0, 0.0, -2.0]


def test_loss_inputs_are_the_batch_s_arrays_made_read_only_a_later_write_raises() -> None:
    r = build_datums(trajectories_from_lists([[([1, 2], [3, 4], [-1.0, -2.0])]], [1.0]))
    data = datums_to_tinker(r.datums)
    (d,) = data
    before = wire(data)
    for name in ("target_tokens", "logprobs", "advantages"):  # no second copy of the batch
        assert np.shares_memory(d.loss_fn_inputs[name].to_numpy(), getattr(r.datums, name)), name
        assert d.loss_fn_inputs[name].to_numpy().flags.writeable, name  # as the SDK keeps it: no copy
    # What the SDK's sender thread reads after forward_backward() returned: writes through the batch fail.
    for name in ("input_tokens", "target_tokens", "logprobs", "advantages"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(r.datums, name)[:] = 7
    assert wire(data) == before
    assert d.loss_fn_inputs["logprobs"].tolist() == [0.0, -1.0, -2.0]
    assert d.model_input.to_ints() == [1, 2, 3]


def test_copy_true_is_a_private_copy_a_later_write_to_the_batch_never_reaches_the_wire() -> None:
    r = build_datums(trajectories_from_lists([[([1, 2], [3, 4], [-1.0, -2.0])]], [1.0]))
    data = datums_to_tinker(r.datums, copy=True)
    (d,) = data
    before = wire(data)
    for name in ("target_tokens", "logprobs", "advantages"):
        assert not np.shares_memory(d.loss_fn_inputs[name].to_numpy(), getattr(r.datums, name)), name
    r.datums.logprobs[:] = 99.0  # the batch stays writeable
    r.datums.advantages[:] = -99.0
    r.datums.target_tokens[:] = 7
    r.datums.input_tokens[:] = 7
    assert wire(data) == before
    assert d.loss_fn_inputs["logprobs"].tolist() == [0.0, -1.0, -2.0]
    assert d.model_input.to_ints() == [1, 2, 3]


def sdk_datums(d: Any, *, include_mask: bool = False) -> list[tinker.Datum]:
    """The slow path: every object from the SDK's own public constructors, from Python lists."""
    out = []
    for k in range(d.num_datums):
        lo, hi = int(d.offsets_D1[k]), int(d.offsets_D1[k + 1])
        inputs = {
            "target_tokens": d.target_tokens[lo:hi].tolist(),
            "logprobs": d.logprobs[lo:hi].tolist(),
            "advantages": d.advantages[lo:hi].tolist(),
        }
        if include_mask:
            inputs["mask"] = d.mask[lo:hi].astype(np.float32)  # the SDK has no list dtype for "mask"
        out.append(
            tinker.Datum(
                model_input=tinker.ModelInput.from_ints(d.input_tokens[lo:hi].tolist()), loss_fn_inputs=inputs
            )
        )
    return out


@given(case=token_trajectories(max_trajectories=3, vocab=50), include_mask=st.booleans())
def test_fast_datums_equal_the_sdk_constructors_at_every_size(case: Any, include_mask: bool) -> None:
    d = build_datums(trajectories_from_lists(case.transitions_B, case.advantages_B), mode="robust").datums
    fast = datums_to_tinker(d, include_mask=include_mask)
    slow = sdk_datums(d, include_mask=include_mask)
    assert wire(fast) == wire(slow)
    for f, s in zip(fast, slow, strict=True):
        assert f.model_input == s.model_input
        assert f.model_input.model_dump() == s.model_input.model_dump()
        assert f.loss_fn_inputs.keys() == s.loss_fn_inputs.keys()
        for key, tensor in f.loss_fn_inputs.items():
            want = s.loss_fn_inputs[key]
            assert (tensor.dtype, tensor.shape, tensor.tolist()) == (want.dtype, want.shape, want.tolist())


def test_model_inputs_work_in_every_sdk_call_that_takes_them() -> None:
    from tinker._compat import model_dump

    r = build_datums(trajectories_from_lists([[([7, 8, 9], [10, 11], [-1.0, -0.5])]], [1.0]))
    (d,) = datums_to_tinker(r.datums)
    mi = d.model_input
    assert mi == tinker.ModelInput.from_ints([7, 8, 9, 10]) and mi != tinker.ModelInput.from_ints([7])
    ints = mi.to_ints()
    assert ints == [7, 8, 9, 10] and all(type(t) is int for t in ints)
    assert mi.model_dump() == {"chunks": [{"tokens": [7, 8, 9, 10], "type": "encoded_text"}]}
    assert json.loads(mi.model_dump_json()) == mi.model_dump(mode="json")
    assert tinker.ModelInput.model_validate_json(mi.model_dump_json()) == mi
    assert mi.model_copy(deep=True) == mi
    # tinker-cookbook's incorporate_kl_penalty / compute_post_kl: append the last target, then
    # compute_logprobs on a sampler; sample() takes the same prompt. The SDK's request serialisation,
    # built offline exactly as SamplingClient builds it, without a client or the network:
    full = mi.append_int(int(d.loss_fn_inputs["target_tokens"].data[-1]))
    assert full.to_ints() == [7, 8, 9, 10, 11]
    for prompt in (mi, full):
        for request in (
            types.SampleRequest(
                num_samples=1,
                prompt=prompt,
                sampling_params=types.SamplingParams(max_tokens=1),
                prompt_logprobs=True,
            ),
            types.SampleRequest(
                num_samples=2,
                prompt=prompt,
                sampling_params=types.SamplingParams(max_tokens=8, temperature=0.7),
            ),
        ):
            body = model_dump(request, exclude_unset=False, exclude_none=True, mode="json")
            assert [t for c in body["prompt"]["chunks"] for t in c["tokens"]] == prompt.to_ints()
            json.dumps(body, allow_nan=False)  # what the HTTP client sends
            assert request.model_dump_json()


def test_mask_is_included_on_request_and_removed_before_training() -> None:
    r = build_datums(trajectories_from_lists([[([1, 2], [3, 4], [-1.0, -2.0])]], [1.5]))
    (plain,) = datums_to_tinker(r.datums)
    assert "mask" not in plain.loss_fn_inputs
    data = datums_to_tinker(r.datums, include_mask=True)
    mask = data[0].loss_fn_inputs["mask"]
    assert (mask.dtype, mask.tolist()) == ("float32", [0.0, 1.0, 1.0])
    assert mask.tolist() == r.datums.mask.astype(np.float32).tolist()
    # tinker-cookbook's KL helpers read it as a float tensor over the targets:
    lp = np.asarray(data[0].loss_fn_inputs["logprobs"].to_numpy())
    assert float((lp * mask.to_numpy()).sum()) == -3.0
    # The SDK does not strip it: every loss_fn_inputs key goes on the wire.
    msg = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="importance_sampling"),
        model_id="m",
        seq_id=1,
    )
    assert "mask" in forward_backward_request_to_proto(msg).data[0].loss_fn_inputs
    stripped = without_mask(data)
    assert sorted(stripped[0].loss_fn_inputs) == ["advantages", "logprobs", "target_tokens"]
    assert wire(stripped) == wire([plain]) and stripped[0].model_input == plain.model_input
    data2, _ = build_tinker_datums(
        [[(tinker.ModelInput.from_ints([1, 2]), seq([3, 4], [-1.0, -2.0]))]], [1.5], include_mask=True
    )
    assert data2[0].loss_fn_inputs["mask"].tolist() == [0.0, 1.0, 1.0]


def test_missing_logprobs_and_responses() -> None:
    prompt = tinker.ModelInput.from_ints([1, 2])
    response = types.SampleResponse(sequences=[seq([3], [-1.0]), seq([4, 5], None)])
    pairs = transitions_from_response(prompt, response)
    assert [p for p, _ in pairs] == [prompt, prompt]
    data, result = build_tinker_datums([[pairs[0]], [pairs[1]]], [1.0, 1.0])
    assert [DATUM_STATUS[s] for s in result.status_B] == ["ok", "missing_logprobs"]
    assert len(data) == 1


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="advantages_B"):
        trajectories_from_samples([[]], [1.0, 2.0])
    big = build_datums(trajectories_from_lists([[([1, 2**31], [3], [-1.0])]], [1.0])).datums
    with pytest.raises(ValueError, match="int32"):
        datums_to_tinker(big)
    neg = build_datums(trajectories_from_lists([[([-1, 2], [3], [-1.0])]], [1.0])).datums
    with pytest.raises(ValueError, match="placeholders"):
        datums_to_tinker(neg)
    no_len = types.ImageChunk(data=b"x", format="png")
    with pytest.raises(ValueError, match="expected_tokens"):
        trajectories_from_samples([[(types.ModelInput(chunks=[text([1]), no_len]), seq([2], [-1.0]))]], [1.0])


# --- images -------------------------------------------------------------------------------------------


def test_images_are_opaque_chunks_compared_by_value() -> None:
    a, b = image(b"A", 3), image(b"B", 2)
    ob1 = types.ModelInput(chunks=[text([1, 2]), a, text([3])])
    # ob2 extends ob1 + action with an equal-by-value copy of image A, then more text and image B.
    ob2 = types.ModelInput(chunks=[text([1, 2]), image(b"A", 3), text([3, 4, 5, 6]), b, text([7])])
    samples = [[(ob1, seq([4, 5], [-0.5, -0.25])), (ob2, seq([8], [-1.0]))]]
    chunked = trajectories_from_samples(samples, [2.0])
    assert len(chunked.chunks) == 2
    assert chunked.trajectories.ob_tokens[:7].tolist() == [1, 2, -1, -1, -1, 3, 1]
    data, result = build_tinker_datums(
        samples,
        [2.0],
    )
    assert result.report.datums == 1
    (d,) = data
    assert [type(c).__name__ for c in d.model_input.chunks] == [
        "EncodedTextChunk",
        "ImageChunk",
        "EncodedTextChunk",
        "ImageChunk",
        "EncodedTextChunk",
    ]
    assert d.model_input.length == 2 + 3 + 4 + 2 + 1
    # Every SDK call that takes a model input works on this one too (dump, compare, send to a sampler).
    assert d.model_input == types.ModelInput.model_validate_json(d.model_input.model_dump_json())
    text_tokens = [t for c in d.model_input.chunks if isinstance(c, types.EncodedTextChunk) for t in c.tokens]
    assert all(type(t) is int for t in text_tokens)
    from tinker._compat import model_dump

    request = types.SampleRequest(prompt=d.model_input, sampling_params=types.SamplingParams(max_tokens=1))
    json.dumps(model_dump(request, exclude_unset=False, exclude_none=True, mode="json"))
    assert d.loss_fn_inputs["target_tokens"].tolist() == [2, 0, 0, 0, 3, 4, 5, 6, 0, 0, 7, 8]
    assert d.loss_fn_inputs["advantages"].tolist() == [0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 2]
    oracle = chunked_oracle([(ob1, [4, 5], [-0.5, -0.25]), (ob2, [8], [-1.0])], 2.0)
    assert [as_comparable(x) for x in data] == oracle
    assert wire(data) == wire(
        datums_to_tinker(result.datums, chunks=trajectories_from_samples(samples, [2.0]).chunks)
    )


def test_a_different_image_breaks_the_merge() -> None:
    ob1 = types.ModelInput(chunks=[text([1]), image(b"A", 2)])
    ob2 = types.ModelInput(chunks=[text([1]), image(b"Z", 2), text([4, 5])])
    samples = [[(ob1, seq([4], [-1.0])), (ob2, seq([6], [-1.0]))]]
    data, _ = build_tinker_datums(samples, [1.0])
    assert len(data) == 2
    assert [as_comparable(x) for x in data] == chunked_oracle([(ob1, [4], [-1.0]), (ob2, [6], [-1.0])], 1.0)


def test_repeated_image_splits_into_one_chunk_per_image() -> None:
    a = image(b"A", 2)
    ob = types.ModelInput(chunks=[text([1]), a, a, text([2])])
    (d,), _ = build_tinker_datums([[(ob, seq([3], [-1.0]))]], [1.0])
    assert [type(c).__name__ for c in d.model_input.chunks] == [
        "EncodedTextChunk",
        "ImageChunk",
        "ImageChunk",
        "EncodedTextChunk",
    ]
    assert d.loss_fn_inputs["target_tokens"].tolist() == [0, 0, 0, 0, 2, 3]


def test_sequence_ending_in_an_image_is_rejected() -> None:
    ob = types.ModelInput(chunks=[text([1, 2]), image(b"A", 2)])
    with pytest.raises(ValueError, match="non-text chunk"):
        build_tinker_datums([[(ob, seq([], []))]], [1.0])


@given(
    layout=st.lists(
        st.one_of(st.lists(st.integers(0, 3), min_size=1, max_size=3), st.sampled_from([b"A", b"B"])),
        max_size=4,
    ),
    turns=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 3), max_size=2)), min_size=1, max_size=3),
)
def test_chunked_datums_equal_the_flat_element_oracle(layout: list[Any], turns: list[Any]) -> None:
    """Random observations of text and images; each turn extends the previous one or starts afresh."""

    def model_input(parts: list[Any]) -> types.ModelInput:
        return types.ModelInput(
            chunks=[text(p) if isinstance(p, list) else image(p, 1 + (p == b"B")) for p in parts]
        )

    transitions: list[tuple[types.ModelInput, list[int], list[float]]] = []
    parts: list[Any] = list(layout)
    for extend, ac in turns:
        if transitions and extend:
            parts = [*parts, list(transitions[-1][1])] if transitions[-1][1] else parts
            parts = [*parts, [9]]
        transitions.append((model_input(parts), [*ac, 5], [-0.5] * (len(ac) + 1)))
    samples = [[(ob, seq(ac, lps)) for ob, ac, lps in transitions]]
    data, result = build_tinker_datums(
        samples,
        [1.5],
    )
    try:
        want = chunked_oracle(transitions, 1.5)
    except ShortSegment:
        assert DATUM_STATUS[result.status_B[0]] == "short_segment" and not data
        return
    assert [as_comparable(x) for x in data] == want


# --- model inputs: token arrays, or int lists where pydantic cannot send them --------------------------


def test_token_arrays_or_int_lists_send_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.tinker import tokens

    d = build_datums(
        trajectories_from_lists([[([1, 2, 3], [4, 5], [-1.0, -2.0])], [([6], [7], [0.0])]], [0.5, 1])
    ).datums
    arrays = datums_to_tinker(d)
    assert all(isinstance(x.model_input.chunks[0].tokens, TokenArray) for x in arrays)
    monkeypatch.setattr(tokens, "tokens_supported", lambda: False)  # another pydantic: int lists
    lists = datums_to_tinker(d)
    assert all(type(x.model_input.chunks[0].tokens) is list for x in lists)
    assert [x.model_input for x in arrays] == [x.model_input for x in lists]  # pydantic equality
    assert wire(arrays) == wire(lists)


def test_read_only_batches_convert() -> None:
    r = build_datums(trajectories_from_lists([[([1, 2], [3], [-1.0])]], [1.0]))
    frozen = r.datums._replace(logprobs=r.datums.logprobs.copy())
    frozen.logprobs.setflags(write=False)
    (d,) = datums_to_tinker(frozen)
    assert d.loss_fn_inputs["logprobs"].to_numpy().flags.writeable  # the SDK copied it, as it always does
    assert d.loss_fn_inputs["logprobs"].tolist() == [0.0, -1.0]


@pytest.mark.parametrize("big", [2**18 - 1, 2**18, 2**31 - 1])
@pytest.mark.parametrize("arrays", [True, False])
def test_large_token_ids_are_exact(big: int, arrays: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.tinker import tokens

    monkeypatch.setattr(tokens, "tokens_supported", lambda: arrays)
    r = build_datums(trajectories_from_lists([[([big, 0, big - 1], [big, 7], [-1.0, -1.0])]], [1.0]))
    ints = datums_to_tinker(r.datums)[0].model_input.to_ints()
    assert ints == [big, 0, big - 1, big] and all(type(t) is int for t in ints)
    assert datums_to_tinker(r.datums)[0].model_input == tinker.ModelInput.from_ints([big, 0, big - 1, big])


def test_the_default_lends_writeable_wire_dtype_arrays_and_converts_the_rest() -> None:
    r = build_datums(
        trajectories_from_lists([[([1, 2], [3, 4], [-1.0, -2.0])], [([5], [6], [0.5])]], [1.0, 2.0])
    )
    batch = r.datums
    copied = datums_to_tinker(batch, copy=True, include_mask=True)
    assert batch.logprobs.flags.writeable  # copy=True leaves the batch alone
    lent = datums_to_tinker(batch, include_mask=True)
    assert wire(lent) == wire(copied)
    for key in ("target_tokens", "logprobs", "advantages"):
        assert np.shares_memory(lent[0].loss_fn_inputs[key].to_numpy(), getattr(batch, key))
        assert not np.shares_memory(copied[0].loss_fn_inputs[key].to_numpy(), getattr(batch, key))
    assert not np.shares_memory(lent[0].loss_fn_inputs["mask"].to_numpy(), batch.mask)  # bool → float32
    assert batch.mask.flags.writeable  # not lent: not locked
    # a batch in other dtypes is converted, and the conversion is the datums' alone: nothing locked
    wide = r.datums._replace(
        logprobs=np.asarray(r.datums.logprobs, np.float64),
        input_tokens=r.datums.input_tokens.astype(np.int32),
    )
    d = datums_to_tinker(wide)
    assert wide.logprobs.flags.writeable and d[0].loss_fn_inputs["logprobs"].dtype == "float32"
    assert wide.input_tokens.flags.writeable is False  # its ids are the model inputs' tokens
    # a second conversion of a locked batch: the SDK needs writeable arrays, so this one copies
    again = datums_to_tinker(batch, include_mask=True)
    assert wire(again) == wire(copied)
    assert not np.shares_memory(again[0].loss_fn_inputs["logprobs"].to_numpy(), batch.logprobs)


def test_conversion_refuses_what_it_would_turn_into_wrong_datums() -> None:
    """Found by review: a negative token id in a sample or a prompt's text was read as an image
    placeholder (the image copied into the sequence); an image of length 0 vanished; float sampled tokens
    were truncated (3.7 → 3); a hand-made DatumBatch with bad offsets or a short target array lost tokens
    in datums_to_tinker (pad_datums refused the same batch); without_mask dropped provenance spans."""
    import dataclasses as dc

    from adapters.tinker.convert import build_tinker_datums, datums_to_tinker, without_mask
    from kernel import build_datums, trajectories_from_lists

    def seq(tokens: Any, logprobs: list[float]) -> types.SampledSequence:
        return types.SampledSequence(
            stop_reason="stop",
            sequence_id="s",
            tokens_np=np.asarray(tokens),
            logprobs_np=np.asarray(logprobs, np.float32),
        )

    img = types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=1)
    with_image = tinker.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1]), img, types.EncodedTextChunk(tokens=[2])]
    )
    with pytest.raises(ValueError, match=r"samples_B\[0\]\[0\] sequence holds a negative token id -1"):
        build_tinker_datums([[(with_image, seq([-1, 5], [-0.1, -0.2]))]], [1.0])
    negative_prompt = tinker.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1, -3]), img])
    with pytest.raises(ValueError, match="prompt chunk 0 holds a negative token id -3"):
        build_tinker_datums([[(negative_prompt, seq([5], [-0.1]))]], [1.0])
    empty_image = types.ImageChunk(data=b"zz", format="png", expected_tokens=0)
    vanishing = tinker.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1]), empty_image])
    with pytest.raises(ValueError, match=r"prompt chunk 1 \(ImageChunk\) has length 0"):
        build_tinker_datums([[(vanishing, seq([4], [-0.1]))]], [1.0])
    with pytest.raises(TypeError, match="sequence tokens must be integers, got dtype float64"):
        build_tinker_datums([[(tinker.ModelInput.from_ints([1, 2]), seq([3.7, 4.2], [-0.1, -0.2]))]], [1.0])
    with pytest.raises(TypeError, match=r"must be a \(prompt ModelInput, SampledSequence\) pair"):
        build_tinker_datums([[tinker.ModelInput.from_ints([1])]], [1.0])  # type: ignore[list-item]
    batch = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])).datums
    for bad in (
        batch._replace(offsets_D1=np.array([0, 1])),
        batch._replace(offsets_D1=np.array([0, 5])),
        batch._replace(target_tokens=batch.target_tokens[:1]),
    ):
        with pytest.raises(ValueError, match=r"batch\.(offsets_D1|target_tokens)"):
            datums_to_tinker(bad)
    with pytest.raises(TypeError, match=r"batch\.input_tokens must hold integer ids"):
        datums_to_tinker(batch._replace(input_tokens=batch.input_tokens + 0.5))
    datum = tinker.Datum(
        model_input=tinker.ModelInput.from_ints([1, 2]),
        loss_fn_inputs={"target_tokens": np.array([2, 3]), "mask": np.array([0.0, 1.0], np.float32)},
    ).with_provenance(
        model_input=[types.PromptProvenanceSpan(sequence_id="p", offset=0, length=2)],
        loss_fn_inputs=[types.SampledProvenanceSpan(sequence_id="s", offset=0, length=2)],
    )
    (out,) = without_mask([datum])
    assert sorted(out.loss_fn_inputs) == ["target_tokens"] and sorted(datum.loss_fn_inputs) == [
        "mask",
        "target_tokens",
    ]
    assert (
        out.model_input_spans == datum.model_input_spans
        and out.loss_fn_input_spans == datum.loss_fn_input_spans
    )
    assert dc.replace(out, loss_fn_inputs={}).model_input is datum.model_input
    with pytest.raises(TypeError, match="got one Datum"):
        without_mask(datum)  # type: ignore[arg-type]


def test_provenance_spans_become_the_sdks() -> None:
    """Each datum with provenance gets the SDK's span objects, which the SDK's own tiling check accepts
    and its request encoder writes; one without gets neither list."""
    turns = [([1, 2], [3], [-0.5]), ([1, 2, 3, 4], [5, 6], [-1.0, -2.0]), ([9], [8], [-0.1])]
    result = build_datums(trajectories_from_lists([turns], [0.5]), sequence_ids_N=[0, 1, -1])
    first, second = datums_to_tinker(result.datums, spans=result.spans, sequence_ids=["s-a", "s-b"])
    assert first.loss_fn_input_spans == [
        types.PromptProvenanceSpan(sequence_id="s-a", offset=1, length=1),
        types.SampledProvenanceSpan(sequence_id="s-a", offset=0, length=1),
        types.PromptProvenanceSpan(sequence_id="s-b", offset=3, length=1),
        types.SampledProvenanceSpan(sequence_id="s-b", offset=0, length=2),
    ]
    assert first.model_input_spans is not None and len(first.model_input_spans) == 4
    checked = first.with_provenance(
        model_input=first.model_input_spans, loss_fn_inputs=first.loss_fn_input_spans
    )
    assert checked == first
    assert second.model_input_spans is None and second.loss_fn_input_spans is None  # an id-less turn
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=[first], loss_fn="importance_sampling"),
        model_id="m",
        seq_id=1,
    )
    assert len(forward_backward_request_to_proto(request).data[0].loss_fn_input_spans) == 4


def test_provenance_needs_every_named_sequence_id() -> None:
    result = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [0.5]), sequence_ids_N=[1])
    with pytest.raises(ValueError, match=r"spans name sequences in \[1, 1\]; 1 ids were given"):
        datums_to_tinker(result.datums, spans=result.spans, sequence_ids=["only"])
    with pytest.raises(ValueError, match=r"PromptProvenanceSpan\.sequence_id must be non-empty"):
        datums_to_tinker(result.datums, spans=result.spans, sequence_ids=["x", ""])
