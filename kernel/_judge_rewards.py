"""Judge rewards: every step of every agent scored twice, as an answer and as a judge.

In a debate of N agents each agent answers once per round (cycle); its answer at step s holds a solution
and a list of comparisons ``Agent a <op> Agent b`` of the answers it has seen. A comparison is about two
*steps*: the answers of a and b it judged, ``(a, S_a)`` and ``(b, S_b)`` (:func:`judged_steps`). Each
step (debate p, agent x, step s) is a cell n of the flat axis ``_N`` (agent rows debate-major, each row's
steps in order; ``step_offsets_PG1``). Two rewards per cell:

    generator   g_n = W_n / V_n  (0 when V_n = 0)       W: votes the step won, V: votes about it
    judge       j_n = (Σ scores + π·#penalties) / (#scores + #penalties)   (0 when nothing counts)

A vote is a strict comparison (``>``; write ``a < b`` as ``b > a``) of two distinct agents whose judged
steps exist. A comparison ``A <op> B`` of a judge u is scored against a consensus c ∈ {−1, 0, +1} (+1: A
better) of the *other* judges' votes (``options.consensus``):

    answers (ours)   c = sign(r_A − r_B),  r_n = W_n^{−u} / V_n^{−u}   (:func:`answer_consensus_scores`)
    pair             c = sign(Σ of the other judges' votes on the pair {A, B})   (:func:`consensus_scores`)

W_n^{−u}, V_n^{−u}: the votes step n won, and all votes about it, against any opponent, cast by judges
other than u. The comparison scores +1 when its own sign o (+1 for ``>``, 0 for ``=``) equals c, −1
otherwise. ``answers`` scores only when c ≠ 0 (another judge voted on each of A and B, and their rates
differ); ``pair`` when another judge voted on the pair (a tied pair: ``=`` agrees). An empty comparison
list where the judge could compare at least two other agents costs π (``format_penalty``) and counts as
one judgment (:func:`format_penalties`). The two streams are centred per debate and combined,
A = λ_g·(g − ḡ) + λ_j·(j − j̄) (:func:`dual_step_advantages`).

Defaults versus the reference (the debate recipe's V2 at the fork's 2a0b18e2, REFERENCE §12, preset
``JUDGE_PRESETS["reference_v2"]``, which reproduces ``rewards_v2.jsonl`` bit for bit):

* leave-one-out consensus per answer (``consensus="answers"``): a judge is scored against the other
  judges' votes on each of the two answers it compared, against any opponent, never its own vote; the
  reference keys the consensus by the exact pair and counts the judge's own vote, so a lone voter always
  gets +1, two opposed voters both get −1, and ``=`` on an unvoted pair scores +1. A leave-one-out
  consensus on the exact pair (``consensus="pair"``) is nearly empty when judges rarely share a pair:
  with 3 agents in sequential rounds no two judges ever see the same two answers, so it leaves only the
  format penalty, while each answer there is judged by both other agents;
* attribution to the answers a judge saw (``attribution="seen"``): in parallel cycles the previous
  cycle's answers, in sequential rounds each agent's latest earlier answer; unknown ids judge nothing
  (the reference attributes by sequential turn order although a cycle answers in parallel, crediting
  judgments of same-cycle answers nobody saw, and scores ids ≥ N against a missing consensus);
* no penalty in the first round (``format_exempt_steps=1``), where the prompt asks for no comparison (the
  reference exempts the first two *turns*, so agents 2…N−1 of cycle 0 are penalised);
* comparisons naming their author are dropped (a judge never scores itself; the reference counts them
  when they reach it, for the author's own generator reward too);
* credit by field (``credit="fields"``): solution and evaluation tokens carry λ_g·(g − ḡ), comparison
  tokens λ_j·(j − j̄), the rest of the turn both (the reference gives every action token of a step the
  same combined advantage).

Everything but the host-side assembly in :func:`judge_step_rewards` is written once against the array
namespace (:mod:`kernel._namespace`); :mod:`kernel.jax` has the twins.

References:
  Y-Sui/tinker-cookbook ``multi_agent_debate`` V2 (``base_env._compute_rewards``, ``rl/train.py``),
  REFERENCE §12. MAPoRL (Park et al. 2025, arXiv:2502.18439) rewards verifiers; SPC (Chen et al. 2025,
  arXiv:2504.19162) trains critics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._advantages import ADVANTAGE_PRESETS, AdvantageOptions, grouped_advantages
from kernel._checks import (
    as_int_array,
    check_choice,
    check_group_ids,
    check_int,
    check_real,
    check_same_length,
    check_type,
)
from kernel._namespace import NUMPY, Backend
from kernel._types import OP_EQ, OP_GT

IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]

__all__ = [
    "JUDGED_STEP_RULES",
    "JUDGE_ATTRIBUTIONS",
    "JUDGE_CONSENSUS",
    "JUDGE_PRESETS",
    "ConsensusScores",
    "DualAdvantages",
    "GeneratorRewards",
    "JudgeOptions",
    "JudgeStepRewards",
    "answer_consensus_scores",
    "consensus_scores",
    "dual_step_advantages",
    "format_penalties",
    "generator_rewards",
    "judge_rewards",
    "judge_step_rewards",
    "judged_steps",
]

JudgedStepRule: TypeAlias = Literal["parallel", "sequential", "reference_v2"]
"""How :func:`judged_steps` maps (turn, named agent) to the step judged."""
JUDGED_STEP_RULES: Final[tuple[JudgedStepRule, ...]] = get_args(JudgedStepRule)

Attribution: TypeAlias = Literal["seen", "reference_v2"]
"""The steps a comparison is about: the answers the judge saw, or the reference's sequential arithmetic."""
JUDGE_ATTRIBUTIONS: Final[tuple[Attribution, ...]] = get_args(Attribution)

Schedule: TypeAlias = Literal["parallel", "sequential"]
Consensus: TypeAlias = Literal["answers", "pair", "pair_with_own_vote"]
"""What a comparison is scored against (:class:`JudgeOptions`)."""
JUDGE_CONSENSUS: Final[tuple[Consensus, ...]] = get_args(Consensus)
NoConsensus: TypeAlias = Literal["skip", "tie"]
SelfComparisons: TypeAlias = Literal["drop", "count"]
JudgeCredit: TypeAlias = Literal["fields", "step"]


