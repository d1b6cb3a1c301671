"""Evaluation of a training run's policy, ``eval/*`` metrics:

- against fixed opponents (:func:`evaluate`): the learned policy plays one role of each debate, the fixed
  policy (the initial or warm-started weights) the others;
- did debate help (:func:`debate_evaluation`): the policy debating itself, scored by the answers a debate
  produces — the majority of the agents' first answers (a plain majority vote, before any debate), the
  majority of their final answers (the debate's consensus answer) — and ``avg@k`` / ``pass@k`` /
  ``cons@k`` over ``eval_repeats`` debates per question, against the same policy answering alone (one
  agent, one round: the direct baseline) on the same questions;
- what no learning scores (:func:`answer_baselines`): ``eval/chance`` and ``eval/majority_baseline`` on
  the questions evaluated, beside ``eval/correct``;
- how far ``eval/correct`` may be from the share on the whole question set (:func:`clustered_se`):
  ``eval/correct_se``, its standard error with the questions as the sampled units.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

import kernel
from adapters.answers import answer_key, is_correct, k_sample_figures, majority_answer
from adapters.tinker.boundary import Boundary
from adapters.tinker.protocol import SamplingClient
from adapters.tinker.renderers import Renderer
from adapters.training.config import TrainConfig
from adapters.training.dataset import Question
from adapters.training.rollouts import DebateResult, fixed_opponents, last_solution, run_debates, self_play

__all__ = [
    "BASELINE_NAMES",
    "DEBATE_EVAL_NAMES",
    "answer_baselines",
    "clustered_se",
    "debate_evaluation",
    "evaluate",
]

DEBATE_EVAL_NAMES = (
    "eval/debate/first_round_majority",
    "eval/debate/final_majority",
    "eval/debate/avg@k",
    "eval/debate/pass@k",
    "eval/debate/cons@k",
    "eval/direct/avg@k",
    "eval/direct/pass@k",
    "eval/direct/cons@k",
)
"""The metrics of :func:`debate_evaluation` (k = ``eval_repeats``)."""
BASELINE_NAMES = ("eval/chance", "eval/majority_baseline")
"""The metrics of :func:`answer_baselines`."""


def answer_baselines(train: Sequence[Question], evaluated: Sequence[Question]) -> dict[str, float]:
    """What answering without reading the question scores on the ``evaluated`` questions, knowing only
    the ``train`` questions' answers (answers compared as :func:`adapters.answers.is_correct` does).

    With A the distinct training answers (:func:`adapters.answers.answer_key`), m the most common of
    them (ties: the one met first) and a_q the answer of evaluated question q (n of them):
    ``eval/chance`` = (1/n) Σ_q |{a ∈ A : a = a_q}| / |A| (a uniformly random training answer),
    ``eval/majority_baseline`` = (1/n) Σ_q [m = a_q] (always answering m). A question without an answer
    counts as wrong, as ``eval/correct`` counts it.

    Returns:
      :data:`BASELINE_NAMES`: the two accuracies; NaN for both when either set is empty or no training
      question has an answer.

    Examples:
      >>> qs = [Question("a", "yes"), Question("b", "Yes"), Question("c", "no")]
      >>> answer_baselines(qs, [Question("d", "no"), Question("e", "yes")])
      {'eval/chance': 0.5, 'eval/majority_baseline': 0.5}
      >>> answer_baselines(qs, [Question("f", "yes")])
      {'eval/chance': 0.5, 'eval/majority_baseline': 1.0}
    """
    first: dict[str, str] = {}
    counts: dict[str, int] = {}
    for q in train:
        key = answer_key(q.answer) if q.answer is not None else None
        if key is not None:
            first.setdefault(key, q.answer or "")
            counts[key] = counts.get(key, 0) + 1
    if not counts or not evaluated:
        return dict.fromkeys(BASELINE_NAMES, math.nan)
    majority = max(counts, key=counts.__getitem__)  # the first key of the highest count: met first
    chance = [sum(is_correct(first[k], q.answer) for k in counts) / len(counts) for q in evaluated]
    always = [float(is_correct(first[majority], q.answer)) for q in evaluated]
    return {"eval/chance": float(np.mean(chance)), "eval/majority_baseline": float(np.mean(always))}


def clustered_se(values_N: Sequence[float], clusters_N: Sequence[int]) -> float:
    """The standard error of the mean of ``values_N`` when whole clusters (the questions: every debate
    of a question shares it) are the sampled units: with m_c the mean of cluster c's values and C
    clusters, SE = sqrt(Σ_c (m_c − m̄)² / (C − 1) / C), m̄ = the mean of the m_c (the mean of the values
    when the clusters are equal in size, as an evaluation's are). The debates of one question are not
    independent trials, so the binomial sqrt(p(1 − p)/N) over all N of them understates the error; this
    one counts a question answered wrongly every time as one unlucky draw among C. NaN with fewer than 2
    clusters.

    Args:
        values_N: N values (a debate's correctness, 0 or 1).
        clusters_N: N cluster labels (the debate's question).

    Raises:
        ValueError: if the two differ in length.

    Examples:
        >>> round(clustered_se([1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 2, 2]), 4)  # cluster means 1, 1, 0
        0.3333
        >>> clustered_se([1, 0, 1, 0], [0, 0, 1, 1])  # every question half right: no spread across them
        0.0
        >>> clustered_se([1, 0], [5, 5])
        nan
    """
    if len(values_N) != len(clusters_N):
        raise ValueError(
            f"values_N and clusters_N must match in length, got {len(values_N)} and {len(clusters_N)}"
        )
    by: dict[int, list[float]] = {}
    for v, c in zip(values_N, clusters_N, strict=True):
        by.setdefault(int(c), []).append(float(v))
    if len(by) < 2:
        return math.nan
    means_C = np.array([np.mean(v) for v in by.values()])
    return float(np.std(means_C, ddof=1) / math.sqrt(means_C.size))


async def evaluate(
    config: TrainConfig,
    questions: Sequence[Question],
    renderer: Renderer,
    policy: SamplingClient,
    fixed: SamplingClient | None,
    *,
    boundary: Boundary | None = None,
    on_result: Callable[[DebateResult], None] | None = None,
) -> dict[str, float]:
    """Fixed-opponent evaluation: for each of the first ``eval_questions`` questions, N debates with the
    policy in role i of debate i and the fixed sampler elsewhere, each played ``eval_repeats`` times
    (repeat k's debates are ``eval{k}-q{p}-r{i}``; ``eval-q{p}-r{i}`` with one repeat); role-averaged
    metrics. Samples go through ``boundary`` (keyword; default: the rollouts' own, one attempt);
    ``on_result`` is called with each debate as it ends (a progress display).

    Returns:
      ``eval/correct`` (the policy's final solution is right), ``eval/correct_se`` (its standard error
      by question, :func:`clustered_se`; NaN with one question), ``eval/parse_ok`` (share of the policy's
      turns that parsed), ``eval/pairwise_reward`` (the policy's pairwise reward), ``eval/debates``.
    """
    qs = list(questions[: config.eval_questions])
    if not qs:
        return {}
    specs = [
        spec
        for k in range(config.eval_repeats)
        for spec in fixed_opponents(
            [q.question for q in qs],
            policy,
            fixed if fixed is not None else policy,
            num_agents=config.num_agents,
            answers=[q.answer for q in qs],
            id_prefix="eval-q" if config.eval_repeats == 1 else f"eval{k}-q",
        )
    ]
    per_repeat = len(qs) * config.num_agents  # each repeat's specs are question-major, N a question
    question = {spec.id: (i % per_repeat) // config.num_agents for i, spec in enumerate(specs)}
    results = (
        await run_debates(
            specs, renderer, config=config.rollout_config, boundary=boundary, on_result=on_result
        )
    ).results
    correct: list[float] = []
    asked: list[int] = []
    parse_ok: list[float] = []
    for r in results:
        role = r.spec.policy_roles[0]
        correct.append(float(is_correct(last_solution(r.state, role), r.spec.answer)))
        asked.append(question[r.spec.id])
        parse_ok.extend(float(t.parsed.ok) for t in r.turns if t.agent_id == role)
    played = [r for r in results if r.turns]
    pairwise = math.nan
    if played:
        episodes = [
            kernel.Episode(
                r.state.num_agents,
                tuple(t.agent_id for t in r.turns),
                tuple(t.parsed for t in r.turns),
                tuple(t.reward for t in r.turns),
            )
            for r in played
        ]
        scored = kernel.score_episodes(episodes, config.scoring_options)
        rows = [int(scored.offsets_P1[p]) + r.spec.policy_roles[0] for p, r in enumerate(played)]
        pairwise = float(np.mean(scored.pairwise.rewards_PG[rows]))
    return {
        "eval/correct": float(np.mean(correct)) if correct else math.nan,
        "eval/correct_se": clustered_se(correct, asked),
        "eval/parse_ok": float(np.mean(parse_ok)) if parse_ok else math.nan,
        "eval/pairwise_reward": pairwise,
        "eval/debates": float(len(results)),
    }


async def debate_evaluation(
    config: TrainConfig,
    questions: Sequence[Question],
    renderer: Renderer,
    policy: SamplingClient,
    *,
    boundary: Boundary | None = None,
    on_result: Callable[[DebateResult], None] | None = None,
) -> dict[str, float]:
    """Did debate help: for each of the first ``eval_questions`` questions, ``eval_repeats`` debates of the
    policy with itself (``evalself{k}-q{p}``) and ``eval_repeats`` direct answers (one agent, one round:
    ``evaldirect{k}-q{p}``). A debate's answer is the majority of its agents' final answers
    (:func:`adapters.answers.majority_answer`); its first-round answer the majority of their first answers.
    ``on_result``: called with each debate and direct answer as it ends.

    Returns:
      :data:`DEBATE_EVAL_NAMES`: ``first_round_majority`` and ``final_majority`` (shares of debates whose
      answer is right), ``avg@k`` (mean correctness of the k answers of a question), ``pass@k`` (one of
      them right) and ``cons@k`` (their majority right), each averaged over the questions, for the
      debates and for the direct answers; {} without questions.
    """
    qs = list(questions[: config.eval_questions])
    if not qs:
        return {}
    k = config.eval_repeats
    texts, answers = [q.question for q in qs], [q.answer for q in qs]
    debate_specs = [
        spec
        for j in range(k)
        for spec in self_play(
            texts, policy, num_agents=config.num_agents, answers=answers, id_prefix=f"evalself{j}-q"
        )
    ]
    direct_specs = [
        spec
        for j in range(k)
        for spec in self_play(texts, policy, num_agents=1, answers=answers, id_prefix=f"evaldirect{j}-q")
    ]
    debate_config = config.rollout_config
    direct_config = dataclasses.replace(debate_config, num_agents=1, max_rounds=1)
    b, seen = boundary, on_result
    debates = (
        await run_debates(debate_specs, renderer, config=debate_config, boundary=b, on_result=seen)
    ).results
    direct = (
        await run_debates(direct_specs, renderer, config=direct_config, boundary=b, on_result=seen)
    ).results
    first = [_majority(r, first_round=True) for r in debates]
    final = [_majority(r, first_round=False) for r in debates]
    alone = [_majority(r, first_round=False) for r in direct]
    n = len(qs)

    def by_question(values: Sequence[str]) -> list[list[str]]:
        return [[values[j * n + q] for j in range(k)] for q in range(n)]

    def share(values: Sequence[str]) -> float:
        return float(np.mean([is_correct(v, a) for v, a in zip(values, answers * k, strict=True)]))

    debated = k_sample_figures(by_question(final), answers)
    solo = k_sample_figures(by_question(alone), answers)
    return {
        "eval/debate/first_round_majority": share(first),
        "eval/debate/final_majority": share(final),
        "eval/debate/avg@k": debated.avg,
        "eval/debate/pass@k": debated.pass_,
        "eval/debate/cons@k": debated.cons,
        "eval/direct/avg@k": solo.avg,
        "eval/direct/pass@k": solo.pass_,
        "eval/direct/cons@k": solo.cons,
    }


def _majority(result: DebateResult, *, first_round: bool) -> str:
    """A debate's answer: the majority of its agents' first-round (or final) solutions; "" when none."""
    state = result.state
    if first_round:
        solutions = [r.solution for r in state.rounds[0]] if state.rounds else []
    else:
        solutions = [last_solution(state, i) for i in range(state.num_agents)]
    return majority_answer(solutions) or ""
