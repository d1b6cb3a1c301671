"""A training step's data from its rollouts, with no I/O: the datums the loop sends, the metrics it records.

RL steps (:func:`prepare_rl`): the played debates go through one batched kernel call per stage (replay,
votes, pairwise rewards, total returns plus ``correctness_weight × correct``, advantages by the
configured preset or RAE baselines), optional constant-group removal, then the datums: each turn's token
arrays straight from the rollouts into one ``kernel.build_datums`` call, converted to ``tinker.Datum``
and split into the substeps. Warm-start steps (:func:`prepare_warm`): cross-entropy datums of
well-formed turns on the batch's questions.

The loop's shell (:mod:`adapters.tinker.train`) calls these with its config, renderer and RAE baselines
and sends what they return; nothing here awaits, reads a clock or writes a file. RAE's baselines are
state carried from step to step: :func:`prepare_rl` takes them and returns the updated ones.
"""

from __future__ import annotations

import functools
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
from adapters import pipeline
from adapters.tinker.config import TrainConfig
from adapters.tinker.convert import datums_to_tinker, pack_trajectories
from adapters.tinker.credit import credit_weights
from adapters.tinker.dataset import Question, is_correct
from adapters.tinker.renderers import Renderer
from adapters.tinker.rollouts import DebateResult, TurnArrays, last_solution
from adapters.transcripts import Debate
from adapters.transcripts import Turn as TranscriptTurn

__all__: list[str] = []


class Advantages(NamedTuple):
    """The advantage stage of an RL step (:func:`advantage_stage`): rows ``[PG]``, debates ``[P]``."""

    correct_PG: npt.NDArray[np.float64]  # 1.0 where the agent's last solution is the reference answer
    returns_PG: npt.NDArray[np.float64]  # peer-vote returns + correctness_weight · correct
    advantages_PG: npt.NDArray[np.float64]
    keep_P: npt.NDArray[np.bool_]  # debates kept by remove_constant_reward_groups (all without it)
    removed: int  # debates it removed
    baselines_K: npt.NDArray[np.float64]  # RAE's baselines after the step (the ones given, otherwise)


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
    """The kernel stages of an RL step's debates before its datums: replayed debates, numbers, advantages,
    and each accepted turn's token arrays (None where the rollout kept none)."""

    replayed: list[pipeline.ReplayedDebate]
    numeric: pipeline.NumericResult
    advantages: Advantages
    tokens: list[list[TurnArrays | None]]


def advantage_stage(
    config: TrainConfig,
    replayed: Sequence[pipeline.ReplayedDebate],
    played: Sequence[DebateResult],
    numeric: pipeline.NumericResult,
    baselines_K: npt.NDArray[np.float64],
) -> Advantages:
    """Correctness, returns and advantages of the replayed debates by the configured estimator (RAE from
    ``baselines_K``, returning the updated ones), and the debates that constant-group removal keeps."""
    c = config
    offsets = numeric.offsets_P1
    num_debates = len(replayed)
    correct = np.zeros(int(offsets[-1]), dtype=np.float64)
    for p, r in enumerate(replayed):
        answer = played[p].spec.answer
        for i in range(r.debate.num_agents):
            correct[offsets[p] + i] = float(is_correct(last_solution(r.state, i), answer))
    returns = numeric.returns_PG + c.correctness_weight * correct
    group_ids = numeric.pairwise.group_ids_PG
    if c.estimator == "rae":
        roles = np.concatenate([np.arange(n) for n in numeric.num_agents_P]).astype(np.int64)
        rae = kernel.rae_advantages(returns, roles, baselines_K, decay=c.rae_decay)
        advantages = np.asarray(rae.advantages, dtype=np.float64)
        baselines_K = np.asarray(rae.baselines_K, dtype=np.float64)
    else:
        _, opts = pipeline.resolve_estimator(c.estimator)
        where = spoke(played, offsets) if c.silent_agents == "exclude" else None
        advantages = np.asarray(
            kernel.grouped_advantages(returns, group_ids, num_debates, where=where, **opts).advantages,
            dtype=np.float64,
        )
    removed = 0
    keep_debate = np.ones(num_debates, dtype=bool)
    if c.remove_constant_reward_groups:
        keep = np.asarray(
            kernel.constant_group_keep_mask(returns, group_ids, num_debates, keep_one_if_all_constant=True)
        )
        keep_debate = np.bincount(group_ids[keep], minlength=num_debates)[:num_debates] > 0
        removed = int(num_debates - keep_debate.sum())
    if c.negative_advantages == "zero":
        advantages = np.maximum(advantages, 0.0)
    return Advantages(correct, returns, advantages, keep_debate, removed, baselines_K)


