"""JAX twins of the token losses in :mod:`kernel._losses`: same signatures, jit / vmap / grad friendly.

Thin wrappers: the one implementation lives in :mod:`kernel._losses` and is written against the array
namespace; here it runs on ``jax.numpy`` with ``jax.lax.stop_gradient`` (cispo's weight, gspo's sequence
ratio) and ``jax.ops.segment_sum``. Positions outside ``where`` are replaced by 0 before any arithmetic
(the "double where"), so NaN or inf there reach neither the loss nor its gradient. Options
(``aggregation``, thresholds, ``beta``, ``normalizer``, ``num_segments``) are Python values: keep them
static under ``jax.jit``. Under jit, ``segment_ids`` cannot be range-checked: ids outside
``[0, num_segments)`` drop out.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp  # noqa: F401  (the doctests use it)
from jax.typing import ArrayLike

from kernel._checks import check_real
from kernel._losses import (
    LossAggregation,
    TokenLoss,
    _aggregate_token_loss,
    _cispo,
    _cross_entropy,
    _dro,
    _gspo,
    _importance_sampling,
    _options,
    _ppo,
)
from kernel.jax._checks import JAX

__all__ = [
    "aggregate_token_loss",
    "cispo_loss",
    "cross_entropy_loss",
    "dro_loss",
    "gspo_loss",
    "importance_sampling_loss",
    "ppo_loss",
]


def aggregate_token_loss(
    per_token_loss: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    value: jax.Array = _aggregate_token_loss(JAX, per_token_loss, where, opts)
    return value


def importance_sampling_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    return _importance_sampling(JAX, train_logprobs, sampler_logprobs, advantages, where, opts)


def ppo_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    clip_low_threshold: float = 0.8,
    clip_high_threshold: float = 1.2,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _ppo(JAX, train_logprobs, sampler_logprobs, advantages, lo, hi, where, opts)


def gspo_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    clip_low_threshold: float,
    clip_high_threshold: float,
    ratio_where: ArrayLike | None = None,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
    normalizer: float | None = None,
    segment_ids: ArrayLike | None = None,
    num_segments: int | None = None,
) -> TokenLoss[jax.Array]:
    """GSPO-token; the twin of :func:`kernel.gspo_loss`.

        log s = (1/|M|)·Σ_{u∈M} (sg(lp_θ,u) − lp_q,u),   s_t = sg(s)·exp(lp_θ,t − sg(lp_θ,t)),
        ℓ_t = −min(s_t·A_t, clip(s_t, lo, hi)·A_t);   ∂ℓ_t/∂lp_θ,t = −s·A_t, or 0 where clipped.

    The sequence ratio is a stop-gradient: a token's logprob reaches no other token's loss. Under jit,
    ``segment_ids`` outside [0, num_segments) give their tokens s = 1 and drop out of the sums.

    Args:
        train_logprobs: lp_θ, float [...].
        sampler_logprobs: lp_q, float, same shape.
        advantages: A, float, same shape.
        clip_low_threshold: lo, an absolute ratio (required).
        clip_high_threshold: hi ≥ lo, an absolute ratio (required).
        ratio_where: bool, same shape, M (Tinker's ``sequence_ratio_mask != 0``); default ``where``.
        where: bool, same shape, the tokens that count (default all).
        aggregation: see :func:`aggregate_token_loss`.
        normalizer: see :func:`aggregate_token_loss`.
        segment_ids: int, same shape, each token's sequence (default the rows of the last axis).
        num_segments: the static number of sequences when ``segment_ids`` is given.

    Returns:
        :class:`kernel.TokenLoss` of JAX arrays.

    Raises:
        TypeError: non-real inputs or non-boolean ``where`` / ``ratio_where``.
        ValueError: mismatched shapes, lo > hi or bad aggregation options.

    References:
        C. Zheng et al., "Group Sequence Policy Optimization", 2025; Tinker ``gspo`` loss.

    Examples:
        >>> lp_q, adv = jnp.array([[-1.0, -2.0]]), jnp.array([[1.0, -1.0]])
        >>> def loss(lp):
        ...     return gspo_loss(lp, lp_q, adv, clip_low_threshold=0.8, clip_high_threshold=1.2).loss
        >>> jax.grad(loss)(lp_q)  # on-policy, s = 1: −A, as importance sampling
        Array([[-1.,  1.]], dtype=float32)
    """
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _gspo(JAX, train_logprobs, sampler_logprobs, advantages, ratio_where, lo, hi, where, opts)


def cispo_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    clip_low_threshold: float = 0.0,
    clip_high_threshold: float = 4.0,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(
        aggregation, normalizer, segment_ids, num_segments, low=clip_low_threshold, high=clip_high_threshold
    )
    lo, hi = float(clip_low_threshold), float(clip_high_threshold)
    return _cispo(JAX, train_logprobs, sampler_logprobs, advantages, lo, hi, where, opts)


def dro_loss(
    train_logprobs: ArrayLike,
    sampler_logprobs: ArrayLike,
    advantages: ArrayLike,
    *,
    beta: float,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    b = check_real(beta, "beta", finite=True)
    return _dro(JAX, train_logprobs, sampler_logprobs, advantages, b, where, opts)


def cross_entropy_loss(
    train_logprobs: ArrayLike,
    weights: ArrayLike,
    *,
    where: ArrayLike | None = None,
    aggregation: LossAggregation = "sum",
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
    opts = _options(aggregation, normalizer, segment_ids, num_segments)
    return _cross_entropy(JAX, train_logprobs, weights, where, opts)
