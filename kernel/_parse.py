"""Total, linear-time parsing of agent outputs: five tagged fields, pairwise votes and the consensus flag.

An agent answers with ``<solution>``, ``<evaluation>``, ``<comparison>`` (one vote per line, e.g.
``Agent 1 > Agent 2``; may be ``N/A``), ``<consensus>YES|NO</consensus>`` and ``<consensus_reason>``.
:func:`parse_response` reads one output under a *policy*:

- ``"reference"`` reproduces the v1 parser of the debate recipe exactly (every field, the normalised
  text, the votes and the missing-tag reason of all 2,100 golden records), quirks included.
- ``"robust"`` (the default) fixes the failures of the reference listed below.

Both are total (any input gives a :class:`~kernel.ParsedResponse`, never an exception) and run in
linear time: the scanning is done with ``str.find`` / ``str.rfind`` and a few regular expressions that
cannot backtrack (possessive quantifiers, one search per result), so ten times the text takes about
ten times as long on any input, where the v1 regexes are quadratic or worse on adversarial text. Usual
outputs take shortcuts (the usual tag layout in one match or one pass, blocks of plain vote lines
looked up whole and of clean vote chains, look-up tables for small ids and plain ``YES``/``NO``,
ASCII-only regexes), and a few size thresholds pick between
two ways of computing one result; each is a module attribute that the tests switch off or set to 0
and compare with the general reader. ``benchmarks/bench_parse.py`` measures both policies against v1
on realistic outputs and on adversarial families up to 1 MB (time, and growth from 100 KB to 1 MB).
The policies live in their own modules, ``kernel/_parse_robust.py`` and ``kernel/_parse_reference.py``,
over what they share in ``kernel/_parse_common.py``; this one dispatches.

Failure reasons (``ParsedResponse.reason``; ``""`` when ``ok``): ``"missing_solution"``,
``"missing_evaluation"``, ``"missing_consensus"``, ``"missing_consensus_reason"`` (the first missing
required tag, checked in that order), ``"unclosed_think"`` (robust: the output is reasoning that never
reached ``</think>``), ``"not_text"`` (the input is not a ``str``). A failed parse carries the fields it
found, ``consensus=False`` and no votes, so code that forgets to check ``ok`` never counts its votes.

Malformed comparison lines (robust only; ``MalformedVote.reason``): ``"no_comparison"`` (a line with
text but no agent mention), ``"no_operator"`` (agents mentioned, no operator between any two),
``"ambiguous_operator"`` (``>=``, ``=>``, ``<=``, ``=<``, ``≥``, ``≤``), ``"unknown_operator"`` (other
symbols such as ``>>``, ``≠``, ``->``), ``"bad_agent_id"`` (an id of 10 or more digits),
``"signed_agent_id"`` (a sign before the id: ``Agent -1``, ``Agent +1``), ``"comparison_limit"`` (the
rest of a block past 512 lines or 1,024 agent mentions).

Robust vs reference, every difference (reference = v1 behaviour):

- **Reasoning.** reference: ``<think>`` / ``</think>`` markers are deleted (any case, anywhere) and the
  reasoning between them is parsed like the answer. robust: everything up to the *last* ``</think>`` is
  reasoning and never parsed, with or without an opening tag (Qwen3 samples start inside the block);
  an output that starts with ``<think>`` and never closes it fails with ``"unclosed_think"``; a
  ``<think>`` elsewhere is plain text.
- **Preamble.** reference: the text is cut at the first ``<solution``, ``<evaluation``, ``<comparison``
  or ``<consensus`` followed by a non-word character (not ``<consensus_reason``), so a tag mentioned in
  a preamble becomes a field. robust: no cut; a tag mentioned before the answer is a field only if it
  is closed, and the answer's own tags take precedence over it.
- **Several answer blocks.** reference: each tag independently, first occurrence wins. robust: each
  ``<solution>`` starts a block (tags before the first solution join the first block, so order inside a
  block does not matter); the *last* block with all four required tags wins; inside a block a repeated
  tag keeps its last occurrence.
- **Unclosed last tag** (the sampler stripped the stop string ``</consensus_reason>``). reference:
  missing tag. robust: the last tag of the text, if it is an opening one, runs to the end of the text (a
  trailing code-fence line dropped); a closed tag of the same name in its block takes precedence.
- **Tag syntax.** reference: ``<solution>``, ``<evaluation>``, ``<consensus_reason>`` case-sensitive,
  ``<consensus>``, ``<comparison>`` case-insensitive, no attributes. robust: all five case-insensitive;
  opening tags may carry attributes (``<tag attr="…">`` on one line, up to 200 characters); closing
  tags are exactly ``</tag>``. Code fences never matter.
- **Field whitespace.** reference: ``str.strip()``. robust: also zero-width spaces/joiners and BOM.
- **Consensus.** reference: ``value.strip().upper() == "YES"`` (``Yes.``, ``**YES**``, ``YES - agreed``,
  ``ＹＥＳ`` are False). robust: NFKC and casefold, then after leading punctuation or markup the first
  word is ``yes`` or ``true`` (all four above are True), unless it is an echoed template (``YES/NO``,
  ``YES | NO``, ``yes or no`` are False). Anything else is False.
- **Vote syntax.** reference: ``Agent\\s+(\\d+)\\s*([>=])\\s*Agent\\s+(\\d+)`` matched anywhere in the
  block, case-sensitive, across line breaks. robust: line by line; an agent is ``agent`` in any case,
  not inside a word, then spaces, ``#`` or ``-``, then digits (``Agent1``, ``agent 1``, ``AGENT #1``);
  ``*``, ``_`` and backticks are ignored (``**Agent 1** > **Agent 2**``). Two agents joined only by an
  operator form a vote: ``>``; ``<`` (read as ``b > a``); ``=`` or ``==`` (tie). Chains give every
  adjacent pair (``A > B > C`` → ``A > B``, ``B > C``; ``A > B = C`` → ``A > B``, ``B = C``); the
  reference keeps only the first pair.
- **Unreadable comparisons** (reference: silently ignored). robust: recorded in ``malformed_votes``:
  ``>=``, ``=>``, ``<=``, ``=<``, ``≥``, ``≤`` between two agents → ``"ambiguous_operator"`` (a vote is
  either a win or a tie; we do not guess); other operator symbols (``>>``, ``≠``, ``->``, ``≻``) →
  ``"unknown_operator"``; a line naming agents with no operator between any two (``Agent 1 is better
  than Agent 2``, a dangling ``Agent 1 >``, a vote split over two lines) → ``"no_operator"``; a signed
  id → ``"signed_agent_id"``; a line with letters or digits but no agent (except ``N/A``, ``none``,
  ``no …``, ``not …`` lines) → ``"no_comparison"``. Lines without letters or digits (``---``, fences)
  are skipped.
- **Agent ids.** Both accept any Unicode decimal digits with leading zeros (``int()``) and keep
  out-of-range ids and ``a == b`` (the vote validator counts them as malformed); robust records ids of 10
  or more significant digits as ``"bad_agent_id"``, and a ``+``, ``-`` or ``−`` right before the digits
  (other than the ``-`` of ``Agent-1``) as ``"signed_agent_id"``: ``Agent -1`` is never agent 1.
- **Self-votes.** Both drop votes naming ``author_id`` and count them in ``self_votes_dropped``.
- **normalized_text.** reference: v1's ``raw_response`` (stripped; fence lines removed, stripped again;
  preamble cut; think markers deleted, stripped again). robust: the text after the reasoning, stripped.
- **Size guards.** reference: none (still linear). robust reads at most the last 512 closing tags, and
  512 lines and 1,024 agent mentions of the comparison block (the rest → one ``"comparison_limit"``
  record); real outputs use a few dozen.

The one departure of ``"reference"`` from v1: an agent id of more than 4,300 digits makes v1 raise
(Python's int-string limit); here the comparison is recorded as ``MalformedVote(…, "bad_agent_id")``.
"""

