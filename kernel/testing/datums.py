"""Invariant suite for datum builders: point it at your own ``build_datums``.

A builder is any callable ``fn(trajectories) -> result`` (see :class:`DatumBuilder`) taking a packed
:class:`kernel.Trajectories` and returning an object with ``datums`` (a :class:`kernel.DatumBatch`) and
``status_B`` (per trajectory, 0 when it had no problem, else a reason code), as ``kernel.build_datums``
does; bind options first (``functools.partial(kernel.build_datums, mode="robust")``). An optional
``report`` with ``datums``, ``tokens`` and ``action_tokens`` counts is checked against the arrays, and
its per-reason counts (``ok``, ``short_segment``, ... named as in ``kernel.DATUM_STATUS``) against
``status_B``.

Checks (REFERENCE.md §4): the output contract (int64 tokens, float32 labels as Tinker receives them,
bool mask, consistent offsets), the shift alignment (target = input shifted by one), labels only on
action tokens (observation positions carry advantage and logprob exactly 0), token conservation (every
action token is trained exactly once, in order, with its own logprob), prefix merges exactly where the
observation extends the running sequence, nothing dropped without a count, no problem code without a
problem (a trajectory the reference builds gets status 0 and all its datums, unless left out on purpose),
what a flagged trajectory emits by mode (``reference``: nothing; ``robust``: exactly its problem-free
segments, with their labels; declare the mode with ``mode=``), and a report's per-reason counts equal the
histogram of ``status_B``. The checks from token conservation on compare with :func:`reference_segments`,
a per-trajectory Python loop written from REFERENCE.md §4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

import numpy as np

from kernel._datums import DATUM_MODES, DATUM_STATUS, DatumMode, Trajectories, trajectories_from_lists
from kernel.testing._suite import SuiteOutcome, _run_class_check, _run_suite
from kernel.testing.strategies import TokenTrajectories, token_trajectories

__all__ = [
    "DATUM_CHECKS",
    "DatumBuilder",
    "DatumInvariants",
    "ReferenceSegments",
    "check_datum_action_only_labels",
    "check_datum_drops_counted",
    "check_datum_flagged_by_mode",
    "check_datum_flags_justified",
    "check_datum_output_contract",
    "check_datum_prefix_merges",
    "check_datum_shift_alignment",
    "check_datum_status_counts",
    "check_datum_token_conservation",
    "reference_segments",
    "run_datum_suite",
]


class DatumBuilder(Protocol):
    """The protocol: ``fn(trajectories) -> result`` with ``result.datums`` and ``result.status_B``.

    Args (positional):
      trajectories: a packed :class:`kernel.Trajectories` batch of B trajectories.

    Returns:
      An object with ``datums`` (:class:`kernel.DatumBatch`), ``status_B`` (``[B]`` int, 0 = no
      problem) and optionally ``report`` (``datums``, ``tokens``, ``action_tokens``).
    """

    def __call__(self, trajectories: Trajectories, /) -> Any: ...


class ReferenceSegments(NamedTuple):
    """Result of :func:`reference_segments`.

    Attributes:
      ok_B: per trajectory, False when the reference would raise on it (a transition without
        logprobs; a one-token sequence, or a logprob count different from an action length in a
        sequence that is emitted).
      segments_B: per trajectory, its running sequences x in order, each as ``(tokens, logprobs,
        advantages, mask)`` lists of length len(x) (labels of x itself, not yet sliced [1:]).
    """

    ok_B: list[bool]
    segments_B: list[list[tuple[list[int], list[float], list[float], list[bool]]]]


def reference_segments(trajectories: Trajectories) -> ReferenceSegments:
    """The slow reference: REFERENCE.md §4's running sequence, one Python loop per trajectory.

    x starts empty; for each transition (ob, ac, lp): if x is a prefix of ob the delta is ob[len(x):],
    else x is emitted and the delta is ob. Then x ← x ++ delta ++ ac, labels (0, 0, False) on the delta
    and (lp, float32(A), True) on ac. The last x is emitted; empty sequences are skipped.

    Args:
      trajectories: the packed batch.

    Returns:
      :class:`ReferenceSegments`.

    Examples:
      >>> from kernel import trajectories_from_lists
      >>> t = trajectories_from_lists([[([1, 2], [3], [-0.5]), ([1, 2, 3, 4], [5], [-1.0])]], [1.0])
      >>> ref = reference_segments(t)
      >>> ref.ok_B, ref.segments_B[0][0][0], ref.segments_B[0][0][3]
      ([True], [1, 2, 3, 4, 5], [False, False, True, False, True])
    """
    return _reference(trajectories).segments


class _Reference(NamedTuple):
    """:func:`reference_segments` plus what the mode-aware checks need, segment by segment."""

    segments: ReferenceSegments
    fine_B: list[list[bool]]
    """Per trajectory and segment: the reference builds it (≥ 2 tokens, every transition with logprobs,
    one per action token) and every value is a finite float32 (its logprobs, the trajectory's advantage)."""
    clean_B: list[bool]
    """Per trajectory: no problem at all (``ok_B`` and every segment fine)."""
    advantages_B: list[float]
    """Per trajectory: its advantage as the datums carry it (float32; beyond its range ±inf)."""


def _reference(trajectories: Trajectories) -> _Reference:
    t = trajectories
    ob_off, ac_off, lp_off = (
        np.asarray(o).tolist() for o in (t.ob_offsets_N1, t.ac_offsets_N1, t.logprob_offsets_N1)
    )
    ob_tokens, ac_tokens = np.asarray(t.ob_tokens).tolist(), np.asarray(t.ac_tokens).tolist()
    with np.errstate(over="ignore", invalid="ignore"):  # beyond float32: inf, a value_out_of_range
        lp32 = np.asarray(t.logprobs, dtype=np.float64).astype(np.float32)
        adv32 = np.asarray(t.advantages_B).astype(np.float32)
    logprobs = lp32.astype(np.float64).tolist()
    nonfinite_lp = np.concatenate([[0], np.cumsum(~np.isfinite(lp32))]).tolist()  # non-finite counts so far
    has_lp = np.asarray(t.has_logprobs_N).tolist()
    traj = np.asarray(t.traj_ids_N).tolist()
    adv = adv32.astype(np.float64).tolist()
    finite_adv = np.isfinite(adv32).tolist()
    ok_B = [True] * len(adv)
    segments_B: list[list[tuple[list[int], list[float], list[float], list[bool]]]] = [[] for _ in adv]
    fine_B: list[list[bool]] = [[] for _ in adv]
    x: list[int] = []
    lab: tuple[list[float], list[float], list[bool]] = ([], [], [])
    # problems of the current sequence: a logprob count ≠ action length (checked when emitted), a
    # transition without logprobs, a logprob that is not a finite float32
    mismatch, missing, bad_value = [False], [False], [False]

    def emit(b: int) -> None:
        if x:
            segments_B[b].append((list(x), list(lab[0]), list(lab[1]), list(lab[2])))
            if len(x) == 1 or mismatch[0]:
                ok_B[b] = False
            fine_B[b].append(
                len(x) >= 2 and not (mismatch[0] or missing[0] or bad_value[0]) and finite_adv[b]
            )
        mismatch[0] = missing[0] = bad_value[0] = False

    for n, b in enumerate(traj):
        if n == 0 or traj[n - 1] != b:
            if n:
                emit(traj[n - 1])
            x, lab = [], ([], [], [])
            mismatch[0] = missing[0] = bad_value[0] = False
        ob, ac = ob_tokens[ob_off[n] : ob_off[n + 1]], ac_tokens[ac_off[n] : ac_off[n + 1]]
        lp = logprobs[lp_off[n] : lp_off[n + 1]]
        if ob[: len(x)] == x:
            delta = ob[len(x) :]
        else:
            emit(b)
            x, lab, delta = [], ([], [], []), ob
        if not has_lp[n]:
            ok_B[b] = False  # the reference fails as soon as it reaches such a transition
            missing[0] = True
        elif nonfinite_lp[lp_off[n + 1]] > nonfinite_lp[lp_off[n]]:
            bad_value[0] = True
        if not has_lp[n] or len(lp) != len(ac):
            mismatch[0] |= has_lp[n]
            lp = [0.0] * len(ac)
        x += delta + ac
        lab[0].extend([0.0] * len(delta) + lp)
        lab[1].extend([0.0] * len(delta) + [adv[b]] * len(ac))
        lab[2].extend([False] * len(delta) + [True] * len(ac))
    if traj:
        emit(traj[-1])
    clean_B = [ok and finite_adv[b] and all(fine_B[b]) for b, ok in enumerate(ok_B)]
    return _Reference(ReferenceSegments(ok_B, segments_B), fine_B, clean_B, adv)


# --- internals ---------------------------------------------------------------------------------------


def _build(name: str, fn: DatumBuilder, trajectories: Trajectories) -> Any:
    out = fn(Trajectories(*(np.array(x) for x in trajectories)))
    for field in ("datums", "status_B"):
        if not hasattr(out, field):
            raise AssertionError(f"{name}: the result has no {field!r}")
    return out


def _datums_of(d: Any) -> list[tuple[int, slice]]:
    off = np.asarray(d.offsets_D1).tolist()
    return [(int(b), slice(off[i], off[i + 1])) for i, b in enumerate(np.asarray(d.traj_ids_D).tolist())]


def _ok_trajectories(out: Any, ref: ReferenceSegments) -> list[int]:
    """Trajectories that are fine for the reference and for the builder (status 0)."""
    status = np.asarray(out.status_B).tolist()
    return [b for b, ok in enumerate(ref.ok_B) if ok and status[b] == 0]


def _fmt(x: Any) -> str:
    return np.array2string(np.asarray(x), precision=9, separator=", ", max_line_width=10_000)


_STATUS_CODE = {name: code for code, name in enumerate(DATUM_STATUS)}
_PROBLEM_CODES = frozenset(
    _STATUS_CODE[n]
    for n in ("short_segment", "logprob_count_mismatch", "missing_logprobs", "value_out_of_range")
)
"""Codes that name a problem of the input (``not_trainable`` is a choice, ``where=``)."""
_NOT_TRAINABLE = _STATUS_CODE["not_trainable"]

_Datum = tuple[list[int], list[float], list[float], list[bool]]


def _expected(segment: _Datum, advantage: float, drop_zero_advantage: bool) -> bool:
    """Whether a reference sequence is emitted: ≥ 2 tokens and, for a builder that drops datums with
    no nonzero advantage, a trained target (a masked position after the first) and a nonzero advantage."""
    if len(segment[0]) < 2:
        return False
    return not drop_zero_advantage or (advantage != 0 and any(segment[3][1:]))


def _status_name(code: int) -> str:
    return f"{code} ({DATUM_STATUS[code]})" if 0 <= code < len(DATUM_STATUS) else str(code)


def _emitted(d: Any) -> dict[int, list[_Datum]]:
    """Per trajectory, its datums in order as (sequence, logprobs, advantages, mask); sequence = input
    plus the last target."""
    inp, tgt = np.asarray(d.input_tokens), np.asarray(d.target_tokens)
    lp, adv = np.asarray(d.logprobs, dtype=np.float64), np.asarray(d.advantages, dtype=np.float64)
    mask = np.asarray(d.mask, dtype=bool)
    got: dict[int, list[_Datum]] = {}
    for b, s in _datums_of(d):
        seq = inp[s].tolist() + tgt[s][-1:].tolist()
        got.setdefault(b, []).append((seq, lp[s].tolist(), adv[s].tolist(), mask[s].tolist()))
    return got


def _describe(have: list[_Datum], want: list[_Datum]) -> str:
    seqs = [h[0] for h in have]
    if seqs != [w[0] for w in want] or have == want:
        return f"sequences {seqs}"
    i = next(i for i, (h, w) in enumerate(zip(have, want, strict=True)) if h != w)
    return (
        f"sequences {seqs} where datum {i} has logprobs {have[i][1]}, advantages {have[i][2]}, mask "
        f"{have[i][3]} (the reference: {want[i][1]}, {want[i][2]}, {want[i][3]})"
    )


# --- checks --------------------------------------------------------------------------------------------


def check_datum_output_contract(fn: DatumBuilder, trajectories: Trajectories) -> None:
    """int64 tokens, float32 logprobs and advantages (what Tinker receives), bool mask, all of one
    length ΣT; offsets from 0 to ΣT, non-decreasing; trajectory ids in [0, B); ``status_B`` of length B.

    Args:
      fn: the builder under test.
      trajectories: the input batch.

    Returns:
      None.

    Raises:
      AssertionError: the first violation (e.g. the reference's int64 advantages).

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])
      >>> check_datum_output_contract(kernel.build_datums, t)
    """
    name = "check_datum_output_contract"
    out = _build(name, fn, trajectories)
    d = out.datums
    want = {
        "input_tokens": np.int64,
        "target_tokens": np.int64,
        "logprobs": np.float32,
        "advantages": np.float32,
        "mask": np.bool_,
        "offsets_D1": np.int64,
    }
    for field, dtype in want.items():
        value = getattr(d, field)
        if not isinstance(value, np.ndarray) and len(value) == 0:
            continue  # an empty list has no dtype of its own (numpy would call it float64)
        got = np.asarray(value).dtype
        if got != dtype:
            raise AssertionError(f"{name}: {field} has dtype {got}, expected {np.dtype(dtype)}")
    total = np.asarray(d.input_tokens).shape
    for field in ("target_tokens", "logprobs", "advantages", "mask"):
        if np.asarray(getattr(d, field)).shape != total:
            raise AssertionError(
                f"{name}: {field} has shape {np.asarray(getattr(d, field)).shape}, expected {total}"
            )
    off = np.asarray(d.offsets_D1)
    if off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] != total[0] or (np.diff(off) < 0).any():
        raise AssertionError(
            f"{name}: offsets_D1 {_fmt(off)} must run from 0 to {total[0]} without decreasing"
        )
    num_b = int(np.asarray(trajectories.advantages_B).shape[0])
    ids = np.asarray(d.traj_ids_D)
    if ids.shape != (off.size - 1,) or (ids.size and (ids.min() < 0 or ids.max() >= num_b)):
        raise AssertionError(f"{name}: traj_ids_D {_fmt(ids)} must be {off.size - 1} ids in [0, {num_b})")
    if np.asarray(out.status_B).shape != (num_b,):
        raise AssertionError(
            f"{name}: status_B has shape {np.asarray(out.status_B).shape}, expected ({num_b},)"
        )


