"""Invariant suite for judge rewards: point it at your own ``judge_step_rewards``.

A judge-reward function is any callable ``fn(debate_U, index_U, author_U, turn_V, a_V, op_V, b_V,
num_agents_P, num_steps_PG)`` (the arguments of :func:`kernel.judge_step_rewards`; bind its options with
``functools.partial``) returning an object with ``generator_N`` and ``judge_N`` (float [N], cells: agent
rows debate-major, each row's ``num_steps_PG`` steps in order) and ``scores`` (float [V], each
comparison's +1 / −1, 0 when not scored). The drawn debates are round-robin turns in cycles; the suite
reads them as *parallel* cycles (every agent of cycle c answers from the answers of cycle c − 1), so bind
``schedule="parallel"``.

Checks (REFERENCE §12 and the defaults of :mod:`kernel._judge_rewards`):

* ``relabel_invariance``: renaming the agents of a debate permutes its cells and leaves every
  comparison's score as it was (the reference's sequential attribution depends on the agent order);
* ``unanimous_vote``: when every agent but x and y writes ``x > y`` on the previous cycle's answers, and
  nothing else, each of those judges gets judge reward +1 (with at least two of them);
* ``each_answer_evidence``: a judgment that no other judge made on that pair is scored by the other
  judges' votes on each of its two answers against other opponents: +1 when they rank the two the same
  way, −1 when the other way (the default ``consensus="answers"``; a consensus keyed by the exact pair
  scores neither, the reference's own-vote consensus gives +1 to both);
* ``never_scores_itself``: comparisons naming their author change no reward, and neither copies of a
  judge's comparison nor the judge's other votes on the same two answers change the score of that
  comparison (the reference counts self-votes and scores a judge against a consensus holding its own
  vote);
* ``matches_reference``: agreement with :func:`reference_judge_step_rewards`, a per-debate Python loop of
  the same semantics (``options``: the :class:`kernel.JudgeOptions` it follows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kernel._judge_rewards import JudgeOptions
from kernel._types import OP_EQ, OP_GT, OP_OTHER
from kernel.testing._suite import SuiteOutcome, _run_class_check, _run_suite

__all__ = [
    "JUDGE_CHECKS",
    "JudgeDebates",
    "JudgeInvariants",
    "check_judge_each_answer_evidence",
    "check_judge_matches_reference",
    "check_judge_never_scores_itself",
    "check_judge_relabel_invariance",
    "check_judge_unanimous_vote",
    "judge_debates",
    "reference_judge_step_rewards",
    "run_judge_suite",
]

JUDGE_CHECKS: tuple[str, ...] = (
    "relabel_invariance",
    "unanimous_vote",
    "each_answer_evidence",
    "never_scores_itself",
    "matches_reference",
)
"""The checks of :func:`run_judge_suite`, in order."""

JudgeFunction = Callable[..., Any]
_DEFAULT = JudgeOptions()
FloatArray = npt.NDArray[np.float64]


class JudgeDebates(NamedTuple):
    """A batch of debates in the argument order of :func:`kernel.judge_step_rewards` (int64 arrays)."""

    debate_U: npt.NDArray[np.int64]
    index_U: npt.NDArray[np.int64]
    author_U: npt.NDArray[np.int64]
    turn_V: npt.NDArray[np.int64]
    a_V: npt.NDArray[np.int64]
    op_V: npt.NDArray[np.int64]
    b_V: npt.NDArray[np.int64]
    num_agents_P: npt.NDArray[np.int64]
    num_steps_PG: npt.NDArray[np.int64]


def _batch(
    num_agents: Sequence[int], cycles: Sequence[int], comparisons: Sequence[Sequence[tuple[int, int, int]]]
) -> JudgeDebates:
    """Debates of round-robin turns (``cycles[p]`` full cycles each) with the comparisons of each turn."""
    debate, index, author, turn, a, op, b = [], [], [], [], [], [], []
    for p, (n, c) in enumerate(zip(num_agents, cycles, strict=True)):
        for t in range(n * c):
            debate.append(p)
            index.append(t)
            author.append(t % n)
    for u, rows in enumerate(comparisons):
        for x, o, y in rows:
            turn.append(u)
            a.append(x)
            op.append(o)
            b.append(y)
    steps = [c for n, c in zip(num_agents, cycles, strict=True) for _ in range(n)]
    ints = (debate, index, author, turn, a, op, b, list(num_agents), steps)
    return JudgeDebates(*(np.asarray(x, dtype=np.int64) for x in ints))


@st.composite
def judge_debates(
    draw: st.DrawFn,
    *,
    max_debates: int = 3,
    max_agents: int = 5,
    max_cycles: int = 3,
    max_comparisons: int = 3,
) -> JudgeDebates:
    """A batch of 1…``max_debates`` debates of 2…``max_agents`` agents and 1…``max_cycles`` cycles; each
    turn lists 0…``max_comparisons`` comparisons, mostly strict votes among a few agents (so judges share
    pairs), some ties, an unknown operator, an id out of range, a self-comparison or a repeat.

    Args:
      draw: Hypothesis' draw (given by ``st.composite``).
      max_debates, max_agents, max_cycles, max_comparisons: the bounds above.

    Returns:
      :class:`JudgeDebates`, every agent with one step per cycle.

    Examples:
      >>> from hypothesis import find
      >>> d = find(judge_debates(), lambda d: d.num_agents_P.size == 2)
      >>> d.num_steps_PG.size == int(d.num_agents_P.sum())
      True
    """
    sizes = draw(st.lists(st.integers(2, max_agents), min_size=1, max_size=max_debates))
    cycles = [draw(st.integers(1, max_cycles)) for _ in sizes]
    comparisons: list[list[tuple[int, int, int]]] = []
    for n, c in zip(sizes, cycles, strict=True):
        for _ in range(n * c):
            rows = []
            for _ in range(draw(st.integers(0, max_comparisons))):
                x = draw(st.integers(0, n))  # n: an unknown id, now and then
                y = draw(st.integers(0, n - 1))
                op = draw(st.sampled_from((OP_GT, OP_GT, OP_GT, OP_EQ, OP_OTHER)))
                rows.append((x, op, y))
            comparisons.append(rows)
    return _batch(sizes, cycles, comparisons)


# --- the slow reference --------------------------------------------------------------------------------


def reference_judge_step_rewards(
    debates: JudgeDebates, *, schedule: str = "parallel", options: JudgeOptions = _DEFAULT
) -> tuple[FloatArray, FloatArray]:
    """``(generator_N, judge_N)`` by a Python loop per debate, turn by turn and comparison by comparison,
    of the semantics in :mod:`kernel._judge_rewards` (steps judged counted from the turns seen, not by
    arithmetic).

    Args:
      debates: :class:`JudgeDebates` (round-robin turns).
      schedule: ``"parallel"`` or ``"sequential"``, as :func:`kernel.judge_step_rewards`.
      options: the :class:`kernel.JudgeOptions` to follow.

    Returns:
      ``(generator_N, judge_N)``, float64 [N].

    Examples:
      >>> d = _batch([3], [2], [[], [], [], [(2, OP_GT, 1)], [(2, OP_GT, 0)], [(0, OP_GT, 1)]])
      >>> [x.tolist() for x in reference_judge_step_rewards(d)]  # judge 0: answer 2 won, 1 lost elsewhere
      [[0.5, 0.0, 0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]]
    """
    d = JudgeDebates(*(np.asarray(x, dtype=np.int64).tolist() for x in debates))
    rows_of: list[list[int]] = []
    r = 0
    for n in d.num_agents_P:
        rows_of.append(list(range(r, r + n)))
        r += n
    offsets = [0]
    for s in d.num_steps_PG:
        offsets.append(offsets[-1] + s)
    gen = [0.0] * offsets[-1]
    judge = [0.0] * offsets[-1]
    for p, n in enumerate(d.num_agents_P):
        turns = [u for u, q in enumerate(d.debate_U) if q == p]
        g, j = _one_debate(d, p, n, turns, schedule, options)
        for x in range(n):
            row = rows_of[p][x]
            for s in range(d.num_steps_PG[row]):
                gen[offsets[row] + s] = g.get((x, s), 0.0)
                judge[offsets[row] + s] = j.get((x, s), 0.0)
    return np.asarray(gen, np.float64), np.asarray(judge, np.float64)


def _one_debate(
    d: JudgeDebates, p: int, n: int, turns: list[int], schedule: str, options: JudgeOptions
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    rows = [sum(d.num_agents_P[:p]) + x for x in range(n)]
    steps = [d.num_steps_PG[r] for r in rows]
    index = {u: d.index_U[u] for u in turns}
    author = {u: d.author_U[u] for u in turns}

    def judged(t: int, x: int) -> int:
        if options.attribution == "reference_v2":
            c, k = divmod(t, n)
            return -1 if x >= t else c if x < k else max(c - 1, -1)
        if not 0 <= x < n:
            return -1
        if schedule == "parallel":  # the turns of x in earlier cycles
            seen = [v for v in turns if author[v] == x and index[v] // n < t // n]
        else:  # the turns of x before t
            seen = [v for v in turns if author[v] == x and index[v] < t]
        return len(seen) - 1

    drop = options.self_comparisons == "drop"  # a dropped self-comparison is not in the list
    listed = {
        u: [
            (d.a_V[v], d.op_V[v], d.b_V[v])
            for v in range(len(d.turn_V))
            if d.turn_V[v] == u and not (drop and author[u] in (d.a_V[v], d.b_V[v]))
        ]
        for u in turns
    }
    # the comparisons that count: (turn, judge, a, Sa, op, b, Sb)
    rows_v = []
    for u in turns:
        t, w = index[u], author[u]
        for a, op, b in listed[u]:
            rows_v.append((u, w, a, judged(t, a), op, b, judged(t, b)))
    won: dict[tuple[int, int], int] = {}
    cast: dict[tuple[int, int], int] = {}
    votes = []
    for _, w, a, sa, op, b, sb in rows_v:
        if op == OP_GT and 0 <= a < n and 0 <= b < n and a != b and sa >= 0 and sb >= 0:
            votes.append((w, (a, sa), (b, sb)))
            won[(a, sa)] = won.get((a, sa), 0) + 1
            cast[(a, sa)] = cast.get((a, sa), 0) + 1
            cast[(b, sb)] = cast.get((b, sb), 0) + 1
    gen = {k: won.get(k, 0) / v for k, v in cast.items()}
    total: dict[tuple[int, int], float] = {}
    count: dict[tuple[int, int], int] = {}
    for u, w, a, sa, op, b, sb in rows_v:
        s = index[u] // n
        if not (0 <= w < n and s < steps[w]) or a == b or sa < 0 or sb < 0 or op not in (OP_GT, OP_EQ):
            continue
        if options.consensus == "answers":  # each answer's win rate in the other judges' votes
            says = 1 if op == OP_GT else 0
            rates = [
                [int(x == side) for judge, x, y in votes if judge != w and side in (x, y)]
                for side in ((a, sa), (b, sb))
            ]
            if all(rates):
                diff = Fraction(sum(rates[0]), len(rates[0])) - Fraction(sum(rates[1]), len(rates[1]))
                consensus = (diff > 0) - (diff < 0)
            else:
                consensus = 0
            if consensus == 0 and options.no_consensus == "skip":
                continue
        else:  # the votes on the exact pair
            first, second = sorted([(a, sa), (b, sb)])
            says = 0 if op == OP_EQ else 1 if (a, sa) == first else -1
            others = [
                (1 if x == first else -1)
                for judge, x, y in votes
                if {x, y} == {first, second} and not (options.consensus == "pair" and judge == w)
            ]
            if not others and options.no_consensus == "skip":
                continue
            consensus = (sum(others) > 0) - (sum(others) < 0)
        total[(w, s)] = total.get((w, s), 0.0) + (1.0 if says == consensus else -1.0)
        count[(w, s)] = count.get((w, s), 0) + 1
    for u in turns:
        t, w = index[u], author[u]
        s = t // n
        if options.format_penalty is None or not (0 <= w < n and s < steps[w]) or listed[u]:
            continue
        if t < options.format_exempt_turns or s < options.format_exempt_steps:
            continue
        if sum(1 for x in range(n) if x != w and judged(t, x) >= 0) >= 2:
            total[(w, s)] = total.get((w, s), 0.0) + options.format_penalty
            count[(w, s)] = count.get((w, s), 0) + 1
    return gen, {k: total[k] / count[k] for k in count}


# --- checks ----------------------------------------------------------------------------------------------


def _call(name: str, fn: JudgeFunction, d: JudgeDebates) -> tuple[FloatArray, FloatArray, FloatArray]:
    out = fn(*(x.copy() for x in d))
    got = tuple(np.asarray(getattr(out, f), dtype=np.float64) for f in ("generator_N", "judge_N", "scores"))
    cells = int(d.num_steps_PG.sum())
    shapes = (cells, cells, int(d.turn_V.shape[0]))
    for field, x, size in zip(("generator_N", "judge_N", "scores"), got, shapes, strict=True):
        if x.shape != (size,):
            raise AssertionError(f"{name}: {field} has shape {x.shape}, expected ({size},)")
    return got  # type: ignore[return-value]


def _close(name: str, what: str, got: FloatArray, want: FloatArray, rtol: float = 1e-12) -> None:
    bad = np.flatnonzero(~(np.abs(got - want) <= rtol * np.maximum(np.abs(want), 1.0)))
    if bad.size:
        k = int(bad[0])
        raise AssertionError(f"{name}: {what} at {k}: got {got[k]!r}, expected {want[k]!r}")


def check_judge_relabel_invariance(fn: JudgeFunction, debates: JudgeDebates, *, seed: int = 0) -> None:
    """Renaming each debate's agents by a permutation π moves cell (x, s) to (π(x), s) and keeps every
    comparison's score.

    Args:
      fn: the judge-reward function under test.
      debates: the drawn :class:`JudgeDebates`.
      seed: seeds the permutation or choice the check makes.

    Returns:
      None; raises AssertionError naming what differs.

    Examples:
      >>> import functools, kernel
      >>> d = _batch([3], [2], [[], [], [], [(2, OP_GT, 1)], [(2, OP_GT, 0)], [(2, OP_GT, 0)]])
      >>> check_judge_relabel_invariance(functools.partial(kernel.judge_step_rewards, schedule="parallel"), d)
    """
    name = "check_judge_relabel_invariance"
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(int(n)) for n in debates.num_agents_P]
    p_V = debates.debate_U[debates.turn_V]

    def rename(x: npt.NDArray[np.int64], p: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        out = x.copy()
        for q, perm in enumerate(perms):
            known = (p == q) & (x >= 0) & (x < perm.size)
            out[known] = perm[x[known]]
        return out

    offsets = np.concatenate([[0], np.cumsum(debates.num_agents_P)])
    new_row = np.concatenate([offsets[q] + perm for q, perm in enumerate(perms)]).astype(np.int64)
    steps = np.zeros_like(debates.num_steps_PG)
    steps[new_row] = debates.num_steps_PG
    renamed = debates._replace(
        author_U=rename(debates.author_U, debates.debate_U),
        a_V=rename(debates.a_V, p_V),
        b_V=rename(debates.b_V, p_V),
        num_steps_PG=steps,
    )
    gen, judge, scores = _call(name, fn, debates)
    gen2, judge2, scores2 = _call(name, fn, renamed)
    cell = np.concatenate([[0], np.cumsum(debates.num_steps_PG)])
    cell2 = np.concatenate([[0], np.cumsum(steps)])
    where = np.concatenate(
        [np.arange(cell2[new_row[r]], cell2[new_row[r]] + debates.num_steps_PG[r]) for r in range(steps.size)]
        or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    _close(name, "generator reward", gen2[where], gen[: cell[-1]])
    _close(name, "judge reward", judge2[where], judge[: cell[-1]])
    _close(name, "score", scores2, scores)


def _unanimous_case(debates: JudgeDebates, seed: int) -> tuple[JudgeDebates, list[int]] | None:
    """The first debate with N ≥ 4 and two cycles, made of one unanimous vote: every agent but x and y
    writes ``x > y`` in cycle 1, nothing else is written. Returns it and the judges' cells."""
    rng = np.random.default_rng(seed)
    big = [int(n) for n in debates.num_agents_P if n >= 4]
    if not big:
        return None
    n = big[0]
    x, y = (int(v) for v in rng.choice(n, size=2, replace=False))
    comparisons: list[list[tuple[int, int, int]]] = [[] for _ in range(2 * n)]
    judges = [u for u in range(n) if u not in (x, y)]
    for u in judges:
        comparisons[n + u] = [(x, OP_GT, y)]
    return _batch([n], [2], comparisons), [2 * u + 1 for u in judges]


