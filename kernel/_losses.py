"""Token-level policy-gradient and supervised losses (numpy oracle; the JAX twins in :mod:`kernel.jax`).

Each loss is a pure function of the trained policy's logprobs lp_θ, the sampler's logprobs lp_q, the
advantages A (or the weights w) and an optional boolean ``where`` mask, with ρ = exp(lp_θ − lp_q):

====================  ==========================================
importance_sampling   ℓ = −ρ·A
ppo                   ℓ = −min(ρ·A, clip(ρ, lo, hi)·A)
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
"""

from __future__ import annotations

from typing import Any, Final, Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from kernel._checks import as_float_array, as_int_array, check_same_shape

__all__ = [
    "LOSS_AGGREGATIONS",
    "TokenLoss",
    "aggregate_token_loss",
    "cispo_loss",
    "cross_entropy_loss",
    "dro_loss",
    "importance_sampling_loss",
    "ppo_loss",
]

LOSS_AGGREGATIONS: Final = ("sum", "token_mean", "seq_mean_token_mean")
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


def _check_options(
    aggregation: str, normalizer: float | None, *, low: float | None = None, high: float | None = None
) -> None:
    if aggregation not in LOSS_AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {LOSS_AGGREGATIONS}, got {aggregation!r}")
    if normalizer is not None and not (np.isfinite(normalizer) and normalizer > 0):
        raise ValueError(f"normalizer must be a finite number > 0, got {normalizer!r}")
    if low is not None and high is not None and not low <= high:
        raise ValueError(f"clip thresholds must satisfy low <= high, got low={low!r}, high={high!r}")


def _floats(arrays: dict[str, npt.ArrayLike]) -> tuple[list[FloatArray], np.dtype[Any]]:
    out = [as_float_array(x, name, ndim=np.ndim(x)) for name, x in arrays.items()]
    check_same_shape(**dict(zip(arrays, out, strict=True)))
    if out[0].ndim == 0:
        raise ValueError(f"{next(iter(arrays))} must have rank >= 1, got a scalar")
    dtype = np.result_type(*out)
    return [a.astype(dtype, copy=False) for a in out], dtype