def check_datum_shift_alignment(fn: DatumBuilder, trajectories: Trajectories) -> None:
    """Within every datum the target is the input shifted by one: target[t] = input[t + 1].

    Args:
      fn: the builder under test.
      trajectories: the input batch.

    Returns:
      None.

    Raises:
      AssertionError: a datum whose target is not its input shifted by one.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3, 4], [-0.5, -1.0])]], [1.0])
      >>> check_datum_shift_alignment(kernel.build_datums, t)
    """
    name = "check_datum_shift_alignment"
    d = _build(name, fn, trajectories).datums
    inp, tgt = np.asarray(d.input_tokens), np.asarray(d.target_tokens)
    for i, (_, s) in enumerate(_datums_of(d)):
        if not np.array_equal(inp[s][1:], tgt[s][:-1]):
            raise AssertionError(
                f"{name}: datum {i}: input {_fmt(inp[s])}, target {_fmt(tgt[s])} (not shifted by one)"
            )


def check_datum_action_only_labels(fn: DatumBuilder, trajectories: Trajectories) -> None:
    """Labels sit on action tokens only: where ``mask`` is False the advantage and the logprob are
    exactly 0; where it is True the advantage is the trajectory's (as float32).

    Args:
      fn: the builder under test.
      trajectories: the input batch.

    Returns:
      None.

    Raises:
      AssertionError: an observation position with a label, or a wrong advantage on an action token.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])
      >>> check_datum_action_only_labels(kernel.build_datums, t)
    """
    name = "check_datum_action_only_labels"
    d = _build(name, fn, trajectories).datums
    mask, adv, lp = np.asarray(d.mask, dtype=bool), np.asarray(d.advantages), np.asarray(d.logprobs)
    adv_B = np.asarray(trajectories.advantages_B).astype(np.float32)
    for i, (b, s) in enumerate(_datums_of(d)):
        obs = ~mask[s]
        if (adv[s][obs] != 0).any() or (lp[s][obs] != 0).any():
            raise AssertionError(
                f"{name}: datum {i}: observation positions {_fmt(np.flatnonzero(obs))} carry advantages "
                f"{_fmt(adv[s][obs])} and logprobs {_fmt(lp[s][obs])}, expected exactly 0"
            )
        if (adv[s][~obs] != adv_B[b]).any():
            raise AssertionError(
                f"{name}: datum {i}: action positions carry advantages {_fmt(adv[s][~obs])}, "
                f"expected {adv_B[b]!r}"
            )


