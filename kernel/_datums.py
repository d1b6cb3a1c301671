"""Token-level training datums for a whole batch of trajectories: packed, vectorized and exact.

A trajectory is a list of transitions (observation tokens, action tokens, the sampler's logprob of each
action token) with one scalar advantage. Datum construction follows tinker-cookbook's
``trajectory_to_data`` exactly: a running sequence x grows while it (previous actions included) is a
prefix of the next observation; otherwise x is emitted as one datum and starts again. Each datum is
shifted by one token (input = x[:-1], target = x[1:], labels sliced [1:]).

The whole batch is handled at once. Because x after transition j always equals obⱼ ++ acⱼ (the prefix
test guarantees it), the merge decision of every transition is independent of the others and is made by
numpy comparisons over the batch; a datum's tokens are those of its last transition; its labels are
runs of (observation delta, action) per transition. No Python code runs per token: runs are copied by
one slice each when they are long (at memcpy speed, O(runs) Python) and by fancy indexing when short.

Shape suffixes (README's table): ``_B`` trajectories of the batch, ``_N`` transitions (all trajectories,
trajectory-major), ``_D`` datums, ``_S`` segments (would-be datums), ``_R`` runs of tokens; ``_N1`` /
``_D1`` offsets of length N + 1 / D + 1. Flat token arrays carry no suffix: their offsets say how they
split.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._checks import (
    as_bool_array,
    as_float_array,
    as_id_array,
    as_int_array,
    check_bool,
    check_choice,
    check_int,
    check_same_length,
)
from kernel._provenance import DatumSpans, SpanTable, datum_spans

__all__ = [
    "DATUM_MODES",
    "DATUM_STATUS",
    "DatumBatch",
    "DatumMode",
    "DatumReport",
    "DatumResult",
    "DatumSpans",
    "PaddedDatums",
    "SpanTable",
    "Trajectories",
    "build_datums",
    "pad_datums",
    "trajectories_from_lists",
]

DatumMode: TypeAlias = Literal["reference", "robust"]
"""``reference``: a trajectory with any problem gives no datum; ``robust``: only the bad segment is lost."""
DATUM_MODES: Final[tuple[DatumMode, ...]] = get_args(DatumMode)
"""The accepted values of ``build_datums(..., mode=...)``."""

DATUM_STATUS: Final[tuple[str, ...]] = (
    "ok",
    "short_segment",
    "logprob_count_mismatch",
    "missing_logprobs",
    "not_trainable",
    "value_out_of_range",
)
"""Reason codes of ``DatumResult.status_B`` (the index is the code).

