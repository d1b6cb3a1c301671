"""Token-level policy-gradient and supervised losses (numpy oracle; the JAX twins in :mod:`kernel.jax`).

Each loss is a pure function of the trained policy's logprobs lp_θ, the sampler's logprobs lp_q, the
advantages A (or the weights w) and an optional boolean ``where`` mask, with ρ = exp(lp_θ − lp_q):

====================  ==========================================
importance_sampling   ℓ = −ρ·A
ppo                   ℓ = −min(ρ·A, clip(ρ, lo, hi)·A)
gspo                  ℓ = −min(s·A, clip(s, lo, hi)·A),  s = exp(mean over the sequence of lp_θ − lp_q)
cispo                 ℓ = −sg(clip(ρ, lo, hi))·lp_θ·A
dro                   ℓ = −(lp_θ·A − ½·β·(lp_θ − lp_q)²)
cross_entropy         ℓ = −w·lp_θ
====================  ==========================================

and the scalar loss aggregates ℓ over the tokens selected by ``where`` (``aggregation=``):

- ``"sum"`` (default, as Tinker's built-in losses): Σ_t ℓ_t;
- ``"token_mean"``: Σ_t ℓ_t / max(n, 1), n the number of selected tokens;
- ``"seq_mean_token_mean"``: the mean over sequences with at least one selected token of each
  sequence's token mean (sequences are the rows of the last axis, or ``segment_ids``);

then divides by ``normalizer`` when given (Dr. GRPO: ``aggregation="sum"`` with a constant such as
the number of sequences × the generation budget). Positions outside ``where`` are replaced before any
arithmetic, so they contribute exactly 0 whatever they hold (NaN, ±inf), to the values and, in the JAX
twins, to the gradients.

Tinker's losses take no mask: pass ``where=None`` to reproduce them, observation positions included
(they carry A = 0, but dro's quadratic term still counts them).

Finite inputs never give NaN: ρ·A is exactly 0 where A = 0 (also when ρ overflows, e.g. a float32
logprob gap ≥ 89), and beyond the range of ``exp`` it is evaluated as sign(A)·exp(lp_θ − lp_q + log|A|),
so it overflows to ±inf only where |ρ·A| itself exceeds the dtype. Gradients follow the same rule.

Every loss is written once, against an array namespace (numpy here, ``jax.numpy`` in the thin
wrappers of :mod:`kernel.jax`); a :class:`kernel._namespace.Backend` holds the few operations that
differ (float coercion, segment sums, stop-gradient, whether values can be checked eagerly).
"""

from __future__ import annotations

from typing import Any, Final, Generic, Literal, NamedTuple, TypeAlias, TypeVar, get_args

import numpy as np
import numpy.typing as npt

from kernel._checks import (
    as_mask,
    check_choice,
    check_int,
    check_real,
    check_same_shape,
)
from kernel._namespace import NUMPY, Backend

__all__ = [
    "LOSS_AGGREGATIONS",
    "LossAggregation",
    "TokenLoss",
    "aggregate_token_loss",
    "cispo_loss",
    "cross_entropy_loss",
    "dro_loss",
    "gspo_loss",
    "importance_sampling_loss",
    "ppo_loss",
]

LossAggregation: TypeAlias = Literal["sum", "token_mean", "seq_mean_token_mean"]
"""How :func:`aggregate_token_loss` reduces per-token terms."""
LOSS_AGGREGATIONS: Final[tuple[LossAggregation, ...]] = get_args(LossAggregation)
"""The accepted values of ``aggregation=``."""

ArrayT = TypeVar("ArrayT")
FloatArray = npt.NDArray[np.floating[Any]]


class TokenLoss(NamedTuple, Generic[ArrayT]):
    """A loss value with its per-token terms and diagnostics.

    Attributes:
        loss: 0-d float, the aggregated (and normalised) loss.
        per_token_loss: float, the input shape, ℓ_t; exactly 0 outside ``where``.
        num_tokens: 0-d int, the number of selected tokens n.
        clip_fraction: 0-d float, the share of selected tokens whose ratio was clipped (ppo: the
            clipped branch is the minimum, so the token gets no gradient; cispo: ρ outside
            [lo, hi]); 0 for the other losses and when n = 0.
    """

    loss: ArrayT
    per_token_loss: ArrayT
    num_tokens: ArrayT
    clip_fraction: ArrayT


