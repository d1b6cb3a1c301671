"""The exact arithmetic of :func:`kernel.grouped_advantages` (``arithmetic="exact"``, ours).

float64 with two-pass variances, each group's sums taken in row order from 0.0, rounded once to the
output dtype. A constant group's mean is its value exactly, so its deviations, σ and advantages are
exactly 0. Two implementations of the same formulas, equal bit for bit wherever both apply
(``tests/test_advantages.py`` compares them at every size):

* :func:`exact_core`, the fast path: in-place buffers, a transposed blocks layout without gathers,
  constant groups found from Σc² = 0 for float32 samples. It declines (returns None) when a group's squared
  deviations could overflow or underflow float64, or its advantages the output dtype.
* :func:`rescaled_core`, the path for extreme magnitudes: every group is first scaled by a power of
  two, 2^−e_g with e_g the exponent of its largest |r|, so that its samples lie in (−1, 1); the
  formulas run on those (scaling by a power of two is exact, so where nothing under- or overflows
  each intermediate is the fast path's times 2^−e_g, bit for bit), and each result is scaled back
  once. A denominator σ + eps, and the batch statistics, are formed in units of the larger of the two
  terms, so no eps or variance floor overflows. An advantage beyond the output dtype's range is
  returned as ±its largest finite value, and one whose nonzero value rounds to 0 stays 0; both are
  flagged per row (``GroupedAdvantages.num_out_of_range``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from kernel._advantages import AdvantageOptions, Singleton

__all__: list[str] = []

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]


class CoreResult(NamedTuple):
    """What a core computes per sample (``_PG``: a row, or a trajectory) and per group (``_P``).

    ``out_of_range_PG`` is None where no sample can be out of range (the fast path).
    """

    advantages_PG: FloatArray
    mean_P: FloatArray
    std_P: FloatArray
    count_P: IntArray
    constant_P: BoolArray
    out_of_range_PG: BoolArray | None


_HUGE_M2 = 2.0**960  # Σc² up to this: |c| ≤ 2^480, and every product below stays finite in float64
_HUGE_M2_F32 = 2.0**250  # float32 output: |c| ≤ 2^125, so n/(n − 1)·c fits float32
_ZERO_EXPONENT = -1100  # the exponent of a group whose samples are all 0: below every float64's
_EPS_NO_MASK = 2.0**-1000  # eps at least this: 1/(σ + eps) and n/(n − 1)/(σ + eps) are finite
_TINY_M2 = 2.0**-960  # a non-constant group's Σc² below this may have lost bits to underflow


def check_singletons(singleton: Singleton, count_P: IntArray) -> None:
    """Raises ValueError under ``singleton="error"`` when a group has exactly one included sample."""
    if singleton == "error" and np.any(count_P == 1):
        groups = np.flatnonzero(count_P == 1)
        raise ValueError(f"singleton='error': groups {groups[:10].tolist()} have exactly one sample")


def exact_core(
    x: FloatArray,
    valid: BoolArray | None,
    seg: Segments,
    p: int,
    options: AdvantageOptions,
    *,
    narrow: bool,
    scratch: bool,
    dtype: Any,
) -> CoreResult | None:
    """float64 estimator on samples ``x`` grouped by ``seg``; None where :func:`rescaled_core` must run.

    Group ``p`` is padding; ``valid`` None: every sample is included, and none is padding. ``narrow``:
    ``x`` is known to hold float32 values; ``scratch``: ``x`` may be overwritten; ``dtype``: the output
    float dtype (the range check depends on it).

    Every advantage is (x − centre_g)·factor_g. On a constant group (all included samples equal) and
    on an empty one x − centre_g is exactly 0, so the advantage is exactly 0 with any finite factor_g;
    a group of one is constant, unless ``singleton="raw"`` (centre 0, factor 1 or 1/(1 + eps)).

    Constant groups are found without a max / min pass when every sample is a float32 value (checked
    unless ``narrow``) and there are fewer than 2²⁹ of them: each partial float64 sum of a constant
    group v, v, … is then k·v exactly (24 + 29 bits), so μ_g = n·v/n = v and every deviation is 0;
    and a group with two distinct float32 values has a deviation of at least 2⁻¹⁵¹, whose square does
    not underflow. So Σ(x − μ_g)² = 0 exactly when the group is constant. Other samples (float64
    rewards, trajectory means) compare the group's max and min, and take the max as μ_g.

    ``x`` may be float32 or float64: ``seg.load`` brings it to float64 in the layout of the
    reductions (rows for :class:`Scatter`, transposed ``[k, p]`` for :class:`Blocks`), and
    ``seg.store`` brings the advantages back to rows (rounded to ``dtype`` where nothing follows).

    Memory: each new buffer costs page faults, so there are two sample-sized float64 buffers (the
    loaded samples, reused for c² and factor_g when they are ours, and c, which becomes A) and a
    few group-sized ones, each reused in place.
    """
    baseline, scale, ddof, eps = options.baseline, options.scale, options.ddof, options.eps
    var_floor, min_std = options.var_floor, options.min_std
    limit = _HUGE_M2_F32 if dtype == np.float32 else _HUGE_M2
    float32_samples = x.shape[0] < 2**29 and (narrow or _all_float32(x))
    y = seg.load(x)  # float64 samples in the layout of the reductions
    reuse = (scratch or y is not x) and not (scale == "batch" and y is x)  # y may be overwritten
    where = None if valid is None else seg.load(valid)
    n = seg.count(where)  # no padding sample is valid, so n[p] = 0
    live = n > 0
    nf = n.astype(np.float64)  # float counts: mixed int/float ufuncs go through a slow casting loop
    scratch_p = np.maximum(nf, 1.0)
    mean = seg.sum(y)  # excluded samples are 0; an empty group's mean stays 0
    mean /= scratch_p
    constant: BoolArray | None = None
    if not float32_samples:
        hi, lo = seg.extremes(y, where)
        constant = hi == lo
        constant &= live
        _assign(mean, constant, hi)  # a constant group's mean is its value, exactly
        del hi, lo
    check_singletons(options.singleton, n[:p])
    ones = np.flatnonzero(n == 1) if options.singleton == "raw" else None
    if ones is not None:  # verl: μ := 0 for a group of one (the reported mean stays its value)
        kept = mean[ones]
        mean[ones] = 0.0
        c = seg.minus(y, mean)
        mean[ones] = kept
    else:
        c = seg.minus(y, mean)
    if where is not None:
        np.copyto(c, 0.0, where=~where)
    work = np.multiply(c, c, out=y if reuse else None)
    std = seg.sum(work)  # Σc², σ below
    if not float(std.max(initial=0.0)) <= limit:  # also false for NaN
        return None
    if ones is not None:
        std[ones] = 0.0  # a group of one is constant; the others have Σc² = 0 exactly already
    if constant is None:
        constant = std == 0
        constant &= live
    elif _tiny(std, constant, live):
        return None
    final = dtype if scale in ("none", "group") and not options.positive_only else np.float64  # A's
    few = n <= ddof  # no degree of freedom left: σ = 0
    np.maximum(np.subtract(nf, ddof, out=scratch_p), 1.0, out=scratch_p)
    std /= scratch_p
    if var_floor > 0:
        np.maximum(std, var_floor, out=std)
    np.sqrt(std, out=std)
    if var_floor > 0 or ddof > 1:  # else Σc² = 0 already where n ≤ ddof
        _assign(std, few, 0.0)
    if baseline == "mean" and scale != "group":
        a = c  # factor_g is 1, or 0 where c is exactly 0 already
    else:
        factor = scratch_p
        if baseline == "leave_one_out":  # n/(n − 1)
            np.maximum(np.subtract(nf, 1.0, out=factor), 1.0, out=factor)
            np.divide(nf, factor, out=factor)
        if scale == "group":
            denom = np.add(std, eps, out=nf)
            if not (eps >= _EPS_NO_MASK and min_std is None and ddof <= 1):
                # Not divided: n ≤ ddof, σ ≤ min_std, σ + eps = 0; nor is a constant group, so that
                # its factor stays finite. (Otherwise every group left undivided has n ≤ 1 or is
                # constant, so c = 0 on its rows, or it is a raw singleton whose factor is set below;
                # and 1/(σ + eps) is finite on every group.)
                skip = denom <= 0
                skip |= few
                skip |= constant
                if min_std is not None:
                    skip |= std <= min_std
                _assign(denom, skip, 1.0)
            if baseline == "leave_one_out":
                factor /= denom
            else:
                np.divide(1.0, denom, out=factor)
        elif baseline != "leave_one_out":
            factor.fill(1.0)
        if ones is not None:
            factor[ones] = 1.0 / (1.0 + eps) if scale == "group" else 1.0
        a = seg.times(c, factor, work, final)
    a = seg.store(a, final)
    if scale == "batch":
        moments = _batch_moments(x.astype(np.float64, copy=False), valid, ddof)
        if moments is None:
            return None
        sd = moments[1]
        a = a / (sd + eps) if sd + eps > 0 else a
    elif scale == "whiten":
        moments = _batch_moments(a, valid, ddof)
        if moments is None:
            return None
        mu, sd = moments
        a = (a - mu) / (sd + eps) if sd > 0 else np.zeros_like(a)
    return CoreResult(a, mean[:p], std[:p], n[:p], constant[:p], None)


def rescaled_core(
    x: FloatArray, valid: BoolArray | None, h: IntArray, p: int, options: AdvantageOptions, dtype: Any
) -> CoreResult:
    """The exact estimator on samples scaled by a power of two per group (see the module docstring).

    Args:
      x: ``[PG]`` float64 samples (excluded ones hold 0).
      valid: ``[PG]`` bool, samples that enter the statistics; None: all (no padding).
      h: ``[PG]`` group ids in ``[0, p]`` (``p``: padding).
      p: the number of groups.
      options: the estimator's options.
      dtype: the output float dtype.

    Returns:
      :class:`CoreResult` in ``dtype``, with the rows whose advantage left the dtype's range flagged.
    """
    baseline, scale, ddof, eps = options.baseline, options.scale, options.ddof, options.eps
    hh = h if valid is None else np.where(valid, h, p)
    ok = hh < p
    n = np.bincount(hh, minlength=p + 1)
    n[p] = 0
    nf = n.astype(np.float64)
    check_singletons(options.singleton, n[:p])
    # y = x·2^−e_g with |y| < 1: exact, but for samples 2^1022 times smaller than their group's largest.
    magnitude = np.zeros(p + 1)
    np.maximum.at(magnitude, hh, np.abs(x))
    e = np.where(magnitude > 0, np.frexp(magnitude)[1], _ZERO_EXPONENT).astype(np.int64)
    e[p] = _ZERO_EXPONENT  # an all-zero group never sets the scale of a batch statistic
    y = np.where(ok, np.ldexp(x, -e[hh]), 0.0)
    hi = np.full(p + 1, -np.inf)
    lo = np.full(p + 1, np.inf)
    np.maximum.at(hi, hh, np.where(ok, y, -np.inf))
    np.minimum.at(lo, hh, np.where(ok, y, np.inf))
    constant = (hi == lo) & (n > 0)
    mean_y = np.where(constant, hi, np.bincount(hh, weights=y, minlength=p + 1) / np.maximum(nf, 1.0))
    raw_single = (n == 1) & (options.singleton == "raw")
    c = np.where(ok, y - np.where(raw_single, 0.0, mean_y)[hh], 0.0)
    m2 = np.where(constant, 0.0, np.bincount(hh, weights=c * c, minlength=p + 1))
    dof = nf - ddof
    sd_y = np.sqrt(m2 / np.maximum(dof, 1.0))  # σ_g·2^−e_g, before the variance floor
    floor_sd = math.sqrt(options.var_floor)
    with np.errstate(over="ignore"):
        std = np.where(dof > 0, np.maximum(np.ldexp(sd_y, e), floor_sd), 0.0)

    # Advantage = ldexp(ldexp(c, pre_g)·factor_g, post_g): c·factor_g in units of 2^post_g.
    factor = nf / np.maximum(nf - 1.0, 1.0) if baseline == "leave_one_out" else np.ones(p + 1)
    pre, post = np.zeros(p + 1, np.int64), e.copy()
    if scale == "group":
        k = np.maximum(e, _exponent(max(floor_sd, eps, options.min_std or 0.0)))  # σ + eps in units of 2^k
        sd_k = np.maximum(np.ldexp(sd_y, e - k), np.ldexp(floor_sd, -k))
        denom = sd_k + np.ldexp(eps, -k)
        divide = (dof > 0) & (denom > 0) & ~constant
        if options.min_std is not None:
            divide &= sd_k > np.ldexp(options.min_std, -k)
        factor = np.where(divide, factor / np.where(divide, denom, 1.0), factor)
        pre = np.where(divide, e - k, 0)
        post = np.where(divide, 0, e)
    factor[raw_single] = 1.0 / (1.0 + eps) if scale == "group" else 1.0
    a_y = np.ldexp(c, pre[hh]) * factor[hh]
    nonzero = a_y != 0
    with np.errstate(over="ignore", under="ignore"):
        if scale in ("none", "group"):
            a = np.ldexp(a_y, post[hh])
        else:
            a = _rescaled_batch(a_y, post[hh], y, e, hh, ok, n, options)
            if scale == "whiten":  # dimensionless and O(1): no underflow to track
                nonzero[:] = False
        out, overflow = _saturate(a, dtype)
        std_out, _ = _saturate(std, dtype)
    out_of_range = ok & (overflow | (nonzero & (out == 0)))
    mean = np.where(n > 0, np.ldexp(mean_y, e), 0.0).astype(dtype)
    return CoreResult(out, mean[:p], std_out[:p], n[:p], constant[:p], out_of_range)


def _rescaled_batch(
    a_y: FloatArray,
    post: IntArray,
    y: FloatArray,
    e: IntArray,
    hh: IntArray,
    ok: BoolArray,
    n: IntArray,
    options: AdvantageOptions,
) -> FloatArray:
    """``scale="batch"`` / ``"whiten"`` on group-stage advantages ``a_y``·2^post (row exponents)."""
    eps, ddof = options.eps, options.ddof
    live = n > 0
    if not live.any():
        return np.zeros_like(a_y)
    if options.scale == "batch":  # A = a/(σ_B + eps), σ_B over the rewards x = y·2^e
        e_b = int(e[live].max())
        moments = _moments(np.ldexp(y, e[hh] - e_b)[ok], ddof)
        assert moments is not None  # samples in (−1, 1): no overflow
        k = max(e_b, _exponent(eps))
        denom = math.ldexp(moments[1], e_b - k) + math.ldexp(eps, -k)
        return np.ldexp(a_y, post - k) / denom if denom > 0 else np.ldexp(a_y, post)
    # whiten: A = (a − μ_a)/(σ_a + eps); |a_y| < 4 without a group division, so a·2^−e_w lies in (−1, 1).
    e_w = int(e[live].max()) + 2
    a_w = np.ldexp(a_y, post - e_w)
    moments = _moments(a_w[ok], ddof)
    assert moments is not None
    mu, sd = moments[0], moments[1]
    if not sd > 0:
        return np.zeros_like(a_y)
    k = max(e_w, _exponent(eps))
    return np.asarray(np.ldexp(a_w - mu, e_w - k) / (math.ldexp(sd, e_w - k) + math.ldexp(eps, -k)))


def _exponent(v: float) -> int:
    """e with v = m·2^e, 0.5 ≤ m < 1; far below every float's for v = 0."""
    return math.frexp(v)[1] if v > 0 else -2100