``short_segment``: a segment of exactly one token (the reference's ValueError "need at least 2 tokens for
input/target split"); ``logprob_count_mismatch``: a transition's logprob count differs from its action
length (the reference's bare AssertionError); ``missing_logprobs``: a transition without logprobs (the
reference's ValueError "Logprobs are not available"); ``not_trainable``: excluded by ``where``;
``value_out_of_range``: a logprob or advantage that is NaN or ±inf, or finite but beyond float32's range,
which would become ±inf in the float32 datum (the reference sends the NaN or inf, which poisons the
step's gradients).
"""

_OK, _SHORT, _MISMATCH, _MISSING, _NOT_TRAINABLE, _OUT_OF_RANGE = range(6)
_INT64_MIN: Final = int(np.iinfo(np.int64).min)
_INT64_MAX: Final = int(np.iinfo(np.int64).max)

# Gathering runs by Python slices costs ~0.3 µs a run and copies at memcpy speed; fancy indexing costs
# a few ns a token. Slices win once runs are longer than about this many tokens on average.
_SLICE_MIN_MEAN_RUN = 48

Int64Array = npt.NDArray[np.int64]
Float32Array = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]


class Trajectories(NamedTuple):
    """A batch of trajectories as packed flat arrays (build with :func:`trajectories_from_lists`).

    Transition n of the batch has observation ``ob_tokens[ob_offsets_N1[n]:ob_offsets_N1[n+1]]``, action
    ``ac_tokens[ac_offsets_N1[n]:...]``, sampler logprobs ``logprobs[logprob_offsets_N1[n]:...]`` (only
    meaningful where ``has_logprobs_N[n]``; the count should equal the action length) and belongs to
    trajectory ``traj_ids_N[n]``. Transitions are trajectory-major and in order: ``traj_ids_N`` is
    non-decreasing; a trajectory id with no transition is an empty trajectory.

    Attributes:
        ob_tokens: [Σ obs] int, observation tokens of all transitions (any integer dtype: int32 ids are
            read as they are, and the datums hold them as int64).
        ob_offsets_N1: [N+1] int, offsets into ``ob_tokens``.
        ac_tokens: [Σ act] int, action tokens of all transitions.
        ac_offsets_N1: [N+1] int, offsets into ``ac_tokens``.
        logprobs: [Σ lp] float, sampler logprobs of the action tokens.
        logprob_offsets_N1: [N+1] int, offsets into ``logprobs``.
        has_logprobs_N: [N] bool, False where the sampler returned no logprobs.
        traj_ids_N: [N] int in [0, B), non-decreasing.
        advantages_B: [B] float, one scalar advantage per trajectory.
    """

    ob_tokens: npt.NDArray[np.integer[Any]]
    ob_offsets_N1: Int64Array
    ac_tokens: npt.NDArray[np.integer[Any]]
    ac_offsets_N1: Int64Array
    logprobs: npt.NDArray[np.floating[Any]]
    logprob_offsets_N1: Int64Array
    has_logprobs_N: BoolArray
    traj_ids_N: Int64Array
    advantages_B: npt.NDArray[np.floating[Any]]


class DatumBatch(NamedTuple):
    """Training datums as packed flat arrays; datum d is positions ``offsets_D1[d]:offsets_D1[d+1]``.

    Position t of a datum built from the sequence x (length L, T = L − 1 positions) holds
    ``input_tokens = x[t]``, ``target_tokens = x[t+1]`` and the labels of x[t+1]: the sampler logprob,
    the trajectory advantage and ``mask = True`` where x[t+1] is an action token; 0, 0 and False where it
    is an observation token. ``advantages`` is exactly 0 wherever ``mask`` is False.

    Attributes:
        input_tokens: [ΣT] int64.
        target_tokens: [ΣT] int64.
        logprobs: [ΣT] float32, sampler logprob of the target token (0 on observation positions).
        advantages: [ΣT] float32, trajectory advantage on trained positions, else exactly 0.
        mask: [ΣT] bool, True on the positions whose target is a trained action token.
        offsets_D1: [D+1] int64, datum offsets.
        traj_ids_D: [D] int64, the trajectory each datum comes from.
    """

    input_tokens: Int64Array
    target_tokens: Int64Array
    logprobs: Float32Array
    advantages: Float32Array
    mask: BoolArray
    offsets_D1: Int64Array
    traj_ids_D: Int64Array

    @property
    def num_datums(self) -> int:
        """D, the number of datums."""
        return int(self.offsets_D1.shape[0]) - 1

    @property
    def lengths_D(self) -> Int64Array:
        """[D] positions per datum (sequence length − 1)."""
        return np.diff(self.offsets_D1)


class PaddedDatums(NamedTuple):
    """The [D, T] view of a :class:`DatumBatch`: rows padded on the right to a common length T.

    Attributes:
        input_tokens_D_T: [D, T] int64, ``pad_token`` past each row's length.
        target_tokens_D_T: [D, T] int64, ``pad_token`` past each row's length.
        logprobs_D_T: [D, T] float32, 0 on padding.
        advantages_D_T: [D, T] float32, exactly 0 on padding.
        mask_D_T: [D, T] bool, False on padding.
        lengths_D: [D] int64, valid positions per row.
    """

    input_tokens_D_T: Int64Array
    target_tokens_D_T: Int64Array
    logprobs_D_T: Float32Array
    advantages_D_T: Float32Array
    mask_D_T: BoolArray
    lengths_D: Int64Array


class DatumReport(NamedTuple):
    """What :func:`build_datums` did, counted per reason.

    Attributes:
        trajectories: B, trajectories in the input.
        transitions: N, transitions in the input.
        datums: D, datums emitted.
        tokens: ΣT, positions emitted.
        action_tokens: positions with ``mask`` True.
        ok: trajectories whose status is ``ok``.
        short_segment: trajectories whose first problem is a one-token segment.
        logprob_count_mismatch: trajectories whose first problem is a logprob count ≠ action length.
        missing_logprobs: trajectories whose first problem is a transition without logprobs.
        not_trainable: trajectories skipped because ``where`` is False.
        value_out_of_range: trajectories whose first problem is a logprob or advantage that is not a
            finite float32 (NaN, ±inf, or beyond float32's range).
        segments_dropped: would-be datums (segments with ≥ 1 token) lost to one of the four problems:
            every segment of a failed trajectory in ``reference`` mode, only the bad ones in ``robust``.
        parse_failed: emitted action tokens masked out because their transition failed to parse.
        zero_advantage: datums dropped by ``drop_zero_advantage``.
    """

    trajectories: int
    transitions: int
    datums: int
    tokens: int
    action_tokens: int
    ok: int
    short_segment: int
    logprob_count_mismatch: int
    missing_logprobs: int
    not_trainable: int
    value_out_of_range: int
    segments_dropped: int
    parse_failed: int
    zero_advantage: int


class DatumResult(NamedTuple):
    """Result of :func:`build_datums`.

    Attributes:
        datums: the emitted datums.
        status_B: [B] int8, per trajectory the code (index into ``DATUM_STATUS``) of its first problem in
            the reference's processing order, 0 when it has none.
        report: counts per reason.
        spans: the datums' provenance spans, when ``build_datums`` was given ``sequence_ids_N``.
    """

    datums: DatumBatch
    status_B: npt.NDArray[np.int8]
    report: DatumReport
    spans: DatumSpans | None = None


def trajectories_from_lists(
    transitions_B: Sequence[Sequence[tuple[Sequence[int], Sequence[int], Sequence[float] | None]]],
    advantages_B: npt.ArrayLike,
) -> Trajectories:
    """Packs Python lists into :class:`Trajectories` (a convenience; build the arrays directly for speed).

    Args:
        transitions_B: per trajectory, its transitions as ``(ob_tokens, ac_tokens, logprobs)`` where
            ``logprobs`` is a sequence of floats (one per action token) or None when unavailable.
        advantages_B: [B] float, one advantage per trajectory.

    Returns:
        The packed batch; logprobs keep float64.

    Raises:
        ValueError: if ``advantages_B`` does not have one value per trajectory, or a token id does not
            fit int64.
        TypeError: a token id that is not an integer (1.9 is never truncated to 1), or a logprob or
            advantage that is not a real number.

    Examples:
        >>> t = trajectories_from_lists([[([1, 2], [3], [-0.5])], []], [1.0, 2.0])
        >>> t.ob_offsets_N1.tolist(), t.traj_ids_N.tolist(), t.advantages_B.tolist()
        ([0, 2], [0], [1.0, 2.0])
    """
    adv = as_float_array(advantages_B, "advantages_B")
    if adv.shape[0] != len(transitions_B):
        raise ValueError(
            f"advantages_B must have one value per trajectory ({len(transitions_B)}), got {adv.shape[0]}"
        )
    flat = [tr for traj in transitions_B for tr in traj]
    if not all(isinstance(tr, tuple | list) and len(tr) == 3 for tr in flat):
        b, k, tr = next(
            (b, k, tr)
            for b, traj in enumerate(transitions_B)
            for k, tr in enumerate(traj)
            if not (isinstance(tr, tuple | list) and len(tr) == 3)
        )
        raise ValueError(
            f"transitions_B[{b}][{k}] must be an (ob_tokens, ac_tokens, logprobs) triple, got {tr!r}"
        )
    counts_B = np.fromiter((len(traj) for traj in transitions_B), np.int64, len(transitions_B))
    obs = [tr[0] for tr in flat]
    acs = [tr[1] for tr in flat]
    lps = [tr[2] if tr[2] is not None else _NO_LOGPROBS for tr in flat]
    return Trajectories(
        ob_tokens=_joined_ids(obs, "transitions_B observation tokens"),
        ob_offsets_N1=_offsets(len(x) for x in obs),
        ac_tokens=_joined_ids(acs, "transitions_B action tokens"),
        ac_offsets_N1=_offsets(len(x) for x in acs),
        logprobs=_joined_floats(lps, "transitions_B logprobs"),
        logprob_offsets_N1=_offsets(len(x) for x in lps),
        has_logprobs_N=np.fromiter((tr[2] is not None for tr in flat), np.bool_, len(flat)),
        traj_ids_N=np.repeat(np.arange(len(transitions_B), dtype=np.int64), counts_B),
        advantages_B=adv,
    )


_NO_LOGPROBS: Final = np.zeros(0, np.float64)
"""The logprobs of a transition without any (read-only use: joined, never written)."""


def _joined_ids(parts: Sequence[Sequence[int]], name: str) -> npt.NDArray[np.integer[Any]]:
    """The id sequences ``parts`` end to end; arrays (anything with ``__array__``) are joined as arrays,
    without a Python int per id, in their common integer dtype (int32 ids stay int32)."""
    if parts and all(hasattr(p, "__array__") for p in parts):
        return as_id_array(np.concatenate([np.asarray(p) for p in parts]), name)
    return as_int_array(list(chain.from_iterable(parts)), name)


def _joined_floats(parts: Sequence[Sequence[float] | npt.NDArray[Any]], name: str) -> npt.NDArray[np.float64]:
    """The float sequences ``parts`` end to end in float64 (arrays joined as arrays)."""
    if parts and all(hasattr(p, "__array__") for p in parts):
        return as_float_array(np.concatenate([np.asarray(p) for p in parts]), name).astype(np.float64)
    return as_float_array(list(chain.from_iterable(parts)), name).astype(np.float64)


def build_datums(
    trajectories: Trajectories,
    *,
    mode: DatumMode = "reference",
    where: npt.ArrayLike | None = None,
    parse_failed_N: npt.ArrayLike | None = None,
    ac_weights: npt.ArrayLike | None = None,
    drop_zero_advantage: bool = False,
    sequence_ids_N: npt.ArrayLike | None = None,
    ac_advantages: npt.ArrayLike | None = None,
) -> DatumResult:
    """Builds the token-level training datums of a whole batch of trajectories.

    Per trajectory with advantage A, the running sequence x starts empty; transition (ob, ac, lp) appends
    δ = ob[len(x):] when x is a prefix of ob (x includes the earlier actions), else x is emitted and
    δ = ob. Then x ← x ++ δ ++ ac, with labels (lp, adv, mask) = (0, 0, 0) on δ and (lp, A·w, 1) on ac,
    where w is the action token's weight (``ac_weights``, default 1).
    A datum is input = x[:-1], target = x[1:], labels[1:]; every such segment of ≥ 2 tokens is a datum,
    an empty one is skipped, a one-token one is a ``short_segment`` problem.

    Problems are detected per segment in the reference's order (a transition without logprobs fails as
    it is reached; a segment's length and logprob counts are checked when it is emitted) and the first
    one gives the trajectory's status. ``reference`` mode drops every datum of a trajectory with a
    problem, as the reference's exception does; ``robust`` mode drops only the segments that have one.

    Differences from the reference, all on inputs it rejects or mis-handles: its logprob check compares
    summed lengths per datum, so two mismatches that cancel slip through with shifted logprobs; here
    every transition is checked. Its advantages of a datum with no action token are int64 zeros (a
    ``torch.tensor`` of Python ints); here they are always float32.

    Args:
        trajectories: the packed batch (B trajectories, N transitions).
        mode: one of ``DATUM_MODES``.
        where: [B] bool, trajectories to train on; the others give no datum (status ``not_trainable``).
            Default: all.
        parse_failed_N: [N] bool, transitions whose response failed to parse: their action tokens stay in
            the sequence but get mask False and advantage 0 (their logprobs are kept). Default: none.
        drop_zero_advantage: drop datums with no nonzero advantage (advantage 0, or no trained token).
        sequence_ids_N: [N] int, the sampled sequence of each transition's action (an index into the
            caller's sequence ids, e.g. the SDK's ``SampledSequence.sequence_id``), −1 for none: then the
            result carries the datums' provenance spans (:mod:`kernel._provenance`, REFERENCE §11).
        ac_advantages: [A] float, each action token's own advantage (it follows ``ac_tokens``), in
            place of the trajectory's A·w (``advantages_B`` then play no part; not with ``ac_weights``):
            per-step and per-token credit, rounded once to float32.

    Returns:
        ``DatumResult(datums, status_B, report, spans)``.

    Raises:
        ValueError: on malformed offsets, trajectory ids out of order or range, mismatched lengths or an
            unknown mode.
        TypeError: on arrays of the wrong dtype.

    References:
        tinker-cookbook ``rl/data_processing.py::trajectory_to_data``.

    Examples:
        Two turns where the second observation extends the first turn merge into one datum:

        >>> turns = [([1, 2], [3], [-0.5]), ([1, 2, 3, 4], [5, 6], [-1.0, -2.0])]
        >>> t = trajectories_from_lists([turns], [0.5])
        >>> r = build_datums(t)
        >>> r.datums.input_tokens.tolist(), r.datums.target_tokens.tolist()
        ([1, 2, 3, 4, 5], [2, 3, 4, 5, 6])
        >>> r.datums.advantages.tolist(), r.datums.mask.tolist()
        ([0.0, 0.5, 0.0, 0.5, 0.5], [False, True, False, True, True])
        >>> r.datums.logprobs.tolist(), r.datums.offsets_D1.tolist()
        ([0.0, -0.5, 0.0, -1.0, -2.0], [0, 5])

        Credit only the last action token (``ac_weights`` follows ``ac_tokens`` = [3, 5, 6]):

        >>> build_datums(t, ac_weights=[0.0, 0.0, 1.0]).datums.advantages.tolist()
        [0.0, 0.0, 0.0, 0.0, 0.5]

        Each action token's own advantage (per-step or per-token credit):

        >>> build_datums(t, ac_advantages=[0.5, -1.0, 2.0]).datums.advantages.tolist()
        [0.0, 0.5, 0.0, -1.0, 2.0]

        Provenance, both turns sampled as sequences 0 and 1: the target side starts one position in.

        >>> q = build_datums(t, sequence_ids_N=[0, 1]).spans.loss_fn_inputs
        >>> q.sequence_Q.tolist(), q.sampled_Q.tolist(), q.offset_Q.tolist(), q.length_Q.tolist()
        ([0, 0, 1, 1], [False, True, False, True], [1, 0, 3, 0], [1, 1, 1, 2])
    """
    check_choice(mode, "mode", DATUM_MODES)
    drop_zero_advantage = check_bool(drop_zero_advantage, "drop_zero_advantage")
    t = _checked(trajectories)
    num_b = int(t.advantages_B.shape[0])
    num_n = int(t.traj_ids_N.shape[0])
    trainable_B = np.ones(num_b, np.bool_) if where is None else as_bool_array(where, "where")
    failed_N = (
        np.zeros(num_n, np.bool_)
        if parse_failed_N is None
        else as_bool_array(parse_failed_N, "parse_failed_N")
    )
    check_same_length(where=trainable_B, advantages_B=t.advantages_B)
    check_same_length(parse_failed_N=failed_N, traj_ids_N=t.traj_ids_N)
    sequence_N = None
    if sequence_ids_N is not None:
        sequence_N = as_int_array(sequence_ids_N, "sequence_ids_N")
        check_same_length(sequence_ids_N=sequence_N, traj_ids_N=t.traj_ids_N)
        if sequence_N.size and int(sequence_N.min()) < -1:
            raise ValueError(f"sequence_ids_N must be >= -1 (-1: no sequence), got {int(sequence_N.min())}")
    weights_A: Float32Array | None = None
    if ac_weights is not None:
        given = _unit_interval(as_float_array(ac_weights, "ac_weights"), "ac_weights")
        check_same_length(ac_weights=given, ac_tokens=t.ac_tokens)
        weights_A = given.astype(np.float32)
    if ac_advantages is not None:  # per-token advantages: A = 1 per trajectory, the value as its weight
        if ac_weights is not None:
            raise ValueError("build_datums takes ac_weights or ac_advantages, not both")
        per_token = as_float_array(ac_advantages, "ac_advantages")
        check_same_length(ac_advantages=per_token, ac_tokens=t.ac_tokens)
        with np.errstate(over="ignore"):  # beyond float32: refused below (value_out_of_range)
            weights_A = per_token.astype(np.float32)
        bad = np.zeros(per_token.shape[0] + 1, np.int64)
        np.cumsum(_overflows_float32(per_token), out=bad[1:])
        token_overflow_N = bad[t.ac_offsets_N1[1:]] > bad[t.ac_offsets_N1[:-1]]
        t = t._replace(advantages_B=np.ones_like(t.advantages_B))

    ob_len = np.diff(t.ob_offsets_N1)
    ac_len = np.diff(t.ac_offsets_N1)
    lp_len = np.diff(t.logprob_offsets_N1)

    # --- segments: the merge decision of every transition at once ---------------------------------------
    first_N = np.ones(num_n, np.bool_)
    first_N[1:] = t.traj_ids_N[1:] != t.traj_ids_N[:-1]
    starts_N = first_N | ~_extends_previous(t, ob_len, ac_len, first_N)
    seg_start_S = np.flatnonzero(starts_N)
    seg_last_S = np.append(seg_start_S[1:], num_n)[: seg_start_S.size] - 1
    seg_of_N = np.cumsum(starts_N) - 1
    traj_S = t.traj_ids_N[seg_start_S]
    seq_len_S = ob_len[seg_last_S] + ac_len[seg_last_S]

    # --- problems, per segment in the reference's order: missing logprobs, then short, then mismatch ----
    missing_S = _segment_any(~t.has_logprobs_N, seg_start_S)
    mismatch_S = _segment_any(t.has_logprobs_N & (lp_len != ac_len), seg_start_S) & (seq_len_S > 0)
    overflow_N = _overflows_float32_N(t)
    if ac_advantages is not None:
        overflow_N = overflow_N | token_overflow_N
    overflow_S = _segment_any(overflow_N, seg_start_S) | _overflows_float32(t.advantages_B)[traj_S]
    overflow_S &= seq_len_S > 0
    code_S = np.select(
        [missing_S, seq_len_S == 1, mismatch_S, overflow_S], [_MISSING, _SHORT, _MISMATCH, _OUT_OF_RANGE], _OK
    ).astype(np.int8)
    status_B = np.zeros(num_b, np.int8)
    bad = np.flatnonzero(code_S)
    if bad.size:
        traj_bad, first_bad = np.unique(traj_S[bad], return_index=True)
        status_B[traj_bad] = code_S[bad[first_bad]]
    status_B[~trainable_B] = _NOT_TRAINABLE

    if mode == "reference":
        keep_S = status_B[traj_S] == _OK
        lost_S = (status_B[traj_S] != _OK) & (status_B[traj_S] != _NOT_TRAINABLE)
    else:
        keep_S = (code_S == _OK) & trainable_B[traj_S]
        lost_S = (code_S != _OK) & trainable_B[traj_S]
    keep_S &= seq_len_S >= 2
    lost_S &= seq_len_S >= 1

    # --- label runs per transition: (observation delta δ, action); x[0] is never a label ----------------
    prev_end_N = np.zeros(num_n, np.int64)
    prev_end_N[1:] = ob_len[:-1] + ac_len[:-1]
    before_N = np.where(starts_N, 0, prev_end_N)  # len(x) before the transition's δ
    delta_N = ob_len - before_N
    x0_in_delta_N = (before_N == 0) & (delta_N > 0)
    x0_in_ac_N = (before_N == 0) & (delta_N == 0) & (ac_len > 0)
    delta_lab_N = delta_N - x0_in_delta_N
    ac_lab_N = ac_len - x0_in_ac_N
    trained_N = ~failed_N

    with np.errstate(over="ignore"):  # an overflowing advantage is refused above (value_out_of_range)
        adv32_B = t.advantages_B.astype(np.float32)
    if weights_A is None:
        credited_N = np.where(adv32_B[t.traj_ids_N] != 0, ac_lab_N, 0)
    else:  # the action labels whose advantage A·w is nonzero in float32
        with np.errstate(invalid="ignore"):  # inf·0 of a refused (out-of-range) advantage
            nonzero_A = (np.repeat(adv32_B[t.traj_ids_N], ac_len) * weights_A) != 0
        credited_N = _count_in_runs(nonzero_A, t.ac_offsets_N1, x0_in_ac_N)
    n_credited_S = np.bincount(
        seg_of_N, weights=np.where(trained_N, credited_N, 0), minlength=seg_start_S.size
    )
    zero_S = keep_S & (n_credited_S == 0)
    dropped_zero = 0
    if drop_zero_advantage:
        dropped_zero = int(np.count_nonzero(zero_S))
        keep_S &= ~zero_S

    kept_S = np.flatnonzero(keep_S)
    kept_N = np.flatnonzero(keep_S[seg_of_N])
    datums = _assemble(
        t,
        seg_count_D=seg_last_S[kept_S] - seg_start_S[kept_S] + 1,
        last_D=seg_last_S[kept_S],
        traj_D=traj_S[kept_S],
        kept_N=kept_N,
        delta_lab_N=delta_lab_N,
        ac_lab_N=ac_lab_N,
        x0_in_ac_N=x0_in_ac_N,
        trained_N=trained_N,
        adv32_B=adv32_B,
        weights_A=weights_A,
    )

    spans = None
    if sequence_N is not None:
        datum_of_S = np.cumsum(keep_S) - 1
        spans = datum_spans(
            datum_of_S[seg_of_N[kept_N]],
            sequence_N[kept_N],
            before_N[kept_N],
            delta_N[kept_N],
            ac_len[kept_N],
            datums.num_datums,
        )

    counts = np.bincount(status_B, minlength=len(DATUM_STATUS))
    report = DatumReport(
        trajectories=num_b,
        transitions=num_n,
        datums=datums.num_datums,
        tokens=int(datums.offsets_D1[-1]),
        action_tokens=int(np.count_nonzero(datums.mask)),
        ok=int(counts[_OK]),
        short_segment=int(counts[_SHORT]),
        logprob_count_mismatch=int(counts[_MISMATCH]),
        missing_logprobs=int(counts[_MISSING]),
        not_trainable=int(counts[_NOT_TRAINABLE]),
        value_out_of_range=int(counts[_OUT_OF_RANGE]),
        segments_dropped=int(np.count_nonzero(lost_S)),
        parse_failed=int(np.sum(np.where(failed_N[kept_N], ac_lab_N[kept_N], 0))),
        zero_advantage=dropped_zero,
    )
    return DatumResult(datums=datums, status_B=status_B, report=report, spans=spans)


def pad_datums(batch: DatumBatch, *, length: int | None = None, pad_token: int = 0) -> PaddedDatums:
    """The [D, T] view of packed datums: row d holds datum d's positions, then padding.

    Args:
        batch: packed datums.
        length: T, at least the longest datum; default the longest datum (0 when there is none).
        pad_token: token id written to padding positions of the token arrays.

    Returns:
        ``PaddedDatums``; padding has logprob 0, advantage exactly 0 and mask False.

    Raises:
        ValueError: if ``length`` is shorter than the longest datum, or ``pad_token`` does not fit int64.
        TypeError: if ``length`` or ``pad_token`` is not an integer.

    Examples:
        >>> t = trajectories_from_lists([[([1, 2], [3], [-0.5])], [([4], [5, 6], [-1.0, -2.0])]], [1.0, 2.0])
        >>> p = pad_datums(build_datums(t).datums)
        >>> p.target_tokens_D_T.tolist(), p.advantages_D_T.tolist()
        ([[2, 3], [5, 6]], [[0.0, 1.0], [2.0, 2.0]])
        >>> pad_datums(build_datums(t).datums, length=3).mask_D_T.tolist()
        [[False, True, False], [True, True, False]]
    """
    if not isinstance(batch, DatumBatch):
        raise TypeError(f"batch must be a DatumBatch (build_datums(...).datums), got {type(batch).__name__}")
    batch = checked_batch(batch)
    pad = check_int(pad_token, "pad_token", low=_INT64_MIN, high=_INT64_MAX)
    lengths_D = batch.lengths_D
    longest = int(lengths_D.max()) if lengths_D.size else 0
    width = longest if length is None else check_int(length, "length", low=0)
    if width < longest:
        raise ValueError(f"length must be at least the longest datum ({longest}), got {width}")
    valid_D_T = np.arange(width) < lengths_D[:, None]

    def spread(flat: npt.NDArray[Any], fill: Any) -> npt.NDArray[Any]:
        out = np.full(valid_D_T.shape, fill, flat.dtype)
        out[valid_D_T] = flat
        return out

    return PaddedDatums(
        input_tokens_D_T=spread(batch.input_tokens, pad),
        target_tokens_D_T=spread(batch.target_tokens, pad),
        logprobs_D_T=spread(batch.logprobs, 0),
        advantages_D_T=spread(batch.advantages, 0),
        mask_D_T=spread(batch.mask, False),
        lengths_D=lengths_D,
    )


# ---------------------------------------------------------------------------------------------------------
# Internals


def checked_batch(batch: DatumBatch) -> DatumBatch:
    """``batch`` with numpy arrays, checked to be one datum batch: five per-token arrays of one length and
    offsets rising from 0 to it (a batch built by hand or edited may not be); raises naming the field.

    Examples:
        >>> b = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])).datums
        >>> checked_batch(b).offsets_D1.tolist()
        [0, 2]
        >>> checked_batch(b._replace(mask=b.mask[:1]))
        Traceback (most recent call last):
        ValueError: batch.mask must have one value per input token (2), got 1
    """
    arrays = {name: np.asarray(getattr(batch, name)) for name in DatumBatch._fields}
    for name, a in arrays.items():
        if a.ndim != 1:
            raise ValueError(f"batch.{name} must be one-dimensional, got shape {a.shape}")
    n = arrays["input_tokens"].shape[0]
    for name in ("target_tokens", "logprobs", "advantages", "mask"):
        if arrays[name].shape[0] != n:
            got = arrays[name].shape[0]
            raise ValueError(f"batch.{name} must have one value per input token ({n}), got {got}")
    off = arrays["offsets_D1"]
    if (
        off.dtype.kind not in "iu"
        or off.shape[0] == 0
        or int(off[0]) != 0
        or int(off[-1]) != n
        or bool((np.diff(off) < 0).any())
    ):
        raise ValueError(f"batch.offsets_D1 must be integers rising from 0 to the token count {n}, got {off}")
    num_d, got = off.shape[0] - 1, arrays["traj_ids_D"].shape[0]
    if got != num_d:
        raise ValueError(f"batch.traj_ids_D must have one id per datum ({num_d}), got {got}")
    return DatumBatch(**arrays)


def _offsets(lengths: Any) -> Int64Array:
    lens = np.fromiter(lengths, np.int64)
    out = np.zeros(lens.size + 1, np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def _checked(t: Trajectories) -> Trajectories:
    """Converts and checks every field; raises ValueError / TypeError naming the field."""
    missing = [name for name in Trajectories._fields if not hasattr(t, name)]
    if missing:
        raise TypeError(
            "trajectories must be a Trajectories (see trajectories_from_lists), got "
            f"{type(t).__name__} without {', '.join(missing)}"
        )
    ob = as_id_array(t.ob_tokens, "ob_tokens")  # int32 ids stay int32: the datums are written in int64
    ac = as_id_array(t.ac_tokens, "ac_tokens")
    lp = as_float_array(t.logprobs, "logprobs")
    has = as_bool_array(t.has_logprobs_N, "has_logprobs_N")
    ids = as_int_array(t.traj_ids_N, "traj_ids_N")
    adv = as_float_array(t.advantages_B, "advantages_B")
    num_n = ids.shape[0]
    check_same_length(has_logprobs_N=has, traj_ids_N=ids)
    offsets = []
    for name, arr, flat in (
        ("ob_offsets_N1", t.ob_offsets_N1, ob),
        ("ac_offsets_N1", t.ac_offsets_N1, ac),
        ("logprob_offsets_N1", t.logprob_offsets_N1, lp),
    ):
        off = as_int_array(arr, name)
        if off.shape[0] != num_n + 1:
            raise ValueError(f"{name} must have length N + 1 = {num_n + 1}, got {off.shape[0]}")
        if off[0] != 0 or off[-1] != flat.shape[0] or np.any(np.diff(off) < 0):
            raise ValueError(
                f"{name} must be non-decreasing from 0 to the flat length {flat.shape[0]}, "
                f"got {off[0]} .. {off[-1]}"
            )
        offsets.append(off)
    if num_n and (ids[0] < 0 or ids[-1] >= adv.shape[0] or np.any(np.diff(ids) < 0)):
        raise ValueError(
            f"traj_ids_N must be non-decreasing in [0, B) = [0, {adv.shape[0]}), got {ids[0]} .. {ids[-1]}"
        )
    return Trajectories(ob, offsets[0], ac, offsets[1], lp, offsets[2], has, ids, adv)


def _unit_interval(x: npt.NDArray[np.floating[Any]], name: str) -> npt.NDArray[np.floating[Any]]:
    bad = np.flatnonzero(~((x >= 0) & (x <= 1)))  # NaN fails both
    if bad.size:
        raise ValueError(f"{name} must lie in [0, 1], got {x[bad[0]]} at index {bad[0]}")
    return x


def _count_in_runs(flag: BoolArray, offsets_N1: Int64Array, skip_N: BoolArray) -> Int64Array:
    """[N] the True entries of ``flag[offsets_N1[n] + skip_N[n] : offsets_N1[n + 1]]``."""
    nz = np.zeros(flag.shape[0] + 1, np.int64)
    np.cumsum(flag, out=nz[1:])
    start = np.minimum(offsets_N1[:-1] + skip_N, offsets_N1[1:])
    return nz[offsets_N1[1:]] - nz[start]


def _overflows_float32(x: npt.NDArray[np.floating[Any]]) -> BoolArray:
    """Where a value is not a finite float32: NaN, ±inf, or finite but beyond float32's range."""
    if x.dtype.itemsize <= 4:
        narrow: BoolArray = ~np.isfinite(x)
        return narrow
    with np.errstate(over="ignore", invalid="ignore"):
        out: BoolArray = ~np.isfinite(x.astype(np.float32))
    return out