def check_datum_token_conservation(
    fn: DatumBuilder, trajectories: Trajectories, *, drop_zero_advantage: bool = False
) -> None:
    """Every action token of a trajectory without problems is trained exactly once, in order, with its
    own sampler logprob (float32): the masked targets of its datums are its action tokens (less the
    first token of a sequence, which is never a target).

    Args:
      fn: the builder under test.
      trajectories: the input batch.
      drop_zero_advantage: the builder drops datums with no nonzero advantage (as ``build_datums``
        with that option): a trajectory whose float32 advantage is 0 trains nothing (keyword).

    Returns:
      None.

    Raises:
      AssertionError: a trajectory whose trained tokens or logprobs differ.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5]), ([7], [8, 9], [-1.0, -2.0])]], [1.0])
      >>> check_datum_token_conservation(kernel.build_datums, t)
    """
    name = "check_datum_token_conservation"
    out = _build(name, fn, trajectories)
    full = _reference(trajectories)
    d, ref, adv = out.datums, full.segments, full.advantages_B
    tgt, lp, mask = np.asarray(d.target_tokens), np.asarray(d.logprobs), np.asarray(d.mask, dtype=bool)
    got: dict[int, tuple[list[int], list[float]]] = {}
    for b, s in _datums_of(d):
        tokens, lps = got.setdefault(b, ([], []))
        tokens += tgt[s][mask[s]].tolist()
        lps += lp[s][mask[s]].astype(np.float64).tolist()
    for b in _ok_trajectories(out, ref):
        segs = [seg for seg in ref.segments_B[b] if _expected(seg, adv[b], drop_zero_advantage)]
        want_t = [x for seg in segs for x, m in zip(seg[0][1:], seg[3][1:], strict=True) if m]
        want_l = [x for seg in segs for x, m in zip(seg[1][1:], seg[3][1:], strict=True) if m]
        have_t, have_l = got.get(b, ([], []))
        if have_t != want_t or have_l != want_l:
            raise AssertionError(
                f"{name}: trajectory {b} trained tokens {have_t} with logprobs {have_l}, expected its action "
                f"tokens {want_t} with logprobs {want_l}"
            )


