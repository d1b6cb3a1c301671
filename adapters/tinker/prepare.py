"""A training step's data from its rollouts, with no I/O: the datums the loop sends, the metrics it records.

RL steps (:func:`prepare_rl`): the played debates become the kernel's episodes (each turn as the
rollout's own run of the state machine gave it, its token arrays, each agent's correctness) and go
through the kernel's one scoring core, :func:`kernel.score_episodes` (votes, pairwise rewards, returns
plus ``correctness_weight × correct``, advantages by the configured estimator or RAE baselines,
constant-group removal, one ``kernel.build_datums`` call), the same core ``debate-kernel score`` runs on
transcripts; the datums are converted to ``tinker.Datum`` and split into the substeps. Warm-start steps
(:func:`prepare_warm`): cross-entropy datums of well-formed turns on the batch's questions.

The loop's shell (:mod:`adapters.tinker.train`) calls these with its config, renderer and RAE baselines
and sends what they return; nothing here awaits, reads a clock or writes a file. RAE's baselines are
state carried from step to step: :func:`prepare_rl` takes them and returns the updated ones.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

import kernel
from adapters.tinker.config import TrainConfig
from adapters.tinker.convert import datums_to_tinker
from adapters.tinker.credit import credit_weights
from adapters.tinker.dataset import Question, is_correct
from adapters.tinker.renderers import Renderer
from adapters.tinker.rollouts import DebateResult, last_solution

__all__: list[str] = []


@dataclass
class Prepared:
    """A step's datums, split into substeps, its metrics so far, and the sampler logprobs and masks of
    its datums' targets (the inputs of the KL metrics and the KL penalty)."""

    data: list[tinker.Datum]
    chunks: list[list[tinker.Datum]]
    record: dict[str, Any]
    sampler_logprobs: list[npt.NDArray[np.float32]]
    masks: list[npt.NDArray[np.bool_]]
    deferred: Callable[[], None] | None = None  # the rest of the step's record and KL inputs

    def finish(self) -> None:
        """Runs the work left for after the step's requests are submitted (once; no-op after)."""
        if self.deferred is not None:
            deferred, self.deferred = self.deferred, None
            deferred()


class Stages(NamedTuple):
    """The kernel stages of an RL step's played debates: their episodes and what the scoring core made of
    them (:func:`kernel.score_episodes`)."""

    episodes: list[kernel.Episode]
    scored: kernel.ScoredEpisodes


def episodes_of(
    config: TrainConfig, renderer: Renderer, played: Sequence[DebateResult]
) -> list[kernel.Episode]:
    """The played debates as the kernel's episodes: each turn's agent, parse, step reward and token
    arrays, as the rollout's own run of the state machine gave them; each agent's correctness against the
    reference answer; with ``credit="solution"``, each turn's credit weights
    (:func:`adapters.tinker.credit.credit_weights`)."""
    credit = config.credit != "turn"
    out: list[kernel.Episode] = []
    for r in played:
        n = r.state.num_agents
        answer = r.spec.answer
        weights = (
            tuple(
                None
                if t.arrays is None
                else credit_weights(renderer, t.arrays[1], config.credit, policy=config.parse_policy)
                for t in r.turns
            )
            if credit
            else ()
        )
        tokens = tuple(t.arrays for t in r.turns)
        out.append(
            kernel.Episode(
                n,
                tuple(t.agent_id for t in r.turns),
                tuple(t.parsed for t in r.turns),
                tuple(t.reward for t in r.turns),
                consensus=r.state.consensus,
                tokens_T=tokens if any(t is not None for t in tokens) else (),
                weights_T=weights,
                correct_G=tuple(float(is_correct(last_solution(r.state, i), answer)) for i in range(n)),
            )
        )
    return out


def rl_stages(
    config: TrainConfig,
    renderer: Renderer,
    played: Sequence[DebateResult],
    baselines_K: npt.NDArray[np.float64],
) -> Stages | None:
    """The played debates scored by the kernel's one core (None when there are none)."""
    if not played:
        return None
    episodes = episodes_of(config, renderer, played)
    return Stages(episodes, kernel.score_episodes(episodes, config.scoring_options, baselines_K=baselines_K))


def rl_record(results: Sequence[DebateResult], stages: Stages | None) -> dict[str, Any]:
    """The metrics of an RL step's debates that its datums do not need."""
    record: dict[str, Any] = {"env/all/total_episodes": len(results)}
    if stages is None:
        return record
    record.update(batch_metrics(stages.episodes, stages.scored))
    record["data/constant_groups_removed"] = int(np.sum(~stages.scored.keep_P))
    return record


