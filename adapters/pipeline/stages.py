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
from adapters.pipeline.seen_ids import SeenIds
from adapters.transcripts import Debate, LineReader, LineTooLarge, TranscriptError, Turn, check_debates
from kernel import DebateState, Episode, ParsedResponse, ReplayResult, ScoredEpisodes, ScoringOptions
from kernel.checks import check_each, check_real, check_type

__all__ = [
    "AFTER_END_POLICIES",
    "DEFAULT_CHUNK_SIZE",
    "END_REASONS",
    "AfterEnd",
    "BatchResult",
    "DatumOutput",
    "ReplayedDebate",
    "ScoreOptions",
    "batch_wide",
    "datum_output",
    "end_reason",
    "episodes_of",
    "parse_turns",
    "replay_debates",
    "score",
    "score_chunks",
]


AfterEnd = Literal["error", "truncate"]
"""What to do with turns recorded after the debate ended under the chosen parse policy."""
AFTER_END_POLICIES: Final[tuple[AfterEnd, ...]] = typing.get_args(AfterEnd)
"""The values of :data:`AfterEnd`."""

END_REASONS = ("consensus", "max_rounds", "parse_error", "open")
"""How a scored debate ended: every agent of a round said YES; the round limit; a response failed to
parse (step reward −1, the episode ends); or the transcript stops before the episode ended."""


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """Options of the scoring pipeline (the CLI flags of ``debate-kernel score``): the kernel's
    :class:`~kernel.ScoringOptions`, plus how a transcript is replayed before it is scored.

    Attributes:
      scoring: parse policy, reward mode, estimator, round-1 votes, datum mode, ... (see
        :class:`kernel.ScoringOptions`).
      after_end: ``"error"`` (a debate with turns after its end is skipped, with an error naming the turn)
        or ``"truncate"`` (those turns are ignored and counted).
      parse_failure_reward: step reward of a response that fails to parse (reference −1).

    Examples:
      >>> ScoreOptions(kernel.ScoringOptions(parse_policy="reference")).scoring.parse_policy
      'reference'
    """

    scoring: ScoringOptions = ScoringOptions()  # noqa: RUF009 (frozen: one shared default is safe)
    after_end: AfterEnd = "error"
    parse_failure_reward: float = -1.0

    def __post_init__(self) -> None:
        check_type(self.scoring, ScoringOptions, "scoring")
        if self.after_end not in AFTER_END_POLICIES:
            raise ValueError(f"after_end must be one of {AFTER_END_POLICIES}, got {self.after_end!r}")
        check_real(self.parse_failure_reward, "parse_failure_reward", finite=True)


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

    The per-debate loops after the parse (here, ``kernel.replay`` building one state and checking each
    turn's types only where they are not plain, :func:`episodes_of` slicing the first turns,
    ``chunk_figures`` summing in locals, ``debate_records`` building each vote's entry once) save
    together: ``debate-kernel score --out`` of 30 k generated debates takes 0.945 × the CPU time it
    took at bcba405 (0.92-0.97, 5 interleaved pairs). Per 10 k debates, best of 3 in one process:
    replay 175 → 104 ms, episodes_of 64 → 46, chunk_figures 25 → 10, debate_records 225 → 190.

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
        over: list[int] = []
        other: list[kernel.RejectedTurn] = []
        for r in res.rejected:  # (turn index, agent, reason)
            if r.reason == "debate_over":
                over.append(int(r[0]))
            else:
                other.append(r)
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
                    f"({_describe_end(debate, res, k_end)}; parse policy {options.scoring.parse_policy!r}), "
                    f"but {len(over)} more turn(s) follow (use --after-end truncate to ignore them)",
                    over[0],
                    debate.id,
                )
            )
            continue
        out.append(ReplayedDebate(debate, tuple(responses), res, end_reason(res.state), tuple(over)))
    return out, errors


# ------------------------------------------------------------------------------------------------
# Stage 3: the kernel scores the episodes (votes, rewards, returns, advantages, datums)


def episodes_of(replayed: Sequence[ReplayedDebate]) -> list[Episode]:
    """The replayed debates as the kernel's :class:`~kernel.Episode` values: each accepted turn's agent,
    parse, step reward and tokens (a turn without ``action_tokens`` has none).

    Examples:
      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:2]]
      >>> replayed, _ = replay_debates(debates, parse_turns(debates))
      >>> scored = kernel.score_episodes(episodes_of(replayed))
      >>> scored.offsets_P1.tolist(), scored.returns_PG.tolist()
      ([0, 4, 7], [-0.5, 0.5, 0.5, 0.0, 0.5, 0.5, 0.0])
    """
    check_each(replayed, ReplayedDebate, "replayed")
    out: list[Episode] = []
    for r in replayed:
        turns, accepted, rewards = r.debate.turns, r.replay.accepted, r.replay.rewards
        m = len(accepted)
        if m and accepted[-1] == m - 1:  # the first m turns (the usual case): slices
            taken = turns[:m]
            agents = tuple([t.agent for t in taken])
            parsed, rewards = r.parsed[:m], rewards[:m]
        else:
            taken = tuple([turns[k] for k in accepted])
            agents = tuple([t.agent for t in taken])
            parsed, rewards = tuple([r.parsed[k] for k in accepted]), tuple([rewards[k] for k in accepted])
        tokens: tuple[kernel.TurnTokens | None, ...] = ()
        if any([t.action_tokens is not None for t in taken]):
            tokens = tuple([_turn_tokens(t) for t in taken])
        out.append(
            Episode(
                r.debate.num_agents, agents, parsed, rewards, consensus=r.state.consensus, tokens_T=tokens
            )
        )
    return out


