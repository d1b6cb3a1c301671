"""Votes as struct-of-arrays: construction, collection from parsed responses, validation."""

from __future__ import annotations

import dataclasses
from unittest import mock

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel._votes
import kernel.jax as kj
from kernel import (
    OP_EQ,
    OP_GT,
    OP_OTHER,
    VOTE_A_OUT_OF_RANGE,
    VOTE_B_OUT_OF_RANGE,
    VOTE_BAD_OP,
    VOTE_PADDING,
    VOTE_REASONS,
    VOTE_SELF_PAIR,
    VOTE_VALID,
    ParsedResponse,
    Vote,
    VoteArrays,
    pack_votes,
    parse_response,
    validate_votes,
    vote_arrays,
    votes_from_responses,
)
from kernel.testing.strategies import VoteBatch, vote_batches


def _response(author: int, votes: list[Vote], *, ok: bool = True) -> ParsedResponse:
    return ParsedResponse.make(author, votes=tuple(votes), ok=ok, policy="robust")


def _brute_validation(batch: VoteBatch) -> tuple[list[bool], list[str], list[int]]:
    """The obvious per-vote loop: reason of each vote, malformed count of each debate."""
    num_groups = len(batch.num_agents_P)
    malformed = [0] * num_groups
    valid, reasons = [], []
    for g, _, a, op, b in zip(*(x.tolist() for x in batch.votes[:5]), strict=True):
        if g == num_groups:
            reason = "padding"
        else:
            n = int(batch.num_agents_P[g])
            if not 0 <= a < n:
                reason = "a_out_of_range"
            elif not 0 <= b < n:
                reason = "b_out_of_range"
            elif a == b:
                reason = "self_pair"
            elif op not in (OP_GT, OP_EQ):
                reason = "bad_op"
            else:
                reason = "valid"
            malformed[g] += reason != "valid"
        valid.append(reason == "valid")
        reasons.append(reason)
    return valid, reasons, malformed


# --- vote_arrays ---------------------------------------------------------------------------------


def test_vote_arrays_maps_operator_strings_exactly() -> None:
    ops = [">", "=", "<", ">=", " >", "", "==", "gt", "≻"]
    v = vote_arrays([0] * 9, [0] * 9, [1] * 9, ops, [2] * 9)
    assert v.op_V.tolist() == [OP_GT, OP_EQ] + [OP_OTHER] * 7
    assert all(x.dtype == np.int32 and x.shape == (9,) for x in v[:5])
    assert v.judge_V is None and v.weight_V is None


def test_vote_arrays_accepts_codes_mixed_lists_and_string_arrays() -> None:
    expected = [OP_GT, OP_EQ, OP_OTHER, OP_OTHER, OP_OTHER]
    assert vote_arrays([0] * 5, [0] * 5, [0] * 5, [0, 1, 2, 7, -1], [1] * 5).op_V.tolist() == expected
    assert vote_arrays([0] * 3, [0] * 3, [0] * 3, [">", 1, "x"], [1] * 3).op_V.tolist() == [0, 1, 2]
    assert vote_arrays([0] * 2, [0] * 2, [0] * 2, np.array(["=", "<"]), [1] * 2).op_V.tolist() == [1, 2]
    assert vote_arrays([0] * 2, [0] * 2, [0] * 2, np.array([b">", b"?"]), [1] * 2).op_V.tolist() == [0, 2]
    empty = vote_arrays([], [], [], [], [])
    assert all(x.shape == (0,) and x.dtype == np.int32 for x in empty[:5])


def test_vote_arrays_clamps_ids_beyond_int32() -> None:
    v = vote_arrays([0, 0], [2**40, -(2**40)], [2**33, -(2**35)], [">", ">"], [1, 1])
    assert v.authors_V.tolist() == [2**31 - 1, -(2**31)]
    assert v.a_V.tolist() == [2**31 - 1, -(2**31)]
    assert validate_votes(v, [3]).reason_V.tolist() == [VOTE_A_OUT_OF_RANGE] * 2


def test_vote_arrays_rejects_programmer_errors() -> None:
    with pytest.raises(ValueError, match="same length"):
        vote_arrays([0, 0], [0], [0, 1], [">", ">"], [1, 0])
    with pytest.raises(ValueError, match="rank 1"):
        vote_arrays([[0]], [[0]], [[0]], np.array([[">"]]), [[1]])
    with pytest.raises(TypeError, match="authors"):
        vote_arrays([0], [0.5], [0], [">"], [1])
    with pytest.raises(TypeError, match="a must be an integer"):
        vote_arrays([0], [0], [True], [">"], [1])
    with pytest.raises(TypeError, match="ops"):
        vote_arrays([0], [0], [0], [1.5], [1])
    with pytest.raises(TypeError, match="ops"):
        vote_arrays([0, 0], [0, 0], [0, 0], ">=", [1, 1])