from __future__ import annotations

import operator

from kernel._parse_common import (
    MALFORMED_VOTE_REASONS,
    PARSE_FAILURE_REASONS,
    PARSE_POLICIES,
    ParsePolicy,
    _empty,
)
from kernel._parse_reference import _parse_reference
from kernel._parse_robust import _parse_robust
from kernel._types import ParsedResponse

__all__ = [
    "MALFORMED_VOTE_REASONS",
    "PARSE_FAILURE_REASONS",
    "PARSE_POLICIES",
    "ParsePolicy",
    "parse_response",
]


def parse_response(text: str, author_id: int = -1, *, policy: ParsePolicy = "robust") -> ParsedResponse:
    """Parses one agent output into its fields, votes and consensus flag. Total and linear-time.

    votes = {(a, op, b) read from <comparison>} − {votes with author_id ∈ {a, b}}

    Args:
      text: the raw sampled text. Anything that is not a ``str`` gives ``ok=False, reason="not_text"``.
      author_id: the writer's agent id; comparisons involving it are dropped and counted in
        ``self_votes_dropped``. ``-1`` (or any negative id) drops nothing.
      policy: ``"robust"`` (default) or ``"reference"`` (the v1 parser, quirks included); the module
        docstring lists every difference.

    Returns:
      A frozen :class:`~kernel.ParsedResponse`. ``ok`` is False with a reason code when a required tag
      is missing (see :data:`PARSE_FAILURE_REASONS`); the parser never raises on any text.

    Raises:
      ValueError: ``policy`` is not one of :data:`PARSE_POLICIES`.
      TypeError: ``author_id`` is not an integer.

    References:
      The v1 parser of the multi-agent debate recipe for tinker-cookbook (../shared/REFERENCE.md §1).

    Examples:
      >>> out = ("<think>I could answer <solution>5</solution>...</think>\\n"
      ...        "<solution>4</solution><evaluation>Agent 1 is right.</evaluation>"
      ...        "<comparison>Agent 1 > Agent 2 > Agent 0\\nAgent 2 >= Agent 1</comparison>"
      ...        "<consensus>Yes.</consensus><consensus_reason>We agree.</consensus_reason>")
      >>> r = parse_response(out, author_id=0)
      >>> r.ok, r.solution, r.consensus, r.votes, r.self_votes_dropped
      (True, '4', True, (Vote(a=1, op='>', b=2),), 1)
      >>> r.malformed_votes
      (MalformedVote(line='Agent 2 >= Agent 1', reason='ambiguous_operator'),)
      >>> v1 = parse_response(out, author_id=0, policy="reference")
      >>> v1.solution, v1.consensus, v1.votes
      ('5', False, (Vote(a=1, op='>', b=2),))
      >>> parse_response("<solution>4</solution>").reason
      'missing_evaluation'
    """
    if text.__class__ is str and author_id.__class__ is int and policy == "robust":
        return _parse_robust(text, author_id)  # the usual call, which passes every check below
    if policy not in PARSE_POLICIES:
        raise ValueError(f"policy must be one of {PARSE_POLICIES}, got {policy!r}")
    try:
        author = operator.index(author_id)
    except TypeError:
        raise TypeError(f"author_id must be an integer, got {type(author_id).__name__}") from None
    if not isinstance(text, str):
        return _empty(policy, author, "not_text")
    if policy == "reference":
        return _parse_reference(text, author)
    return _parse_robust(text, author)
