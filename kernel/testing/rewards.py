"""Invariant suite for pairwise reward functions: point it at your own ``pairwise_rewards``.

A reward function is any callable ``fn(votes, num_agents_P) -> rewards_PG`` (see :class:`RewardFunction`),
with ``votes`` a :class:`kernel.VoteArrays` and the result an array of Σ N_p rewards, debates in order, or
a NamedTuple with a ``rewards_PG`` field (as ``kernel.pairwise_rewards`` returns). Bind options first
(``functools.partial(kernel.pairwise_rewards, mode="win_minus_loss")``).

Checks (REFERENCE.md §2): leave-one-out independence (an agent's own votes never change its own
reward), agent relabelling equivariance, tie symmetry, bounds per mode, invariance to vote order,
and agreement with :func:`reference_pairwise_rewards`, a per-debate Python loop. Counts are small
integers, so every comparison is exact up to ``rtol`` (default 1e-12).

Judges: with ``judges=True`` the drawn votes carry ``judge_V`` and ``weight_V`` (see
:class:`kernel.VoteArrays`; dyadic weights, so sums stay exact) and every check holds with them: the
reference loop weighs and counts judge votes for both agents, and leave-one-out drops or reverses only
the votes a debater cast (a judge vote is nobody's own vote). Leave it False for a function that does
not read the judge fields.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, cast

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kernel._types import OP_EQ, OP_GT
from kernel._votes import VoteArrays
from kernel.testing._suite import SuiteOutcome, _run_suite, _skip_or_run
from kernel.testing.strategies import VoteBatch, vote_batches

__all__ = [
    "REWARD_CHECKS",
    "RewardFunction",
    "RewardInvariants",
    "check_reward_bounds",
    "check_reward_leave_one_out",
    "check_reward_matches_reference",
    "check_reward_relabel_equivariance",
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


# --- the suite ------------------------------------------------------------------------------------

REWARD_CHECKS: tuple[str, ...] = (
    "leave_one_out",
    "relabel_equivariance",
    "tie_symmetry",
    "bounds",
    "vote_order_invariance",
    "matches_reference",
)
"""Names of the reward checks (``check_reward_`` + name)."""


class _RewardConfig:
    mode: RewardMode = "win_rate"
    unvoted: float = 0.0
    reference: bool = True
    invalid: bool = True
    padding: bool = True
    judges: bool = False
    max_groups: int = 4
    max_agents: int = 6
    max_votes: int = 20
    rtol: float = 1e-12
    hypothesis_settings: Mapping[str, Any] = MappingProxyType({})

    def _skip_reason(self, check: str) -> str | None:
        if check == "matches_reference" and not self.reference:
            return "declared reference=False (the function is not REFERENCE.md §2's reward)"
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
    ``invalid``, ``padding``, ``judges``, ``max_groups``, ``max_agents``, ``max_votes``, ``rtol``,
    ``hypothesis_settings``).

    Examples:
      >>> import kernel
      >>> class TestOurs(RewardInvariants):
      ...     reward_fn = staticmethod(kernel.pairwise_rewards)
      >>> TestOurs().test_tie_symmetry()
    """

    reward_fn: Any = None

    def _fn(self) -> RewardFunction:
        raw = inspect.getattr_static(type(self), "reward_fn")
        fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        if fn is None:
            raise TypeError(f"{type(self).__name__}.reward_fn is not set")
        return cast(RewardFunction, fn)

    def _check(self, check: str) -> None:
        fn = self._fn()
        _skip_or_run(
            self._skip_reason(check), lambda: self._suite([check], fn, True, self.hypothesis_settings)
        )

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

    def test_matches_reference(self) -> None:
        """Agreement with the per-debate reference loop."""
        self._check("matches_reference")