def check_judge_unanimous_vote(fn: JudgeFunction, debates: JudgeDebates, *, seed: int = 0) -> None:
    """Every agent but x and y votes ``x > y`` on the previous cycle's answers: each of them (at least
    two) gets judge reward +1 for that step. Uses the agent count of the first debate with N ≥ 4.

    Args:
      fn: the judge-reward function under test.
      debates: the drawn :class:`JudgeDebates`.
      seed: seeds the permutation or choice the check makes.

    Returns:
      None; raises AssertionError naming what differs.

    Examples:
      >>> import functools, kernel
      >>> d = _batch([4], [1], [[], [], [], []])
      >>> check_judge_unanimous_vote(functools.partial(kernel.judge_step_rewards, schedule="parallel"), d)
    """
    name = "check_judge_unanimous_vote"
    case = _unanimous_case(debates, seed)
    if case is None:
        return
    d, cells = case
    _, judge, _ = _call(name, fn, d)
    _close(name, "judge reward of a unanimous judge", judge[cells], np.ones(len(cells)))


def check_judge_each_answer_evidence(fn: JudgeFunction, debates: JudgeDebates, *, seed: int = 0) -> None:
    """Agents x, y, j, k of the first debate with N ≥ 4, two cycles, cycle 1 only: judge j writes
    ``x > y``; judge k writes ``x > j`` and ``j > y`` (supports it: j's judge reward +1), or ``y > j``
    and ``j > x`` (contradicts it: −1). Nobody else compares x with y.

    Args:
      fn: the judge-reward function under test.
      debates: the drawn :class:`JudgeDebates`.
      seed: seeds the choice of x, y, j, k.

    Returns:
      None; raises AssertionError naming what differs.

    Examples:
      >>> import functools, kernel
      >>> d = _batch([4], [1], [[], [], [], []])
      >>> ours = functools.partial(kernel.judge_step_rewards, schedule="parallel")
      >>> check_judge_each_answer_evidence(ours, d)
    """
    name = "check_judge_each_answer_evidence"
    big = [int(n) for n in debates.num_agents_P if n >= 4]
    if not big:
        return
    n = big[0]
    x, y, j, k = (int(v) for v in np.random.default_rng(seed).choice(n, size=4, replace=False))
    for support, want in ((True, 1.0), (False, -1.0)):
        rows: list[list[tuple[int, int, int]]] = [[] for _ in range(2 * n)]
        rows[n + j] = [(x, OP_GT, y)]
        rows[n + k] = [(x, OP_GT, j), (j, OP_GT, y)] if support else [(y, OP_GT, j), (j, OP_GT, x)]
        _, judge, _ = _call(name, fn, _batch([n], [2], rows))
        what = "supported" if support else "contradicted"
        _close(
            name,
            f"judge reward of x > y {what} on each answer",
            judge[2 * j + 1 : 2 * j + 2],
            np.full(1, want),
        )


