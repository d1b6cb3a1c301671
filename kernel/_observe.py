"""What an agent sees on its turn: the chat messages built from a :class:`~kernel.DebateState`.

:func:`build_observation` returns two messages: a system prompt that gives the agent its id and the
five-tag output contract, and a user message with the question, a window of earlier responses (each
field clipped) and the rules of the current turn. :func:`stop_sequences` extends a renderer's stop
sequences with the closing tag of the last field. The wording is this project's own; the structure
(window, clipping, round-1 rules) follows the reference recipe.

References:
  REFERENCE.md §1 (output contract) and §7 (observation, history window, clipping, round-1 rules,
  stop sequences) — the round-based v1 multi-agent debate recipe for tinker-cookbook.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, SupportsIndex, cast

import numpy as np

from kernel._checks import check_int, check_type
from kernel._episode import DebateState, _as_index, current_round
from kernel._types import ParsedResponse

__all__ = [
    "CONSENSUS_REASON_STOP",
    "ELLIPSIS",
    "OBSERVATION_PRESETS",
    "Message",
    "Observation",
    "ObservationConfig",
    "build_observation",
    "clip_field",
    "history_window",
    "stop_sequences",
    "system_prompt",
]

CONSENSUS_REASON_STOP: Final = "</consensus_reason>"
"""The closing tag of the last field; added to string stop sequences so sampling ends with the answer."""

ELLIPSIS: Final = "…"
"""U+2026, appended to a field that :func:`clip_field` shortened."""


@dataclass(frozen=True, slots=True)
class ObservationConfig:
    """How observations are built. Presets: ``ObservationConfig.REFERENCE`` and ``ObservationConfig.DEFAULT``.

    Attributes:
      history_rounds: window of earlier rounds shown: −1 all, 0 none, K > 0 the last K.
      count_partial_round: whether the round in progress (the responses already given in it) counts as
        one of the K. True reproduces the reference: agent 1 of round 3 with K = 2 sees round 2 and the
        partial round 3 only. False (our default) shows K complete rounds *plus* the partial round, so
        every agent of a round sees the same complete rounds. Irrelevant when K ≤ 0.
      max_chars_per_field: each shown field is clipped to this many code points (then an ellipsis);
        None shows fields whole.
      enforce_round1_votes: tell round-1 agents that votes on agents who had not spoken yet are discarded.
        The scoring job should then AND :func:`~kernel.round1_vote_violations` into its vote mask. The
        reference only asks for the order and never enforces it.
      brief: one-line instructions (the agent's id and the tag contract as the system message; a turn
        line naming the round, the agent and whom to compare) instead of the full contract and rules,
        for small models and short contexts; the question and the history are rendered as usual.

    Raises:
      TypeError, ValueError: for a field of the wrong type or out of range, naming the field.

    Examples:
      >>> ObservationConfig.REFERENCE.count_partial_round, ObservationConfig.DEFAULT.count_partial_round
      (True, False)
      >>> ObservationConfig(history_rounds=-1, max_chars_per_field=None).history_rounds
      -1
    """

    history_rounds: int = 2
    count_partial_round: bool = False
    max_chars_per_field: int | None = 800
    enforce_round1_votes: bool = True
    brief: bool = False

    REFERENCE: ClassVar[ObservationConfig]
    DEFAULT: ClassVar[ObservationConfig]

    def __post_init__(self) -> None:
        if isinstance(self.history_rounds, bool) or not isinstance(self.history_rounds, int):
            raise TypeError(f"history_rounds must be an int, got {type(self.history_rounds).__name__}")
        if self.history_rounds < -1:
            raise ValueError(f"history_rounds must be -1 (all), 0 (none) or K > 0, got {self.history_rounds}")
        m = self.max_chars_per_field
        if m is not None and (isinstance(m, bool) or not isinstance(m, int)):
            raise TypeError(f"max_chars_per_field must be an int or None, got {type(m).__name__}")
        if m is not None and m < 1:
            raise ValueError(f"max_chars_per_field must be >= 1 or None, got {m}")
        for name in ("count_partial_round", "enforce_round1_votes", "brief"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")


ObservationConfig.REFERENCE = ObservationConfig(
    history_rounds=2, count_partial_round=True, max_chars_per_field=800, enforce_round1_votes=False
)
ObservationConfig.DEFAULT = ObservationConfig()

OBSERVATION_PRESETS: Final[dict[str, ObservationConfig]] = {
    "reference": ObservationConfig.REFERENCE,
    "default": ObservationConfig.DEFAULT,
    "compact": ObservationConfig(history_rounds=1, max_chars_per_field=200, brief=True),
}
"""Observation presets by name: ``"reference"`` (the v1 recipe), ``"default"`` (ours) and ``"compact"``
(brief instructions, the last round only, fields clipped at 200 code points: prompts of a few hundred
bytes, for the small models of the local service)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message: ``role`` is ``"system"`` or ``"user"``; ``content`` its text."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Observation:
    """The prompt of one turn: ``messages`` = (system, user), for ``agent_id`` in 0-based ``round``.

    Examples:
      >>> obs = Observation((Message("system", "You are Agent 0."), Message("user", "Question: ...")), 0, 0)
      >>> obs.as_dicts()[0]
      {'role': 'system', 'content': 'You are Agent 0.'}
    """

    messages: tuple[Message, ...]
    agent_id: int
    round: int

    def as_dicts(self) -> list[dict[str, str]]:
        """The messages as ``[{"role": ..., "content": ...}, ...]``, the shape chat renderers take."""
        return [{"role": m.role, "content": m.content} for m in self.messages]


