"""A training step's data from its rollouts, with no I/O: the datums the loop sends, the metrics it records.

RL steps (:func:`prepare_rl`): the played debates become the kernel's episodes (each turn as the
rollout's own run of the state machine gave it, its token arrays, each agent's correctness) and go
through the kernel's one scoring core, :func:`kernel.score_episodes` (votes, pairwise rewards, returns
plus ``correctness_weight × correct``, advantages by the configured estimator or RAE baselines,
constant-group removal, one ``kernel.build_datums`` call), the same core ``debate-kernel score`` runs on
transcripts; the datums are converted to ``tinker.Datum`` and split into the substeps. Warm-start steps
(:func:`prepare_warm`): cross-entropy datums of well-formed turns on the batch's questions.

The loop's shell (:mod:`adapters.training.train`) calls these with its config, renderer and RAE baselines
and sends what they return; nothing here awaits, reads a clock or writes a file. RAE's baselines are
state carried from step to step: :func:`prepare_rl` takes them and returns the updated ones.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

import kernel
from adapters.answers import is_correct
from adapters.tinker.convert import datums_to_tinker
from adapters.tinker.renderers import Renderer
from adapters.training.config import TrainConfig
from adapters.training.credit import credit_fields, credit_weights
from adapters.training.dataset import Question
from adapters.training.rollouts import END_REASONS, DebateResult, last_solution

__all__: list[str] = []

SERVICE_ENDS: Final = frozenset(
    {"sampler_error", "sampler_timeout", "sampler_cancelled", "sampler_bad_reply"}
)
"""End reasons of debates the service ended (``env/all/ended_early``)."""


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
    (:func:`adapters.training.credit.credit_weights`); with judge rewards credited by field, each turn's
    field codes (:func:`adapters.training.credit.credit_fields`); each turn's sampled sequence, an index
    into :func:`sequence_ids` of ``played`` (the datums' provenance spans name them)."""
    credit = config.credit != "turn"
    out: list[kernel.Episode] = []
    first = 0  # the index of the debate's first turn among the turns of every played debate
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
        judge = config.scoring_options.judge
        fields = (
            tuple(
                None if t.arrays is None else credit_fields(renderer, t.arrays[1], policy=config.parse_policy)
                for t in r.turns
            )
            if judge is not None and judge.credit == "fields"
            else ()
        )
        tokens = tuple(t.arrays for t in r.turns)
        sequences = tuple(first + k if t.sequence.sequence_id else -1 for k, t in enumerate(r.turns))
        first += len(r.turns)
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
                group=r.spec.group,
                fields_T=fields,
                sequences_T=sequences,
            )
        )
    return out


def _check_spans(data: Sequence[types.Datum]) -> None:
    """Refuses, before anything is sent, a ``stable_reinforce`` batch with a datum that has no provenance
    spans (as cookbook 0.6.1 does; Tinker refuses it too)."""
    missing = [d for d, datum in enumerate(data) if not datum.loss_fn_input_spans]
    if missing:
        raise ValueError(
            f"loss_fn 'stable_reinforce' needs provenance spans on every datum, and datum {missing[0]} of "
            f"the batch ({len(missing)} of {len(data)}) has none: its turns carry no sequence ids (the "
            "sampler returned none, or the turns came from a transcript without them)"
        )


def sequence_ids(played: Sequence[DebateResult]) -> list[str]:
    """The SDK's sequence id of every turn of ``played``, debates and turns in order (``""`` where the
    sampler gave none): what :func:`episodes_of`'s ``sequences_T`` index."""
    return [t.sequence.sequence_id or "" for r in played for t in r.turns]


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


def token_counts(results: Sequence[DebateResult]) -> dict[str, int]:
    """The step's sampling, in tokens: ``tokens/prompt`` (every turn's prompt), ``tokens/prompt_cached``
    (those the service billed as prefix-cache hits, where it reports them) and ``tokens/sampled``."""
    prompt = cached = sampled = 0
    for r in results:
        for t in r.turns:
            prompt += t.prompt.length
            cached += t.cache_hits
            sampled += len(t.arrays[1]) if t.arrays is not None else len(t.sequence.tokens)
    return {"tokens/prompt": prompt, "tokens/prompt_cached": cached, "tokens/sampled": sampled}


