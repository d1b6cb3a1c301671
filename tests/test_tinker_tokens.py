"""TokenArray: model-input tokens as a read-only int64 array that the SDK treats as ``from_ints``' list."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import numpy as np
import pytest
import tinker
from hypothesis import example, given
from hypothesis import strategies as st
from tinker import types
from tinker._compat import model_dump

from adapters.tinker import tokens as tk
from adapters.tinker.convert import datums_to_tinker
from adapters.tinker.tokens import TokenArray, tokens_supported
from kernel import build_datums, trajectories_from_lists
from tests.test_adapters_tinker import wire


def test_sequence_behaviour_by_hand() -> None:
    t = TokenArray(np.array([5, 6, 7, 6], dtype=np.int64))
    assert len(t) == 4 and t[0] == 5 and t[-1] == 6 and type(t[1]) is int
    assert t[1:3] == [6, 7] and isinstance(t[1:3], TokenArray)
    assert list(t) == [5, 6, 7, 6] and all(type(x) is int for x in t)
    assert 7 in t and 8 not in t and "7" not in t
    assert t.index(6) == 1 and t.count(6) == 2
    assert t == [5, 6, 7, 6] and [5, 6, 7, 6] == t and t != [5, 6, 7]
    assert t == TokenArray(np.array([5, 6, 7, 6], dtype=np.int32))
    assert t != (5, 6, 7, 6)  # as a list is not equal to a tuple
    assert repr(t) == "TokenArray([5, 6, 7, 6])"
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)
    assert np.asarray(t, dtype=np.int32).tobytes() == np.array([5, 6, 7, 6], np.int32).tobytes()
    assert pickle.loads(pickle.dumps(t)) == t and copy.deepcopy(t) == t


def test_tokens_are_read_only_views() -> None:
    ids = np.array([1, 2, 3])
    t = TokenArray(ids)
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(t)[0] = 9
    assert ids.flags.writeable  # the owner's array is not changed
    with pytest.raises(TypeError, match="1-D integer numpy array"):
        TokenArray(np.array([1.0, 2.0]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="1-D integer numpy array or a sequence of ints"):
        TokenArray([1.5, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="sequence of ints"):
        TokenArray([True, 2])


def test_pydantic_can_rebuild_a_token_array() -> None:
    """Found by review: pydantic validates a ``Sequence[int]`` by rebuilding ``type(v)(list_of_items)``,
    which raised for a TokenArray: ``EncodedTextChunk(tokens=chunk.tokens[:-1])`` (tinker-cookbook's
    input/target split) and ``ModelInput.from_ints(chunk.tokens)`` crashed on our datums' tokens."""
    t = TokenArray(np.array([5, 6, 7]))
    assert TokenArray([5, 6, 7]) == t and TokenArray((5,)) == [5]
    chunk = types.EncodedTextChunk(tokens=t[:-1])
    assert chunk.tokens == [5, 6] and types.ModelInput(chunks=[chunk]).to_ints() == [5, 6]
    assert types.ModelInput.from_ints(t).to_ints() == [5, 6, 7]
    assert t + [8] == [5, 6, 7, 8] and [4] + t == [4, 5, 6, 7] and t + t == [5, 6, 7, 5, 6, 7]  # noqa: RUF005 (the operators under test)


def test_supported_here_and_the_probe_can_fail() -> None:
    assert tokens_supported()
    from pydantic._internal import _serializers

    def make(ids: np.ndarray) -> Any:
        chunk = types.EncodedTextChunk.model_construct(tokens=TokenArray(ids))
        return types.ModelInput.model_construct(chunks=[chunk])

    saved = _serializers.SEQUENCE_ORIGIN_MAP.pop(TokenArray)
    try:  # without the registration pydantic cannot dump the tokens to JSON: the probe says no
        assert not tk._probe_equal(make)
    finally:
        _serializers.SEQUENCE_ORIGIN_MAP[TokenArray] = saved
    assert tk._probe_equal(make)


def _sampler_body(prompt: tinker.ModelInput) -> Any:
    request = types.SampleRequest(
        num_samples=2,
        prompt=prompt,
        sampling_params=types.SamplingParams(max_tokens=3),
        sampling_session_id="x",
    )
    return model_dump(request, exclude_unset=False, exclude_none=True, mode="json")  # as sample() sends it