def clip_field(text: str, max_chars: int | None) -> str:
    """Strips a field and clips it to ``max_chars`` code points, marking the cut with an ellipsis.

    ``clip(s) = s`` if ``len(s) ≤ max_chars`` else ``rstrip(s[:max_chars]) + "…"``, with ``s = strip(text)``
    and lengths in code points (a combining mark or one half of an emoji sequence counts as one). The
    result has at most ``max_chars + 1`` code points.

    Args:
      text: the field text.
      max_chars: the limit in code points (≥ 1), or None for no limit.

    Returns:
      The clipped text.

    References:
      REFERENCE.md §7 (clipping to ``max_chars_per_field`` code points, ellipsis appended).

    Examples:
      >>> clip_field("  abcdef  ", 4)
      'abcd…'
      >>> clip_field("ab  cdef", 3)
      'ab…'
      >>> clip_field("abc", 3)
      'abc'
    """
    if max_chars is not None:
        check_int(max_chars, "max_chars", low=1)
    return _clip(text, max_chars)


def _clip(text: str, max_chars: int | None) -> str:
    """:func:`clip_field` for a ``max_chars`` checked already (an :class:`ObservationConfig`'s): the
    observation clips about twenty fields per turn, on the rollouts' critical path."""
    if not isinstance(text, str):
        check_type(text, str, "text")
    stripped = text.strip()
    if max_chars is None or len(stripped) <= max_chars:
        return stripped
    return stripped[:max_chars].rstrip() + ELLIPSIS


def history_window(state: DebateState, config: ObservationConfig) -> range:
    """The indices into ``state.rounds`` shown by the history window of ``config``.

    With ``R = len(state.rounds)`` (complete rounds plus the partial one, if any) and ``K =
    config.history_rounds``: −1 gives ``[0, R)``, 0 gives nothing, K > 0 gives ``[max(0, R − K), R)`` when
    the partial round counts, else ``[max(0, C − K), R)`` with ``C`` complete rounds.

    Args:
      state: a :class:`~kernel.DebateState`.
      config: an :class:`ObservationConfig`.

    Returns:
      A ``range`` of round indices, increasing.

    Examples:
      >>> from kernel import initial_state
      >>> history_window(initial_state("q", num_agents=2, max_rounds=3), ObservationConfig.DEFAULT)
      range(0, 0)
    """
    check_type(state, DebateState, "state")
    check_type(config, ObservationConfig, "config")
    total = len(state.rounds)
    k = config.history_rounds
    if k < 0:
        return range(total)
    if k == 0:
        return range(total, total)
    counted = total if config.count_partial_round else current_round(state)
    return range(max(0, counted - k), total)


def system_prompt(agent_id: int, num_agents: int) -> str:
    """The system message of agent ``agent_id``: its id and the five-tag output contract.

    Args:
      agent_id: the agent, in ``[0, num_agents)``.
      num_agents: N ≥ 1.

    Returns:
      The prompt text.

    Raises:
      TypeError: ``agent_id`` or ``num_agents`` is not an int (a bool is refused).
      ValueError: ``num_agents < 1`` or ``agent_id`` outside ``[0, num_agents)``.

    Examples:
      >>> print(system_prompt(1, 3).splitlines()[0])
      You are Agent 1, one of 3 agents (Agent 0 to Agent 2) debating the same question.
    """
    num_agents = check_int(num_agents, "num_agents", low=1)
    i, last = check_int(agent_id, "agent_id", low=0, high=num_agents - 1), num_agents - 1
    return "\n".join(
        [
            f"You are Agent {i}, one of {num_agents} agents (Agent 0 to Agent {last}) debating the same "
            "question.",
            "Agents speak one at a time in order of their ids, round after round. On each turn you give "
            "your own answer and judge the answers of the others.",
            "",
            "Reply with exactly these five tagged fields, in this order, and nothing after them:",
            "<solution>your current answer to the question</solution>",
            "<evaluation>your assessment of the other agents' answers so far, or N/A</evaluation>",
            "<comparison>",
            "one judgement per line, either `Agent a > Agent b` (a's answer is better than b's) or "
            "`Agent a = Agent b` (equally good); or N/A",
            "</comparison>",
            "<consensus>YES or NO</consensus>",
            "<consensus_reason>a sentence or two on why the agents do or do not agree</consensus_reason>",
            "",
            f"You judge only the others: never name yourself (Agent {i}) in a comparison. Use only "
            f"ids from 0 to {last}.",
            "Say YES in <consensus> only if you believe the agents now agree on the answer; the debate "
            "ends early once every agent says YES in the same round.",
        ]
    )


