# cython: language_level=3, boundscheck=False, wraparound=False
"""The usual agent output read in one compiled pass: ``read_usual(text, author_id)``.

The usual output is what ``kernel._parse_robust`` reads with its ``_CANONICAL`` match: after the last
``</think>`` (so spelled), the five tags exactly so spelled and in order, and no other "<" that may start a
tag (a run of "<" followed by "/" or a word character). Its comparison block, at most 511 lines and 1,023
agent mentions, holds only:

- plain lines (``Agent 1 > Agent 2``: either spelling of "agent", ids 0 to 9, ``>``, ``<``, ``=``, ``==``);
- clean chain lines in a narrow form: a head with no letter (``- ``, ``1. ``), then agents (``agent``
  in any case, an optional space, one digit) joined by those operators between spaces, then a tail in
  which no ``agent`` occurs; ASCII, emphasis (``*``, ``_``, backticks) ignored anywhere;
- blank lines between them, or lines that say there is no vote (no letter or digit, or a first word
  such as ``N/A``, ``none``, ``no``: ``_NOT_A_VOTE``), with no agent;

or it is one of the blocks that hold no vote (``N/A`` ...). On these the oracle's plain, chain and line
readers all give the agents' adjacent pairs, so the reader gives them too. For such an output
``read_usual`` returns the ``ParsedResponse`` that the pure-Python parser returns, built with the parser's
own tables (its shared ``Vote`` objects, packed codes, consensus words and response builder); for any
other output it returns None, and the pure-Python parser, the oracle, reads it.
"""

from cpython.unicode cimport PyUnicode_Tailmatch


cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil
    Py_ssize_t PyUnicode_Find(object text, object sub, Py_ssize_t start, Py_ssize_t end, int direction) except -2
    Py_ssize_t PyUnicode_FindChar(object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end, int direction) except -2

import importlib

_py = importlib.import_module("kernel._parse_robust")  # the oracle's tables (also while it imports this)
_common = importlib.import_module("kernel._parse_common")

