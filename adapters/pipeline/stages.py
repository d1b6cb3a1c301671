"""The scoring stages: transcripts → parsed turns → replayed episodes → votes → rewards → returns →
advantages → datums, and :func:`score` / :func:`score_chunks`, which run them all.

Host work (parsing every turn, replaying every debate through the kernel's state machine) runs per turn;
every numeric stage runs once for the whole batch: one :class:`~kernel.VoteArrays` for all debates, one
``validate_votes``, one ``pairwise_rewards``, one ``grouped_advantages`` and one datum build, with the
debates' agents as packed rows (debate-major, agent-minor), as everywhere in the kernel. Each stage is
its own function so that benchmarks can time them apart.
"""

from __future__ import annotations

import math
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

import kernel
from adapters._json import round_or_none
from adapters.pipeline.estimator_spec import resolve_estimator
from adapters.transcripts import Debate, LineReader, LineTooLarge, TranscriptError, check_debates
from kernel import DebateState, PairwiseRewards, ParsedResponse, ReplayResult, VoteArrays, VoteValidation
from kernel.checks import check_each, check_type

__all__ = [
    "AFTER_END_POLICIES",
    "DEFAULT_CHUNK_SIZE",
    "END_REASONS",
    "ROUND1_VOTE_POLICIES",
    "AfterEnd",
    "BatchResult",
    "DatumOutput",
    "NumericResult",
    "ReplayedDebate",
    "Round1Votes",
    "ScoreOptions",
    "batch_wide",
    "build_datums",
    "compute_numeric",
    "end_reason",
    "parse_turns",
    "replay_debates",
    "score",
    "score_chunks",
]


AfterEnd = Literal["error", "truncate"]
"""What to do with turns recorded after the debate ended under the chosen parse policy."""
AFTER_END_POLICIES: Final[tuple[AfterEnd, ...]] = typing.get_args(AfterEnd)
"""The values of :data:`AfterEnd`."""

Round1Votes = Literal["count", "drop"]
"""Round-1 votes naming an agent who had not spoken yet: counted (the reference) or dropped."""
ROUND1_VOTE_POLICIES: Final[tuple[Round1Votes, ...]] = typing.get_args(Round1Votes)
"""The values of :data:`Round1Votes`."""

END_REASONS = ("consensus", "max_rounds", "parse_error", "open")
"""How a scored debate ended: every agent of a round said YES; the round limit; a response failed to
parse (step reward −1, the episode ends); or the transcript stops before the episode ended."""


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """Options of the scoring pipeline (the CLI flags of ``debate-kernel score``).

    Attributes:
      policy: parse policy, one of ``kernel.PARSE_POLICIES`` (``"robust"`` or ``"reference"``).
      reward: pairwise reward mode, ``"win_rate"`` or ``"win_minus_loss"``.
      estimator: advantage estimator: a preset name of ``kernel.ADVANTAGE_PRESETS``, optionally followed
        by ``,key=value`` overrides, or only ``key=value`` options (see :func:`resolve_estimator`).
      after_end: ``"error"`` (a debate with turns after its end is skipped, with an error naming the turn)
        or ``"truncate"`` (those turns are ignored and counted).
      round1_votes: ``"count"`` (the reference: every vote counts) or ``"drop"`` (round-1 votes naming an
        agent who had not spoken yet are removed and counted per debate).
      parse_failure_reward: step reward of a response that fails to parse (reference −1).
      datum_mode: ``kernel.build_datums`` mode: ``"robust"`` (a bad segment loses only itself) or
        ``"reference"`` (a trajectory with any problem gives no datum).
    """

    policy: Literal["robust", "reference"] = "robust"
    reward: Literal["win_rate", "win_minus_loss"] = "win_rate"
    estimator: str = "default"
    after_end: AfterEnd = "error"
    round1_votes: Round1Votes = "count"
    parse_failure_reward: float = -1.0
    datum_mode: Literal["reference", "robust"] = "robust"


# ------------------------------------------------------------------------------------------------
# Stage 1: parse every turn