# ---------------------------------------------------------------------------------------------------------
# The one implementation, against an array namespace


class _Aggregation(NamedTuple):
    aggregation: LossAggregation
    normalizer: float | None
    segment_ids: Any
    num_segments: int | None


def _options(
    aggregation: object,
    normalizer: object,
    segment_ids: Any,
    num_segments: int | None,
    *,
    low: object = None,
    high: object = None,
) -> _Aggregation:
    """Checks the options shared by every loss (and the clip thresholds when given)."""
    check_choice(aggregation, "aggregation", LOSS_AGGREGATIONS)
    norm = None if normalizer is None else check_real(normalizer, "normalizer", finite=True, positive=True)
    if low is not None or high is not None:
        lo, hi = check_real(low, "clip_low_threshold"), check_real(high, "clip_high_threshold")
        if not lo <= hi:
            raise ValueError(f"clip thresholds must satisfy low <= high, got low={low!r}, high={high!r}")
    return _Aggregation(aggregation, norm, segment_ids, num_segments)  # type: ignore[arg-type]


def _prepare(bk: Backend, where: Any, **arrays: Any) -> tuple[list[Any], Any]:
    """Coerces the inputs to one float dtype and zeroes every position outside ``where`` (double where)."""
    xp = bk.xp
    values = [bk.as_float(x, name) for name, x in arrays.items()]
    shape = check_same_shape(**dict(zip(arrays, values, strict=True)))
    if not shape:
        raise ValueError(f"{next(iter(arrays))} must have rank >= 1, got a scalar")
    dtype = xp.result_type(*values)
    keep = xp.ones(shape, dtype=bool) if where is None else as_mask(where, "where", shape=shape, xp=xp)
    zero = xp.zeros((), dtype)
    return [xp.where(keep, v.astype(dtype), zero) for v in values], keep


def _mean_of_means(bk: Backend, sums: Any, counts: Any) -> Any:
    xp = bk.xp
    present = counts > 0
    means = xp.where(present, sums / xp.maximum(counts, 1), 0)
    return xp.sum(means) / xp.maximum(xp.count_nonzero(present), 1).astype(sums.dtype)


def _segments(bk: Backend, opts: _Aggregation, shape: tuple[int, ...]) -> tuple[Any, int]:
    """The flat sequence id of every token and the number of sequences, checked (``segment_ids`` given)."""
    ids = bk.as_int(opts.segment_ids, "segment_ids")
    if tuple(ids.shape) != shape:
        raise ValueError(f"segment_ids must have the inputs' shape {shape}, got {tuple(ids.shape)}")
    n = check_int(opts.num_segments, "num_segments", low=0)
    if bk.eager and ids.size and (int(ids.min()) < 0 or int(ids.max()) > n):
        raise ValueError(f"segment_ids must lie in [0, num_segments] = [0, {n}]")
    return ids.reshape(-1), n


def _aggregate(bk: Backend, ell: Any, keep: Any, opts: _Aggregation) -> Any:
    """The aggregated loss in ``ell``'s dtype, summed and divided in float32 at least (``Backend.wide``)."""
    xp = bk.xp
    dtype = ell.dtype
    ell = bk.wide(ell)
    if opts.aggregation == "sum":
        value = xp.sum(ell)
    elif opts.aggregation == "token_mean":
        value = xp.sum(ell) / xp.maximum(xp.count_nonzero(keep), 1).astype(ell.dtype)
    elif opts.segment_ids is not None:
        flat_ids, n = _segments(bk, opts, tuple(ell.shape))
        sums = bk.segment_sum(ell.reshape(-1), flat_ids, n)
        counts = bk.segment_sum(keep.reshape(-1).astype(ell.dtype), flat_ids, n)
        value = _mean_of_means(bk, sums, counts)
    elif ell.ndim >= 2:
        sums = xp.sum(ell, axis=-1).reshape(-1)
        counts = xp.count_nonzero(keep, axis=-1).reshape(-1).astype(ell.dtype)
        value = _mean_of_means(bk, sums, counts)
    else:
        raise ValueError("seq_mean_token_mean on rank-1 (packed) input needs segment_ids and num_segments")
    if opts.normalizer is not None:
        value = value / opts.normalizer
    return xp.asarray(value, dtype=dtype)


