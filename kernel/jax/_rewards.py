"""JAX twins of vote validation and leave-one-out pairwise rewards (jit-compatible, static shapes).

Same equations and bin layout as :mod:`kernel._rewards`; the number of packed rows must be static, so
``pairwise_rewards`` takes ``num_rows`` (a bucket ≥ Σ N_p). Pad votes with group id ``P`` (any id
outside ``[0, P)`` is treated as padding: under jit a bad id cannot raise).

Vote fields and agent counts follow numpy's contract before anything is narrowed: ids beyond int32
saturate (on the host in int64 for numpy / list input, in their own dtype for JAX arrays), so 2³² + 1
stays out of every agent range and an op code of 2³² stays ``bad_op``; float or bool fields are a
TypeError naming the field. Concrete ``num_agents_P`` get numpy's checks; traced ones cannot be checked
by value, and a negative count there reads as 0. The optional ``judge_V`` and ``weight_V`` fields work as
in numpy; concrete weights are checked (finite, ≥ 0), traced ones cannot be: a bad one there gives
meaningless rewards (a NaN weight, NaN ones) rather than an error.
"""

from __future__ import annotations

from typing import Final

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from kernel._checks import check_choice, check_int, check_real
from kernel._rewards import PAIRWISE_MODES, PairwiseMode, PairwiseRewards
from kernel._types import OP_EQ, OP_GT
from kernel._votes import (
    VOTE_A_OUT_OF_RANGE,
    VOTE_B_OUT_OF_RANGE,
    VOTE_BAD_OP,
    VOTE_PADDING,
    VOTE_SELF_PAIR,
    VOTE_VALID,
    VoteArrays,
    VoteValidation,
    _as_weights,
    _num_agents,
)
from kernel.jax._checks import as_float, as_int32

__all__ = ["pairwise_rewards", "validate_votes"]

_COLUMNS: Final = 6  # per row: a-side >, =, > by a, = by a; b-side >, = (see kernel._rewards)
_B_LOSS: Final = 4


def _fields(votes: VoteArrays) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """The five id fields as int32, saturated (never wrapped) and checked like numpy's."""
    names = VoteArrays._fields[:5]
    g, u, a, op, b = (as_int32(x, f"votes.{name}") for name, x in zip(names, votes[:5], strict=True))
    for name, x in zip(names, (g, u, a, op, b), strict=True):
        if x.shape != g.shape:
            raise ValueError(f"votes.{name} must have shape {g.shape}, got {x.shape}")
    return g, u, a, op, b


def _judge_fields(votes: VoteArrays, num_votes: int) -> tuple[jax.Array | None, jax.Array | None]:
    """``judge_V`` as int32 and ``weight_V`` as float, each None when absent; concrete weights checked."""
    judge = None if votes.judge_V is None else as_int32(votes.judge_V, "votes.judge_V")
    if judge is not None:
        if judge.shape != (num_votes,):
            raise ValueError(f"votes.judge_V must have shape ({num_votes},), got {judge.shape}")
    weight = None if votes.weight_V is None else _weights(votes.weight_V, "votes.weight_V", num_votes)
    return judge, weight


def _weights(x: ArrayLike, name: str, num_votes: int) -> jax.Array:
    """Weights as a float array [V]; concrete ones must be finite and ≥ 0 (traced ones cannot be checked).

    Host input (lists, numpy arrays) gets numpy's checks first, so a string or object array is a
    TypeError naming ``name`` rather than JAX's conversion error.
    """
    if not isinstance(x, jax.Array):
        return jnp.asarray(_as_weights(x, name, num_votes))
    w = as_float(x, name)
    if w.ndim != 1 or w.shape[0] != num_votes:
        raise ValueError(f"{name} must have shape ({num_votes},) (one weight per vote), got {w.shape}")
    if not isinstance(w, jax.core.Tracer):
        bad = ~(jnp.isfinite(w) & (w >= 0))
        if bool(jnp.any(bad)):
            first = int(jnp.argmax(bad))
            raise ValueError(f"{name} must be finite and >= 0, got {float(w[first])!r} at vote {first}")
    return w


def _debater_authors(u: jax.Array, judge: jax.Array | None) -> jax.Array:
    """Authors for leave-one-out: a judge vote's author is −1, which excludes nobody."""
    return u if judge is None else jnp.where(judge >= 0, -1, u)


def _agents(num_agents_P: ArrayLike) -> tuple[jax.Array, int | None]:
    """``num_agents_P`` as int32, and Σ N_p when the counts are concrete (None under jit).

    Concrete counts get numpy's checks (integers, rank 1, each in ``[0, 2³¹)``). Traced counts cannot
    be checked by value: a negative one is read as 0.
    """
    if isinstance(num_agents_P, jax.core.Tracer):
        return jnp.maximum(as_int32(num_agents_P, "num_agents_P"), 0), None
    host = _num_agents(num_agents_P)
    return jnp.asarray(host, dtype=jnp.int32), int(host.sum())