def check_judge_never_scores_itself(fn: JudgeFunction, debates: JudgeDebates, *, seed: int = 0) -> None:
    """Comparisons naming their author change no reward, and copies of a judge's comparison (same turn)
    never change that comparison's score: on a drawn comparison, and on ``x > y`` of one judge that
    another judge of the cycle contradicts (the first debate with N ≥ 4, when there is one).

    Args:
      fn: the judge-reward function under test.
      debates: the drawn :class:`JudgeDebates`.
      seed: seeds the permutation or choice the check makes.

    Returns:
      None; raises AssertionError naming what differs.

    Examples:
      >>> import functools, kernel
      >>> d = _batch([3], [2], [[], [], [], [(2, OP_GT, 1)], [(2, OP_GT, 0)], [(0, OP_GT, 1)]])
      >>> ours = functools.partial(kernel.judge_step_rewards, schedule="parallel")
      >>> check_judge_never_scores_itself(ours, d)
    """
    name = "check_judge_never_scores_itself"
    rng = np.random.default_rng(seed)
    gen, judge, scores = _call(name, fn, debates)
    num_u = int(debates.author_U.shape[0])
    live = debates.turn_V < num_u
    # every turn also names itself: once ahead of the others, once beaten
    other = (debates.author_U + 1) % np.maximum(debates.num_agents_P[debates.debate_U], 1)
    turns = np.arange(num_u, dtype=np.int64)
    extra = _appended(
        debates,
        turns,
        np.concatenate([debates.author_U, other]),
        np.full(2 * num_u, OP_GT),
        np.concatenate([other, debates.author_U]),
    )
    gen2, judge2, _ = _call(name, fn, extra)
    _close(name, "generator reward with self-comparisons", gen2, gen)
    _close(name, "judge reward with self-comparisons", judge2, judge)
    if not live.any():
        return
    v = int(rng.choice(np.flatnonzero(live)))
    copies = _appended(
        debates,
        np.full(1, debates.turn_V[v]),
        np.repeat(debates.a_V[v], 2),
        np.repeat(debates.op_V[v], 2),
        np.repeat(debates.b_V[v], 2),
    )
    _, _, scores3 = _call(name, fn, copies)
    _close(name, f"score of comparison {v} with two copies of it", scores3[v : v + 1], scores[v : v + 1])
    # the judge's own votes on each of the two answers, against every other opponent, agreeing with v
    u = int(debates.turn_V[v])
    n = int(debates.num_agents_P[debates.debate_U[u]])
    a, b = int(debates.a_V[v]), int(debates.b_V[v])
    others = np.asarray([z for z in range(n) if z not in (a, b, int(debates.author_U[u]))], np.int64)
    if others.size:
        mine = _appended(
            debates,
            np.full(1, u),
            np.concatenate([np.full(others.size, a), others]),
            np.full(2 * others.size, OP_GT),
            np.concatenate([others, np.full(others.size, b)]),
        )
        _, _, scores4 = _call(name, fn, mine)
        what = f"score of comparison {v} with its judge's votes on the same answers"
        _close(name, what, scores4[v : v + 1], scores[v : v + 1])
    big = [int(n) for n in debates.num_agents_P if n >= 4]
    if big:  # judge 0 says 1 > 2, judge 3 says 2 > 1 (cycle 1); then judge 0 says it twice more
        n = big[0]
        rows: list[list[tuple[int, int, int]]] = [[] for _ in range(2 * n)]
        rows[n] = [(1, OP_GT, 2)]
        rows[n + 3] = [(2, OP_GT, 1)]
        pair = _batch([n], [2], rows)
        _, _, alone = _call(name, fn, pair)
        _, _, repeated = _call(
            name, fn, _appended(pair, np.full(1, n), np.ones(2, np.int64), np.full(2, OP_GT), np.full(2, 2))
        )
        _close(name, "score of a contradicted judgment repeated by its judge", repeated[:2], alone[:2])


