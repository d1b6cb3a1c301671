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
outputs take shortcuts (the usual tag layout in one pass, blocks of clean vote chains, look-up tables
for small ids and plain ``YES``/``NO``, ASCII-only regexes), and a few size thresholds pick between
two ways of computing one result; each is a module attribute that the tests switch off or set to 0
and compare with the general reader. ``benchmarks/bench_parse.py`` measures both policies against v1
on realistic outputs and on adversarial families up to 1 MB (time, and growth from 100 KB to 1 MB).

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
import re
import unicodedata
from typing import Final, Literal, TypeAlias, get_args

from kernel._types import SMALL_VOTES, MalformedVote, ParsedResponse, Vote, pack_votes

__all__ = ["MALFORMED_VOTE_REASONS", "PARSE_FAILURE_REASONS", "PARSE_POLICIES", "parse_response"]

ParsePolicy: TypeAlias = Literal["robust", "reference"]
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

# ------------------------------------------------------------------------------------------------
# Shared helpers.

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


def _empty(policy: ParsePolicy, author_id: int, reason: ParseFailureReason) -> ParsedResponse:
    return ParsedResponse(
        ok=False,
        solution="",
        evaluation="",
        comparison="",
        consensus=False,
        consensus_reason="",
        votes=(),
        author_id=author_id,
        self_votes_dropped=0,
        malformed_votes=(),
        reason=reason,
        normalized_text="",
        policy=policy,
        vote_codes=b"",
    )


# ------------------------------------------------------------------------------------------------
# policy="reference": the v1 parser, step for step.

_V1_FENCE_OPEN: Final = re.compile(r"```[a-zA-Z0-9_-]*\n")  # matched at 0 only
_V1_CUT: Final = re.compile(r"<(?:solution|evaluation|comparison|consensus)\b")
_V1_CUT_WORDS: Final = ("<solution", "<evaluation", "<comparison", "<consensus")
_V1_THINK: Final = re.compile(r"</?think>", re.IGNORECASE)
# v1's vote regex ``Agent\s+(\d+)\s*([>=])\s*Agent\s+(\d+)`` with possessive quantifiers and no groups:
# each quantified class is disjoint from what follows it (\s / \d / [>=] / "A"), so giving characters
# back could never lead to a match and the matches are exactly v1's; without backtracking every attempt
# is linear in the run it scans. The groups are recovered by splitting a match at its operator.
_V1_VOTE: Final = re.compile(r"Agent\s++\d++\s*+[>=]\s*+Agent\s++\d++")
_V1_ASCII_VOTE: Final = re.compile(  # the same on ASCII text (\s, \d spelled out: twice as fast)
    r"Agent[\t-\r\x1c-\x20]++[0-9]++[\t-\r\x1c-\x20]*+[>=][\t-\r\x1c-\x20]*+Agent[\t-\r\x1c-\x20]++[0-9]++"
)
_V1_VOTE_PARTS: Final = re.compile(r"Agent\s++(\d++)\s*+([>=])\s*+Agent\s++(\d++)")  # with v1's groups

# Size gates of the reference policy's shortcuts. Each only picks between two ways of computing the
# same result; the tests set each to 0 (and to a huge value) and compare.
_V1_CUT_TRIES = 16  # near misses of one cut word (``<solutions``) before one regex search instead
_V1_THINK_BULK = 16  # think markers above which they are removed with str.replace instead of one by one
_V1_SMALL_BLOCK = 4096  # comparison blocks up to this length are read with small-id look-ups first


def _v1_cut(text: str) -> int:
    """Start of the first ``<(solution|evaluation|comparison|consensus)\\b``, or -1."""
    best = -1
    for word in _V1_CUT_WORDS:
        hi = len(text) if best < 0 else best
        pos = text.find(word, 0, hi)
        tries = 0
        while pos >= 0:
            after = pos + len(word)
            if after == len(text) or not (text[after].isalnum() or text[after] == "_"):
                break  # \b holds: the next character is not a word character
            tries += 1
            if tries > _V1_CUT_TRIES:  # many near misses: one linear regex search is cheaper
                m = _V1_CUT.search(text)
                return -1 if m is None else m.start()
            pos = text.find(word, pos + 1, hi)
        if pos >= 0:
            best = pos
    return best