# --- options -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class JudgeOptions:
    """Every choice of the judge rewards that our default and the reference disagree on.

    Attributes:
      attribution: ``"seen"`` (the answers the judge saw) or ``"reference_v2"`` (sequential turn
        arithmetic for every id, :func:`judged_steps`).
      consensus: ``"answers"`` (the other judges' votes on each of the two answers, against any
        opponent: c = sign(r_A − r_B), :func:`answer_consensus_scores`), ``"pair"`` (the other judges'
        votes on the exact pair) or ``"pair_with_own_vote"`` (the exact pair, the judge's own vote
        included: the reference).
      no_consensus: a comparison without a consensus (``answers``: c = 0; ``pair``: no counted vote):
        ``"skip"`` (not scored) or ``"tie"`` (scored against c = 0: ``=`` +1, ``>`` −1).
      self_comparisons: comparisons naming their author: ``"drop"`` or ``"count"``.
      format_penalty: π, the judge reward of an empty comparison list (None: no penalty).
      format_exempt_turns: turns with index below this are never penalised (reference 2).
      format_exempt_steps: steps below this are never penalised (ours 1: the first round).
      lambda_gen: λ_g, the weight of the generator advantage.
      lambda_judge: λ_j, the weight of the judge advantage.
      credit: ``"fields"`` (each advantage to its own tokens) or ``"step"`` (every action token of a
        step gets the combined advantage).

    Raises:
      ValueError / TypeError: a value outside its set or of the wrong type, naming the field.

    Examples:
      >>> JUDGE_PRESETS["reference_v2"].consensus, JudgeOptions().consensus
      ('pair_with_own_vote', 'answers')
      >>> JudgeOptions(consensus="mine")
      Traceback (most recent call last):
      ...
      ValueError: consensus must be one of ('answers', 'pair', 'pair_with_own_vote'), got 'mine'
    """

    attribution: Attribution = "seen"
    consensus: Consensus = "answers"
    no_consensus: NoConsensus = "skip"
    self_comparisons: SelfComparisons = "drop"
    format_penalty: float | None = -0.5
    format_exempt_turns: int = 0
    format_exempt_steps: int = 1
    lambda_gen: float = 1.0
    lambda_judge: float = 1.0
    credit: JudgeCredit = "fields"

    def __post_init__(self) -> None:
        check_choice(self.attribution, "attribution", JUDGE_ATTRIBUTIONS)
        check_choice(self.consensus, "consensus", JUDGE_CONSENSUS)
        check_choice(self.no_consensus, "no_consensus", get_args(NoConsensus))
        check_choice(self.self_comparisons, "self_comparisons", get_args(SelfComparisons))
        if self.format_penalty is not None:
            check_real(self.format_penalty, "format_penalty", finite=True)
        check_int(self.format_exempt_turns, "format_exempt_turns", low=0)
        check_int(self.format_exempt_steps, "format_exempt_steps", low=0)
        check_real(self.lambda_gen, "lambda_gen", finite=True)
        check_real(self.lambda_judge, "lambda_judge", finite=True)
        check_choice(self.credit, "credit", get_args(JudgeCredit))


JUDGE_PRESETS: Final[Mapping[str, JudgeOptions]] = MappingProxyType(
    {
        "default": JudgeOptions(),
        "reference_v2": JudgeOptions(
            attribution="reference_v2",
            consensus="pair_with_own_vote",
            no_consensus="tie",
            self_comparisons="count",
            format_exempt_turns=2,
            format_exempt_steps=0,
            credit="step",
        ),
    }
)
"""``"default"`` (ours) and ``"reference_v2"`` (the fork at 2a0b18e2, ``rewards_v2.jsonl`` bit for bit)."""


# --- result types ------------------------------------------------------------------------------------


class GeneratorRewards(NamedTuple):
    """Result of :func:`generator_rewards`: per cell [N] the reward, the votes won and the votes cast."""

    rewards: Any
    wins_N: Any
    votes_N: Any


class ConsensusScores(NamedTuple):
    """Result of :func:`consensus_scores`, per comparison [V].

    Attributes:
      scores: +1 (agrees with the consensus), −1 (disagrees), 0 (not scored).
      scored_V: bool, the comparisons scored.
      consensus_V: the consensus the comparison was scored against (−1, 0 or +1; 0 where none).
    """

    scores: Any
    scored_V: Any
    consensus_V: Any


class DualAdvantages(NamedTuple):
    """Result of :func:`dual_step_advantages`, per cell [N]: each stream centred, and their combination."""

    generator_N: Any
    judge_N: Any
    advantages: Any


class JudgeStepRewards(NamedTuple):
    """Result of :func:`judge_step_rewards`; cells ``[N]`` (debate, agent, step), comparisons ``[V]``,
    turns ``[U]``.

    Attributes:
      generator_N: float64 [N], g_n.
      judge_N: float64 [N], j_n.
      step_offsets_PG1: int64 [R + 1], agent row r's steps are cells ``[offsets[r], offsets[r + 1])``.
      wins_N: int64 [N], votes won.
      votes_N: int64 [N], votes about the step.
      judgments_N: int64 [N], scored comparisons plus penalties of the step as a judge.
      step_a_V: int64 [V], the step of a judged (−1: none).
      step_b_V: int64 [V], the step of b judged (−1: none).
      vote_V: bool [V], comparisons counted as votes.
      scores: float64 [V], +1 / −1 for a scored comparison, 0 otherwise.
      scored_V: bool [V].
      penalised_U: bool [U], turns given the format penalty.
      judgeable_U: int64 [U], other agents whose answers the turn could compare.
    """

    generator_N: npt.NDArray[np.float64]
    judge_N: npt.NDArray[np.float64]
    step_offsets_PG1: npt.NDArray[np.int64]
    wins_N: npt.NDArray[np.int64]
    votes_N: npt.NDArray[np.int64]
    judgments_N: npt.NDArray[np.int64]
    step_a_V: npt.NDArray[np.int64]
    step_b_V: npt.NDArray[np.int64]
    vote_V: npt.NDArray[np.bool_]
    scores: npt.NDArray[np.float64]
    scored_V: npt.NDArray[np.bool_]
    penalised_U: npt.NDArray[np.bool_]
    judgeable_U: npt.NDArray[np.int64]


# --- the array functions, written once ---------------------------------------------------------------


def _judged_steps(bk: Backend, index: Any, agent: Any, num_agents: Any, rule: str) -> Any:
    xp = bk.xp
    t = bk.as_int(index, "index")
    x = bk.as_int(agent, "agent")
    n = bk.as_int(num_agents, "num_agents")
    safe = xp.maximum(n, 1)
    c, k = t // safe, t % safe
    known = (x >= 0) & (x < n)
    earlier = xp.where(x < k, c, c - 1)  # the step of x's latest turn before turn t, round-robin
    if rule == "parallel":
        step = xp.where(known, c - 1, -1)
    elif rule == "sequential":
        step = xp.where(known, earlier, -1)
    else:  # the fork: any id, cut only by x ≥ t
        step = xp.where(x >= t, -1, earlier)
    return xp.maximum(step, -1)


