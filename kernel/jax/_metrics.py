"""JAX twin of :func:`kernel.kl_sample_train`: a thin wrapper of the one implementation in kernel._metrics."""

from __future__ import annotations

import jax
import jax.numpy as jnp  # noqa: F401  (the doctests use it)
from jax.typing import ArrayLike

from kernel._metrics import KLMetrics, _kl_sample_train
from kernel.jax._checks import JAX

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
    return _kl_sample_train(JAX, sampler_logprobs, train_logprobs, mask)
