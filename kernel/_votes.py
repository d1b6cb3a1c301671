"""Votes as struct-of-arrays across many debates, and their validation.

A vote ``(u, a, op, b)`` is agent ``u`` writing ``Agent a <op> Agent b`` in debate ``p``. A batch of
votes from thousands of debates is five flat int32 arrays of length V (one row per vote) plus, on the
side, ``num_agents_P`` (the agent count N_p of every debate). Debate ids follow the kernel's group
convention: ``group_ids_V`` lies in ``[0, P)``, and the id ``P`` marks a padding row that drops out.

Validity (the reference's rule): a vote of debate p is valid iff ``0 ≤ a < N_p``, ``0 ≤ b < N_p``,
``a ≠ b`` and ``op ∈ {>, =}``. Invalid votes are never dropped silently: they are counted per debate
as ``malformed`` and each carries a reason code. The author plays no part in validity: authors ``-1``
(unknown) or ``≥ N_p`` are allowed and simply exclude nobody from leave-one-out rewards.

Judges: a vote may be cast by a judge who is not a debater (an LLM judge, a verifier, a human label).
Two optional fields say so: ``judge_V`` (the judge's id ≥ 0, or −1 for a debater's vote, whose author
field then applies) and ``weight_V`` (a finite weight ≥ 0 for every vote, debaters' included; None
weighs each vote 1). A judge vote is valid or not by the same rule and reasons as any other vote; it
excludes nobody from leave-one-out (the judge is no debater) and never makes a row of its own.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import (
    as_float_array,
    as_int32_saturated,
    as_int_array,
    check_bool,
    check_group_ids,
    check_same_length,
)
from kernel._types import OP_EQ, OP_GT, OP_OTHER, ParsedResponse, Vote

__all__ = [
    "VOTE_A_OUT_OF_RANGE",
    "VOTE_BAD_OP",
    "VOTE_B_OUT_OF_RANGE",
    "VOTE_PADDING",
    "VOTE_REASONS",
    "VOTE_SELF_PAIR",
    "VOTE_VALID",
    "VoteArrays",
    "VoteValidation",
    "validate_votes",
    "vote_arrays",
    "votes_from_responses",
]

VOTE_VALID: Final = 0
"""Reason code of a valid vote."""
VOTE_PADDING: Final = 1
"""Reason code of a padding row (group id ``P``): not a vote, not counted as malformed."""
VOTE_A_OUT_OF_RANGE: Final = 2
"""Reason code: ``a`` is not in ``[0, N_p)``."""
VOTE_B_OUT_OF_RANGE: Final = 3
"""Reason code: ``a`` is in range but ``b`` is not in ``[0, N_p)``."""
VOTE_SELF_PAIR: Final = 4
"""Reason code: both ids are in range but ``a == b``."""
VOTE_BAD_OP: Final = 5
"""Reason code: the pair is fine but the operator is neither ``>`` nor ``=`` (op code not OP_GT/OP_EQ)."""
VOTE_REASONS: Final = ("valid", "padding", "a_out_of_range", "b_out_of_range", "self_pair", "bad_op")
"""Reason names indexed by reason code: ``VOTE_REASONS[reason_V[v]]``."""

_INT32_MIN: Final = int(np.iinfo(np.int32).min)
_INT32_MAX: Final = int(np.iinfo(np.int32).max)
# The fast validity test below reads "op is > or =" as ``op as uint32 < 2``.
assert (OP_GT, OP_EQ) == (0, 1), "kernel._votes assumes OP_GT == 0 and OP_EQ == 1"

Int32Array = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]


class VoteArrays(NamedTuple):
    """Votes of many debates as struct-of-arrays, one row per vote (shape [V] each).

    The first five fields are int32 and always present; the two judge fields are optional (None: every
    vote is a debater's, of weight 1), so ``VoteArrays(g, u, a, op, b)`` keeps working. Code that walks
    the fields should skip the None ones (:meth:`take` does).

    Attributes:
      group_ids_V: debate of each vote, in ``[0, P)``; ``P`` marks a padding row.
      authors_V: agent id of the vote's author (``-1`` when unknown; any int is accepted).
      a_V: first agent of ``Agent a <op> Agent b``.
      op_V: operator code: ``OP_GT`` (a beats b), ``OP_EQ`` (tie) or ``OP_OTHER``.
      b_V: second agent.
      judge_V: int32 [V] or None; ``≥ 0``: the id of the judge (not a debater) who cast the vote, whose
        author field is then ignored; negative (``-1`` by convention): cast by the debater ``authors_V``.
      weight_V: float [V] or None (float64 from :func:`vote_arrays`); the weight of each vote, finite and
        ``≥ 0`` (None: all 1).
    """

    group_ids_V: Int32Array
    authors_V: Int32Array
    a_V: Int32Array
    op_V: Int32Array
    b_V: Int32Array
    judge_V: Int32Array | None = None
    weight_V: FloatArray | None = None

    def take(self, rows: npt.ArrayLike) -> VoteArrays:
        """The votes at ``rows`` (an index array or a bool mask [V]), in that order; None fields stay None.

        Examples:
          >>> v = vote_arrays([0, 0, 0], [1, 2, -1], [0, 0, 1], [">", "=", ">"], [1, 1, 2],
          ...     judges=[-1, -1, 7])
          >>> w = v.take([2, 0])
          >>> w.a_V, w.judge_V, w.weight_V
          (array([1, 0], dtype=int32), array([ 7, -1], dtype=int32), None)
        """
        idx = np.asarray(rows)
        if idx.size == 0 and idx.dtype.kind not in "biu":  # [] reads as float64
            idx = idx.astype(np.intp)
        g, u, a, op, b = (_rows_of(x)[idx] for x in self[:5])
        judge = None if self.judge_V is None else _rows_of(self.judge_V)[idx]
        weight = None if self.weight_V is None else _rows_of(self.weight_V)[idx]
        return VoteArrays(g, u, a, op, b, judge, weight)


class VoteValidation(NamedTuple):
    """Result of :func:`validate_votes`.

    Attributes:
      valid_V: bool [V], True for the votes that count.
      reason_V: int8 [V], a ``VOTE_*`` code; ``VOTE_REASONS[code]`` names it.
      malformed_P: int32 [P], number of invalid (non-padding) votes in each debate.
    """

    valid_V: npt.NDArray[np.bool_]
    reason_V: npt.NDArray[np.int8]
    malformed_P: Int32Array


def _rows_of(x: Any) -> Any:
    """An array field as is (numpy or JAX), a list as a numpy array."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)


def _clamp(x: int) -> int:
    return min(max(int(x), _INT32_MIN), _INT32_MAX)


_OP_BY_STRING: Final = {">": OP_GT, "=": OP_EQ}


def _op_code(op: object) -> int:
    if isinstance(op, str):
        return _OP_BY_STRING.get(op, OP_OTHER)
    if isinstance(op, (int, np.integer)) and not isinstance(op, (bool, np.bool_)):
        return int(op) if int(op) in (OP_GT, OP_EQ) else OP_OTHER
    raise TypeError(f"ops must hold strings or integer op codes, got {type(op).__name__}")


def _op_codes(ops: npt.ArrayLike | Sequence[str | int]) -> Int32Array:
    """Maps operators to codes: ``">"`` → OP_GT, ``"="`` → OP_EQ, other strings → OP_OTHER.

    Integer codes other than OP_GT / OP_EQ become OP_OTHER.
    """
    if isinstance(ops, np.ndarray):
        if ops.ndim != 1:
            raise ValueError(f"ops must have rank 1, got shape {ops.shape}")
        if ops.dtype.kind in "US":
            gt, eq = (">", "=") if ops.dtype.kind == "U" else (b">", b"=")
            out = np.full(ops.shape, OP_OTHER, dtype=np.int32)
            out[ops == gt] = OP_GT
            out[ops == eq] = OP_EQ
            return out
        if ops.dtype.kind in "iu":
            return np.where((ops == OP_GT) | (ops == OP_EQ), ops, OP_OTHER).astype(np.int32)
        if ops.dtype.kind != "O":
            raise TypeError(f"ops must hold strings or integer op codes, got dtype {ops.dtype}")
    elif isinstance(ops, (str, bytes)) or not isinstance(ops, Sequence):
        raise TypeError(f"ops must be a sequence or 1-D array of operators, got {type(ops).__name__}")
    get = _OP_BY_STRING.get
    codes = (get(op, OP_OTHER) if type(op) is str else _op_code(op) for op in ops)
    return np.fromiter(codes, dtype=np.int32, count=len(ops))


def vote_arrays(
    group_ids: npt.ArrayLike,
    authors: npt.ArrayLike,
    a: npt.ArrayLike,
    ops: npt.ArrayLike | Sequence[str | int],
    b: npt.ArrayLike,
    *,
    judges: npt.ArrayLike | None = None,
    weights: npt.ArrayLike | None = None,
) -> VoteArrays:
    """Builds :class:`VoteArrays` from lists or arrays of equal length V.

    Operators may be strings (``">"`` → ``OP_GT``, ``"="`` → ``OP_EQ``, anything else, e.g. ``"<"``,
    ``">="`` or ``" >"``, → ``OP_OTHER``) or integer codes (codes other than OP_GT / OP_EQ become
    OP_OTHER). Ids beyond the int32 range are clamped to it, which keeps them out of every agent range,
    so such a vote stays malformed.

    Votes of judges who are not debaters (an LLM judge, a verifier, a human label) go in the same arrays:
    ``judges[v] ≥ 0`` names the judge of vote v (its author is then ignored), ``-1`` marks a debater's
    vote. ``weights`` weighs every vote (judges' and debaters'); leaving both out gives today's arrays.

    Args:
      group_ids: int [V], debate of each vote, in ``[0, P]`` (``P`` = padding; checked later).
      authors: int [V], author agent ids (``-1`` for unknown).
      a: int [V], first agent ids.
      ops: [V] operator strings or int codes.
      b: int [V], second agent ids.
      judges: keyword-only; int [V], judge id of each vote (``≥ 0``), ``-1`` for a debater's vote; None:
        every vote is a debater's (``judge_V`` stays None).
      weights: keyword-only; real [V], the weight of each vote, finite and ``≥ 0``; None: all 1
        (``weight_V`` stays None).

    Returns:
      A ``VoteArrays`` of int32 arrays of shape [V] (``weight_V`` float64).

    Raises:
      TypeError: non-integer ids or judges, non-real weights, or an operator that is neither a string nor
        an int.
      ValueError: an argument that is not 1-D, lengths that differ, or a weight that is negative, NaN or
        infinite (the message names ``weights``).

    Examples:
      >>> v = vote_arrays([0, 0, 1], [2, -1, 0], [0, 1, 1], [">", "=", "<"], [1, 2, 0])
      >>> v.op_V
      array([0, 1, 2], dtype=int32)
      >>> j = vote_arrays([0, 0], [1, -1], [0, 1], [">", ">"], [2, 2], judges=[-1, 0], weights=[1, 2.5])
      >>> j.judge_V, j.weight_V
      (array([-1,  0], dtype=int32), array([1. , 2.5]))
    """
    g = as_int32_saturated(group_ids, "group_ids")
    u = as_int32_saturated(authors, "authors")
    a_ = as_int32_saturated(a, "a")
    b_ = as_int32_saturated(b, "b")
    op = _op_codes(ops)
    check_same_length(group_ids=g, authors=u, a=a_, ops=op, b=b_)
    judge = None if judges is None else as_int32_saturated(judges, "judges")
    if judge is not None:
        check_same_length(group_ids=g, judges=judge)
    weight = None if weights is None else _as_weights(weights, "weights", int(g.shape[0]))
    return VoteArrays(g, u, a_, op, b_, judge, weight)


def _as_weights(x: npt.ArrayLike, name: str, num_votes: int) -> FloatArray:
    """Weights as float64 [V], each finite and ``≥ 0``; raises naming ``name`` otherwise."""
    w = as_float_array(x, name).astype(np.float64)
    if w.shape[0] != num_votes:
        raise ValueError(f"{name} must have length {num_votes} (one weight per vote), got {w.shape[0]}")
    bad = ~(np.isfinite(w) & (w >= 0))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be finite and >= 0, got {w[first]!r} at vote {first}")
    return w


def votes_from_responses(
    responses_P: Sequence[Sequence[ParsedResponse]], *, include_failed: bool = False
) -> VoteArrays:
    """Collects the votes of parsed responses, debate by debate, into :class:`VoteArrays`.

    Debate ``p`` is the outer index; each vote's author is ``response.author_id``. A response that did
    not parse (``ok`` False) contributes no votes unless ``include_failed`` is set: in the reference a
    failed parse yields no response at all. Comparisons the parser already removed (self-comparisons,
    unreadable lines in ``response.malformed_votes``) are not votes and do not appear here.

    Args:
      responses_P: for each of P debates, its parsed responses in any order (rounds may be flattened).
      include_failed: keyword-only; also take the votes of responses with ``ok`` False.

    Returns:
      ``VoteArrays`` with one row per vote, debates in order; ids beyond int32 are clamped.

    Examples:
      >>> from kernel._types import ParsedResponse, Vote
      >>> r = ParsedResponse.make(0, votes=(Vote(1, ">", 2),))
      >>> votes_from_responses([[r], [], [r, r]]).group_ids_V
      array([0, 2, 2], dtype=int32)
    """
    if not isinstance(responses_P, list | tuple):  # read twice where the packed path gives up
        responses_P = list(responses_P)
    include_failed = check_bool(include_failed, "include_failed")
    packed = _packed_votes(responses_P, include_failed)
    if packed is not None:
        return packed
    counts: list[int] = []
    groups: list[int] = []
    authors: list[int] = []
    votes_R: list[tuple[Vote, ...]] = []
    for p, responses in enumerate(responses_P):
        for response in responses:
            if not isinstance(response, ParsedResponse):
                raise TypeError(
                    f"responses_P[{p}] must hold ParsedResponse objects, got {type(response).__name__}"
                )
            votes = response.votes
            if votes and (response.ok or include_failed):
                votes_R.append(votes)
                counts.append(len(votes))
                groups.append(p)
                authors.append(response.author_id)
    if not votes_R:
        g, u, a, op, b = (np.zeros(0, dtype=np.int32) for _ in range(5))
        return VoteArrays(g, u, a, op, b)
    reps = np.asarray(counts, dtype=np.int64)
    g = np.repeat(np.asarray(groups, dtype=np.int64), reps).astype(np.int32)
    u = np.repeat(_id_column(authors), reps)
    a_col, op_col, b_col = _unpacked_columns(votes_R)
    return VoteArrays(g, u, a_col, op_col, b_col)


_VOTE_BYTES: Final = 12  # one packed vote: three int32
_CHUNK: Final = 128
"""Debates per round of :func:`_packed_votes` (~2,000 responses at 15 each): its passes over one round
find the objects in cache."""
_GET_CODES: Final = operator.attrgetter("vote_codes")
_GET_OK: Final = operator.attrgetter("ok")
_GET_AUTHOR: Final = operator.attrgetter("author_id")
_GET_VOTES: Final = operator.attrgetter("votes")


def _packed_votes(responses_P: Sequence[Sequence[ParsedResponse]], include_failed: bool) -> VoteArrays | None:
    """:func:`votes_from_responses` from the packed ``vote_codes``, or None where it must read the votes.

    None (the per-vote path then gives the result) when a response that counts has no codes, codes of
    another length than its votes (stale: ``replace()`` of the votes alone), or an author id that is not
    an integer of int64 (that path clamps or raises as it does for every batch). The same columns as that
    path, built in rounds of :data:`_CHUNK` debates from a few C-level passes over their responses
    (``map`` of an ``attrgetter``, ``len``, ``b"".join``) and ``np.repeat`` of per-response authors and
    debate ids: no Python step per response or vote. ``responses_P`` is sliced: a list or a tuple.
    """
    joined: list[bytes] = []
    code_lengths: list[npt.NDArray[np.int64]] = []
    vote_counts: list[npt.NDArray[np.int64]] = []
    authors: list[npt.NDArray[np.int64]] = []
    debate_ids: list[Int32Array] = []
    try:
        for lo in range(0, len(responses_P), _CHUNK):
            debates = responses_P[lo : lo + _CHUNK]
            sizes = np.fromiter(map(len, debates), np.int64, len(debates))  # TypeError: an iterator
            part: list[ParsedResponse] = list(itertools.chain.from_iterable(debates))
            debate_R = np.repeat(np.arange(lo, lo + len(debates), dtype=np.int32), sizes)
            if not include_failed and not all(map(_GET_OK, part)):  # a failed parse's votes do not count
                keep = list(map(operator.truth, map(_GET_OK, part)))
                part = list(itertools.compress(part, keep))
                debate_R = debate_R[np.array(keep, dtype=bool)]
            codes = list(map(_GET_CODES, part))
            joined.append(b"".join(codes))  # TypeError on a None
            code_lengths.append(np.fromiter(map(len, codes), np.int64, len(part)))
            vote_counts.append(np.fromiter(map(len, map(_GET_VOTES, part)), np.int64, len(part)))
            authors.append(np.fromiter(map(_GET_AUTHOR, part), np.int64, len(part)))  # int() of each
            debate_ids.append(debate_R)
    except (TypeError, ValueError, OverflowError, AttributeError):  # no codes; an author that is not an
        return None  # int64; not a ParsedResponse (the per-vote path names it)
    if not joined:
        return None
    counts_R = np.concatenate(vote_counts)
    if not np.array_equal(np.concatenate(code_lengths), _VOTE_BYTES * counts_R):  # stale codes
        return None
    u = np.repeat(as_int32_saturated(np.concatenate(authors), "authors"), counts_R)
    g = np.repeat(np.concatenate(debate_ids), counts_R)
    a, op, b = _code_columns(b"".join(joined))
    return VoteArrays(g, u, a, op, b)


def _code_columns(codes: bytes) -> tuple[Int32Array, Int32Array, Int32Array]:
    """The (a, op code, b) columns of votes packed by :func:`pack_votes` (int32 triples, concatenated)."""
    abc = np.frombuffer(codes, dtype=np.int32).reshape(-1, 3).T.copy()
    return abc[0], abc[1], abc[2]


def _unpacked_columns(votes_R: list[tuple[Vote, ...]]) -> tuple[Int32Array, Int32Array, Int32Array]:
    """The (a, op, b) columns of responses' vote tuples without packed codes."""
    # Every vote is an (a, op, b) triple: flatten them in C and slice the columns, instead of a Python
    # step per vote.
    items = list(itertools.chain.from_iterable(itertools.chain.from_iterable(votes_R)))
    if len(items) != 3 * sum(map(len, votes_R)):
        raise ValueError("every vote must be an (a, op, b) triple")
    return _id_column(items[0::3]), _op_column(items[1::3]), _id_column(items[2::3])


def _id_column(ids: Sequence[Any]) -> Int32Array:
    """Agent ids as int32, clamped at the int32 bounds (as :func:`_clamp` does one at a time)."""
    if set(map(type, ids)) <= {int}:  # exactly int (bool and other int types go below), checked in C
        try:
            return as_int32_saturated(np.fromiter(ids, np.int64, len(ids)), "ids")
        except OverflowError:  # beyond int64
            pass
    return np.fromiter((_clamp(x) for x in ids), np.int32, len(ids))


_OP_BYTES: Final = np.full(256, OP_OTHER, dtype=np.int32)
_OP_BYTES[ord(">")] = OP_GT
_OP_BYTES[ord("=")] = OP_EQ


def _op_column(ops: Sequence[Any]) -> Int32Array:
    """Operator codes: OP_GT for ``>``, OP_EQ for ``=``, OP_OTHER for anything else."""
    if set(map(type, ops)) <= {str} and set(map(len, ops)) == {1}:  # C-level checks
        joined = "".join(ops)
        if joined.isascii():  # one byte per operator: a table lookup
            return _OP_BYTES[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]
    return np.fromiter((_OP_BY_STRING.get(x, OP_OTHER) for x in ops), np.int32, len(ops))


def _num_agents(num_agents_P: npt.ArrayLike) -> npt.NDArray[np.int64]:
    n = as_int_array(num_agents_P, "num_agents_P")
    if n.size and int(n.min()) < 0:
        raise ValueError(f"num_agents_P must be >= 0, got a minimum of {int(n.min())}")
    if n.size and int(n.max()) > _INT32_MAX:
        raise ValueError(f"num_agents_P must fit int32, got a maximum of {int(n.max())}")
    return n


_ID_FIELDS: Final = VoteArrays._fields[:5]
"""The five int32 fields every :class:`VoteArrays` has (the judge fields after them are optional)."""


def _vote_fields(votes: VoteArrays) -> tuple[Int32Array, Int32Array, Int32Array, Int32Array, Int32Array]:
    """The five id fields as int32 arrays of one length (ids beyond int32 clamped)."""
    if not isinstance(votes, VoteArrays):
        raise TypeError(
            f"votes must be a VoteArrays (vote_arrays, votes_from_responses), got {type(votes).__name__}"
        )
    names = _ID_FIELDS
    fields = [as_int32_saturated(x, f"votes.{name}") for name, x in zip(names, votes[:5], strict=True)]
    check_same_length(**dict(zip(names, fields, strict=True)))
    g, u, a, op, b = fields
    return g, u, a, op, b


def _judge_fields(votes: VoteArrays, num_votes: int) -> tuple[Int32Array | None, FloatArray | None]:
    """``judge_V`` as int32 and ``weight_V`` as float64 (finite, ≥ 0), each None when absent."""
    judge = None if votes.judge_V is None else as_int32_saturated(votes.judge_V, "votes.judge_V")
    if judge is not None and judge.shape[0] != num_votes:
        raise ValueError(f"votes.judge_V must have length {num_votes} (one per vote), got {judge.shape[0]}")
    weight = None if votes.weight_V is None else _as_weights(votes.weight_V, "votes.weight_V", num_votes)
    return judge, weight


def _debater_authors(u: Int32Array, judge: Int32Array | None) -> Int32Array:
    """Authors for leave-one-out: a judge vote's author is −1, which excludes nobody."""
    return u if judge is None else np.where(judge >= 0, np.int32(-1), u)


def _checked(
    votes: VoteArrays, num_agents_P: npt.ArrayLike
) -> tuple[Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, npt.NDArray[np.int64]]:
    g, u, a, op, b = _vote_fields(votes)
    n = _num_agents(num_agents_P)
    check_group_ids(g, int(n.shape[0]), "votes.group_ids_V")  # type: ignore[arg-type]  # int32 is fine
    return g, u, a, op, b, n


def _uniform_agents(g: Int32Array, n: npt.NDArray[np.int64]) -> int | None:
    """N when every debate has N agents and no vote is padding (then nothing needs a gather)."""
    if n.size == 0 or int(n.min()) != int(n.max()) or (g.size and int(g.max()) >= n.size):
        return None
    return int(n[0])


def _valid_mask(
    g: Int32Array,
    a: Int32Array,
    op: Int32Array,
    b: Int32Array,
    n: npt.NDArray[np.int64],
    uniform: int | None = None,
) -> npt.NDArray[np.bool_]:
    """valid = 0 ≤ a < N_g ∧ 0 ≤ b < N_g ∧ a ≠ b ∧ op ∈ {OP_GT, OP_EQ}; padding rows (g = P) are invalid.

    Read as uint32, a negative id is ≥ 2³¹ > N, so one unsigned comparison checks both bounds.
    ``uniform`` (from :func:`_uniform_agents`) replaces the per-vote gather of N_g by a scalar.
    """
    if uniform is None:
        n_v: npt.NDArray[np.uint32] | np.uint32 = np.take(np.append(n, 0).astype(np.uint32), g)
    else:
        n_v = np.uint32(uniform)
    valid = a.view(np.uint32) < n_v
    valid &= b.view(np.uint32) < n_v
    valid &= a != b
    valid &= op.view(np.uint32) < np.uint32(2)
    return valid


def validate_votes(votes: VoteArrays, num_agents_P: npt.ArrayLike) -> VoteValidation:
    """Marks each vote valid or not, with a reason, and counts the malformed votes of each debate.

    valid_v ⟺ 0 ≤ a_v < N_p ∧ 0 ≤ b_v < N_p ∧ a_v ≠ b_v ∧ op_v ∈ {OP_GT, OP_EQ}, with p = group_ids_V[v];
    malformed_p = #{v in debate p : ¬valid_v}. The reason of an invalid vote is the first failing check
    in the order a, b, pair, op. Padding rows (group id P) get ``VOTE_PADDING`` and count nowhere.

    Total over votes: any ids and op codes give a result. A group id outside ``[0, P]`` is a programmer
    error (debate ids come from the caller's code, not from the model) and raises.

    Judge votes (``judge_V ≥ 0``) get the same rule and reasons, and an invalid one counts in
    ``malformed_P`` like any other; their author plays no part, and neither does a weight (a vote of
    weight 0 is still valid). Judge ids and weights come from the caller's code: a weight that is
    negative, NaN or infinite raises, naming ``votes.weight_V``.

    Args:
      votes: ``VoteArrays`` of length V.
      num_agents_P: int [P], agent count of each debate (≥ 0).

    Returns:
      ``VoteValidation(valid_V: bool [V], reason_V: int8 [V], malformed_P: int32 [P])``.

    Raises:
      ValueError: a group id outside ``[0, P]``, a negative agent count, mismatched lengths or ranks, a
        negative or non-finite ``votes.weight_V``.
      TypeError: non-integer fields or counts, non-real weights.

    References:
      The pairwise reward of the tinker-cookbook multi-agent debate recipe (v1); REFERENCE.md §2.

    Examples:
      >>> v = vote_arrays(group_ids=[0, 0, 0, 0, 0, 1], authors=[0, 0, 1, 2, 2, 0],
      ...     a=[1, 3, 0, 2, 0, 0], ops=[">", "=", "=", ">", "<", ">"], b=[2, 0, 5, 2, 1, 1])
      >>> res = validate_votes(v, [3, 2])
      >>> res.valid_V
      array([ True, False, False, False, False,  True])
      >>> [VOTE_REASONS[r] for r in res.reason_V]
      ['valid', 'a_out_of_range', 'b_out_of_range', 'self_pair', 'bad_op', 'valid']
      >>> res.malformed_P
      array([4, 0], dtype=int32)
    """
    g, _, a, op, b, n = _checked(votes, num_agents_P)
    _judge_fields(votes, int(g.shape[0]))  # checked, though neither changes validity
    num_groups = int(n.shape[0])
    valid = _valid_mask(g, a, op, b, n)
    n_v = np.append(n, 0)[g]
    a_ok = (a >= 0) & (a < n_v)
    b_ok = (b >= 0) & (b < n_v)
    reason = np.select(
        [valid, g == num_groups, ~a_ok, ~b_ok, a == b],
        [VOTE_VALID, VOTE_PADDING, VOTE_A_OUT_OF_RANGE, VOTE_B_OUT_OF_RANGE, VOTE_SELF_PAIR],
        default=VOTE_BAD_OP,
    ).astype(np.int8)
    malformed = np.bincount(g[~valid], minlength=num_groups + 1)[:num_groups].astype(np.int32)
    return VoteValidation(valid, reason, malformed)