def _overflows_float32_N(t: Trajectories) -> BoolArray:
    """[N] whether a transition's sampler logprobs hold a value that is not a finite float32."""
    bad = _overflows_float32(t.logprobs)
    if not bad.any():
        return np.zeros(t.traj_ids_N.shape[0], np.bool_)
    seen = np.concatenate([[0], np.cumsum(bad)])
    out: BoolArray = (seen[t.logprob_offsets_N1[1:]] - seen[t.logprob_offsets_N1[:-1]] > 0) & t.has_logprobs_N
    return out


def _segment_any(flag_N: BoolArray, seg_start_S: Int64Array) -> BoolArray:
    """[S] whether any transition of each segment has ``flag_N`` set."""
    if seg_start_S.size == 0:
        return np.zeros(0, np.bool_)
    return np.add.reduceat(flag_N.astype(np.int64), seg_start_S) > 0


def _extends_previous(
    t: Trajectories, ob_len: Int64Array, ac_len: Int64Array, first_N: BoolArray
) -> BoolArray:
    """[N] whether obᵢ₋₁ ++ acᵢ₋₁ (the running sequence after transition i − 1) is a prefix of obᵢ."""
    num_n = first_N.shape[0]
    out = np.zeros(num_n, np.bool_)
    if num_n < 2:
        return out
    ob_off, ac_off = t.ob_offsets_N1, t.ac_offsets_N1
    cand = np.flatnonzero(~first_N[1:] & (ob_len[1:] >= ob_len[:-1] + ac_len[:-1])) + 1
    # A cheap exact filter first: probe the first and last token of the previous observation and action.
    for which, probe in ((0, "first"), (0, "last"), (1, "first"), (1, "last")):
        n = (ob_len if which == 0 else ac_len)[cand - 1]
        k = np.zeros_like(n) if probe == "first" else np.maximum(n - 1, 0)
        at = ob_off[cand] + (ob_len[cand - 1] if which else 0) + k
        src, src_off = (t.ob_tokens, ob_off) if which == 0 else (t.ac_tokens, ac_off)
        has = np.flatnonzero(n > 0)
        same = t.ob_tokens[at[has]] == src[src_off[cand[has] - 1] + k[has]]
        keep = np.ones(cand.size, np.bool_)
        keep[has[~same]] = False
        cand = cand[keep]
    if cand.size == 0:
        return out
    # Full compare of the survivors, run by run: obᵢ[: len(ob_{i-1})] with ob_{i-1}, then the next
    # len(ac_{i-1}) tokens of obᵢ with ac_{i-1}.
    p_ob, p_ac = ob_len[cand - 1], ac_len[cand - 1]
    lengths = _interleave(p_ob, p_ac)
    differs_R = _runs_differ(
        t.ob_tokens,
        _interleave(ob_off[cand], ob_off[cand] + p_ob),
        (t.ob_tokens, t.ac_tokens),
        np.tile(np.array([0, 1], np.int64), cand.size),
        _interleave(ob_off[cand - 1], ac_off[cand - 1]),
        lengths,
    )
    out[cand[~(differs_R[0::2] | differs_R[1::2])]] = True
    return out