def rl_stages(
    config: TrainConfig, played: Sequence[DebateResult], baselines_K: npt.NDArray[np.float64]
) -> Stages | None:
    """Replay, votes, rewards, returns and advantages of the played debates (None when none replays)."""
    c = config
    options = pipeline.ScoreOptions(policy=c.parse_policy, reward=c.reward_mode, estimator="default")
    replayed = replay_rollouts(played, options, c.rollout_config.parse_failure_reward)
    if not replayed:
        return None
    numeric = pipeline.compute_numeric(replayed, options=options)
    advantages = advantage_stage(c, replayed, played, numeric, baselines_K)
    numeric = numeric._replace(returns_PG=advantages.returns_PG, advantages_PG=advantages.advantages_PG)
    tokens = [[played[p].turns[k].arrays for k in r.replay.accepted] for p, r in enumerate(replayed)]
    return Stages(replayed, numeric, advantages, tokens)


def rl_record(results: Sequence[DebateResult], stages: Stages | None) -> dict[str, Any]:
    """The metrics of an RL step's debates that its datums do not need."""
    record: dict[str, Any] = {"env/all/total_episodes": len(results)}
    if stages is None:
        return record
    a = stages.advantages
    record.update(
        batch_metrics(stages.replayed, stages.tokens, stages.numeric, a.advantages_PG, a.correct_PG)
    )
    record["data/constant_groups_removed"] = a.removed
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
    """The step's datums from its rollouts, with only what the datums need before the submission, and
    RAE's baselines after the step (``baselines_K`` unchanged under other estimators or when no debate
    replays).

    The turns' tokens go straight from the rollouts into one ``kernel.build_datums`` call (no
    transcripts), and the metrics that the datums do not need are left to :meth:`Prepared.finish`
    (``record=False``: none, for a part of a streamed step). The same datums and record as replaying
    the transcripts through the scoring pipeline (``tests/test_train_prepare.py``)."""
    c = config
    stages = rl_stages(c, played, baselines_K)
    if stages is None:
        return Prepared([], [], rl_record(results, None) if record else {}, [], []), baselines_K
    credit = (
        None
        if c.credit == "turn"
        else functools.partial(credit_weights, renderer, mode=c.credit, policy=c.parse_policy)
    )
    arrays = rollout_datums(stages.replayed, stages.tokens, stages.numeric, credit)
    data: list[tinker.Datum] = []
    kept: list[int] = []
    if arrays is not None:
        batch = kernel.DatumBatch(*(arrays[name] for name in kernel.DatumBatch._fields))
        converted = datums_to_tinker(batch, copy=False)  # the batch is ours alone: lent, not copied
        keep_D = stages.advantages.keep_P[arrays["debate_D"]].tolist()
        for d, datum in enumerate(converted):
            if keep_D[d]:
                data.append(datum)
                kept.append(d)
    episodes = {"env/all/total_episodes": len(results)}
    prepared = Prepared(data, split_substeps(data, c.num_substeps), episodes, [], [])

    def finish() -> None:
        if arrays is not None:
            bounds = arrays["offsets_D1"].tolist()
            lps, mask = arrays["logprobs"], arrays["mask"]
            for d in kept:
                s, e = bounds[d], bounds[d + 1]
                prepared.sampler_logprobs.append(np.asarray(lps[s:e], dtype=np.float32))
                prepared.masks.append(np.asarray(mask[s:e], dtype=bool))
        if record:
            prepared.record.update(rl_record(results, stages))

    prepared.deferred = finish
    return prepared, stages.advantages.baselines_K


