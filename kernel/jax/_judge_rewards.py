"""JAX twins of the judge-reward array functions: thin wrappers of the one implementation in
:mod:`kernel._judge_rewards` (static shapes: ``num_cells``, ``num_pairs``, ``num_answers``, ``num_own``,
``num_groups``
are Python ints the caller keeps fixed; ids at or beyond them are padding and drop out). Under jit ids
cannot be range-checked; values are float32 unless x64 is on. The host-side assembly
(:func:`kernel.judge_step_rewards`: dense pair ids from sorted keys) has no twin.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp  # noqa: F401  (the doctests use it)
from jax.typing import ArrayLike

from kernel._advantages import ADVANTAGE_PRESETS, AdvantageOptions
from kernel._checks import check_choice, check_int, check_real, check_type
from kernel._judge_rewards import (
    JUDGED_STEP_RULES,
    ConsensusScores,
    DualAdvantages,
    GeneratorRewards,
    JudgedStepRule,
    NoConsensus,
    _answer_consensus_scores,
    _consensus_scores,
    _dual,
    _format_penalties,
    _generator_rewards,
    _judge_rewards,
    _judged_steps,
)
from kernel.jax._advantages import grouped_advantages
from kernel.jax._checks import JAX

__all__ = [
    "answer_consensus_scores",
    "consensus_scores",
    "dual_step_advantages",
    "format_penalties",
    "generator_rewards",
    "judge_rewards",
    "judged_steps",
]


def judged_steps(
    index: ArrayLike, agent: ArrayLike, num_agents: ArrayLike, *, rule: JudgedStepRule = "parallel"
) -> jax.Array:
    """The step of ``agent``'s answer that a comparison written at turn ``index`` judges (−1: none).

    With c = t div N, k = t mod N: ``parallel`` S = c − 1, ``sequential`` S = c if x < k else c − 1 (both
    for 0 ≤ x < N), ``reference_v2`` S = −1 if x ≥ t, else c if x < k, else c − 1; S < 0 means −1.
    The twin of :func:`kernel.judged_steps`.

    Examples:
      >>> judged_steps(jnp.array([4, 4]), jnp.array([0, 2]), 3, rule="sequential").tolist()
      [1, 0]
    """
    check_choice(rule, "rule", JUDGED_STEP_RULES)
    out: jax.Array = _judged_steps(JAX, index, agent, num_agents, rule)
    return out


def generator_rewards(
    winner_V: ArrayLike, loser_V: ArrayLike, num_cells: int, *, where: ArrayLike | None = None
) -> GeneratorRewards:
    """g_n = W_n / V_n (0 when V_n = 0) over the votes with ``where``; cells ≥ ``num_cells`` drop out.
    The twin of :func:`kernel.generator_rewards`.

    Examples:
      >>> generator_rewards(jnp.array([0, 0, 1]), jnp.array([1, 2, 2]), 4).rewards.tolist()
      [1.0, 0.5, 0.0, 0.0]
    """
    cells = check_int(num_cells, "num_cells", low=0)
    return _generator_rewards(JAX, winner_V, loser_V, cells, where)


def consensus_scores(
    orient_V: ArrayLike,
    pair_V: ArrayLike,
    num_pairs: int,
    *,
    vote_V: ArrayLike,
    own_V: ArrayLike | None = None,
    num_own: int = 0,
    where: ArrayLike | None = None,
    no_consensus: NoConsensus = "skip",
) -> ConsensusScores:
    """score_v = +1 if o_v = sign(Σ of the pair's other votes) else −1 (leave-one-out with ``own_V``).
    The twin of :func:`kernel.consensus_scores`.

    Examples:
      >>> o, q, own = jnp.array([1, 1, -1]), jnp.array([0, 0, 0]), jnp.array([0, 1, 2])
      >>> consensus_scores(o, q, 1, vote_V=jnp.ones(3, bool), own_V=own, num_own=3).scores.tolist()
      [-1.0, -1.0, -1.0]
    """
    check_choice(no_consensus, "no_consensus", ("skip", "tie"))
    pairs = check_int(num_pairs, "num_pairs", low=0)
    owns = check_int(num_own, "num_own", low=0)
    return _consensus_scores(JAX, orient_V, pair_V, pairs, vote_V, own_V, owns, where, no_consensus)


def answer_consensus_scores(
    orient_V: ArrayLike,
    answer_a_V: ArrayLike,
    answer_b_V: ArrayLike,
    num_answers: int,
    *,
    vote_V: ArrayLike,
    own_a_V: ArrayLike | None = None,
    own_b_V: ArrayLike | None = None,
    num_own: int = 0,
    where: ArrayLike | None = None,
    no_consensus: NoConsensus = "skip",
) -> ConsensusScores:
    """score_v = +1 if o_v = sign(W_A/V_A − W_B/V_B) else −1, each answer's win rate over the other
    judges' votes against any opponent (leave-one-out with ``own_a_V`` / ``own_b_V``); no consensus when
    a side has no such vote or the rates tie. The twin of :func:`kernel.answer_consensus_scores`.

    Examples:
      >>> o, a, b = jnp.array([1, 1, 1]), jnp.array([0, 1, 0]), jnp.array([1, 2, 2])
      >>> r = answer_consensus_scores(o, a, b, 3, vote_V=jnp.ones(3, bool), own_a_V=jnp.array([0, 1, 2]),
      ...                             own_b_V=jnp.array([3, 4, 5]), num_own=6)
      >>> r.scores.tolist()
      [0.0, 0.0, 1.0]
    """
    check_choice(no_consensus, "no_consensus", ("skip", "tie"))
    answers = check_int(num_answers, "num_answers", low=0)
    owns = check_int(num_own, "num_own", low=0)
    if (own_a_V is None) != (own_b_V is None):
        raise ValueError("own_a_V and own_b_V must be given together (or neither)")
    return _answer_consensus_scores(
        JAX, orient_V, answer_a_V, answer_b_V, answers, vote_V, own_a_V, own_b_V, owns, where, no_consensus
    )


def judge_rewards(
    cell_V: ArrayLike,
    scores: ArrayLike,
    num_cells: int,
    *,
    where: ArrayLike | None = None,
    penalty_cell_U: ArrayLike | None = None,
    format_penalty: float = -0.5,
) -> tuple[jax.Array, jax.Array]:
    """j_n = (Σ scores + π·#penalties) / (#scores + #penalties), 0 when none; ``(judge [N], counts [N])``.
    The twin of :func:`kernel.judge_rewards`.

    Examples:
      >>> j, n = judge_rewards(jnp.array([0, 0, 1]), jnp.array([1.0, -1.0, 1.0]), 3,
      ...                      penalty_cell_U=jnp.array([2, 3]))
      >>> j.tolist(), n.tolist()
      ([0.0, 1.0, -0.5], [2, 1, 1])
    """
    cells = check_int(num_cells, "num_cells", low=0)
    penalty = check_real(format_penalty, "format_penalty", finite=True)
    out: tuple[jax.Array, jax.Array] = _judge_rewards(
        JAX, cell_V, scores, cells, where, penalty_cell_U, penalty
    )
    return out


def format_penalties(
    comparisons_U: ArrayLike,
    judgeable_U: ArrayLike,
    index_U: ArrayLike,
    step_U: ArrayLike,
    *,
    exempt_turns: int = 0,
    exempt_steps: int = 1,
    where: ArrayLike | None = None,
) -> jax.Array:
    """Penalised iff #comparisons = 0 ∧ #judgeable ≥ 2 ∧ t ≥ exempt_turns ∧ s ≥ exempt_steps ∧ where.
    The twin of :func:`kernel.format_penalties`.

    Examples:
      >>> two = jnp.array([2, 2])
      >>> format_penalties(jnp.array([0, 0]), two, jnp.array([2, 5]), jnp.array([0, 1])).tolist()
      [False, True]
    """
    turns = check_int(exempt_turns, "exempt_turns", low=0)
    steps = check_int(exempt_steps, "exempt_steps", low=0)
    out: jax.Array = _format_penalties(JAX, comparisons_U, judgeable_U, index_U, step_U, turns, steps, where)
    return out


def dual_step_advantages(
    generator_N: ArrayLike,
    judge_N: ArrayLike,
    group_ids_N: ArrayLike,
    num_groups: int,
    *,
    lambda_gen: float = 1.0,
    lambda_judge: float = 1.0,
    where: ArrayLike | None = None,
    estimator: AdvantageOptions = ADVANTAGE_PRESETS["default"],
) -> DualAdvantages:
    """A_n = λ_g·(g_n − ḡ_p) + λ_j·(j_n − j̄_p), each stream by :func:`kernel.jax.grouped_advantages`
    with ``estimator``. The twin of :func:`kernel.dual_step_advantages`.

    Examples:
      >>> d = dual_step_advantages(jnp.array([1.0, 0.0]), jnp.array([0.0, -0.5]), jnp.array([0, 0]), 1)
      >>> d.advantages.tolist()
      [0.75, -0.75]
    """
    check_type(estimator, AdvantageOptions, "estimator")
    options = {f: getattr(estimator, f) for f in estimator.__dataclass_fields__}

    def centre(r: Any, ids: Any, n: int, keep: Any) -> Any:
        return grouped_advantages(r, ids, n, where=keep, **options).advantages

    return _dual(JAX, centre, generator_N, judge_N, group_ids_N, num_groups, lambda_gen, lambda_judge, where)