def check_datum_prefix_merges(
    fn: DatumBuilder, trajectories: Trajectories, *, drop_zero_advantage: bool = False
) -> None:
    """Transitions merge into one datum exactly where the observation extends the running sequence:
    the datums of a trajectory without problems are its reference sequences of ≥ 2 tokens, in order
    (each datum's sequence is its input plus its last target).

    Args:
      fn: the builder under test.
      trajectories: the input batch.
      drop_zero_advantage: the builder drops datums with no nonzero advantage: a sequence without a
        trained target, or of a trajectory whose float32 advantage is 0, is not expected (keyword).

    Returns:
      None.

    Raises:
      AssertionError: a trajectory whose datums split or merge differently.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5]), ([1, 2, 3], [4], [-1.0])]], [1.0])
      >>> check_datum_prefix_merges(kernel.build_datums, t)
    """
    name = "check_datum_prefix_merges"
    out = _build(name, fn, trajectories)
    full = _reference(trajectories)
    ref, adv = full.segments, full.advantages_B
    got = {b: [datum[0] for datum in datums] for b, datums in _emitted(out.datums).items()}
    for b in _ok_trajectories(out, ref):
        want = [seg[0] for seg in ref.segments_B[b] if _expected(seg, adv[b], drop_zero_advantage)]
        if got.get(b, []) != want:
            raise AssertionError(f"{name}: trajectory {b} gave sequences {got.get(b, [])}, expected {want}")


