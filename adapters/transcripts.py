"""Debate transcripts on disk: the ``debate-transcript/1`` JSON Lines format, its reader and writer.

One debate per line. The reader is total: every line gives either a :class:`Debate` or a
:class:`TranscriptError` naming the line (and the turn) and the reason; a bad line never stops the
others from being read, and nothing is dropped without being counted. The format is documented in
``docs/transcripts.md``.

A minimal line (two agents, one round)::

    {"id": "q1", "question": "2+2?", "num_agents": 2, "max_rounds": 1,
     "turns": [{"agent": 0, "text": "..."}, {"agent": 1, "text": "..."}]}

Turn ``k`` belongs to agent ``k mod num_agents`` in round ``k // num_agents`` (both 0-based): agents
speak in fixed order and a round is ``num_agents`` turns.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TextIO

import orjson

from adapters._atomic import atomic_write
from kernel.checks import check_type

_orjson_loads: Callable[[bytes], Any] | None = orjson.loads  # None: read by json alone (_fast_record)

__all__ = [
    "FORMAT",
    "MAX_AGENTS",
    "MAX_LINE_BYTES",
    "Debate",
    "LineReader",
    "LineTooLarge",
    "ReadResult",
    "TranscriptError",
    "Turn",
    "check_debates",
    "debate_from_record",
    "debate_to_record",
    "dumps_debate",
    "parse_line",
    "read_transcript_file",
    "read_transcripts",
    "write_transcripts",
]

FORMAT = "debate-transcript/1"
"""The value of the optional ``"format"`` field this reader understands."""

MAX_AGENTS = 1024
"""Largest ``num_agents`` accepted (a guard against absurd allocations from a typo)."""

MAX_LINE_BYTES = 64 * 2**20
"""Largest transcript line read, in bytes (64 MiB; as characters for a line given as str). A debate of
four agents, three rounds and 32 k-token turns with their token ids and logprobs takes a few MB. A longer
line is refused with the reason ``line_too_large`` without being held in memory (:func:`bounded_lines`):
scoring it would take several times its size."""

_MAX_TOKEN_ID = 2**31 - 1
_FLOAT32_MAX = 3.4028234663852886e38
_DEBATE_FIELDS = ("format", "id", "question", "num_agents", "max_rounds", "turns", "meta")
_TURN_FIELDS = (
    "agent",
    "text",
    "round",
    "observation_tokens",
    "action_tokens",
    "logprobs",
    "sequence_id",
    "meta",
)
_DEBATE_FIELD_SET = frozenset(_DEBATE_FIELDS)
_TURN_FIELD_SET = frozenset(_TURN_FIELDS)
_INT_TYPE = frozenset({int})
_FLOAT_TYPE = frozenset({float})


@dataclass(frozen=True, slots=True)
class Turn:
    """One agent output, in speaking order.

    Attributes:
      agent: the speaking agent's id, in ``[0, num_agents)``.
      text: the raw model output (what the parser reads).
      round: the 0-based round when the file states it (checked against the turn index), else None.
      observation_tokens: prompt token ids the policy saw, or None (a tuple when read from a file; any
        sequence of ints, e.g. the read-only array view rollouts give).
      action_tokens: sampled token ids (the tokenised ``text``), or None.
      logprobs: sampler log-probabilities, one per action token, or None.
      meta: free-form JSON value carried through unchanged (None when absent).
      sequence_id: the sampler's id of the sampled sequence (tinker 0.38's ``SampledSequence.sequence_id``,
        which provenance spans name: session-scoped, so a record of where the turn came from rather than
        something a later session can train against), or None.
    """

    agent: int
    text: str
    round: int | None = None
    observation_tokens: Sequence[int] | None = None
    action_tokens: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    meta: Any = None
    sequence_id: str | None = None

    @property
    def has_tokens(self) -> bool:
        """True when observation tokens, action tokens and logprobs are all present."""
        return (
            self.observation_tokens is not None
            and self.action_tokens is not None
            and self.logprobs is not None
        )


class _DraftTurn:
    """A :class:`Turn` being built from checked values: the same slots, set by plain assignment, then
    the object becomes a ``Turn`` (``__class__`` assigned, as ``kernel._parse_common._Draft`` does for
    a parsed response). The frozen dataclass sets each of its 8 fields through ``object.__setattr__``.
    Call it as ``_new_turn``; the parameters are the fields, in field order. What it saves, with the
    line name :meth:`LineReader.feed` now builds only for its error: ``debate-kernel score --out`` of
    30 k generated debates takes 0.95 × and 0.97 × the CPU time without them (medians of two rounds of
    5 interleaved pairs; pairs 0.92-1.03); reading 9,665 debates without tokens, 108 → 73 ms."""

    __slots__ = Turn.__slots__

    def __init__(
        self,
        agent: int,
        text: str,
        round: int | None,
        observation_tokens: tuple[int, ...] | None,
        action_tokens: tuple[int, ...] | None,
        logprobs: tuple[float, ...] | None,
        meta: Any,
        sequence_id: str | None,
    ) -> None:
        self.agent = agent
        self.text = text
        self.round = round
        self.observation_tokens = observation_tokens
        self.action_tokens = action_tokens
        self.logprobs = logprobs
        self.meta = meta
        self.sequence_id = sequence_id
        self.__class__ = Turn  # type: ignore[assignment]


if TYPE_CHECKING:  # checked as the dataclass's own constructor, which gives the same object
    _new_turn = Turn
else:
    _new_turn = _DraftTurn
if list(inspect.signature(_DraftTurn).parameters) != [f.name for f in dataclasses.fields(Turn)]:
    raise ImportError("adapters.transcripts._DraftTurn must set every Turn field, in field order")


@dataclass(frozen=True, slots=True)
class Debate:
    """One debate: a question, ``num_agents`` agents, and their turns in speaking order.

    Attributes:
      id: the debate's id (unique within a file).
      question: the question the agents debate.
      num_agents: number of agents N; a round is N turns.
      turns: the turns in speaking order (turn k is agent k mod N, round k // N).
      max_rounds: the round limit of the episode, or None when the file gives none (then only consensus
        or a parse failure ends the debate).
      line: 1-based line number in the source (0 for debates built in memory).
      meta: free-form JSON value carried through unchanged (None when absent).
    """

    id: str
    question: str
    num_agents: int
    turns: tuple[Turn, ...]
    max_rounds: int | None = None
    line: int = field(default=0, compare=False)
    meta: Any = None


@dataclass(frozen=True, slots=True)
class TranscriptError:
    """Why one input line (or one debate) could not be used.

    Attributes:
      line: 1-based line number of the debate in its source.
      reason: a reason code (see ``docs/transcripts.md``), e.g. ``"bad_json"``, ``"out_of_order"``.
      message: a human-readable explanation.
      turn: the 0-based index into ``turns`` when the problem is one turn, else None.
      debate_id: the debate's id when it could be read, else None.
    """

    line: int
    reason: str
    message: str
    turn: int | None = None
    debate_id: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}"
        if self.debate_id is not None:
            where += f" (id {self.debate_id!r})"
        if self.turn is not None:
            where += f", turns[{self.turn}]"
        return f"{where}: {self.message} [{self.reason}]"

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return {
            "line": self.line,
            "reason": self.reason,
            "message": self.message,
            "turn": self.turn,
            "id": self.debate_id,
        }


class ReadResult(NamedTuple):
    """What a read produced: the good debates, one error per bad line, and line counts."""

    debates: tuple[Debate, ...]
    errors: tuple[TranscriptError, ...]
    num_lines: int
    num_blank: int


class _Invalid(Exception):
    """Internal: raised while validating one line; converted to a TranscriptError at the line boundary."""

    def __init__(self, reason: str, message: str, turn: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.turn = turn


# ------------------------------------------------------------------------------------------------
# Reading


# A JSON escape of a UTF-16 surrogate: the only way valid JSON in UTF-8 can hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lone_surrogate(value: Any) -> str | None:
    """The path of the first string (key or value) holding a lone surrogate, else None.

    Iterative (an explicit stack), so any nesting that ``json.loads`` accepted is walked without
    recursion.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return where or "the line"
        elif isinstance(item, dict):
            for k, v in reversed(item.items()):
                if not _encodable(k):
                    return f"{where}.{k!r} (a key)" if where else f"{k!r} (a key)"
                stack.append((v, f"{where}.{k}" if where else k))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_int(value: Any, name: str, *, minimum: int, turn: int | None = None) -> int:
    if not _is_int(value):
        raise _Invalid("wrong_type", f"{name} must be an integer, got {_type_name(value)}", turn)
    if value < minimum:
        raise _Invalid("bad_value", f"{name} must be >= {minimum}, got {value}", turn)
    return int(value)


def _token_ids(value: Any, name: str, turn: int) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise _Invalid("wrong_type", f"{name} must be an array of integers, got {_type_name(value)}", turn)
    if not set(map(type, value)) <= _INT_TYPE:  # one C-level pass; the loop below names the culprit
        bad = next(t for t in value if type(t) is not int)
        raise _Invalid("wrong_type", f"{name} must hold integers, found {_type_name(bad)}", turn)
    if value and (min(value) < 0 or max(value) > _MAX_TOKEN_ID):
        raise _Invalid(
            "bad_value", f"{name} must hold ids in [0, 2**31), got {min(value)}..{max(value)}", turn
        )
    return tuple(value)


def _logprobs(value: Any, turn: int) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise _Invalid("wrong_type", f"logprobs must be an array of numbers, got {_type_name(value)}", turn)
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise _Invalid("wrong_type", f"logprobs must hold numbers, found {_type_name(x)}", turn)
        try:
            xf = float(x)
        except OverflowError:  # an integer of 309+ digits
            raise _Invalid(
                "bad_value", "logprobs must be finite (an integer beyond float range)", turn
            ) from None
        if not math.isfinite(xf):
            raise _Invalid("bad_value", "logprobs must be finite", turn)
        if abs(xf) > _FLOAT32_MAX:
            raise _Invalid("bad_value", f"logprobs must fit float32 (datums are float32), got {xf:g}", turn)
        out.append(xf)
    return tuple(out)


def _turn_from_record(rec: Any, k: int, num_agents: int) -> Turn:
    """Turn ``k`` after every check, in order; raises :class:`_Invalid` naming the first that fails."""
    if not isinstance(rec, dict):
        raise _Invalid("wrong_type", f"a turn must be an object, got {_type_name(rec)}", k)
    unknown = [] if rec.keys() <= _TURN_FIELD_SET else sorted(set(rec) - _TURN_FIELD_SET)
    if unknown:
        raise _Invalid(
            "unknown_field",
            f"unknown turn field {unknown[0]!r} (known: {', '.join(_TURN_FIELDS)})",
            k,
        )
    for name in ("agent", "text"):
        if name not in rec:
            raise _Invalid("missing_field", f"turn has no {name!r}", k)
    agent = rec["agent"]
    if not _is_int(agent):
        raise _Invalid("wrong_type", f"agent must be an integer, got {_type_name(agent)}", k)
    if not 0 <= agent < num_agents:
        raise _Invalid(
            "agent_out_of_range",
            f"agent {agent} is out of range [0, {num_agents}) for num_agents={num_agents}",
            k,
        )
    if agent != k % num_agents:
        raise _Invalid(
            "out_of_order",
            f"expected agent {k % num_agents} (agents speak in order 0..{num_agents - 1}; "
            f"turns[{k}] is round {k // num_agents}, position {k % num_agents}), got agent {agent}",
            k,
        )
    text = rec["text"]
    if not isinstance(text, str):
        raise _Invalid("wrong_type", f"text must be a string, got {_type_name(text)}", k)
    rnd = rec.get("round")
    if rnd is not None:
        rnd = _require_int(rnd, "round", minimum=0, turn=k)
        if rnd != k // num_agents:
            raise _Invalid(
                "round_mismatch",
                f"round {rnd} does not match the speaking order: turns[{k}] with {num_agents} agents "
                f"is round {k // num_agents} (0-based)",
                k,
            )
    sequence_id = rec.get("sequence_id")
    if sequence_id is not None and not isinstance(sequence_id, str):
        raise _Invalid("wrong_type", f"sequence_id must be a string, got {_type_name(sequence_id)}", k)
    if sequence_id == "":
        raise _Invalid("bad_value", "sequence_id must not be empty (leave it out for no sequence)", k)
    present = [name in rec and rec[name] is not None for name in _TURN_FIELDS[3:6]]
    obs = act = lps = None
    if any(present):
        if not all(present):
            missing = [n for n, p in zip(_TURN_FIELDS[3:6], present, strict=True) if not p]
            raise _Invalid(
                "incomplete_tokens",
                "observation_tokens, action_tokens and logprobs come together; missing " + ", ".join(missing),
                k,
            )
        obs = _token_ids(rec["observation_tokens"], "observation_tokens", k)
        act = _token_ids(rec["action_tokens"], "action_tokens", k)
        lps = _logprobs(rec["logprobs"], k)
        if len(lps) != len(act):
            raise _Invalid(
                "token_mismatch",
                f"logprobs has {len(lps)} entries but action_tokens has {len(act)}",
                k,
            )
    return Turn(
        agent=int(agent),
        text=text,
        round=rnd,
        observation_tokens=obs,
        action_tokens=act,
        logprobs=lps,
        meta=rec.get("meta"),
        sequence_id=sequence_id,
    )


def debate_from_record(rec: Any, line: int = 0) -> Debate:
    """Validates one decoded JSON value and builds a :class:`Debate`.

    Args:
      rec: the decoded JSON value of one line.
      line: its 1-based line number (kept on the result).

    Returns:
      The debate.

    Raises:
      ValueError: the record is not a valid debate; the message names the field (and turn) and why.

    Examples:
      >>> d = debate_from_record({"id": "a", "question": "q", "num_agents": 2,
      ...                         "turns": [{"agent": 0, "text": "hi"}]})
      >>> d.num_agents, len(d.turns), d.max_rounds
      (2, 1, None)
    """
    try:
        return _debate_from_record(rec, line)
    except _Invalid as e:
        where = f"turns[{e.turn}]: " if e.turn is not None else ""
        raise ValueError(f"{where}{e.message} [{e.reason}]") from None


def _debate_from_record(rec: Any, line: int) -> Debate:
    """The debate of ``rec`` after every check: :func:`_plain_debate` where it vouches for the record,
    else :func:`_checked_debate`, which raises :class:`_Invalid` naming the first check that fails."""
    if _plain_debate_of is not None:
        debate = _plain_debate_of(rec, line)
        if debate is not None:
            return debate
    return _checked_debate(rec, line)


def _plain_debate(rec: Any, line: int) -> Debate | None:
    """The debate of a record that passes every check, or None: then :func:`_checked_debate` reads it
    and names what is wrong (or reads it: None only says this path did not vouch for the record).

    The same checks as :func:`_checked_debate` with fewer Python operations a turn: exact types
    (``type(x) is int``, no bool), the speaking order by a running agent and round instead of ``k % n``
    per turn, token ids and logprobs checked by C-level passes. ``tests/test_transcripts.py`` compares
    the two on generated and edited records. What it saves: ``debate-kernel score --out`` of 30 k
    generated debates (``benchmarks.bench_score_scale``'s file) takes 0.92 × the CPU time it takes
    with ``_checked_debate`` alone (0.91-0.93, 4 interleaved pairs)."""
    if type(rec) is not dict or not rec.keys() <= _DEBATE_FIELD_SET:
        return None
    get = rec.get
    fmt = get("format", FORMAT)
    if fmt is not FORMAT and (type(fmt) is not str or fmt != FORMAT):
        return None
    debate_id = get("id")
    question = get("question")
    n = get("num_agents")
    turns_rec = get("turns")
    max_rounds = get("max_rounds")
    if type(debate_id) is not str:
        if type(debate_id) is not int:
            return None
        debate_id = str(debate_id)
    if (
        type(question) is not str
        or type(n) is not int
        or not 1 <= n <= MAX_AGENTS
        or type(turns_rec) is not list
        or not turns_rec
    ):
        return None
    if max_rounds is not None and (
        type(max_rounds) is not int or max_rounds < 1 or len(turns_rec) > max_rounds * n
    ):
        return None
    turns: list[Turn] = []
    append = turns.append
    agent = rnd = 0
    for t in turns_rec:
        if type(t) is not dict:
            return None
        said, text = t.get("agent"), t.get("text")
        if type(said) is not int or said != agent or type(text) is not str:
            return None
        size = len(t)
        if size == 2:  # "agent" and "text" alone
            append(_new_turn(agent, text, None, None, None, None, None, None))
        elif size == 3 and type(stated := t.get("round")) is int and stated == rnd:
            append(_new_turn(agent, text, rnd, None, None, None, None, None))
        else:
            turn = _plain_turn(t, agent, text, rnd)
            if turn is None:
                return None
            append(turn)
        agent += 1
        if agent == n:
            agent = 0
            rnd += 1
    return Debate(debate_id, question, n, tuple(turns), max_rounds, line, get("meta"))


def _plain_turn(t: dict[str, Any], agent: int, text: str, rnd: int) -> Turn | None:
    """:func:`_plain_debate`'s turn with fields beyond ``agent`` and ``text``, or None."""
    if not t.keys() <= _TURN_FIELD_SET:
        return None
    get = t.get
    stated = get("round")
    if stated is not None and (type(stated) is not int or stated != rnd):
        return None
    sequence_id = get("sequence_id")
    if sequence_id is not None and (type(sequence_id) is not str or not sequence_id):
        return None
    obs, act, lps = get("observation_tokens"), get("action_tokens"), get("logprobs")
    if obs is None and act is None and lps is None:
        return _new_turn(agent, text, stated, None, None, None, get("meta"), sequence_id)
    if (
        type(obs) is not list
        or type(act) is not list
        or type(lps) is not list
        or len(lps) != len(act)
        or not _plain_ids(obs)
        or not _plain_ids(act)
        or not _plain_logprobs(lps)
    ):
        return None
    return _new_turn(agent, text, stated, tuple(obs), tuple(act), tuple(lps), get("meta"), sequence_id)


def _plain_ids(ids: list[Any]) -> bool:
    """Whether a list holds only ints in [0, 2**31) (C-level passes)."""
    return not ids or (set(map(type, ids)) == _INT_TYPE and min(ids) >= 0 and max(ids) <= _MAX_TOKEN_ID)


def _plain_logprobs(lps: list[Any]) -> bool:
    """Whether a list holds only floats (not ints, which :func:`_logprobs` converts) that are finite
    and within float32's range (C-level passes)."""
    return not lps or (
        set(map(type, lps)) == _FLOAT_TYPE
        and all(map(math.isfinite, lps))
        and -_FLOAT32_MAX <= min(lps)
        and max(lps) <= _FLOAT32_MAX
    )


_plain_debate_of: Callable[[Any, int], Debate | None] | None = _plain_debate  # None: checked path alone


def _checked_debate(rec: Any, line: int) -> Debate:
    if not isinstance(rec, dict):
        raise _Invalid("not_object", f"a line must hold a JSON object, got {_type_name(rec)}")
    fmt = rec.get("format", FORMAT)
    if fmt != FORMAT:
        raise _Invalid(
            "unsupported_format", f"format {fmt!r} is not supported (this reader reads {FORMAT!r})"
        )
    unknown = [] if rec.keys() <= _DEBATE_FIELD_SET else sorted(set(rec) - _DEBATE_FIELD_SET)
    if unknown:
        raise _Invalid(
            "unknown_field",
            f"unknown field {unknown[0]!r} (known: {', '.join(_DEBATE_FIELDS)}; "
            "free-form data goes under 'meta')",
        )
    for name in ("id", "question", "num_agents", "turns"):
        if name not in rec:
            raise _Invalid("missing_field", f"missing required field {name!r}")
    debate_id = rec["id"]
    if _is_int(debate_id):
        debate_id = str(debate_id)
    if not isinstance(debate_id, str):
        raise _Invalid("wrong_type", f"id must be a string or an integer, got {_type_name(debate_id)}")
    question = rec["question"]
    if not isinstance(question, str):
        raise _Invalid("wrong_type", f"question must be a string, got {_type_name(question)}")
    num_agents = _require_int(rec["num_agents"], "num_agents", minimum=1)
    if num_agents > MAX_AGENTS:
        raise _Invalid("bad_value", f"num_agents must be <= {MAX_AGENTS}, got {num_agents}")
    max_rounds = rec.get("max_rounds")
    if max_rounds is not None:
        max_rounds = _require_int(max_rounds, "max_rounds", minimum=1)
    turns_rec = rec["turns"]
    if not isinstance(turns_rec, list):
        raise _Invalid("wrong_type", f"turns must be an array, got {_type_name(turns_rec)}")
    if not turns_rec:
        raise _Invalid("no_turns", "turns is empty: nothing to score")
    turns = []
    for k, t in enumerate(turns_rec):
        turn = _turn_from_record(t, k, num_agents)
        if max_rounds is not None and k >= max_rounds * num_agents:
            raise _Invalid(
                "turn_after_end",
                f"turn after the end: with max_rounds={max_rounds} and {num_agents} agents the debate "
                f"ends after turns[{max_rounds * num_agents - 1}]",
                k,
            )
        turns.append(turn)
    return Debate(
        id=debate_id,
        question=question,
        num_agents=num_agents,
        turns=tuple(turns),
        max_rounds=max_rounds,
        line=line,
        meta=rec.get("meta"),
    )


def check_debates(debates: Sequence[Debate]) -> tuple[list[Debate], list[TranscriptError]]:
    """The debates that hold only what a transcript line may hold (the reader's checks: agent ids, token
    ids, logprobs, rounds, turn order, …), and one error, with the reader's reason code, for each other.

    For debates built in memory; :func:`read_transcripts` has checked the debates it returns.

    Examples:
      >>> ok = Debate("a", "q?", 2, (Turn(0, "x"),))
      >>> bad = Debate("b", "q?", 0, (Turn(0, "x"),))
      >>> good, errors = check_debates([ok, bad])
      >>> [d.id for d in good], errors[0].reason
      (['a'], 'bad_value')
    """
    good: list[Debate] = []
    errors: list[TranscriptError] = []
    for debate in debates:
        try:
            _debate_from_record(debate_to_record(debate), debate.line)
        except _Invalid as e:
            errors.append(TranscriptError(debate.line, e.reason, e.message, e.turn, str(debate.id)))
        else:
            good.append(debate)
    return good, errors


def parse_line(text: str | bytes, line: int) -> Debate | TranscriptError:
    """Reads one JSON Lines line. Total: returns the debate, or an error naming the line and reason.

    Args:
      text: the line (str, or UTF-8 bytes), with or without its line ending.
      line: its 1-based line number.

    Returns:
      A :class:`Debate`, or a :class:`TranscriptError` (never raises).

    Examples:
      >>> print(parse_line('{"id": 1, "question": "q"', 7))
      line 7: bad JSON: Expecting ',' delimiter at column 26 [bad_json]
    """
    from_utf8 = isinstance(text, bytes)  # decoded UTF-8 holds no lone surrogate (only a JSON escape can)
    if isinstance(text, bytes):
        fast = _fast_record(text)
        if fast is not _DECLINED:
            return _debate_or_error(fast, line)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            return TranscriptError(line, "bad_encoding", f"not UTF-8: {e.reason} at byte {e.start}")
    try:
        rec = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        at = " " if e.msg.endswith(" at") else " at "  # "Unterminated string starting at" ends with "at"
        return TranscriptError(line, "bad_json", f"bad JSON: {e.msg}{at}column {e.colno}")
    except (ValueError, RecursionError) as e:
        if "integer string conversion" in str(e):  # Python's guard against quadratic int parsing
            limit = sys.get_int_max_str_digits()
            return TranscriptError(line, "bad_json", f"bad JSON: an integer with more than {limit} digits")
        return TranscriptError(line, "bad_json", f"bad JSON: {e}")
    if ("\\u" in text and _SURROGATE_ESCAPE.search(text)) or (not from_utf8 and not _encodable(text)):
        where = _lone_surrogate(rec)
        if where is not None:
            turn = re.match(r"turns\[(\d+)\]", where)
            where = where if len(where) <= 120 else where[:119] + "…"
            return TranscriptError(
                line,
                "bad_encoding",
                f"{where} holds a lone UTF-16 surrogate (e.g. \\ud800), which is not Unicode text",
                int(turn.group(1)) if turn else None,
            )
    return _debate_or_error(rec, line)


_DECLINED = object()
_DIGIT_BYTES = bytes(1 if 0x30 <= b <= 0x39 else 0 for b in range(256))
_LONG_DIGIT_RUN = b"\x01" * 19


def _fast_record(text: bytes) -> Any:
    """The value ``json.loads`` gives for a UTF-8 line, by orjson; or ``_DECLINED`` (the json path then
    reads it, errors and their messages included).

    Where orjson returns a value at all it is json.loads's value (``tests/test_transcripts.py`` compares
    the two readers on generated lines), with one exception, declined here: an integer beyond 64 bits,
    which orjson reads as a float; a line with a run of 19 digits goes to json. orjson refuses what the
    json path reports: bytes that are not UTF-8, lone surrogate escapes, NaN and Infinity, numbers
    beyond float64, nesting deeper than 1,024. What it saves: ``debate-kernel score`` of 30 k generated
    debates (``benchmarks.bench_score_scale``'s file) takes 9.8 % more CPU time with json alone (median
    of 7 interleaved pairs, 1.07-1.15 ×); ``report`` of 10 k, 9.6 % (0.99-1.38 ×)."""
    if _orjson_loads is None or text.translate(_DIGIT_BYTES).find(_LONG_DIGIT_RUN) >= 0:
        return _DECLINED
    try:
        return _orjson_loads(text)
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        return _DECLINED


def _debate_or_error(rec: Any, line: int) -> Debate | TranscriptError:
    """The debate of a decoded record, or the error naming what is wrong with it."""
    try:
        return _debate_from_record(rec, line)
    except _Invalid as e:
        debate_id = rec.get("id") if isinstance(rec, dict) else None
        if _is_int(debate_id):
            debate_id = str(debate_id)
        return TranscriptError(
            line, e.reason, e.message, e.turn, debate_id if isinstance(debate_id, str) else None
        )


def _split_lines(
    source: str | bytes | Iterable[str | bytes | LineTooLarge],
) -> Iterator[str | bytes | LineTooLarge]:
    # Split only on "\n" (str.splitlines would also split on U+2028 and friends, which JSON strings
    # may legally contain unescaped).
    if isinstance(source, str | bytes):
        pieces: list[Any] = source.split("\n" if isinstance(source, str) else b"\n")  # type: ignore[arg-type]
        if not pieces[-1]:
            pieces.pop()  # the text ends with a newline: no line after it
        yield from pieces
    else:
        yield from source


def _strip_bom(raw: str | bytes) -> str | bytes:
    if isinstance(raw, bytes):
        return raw.removeprefix(b"\xef\xbb\xbf")
    return raw.removeprefix("\ufeff")


def read_transcripts(source: str | bytes | Iterable[str | bytes | LineTooLarge]) -> ReadResult:
    """Reads debates from JSON Lines text. Total: bad lines become errors, the rest are read.

    Blank lines are skipped and counted. A repeated id is an error on the later line. A UTF-8 byte order
    mark at the start of the source (as some Windows editors write) is skipped.

    Args:
      source: the whole text (str or bytes), or an iterable of lines (e.g. an open file).

    Returns:
      A :class:`ReadResult` with the debates in file order and one error per unusable line.

    Examples:
      >>> text = ('{"id": "a", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}\\n'
      ...         '{"id": "b", "question": "q", "num_agents": 2, "turns": [{"agent": 1, "text": "x"}]}\\n')
      >>> res = read_transcripts(text)
      >>> [d.id for d in res.debates], [e.reason for e in res.errors], res.num_lines, res.num_blank
      (['a'], ['out_of_order'], 2, 0)
    """
    debates: list[Debate] = []
    errors: list[TranscriptError] = []
    reader = LineReader()
    for raw in _split_lines(source):
        got = reader.feed(raw)
        if isinstance(got, TranscriptError):
            errors.append(got)
        elif got is not None:
            debates.append(got)
    return ReadResult(tuple(debates), tuple(errors), reader.num_lines, reader.num_blank)


def _too_large(line: int, size: int) -> TranscriptError:
    return TranscriptError(
        line,
        "line_too_large",
        f"the line has {size:,} bytes, over the {MAX_LINE_BYTES:,} a transcript line may have "
        "(MAX_LINE_BYTES); it was skipped unread",
    )


class LineTooLarge(NamedTuple):
    """Stands for a line longer than :data:`MAX_LINE_BYTES`, which :func:`bounded_lines` skipped unread.

    Attributes:
      size: the line's length in bytes (its ending excluded).
    """

    size: int


def bounded_lines(source: IO[bytes], limit: int | None = None) -> Iterator[bytes | LineTooLarge]:
    """The lines of a binary stream, each as bytes, or a :class:`LineTooLarge` for one over ``limit`` bytes
    (default :data:`MAX_LINE_BYTES`).

    A long line is read in pieces of at most ``limit`` + 1 bytes and dropped piece by piece, so memory
    stays within about ``limit`` whatever the stream holds; the line keeps its place (a
    :class:`LineReader` fed it counts it and reports ``line_too_large``).

    Examples:
      >>> import io
      >>> list(bounded_lines(io.BytesIO(b"ab\\n" + b"x" * 10 + b"\\ncd"), limit=4))
      [b'ab\\n', LineTooLarge(size=10), b'cd']
    """
    limit = MAX_LINE_BYTES if limit is None else limit
    while True:
        piece = source.readline(limit + 1)
        if not piece:
            return
        if len(piece) <= limit or piece.endswith(b"\n"):
            yield piece
            continue
        size = len(piece)
        while piece and not piece.endswith(b"\n"):
            piece = source.readline(limit + 1)
            size += len(piece)
        yield LineTooLarge(size - piece.endswith(b"\n"))


class LineReader:
    """Reads a transcript one line at a time, as :func:`read_transcripts` does for a whole source.

    The reader remembers each id it has read (to report a repeated one) and counts lines and blank
    lines; nothing else is kept, so a file can be streamed through it in bounded memory apart from the
    ids.

    Examples:
      >>> reader = LineReader()
      >>> line = '{"id": "a", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
      >>> reader.feed(line).id, reader.feed("  "), reader.feed(line).reason, reader.num_lines
      ('a', None, 'duplicate_id', 3)
    """

    __slots__ = ("_seen", "num_blank", "num_lines")

    def __init__(self, *, first_line: int = 1, seen: dict[str, int] | None = None) -> None:
        """``first_line``: the number of the first line fed (> 1: a part of a stream read from there;
        only line 1 may start with a byte-order mark). ``seen``: ids read before, id → first line (the
        reader adds to it)."""
        if isinstance(first_line, bool) or not isinstance(first_line, int) or first_line < 1:
            raise ValueError(f"first_line must be an integer >= 1, got {first_line!r}")
        self._seen: dict[str, int] = {} if seen is None else seen
        self.num_lines = first_line - 1
        self.num_blank = 0

    def feed(self, raw: str | bytes | LineTooLarge) -> Debate | TranscriptError | None:
        """Reads the next line: its debate, its error, or None for a blank line (counted). A line over
        :data:`MAX_LINE_BYTES` (or the :class:`LineTooLarge` that stands for it) is the error
        ``line_too_large``.

        Raises:
          TypeError: ``raw`` is not a str, bytes or :class:`LineTooLarge` (naming its line).
        """
        self.num_lines += 1
        if isinstance(raw, LineTooLarge):
            return _too_large(self.num_lines, raw.size)
        if not isinstance(raw, str | bytes):  # the name is built only for the message
            check_type(raw, (str, bytes), f"line {self.num_lines} of source")
        if self.num_lines == 1:
            raw = _strip_bom(raw)
        stripped = raw.strip()
        if not stripped:
            self.num_blank += 1
            return None
        if len(stripped) > MAX_LINE_BYTES:
            return _too_large(self.num_lines, len(stripped))
        got = parse_line(stripped, self.num_lines)
        if isinstance(got, TranscriptError):
            return got
        first = self._seen.setdefault(got.id, self.num_lines)
        if first != self.num_lines:
            return TranscriptError(
                self.num_lines,
                "duplicate_id",
                f"id {got.id!r} was already used on line {first}",
                None,
                got.id,
            )
        return got


def read_transcript_file(path: str | os.PathLike[str]) -> ReadResult:
    """Reads a ``debate-transcript/1`` JSON Lines file (``-`` reads standard input).

    Raises:
      OSError: the file cannot be opened or read (unusable input; bad lines are not an error).

    Examples:
      >>> import pathlib
      >>> import tempfile
      >>> good = dumps_debate(Debate(id="a", question="2 + 2?", num_agents=1, turns=(Turn(0, "4"),)))
      >>> with tempfile.TemporaryDirectory() as tmp:
      ...     path = pathlib.Path(tmp, "debates.jsonl")
      ...     _ = path.write_text(good + "\\n\\n{oops\\n", encoding="utf-8")
      ...     res = read_transcript_file(path)
      >>> [d.id for d in res.debates], [e.reason for e in res.errors], res.num_lines, res.num_blank
      (['a'], ['bad_json'], 3, 1)
    """
    if os.fspath(path) == "-":
        return read_transcripts(bounded_lines(sys.stdin.buffer))
    with open(path, "rb") as f:
        return read_transcripts(bounded_lines(f))


# ------------------------------------------------------------------------------------------------
# Writing


def _turn_to_record(turn: Turn) -> dict[str, Any]:
    rec: dict[str, Any] = {"agent": turn.agent}
    if turn.round is not None:
        rec["round"] = turn.round
    rec["text"] = turn.text
    if turn.action_tokens is not None:
        obs = turn.observation_tokens if turn.observation_tokens is not None else ()
        rec["observation_tokens"] = obs.tolist() if hasattr(obs, "tolist") else list(obs)
        rec["action_tokens"] = list(turn.action_tokens)
        rec["logprobs"] = list(turn.logprobs or ())
    if turn.sequence_id is not None:
        rec["sequence_id"] = turn.sequence_id
    if turn.meta is not None:
        rec["meta"] = turn.meta
    return rec


def debate_to_record(debate: Debate, *, with_format: bool = True) -> dict[str, Any]:
    """The JSON-ready record of a debate (the inverse of :func:`debate_from_record`).

    Examples:
      >>> d = Debate(id="a", question="q", num_agents=2, turns=(Turn(0, "hi"),), max_rounds=3)
      >>> debate_to_record(d)
      {'format': 'debate-transcript/1', 'id': 'a', 'question': 'q', 'num_agents': 2, 'max_rounds': 3, 'turns': [{'agent': 0, 'text': 'hi'}]}
      >>> debate_from_record(debate_to_record(d)) == d
      True
    """  # noqa: E501
    check_type(debate, Debate, "debate")
    rec: dict[str, Any] = {}
    if with_format:
        rec["format"] = FORMAT
    rec["id"] = debate.id
    rec["question"] = debate.question
    rec["num_agents"] = debate.num_agents
    if debate.max_rounds is not None:
        rec["max_rounds"] = debate.max_rounds
    rec["turns"] = [_turn_to_record(t) for t in debate.turns]
    if debate.meta is not None:
        rec["meta"] = debate.meta
    return rec


def dumps_debate(debate: Debate | Mapping[str, Any]) -> str:
    """One compact JSON line (no trailing newline) for a debate or an already built record, by orjson.

    A float is written in orjson's shortest form that reads back to the same value (``-1.2e-05`` is
    ``-0.000012``); a record orjson cannot write (an integer beyond 64 bits, a key that is not a string)
    goes through ``json``. A non-finite float in ``meta`` becomes ``null``.

    Raises:
      ValueError: a turn's logprobs are not finite (the line would not read back).

    Examples:
      >>> print(dumps_debate(Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "4"),))))
      {"format":"debate-transcript/1","id":"a","question":"q","num_agents":1,"turns":[{"agent":0,"text":"4"}]}
      >>> print(dumps_debate({"id": "b", "question": "¿2 + 2?"}))
      {"id":"b","question":"¿2 + 2?"}
    """
    if isinstance(debate, Debate):
        for turn in debate.turns:
            if turn.logprobs and not all(map(math.isfinite, turn.logprobs)):
                raise ValueError(f"debate {debate.id!r}: logprobs must be finite to be written")
        rec = debate_to_record(debate)
    else:
        rec = dict(debate)
    try:
        return orjson.dumps(rec).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_transcripts(
    debates: Sequence[Debate | Mapping[str, Any]], dest: str | os.PathLike[str] | TextIO
) -> int:
    """Writes debates as JSON Lines (UTF-8, ``\\n`` endings). Returns the number of lines written.

    A path is written to a temporary file next to it and renamed over it at the end, so a reader never
    sees a partial file and an interrupted write keeps the previous one.

    Examples:
      >>> buf = io.StringIO()
      >>> write_transcripts([Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "x"),))], buf)
      1
      >>> read_transcripts(buf.getvalue()).debates[0].id
      'a'
    """
    if isinstance(dest, io.TextIOBase) or hasattr(dest, "write"):
        out: Any = dest
        for d in debates:
            out.write(dumps_debate(d) + "\n")
        return len(debates)
    with atomic_write(dest) as f:
        for d in debates:
            f.write(dumps_debate(d) + "\n")
    return len(debates)