def rl_record(results: Sequence[DebateResult], stages: Stages | None) -> dict[str, Any]:
    """The metrics of an RL step's debates that its datums do not need."""
    record: dict[str, Any] = {"env/all/total_episodes": len(results), **token_counts(results)}
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
    data = (  # the datums are ours alone: lent; each with provenance spans where its turns have ids
        []
        if built is None
        else datums_to_tinker(built.datums, copy=False, spans=built.spans, sequence_ids=sequence_ids(played))
    )
    if c.loss_fn == "stable_reinforce":
        _check_spans(data)
    if built is not None and c.loss_fn == "gspo":  # the sequence ratio over the sampled tokens alone
        add_ratio_masks(data, built.datums)
    trained = 0 if built is None else int(built.datums.offsets_D1[-1])
    episodes = {"env/all/total_episodes": len(results), "tokens/trained": trained}
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


def add_ratio_masks(data: Sequence[tinker.Datum], datums: kernel.DatumBatch) -> None:
    """Gives each datum Tinker's ``sequence_ratio_mask`` (float32, 1 on its action tokens), which GSPO's
    sequence ratio averages over: without it a service may take every position, the prompt's included."""
    bounds = datums.offsets_D1.tolist()
    for d, datum in enumerate(data):
        mask = np.asarray(datums.mask[bounds[d] : bounds[d + 1]], dtype=np.float32)
        datum.loss_fn_inputs["sequence_ratio_mask"] = types.TensorData.from_numpy(mask)


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
        **({} if scored.judge is None else _judge_metrics(scored.judge, len(episodes))),
    }