def _result(bk: Backend, ell: Any, keep: Any, clipped: Any, opts: _Aggregation) -> TokenLoss[Any]:
    xp = bk.xp
    ell = xp.where(keep, ell, xp.zeros((), ell.dtype))
    n = xp.count_nonzero(keep)
    n_clipped = 0 if clipped is None else xp.count_nonzero(clipped & keep)
    wide = bk.wide(ell).dtype
    fraction = xp.asarray(n_clipped, dtype=wide) / xp.maximum(n, 1).astype(wide)
    return TokenLoss(
        loss=_aggregate(bk, ell, keep, opts),
        per_token_loss=ell,
        num_tokens=xp.asarray(n, dtype=bk.count_dtype),
        clip_fraction=xp.asarray(fraction, dtype=ell.dtype),
    )


def _log_max(dtype: Any) -> float:
    """A log-ratio below which exp stays finite in ``dtype`` (one unit under log(max), for rounding)."""
    return float(np.log(np.finfo(dtype).max)) - 1.0


def _saturated_ratio(bk: Backend, gap: Any) -> Any:
    """ρ = exp(gap) with the exponent capped where exp would overflow: finite, with a finite gradient.

    Only compared with or clipped to thresholds, which the cap (≈ 1e38 in float32) leaves unchanged.
    """
    return bk.xp.exp(bk.xp.minimum(gap, _log_max(gap.dtype)))


def _ratio_times(bk: Backend, gap: Any, adv: Any) -> Any:
    """ρ·A = exp(gap)·A, exactly 0 where A = 0 and never inf·0; value and gradient NaN-free.

    Where exp(gap) is finite this is the plain product; beyond, sign(A)·exp(gap + log|A|), which is
    inf only where |ρ·A| itself overflows. Every branch is fed safe values (the "double where").
    """
    xp = bk.xp
    g = xp.where(adv != 0, gap, 0)
    small = g <= _log_max(gap.dtype)
    with np.errstate(over="ignore"):  # numpy only: an overflow in either branch is the true value's
        direct = xp.exp(xp.where(small, g, 0)) * adv
        scaled = xp.sign(adv) * xp.exp(xp.where(small, 0, g) + xp.log(xp.where(small, 1, xp.abs(adv))))
    return xp.where(small, direct, scaled)


def _aggregate_token_loss(bk: Backend, per_token_loss: Any, where: Any, opts: _Aggregation) -> Any:
    (ell,), keep = _prepare(bk, where, per_token_loss=per_token_loss)
    return _aggregate(bk, ell, keep, opts)


def _importance_sampling(
    bk: Backend, lp: Any, lp_q: Any, adv: Any, where: Any, opts: _Aggregation
) -> TokenLoss[Any]:
    (lp, lp_q, adv), keep = _prepare(bk, where, train_logprobs=lp, sampler_logprobs=lp_q, advantages=adv)
    return _result(bk, -_ratio_times(bk, lp - lp_q, adv), keep, None, opts)


def _clipped_surrogate(bk: Backend, gap: Any, adv: Any, low: float, high: float) -> tuple[Any, Any]:
    """(−min(e^gap·A, clip(e^gap, lo, hi)·A), the tokens that take the clipped branch)."""
    xp = bk.xp
    ratio = _saturated_ratio(bk, gap)
    clipped = ((adv > 0) & (ratio > high)) | ((adv < 0) & (ratio < low))
    bounded = xp.clip(ratio, low, high).astype(ratio.dtype)
    # A clipped token takes the bounded branch; its unclipped branch sees A = 0, so no inf·0 in the
    # gradient of the branch not taken.
    unclipped = _ratio_times(bk, gap, xp.where(clipped, 0, adv))
    return -xp.where(clipped, bounded * adv, unclipped), clipped