def _v1_remove_think(text: str) -> tuple[str, str | None]:
    """``re.sub(r"</?think>", "", text, flags=re.IGNORECASE)`` in linear time, and the folded text
    when nothing was removed (None otherwise)."""
    folded = _fold(text)
    count = folded.count("think>")
    if count == 0:
        return text, folded
    if count > _V1_THINK_BULK:
        if text.count("think>") == count:
            # Every "think>" of the fold is one of the text: all markers are in lower case. The two
            # patterns cannot overlap, so v1's matches are all their occurrences; removing the closing
            # ones first is exact unless that joins a new "<think>".
            opens = text.count("<think>")
            joined = text.replace("</think>", "")
            if joined.count("<think>") == opens:
                return joined.replace("<think>", ""), None
        return _V1_THINK.sub("", text), None
    out: list[str] = []
    last = 0
    pos = folded.find("think>")
    while pos >= 0:
        if pos >= 2 and folded[pos - 2] == "<" and folded[pos - 1] == "/":
            start = pos - 2
        elif pos >= 1 and folded[pos - 1] == "<":
            start = pos - 1
        else:
            start = -1
        if start >= last:
            out.append(text[last:start])
            last = pos + 6
        pos = folded.find("think>", pos + 6)
    out.append(text[last:])
    return "".join(out), None


def _v1_normalize(text: str) -> tuple[str, str]:
    """v1's normalised text and its case fold: strip; if fenced, drop the fence lines and strip
    again; cut the preamble; delete think markers and strip again.

    The second strip removes the ``\\r`` a CRLF output leaves before its closing fence; the third, the
    whitespace a deleted marker exposes at either end. Without a deleted marker the text is already
    stripped (it was stripped, then at most cut before a ``<``).
    """
    out = text.strip()
    if out.startswith("```"):
        m = _V1_FENCE_OPEN.match(out)
        if m is not None:
            out = out[m.end() :]
        if out.endswith("\n```"):
            out = out[:-4]
        out = out.strip()
    cut = _v1_cut(out)
    if cut > 0:
        out = out[cut:]
    norm, folded = _v1_remove_think(out)
    if folded is None:  # markers were deleted
        norm = norm.strip()
        folded = _fold(norm)
    return norm, folded


def _v1_field(text: str, folded: str | None, name: str) -> str | None:
    """``re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL [| re.I])``, group 1 stripped.

    The leftmost opening tag with any closing tag after it is the first opening tag (a closing tag
    after a later one is also after the first), so two ``find`` calls give the match.
    """
    src = text if folded is None else folded
    start = src.find(f"<{name}>")
    if start < 0:
        return None
    start += len(name) + 2
    end = src.find(f"</{name}>", start)
    return None if end < 0 else text[start:end].strip()


# The shared vote of each (a, op, b) that _V1_VOTE_PARTS finds with ids below SMALL_VOTE_IDS, by look-up.
_V1_SMALL_VOTES: Final = {(str(v.a), v.op, str(v.b)): v for v in SMALL_VOTES.values()}


def _v1_votes(block: str, author_id: int) -> tuple[list[Vote], int, list[MalformedVote]]:
    """v1's ``findall`` votes minus the author's."""
    if len(block) <= _V1_SMALL_BLOCK:  # a usual block: a few votes, small ids
        votes = []
        triples = _V1_VOTE_PARTS.findall(block)
        for triple in triples:
            vote = _V1_SMALL_VOTES.get(triple)
            if vote is None:
                break
            if author_id != vote.a and author_id != vote.b:
                votes.append(vote)
        else:
            return votes, len(triples) - len(votes), []
    return _v1_distinct_votes(block, author_id)