def _appended(
    d: JudgeDebates,
    turns: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    op: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
) -> JudgeDebates:
    """``d`` with comparisons added after its own: row k of (a, op, b) is written at turn
    ``turns[k % len(turns)]``."""
    turn = np.resize(turns, a.shape[0]).astype(np.int64)
    return d._replace(
        turn_V=np.concatenate([d.turn_V, turn]),
        a_V=np.concatenate([d.a_V, a]).astype(np.int64),
        op_V=np.concatenate([d.op_V, op]).astype(np.int64),
        b_V=np.concatenate([d.b_V, b]).astype(np.int64),
    )


def check_judge_matches_reference(
    fn: JudgeFunction,
    debates: JudgeDebates,
    *,
    options: JudgeOptions = _DEFAULT,
    schedule: str = "parallel",
) -> None:
    """``fn``'s generator and judge rewards equal :func:`reference_judge_step_rewards`'.

    Args:
      fn: the judge-reward function under test.
      debates: the drawn :class:`JudgeDebates`.
      options: the :class:`kernel.JudgeOptions` ``fn`` follows.
      schedule: the schedule ``fn`` reads the turns with.

    Returns:
      None; raises AssertionError naming what differs.

    Examples:
      >>> import functools, kernel
      >>> d = _batch([3], [2], [[], [], [], [(2, OP_GT, 1)], [(2, OP_GT, 0)], [(0, OP_EQ, 1)]])
      >>> check_judge_matches_reference(functools.partial(kernel.judge_step_rewards, schedule="parallel"), d)
    """
    name = "check_judge_matches_reference"
    gen, judge, _ = _call(name, fn, debates)
    want_gen, want_judge = reference_judge_step_rewards(debates, schedule=schedule, options=options)
    _close(name, "generator reward", gen, want_gen)
    _close(name, "judge reward", judge, want_judge)