def _generator_rewards(
    bk: Backend, winner_V: Any, loser_V: Any, num_cells: int, where: Any
) -> GeneratorRewards:
    xp = bk.xp
    w = bk.as_int(winner_V, "winner_V")
    lo = bk.as_int(loser_V, "loser_V")
    keep = xp.ones(w.shape, bool) if where is None else xp.asarray(where, dtype=bool)
    one = keep.astype(bk.count_dtype)
    drop = xp.asarray(num_cells, dtype=w.dtype)
    wins = bk.segment_sum(one, xp.where(keep, w, drop), num_cells)
    votes = wins + bk.segment_sum(one, xp.where(keep, lo, drop), num_cells)
    ratio = wins.astype(float) / xp.maximum(votes, 1).astype(float)
    return GeneratorRewards(xp.where(votes > 0, ratio, 0.0), wins, votes)


def _gather(bk: Backend, values: Any, ids: Any) -> Any:
    """``values[ids]`` where ids ≥ len(values) (padding) read 0."""
    xp = bk.xp
    padded = xp.concatenate([values, xp.zeros((1,), values.dtype)])
    return padded[xp.clip(ids, 0, values.shape[0])]


def _consensus_scores(
    bk: Backend,
    orient_V: Any,
    pair_V: Any,
    num_pairs: int,
    vote_V: Any,
    own_V: Any,
    num_own: int,
    where: Any,
    no_consensus: str,
) -> ConsensusScores:
    xp = bk.xp
    orient = bk.as_int(orient_V, "orient_V")
    pair = bk.as_int(pair_V, "pair_V")
    votes = xp.asarray(vote_V, dtype=bool)
    counted = votes.astype(bk.count_dtype)
    signed = xp.where(votes, orient, 0).astype(bk.count_dtype)
    total = _gather(bk, bk.segment_sum(signed, pair, num_pairs), pair)
    count = _gather(bk, bk.segment_sum(counted, pair, num_pairs), pair)
    if own_V is not None:  # leave the judge's own votes on the pair out
        own = bk.as_int(own_V, "own_V")
        total = total - _gather(bk, bk.segment_sum(signed, own, num_own), own)
        count = count - _gather(bk, bk.segment_sum(counted, own, num_own), own)
    consensus = xp.sign(total)
    return _scores_against(bk, orient, consensus, where, skip=count > 0 if no_consensus == "skip" else None)


def _answer_consensus_scores(
    bk: Backend,
    orient_V: Any,
    answer_a_V: Any,
    answer_b_V: Any,
    num_answers: int,
    vote_V: Any,
    own_a_V: Any,
    own_b_V: Any,
    num_own: int,
    where: Any,
    no_consensus: str,
) -> ConsensusScores:
    xp = bk.xp
    orient = bk.as_int(orient_V, "orient_V")
    ans_a, ans_b = bk.as_int(answer_a_V, "answer_a_V"), bk.as_int(answer_b_V, "answer_b_V")
    votes = xp.asarray(vote_V, dtype=bool)
    cast = votes.astype(bk.count_dtype)
    a_won = (votes & (orient > 0)).astype(bk.count_dtype)
    b_won = (votes & (orient < 0)).astype(bk.count_dtype)

    def tally(ids_a: Any, ids_b: Any, n: int) -> tuple[Any, Any, Any, Any]:
        """Per comparison: (W, V) of its answer a, then of its answer b, summed over the ids."""
        wins = bk.segment_sum(a_won, ids_a, n) + bk.segment_sum(b_won, ids_b, n)
        seen = bk.segment_sum(cast, ids_a, n) + bk.segment_sum(cast, ids_b, n)
        return (
            _gather(bk, wins, ids_a),
            _gather(bk, seen, ids_a),
            _gather(bk, wins, ids_b),
            _gather(bk, seen, ids_b),
        )

    w_a, v_a, w_b, v_b = tally(ans_a, ans_b, num_answers)
    if own_a_V is not None:  # leave the judge's own votes on each answer out
        own_a, own_b = bk.as_int(own_a_V, "own_a_V"), bk.as_int(own_b_V, "own_b_V")
        mine = tally(own_a, own_b, num_own)
        w_a, v_a, w_b, v_b = w_a - mine[0], v_a - mine[1], w_b - mine[2], v_b - mine[3]
    # sign(W_a/V_a − W_b/V_b) in integers: exact, the same on both backends
    consensus = xp.where((v_a > 0) & (v_b > 0), xp.sign(w_a * v_b - w_b * v_a), 0)
    return _scores_against(
        bk, orient, consensus, where, skip=consensus != 0 if no_consensus == "skip" else None
    )


def _scores_against(bk: Backend, orient: Any, consensus: Any, where: Any, *, skip: Any) -> ConsensusScores:
    """Each comparison's score against ``consensus``: +1 agreeing, −1 not, 0 where it is not scored (outside
    ``where``, or outside ``skip`` when given: the comparisons with a consensus to be scored against)."""
    xp = bk.xp
    scored = xp.ones(orient.shape, bool) if where is None else xp.asarray(where, dtype=bool)
    if skip is not None:
        scored = scored & skip
    score = xp.where(orient == consensus, 1.0, -1.0)
    return ConsensusScores(xp.where(scored, score, 0.0), scored, xp.where(scored, consensus, 0))


def _judge_rewards(
    bk: Backend,
    cell_V: Any,
    scores: Any,
    num_cells: int,
    where: Any,
    penalty_cell_U: Any,
    format_penalty: float,
) -> tuple[Any, Any]:
    xp = bk.xp
    cell = bk.as_int(cell_V, "cell_V")
    s = bk.as_float(scores, "scores")
    keep = xp.ones(cell.shape, bool) if where is None else xp.asarray(where, dtype=bool)
    ids = xp.where(keep, cell, num_cells)
    values = xp.where(keep, s, 0.0)
    if penalty_cell_U is not None:  # the penalties after every score, as the reference adds them
        pen = bk.as_int(penalty_cell_U, "penalty_cell_U")
        ids = xp.concatenate([ids, pen.astype(ids.dtype)])
        values = xp.concatenate([values, xp.full(pen.shape, format_penalty, values.dtype)])
    sums = bk.segment_sum(values, ids, num_cells)
    counts = bk.segment_sum(xp.ones(ids.shape, bk.count_dtype), ids, num_cells)
    return xp.where(counts > 0, sums / xp.maximum(counts, 1).astype(sums.dtype), 0.0), counts