def prepare_rl(
    config: TrainConfig,
    renderer: Renderer,
    results: Sequence[DebateResult],
    played: Sequence[DebateResult],
    baselines_K: npt.NDArray[np.float64],
    *,
    record: bool = True,
) -> tuple[Prepared, npt.NDArray[np.float64]]:
    """The step's datums from its rollouts (the kernel's scoring core, :func:`rl_stages`), with only what
    the datums need before the submission, and RAE's baselines after the step (``baselines_K``
    unchanged under other estimators or when no debate was played).

    The turns' token arrays go straight from the rollouts into the core's one ``kernel.build_datums``
    call; the metrics that the datums do not need are left to :meth:`Prepared.finish`
    (``record=False``: none, for a part of a streamed step)."""
    c = config
    stages = rl_stages(c, renderer, played, baselines_K)
    if stages is None:
        return Prepared([], [], rl_record(results, None) if record else {}, [], []), baselines_K
    built = stages.scored.datums
    data = [] if built is None else datums_to_tinker(built.datums, copy=False)  # ours alone: lent
    episodes = {"env/all/total_episodes": len(results)}
    prepared = Prepared(data, split_substeps(data, c.num_substeps), episodes, [], [])

    def finish() -> None:
        if built is not None:
            d = built.datums
            bounds = d.offsets_D1.tolist()
            for s, e in itertools.pairwise(bounds):
                prepared.sampler_logprobs.append(np.asarray(d.logprobs[s:e], dtype=np.float32))
                prepared.masks.append(np.asarray(d.mask[s:e], dtype=bool))
        if record:
            prepared.record.update(rl_record(results, stages))

    prepared.deferred = finish
    baselines = (
        stages.scored.baselines_K
        if isinstance(c.scoring_options.estimator, kernel.RAEOptions)
        else baselines_K
    )
    return prepared, baselines


def batch_metrics(episodes: Sequence[kernel.Episode], scored: kernel.ScoredEpisodes) -> dict[str, Any]:
    """The ``env/*`` and ``advantage/*`` metrics of a step's scored debates (REFERENCE.md's names)."""
    sm, tm = kernel.episode_metrics(episodes, scored)
    pw = scored.pairwise
    advantages, correct = scored.advantages_PG, scored.correct_PG
    return {
        "env/all/parse_error": float(sm.parse_error),
        "env/all/consensus_reached": float(sm.consensus_reached),
        "env/all/round": float(sm.round),
        "env/all/pairwise_total_votes": float(np.mean(pw.total_votes_P)),
        "env/all/pairwise_malformed": float(np.mean(pw.malformed_P)),
        "env/all/pairwise_any_votes": float(np.mean(pw.any_votes_P)),
        "env/all/ac_tokens_per_turn": float(tm.ac_tokens_per_turn),
        "env/all/ob_tokens_per_turn": float(tm.ob_tokens_per_turn),
        "env/all/turns_per_episode": float(tm.turns_per_episode),
        "env/all/total_turns": int(tm.total_turns),
        "env/all/reward/total": float(tm.reward_total),
        "env/all/correct": float(np.mean(correct)) if correct.size else math.nan,
        "env/all/by_group/frac_mixed": float(tm.frac_mixed),
        "advantage/mean": float(np.mean(advantages)),
        "advantage/std": float(np.std(advantages)),
        "advantage/min": float(np.min(advantages)),
        "advantage/max": float(np.max(advantages)),
    }


