"""Invariant suite for pairwise reward functions: point it at your own ``pairwise_rewards``.

A reward function is any callable ``fn(votes, num_agents_P) -> rewards_PG`` (see :class:`RewardFunction`),
with ``votes`` a :class:`kernel.VoteArrays` and the result an array of Σ N_p rewards, debates in order, or
a NamedTuple with a ``rewards_PG`` field (as ``kernel.pairwise_rewards`` returns). Bind options first
(``functools.partial(kernel.pairwise_rewards, mode="win_minus_loss")``).

Checks (REFERENCE.md §2): leave-one-out independence (an agent's own votes never change its own
reward), agent relabelling equivariance, tie symmetry, bounds per mode, invariance to vote order,
and agreement with :func:`reference_pairwise_rewards`, a per-debate Python loop. Counts are small
integers, so every comparison is exact up to ``rtol`` (default 1e-12).

Metamorphic checks that need no reference (Bradley–Terry and Copeland pass them too): malformed votes
and padding rows (even copies of valid votes) change nothing, debates are independent, a vote's author
matters only to that author (a judge vote's to nobody), a third party's vote ``i > j`` never lowers
r_i nor raises r_j, and a repeated vote counts again (a vote of weight k as k copies). For a vote
count (``counting``; by default when the reference is declared) a third party's vote moves exactly
r_i and r_j, strictly, and a tie moves both toward the mode's midpoint. The draws repeat valid votes
and copy them into padding rows, so such bugs show.

Judges: with ``judges=True`` the drawn votes carry ``judge_V`` and ``weight_V`` (see
:class:`kernel.VoteArrays`; dyadic weights, so sums stay exact) and every check holds with them: the
reference loop weighs and counts judge votes for both agents, and leave-one-out drops or reverses only
the votes a debater cast (a judge vote is nobody's own vote, so its author field changes nothing); a
vote of weight k counts as k copies of it. Leave it False for a function that does not read the
judge fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kernel._types import OP_EQ, OP_GT
from kernel._votes import VoteArrays, validate_votes
from kernel.testing._suite import SuiteOutcome, _run_class_check, _run_suite
from kernel.testing.strategies import VoteBatch, _concat_votes, vote_batches

__all__ = [
    "REWARD_CHECKS",
    "RewardFunction",
    "RewardInvariants",
    "check_reward_author_locality",
    "check_reward_bounds",
    "check_reward_debate_independence",
    "check_reward_leave_one_out",
    "check_reward_malformed_ignored",
    "check_reward_matches_reference",
    "check_reward_multiplicity",
    "check_reward_padding_ignored",
    "check_reward_relabel_equivariance",
    "check_reward_third_party_monotonicity",
    "check_reward_tie_symmetry",
    "check_reward_vote_order_invariance",
    "reference_pairwise_rewards",
    "run_reward_suite",
]

RewardMode: TypeAlias = Literal["win_rate", "win_minus_loss"]
FloatArray = npt.NDArray[np.float64]


class RewardFunction(Protocol):
    """The protocol: ``fn(votes, num_agents_P) -> rewards_PG`` (or a NamedTuple with ``rewards_PG``).

    Args (positional):
      votes: :class:`kernel.VoteArrays` of length V; group id ``P`` marks padding.
      num_agents_P: ``[P]`` int agent count of each debate.

    Returns:
      ``[Σ N_p]`` float rewards, debates in order.
    """

    def __call__(self, votes: VoteArrays, num_agents_P: npt.NDArray[np.int64], /) -> Any: ...


def reference_pairwise_rewards(
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    mode: RewardMode = "win_rate",
    unvoted: float = 0.0,
) -> FloatArray:
    """The slow reference: a Python loop per debate, per agent, per vote (REFERENCE.md §2).

    A vote (u, a, op, b) of debate p is valid iff 0 ≤ a, b < N_p, a ≠ b, op ∈ {>, =}. For agent i only
    valid votes with u ≠ i and i ∈ {a, b} count; win_rate r = (#wins + ½·#ties)/#votes, win_minus_loss
    r = (#wins − #losses)/#votes, ``unvoted`` when no vote counts. Judge votes (``judge_V ≥ 0``) count for
    every agent, whatever their author, and each vote counts with its weight (``weight_V``; 1 if None).

    Args:
      votes: the votes (padding rows, group id P, are ignored).
      num_agents_P: ``[P]`` agent counts.
      mode: ``"win_rate"`` or ``"win_minus_loss"``.
      unvoted: the reward of an agent with no counted vote.

    Returns:
      ``[Σ N_p]`` float64 rewards, debates in order.

    Raises:
      ValueError: an unknown ``mode``.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays(group_ids=[0, 0], authors=[2, 0], a=[0, 1], ops=[">", "="], b=[1, 2])
      >>> reference_pairwise_rewards(v, [3])
      array([1.  , 0.25, 0.5 ])
    """
    if mode not in ("win_rate", "win_minus_loss"):
        raise ValueError(f"mode must be 'win_rate' or 'win_minus_loss', got {mode!r}")
    counts = [int(n) for n in np.asarray(num_agents_P).tolist()]
    columns = [np.asarray(x).tolist() for x in votes[:5]]
    size = len(columns[0])
    judges = [-1] * size if votes.judge_V is None else np.asarray(votes.judge_V).tolist()
    weights = [1.0] * size if votes.weight_V is None else np.asarray(votes.weight_V, np.float64).tolist()
    rows = list(zip(*columns, judges, weights, strict=True))
    out: list[float] = []
    for p, n in enumerate(counts):
        mine = [(u, a, op, b, j, w) for g, u, a, op, b, j, w in rows if g == p]
        valid = [
            v for v in mine if 0 <= v[1] < n and 0 <= v[3] < n and v[1] != v[3] and v[2] in (OP_GT, OP_EQ)
        ]
        for i in range(n):
            score, total = 0.0, 0.0
            for u, a, op, b, j, w in valid:
                if (u == i and j < 0) or i not in (a, b):
                    continue
                total += w
                if op == OP_EQ:
                    score += 0.5 * w if mode == "win_rate" else 0.0
                elif a == i:
                    score += w
                elif mode == "win_minus_loss":
                    score -= w
            out.append(score / total if total > 0 else unvoted)
    return np.asarray(out, dtype=np.float64)


# --- internals -------------------------------------------------------------------------------------------


def _rewards(name: str, fn: RewardFunction, votes: VoteArrays, num_agents_P: Any) -> FloatArray:
    n = np.asarray(num_agents_P, dtype=np.int64)
    out = fn(_votes(votes, copy=True), n.copy())
    out = np.asarray(getattr(out, "rewards_PG", out))
    if out.shape != (int(n.sum()),):
        raise AssertionError(f"{name}: rewards have shape {out.shape}, expected ({int(n.sum())},)")
    if out.dtype.kind != "f":
        raise AssertionError(f"{name}: rewards must be a real float array, got dtype {out.dtype}")
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:  # said once, here: the invariances below would compare NaN with NaN and blame the votes
        raise AssertionError(f"{name}: rewards are not finite on rows {_fmt(bad)}: {_fmt(out[bad])}")
    return out.astype(np.float64)


def _offsets(num_agents_P: Any) -> npt.NDArray[np.int64]:
    n = np.asarray(num_agents_P, dtype=np.int64)
    return np.cumsum(n) - n


def _votes(votes: VoteArrays, *, copy: bool = False) -> VoteArrays:
    """The id fields as int32, ``judge_V`` as int32 and ``weight_V`` as float64 (None stays None); with
    ``copy``, fresh arrays in the dtypes given (so the function under test cannot change ours)."""
    if copy:
        g, u, a, op, b = (np.array(x) for x in votes[:5])
        judge = None if votes.judge_V is None else np.array(votes.judge_V)
        weight = None if votes.weight_V is None else np.array(votes.weight_V)
        return VoteArrays(g, u, a, op, b, judge, weight)
    g, u, a, op, b = (np.asarray(x, dtype=np.int32) for x in votes[:5])
    judge = None if votes.judge_V is None else np.asarray(votes.judge_V, dtype=np.int32)
    weight = None if votes.weight_V is None else np.asarray(votes.weight_V, dtype=np.float64)
    return VoteArrays(g, u, a, op, b, judge, weight)


def _fmt(x: npt.ArrayLike) -> str:
    return np.array2string(np.asarray(x), precision=17, separator=", ", max_line_width=10_000)


def _compare(name: str, what: str, got: FloatArray, want: FloatArray, rtol: float) -> None:
    bad = np.flatnonzero(~(np.abs(got - want) <= rtol * np.maximum(np.abs(want), 1.0)))
    if bad.size:
        raise AssertionError(
            f"{name}: {what}; rows {_fmt(bad)}: got {_fmt(got[bad])}, expected {_fmt(want[bad])}"
        )


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# --- checks ---------------------------------------------------------------------------------------


def check_reward_leave_one_out(
    fn: RewardFunction, votes: VoteArrays, num_agents_P: npt.ArrayLike, *, rtol: float = 1e-12
) -> None:
    """An agent's own votes never change its own reward: for each agent index k, dropping, and
    separately reversing (a ↔ b), every vote authored by agent k (in every debate at once) leaves
    the rewards of the agents k unchanged. A judge vote (``judge_V ≥ 0``) is nobody's own vote, whatever
    its author field says, so it is never dropped or reversed here.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: an agent whose reward moved with its own votes.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 0], authors=[0, 1], a=[0, 1], ops=[">", ">"], b=[1, 2])
      >>> check_reward_leave_one_out(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_leave_one_out"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    base = _rewards(name, fn, v, n)
    offsets = _offsets(n)
    for k in range(int(n.max(initial=0))):
        own = v.authors_V == k
        if v.judge_V is not None:
            own &= v.judge_V < 0
        if not own.any():
            continue
        rows = (offsets + k)[n > k]
        dropped = v.take(~own)
        reversed_ = v._replace(a_V=np.where(own, v.b_V, v.a_V), b_V=np.where(own, v.a_V, v.b_V))
        for label, changed in (("dropping", dropped), ("reversing", reversed_)):
            got = _rewards(name, fn, changed, n)
            _compare(
                name,
                f"{label} the votes authored by agent {k} changed the reward of agent {k}",
                got[rows],
                base[rows],
                rtol,
            )


def check_reward_relabel_equivariance(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """Renaming the agents of each debate by a permutation π (authors, a and b alike; ids out of range
    stay as they are) permutes the rewards: r'[π(i)] = r[i].

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws the permutations.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that did not follow its agent.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[0], ops=[">"], b=[1])
      >>> check_reward_relabel_equivariance(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_relabel_equivariance"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    rng = _rng(seed)
    perms = [rng.permutation(int(k)) for k in n]
    g = v.group_ids_V

    def rename(ids: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        out = ids.copy()
        for i in range(ids.size):
            p = int(g[i])
            if p < n.size and 0 <= ids[i] < n[p]:
                out[i] = perms[p][ids[i]]
        return out

    renamed = v._replace(authors_V=rename(v.authors_V), a_V=rename(v.a_V), b_V=rename(v.b_V))
    base = _rewards(name, fn, v, n)
    got = _rewards(name, fn, renamed, n)
    offsets = _offsets(n)
    where = np.concatenate([offsets[p] + perms[p] for p in range(n.size)]).astype(np.int64) if n.size else n
    _compare(name, f"agents renamed by {[pi.tolist() for pi in perms]}", got[where], base, rtol)


def check_reward_tie_symmetry(
    fn: RewardFunction, votes: VoteArrays, num_agents_P: npt.ArrayLike, *, rtol: float = 1e-12
) -> None:
    """A tie names no winner: writing every ``a = b`` vote as ``b = a`` changes no reward.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that depends on the order of a tie.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[0], ops=["="], b=[1])
      >>> check_reward_tie_symmetry(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_tie_symmetry"
    v = _votes(votes)
    tie = v.op_V == OP_EQ
    swapped = v._replace(a_V=np.where(tie, v.b_V, v.a_V), b_V=np.where(tie, v.a_V, v.b_V))
    _compare(
        name,
        "ties written the other way round",
        _rewards(name, fn, swapped, num_agents_P),
        _rewards(name, fn, v, num_agents_P),
        rtol,
    )


def check_reward_bounds(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    mode: RewardMode = "win_rate",
    unvoted: float = 0.0,
) -> None:
    """Every reward is finite and within its mode's range ([0, 1] win_rate, [−1, 1] win_minus_loss),
    or equals ``unvoted``.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      mode: the function's mode.
      unvoted: the function's reward for an agent with no counted vote.

    Returns:
      None.

    Raises:
      AssertionError: a reward out of range.
      ValueError: an unknown ``mode``.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[0], ops=[">"], b=[1])
      >>> check_reward_bounds(kernel.pairwise_rewards, v, [3])
    """
    if mode not in ("win_rate", "win_minus_loss"):
        raise ValueError(f"mode must be 'win_rate' or 'win_minus_loss', got {mode!r}")
    name = "check_reward_bounds"
    r = _rewards(name, fn, _votes(votes), num_agents_P)
    lo = 0.0 if mode == "win_rate" else -1.0
    bad = np.flatnonzero(~(((r >= lo) & (r <= 1.0)) | (r == unvoted)))
    if bad.size:
        raise AssertionError(
            f"{name}: rows {_fmt(bad)} have rewards {_fmt(r[bad])} outside [{lo:g}, 1] ({mode})"
        )


def check_reward_vote_order_invariance(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """Reordering the vote rows (a shuffle drawn from ``seed``, and the reversal) changes no reward.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws the shuffle.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that depends on the order of the votes.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 0], authors=[2, 1], a=[0, 0], ops=[">", "="], b=[1, 2])
      >>> check_reward_vote_order_invariance(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_vote_order_invariance"
    v = _votes(votes)
    base = _rewards(name, fn, v, num_agents_P)
    size = v.a_V.size
    for perm in (_rng(seed).permutation(size), np.arange(size)[::-1]):
        shuffled = v.take(perm)
        got = _rewards(name, fn, shuffled, num_agents_P)
        _compare(name, f"votes reordered by {_fmt(perm)}", got, base, rtol)


def check_reward_matches_reference(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    mode: RewardMode = "win_rate",
    unvoted: float = 0.0,
    rtol: float = 1e-12,
) -> None:
    """The function agrees with :func:`reference_pairwise_rewards` (``mode``, ``unvoted``) row by row.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      mode: the reference's mode.
      unvoted: the reference's reward for an agent with no counted vote.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row that disagrees.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 0], authors=[2, 0], a=[0, 1], ops=[">", "="], b=[1, 2])
      >>> check_reward_matches_reference(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_matches_reference"
    v = _votes(votes)
    want = reference_pairwise_rewards(v, num_agents_P, mode=mode, unvoted=unvoted)
    _compare(
        name,
        f"disagrees with the reference ({mode}, unvoted={unvoted:g})",
        _rewards(name, fn, v, num_agents_P),
        want,
        rtol,
    )


# --- metamorphic checks that need no reference ----------------------------------------------------------

_OP_BAD: tuple[int, ...] = (2, 3, 7, -1)  # OP_OTHER and codes no parser writes
_POSITIVE_WEIGHTS: tuple[float, ...] = (1.0, 0.5, 2.0, 3.0)


def _extra(
    like: VoteArrays,
    rows: Sequence[tuple[int, int, int, int, int]],
    judges: Sequence[int] | None = None,
    weights: Sequence[float] | None = None,
) -> VoteArrays:
    """Rows ``(g, u, a, op, b)`` shaped like ``like``: judge and weight fields only where it has them
    (judge −1, weight 1 unless given)."""
    size = len(rows)
    cols = [np.asarray([r[k] for r in rows], dtype=np.int32).reshape(size) for k in range(5)]
    judge = None
    if like.judge_V is not None:
        judge = np.asarray([-1] * size if judges is None else judges, dtype=np.int32).reshape(size)
    weight = None
    if like.weight_V is not None:
        weight = np.asarray([1.0] * size if weights is None else weights, dtype=np.float64).reshape(size)
    return VoteArrays(cols[0], cols[1], cols[2], cols[3], cols[4], judge, weight)


def _third_party(rng: np.random.Generator, n: int, i: int, j: int) -> int:
    """An author who is neither i nor j: another agent, −1 or N."""
    return int(rng.choice([k for k in range(n) if k not in (i, j)] + [-1, n]))


def _appended_comparisons(
    v: VoteArrays, n: npt.NDArray[np.int64], rng: np.random.Generator, op: int
) -> tuple[VoteArrays, list[tuple[int, int]]]:
    """One valid vote ``i op j`` of weight > 0 by a third party (a debater who is neither, −1, N, or a
    judge with any author) appended to every debate of ≥ 2 agents, half the time a copy of such a vote
    already there (a repeat must count again); returns the votes and the packed rows (i, j)."""
    offsets = _offsets(n)
    valid = validate_votes(v, n).valid_V & (v.op_V == op)
    valid &= (v.authors_V != v.a_V) & (v.authors_V != v.b_V) | (
        False if v.judge_V is None else v.judge_V >= 0
    )
    if v.weight_V is not None:
        valid &= v.weight_V > 0
    rows, judges, weights, pairs = [], [], [], []
    for p, count in enumerate(n.tolist()):
        if count < 2:
            continue
        there = np.flatnonzero(valid & (v.group_ids_V == p))
        if there.size and rng.random() < 0.5:
            k = int(rng.choice(there))
            i, j, author = int(v.a_V[k]), int(v.b_V[k]), int(v.authors_V[k])
            judge = -1 if v.judge_V is None else int(v.judge_V[k])
            weight = 1.0 if v.weight_V is None else float(v.weight_V[k])
        else:
            i, j = (int(x) for x in rng.choice(count, size=2, replace=False))
            judge, author = -1, _third_party(rng, count, i, j)
            if v.judge_V is not None and rng.random() < 0.3:  # a judge vote: nobody's own, any author
                judge, author = int(rng.integers(0, 4)), int(rng.choice([i, j, author]))
            weight = float(rng.choice(_POSITIVE_WEIGHTS))
        rows.append((p, author, i, op, j))
        judges.append(judge)
        weights.append(weight)
        pairs.append((int(offsets[p]) + i, int(offsets[p]) + j))
    return _concat_votes(v, _extra(v, rows, judges, weights)), pairs


def _fail(name: str, what: str, rows: list[int], got: FloatArray, before: FloatArray) -> None:
    if rows:
        idx = np.asarray(rows, dtype=np.int64)
        raise AssertionError(
            f"{name}: {what}; rows {_fmt(idx)}: got {_fmt(got[idx])}, before {_fmt(before[idx])}"
        )


def check_reward_malformed_ignored(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """Malformed votes count for nobody: appending to each debate votes that are valid but for one
    defect (``a == b``; an op code other than ``>`` and ``=``; ``a`` or ``b`` out of ``[0, N_p)``:
    −1, N_p, ±2³¹), with any author, judge and weight, changes no reward.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws the malformed votes.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that moved with a malformed vote.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[0], ops=[">"], b=[1])
      >>> check_reward_malformed_ignored(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_malformed_ignored"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    rng = _rng(seed)
    rows, judges, weights = [], [], []
    for p, count in enumerate(n.tolist()):
        top = max(count, 1)  # N_p = 0 or 1: every id is out of range or a == b anyway

        def agent(top: int = top) -> int:
            return int(rng.integers(0, top))

        wild = [-1, count, count + 1, 2**31 - 1, -(2**31)]
        for kind in ("self", "op", "a", "b"):
            i, j = agent(), agent()
            if count >= 2:
                while j == i:
                    j = agent()
            op = int(rng.choice((OP_GT, OP_EQ)))
            if kind == "self":
                j = i
            elif kind == "op":
                op = int(rng.choice(_OP_BAD))
            elif kind == "a":
                i = int(rng.choice(wild))
            else:
                j = int(rng.choice(wild))
            author = int(rng.choice([agent(), -1, count]))
            rows.append((p, author, i, op, j))
            judges.append(int(rng.choice((-1, -1, 0, 2))))
            weights.append(float(rng.choice(_POSITIVE_WEIGHTS)))
    if not rows:
        return
    base = _rewards(name, fn, v, n)
    got = _rewards(name, fn, _concat_votes(v, _extra(v, rows, judges, weights)), n)
    _compare(name, "appending malformed votes (a == b, a bad op, ids out of range) changed", got, base, rtol)


def check_reward_padding_ignored(
    fn: RewardFunction, votes: VoteArrays, num_agents_P: npt.ArrayLike, *, rtol: float = 1e-12
) -> None:
    """Padding rows count for nobody: appending rows with group id P (copies of every valid vote,
    judge and weight kept, and a vote ``0 > 1`` and ``0 = 1``) changes no reward, even where the copy
    would be a valid vote of the last (or the first) debate.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that moved with a padding row.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[0], ops=[">"], b=[1])
      >>> check_reward_padding_ignored(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_padding_ignored"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    copies = v.take(validate_votes(v, n).valid_V)
    copies = copies._replace(group_ids_V=np.full_like(copies.group_ids_V, n.size))
    rows = [(int(n.size), -1, 0, OP_GT, 1), (int(n.size), 2, 0, OP_EQ, 1)]
    padded = _concat_votes(_concat_votes(v, copies), _extra(v, rows))
    _compare(
        name,
        "appending padding rows (group id P) changed",
        _rewards(name, fn, padded, n),
        _rewards(name, fn, v, n),
        rtol,
    )


def check_reward_debate_independence(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """Votes of one debate never change another debate's rewards: for a debate p (drawn from ``seed``),
    dropping p's votes leaves every other debate's rewards unchanged, and p scored alone (its votes with
    group id 0, ``num_agents_P = [N_p]``) gets the rewards it gets in the batch.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws the debate.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward that depends on another debate.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 1], authors=[2, 2], a=[0, 1], ops=[">", ">"], b=[1, 0])
      >>> check_reward_debate_independence(kernel.pairwise_rewards, v, [3, 3])
    """
    name = "check_reward_debate_independence"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    if n.size == 0:
        return
    p = int(_rng(seed).integers(0, n.size))
    base = _rewards(name, fn, v, n)
    mine = v.group_ids_V == p
    rows = np.arange(int(_offsets(n)[p]), int(_offsets(n)[p] + n[p]))
    others = np.setdiff1d(np.arange(base.size), rows)
    dropped = _rewards(name, fn, v.take(~mine), n)
    _compare(
        name, f"dropping the votes of debate {p} changed other debates", dropped[others], base[others], rtol
    )
    alone = v.take(mine)
    alone = alone._replace(group_ids_V=np.zeros_like(alone.group_ids_V))
    got = _rewards(name, fn, alone, n[p : p + 1])
    _compare(name, f"debate {p} scored alone differs from its rows in the batch", got, base[rows], rtol)


def check_reward_author_locality(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """A vote's author matters only to that author, and a judge vote's author to nobody.

    Debater votes: in each debate p, rewriting the author field of some of the votes written by f_p
    (often all; f_p, t_p and the subset drawn from ``seed``, t_p among the agents, −1, N_p and 99) to
    t_p changes no reward of p's agents other than f_p and t_p (with leave-one-out an author only drops
    its own votes; a vote by −1 or an id out of range counts for everyone it names). Judge votes
    (``judge_V ≥ 0``, nobody's own vote): rewriting their author field, to the agent ``a`` they name
    and separately to ids drawn from ``seed``, changes no reward at all (nothing to do without judges).

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws f_p, t_p, the subset and the judge votes' authors.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a reward of a third agent that moved with a debater's author field, or any reward
        that moved with a judge vote's.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 0], authors=[-1, 0], a=[0, 0], ops=[">", "="], b=[1, 2],
      ...     judges=[-1, 3])
      >>> check_reward_author_locality(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_author_locality"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    rng = _rng(seed)
    offsets = _offsets(n)
    judged = np.zeros(v.a_V.size, dtype=bool) if v.judge_V is None else v.judge_V >= 0
    authors = v.authors_V.copy()
    keep: list[int] = []
    moves: list[tuple[int, int, int]] = []
    for p, count in enumerate(n.tolist()):
        mine = (v.group_ids_V == p) & ~judged
        present = sorted(set(v.authors_V[mine].tolist()))
        if not present:
            keep += range(int(offsets[p]), int(offsets[p]) + count)
            continue
        f = int(rng.choice(present))
        t = int(rng.choice([k for k in [*range(count), -1, count, 99] if k != f]))
        written = mine & (v.authors_V == f)
        if written.sum() > 1 and rng.random() < 0.5:  # some of them: splits repeated votes between authors
            some = written & (rng.random(written.size) < 0.5)
            some[int(rng.choice(np.flatnonzero(written)))] = True
            written = some
        authors[written] = t
        moves.append((p, f, t))
        keep += [int(offsets[p]) + k for k in range(count) if k not in (f, t)]
    base = _rewards(name, fn, v, n)
    if moves:
        rows = np.asarray(keep, dtype=np.int64)
        got = _rewards(name, fn, v._replace(authors_V=authors), n)
        what = (
            f"debater votes' authors rewritten (debate, from, to) {moves} changed a reward of another agent"
        )
        _compare(name, what, got[rows], base[rows], rtol)
    if not judged.any():
        return
    n_v = np.append(n, 0)[np.clip(v.group_ids_V, 0, n.size)]
    drawn = np.asarray([int(rng.integers(-1, k + 1)) for k in n_v.tolist()], dtype=np.int32)
    for label, new in (("the agent a it names", v.a_V), ("drawn ids", drawn)):
        rewritten = v._replace(authors_V=np.where(judged, new, v.authors_V).astype(np.int32))
        got = _rewards(name, fn, rewritten, n)
        _compare(name, f"judge votes' authors rewritten to {label} changed", got, base, rtol)


def check_reward_third_party_monotonicity(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    mode: RewardMode = "win_rate",
    unvoted: float = 0.0,
    counting: bool = False,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """A third party's vote ``i > j`` never lowers r_i nor raises r_j.

    One valid vote ``i > j`` of weight > 0 is appended to every debate of ≥ 2 agents (i, j, author and
    weight drawn from ``seed``, half the time a copy of such a vote already there; the author is another
    agent, −1 or N_p, or, with ``judge_V``, a judge with any author): r_i' ≥ r_i and r_j' ≤ r_j, except
    where the reward was ``unvoted`` (a convention, not a score).

    With ``counting`` (a vote count as REFERENCE.md §2's: r = score / weight of the counted votes, a
    win 1, a tie ½ (win_rate) or 0 (win_minus_loss), a loss 0 or −1) the statement is exact:

    * after ``i > j``, r_i' > r_i unless r_i' = 1 and r_j' < r_j unless r_j' is the mode's least reward
      (0 win_rate, −1 win_minus_loss) (so a repeated vote counts again);
    * after a tie ``i = j`` instead (appended the same way), r' = m or r' lies strictly between r and
      the mode's midpoint m (½ win_rate, 0 win_minus_loss), for i and for j: r' = (V·r + w·m)/(V + w);
    * either way, every other reward is unchanged.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      mode: the function's mode (its least reward and midpoint).
      unvoted: the function's reward for an agent with no counted vote.
      counting: the exact statements above.
      seed: draws the votes.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a winner that lost reward or a loser that gained; with ``counting``, one that did
        not move, a tie that did not move both rewards toward the midpoint, or a bystander that moved.
      ValueError: an unknown ``mode``.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0], authors=[2], a=[1], ops=[">"], b=[0])
      >>> check_reward_third_party_monotonicity(kernel.pairwise_rewards, v, [3], counting=True)
    """
    if mode not in ("win_rate", "win_minus_loss"):
        raise ValueError(f"mode must be 'win_rate' or 'win_minus_loss', got {mode!r}")
    name = "check_reward_third_party_monotonicity"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    rng = _rng(seed)
    changed, pairs = _appended_comparisons(v, n, rng, OP_GT)
    if not pairs:
        return
    base = _rewards(name, fn, v, n)
    got = _rewards(name, fn, changed, n)
    winners = [i for i, _ in pairs]
    losers = [j for _, j in pairs]
    rest = np.setdiff1d(np.arange(base.size), winners + losers)
    if not counting:
        tol = rtol * np.maximum(np.abs(base), 1.0)
        lowered = [i for i in winners if got[i] < base[i] - tol[i] and base[i] != unvoted]
        _fail(name, "a third party's vote i > j lowered r_i", lowered, got, base)
        raised = [j for j in losers if got[j] > base[j] + tol[j] and base[j] != unvoted]
        _fail(name, "a third party's vote i > j raised r_j", raised, got, base)
        return
    lo = 0.0 if mode == "win_rate" else -1.0
    stuck = [i for i in winners if not (got[i] > base[i] or got[i] == 1.0)]
    _fail(name, "a third party's vote i > j did not raise r_i (below 1)", stuck, got, base)
    stuck = [j for j in losers if not (got[j] < base[j] or got[j] == lo)]
    _fail(name, f"a third party's vote i > j did not lower r_j (above {lo:g})", stuck, got, base)
    _compare(name, "a third party's vote i > j moved a reward of another agent", got[rest], base[rest], rtol)

    changed, pairs = _appended_comparisons(v, n, rng, OP_EQ)
    got = _rewards(name, fn, changed, n)
    m = 0.5 if mode == "win_rate" else 0.0
    tied = [k for pair in pairs for k in pair]
    toward = (got - m) * (base - m) > 0
    toward &= np.abs(got - m) < np.abs(base - m)
    bad = [k for k in tied if not (got[k] == m or toward[k])]
    _fail(name, f"a third party's tie i = j did not move r_i, r_j strictly toward {m:g}", bad, got, base)
    rest = np.setdiff1d(np.arange(base.size), tied)
    _compare(name, "a third party's tie i = j moved a reward of another agent", got[rest], base[rest], rtol)


def check_reward_multiplicity(
    fn: RewardFunction,
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = 1e-12,
) -> None:
    """A repeated vote counts every time, and a vote of weight k counts as k copies of it.

    Repeats: a copy of one valid vote of weight > 0 of each debate (drawn from ``seed``) is appended, and
    separately the same copy with its author field set to −1 (N_p if it was −1): the two give the same
    rewards but for the author's own (an author only drops its own votes; a copy is a second vote, not
    the same one).
    Weights (only when the votes carry ``weight_V``): with a vote of weight 0 appended to each debate of
    ≥ 2 agents, every vote of integer weight k (0 included) written as k rows of weight 1 changes no
    reward (an agent whose only votes weigh 0 keeps ``unvoted``); doubling the weight of some votes
    (drawn from ``seed``) gives the rewards of appending a copy of each.

    Args:
      fn: the reward function under test.
      votes: the votes.
      num_agents_P: ``[P]`` agent counts.
      seed: draws the copied and the doubled votes.
      rtol: relative tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a repeat that did not count again, or a weight that does not count as that many votes.

    Examples:
      >>> import kernel
      >>> v = kernel.vote_arrays(group_ids=[0, 0], authors=[2, 1], a=[0, 2], ops=[">", "="], b=[1, 0],
      ...     weights=[2, 0])
      >>> check_reward_multiplicity(kernel.pairwise_rewards, v, [3])
    """
    name = "check_reward_multiplicity"
    v = _votes(votes)
    n = np.asarray(num_agents_P, dtype=np.int64)
    rng = _rng(seed)
    offsets = _offsets(n)
    valid = validate_votes(v, n).valid_V
    if v.weight_V is not None:  # a copy of weight 0 would show nothing
        valid &= v.weight_V > 0
    copied, skip = [], []
    for p, count in enumerate(n.tolist()):
        there = np.flatnonzero(valid & (v.group_ids_V == p))
        if there.size:
            k = int(rng.choice(there))
            copied.append(k)
            u = int(v.authors_V[k])
            if 0 <= u < count:
                skip.append(int(offsets[p]) + u)
    if copied:
        twin = v.take(np.asarray(copied, dtype=np.int64))
        other = np.where(twin.authors_V == -1, n[twin.group_ids_V], -1).astype(np.int32)
        rows = np.setdiff1d(np.arange(int(n.sum())), skip)
        same = _rewards(name, fn, _concat_votes(v, twin), n)
        moved = _rewards(name, fn, _concat_votes(v, twin._replace(authors_V=other)), n)
        what = (
            f"a copy of rows {_fmt(copied)} written by another author counts differently from the same copy"
        )
        _compare(name, what, moved[rows], same[rows], rtol)
    if v.weight_V is None:
        return
    zero = []  # and a vote of weight 0 naming two agents of each debate, maybe nobody else's vote
    for p, count in enumerate(n.tolist()):
        if count >= 2:
            i, j = (int(x) for x in rng.choice(count, size=2, replace=False))
            zero.append((p, int(rng.integers(-1, count)), i, int(rng.choice((OP_GT, OP_EQ))), j))
    judges = [int(rng.choice((-1, 0))) for _ in zero]
    with_zero = _concat_votes(v, _extra(v, zero, judges, [0.0] * len(zero)))
    w = with_zero.weight_V
    assert w is not None
    whole = w == np.round(w)
    copies = np.where(whole, np.round(w), 1).astype(np.int64)
    expanded = with_zero.take(np.repeat(np.arange(w.size), copies))
    expanded = expanded._replace(weight_V=np.repeat(np.where(whole, 1.0, w), copies))
    _compare(
        name,
        "votes of integer weight k (0 included) written as k votes of weight 1 changed",
        _rewards(name, fn, expanded, n),
        _rewards(name, fn, with_zero, n),
        rtol,
    )
    w = v.weight_V
    chosen = rng.random(w.size) < 0.5
    if not chosen.any():
        return
    doubled = v._replace(weight_V=np.where(chosen, 2 * w, w))
    _compare(
        name,
        f"doubling the weights of rows {_fmt(np.flatnonzero(chosen))} differs from appending copies",
        _rewards(name, fn, doubled, n),
        _rewards(name, fn, _concat_votes(v, v.take(chosen)), n),
        rtol,
    )


# --- the suite ------------------------------------------------------------------------------------

REWARD_CHECKS: tuple[str, ...] = (
    "leave_one_out",
    "relabel_equivariance",
    "tie_symmetry",
    "bounds",
    "vote_order_invariance",
    "malformed_ignored",
    "padding_ignored",
    "debate_independence",
    "author_locality",
    "third_party_monotonicity",
    "multiplicity",
    "matches_reference",
)
"""Names of the reward checks (``check_reward_`` + name)."""


class _RewardConfig:
    mode: RewardMode = "win_rate"
    unvoted: float = 0.0
    reference: bool = True
    counting: bool | None = None
    invalid: bool = True
    padding: bool = True
    judges: bool = False
    max_groups: int = 4
    max_agents: int = 6
    max_votes: int = 20
    rtol: float = 1e-12
    hypothesis_settings: Mapping[str, Any] = MappingProxyType({})

    def _counting(self) -> bool:
        return self.reference if self.counting is None else self.counting

    def _skip_reason(self, check: str) -> str | None:
        if check == "matches_reference" and not self.reference:
            return "declared reference=False (the function is not REFERENCE.md §2's reward)"
        if check == "malformed_ignored" and not self.invalid:
            return "declared invalid=False (the function is not given malformed votes)"
        if check == "padding_ignored" and not self.padding:
            return "declared padding=False (the function is not given padding rows)"
        return None

    def _run_check(self, check: str, fn: RewardFunction, batch: VoteBatch, seed: int) -> None:
        args = (fn, batch.votes, batch.num_agents_P)
        if check == "leave_one_out":
            check_reward_leave_one_out(*args, rtol=self.rtol)
        elif check == "relabel_equivariance":
            check_reward_relabel_equivariance(*args, seed=seed, rtol=self.rtol)
        elif check == "tie_symmetry":
            check_reward_tie_symmetry(*args, rtol=self.rtol)
        elif check == "bounds":
            check_reward_bounds(*args, mode=self.mode, unvoted=self.unvoted)
        elif check == "vote_order_invariance":
            check_reward_vote_order_invariance(*args, seed=seed, rtol=self.rtol)
        elif check == "malformed_ignored":
            check_reward_malformed_ignored(*args, seed=seed, rtol=self.rtol)
        elif check == "padding_ignored":
            check_reward_padding_ignored(*args, rtol=self.rtol)
        elif check == "debate_independence":
            check_reward_debate_independence(*args, seed=seed, rtol=self.rtol)
        elif check == "author_locality":
            check_reward_author_locality(*args, seed=seed, rtol=self.rtol)
        elif check == "third_party_monotonicity":
            check_reward_third_party_monotonicity(
                *args,
                mode=self.mode,
                unvoted=self.unvoted,
                counting=self._counting(),
                seed=seed,
                rtol=self.rtol,
            )
        elif check == "multiplicity":
            check_reward_multiplicity(*args, seed=seed, rtol=self.rtol)
        elif check == "matches_reference":
            check_reward_matches_reference(*args, mode=self.mode, unvoted=self.unvoted, rtol=self.rtol)
        else:  # pragma: no cover - internal
            raise ValueError(check)

    def _suite(
        self, checks: Sequence[str], fn: RewardFunction, raise_on_failure: bool, overrides: Mapping[str, Any]
    ) -> SuiteOutcome:
        def batches(min_votes: int) -> st.SearchStrategy[VoteBatch]:
            return vote_batches(
                max_groups=self.max_groups,
                max_agents=self.max_agents,
                min_votes=min(min_votes, self.max_votes),
                max_votes=self.max_votes,
                invalid=self.invalid,
                padding=self.padding,
                judges=self.judges,
                repeats=True,
                copied_padding=True,
            )

        strategy = st.tuples(
            st.one_of(batches(0), batches(self.max_votes // 2)),  # few votes, and busy debates
            st.integers(0, 2**32 - 1),
        )

        def run(check: str, drawn: tuple[VoteBatch, int]) -> None:
            self._run_check(check, fn, *drawn)

        return _run_suite(
            checks, self._skip_reason, strategy, run, raise_on_failure=raise_on_failure, overrides=overrides
        )


def run_reward_suite(
    fn: RewardFunction,
    *,
    mode: RewardMode = "win_rate",
    unvoted: float = 0.0,
    reference: bool = True,
    counting: bool | None = None,
    checks: Sequence[str] | None = None,
    raise_on_failure: bool = True,
    invalid: bool = True,
    padding: bool = True,
    judges: bool = False,
    max_groups: int = 4,
    max_agents: int = 6,
    max_votes: int = 20,
    rtol: float = 1e-12,
    max_examples: int | None = None,
    hypothesis_settings: Mapping[str, Any] | None = None,
) -> SuiteOutcome:
    """Runs the reward invariants on Hypothesis-drawn vote batches (:func:`~kernel.testing.vote_batches`).

    Args:
      fn: the reward function under test (:class:`RewardFunction`).
      mode: the function's mode (bounds and reference).
      unvoted: the function's reward for an agent with no counted vote.
      reference: check agreement with :func:`reference_pairwise_rewards`; False skips it with a reason.
      counting: the function is a vote count as REFERENCE.md §2's (r = weighted score of the votes that
        count for the agent / their weight; a win 1, a tie ½ or 0, a loss 0 or −1), though it may differ
        from the reference (say in ``unvoted``): ``third_party_monotonicity`` then also checks that a
        vote moves exactly the two rewards it names, strictly, and that a tie moves them toward the
        midpoint. None: the value of ``reference``; False for a preference model (Bradley–Terry,
        Copeland), which gets the statements true of any pairwise reward.
      checks: names (with or without ``check_reward_``) to run; None runs :data:`REWARD_CHECKS`.
      raise_on_failure: raise the first failure (True) or record it and go on (False).
      invalid, padding, max_groups, max_agents, max_votes: passed to the strategy.
      judges: draw judge votes and weights too (``judge_V``, ``weight_V``); only for a function that
        honours them as :func:`kernel.pairwise_rewards` does.
      rtol: relative tolerance of the comparisons.
      max_examples: examples; None keeps the active Hypothesis profile's count.
      hypothesis_settings: further ``hypothesis.settings`` options.

    Returns:
      Check name → ``"passed"``, ``"skipped: <reason>"`` or ``"failed: <message>"``.

    Raises:
      AssertionError: a check failed and ``raise_on_failure``.
      ValueError: unknown check names or mode.

    Examples:
      >>> import kernel
      >>> run_reward_suite(kernel.pairwise_rewards, max_examples=10)["leave_one_out"]
      'passed'
    """
    if mode not in ("win_rate", "win_minus_loss"):
        raise ValueError(f"mode must be 'win_rate' or 'win_minus_loss', got {mode!r}")
    config = _RewardConfig()
    for key, value in {
        "mode": mode,
        "unvoted": unvoted,
        "reference": reference,
        "counting": counting,
        "invalid": invalid,
        "padding": padding,
        "judges": judges,
        "max_groups": max_groups,
        "max_agents": max_agents,
        "max_votes": max_votes,
        "rtol": rtol,
    }.items():
        setattr(config, key, value)
    chosen = list(REWARD_CHECKS) if checks is None else [c.removeprefix("check_reward_") for c in checks]
    unknown = set(chosen) - set(REWARD_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; known: {REWARD_CHECKS}")
    overrides: dict[str, Any] = dict(hypothesis_settings or {})
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    return config._suite(chosen, fn, raise_on_failure, overrides)


class RewardInvariants(_RewardConfig):
    """The reward suite as a pytest base class: subclass it as ``Test...`` and set ``reward_fn``.

    Class attributes mirror :func:`run_reward_suite`'s keywords (``mode``, ``unvoted``, ``reference``,
    ``counting``, ``invalid``, ``padding``, ``judges``, ``max_groups``, ``max_agents``, ``max_votes``,
    ``rtol``, ``hypothesis_settings``).

    Examples:
      >>> import kernel
      >>> class TestOurs(RewardInvariants):
      ...     reward_fn = staticmethod(kernel.pairwise_rewards)
      >>> TestOurs().test_tie_symmetry()
    """

    reward_fn: Any = None

    def _check(self, check: str) -> None:
        _run_class_check(self, "reward_fn", check)

    def test_leave_one_out(self) -> None:
        """An agent's own votes never change its own reward."""
        self._check("leave_one_out")

    def test_relabel_equivariance(self) -> None:
        """Renaming agents permutes the rewards."""
        self._check("relabel_equivariance")

    def test_tie_symmetry(self) -> None:
        """``a = b`` and ``b = a`` count the same."""
        self._check("tie_symmetry")

    def test_bounds(self) -> None:
        """Rewards lie in the mode's range (or equal ``unvoted``)."""
        self._check("bounds")

    def test_vote_order_invariance(self) -> None:
        """The order of the votes does not matter."""
        self._check("vote_order_invariance")

    def test_malformed_ignored(self) -> None:
        """Malformed votes (``a == b``, a bad op, ids out of range) change no reward."""
        self._check("malformed_ignored")

    def test_padding_ignored(self) -> None:
        """Padding rows (group id P), even copies of valid votes, change no reward."""
        self._check("padding_ignored")

    def test_debate_independence(self) -> None:
        """Votes of one debate never change another debate's rewards."""
        self._check("debate_independence")

    def test_author_locality(self) -> None:
        """Rewriting a vote's author from f to t changes no reward but f's and t's (a judge's: none)."""
        self._check("author_locality")

    def test_third_party_monotonicity(self) -> None:
        """A third party's ``i > j`` never lowers r_i nor raises r_j (exactly, ties too: vote counts)."""
        self._check("third_party_monotonicity")

    def test_multiplicity(self) -> None:
        """A repeated vote counts again; a vote of weight k counts as k copies."""
        self._check("multiplicity")

    def test_matches_reference(self) -> None:
        """Agreement with the per-debate reference loop."""
        self._check("matches_reference")