def check_datum_drops_counted(
    fn: DatumBuilder, trajectories: Trajectories, *, drop_zero_advantage: bool = False
) -> None:
    """Nothing is dropped without a count: a trajectory the reference rejects, or one that emits fewer
    datums than its sequences of ≥ 2 tokens, has a nonzero ``status_B``; a ``report``'s ``datums``,
    ``tokens`` and ``action_tokens`` equal the arrays'.

    Args:
      fn: the builder under test.
      trajectories: the input batch.
      drop_zero_advantage: the builder drops datums with no nonzero advantage, a declared choice: those
        are not expected (keyword).

    Returns:
      None.

    Raises:
      AssertionError: a silent drop, or a report that disagrees with the arrays.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1], [], [])]], [1.0])  # a one-token sequence
      >>> check_datum_drops_counted(kernel.build_datums, t)
    """
    name = "check_datum_drops_counted"
    out = _build(name, fn, trajectories)
    full = _reference(trajectories)
    d, ref, adv = out.datums, full.segments, full.advantages_B
    status = np.asarray(out.status_B).tolist()
    emitted = np.bincount(np.asarray(d.traj_ids_D, dtype=np.int64), minlength=len(status)).tolist()
    for b, ok in enumerate(ref.ok_B):
        expected = sum(_expected(seg, adv[b], drop_zero_advantage) for seg in ref.segments_B[b])
        if status[b] == 0 and (not ok or emitted[b] < expected):
            why = (
                "the reference rejects it"
                if not ok
                else f"{emitted[b]} of its {expected} datums were emitted"
            )
            raise AssertionError(f"{name}: trajectory {b} has status 0 but {why}")
    report = getattr(out, "report", None)
    if report is not None:
        counts = {
            "datums": int(np.asarray(d.offsets_D1).size - 1),
            "tokens": int(np.asarray(d.input_tokens).size),
            "action_tokens": int(np.count_nonzero(d.mask)),
        }
        for field, value in counts.items():
            if hasattr(report, field) and getattr(report, field) != value:
                raise AssertionError(
                    f"{name}: report.{field} is {getattr(report, field)}, the arrays hold {value}"
                )


