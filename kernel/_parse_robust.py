"""``parse_response(policy="robust")``, the default: the fields of the last complete answer block after
the reasoning, votes read line by line, every unreadable comparison recorded (see :mod:`kernel._parse`
for every difference from the reference policy)."""

from __future__ import annotations

import operator
import os
import re
import unicodedata
from collections.abc import Callable
from typing import Final, TypeVar

from kernel._parse_common import (
    _MISSING,
    _REQUIRED,
    _REQUIRED_SET,
    _agent_id,
    _empty,
    _failure,
    _fold,
    _new_response,
)
from kernel._types import SMALL_VOTES, MalformedVote, ParsedResponse, Vote, pack_votes

__all__: list[str] = []

# ------------------------------------------------------------------------------------------------
# policy="robust".

_T = TypeVar("_T")
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


def _read_entries(text: str, folded: str) -> list[tuple[str, tuple[int, int, int, int], bool]]:
    """Top-level (tag, (start, body, end, stop), closed) entries, read from the end of the text backwards:
    the opening tag starts at ``start``, the content is ``text[body:end]``, the field (closing tag
    included) ends at ``stop``.

    A field is an opening tag and the first closing tag of the same name after it with no tag of that
    name in between; its content is opaque (tags inside it are not read). A last tag that is an opening
    one is a field cut short by a stripped stop string: it runs to the end of the text. At most
    ``_MAX_TAG_STEPS`` closing tags are examined. Linear time: per tag name, the closing-tag cursor and
    the opening-tag cursor only move towards the start, and each search scans only the span between
    the cursor and the tag it finds.
    """
    out: list[tuple[str, tuple[int, int, int, int], bool]] = []
    rfind = folded.rfind
    end = len(folded)
    closes = {t: rfind(_CLOSE[t]) for t in _TAGS}
    after = max(closes.values()) + 1  # only an opening tag after every closing tag can be unclosed
    if folded.find("<", after) >= 0:
        last = max(((*_last_open(folded, t, after, end), t) for t in _TAGS), key=operator.itemgetter(0))
        if last[0] >= 0:
            fenced = last[1] + len(_rstrip_fence(text[last[1] :]))
            out.append((last[2], (last[0], last[1], fenced, fenced), False))
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
        out.append((name, (start, body, close, close + len(_CLOSE[name])), True))
        end = start
        for t, pos in closes.items():
            if pos >= end:
                closes[t] = rfind(_CLOSE[t], 0, end)
    return out


def _read_fields(text: str, folded: str) -> list[tuple[str, str, bool]]:
    """Top-level (tag, content, closed) triples, read from the end of the text backwards
    (:func:`_read_entries` with each content cut out)."""
    return [(name, text[body:end], closed) for name, (_, body, end, _), closed in _read_entries(text, folded)]


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


