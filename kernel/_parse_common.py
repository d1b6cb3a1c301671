"""What both parse policies share: the reason codes, the required tags, case folding as
``re.IGNORECASE`` sees it, agent ids with leading zeros, and the failed results."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal, TypeAlias, get_args

from kernel._types import MalformedVote, ParsedResponse, Vote, pack_votes

__all__ = ["MALFORMED_VOTE_REASONS", "PARSE_FAILURE_REASONS", "PARSE_POLICIES"]

ParsePolicy: TypeAlias = Literal["robust", "reference"]
"""How :func:`kernel.parse_response` reads an output: ``"robust"`` (the default) or ``"reference"``."""
ParseFailureReason: TypeAlias = Literal[
    "missing_solution",
    "missing_evaluation",
    "missing_consensus",
    "missing_consensus_reason",
    "unclosed_think",
    "not_text",
]
MalformedVoteReason: TypeAlias = Literal[
    "no_comparison",
    "no_operator",
    "ambiguous_operator",
    "unknown_operator",
    "bad_agent_id",
    "signed_agent_id",
    "comparison_limit",
]

PARSE_POLICIES: Final[tuple[ParsePolicy, ...]] = get_args(ParsePolicy)
"""Names accepted by ``parse_response(policy=...)``: ``("robust", "reference")``; the first is the default."""

PARSE_FAILURE_REASONS: Final[tuple[ParseFailureReason, ...]] = get_args(ParseFailureReason)
"""Every ``ParsedResponse.reason`` of a failed parse (``""`` when the parse succeeds)."""

MALFORMED_VOTE_REASONS: Final[tuple[MalformedVoteReason, ...]] = get_args(MalformedVoteReason)
"""Every ``MalformedVote.reason`` the parser produces."""


# Python's re.IGNORECASE also matches U+0130 and U+0131 to "i", U+017F to "s" and U+212A (Kelvin) to
# "k", and no other non-ASCII character to an ASCII letter. ``_fold`` keeps positions (one character
# in, one out), lowers ASCII letters, maps those four to their letters and every other non-ASCII
# character to a non-ASCII one or "?", so ``_fold(text).find(tag)`` equals an IGNORECASE search for any
# ASCII ``tag``. (str.lower() would too, but it is four times slower on non-ASCII text, and U+0130
# lowers to two characters.)
_LETTER_FOLDS: Final = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    try:  # Latin-1 text (none of the four above): bytes.lower() changes A-Z only
        return text.encode("latin-1").lower().decode("latin-1")
    except UnicodeEncodeError:
        pass
    for src, dst in _LETTER_FOLDS:
        text = text.replace(src, dst)
    return text.encode("ascii", "replace").lower().decode("ascii")  # one "?" per other character


# Every Unicode decimal digit (what ``\d`` and ``int()`` accept) whose value is 0; tests recompute it.
_ZEROS: Final = (
    "0\u0660\u06f0\u07c0\u0966\u09e6\u0a66\u0ae6\u0b66\u0be6\u0c66\u0ce6\u0d66\u0de6\u0e50\u0ed0"
    "\u0f20\u1040\u1090\u17e0\u1810\u1946\u19d0\u1a80\u1a90\u1b50\u1bb0\u1c40\u1c50\ua620\ua8d0"
    "\ua900\ua9d0\ua9f0\uaa50\uabf0\uff10\U000104a0\U00010d30\U00011066\U000110f0\U00011136"
    "\U000111d0\U000112f0\U00011450\U000114d0\U00011650\U000116c0\U00011730\U000118e0\U00011950"
    "\U00011c50\U00011d50\U00011da0\U00016a60\U00016ac0\U00016b50\U0001d7ce\U0001d7d8\U0001d7e2"
    "\U0001d7ec\U0001d7f6\U0001e140\U0001e2f0\U0001e950\U0001fbf0"
)
_ZERO_RUN: Final = re.compile(f"[{_ZEROS}]++")
_INT_MAX_STR_DIGITS: Final = 4300  # CPython's default int-string conversion limit
_REQUIRED: Final = ("solution", "evaluation", "consensus", "consensus_reason")  # in the order checked
_MISSING: Final[dict[str, ParseFailureReason]] = {
    "solution": "missing_solution",
    "evaluation": "missing_evaluation",
    "consensus": "missing_consensus",
    "consensus_reason": "missing_consensus_reason",
}
_REQUIRED_SET: Final = frozenset(_REQUIRED)


def _agent_id(digits: str, max_digits: int) -> int | None:
    """``int(digits)`` when it has at most ``max_digits`` significant digits, else None."""
    if len(digits) > max_digits:
        zeros = _ZERO_RUN.match(digits)
        digits = (digits[zeros.end() :] if zeros else digits) or "0"
        if len(digits) > max_digits:
            return None
    return int(digits)


class _Draft:
    """A :class:`~kernel.ParsedResponse` being built: the same slots, set by plain assignment, then
    the object becomes a ``ParsedResponse`` (``__class__`` assigned; CPython allows it between classes
    of one slot layout). The frozen dataclass sets each of its 14 fields through
    ``object.__setattr__``: 1.4 µs a response, against 0.3 µs here, where a short output parses in
    about 5. Call it as ``_new_response``; the parameters are the fields, in field order."""

    __slots__ = ParsedResponse.__slots__

    def __init__(
        self,
        ok: bool,
        solution: str,
        evaluation: str,
        comparison: str,
        consensus: bool,
        consensus_reason: str,
        votes: tuple[Vote, ...],
        author_id: int,
        self_votes_dropped: int,
        malformed_votes: tuple[MalformedVote, ...],
        reason: str,
        normalized_text: str,
        policy: str,
        vote_codes: bytes | None,
    ) -> None:
        self.ok = ok
        self.solution = solution
        self.evaluation = evaluation
        self.comparison = comparison
        self.consensus = consensus
        self.consensus_reason = consensus_reason
        self.votes = votes
        self.author_id = author_id
        self.self_votes_dropped = self_votes_dropped
        self.malformed_votes = malformed_votes
        self.reason = reason
        self.normalized_text = normalized_text
        self.policy = policy
        self.vote_codes = vote_codes
        self.__class__ = ParsedResponse  # type: ignore[assignment]


if TYPE_CHECKING:  # checked as the dataclass's own constructor, which gives the same object
    _new_response = ParsedResponse
else:
    _new_response = _Draft
if list(inspect.signature(_Draft).parameters) != [f.name for f in dataclasses.fields(ParsedResponse)]:
    raise ImportError("kernel._parse_common._Draft must set every ParsedResponse field, in field order")


def _empty(policy: ParsePolicy, author_id: int, reason: ParseFailureReason) -> ParsedResponse:
    """A failed parse with nothing found (no fields, no text kept)."""
    return _failure(policy, author_id, reason, "", {}, "")


def _failure(
    policy: ParsePolicy,
    author_id: int,
    reason: ParseFailureReason,
    normalized: str,
    found: dict[str, str],
    comparison: str,
) -> ParsedResponse:
    """A failed parse: the fields found are kept for diagnostics, but no consensus and no votes."""
    return _new_response(
        False,  # ok
        found.get("solution", ""),
        found.get("evaluation", ""),
        comparison,
        False,  # consensus
        found.get("consensus_reason", ""),
        (),  # votes
        author_id,
        0,  # self_votes_dropped
        (),  # malformed_votes
        reason,
        normalized,  # normalized_text
        policy,
        b"",  # vote_codes
    )


def _success(
    policy: ParsePolicy,
    author_id: int,
    found: dict[str, str],
    comparison: str,
    consensus: bool,
    votes: Sequence[Vote],
    dropped: int,
    malformed: Sequence[MalformedVote],
    normalized: str,
    codes: bytes | None = None,
) -> ParsedResponse:
    """A complete parse: ``found`` holds solution, evaluation and consensus_reason as read; ``codes``
    the votes packed, where the parser has them already."""
    return _new_response(
        True,  # ok
        found["solution"],
        found["evaluation"],
        comparison,
        consensus,
        found["consensus_reason"],
        tuple(votes),
        author_id,
        dropped,  # self_votes_dropped
        tuple(malformed),  # malformed_votes
        "",  # reason
        normalized,  # normalized_text
        policy,
        pack_votes(votes) if codes is None else codes,  # vote_codes
    )