def batch_metrics(
    replayed: Sequence[pipeline.ReplayedDebate],
    tokens: Sequence[Sequence[TurnArrays | None]],
    numeric: pipeline.NumericResult,
    advantages: npt.NDArray[np.float64],
    correct: npt.NDArray[np.float64],
) -> dict[str, Any]:
    """The ``env/*`` and ``advantage/*`` metrics of a step's replayed debates (REFERENCE.md's names)."""
    parse_error: list[bool] = []
    consensus: list[bool] = []
    rounds: list[int] = []
    ob: list[int] = []
    ac: list[int] = []
    turn_ep: list[int] = []
    for p, r in enumerate(replayed):
        for k, turn in zip(r.replay.accepted, tokens[p], strict=True):
            parse_error.append(not r.parsed[k].ok)
            consensus.append(r.state.consensus)
            rounds.append(k // r.debate.num_agents)
            ob.append(0 if turn is None else len(turn[0]))
            ac.append(0 if turn is None else len(turn[1]))
            turn_ep.append(p)
    sm = kernel.step_metrics(parse_error, consensus, rounds)
    tm = kernel.trajectory_metrics(
        np.asarray(ob, dtype=np.int64),
        np.asarray(ac, dtype=np.int64),
        np.asarray(turn_ep, dtype=np.int64),
        numeric.returns_PG,
        numeric.pairwise.group_ids_PG,
        len(replayed),
    )
    pw = numeric.pairwise
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


def replay_rollouts(
    played: Sequence[DebateResult], options: pipeline.ScoreOptions, rollout_failure_reward: float
) -> list[pipeline.ReplayedDebate]:
    """``pipeline.replay_debates`` of the rollouts' transcripts, without replaying where the rollout's
    own run of the state machine is the replay: a debate the sampler did not abort, rolled out with the
    scoring's parse-failure reward, has every turn accepted with the reward ``submit`` gave it, and ends
    in the rollout's final state. Their ``debate`` holds the turns without tokens (datums and metrics
    take the tokens from the rollout turns). One entry per debate, in order: a rollout that does not
    replay (the same state machine ran it, so a bug) raises ``RuntimeError`` rather than being dropped,
    which would also pair every later debate with the wrong rollout."""
    out: list[pipeline.ReplayedDebate] = []
    for r in played:
        skeleton = Debate(
            id=r.spec.id or f"debate-{r.index}",
            question=r.spec.question,
            num_agents=r.state.num_agents,
            turns=tuple(TranscriptTurn(agent=t.agent_id, text=t.text, round=t.round) for t in r.turns),
            max_rounds=r.state.max_rounds,
        )
        parsed = tuple(t.parsed for t in r.turns)
        own_run = r.end_reason in ("consensus", "max_rounds", "parse_failure")
        if own_run and rollout_failure_reward == options.parse_failure_reward:
            replay = kernel.ReplayResult(
                r.state, tuple(t.reward for t in r.turns), tuple(range(len(r.turns))), ()
            )
            out.append(pipeline.ReplayedDebate(skeleton, parsed, replay, pipeline.end_reason(r.state)))
        else:
            replayed, errors = pipeline.replay_debates([skeleton], [parsed], options=options)
            if errors or len(replayed) != 1:  # the rollout ran the same machine: a bug, not bad input
                raise RuntimeError(
                    f"rollout {skeleton.id!r} does not replay: {errors[0] if errors else replayed}"
                )
            out.extend(replayed)
    return out


def rollout_datums(
    replayed: Sequence[pipeline.ReplayedDebate],
    tokens: Sequence[Sequence[TurnArrays | None]],
    numeric: pipeline.NumericResult,
    credit: Callable[[npt.NDArray[np.integer[Any]]], npt.NDArray[np.float64]] | None = None,
) -> dict[str, npt.NDArray[Any]] | None:
    """``pipeline.build_datums(...).arrays`` (robust mode) from the rollout turns' token arrays: each
    (debate, agent) with a turn that has tokens is one trajectory of those turns, advantage the agent's;
    the trajectories are packed by concatenating arrays rather than from Python lists. ``credit`` maps a
    turn's action tokens to their shares of its advantage (``kernel.build_datums``'s ``ac_weights``);
    None gives every action token all of it."""
    obs: list[npt.NDArray[np.integer[Any]]] = []
    acs: list[npt.NDArray[np.integer[Any]]] = []
    lps: list[npt.NDArray[np.floating[Any]]] = []
    counts: list[int] = []
    rows: list[int] = []
    origin: list[tuple[int, int]] = []
    for p, r in enumerate(replayed):
        n = r.debate.num_agents
        per_agent: list[list[TurnArrays]] = [[] for _ in range(n)]
        for k, turn in zip(r.replay.accepted, tokens[p], strict=True):
            if turn is not None:
                per_agent[r.debate.turns[k].agent].append(turn)
        base = int(numeric.offsets_P1[p])
        for i, turns in enumerate(per_agent):
            if turns:
                for ob, ac, lp in turns:
                    obs.append(ob)
                    acs.append(ac)
                    lps.append(lp)
                counts.append(len(turns))
                rows.append(base + i)
                origin.append((p, i))
    if not rows:
        return None
    advantages_B = np.asarray(numeric.advantages_PG, dtype=np.float64)[np.asarray(rows, dtype=np.int64)]
    trajectories = pack_trajectories(obs, acs, lps, [True] * len(obs), counts, advantages_B)
    weights = None if credit is None else np.concatenate([credit(ac) for ac in acs])
    d = kernel.build_datums(trajectories, mode="robust", ac_weights=weights).datums
    where = np.asarray(origin, dtype=np.int64).reshape(-1, 2)
    arrays: dict[str, npt.NDArray[Any]] = {name: np.asarray(getattr(d, name)) for name in d._fields}
    arrays["debate_D"] = where[d.traj_ids_D, 0]
    arrays["agent_D"] = where[d.traj_ids_D, 1]
    return arrays


def spoke(played: Sequence[DebateResult], offsets_P1: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """bool [R]: whether each agent row took at least one turn in its debate."""
    spoke = np.zeros(int(offsets_P1[-1]), dtype=bool)
    for p, result in enumerate(played):
        for turn in result.turns:
            spoke[int(offsets_P1[p]) + turn.agent_id] = True
    return spoke


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
