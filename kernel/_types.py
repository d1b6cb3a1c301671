"""Value types shared by the kernel's topic modules.

Everything here is immutable: parsed responses are frozen dataclasses, votes are named tuples.
"""

from __future__ import annotations

import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numpy as np

__all__ = [
    "OP_EQ",
    "OP_GT",
    "OP_OTHER",
    "MalformedVote",
    "ParsedResponse",
    "Vote",
    "pack_votes",
]

OP_GT: Final = 0
"""Op code of ``a > b`` (``a`` beats ``b``) in struct-of-array votes."""
OP_EQ: Final = 1
"""Op code of ``a = b`` (a tie) in struct-of-array votes."""
OP_OTHER: Final = 2
"""Op code of any other operator; such a vote is always invalid (malformed)."""


class Vote(NamedTuple):
    """One pairwise comparison written by an agent: ``Agent a <op> Agent b``.

    ``op`` is ``">"`` or ``"="`` for votes produced by our parsers (the robust parser rewrites
    ``a < b`` as ``b > a``). Votes built by hand may carry any operator string; validation then counts
    them as malformed.
    """

    a: int
    op: str
    b: int


@dataclass(frozen=True, slots=True)
class MalformedVote:
    """A comparison line the parser could not read, kept with the reason (never silently dropped)."""

    line: str
    reason: str


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """The result of parsing one agent output. Total: every input text gives one of these.

    Attributes:
      ok: True when every required field was found.
      solution, evaluation, comparison, consensus_reason: stripped field texts ("" when missing).
      consensus: True iff the agent declared consensus (policy-specific reading of ``<consensus>``).
      votes: comparisons that survived the parser, author's own comparisons removed.
      author_id: the author's agent id as given to the parser (``-1`` when unknown).
      self_votes_dropped: number of comparisons involving the author that were removed.
      malformed_votes: comparison lines that could not be read, each with a reason code.
      reason: ``""`` when ``ok``; otherwise a reason code such as ``"missing_solution"``.
      normalized_text: the text the fields were read from, after normalisation.
      policy: name of the parse policy that produced this result.
      vote_codes: ``votes`` packed as native-endian int32 triples ``(a, op code, b)`` (ids saturated at
        the int32 bounds, op codes :data:`OP_GT` / :data:`OP_EQ` / :data:`OP_OTHER`), which
        ``votes_from_responses`` joins without a Python object per vote; the parsers and :meth:`make`
        fill it. ``None`` (a response built field by field) makes readers use ``votes``. Derived from
        ``votes``: not compared, not shown; ``dataclasses.replace`` of ``votes`` must pass
        ``vote_codes=None`` (or :func:`pack_votes` of the new votes).
    """

    ok: bool
    solution: str
    evaluation: str
    comparison: str
    consensus: bool
    consensus_reason: str
    votes: tuple[Vote, ...]
    author_id: int
    self_votes_dropped: int
    malformed_votes: tuple[MalformedVote, ...]
    reason: str
    normalized_text: str
    policy: str
    vote_codes: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def make(
        cls,
        author_id: int,
        *,
        votes: tuple[Vote, ...] = (),
        ok: bool = True,
        consensus: bool = False,
        solution: str = "",
        evaluation: str = "",
        comparison: str = "",
        consensus_reason: str = "",
        reason: str | None = None,
        policy: str = "manual",
    ) -> ParsedResponse:
        """Builds a response from its parts (tests, or votes collected outside the parser).

        ``reason`` defaults to ``""`` when ``ok`` and to ``"missing_solution"`` otherwise; no votes
        are counted as dropped or malformed.

        Examples:
          >>> r = ParsedResponse.make(2, votes=(Vote(0, ">", 1),), consensus=True)
          >>> r.ok, r.author_id, r.votes, r.reason
          (True, 2, (Vote(a=0, op='>', b=1),), '')
          >>> ParsedResponse.make(1, ok=False).reason
          'missing_solution'
        """
        if reason is None:
            reason = "" if ok else "missing_solution"
        votes = tuple(votes)
        return cls(
            ok=ok,
            solution=solution,
            evaluation=evaluation,
            comparison=comparison,
            consensus=consensus,
            consensus_reason=consensus_reason,
            votes=votes,
            author_id=author_id,
            self_votes_dropped=0,
            malformed_votes=(),
            reason=reason,
            normalized_text="",
            policy=policy,
            vote_codes=pack_votes(votes),
        )


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_OP_CODES: Final = {">": OP_GT, "=": OP_EQ}
SMALL_VOTE_IDS: Final = 64
"""Votes with both ids below this and operator ``">"`` or ``"="`` exist once: :data:`SMALL_VOTES`."""
SMALL_VOTES: Final = {
    (a, op, b): Vote(a, op, b)
    for a in range(SMALL_VOTE_IDS)
    for b in range(SMALL_VOTE_IDS)
    for op in _OP_CODES
}
"""``(a, op, b)`` → the one shared :class:`Vote` the parsers return for it (private to the kernel)."""
# Their 12 packed bytes, by object identity (the table keeps each alive, so no other object has its id)
# and by value.
_BYTES_BY_ID: Final = {
    id(v): array.array("i", (v.a, _OP_CODES[v.op], v.b)).tobytes() for v in SMALL_VOTES.values()
}
_BYTES_BY_VALUE: Final = {v: _BYTES_BY_ID[id(v)] for v in SMALL_VOTES.values()}


def pack_votes(votes: Iterable[tuple[int, str, int]]) -> bytes:
    """Votes as native-endian int32 triples ``(a, op code, b)``: :attr:`ParsedResponse.vote_codes`.

    Ids are saturated at the int32 bounds; an operator other than ``">"`` or ``"="`` is
    :data:`OP_OTHER`. A vote with small ids costs one table look-up (by identity for the parsers' shared
    votes).

    Examples:
      >>> import numpy as np
      >>> np.frombuffer(pack_votes([Vote(0, ">", 1), Vote(2, "<", 2**40)]), np.int32).reshape(-1, 3).tolist()
      [[0, 0, 1], [2, 2, 2147483647]]
    """
    votes = votes if isinstance(votes, list | tuple) else list(votes)
    try:  # the parsers' shared small votes: a look-up by identity, no hashing of the triple
        return b"".join(map(_BYTES_BY_ID.__getitem__, map(id, votes)))
    except KeyError:
        pass
    try:
        packed = b"".join(map(_BYTES_BY_VALUE.__getitem__, votes))
        if all(a.__class__ is int and b.__class__ is int for a, _, b in votes):  # 2.0 == 2 as a key
            return packed
    except (KeyError, TypeError, ValueError):  # a large or odd id, another operator, an odd field
        pass
    flat = array.array("i")
    for k, vote in enumerate(votes):
        if not isinstance(vote, tuple) or len(vote) != 3:
            raise ValueError(f"votes[{k}] must be an (a, op, b) triple, got {vote!r}")
        a, op, b = vote
        code = _OP_CODES.get(op, OP_OTHER) if isinstance(op, str) else OP_OTHER
        flat.extend((_saturate(a, f"votes[{k}].a"), code, _saturate(b, f"votes[{k}].b")))
    return flat.tobytes()


def _saturate(x: object, name: str) -> int:
    """An agent id (a Python or numpy integer; a bool is one, as in Python) as an int32, clamped at the
    int32 bounds (as the vote arrays store it)."""
    if not isinstance(x, int | np.integer):
        raise ValueError(f"{name} must be an integer agent id, got {x!r}")
    return min(max(int(x), _INT32_MIN), _INT32_MAX)


assert array.array("i").itemsize == 4, "vote_codes assumes a 4-byte C int"