def _ppo(
    bk: Backend, lp: Any, lp_q: Any, adv: Any, low: float, high: float, where: Any, opts: _Aggregation
) -> TokenLoss[Any]:
    (lp, lp_q, adv), keep = _prepare(bk, where, train_logprobs=lp, sampler_logprobs=lp_q, advantages=adv)
    ell, clipped = _clipped_surrogate(bk, lp - lp_q, adv, low, high)
    return _result(bk, ell, keep, clipped, opts)


def _sequence_mean(bk: Backend, half: Any, counted: Any, opts: _Aggregation) -> Any:
    """Per token, 2 × the mean of ``half`` over the ``counted`` tokens of its sequence (0 where none is).

    Sequences are the rows of the last axis, or ``opts.segment_ids``. The sum adds half / n per token:
    with |half| ≤ the dtype's max (a half log-ratio of finite inputs), it never overflows, and the mean
    overflows (to ±inf, never NaN) only where its true value does.
    """
    xp = bk.xp
    shape = tuple(half.shape)
    if opts.segment_ids is None:
        n_rows = xp.maximum(xp.count_nonzero(counted, axis=-1, keepdims=True), 1).astype(half.dtype)
        total = xp.sum(xp.where(counted, half / n_rows, 0), axis=-1, keepdims=True)
        return xp.broadcast_to(2 * total, shape)
    ids, n = _segments(bk, opts, shape)
    if n == 0:
        return xp.zeros(shape, half.dtype)
    inside = (ids >= 0) & (ids < n)
    at = xp.where(inside, ids, 0)
    flat = counted.reshape(-1)
    counts = xp.maximum(bk.segment_sum(flat.astype(half.dtype), ids, n), 1)
    per_token = xp.where(flat, half.reshape(-1) / counts[at], 0)
    sums = bk.segment_sum(per_token.astype(half.dtype), ids, n)
    return xp.where(inside, 2 * sums[at], 0).reshape(shape)


def _gspo(
    bk: Backend,
    lp: Any,
    lp_q: Any,
    adv: Any,
    ratio_where: Any,
    low: float,
    high: float,
    where: Any,
    opts: _Aggregation,
) -> TokenLoss[Any]:
    xp = bk.xp
    (lp, lp_q, adv), keep = _prepare(bk, where, train_logprobs=lp, sampler_logprobs=lp_q, advantages=adv)
    if ratio_where is not None:
        keep_ratio = keep & as_mask(ratio_where, "ratio_where", shape=keep.shape, xp=xp)
    else:
        keep_ratio = keep
    fixed = bk.stop_gradient(lp)
    half = bk.wide(fixed) * 0.5 - bk.wide(lp_q) * 0.5  # |half| ≤ max: lp − lp_q itself may overflow
    with np.errstate(over="ignore"):  # numpy only: a mean beyond the dtype's range is ±inf, as it should
        log_s = _sequence_mean(bk, half, keep_ratio, opts).astype(lp.dtype)
    # the sequence's log-ratio as the value, the token's own logprob for the gradient (GSPO-token)
    ell, clipped = _clipped_surrogate(bk, log_s + (lp - fixed), adv, low, high)
    return _result(bk, ell, keep, clipped, opts)


def _cispo(
    bk: Backend, lp: Any, lp_q: Any, adv: Any, low: float, high: float, where: Any, opts: _Aggregation
) -> TokenLoss[Any]:
    xp = bk.xp
    (lp, lp_q, adv), keep = _prepare(bk, where, train_logprobs=lp, sampler_logprobs=lp_q, advantages=adv)
    ratio = _saturated_ratio(bk, lp - lp_q)
    clipped = (ratio < low) | (ratio > high)
    weight = bk.stop_gradient(xp.clip(ratio, low, high).astype(ratio.dtype))
    return _result(bk, -weight * lp * adv, keep, clipped, opts)