def check_datum_flags_justified(
    fn: DatumBuilder, trajectories: Trajectories, *, drop_zero_advantage: bool = False
) -> None:
    """No flag without a problem, the converse of :func:`check_datum_drops_counted`. (a) A trajectory b
    with no problem at all (``ok_B[b]`` and its logprobs and advantage finite in float32) never gets a
    problem code: status_B[b] ∉ {``short_segment``, ``logprob_count_mismatch``, ``missing_logprobs``,
    ``value_out_of_range``} (codes of ``kernel.DATUM_STATUS``). (b) A trajectory the reference builds
    (``ok_B[b]``) with status_B[b] = 0 emits exactly as many datums as it has reference sequences:
    D_b = #{x : len(x) ≥ 2} (:func:`check_datum_prefix_merges` compares the sequences themselves).

    A builder may still leave out a trajectory without a problem on purpose under another code:
    ``not_trainable`` (``build_datums(where=...)``) or a code of its own beyond ``DATUM_STATUS``.

    Args:
      fn: the builder under test.
      trajectories: the input batch.
      drop_zero_advantage: the builder drops datums with no nonzero advantage; those are not counted
        in D_b (keyword).

    Returns:
      None.

    Raises:
      AssertionError: a trajectory without a problem flagged with one, or one with status 0 and a datum
        too many or too few.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1], [2], [-0.5])]], [1.0])  # one valid 2-token datum
      >>> check_datum_flags_justified(kernel.build_datums, t)
    """
    name = "check_datum_flags_justified"
    out = _build(name, fn, trajectories)
    ref = _reference(trajectories)
    status = np.asarray(out.status_B).tolist()
    emitted = np.bincount(np.asarray(out.datums.traj_ids_D, dtype=np.int64), minlength=len(status)).tolist()
    adv = ref.advantages_B
    for b, ok in enumerate(ref.segments.ok_B):
        expected = sum(_expected(seg, adv[b], drop_zero_advantage) for seg in ref.segments.segments_B[b])
        if ref.clean_B[b] and status[b] in _PROBLEM_CODES:
            raise AssertionError(
                f"{name}: trajectory {b} has no problem but status {_status_name(status[b])} "
                f"(it emits {emitted[b]} of its {expected} datums)"
            )
        if ok and status[b] == 0 and emitted[b] != expected:
            raise AssertionError(
                f"{name}: trajectory {b} has status 0 and {expected} reference datums but emits {emitted[b]}"
            )


def check_datum_flagged_by_mode(
    fn: DatumBuilder,
    trajectories: Trajectories,
    *,
    mode: DatumMode | None = None,
    drop_zero_advantage: bool = False,
) -> None:
    """What a flagged trajectory (status_B[b] ≠ 0) emits follows the builder's mode, as
    ``kernel.build_datums`` documents the two. Let E_b be the datums b emits, in order, and S_b its fine
    reference sequences (≥ 2 tokens, every transition with logprobs, one per action token, values finite
    in float32), each as the datum (x[:-1], x[1:]) with the reference's logprobs, advantages and mask:

    - ``"reference"``: E_b = [] — the reference's exception loses the whole trajectory, the datums built
      before the problem included;
    - ``"robust"``: E_b = S_b — only the segments with a problem are dropped, the others are kept with
      the right labels; a trajectory left out with status ``not_trainable`` (``where=``) has E_b = [];
    - None (the mode is not declared): E_b = [] or E_b = S_b, per trajectory.

    Args:
      fn: the builder under test.
      trajectories: the input batch.
      mode: the builder's mode (``kernel.DATUM_MODES``), or None.
      drop_zero_advantage: the builder drops datums with no nonzero advantage; S_b leaves those out.

    Returns:
      None.

    Raises:
      AssertionError: a flagged trajectory that emits a datum its mode drops, or misses one it keeps.
      ValueError: an unknown mode.

    Examples:
      >>> import functools, kernel
      >>> turns = [([1, 2], [3], [-0.5]), ([9], [4, 5], None), ([7], [8], [-1.0])]  # 2nd: no logprobs
      >>> t = kernel.trajectories_from_lists([turns], [1.0])
      >>> check_datum_flagged_by_mode(kernel.build_datums, t, mode="reference")
      >>> check_datum_flagged_by_mode(functools.partial(kernel.build_datums, mode="robust"), t, mode="robust")
    """
    name = "check_datum_flagged_by_mode"
    if mode is not None and mode not in DATUM_MODES:
        raise ValueError(f"{name}: mode must be one of {DATUM_MODES} or None, got {mode!r}")
    out = _build(name, fn, trajectories)
    ref = _reference(trajectories)
    got = _emitted(out.datums)
    adv = ref.advantages_B
    for b, code in enumerate(np.asarray(out.status_B).tolist()):
        if code == 0:
            continue
        have = got.get(b, [])
        fine: list[_Datum] = [
            (seg[0], seg[1][1:], seg[2][1:], seg[3][1:])
            for seg, ok in zip(ref.segments.segments_B[b], ref.fine_B[b], strict=True)
            if ok and _expected(seg, adv[b], drop_zero_advantage)
        ]
        allowed: list[list[_Datum]]
        if mode == "reference" or (mode == "robust" and code == _NOT_TRAINABLE):
            allowed, wanted = [[]], "none"
        elif mode == "robust":
            allowed, wanted = [fine], f"its problem-free sequences {[w[0] for w in fine]}"
        else:
            allowed, wanted = [[], fine], f"none or its problem-free sequences {[w[0] for w in fine]}"
        if have not in allowed:
            raise AssertionError(
                f"{name}: trajectory {b} has status {_status_name(code)} but emits {_describe(have, fine)}; "
                f"expected {wanted} ({mode or 'either'} mode)"
            )