def _v1_distinct_votes(block: str, author_id: int) -> tuple[list[Vote], int, list[MalformedVote]]:
    """:func:`_v1_votes` for any block: each distinct match is converted once."""
    # No groups: strings are cheaper to collect than tuples.
    matches = (_V1_ASCII_VOTE if block.isascii() else _V1_VOTE).findall(block)
    table: dict[str, Vote | None] = {}
    own, bad = set(), set()
    for match in set(matches):
        # "Agent<ws>A<ws>op<ws>Agent<ws>B": the operator is the only ">" or "=" (str.split and
        # str.strip use \s's whitespace), so no second regex pass over long digit runs is needed.
        op = ">" if ">" in match else "="
        left, right = match.split(op)
        a_digits, b_digits = left[5:].strip(), right.strip()[5:].lstrip()
        a = _agent_id(a_digits, _INT_MAX_STR_DIGITS)
        b = _agent_id(b_digits, _INT_MAX_STR_DIGITS)
        if a is None or b is None:
            bad.add(match)
        elif author_id in (a, b):
            own.add(match)
        table[match] = None if match in bad or match in own else Vote(a, op, b)  # type: ignore[arg-type]
    votes = list(filter(None, map(table.__getitem__, matches)))
    if not bad:
        return votes, len(matches) - len(votes), []
    dropped = len(matches) - len(votes) - sum(map(bad.__contains__, matches))
    malformed = [MalformedVote(m, "bad_agent_id") for m in matches if m in bad]
    return votes, dropped, malformed


def _parse_reference(text: str, author_id: int) -> ParsedResponse:
    norm, folded = _v1_normalize(text)
    fields = {
        "solution": _v1_field(norm, None, "solution"),
        "evaluation": _v1_field(norm, None, "evaluation"),
        "consensus": _v1_field(norm, folded, "consensus"),
        "consensus_reason": _v1_field(norm, None, "consensus_reason"),
    }
    comparison = _v1_field(norm, folded, "comparison") or ""
    found = {name: value for name, value in fields.items() if value is not None}
    if len(found) < len(fields):
        reason = next(_MISSING[name] for name in _REQUIRED if name not in found)
        return _failure("reference", author_id, reason, norm, found, comparison)
    votes, dropped, malformed = _v1_votes(comparison, author_id)
    return ParsedResponse(  # positional (a third faster than by keyword), in field order
        True,  # ok
        found["solution"],
        found["evaluation"],
        comparison,
        found["consensus"].strip().upper() == "YES",  # consensus
        found["consensus_reason"],
        tuple(votes),
        author_id,
        dropped,  # self_votes_dropped
        tuple(malformed),  # malformed_votes
        "",  # reason
        norm,  # normalized_text
        "reference",  # policy
        pack_votes(votes),  # vote_codes
    )


def _failure(
    policy: ParsePolicy,
    author_id: int,
    reason: ParseFailureReason,
    normalized: str,
    found: dict[str, str],
    comparison: str,
) -> ParsedResponse:
    """A failed parse: the fields found are kept for diagnostics, but no consensus and no votes."""
    return ParsedResponse(
        ok=False,
        solution=found.get("solution", ""),
        evaluation=found.get("evaluation", ""),
        comparison=comparison,
        consensus=False,
        consensus_reason=found.get("consensus_reason", ""),
        votes=(),
        author_id=author_id,
        self_votes_dropped=0,
        malformed_votes=(),
        reason=reason,
        normalized_text=normalized,
        vote_codes=b"",
        policy=policy,
    )


# ------------------------------------------------------------------------------------------------
# policy="robust".

_TAGS: Final = ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
_MAX_TAG_STEPS: Final = 512  # tags examined from the end of the text
_MAX_ATTR_CHARS: Final = 200  # longest ``<tag attributes>`` accepted
_MAX_ATTR_TRIES: Final = 8
_MAX_COMPARISON_LINES: Final = 512
_MAX_COMPARISON_REFS: Final = 1024
_MAX_ID_DIGITS: Final = 9
_MAX_CONSENSUS_CHARS: Final = 200

# Besides str.strip() whitespace, robust fields also lose the invisible characters models emit around
# them: zero-width space, non-joiner and joiner, word joiner and BOM.
_ZERO_WIDTH: Final = "\u200b\u200c\u200d\u2060\ufeff"
_EDGE: Final = re.compile(f"[\\s{_ZERO_WIDTH}]++")  # \s is exactly str.isspace()


_ASCII_STRIP: Final = str.strip  # ``_strip`` on ASCII text, which holds no zero-width character