def prepare_warm(config: TrainConfig, renderer: Renderer, questions: Sequence[Question]) -> Prepared:
    """Cross-entropy datums of well-formed turns (``kernel.render_response``) on ``questions`` (a warm-start
    batch; those without a reference answer are skipped)."""
    c = config
    transitions: list[list[tuple[list[int], list[int], list[float]]]] = []
    answered = [(q.question, q.answer) for q in questions if q.answer is not None]
    answers = [answer for _, answer in answered]
    for k, (question, own) in enumerate(answered):
        state = kernel.initial_state(question, num_agents=c.num_agents, max_rounds=c.max_rounds)
        while not state.done:
            agent = kernel.current_agent(state)
            assert agent is not None
            obs = kernel.build_observation(state, agent, config=c.observation_config)
            prompt = renderer.build_prompt(obs.messages).to_ints()
            answer = own
            if c.warm_start_answers == "shuffled":  # agent i: the answer of question k + 1 + i
                answer = answers[(k + 1 + agent) % len(answers)]
            text = warm_turn(agent, answer, brief=c.observation_config.brief)
            tokens = answer_tokens(renderer, text)
            transitions.append([(prompt, tokens, [0.0] * len(tokens))])
            state = kernel.submit(
                state, agent, kernel.parse_response(text, agent, policy=c.parse_policy)
            ).state
    record: dict[str, Any] = {"env/all/total_episodes": 0}
    if not transitions:
        return Prepared([], [], record, [], [])
    traj = kernel.trajectories_from_lists(transitions, np.ones(len(transitions)))
    built = kernel.build_datums(traj).datums
    data: list[tinker.Datum] = []
    bounds = built.offsets_D1.tolist()
    for d in range(len(bounds) - 1):
        s, e = bounds[d], bounds[d + 1]
        weights = np.asarray(built.mask[s:e], dtype=np.float32)
        data.append(
            tinker.Datum(
                model_input=tinker.ModelInput.from_ints(built.input_tokens[s:e].tolist()),
                loss_fn_inputs={
                    "target_tokens": types.TensorData.from_numpy(
                        np.asarray(built.target_tokens[s:e], dtype=np.int64)
                    ),
                    "weights": types.TensorData.from_numpy(weights),
                },
            )
        )
    return Prepared(data, split_substeps(data, c.num_substeps), record, [], [])


def warm_turn(agent: int, answer: str, *, brief: bool = False) -> str:
    """The well-formed turn agent ``agent`` gives in the warm start: ``answer`` as its solution, agreement
    with every earlier agent (``brief``: the shortest such turn, for a small model)."""
    if brief:  # the shortest well-formed turn: what a small model can learn in a few hundred steps
        return kernel.render_response(
            solution=answer,
            evaluation="N/A" if agent == 0 else "agree",
            comparisons=[kernel.Vote(a, "=", b) for a in range(agent) for b in range(a + 1, agent)],
            consensus=True,
            consensus_reason="same answer",
        )
    if agent == 0:
        return kernel.render_response(
            solution=f"The answer is {answer}.",
            evaluation="N/A",
            consensus=True,
            consensus_reason="I computed it directly.",
        )
    votes = [kernel.Vote(a, "=", b) for a in range(agent) for b in range(a + 1, agent)]
    return kernel.render_response(
        solution=f"The answer is {answer}.",
        evaluation=f"Agent 0 found {answer}, which is correct.",
        comparisons=votes,
        consensus=True,
        consensus_reason=f"We agree that the answer is {answer}.",
    )


def check_warm_turns_fit(config: TrainConfig, renderer: Renderer, questions: Sequence[Question]) -> None:
    """Warns when ``max_tokens`` is below the longest warm-start turn (the last agent's, which lists the
    most comparisons, for the longest reference answer): the policy learns turns of that length, and a
    sampled turn cut before its closing tags fails to parse. (A warning, not an error: a smoke test may
    want short samples.)"""
    answers = [q.answer for q in questions if q.answer is not None]
    if not answers:
        return
    agent = config.num_agents - 1
    text = warm_turn(agent, max(answers, key=len), brief=config.observation_config.brief)
    n = len(answer_tokens(renderer, text))
    if n > config.max_tokens:
        warnings.warn(
            f"max_tokens={config.max_tokens} is shorter than a warm-start turn ({n} tokens for agent "
            f"{agent}): sampled turns will be cut before their closing tags and fail to parse; "
            f"raise max_tokens to at least {n}",
            RuntimeWarning,
            stacklevel=3,
        )


def answer_tokens(renderer: Renderer, text: str) -> list[int]:
    """``text`` as the tokens a sampled turn would have (the renderer's ``answer_tokens``)."""
    fn = getattr(renderer, "answer_tokens", None)
    if fn is None:
        raise TypeError("warm start needs a renderer with answer_tokens(text)")
    return [int(t) for t in fn(text)]


def split_substeps(data: list[tinker.Datum], num_substeps: int) -> list[list[tinker.Datum]]:
    """``data`` cut into ``min(num_substeps, len(data))`` consecutive chunks of near-equal length."""
    if not data:
        return []
    n = min(num_substeps, len(data))
    bounds = np.linspace(0, len(data), n + 1).round().astype(int)
    return [data[bounds[i] : bounds[i + 1]] for i in range(n)]