def check_datum_status_counts(fn: DatumBuilder, trajectories: Trajectories) -> None:
    """A ``report``'s per-reason counts are the histogram of ``status_B``: for every code c of
    ``kernel.DATUM_STATUS`` whose name the report has as a field, report.<DATUM_STATUS[c]> =
    #{b : status_B[b] = c} (``report.ok`` counts status 0); report.trajectories = B and
    report.transitions = N where the report has them. A result without a ``report`` passes.

    Args:
      fn: the builder under test.
      trajectories: the input batch.

    Returns:
      None.

    Raises:
      AssertionError: a count that disagrees with ``status_B`` or the input.

    Examples:
      >>> import kernel
      >>> t = kernel.trajectories_from_lists([[([1, 2], [3], None)], [([1], [2], [-0.5])]], [1.0, 0.5])
      >>> check_datum_status_counts(kernel.build_datums, t)
    """
    name = "check_datum_status_counts"
    out = _build(name, fn, trajectories)
    report = getattr(out, "report", None)
    if report is None:
        return
    status = np.asarray(out.status_B, dtype=np.int64)
    counts = {field: int(np.count_nonzero(status == code)) for code, field in enumerate(DATUM_STATUS)}
    counts["trajectories"] = int(np.asarray(trajectories.advantages_B).shape[0])
    counts["transitions"] = int(np.asarray(trajectories.traj_ids_N).shape[0])
    for field, value in counts.items():
        if hasattr(report, field) and getattr(report, field) != value:
            what = "the input has" if field in ("trajectories", "transitions") else "status_B holds"
            raise AssertionError(f"{name}: report.{field} is {getattr(report, field)}, {what} {value}")


# --- the suite ---------------------------------------------------------------------------------------------

DATUM_CHECKS: tuple[str, ...] = (
    "output_contract",
    "shift_alignment",
    "action_only_labels",
    "token_conservation",
    "prefix_merges",
    "drops_counted",
    "flags_justified",
    "flagged_by_mode",
    "status_counts",
)
"""Names of the datum checks (``check_datum_`` + name)."""

_DATUM_CHECK_FNS = {
    "output_contract": check_datum_output_contract,
    "shift_alignment": check_datum_shift_alignment,
    "action_only_labels": check_datum_action_only_labels,
    "token_conservation": check_datum_token_conservation,
    "prefix_merges": check_datum_prefix_merges,
    "drops_counted": check_datum_drops_counted,
    "flags_justified": check_datum_flags_justified,
    "flagged_by_mode": check_datum_flagged_by_mode,
    "status_counts": check_datum_status_counts,
}


_DROP_AWARE = {
    "token_conservation": check_datum_token_conservation,
    "prefix_merges": check_datum_prefix_merges,
    "drops_counted": check_datum_drops_counted,
    "flags_justified": check_datum_flags_justified,
}
"""The checks that take ``drop_zero_advantage`` (``flagged_by_mode`` too, with ``mode``)."""


class _DatumConfig:
    errors: bool = True
    max_trajectories: int = 4
    max_transitions: int = 4
    max_tokens: int = 5
    vocab: int = 6
    mode: DatumMode | None = None
    drop_zero_advantage: bool = False
    hypothesis_settings: Mapping[str, Any] = MappingProxyType({})

    def _skip_reason(self, check: str) -> str | None:
        return None

    def _suite(
        self, checks: Sequence[str], fn: DatumBuilder, raise_on_failure: bool, overrides: Mapping[str, Any]
    ) -> SuiteOutcome:
        if self.mode is not None and self.mode not in DATUM_MODES:
            raise ValueError(f"mode must be one of {DATUM_MODES} or None, got {self.mode!r}")
        mode, drop_zero = self.mode, self.drop_zero_advantage
        strategy = token_trajectories(
            max_trajectories=self.max_trajectories,
            max_transitions=self.max_transitions,
            max_tokens=self.max_tokens,
            vocab=self.vocab,
            errors=self.errors,
        )

        def run(check: str, batch: TokenTrajectories) -> None:
            t = trajectories_from_lists(batch.transitions_B, batch.advantages_B)
            if check == "flagged_by_mode":
                check_datum_flagged_by_mode(fn, t, mode=mode, drop_zero_advantage=drop_zero)
            elif check in _DROP_AWARE:
                _DROP_AWARE[check](fn, t, drop_zero_advantage=drop_zero)
            else:
                _DATUM_CHECK_FNS[check](fn, t)

        return _run_suite(
            checks, self._skip_reason, strategy, run, raise_on_failure=raise_on_failure, overrides=overrides
        )


