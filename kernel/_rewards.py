"""Leave-one-out pairwise rewards from votes, for thousands of debates at once.

Debate p has N_p agents; its agents occupy the packed rows ``offsets[p] .. offsets[p] + N_p - 1``
(group-major, ``offsets = cumsum(N) - N``). For each agent i only the valid votes (see
:func:`kernel.validate_votes`) with i ∈ {a, b} written by another agent (u ≠ i) count:

  win_rate:        V_i = #votes,  W_i = #{a = i, >} + ½·#{=},   r_i = W_i / V_i     ∈ [0, 1]
  win_minus_loss:  M_i = #votes,  S_i = #{a = i, >} − #{b = i, >}, r_i = S_i / M_i  ∈ [−1, 1]

and r_i = ``unvoted`` (0 in the reference) when no vote counts for i. Repeated votes all count.

Judges and weights (see :class:`kernel.VoteArrays`): a vote cast by a judge who is not a debater
(``judge_V ≥ 0``) counts for both a and b (nobody is left out), and every vote counts with its weight
w_v (1 when ``weight_V`` is None): the counts above become sums of w_v. Judges have no rows.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._checks import check_choice, check_real
from kernel._votes import (
    VoteArrays,
    _checked,
    _debater_authors,
    _judge_fields,
    _uniform_agents,
    _valid_mask,
)

__all__ = ["PAIRWISE_MODES", "PairwiseMode", "PairwiseRewards", "pairwise_rewards"]

PairwiseMode: TypeAlias = Literal["win_rate", "win_minus_loss"]
"""The reward rule of :func:`pairwise_rewards`."""
PAIRWISE_MODES: Final[tuple[PairwiseMode, ...]] = get_args(PairwiseMode)
"""Names accepted by ``pairwise_rewards(..., mode=...)``."""

# Six counters per packed row. A valid vote lands once on its a-row (columns 0-3, so the a-side sums
# to the debate's valid-vote count) and, when its author is not b, once on its b-row (columns 4-5).
_A_WIN, _A_TIE, _A_WIN_SELF, _A_TIE_SELF, _B_LOSS, _B_TIE = range(6)
_COLUMNS: Final = 6


class PairwiseRewards(NamedTuple):
    """Result of :func:`pairwise_rewards`: one reward per agent row, and per-debate vote metrics.

    Attributes:
      rewards_PG: float [R], R = Σ_p N_p, the reward of every agent, debates in order (group-major).
      group_ids_PG: int32 [R], the debate of each row.
      total_votes_P: int32 [P], valid votes of each debate (``pairwise_total_votes``), judges' included;
        a count of rows, whatever their weights.
      malformed_P: int32 [P], invalid votes of each debate (``pairwise_malformed``), judges' included.
      any_votes_P: bool [P], ``total_votes_P > 0`` (``pairwise_any_votes``).
      judge_votes_P: int32 [P], the valid judge votes among ``total_votes_P`` (0 without judges).
    """

    rewards_PG: npt.NDArray[np.float64]
    group_ids_PG: npt.NDArray[np.int32]
    total_votes_P: npt.NDArray[np.int32]
    malformed_P: npt.NDArray[np.int32]
    any_votes_P: npt.NDArray[np.bool_]
    judge_votes_P: npt.NDArray[np.int32]


def pairwise_rewards(
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    mode: PairwiseMode = "win_rate",
    unvoted: float = 0.0,
) -> PairwiseRewards:
    """Leave-one-out pairwise reward of every agent of every debate (fully vectorised).

    For agent i of debate p, over the valid votes v of p with i ∈ {a_v, b_v} that are judge votes
    (``judge_V[v] ≥ 0``) or have author u_v ≠ i, each of weight w_v (1 when ``weight_V`` is None):

      V_i = Σ_v w_v,   W_i = Σ_v w_v·([a_v = i ∧ op_v = >] + ½·[op_v = =]),
      S_i = Σ_v w_v·[op_v = >]·(+1 if a_v = i, −1 if b_v = i)
      win_rate:        r_i = W_i / V_i   if V_i > 0 else ``unvoted``
      win_minus_loss:  r_i = S_i / V_i   if V_i > 0 else ``unvoted``

    An author ``-1`` or ``≥ N_p`` excludes nobody; invalid votes only count as ``malformed``. With 2
    agents, parsed votes (the parser drops comparisons involving their author) judge nobody, so all
    rewards are ``unvoted``, unless a judge votes. A judge vote counts for both of its agents (the judge
    is not a debater, so leave-one-out leaves nobody out) and never adds a row; a vote of integer
    weight k counts as k copies of it, one of weight 0 as none. Without ``judge_V`` and ``weight_V``
    the results are exactly the reference's. The reference gives an unvoted agent 0, which under
    win_rate reads as losing every vote; ``unvoted=0.5`` is neutral there. Empty debates (N_p = 0) have
    no rows. Work is O(V + R): two ``np.bincount`` calls over all votes (three with weights), no loop
    over debates or votes.

    Args:
      votes: ``VoteArrays`` of length V; group ids in ``[0, P]`` (``P`` = padding, ignored); optional
        ``judge_V`` (judge id ≥ 0, or −1 for a debater's vote) and ``weight_V`` (finite, ≥ 0).
      num_agents_P: int [P], agent count N_p of each debate (≥ 0; may differ between debates).
      mode: keyword-only; ``"win_rate"`` or ``"win_minus_loss"``.
      unvoted: keyword-only; reward of an agent with no counted vote (reference: 0.0).

    Returns:
      ``PairwiseRewards`` with float64 ``rewards_PG`` of shape [Σ N_p] and per-debate metrics of shape [P].

    Raises:
      ValueError: unknown ``mode``; a group id outside ``[0, P]``; negative counts; shape mismatches; a
        weight that is negative, NaN or infinite (the message names ``votes.weight_V``).
      TypeError: non-integer vote fields, judges or counts; non-real weights; ``unvoted`` not a real
        number.

    References:
      tinker-cookbook multi-agent debate recipe (v1), ``compute_pairwise_win_rates`` and
      ``compute_pairwise_win_minus_loss``; REFERENCE.md §2.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays(group_ids=[0, 0, 0, 1], authors=[2, 0, 1, 0], a=[0, 1, 0, 0],
      ...     ops=[">", "=", ">", ">"], b=[1, 2, 2, 1])
      >>> r = pairwise_rewards(v, [3, 2])
      >>> r.rewards_PG
      array([1.  , 0.25, 0.25, 0.  , 0.  ])
      >>> pairwise_rewards(v, [3, 2], mode="win_minus_loss").rewards_PG
      array([ 1. , -0.5, -0.5,  0. , -1. ])
      >>> r.group_ids_PG, r.total_votes_P, r.malformed_P, r.any_votes_P
      (array([0, 0, 0, 1, 1], dtype=int32), array([3, 1], dtype=int32), array([0, 0], dtype=int32),
       array([ True,  True]))

      A judge (id 0) says agent 1 beat agent 0, with weight 2: it counts twice, for both agents.

      >>> j = vote_arrays(group_ids=[0, 0], authors=[1, -1], a=[1, 1], ops=[">", ">"], b=[0, 0],
      ...     judges=[-1, 0], weights=[1, 2])
      >>> r = pairwise_rewards(j, [2])
      >>> r.rewards_PG, r.total_votes_P, r.judge_votes_P
      (array([0., 1.]), array([2], dtype=int32), array([1], dtype=int32))
    """
    check_choice(mode, "mode", PAIRWISE_MODES)
    fallback = check_real(unvoted, "unvoted")
    g, u, a, op, b, n = _checked(votes, num_agents_P)
    judge, weight = _judge_fields(votes, int(g.shape[0]))
    num_groups = int(n.shape[0])
    num_rows = int(n.sum())
    counts, a_side, malformed = _count_votes(g, _debater_authors(u, judge), a, op, b, n, num_rows, weight)
    group_ids = np.repeat(np.arange(num_groups, dtype=np.int32), n)

    win, tie = counts[:, _A_WIN], counts[:, _A_TIE] + counts[:, _B_TIE]
    loss = counts[:, _B_LOSS]
    matchups = win + tie + loss
    if mode == "win_rate":
        score = win + 0.5 * tie
    else:
        score = (win - loss).astype(np.float64)
    # score / matchups where a vote counted; for integer counts this is the reference's W / max(V, 1)
    rewards = np.where(matchups > 0, score / np.where(matchups > 0, matchups, 1), np.float64(fallback))

    total = np.bincount(group_ids, weights=a_side, minlength=num_groups).astype(np.int32)
    if judge is None:
        judged = np.zeros(num_groups, dtype=np.int32)
    else:
        valid = _valid_mask(g, a, op, b, n)
        judged_g = g[valid & (judge >= 0)]
        judged = np.bincount(judged_g, minlength=num_groups + 1)[:num_groups].astype(np.int32)
    return PairwiseRewards(rewards, group_ids, total, malformed, total > 0, judged)


def _count_votes(
    g: npt.NDArray[np.int32],
    u: npt.NDArray[np.int32],
    a: npt.NDArray[np.int32],
    op: npt.NDArray[np.int32],
    b: npt.NDArray[np.int32],
    n: npt.NDArray[np.int64],
    num_rows: int,
    weight: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.int64 | np.float64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Per-row counters [R, 6], per-row a-side vote counts [R] and per-debate malformed counts [P].

    Two bincounts over the votes, counting 1 per vote, or, with ``weight``, two weighted ones for the
    counters plus an unweighted one for the vote and malformed counts (which count rows, not weight).
    Bin layout: ``6·row + column`` for rows, then one malformed bin per debate at ``6R + p``, then
    the padding bin ``6R + P`` and the discard bin ``6R + P + 1``. Keys are chosen arithmetically
    (``keep·(key − other) + other``), which is faster than ``np.where`` on random masks. ``u`` is the
    leave-one-out author (−1 for a judge vote).
    """
    num_groups = int(n.shape[0])
    num_bins = _COLUMNS * num_rows + num_groups + 2
    discard = num_bins - 1
    idx = np.int32 if num_bins <= np.iinfo(np.int32).max else np.int64
    uniform = _uniform_agents(g, n)
    valid = _valid_mask(g, a, op, b, n, uniform)
    # In-place arithmetic on few buffers: this is memory-bound, and fresh temporaries cost ~2x.
    if uniform is None:
        base = np.take((_COLUMNS * np.append(np.cumsum(n) - n, 0)).astype(idx), g)
    else:  # offset_p = p·N: a multiply instead of a gather
        base = np.multiply(g, _COLUMNS * uniform, dtype=idx)
    base += op  # 6·offset_p + op (op: 0 for >, 1 for =)

    # a-side: every valid vote; key 6·(offset_p + a) + op + 2·[u = a] (columns 0-3); an invalid vote
    # goes to its debate's malformed bin 6R + p (a padding row, p = P, to the padding bin).
    key_a = np.multiply(a, _COLUMNS, dtype=idx)
    key_a += base
    scratch = np.equal(u, a)
    key_a += scratch
    key_a += scratch
    malformed_bin = np.add(g, _COLUMNS * num_rows, dtype=idx)
    key_a -= malformed_bin
    key_a *= valid
    key_a += malformed_bin  # valid ? key : malformed bin
    # b-side: valid votes not written by b; key 6·(offset_p + b) + 4 + op (columns 4-5), else discard.
    key_b = np.multiply(b, _COLUMNS, dtype=idx)
    key_b += base
    key_b += _B_LOSS - discard
    keep_b = np.not_equal(u, b, out=scratch)
    keep_b &= valid
    key_b *= keep_b
    key_b += discard  # keep ? key : discard

    counts = np.bincount(key_a, minlength=num_bins)
    a_counts = counts[: _COLUMNS * num_rows].reshape(num_rows, _COLUMNS)
    a_side = a_counts[:, _A_WIN] + a_counts[:, _A_TIE] + a_counts[:, _A_WIN_SELF] + a_counts[:, _A_TIE_SELF]
    malformed = counts[_COLUMNS * num_rows : _COLUMNS * num_rows + num_groups].astype(np.int32)
    if weight is None:
        counts += np.bincount(key_b, minlength=num_bins)
        return counts[: _COLUMNS * num_rows].reshape(num_rows, _COLUMNS), a_side, malformed
    weighted = np.bincount(key_a, weights=weight, minlength=num_bins)
    weighted += np.bincount(key_b, weights=weight, minlength=num_bins)
    return weighted[: _COLUMNS * num_rows].reshape(num_rows, _COLUMNS), a_side, malformed