def _dro(
    bk: Backend, lp: Any, lp_q: Any, adv: Any, beta: float, where: Any, opts: _Aggregation
) -> TokenLoss[Any]:
    (lp, lp_q, adv), keep = _prepare(bk, where, train_logprobs=lp, sampler_logprobs=lp_q, advantages=adv)
    gap = lp - lp_q
    return _result(bk, -(lp * adv - (0.5 * beta) * gap * gap), keep, None, opts)


def _cross_entropy(bk: Backend, lp: Any, w: Any, where: Any, opts: _Aggregation) -> TokenLoss[Any]:
    (lp, w), keep = _prepare(bk, where, train_logprobs=lp, weights=w)
    return _result(bk, -w * lp, keep, None, opts)


# ---------------------------------------------------------------------------------------------------------
# numpy entry points (kernel.jax wraps the same implementation)


def aggregate_token_loss(
    per_token_loss: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> npt.NDArray[np.floating[Any]]:
    """Reduces per-token loss terms ℓ_t to a scalar.

        sum: Σ_t ℓ_t;   token_mean: Σ_t ℓ_t / max(n, 1);
        seq_mean_token_mean: Σ_s (Σ_{t∈s} ℓ_t / n_s) / max(#{s : n_s > 0}, 1),

    over the tokens selected by ``where`` (n of them, n_s in sequence s), then ÷ ``normalizer``.
    Sequences without a selected token are left out of the sequence mean.

    Args:
        per_token_loss: float [..., T]; any shape of rank ≥ 1.
        where: bool, same shape, the tokens that count (default all).
        aggregation: one of :data:`LOSS_AGGREGATIONS`.
        normalizer: a constant > 0 to divide the result by (default 1).
        segment_ids: int, same shape, the sequence of each token in [0, num_segments]
            (``num_segments`` marks padding); only read by ``"seq_mean_token_mean"``, which needs them
            for rank-1 (packed) inputs and otherwise takes the rows of the last axis.
        num_segments: the number of sequences when ``segment_ids`` is given.

    Returns:
        0-d float array, in the input's float dtype.

    Raises:
        TypeError: non-real values, non-boolean ``where`` or non-integer ``segment_ids``.
        ValueError: unknown aggregation, bad normalizer, mismatched shapes, ids out of range, or
            ``"seq_mean_token_mean"`` on rank-1 input without ``segment_ids``.

    References:
        Tinker built-in losses (sum); verl ``agg_loss`` (token-mean, seq-mean-token-mean);
        Z. Liu et al., "Understanding R1-Zero-Like Training" (Dr. GRPO, constant normaliser), 2025.

    Examples:
        >>> ell = np.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
        >>> keep = np.array([[True, True, True], [True, False, False]])
        >>> for agg in LOSS_AGGREGATIONS:
        ...     print(agg, float(aggregate_token_loss(ell, where=keep, aggregation=agg)))
        sum 10.0
        token_mean 2.5
        seq_mean_token_mean 3.0
        >>> float(aggregate_token_loss(ell, where=keep, normalizer=4.0))
        2.5
    """
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    value: FloatArray = _aggregate_token_loss(NUMPY, per_token_loss, where, opts)
    return value


def importance_sampling_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """Importance-sampled policy gradient (REINFORCE with an off-policy correction).

        ℓ_t = −ρ_t·A_t,   ρ_t = exp(lp_θ,t − lp_q,t);   ∂ℓ_t/∂lp_θ,t = −ρ_t·A_t.

    Args:
        train_logprobs: lp_θ, float [...], the trained policy's logprob of each target token.
        sampler_logprobs: lp_q, float, same shape, the sampler's logprob of the same tokens.
        advantages: A, float, same shape.
        where: bool, same shape, the tokens that count (default all, as in Tinker).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"`` (Tinker).
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`TokenLoss` (``clip_fraction`` is 0).

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, scalar inputs or bad aggregation options.

    References:
        Tinker ``importance_sampling`` loss.

    Examples:
        >>> out = importance_sampling_loss([-1.0, -2.0], [-1.0, -2.0], [1.0, -2.0])
        >>> float(out.loss)
        1.0
    """
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    return _importance_sampling(NUMPY, train_logprobs, sampler_logprobs, advantages, where, opts)


def ppo_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    clip_low_threshold: float = 0.8,
    clip_high_threshold: float = 1.2,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """PPO's clipped surrogate objective, with absolute ratio thresholds.

        ℓ_t = −min(ρ_t·A_t, clip(ρ_t, lo, hi)·A_t).

    The clipped branch is the minimum (and the token gets no gradient) exactly when A > 0 and ρ > hi,
    or A < 0 and ρ < lo; elsewhere ∂ℓ_t/∂lp_θ,t = −ρ_t·A_t. ``clip_fraction`` counts those tokens.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (Tinker's default 0.8, i.e. ε = 0.2).
        clip_high_threshold: hi ≥ lo, an absolute ratio (default 1.2).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"``.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`TokenLoss`.

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, lo > hi or bad aggregation options.

    References:
        J. Schulman et al., "Proximal Policy Optimization Algorithms", 2017; Tinker ``ppo`` loss.

    Examples:
        >>> out = ppo_loss(np.log([1.5, 0.5]), [0.0, 0.0], [1.0, 1.0])
        >>> round(float(out.loss), 6), float(out.clip_fraction)
        (-1.7, 0.5)
    """
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _ppo(NUMPY, train_logprobs, sampler_logprobs, advantages, lo, hi, where, opts)


def gspo_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    clip_low_threshold: float,
    clip_high_threshold: float,
    ratio_where: npt.ArrayLike | None = None,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """GSPO-token: PPO's clipped surrogate on one sequence-level ratio, with each token's own gradient.

        log s = (1/|M|)·Σ_{u∈M} (sg(lp_θ,u) − lp_q,u),   s_t = sg(s)·exp(lp_θ,t − sg(lp_θ,t)),
        ℓ_t = −min(s_t·A_t, clip(s_t, lo, hi)·A_t);   ∂ℓ_t/∂lp_θ,t = −s·A_t, or 0 where clipped.

    M is the sequence's tokens selected by ``ratio_where`` (and ``where``); every token of the sequence
    carries the value s (the geometric mean of the ratios ρ_u over M). A token takes the clipped branch
    (no gradient) exactly when A > 0 and s > hi, or A < 0 and s < lo, so clipping keeps or drops a
    sequence's positive (negative) tokens together. On-policy (lp_θ = lp_q, lo ≤ 1 ≤ hi) s = 1 and the
    loss and its gradient are :func:`importance_sampling_loss`'s; with one token per sequence it is
    :func:`ppo_loss`. A sequence with no token in M has s = 1 (Tinker's mean over an empty set would be
    NaN). The sequence mean never overflows on finite inputs; s and s·A are computed as in
    :func:`ppo_loss` (finite inputs never give NaN).

    Sequences are the rows of the last axis (rank 1: the whole input, one datum), or the ``segment_ids``
    when given; those also define the sequences of ``"seq_mean_token_mean"``.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (required: Tinker's ``loss_fn_config`` key of the same
            name; its default is not documented where this project reads it).
        clip_high_threshold: hi ≥ lo, an absolute ratio (required, as ``clip_low_threshold``).
        ratio_where: bool, same shape, M: the tokens whose log-ratios make up s (Tinker's
            ``sequence_ratio_mask != 0``); default every token of ``where``.
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"`` (Tinker).
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: int, same shape, each token's sequence in [0, num_segments] (``num_segments`` marks
            padding, whose s is 1); default the rows of the last axis.
        num_segments: the number of sequences when ``segment_ids`` is given.

    Returns:
        :class:`TokenLoss`; ``clip_fraction`` is the share of selected tokens on the clipped branch.

    Raises:
        TypeError: non-real inputs or non-boolean ``where`` / ``ratio_where``.
        ValueError: mismatched shapes, lo > hi, ids out of range or bad aggregation options.

    References:
        C. Zheng et al., "Group Sequence Policy Optimization", 2025 (GSPO-token); Tinker ``gspo`` loss.

    Examples:
        >>> lp = np.log([[1.5, 1.5**3]])  # token ratios 1.5 and 1.5³ against lp_q = 0: s = 1.5² = 2.25
        >>> out = gspo_loss(lp, np.zeros((1, 2)), [[1.0, -1.0]], clip_low_threshold=0.8,
        ...                 clip_high_threshold=1.2)
        >>> round(float(out.loss), 6), float(out.clip_fraction)  # −1.2·1 (clipped) − 2.25·(−1)
        (1.05, 0.5)
    """
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _gspo(NUMPY, train_logprobs, sampler_logprobs, advantages, ratio_where, lo, hi, where, opts)


def cispo_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    clip_low_threshold: float = 0.0,
    clip_high_threshold: float = 4.0,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """CISPO: REINFORCE weighted by a clipped, stop-gradient importance ratio.

        ℓ_t = −sg(clip(ρ_t, lo, hi))·lp_θ,t·A_t;   ∂ℓ_t/∂lp_θ,t = −clip(ρ_t, lo, hi)·A_t.

    Unlike PPO no token loses its gradient: clipping only bounds the weight. (numpy computes values
    only; the stop-gradient matters in the JAX twin.)

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (default 0.0, Tinker's).
        clip_high_threshold: hi ≥ lo, an absolute ratio (default 4.0, Tinker's).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"``.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`TokenLoss`; ``clip_fraction`` is the share of tokens with ρ outside [lo, hi].

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, lo > hi or bad aggregation options.

    References:
        MiniMax, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention", 2025;
        Tinker ``cispo`` loss.

    Examples:
        >>> out = cispo_loss([-1.0, -2.0], [-1.0, -2.0 - np.log(8.0)], [1.0, 1.0])
        >>> round(float(out.loss), 6), float(out.clip_fraction)
        (9.0, 0.5)
    """
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _cispo(NUMPY, train_logprobs, sampler_logprobs, advantages, lo, hi, where, opts)


def dro_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    beta: float,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """Direct reward optimisation: a logprob-weighted advantage with a quadratic trust penalty.

        ℓ_t = −(lp_θ,t·A_t − ½·β·(lp_θ,t − lp_q,t)²);   ∂ℓ_t/∂lp_θ,t = −(A_t − β·(lp_θ,t − lp_q,t)).

    With ``where=None`` (Tinker) observation positions still pay the penalty ½·β·(lp_θ − lp_q)²;
    pass the action mask to leave them out.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        beta: β, the penalty strength (required; Tinker's ``loss_fn_config["beta"]``).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"``.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`TokenLoss` (``clip_fraction`` is 0).

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes or bad aggregation options.

    References:
        P. Richemond et al., "Offline Regularised Reinforcement Learning for Large Language Models
        Alignment", 2024; Kimi Team, "Kimi k1.5", 2025; Tinker ``dro`` loss.

    Examples:
        >>> float(dro_loss([-1.0], [-3.0], [2.0], beta=0.5).loss)
        3.0
    """
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    b = check_real(beta, "beta", finite=True)
    return _dro(NUMPY, train_logprobs, sampler_logprobs, advantages, b, where, opts)


def cross_entropy_loss(
    train_logprobs: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: npt.ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[npt.NDArray[Any]]:
    """Weighted negative log-likelihood (supervised fine-tuning).

        ℓ_t = −w_t·lp_θ,t;   ∂ℓ_t/∂lp_θ,t = −w_t.

    ``"token_mean"`` divides by the number of tokens in ``where`` (all tokens by default), not by Σ w;
    pass ``where=weights > 0`` to average over the weighted tokens only.

    Args:
        train_logprobs: lp_θ, float [...].
        weights: w, float, same shape (0 on prompt tokens).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`; default ``"sum"`` (Tinker).
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`TokenLoss` (``clip_fraction`` is 0).

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes or bad aggregation options.

    References:
        Tinker ``cross_entropy`` loss.

    Examples:
        >>> float(cross_entropy_loss([-0.5, -2.0, -1.0], [0.0, 1.0, 1.0]).loss)
        3.0
    """
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    return _cross_entropy(NUMPY, train_logprobs, weights, where, opts)
