"""``score --out`` results read back: one line per debate, its figures as ``score`` computed them
(:func:`adapters.pipeline.records.debate_records`), or the error of an input line ``score`` skipped.

The reader is total, as the transcript reader is: every line gives a :class:`ScoredRecord`, a
:class:`SkippedRecord` or a :class:`~adapters.transcripts.TranscriptError` naming the line of the
results file and the reason (``bad_json``, ``not_object``, ``missing_field``, ``wrong_type``,
``bad_value``, ``line_too_large``); nothing is scored again. Fields it does not draw are not read, so a
record with more fields than these still reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from adapters.transcripts import MAX_AGENTS, MAX_LINE_BYTES, LineTooLarge, TranscriptError

__all__ = ["ResultReader", "ResultVote", "ScoredRecord", "SkippedRecord", "read_result"]

_OPS = (">", "=", "?")


@dataclass(frozen=True, slots=True)
class ResultVote:
    """One vote of a scored debate: ``author`` said ``Agent a op Agent b``; ``valid`` and its ``reason``
    as scoring judged them (``reason`` is ``"valid"`` for a counted vote)."""

    author: int
    a: int
    op: str
    b: int
    valid: bool
    reason: str


@dataclass(frozen=True, slots=True)
class ScoredRecord:
    """A scored debate's line of ``score --out``, as written (figures rounded to 6 decimals there; a
    figure written as null, not finite when scored, reads as NaN).

    Attributes:
      id: the debate's id. line: its line in the input ``score`` read.
      num_agents, rounds, num_turns: agents; rounds played; turns scored (accepted by the replay).
      end: how the debate ended (``consensus``, ``max_rounds``, ``parse_error``, ``open``).
      votes_total, votes_malformed: valid votes counted; votes that could not be read.
      votes: every vote read, valid or not.
      rewards, step_rewards, returns, advantages: per agent, ``num_agents`` each.
      parse_failures: ``(turn, agent, reason)`` of each scored turn that failed to parse.
      datums: ``(count, tokens, action_tokens)`` of the debate's datums, or None (no tokens).
    """

    id: str
    line: int
    num_agents: int
    rounds: int
    num_turns: int
    end: str
    votes_total: int
    votes_malformed: int
    votes: tuple[ResultVote, ...]
    rewards: tuple[float, ...]
    step_rewards: tuple[float, ...]
    returns: tuple[float, ...]
    advantages: tuple[float, ...]
    parse_failures: tuple[tuple[int, int, str], ...]
    datums: tuple[int, int, int] | None


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A line ``score`` skipped, read back: ``error`` names the line of the input and why."""

    error: TranscriptError


class _Invalid(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), "object"
    )


def _field(rec: dict[str, Any], name: str) -> Any:
    if name not in rec:
        raise _Invalid("missing_field", f"missing required field {name!r}")
    return rec[name]