def parse_turns(
    debates: Sequence[Debate], *, policy: Literal["robust", "reference"] = "robust"
) -> list[tuple[ParsedResponse, ...]]:
    """Parses every turn of every debate with ``kernel.parse_response`` (author = the turn's agent).

    Returns:
      For each debate, one ``ParsedResponse`` per turn, in order.

    Examples:
      >>> from adapters.transcripts import Turn
      >>> votes = ["Agent 1 > Agent 2", "Agent 0 > Agent 2", "Agent 0 = Agent 1"]  # agent i's vote
      >>> texts = [kernel.render_response(solution="4", evaluation="N/A", comparisons=v, consensus=False,
      ...                                 consensus_reason="Not sure yet.") for v in votes]
      >>> d = Debate("q1", "2 + 2?", num_agents=3, turns=tuple(map(Turn, range(3), texts)), max_rounds=1)
      >>> (parsed,) = parse_turns([d])
      >>> [p.ok for p in parsed], parsed[0].solution, parsed[0].votes
      ([True, True, True], '4', (Vote(a=1, op='>', b=2),))
    """
    check_each(debates, Debate, "debates")
    parse = kernel.parse_response
    return [tuple(parse(t.text, t.agent, policy=policy) for t in d.turns) for d in debates]


# ------------------------------------------------------------------------------------------------
# Stage 2: replay through the episode state machine


@dataclass(frozen=True, slots=True)
class ReplayedDebate:
    """One debate after replay.

    Attributes:
      debate: the transcript.
      parsed: one ParsedResponse per transcript turn.
      replay: the kernel's ``ReplayResult`` (final state, step rewards, accepted and rejected turns).
      end: one of :data:`END_REASONS`.
      ignored_turns: indices of turns after the end that were ignored (``after_end="truncate"`` only).
    """

    debate: Debate
    parsed: tuple[ParsedResponse, ...]
    replay: ReplayResult
    end: str
    ignored_turns: tuple[int, ...] = ()

    @property
    def state(self) -> DebateState:
        """The final ``DebateState``."""
        return self.replay.state

    @property
    def num_rounds(self) -> int:
        """Rounds played, the last possibly partial (⌈accepted turns / N⌉, counting a failed turn)."""
        n = self.debate.num_agents
        played = len(self.replay.accepted)
        return (played + n - 1) // n

    @property
    def parse_failures(self) -> tuple[tuple[int, int, str], ...]:
        """``(turn index, agent, reason)`` of each accepted turn that failed to parse (at most one)."""
        return tuple(
            (k, self.debate.turns[k].agent, self.parsed[k].reason)
            for k in self.replay.accepted
            if not self.parsed[k].ok
        )


def end_reason(state: DebateState) -> str:
    """``ReplayedDebate.end`` of a replayed state: one of :data:`END_REASONS`.

    Examples:
      >>> end_reason(kernel.initial_state("2 + 2?", num_agents=2, max_rounds=1))
      'open'
    """
    check_type(state, DebateState, "state")
    if state.consensus:
        return "consensus"
    if state.parse_failed:
        return "parse_error"
    if state.done:
        return "max_rounds"
    return "open"


def _describe_end(debate: Debate, replayed: ReplayResult, k_end: int) -> str:
    state = replayed.state
    if state.consensus:
        return f"every agent said consensus YES in round {state.turn // debate.num_agents - 1}"
    if state.parse_failed:
        return f"turns[{k_end}] failed to parse ({state.abort_reason}), which ends the episode"
    return f"max_rounds={debate.max_rounds} was reached"


