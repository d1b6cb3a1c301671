"""The debate episode as a pure state machine: no I/O, no clocks, no locks.

Agents ``0 … N−1`` speak in a fixed order; a round is ``N`` turns. :func:`submit` folds one parsed
response into an immutable :class:`DebateState` and returns a :class:`StepResult`; protocol errors
(wrong turn, debate over, unknown agent) come back as a result with a reason code, never as an
exception. An async coordinator is then a few lines: ask :func:`current_agent`, await the model, feed
the response to :func:`submit`, wake the waiters.

Termination (checked only when a round is complete): every agent of that round said consensus YES, or
``max_rounds`` rounds were played. A response that failed to parse (``parsed.ok`` False) earns the step
reward −1 and ends the debate at once (``aborted`` and ``parse_failed``), so nobody waits forever.
:func:`abort` ends it from outside. :func:`replay` re-runs a transcript for the scoring job, and
:func:`round1_vote_violations` marks round-1 votes on agents who had not spoken yet.

References:
  REFERENCE.md §7 (the round-based v1 debate recipe for tinker-cookbook: turn order, stop rule, −1 on a
  parse failure with an abort of the coordinator).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import as_int_array, check_real, check_same_length, check_type
from kernel._types import ParsedResponse

__all__ = [
    "PARSE_FAILURE_REWARD",
    "ROUND1_NOT_YET_SPOKEN",
    "ROUND1_VALID",
    "ROUND1_VOTE_REASONS",
    "SUBMIT_REJECTIONS",
    "DebateState",
    "RejectedTurn",
    "ReplayResult",
    "Round1VoteCheck",
    "StepResult",
    "abort",
    "current_agent",
    "current_round",
    "initial_state",
    "replay",
    "round1_vote_check",
    "round1_vote_violations",
    "submit",
]

PARSE_FAILURE_REWARD: Final = -1.0
"""Step reward of a response that failed to parse (the reference's −1); every other step earns 0."""

SUBMIT_REJECTIONS: Final = ("agent_out_of_range", "debate_over", "not_your_turn", "author_mismatch")
"""Reason codes :func:`submit` may return, in the order they are checked."""

ROUND1_VALID: Final = 0
"""Round-1 order code of a vote that breaks no speaking-order rule."""
ROUND1_NOT_YET_SPOKEN: Final = 1
"""Round-1 order code of a vote naming an agent who had not spoken yet (``"not_yet_spoken"``)."""
ROUND1_VOTE_REASONS: Final = ("valid", "not_yet_spoken")
"""Names of the round-1 order codes: ``ROUND1_VOTE_REASONS[reason_V[v]]``."""


def _as_index(value: Any, name: str) -> int:
    """``operator.index(value)`` that refuses bools; raises TypeError naming ``name``."""
    if type(value) is int:  # the common case, without the checks below
        return value
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


@dataclass(frozen=True, slots=True)
class DebateState:
    """Everything known about one debate between two turns. Immutable; build it with :func:`initial_state`.

    Attributes:
      question: the question under debate.
      num_agents: N ≥ 1 agents, ids ``0 … N−1``; agent ``turn mod N`` speaks next.
      max_rounds: the debate stops after this many complete rounds (≥ 1).
      turn: number of responses accepted so far (= Σ len(round) over ``rounds``).
      rounds: accepted responses by round, ``rounds[r][i]`` from agent ``i``; every round but the last
        holds exactly N responses, the last one 1 … N (it is partial while ``turn mod N ≠ 0``). A
        response that failed to parse is never stored here.
      done: no further turn is accepted.
      consensus: the debate ended because every agent of the last round said YES.
      aborted: the debate ended early, by :func:`abort` or by a parse failure.
      parse_failed: the debate ended because a response failed to parse (implies ``aborted``).
      abort_reason: ``""`` unless aborted; the parser's reason code (e.g. ``"missing_solution"``) or the
        reason given to :func:`abort`.

    Raises:
      ValueError: if the fields are inconsistent (e.g. ``turn`` disagrees with ``rounds``, or the state
        is not done although nobody could act).

    Examples:
      >>> s = initial_state("2 + 2?", num_agents=3, max_rounds=2)
      >>> s.turn, s.rounds, s.responses, s.done
      (0, (), (), False)
    """

    question: str
    num_agents: int
    max_rounds: int
    turn: int = 0
    rounds: tuple[tuple[ParsedResponse, ...], ...] = ()
    done: bool = False
    consensus: bool = False
    aborted: bool = False
    parse_failed: bool = False
    abort_reason: str = ""

    def __post_init__(self) -> None:
        n, m = self.num_agents, self.max_rounds
        _check_header(self.question, n, m)
        sizes = [len(r) for r in self.rounds]
        if any(s != n for s in sizes[:-1]) or (sizes and not 1 <= sizes[-1] <= n) or len(sizes) > m:
            raise ValueError(f"rounds must hold N={n} responses per round (1..N in the last), got {sizes}")
        if self.turn != sum(sizes):
            raise ValueError(f"turn must equal the number of stored responses {sum(sizes)}, got {self.turn}")
        if (self.consensus or self.aborted) and not self.done:
            raise ValueError("consensus and aborted imply done")
        if self.consensus and self.aborted:
            raise ValueError("a debate ends either by consensus or by an abort, not both")
        if self.parse_failed and not self.aborted:
            raise ValueError("parse_failed implies aborted")
        if bool(self.abort_reason) != self.aborted:
            raise ValueError("abort_reason must be non-empty exactly when aborted")
        if not self.done and self.turn >= n * m:
            raise ValueError(f"a debate with turn {self.turn} >= N*max_rounds = {n * m} must be done")
        if not self.done and self.turn and self.turn % n == 0 and _all_yes(self.rounds[-1]):
            raise ValueError("a complete round in which every agent said YES must end the debate")

    @property
    def responses(self) -> tuple[ParsedResponse, ...]:
        """Accepted responses in speaking order (round-major); response ``k`` is from agent ``k mod N``."""
        return tuple(itertools.chain.from_iterable(self.rounds))


def _check_header(question: object, num_agents: object, max_rounds: object) -> None:
    """A state's question and counts checked, in :class:`DebateState`'s order (TypeError, ValueError)."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    if _as_index(num_agents, "num_agents") < 1:
        raise ValueError(f"num_agents must be >= 1, got {num_agents}")
    if _as_index(max_rounds, "max_rounds") < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")


def _rejection(agent: int, parsed: ParsedResponse, n: int, turn: int, done: bool) -> str:
    """Why a turn is rejected (the first check that fails, in :func:`submit`'s order), or ``""``."""
    if not 0 <= agent < n:
        return "agent_out_of_range"
    if done:
        return "debate_over"
    if agent != turn % n:
        return "not_your_turn"
    if parsed.author_id != agent:
        return "author_mismatch"
    return ""


def _all_yes(responses: Sequence[ParsedResponse]) -> bool:
    return all(resp.consensus for resp in responses)


@dataclass(frozen=True, slots=True)
class StepResult:
    """What :func:`submit` returns: the next state and the step reward, or a rejection with its reason.

    Attributes:
      state: the state after the step; the input state, unchanged, when rejected.
      reward: the step reward: ``parse_failure_reward`` (−1) for an accepted response that failed to
        parse, else 0.0 (also 0.0 when rejected: a rejected turn did not happen).
      ok: True when the turn was accepted (a failing parse is accepted: it ends the debate).
      reason: ``""`` when accepted, else one of :data:`SUBMIT_REJECTIONS`.
    """

    state: DebateState
    reward: float
    ok: bool
    reason: str


def initial_state(question: str, *, num_agents: int, max_rounds: int) -> DebateState:
    """The state before the first turn: agent 0 to speak in round 0.

    Args:
      question: the question under debate (any str).
      num_agents: N ≥ 1 (the reference uses 3).
      max_rounds: ≥ 1 (the reference uses 3).

    Returns:
      A :class:`DebateState` with ``turn == 0`` and no responses.

    Raises:
      TypeError: if ``question`` is not a str or a count is not an int.
      ValueError: if ``num_agents`` or ``max_rounds`` is below 1.

    Examples:
      >>> s = initial_state("2 + 2?", num_agents=3, max_rounds=2)
      >>> current_agent(s), current_round(s), s.done
      (0, 0, False)
      >>> initial_state("2 + 2?", num_agents=0, max_rounds=2)
      Traceback (most recent call last):
      ValueError: num_agents must be >= 1, got 0
    """
    return DebateState(
        question=question,
        num_agents=_as_index(num_agents, "num_agents"),
        max_rounds=_as_index(max_rounds, "max_rounds"),
    )


def current_agent(state: DebateState) -> int | None:
    """The agent allowed to act now: ``turn mod N``, or None once the debate is done.

    Liveness: a state that is not done always has an agent to act (and :func:`submit` accepts a response
    from it), so no sequence of steps can leave a debate stuck.

    Args:
      state: a :class:`DebateState`.

    Returns:
      An agent id in ``[0, N)``, or None when ``state.done``.

    Examples:
      >>> current_agent(initial_state("q", num_agents=2, max_rounds=1))
      0
      >>> current_agent(abort(initial_state("q", num_agents=2, max_rounds=1), "timeout")) is None
      True
    """
    check_type(state, DebateState, "state")
    return None if state.done else state.turn % state.num_agents


def current_round(state: DebateState) -> int:
    """The 0-based round in progress: ``⌊turn / N⌋``, which is also the number of complete rounds.

    Once the debate is done this is the round that would come next (as in the reference's metrics).

    Args:
      state: a :class:`DebateState`.

    Returns:
      An int in ``[0, max_rounds]``.

    Examples:
      >>> current_round(initial_state("q", num_agents=3, max_rounds=2))
      0
    """
    check_type(state, DebateState, "state")
    return state.turn // state.num_agents


def submit(
    state: DebateState,
    agent_id: int,
    parsed: ParsedResponse,
    *,
    parse_failure_reward: float = PARSE_FAILURE_REWARD,
) -> StepResult:
    """Folds one agent's parsed response into the debate: the transition function.

    Checks, in this order (the first that fails rejects the turn and leaves the state unchanged):
    ``agent_out_of_range`` (``agent_id ∉ [0, N)``), ``debate_over`` (``state.done``), ``not_your_turn``
    (``agent_id ≠ turn mod N``), ``author_mismatch`` (``parsed.author_id ≠ agent_id``: parse with
    ``author_id=agent_id`` so that self-comparisons are dropped and leave-one-out rewards see the right
    author). An accepted response with ``parsed.ok`` False ends the debate (``done``, ``aborted``,
    ``parse_failed``, ``abort_reason = parsed.reason``) with reward −1 and is not stored. Otherwise it is
    stored, and when it completes round r the debate ends if all N responses of round r say YES
    (``consensus``) or if ``r + 1 = max_rounds``.

    Args:
      state: the current :class:`DebateState`.
      agent_id: the id of the agent submitting (int).
      parsed: its parsed output (:class:`~kernel.ParsedResponse`).
      parse_failure_reward: step reward of a response that failed to parse (keyword; reference −1).

    Returns:
      A :class:`StepResult` (never raises for protocol errors).

    Raises:
      TypeError: if ``state``, ``agent_id`` or ``parsed`` has the wrong type (a programmer error).

    References:
      REFERENCE.md §7; tinker-cookbook multi-agent debate recipe (v1), coordinator and step reward.

    Examples:
      >>> from kernel import ParsedResponse
      >>> def said(i, yes):  # usually parse_response(text, author_id=i)
      ...     return ParsedResponse.make(i, solution="4", consensus=yes)
      >>> s = initial_state("2 + 2?", num_agents=2, max_rounds=3)
      >>> r = submit(s, 1, said(1, True))
      >>> r.ok, r.reason, r.state is s
      (False, 'not_your_turn', True)
      >>> s = submit(s, 0, said(0, True)).state
      >>> r = submit(s, 1, said(1, True))
      >>> r.ok, r.reward, r.state.done, r.state.consensus, current_round(r.state)
      (True, 0.0, True, True, 1)
      >>> submit(r.state, 0, said(0, True)).reason
      'debate_over'
    """
    check_type(state, DebateState, "state")
    check_type(parsed, ParsedResponse, "parsed")
    agent = _as_index(agent_id, "agent_id")
    failure_reward = check_real(parse_failure_reward, "parse_failure_reward", finite=True)
    n = state.num_agents
    rejected = _rejection(agent, parsed, n, state.turn, state.done)
    if rejected:
        return StepResult(state, 0.0, False, rejected)
    if not parsed.ok:
        ended = replace(
            state, done=True, aborted=True, parse_failed=True, abort_reason=parsed.reason or "parse_error"
        )
        return StepResult(ended, failure_reward, True, "")
    if state.turn % n == 0:
        rounds = (*state.rounds, (parsed,))
    else:
        rounds = (*state.rounds[:-1], (*state.rounds[-1], parsed))
    turn = state.turn + 1
    done = consensus = False
    if turn % n == 0:
        consensus = _all_yes(rounds[-1])
        done = consensus or turn // n >= state.max_rounds
    return StepResult(replace(state, turn=turn, rounds=rounds, done=done, consensus=consensus), 0.0, True, "")


def abort(state: DebateState, reason: str) -> DebateState:
    """Ends the debate from outside (timeout, sampler error, cancelled batch) and records why.

    A debate that is already done is returned unchanged, keeping its original ending.

    Args:
      state: the current :class:`DebateState`.
      reason: a non-empty reason code, stored as ``abort_reason``.

    Returns:
      The state with ``done`` and ``aborted`` set (``parse_failed`` stays False).

    Raises:
      TypeError: if ``reason`` is not a str.
      ValueError: if ``reason`` is empty.

    Examples:
      >>> s = abort(initial_state("q", num_agents=3, max_rounds=3), "sampler_timeout")
      >>> s.done, s.aborted, s.parse_failed, s.abort_reason
      (True, True, False, 'sampler_timeout')
      >>> abort(s, "later") is s
      True
    """
    check_type(state, DebateState, "state")
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a str, got {type(reason).__name__}")
    if not reason:
        raise ValueError("reason must be a non-empty reason code")
    if state.done:
        return state
    return replace(state, done=True, aborted=True, abort_reason=reason)


class RejectedTurn(NamedTuple):
    """A turn of a transcript that :func:`replay` did not accept: its position, author and reason code."""

    turn_index: int
    agent_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of re-running a transcript through :func:`submit`.

    Attributes:
      state: the final :class:`DebateState`.
      rewards: one step reward per input turn (length T); 0.0 for rejected turns.
      accepted: indices of the accepted turns, increasing.
      rejected: one :class:`RejectedTurn` per turn that was not accepted, in order; turns after
        the end (``"debate_over"``), out of order (``"not_your_turn"``) and the other codes of
        :data:`SUBMIT_REJECTIONS` are all reported, never dropped silently.
    """

    state: DebateState
    rewards: tuple[float, ...]
    accepted: tuple[int, ...]
    rejected: tuple[RejectedTurn, ...]


def replay(
    question: str,
    turns: Sequence[tuple[int, ParsedResponse]],
    *,
    num_agents: int,
    max_rounds: int,
    parse_failure_reward: float = PARSE_FAILURE_REWARD,
) -> ReplayResult:
    """Re-runs a recorded transcript: ``s_{t+1} = submit(s_t, agent_t, parsed_t).state``, s_0 initial.

    Σ ``rewards`` = −(number of accepted parse failures), and at most one is ever accepted.

    Args:
      question: the question under debate.
      turns: T pairs ``(agent_id, parsed)`` in the order they were produced.
      num_agents: N ≥ 1.
      max_rounds: ≥ 1.
      parse_failure_reward: as in :func:`submit`.

    Returns:
      A :class:`ReplayResult`.

    Raises:
      TypeError, ValueError: as :func:`initial_state` and :func:`submit` for wrong types or counts.

    Examples:
      >>> from kernel import ParsedResponse
      >>> def said(i, yes):  # usually parse_response(text, author_id=i)
      ...     return ParsedResponse.make(i, solution="4", consensus=yes)
      >>> bad = ParsedResponse.make(1, ok=False)
      >>> turns = [(0, said(0, False)), (0, said(0, True)), (1, bad), (0, said(0, True))]
      >>> r = replay("2 + 2?", turns, num_agents=2, max_rounds=2)
      >>> r.rewards, r.accepted, [(t.turn_index, t.reason) for t in r.rejected]
      ((0.0, 0.0, -1.0, 0.0), (0, 2), [(1, 'not_your_turn'), (3, 'debate_over')])
      >>> r.state.parse_failed, r.state.abort_reason
      (True, 'missing_solution')
    """
    # initial_state's checks, in its order, without building the state (built once, at the end)
    n, limit = _as_index(num_agents, "num_agents"), _as_index(max_rounds, "max_rounds")
    _check_header(question, n, limit)
    failure_reward = check_real(parse_failure_reward, "parse_failure_reward", finite=True)
    rewards: list[float] = []
    accepted: list[int] = []
    rejected: list[RejectedTurn] = []
    # The fold of submit() without its intermediate states: the same checks in the same order, one
    # DebateState built (and validated) at the end. tests/test_episode.py proves it equals the fold.
    rounds: list[tuple[ParsedResponse, ...]] = []
    current: list[ParsedResponse] = []
    turn = 0
    done = consensus = parse_failed = False
    abort_reason = ""
    for index, (agent_id, parsed) in enumerate(turns):
        if not isinstance(parsed, ParsedResponse):
            check_type(parsed, ParsedResponse, "parsed")
        agent = _as_index(agent_id, "agent_id")
        reason = _rejection(agent, parsed, n, turn, done)
        if reason:
            rewards.append(0.0)
            rejected.append(RejectedTurn(index, agent, reason))
            continue
        accepted.append(index)
        if not parsed.ok:
            rewards.append(failure_reward)
            done = parse_failed = True
            abort_reason = parsed.reason or "parse_error"
            continue
        rewards.append(0.0)
        current.append(parsed)
        turn += 1
        if turn % n == 0:
            consensus = _all_yes(current)
            done = consensus or turn // n >= limit
            rounds.append(tuple(current))
            current = []
    if not accepted:
        return ReplayResult(DebateState(question, n, limit), tuple(rewards), (), tuple(rejected))
    if current:
        rounds.append(tuple(current))
    state = DebateState(
        question=question,
        num_agents=n,
        max_rounds=limit,
        turn=turn,
        rounds=tuple(rounds),
        done=done,
        consensus=consensus,
        aborted=parse_failed,
        parse_failed=parse_failed,
        abort_reason=abort_reason,
    )
    return ReplayResult(state, tuple(rewards), tuple(accepted), tuple(rejected))


class Round1VoteCheck(NamedTuple):
    """Per-vote verdict of the round-1 speaking-order rule; AND ``valid_V`` into the pipeline's mask.

    Attributes:
      valid_V: bool [V]; False for a round-1 vote naming an agent who had not spoken yet.
      reason_V: int8 [V]; :data:`ROUND1_VALID` or :data:`ROUND1_NOT_YET_SPOKEN` (names in
        :data:`ROUND1_VOTE_REASONS`).
    """

    valid_V: npt.NDArray[np.bool_]
    reason_V: npt.NDArray[np.int8]


def round1_vote_check(
    authors_V: npt.ArrayLike, a_V: npt.ArrayLike, b_V: npt.ArrayLike, round_V: npt.ArrayLike
) -> Round1VoteCheck:
    """Marks votes cast in round 1 on agents who had not spoken yet (an optional, stricter rule).

    In round 1 agent u has seen only agents ``0 … u−1``, so a vote ``(u, a, op, b)`` is invalid iff
    ``round = 0 ∧ u ≥ 0 ∧ max(a, b) > u``. Votes naming the author itself, ids out of range and unknown
    authors (``u < 0``) are left to the vote validator (kernel/_votes.py), which has its own codes. The
    reference only *asks* for this order in the prompt and never enforces it.

    Args:
      authors_V: int [V], the author of each vote.
      a_V: int [V], the first agent named.
      b_V: int [V], the second agent named.
      round_V: int [V], the 0-based round in which each vote was written.

    Returns:
      A :class:`Round1VoteCheck`.

    Raises:
      TypeError: if an input is not an integer array.
      ValueError: if an input is not rank 1 or the lengths differ.

    Examples:
      >>> chk = round1_vote_check([2, 2, 1, 1], [0, 3, 0, 2], [1, 0, 2, 0], [0, 0, 0, 1])
      >>> chk.valid_V.tolist(), [ROUND1_VOTE_REASONS[c] for c in chk.reason_V]
      ([True, False, False, True], ['valid', 'not_yet_spoken', 'not_yet_spoken', 'valid'])
    """
    authors = as_int_array(authors_V, "authors_V")
    a = as_int_array(a_V, "a_V")
    b = as_int_array(b_V, "b_V")
    rounds = as_int_array(round_V, "round_V")
    check_same_length(authors_V=authors, a_V=a, b_V=b, round_V=rounds)
    invalid = (rounds == 0) & (authors >= 0) & (np.maximum(a, b) > authors)
    reason = np.where(invalid, ROUND1_NOT_YET_SPOKEN, ROUND1_VALID).astype(np.int8)
    return Round1VoteCheck(valid_V=~invalid, reason_V=reason)


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _saturate_int64(x: int) -> int:
    """An agent id clamped into int64: an id beyond it is out of range either way, and stays so."""
    return min(max(int(x), _INT64_MIN), _INT64_MAX)


def round1_vote_violations(states: Sequence[DebateState]) -> Round1VoteCheck:
    """:func:`round1_vote_check` on the votes of finished debates, in ``votes_from_responses`` order.

    Votes are listed debate by debate, response by response in speaking order (``state.responses``),
    vote by vote, which is the order of ``votes_from_responses([s.responses for s in states])``; the author
    of response k is agent ``k mod N``. An id beyond int64 (the reference parser keeps any digits) is
    clamped to it: it stays out of range, and the vote validator reports it.

    Args:
      states: P debate states.

    Returns:
      A :class:`Round1VoteCheck` over all V votes of the P debates.

    Examples:
      >>> from kernel import ParsedResponse, Vote
      >>> def said(i, votes):
      ...     return ParsedResponse.make(i, solution="4", votes=votes)
      >>> s = initial_state("q", num_agents=3, max_rounds=2)
      >>> s = submit(s, 0, said(0, (Vote(1, ">", 2),))).state
      >>> s = submit(s, 1, said(1, ())).state
      >>> s = submit(s, 2, said(2, (Vote(0, ">", 1),))).state
      >>> s = submit(s, 0, said(0, (Vote(1, ">", 2),))).state
      >>> round1_vote_violations([s]).valid_V.tolist()
      [False, True, True]
    """
    authors: list[int] = []
    a: list[int] = []
    b: list[int] = []
    rounds: list[int] = []
    for state in states:
        if not isinstance(state, DebateState):
            raise TypeError(f"states must hold DebateState values, got {type(state).__name__}")
        for r, responses in enumerate(state.rounds):
            for author, resp in enumerate(responses):
                for vote in resp.votes:
                    authors.append(author)
                    a.append(_saturate_int64(vote.a))
                    b.append(_saturate_int64(vote.b))
                    rounds.append(r)
    return round1_vote_check(
        np.asarray(authors, np.int64),
        np.asarray(a, np.int64),
        np.asarray(b, np.int64),
        np.asarray(rounds, np.int64),
    )