def _strip(text: str) -> str:
    """``str.strip()`` that also removes zero-width characters; linear and C-speed on long runs."""
    text = text.strip()
    if text and text[0] in _ZERO_WIDTH:
        text = text[_EDGE.match(text).end() :]  # type: ignore[union-attr]
    if text and text[-1] in _ZERO_WIDTH:
        text = text[: len(text) - _EDGE.match(text[::-1]).end()]  # type: ignore[union-attr]
    return text


# An agent mention: its separator (a "-" right after "agent", or spaces and "#", then maybe a sign) and
# its digits. A separator ending in a sign other than that lone "-" (``Agent -1``, ``Agent +1``,
# ``Agent #-1``, ``Agent−1``) makes the id signed: malformed, never read as its digits.
_REF: Final = re.compile(r"agent(?<![a-z]agent)([\s#-]*+[+\u2212]?)(\d++)")
_ASCII_REF: Final = re.compile(r"agent(?<![a-z]agent)([\s#-]*+\+?)([0-9]++)")  # the same on ASCII, faster
_SIGNS: Final = ("+", "-", "\u2212")
_HAS_ALNUM: Final = re.compile(r"[^\W_]")
_NOT_A_VOTE: Final = re.compile(r"[\W_]*+(?:n/?a|none|nil|null|no|not|nothing|empty)\b")
_VOTE_OPS: Final = frozenset({">", "<", "=", "=="})
_OPERATOR: Final = re.compile(r"[<>=!~≥≤≠≈≻≺⩾⩽→←⇒≫≪\s-]+")  # only comparison symbols (and spaces)
_AMBIGUOUS: Final = frozenset({">=", "=>", "<=", "=<", "≥", "≤", "⩾", "⩽"})
_YES: Final = re.compile(r"[\W_]*+(?:yes|true)\b(?!\s*(?:/|\||or\b)\s*(?:no|false)\b)")


def _rstrip_fence(content: str) -> str:
    """Drops a closing code fence line left after an unclosed last field."""
    head, _, last = content.rstrip().rpartition("\n")
    return head if last.strip() == "```" else content


_OPEN: Final = {t: f"<{t}>" for t in _TAGS}
_OPEN_ATTRS: Final = {t: f"<{t} " for t in _TAGS}
_CLOSE: Final = {t: f"</{t}>" for t in _TAGS}


def _last_open(
    folded: str, name: str, lo: int, hi: int, attrs: bool = True, exact: int | None = None
) -> tuple[int, int]:
    """(start, content start) of the last ``<name>`` / ``<name attrs>`` inside [lo, hi), or (-1, -1).

    Scans back from ``hi`` only as far as the tag found (or ``lo``); ``attrs=False`` when the text
    holds no ``<name `` at all; ``exact``: the start of the last ``<name>`` inside [lo, hi) (or -1)
    when the caller already knows it.
    """
    if exact is None:
        exact = folded.rfind(_OPEN[name], lo, hi)
    if not attrs:
        return (exact, exact + len(name) + 2) if exact >= 0 else (-1, -1)
    lo = max(lo, exact + 1)
    spaced, tries = folded.rfind(_OPEN_ATTRS[name], lo, hi), 0
    while spaced >= 0 and tries < _MAX_ATTR_TRIES:
        body = spaced + len(name) + 2
        close = folded.find(">", body, min(hi, body + _MAX_ATTR_CHARS))
        if close >= 0 and "<" not in folded[body:close] and "\n" not in folded[body:close]:
            return spaced, close + 1
        spaced, tries = folded.rfind(_OPEN_ATTRS[name], lo, spaced), tries + 1
    return (exact, exact + len(name) + 2) if exact >= 0 else (-1, -1)