def _format_penalties(
    bk: Backend,
    comparisons_U: Any,
    judgeable_U: Any,
    index_U: Any,
    step_U: Any,
    exempt_turns: int,
    exempt_steps: int,
    where: Any,
) -> Any:
    xp = bk.xp
    listed = bk.as_int(comparisons_U, "comparisons_U")
    others = bk.as_int(judgeable_U, "judgeable_U")
    index = bk.as_int(index_U, "index_U")
    step = bk.as_int(step_U, "step_U")
    due = (listed == 0) & (others >= 2) & (index >= exempt_turns) & (step >= exempt_steps)
    return due if where is None else due & xp.asarray(where, dtype=bool)


Centre = Callable[[Any, Any, int, Any], Any]


def _dual(
    bk: Backend,
    centre: Centre,
    generator_N: Any,
    judge_N: Any,
    group_ids_N: Any,
    num_groups: int,
    lambda_gen: float,
    lambda_judge: float,
    where: Any,
) -> DualAdvantages:
    lg = check_real(lambda_gen, "lambda_gen", finite=True)
    lj = check_real(lambda_judge, "lambda_judge", finite=True)
    g = centre(bk.as_float(generator_N, "generator_N"), group_ids_N, num_groups, where)
    j = centre(bk.as_float(judge_N, "judge_N"), group_ids_N, num_groups, where)
    return DualAdvantages(g, j, lg * g + lj * j)


# --- numpy public functions --------------------------------------------------------------------------


def judged_steps(
    index: npt.ArrayLike,
    agent: npt.ArrayLike,
    num_agents: npt.ArrayLike,
    *,
    rule: JudgedStepRule = "parallel",
) -> npt.NDArray[np.int64]:
    """The step of ``agent``'s answer that a comparison written at turn ``index`` judges (−1: none).

    Turn t of an N-agent debate is in cycle c = t div N at position k = t mod N. For the named agent x:

        parallel      S = c − 1 for 0 ≤ x < N       (a cycle answers at once from the earlier cycles)
        sequential    S = c if x < k else c − 1, for 0 ≤ x < N   (each agent's latest earlier answer)
        reference_v2  S = −1 if x ≥ t, else c if x < k, else c − 1   (any id: the fork's arithmetic)

    and S < 0 means −1. Elementwise with broadcasting; on JAX too (:func:`kernel.jax.judged_steps`).

    Args:
      index: int [...], t ≥ 0, the turn within its debate.
      agent: int [...], x, the agent named.
      num_agents: int [...], N ≥ 1.
      rule: one of ``JUDGED_STEP_RULES``.

    Returns:
      int64 [...], S.

    Raises:
      ValueError: an unknown ``rule``. TypeError: non-integer arrays.

    References:
      REFERENCE §12, "Step attribution".

    Examples:
      Turn 4 of a 3-agent debate (cycle 1, position 1) names agents 0, 2 and 3:

      >>> [judged_steps(4, x, 3, rule=r).tolist() for r in JUDGED_STEP_RULES for x in (0, 2, 3)]
      [0, 0, -1, 1, 0, -1, 1, 0, 0]
    """
    check_choice(rule, "rule", JUDGED_STEP_RULES)
    return np.asarray(_judged_steps(NUMPY, index, agent, num_agents, rule), dtype=np.int64)


def generator_rewards(
    winner_V: npt.ArrayLike, loser_V: npt.ArrayLike, num_cells: int, *, where: npt.ArrayLike | None = None
) -> GeneratorRewards:
    """Each step's share of the votes it won: g_n = W_n / V_n, 0 when no vote is about it.

    With W_n = #{v : winner_v = n} and V_n = W_n + #{v : loser_v = n} over the votes with ``where``.
    A cell id ≥ ``num_cells`` (a step beyond its agent's trajectory) drops out, the other side of the
    vote still counts. Ties are not votes. An unvoted step gets 0, as the reference's (the same value as a
    step that lost every vote; the counts tell them apart).

    Args:
      winner_V: int [V], the cell of the step voted better, in ``[0, num_cells]``.
      loser_V: int [V], the cell of the step voted worse.
      num_cells: N, the number of cells (static).
      where: bool [V], the rows that are votes (default all).

    Returns:
      :class:`GeneratorRewards`: float64 ``rewards`` [N], int64 ``wins_N`` and ``votes_N``.

    Raises:
      ValueError: ids outside ``[0, num_cells]``, lengths that differ. TypeError: non-integer ids.

    References:
      REFERENCE §12, "Generator reward".

    Examples:
      >>> r = generator_rewards([0, 0, 1], [1, 2, 2], 4)
      >>> r.rewards.tolist(), r.votes_N.tolist()
      ([1.0, 0.5, 0.0, 0.0], [2, 2, 2, 0])
    """
    cells = check_int(num_cells, "num_cells", low=0)
    w, lo = as_int_array(winner_V, "winner_V"), as_int_array(loser_V, "loser_V")
    check_same_length(winner_V=w, loser_V=lo)
    check_group_ids(w, cells, "winner_V")
    check_group_ids(lo, cells, "loser_V")
    keep = _where(where, w.shape[0])
    r = _generator_rewards(NUMPY, w, lo, cells, keep)
    return GeneratorRewards(np.asarray(r.rewards, np.float64), r.wins_N, r.votes_N)


