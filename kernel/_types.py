"""Value types shared by the kernel's topic modules.

Everything here is immutable: parsed responses are frozen dataclasses, votes are named tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = [
    "OP_EQ",
    "OP_GT",
    "OP_OTHER",
    "MalformedVote",
    "ParsedResponse",
    "Vote",
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
        return cls(
            ok=ok,
            solution=solution,
            evaluation=evaluation,
            comparison=comparison,
            consensus=consensus,
            consensus_reason=consensus_reason,
            votes=tuple(votes),
            author_id=author_id,
            self_votes_dropped=0,
            malformed_votes=(),
            reason=reason,
            normalized_text="",
            policy=policy,
        )