def _int(value: Any, name: str, lo: int | None = 0, hi: int | None = None) -> int:
    """An integer in ``[lo, hi)`` (None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid("wrong_type", f"{name} must be an integer, got {_kind(value)}")
    if (lo is not None and value < lo) or (hi is not None and value >= hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi})"
        raise _Invalid("bad_value", f"{name} must be {bound}, got {value}")
    return value


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _Invalid("wrong_type", f"{name} must be a string, got {_kind(value)}")
    return value


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("wrong_type", f"{name} must be true or false, got {_kind(value)}")
    return value


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid("wrong_type", f"{name} must be an array, got {_kind(value)}")
    return value


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid("wrong_type", f"{name} must be an object, got {_kind(value)}")
    return value


def _figures(value: Any, name: str, n: int) -> tuple[float, ...]:
    """``num_agents`` numbers (null: NaN)."""
    items = _list(value, name)
    if len(items) != n:
        raise _Invalid("bad_value", f"{name} must hold num_agents = {n} numbers, got {len(items)}")
    out = []
    for x in items:
        if x is None:
            out.append(math.nan)
        elif isinstance(x, bool) or not isinstance(x, int | float):
            raise _Invalid("wrong_type", f"{name} must hold numbers or null, found {_kind(x)}")
        else:
            out.append(float(x))
    return tuple(out)


def _vote(value: Any, n: int) -> ResultVote:
    """A vote of ``votes.list``: a valid one names two of the ``n`` agents; an invalid one may name any
    agent number (``out_of_range`` is one reason a vote is invalid)."""
    v = _object(value, "a vote of votes.list")
    op = _str(_field(v, "op"), "votes.list op")
    if op not in _OPS:
        raise _Invalid("bad_value", f"votes.list op must be one of {', '.join(_OPS)}, got {op!r}")
    valid = _bool(_field(v, "valid"), "votes.list valid")
    lo, hi, of = (0, n, " (of a valid vote)") if valid else (None, None, "")
    return ResultVote(
        author=_int(_field(v, "author"), "votes.list author", 0, n),
        a=_int(_field(v, "a"), "votes.list a" + of, lo, hi),
        op=op,
        b=_int(_field(v, "b"), "votes.list b" + of, lo, hi),
        valid=valid,
        reason=_str(_field(v, "reason"), "votes.list reason"),
    )


def _failure(value: Any, n: int) -> tuple[int, int, str]:
    f = _object(value, "an entry of parse_failures")
    turn = _int(_field(f, "turn"), "parse_failures turn")
    agent = _int(_field(f, "agent"), "parse_failures agent", 0, n)
    return turn, agent, _str(_field(f, "reason"), "parse_failures reason")


def _scored(rec: dict[str, Any]) -> ScoredRecord:
    debate_id = _field(rec, "id")
    if isinstance(debate_id, bool) or not isinstance(debate_id, str | int):
        raise _Invalid("wrong_type", f"id must be a string or an integer, got {_kind(debate_id)}")
    n = _int(_field(rec, "num_agents"), "num_agents", 1, MAX_AGENTS + 1)
    votes = _object(_field(rec, "votes"), "votes")
    datums = rec.get("datums")
    if datums is not None:
        d = _object(datums, "datums")
        datums = tuple(_int(_field(d, k), f"datums {k}") for k in ("count", "tokens", "action_tokens"))
    return ScoredRecord(
        id=str(debate_id),
        line=_int(_field(rec, "line"), "line"),
        num_agents=n,
        rounds=_int(_field(rec, "rounds"), "rounds"),
        num_turns=_int(_field(rec, "num_turns"), "num_turns"),
        end=_str(_field(rec, "end"), "end"),
        votes_total=_int(_field(votes, "total"), "votes.total"),
        votes_malformed=_int(_field(votes, "malformed"), "votes.malformed"),
        votes=tuple(_vote(v, n) for v in _list(_field(votes, "list"), "votes.list")),
        rewards=_figures(_field(rec, "rewards"), "rewards", n),
        step_rewards=_figures(_field(rec, "step_rewards"), "step_rewards", n),
        returns=_figures(_field(rec, "returns"), "returns", n),
        advantages=_figures(_field(rec, "advantages"), "advantages", n),
        parse_failures=tuple(_failure(f, n) for f in _list(_field(rec, "parse_failures"), "parse_failures")),
        datums=datums,
    )


def _skipped(rec: dict[str, Any]) -> SkippedRecord:
    e = _object(_field(rec, "error"), "error")
    turn, debate_id = e.get("turn"), e.get("id")
    return SkippedRecord(
        TranscriptError(
            line=_int(_field(e, "line"), "error.line"),
            reason=_str(_field(e, "reason"), "error.reason"),
            message=_str(_field(e, "message"), "error.message"),
            turn=None if turn is None else _int(turn, "error.turn"),
            debate_id=None if debate_id is None else _str(debate_id, "error.id"),
        )
    )


def read_result(rec: Any, line: int) -> ScoredRecord | SkippedRecord | TranscriptError:
    """One decoded line of ``score --out``. Total: its record, or an error naming ``line`` (of the
    results file) and the reason.

    Examples:
      >>> from adapters import data
      >>> from adapters.pipeline import debate_records, score
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
      >>> got = read_result(debate_records(score(debates))[3], 4)
      >>> got.end, got.votes_total, got.rewards, got.advantages
      ('max_rounds', 1, (1.0, 0.0, 0.0), (0.666667, -0.333333, -0.333333))
      >>> print(read_result({"id": "a", "status": "scored"}, 9))
      line 9 (id 'a'): missing required field 'num_agents' [missing_field]
    """
    try:
        if not isinstance(rec, dict):
            raise _Invalid("not_object", f"a line must hold a JSON object, got {_kind(rec)}")
        status = _field(rec, "status")
        if status == "scored":
            return _scored(rec)
        if status == "skipped":
            return _skipped(rec)
        raise _Invalid("bad_value", f"status must be 'scored' or 'skipped', got {status!r}")
    except _Invalid as e:
        debate_id = rec.get("id") if isinstance(rec, dict) else None
        if isinstance(debate_id, int) and not isinstance(debate_id, bool):
            debate_id = str(debate_id)
        return TranscriptError(
            line, e.reason, e.message, None, debate_id if isinstance(debate_id, str) else None
        )


class ResultReader:
    """Reads a results file one line at a time (blank lines counted and skipped; a UTF-8 byte order mark
    before line 1 skipped), as :class:`~adapters.transcripts.LineReader` reads transcripts.

    Examples:
      >>> reader = ResultReader()
      >>> reader.feed("{oops").reason, reader.feed(" "), reader.feed("[1]").reason, reader.num_lines
      ('bad_json', None, 'not_object', 3)
    """

    __slots__ = ("num_blank", "num_lines")

    def __init__(self) -> None:
        self.num_lines = 0
        self.num_blank = 0

    def feed(self, raw: str | bytes | LineTooLarge) -> ScoredRecord | SkippedRecord | TranscriptError | None:
        """Reads the next line: its record, its error, or None for a blank line."""
        self.num_lines += 1
        line = self.num_lines
        if isinstance(raw, LineTooLarge):
            return TranscriptError(line, "line_too_large", f"the line has {raw.size:,} bytes; skipped unread")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return TranscriptError(line, "bad_encoding", f"not UTF-8: {e.reason} at byte {e.start}")
        text = (raw.removeprefix("\ufeff") if line == 1 else raw).strip()
        if not text:
            self.num_blank += 1
            return None
        if len(text) > MAX_LINE_BYTES:
            return TranscriptError(line, "line_too_large", f"the line has {len(text):,} characters; skipped")
        try:
            rec = json.loads(text)
        except (ValueError, RecursionError) as e:
            return TranscriptError(line, "bad_json", f"bad JSON: {e}")
        return read_result(rec, line)