# --- votes_from_responses ------------------------------------------------------------------------


def test_votes_from_responses_groups_by_debate_and_takes_author() -> None:
    debate0 = [_response(0, [Vote(1, ">", 2), Vote(2, "=", 1)]), _response(1, [])]
    debate2 = [_response(2, [Vote(0, "<", 1)]), _response(-1, [Vote(5, ">", 0)])]
    v = votes_from_responses([debate0, [], debate2])
    assert v.group_ids_V.tolist() == [0, 0, 2, 2]
    assert v.authors_V.tolist() == [0, 0, 2, -1]
    assert v.a_V.tolist() == [1, 2, 0, 5]
    assert v.op_V.tolist() == [OP_GT, OP_EQ, OP_OTHER, OP_GT]
    assert v.b_V.tolist() == [2, 1, 1, 0]
    assert all(x.dtype == np.int32 for x in v[:5])


def test_votes_from_responses_skips_failed_parses_unless_asked() -> None:
    responses = [[_response(0, [Vote(1, ">", 2)], ok=False), _response(1, [Vote(0, "=", 2)])]]
    assert votes_from_responses(responses).authors_V.tolist() == [1]
    assert votes_from_responses(responses, include_failed=True).authors_V.tolist() == [0, 1]


def test_votes_from_responses_empty_and_huge_ids() -> None:
    empty = votes_from_responses([])
    assert all(x.shape == (0,) and x.dtype == np.int32 for x in empty[:5])
    v = votes_from_responses([[_response(10**30, [Vote(10**30, ">", -(10**30))])]])
    assert (v.authors_V[0], v.a_V[0], v.b_V[0]) == (2**31 - 1, 2**31 - 1, -(2**31))


# --- validate_votes ------------------------------------------------------------------------------


def test_validate_votes_hand_example_every_reason() -> None:
    v = vote_arrays(
        group_ids=[0, 0, 0, 0, 0, 0, 1, 2, 2],
        authors=[5, 0, 1, 2, 2, -1, 0, 0, 7],
        a=[0, 3, 0, 2, 0, -1, 1, 1, 0],
        ops=[">", "=", "=", ">", "<", "=", ">", ">", "="],
        b=[1, 0, -1, 2, 1, 9, 0, 0, 1],
    )
    res = validate_votes(v, [3, 1])  # debate 2 is padding
    assert res.valid_V.tolist() == [True] + [False] * 8
    assert res.reason_V.dtype == np.int8
    names = [VOTE_REASONS[r] for r in res.reason_V]
    assert names == [
        "valid",
        "a_out_of_range",
        "b_out_of_range",
        "self_pair",
        "bad_op",
        "a_out_of_range",  # a checked before b
        "a_out_of_range",  # N = 1: no valid pair at all
        "padding",
        "padding",
    ]
    assert res.malformed_P.tolist() == [5, 1]
    assert res.malformed_P.dtype == np.int32


def test_reason_codes_index_the_names() -> None:
    codes = [VOTE_VALID, VOTE_PADDING, VOTE_A_OUT_OF_RANGE, VOTE_B_OUT_OF_RANGE, VOTE_SELF_PAIR, VOTE_BAD_OP]
    assert [VOTE_REASONS[c] for c in codes] == [
        "valid",
        "padding",
        "a_out_of_range",
        "b_out_of_range",
        "self_pair",
        "bad_op",
    ]
    assert (OP_GT, OP_EQ) == (0, 1)  # the fast validity test relies on it


def test_validate_votes_raises_on_bad_group_ids_and_counts() -> None:
    v = vote_arrays([0, 3], [0, 0], [0, 1], [">", ">"], [1, 0])
    with pytest.raises(ValueError, match="group_ids_V"):
        validate_votes(v, [2, 2])  # 3 > P = 2
    with pytest.raises(ValueError, match="group_ids_V"):
        validate_votes(vote_arrays([-1], [0], [0], [">"], [1]), [2])
    with pytest.raises(ValueError, match="num_agents_P must be >= 0"):
        validate_votes(vote_arrays([0], [0], [0], [">"], [1]), [-1])
    with pytest.raises(TypeError, match="num_agents_P"):
        validate_votes(vote_arrays([0], [0], [0], [">"], [1]), [2.0])
    with pytest.raises(ValueError, match="same length"):
        validate_votes(VoteArrays(*(np.zeros(k, np.int32) for k in (1, 1, 2, 1, 1))), [2])