def _keep(where: npt.ArrayLike | None, shape: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    if where is None:
        return np.ones(shape, dtype=bool)
    keep = np.asarray(where)
    if keep.dtype != np.bool_:
        raise TypeError(f"where must be a boolean array (e.g. mask > 0), got dtype {keep.dtype}")
    if keep.shape != shape:
        raise ValueError(f"where must have the inputs' shape {shape}, got {keep.shape}")
    return keep


def _prepare(
    where: npt.ArrayLike | None, **arrays: npt.ArrayLike
) -> tuple[list[FloatArray], npt.NDArray[np.bool_]]:
    values, dtype = _floats(arrays)
    keep = _keep(where, values[0].shape)
    zero = dtype.type(0)
    return [np.where(keep, v, zero) for v in values], keep


def aggregate_token_loss(
    per_token_loss: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer)
    (ell,), keep = _prepare(where, per_token_loss=per_token_loss)
    return _aggregate(ell, keep, aggregation, normalizer, segment_ids, num_segments)


def _aggregate(
    ell: FloatArray,
    keep: npt.NDArray[np.bool_],
    aggregation: str,
    normalizer: float | None,
    segment_ids: npt.ArrayLike | None,
    num_segments: int | None,
) -> FloatArray:
    dtype = ell.dtype
    total = np.sum(ell, dtype=dtype)
    if aggregation == "sum":
        value = total
    elif aggregation == "token_mean":
        value = total / dtype.type(max(int(np.count_nonzero(keep)), 1))
    elif segment_ids is not None:
        ids = as_int_array(segment_ids, "segment_ids", ndim=ell.ndim)
        if ids.shape != ell.shape:
            raise ValueError(f"segment_ids must have the inputs' shape {ell.shape}, got {ids.shape}")
        if num_segments is None or num_segments < 0:
            raise ValueError(f"segment_ids need num_segments >= 0, got {num_segments!r}")
        if ids.size and (ids.min() < 0 or ids.max() > num_segments):
            raise ValueError(f"segment_ids must lie in [0, num_segments] = [0, {num_segments}]")
        flat_ids, flat_keep = ids.reshape(-1), keep.reshape(-1)
        seg_sums = np.bincount(flat_ids, weights=ell.reshape(-1), minlength=num_segments + 1)
        seg_counts = np.bincount(flat_ids, weights=flat_keep, minlength=num_segments + 1)
        value = _mean_of_means(seg_sums[:num_segments].astype(dtype), seg_counts[:num_segments].astype(dtype))
    elif ell.ndim >= 2:
        row_sums = np.sum(ell, axis=-1, dtype=dtype).reshape(-1)
        row_counts = np.count_nonzero(keep, axis=-1).reshape(-1).astype(dtype)
        value = _mean_of_means(row_sums, row_counts)
    else:
        raise ValueError("seq_mean_token_mean on rank-1 (packed) input needs segment_ids and num_segments")
    if normalizer is not None:
        value = value / dtype.type(normalizer)
    return np.asarray(value, dtype=dtype)


def _mean_of_means(sums: FloatArray, counts: FloatArray) -> Any:
    present = counts > 0
    means = np.where(present, sums / np.maximum(counts, 1), 0)
    return np.sum(means, dtype=sums.dtype) / sums.dtype.type(max(int(np.count_nonzero(present)), 1))


def _result(
    ell: FloatArray,
    keep: npt.NDArray[np.bool_],
    clipped: npt.NDArray[np.bool_] | None,
    aggregation: str,
    normalizer: float | None,
    segment_ids: npt.ArrayLike | None,
    num_segments: int | None,
) -> TokenLoss[npt.NDArray[Any]]:
    ell = np.where(keep, ell, ell.dtype.type(0))
    n = int(np.count_nonzero(keep))
    n_clipped = 0 if clipped is None else int(np.count_nonzero(clipped & keep))
    return TokenLoss(
        loss=_aggregate(ell, keep, aggregation, normalizer, segment_ids, num_segments),
        per_token_loss=ell,
        num_tokens=np.asarray(n, dtype=np.int64),
        clip_fraction=np.asarray(n_clipped / max(n, 1), dtype=ell.dtype),
    )


def importance_sampling_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ell = -np.exp(lp - lp_q) * adv
    return _result(ell, keep, None, aggregation, normalizer, segment_ids, num_segments)


def ppo_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    clip_low_threshold: float = 0.8,
    clip_high_threshold: float = 1.2,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer, low=clip_low_threshold, high=clip_high_threshold)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ratio = np.exp(lp - lp_q)
    clipped = ((adv > 0) & (ratio > clip_high_threshold)) | ((adv < 0) & (ratio < clip_low_threshold))
    bounded = np.clip(ratio, clip_low_threshold, clip_high_threshold).astype(ratio.dtype, copy=False)
    ell = -np.where(clipped, bounded * adv, ratio * adv)
    return _result(ell, keep, clipped, aggregation, normalizer, segment_ids, num_segments)


def cispo_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    clip_low_threshold: float = 0.0,
    clip_high_threshold: float = 4.0,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer, low=clip_low_threshold, high=clip_high_threshold)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    ratio = np.exp(lp - lp_q)
    clipped = (ratio < clip_low_threshold) | (ratio > clip_high_threshold)
    weight = np.clip(ratio, clip_low_threshold, clip_high_threshold).astype(ratio.dtype, copy=False)
    ell = -weight * lp * adv
    return _result(ell, keep, clipped, aggregation, normalizer, segment_ids, num_segments)


def dro_loss(
    train_logprobs: npt.ArrayLike,
    sampler_logprobs: npt.ArrayLike,
    advantages: npt.ArrayLike,
    *,
    beta: float,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer)
    (lp, lp_q, adv), keep = _prepare(
        where, train_logprobs=train_logprobs, sampler_logprobs=sampler_logprobs, advantages=advantages
    )
    gap = lp - lp_q
    ell = -(lp * adv - lp.dtype.type(0.5 * beta) * gap * gap)
    return _result(ell, keep, None, aggregation, normalizer, segment_ids, num_segments)


def cross_entropy_loss(
    train_logprobs: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
    aggregation: str = "sum",
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
    _check_options(aggregation, normalizer)
    (lp, w), keep = _prepare(where, train_logprobs=train_logprobs, weights=weights)
    return _result(-w * lp, keep, None, aggregation, normalizer, segment_ids, num_segments)