def _turn_tokens(turn: Turn) -> kernel.TurnTokens | None:
    """A transcript turn's (observation, action, logprobs) tokens, or None when it has no tokens."""
    if turn.action_tokens is None:
        return None
    return (turn.observation_tokens or (), turn.action_tokens, turn.logprobs)


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


def datum_output(scored: ScoredEpisodes, mode: str) -> DatumOutput | None:
    """The datums of ``scored`` as arrays and statistics (None when no turn carried tokens).

    Each (debate, agent) is one trajectory of that agent's accepted turns with tokens (debate turns are
    re-rendered from scratch, so each turn normally becomes its own datum), with the agent's advantage.
    A turn that failed to parse stays trainable with the agent's advantage, as in the reference: its −1
    is part of the return.

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
      >>> out = datum_output(kernel.score_episodes(episodes_of(replayed)), "robust")
      >>> out.stats["datums"], out.arrays["input_tokens"].tolist(), out.arrays["advantages"].tolist()
      (1, [1, 2, 3, 4], [0.0, 0.0, 0.25, 0.25])
    """
    check_type(scored, ScoredEpisodes, "scored")
    check_type(mode, str, "mode")
    built = scored.datums
    if built is None:
        return None
    d = built.datums
    arrays: dict[str, npt.NDArray[Any]] = {name: np.asarray(getattr(d, name)) for name in d._fields}
    arrays["debate_D"] = scored.debate_D
    arrays["agent_D"] = scored.agent_D
    rep = built.report
    counts = {"datums": int(rep.datums), "tokens": int(rep.tokens), "trajectories": int(rep.trajectories)}
    for name in DATUM_REASONS:
        counts[name] = int(getattr(rep, name))
    return DatumOutput(arrays, datum_stats(counts, logprob_sums(arrays), mode))


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
    numeric: ScoredEpisodes
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
    scoring = options.scoring
    t0 = clock()
    parsed = parse_turns(debates, policy=scoring.parse_policy)
    t1 = clock()
    replayed, replay_errors = replay_debates(debates, parsed, options=options)
    if getattr(scoring.estimator, "singleton", None) == "error":
        replayed, singles = _skip_singletons(replayed)
        replay_errors += singles
    t2 = clock()
    numeric = kernel.score_episodes(episodes_of(replayed), scoring)
    t3 = clock()
    datums = datum_output(numeric, scoring.datum_mode)
    t4 = clock()
    timings.update(parse=t1 - t0, replay=t2 - t1, numeric=t3 - t2, datums=t4 - t3)
    errors = sorted([*read_errors, *replay_errors], key=lambda e: e.line)
    return BatchResult(
        options, tuple(replayed), numeric, datums, tuple(errors), num_lines, num_blank, timings
    )


def _take_new(
    seen: SeenIds, debates: list[Debate], errors: list[TranscriptError]
) -> tuple[list[Debate], list[TranscriptError]]:
    """One chunk's debates and errors as a reader of the whole input gives them, where the chunk was
    read with only its own ids: a debate whose id an earlier chunk used (in ``seen``) becomes the error
    ``duplicate_id`` naming that line, and so does the text of the chunk's own repeats of it. The ids of
    the debates kept are added to ``seen``."""
    first = seen.first_lines([d.id for d in debates]).tolist()
    again = {d.id: line for d, line in zip(debates, first, strict=True) if line}
    if again:
        errors = [_repeat_of_earlier(e, again) for e in errors]
        errors += [_duplicate_id(d.line, d.id, again[d.id]) for d in debates if d.id in again]
        debates = [d for d in debates if d.id not in again]
    seen.add([d.id for d in debates], [d.line for d in debates])
    return debates, errors


def _repeat_of_earlier(error: TranscriptError, earlier: dict[str, int]) -> TranscriptError:
    """``error``, or the error naming the earlier line when it is a repeat of an id used earlier."""
    ident = error.debate_id
    if error.reason != "duplicate_id" or ident is None or ident not in earlier:
        return error
    return _duplicate_id(error.line, ident, earlier[ident])


def _duplicate_id(line: int, ident: str, first: int) -> TranscriptError:
    """The reader's error for a repeated id (:class:`adapters.transcripts.LineReader`)."""
    return TranscriptError(
        line, "duplicate_id", f"id {ident!r} was already used on line {first}", None, ident
    )


DEFAULT_CHUNK_SIZE: Final = 2048
"""Debates per chunk of :func:`score_chunks`: large enough that the numeric stages run as batches, small
enough that a chunk's Python objects stay a few tens of MB."""


def batch_wide(options: ScoreOptions) -> bool:
    """Whether the estimator's advantages depend on every debate (``scale="batch"`` or ``"whiten"``), so
    the input cannot be scored in independent chunks.

    Examples:
      >>> trl = kernel.AdvantageOptions.from_spec("trl_grpo.batch")
      >>> batch_wide(ScoreOptions()), batch_wide(ScoreOptions(kernel.ScoringOptions(estimator=trl)))
      (False, True)
    """
    check_type(options, ScoreOptions, "options")
    estimator = options.scoring.estimator
    return isinstance(estimator, kernel.RAEOptions) or estimator.scale in ("batch", "whiten")


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
    chunk_ids: dict[str, int] = {}  # the reader's: this chunk's ids; earlier ones are in `earlier`
    reader = LineReader(seen=chunk_ids)
    debates: list[Debate] = []
    errors: list[TranscriptError] = []
    with SeenIds() as earlier:  # its temporary file goes when the stream ends or is closed

        def scored() -> BatchResult:
            nonlocal debates, errors
            debates, errors = _take_new(earlier, debates, errors)
            chunk_ids.clear()
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