def test_validate_votes_accepts_plain_lists_and_int64() -> None:
    lists = VoteArrays([0, 0], [0, 1], [1, 0], [OP_GT, 9], [2, 2])
    wide = VoteArrays(*(np.asarray(x, dtype=np.int64) for x in lists[:5]))
    for votes in (lists, wide):
        res = validate_votes(votes, [3])
        assert res.valid_V.tolist() == [True, False]
        assert res.reason_V.tolist() == [VOTE_VALID, VOTE_BAD_OP]


@given(vote_batches(padding=True))
def test_validate_votes_matches_brute_force(batch: VoteBatch) -> None:
    valid, reasons, malformed = _brute_validation(batch)
    res = validate_votes(batch.votes, batch.num_agents_P)
    assert res.valid_V.tolist() == valid
    assert [VOTE_REASONS[r] for r in res.reason_V] == reasons
    assert res.malformed_P.tolist() == malformed


# --- JAX twin ------------------------------------------------------------------------------------

_PAD_GROUPS, _PAD_VOTES = 4, 96
_TRACES = [0]


def _validate_impl(votes: VoteArrays, num_agents_P: jax.Array) -> object:
    _TRACES[0] += 1
    return kj.validate_votes(votes, num_agents_P)


_validate_jit = jax.jit(_validate_impl)


def _pad(batch: VoteBatch) -> tuple[VoteArrays, np.ndarray]:
    """Pads to fixed shapes: 4 debates (extra ones with 0 agents), 96 votes (group id 4 = padding)."""
    num_groups = len(batch.num_agents_P)
    g = np.where(batch.votes.group_ids_V == num_groups, _PAD_GROUPS, batch.votes.group_ids_V)
    fields = [g, *batch.votes[1:5]]
    padded = [
        np.concatenate([x, np.full(_PAD_VOTES - x.size, fill, np.int32)])
        for x, fill in zip(fields, (_PAD_GROUPS, 0, 0, 0, 1), strict=True)
    ]
    n = np.concatenate([batch.num_agents_P, np.zeros(_PAD_GROUPS - num_groups, np.int64)])
    return VoteArrays(*padded), n.astype(np.int32)


@given(vote_batches(max_groups=_PAD_GROUPS, padding=True))
def test_jax_validate_votes_matches_numpy_under_jit(batch: VoteBatch) -> None:
    votes, n = _pad(batch)
    expected = validate_votes(votes, n)
    got = _validate_jit(votes, n)
    assert np.asarray(got.valid_V).tolist() == expected.valid_V.tolist()
    assert np.asarray(got.reason_V).tolist() == expected.reason_V.tolist()
    assert np.asarray(got.reason_V).dtype == np.int8
    assert np.asarray(got.malformed_P).tolist() == expected.malformed_P.tolist()
    assert _TRACES[0] == 1  # fixed shapes: compiled once for every example


def test_jax_validate_votes_treats_any_out_of_range_group_as_padding() -> None:
    v = VoteArrays(
        *(np.asarray(x, np.int32) for x in ([0, -1, 5], [0, 0, 0], [1, 1, 1], [0, 0, 0], [2, 2, 2]))
    )
    res = kj.validate_votes(v, np.array([3, 3]))
    assert np.asarray(res.reason_V).tolist() == [VOTE_VALID, VOTE_PADDING, VOTE_PADDING]
    assert np.asarray(res.malformed_P).tolist() == [0, 0]


@given(st.integers(0, 3))
def test_votes_of_one_debate_only_count_there(p: int) -> None:
    v = vote_arrays([p] * 3, [0, 0, 0], [0, 1, 5], [">", "?", ">"], [1, 2, 0])
    res = validate_votes(v, [3, 3, 3, 3])
    expected = [0, 0, 0, 0]
    expected[p] = 2
    assert res.malformed_P.tolist() == expected


# --- JAX: ids beyond int32 and float fields (issue 8, item 8) ----------------------------------------

WIDE = 2**32 + 1  # wraps to 1 when cast to int32