def _brief_system_prompt(agent_id: int, num_agents: int) -> str:
    return (
        f"Agent {agent_id} of {num_agents}. Reply with the tags solution, evaluation, comparison "
        "(Agent a > Agent b, or N/A), consensus (YES or NO), consensus_reason."
    )


def _brief_rules(agent_id: int, round_index: int, state: DebateState) -> str:
    spoken = state.num_agents if round_index > 0 else agent_id
    others = [j for j in range(spoken) if j != agent_id]
    judge = f"compare {_agent_list(others)}" if len(others) >= 2 else "no comparison"
    return f"Round {round_index + 1} of {state.max_rounds}, Agent {agent_id}: {judge}."


def _agent_list(ids: Sequence[int]) -> str:
    names = [f"Agent {j}" for j in ids]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _turn_rules(agent_id: int, round_index: int, state: DebateState, config: ObservationConfig) -> str:
    n, m = state.num_agents, state.max_rounds
    last = " (the last round)" if round_index + 1 == m else ""
    head = f"It is your turn, Agent {agent_id}: round {round_index + 1} of {m}{last}."
    if round_index == 0:
        if agent_id == 0:
            return "\n".join(
                [
                    head,
                    "You speak first, so there is nothing to judge yet. Propose your solution, and write "
                    "N/A in both <evaluation> and <comparison>.",
                ]
            )
        if agent_id == 1:
            return "\n".join(
                [
                    head,
                    "Only Agent 0 has answered so far. Evaluate Agent 0's answer in <evaluation>, then "
                    "give your own solution. Make no comparisons yet: write N/A in <comparison>.",
                ]
            )
        spoken = _agent_list(range(agent_id))
        lines = [
            head,
            f"So far {spoken} have answered. Evaluate their answers, then give your own solution.",
            f"In <comparison>, compare only agents who have already answered ({spoken}); never yourself.",
        ]
        if config.enforce_round1_votes:
            lines.append("Comparisons that name any other agent are discarded.")
        return "\n".join(lines)
    lines = [
        head,
        "Reread the earlier responses. In <evaluation>, judge the solutions and whether the earlier "
        "evaluations and comparisons hold up. Then give your improved solution.",
    ]
    if n >= 3:
        lines.append(
            f"In <comparison>, compare other agents only (never Agent {agent_id}), "
            "judging their most recent answers."
        )
    else:
        lines.append("There is no pair of other agents to compare: write N/A in <comparison>.")
    return "\n".join(lines)


def _render_response(speaker: int, resp: ParsedResponse, viewer: int, max_chars: int | None) -> list[str]:
    vote = "YES" if resp.consensus else "NO"
    you = " (you)" if speaker == viewer else ""
    lines = [
        f"Agent {speaker}{you}:",
        f"Solution: {_clip(resp.solution, max_chars)}",
        f"Evaluation: {_clip(resp.evaluation, max_chars)}",
    ]
    if resp.comparison.strip():
        lines.append(f"Comparison: {_clip(resp.comparison, max_chars)}")
    lines.append(f"Consensus: {vote}. Reason: {_clip(resp.consensus_reason, max_chars)}")
    return lines


def _user_text(state: DebateState, agent_id: int, config: ObservationConfig) -> str:
    round_index = current_round(state)
    parts = [f"Question:\n{state.question}"]
    for r in history_window(state, config):
        responses = state.rounds[r]
        partial = " (in progress)" if len(responses) < state.num_agents else ""
        block = [f"=== Round {r + 1}{partial} ==="]
        for speaker, resp in enumerate(responses):
            block.append("")
            block.extend(_render_response(speaker, resp, agent_id, config.max_chars_per_field))
        parts.append("\n".join(block))
    if config.brief:
        parts.append(_brief_rules(agent_id, round_index, state))
    else:
        parts.append(_turn_rules(agent_id, round_index, state, config))
    return "\n\n".join(parts)