def run_datum_suite(
    fn: DatumBuilder,
    *,
    checks: Sequence[str] | None = None,
    raise_on_failure: bool = True,
    errors: bool = True,
    max_trajectories: int = 4,
    max_transitions: int = 4,
    max_tokens: int = 5,
    vocab: int = 6,
    mode: DatumMode | None = None,
    drop_zero_advantage: bool = False,
    max_examples: int | None = None,
    hypothesis_settings: Mapping[str, Any] | None = None,
) -> SuiteOutcome:
    """Runs the datum invariants on Hypothesis-drawn trajectories (:func:`~kernel.testing.token_trajectories`
    with ``errors``).

    Args:
      fn: the builder under test (:class:`DatumBuilder`).
      checks: names (with or without ``check_datum_``) to run; None runs :data:`DATUM_CHECKS`.
      raise_on_failure: raise the first failure (True) or record it and go on (False).
      errors, max_trajectories, max_transitions, max_tokens, vocab: passed to the strategy
        (``errors``: missing logprobs and wrong logprob counts).
      mode: the builder's mode, ``"reference"`` (a flagged trajectory emits no datum) or ``"robust"``
        (it emits exactly its problem-free segments), for :func:`check_datum_flagged_by_mode`; None
        accepts either, trajectory by trajectory.
      drop_zero_advantage: the builder drops datums with no nonzero advantage (``build_datums``'s
        option): the checks then expect none for a trajectory whose float32 advantage is 0, nor for a
        sequence without a trained target.
      max_examples: examples; None keeps the active Hypothesis profile's count.
      hypothesis_settings: further ``hypothesis.settings`` options.

    Returns:
      Check name → ``"passed"``, ``"skipped: <reason>"`` or ``"failed: <message>"``.

    Raises:
      AssertionError: a check failed and ``raise_on_failure``.
      ValueError: unknown check names or mode.

    Examples:
      >>> import kernel
      >>> run_datum_suite(kernel.build_datums, max_examples=10)["prefix_merges"]
      'passed'
    """
    config = _DatumConfig()
    for key, value in {
        "errors": errors,
        "max_trajectories": max_trajectories,
        "max_transitions": max_transitions,
        "max_tokens": max_tokens,
        "vocab": vocab,
        "mode": mode,
        "drop_zero_advantage": drop_zero_advantage,
    }.items():
        setattr(config, key, value)
    chosen = list(DATUM_CHECKS) if checks is None else [c.removeprefix("check_datum_") for c in checks]
    unknown = set(chosen) - set(DATUM_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; known: {DATUM_CHECKS}")
    overrides: dict[str, Any] = dict(hypothesis_settings or {})
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    return config._suite(chosen, fn, raise_on_failure, overrides)


class DatumInvariants(_DatumConfig):
    """The datum suite as a pytest base class: subclass it as ``Test...`` and set ``builder``.

    Class attributes mirror :func:`run_datum_suite`'s keywords (``errors``, ``max_trajectories``,
    ``max_transitions``, ``max_tokens``, ``vocab``, ``mode``, ``drop_zero_advantage``,
    ``hypothesis_settings``).

    Examples:
      >>> import kernel
      >>> class TestOurs(DatumInvariants):
      ...     builder = staticmethod(kernel.build_datums)
      >>> TestOurs().test_shift_alignment()
    """

    builder: Any = None

    def _check(self, check: str) -> None:
        _run_class_check(self, "builder", check)

    def test_output_contract(self) -> None:
        """dtypes, shapes and offsets."""
        self._check("output_contract")

    def test_shift_alignment(self) -> None:
        """target = input shifted by one."""
        self._check("shift_alignment")

    def test_action_only_labels(self) -> None:
        """Observation positions carry advantage and logprob exactly 0."""
        self._check("action_only_labels")

    def test_token_conservation(self) -> None:
        """Every action token is trained once, in order, with its logprob."""
        self._check("token_conservation")

    def test_prefix_merges(self) -> None:
        """Merges exactly where the observation extends the running sequence."""
        self._check("prefix_merges")

    def test_drops_counted(self) -> None:
        """Nothing dropped without a count."""
        self._check("drops_counted")

    def test_flags_justified(self) -> None:
        """No problem code on a trajectory without a problem; status 0 emits all its datums."""
        self._check("flags_justified")

    def test_flagged_by_mode(self) -> None:
        """A flagged trajectory emits nothing (reference) or exactly its problem-free segments (robust)."""
        self._check("flagged_by_mode")

    def test_status_counts(self) -> None:
        """The report's per-reason counts are the histogram of status_B."""
        self._check("status_counts")