@pytest.mark.parametrize("field", ["a_V", "b_V", "op_V", "group_ids_V"])
def test_jax_int64_fields_beyond_int32_stay_malformed_like_numpy(field: str) -> None:
    base = {"group_ids_V": [0], "authors_V": [2], "a_V": [0], "op_V": [OP_GT], "b_V": [1]}
    base[field] = [WIDE - 1 if field == "op_V" else WIDE]  # op 2**32 wraps to 0 = '>'
    if field == "group_ids_V":  # a group id beyond P marks padding in JAX, never debate 1
        base[field] = [WIDE]
    votes = VoteArrays(*(np.asarray(base[k], np.int64) for k in VoteArrays._fields[:5]))
    num_agents = [3, 3]
    got = kj.validate_votes(votes, num_agents)
    assert not bool(np.asarray(got.valid_V)[0])
    if field != "group_ids_V":
        want = validate_votes(votes, num_agents)
        assert np.asarray(got.reason_V).tolist() == want.reason_V.tolist()
        assert np.asarray(got.malformed_P).tolist() == want.malformed_P.tolist() == [1, 0]
    rewards = kj.pairwise_rewards(votes, num_agents)
    assert np.asarray(rewards.rewards_PG).tolist() == [0.0] * 6  # nobody wins a vote nobody cast
    assert np.asarray(rewards.total_votes_P).tolist() == [0, 0]


def test_jax_huge_python_ints_and_uint64_saturate() -> None:
    for big in (2**63, 2**70):
        votes = VoteArrays([0], [0], [1], [OP_GT], [big])
        assert np.asarray(kj.validate_votes(votes, [3]).reason_V).tolist() == [VOTE_B_OUT_OF_RANGE]
        assert validate_votes(votes, [3]).reason_V.tolist() == [VOTE_B_OUT_OF_RANGE]
    assert vote_arrays([0], [0], [1], [">"], [2**70]).b_V.tolist() == [2**31 - 1]


def test_jax_int64_under_jit_with_x64_saturates() -> None:
    with jax.enable_x64(True):
        votes = VoteArrays(*(jax.numpy.asarray(x, jax.numpy.int64) for x in ([0], [2], [WIDE], [0], [0])))
        got = jax.jit(kj.validate_votes)(votes, jax.numpy.asarray([3]))
        assert np.asarray(got.reason_V).tolist() == [VOTE_A_OUT_OF_RANGE]


@pytest.mark.parametrize("field", VoteArrays._fields[:5])
def test_float_fields_are_a_type_error_naming_the_field(field: str) -> None:
    base = {"group_ids_V": [0], "authors_V": [2], "a_V": [0], "op_V": [OP_GT], "b_V": [1]}
    base[field] = [1.9]
    votes = VoteArrays(*(np.asarray(base[k]) for k in VoteArrays._fields[:5]))
    for fn in (validate_votes, kj.validate_votes):
        with pytest.raises(TypeError, match=f"votes.{field}"):
            fn(votes, [3])
    traced = VoteArrays(*(jax.numpy.asarray(x) for x in votes[:5]))
    with pytest.raises(TypeError, match=f"votes.{field}"):
        jax.jit(kj.validate_votes)(traced, jax.numpy.asarray([3]))
    with pytest.raises(TypeError, match=r"votes\.a_V"):
        kj.validate_votes(VoteArrays([0], [0], [True], [0], [1]), [3])


# --- packed votes (ParsedResponse.vote_codes) -----------------------------------------------------

_ids = st.one_of(st.integers(-70, 70), st.integers(-(2**70), 2**70), st.booleans())
_ops = st.sampled_from([">", "=", "<", ">=", ""])
_votes = st.lists(st.tuples(_ids, _ops, _ids).map(lambda t: Vote(*t)), max_size=6)
_responses = st.builds(
    lambda author, votes, ok: ParsedResponse.make(author, votes=tuple(votes), ok=ok),
    _ids,
    _votes,
    st.booleans(),
)


@given(st.lists(st.lists(_responses, max_size=5), max_size=6), st.booleans())
def test_packed_votes_give_the_columns_of_the_vote_tuples(
    debates: list[list[ParsedResponse]], include_failed: bool
) -> None:
    """The packed path (every response carries vote_codes) equals the per-vote path (none does), and a
    mix falls back to the per-vote path."""
    unpacked = [[dataclasses.replace(r, vote_codes=None) for r in d] for d in debates]
    fast = votes_from_responses(debates, include_failed=include_failed)
    slow = votes_from_responses(unpacked, include_failed=include_failed)
    for x, y in zip(fast[:5], slow[:5], strict=True):
        assert x.dtype == y.dtype == np.int32 and x.tolist() == y.tolist()
    if debates and debates[0]:
        mixed = [[dataclasses.replace(debates[0][0], vote_codes=None), *debates[0][1:]], *debates[1:]]
        got = votes_from_responses(mixed, include_failed=include_failed)
        assert all(x.tolist() == y.tolist() for x, y in zip(got[:5], slow[:5], strict=True))