_CHECK_FUNCTIONS: Mapping[str, Callable[..., None]] = {
    "relabel_invariance": check_judge_relabel_invariance,
    "unanimous_vote": check_judge_unanimous_vote,
    "each_answer_evidence": check_judge_each_answer_evidence,
    "never_scores_itself": check_judge_never_scores_itself,
    "matches_reference": check_judge_matches_reference,
}


class _JudgeConfig:
    """The suite's settings (class attributes of :class:`JudgeInvariants`)."""

    options: JudgeOptions | None = None
    max_debates: int = 3
    max_agents: int = 5
    max_cycles: int = 3
    hypothesis_settings: Mapping[str, Any] = {}

    def _skip_reason(self, check: str) -> str | None:
        if check == "matches_reference" and self.options is None:
            return "no options declared to compare the reference loop with"
        return None

    def _suite(
        self, checks: Sequence[str], fn: JudgeFunction, raise_on_failure: bool, overrides: Mapping[str, Any]
    ) -> SuiteOutcome:
        strategy = st.tuples(
            judge_debates(
                max_debates=self.max_debates, max_agents=self.max_agents, max_cycles=self.max_cycles
            ),
            st.integers(0, 2**16),
        )

        def run(check: str, case: tuple[JudgeDebates, int]) -> None:
            debates, seed = case
            if check == "matches_reference":
                assert self.options is not None
                check_judge_matches_reference(fn, debates, options=self.options)
            else:
                _CHECK_FUNCTIONS[check](fn, debates, seed=seed)

        return _run_suite(
            checks, self._skip_reason, strategy, run, raise_on_failure=raise_on_failure, overrides=overrides
        )


