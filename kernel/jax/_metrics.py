"""JAX twin of :func:`kernel.kl_sample_train`: same signature and result type, jit / vmap friendly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from kernel._checks import check_same_shape
from kernel._metrics import KLMetrics
from kernel.jax._checks import as_float

__all__ = ["kl_sample_train"]


def kl_sample_train(
    sampler_logprobs: ArrayLike, train_logprobs: ArrayLike, mask: ArrayLike
) -> KLMetrics[jax.Array]:
    """KL between the sampling and the training policy, and sampler entropy, over action tokens.

    With d = lp_q − lp_θ on the n action tokens (positions with mask > 0) of the whole batch:

        kl_sample_train_v1 = Σ d / n,   kl_sample_train_v2 = ½·Σ d² / n,   entropy = −Σ lp_q / n.

    The JAX twin of :func:`kernel.kl_sample_train` (see there); shapes are static, so the "no action
    token" case is a value, not a branch: NaN values and ``num_action_tokens == 0``. Positions with
    mask ≤ 0 are replaced by 0 before any arithmetic, so NaN / inf there reach neither values nor
    gradients.

    Args:
        sampler_logprobs: lp_q, float [...], any shape (packed ``[T]`` or padded ``[D, T]``).
        train_logprobs: lp_θ, float [...], same shape.
        mask: bool or real [...], same shape; action tokens are ``mask > 0``.

    Returns:
        :class:`kernel.KLMetrics` of 0-d JAX arrays (``num_action_tokens`` int32).

    Raises:
        TypeError: non-real inputs.
        ValueError: the three shapes differ.

    References:
        tinker-cookbook ``rl`` training loop, ``compute_kl_sample_train``.

    Examples:
        >>> m = kl_sample_train(jnp.array([-1.0, -2.0, -0.5]), jnp.array([-1.5, -2.0, -9.0]),
        ...                     jnp.array([1.0, 1.0, 0.0]))
        >>> float(m.kl_sample_train_v1), float(m.kl_sample_train_v2), float(m.entropy)
        (0.25, 0.0625, 1.5)
    """
    lp_q = as_float(sampler_logprobs, "sampler_logprobs")
    lp_t = as_float(train_logprobs, "train_logprobs")
    raw_mask = jnp.asarray(mask)
    real = jnp.issubdtype(raw_mask.dtype, jnp.integer) or jnp.issubdtype(raw_mask.dtype, jnp.floating)
    if not (raw_mask.dtype == jnp.bool_ or real):
        raise TypeError(f"mask must be a boolean or real array, got dtype {raw_mask.dtype}")
    check_same_shape(sampler_logprobs=lp_q, train_logprobs=lp_t, mask=raw_mask)
    dtype = jnp.result_type(lp_q, lp_t)
    action = raw_mask > 0
    zero = jnp.zeros((), dtype)
    lp_q = jnp.where(action, lp_q.astype(dtype), zero)
    diff = lp_q - jnp.where(action, lp_t.astype(dtype), zero)
    n = jnp.count_nonzero(action).astype(jnp.int32)
    count = jnp.maximum(n, 1).astype(dtype)
    empty = n == 0
    nan = jnp.asarray(jnp.nan, dtype)
    v1 = jnp.where(empty, nan, jnp.sum(diff) / count)
    v2 = jnp.where(empty, nan, 0.5 * (jnp.sum(diff * diff) / count))
    entropy = jnp.where(empty, nan, -(jnp.sum(lp_q) / count))
    return KLMetrics(v1, v2, entropy, n)
