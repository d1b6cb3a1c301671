# cython: language_level=3, boundscheck=False, wraparound=False
"""The usual agent output read in one compiled pass: ``read_usual(text, author_id)``.

The usual output is what ``kernel._parse_robust`` reads with its ``_CANONICAL`` match: after the last
``</think>`` (so spelled), the five tags exactly so spelled and in order, and no other "<" that may start a
tag (a run of "<" followed by "/" or a word character); its comparison block is made of plain lines only
(``Agent 1 > Agent 2``, either spelling of "agent", ids 0 to 9, ``>``, ``<``, ``=`` or ``==``, one a line,
maybe after "- ", at most the line reader's limits: the oracle reads them by look-up or as clean chains) or is one of the blocks that hold no vote (``N/A`` ...). For such an
output ``read_usual`` returns the ``ParsedResponse`` that the pure-Python parser returns, built with the
parser's own tables (its shared ``Vote`` objects, packed codes, consensus words and response builder);
for any other output it returns None, and the pure-Python parser, the oracle, reads it.
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


def read_usual(str text, object author_id):
    """The pure-Python parser's ``ParsedResponse`` of a usual output, or None for any other output."""
    cdef Py_ssize_t n = len(text), start, i, j, k = 0, lo, hi, p, q, lines = 0, kept = 0, dropped = 0
    cdef Py_ssize_t bounds[10]
    cdef int index, key, a, b
    cdef Py_UCS4 c
    cdef int found[512]
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
    while p < hi:
        q = p
        while q < hi and PyUnicode_READ(kind, data, q) != u"\n":
            q += 1
        index = _plain_line(kind, data, p, q)
        if index < 0 and q - p > 2 and PyUnicode_READ(kind, data, p) == u"-":  # "- Agent 1 > Agent 2"
            index = _plain_line(kind, data, p + 2, q) if PyUnicode_READ(kind, data, p + 1) == u" " else -1
        if index < 0 or lines == _MAX_LINES:
            break
        a, b = index // 40, index % 10
        if a == key or b == key:
            dropped += 1
        else:
            found[kept] = index
            kept += 1
        lines += 1
        p = q + 1
    if lines == 0 or p <= hi:  # not every line plain (the loop stopped before the end)
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
