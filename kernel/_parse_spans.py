"""Where each parsed field was read: its character span in the original output.

Credit that routes a turn's advantage to the tokens of one field (its ``<solution>`` block, say) needs the
block the parser actually read, not the first tag a text search finds: the robust policy reads the *last*
complete answer block after the reasoning, never a tag mentioned inside ``<think>``, and an unclosed last
field runs to the end of the text. :func:`field_spans` reports, per field, the span of that block in the
text as given (before any normalisation), from the first character of its opening tag to the end of its
closing tag (or of the text), and the span of its content. ``text[body:end]``, stripped as the policy
strips fields, is the parsed field exactly (for the reference policy, after its think markers are
deleted: v1 deletes them inside fields too).
"""

from __future__ import annotations

from typing import NamedTuple

from kernel._checks import check_choice
from kernel._parse_common import PARSE_POLICIES, ParsePolicy
from kernel._parse_reference import _reference_entries
from kernel._parse_robust import _robust_entries

__all__ = ["FieldSpan", "FieldSpans", "field_spans"]


class FieldSpan(NamedTuple):
    """One field's place in the text: the block ``text[start:stop]`` (tags included) and its content
    ``text[body:end]``; ``start ≤ body ≤ end ≤ stop``."""

    start: int
    body: int
    end: int
    stop: int


class FieldSpans(NamedTuple):
    """Per field of the output contract, where the parser read it, or None where it found none."""

    solution: FieldSpan | None
    evaluation: FieldSpan | None
    comparison: FieldSpan | None
    consensus: FieldSpan | None
    consensus_reason: FieldSpan | None


def field_spans(text: str, *, policy: ParsePolicy = "robust") -> FieldSpans:
    """The character spans of the fields :func:`kernel.parse_response` reads from ``text`` under ``policy``.

    For every field the parse returns, ``text[span.body:span.end]`` stripped is that field; a field the
    parse does not return has span None. Total, linear time.

    Args:
      text: one agent output (anything else gives no spans, as the parser gives no fields).
      policy: one of ``PARSE_POLICIES``.

    Returns:
      :class:`FieldSpans`.

    Raises:
      ValueError: ``policy`` is not one of ``PARSE_POLICIES``.

    Examples:
      A tag mentioned in the reasoning and a first draft are not what the robust parser reads:

      >>> text = "<think>use <solution>?</think><solution>1</solution> ... <solution>2</solution>"
      >>> s = field_spans(text).solution
      >>> text[s.start:s.stop], text[s.body:s.end]
      ('<solution>2</solution>', '2')
      >>> field_spans(text).evaluation is None
      True
    """
    check_choice(policy, "policy", PARSE_POLICIES)
    if not isinstance(text, str):
        return FieldSpans(None, None, None, None, None)
    entries = _robust_entries(text) if policy == "robust" else _reference_entries(text)
    return FieldSpans(
        *(FieldSpan(*entries[name]) if name in entries else None for name in FieldSpans._fields)
    )