@given(
    st.lists(st.lists(st.tuples(_responses, st.booleans()), max_size=5), max_size=6),
    st.booleans(),
    st.integers(1, 4),
)
def test_packed_fast_path_matches_the_per_vote_path_in_chunks_and_with_stale_codes(
    debates: list[list[tuple[ParsedResponse, bool]]], include_failed: bool, chunk: int
) -> None:
    """``_packed_votes`` (small chunks, so that a batch spans several) gives exactly the per-vote path's
    columns, or None; stale codes (votes cut after packing) never reach the result."""
    packed = [
        [dataclasses.replace(r, votes=r.votes[:-1]) if stale and r.votes else r for r, stale in d]
        for d in debates
    ]
    unpacked = [[dataclasses.replace(r, vote_codes=None) for r in d] for d in packed]
    slow = votes_from_responses(unpacked, include_failed=include_failed)
    with mock.patch.object(kernel._votes, "_CHUNK", chunk):
        fast = kernel._votes._packed_votes(packed, include_failed)
        got = votes_from_responses(packed, include_failed=include_failed)
    for x, y in zip(got[:5], slow[:5], strict=True):
        assert x.dtype == y.dtype == np.int32 and x.tolist() == y.tolist()
    if fast is not None:
        for x, y in zip(fast[:5], slow[:5], strict=True):
            assert x.dtype == y.dtype == np.int32 and x.tolist() == y.tolist()


def test_parsers_pack_their_votes_and_stale_codes_of_another_length_are_not_used() -> None:
    text = (
        "<solution>4</solution><evaluation>ok</evaluation><comparison>Agent 0 > Agent 1\n"
        "Agent 2 = Agent 1</comparison><consensus>YES</consensus><consensus_reason>r</consensus_reason>"
    )
    for policy in ("robust", "reference"):
        r = parse_response(text, 3, policy=policy)
        assert r.vote_codes == pack_votes(r.votes) and len(r.votes) == 2
    stale = dataclasses.replace(r, votes=r.votes[:1])  # replace() kept the codes of two votes
    assert votes_from_responses([[stale]]).a_V.tolist() == [0]


def test_pack_votes_names_a_bad_vote() -> None:
    with pytest.raises(ValueError, match=r"votes\[1\] must be an \(a, op, b\) triple"):
        pack_votes([(0, ">", 1), (0, 1)])
    with pytest.raises(ValueError, match=r"votes\[0\]\.a must be an integer agent id"):
        pack_votes([(None, ">", 1)])


def test_pack_votes_refuses_ids_that_are_not_integers() -> None:
    """A float or a string id was read as an int (1.5 → 1, "1" → 1); each is refused now. (A bool is an
    int, as in Python and in the other vote paths: test_packed_votes_give_the_columns_of_the_vote_tuples.)"""
    for bad in (1.5, "1", np.float64(2.0), None):
        with pytest.raises(ValueError, match=r"votes\[0\]\.a must be an integer agent id"):
            pack_votes([Vote(bad, ">", 2)])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"votes\[1\]\.b must be an integer agent id"):
            pack_votes([Vote(0, ">", 1), Vote(2, "=", bad)])  # type: ignore[arg-type]
    assert np.frombuffer(pack_votes([Vote(np.int64(1), ">", np.int32(2))]), np.int32).tolist() == [1, 0, 2]


def test_vote_functions_name_a_votes_argument_that_is_not_vote_arrays() -> None:
    from kernel import bradley_terry_rewards, pairwise_rewards, validate_votes

    for fn in (validate_votes, pairwise_rewards, bradley_terry_rewards):
        for bad in (([0], [0], [0], [0], [1]), None):
            with pytest.raises(TypeError, match="votes must be a VoteArrays"):
                fn(bad, [2])  # type: ignore[arg-type]


def test_include_failed_must_be_a_bool() -> None:
    from kernel import ParsedResponse, parse_responses

    failed = [[ParsedResponse.make(0, ok=False, votes=(Vote(1, ">", 2),))]]
    with pytest.raises(TypeError, match="include_failed must be a bool, got str 'no'"):
        votes_from_responses(failed, include_failed="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="include_failed must be a bool"):
        parse_responses(["no tags"], [0]).votes([0], include_failed=1)  # type: ignore[arg-type]
    assert votes_from_responses(failed, include_failed=np.bool_(True)).a_V.tolist() == [1]