def _saturate(v: FloatArray, dtype: Any) -> tuple[FloatArray, BoolArray]:
    """``v`` in ``dtype`` with ±inf replaced by ±its largest finite value; and where that happened."""
    out = v.astype(dtype)
    overflow = np.isinf(out)
    if overflow.any():
        out = np.where(overflow, np.copysign(np.finfo(dtype).max, out), out).astype(dtype)
    return out, overflow


def _assign(target: FloatArray, mask: BoolArray, value: float | FloatArray) -> None:
    """``target[mask] = value`` (``value[mask]`` for an array), through the indices: a masked copy
    branches on every element, which is slow for the sparse, random masks of groups."""
    rows = np.flatnonzero(mask)
    target[rows] = value if isinstance(value, float) else value[rows]


def _all_float32(x: FloatArray) -> bool:
    """Whether every value of ``x`` is exactly a float32 (no overflow, underflow or rounding)."""
    if x.dtype == np.float32:
        return True
    with np.errstate(over="ignore", under="ignore"):
        return bool(np.array_equal(x.astype(np.float32), x))


class Scatter:
    """Group reductions for any layout of the group ids ``h`` (in ``[0, size)``): samples stay in
    row order, ``np.bincount`` sums (each group's samples added in row order from 0.0) and
    ``np.take`` gathers."""

    def __init__(self, h: npt.NDArray[np.integer[Any]], size: int) -> None:
        self.h, self.size = h, size
        self._counts: IntArray | None = None

    def padding_rows(self) -> int:
        return int(self._all_counts()[-1])

    def _all_counts(self) -> IntArray:
        if self._counts is None:
            self._counts = np.bincount(self.h, minlength=self.size)
        return self._counts

    def load(self, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Rows ``x`` in this layout: float64 values (a copy only for float32), masks as they are."""
        return x if x.dtype == np.bool_ else x.astype(np.float64, copy=False)

    def store(self, a: FloatArray, dtype: Any) -> FloatArray:
        """The rows of ``a`` (a layout array), rounded to ``dtype``."""
        return a.astype(dtype, copy=False)

    def count(self, where: BoolArray | None) -> IntArray:
        if where is None:
            return self._all_counts()
        return np.bincount(self.h, weights=where, minlength=self.size).astype(np.int64)

    def sum(self, x: FloatArray) -> FloatArray:
        return np.asarray(np.bincount(self.h, weights=x, minlength=self.size), dtype=np.float64)

    def extremes(self, x: FloatArray, where: BoolArray | None) -> tuple[FloatArray, FloatArray]:
        hi = np.full(self.size, -np.inf, np.float64)
        lo = np.full(self.size, np.inf, np.float64)
        np.maximum.at(hi, self.h, x if where is None else np.where(where, x, -np.inf))
        np.minimum.at(lo, self.h, x if where is None else np.where(where, x, np.inf))
        return hi, lo

    def minus(self, x: FloatArray, per_group: FloatArray) -> FloatArray:
        """x − v_g, a new array."""
        c = np.take(per_group, self.h)
        return np.subtract(x, c, out=c)

    def times(self, c: FloatArray, per_group: FloatArray, buffer: FloatArray, dtype: Any) -> FloatArray:
        """c·v_g rounded to ``dtype``: in place for float64 (``buffer``: a scratch array of c's shape)."""
        out = c if dtype == np.float64 else np.empty(c.shape, dtype)
        return np.multiply(c, np.take(per_group, self.h, out=buffer, mode="clip"), out=out)


_CHUNK = 1 << 15  # samples per chunk of a blocks transposition: it stays in the L2 cache


class Blocks:
    """The same reductions when group g is rows g·k … g·k + k − 1 for every g < p (equal contiguous
    blocks, the usual GRPO layout). Samples are held transposed, ``[k, p]``: member j of every
    group in one contiguous row, so a group sum is k whole-row additions (the same row order from
    0.0, bit for bit those of :class:`Scatter`) and a per-group value broadcasts without gathers.
    The transpositions in and out run chunk by chunk."""

    def __init__(self, p: int, k: int) -> None:
        self.p, self.k = p, k
        self._step = max(1, _CHUNK // k)

    def padding_rows(self) -> int:
        return 0

    def load(self, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Rows ``x`` transposed to ``[k, p]``: float64 values, or a mask."""
        out: npt.NDArray[Any] = np.empty((self.k, self.p), np.bool_ if x.dtype == np.bool_ else np.float64)
        rows = x.reshape(self.p, self.k)
        for i in range(0, self.p, self._step):
            out[:, i : i + self._step] = rows[i : i + self._step].T
        return out

    def store(self, a: FloatArray, dtype: Any) -> FloatArray:
        """The rows of ``a`` (``[k, p]``), rounded to ``dtype``."""
        out = np.empty((self.p, self.k), dtype)
        for i in range(0, self.p, self._step):
            out[i : i + self._step] = a[:, i : i + self._step].T
        return out.reshape(-1)

    def count(self, where: BoolArray | None) -> IntArray:
        n = np.zeros(self.p + 1, np.int64)
        n[: self.p] = self.k if where is None else np.count_nonzero(where, axis=0)
        return n

    def sum(self, x: FloatArray) -> FloatArray:
        out = np.zeros(self.p + 1, np.float64)
        total = out[: self.p]
        for member in x:
            total += member
        return out

    def extremes(self, x: FloatArray, where: BoolArray | None) -> tuple[FloatArray, FloatArray]:
        hi = np.full(self.p + 1, -np.inf, np.float64)
        lo = np.full(self.p + 1, np.inf, np.float64)
        np.max(x, axis=0, initial=-np.inf, where=True if where is None else where, out=hi[: self.p])
        np.min(x, axis=0, initial=np.inf, where=True if where is None else where, out=lo[: self.p])
        return hi, lo

    def minus(self, x: FloatArray, per_group: FloatArray) -> FloatArray:
        return np.subtract(x, per_group[: self.p])

    def times(self, c: FloatArray, per_group: FloatArray, buffer: FloatArray, dtype: Any) -> FloatArray:
        """c ← c·v_g in place, float64 (:meth:`store` rounds to ``dtype``)."""
        del buffer, dtype
        return np.multiply(c, per_group[: self.p], out=c)


Segments: TypeAlias = Scatter | Blocks
_MAX_BLOCK = 64  # longer blocks (fewer groups): k whole-row additions cost more than np.bincount


def segments(h: npt.NDArray[np.integer[Any]], p: int) -> Segments:
    """:class:`Blocks` when the ids ``h`` are 0 … 0, 1 … 1, …, p − 1 … p − 1 in runs of an equal
    length k ≤ 64, else :class:`Scatter` (for ids checked to lie in ``[0, p]``; int64 ids spare
    ``np.bincount`` and ``np.take`` a cast per call)."""
    n = h.shape[0]
    k = n // p if p else 0
    if 1 <= k <= _MAX_BLOCK and n == k * p and h[0] == 0 and h[-1] == p - 1 and h[k * (p // 2)] == p // 2:
        if bool((h.reshape(p, k) == np.arange(p, dtype=h.dtype)[:, None]).all()):
            return Blocks(p, k)
    return Scatter(h, p + 1)


def _tiny(m2: FloatArray, constant: BoolArray, live: BoolArray) -> bool:
    """Whether a non-constant group's Σc² is so small that squares may have underflowed (float64
    samples only: a non-constant group of float32 values has a deviation of at least 2⁻¹⁵⁰, and
    every nonzero deviation is at least 2⁻²⁰¹, so no square of theirs underflows)."""
    tiny = m2 < _TINY_M2
    tiny &= ~constant
    tiny &= live
    return bool(tiny.any())


def _batch_moments(x: FloatArray, included: BoolArray | None, ddof: int) -> tuple[float, float] | None:
    """Two-pass mean and σ (ddof) of the included samples (None: all); σ = 0 when they are all equal.

    None when Σc² is outside the range where it is exact to rounding (the limits of :func:`exact_core`)."""
    moments = _moments(x if included is None else x[included], ddof)
    return (
        None
        if moments is None or not (moments[2] == 0 or _TINY_M2 <= moments[2] <= _HUGE_M2)
        else moments[:2]
    )


def _moments(xs: FloatArray, ddof: int) -> tuple[float, float, float] | None:
    """(mean, σ, Σc²) of ``xs`` in two passes from its first value; σ = 0 when all are equal."""
    k = xs.shape[0]
    if k == 0:
        return 0.0, 0.0, 0.0
    first = float(xs[0])
    with np.errstate(over="ignore", invalid="ignore"):
        d = xs - first
        if not d.any():
            return first, 0.0, 0.0
        mu = first + float(d.sum()) / k
        c = xs - mu
        m2 = float(np.dot(c, c))
    if not math.isfinite(m2):
        return None
    return mu, math.sqrt(m2 / (k - ddof)) if k > ddof else 0.0, m2
