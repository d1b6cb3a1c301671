"""JAX twins of the token losses in :mod:`kernel._losses`: same signatures, jit / vmap / grad friendly.

Positions outside ``where`` are replaced by 0 before any arithmetic (the "double where"), so NaN or inf
there reach neither the loss nor its gradient. Options (``aggregation``, thresholds, ``beta``,
``normalizer``, ``num_segments``) are Python values: keep them static under ``jax.jit``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from kernel._checks import check_same_shape
from kernel._losses import TokenLoss, _check_options
from kernel.jax._checks import as_float

__all__ = [
    "aggregate_token_loss",
    "cispo_loss",
    "cross_entropy_loss",
    "dro_loss",
    "importance_sampling_loss",
    "ppo_loss",
]


def _prepare(where: ArrayLike | None, **arrays: ArrayLike) -> tuple[list[jax.Array], jax.Array]:
    values = [as_float(x, name) for name, x in arrays.items()]
    check_same_shape(**dict(zip(arrays, values, strict=True)))
    shape = values[0].shape
    if not shape:
        raise ValueError(f"{next(iter(arrays))} must have rank >= 1, got a scalar")
    dtype = jnp.result_type(*values)
    if where is None:
        keep = jnp.ones(shape, dtype=bool)
    else:
        keep = jnp.asarray(where)
        if keep.dtype != jnp.bool_:
            raise TypeError(f"where must be a boolean array (e.g. mask > 0), got dtype {keep.dtype}")
        if keep.shape != shape:
            raise ValueError(f"where must have the inputs' shape {shape}, got {keep.shape}")
    zero = jnp.zeros((), dtype)
    return [jnp.where(keep, v.astype(dtype), zero) for v in values], keep


def _mean_of_means(sums: jax.Array, counts: jax.Array) -> jax.Array:
    present = counts > 0
    means = jnp.where(present, sums / jnp.maximum(counts, 1), 0)
    return jnp.sum(means) / jnp.maximum(jnp.count_nonzero(present), 1).astype(sums.dtype)


def _aggregate(
    ell: jax.Array,
    keep: jax.Array,
    aggregation: str,
    normalizer: float | None,
    segment_ids: ArrayLike | None,
    num_segments: int | None,
) -> jax.Array:
    if aggregation == "sum":
        value = jnp.sum(ell)
    elif aggregation == "token_mean":
        value = jnp.sum(ell) / jnp.maximum(jnp.count_nonzero(keep), 1).astype(ell.dtype)
    elif segment_ids is not None:
        ids = jnp.asarray(segment_ids)
        if not jnp.issubdtype(ids.dtype, jnp.integer):
            raise TypeError(f"segment_ids must be an integer array, got dtype {ids.dtype}")
        if ids.shape != ell.shape:
            raise ValueError(f"segment_ids must have the inputs' shape {ell.shape}, got {ids.shape}")
        if not isinstance(num_segments, int) or num_segments < 0:
            raise ValueError(f"segment_ids need a static num_segments >= 0, got {num_segments!r}")
        flat_ids = ids.reshape(-1)
        sums = jax.ops.segment_sum(ell.reshape(-1), flat_ids, num_segments)
        counts = jax.ops.segment_sum(keep.reshape(-1).astype(ell.dtype), flat_ids, num_segments)
        value = _mean_of_means(sums, counts)
    elif ell.ndim >= 2:
        sums = jnp.sum(ell, axis=-1).reshape(-1)
        counts = jnp.count_nonzero(keep, axis=-1).reshape(-1).astype(ell.dtype)
        value = _mean_of_means(sums, counts)
    else:
        raise ValueError("seq_mean_token_mean on rank-1 (packed) input needs segment_ids and num_segments")
    if normalizer is not None:
        value = value / normalizer
    return value


def _result(
    ell: jax.Array,
    keep: jax.Array,
    clipped: jax.Array | None,
    aggregation: str,
    normalizer: float | None,
    segment_ids: ArrayLike | None,
    num_segments: int | None,
) -> TokenLoss[jax.Array]:
    ell = jnp.where(keep, ell, jnp.zeros((), ell.dtype))
    n = jnp.count_nonzero(keep).astype(jnp.int32)
    if clipped is None:
        fraction = jnp.zeros((), ell.dtype)
    else:
        fraction = jnp.count_nonzero(clipped & keep).astype(ell.dtype) / jnp.maximum(n, 1).astype(ell.dtype)
    return TokenLoss(
        loss=_aggregate(ell, keep, aggregation, normalizer, segment_ids, num_segments),
        per_token_loss=ell,
        num_tokens=n,
        clip_fraction=fraction,
    )


def aggregate_token_loss(
    per_token_loss: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> jax.Array:
    """Reduces per-token loss terms ℓ_t to a scalar; the twin of :func:`kernel.aggregate_token_loss`.

        sum: Σ_t ℓ_t;   token_mean: Σ_t ℓ_t / max(n, 1);
        seq_mean_token_mean: Σ_s (Σ_{t∈s} ℓ_t / n_s) / max(#{s : n_s > 0}, 1),

    then ÷ ``normalizer``. Under jit, ``segment_ids`` outside [0, num_segments) are dropped (so
    ``num_segments`` marks padding) rather than checked.

    Args:
        per_token_loss: float [..., T], rank ≥ 1.
        where: bool, same shape, the tokens that count (default all).
        aggregation: one of :data:`kernel.LOSS_AGGREGATIONS` (static).
        normalizer: a constant > 0 to divide by (static; default 1).
        segment_ids: int, same shape, the sequence of each token (``"seq_mean_token_mean"`` only;
            needed for rank-1 input, otherwise the rows of the last axis are the sequences).
        num_segments: the static number of sequences when ``segment_ids`` is given.

    Returns:
        0-d float array.

    Raises:
        TypeError: non-real values, non-boolean ``where`` or non-integer ``segment_ids``.
        ValueError: unknown aggregation, bad normalizer, mismatched shapes, or
            ``"seq_mean_token_mean"`` on rank-1 input without ``segment_ids``.

    References:
        Tinker built-in losses (sum); verl ``agg_loss``; Z. Liu et al., Dr. GRPO, 2025.

    Examples:
        >>> ell = jnp.array([1.0, 2.0, 3.0, 4.0])
        >>> float(aggregate_token_loss(ell, aggregation="seq_mean_token_mean",
        ...                            segment_ids=jnp.array([0, 0, 0, 1]), num_segments=2))
        3.0
    """
    _check_options(aggregation, normalizer)
    (ell,), keep = _prepare(where, per_token_loss=per_token_loss)
    return _aggregate(ell, keep, aggregation, normalizer, segment_ids, num_segments)


def importance_sampling_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """Importance-sampled policy gradient; the twin of :func:`kernel.importance_sampling_loss`.

        ℓ_t = −ρ_t·A_t,   ρ_t = exp(lp_θ,t − lp_q,t);   ∂ℓ_t/∂lp_θ,t = −ρ_t·A_t.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        where: bool, same shape, the tokens that count (default all, as in Tinker).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays.

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, scalar inputs or bad aggregation options.

    References:
        Tinker ``importance_sampling`` loss.

    Examples:
        >>> lp_q, adv = jnp.array([-1.0, -2.0]), jnp.array([1.0, -2.0])
        >>> jax.grad(lambda lp: importance_sampling_loss(lp, lp_q, adv).loss)(lp_q)  # at ρ = 1: −A
        Array([-1.,  2.], dtype=float32)
    """
    _check_options(aggregation, normalizer)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ell = -jnp.exp(lp - lp_q) * adv
    return _result(ell, keep, None, aggregation, normalizer, segment_ids, num_segments)


def ppo_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    clip_low_threshold: float = 0.8,
    clip_high_threshold: float = 1.2,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """PPO's clipped surrogate; the twin of :func:`kernel.ppo_loss`.

        ℓ_t = −min(ρ_t·A_t, clip(ρ_t, lo, hi)·A_t).

    Written as a select between the two branches, so a token whose clipped branch is the minimum
    (A > 0 and ρ > hi, or A < 0 and ρ < lo) has exactly zero gradient, and every other token
    ∂ℓ_t/∂lp_θ,t = −ρ_t·A_t (at ρ = hi or lo too).

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (default 0.8).
        clip_high_threshold: hi ≥ lo, an absolute ratio (default 1.2).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays.

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, lo > hi or bad aggregation options.

    References:
        J. Schulman et al., "Proximal Policy Optimization Algorithms", 2017; Tinker ``ppo`` loss.

    Examples:
        >>> lp_q, adv = jnp.zeros(2), jnp.ones(2)
        >>> g = jax.grad(lambda lp: ppo_loss(lp, lp_q, adv).loss)(jnp.log(jnp.array([1.5, 1.0])))
        >>> bool(g[0] == 0), float(g[1])  # ρ = 1.5 > hi with A > 0: clipped, no gradient
        (True, -1.0)
    """
    _check_options(aggregation, normalizer, low=clip_low_threshold, high=clip_high_threshold)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ratio = jnp.exp(lp - lp_q)
    clipped = ((adv > 0) & (ratio > clip_high_threshold)) | ((adv < 0) & (ratio < clip_low_threshold))
    bounded = jnp.clip(ratio, clip_low_threshold, clip_high_threshold)
    ell = -jnp.where(clipped, bounded * adv, ratio * adv)
    return _result(ell, keep, clipped, aggregation, normalizer, segment_ids, num_segments)


def cispo_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    clip_low_threshold: float = 0.0,
    clip_high_threshold: float = 4.0,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """CISPO; the twin of :func:`kernel.cispo_loss`.

        ℓ_t = −sg(clip(ρ_t, lo, hi))·lp_θ,t·A_t;   ∂ℓ_t/∂lp_θ,t = −clip(ρ_t, lo, hi)·A_t.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (default 0.0).
        clip_high_threshold: hi ≥ lo, an absolute ratio (default 4.0).
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays; ``clip_fraction`` is the share with ρ outside [lo, hi].

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes, lo > hi or bad aggregation options.

    References:
        MiniMax, "MiniMax-M1", 2025; Tinker ``cispo`` loss.

    Examples:
        >>> lp_q, adv = jnp.array([0.0, 0.0]), jnp.array([1.0, -1.0])
        >>> jax.grad(lambda lp: cispo_loss(lp, lp_q, adv).loss)(jnp.log(jnp.array([8.0, 0.5])))
        Array([-4. ,  0.5], dtype=float32)
    """
    _check_options(aggregation, normalizer, low=clip_low_threshold, high=clip_high_threshold)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ratio = jnp.exp(lp - lp_q)
    clipped = (ratio < clip_low_threshold) | (ratio > clip_high_threshold)
    weight = jax.lax.stop_gradient(jnp.clip(ratio, clip_low_threshold, clip_high_threshold))
    ell = -weight * lp * adv
    return _result(ell, keep, clipped, aggregation, normalizer, segment_ids, num_segments)


def dro_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    beta: float,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """Direct reward optimisation; the twin of :func:`kernel.dro_loss`.

        ℓ_t = −(lp_θ,t·A_t − ½·β·(lp_θ,t − lp_q,t)²);   ∂ℓ_t/∂lp_θ,t = −(A_t − β·(lp_θ,t − lp_q,t)).

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        beta: β, the penalty strength (required).
        where: bool, same shape, the tokens that count (default all; Tinker has no mask).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays.

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes or bad aggregation options.

    References:
        P. Richemond et al., 2024; Kimi Team, "Kimi k1.5", 2025; Tinker ``dro`` loss.

    Examples:
        >>> grad = jax.grad(lambda lp: dro_loss(lp, jnp.array([-3.0]), jnp.array([2.0]), beta=0.5).loss)
        >>> grad(jnp.array([-1.0]))
        Array([-1.], dtype=float32)
    """
    _check_options(aggregation, normalizer)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    gap = lp - lp_q
    ell = -(lp * adv - (0.5 * beta) * gap * gap)
    return _result(ell, keep, None, aggregation, normalizer, segment_ids, num_segments)


def cross_entropy_loss(
    train_logprobs: ArrayLike,
    weights: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: str = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """Weighted negative log-likelihood; the twin of :func:`kernel.cross_entropy_loss`.

        ℓ_t = −w_t·lp_θ,t;   ∂ℓ_t/∂lp_θ,t = −w_t.

    Args:
        train_logprobs: lp_θ, float [...].
        weights: w, float, same shape.
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: see :func:`aggregate_token_loss`.
        num_segments: see :func:`aggregate_token_loss`.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays.

    Raises:
        TypeError: non-real inputs or non-boolean ``where``.
        ValueError: mismatched shapes or bad aggregation options.

    References:
        Tinker ``cross_entropy`` loss.

    Examples:
        >>> float(cross_entropy_loss(jnp.array([-0.5, -2.0]), jnp.array([0.0, 1.0])).loss)
        2.0
    """
    _check_options(aggregation, normalizer)
    (lp, w), keep = _prepare(where, train_logprobs=train_logprobs, weights=weights)
    return _result(-w * lp, keep, None, aggregation, normalizer, segment_ids, num_segments)
