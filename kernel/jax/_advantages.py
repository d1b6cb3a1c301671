"""JAX twin of :mod:`kernel._advantages`: grouped advantages under ``jit`` / ``vmap``, float32.

Same signatures and equations as the numpy estimator; ``num_groups`` and every option are static
(Python values; jit with ``static_argnames`` or ``functools.partial``). Ids outside
``[0, num_groups)`` are padding (under jit a bad id cannot raise). Differences from numpy:

* float32 throughout (numpy's ``"exact"`` arithmetic is float64), with sums taken as deviations from
  each group's largest reward, so a constant group still gives exactly 0;
* only ``arithmetic="exact"``: the reference arithmetics reproduce torch / Python operation orders
  and live in numpy; :func:`advantages_from_preset` runs a preset's options in this arithmetic;
* ``singleton="error"`` cannot raise on traced values and is refused;
* with ``trajectory_ids_PG``, samples are numbered in sorted (group, trajectory) order rather than
  first appearance (this changes nothing in the result).

Range. Every group is scaled by a power of two, 2^−e_g with e_g the exponent of its largest |r|,
before any arithmetic, and each result is scaled back once (multiplications by powers of two, exact
in the normal range). So finite float32 rewards give finite advantages at every magnitude, up to
±3.4e38: no difference or square overflows. Subnormal rewards (below 1.2e-38), which XLA on CPU
reads as 0 in arithmetic, are decoded from their bits, so a group of distinct subnormal rewards is
not constant. A denominator σ + eps is formed in units of the larger of its two terms. An advantage
beyond float32's range is returned as ±its largest finite value; one whose nonzero value is below
float32's smallest normal number (which XLA flushes to 0) is returned as what the backend makes of
it; both are counted in ``num_out_of_range``. Group means of subnormal magnitude read as 0.

Speed (XLA on CPU, where a scatter or gather costs a serial pass over the rows). Rows in equal
contiguous blocks (ids 0 … 0, 1 … 1, …, the usual GRPO layout; checked at run time) are reduced as
dense ``[P, k]`` rows, with no scatter or gather. Other layouts take the scatters once without the
per-group powers of two; where a group's bounds say its largest |r| may lie beyond about 2^±20, or a
reward is subnormal, the scatters run again with them (``lax.cond``). Both give the same bits where
both apply. Under ``vmap`` with batched ids or rewards, every branch runs.

Examples:
  >>> import jax
  >>> from functools import partial
  >>> fn = jax.jit(partial(grouped_advantages, num_groups=2, scale="group"))
  >>> fn(jnp.array([1.0, 3.0, 5.0, 5.0]), jnp.array([0, 0, 1, 1])).advantages
  Array([-0.7071063,  0.7071063,  0.       ,  0.       ], dtype=float32)
  >>> fn(jnp.array([3e38, -3e38, 1e-40, 2e-40]), jnp.array([0, 0, 1, 1])).advantages  # σ_1 ≪ eps
  Array([ 7.0710677e-01, -7.0710677e-01, -5.0000433e-35,  5.0000433e-35], dtype=float32)
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from kernel._advantages import (
    AdvantageOptions,
    Arithmetic,
    Baseline,
    Scale,
    Singleton,
    preset_options,
)
from kernel._groups import check_nonnegative, check_num_groups
from kernel.jax._checks import as_float, host_ids_fit_int32

__all__ = [
    "GroupedAdvantages",
    "advantages_from_preset",
    "constant_group_keep_mask",
    "grouped_advantages",
    "total_returns",
]


class GroupedAdvantages(NamedTuple):
    """Per-row advantages and group statistics (JAX arrays; see :class:`kernel.GroupedAdvantages`).

    Attributes:
      advantages: ``[PG]`` float32, 0 on excluded and padding rows.
      group_mean: ``[P]`` float32 μ_g (0 for an empty group).
      group_std: ``[P]`` float32 σ_g with the requested ddof (0 where n ≤ ddof; float32's largest
        finite value where σ_g is beyond it).
      group_count: ``[P]`` int32 included samples.
      group_constant: ``[P]`` bool, all included samples equal (false for an empty group).
      num_excluded: int32 scalar, live rows left out by ``where`` or a non-finite reward.
      num_nonfinite: int32 scalar, of those the rows with a NaN / ±inf reward.
      num_out_of_range: int32 scalar, included rows whose advantage does not fit float32's normal
        range (module docstring, "Range").
    """

    advantages: jax.Array
    group_mean: jax.Array
    group_std: jax.Array
    group_count: jax.Array
    group_constant: jax.Array
    num_excluded: jax.Array
    num_nonfinite: jax.Array
    num_out_of_range: jax.Array


def advantages_from_preset(
    name: str,
    rewards_PG: ArrayLike,
    group_ids_PG: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    trajectory_ids_PG: ArrayLike | None = None,
) -> GroupedAdvantages:
    """Runs :func:`grouped_advantages` with the options of preset ``name`` in float32 ``"exact"``.

    The preset's semantics (baseline, scaling, eps, singleton rule…) carry over; its reference
    arithmetic does not (bit-exact reproduction of a reference is numpy's job).

    Args:
      name: a key of :data:`kernel.ADVANTAGE_PRESETS` (static).
      rewards_PG: ``[PG]`` float.
      group_ids_PG: ``[PG]`` int; ids outside ``[0, num_groups)`` are padding.
      num_groups: P (static).
      where: ``[PG]`` bool, rows to include.
      trajectory_ids_PG: ``[PG]`` int, as in :func:`grouped_advantages`.

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      KeyError: unknown preset.

    Examples:
      >>> r, ids = jnp.array([1.0, 0.0, 0.7]), jnp.array([0, 0, 1])
      >>> advantages_from_preset("verl_grpo.norm", r, ids, 2).advantages
      Array([ 0.70710576, -0.70710576,  0.69999933], dtype=float32)
    """
    options = replace(preset_options(name), arithmetic="exact")
    return _estimate(rewards_PG, group_ids_PG, num_groups, where, trajectory_ids_PG, options)


def grouped_advantages(
    rewards_PG: ArrayLike,
    group_ids_PG: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    trajectory_ids_PG: ArrayLike | None = None,
    baseline: Baseline = "mean",
    scale: Scale = "none",
    ddof: int = 1,
    eps: float = 1e-6,
    var_floor: float = 0.0,
    min_std: float | None = None,
    singleton: Singleton = "zero",
    positive_only: bool = False,
    arithmetic: Arithmetic = "exact",
) -> GroupedAdvantages:
    """Group-relative advantages A = (r − b_g) / s in float32 (see :func:`kernel.grouped_advantages`).

    Args:
      rewards_PG: ``[PG]`` float (ints and bools become float32).
      group_ids_PG: ``[PG]`` int; ids outside ``[0, num_groups)`` are padding.
      num_groups: P (static), >= 0.
      where: ``[PG]`` bool, rows to include.
      trajectory_ids_PG: ``[PG]`` int; rows with equal (group, trajectory) are averaged into one sample.
      baseline: ``"mean"`` or ``"leave_one_out"`` (static).
      scale: ``"none"``, ``"group"``, ``"batch"`` or ``"whiten"`` (static).
      ddof: int >= 0 (static).
      eps: finite number >= 0 (static).
      var_floor: finite number >= 0 (static).
      min_std: finite number >= 0 or None (static).
      singleton: ``"zero"`` or ``"raw"`` (static).
      positive_only: clamp advantages at 0 after scaling (static).
      arithmetic: must be ``"exact"``.

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      ValueError / TypeError: bad shapes or options (naming the argument), ``arithmetic`` other than
        ``"exact"``, ``singleton="error"``.

    Examples:
      >>> r, ids = jnp.array([1.0, 0.0, 0.5, 0.5, 2.0]), jnp.array([0, 0, 1, 1, 2])
      >>> grouped_advantages(r, ids, 3).advantages
      Array([ 0.5, -0.5,  0. ,  0. ,  0. ], dtype=float32)
      >>> grouped_advantages(r, ids, 0).advantages  # every row is padding
      Array([0., 0., 0., 0., 0.], dtype=float32)
    """
    options = AdvantageOptions(
        baseline=baseline,
        scale=scale,
        ddof=ddof,
        eps=eps,
        var_floor=var_floor,
        min_std=min_std,
        singleton=singleton,
        positive_only=positive_only,
        arithmetic=arithmetic,
    )
    return _estimate(rewards_PG, group_ids_PG, num_groups, where, trajectory_ids_PG, options)


def _estimate(
    rewards_PG: ArrayLike,
    group_ids_PG: ArrayLike,
    num_groups: int,
    where: ArrayLike | None,
    trajectory_ids_PG: ArrayLike | None,
    options: AdvantageOptions,
) -> GroupedAdvantages:
    p = check_num_groups(num_groups)
    if options.arithmetic != "exact":
        raise ValueError(
            f"arithmetic={options.arithmetic!r} reproduces a reference's float32 operation order and exists "
            "only in numpy (kernel.grouped_advantages); the JAX twin computes arithmetic='exact'"
        )
    if options.singleton == "error":
        raise ValueError("singleton='error' cannot raise on traced values; use 'zero' or 'raw'")
    r = _vector(rewards_PG, "rewards_PG", jnp.float32)
    g = _vector(group_ids_PG, "group_ids_PG", jnp.int32, r.shape[0])
    w = None if where is None else _vector(where, "where", jnp.bool_, r.shape[0])
    t = (
        None
        if trajectory_ids_PG is None
        else _vector(trajectory_ids_PG, "trajectory_ids_PG", jnp.int32, r.shape[0])
    )
    estimated: GroupedAdvantages = _estimated(r, g, w, t, p, options)
    return estimated


@partial(jax.jit, static_argnums=(4, 5))
def _estimated(
    r: jax.Array, g: jax.Array, w: jax.Array | None, t: jax.Array | None, p: int, options: AdvantageOptions
) -> GroupedAdvantages:
    live, asked, valid = _rows(r, g, w, p)
    if t is None:
        a, oor, mean, std, count, constant = _by_layout(r, g, w, p, options)
        if options.positive_only:
            a = jnp.maximum(a, 0.0)
    else:
        x = jnp.where(valid, r, 0.0)
        sample_of_row, x, h = _trajectory_samples(x, jnp.where(valid, g, p), t, valid, p)
        a, oor, mean, std, count, constant = _scattered(x, h, h < p, p, options)
        if options.positive_only:
            a = jnp.maximum(a, 0.0)
        a = jnp.where(valid, a[sample_of_row], 0.0)
        oor = oor[sample_of_row]
    num_live = jnp.sum(live, dtype=jnp.int32)
    num_valid = jnp.sum(valid, dtype=jnp.int32)
    return GroupedAdvantages(
        advantages=a,
        group_mean=mean,
        group_std=std,
        group_count=count,
        group_constant=constant,
        num_excluded=num_live - num_valid,
        num_nonfinite=jnp.sum(asked, dtype=jnp.int32) - num_valid,
        num_out_of_range=jnp.sum(oor & valid, dtype=jnp.int32),
    )


def _vector(x: ArrayLike, name: str, dtype: Any, length: int | None = None) -> jax.Array:
    if dtype is jnp.int32:
        host_ids_fit_int32(x, name)
        if not isinstance(x, jax.Array) and np.size(x) == 0:
            x = np.zeros(0, np.int32)  # an empty list is float64 to numpy: no ids, whatever its dtype
    arr = as_float(x, name) if dtype is jnp.float32 else jnp.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have rank 1, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} must have length {length} (as rewards_PG), got {arr.shape[0]}")
    if dtype is jnp.bool_ and arr.dtype != jnp.bool_:
        raise TypeError(f"{name} must be a boolean array, got dtype {arr.dtype}")
    if dtype is jnp.int32 and not jnp.issubdtype(arr.dtype, jnp.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(dtype)


def _trajectory_samples(
    x: jax.Array, h: jax.Array, t: jax.Array, valid: jax.Array, p: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Averages the rows of each (group, trajectory) pair into one sample (N sample slots).

    ``h`` is p on rows left out; their samples get group p. A trajectory's mean is taken in halves
    (so that a difference of two float32 values fits float32) as its group's largest half-row plus the
    mean deviation from it: Σ deviations, then one division by the row count. Every trajectory of a
    group thus shares one reference, and where the deviation sums are exact (rewards on a coarse grid),
    trajectories whose means are equal as real numbers get equal float32 means, as in numpy's float64
    ``Σ r / n``, and the group is constant. (Dividing each deviation before the sum, or measuring each
    trajectory from its own largest row, rounds equal means differently.) A pair whose deviation sum
    overflows (rewards near ±3.4e38) divides each deviation by the count before summing instead.
    """
    n = x.shape[0]
    order = jnp.lexsort((t, h))
    hs, ts = h[order], t[order]
    new = jnp.ones(n, bool).at[1:].set((hs[1:] != hs[:-1]) | (ts[1:] != ts[:-1])) if n else hs > 0
    pair = jnp.zeros(n, jnp.int32).at[order].set(jnp.cumsum(new, dtype=jnp.int32) - 1)
    count = jax.ops.segment_sum(valid.astype(jnp.int32), pair, n)
    half = x * 0.5  # halves: a deviation from the group's largest row then fits float32 at any magnitude
    top = jax.ops.segment_max(jnp.where(valid, half, -jnp.inf), h, p + 1)
    top = jnp.where(jnp.isfinite(top), top, 0.0)  # segment p and empty groups: no valid row
    deviation = jnp.where(valid, half - top[h], 0.0)
    rows = jnp.maximum(count, 1).astype(half.dtype)
    total = jax.ops.segment_sum(deviation, pair, n)
    split = jax.ops.segment_sum(deviation / rows[pair], pair, n)  # no partial sum exceeds a deviation
    group = jax.ops.segment_max(h, pair, n)
    group = jnp.where(count > 0, group, p)
    values = (top[group] + jnp.where(jnp.isfinite(total), total / rows, split)) * 2.0
    return pair, values, group


_F32_MAX = 3.4028234663852886e38  # largest finite float32
_F32_TINY = 2.0**-126  # smallest normal float32
_MODERATE = 20  # groups whose largest |r| is within 2^±20 are not rescaled (their shift is 0)
# Groups whose largest |r| lies between have shift 0 (e within ±20 even where the float of its bit
# pattern rounds up), with 1/16 to spare for the rounding of the bounds that stand in for it.
_MODERATE_LOW, _MODERATE_HIGH = 17 * 2.0**-25, 15 * 2.0**16
_NOT_MODERATE = 2.0**30  # stands in for a subnormal sample where shifts are taken to be 0


def _pow2(k: jax.Array) -> jax.Array:
    """2^k as float32 for int32 k in [−126, 127], built from its bits."""
    return jax.lax.bitcast_convert_type((k + 127) << 23, jnp.float32)


def _times_pow2(v: jax.Array, k: jax.Array) -> jax.Array:
    """v·2^k for int32 |k| ≤ 252, exact wherever the result is a normal float32; ±inf / 0 beyond.

    Two factors, each within float32's normal exponents, so that neither over- or underflows (an
    ldexp without data-dependent branches).
    """
    k = jnp.clip(k, -252, 252)
    half = k >> 1
    return v * _pow2(half) * _pow2(k - half)


def _from_bits(bits: jax.Array, factor: jax.Array) -> jax.Array:
    """x·factor for float32 bit patterns ``bits``, subnormal x included (XLA on CPU reads those as 0).

    A subnormal x is m·2^−149 (m its 23-bit mantissa), so it is rebuilt from m in normal floats.
    """
    magnitude = bits & 0x7FFFFFFF
    x = jax.lax.bitcast_convert_type(bits, jnp.float32)
    signed_m = jnp.where(bits < 0, -magnitude, magnitude).astype(jnp.float32)
    rebuilt = signed_m * jnp.float32(2.0**-75) * factor * jnp.float32(2.0**-74)
    return jnp.where(magnitude < 0x00800000, rebuilt, x * factor)


class _Scatter:
    """Group reductions by segment id: rows ``[N]`` with ids ``h``, per-group arrays ``[size]``."""

    def __init__(self, h: jax.Array, size: int) -> None:
        self.h, self.size = h, size

    def sum(self, v: jax.Array) -> jax.Array:
        return jax.ops.segment_sum(v, self.h, self.size)

    def max(self, v: jax.Array) -> jax.Array:
        return jax.ops.segment_max(v, self.h, self.size)

    def take(self, per_group: jax.Array) -> jax.Array:
        return per_group[self.h]


class _Blocks:
    """The same reductions for equal contiguous blocks, rows held as ``[p, k]`` (group g in row g):
    sums and maxima along rows, per-group values broadcast. No scatter or gather, which on XLA's CPU
    backend cost a serial read-modify-write per row."""

    def sum(self, v: jax.Array) -> jax.Array:
        return jnp.sum(v, axis=1)

    def max(self, v: jax.Array) -> jax.Array:
        return jnp.max(v, axis=1)

    def take(self, per_group: jax.Array) -> jax.Array:
        return per_group[:, None]


class _Partial(NamedTuple):
    """:func:`_core`'s result before its last per-sample step: per sample c (the advantages for
    ``scale="whiten"``), per group G_g (A = c·G_g) and the statistics."""

    c: jax.Array
    factor: jax.Array
    group_mean: jax.Array
    group_std: jax.Array
    group_count: jax.Array
    group_constant: jax.Array


def _core(
    x: jax.Array,
    included: jax.Array,
    segments: _Scatter | _Blocks,
    options: AdvantageOptions,
    *,
    rescale: bool,
) -> tuple[_Partial, jax.Array]:
    """float32 estimator on samples ``x`` (0 where not ``included``), grouped by ``segments``, up to
    the last per-sample step (:func:`_finish`).

    Returns the :class:`_Partial` result and whether it holds: always with ``rescale``; without, when
    every group's shift is 0.

    Each group runs in units of 2^s_g, y = x·2^−s_g, where s_g is 0 when its largest |x| lies within
    2^±20 and otherwise brings it there (one exact multiplication; subnormal x are decoded from their
    bits), so no difference or square over- or underflows. ``rescale=False`` is that arithmetic with
    every s_g taken to be 0 (multiplications by 2^0 left out, which changes no bit): it holds when no
    sample is subnormal and each group's largest |x|, bounded below by |max_g| and |mean_g| and above
    by |max_g| + Σ(max_g − x) and |mean_g| + √Σc², lies within about [2^−21, 2^20), or the group is
    all zeros. In those units sums are of deviations d = y − max_g ≤ 0 from the group's largest
    sample: a group is constant exactly when Σd = 0 (a sum of non-positive numbers), its mean is then
    max_g exactly, and a large common offset costs float32 no precision. Every advantage is c·G_g
    (c = d − mean_g d), G_g holding 2^s_g and the division.
    """
    baseline, scale, ddof, eps = options.baseline, options.scale, options.ddof, options.eps
    n = segments.sum(included.astype(jnp.int32))
    if rescale:
        bits = jax.lax.bitcast_convert_type(x, jnp.int32)
        magnitude = bits & 0x7FFFFFFF
        # The group's largest bit pattern, as a float: a float max is fast where an int32 one is not,
        # and its rounding (24 of 31 bits) can only move e by one, which the ±20 window absorbs.
        # Subnormal patterns are below 2^23, so exact.
        top_bits = jnp.maximum(segments.max(magnitude.astype(jnp.float32)), 0.0)
        top_magnitude = top_bits.astype(jnp.int32)
        biased = top_magnitude >> 23
        e = jnp.where(biased > 0, biased - 126, jnp.frexp(top_bits)[1] - 149)  # max|x| ≈ m·2^e, ½ ≤ m < 1
        shift = jnp.where(top_magnitude > 0, jnp.maximum(e - jnp.clip(e, -_MODERATE, _MODERATE), -127), 0)
        unit = _pow2(-shift)  # 2^−s_g, within [2^−108, 2^127]
        scale_back = 1.0 / unit  # 2^s_g, exact (0 for s_g = −127, below float32's normal range)
        y = _from_bits(bits, segments.take(unit))
    else:
        shift = jnp.zeros(n.shape, jnp.int32)
        unit = scale_back = jnp.float32(1.0)  # float32, so every product rounds as with an array 2^0
        magnitude = jax.lax.bitcast_convert_type(x, jnp.int32) & 0x7FFFFFFF
        subnormal = (magnitude > 0) & (magnitude < 0x00800000)
        y = jnp.where(subnormal, _NOT_MODERATE, x)  # its group then fails the check below
    top = segments.max(jnp.where(included, y, -jnp.inf))  # y: normal floats
    top = jnp.where(n > 0, top, 0.0)
    d = jnp.where(included, y - segments.take(top), 0.0)
    total = segments.sum(d)
    constant = (total == 0.0) & (n > 0)
    mean_d = total / jnp.maximum(n, 1)
    single = n == 1
    raw = options.singleton == "raw"
    # verl's group of one: μ := 0, so the centred value is the sample itself (d − (−top) = y).
    centre = jnp.where(single, -top, mean_d) if raw else mean_d
    c = jnp.where(included, d - segments.take(centre), 0.0)
    m2 = jnp.where(constant, 0.0, segments.sum(c * c))
    holds = jnp.bool_(True)
    if not rescale:  # bounds on max|x| (NaN where a sum overflowed: the check fails)
        mean_x = top + mean_d
        lower = jnp.maximum(jnp.abs(top), jnp.abs(mean_x))
        upper = jnp.minimum(jnp.abs(top) - total, jnp.abs(mean_x) + jnp.sqrt(m2))
        moderate = (lower >= _MODERATE_LOW) & (upper < _MODERATE_HIGH)
        holds = jnp.all(moderate | (n == 0) | (constant & (top == 0.0)))
    dof = n - ddof
    sd_y = jnp.sqrt(m2 / jnp.maximum(dof, 1))  # σ_g·2^−s_g before the floor
    floor_sd = math.sqrt(options.var_floor)
    std = jnp.where(dof > 0, jnp.maximum(sd_y * scale_back, floor_sd), 0.0)

    if baseline == "leave_one_out":
        loo = n / jnp.maximum(n - 1, 1).astype(jnp.float32)
    else:
        loo = jnp.ones(n.shape, jnp.float32)
    # base: the group-stage factor in the group's units (A = c·base·2^s_g before any batch scaling)
    base = jnp.where(constant | (n == 0), 0.0, loo)
    if raw:
        base = jnp.where(single, 1.0, base)
    g = base * scale_back
    if scale == "group":
        sd_g = jnp.maximum(sd_y, floor_sd * unit)
        denom = sd_g + eps * unit
        divide = (dof > 0) & (denom > 0) & ~constant
        if options.min_std is not None:
            divide = divide & (sd_g > options.min_std * unit)
        g = jnp.where(divide, loo / jnp.where(divide, denom, 1.0), g)
        if raw:
            g = jnp.where(single, scale_back / (1.0 + eps), g)
    # a group with a nonzero sample: its largest |y| is a normal float, so it is not all zeros
    live = (n > 0) & ~(constant & (top == 0.0))
    if scale in ("batch", "whiten"):
        # whiten: a constant group's advantages are exactly 0 in any unit, so it does not set the batch
        # unit (a 1e25 constant group would make every other group's squares underflow to 0)
        sets_unit = live & ~constant if scale == "whiten" else live
        s_b = jnp.max(jnp.where(sets_unit, shift, -127), initial=-127)
        to_batch = base * _times_pow2(jnp.float32(1.0), shift - s_b)  # A = c·to_batch·2^s_B
        if scale == "batch":  # A = a/(σ_B + eps), σ_B over every included reward
            in_batch_units = y * segments.take(_times_pow2(jnp.float32(1.0), shift - s_b))
            _, sd = _masked_mean_std(in_batch_units, included, ddof)
            denom_b = sd + _times_pow2(jnp.float32(eps), -s_b)
            g = jnp.where(denom_b > 0, to_batch / jnp.where(denom_b > 0, denom_b, 1.0), g)
        else:  # A = (a − mean_B a)/(std_B a + eps)
            a_b = jnp.where(included, c * segments.take(to_batch), 0.0)
            mu, sd = _masked_mean_std(a_b, included, ddof)
            denom_w = sd + _times_pow2(jnp.float32(eps), -s_b)
            whitened = jnp.where(sd > 0, (a_b - mu) / jnp.where(sd > 0, denom_w, 1.0), 0.0)
    if scale == "whiten":
        c = whitened
    mean = jnp.where(n > 0, (top + mean_d) * scale_back, 0.0)
    std = jnp.minimum(std, jnp.float32(_F32_MAX))
    return _Partial(c, g, mean, std, n, constant), holds


def _finish(
    part: _Partial, included: jax.Array, segments: _Scatter | _Blocks, whitened: bool
) -> tuple[jax.Array, ...]:
    """(advantages, out of range, mean, std, count, constant) from :func:`_core`'s partial result.

    Called where ``part`` has been stored (a branch of ``lax.cond`` takes it as an operand): fused
    into the gather of G_g, XLA's CPU backend would otherwise work out each group's G_g (a square
    root, divisions) again for each of its samples.
    """
    if whitened:
        a, nonzero = part.c, jnp.zeros(part.c.shape, bool)  # dimensionless and O(1): no underflow
    else:
        a, nonzero = jnp.where(included, part.c * segments.take(part.factor), 0.0), part.c != 0.0
    big = jnp.float32(_F32_MAX)
    overflow = jnp.isinf(a)
    a = jnp.where(overflow, jnp.copysign(big, a), a)
    out_of_range = included & (overflow | (nonzero & (jnp.abs(a) < _F32_TINY)))
    return a, out_of_range, part.group_mean, part.group_std, part.group_count, part.group_constant


def _rows(
    r: jax.Array, g: jax.Array, where: jax.Array | None, p: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(live, asked, valid): rows with an id in ``[0, p)``, those of them ``where`` keeps, and those of
    them with a finite reward."""
    live = (g >= 0) & (g < p)
    asked = live if where is None else live & where
    return live, asked, asked & jnp.isfinite(r)


def _scattered(
    x: jax.Array, h: jax.Array, included: jax.Array, p: int, options: AdvantageOptions
) -> tuple[jax.Array, ...]:
    """:func:`_core` on scatters by group ids ``h`` (``included``: the rows that count; ids outside
    ``[0, p)`` fall out of every segment sum and maximum): first without per-group shifts, then, where
    that result does not hold (a group whose largest |r| may lie beyond about 2^±20, or a subnormal
    reward), again with them."""
    segments = _Scatter(h, max(p, 1))  # p = 0: one segment that no row is included in
    whitened = options.scale == "whiten"
    fast, holds = _core(x, included, segments, options, rescale=False)

    def finish(part: _Partial) -> tuple[jax.Array, ...]:
        return _finish(part, included, segments, whitened)

    def rescaled(part: _Partial) -> tuple[jax.Array, ...]:
        del part
        return finish(_core(x, included, segments, options, rescale=True)[0])

    a, oor, mean, std, n, constant = jax.lax.cond(holds, finish, rescaled, fast)
    return a, oor, mean[:p], std[:p], n[:p], constant[:p]


def _by_layout(
    r: jax.Array, g: jax.Array, where: jax.Array | None, p: int, options: AdvantageOptions
) -> tuple[jax.Array, ...]:
    """:func:`_core` on the rows as given, the cheapest way that gives its result: equal contiguous
    blocks (the ids are 0 … 0, 1 … 1, …, p − 1 … p − 1 in runs of one length k) as dense ``[p, k]``
    rows, with no scatter or gather; any other layout by :func:`_scattered`. Under ``vmap`` with
    batched ids both branches run."""
    valid = _rows(r, g, where, p)[2]
    x = jnp.where(valid, r, 0.0)

    def scattered() -> tuple[jax.Array, ...]:
        return _scattered(x, g, valid, p, options)

    rows = r.shape[0]
    k = rows // p if p and rows % p == 0 else 0
    if not k:
        return scattered()

    def blocked() -> tuple[jax.Array, ...]:
        dense_rows = (x.reshape(p, k), valid.reshape(p, k))
        part = _core(*dense_rows, _Blocks(), options, rescale=True)[0]
        a, oor, *stats = _finish(part, dense_rows[1], _Blocks(), options.scale == "whiten")
        return (a.reshape(-1), oor.reshape(-1), *stats)

    def every_row() -> jax.Array:
        return jnp.all(g == jax.lax.iota(jnp.int32, rows) // k)

    # five rows first (a ragged layout rarely passes them), then every row
    probes = sorted({0, rows // 4, rows // 2, 3 * rows // 4, rows - 1})
    plausible = jnp.all(g[np.array(probes)] == np.array(probes, np.int32) // k)
    blocks = jax.lax.cond(plausible, every_row, lambda: jnp.bool_(False))
    return jax.lax.cond(blocks, blocked, scattered)  # type: ignore[no-any-return]


def _masked_mean_std(x: jax.Array, included: jax.Array, ddof: int) -> tuple[jax.Array, jax.Array]:
    """Two-pass mean and σ (ddof) of the included entries; σ = 0 when they are all equal."""
    k = jnp.sum(included, dtype=jnp.int32)
    top = jnp.max(jnp.where(included, x, -jnp.inf), initial=-jnp.inf)
    bottom = jnp.min(jnp.where(included, x, jnp.inf), initial=jnp.inf)
    anchor = jnp.where(k > 0, top, 0.0)
    d = jnp.where(included, x - anchor, 0.0)
    mu_d = jnp.sum(d) / jnp.maximum(k, 1)
    c = jnp.where(included, d - mu_d, 0.0)
    var = jnp.sum(c * c) / jnp.maximum(k - ddof, 1)
    sd = jnp.where((k > ddof) & (top != bottom), jnp.sqrt(var), 0.0)
    return anchor + mu_d, sd


def total_returns(
    step_rewards_U: ArrayLike,
    step_episode_ids_U: ArrayLike,
    num_episodes: int,
    final_rewards_E: ArrayLike,
    *,
    where: ArrayLike | None = None,
) -> jax.Array:
    """Episode returns R_e = Σ_{t ∈ e} r_t + R_final,e in float32 (see :func:`kernel.total_returns`).

    Args:
      step_rewards_U: ``[U]`` float, one per step.
      step_episode_ids_U: ``[U]`` int; ids outside ``[0, num_episodes)`` are padding.
      num_episodes: E (static).
      final_rewards_E: ``[E]`` float.
      where: ``[U]`` bool, steps to count.

    Returns:
      ``[E]`` float32.

    Raises:
      ValueError / TypeError: bad shapes or dtypes.

    Examples:
      >>> total_returns(jnp.array([-1.0, 0.0, -1.0]), jnp.array([0, 0, 1]), 2, jnp.array([0.5, 1.0]))
      Array([-0.5,  0. ], dtype=float32)
    """
    e = check_num_groups(num_episodes, "num_episodes")
    r = _vector(step_rewards_U, "step_rewards_U", jnp.float32)
    ids = _vector(step_episode_ids_U, "step_episode_ids_U", jnp.int32, r.shape[0])
    final = _vector(final_rewards_E, "final_rewards_E", jnp.float32, e)
    counted = (ids >= 0) & (ids < e)
    if where is not None:
        counted = counted & _vector(where, "where", jnp.bool_, r.shape[0])
    steps = jax.ops.segment_sum(jnp.where(counted, r, 0.0), jnp.where(counted, ids, e), e + 1)
    return steps[:e] + final


def constant_group_keep_mask(
    rewards_PG: ArrayLike,
    group_ids_PG: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    atol: float = 0.0,
    keep_one_if_all_constant: bool = False,
) -> jax.Array:
    """Rows to keep after dropping constant-reward groups (see :func:`kernel.constant_group_keep_mask`).

    Args:
      rewards_PG: ``[PG]`` float.
      group_ids_PG: ``[PG]`` int; ids outside ``[0, num_groups)`` are padding (never kept).
      num_groups: P (static).
      where: ``[PG]`` bool, rows to consider.
      atol: finite number >= 0 (static); groups spanning at most ``atol`` are constant.
      keep_one_if_all_constant: keep the lowest-id non-empty group when every group is constant.

    Returns:
      ``[PG]`` bool.

    Raises:
      ValueError / TypeError: bad shapes, or ``atol`` not a finite number >= 0.

    Examples:
      >>> constant_group_keep_mask(jnp.array([1.0, 1.0, 0.0, 1.0]), jnp.array([0, 0, 1, 1]), 2)
      Array([False, False,  True,  True], dtype=bool)
    """
    p = check_num_groups(num_groups)
    tolerance = check_nonnegative(atol, "atol")
    r = _vector(rewards_PG, "rewards_PG", jnp.float32)
    g = _vector(group_ids_PG, "group_ids_PG", jnp.int32, r.shape[0])
    valid = (g >= 0) & (g < p) & jnp.isfinite(r)
    if where is not None:
        valid = valid & _vector(where, "where", jnp.bool_, r.shape[0])
    h = jnp.where(valid, g, p)
    hi = jax.ops.segment_max(jnp.where(valid, r, -jnp.inf), h, p + 1)
    lo = jax.ops.segment_min(jnp.where(valid, r, jnp.inf), h, p + 1)
    varying = (hi - lo) > tolerance
    keep = valid & varying[h]
    if keep_one_if_all_constant:
        first = jnp.min(jnp.where(valid, h, p), initial=p)
        keep = jnp.where(jnp.any(keep), keep, valid & (h == first))
    return keep
