"""Judge votes: votes cast by someone who is not a debater (an LLM judge, a verifier, a human label).

A judge vote (``judge_V ≥ 0``) counts for both of its agents, every vote counts with its weight
(``weight_V``), and judges never get rows. Hand-computed examples, properties against the obvious
equivalents (weights as multiplicities, judge votes as votes of an unknown author), validation, errors,
the preference-model rewards, and numpy ↔ JAX parity under jit.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
import kernel.jax as kj
from kernel import (
    OP_GT,
    PAIRWISE_MODES,
    VOTE_REASONS,
    VoteArrays,
    bradley_terry_rewards,
    copeland_rewards,
    pairwise_rewards,
    validate_votes,
    vote_arrays,
)
from kernel.testing import (
    check_reward_leave_one_out,
    check_reward_matches_reference,
    reference_pairwise_rewards,
    run_reward_suite,
)
from kernel.testing.strategies import VoteBatch, vote_batches
from tests._profile import examples

JUDGED = vote_batches(judges=True, padding=True)


def _with(
    votes: VoteArrays, judges: list[int] | None = None, weights: list[float] | None = None
) -> VoteArrays:
    j = None if judges is None else np.asarray(judges, np.int32)
    w = None if weights is None else np.asarray(weights, np.float64)
    return votes._replace(judge_V=j, weight_V=w)


def _as_unknown_authors(votes: VoteArrays) -> VoteArrays:
    """Judge votes rewritten as debater votes of author −1 (who excludes nobody); judge fields dropped."""
    if votes.judge_V is None:
        return votes
    authors = np.where(votes.judge_V >= 0, -1, votes.authors_V).astype(np.int32)
    return votes._replace(authors_V=authors, judge_V=None)


# --- hand-computed examples ----------------------------------------------------------------------


def test_a_judge_vote_counts_for_both_agents_whatever_its_author_field() -> None:
    # "0 > 1" with author 0: as agent 0's own vote it judges only agent 1; as a judge's vote, both.
    v = vote_arrays([0], [0], [0], [">"], [1])
    assert pairwise_rewards(v, [3]).rewards_PG.tolist() == [0.0, 0.0, 0.0]  # agent 0 unvoted
    judged = _with(v, judges=[5])
    assert pairwise_rewards(judged, [3]).rewards_PG.tolist() == [1.0, 0.0, 0.0]
    assert pairwise_rewards(judged, [3], mode="win_minus_loss").rewards_PG.tolist() == [1.0, -1.0, 0.0]
    assert pairwise_rewards(judged, [3], unvoted=0.5).rewards_PG.tolist() == [1.0, 0.0, 0.5]


def test_a_judge_rewards_two_agents_whose_own_votes_judge_nobody() -> None:
    # Two agents: each compares itself (dropped for itself, counts for the other) and a judge ties them.
    v = vote_arrays([0, 0, 0], [0, 1, 3], [0, 1, 1], [">", ">", "="], [1, 0, 0], judges=[-1, -1, 0])
    # agent 0: loss (u1), tie (judge) → ¼ ; agent 1: loss (u0), tie (judge) → ¼
    assert pairwise_rewards(v, [2]).rewards_PG.tolist() == [0.25, 0.25]
    assert pairwise_rewards(v, [2], mode="win_minus_loss").rewards_PG.tolist() == [-0.5, -0.5]


def test_a_debaters_own_vote_is_still_excluded_beside_judges() -> None:
    # Agent 0 praises itself (debater vote, judge −1); judge 2 says 1 > 0, judge 3 says 0 = 2.
    v = vote_arrays([0, 0, 0], [0, 0, 0], [0, 1, 0], [">", ">", "="], [1, 0, 2], judges=[-1, 2, 3])
    # agent 0: loss (judge 2), tie (judge 3) → ¼ ; agent 1: loss (u0), win (judge 2) → ½ ; agent 2: tie → ½
    assert pairwise_rewards(v, [3]).rewards_PG.tolist() == [0.25, 0.5, 0.5]
    assert pairwise_rewards(v, [3], mode="win_minus_loss").rewards_PG.tolist() == [-0.5, 0.0, 0.0]


def test_weight_two_is_the_vote_twice_and_weight_zero_is_no_vote() -> None:
    base = vote_arrays([0, 0, 0], [2, 2, -1], [0, 1, 2], [">", ">", "="], [1, 0, 0], judges=[-1, -1, 0])
    twice = vote_arrays(
        [0, 0, 0, 0], [2, 2, 2, -1], [0, 0, 1, 2], [">", ">", ">", "="], [1, 1, 0, 0], judges=[-1, -1, -1, 0]
    )
    weighted = _with(base, judges=[-1, -1, 0], weights=[2.0, 1.0, 1.0])
    for mode in PAIRWISE_MODES:
        want = pairwise_rewards(twice, [3], mode=mode).rewards_PG
        assert pairwise_rewards(weighted, [3], mode=mode).rewards_PG.tolist() == want.tolist()
    # 0: win (weight 2), loss (u2, 1), tie (judge) → 2.5/4; 1: loss (2), win (1) → 1/3; 2: tie → ½
    assert pairwise_rewards(weighted, [3]).rewards_PG.tolist() == [2.5 / 4, 1 / 3, 0.5]
    removed = vote_arrays([0, 0], [2, -1], [1, 2], [">", "="], [0, 0], judges=[-1, 0])
    zero = _with(base, judges=[-1, -1, 0], weights=[0.0, 1.0, 1.0])
    assert (
        pairwise_rewards(zero, [3]).rewards_PG.tolist() == pairwise_rewards(removed, [3]).rewards_PG.tolist()
    )
    # a vote of weight 0 still is a valid vote: it counts in total_votes_P (rows), not in the rewards
    assert pairwise_rewards(zero, [3]).total_votes_P.tolist() == [3]
    only_zero = _with(vote_arrays([0], [2], [0], [">"], [1]), weights=[0.0])
    assert pairwise_rewards(only_zero, [3], unvoted=0.5).rewards_PG.tolist() == [0.5, 0.5, 0.5]


def test_fractional_weights_divide_by_the_weight_not_by_one() -> None:
    # A lone vote of weight ½: V = ½, W = ½ → r = 1 (a max(V, 1) denominator would give ½).
    v = vote_arrays([0], [-1], [1], [">"], [0], judges=[4], weights=[0.5])
    assert pairwise_rewards(v, [2]).rewards_PG.tolist() == [0.0, 1.0]
    assert pairwise_rewards(v, [2], mode="win_minus_loss").rewards_PG.tolist() == [-1.0, 1.0]
    tiny = _with(v, judges=[4], weights=[1e-300])
    assert pairwise_rewards(tiny, [2]).rewards_PG.tolist() == [0.0, 1.0]


def test_judges_never_add_rows_and_are_counted_per_debate() -> None:
    v = vote_arrays(
        group_ids=[0, 0, 1, 1, 1, 2],
        authors=[1, -1, 0, 0, 9, 0],
        a=[0, 1, 0, 5, 1, 0],
        ops=[">", "=", ">", ">", ">", ">"],
        b=[1, 2, 1, 0, 0, 1],
        judges=[-1, 7, 1000, 7, -1, 0],  # debate 1: one valid and one malformed judge vote
    )
    res = pairwise_rewards(v, [3, 2, 2])
    assert res.rewards_PG.shape == (7,)
    assert res.group_ids_PG.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert res.total_votes_P.tolist() == [2, 2, 1]
    assert res.malformed_P.tolist() == [0, 1, 0]
    assert res.judge_votes_P.tolist() == [1, 1, 1]
    assert res.judge_votes_P.dtype == np.int32
    # debate 1: judge 0 > 1 (counts for both), u9: 1 > 0 → agent 0: ½, agent 1: ½
    assert res.rewards_PG[3:5].tolist() == [0.5, 0.5]
    plain = pairwise_rewards(v._replace(judge_V=None), [3, 2, 2])
    assert plain.judge_votes_P.tolist() == [0, 0, 0]


def test_any_negative_judge_id_is_a_debaters_vote() -> None:
    v = vote_arrays([0, 0], [0, 1], [0, 1], [">", "="], [1, 2])
    for j in (-1, -2, -(2**31)):
        judged = _with(v, judges=[j, j])
        assert (
            pairwise_rewards(judged, [3]).rewards_PG.tolist() == pairwise_rewards(v, [3]).rewards_PG.tolist()
        )
        assert pairwise_rewards(judged, [3]).judge_votes_P.tolist() == [0]


def test_vote_arrays_builds_judge_fields_and_take_keeps_them() -> None:
    v = vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2], judges=[-1, 3], weights=[1, 2])
    assert v.judge_V is not None and v.judge_V.dtype == np.int32 and v.judge_V.tolist() == [-1, 3]
    assert v.weight_V is not None and v.weight_V.dtype == np.float64 and v.weight_V.tolist() == [1.0, 2.0]
    assert vote_arrays([0], [1], [0], [">"], [2], judges=[2**40]).judge_V.tolist() == [2**31 - 1]
    five = VoteArrays(*v[:5])  # positional construction of the five id fields still works
    assert five.judge_V is None and five.weight_V is None
    back = v.take(np.array([True, False]))
    assert back.judge_V is not None and back.weight_V is not None
    assert back.judge_V.tolist() == [-1] and back.weight_V.tolist() == [1.0]
    assert v.take([1, 1]).a_V.tolist() == [1, 1]
    assert five.take([0]).weight_V is None
    assert np.asarray(v.take([]).judge_V).tolist() == []


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf])
def test_a_negative_or_non_finite_weight_raises_naming_the_argument(bad: float) -> None:
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0, got .* at vote 1"):
        vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2], weights=[1.0, bad])
    v = vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2], judges=[-1, 0])
    bad_votes = v._replace(weight_V=np.array([1.0, bad]))
    calls = [
        functools.partial(pairwise_rewards, bad_votes, [3]),
        functools.partial(validate_votes, bad_votes, [3]),
        functools.partial(kj.pairwise_rewards, bad_votes, [3]),
        functools.partial(kj.validate_votes, bad_votes, [3]),
        functools.partial(bradley_terry_rewards, bad_votes, [3]),
        functools.partial(copeland_rewards, bad_votes, [3]),
        functools.partial(kj.bradley_terry_rewards, bad_votes, [3]),
        functools.partial(kj.copeland_rewards, bad_votes, [3]),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"votes\.weight_V must be finite and >= 0"):
            call()


def test_judge_field_types_and_lengths_raise_naming_the_field() -> None:
    v = vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2])
    with pytest.raises(TypeError, match="judges"):
        vote_arrays([0], [1], [0], [">"], [2], judges=[0.5])
    with pytest.raises(TypeError, match="weights"):
        vote_arrays([0], [1], [0], [">"], [2], weights=["heavy"])
    with pytest.raises(ValueError, match="same length"):
        vote_arrays([0], [1], [0], [">"], [2], judges=[0, 1])
    with pytest.raises(ValueError, match="weights must have length 1"):
        vote_arrays([0], [1], [0], [">"], [2], weights=[1.0, 2.0])
    for fn in (pairwise_rewards, validate_votes, kj.pairwise_rewards, kj.validate_votes):
        with pytest.raises(ValueError, match=r"votes\.judge_V"):
            fn(v._replace(judge_V=np.array([0], np.int32)), [3])
        with pytest.raises(TypeError, match=r"votes\.judge_V"):
            fn(v._replace(judge_V=np.array([0.0, 1.0])), [3])
        with pytest.raises(ValueError, match=r"votes\.weight_V"):
            fn(v._replace(weight_V=np.array([1.0, 1.0, 1.0])), [3])
        with pytest.raises(TypeError, match=r"votes\.weight_V"):
            fn(v._replace(weight_V=np.array(["a", "b"])), [3])


def test_weights_given_twice_to_the_preference_rewards_raise() -> None:
    v = vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2], weights=[1.0, 2.0])
    for fn in (bradley_terry_rewards, copeland_rewards, kj.bradley_terry_rewards, kj.copeland_rewards):
        with pytest.raises(ValueError, match=r"weight_V: the votes carry weights already"):
            fn(v, [3], weight_V=[1.0, 1.0])


# --- validation ----------------------------------------------------------------------------------


def test_judge_votes_get_the_usual_reasons_and_count_as_malformed() -> None:
    v = vote_arrays(
        group_ids=[0, 0, 0, 0, 0, 1],
        authors=[0, 0, 0, 0, 0, 0],
        a=[0, 3, 0, 1, 0, 9],
        ops=[">", ">", ">", "=", "<", ">"],
        b=[1, 0, 7, 1, 2, 0],
        judges=[0, 1, 2, 3, 4, 5],
        weights=[0.0, 1.0, 2.0, 0.5, 1.0, 3.0],
    )
    res = validate_votes(v, [3])
    assert [VOTE_REASONS[r] for r in res.reason_V] == [
        "valid",
        "a_out_of_range",
        "b_out_of_range",
        "self_pair",
        "bad_op",
        "padding",
    ]
    assert res.malformed_P.tolist() == [4]
    assert VOTE_REASONS == ("valid", "padding", "a_out_of_range", "b_out_of_range", "self_pair", "bad_op")


@given(JUDGED)
def test_judges_and_weights_do_not_change_validity(batch: VoteBatch) -> None:
    with_judges = validate_votes(batch.votes, batch.num_agents_P)
    without = validate_votes(batch.votes._replace(judge_V=None, weight_V=None), batch.num_agents_P)
    assert with_judges.valid_V.tolist() == without.valid_V.tolist()
    assert with_judges.reason_V.tolist() == without.reason_V.tolist()
    assert with_judges.malformed_P.tolist() == without.malformed_P.tolist()


# --- properties ----------------------------------------------------------------------------------


@given(vote_batches(padding=True), st.sampled_from(PAIRWISE_MODES))
def test_default_judge_fields_give_exactly_todays_results(batch: VoteBatch, mode: str) -> None:
    size = batch.votes.a_V.size
    explicit = _with(batch.votes, judges=[-1] * size, weights=[1.0] * size)
    want = pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode)
    for votes in (explicit, _with(batch.votes, judges=[-1] * size), _with(batch.votes, weights=[1.0] * size)):
        got = pairwise_rewards(votes, batch.num_agents_P, mode=mode)
        for name in got._fields:
            assert getattr(got, name).dtype == getattr(want, name).dtype, name
            assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
    ref = reference_pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode)
    assert want.rewards_PG.tolist() == ref.tolist()


@given(JUDGED, st.sampled_from(PAIRWISE_MODES), st.data())
def test_integer_weights_are_multiplicities(batch: VoteBatch, mode: str, data: st.DataObject) -> None:
    size = batch.votes.a_V.size
    counts = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)), np.int64)
    weighted = batch.votes._replace(weight_V=counts.astype(np.float64))
    repeated = batch.votes._replace(weight_V=None).take(np.repeat(np.arange(size), counts))
    got = pairwise_rewards(weighted, batch.num_agents_P, mode=mode).rewards_PG
    want = pairwise_rewards(repeated, batch.num_agents_P, mode=mode).rewards_PG
    assert got.tolist() == want.tolist()  # exact: sums of small integers


@given(JUDGED, st.sampled_from(PAIRWISE_MODES))
def test_a_judge_vote_is_a_vote_whose_author_excludes_nobody(batch: VoteBatch, mode: str) -> None:
    got = pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode)
    want = pairwise_rewards(_as_unknown_authors(batch.votes), batch.num_agents_P, mode=mode)
    assert got.rewards_PG.tolist() == want.rewards_PG.tolist()
    assert got.total_votes_P.tolist() == want.total_votes_P.tolist()
    assert got.malformed_P.tolist() == want.malformed_P.tolist()
    ref = reference_pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode)
    assert got.rewards_PG.tolist() == ref.tolist()  # dyadic weights: exact


@given(JUDGED, st.sampled_from(PAIRWISE_MODES), st.sampled_from([0.25, 2.0, 1024.0]))
def test_scaling_every_weight_changes_no_reward(batch: VoteBatch, mode: str, scale: float) -> None:
    size = batch.votes.a_V.size
    w = np.ones(size) if batch.votes.weight_V is None else batch.votes.weight_V
    scaled = batch.votes._replace(weight_V=w * scale)
    got = pairwise_rewards(scaled, batch.num_agents_P, mode=mode).rewards_PG
    want = pairwise_rewards(batch.votes._replace(weight_V=w), batch.num_agents_P, mode=mode).rewards_PG
    assert got.tolist() == want.tolist()  # powers of two: exact


@given(JUDGED)
def test_judge_votes_and_counts_per_debate(batch: VoteBatch) -> None:
    res = pairwise_rewards(batch.votes, batch.num_agents_P)
    valid = validate_votes(batch.votes, batch.num_agents_P).valid_V
    assert batch.votes.judge_V is not None
    judged = valid & (batch.votes.judge_V >= 0)
    num_groups = len(batch.num_agents_P)
    want = np.bincount(batch.votes.group_ids_V[judged], minlength=num_groups + 1)[:num_groups]
    assert res.judge_votes_P.tolist() == want.tolist()
    assert res.rewards_PG.shape == (int(batch.num_agents_P.sum()),)


@pytest.mark.parametrize("mode", PAIRWISE_MODES)
def test_the_reward_suite_with_judges_passes_and_catches_a_function_blind_to_judges(mode: str) -> None:
    ours = functools.partial(pairwise_rewards, mode=mode)
    assert set(run_reward_suite(ours, mode=mode, judges=True).values()) == {"passed"}

    def blind(votes: VoteArrays, n: Any) -> Any:  # reads a judge vote as its author's own vote
        return pairwise_rewards(votes._replace(judge_V=None), n, mode=mode)

    settings_ = {"derandomize": True, "database": None}
    options: dict[str, Any] = {"checks": ["matches_reference"], "raise_on_failure": False}
    found = run_reward_suite(
        blind, mode=mode, judges=True, max_examples=300, hypothesis_settings=settings_, **options
    )
    assert found["matches_reference"].startswith("failed: check_reward_matches_reference"), found


def test_the_leave_one_out_check_never_drops_a_judge_vote() -> None:
    # Judge 0's vote "0 > 1" carries author 0: it is not agent 0's own vote, so the check keeps it (and
    # a reward that honours judges passes), while the same vote cast by agent 0 is dropped.
    v = vote_arrays([0, 0], [0, 2], [0, 1], [">", "="], [1, 2], judges=[0, -1])
    check_reward_leave_one_out(pairwise_rewards, v, [3])

    def judge_is_own(votes: VoteArrays, n: Any) -> Any:  # counts a judge vote only for non-authors
        return pairwise_rewards(votes._replace(judge_V=None), n)

    check_reward_leave_one_out(judge_is_own, v, [3])  # blind, but leave-one-out alone cannot tell
    with pytest.raises(AssertionError, match="disagrees with the reference"):
        check_reward_matches_reference(judge_is_own, v, [3])


# --- preference-model rewards --------------------------------------------------------------------


@settings(max_examples=examples(15))
@given(vote_batches(judges=True, max_groups=3, max_agents=4, max_votes=10), st.booleans())
def test_preference_rewards_keep_judge_votes_for_everyone(batch: VoteBatch, loo: bool) -> None:
    n = batch.num_agents_P
    unknown = _as_unknown_authors(batch.votes)
    got = bradley_terry_rewards(batch.votes, n, leave_one_out=loo, tol=1e-13).rewards_PG
    want = bradley_terry_rewards(unknown, n, leave_one_out=loo, tol=1e-13).rewards_PG
    np.testing.assert_array_equal(got, want)
    got_c = copeland_rewards(batch.votes, n, leave_one_out=loo).rewards_PG
    np.testing.assert_array_equal(got_c, copeland_rewards(unknown, n, leave_one_out=loo).rewards_PG)
    if batch.votes.weight_V is not None:  # the field and the keyword weigh alike
        keyword = bradley_terry_rewards(
            batch.votes._replace(weight_V=None),
            n,
            weight_V=batch.votes.weight_V,
            leave_one_out=loo,
            tol=1e-13,
        )
        np.testing.assert_array_equal(got, keyword.rewards_PG)


def test_preference_rewards_hand_example_with_a_judge() -> None:
    # Agent 0 says 0 > 1 (its own vote); a judge says the same. With leave-one-out agent 0's fit sees
    # only the judge's vote, agent 1's fit both: Copeland 0 beats 1 in both.
    v = vote_arrays([0, 0], [0, 0], [0, 0], [">", ">"], [1, 1], judges=[-1, 9])
    assert copeland_rewards(v, [2]).rewards_PG.tolist() == [1.0, -1.0]
    no_judge = v._replace(judge_V=None)
    assert copeland_rewards(no_judge, [2]).rewards_PG.tolist() == [0.0, -1.0]
    fit = bradley_terry_rewards(v, [2], leave_one_out=False)
    assert fit.rewards_PG.shape == (2,)  # judges add no rows


# --- numpy ↔ JAX parity under jit ----------------------------------------------------------------

_PAD_GROUPS, _PAD_VOTES, _PAD_ROWS = 4, 96, 24
_TRACES: Counter[str] = Counter()


def _jax_impl(votes: VoteArrays, num_agents_P: jax.Array, *, mode: str) -> Any:
    _TRACES[mode] += 1
    rewards = kj.pairwise_rewards(votes, num_agents_P, mode=mode, num_rows=_PAD_ROWS)
    return rewards, kj.validate_votes(votes, num_agents_P)


_jax_rewards = jax.jit(_jax_impl, static_argnames="mode")


def _pad(batch: VoteBatch) -> tuple[VoteArrays, np.ndarray]:
    """4 debates, 96 votes (padding votes: group id 4, debater votes of weight 1)."""
    v, num_groups = batch.votes, len(batch.num_agents_P)
    g = np.where(v.group_ids_V == num_groups, _PAD_GROUPS, v.group_ids_V)
    pad = _PAD_VOTES - g.size
    fills = (_PAD_GROUPS, 0, 0, OP_GT, 1)
    g, u, a, op, b = (
        np.concatenate([x, np.full(pad, fill, np.int32)]) for x, fill in zip([g, *v[1:5]], fills, strict=True)
    )
    assert v.judge_V is not None
    judge = np.concatenate([v.judge_V, np.full(pad, -1, np.int32)])
    weight = np.concatenate([np.ones(v.a_V.size) if v.weight_V is None else v.weight_V, np.ones(pad)])
    n = np.concatenate([batch.num_agents_P, np.zeros(_PAD_GROUPS - num_groups, np.int64)])
    return VoteArrays(g, u, a, op, b, judge, weight.astype(np.float32)), n.astype(np.int32)


@given(vote_batches(judges=True, max_groups=_PAD_GROUPS, padding=True), st.sampled_from(PAIRWISE_MODES))
def test_jax_matches_numpy_under_jit(batch: VoteBatch, mode: str) -> None:
    votes, n = _pad(batch)
    want = pairwise_rewards(votes, n, mode=mode)
    got, validation = _jax_rewards(votes, n, mode=mode)
    want_validation = validate_votes(votes, n)
    for name in want_validation._fields:
        assert np.asarray(getattr(validation, name)).tolist() == getattr(want_validation, name).tolist()
    rows = int(n.sum())
    rewards = np.asarray(got.rewards_PG)
    assert rewards.dtype == np.float32 and rewards.shape == (_PAD_ROWS,)
    np.testing.assert_allclose(rewards[:rows], want.rewards_PG, rtol=1e-6, atol=1e-7)
    assert rewards[rows:].tolist() == [0.0] * (_PAD_ROWS - rows)
    for name in ("total_votes_P", "malformed_P", "any_votes_P", "judge_votes_P"):
        assert np.asarray(getattr(got, name)).tolist() == getattr(want, name).tolist(), name
    assert _TRACES[mode] == 1  # one compilation per mode across all examples


def test_jax_traced_weights_and_judges_under_jit() -> None:
    v = vote_arrays([0, 0, 0], [0, 0, -1], [0, 1, 1], [">", ">", "="], [1, 0, 2], judges=[-1, 4, 2])
    v = v._replace(weight_V=np.array([1.0, 0.5, 2.0], np.float32))
    got = jax.jit(functools.partial(kj.pairwise_rewards, num_rows=3))(v, np.array([3], np.int32))
    want = pairwise_rewards(v, [3])
    np.testing.assert_allclose(np.asarray(got.rewards_PG), want.rewards_PG, rtol=1e-6)
    # agent 0: loss (judge 4, ½) → 0; agent 1: loss (u0), win (½), tie (2) → 1.5/3.5; agent 2: tie → ½
    assert want.rewards_PG.tolist() == [0.0, 1.5 / 3.5, 0.5]
    assert np.asarray(got.judge_votes_P).tolist() == [2]


def test_jax_preference_rewards_with_judges_match_numpy() -> None:
    ids = ([0, 0, 0, 0, 1], [0, 1, 2, 0, 0], [0, 1, 2, 2, 0], [">", ">", "=", ">", ">"], [1, 2, 0, 1, 1])
    v = vote_arrays(*ids, judges=[-1, 3, -1, 0, 0], weights=[1.0, 2.0, 1.0, 0.5, 1.0])
    for loo in (True, False):
        want = bradley_terry_rewards(v, [3, 2], leave_one_out=loo, tol=1e-12).rewards_PG
        with jax.enable_x64(True):
            got = kj.bradley_terry_rewards(v, [3, 2], leave_one_out=loo, tol=1e-12).rewards_PG
            got_c = kj.copeland_rewards(v, [3, 2], leave_one_out=loo).rewards_PG
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-9)
        want_c = copeland_rewards(v, [3, 2], leave_one_out=loo).rewards_PG
        np.testing.assert_array_equal(np.asarray(got_c), want_c)


def test_public_names() -> None:
    assert kernel.VoteArrays._fields[5:] == ("judge_V", "weight_V")
    assert "judge_votes_P" in kernel.PairwiseRewards._fields
    assert OP_GT == 0