def _static_rows(total: int | None, num_rows: int | None) -> int:
    if num_rows is None:
        if total is None:
            raise ValueError("num_rows is required when num_agents_P is traced (e.g. under jit)")
        return total
    rows = check_int(num_rows, "num_rows", low=0)
    if total is not None and rows < total:
        raise ValueError(f"num_rows must be >= sum(num_agents_P) = {total}, got {rows}")
    return rows


def _unvoted(unvoted: float | jax.Array) -> jax.Array:
    if isinstance(unvoted, jax.Array):  # may be traced
        real = jnp.issubdtype(unvoted.dtype, jnp.floating) or jnp.issubdtype(unvoted.dtype, jnp.integer)
        if unvoted.ndim != 0 or not real:
            raise TypeError(f"unvoted must be a real scalar, got {unvoted.dtype}{list(unvoted.shape)}")
        return unvoted.astype(jnp.float32)
    return jnp.asarray(check_real(unvoted, "unvoted"), dtype=jnp.float32)


def _valid(
    g: jax.Array, a: jax.Array, op: jax.Array, b: jax.Array, n: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Returns (valid_V, padding_V, debate_V) with debate_V = g for real rows and P for padding."""
    num_groups = n.shape[0]
    padding = (g < 0) | (g >= num_groups)
    debate = jnp.where(padding, num_groups, g)
    n_v = jnp.append(n, 0)[debate]
    valid = (a >= 0) & (a < n_v) & (b >= 0) & (b < n_v) & (a != b) & ((op == OP_GT) | (op == OP_EQ))
    return valid, padding, debate


def validate_votes(votes: VoteArrays, num_agents_P: ArrayLike) -> VoteValidation:
    """JAX twin of :func:`kernel.validate_votes` (same codes); group ids outside ``[0, P)`` are padding.

    valid_v ⟺ 0 ≤ a_v < N_p ∧ 0 ≤ b_v < N_p ∧ a_v ≠ b_v ∧ op_v ∈ {OP_GT, OP_EQ}; malformed_p counts the
    invalid non-padding votes of debate p. Judge votes follow the same rule; concrete weights are checked.

    Args:
      votes: ``VoteArrays`` of int arrays [V].
      num_agents_P: int [P], agent count of each debate.

    Returns:
      ``VoteValidation(valid_V: bool [V], reason_V: int8 [V], malformed_P: int32 [P])``.

    Raises:
      ValueError: fields of different lengths or ranks; concrete agent counts that are negative or
        beyond int32; a concrete weight that is negative or not finite.
      TypeError: non-integer fields or agent counts (floats are never truncated).

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 1], [0, 1, 0], [1, 1, 0], [">", "=", ">"], [2, 1, 1])
      >>> validate_votes(v, [3, 2]).malformed_P
      Array([1, 0], dtype=int32)
    """
    g, _, a, op, b = _fields(votes)
    _judge_fields(votes, g.shape[0])  # checked, though neither changes validity
    n, _ = _agents(num_agents_P)
    valid, padding, debate = _valid(g, a, op, b, n)
    n_v = jnp.append(n, 0)[debate]
    reason = jnp.select(
        [valid, padding, (a < 0) | (a >= n_v), (b < 0) | (b >= n_v), a == b],
        [VOTE_VALID, VOTE_PADDING, VOTE_A_OUT_OF_RANGE, VOTE_B_OUT_OF_RANGE, VOTE_SELF_PAIR],
        default=VOTE_BAD_OP,
    ).astype(jnp.int8)
    malformed = jax.ops.segment_sum((~valid).astype(jnp.int32), debate, num_segments=n.shape[0])
    return VoteValidation(valid, reason, malformed)  # type: ignore[arg-type]  # jax.Array fields


def pairwise_rewards(
    votes: VoteArrays,
    num_agents_P: ArrayLike,
    *,
    mode: PairwiseMode = "win_rate",
    unvoted: float | jax.Array = 0.0,
    num_rows: int | None = None,
) -> PairwiseRewards:
    """JAX twin of :func:`kernel.pairwise_rewards`: leave-one-out win rate or win-minus-loss.

    For agent i, over valid votes with i ∈ {a, b} that are judge votes or have author u ≠ i, each of
    weight w (1 without ``weight_V``): V_i = Σ w, W_i = Σ w·([a = i, >] + ½·[=]),
    S_i = Σ w·([a = i, >] − [b = i, >]); r_i = W_i / V_i (win_rate) or S_i / V_i (win_minus_loss),
    ``unvoted`` if V_i = 0. Two ``segment_sum`` calls over all votes with static
    ``num_segments = 6·num_rows + P + 2`` (a third, unweighted one for the counts when weighted).

    Args:
      votes: ``VoteArrays`` of int arrays [V]; padding votes carry a group id outside ``[0, P)``;
        optional ``judge_V`` (≥ 0 for a judge vote) and ``weight_V`` (finite, ≥ 0).
      num_agents_P: int [P], agent count of each debate.
      mode: keyword-only, static; ``"win_rate"`` or ``"win_minus_loss"``.
      unvoted: keyword-only; reward of an agent with no counted vote (reference: 0.0).
      num_rows: keyword-only, static; packed row count R ≥ Σ N_p (a bucket, so shapes stay fixed).
        Optional when ``num_agents_P`` is concrete. Rows past Σ N_p have group id P and reward 0.
        Under jit a too small ``num_rows`` cannot be checked: rows past it are dropped.

    Returns:
      ``PairwiseRewards`` with float32 ``rewards_PG`` [R], int32 ``group_ids_PG`` [R] and metrics [P].

    Raises:
      ValueError: unknown ``mode``; ``num_rows`` missing under jit, or smaller than Σ N_p when known;
        concrete agent counts that are negative or beyond int32; fields of different lengths; a
        concrete weight that is negative or not finite (the message names ``votes.weight_V``).
      TypeError: non-integer fields or agent counts; non-real weights; ``unvoted`` not a real number.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 0, 1], [2, 0, 1, 0], [0, 1, 0, 0], [">", "=", ">", ">"], [1, 2, 2, 1])
      >>> pairwise_rewards(v, [3, 2], num_rows=6).rewards_PG
      Array([1.  , 0.25, 0.25, 0.  , 0.  , 0.  ], dtype=float32)
    """
    check_choice(mode, "mode", PAIRWISE_MODES)
    fallback = _unvoted(unvoted)
    g, u, a, op, b = _fields(votes)
    judge, weight = _judge_fields(votes, g.shape[0])
    u = _debater_authors(u, judge)
    n, known_rows = _agents(num_agents_P)
    rows = _static_rows(known_rows, num_rows)
    num_groups = n.shape[0]
    num_bins = _COLUMNS * rows + num_groups + 2
    discard = num_bins - 1
    valid, _, debate = _valid(g, a, op, b, n)

    first_row = jnp.append(jnp.cumsum(n) - n, 0)[debate]
    row_a, row_b = first_row + a, first_row + b
    # a-side: valid votes at 6·row_a + op + 2·[u = a]; invalid ones in the malformed bin 6R + p.
    key_a = jnp.where(valid, _COLUMNS * row_a + op + 2 * (u == a), _COLUMNS * rows + debate)
    key_a = jnp.where(valid & (row_a >= rows), discard, key_a)
    # b-side: valid votes not written by b at 6·row_b + 4 + op.
    key_b = jnp.where(valid & (u != b) & (row_b < rows), _COLUMNS * row_b + _B_LOSS + op, discard)
    ones = jnp.ones_like(key_a)
    tallies = jax.ops.segment_sum(ones, key_a, num_segments=num_bins)
    if weight is None:  # b-side keys miss the a-side columns and malformed bins: one buffer serves both
        counts = tallies = tallies + jax.ops.segment_sum(ones, key_b, num_segments=num_bins)
    else:  # weighted counters; vote and malformed counts stay counts of rows
        w = weight.astype(jnp.float32)
        counts = jax.ops.segment_sum(w, key_a, num_segments=num_bins)
        counts = counts + jax.ops.segment_sum(w, key_b, num_segments=num_bins)

    per_row = counts[: _COLUMNS * rows].reshape(rows, _COLUMNS)
    win, loss = per_row[:, 0], per_row[:, _B_LOSS]
    tie = per_row[:, 1] + per_row[:, _B_LOSS + 1]
    matchups = win + tie + loss
    if mode == "win_rate":
        score = win.astype(jnp.float32) + 0.5 * tie.astype(jnp.float32)
    else:
        score = (win - loss).astype(jnp.float32)
    # integer counts: max(V, 1) is V wherever V > 0; weighted sums may lie in (0, 1)
    safe = jnp.maximum(matchups, 1) if weight is None else jnp.where(matchups > 0, matchups, 1)
    ratio = score / safe.astype(jnp.float32)
    rewards = jnp.where(matchups > 0, ratio, fallback)

    group_ids = jnp.searchsorted(jnp.cumsum(n), jnp.arange(rows, dtype=jnp.int32), side="right")
    group_ids = group_ids.astype(jnp.int32)
    rewards = jnp.where(group_ids < num_groups, rewards, 0.0).astype(jnp.float32)
    a_side = tallies[: _COLUMNS * rows].reshape(rows, _COLUMNS)[:, :4].sum(axis=1)
    total = jax.ops.segment_sum(a_side, group_ids, num_segments=num_groups)
    malformed = tallies[_COLUMNS * rows : _COLUMNS * rows + num_groups]
    if judge is None:
        judged = jnp.zeros(num_groups, dtype=jnp.int32)
    else:
        judged_v = (valid & (judge >= 0)).astype(jnp.int32)
        judged = jax.ops.segment_sum(judged_v, debate, num_segments=num_groups + 1)[:num_groups]
    return PairwiseRewards(rewards, group_ids, total, malformed, total > 0, judged)  # type: ignore[arg-type]