@given(
    obs=st.lists(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=6), min_size=1, max_size=3),
    action=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4),
)
def test_every_sdk_operation_equals_from_ints(obs: list[list[int]], action: list[int]) -> None:
    traj = [[(ob, action, [-0.5] * len(action))] for ob in obs]
    data = datums_to_tinker(build_datums(trajectories_from_lists(traj, [1.0] * len(obs))).datums)
    for d in data:
        ours = d.model_input
        assert isinstance(ours.chunks[0].tokens, TokenArray)
        ref = tinker.ModelInput.from_ints(ours.to_ints())
        assert ours == ref and ref == ours
        assert [type(t) for t in ours.to_ints()] == [int] * ours.length
        assert ours.model_dump() == ref.model_dump()
        assert ours.model_dump(mode="json") == ref.model_dump(mode="json")
        assert ours.model_dump_json() == ref.model_dump_json()
        assert json.dumps(_sampler_body(ours)) == json.dumps(_sampler_body(ref))  # sample / compute_logprobs
        assert ours.append_int(7) == ref.append_int(7)
        assert tinker.ModelInput.model_validate_json(ours.model_dump_json()) == ref
        assert pickle.loads(pickle.dumps(ours)) == ref and copy.deepcopy(ours) == ref
    public = [tinker.Datum(model_input=tinker.ModelInput.from_ints(d.model_input.to_ints()),
                           loss_fn_inputs=d.loss_fn_inputs) for d in data]  # fmt: skip
    assert wire(data) == wire(public)  # training bytes identical


def test_later_writes_to_the_batch_do_not_reach_the_tokens() -> None:
    batch = build_datums(trajectories_from_lists([[([1, 2, 3], [4], [-1.0])]], [1.0])).datums
    (d,) = datums_to_tinker(batch, copy=True)
    batch.input_tokens[:] = 99
    assert d.model_input.to_ints() == [1, 2, 3]  # input = the sequence less its last token
    (lent,) = datums_to_tinker(batch)  # lent: a view of the batch, which is read-only from now on
    assert lent.model_input.to_ints() == [99, 99, 99]
    with pytest.raises(ValueError, match="read-only"):
        batch.input_tokens[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(lent.model_input.chunks[0].tokens)[0] = 1


@pytest.mark.parametrize("field", ["input_tokens", "target_tokens"])
def test_token_ids_beyond_int32_are_refused(field: str) -> None:
    batch = build_datums(trajectories_from_lists([[([1, 2, 3], [4], [-1.0])]], [1.0])).datums
    getattr(batch, field)[1] = 2**31  # Tinker sends model-input tokens as int32
    with pytest.raises(ValueError, match="token ids must fit int32"):
        datums_to_tinker(batch)


def _outcome(fn: Any) -> Any:
    """What ``fn()`` gives: its value, or the type of the exception it raises."""
    try:
        value = fn()
    except (TypeError, IndexError, OverflowError, ValueError) as e:
        return type(e)
    return value.tolist() if isinstance(value, np.ndarray) else value


_PROBES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=False, width=64),
    st.fractions(),
    st.text(max_size=2),
    st.none(),
)


@given(
    ids=st.lists(st.one_of(st.integers(-3, 300), st.integers(-(2**63), 2**63 - 1)), max_size=6),
    probe=_PROBES,
    dtype=st.sampled_from([np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.float64, np.bool_]),
)
@example(ids=[], probe=2**63, dtype=np.int8)  # deep profile: t[2**63] was OverflowError, not IndexError
@example(ids=[5], probe=-(2**63) - 1, dtype=np.int8)
def test_behaves_as_the_list_it_stands_for(ids: list[int], probe: Any, dtype: Any) -> None:
    """Found by review: ``6.0 in t`` was False, ``t[True]`` raised and ``np.asarray(t, dtype=np.int32)``
    wrapped an id beyond int32, where the list of ints ``from_ints`` holds gives True, its second item and
    an OverflowError. Membership, indexing and conversion now give what the list gives."""
    t, ref = TokenArray(np.array(ids, dtype=np.int64)), list(ids)
    assert _outcome(lambda: probe in t) == _outcome(lambda: probe in ref)
    assert _outcome(lambda: t[probe]) == _outcome(lambda: ref[probe])
    assert _outcome(lambda: np.asarray(t, dtype=dtype)) == _outcome(lambda: np.asarray(ref, dtype=dtype))