def replay_debates(
    debates: Sequence[Debate],
    parsed: Sequence[Sequence[ParsedResponse]],
    *,
    options: ScoreOptions = ScoreOptions(),
) -> tuple[list[ReplayedDebate], list[TranscriptError]]:
    """Re-runs every debate through ``kernel.replay`` (turn order, the stop rule, −1 on a parse failure).

    A transcript without ``max_rounds`` is replayed with no round limit (only consensus or a parse
    failure end it; otherwise it ends ``"open"``).

    Returns:
      The replayed debates (input order), and one error per debate that could not be scored (turns
      after the end under ``after_end="error"``).

    Examples:
      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
      >>> replayed, errors = replay_debates(debates, parse_turns(debates))
      >>> [(r.end, r.num_rounds) for r in replayed], errors
      ([('parse_error', 2), ('max_rounds', 1), ('consensus', 1), ('max_rounds', 1)], [])
      >>> d = debates[1]
      >>> import dataclasses
      >>> late = dataclasses.replace(d, turns=(*d.turns, d.turns[0]))  # a turn after the end
      >>> [e.reason for e in replay_debates([late], parse_turns([late]))[1]]
      ['turn_after_end']
    """
    check_each(debates, Debate, "debates")
    if options.after_end not in AFTER_END_POLICIES:
        raise ValueError(f"after_end must be one of {AFTER_END_POLICIES}, got {options.after_end!r}")
    out: list[ReplayedDebate] = []
    errors: list[TranscriptError] = []
    for debate, responses in zip(debates, parsed, strict=True):
        n = debate.num_agents
        limit = debate.max_rounds
        if limit is None:
            limit = -(-len(debate.turns) // n) + 1
        res = kernel.replay(
            debate.question,
            [(t.agent, p) for t, p in zip(debate.turns, responses, strict=True)],
            num_agents=n,
            max_rounds=limit,
            parse_failure_reward=options.parse_failure_reward,
        )
        over = [int(r[0]) for r in res.rejected if r.reason == "debate_over"]  # (turn index, agent, reason)
        other = [r for r in res.rejected if r.reason != "debate_over"]
        if other:  # the reader guarantees order and range, so this is a bug, reported as such
            r = other[0]
            errors.append(
                TranscriptError(
                    debate.line,
                    "rejected_turn",
                    f"the state machine rejected the turn ({r.reason})",
                    int(r[0]),
                    debate.id,
                )
            )
            continue
        if over and options.after_end == "error":
            k_end = res.accepted[-1]
            errors.append(
                TranscriptError(
                    debate.line,
                    "turn_after_end",
                    f"turn after the end: the debate ended after turns[{k_end}] "
                    f"({_describe_end(debate, res, k_end)}; parse policy {options.policy!r}), "
                    f"but {len(over)} more turn(s) follow (use --after-end truncate to ignore them)",
                    over[0],
                    debate.id,
                )
            )
            continue
        out.append(ReplayedDebate(debate, tuple(responses), res, end_reason(res.state), tuple(over)))
    return out, errors


# ------------------------------------------------------------------------------------------------
# Stage 3: votes, rewards, returns, advantages (vectorised over all debates)


class NumericResult(NamedTuple):
    """The batch's numbers; packed rows are debate-major (debate p's agents at ``offsets_P1[p]:+N_p``).

    Attributes:
      num_agents_P: int [P].
      offsets_P1: int [P+1], first packed row of each debate (and the total R at the end).
      votes: VoteArrays of every vote of every accepted response, debates in order.
      vote_offsets_P1: int [P+1], first vote row of each debate.
      validation: ``validate_votes`` on ``votes``.
      round1_dropped_V: bool [V], votes removed by ``round1_votes="drop"`` (all False otherwise).
      pairwise: ``PairwiseRewards`` (rewards_PG, group_ids_PG, total_votes_P, malformed_P, any_votes_P).
      step_rewards_PG: float [R], Σ of each agent's step rewards (−1 for a failed parse).
      returns_PG: float [R], total return = Σ step rewards + final pairwise reward.
      advantages_PG: float [R].
      estimator: ``(preset name, options)`` used.
    """

    num_agents_P: npt.NDArray[np.int64]
    offsets_P1: npt.NDArray[np.int64]
    votes: VoteArrays
    vote_offsets_P1: npt.NDArray[np.int64]
    validation: VoteValidation
    round1_dropped_V: npt.NDArray[np.bool_]
    pairwise: PairwiseRewards
    step_rewards_PG: npt.NDArray[np.float64]
    returns_PG: npt.NDArray[np.float64]
    advantages_PG: npt.NDArray[np.floating[Any]]
    estimator: tuple[str, dict[str, Any]]


def _step_rows(
    replayed: Sequence[ReplayedDebate], offsets: npt.NDArray[np.int64]
) -> tuple[list[int], list[float]]:
    rows: list[int] = []
    rewards: list[float] = []
    for p, r in enumerate(replayed):
        base = int(offsets[p])
        turns = r.debate.turns
        for k in r.replay.accepted:
            rows.append(base + turns[k].agent)
            rewards.append(r.replay.rewards[k])
    return rows, rewards


def _advantages(
    returns: npt.NDArray[np.float64],
    group_ids: npt.NDArray[np.int32],
    num_groups: int,
    estimator: tuple[str, dict[str, Any]],
) -> npt.NDArray[np.floating[Any]]:
    return np.asarray(kernel.grouped_advantages(returns, group_ids, num_groups, **estimator[1]).advantages)


def compute_numeric(
    replayed: Sequence[ReplayedDebate], *, options: ScoreOptions = ScoreOptions()
) -> NumericResult:
    """Votes, rewards, returns and advantages of all debates at once (one kernel call per stage).

    Returns:
      A :class:`NumericResult`.

    Examples:
      Two sample debates of 4 and 3 agents: rows 0-3 are the first debate's agents, rows 4-6 the second's.

      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:2]]
      >>> replayed, _ = replay_debates(debates, parse_turns(debates))
      >>> num = compute_numeric(replayed)
      >>> num.offsets_P1.tolist(), num.pairwise.total_votes_P.tolist(), num.returns_PG.tolist()
      ([0, 4, 7], [4, 1], [-0.5, 0.5, 0.5, 0.0, 0.5, 0.5, 0.0])
      >>> num.advantages_PG.round(4).tolist()
      [-0.625, 0.375, 0.375, -0.125, 0.1667, 0.1667, -0.3333]
    """
    check_each(replayed, ReplayedDebate, "replayed")
    num_agents = np.fromiter((r.debate.num_agents for r in replayed), dtype=np.int64, count=len(replayed))
    offsets = np.concatenate(([0], np.cumsum(num_agents))).astype(np.int64)
    num_debates = len(replayed)
    votes = kernel.votes_from_responses([r.state.responses for r in replayed])
    vote_counts = np.bincount(votes.group_ids_V, minlength=num_debates)[:num_debates]
    vote_offsets = np.concatenate(([0], np.cumsum(vote_counts))).astype(np.int64)
    dropped = np.zeros(votes.group_ids_V.shape[0], dtype=bool)
    if options.round1_votes == "drop":
        check = kernel.round1_vote_violations([r.state for r in replayed])
        dropped = ~np.asarray(check.valid_V, dtype=bool)
        # A padding row (group id P) takes no part in validation or rewards.
        votes = votes._replace(group_ids_V=np.where(dropped, num_debates, votes.group_ids_V).astype(np.int32))
    elif options.round1_votes not in ROUND1_VOTE_POLICIES:
        raise ValueError(f"round1_votes must be one of {ROUND1_VOTE_POLICIES}, got {options.round1_votes!r}")
    validation = kernel.validate_votes(votes, num_agents)
    pairwise = kernel.pairwise_rewards(votes, num_agents, mode=options.reward)
    rows, step = _step_rows(replayed, offsets)
    num_rows = int(offsets[-1])
    rows_T = np.asarray(rows, dtype=np.int64)
    step_T = np.asarray(step, dtype=np.float64)
    step_rewards = np.bincount(rows_T, weights=step_T, minlength=num_rows).astype(np.float64)
    returns = np.asarray(
        kernel.total_returns(step_T, rows_T, num_rows, pairwise.rewards_PG), dtype=np.float64
    )
    estimator = resolve_estimator(options.estimator)
    advantages = _advantages(returns, pairwise.group_ids_PG, num_debates, estimator)
    return NumericResult(
        num_agents,
        offsets,
        votes,
        vote_offsets,
        validation,
        dropped,
        pairwise,
        step_rewards,
        returns,
        advantages,
        estimator,
    )


# ------------------------------------------------------------------------------------------------
# Stage 4: datums (only for turns that carry tokens)


class DatumOutput(NamedTuple):
    """Token-level training data of the turns that carry tokens.

    Attributes:
      arrays: name → numpy array: the kernel's packed datums (``input_tokens``, ``target_tokens``,
        ``logprobs``, ``advantages``, ``mask``, ``offsets_D1``, ``traj_ids_D``) plus ``debate_D`` and
        ``agent_D`` (the debate index among the scored debates and the agent of each datum).
      stats: datums, tokens, action tokens, mean sampler logprob and entropy estimate (−mean logprob
        over action tokens), and the kernel's per-reason counts of trajectories without datums.
    """

    arrays: dict[str, npt.NDArray[Any]]
    stats: dict[str, Any]


def build_datums(
    replayed: Sequence[ReplayedDebate],
    numeric: NumericResult,
    *,
    mode: Literal["reference", "robust"] = "robust",
) -> DatumOutput | None:
    """Datums of all turns that carry tokens, with one ``kernel.build_datums`` call for the batch.

    Each (debate, agent) is one trajectory whose transitions are that agent's accepted turns with tokens
    (debate turns are re-rendered from scratch, so each turn normally becomes its own datum) and whose
    advantage is the agent's advantage. A turn that failed to parse stays trainable with the agent's
    advantage, as in the reference: its −1 is part of the return.

    Returns:
      A :class:`DatumOutput`, or None when no turn carries tokens.

    Examples:
      >>> from adapters.transcripts import Turn
      >>> votes = ["Agent 1 > Agent 2", "Agent 0 > Agent 2", "Agent 0 = Agent 1"]  # agent i's vote
      >>> texts = [kernel.render_response(solution="4", evaluation="N/A", comparisons=v, consensus=False,
      ...                                 consensus_reason="Not sure yet.") for v in votes]
      >>> d = Debate("q1", "2 + 2?", num_agents=3, turns=tuple(map(Turn, range(3), texts)), max_rounds=1)
      >>> import dataclasses
      >>> t0 = dataclasses.replace(d.turns[0], observation_tokens=(1, 2, 3), action_tokens=(4, 5),
      ...                          logprobs=(-0.5, -1.0))  # agent 0's turn with its tokens
      >>> d = dataclasses.replace(d, turns=(t0, *d.turns[1:]))
      >>> replayed, _ = replay_debates([d], parse_turns([d]))
      >>> out = build_datums(replayed, compute_numeric(replayed))
      >>> out.stats["datums"], out.arrays["input_tokens"].tolist(), out.arrays["advantages"].tolist()
      (1, [1, 2, 3, 4], [0.0, 0.0, 0.25, 0.25])
    """
    check_each(replayed, ReplayedDebate, "replayed")
    check_type(numeric, NumericResult, "numeric")
    transitions: list[list[tuple[Sequence[int], Sequence[int], Sequence[float] | None]]] = []
    rows: list[int] = []
    origin: list[tuple[int, int]] = []
    for p, r in enumerate(replayed):
        n = r.debate.num_agents
        per_agent: list[list[tuple[Sequence[int], Sequence[int], Sequence[float] | None]]] = [
            [] for _ in range(n)
        ]
        any_tokens = False
        for k in r.replay.accepted:
            t = r.debate.turns[k]
            if t.action_tokens is not None:
                per_agent[t.agent].append((t.observation_tokens or (), t.action_tokens, t.logprobs))
                any_tokens = True
        if not any_tokens:
            continue
        base = int(numeric.offsets_P1[p])
        for i, trs in enumerate(per_agent):
            if trs:
                transitions.append(trs)
                rows.append(base + i)
                origin.append((p, i))
    if not transitions:
        return None
    advantages_B = np.asarray(numeric.advantages_PG, dtype=np.float64)[np.asarray(rows, dtype=np.int64)]
    trajectories = kernel.trajectories_from_lists(transitions, advantages_B)
    built = kernel.build_datums(trajectories, mode=mode)
    d = built.datums
    where = np.asarray(origin, dtype=np.int64).reshape(-1, 2)
    arrays: dict[str, npt.NDArray[Any]] = {name: np.asarray(getattr(d, name)) for name in d._fields}
    arrays["debate_D"] = where[d.traj_ids_D, 0]
    arrays["agent_D"] = where[d.traj_ids_D, 1]
    rep = built.report
    counts = {"datums": int(rep.datums), "tokens": int(rep.tokens), "trajectories": int(rep.trajectories)}
    for name in DATUM_REASONS:
        counts[name] = int(getattr(rep, name))
    stats = datum_stats(counts, logprob_sums(arrays), mode)
    return DatumOutput(arrays, stats)


DATUM_REASONS: Final = ("short_segment", "logprob_count_mismatch", "missing_logprobs", "segments_dropped")
"""The counts of problems that ``kernel.build_datums`` reports, in the datum statistics."""


def logprob_sums(arrays: dict[str, npt.NDArray[Any]]) -> tuple[int, int, float]:
    """(action positions, exact Σ of their logprobs ×2¹⁷², Σ of the non-finite ones): partial sums that
    merge exactly across chunks, so the mean does not depend on how the datums were split."""
    mask = np.asarray(arrays["mask"], dtype=bool)
    lp = np.asarray(arrays["logprobs"], dtype=np.float64)[mask]
    finite = np.isfinite(lp)
    nonfinite = float(np.sum(lp[~finite])) if not finite.all() else 0.0
    return int(mask.sum()), _exact_sum(lp[finite]), nonfinite


def _exact_sum(x: npt.NDArray[np.float64]) -> int:
    """Σ x exactly, as an integer multiple of 2⁻¹⁷², for finite values that float32 holds exactly
    (the datums' logprobs): x = m·2^(e−24) with an integer m < 2²⁴, summed per exponent in int64."""
    if x.size == 0:
        return 0
    m, e = np.frexp(x)
    mant = np.round(m * 2.0**24).astype(np.int64)
    order = np.argsort(e, kind="stable")
    e_sorted = e[order]
    starts = np.flatnonzero(np.r_[True, e_sorted[1:] != e_sorted[:-1]])
    sums = np.add.reduceat(mant[order], starts)
    return sum(int(v) << (int(k) + 148) for v, k in zip(sums, e_sorted[starts], strict=True))


def datum_stats(counts: dict[str, int], sums: tuple[int, int, float], mode: str) -> dict[str, Any]:
    """The datum statistics of a run from its counts and :func:`logprob_sums` (merged exactly across
    chunks): datums, tokens, action tokens, mean logprob and entropy, and the problem counts."""
    n_action, exact, nonfinite = sums
    if not n_action:
        mean_lp = 0.0
    elif nonfinite != 0.0 or math.isnan(nonfinite):
        mean_lp = nonfinite  # ±inf or NaN, as a float mean would give
    else:
        mean_lp = exact / (n_action << 172)  # one correctly rounded division
    stats: dict[str, Any] = {
        "datums": counts["datums"],
        "tokens": counts["tokens"],
        "action_tokens": n_action,
        "mean_logprob": round_or_none(mean_lp),
        "entropy": round_or_none(-mean_lp),
        "trajectories": counts["trajectories"],
        "mode": mode,
    }
    for name in DATUM_REASONS:
        stats[name] = counts[name]
    return stats


# ------------------------------------------------------------------------------------------------
# Everything


@dataclass(frozen=True)
class BatchResult:
    """The outcome of :func:`score`: what was scored, what was skipped and why, and every number."""

    options: ScoreOptions
    replayed: tuple[ReplayedDebate, ...]
    numeric: NumericResult
    datums: DatumOutput | None
    errors: tuple[TranscriptError, ...]
    num_lines: int = 0
    num_blank: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def _skip_singletons(
    replayed: Sequence[ReplayedDebate],
) -> tuple[list[ReplayedDebate], list[TranscriptError]]:
    kept = [r for r in replayed if r.debate.num_agents > 1]
    errors = [
        TranscriptError(
            r.debate.line,
            "singleton_group",
            "the debate has one agent, a group of one, which the estimator's singleton='error' refuses "
            "(use singleton=zero or singleton=raw to score it)",
            None,
            r.debate.id,
        )
        for r in replayed
        if r.debate.num_agents == 1
    ]
    return kept, errors


def score(
    debates: Sequence[Debate],
    *,
    options: ScoreOptions = ScoreOptions(),
    read_errors: Sequence[TranscriptError] = (),
    num_lines: int = 0,
    num_blank: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    checked: bool = False,
) -> BatchResult:
    """Runs every stage on ``debates``; ``read_errors`` from the reader are carried into the result.

    With an estimator whose ``singleton`` is ``"error"``, a debate with one agent (a group of one) is
    skipped with the reason ``singleton_group`` instead of failing the batch.

    ``checked``: the debates come from the reader (:func:`read_transcripts`, :class:`LineReader`), which
    has checked them. By default each debate is checked as the reader checks a line
    (:func:`adapters.transcripts.check_debates`), and one that fails (a negative token id, no agents, a
    turn in the wrong round, …) is skipped with the reader's reason, as it would be in a file.

    Examples:
      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
      >>> import dataclasses
      >>> bad = dataclasses.replace(debates[1], id="bad", turns=debates[1].turns[1:])  # agent 1 speaks first
      >>> res = score([*debates, bad])
      >>> [r.debate.id for r in res.replayed][-1], res.numeric.returns_PG[-3:].tolist(), res.errors[0].reason
      ('sample-003-chemistry', [1.0, 0.0, 0.0], 'out_of_order')
    """
    timings: dict[str, float] = {}
    if not checked:
        debates, invalid = check_debates(debates)
        read_errors = [*read_errors, *invalid]
    t0 = clock()
    parsed = parse_turns(debates, policy=options.policy)
    t1 = clock()
    replayed, replay_errors = replay_debates(debates, parsed, options=options)
    if resolve_estimator(options.estimator)[1]["singleton"] == "error":
        replayed, singles = _skip_singletons(replayed)
        replay_errors += singles
    t2 = clock()
    numeric = compute_numeric(replayed, options=options)
    t3 = clock()
    datums = build_datums(replayed, numeric, mode=options.datum_mode)
    t4 = clock()
    timings.update(parse=t1 - t0, replay=t2 - t1, numeric=t3 - t2, datums=t4 - t3)
    errors = sorted([*read_errors, *replay_errors], key=lambda e: e.line)
    return BatchResult(
        options, tuple(replayed), numeric, datums, tuple(errors), num_lines, num_blank, timings
    )


DEFAULT_CHUNK_SIZE: Final = 2048
"""Debates per chunk of :func:`score_chunks`: large enough that the numeric stages run as batches, small
enough that a chunk's Python objects stay a few tens of MB."""


def batch_wide(options: ScoreOptions) -> bool:
    """Whether the estimator's advantages depend on every debate (``scale="batch"`` or ``"whiten"``), so
    the input cannot be scored in independent chunks.

    Examples:
      >>> batch_wide(ScoreOptions()), batch_wide(ScoreOptions(estimator="trl_grpo.batch"))
      (False, True)
    """
    check_type(options, ScoreOptions, "options")
    return resolve_estimator(options.estimator)[1]["scale"] in ("batch", "whiten")


def score_chunks(
    lines: Iterable[str | bytes | LineTooLarge],
    *,
    options: ScoreOptions = ScoreOptions(),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[BatchResult]:
    """Reads and scores a transcript chunk by chunk: one :func:`score` per ``chunk_size`` debates.

    Every figure of a debate depends only on that debate (votes, rewards and advantages are per debate
    group), so the chunks' records, in order, are a whole-file run's, whatever ``chunk_size``. The
    exception is an estimator with batch-wide statistics (``scale="batch"`` or ``"whiten"``): its
    advantages depend on every debate, so the whole input is one chunk. Each chunk carries the errors
    of the lines it read and the running line counts; feed the chunks to a :class:`ScoreAccumulator`
    for the summary and the datums.

    Args:
      lines: the transcript's lines (an open binary file, a list of str), read once, lazily.
      options: the scoring options.
      chunk_size: debates per chunk (≥ 1).
      clock: timer for the stage timings.

    Yields:
      One :class:`BatchResult` per chunk; at least one (empty when the input has no debate).

    Raises:
      ValueError: ``chunk_size`` < 1.

    Examples:
      >>> line = '{"id": "%s", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
      >>> chunks = list(score_chunks([line % "a", line % "b", "", line % "c"], chunk_size=2))
      >>> [[r.debate.id for r in c.replayed] for c in chunks], chunks[-1].num_lines
      ([['a', 'b'], ['c']], 4)
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if batch_wide(options):
        chunk_size = 2**62  # batch-wide statistics: one chunk
    reader = LineReader()
    debates: list[Debate] = []
    errors: list[TranscriptError] = []

    def scored() -> BatchResult:
        return score(
            debates,
            options=options,
            read_errors=errors,
            num_lines=reader.num_lines,
            num_blank=reader.num_blank,
            clock=clock,
            checked=True,
        )

    for raw in lines:
        got = reader.feed(raw)
        if got is None:
            continue
        if isinstance(got, TranscriptError):
            errors.append(got)
            continue
        debates.append(got)
        if len(debates) >= chunk_size:
            yield scored()
            debates, errors = [], []
    yield scored()