def run_judge_suite(
    fn: JudgeFunction,
    *,
    options: JudgeOptions | None = None,
    checks: Sequence[str] | None = None,
    raise_on_failure: bool = True,
    max_debates: int = 3,
    max_agents: int = 5,
    max_cycles: int = 3,
    max_examples: int | None = None,
    hypothesis_settings: Mapping[str, Any] | None = None,
) -> SuiteOutcome:
    """Runs the judge-reward checks (:data:`JUDGE_CHECKS`) on ``fn`` over drawn debates.

    Args:
      fn: the judge-reward function (schedule bound to ``"parallel"``).
      options: the :class:`kernel.JudgeOptions` ``fn`` follows, for ``matches_reference`` (None skips it).
      checks: names (with or without ``check_judge_``); None runs them all.
      raise_on_failure: raise the first failure, or record it and go on.
      max_debates, max_agents, max_cycles: passed to :func:`judge_debates`.
      max_examples: examples; None keeps the active Hypothesis profile's count.
      hypothesis_settings: further ``hypothesis.settings`` options.

    Returns:
      Check name → ``"passed"``, ``"skipped: <reason>"`` or ``"failed: <message>"``.

    Raises:
      AssertionError: a check failed and ``raise_on_failure``. ValueError: an unknown check.

    Examples:
      >>> import functools, kernel
      >>> ours = functools.partial(kernel.judge_step_rewards, schedule="parallel")
      >>> run_judge_suite(ours, max_examples=5)["matches_reference"]
      'skipped: no options declared to compare the reference loop with'
    """
    config = _JudgeConfig()
    config.options = options
    config.max_debates, config.max_agents, config.max_cycles = max_debates, max_agents, max_cycles
    chosen = list(JUDGE_CHECKS) if checks is None else [c.removeprefix("check_judge_") for c in checks]
    unknown = set(chosen) - set(JUDGE_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; known: {JUDGE_CHECKS}")
    overrides: dict[str, Any] = dict(hypothesis_settings or {})
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    return config._suite(chosen, fn, raise_on_failure, overrides)


class JudgeInvariants(_JudgeConfig):
    """The judge suite as a pytest base class: subclass it as ``Test...`` and set ``judge_fn``.

    Class attributes mirror :func:`run_judge_suite`'s keywords (``options``, ``max_debates``,
    ``max_agents``, ``max_cycles``, ``hypothesis_settings``).

    Examples:
      >>> import functools, kernel
      >>> class TestOurs(JudgeInvariants):
      ...     judge_fn = staticmethod(functools.partial(kernel.judge_step_rewards, schedule="parallel"))
      ...     hypothesis_settings = {"max_examples": 5}
      >>> TestOurs().test_unanimous_vote()
    """

    judge_fn: Any = None

    def _check(self, check: str) -> None:
        _run_class_check(self, "judge_fn", check)

    def test_relabel_invariance(self) -> None:
        """Renaming agents permutes the cells and keeps the scores."""
        self._check("relabel_invariance")

    def test_unanimous_vote(self) -> None:
        """A unanimous vote gives every other judge +1."""
        self._check("unanimous_vote")

    def test_each_answer_evidence(self) -> None:
        """A judgment is scored by the other judges' votes on each of its answers."""
        self._check("each_answer_evidence")

    def test_never_scores_itself(self) -> None:
        """Self-comparisons change nothing; a judge's own copies never change its score."""
        self._check("never_scores_itself")

    def test_matches_reference(self) -> None:
        """Agreement with the per-debate reference loop."""
        self._check("matches_reference")