cdef object _new_response = _common._new_response
cdef object _robust_consensus = _py._robust_consensus
cdef object _no_votes = frozenset(_py._NO_VOTES)
cdef Py_ssize_t _MAX_CHARS = _py._MAX_SIMPLE_CHARS
# The plain-line reading applies while the line reader's limits are not reached (two mentions a line).
cdef Py_ssize_t _MAX_LINES = min(_py._MAX_COMPARISON_LINES, (_py._MAX_COMPARISON_REFS - 1) // 2)
cdef tuple _TAGS = tuple(
    tag for name in _py._TAGS for tag in (f"<{name}>", f"</{name}>")
)  # the ten tags of the usual output, in order
cdef Py_ssize_t _TAG_LEN[10]
for _k in range(10):
    _TAG_LEN[_k] = len(_TAGS[_k])

# Per plain line (a, operator index, b) -> index a * 40 + op * 10 + b; operators ">", "<", "=", "==".
cdef tuple _OPS = (">", "<", "=", "==")
cdef list _VOTES = [None] * 400  # the oracle's shared Vote of each plain line
cdef list _CODES = [None] * 400  # its packed vote (12 bytes)
for _a in range(10):
    for _o in range(4):
        for _b in range(10):
            _vote = _py._CHAIN_VOTES[str(_a), _OPS[_o], str(_b)]
            _VOTES[_a * 40 + _o * 10 + _b] = _vote
            _CODES[_a * 40 + _o * 10 + _b] = _py.pack_votes([_vote])
cdef Py_ssize_t _VOTE_BYTES = len(_CODES[0])
cdef bytes _EMPTY_BYTES = b""
cdef tuple _EMPTY_TUPLE = ()


cdef inline bint _edge(Py_UCS4 c):
    """A character the robust strip removes at either end: whitespace, or a zero-width one."""
    return c.isspace() or c == 0x200B or c == 0x200C or c == 0x200D or c == 0x2060 or c == 0xFEFF


cdef inline str _stripped(str text, int kind, void* data, Py_ssize_t lo, Py_ssize_t hi):
    while lo < hi and _edge(PyUnicode_READ(kind, data, lo)):
        lo += 1
    while hi > lo and _edge(PyUnicode_READ(kind, data, hi - 1)):
        hi -= 1
    return text[lo:hi]


cdef inline bint _agent(int kind, void* data, Py_ssize_t p):
    """"Agent " or "agent " at p (the caller knows six characters are there)."""
    cdef Py_UCS4 c = PyUnicode_READ(kind, data, p)
    return (
        (c == u"A" or c == u"a")
        and PyUnicode_READ(kind, data, p + 1) == u"g"
        and PyUnicode_READ(kind, data, p + 2) == u"e"
        and PyUnicode_READ(kind, data, p + 3) == u"n"
        and PyUnicode_READ(kind, data, p + 4) == u"t"
        and PyUnicode_READ(kind, data, p + 5) == u" "
    )


cdef inline int _plain_line(int kind, void* data, Py_ssize_t p, Py_ssize_t q):
    """The table index of the plain line text[p:q], or -1."""
    cdef Py_ssize_t n = q - p
    cdef int op
    cdef Py_UCS4 a, b, c
    if n != 17 and n != 18:
        return -1
    if not _agent(kind, data, p):
        return -1
    a = PyUnicode_READ(kind, data, p + 6)
    if not (u"0" <= a <= u"9") or PyUnicode_READ(kind, data, p + 7) != u" ":
        return -1
    c = PyUnicode_READ(kind, data, p + 8)
    if c == u">":
        op = 0
    elif c == u"<":
        op = 1
    elif c == u"=":
        op = 3 if PyUnicode_READ(kind, data, p + 9) == u"=" else 2
    else:
        return -1
    p += 10 if op == 3 else 9
    if q - p != 8 or PyUnicode_READ(kind, data, p) != u" " or not _agent(kind, data, p + 1):
        return -1
    b = PyUnicode_READ(kind, data, p + 7)
    if not (u"0" <= b <= u"9"):
        return -1
    return (<int>a - 48) * 40 + op * 10 + (<int>b - 48)


cdef inline bint _emphasis(Py_UCS4 c):
    return c == u"*" or c == u"_" or c == u"`"


cdef inline Py_UCS4 _lower(Py_UCS4 c):
    return <Py_UCS4>(<int>c + 32) if u"A" <= c <= u"Z" else c


cdef inline Py_ssize_t _skip(int kind, void* data, Py_ssize_t p, Py_ssize_t q):
    """The first position at or after p (before q) that does not hold emphasis (``*``, ``_``, a backtick)."""
    while p < q and _emphasis(PyUnicode_READ(kind, data, p)):
        p += 1
    return p


cdef inline Py_ssize_t _word(int kind, void* data, Py_ssize_t p, Py_ssize_t q):
    """The position after "agent" (any case, emphasis skipped) at p, or -1."""
    cdef Py_ssize_t k
    for k in range(5):
        p = _skip(kind, data, p, q)
        if p >= q or _lower(PyUnicode_READ(kind, data, p)) != u"agent"[k]:
            return -1
        p += 1
    return p


cdef int _chain_line(int kind, void* data, Py_ssize_t p, Py_ssize_t q, int* pairs):
    """The pairs of a clean chain line text[p:q] as the oracle's chain reader reads it, in a narrower
    form: text with no letter, then ``agent`` (any case), an optional space, one digit; then ``>``, ``<``,
    ``=`` or ``==`` between spaces and the next such agent, one or more times; then text in which no
    ``agent`` occurs; ASCII, no line break, emphasis ignored anywhere. Writes each pair's table index to
    ``pairs`` and returns how many agents it names (two or more), or -1 for any other line."""
    cdef Py_UCS4 c
    cdef Py_ssize_t r
    cdef int refs = 0, op = 0, ident, prev = -1, seen
    while True:  # the head
        p = _skip(kind, data, p, q)
        if p >= q:
            return -1
        c = _lower(PyUnicode_READ(kind, data, p))
        if c >= 128 or c == 13 or c == 11 or c == 12 or 0x1C <= c <= 0x1E:
            return -1
        if c == u"a":
            break
        if u"a" <= c <= u"z":
            return -1
        p += 1
    while True:  # an agent, then an operator and the next agent, or the tail
        p = _word(kind, data, p, q)
        if p < 0:
            return -1
        p = _skip(kind, data, p, q)
        if p < q and PyUnicode_READ(kind, data, p) == u" ":
            p = _skip(kind, data, p + 1, q)
        if p >= q or not (u"0" <= PyUnicode_READ(kind, data, p) <= u"9"):
            return -1
        ident = <int>PyUnicode_READ(kind, data, p) - 48
        p = _skip(kind, data, p + 1, q)
        if p < q and u"0" <= PyUnicode_READ(kind, data, p) <= u"9":
            return -1
        if refs == 1024:  # past the chain reader's limit on agent mentions
            return -1
        if refs:
            pairs[refs - 1] = prev * 40 + op * 10 + ident
        refs += 1
        prev = ident
        r = p
        while r < q and (_emphasis(PyUnicode_READ(kind, data, r)) or PyUnicode_READ(kind, data, r) in u" \t\x1f"):
            r += 1
        if r < q and PyUnicode_READ(kind, data, r) in u"<>=":
            c = PyUnicode_READ(kind, data, r)
            op = 0 if c == u">" else 1 if c == u"<" else 2
            r = _skip(kind, data, r + 1, q)
            if op == 2 and r < q and PyUnicode_READ(kind, data, r) == u"=":
                op, r = 3, r + 1
            while r < q and (_emphasis(PyUnicode_READ(kind, data, r)) or PyUnicode_READ(kind, data, r) in u" \t\x1f"):
                r += 1
            if _word(kind, data, r, q) >= 0:
                p = r
                continue
        break
    if refs < 2:
        return -1
    seen = 0  # the tail: ASCII, no line break, no "agent"
    while p < q:
        c = PyUnicode_READ(kind, data, p)
        p += 1
        if _emphasis(c):
            continue
        c = _lower(c)
        if c >= 128 or c == 13 or c == 11 or c == 12 or 0x1C <= c <= 0x1E:
            return -1
        seen = seen + 1 if c == u"agent"[seen] else (1 if c == u"a" else 0)
        if seen == 5:
            return -1
    return refs


cdef frozenset _NOT_VOTE_WORDS = frozenset(("na", "none", "nil", "null", "no", "not", "nothing", "empty"))


cdef bint _no_vote_line(int kind, void* data, Py_ssize_t p, Py_ssize_t q):
    """Whether the line reader reads text[p:q] as nothing: ASCII, no line break, no "agent" (emphasis
    ignored), and no letter or digit, or its first word one that says there is no vote (``_NOT_A_VOTE``:
    ``N/A``, ``none``, ``no`` ...)."""
    cdef Py_UCS4 c
    cdef Py_ssize_t r = p, w0 = -1, w1 = -1
    cdef int seen = 0
    cdef list word = []
    while r < q:  # no agent, no line break, ASCII; the first word's bounds
        c = PyUnicode_READ(kind, data, r)
        r += 1
        if _emphasis(c):
            continue
        c = _lower(c)
        if c >= 128 or c == 13 or c == 11 or c == 12 or 0x1C <= c <= 0x1E:
            return False
        seen = seen + 1 if c == u"agent"[seen] else (1 if c == u"a" else 0)
        if seen == 5:
            return False
        if w1 < 0 and (u"a" <= c <= u"z" or u"0" <= c <= u"9"):
            word.append(c)
            w0 = r
        elif w0 >= 0 and w1 < 0:
            w1 = r - 1
            if word == [u"n"] and c == u"/":  # "n/a" then a non-word character or the end
                r = _skip(kind, data, r, q)
                if r < q and _lower(PyUnicode_READ(kind, data, r)) == u"a":
                    r = _skip(kind, data, r + 1, q)
                    if r >= q or not PyUnicode_READ(kind, data, r).isalnum():
                        word = [u"n", u"a"]
                r = w1 + 1
    return w0 < 0 or "".join(word) in _NOT_VOTE_WORDS


cdef inline bint _blank(int kind, void* data, Py_ssize_t p, Py_ssize_t q):
    """Whether text[p:q] holds only spaces, tabs, U+001F and emphasis (a blank line to the chain reader)."""
    cdef Py_UCS4 c
    while p < q:
        c = PyUnicode_READ(kind, data, p)
        if not (c == u" " or c == u"\t" or c == 0x1F or _emphasis(c)):
            return False
        p += 1
    return True


def read_usual(str text, object author_id):
    """The pure-Python parser's ``ParsedResponse`` of a usual output, or None for any other output."""
    cdef Py_ssize_t n = len(text), start, i, j, k = 0, lo, hi, p, q, lines = 0, kept = 0, dropped = 0
    cdef Py_ssize_t refs = 0, count
    cdef Py_ssize_t bounds[10]
    cdef int index, key
    cdef Py_UCS4 c
    cdef int found[1024]
    cdef int pairs[1024]
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    start = PyUnicode_Find(text, "</think>", 0, n, -1)
    start = 0 if start < 0 else start + 8
    if n - start > _MAX_CHARS:
        return None
    i = start
    while i < n:  # the tags: each "<" run followed by "/" or a word character must be the next one
        i = PyUnicode_FindChar(text, u"<", i, n, 1)
        if i < 0:
            break
        j = i + 1
        while j < n and PyUnicode_READ(kind, data, j) == u"<":
            j += 1
        if j == n:
            break
        c = PyUnicode_READ(kind, data, j)
        if c != u"/" and not (c.isalnum() or c == u"_"):
            i = j
            continue
        if j != i + 1 or k == 10 or not PyUnicode_Tailmatch(text, _TAGS[k], i, n, -1):
            return None
        bounds[k] = i if k % 2 else i + _TAG_LEN[k]  # an opening tag: where its content starts
        i += _TAG_LEN[k]
        k += 1
    if k != 10:
        return None
    # The comparison block: stripped, then plain lines or a block that holds no vote.
    lo, hi = bounds[4], bounds[5]
    while lo < hi and _edge(PyUnicode_READ(kind, data, lo)):
        lo += 1
    while hi > lo and _edge(PyUnicode_READ(kind, data, hi - 1)):
        hi -= 1
    comparison = text[lo:hi]
    key = -1
    if 0 <= author_id <= 9:
        key = author_id
    p = lo
    while p < hi:  # each line: a plain line, or a clean chain line, or a blank line between them
        q = p
        while q < hi and PyUnicode_READ(kind, data, q) != u"\n":
            q += 1
        if lines == _MAX_LINES:
            break
        lines += 1
        index = _plain_line(kind, data, p, q)
        if index >= 0:
            count, pairs[0] = 1, index
        elif _blank(kind, data, p, q):
            if p == lo or q == hi:  # a blank first or last line: not a chain block
                break
            p = q + 1
            continue
        else:
            count = _chain_line(kind, data, p, q, pairs) - 1
            if count < 0:
                if not _no_vote_line(kind, data, p, q):
                    break
                count = -1  # a line that says there is no vote: the line reader reads the block
        refs += count + 1
        if refs >= 1024:  # the chain reader's limit on agent mentions (plain lines alone stay below)
            break
        for i in range(count):
            index = pairs[i]
            if index // 40 == key or index % 10 == key:
                dropped += 1
            else:
                found[kept] = index
                kept += 1
        p = q + 1
    if lines == 0 or p <= hi:  # not every line read (the loop stopped before the end)
        if comparison not in _no_votes:
            return None
        votes, codes, dropped = _EMPTY_TUPLE, _EMPTY_BYTES, 0
    else:
        votes = tuple([_VOTES[found[i]] for i in range(kept)])
        codes = _EMPTY_BYTES.join([_CODES[found[i]] for i in range(kept)])
    consensus = _stripped(text, kind, data, bounds[6], bounds[7])
    if consensus == "YES" or consensus == "Yes" or consensus == "yes":
        agreed = True
    elif consensus == "NO" or consensus == "No" or consensus == "no":
        agreed = False
    else:
        agreed = _robust_consensus(consensus)
    return _new_response(
        True,
        _stripped(text, kind, data, bounds[0], bounds[1]),
        _stripped(text, kind, data, bounds[2], bounds[3]),
        comparison,
        agreed,
        _stripped(text, kind, data, bounds[8], bounds[9]),
        votes,
        author_id,
        dropped,
        _EMPTY_TUPLE,
        "",
        _stripped(text, kind, data, start, n),
        "robust",
        codes,
    )