def _read_fields(text: str, folded: str) -> list[tuple[str, str, bool]]:
    """Top-level (tag, content, closed) triples, read from the end of the text backwards.

    A field is an opening tag and the first closing tag of the same name after it with no tag of that
    name in between; its content is opaque (tags inside it are not read). A last tag that is an opening
    one is a field cut short by a stripped stop string: it runs to the end of the text. At most
    ``_MAX_TAG_STEPS`` closing tags are examined. Linear time: per tag name, the closing-tag cursor and
    the opening-tag cursor only move towards the start, and each search scans only the span between
    the cursor and the tag it finds.
    """
    out: list[tuple[str, str, bool]] = []
    rfind = folded.rfind
    end = len(folded)
    closes = {t: rfind(_CLOSE[t]) for t in _TAGS}
    after = max(closes.values()) + 1  # only an opening tag after every closing tag can be unclosed
    if folded.find("<", after) >= 0:
        last = max(((*_last_open(folded, t, after, end), t) for t in _TAGS), key=operator.itemgetter(0))
        if last[0] >= 0:
            out.append((last[2], _rstrip_fence(text[last[1] :]), False))
            end = last[0]
    opens: dict[str, tuple[int, int]] = {}  # per name: the last opening tag before its closing cursor
    exacts: dict[str, int] = {}  # per name: the last "<name>" found before its closing cursor (or -1)
    attrs: dict[str, bool] = {}  # per name: whether "<name " occurs at all (looked up on first need)
    for _ in range(_MAX_TAG_STEPS):
        name = max(closes, key=closes.__getitem__)
        close = closes[name]
        if close < 0:
            break
        start, body = opens.get(name, (close, close))
        if start >= close:
            if name not in attrs:
                attrs[name] = _OPEN_ATTRS[name] in folded
            # The cursor only moves back: a "<name>" found before an earlier cursor that also starts
            # before this one is still the last (it cannot overlap the closing tag), so each stretch
            # of text is searched once.
            exact = exacts.get(name)
            if exact is None or exact >= close:
                exact = exacts[name] = rfind(_OPEN[name], 0, close)
            start, body = opens[name] = _last_open(folded, name, 0, close, attrs[name], exact)
        if start < 0:  # no opening tag before: every closing tag of this name left is stray
            closes[name] = -1
            continue
        inner = rfind(_CLOSE[name], body, close)
        if inner >= 0:  # the opening tag is already closed by an earlier closing tag: this one is stray
            closes[name] = inner
            continue
        out.append((name, text[body:close], True))
        end = start
        for t, pos in closes.items():
            if pos >= end:
                closes[t] = rfind(_CLOSE[t], 0, end)
    return out


# Every ``<tag>``, ``</tag>`` and ``<tag `` of the five names and of ``think``, in any case: each
# begins with the only "<" it holds, so no two overlap, and a left-to-right scan finds every one that
# ``_fold`` + ``str.rfind`` would (re.IGNORECASE on ``text`` matches where ``_fold(text)`` holds the
# lower-case tag).
_TAG_TOKEN: Final = re.compile(
    r"(</?(?:solution|evaluation|comparison|consensus_reason|consensus|think)[> ])", re.IGNORECASE
)
_CLOSE_OF: Final = {f"<{t}>": f"</{t}>" for t in _TAGS}  # each opening tag: its closing tag
_NAME_OF: Final = {f"<{t}>": t for t in _TAGS}
_TAG_TOKENS: Final = frozenset(_CLOSE_OF) | frozenset(_CLOSE_OF.values())
_MAX_SIMPLE_LT: Final = 256  # "<" characters a long text may hold for the one-pass reading
_MAX_SIMPLE_CHARS: Final = 16384  # texts up to this length are read in one pass whatever they hold