def _simple_fields(text: str) -> dict[str, str] | list[tuple[str, str, bool]] | None:
    """The fields of a text whose tags are pairs in sequence, read in one regex pass; None for any
    other layout.

    The layout: every tag is a ``<tag>`` followed by its ``</tag>`` with no other tag in between, but
    the last tag, which may be an unclosed opening one; no ``<tag attributes>``, no think marker
    (``_parse_robust`` relies on that). Then :func:`_read_fields` pairs each opening tag with its
    closing one, in order, and reads no more than these. Each tag name at most once (the usual
    answer): the fields by name, the one block :func:`_pick_block` sees. A name repeated (an answer
    written twice): the (tag, content, closed) triples from the end backwards, as :func:`_read_fields`
    gives them.
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
        if (
            not _CLOSE_OF.keys() >= set(opens)
            or list(map(_CLOSE_OF.__getitem__, opens[: len(tags) // 2])) != tags[1::2]
            or len(tags) // 2 > _MAX_TAG_STEPS  # the general reader would stop before the first
        ):
            return None
        names = tuple(map(_NAME_OF.__getitem__, opens))
        if len(set(names)) < len(names):
            contents = pieces[2::4]
            if len(tags) % 2:
                contents[-1] = _rstrip_fence(contents[-1])
            closed = [True] * (len(tags) // 2) + [False] * (len(tags) % 2)
            return list(zip(names[::-1], contents[::-1], closed[::-1], strict=True))
    fields = dict(zip(names, pieces[2::4], strict=True))
    if len(tags) % 2:  # the unclosed last tag runs to the end of the text
        fields[names[-1]] = _rstrip_fence(fields[names[-1]])
    return fields


# The usual answer: the five tags exactly so spelled, in order, and no other "<" that may start a
# ``_TAG_TOKEN`` (one followed by "/" or a letter): ``_simple_fields`` would split it at these ten tags
# alone and read the first of ``_LAYOUTS``. Any other text (``<b>`` included) is left to it. A run of
# "<" is one step (it is text when the character after it does not start a tag); an answer longer
# than ``_MAX_SIMPLE_CHARS`` is not tried (a failed match would scan it once more).
_TEXT: Final = r"[^<]*+(?:<++(?![/\w])[^<]*+)*+"
_CANONICAL: Final = re.compile("".join(f"{_TEXT}<{t}>({_TEXT})</{t}>" for t in _TAGS) + _TEXT)


def _pick_block(fields: list[tuple[str, _T, bool]]) -> tuple[dict[str, _T], bool]:
    """The last complete answer block among ``fields`` (given from the end of the text backwards).

    Each ``<solution>`` starts a block that runs to the next one; fields before the first solution
    join the first block. Inside a block a repeated tag keeps its last closed occurrence (an unclosed
    last tag counts only when its block has no closed one). The answer is the last block holding every
    required tag; failing that, the block holding most of them (the later one on ties), for diagnostics.
    """
    starts = [i + 1 for i, (name, _, _) in enumerate(fields) if name == "solution"]
    bounds = list(zip([0, *starts[:-1]], [*starts[:-1], len(fields)], strict=True)) or [(0, len(fields))]
    best: dict[str, _T] = {}
    for lo, hi in bounds:
        block: dict[str, _T] = {}
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


# The lines most comparison blocks are made of, "Agent 1 > Agent 2" (either spelling of "agent" from
# the prompt, ids 0 to 9, an operator of ``_VOTE_OPS``): the vote each line gives (``_PLAIN_VOTES``),
# and per author id that such a line can name (0 to 9; -1 for any other) what it gives that author,
# its vote or ``_SELF`` (``_PLAIN_LINES``), and its packed vote, b"" for ``_SELF`` (``_PLAIN_CODES``).
# ``_chain_votes`` reads each as one pair.
_SELF: Final = Vote(-1, "self", -1)
_PLAIN_VOTES: Final = {
    f"{x} {a} {op} {y} {b}": _CHAIN_VOTES[str(a), op, str(b)]
    for x in ("Agent", "agent")
    for y in ("Agent", "agent")
    for a in range(10)
    for b in range(10)
    for op in sorted(_VOTE_OPS)
}
_PLAIN_LINES: Final = {
    author: {line: _SELF if author in (vote.a, vote.b) else vote for line, vote in _PLAIN_VOTES.items()}
    for author in range(-1, 10)
}
_PLAIN_CODES: Final = {
    author: {line: b"" if vote is _SELF else pack_votes([vote]) for line, vote in lines.items()}
    for author, lines in _PLAIN_LINES.items()
}
_VOTE_BYTES: Final = len(pack_votes([Vote(0, ">", 1)]))  # the packed size of one vote


def _plain_votes(block: str, author_id: int) -> tuple[tuple[Vote, ...], int, bytes] | None:
    """:func:`_robust_votes` of a block of plain lines only (``_PLAIN_LINES``, one per line), by
    look-up: (votes, self-votes dropped, the votes packed); else None."""
    key = author_id if 0 <= author_id <= 9 else -1
    codes_by_text = _PLAIN_CODES.get(key)
    if codes_by_text is None or block.partition("\n")[0] not in codes_by_text:
        return None  # (most other blocks show it in their first line)
    lines = block.split("\n")
    if not (len(lines) <= _MAX_COMPARISON_LINES and 2 * len(lines) < _MAX_COMPARISON_REFS):
        return None  # the line reader would reach a limit (two mentions a line)
    try:
        codes = b"".join(map(codes_by_text.__getitem__, lines))
    except KeyError:  # a line of another form
        return None
    if len(codes) == _VOTE_BYTES * len(lines):  # no self-vote: every line's vote, whoever the author
        return tuple(map(_PLAIN_VOTES.__getitem__, lines)), 0, codes
    votes = tuple(vote for vote in map(_PLAIN_LINES[key].__getitem__, lines) if vote is not _SELF)
    return votes, len(lines) - len(votes), codes


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
    usual = _CANONICAL.fullmatch(answer) if len(answer) <= _MAX_SIMPLE_CHARS else None
    if usual is not None:  # the five tags in order: what ``_simple_fields`` would read
        strip = _ASCII_STRIP if answer.isascii() else _strip
        solution, evaluation, comparison, consensus, reason = map(strip, usual.groups())
        return _complete(author_id, solution, evaluation, comparison, consensus, reason, strip(answer))
    simple = _simple_fields(answer)
    if isinstance(simple, list):  # an answer written twice, or more
        block, complete = _pick_block(simple)
    elif simple is not None:  # one block: what _pick_block makes of it ({} with no required tag)
        complete = simple.keys() >= _REQUIRED_SET
        block = simple if complete or not simple.keys().isdisjoint(_REQUIRED) else {}
    else:  # any other output: think markers in any case, tags in any layout
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
    fields = dict(zip(block, map(strip, block.values()), strict=True))
    if not complete:
        reason = next(_MISSING[t] for t in _REQUIRED if t not in fields)
        return _failure("robust", author_id, reason, norm, fields, fields.get("comparison", ""))
    return _complete(
        author_id,
        fields["solution"],
        fields["evaluation"],
        fields.get("comparison", ""),
        fields["consensus"],
        fields["consensus_reason"],
        norm,
    )


def _complete(
    author_id: int,
    solution: str,
    evaluation: str,
    comparison: str,
    consensus: str,
    reason: str,
    norm: str,
) -> ParsedResponse:
    """The parse of an answer with every required field (stripped): its votes and consensus read."""
    plain = _plain_votes(comparison, author_id)
    if plain is None:
        every, dropped, malformed = _robust_votes(comparison, author_id)
        return _new_response(  # in field order
            True,
            solution,
            evaluation,
            comparison,
            _robust_consensus(consensus),
            reason,
            tuple(every),
            author_id,
            dropped,
            tuple(malformed),
            "",
            norm,
            "robust",
            pack_votes(every),
        )
    votes, dropped, codes = plain
    return _new_response(
        True,
        solution,
        evaluation,
        comparison,
        _robust_consensus(consensus),
        reason,
        votes,
        author_id,
        dropped,
        (),
        "",
        norm,
        "robust",
        codes,
    )


def _robust_entries(text: str) -> dict[str, tuple[int, int, int, int]]:
    """Per field that ``_parse_robust`` reads from ``text``, its (start, body, end, stop) in ``text``.

    The general reading (the one-pass layout reader gives the same fields wherever it applies): the
    answer after the last ``</think>`` of any spelling, the last complete block of its fields (or the
    fullest one); nothing for an output that opens a think block and never closes it.
    """
    folded = _fold(text)
    offset = folded.rfind("</think>") + len("</think>")
    if offset < len("</think>"):
        offset = 0
        think = folded.find("<think>")
        if think == 0 or (think > 0 and text[:think].isspace()):
            return {}
    block, _ = _pick_block(_read_entries(text[offset:], folded[offset:]))
    return {name: (a + offset, b + offset, c + offset, d + offset) for name, (a, b, c, d) in block.items()}


# ------------------------------------------------------------------------------------------------
# A prototype (issue 35): the usual output read in compiled code, benchmarks/prototypes/parse_native,
# used only where it is installed and DEBATE_KERNEL_NATIVE_PARSE=1. It reads the outputs of the
# ``_CANONICAL`` path whose comparison block is plain lines or holds no vote, with this module's tables,
# and hands every other output to the parser above, which is the default and its oracle in
# tests/test_parse_native.py.


_PYTHON_PARSE_ROBUST: Final = _parse_robust  # the parser above, whatever the switch below does


def _native_first(
    native: Callable[[str, int], ParsedResponse | None], python: Callable[[str, int], ParsedResponse]
) -> Callable[[str, int], ParsedResponse]:
    def parse(text: str, author_id: int) -> ParsedResponse:
        got = native(text, author_id)
        return python(text, author_id) if got is None else got

    return parse


if os.environ.get("DEBATE_KERNEL_NATIVE_PARSE") == "1":
    try:
        from debate_parse_native import read_usual  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        _parse_robust = _native_first(read_usual, _parse_robust)  # type: ignore[assignment]