def consensus_scores(
    orient_V: npt.ArrayLike,
    pair_V: npt.ArrayLike,
    num_pairs: int,
    *,
    vote_V: npt.ArrayLike,
    own_V: npt.ArrayLike | None = None,
    num_own: int = 0,
    where: npt.ArrayLike | None = None,
    no_consensus: NoConsensus = "skip",
) -> ConsensusScores:
    """Each comparison scored against the consensus of the other votes on its exact pair of steps.

    For comparison v on pair q_v (an unordered pair of steps) saying o_v ∈ {+1, −1, 0} (the first step of
    the pair better, worse, tied), over the votes w (``vote_V``) on the same pair, without those of v's
    own group (``own_V``: comparisons sharing a (pair, judge); leave-one-out) when given:

        c_v = sign(Σ_w o_w),   score_v = +1 if o_v = c_v else −1

    A pair with no counted vote has no consensus: not scored (``no_consensus="skip"``) or read as a
    tie, c = 0 (``"tie"``, the reference, where the judge's own vote is in the consensus).

    Args:
      orient_V: int [V], o_v.
      pair_V: int [V], the pair, in ``[0, num_pairs]`` (``num_pairs``: padding).
      num_pairs: number of pairs (static).
      vote_V: bool [V], the comparisons that count in the consensus (strict votes).
      own_V: int [V] or None, the (pair, judge) group of each comparison in ``[0, num_own]``; None: the
        judge's own votes count (the reference).
      num_own: number of (pair, judge) groups.
      where: bool [V], the comparisons to score (default all).
      no_consensus: ``"skip"`` or ``"tie"``.

    Returns:
      :class:`ConsensusScores` (float64 scores, bool scored, int64 consensus).

    Raises:
      ValueError: ids outside their range, lengths that differ, an unknown ``no_consensus``.

    References:
      REFERENCE §12, "Judge reward".

    Examples:
      Judges 0 and 1 say the pair's first step is better, judge 2 says worse:

      >>> o, q, own = [1, 1, -1], [0, 0, 0], [0, 1, 2]
      >>> consensus_scores(o, q, 1, vote_V=[True] * 3, own_V=own, num_own=3).scores.tolist()
      [-1.0, -1.0, -1.0]
      >>> consensus_scores(o, q, 1, vote_V=[True] * 3, no_consensus="tie").scores.tolist()
      [1.0, 1.0, -1.0]
    """
    check_choice(no_consensus, "no_consensus", get_args(NoConsensus))
    pairs = check_int(num_pairs, "num_pairs", low=0)
    o, q = as_int_array(orient_V, "orient_V"), as_int_array(pair_V, "pair_V")
    votes = np.asarray(vote_V, dtype=bool).reshape(-1)
    num = check_same_length(orient_V=o, pair_V=q, vote_V=votes)
    check_group_ids(q, pairs, "pair_V")
    own = None
    if own_V is not None:
        owns = check_int(num_own, "num_own", low=0)
        own = as_int_array(own_V, "own_V")
        check_same_length(orient_V=o, own_V=own)
        check_group_ids(own, owns, "own_V")
    r = _consensus_scores(NUMPY, o, q, pairs, votes, own, num_own, _where(where, num), no_consensus)
    return ConsensusScores(
        np.asarray(r.scores, np.float64), np.asarray(r.scored_V, bool), np.asarray(r.consensus_V, np.int64)
    )


def answer_consensus_scores(
    orient_V: npt.ArrayLike,
    answer_a_V: npt.ArrayLike,
    answer_b_V: npt.ArrayLike,
    num_answers: int,
    *,
    vote_V: npt.ArrayLike,
    own_a_V: npt.ArrayLike | None = None,
    own_b_V: npt.ArrayLike | None = None,
    num_own: int = 0,
    where: npt.ArrayLike | None = None,
    no_consensus: NoConsensus = "skip",
) -> ConsensusScores:
    """Each comparison ``A <op> B`` scored against the other judges' votes on A and on B separately.

    For comparison v saying o_v ∈ {+1, −1, 0} (A better, worse, tied) about answers A = a_v and B = b_v,
    over the votes w (``vote_V``, o_w = ±1) without those of v's own groups (``own_a_V`` / ``own_b_V``:
    the (answer, judge) of each side; leave-one-out) when given:

        W_n = #{w : n won w},   V_n = #{w : n ∈ {a_w, b_w}}     (against any opponent)
        c_v = sign(W_A/V_A − W_B/V_B) if V_A > 0 and V_B > 0, else 0
        score_v = +1 if o_v = c_v else −1

    (the sign is taken as sign(W_A·V_B − W_B·V_A), exact). c_v = 0 (nobody else voted on A, or on B, or
    their rates tie) is no consensus: not scored (``no_consensus="skip"``) or scored as a tie
    (``"tie"``: ``=`` +1, a strict comparison −1). So a judgment counts when the rest of the debate's
    votes, on whatever pairs they were cast, rank its two answers the same way (+1) or the other way (−1).

    Args:
      orient_V: int [V], o_v (+1: a_v better, −1: b_v better, 0: tied).
      answer_a_V, answer_b_V: int [V], the answers (steps) compared, in ``[0, num_answers]``
        (``num_answers``: padding).
      num_answers: number of answers (static).
      vote_V: bool [V], the comparisons that are votes (strict, o = ±1).
      own_a_V, own_b_V: int [V] or None, the (answer, judge) group of each side in ``[0, num_own]``; None:
        the judge's own votes count.
      num_own: number of (answer, judge) groups.
      where: bool [V], the comparisons to score (default all).
      no_consensus: ``"skip"`` or ``"tie"``.

    Returns:
      :class:`ConsensusScores` (float64 scores, bool scored, int64 consensus c_v).

    Raises:
      ValueError: ids outside their range, lengths that differ, only one of ``own_a_V`` / ``own_b_V``,
        an unknown ``no_consensus``.

    References:
      ours; the reference's consensus is :func:`consensus_scores` on the pair with the judge's own vote.

    Examples:
      Three sequential agents: judge 2 says answer 0 > answer 1, judge 0 then says 1 > 2, judge 1 says
      0 > 2. No two judges compared the same pair, yet each answer was judged by two of them:

      >>> o, a, b = [1, 1, 1], [0, 1, 0], [1, 2, 2]  # answers 0, 1, 2; judges 2, 0, 1
      >>> own_a, own_b = [0, 1, 2], [3, 4, 5]  # (answer, judge) groups, each used once
      >>> r = answer_consensus_scores(o, a, b, 3, vote_V=[True] * 3, own_a_V=own_a, own_b_V=own_b,
      ...                             num_own=6)
      >>> r.consensus_V.tolist(), r.scores.tolist()  # judge 1 is scored by judges 2 and 0
      ([0, 0, 1], [0.0, 0.0, 1.0])
    """
    check_choice(no_consensus, "no_consensus", get_args(NoConsensus))
    answers = check_int(num_answers, "num_answers", low=0)
    o = as_int_array(orient_V, "orient_V")
    ans_a, ans_b = as_int_array(answer_a_V, "answer_a_V"), as_int_array(answer_b_V, "answer_b_V")
    votes = np.asarray(vote_V, dtype=bool).reshape(-1)
    num = check_same_length(orient_V=o, answer_a_V=ans_a, answer_b_V=ans_b, vote_V=votes)
    check_group_ids(ans_a, answers, "answer_a_V")
    check_group_ids(ans_b, answers, "answer_b_V")
    if (own_a_V is None) != (own_b_V is None):
        raise ValueError("own_a_V and own_b_V must be given together (or neither)")
    own_a = own_b = None
    if own_a_V is not None and own_b_V is not None:
        owns = check_int(num_own, "num_own", low=0)
        own_a, own_b = as_int_array(own_a_V, "own_a_V"), as_int_array(own_b_V, "own_b_V")
        check_same_length(orient_V=o, own_a_V=own_a, own_b_V=own_b)
        check_group_ids(own_a, owns, "own_a_V")
        check_group_ids(own_b, owns, "own_b_V")
    r = _answer_consensus_scores(
        NUMPY, o, ans_a, ans_b, answers, votes, own_a, own_b, num_own, _where(where, num), no_consensus
    )
    return ConsensusScores(
        np.asarray(r.scores, np.float64), np.asarray(r.scored_V, bool), np.asarray(r.consensus_V, np.int64)
    )


