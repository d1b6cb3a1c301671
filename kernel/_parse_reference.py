"""``parse_response(policy="reference")``: the v1 parser of the debate recipe, step for step, quirks kept,
in linear time (see :mod:`kernel._parse` for every difference from the robust policy)."""

from __future__ import annotations

import bisect
import re
from typing import Final

from kernel._parse_common import (
    _INT_MAX_STR_DIGITS,
    _MISSING,
    _REQUIRED,
    _agent_id,
    _failure,
    _fold,
    _success,
)
from kernel._types import SMALL_VOTES, MalformedVote, ParsedResponse, Vote

__all__: list[str] = []

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
    consensus = found["consensus"].strip().upper() == "YES"
    return _success("reference", author_id, found, comparison, consensus, votes, dropped, malformed, norm)


def _reference_entries(text: str) -> dict[str, tuple[int, int, int, int]]:
    """Per field that ``_parse_reference`` reads, its (start, body, end, stop) in the original ``text``.

    The v1 normalisation keeps a substring of the text (strip, fence lines, preamble cut) and then deletes
    the think markers: positions in the normalised text map back past every marker deleted before them
    (a field whose content held a marker spans it in the original).
    """
    out = text.strip()
    base = len(text) - len(text.lstrip())
    if out.startswith("```"):
        m = _V1_FENCE_OPEN.match(out)
        if m is not None:
            out, base = out[m.end() :], base + m.end()
        if out.endswith("\n```"):
            out = out[:-4]
        base += len(out) - len(out.lstrip())
        out = out.strip()
    cut = _v1_cut(out)
    if cut > 0:
        out, base = out[cut:], base + cut
    markers = [(m.start(), m.end()) for m in _V1_THINK.finditer(out)]
    kept, at, removed_before = [], [], []  # per marker: where it sat in the text without markers
    last = total = 0
    for a, b in markers:
        kept.append(out[last:a])
        at.append(a - total)
        total += b - a
        removed_before.append(total)
        last = b
    norm = "".join(kept) + out[last:]
    lead = 0
    if markers:
        lead = len(norm) - len(norm.lstrip())
        norm = norm.strip()
    folded = _fold(norm)

    def back(p: int, *, end: bool) -> int:
        q = p + lead
        k = bisect.bisect_left(at, q) if end else bisect.bisect_right(at, q)
        return base + q + (removed_before[k - 1] if k else 0)

    found = {}
    for name in ("solution", "evaluation", "comparison", "consensus", "consensus_reason"):
        src = folded if name in ("comparison", "consensus") else norm
        start = src.find(f"<{name}>")
        if start < 0:
            continue
        body = start + len(name) + 2
        close = src.find(f"</{name}>", body)
        if close < 0:
            continue
        stop = close + len(name) + 3
        found[name] = (
            back(start, end=False),
            back(body, end=False),
            back(close, end=True),
            back(stop, end=True),
        )
    return found