def _layout(names: tuple[str, ...], *, closed: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    tags = [tag for name in names for tag in (f"<{name}>", f"</{name}>")]
    return tuple(tags if closed else tags[:-1]), names


# The usual layouts, with and without a comparison, the last tag closed or not: their tags and names
# (the rule of ``_simple_fields`` accepts them; a dictionary look-up is faster than checking it).
_LAYOUTS: Final = dict(
    _layout(names, closed=closed)
    for names in (_TAGS, tuple(t for t in _TAGS if t != "comparison"))
    for closed in (True, False)
)


def _simple_fields(text: str) -> dict[str, str] | None:
    """The fields of the common layout, read in one regex pass; None for any other layout.

    The layout: each tag name occurs at most once, as ``<tag>…</tag>`` with no other tag in between,
    and the last tag alone may be an unclosed opening one; no ``<tag attributes>``, no think marker
    (``_parse_robust`` relies on that). Then
    :func:`_read_fields` pairs each opening tag with its closing one and :func:`_pick_block` sees a
    single block of distinct names, so together they give exactly these fields.
    """
    if len(text) > _MAX_SIMPLE_CHARS and text.count("<") > _MAX_SIMPLE_LT:
        return None  # bounds the work spent before a long text full of tags is handed on
    pieces = _TAG_TOKEN.split(text)  # text, tag, text, tag, ..., text
    tags = pieces[1::2]
    names = _LAYOUTS.get(tuple(tags))
    if names is None:
        if not _TAG_TOKENS.issuperset(tags):
            tags = [tag.lower() for tag in tags]  # any other spelling of a tag is not one here
            if not _TAG_TOKENS.issuperset(tags):
                return None  # "<tag attributes", "</tag " or a tag spelled with U+0130 ...
        opens = tags[::2]
        distinct = set(opens)
        if (
            len(distinct) != len(opens)
            or not distinct.issubset(_CLOSE_OF)
            or list(map(_CLOSE_OF.__getitem__, opens[: len(tags) // 2])) != tags[1::2]
        ):
            return None
        names = tuple(map(_NAME_OF.__getitem__, opens))
    fields = dict(zip(names, pieces[2::4], strict=True))
    if len(tags) % 2:  # the unclosed last tag runs to the end of the text
        fields[names[-1]] = _rstrip_fence(fields[names[-1]])
    return fields


def _pick_block(fields: list[tuple[str, str, bool]]) -> tuple[dict[str, str], bool]:
    """The last complete answer block among ``fields`` (given from the end of the text backwards).

    Each ``<solution>`` starts a block that runs to the next one; fields before the first solution
    join the first block. Inside a block a repeated tag keeps its last closed occurrence (an unclosed
    last tag counts only when its block has no closed one). The answer is the last block holding every
    required tag; failing that, the block holding most of them (the later one on ties), for diagnostics.
    """
    starts = [i + 1 for i, (name, _, _) in enumerate(fields) if name == "solution"]
    bounds = list(zip([0, *starts[:-1]], [*starts[:-1], len(fields)], strict=True)) or [(0, len(fields))]
    best: dict[str, str] = {}
    for lo, hi in bounds:
        block: dict[str, str] = {}
        weak: set[str] = set()  # filled by the unclosed last tag
        for name, content, closed in fields[lo:hi]:
            if name not in block or (closed and name in weak):
                block[name] = content
                (weak.discard if closed else weak.add)(name)
        found = sum(t in block for t in _REQUIRED)
        if found == len(_REQUIRED):
            return block, True
        if found > sum(t in best for t in _REQUIRED):
            best = block
    return best, False


_PLAIN_CONSENSUS: Final = {"YES": True, "NO": False, "Yes": True, "No": False, "yes": True, "no": False}


def _robust_consensus(value: str) -> bool:
    plain = _PLAIN_CONSENSUS.get(value)
    if plain is not None:
        return plain
    head = unicodedata.normalize("NFKC", value[:_MAX_CONSENSUS_CHARS]).casefold()
    return _YES.match(head) is not None


# The whole-block reader of clean vote blocks (``_chain_votes``), on ASCII text lowered and without
# emphasis, as the line reader sees each line. In ASCII, ``\s`` is " \t\x1f" plus the line breaks
# "\n\r\x0b\x0c\x1c\x1d\x1e" (those of str.splitlines()). ``_CHAIN_BLOCK`` matches whole blocks of clean
# chain lines: text with no agent mention (``_NO_REF``), agents joined by operators, text with no
# agent mention; lines separated by "\n" and blank lines, no other break. Every quantifier is
# possessive and ``==?`` gives back at most one "=", so a match attempt is linear in the block.
_REF_HEAD: Final = r"agent(?<![a-z]agent)[ \t\x1f#-]*+"  # _REF up to its digits, on one line
# In a run of "a"s no mention starts (the first is followed by "a", the others follow a letter): the run
# is one step, not one lookahead per "a".
_NO_REF: Final = r"(?:[^a\n\r\x0b\x0c\x1c-\x1e]++|aa++|a(?!gent(?<![a-z]agent)[ \t\x1f#-]*+\+?[0-9]))*+"
_CHAIN_REF: Final = rf"{_REF_HEAD}(?<![ \t\x1f#-]-)[0-9]{{1,{_MAX_ID_DIGITS}}}+(?![0-9])"  # unsigned
_CHAIN_OP: Final = r"[ \t\x1f]*+(?:==?|[<>])[ \t\x1f]*+"
_CHAIN_LINE: Final = rf"{_NO_REF}{_CHAIN_REF}(?:{_CHAIN_OP}{_CHAIN_REF})++{_NO_REF}"
_CHAIN_BLOCK: Final = re.compile(rf"{_CHAIN_LINE}(?:\n(?:[ \t\x1f]*+\n)*+{_CHAIN_LINE})*+")
# Each joined pair (a, operator, b); the lookahead leaves b to start the next pair of a chain.
_CHAIN_PAIR: Final = re.compile(
    rf"{_REF_HEAD}([0-9]++)[ \t\x1f]*+(==?|[<>])[ \t\x1f]*+(?={_REF_HEAD}([0-9]++))"
)
_NO_VOTES: Final = frozenset({"", "N/A", "n/a", "NA", "None", "none", "None.", "N/A."})  # tested
_MAX_NO_VOTES_CHARS: Final = max(map(len, _NO_VOTES))


def _chain_votes(block: str, author_id: int) -> tuple[list[Vote], int] | None:
    """:func:`_line_votes` of a block whose lines are all clean vote chains, in two C passes; else None.

    A clean chain line names two or more agents, each joined to the next by ``>``, ``<``, ``=`` or
    ``==``, with text that names no agent before the first and after the last (``- Agent 1 > Agent 2:
    why``). A block of such lines (blank lines allowed between) has no malformed line, and its votes
    are its joined pairs in text order. Any other block (a line with one agent or none, text between
    two agents, an id over 9 digits, non-ASCII text, a line break other than "\n") gives None.
    """
    if not block.isascii():
        return None
    clean = block.lower().replace("*", "").replace("_", "").replace("`", "")
    # Fewer lines and agent mentions than the line reader's limits: they are not reached.
    if clean.count("\n") >= _MAX_COMPARISON_LINES or clean.count("agent") >= _MAX_COMPARISON_REFS:
        return None
    if _CHAIN_BLOCK.fullmatch(clean) is None:
        return None
    pairs = _CHAIN_PAIR.findall(clean)
    every = [vote for vote in map(_CHAIN_VOTES.get, pairs) if vote is not None]
    if len(every) < len(pairs):  # an id of 16 or more, or with leading zeros
        every = [_chain_vote(int(a), op, int(b)) for a, op, b in pairs]
    votes = [vote for vote in every if author_id not in vote]  # (a, op, b): op is a str
    return votes, len(pairs) - len(votes)


def _chain_vote(a: int, op: str, b: int) -> Vote:
    return Vote(b, ">", a) if op == "<" else Vote(a, op[0], b)


# The vote of each (a, operator, b) found by ``_CHAIN_PAIR`` with ids below 16, by look-up.
_CHAIN_VOTES: Final = {
    (str(a), op, str(b)): SMALL_VOTES[_chain_vote(a, op, b)]
    for a in range(16)
    for b in range(16)
    for op in _VOTE_OPS
}


def _robust_votes(block: str, author_id: int) -> tuple[list[Vote], int, list[MalformedVote]]:
    """Votes, the number of self-votes dropped and the unreadable lines of a comparison block."""
    # One line at most and no agent mention: the line reader's limits are not reached unless 0.
    if (
        len(block) <= _MAX_NO_VOTES_CHARS
        and block in _NO_VOTES
        and _MAX_COMPARISON_LINES > 0 < _MAX_COMPARISON_REFS
    ):
        return [], 0, []
    chains = _chain_votes(block, author_id)
    if chains is not None:
        return chains[0], chains[1], []
    return _line_votes(block, author_id)


def _line_votes(block: str, author_id: int) -> tuple[list[Vote], int, list[MalformedVote]]:
    """:func:`_robust_votes` line by line: the definition, for any block."""
    votes: list[Vote] = []
    malformed: list[MalformedVote] = []
    dropped = refs = 0
    # Non-blank lines, stripped; str.splitlines() breaks at "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029".
    for count, line in enumerate(filter(None, map(str.strip, block.splitlines()))):
        if line[-1:] in _ZERO_WIDTH:
            line = _strip(line)
        if count == _MAX_COMPARISON_LINES or refs >= _MAX_COMPARISON_REFS:
            malformed.append(MalformedVote(line, "comparison_limit"))
            break
        clean = line.lower().replace("*", "").replace("_", "").replace("`", "")  # emphasis ignored
        mentioned = linked = False
        prev_end, prev_id, prev_bad = 0, None, ""
        for ref in (_ASCII_REF if clean.isascii() else _REF).finditer(clean):
            refs += 1
            if refs > _MAX_COMPARISON_REFS:
                break
            separator = ref.group(1)
            if separator.endswith(_SIGNS) and separator != "-":
                ident, bad = None, "signed_agent_id"
            else:
                ident = _agent_id(ref.group(2), _MAX_ID_DIGITS)
                bad = "bad_agent_id" if ident is None else ""
            if mentioned:
                op = clean[prev_end : ref.start()].strip()
                if op in _VOTE_OPS or (0 < len(op) <= 8 and _OPERATOR.fullmatch(op) is not None):
                    linked = True
                    op = "".join(op.split())
                    if op not in _VOTE_OPS:
                        reason = "ambiguous_operator" if op in _AMBIGUOUS else "unknown_operator"
                        malformed.append(MalformedVote(line, reason))
                    elif prev_id is None or ident is None:  # a signed or too long id
                        malformed.append(MalformedVote(line, prev_bad or bad))
                    elif author_id == prev_id or author_id == ident:
                        dropped += 1
                    elif op == "<":
                        votes.append(Vote(ident, ">", prev_id))
                    else:
                        votes.append(Vote(prev_id, op[0], ident))
            mentioned, prev_end, prev_id, prev_bad = True, ref.end(), ident, bad
        if refs > _MAX_COMPARISON_REFS:
            malformed.append(MalformedVote(line, "comparison_limit"))
            break
        if linked:
            continue
        if mentioned:
            malformed.append(MalformedVote(line, "no_operator"))
        elif _HAS_ALNUM.search(clean) and _NOT_A_VOTE.match(clean) is None:
            malformed.append(MalformedVote(line, "no_comparison"))
    return votes, dropped, malformed


def _parse_robust(text: str, author_id: int) -> ParsedResponse:
    # The usual output: the reasoning ends at a "</think>" spelled so, and the answer after it holds
    # no think marker of any spelling (``_TAG_TOKEN`` sees them) and tags in the usual layout.
    close = text.rfind("</think>")
    answer = text if close < 0 else text[close + len("</think>") :]
    block = _simple_fields(answer)
    complete = block is not None and block.keys() >= _REQUIRED_SET
    if not complete:  # any other output: think markers in any case, tags in any layout
        folded = _fold(text)
        start = folded.rfind("</think>") + len("</think>")  # the reasoning ends at the last one
        if start >= len("</think>"):
            answer, folded = text[start:], folded[start:]
        else:
            answer = text
            think = folded.find("<think>")  # the text starts with it, after whitespace
            if think == 0 or (think > 0 and text[:think].isspace()):
                return _empty("robust", author_id, "unclosed_think")
        block, complete = _pick_block(_read_fields(answer, folded))
    strip = _ASCII_STRIP if answer.isascii() else _strip
    norm = strip(answer)
    fields = dict(zip(block, map(strip, block.values()), strict=True))  # type: ignore[arg-type, union-attr]
    if not complete:
        reason = next(_MISSING[t] for t in _REQUIRED if t not in fields)
        return _failure("robust", author_id, reason, norm, fields, fields.get("comparison", ""))
    comparison = fields.get("comparison", "")
    votes, dropped, malformed = _robust_votes(comparison, author_id)
    return ParsedResponse(  # positional (a third faster than by keyword), in field order
        True,  # ok
        fields["solution"],
        fields["evaluation"],
        comparison,
        _robust_consensus(fields["consensus"]),
        fields["consensus_reason"],
        tuple(votes),
        author_id,
        dropped,  # self_votes_dropped
        tuple(malformed),  # malformed_votes
        "",  # reason
        norm,  # normalized_text
        "robust",  # policy
        pack_votes(votes),  # vote_codes
    )


# ------------------------------------------------------------------------------------------------


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