def judge_rewards(
    cell_V: npt.ArrayLike,
    scores: npt.ArrayLike,
    num_cells: int,
    *,
    where: npt.ArrayLike | None = None,
    penalty_cell_U: npt.ArrayLike | None = None,
    format_penalty: float = -0.5,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Each step's mean judgment: j_n = (Σ scores + π·#penalties) / (#scores + #penalties), 0 when none.

    Args:
      cell_V: int [V], the judge's cell of each scored comparison, in ``[0, num_cells]``.
      scores: float [V], its score (:func:`consensus_scores`).
      num_cells: N (static).
      where: bool [V], the scored comparisons (default all).
      penalty_cell_U: int [U] or None, per turn the cell penalised, or ``num_cells`` for none
        (:func:`format_penalties`).
      format_penalty: π.

    Returns:
      ``(judge [N] float64, counts [N] int64)``, the judgments counted per cell.

    Raises:
      ValueError: cells outside ``[0, num_cells]``, lengths that differ.

    References:
      REFERENCE §12, "Judge reward" (the scores are added turn by turn, then the penalties).

    Examples:
      >>> j, n = judge_rewards([0, 0, 1], [1.0, -1.0, 1.0], 3, penalty_cell_U=[2, 3])
      >>> j.tolist(), n.tolist()
      ([0.0, 1.0, -0.5], [2, 1, 1])
    """
    cells = check_int(num_cells, "num_cells", low=0)
    penalty = check_real(format_penalty, "format_penalty", finite=True)
    cell = as_int_array(cell_V, "cell_V")
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    check_same_length(cell_V=cell, scores=s)
    check_group_ids(cell, cells, "cell_V")
    pen = None
    if penalty_cell_U is not None:
        pen = as_int_array(penalty_cell_U, "penalty_cell_U")
        check_group_ids(pen, cells, "penalty_cell_U")
    j, n = _judge_rewards(NUMPY, cell, s, cells, _where(where, cell.shape[0]), pen, penalty)
    return np.asarray(j, np.float64), np.asarray(n, np.int64)


def format_penalties(
    comparisons_U: npt.ArrayLike,
    judgeable_U: npt.ArrayLike,
    index_U: npt.ArrayLike,
    step_U: npt.ArrayLike,
    *,
    exempt_turns: int = 0,
    exempt_steps: int = 1,
    where: npt.ArrayLike | None = None,
) -> npt.NDArray[np.bool_]:
    """The turns that owed comparisons and wrote none: penalised iff

        #comparisons = 0  ∧  #judgeable others ≥ 2  ∧  t ≥ exempt_turns  ∧  s ≥ exempt_steps  ∧  where

    Only an empty list is penalised (a list of unreadable comparisons is not, as in the reference; in
    :func:`judge_step_rewards` self-comparisons that are dropped are not in the list, as the parsers
    drop them).
    Ours exempts the first round (``exempt_steps=1``, its prompt asks for no comparison); the reference
    exempts the first two turns (``exempt_turns=2, exempt_steps=0``).

    Args:
      comparisons_U: int [U], comparisons the turn listed.
      judgeable_U: int [U], other agents whose answers it could compare.
      index_U: int [U], t, the turn within its debate.
      step_U: int [U], s, the author's step.
      exempt_turns, exempt_steps: the exemptions.
      where: bool [U], turns that can be penalised (default all).

    Returns:
      bool [U].

    Raises:
      ValueError: lengths that differ, a negative exemption.

    References:
      REFERENCE §12, "Format penalty".

    Examples:
      >>> format_penalties([0, 0, 1, 0], [2, 2, 2, 1], [2, 5, 6, 7], [0, 1, 2, 2]).tolist()
      [False, True, False, False]
    """
    turns = check_int(exempt_turns, "exempt_turns", low=0)
    steps = check_int(exempt_steps, "exempt_steps", low=0)
    arrays = {
        "comparisons_U": as_int_array(comparisons_U, "comparisons_U"),
        "judgeable_U": as_int_array(judgeable_U, "judgeable_U"),
        "index_U": as_int_array(index_U, "index_U"),
        "step_U": as_int_array(step_U, "step_U"),
    }
    num = check_same_length(**arrays)
    listed, others, index, step = arrays.values()
    out = _format_penalties(NUMPY, listed, others, index, step, turns, steps, _where(where, num))
    return np.asarray(out, dtype=bool)


def dual_step_advantages(
    generator_N: npt.ArrayLike,
    judge_N: npt.ArrayLike,
    group_ids_N: npt.ArrayLike,
    num_groups: int,
    *,
    lambda_gen: float = 1.0,
    lambda_judge: float = 1.0,
    where: npt.ArrayLike | None = None,
    estimator: AdvantageOptions = ADVANTAGE_PRESETS["default"],
) -> DualAdvantages:
    """Both reward streams centred per group of steps, then combined:

        A_n = λ_g·(g_n − ḡ_p) + λ_j·(j_n − j̄_p),   ḡ_p = Σ_{n∈p} g_n / |p|

    (each stream by :func:`grouped_advantages` with ``estimator``; the default centres only, and its
    float64 means over the steps of every trajectory of the group, in order, are the reference's exactly).

    Args:
      generator_N: float [N], g.
      judge_N: float [N], j.
      group_ids_N: int [N], the group (debate) of each step, in ``[0, num_groups]``.
      num_groups: P (static).
      lambda_gen, lambda_judge: λ_g, λ_j.
      where: bool [N], steps in the statistics (the others get 0).
      estimator: the :class:`AdvantageOptions` each stream is centred with.

    Returns:
      :class:`DualAdvantages` (float [N] each).

    Raises:
      ValueError / TypeError: as :func:`grouped_advantages`; a non-finite λ.

    References:
      REFERENCE §12, "Credit" (the fork's ``normalize_rewards_separately``).

    Examples:
      >>> d = dual_step_advantages([1.0, 0.0, 0.5, 0.5], [0.0, -0.5, 1.0, 1.0], [0, 0, 0, 0], 1,
      ...                          lambda_judge=0.5)
      >>> d.generator_N.tolist(), d.judge_N.tolist(), d.advantages.tolist()
      ([0.5, -0.5, 0.0, 0.0], [-0.375, -0.875, 0.625, 0.625], [0.3125, -0.9375, 0.3125, 0.3125])
    """
    check_type(estimator, AdvantageOptions, "estimator")
    options = {f.name: getattr(estimator, f.name) for f in dataclasses.fields(estimator)}

    def centre(r: Any, ids: Any, n: int, keep: Any) -> Any:
        return grouped_advantages(r, ids, n, where=keep, **options).advantages

    return _dual(
        NUMPY, centre, generator_N, judge_N, group_ids_N, num_groups, lambda_gen, lambda_judge, where
    )


def _where(where: npt.ArrayLike | None, num: int) -> npt.NDArray[np.bool_] | None:
    if where is None:
        return None
    keep = np.asarray(where)
    if keep.dtype != np.bool_:
        raise TypeError(f"where must be a bool array, got dtype {keep.dtype}")
    if keep.shape != (num,):
        raise ValueError(f"where must have shape ({num},), got {keep.shape}")
    return keep


# --- the whole computation for a batch of debates (host side) ----------------------------------------


def judge_step_rewards(
    debate_U: npt.ArrayLike,
    index_U: npt.ArrayLike,
    author_U: npt.ArrayLike,
    turn_V: npt.ArrayLike,
    a_V: npt.ArrayLike,
    op_V: npt.ArrayLike,
    b_V: npt.ArrayLike,
    num_agents_P: npt.ArrayLike,
    num_steps_PG: npt.ArrayLike,
    *,
    schedule: Schedule = "parallel",
    options: JudgeOptions = JudgeOptions(),
) -> JudgeStepRewards:
    """Generator and judge rewards of every step of every agent of P debates (see the module docstring).

    Turn u of debate p is its t-th turn (``index_U``), written by agent ``author_U``, as step
    s = t div N_p of its author; its comparisons are the rows v with ``turn_V = u``. Steps judged come
    from :func:`judged_steps` (``options.attribution="seen"``: by ``schedule``; ``"reference_v2"``: the
    fork's arithmetic). Per comparison v by judge u at turn t (N = N_p):

      vote      op = ``>``, 0 ≤ a, b < N, a ≠ b, S_a ≥ 0, S_b ≥ 0 (and a, b ≠ u when self-comparisons drop)
      scored    a ≠ b, S_a ≥ 0, S_b ≥ 0, op ∈ {>, =}, the judge's cell exists, a consensus (or ties read)

    then :func:`generator_rewards`, the consensus (``options.consensus``: :func:`answer_consensus_scores`
    on the answers, leave-one-out by (answer, judge); :func:`consensus_scores` on the pairs of steps,
    leave-one-out by (pair, judge) or not), :func:`format_penalties`
    (judgeable others: agents x ≠ u, 0 ≤ x < N, with S_x ≥ 0) and :func:`judge_rewards`. A step s ≥ the
    agent's ``num_steps_PG`` has no cell: votes about it are lost and a judge there is not scored. An
    author outside ``[0, N)`` has no cell either, but its votes count.

    Args:
      debate_U: int [U], each turn's debate in ``[0, P]`` (P: padding).
      index_U: int [U], t ≥ 0.
      author_U: int [U], the writer (any int).
      turn_V: int [V], each comparison's turn in ``[0, U]`` (U: padding).
      a_V, op_V, b_V: int [V], ``Agent a <op> Agent b`` with op codes ``OP_GT`` / ``OP_EQ`` / ``OP_OTHER``
        (write ``a < b`` as ``b > a``).
      num_agents_P: int [P], N_p ≥ 1.
      num_steps_PG: int [R], the steps (transitions) of each agent row, R = Σ N_p.
      schedule: ``"parallel"`` (cycles answered at once) or ``"sequential"`` (round-robin turns).
      options: :class:`JudgeOptions`.

    Returns:
      :class:`JudgeStepRewards`.

    Raises:
      ValueError / TypeError: ids out of range, lengths that differ, bad options.

    References:
      REFERENCE §12; ``golden/rewards_v2.jsonl`` (``JUDGE_PRESETS["reference_v2"]``).

    Examples:
      Three agents, two parallel cycles; in cycle 1 agents 0 and 1 say agent 2 beat the other,
      agent 2 says 0 > 1:

      >>> from kernel import OP_GT
      >>> r = judge_step_rewards([0] * 6, range(6), [0, 1, 2, 0, 1, 2], [3, 4, 5], [2, 2, 0],
      ...                        [OP_GT] * 3, [1, 0, 1], [3], [2, 2, 2])
      >>> r.generator_N.tolist()  # cells: agent 0's steps, agent 1's, agent 2's
      [0.5, 0.0, 0.0, 0.0, 1.0, 0.0]
      >>> r.scores.tolist()  # judge 0: others rate answer 2 at 1/1 (judge 1), answer 1 at 0/1 (judge 2)
      [1.0, 0.0, 0.0]
      >>> pair = judge_step_rewards([0] * 6, range(6), [0, 1, 2, 0, 1, 2], [3, 4, 5], [2, 2, 0],
      ...                           [OP_GT] * 3, [1, 0, 1], [3], [2, 2, 2],
      ...                           options=JudgeOptions(consensus="pair"))
      >>> pair.scored_V.tolist()  # nobody else judged any of these pairs
      [False, False, False]
      >>> ref = judge_step_rewards([0] * 6, range(6), [0, 1, 2, 0, 1, 2], [3, 4, 5], [2, 2, 0],
      ...                          [OP_GT] * 3, [1, 0, 1], [3], [2, 2, 2],
      ...                          options=JUDGE_PRESETS["reference_v2"])
      >>> ref.judge_N.tolist()  # each lone voter agrees with itself; agent 2 is penalised in cycle 0
      [0.0, 1.0, 0.0, 1.0, -0.5, 1.0]
    """
    check_choice(schedule, "schedule", get_args(Schedule))
    check_type(options, JudgeOptions, "options")
    n_P = as_int_array(num_agents_P, "num_agents_P")
    if n_P.size and int(n_P.min()) < 1:
        raise ValueError(f"num_agents_P must be >= 1, got {int(n_P.min())}")
    steps_PG = as_int_array(num_steps_PG, "num_steps_PG")
    if steps_PG.shape[0] != int(n_P.sum()):
        raise ValueError(
            f"num_steps_PG must have one entry per agent row ({int(n_P.sum())}), got {steps_PG.shape[0]}"
        )
    if steps_PG.size and int(steps_PG.min()) < 0:
        raise ValueError(f"num_steps_PG must be >= 0, got {int(steps_PG.min())}")
    p_U, t_U, u_U = (
        as_int_array(x, name)
        for x, name in ((debate_U, "debate_U"), (index_U, "index_U"), (author_U, "author_U"))
    )
    num_u = check_same_length(debate_U=p_U, index_U=t_U, author_U=u_U)
    tv, a, op, b = (
        as_int_array(x, name) for x, name in ((turn_V, "turn_V"), (a_V, "a_V"), (op_V, "op_V"), (b_V, "b_V"))
    )
    check_same_length(turn_V=tv, a_V=a, op_V=op, b_V=b)
    num_p = int(n_P.shape[0])
    check_group_ids(p_U, num_p, "debate_U")
    check_group_ids(tv, num_u, "turn_V")
    if t_U.size and int(t_U.min()) < 0:
        raise ValueError(f"index_U must be >= 0, got {int(t_U.min())}")

    row_offsets = np.zeros(num_p + 1, np.int64)
    np.cumsum(n_P, out=row_offsets[1:])
    step_offsets = np.zeros(steps_PG.shape[0] + 1, np.int64)
    np.cumsum(steps_PG, out=step_offsets[1:])
    num_cells = int(step_offsets[-1])
    steps_R1 = np.append(steps_PG, 0)  # the padding row R has no step
    live_U = p_U < num_p
    n_U = np.append(n_P, 1)[p_U]

    def cell(p: IntArray, n: IntArray, x: IntArray, s: IntArray, live: BoolArray) -> IntArray:
        """The cell of step s of agent x of debate p, or ``num_cells`` where there is none."""
        known = live & (x >= 0) & (x < n)
        row = np.where(known, row_offsets[p] + np.where(known, x, 0), row_offsets[-1])
        ok = known & (s >= 0) & (s < steps_R1[row])
        return np.where(ok, step_offsets[row] + np.where(ok, s, 0), num_cells)

    rule: JudgedStepRule = options.attribution if options.attribution == "reference_v2" else schedule
    s_U = t_U // n_U
    judge_cell_U = cell(p_U, n_U, u_U, s_U, live_U)

    # each comparison's turn fields; the padding turn U is no turn of any debate
    p, n = np.append(p_U, num_p)[tv], np.append(n_U, 1)[tv]
    t, u = np.append(t_U, 0)[tv], np.append(u_U, -1)[tv]
    live_V = np.append(live_U, False)[tv]
    judge_cell_V = np.append(judge_cell_U, num_cells)[tv]
    step_a = np.where(live_V, judged_steps(t, a, n, rule=rule), -1)
    step_b = np.where(live_V, judged_steps(t, b, n, rule=rule), -1)
    if options.self_comparisons == "drop":
        live_V &= (a != u) & (b != u)
    both = live_V & (a != b) & (step_a >= 0) & (step_b >= 0)
    vote = both & (op == OP_GT) & (a >= 0) & (a < n) & (b >= 0) & (b < n)
    gen = generator_rewards(cell(p, n, a, step_a, vote), cell(p, n, b, step_b, vote), num_cells, where=vote)

    scorable = both & ((op == OP_GT) | (op == OP_EQ)) & (judge_cell_V < num_cells)
    keyed = vote | scorable
    if options.consensus == "answers":  # each side on its own: answers keyed (debate, agent, step)
        num_v = int(tv.shape[0])
        sides = np.concatenate([keyed, keyed])
        answer, num_answers = _dense_rows(
            sides, np.concatenate([p, p]), np.concatenate([a, b]), np.concatenate([step_a, step_b])
        )
        own, num_own = _own_groups(sides, answer, np.concatenate([u, u]))
        scored = answer_consensus_scores(
            np.where(op == OP_GT, 1, 0),
            answer[:num_v],
            answer[num_v:],
            num_answers,
            vote_V=vote,
            own_a_V=own[:num_v],
            own_b_V=own[num_v:],
            num_own=num_own,
            where=scorable,
            no_consensus=options.no_consensus,
        )
    else:  # pairs of steps, keyed (debate, first step, second step) with the steps in lexicographic order
        a_first = (a < b) | ((a == b) & (step_a < step_b))
        orient = np.where(op == OP_GT, np.where(a_first, 1, -1), 0)
        first_x, first_s = np.where(a_first, a, b), np.where(a_first, step_a, step_b)
        second_x, second_s = np.where(a_first, b, a), np.where(a_first, step_b, step_a)
        pair, num_pairs = _dense_rows(keyed, p, first_x, first_s, second_x, second_s)
        own_pair, num_own = (
            (None, 0) if options.consensus == "pair_with_own_vote" else _own_groups(keyed, pair, u)
        )
        scored = consensus_scores(
            orient,
            pair,
            num_pairs,
            vote_V=vote,
            own_V=own_pair,
            num_own=num_own,
            where=scorable,
            no_consensus=options.no_consensus,
        )

    listed = np.bincount(tv[live_V], minlength=num_u)[:num_u]  # a dropped self-comparison is no comparison
    seen_all = np.where(s_U >= 1, n_U, 0 if rule == "parallel" else t_U % n_U)
    self_seen = (u_U >= 0) & (u_U < n_U) & (judged_steps(t_U, u_U, n_U, rule=rule) >= 0)
    judgeable = seen_all - self_seen
    penalised = np.zeros(num_u, dtype=bool)
    if options.format_penalty is not None:
        penalised = format_penalties(
            listed,
            judgeable,
            t_U,
            s_U,
            exempt_turns=options.format_exempt_turns,
            exempt_steps=options.format_exempt_steps,
            where=live_U & (judge_cell_U < num_cells),
        )
    judge, judgments = judge_rewards(
        judge_cell_V,
        scored.scores,
        num_cells,
        where=scored.scored_V,
        penalty_cell_U=np.where(penalised, judge_cell_U, num_cells),
        format_penalty=0.0 if options.format_penalty is None else options.format_penalty,
    )
    return JudgeStepRewards(
        gen.rewards,
        judge,
        step_offsets,
        gen.wins_N,
        gen.votes_N,
        judgments,
        step_a,
        step_b,
        vote,
        scored.scores,
        scored.scored_V,
        penalised,
        judgeable.astype(np.int64),
    )


def _own_groups(
    keep: npt.NDArray[np.bool_], key: npt.NDArray[np.int64], judge: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], int]:
    """The (key, judge) group of each kept comparison: what leave-one-out leaves out of its consensus."""
    return _dense_rows(keep, key, judge)


def _dense_rows(keep: npt.NDArray[np.bool_], *columns: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], int]:
    """Dense ids of the distinct rows of ``columns`` where ``keep`` (ids in sorted order), the others get
    the padding id (the count)."""
    out = np.zeros(keep.shape[0], np.int64)
    if not keep.any():
        return out, 0
    stacked = np.stack([np.asarray(c, np.int64)[keep] for c in columns], axis=1)
    distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
    count = int(distinct.shape[0])
    out[:] = count
    out[keep] = inverse.reshape(-1)
    return out, count