def build_observation(
    state: DebateState, agent_id: int, *, config: ObservationConfig = ObservationConfig.DEFAULT
) -> Observation:
    """The chat messages agent ``agent_id`` answers on its turn: (system, user).

    System: :func:`system_prompt`. User: the question; then the rounds of :func:`history_window`, each
    response as its solution, evaluation, comparison (when not empty) and consensus with its reason, every
    field clipped by :func:`clip_field` (the agent's own responses marked "(you)"); then the rules of the
    turn. Round 1: agent 0 proposes only
    (evaluation and comparison N/A); agent 1 evaluates Agent 0 and makes no comparison; agent p ≥ 2
    compares only agents ``0 … p−1``, named. Later rounds: judge the earlier solutions, evaluations and
    comparisons; compare other agents only (N/A when fewer than two others exist).

    Meant for ``agent_id = current_agent(state)``; for another agent it shows the same history with the
    rules for that agent's own position.

    Args:
      state: a :class:`~kernel.DebateState` that is not done.
      agent_id: the agent, in ``[0, N)``.
      config: an :class:`ObservationConfig` (keyword; default ``ObservationConfig.DEFAULT``).

    Returns:
      An :class:`Observation`.

    Raises:
      TypeError: if ``state`` or ``config`` has the wrong type, or ``agent_id`` is not an int.
      ValueError: if ``agent_id`` is out of range or the debate is over.

    References:
      REFERENCE.md §7.

    Examples:
      >>> from kernel import initial_state
      >>> obs = build_observation(initial_state("What is 2 + 2?", num_agents=3, max_rounds=2), 0)
      >>> [m.role for m in obs.messages]
      ['system', 'user']
      >>> print(obs.messages[1].content)
      Question:
      What is 2 + 2?
      <BLANKLINE>
      It is your turn, Agent 0: round 1 of 2.
      You speak first, so there is nothing to judge yet. Propose your solution, and write N/A in both
      <evaluation> and <comparison>.
    """
    check_type(state, DebateState, "state")
    check_type(config, ObservationConfig, "config")
    agent_id = _as_index(agent_id, "agent_id")
    if not 0 <= agent_id < state.num_agents:
        raise ValueError(f"agent_id must lie in [0, {state.num_agents}), got {agent_id}")
    if state.done:
        raise ValueError("state: the debate is over, there is no turn to observe")
    system = _brief_system_prompt if config.brief else system_prompt
    messages = (
        Message("system", system(agent_id, state.num_agents)),
        Message("user", _user_text(state, agent_id, config)),
    )
    return Observation(messages=messages, agent_id=agent_id, round=current_round(state))


def _is_token_id(value: object) -> bool:
    return not isinstance(value, bool | np.bool_) and hasattr(type(value), "__index__")


def stop_sequences(renderer_stops: Sequence[int] | Sequence[str]) -> tuple[int, ...] | tuple[str, ...]:
    """The stop sequences for a debate turn, given the renderer's own.

    Token ids (ints) are returned alone, in order (a sampler cannot mix ids and strings). Strings get
    ``"</consensus_reason>"`` appended, duplicates dropped, first occurrence kept. No stops at all gives
    ``("</consensus_reason>",)``.

    Args:
      renderer_stops: the renderer's stop sequences, all ints or all strs.

    Returns:
      A tuple of ints or a tuple of strs.

    Raises:
      TypeError: if the stops mix ints and strs or hold anything else.

    References:
      REFERENCE.md §7 (stop sequences of the v1 recipe).

    Examples:
      >>> stop_sequences([128009, 128008])
      (128009, 128008)
      >>> stop_sequences(["<|im_end|>", "</consensus_reason>", "<|im_end|>"])
      ('<|im_end|>', '</consensus_reason>')
      >>> stop_sequences([])
      ('</consensus_reason>',)
    """
    if isinstance(renderer_stops, str | bytes):
        raise TypeError("renderer_stops must be a sequence of ints or of strs, not a single string")
    stops = list(renderer_stops)
    if stops and all(_is_token_id(s) for s in stops):
        return tuple(operator.index(cast(SupportsIndex, s)) for s in stops)
    if all(isinstance(s, str) for s in stops):
        return tuple(dict.fromkeys([*(str(s) for s in stops), CONSENSUS_REASON_STOP]))
    kinds = sorted({type(s).__name__ for s in stops})
    raise TypeError(f"renderer_stops must be all ints or all strs, got {kinds}")