def _interleave(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """[a₀, b₀, a₁, b₁, ...]."""
    out = np.empty(2 * a.shape[0], np.result_type(a, b))
    out[0::2] = a
    out[1::2] = b
    return out


def _runs_index(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Flat indices of the concatenated ranges [startsₖ, startsₖ + lengthsₖ)."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if ends.size else 0)


def _use_slices(lengths: Int64Array) -> bool:
    """Whether runs are long enough that a Python slice per run beats fancy indexing."""
    num_runs = int(lengths.shape[0])
    return num_runs > 0 and int(lengths.sum()) >= _SLICE_MIN_MEAN_RUN * num_runs


def _gather_runs(
    sources: tuple[npt.NDArray[Any], ...],
    source_R: Int64Array,
    starts_R: Int64Array,
    lengths_R: Int64Array,
    out: npt.NDArray[Any],
) -> None:
    """``out[:] =`` the runs ``sources[source_R[k]][starts_R[k] :][: lengths_R[k]]`` concatenated."""
    if out.shape[0] == 0:
        return
    if _use_slices(lengths_R):
        pieces = [
            sources[k][s : s + n]
            for k, s, n in zip(source_R.tolist(), starts_R.tolist(), lengths_R.tolist(), strict=True)
            if n
        ]
        np.concatenate(pieces, out=out)
        return
    base = np.cumsum([0, *(s.shape[0] for s in sources[:-1])])
    # in out's dtype (np.take writes only its own): int32 ids are widened in this copy
    combined = (
        sources[0].astype(out.dtype, copy=False)
        if len(sources) == 1
        else np.concatenate(sources, dtype=out.dtype)
    )
    np.take(combined, _runs_index(starts_R + base[source_R], lengths_R), out=out)


def _runs_differ(
    a: npt.NDArray[Any],
    a_starts: Int64Array,
    sources: tuple[npt.NDArray[Any], ...],
    source_R: Int64Array,
    b_starts: Int64Array,
    lengths: Int64Array,
) -> BoolArray:
    """[R] whether run k of ``a`` differs from run k of ``sources[source_R[k]]`` (same lengths)."""
    if _use_slices(lengths):
        return np.fromiter(
            (
                not (a[i : i + n] == sources[k][j : j + n]).all()
                for i, k, j, n in zip(
                    a_starts.tolist(), source_R.tolist(), b_starts.tolist(), lengths.tolist(), strict=True
                )
            ),
            np.bool_,
            lengths.shape[0],
        )
    total = int(lengths.sum())
    left = np.empty(total, a.dtype)
    right = np.empty(total, np.result_type(*sources))
    _gather_runs((a,), np.zeros_like(source_R), a_starts, lengths, left)
    _gather_runs(sources, source_R, b_starts, lengths, right)
    differs = np.zeros(lengths.shape[0], np.bool_)
    differs[np.searchsorted(np.cumsum(lengths), np.flatnonzero(left != right), side="right")] = True
    return differs


def _scatter_runs(
    dst: npt.NDArray[Any],
    dst_starts: Int64Array,
    src: npt.NDArray[Any],
    src_starts: Int64Array,
    lengths: Int64Array,
) -> None:
    """``dst[dₖ : dₖ + nₖ] = src[sₖ : sₖ + nₖ]`` for every run k (casting to ``dst.dtype``)."""
    if _use_slices(lengths):
        for d, s, n in zip(dst_starts.tolist(), src_starts.tolist(), lengths.tolist(), strict=True):
            dst[d : d + n] = src[s : s + n]
    elif lengths.shape[0]:
        dst[_runs_index(dst_starts, lengths)] = src[_runs_index(src_starts, lengths)]


def _fill_runs(
    dst: npt.NDArray[Any], starts: Int64Array, lengths: Int64Array, values: npt.NDArray[Any]
) -> None:
    """``dst[sₖ : sₖ + nₖ] = valuesₖ`` for every run k."""
    if _use_slices(lengths):
        for s, n, v in zip(starts.tolist(), lengths.tolist(), values.tolist(), strict=True):
            dst[s : s + n] = v
    elif lengths.shape[0]:
        dst[_runs_index(starts, lengths)] = np.repeat(values, lengths)


def _empty_outputs(n: int) -> tuple[Int64Array, Int64Array, Float32Array, Float32Array, BoolArray]:
    """The five [n] output arrays, carved from one allocation.

    One large buffer is faulted in a huge page at a time; five separate arrays of fresh memory cost a
    page fault per 4 KiB, which on virtual machines is slower than the whole build.
    """
    buf = np.empty(25 * n, np.uint8)
    return (
        buf[: 8 * n].view(np.int64),
        buf[8 * n : 16 * n].view(np.int64),
        buf[16 * n : 20 * n].view(np.float32),
        buf[20 * n : 24 * n].view(np.float32),
        buf[24 * n :].view(np.bool_),
    )


def _assemble(
    t: Trajectories,
    *,
    seg_count_D: Int64Array,
    last_D: Int64Array,
    traj_D: Int64Array,
    kept_N: Int64Array,
    delta_lab_N: Int64Array,
    ac_lab_N: Int64Array,
    x0_in_ac_N: BoolArray,
    trained_N: BoolArray,
    adv32_B: Float32Array,
    weights_A: Float32Array | None,
) -> DatumBatch:
    """Packs the kept segments into a :class:`DatumBatch` (all copies by runs, none per token)."""
    num_d = last_D.shape[0]
    o_l, a_l = np.diff(t.ob_offsets_N1)[last_D], np.diff(t.ac_offsets_N1)[last_D]
    offsets_D1 = np.zeros(num_d + 1, np.int64)
    np.cumsum(o_l + a_l - 1, out=offsets_D1[1:])
    input_tokens, target_tokens, logprobs, advantages, mask = _empty_outputs(int(offsets_D1[-1]))

    # Tokens: x = ob_last ++ ac_last; the input is x[:-1]. The target x[1:] is the input shifted by one
    # position, except at each datum's last position, which holds x's last token.
    ob_start, ac_start = t.ob_offsets_N1[last_D], t.ac_offsets_N1[last_D]
    which = np.tile(np.array([0, 1], np.int64), num_d)
    in_lengths = _interleave(np.where(a_l > 0, o_l, o_l - 1), np.maximum(a_l - 1, 0))
    _gather_runs((t.ob_tokens, t.ac_tokens), which, _interleave(ob_start, ac_start), in_lengths, input_tokens)
    target_tokens[:-1] = input_tokens[1:]
    ends = offsets_D1[1:] - 1
    from_ac = np.flatnonzero(a_l > 0)
    from_ob = np.flatnonzero(a_l == 0)
    target_tokens[ends[from_ac]] = t.ac_tokens[ac_start[from_ac] + a_l[from_ac] - 1]
    target_tokens[ends[from_ob]] = t.ob_tokens[ob_start[from_ob] + o_l[from_ob] - 1]

    # Labels: per kept transition a run of δ observation positions (all 0) then its action positions.
    run_len = _interleave(delta_lab_N[kept_N], ac_lab_N[kept_N])
    act_start, act_len = (np.cumsum(run_len) - run_len)[1::2], run_len[1::2]
    logprobs.fill(0)
    advantages.fill(0)
    mask.fill(False)
    _scatter_runs(logprobs, act_start, t.logprobs, t.logprob_offsets_N1[kept_N] + x0_in_ac_N[kept_N], act_len)
    trained = np.flatnonzero(trained_N[kept_N])
    adv_kept = adv32_B[np.repeat(traj_D, seg_count_D)]
    _fill_runs(advantages, act_start[trained], act_len[trained], adv_kept[trained])
    _fill_runs(mask, act_start[trained], act_len[trained], np.ones(trained.shape[0], np.bool_))
    if weights_A is not None:
        weight = np.zeros(advantages.shape[0], np.float32)  # A·w in float32, as the zero count above
        ac_from = (t.ac_offsets_N1[:-1] + x0_in_ac_N)[kept_N]
        _scatter_runs(weight, act_start[trained], weights_A, ac_from[trained], act_len[trained])
        advantages *= weight

    return DatumBatch(
        input_tokens=input_tokens,
        target_tokens=target_tokens,
        logprobs=logprobs,
        advantages=advantages,
        mask=mask,
        offsets_D1=offsets_D1,
        traj_ids_D=traj_D,
    )