def _judge_metrics(judge: kernel.JudgeStepRewards, debates: int) -> dict[str, Any]:
    """The judge-reward streams of a step (``judge_rewards`` on): the reference's ``reward/gen/*``,
    ``reward/judge/*`` (mean and population std over every step of every agent), ``total_votes`` and
    ``missing_comparisons`` (format penalties) per debate, and ours: the comparisons scored per debate and
    the share of them that agreed with the other judges (``agreement``, NaN when none was scored)."""
    scored = int(np.count_nonzero(judge.scored_V))
    per = max(debates, 1)

    def stats(x: npt.NDArray[np.float64]) -> tuple[float, float]:
        return (float(np.mean(x)), float(np.std(x))) if x.size else (math.nan, math.nan)

    (gen_mean, gen_std), (judge_mean, judge_std) = stats(judge.generator_N), stats(judge.judge_N)
    return {
        "env/all/reward/gen/mean": gen_mean,
        "env/all/reward/gen/std": gen_std,
        "env/all/reward/judge/mean": judge_mean,
        "env/all/reward/judge/std": judge_std,
        "env/all/reward/total_votes": int(np.count_nonzero(judge.vote_V)) / per,
        "env/all/reward/missing_comparisons": int(np.count_nonzero(judge.penalised_U)) / per,
        "env/all/reward/judge/scored": scored / per,
        "env/all/reward/judge/agreement": (
            int(np.count_nonzero(judge.scores > 0)) / scored if scored else math.nan
        ),
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
    record: dict[str, Any] = {"env/all/total_episodes": 0, **token_counts(()), "tokens/trained": 0}
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
    record["tokens/trained"] = int(bounds[-1])
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


def kl_penalized(
    advantages: Sequence[npt.NDArray[np.float32]],
    sampler_logprobs: Sequence[npt.NDArray[Any]],
    reference_logprobs: Sequence[npt.NDArray[Any]],
    masks: Sequence[npt.NDArray[np.bool_]],
    beta: float,
) -> tuple[list[npt.NDArray[np.float32]], float, int]:
    """The KL penalty on a step's datums (tinker-cookbook's ``incorporate_kl_penalty``): with
    KL_t = lp_sampler − lp_reference on action tokens (``mask``),

        A_t ← A_t + β·(mean KL − KL_t),   mean over every action token of the datums given

    (a streamed step's part: over the part). Returns the new advantages (float32, one array per datum),
    Σ KL_t and the action-token count.

    Examples:
        >>> adv = [np.zeros(3, np.float32)]
        >>> out, total, n = kl_penalized(adv, [np.array([-1.0, -1.0, -2.0])], [np.array([0.0, -1.5, -1.0])],
        ...                              [np.array([False, True, True])], 0.5)
        >>> out[0].tolist(), total, n
        ([0.0, -0.375, 0.375], -0.5, 2)
    """
    diffs = [
        np.where(m, np.asarray(lp, np.float64) - np.asarray(ref, np.float64), 0.0)
        for lp, ref, m in zip(sampler_logprobs, reference_logprobs, masks, strict=True)
    ]
    total = sum(float(d.sum()) for d in diffs)
    count = sum(int(m.sum()) for m in masks)
    mean = total / max(count, 1)
    out = [
        (np.asarray(a, np.float32) + np.where(m, beta * (mean - d), 0.0).astype(np.float32)).astype(
            np.float32
        )
        for a, d, m in zip(advantages, diffs, masks, strict=True)
    ]
    return out, total, count


def mean_loss(outputs: Sequence[types.ForwardBackwardOutput], data: Sequence[tinker.Datum]) -> float:
    """The step's loss per trained token: Σ ``loss:sum`` over its substeps ÷ the tokens with a nonzero
    weight (cross-entropy) or advantage (policy gradient); NaN when no output reports ``loss:sum``."""
    sums = [out.metrics["loss:sum"] for out in outputs if "loss:sum" in out.metrics]
    if not sums:
        return math.nan
    tokens = 0
    for datum in data:
        inputs = datum.loss_fn_inputs
        name = "weights" if "weights" in inputs else "advantages" if "advantages" in inputs else None
        tokens += int(np.count_nonzero(inputs[name].to_numpy())) if name else len(datum.model_input.to_ints())
    return float(sum(sums)) / max(tokens, 1)


def train_metrics(
    outputs: Sequence[types.ForwardBackwardOutput],
    data: Sequence[tinker.Datum],
    sampler_logprobs: Sequence[npt.NDArray[Any]],
    masks: Sequence[npt.NDArray[np.bool_]],
) -> dict[str, Any]:
    """``optim/loss`` (:func:`mean_loss`) and, from the trained logprobs the outputs return against the
    sampler's, ``optim/kl_sample_train_v1`` / ``_v2`` and ``optim/entropy``
    (:func:`kernel.kl_sample_train`) over the action tokens alone, as the reference computes them.
    {} without outputs; only the loss when the outputs do not give one logprob array per datum.

    Raises:
        ValueError: a datum's returned logprobs of another shape than its targets (naming the datum).
    """
    if not outputs:
        return {}
    record: dict[str, Any] = {"optim/loss": mean_loss(outputs, data)}
    if not sampler_logprobs:
        return record
    train_lps = [np.asarray(o["logprobs"].to_numpy()) for out in outputs for o in out.loss_fn_outputs]
    if len(train_lps) != len(sampler_logprobs):
        return {}
    for d, (t, m) in enumerate(zip(train_lps, masks, strict=True)):
        if t.shape != m.shape:
            raise ValueError(
                f"the service returned logprobs of shape {t.shape} for datum {d}, whose targets have "
                f"shape {m.shape}"
            )
    # over the action tokens alone (a tenth of a step's tokens: the whole 1.6 M-token arrays cost
    # 20-60 ms on the event loop while the next batch samples)
    sampler_A = np.concatenate([lp[m] for lp, m in zip(sampler_logprobs, masks, strict=True)])
    train_A = np.concatenate([lp[m] for lp, m in zip(train_lps, masks, strict=True)])
    kl = kernel.kl_sample_train(sampler_A, train_A, np.ones(sampler_A.shape, dtype=bool))
    return {
        **record,
        "optim/kl_sample_train_v1": float(kl.kl_sample_train_v1),
        "optim/kl_sample_train_v2": float(kl.kl_sample_train_v2),
        "optim/entropy": float(kl.entropy),
    }


def empty_reasons(record: dict[str, Any]) -> dict[str, int]:
    """Why an RL step's metrics ``record`` had nothing to train: its debates the service ended, by end
    reason, those that ended on a parse failure, and the constant groups removed.

    Examples:
        >>> why = empty_reasons({"env/all/end/sampler_error": 2, "data/constant_groups_removed": 1})
        >>> why["sampler_error"], why["constant_groups_removed"], why["parse_failure"]
        (2, 1, 0)
    """
    why: dict[str, int] = {
        r: int(record.get(f"env/all/end/{r}") or 0) for r in END_REASONS if r in SERVICE_ENDS
    }
    why["parse_failure"] = int(record.get("env/all/end/parse_failure") or 0)
    why["constant_groups_removed"] = int(record.get("data/constant_groups_removed") or 0)
    return why


def dominant_reason(empty_steps: Sequence[dict[str, int]]) -> tuple[str, int]:
    """The reason that ended the most debates or groups over consecutive empty steps
    (:func:`empty_reasons` each), and its count; ``("no_action_tokens", 0)`` when none counts.

    Examples:
        >>> steps = [{"sampler_error": 1, "parse_failure": 2}, {"sampler_error": 3, "parse_failure": 0}]
        >>> dominant_reason(steps)
        ('sampler_error', 4)
        >>> dominant_reason([{"parse_failure": 0}])
        ('no_action_tokens', 0)
    """
    totals: dict[str, int] = {}
    for counts in empty_steps:
        for reason, n in counts.items():
            totals[reason] = totals.get(reason, 0) + n
    if not totals:
        return "no_action_tokens", 0
    reason, n = max(totals.items(), key=lambda kv: kv[1])
    return (reason, n) if n else ("no_action_tokens", 0)
