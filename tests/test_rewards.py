"""Leave-one-out pairwise rewards: hand examples, golden batch, properties, numpy ↔ JAX parity."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel.jax as kj
from kernel import (
    OP_EQ,
    OP_GT,
    PAIRWISE_MODES,
    PairwiseRewards,
    VoteArrays,
    pairwise_rewards,
    vote_arrays,
)
from kernel.testing.strategies import VoteBatch, debate_votes, vote_batches
from tests.golden import VECTORS_DIR, read_records


def _reference(
    num_agents: int, votes: list[tuple[int, int, int, int]], mode: str, unvoted: float = 0.0
) -> tuple[list[float], int, int]:
    """The slow obvious algorithm of one debate: loop over agents, then over every vote."""
    rewards = []
    for i in range(num_agents):
        score, count = 0.0, 0
        for u, a, op, b in votes:
            valid = 0 <= a < num_agents and 0 <= b < num_agents and a != b and op in (OP_GT, OP_EQ)
            if not valid or u == i or i not in (a, b):
                continue
            count += 1
            if mode == "win_rate":
                score += 0.5 if op == OP_EQ else float(i == a)
            elif op == OP_GT:
                score += 1.0 if i == a else -1.0
        rewards.append(score / count if count else unvoted)
    valid_votes = sum(
        0 <= a < num_agents and 0 <= b < num_agents and a != b and op in (OP_GT, OP_EQ)
        for _, a, op, b in votes
    )
    return rewards, valid_votes, len(votes) - valid_votes


def _by_debate(batch: VoteBatch) -> list[list[tuple[int, int, int, int]]]:
    debates: list[list[tuple[int, int, int, int]]] = [[] for _ in batch.num_agents_P]
    for g, u, a, op, b in zip(*(x.tolist() for x in batch.votes[:5]), strict=True):
        if g < len(debates):  # padding rows belong to no debate
            debates[g].append((u, a, op, b))
    return debates


def _check_against_reference(batch: VoteBatch, result: PairwiseRewards, mode: str, unvoted: float) -> None:
    rewards, totals, malformed = [], [], []
    for n, votes in zip(batch.num_agents_P.tolist(), _by_debate(batch), strict=True):
        r, t, m = _reference(n, votes, mode, unvoted)
        rewards += r
        totals.append(t)
        malformed.append(m)
    assert result.rewards_PG.dtype == np.float64
    assert result.rewards_PG.tolist() == rewards  # exact
    assert result.group_ids_PG.tolist() == np.repeat(np.arange(len(totals)), batch.num_agents_P).tolist()
    assert result.total_votes_P.tolist() == totals
    assert result.malformed_P.tolist() == malformed
    assert result.any_votes_P.tolist() == [t > 0 for t in totals]


# --- hand-computed examples ----------------------------------------------------------------------


def test_hand_example_three_agents_both_modes() -> None:
    # Debate 0 (N = 3): u2: 0 > 1, u0: 1 = 2, u1: 0 > 2, u1: 0 > 0 (malformed), u0: 3 > 1 (malformed).
    # Agent 0: both wins count (authors 2 and 1)            → W = 2, V = 2: 1;    S = 2: 1
    # Agent 1: loss (u2), tie (u0)                           → W = ½, V = 2: ¼;    S = −1: −½
    # Agent 2: tie (u0), loss (u1)                           → W = ½, V = 2: ¼;    S = −1: −½
    v = vote_arrays(
        group_ids=[0, 0, 0, 0, 0],
        authors=[2, 0, 1, 1, 0],
        a=[0, 1, 0, 0, 3],
        ops=[">", "=", ">", ">", ">"],
        b=[1, 2, 2, 0, 1],
    )
    win_rate = pairwise_rewards(v, [3])
    assert win_rate.rewards_PG.tolist() == [1.0, 0.25, 0.25]
    assert pairwise_rewards(v, [3], mode="win_minus_loss").rewards_PG.tolist() == [1.0, -0.5, -0.5]
    assert (win_rate.total_votes_P.tolist(), win_rate.malformed_P.tolist()) == ([3], [2])
    assert win_rate.any_votes_P.tolist() == [True]
    assert win_rate.total_votes_P.dtype == np.int32 and win_rate.malformed_P.dtype == np.int32


def test_leave_one_out_excludes_the_author_only() -> None:
    # Agent 0 praises itself twice; only agent 1's vote (0 = 1) judges agent 0.
    v = vote_arrays([0, 0, 0], [0, 0, 1], [0, 0, 0], [">", ">", "="], [1, 2, 1])
    assert pairwise_rewards(v, [3]).rewards_PG.tolist() == [0.5, 0.0, 0.0]
    # Agent 1: loss (u0), tie (u1 excluded) → 0/1; agent 2: loss (u0) → 0/1.
    assert pairwise_rewards(v, [3], mode="win_minus_loss").rewards_PG.tolist() == [0.0, -1.0, -1.0]


def test_unknown_or_out_of_range_authors_exclude_nobody() -> None:
    for author in (-1, 3, 99, -7):
        v = vote_arrays([0, 0], [author] * 2, [0, 2], [">", "="], [1, 0])
        assert pairwise_rewards(v, [3]).rewards_PG.tolist() == [0.75, 0.0, 0.5]


def test_repeated_votes_all_count() -> None:
    v = vote_arrays([0] * 4, [2] * 4, [0, 0, 0, 1], [">"] * 4, [1, 1, 1, 0])
    assert pairwise_rewards(v, [3]).rewards_PG.tolist() == [0.75, 0.25, 0.0]
    assert pairwise_rewards(v, [3]).total_votes_P.tolist() == [4]


def test_two_agents_a_self_comparison_still_judges_the_other_agent() -> None:
    # The reference's "2 agents → always 0" comes from its parser dropping comparisons that involve
    # the author; the reward itself only excludes the author: u0's "0 > 1" is a loss for agent 1.
    v = vote_arrays([0, 0, 0], [0, 1, 0], [0, 1, 1], [">", ">", "="], [1, 0, 0])
    win_rate = pairwise_rewards(v, [2])
    assert win_rate.rewards_PG.tolist() == [0.0, 0.25]
    assert pairwise_rewards(v, [2], mode="win_minus_loss").rewards_PG.tolist() == [-1.0, -0.5]
    assert win_rate.total_votes_P.tolist() == [3]


def test_unvoted_agents_get_the_unvoted_value() -> None:
    v = vote_arrays([0, 1], [2, 0], [0, 0], [">", ">"], [1, 1])
    assert pairwise_rewards(v, [4, 2]).rewards_PG.tolist() == [1, 0, 0, 0, 0, 0]
    neutral = pairwise_rewards(v, [4, 2], unvoted=0.5).rewards_PG.tolist()
    assert neutral == [1.0, 0.0, 0.5, 0.5, 0.5, 0.0]
    none = pairwise_rewards(vote_arrays([], [], [], [], []), [3, 0, 1], unvoted=0.5)
    assert none.rewards_PG.tolist() == [0.5] * 4
    assert none.group_ids_PG.tolist() == [0, 0, 0, 2]
    assert none.any_votes_P.tolist() == [False, False, False]


def test_padding_votes_are_ignored_and_bad_arguments_raise() -> None:
    v = vote_arrays([0, 1, 1], [2, 0, 0], [0, 5, 0], [">", "?", "="], [1, 7, 1])
    res = pairwise_rewards(v, [3])  # group id 1 = P: padding
    assert res.rewards_PG.tolist() == [1.0, 0.0, 0.0]
    assert (res.total_votes_P.tolist(), res.malformed_P.tolist()) == ([1], [0])
    with pytest.raises(ValueError, match="mode"):
        pairwise_rewards(v, [3], mode="winrate")
    with pytest.raises(ValueError, match="group_ids_V"):
        pairwise_rewards(vote_arrays([2], [0], [0], [">"], [1]), [3])
    with pytest.raises(ValueError, match="num_agents_P"):
        pairwise_rewards(v, [[3]])


# --- golden vectors: all 1400 debates in one call ------------------------------------------------


def test_golden_records_as_one_batch_in_shuffled_vote_order() -> None:
    records = list(read_records(VECTORS_DIR / "rewards_v1.jsonl"))
    rows: list[tuple[int, int, int, Any, int]] = []
    for p, rec in enumerate(records):
        rows += [(p, u, a, op, b) for u, a, op, b in rec["input"]["votes"]]
    order = np.random.default_rng(0).permutation(len(rows))
    g, u, a, op, b = (list(col) for col in zip(*(rows[i] for i in order), strict=True))
    votes = vote_arrays(g, u, a, op, b)
    n = [rec["input"]["num_agents"] for rec in records]
    for mode in PAIRWISE_MODES:
        res = pairwise_rewards(votes, n, mode=mode)
        expected = [x for rec in records for x in rec["expected"][mode]]
        assert res.rewards_PG.tolist() == expected
        assert res.total_votes_P.tolist() == [rec["expected"]["total_votes"] for rec in records]
        assert res.malformed_P.tolist() == [rec["expected"]["malformed"] for rec in records]
        assert res.any_votes_P.tolist() == [bool(rec["expected"]["any_votes"]) for rec in records]
    assert json.dumps(records[0]["expected"])  # the file was read, not an empty list
    assert len(records) == 1400


# --- properties ----------------------------------------------------------------------------------


@given(vote_batches(padding=True), st.sampled_from(PAIRWISE_MODES), st.sampled_from((0.0, 0.5, -2.0)))
def test_equals_the_per_debate_reference_loop(batch: VoteBatch, mode: str, unvoted: float) -> None:
    res = pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode, unvoted=unvoted)
    _check_against_reference(batch, res, mode, unvoted)


@given(vote_batches(max_votes=30), st.sampled_from(PAIRWISE_MODES))
def test_rewards_stay_in_range(batch: VoteBatch, mode: str) -> None:
    r = pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode).rewards_PG
    low = 0.0 if mode == "win_rate" else -1.0
    assert np.all((r >= low) & (r <= 1.0))


@given(vote_batches(padding=True), st.sampled_from(PAIRWISE_MODES), st.data())
def test_relabelling_agents_permutes_rewards(batch: VoteBatch, mode: str, data: st.DataObject) -> None:
    n = batch.num_agents_P
    perms = [np.asarray(data.draw(st.permutations(range(k))), dtype=np.intp) for k in n.tolist()]
    g = batch.votes.group_ids_V

    def relabel(ids: np.ndarray) -> np.ndarray:
        out = ids.copy()
        for v in range(ids.size):  # ids outside [0, N) (and padding rows) keep their value
            if g[v] < len(n) and 0 <= ids[v] < n[g[v]]:
                out[v] = perms[g[v]][ids[v]]
        return out

    v = batch.votes
    moved = VoteArrays(g, relabel(v.authors_V), relabel(v.a_V), v.op_V, relabel(v.b_V))
    before = pairwise_rewards(v, n, mode=mode)
    after = pairwise_rewards(moved, n, mode=mode)
    offsets = np.cumsum(n) - n
    for p, perm in enumerate(perms):
        old = before.rewards_PG[offsets[p] : offsets[p] + n[p]]
        new = after.rewards_PG[offsets[p] : offsets[p] + n[p]]
        assert new[perm].tolist() == old.tolist()  # agent i is now agent perm[i]
    assert after.total_votes_P.tolist() == before.total_votes_P.tolist()
    assert after.malformed_P.tolist() == before.malformed_P.tolist()


@given(vote_batches(min_agents=1, shuffled=False), st.sampled_from(PAIRWISE_MODES), st.data())
def test_an_authors_own_votes_never_change_its_reward(
    batch: VoteBatch, mode: str, data: st.DataObject
) -> None:
    n = batch.num_agents_P
    p = data.draw(st.integers(0, len(n) - 1), label="debate")
    i = data.draw(st.integers(0, int(n[p]) - 1), label="agent")
    extra = data.draw(debate_votes(int(n[p]), max_votes=10), label="extra")
    extra_cols = [[p] * len(extra), [i] * len(extra), *([x[k] for x in extra] for k in (1, 2, 3))]
    more = VoteArrays(
        *(
            np.concatenate([old, np.asarray(new, np.int32)])
            for old, new in zip(batch.votes[:5], extra_cols, strict=True)
        )
    )
    row = int(np.sum(n[:p])) + i
    before = pairwise_rewards(batch.votes, n, mode=mode).rewards_PG[row]
    after = pairwise_rewards(more, n, mode=mode).rewards_PG[row]
    assert after == before


@given(vote_batches(), st.sampled_from(PAIRWISE_MODES))
def test_vote_order_does_not_matter(batch: VoteBatch, mode: str) -> None:
    order = np.random.default_rng(len(batch.votes.a_V)).permutation(len(batch.votes.a_V))
    shuffled = batch.votes.take(order)
    a = pairwise_rewards(batch.votes, batch.num_agents_P, mode=mode)
    b = pairwise_rewards(shuffled, batch.num_agents_P, mode=mode)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


# --- JAX twin: parity under jit, fixed shapes, no retrace ----------------------------------------

_PAD_GROUPS, _PAD_VOTES, _PAD_ROWS = 4, 96, 24
_TRACES: Counter[str] = Counter()


def _jax_impl(votes: VoteArrays, num_agents_P: jax.Array, unvoted: jax.Array, *, mode: str) -> Any:
    _TRACES[mode] += 1
    return kj.pairwise_rewards(votes, num_agents_P, mode=mode, unvoted=unvoted, num_rows=_PAD_ROWS)


_jax_rewards = jax.jit(_jax_impl, static_argnames="mode")


def _pad(batch: VoteBatch) -> tuple[VoteArrays, np.ndarray]:
    """4 debates (extra ones with 0 agents), 96 votes; padding votes get group id 4."""
    num_groups = len(batch.num_agents_P)
    g = np.where(batch.votes.group_ids_V == num_groups, _PAD_GROUPS, batch.votes.group_ids_V)
    fields = [g, *batch.votes[1:5]]
    fills = (_PAD_GROUPS, 0, 0, OP_GT, 1)
    padded = [
        np.concatenate([x, np.full(_PAD_VOTES - x.size, fill, np.int32)])
        for x, fill in zip(fields, fills, strict=True)
    ]
    n = np.concatenate([batch.num_agents_P, np.zeros(_PAD_GROUPS - num_groups, np.int64)])
    return VoteArrays(*padded), n.astype(np.int32)


_PARITY_BATCHES = vote_batches(max_groups=_PAD_GROUPS, max_agents=6, padding=True)


@given(_PARITY_BATCHES, st.sampled_from(PAIRWISE_MODES), st.sampled_from((0.0, 0.5)))
def test_jax_matches_numpy_under_jit(batch: VoteBatch, mode: str, unvoted: float) -> None:
    votes, n = _pad(batch)
    expected = pairwise_rewards(votes, n, mode=mode, unvoted=unvoted)
    got = _jax_rewards(votes, n, np.float32(unvoted), mode=mode)
    rows, num_groups = int(n.sum()), len(batch.num_agents_P)
    rewards = np.asarray(got.rewards_PG)
    assert rewards.dtype == np.float32 and rewards.shape == (_PAD_ROWS,)
    assert rewards[:rows].tolist() == expected.rewards_PG.astype(np.float32).tolist()  # exact
    assert rewards[rows:].tolist() == [0.0] * (_PAD_ROWS - rows)
    group_ids = np.asarray(got.group_ids_PG)
    assert group_ids.tolist() == expected.group_ids_PG.tolist() + [_PAD_GROUPS] * (_PAD_ROWS - rows)
    assert np.asarray(got.total_votes_P).tolist() == expected.total_votes_P.tolist()
    assert np.asarray(got.malformed_P).tolist() == expected.malformed_P.tolist()
    assert np.asarray(got.any_votes_P).tolist() == expected.any_votes_P.tolist()
    assert expected.malformed_P[num_groups:].tolist() == [0] * (_PAD_GROUPS - num_groups)
    assert _TRACES[mode] == 1  # one compilation per mode across all examples


def test_jax_does_not_retrace_for_new_values_of_the_same_shapes() -> None:
    traces = Counter[str]()

    def impl(votes: VoteArrays, n: jax.Array) -> Any:
        traces["n"] += 1
        return kj.pairwise_rewards(votes, n, num_rows=_PAD_ROWS)

    fn = jax.jit(impl)
    rng = np.random.default_rng(1)
    for _ in range(3):
        n = rng.integers(0, 7, _PAD_GROUPS).astype(np.int32)
        g = rng.integers(0, _PAD_GROUPS + 1, _PAD_VOTES).astype(np.int32)
        u, a, op, b = (
            rng.integers(lo, hi, _PAD_VOTES).astype(np.int32)
            for lo, hi in ((-1, 7), (-1, 7), (0, 3), (-1, 7))
        )
        votes = VoteArrays(g, u, a, op, b)
        got = jax.block_until_ready(fn(votes, n))
        expected = pairwise_rewards(votes, n).rewards_PG.astype(np.float32)
        assert np.asarray(got.rewards_PG)[: n.sum()].tolist() == expected.tolist()
    assert traces["n"] == 1


def test_jax_static_row_count_checks() -> None:
    v = vote_arrays([0], [2], [0], [">"], [1])
    assert np.asarray(kj.pairwise_rewards(v, [3]).rewards_PG).tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="num_rows must be >= sum"):
        kj.pairwise_rewards(v, [3], num_rows=2)
    with pytest.raises(ValueError, match="num_rows is required"):
        jax.jit(lambda n: kj.pairwise_rewards(v, n))(np.array([3]))
    with pytest.raises(ValueError, match="mode"):
        kj.pairwise_rewards(v, [3], mode="borda")


def test_jax_rows_past_num_rows_are_dropped_not_misfiled() -> None:
    # Under jit a too-small bucket cannot raise; votes of rows that do not fit must not leak into the
    # malformed bins or other rows.
    v = vote_arrays([0, 1, 1], [2, 2, 0], [0, 0, 1], [">", ">", "="], [1, 1, 2])
    fn = jax.jit(lambda votes, n: kj.pairwise_rewards(votes, n, num_rows=4))
    got = fn(v, np.array([3, 3], np.int32))
    assert np.asarray(got.rewards_PG).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert np.asarray(got.malformed_P).tolist() == [0, 0]


# --- num_agents_P and unvoted checks, numpy and JAX alike (issue 8, items 9 and 14) -----------------


@pytest.mark.parametrize("fn", [pairwise_rewards, kj.pairwise_rewards], ids=["numpy", "jax"])
def test_num_agents_checked_the_same_in_numpy_and_jax(fn: Any) -> None:
    v = vote_arrays([0], [2], [0], [">"], [1])
    with pytest.raises(ValueError, match="num_agents_P must be >= 0"):
        fn(v, [3, -2])  # JAX used to drop the rows of later debates silently
    with pytest.raises(ValueError, match="num_agents_P must be >= 0"):
        fn(v, [-1])
    with pytest.raises(ValueError, match="num_agents_P must fit int32"):
        fn(v, [2**31])
    with pytest.raises(TypeError, match="num_agents_P"):
        fn(v, [3.0])
    with pytest.raises(ValueError, match="num_agents_P"):
        fn(v, [[3]])
    empty = fn(vote_arrays([], [], [], [], []), [])  # no debates: JAX refused, numpy accepted
    assert np.asarray(empty.rewards_PG).shape == (0,) and np.asarray(empty.malformed_P).shape == (0,)
    padding_only = fn(v, np.zeros(0, np.int64))  # group id 0 = P: padding
    assert np.asarray(padding_only.total_votes_P).tolist() == []


@pytest.mark.parametrize("fn", [pairwise_rewards, kj.pairwise_rewards], ids=["numpy", "jax"])
def test_unvoted_and_mode_must_be_the_right_type(fn: Any) -> None:
    v = vote_arrays([0], [2], [0], [">"], [1])
    for bad in ("x", "0.5", None, True):
        with pytest.raises(TypeError, match="unvoted"):
            fn(v, [3], unvoted=bad)
    with pytest.raises(ValueError, match="mode"):
        fn(v, [3], mode=["win_rate"])
    assert np.asarray(fn(v, [3], unvoted=np.float32(0.5)).rewards_PG).tolist() == [1.0, 0.0, 0.5]


def test_jax_traced_counts_negative_read_as_zero() -> None:
    v = vote_arrays([0, 1], [2, 5], [0, 0], [">", ">"], [1, 1])  # author 5: excludes nobody
    fn = jax.jit(lambda n: kj.pairwise_rewards(v, n, num_rows=4))
    got = fn(np.array([-2, 2], np.int32))
    assert np.asarray(got.group_ids_PG).tolist() == [1, 1, 2, 2]
    assert np.asarray(got.rewards_PG).tolist() == [1.0, 0.0, 0.0, 0.0]
