"""Fixed-opponent evaluation of a training run's policy: the learned policy plays one role of each
debate, the fixed policy (the initial or warm-started weights) the others; ``eval/*`` metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import kernel
from adapters.tinker.boundary import Boundary
from adapters.tinker.config import TrainConfig
from adapters.tinker.dataset import Question, is_correct
from adapters.tinker.protocol import SamplingClient
from adapters.tinker.renderers import Renderer
from adapters.tinker.rollouts import fixed_opponents, last_solution, run_debates

__all__ = ["evaluate"]


async def evaluate(
    config: TrainConfig,
    questions: Sequence[Question],
    renderer: Renderer,
    policy: SamplingClient,
    fixed: SamplingClient | None,
    *,
    boundary: Boundary | None = None,
) -> dict[str, float]:
    """Fixed-opponent evaluation: for each of the first ``eval_questions`` questions, N debates with the
    policy in role i of debate i and the fixed sampler elsewhere, each played ``eval_repeats`` times
    (repeat k's debates are ``eval{k}-q{p}-r{i}``; ``eval-q{p}-r{i}`` with one repeat); role-averaged
    metrics. Samples go through ``boundary`` (keyword; default: the rollouts' own, one attempt).

    Returns:
      ``eval/correct`` (the policy's final solution is right), ``eval/parse_ok`` (share of the policy's
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
    results = (await run_debates(specs, renderer, config=config.rollout_config, boundary=boundary)).results
    correct: list[float] = []
    parse_ok: list[float] = []
    for r in results:
        role = r.spec.policy_roles[0]
        correct.append(float(is_correct(last_solution(r.state, role), r.spec.answer)))
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
        "eval/parse_ok": float(np.mean(parse_ok)) if parse_ok else math.nan,
        "eval/pairwise_reward": pairwise,
        "eval/debates": float(len(results)),
    }
