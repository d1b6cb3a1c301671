"""Rendering parsed fields back into the five-tag agent output (the inverse of :func:`parse_response`)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from kernel._checks import check_bool
from kernel._parse_robust import _MAX_COMPARISON_LINES, _MAX_ID_DIGITS
from kernel._types import Vote

__all__ = ["render_response"]

_OPS = (">", "=")


def _vote_line(vote: Sequence[Any], index: int) -> str:
    if isinstance(vote, str) or not isinstance(vote, Sequence):
        raise TypeError(f"comparisons[{index}] must be a Vote (a, op, b), got {type(vote).__name__}")
    if len(vote) != 3:
        raise ValueError(f"comparisons[{index}] must be a Vote (a, op, b), got {vote!r}")
    a_raw, op, b_raw = vote
    try:
        a, b = operator.index(a_raw), operator.index(b_raw)
    except TypeError:
        raise TypeError(f"comparisons[{index}] agent ids must be integers, got {vote!r}") from None
    if op not in _OPS:
        raise ValueError(f"comparisons[{index}].op must be one of {_OPS}, got {op!r}")
    if a < 0 or b < 0:
        raise ValueError(f"comparisons[{index}] agent ids must be >= 0, got {vote!r}")
    if max(a, b) >= 10**_MAX_ID_DIGITS:
        raise ValueError(
            f"comparisons[{index}] agent ids must have at most {_MAX_ID_DIGITS} digits (the robust parser "
            f"reads no longer ids), got {vote!r}"
        )
    return f"Agent {a} {op} Agent {b}"


def render_response(
    *,
    solution: str,
    evaluation: str,
    comparisons: Sequence[Vote] | str = (),
    consensus: bool,
    consensus_reason: str,
) -> str:
    """Writes the five fields as the tagged text an agent is asked to produce.

    text = <solution>…</solution> <evaluation>…</evaluation> <comparison>…</comparison>
           <consensus>YES|NO</consensus> <consensus_reason>…</consensus_reason>   (one tag block per line)

    Field texts are inserted verbatim. ``render_response(**f)`` parses back to ``f`` under both parse
    policies whenever the field texts are stripped and contain none of the tags themselves (``<solution``,
    ``</think>``, …): votes exactly (the author's own removed), consensus exactly, texts exactly.

    Args:
      solution: the answer text.
      evaluation: the evaluation of the other agents' work (``"N/A"`` in a first turn).
      comparisons: votes, written one per line as ``Agent a > Agent b`` / ``Agent a = Agent b``; or a
        ready-made comparison text used as is. Empty (or blank text) is written ``N/A``.
      consensus: written ``YES`` or ``NO``.
      consensus_reason: the reason for the consensus decision.

    Returns:
      The tagged text, ending in ``</consensus_reason>`` (no trailing newline).

    Raises:
      TypeError: a text field is not a ``str``, ``consensus`` is not a bool, a vote is not a sequence,
        or a vote id is not an integer.
      ValueError: a vote is not a triple, its operator is not ``">"`` or ``"="``, an id is negative or
        longer than 9 digits, or there are more than 512 votes (what the robust parser reads back).

    References:
      The output contract of the v1 debate recipe (../shared/REFERENCE.md §1).

    Examples:
      >>> from kernel import Vote, parse_response
      >>> text = render_response(solution="x = 4", evaluation="N/A",
      ...                        comparisons=[Vote(1, ">", 2), Vote(0, "=", 2)],
      ...                        consensus=False, consensus_reason="Agent 2 disagrees.")
      >>> print(text)
      <solution>
      x = 4
      </solution>
      <evaluation>
      N/A
      </evaluation>
      <comparison>
      Agent 1 > Agent 2
      Agent 0 = Agent 2
      </comparison>
      <consensus>NO</consensus>
      <consensus_reason>
      Agent 2 disagrees.
      </consensus_reason>
      >>> parse_response(text, author_id=0).votes
      (Vote(a=1, op='>', b=2),)
    """
    for name, value in (
        ("solution", solution),
        ("evaluation", evaluation),
        ("consensus_reason", consensus_reason),
    ):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    check_bool(consensus, "consensus")
    if isinstance(comparisons, str):
        comparison = comparisons
    else:
        votes = list(comparisons)
        if len(votes) > _MAX_COMPARISON_LINES:
            raise ValueError(
                f"comparisons must hold at most {_MAX_COMPARISON_LINES} votes (the robust parser reads no "
                f"more lines), got {len(votes)}"
            )
        comparison = "\n".join(_vote_line(vote, i) for i, vote in enumerate(votes))
    if not comparison.strip():
        comparison = "N/A"
    return (
        f"<solution>\n{solution}\n</solution>\n"
        f"<evaluation>\n{evaluation}\n</evaluation>\n"
        f"<comparison>\n{comparison}\n</comparison>\n"
        f"<consensus>{'YES' if consensus else 'NO'}</consensus>\n"
        f"<consensus_reason>\n{consensus_reason}\n</consensus_reason>"
    )
