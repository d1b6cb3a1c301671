"""JAX twin of :func:`kernel.rae_advantages`: per-key EMA baselines, jit-compatible, state explicit.

The legos order is a segment sum of the batch's rewards per key (one update per key with its batch
mean); the SPIRAL order is a ``lax.scan`` over rows in order, carrying the baselines. The number of
keys ``K`` is the static length of ``baselines_K``; padding rows use key id ``K``. Under jit nothing
can be range-checked by value: an id outside ``[0, K]`` reads as padding, and ``decay`` /
``reward_scaling`` are Python floats checked like numpy's.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from kernel._rae import RAEOrder, _check_decay, _check_order, _check_scaling, check_finite_values
from kernel.jax._checks import as_float, as_int32

__all__ = ["RAEAdvantagesJax", "rae_advantages"]


class RAEAdvantagesJax(NamedTuple):
    """Result of :func:`kernel.jax.rae_advantages` (the fields of :class:`kernel.RAEAdvantages`).

    Attributes:
      advantages: ``[PG]`` float, ``r − b_old`` per row; exactly 0 on masked and padding rows.
      baselines: ``[PG]`` float, the baseline each row was compared against (0 on dead rows).
      baselines_K: ``[K]`` float, the new state.
      counts_K: ``[K]`` int32, how many live rows each key had in this batch.
    """

    advantages: jax.Array
    baselines: jax.Array
    baselines_K: jax.Array
    counts_K: jax.Array


def rae_advantages(
    rewards_PG: ArrayLike,
    key_ids_PG: ArrayLike,
    baselines_K: ArrayLike,
    *,
    decay: float,
    order: RAEOrder = "legos",
    where: ArrayLike | None = None,
    reward_scaling: float = 1.0,
) -> RAEAdvantagesJax:
    """Advantages against per-key EMA baselines, and the updated baselines (JAX, pure, jittable).

    With x = reward_scaling·r:

        legos:  A_i = x_i − b_{k_i};  b_k ← d·b_k + (1 − d)·(Σ_{k_i=k} x_i) / n_k  for keys with n_k > 0
        spiral: for i in row order (lax.scan):  A_i = x_i − b_{k_i};  b_{k_i} ← d·b_{k_i} + (1 − d)·x_i

    Prefer it over :func:`kernel.rae_advantages` inside a jitted JAX training step; the numpy one is
    the oracle (its legos mean is an exact left-to-right float64 sum; here the segment sum may round
    differently in the last bit).

    Args:
      rewards_PG: ``[PG]`` float rewards (ints and bools become float32).
      key_ids_PG: ``[PG]`` int key ids in ``[0, K]``; ``K`` (or any id outside ``[0, K)``) is padding.
      baselines_K: ``[K]`` float, the current baselines; ``K`` is its static length.
      decay: d; ``order="legos"`` accepts 0 ≤ d ≤ 1, ``order="spiral"`` requires 0 < d < 1.
      order: ``"legos"`` (segment-sum batch-mean update) or ``"spiral"`` (sequential scan).
      where: optional ``[PG]`` bool; False rows neither read nor update a baseline and get 0.
      reward_scaling: multiplies every reward first.

    Returns:
      :class:`RAEAdvantagesJax` in the result dtype of ``rewards_PG`` and ``baselines_K``.

    Raises:
      ValueError: unknown ``order``, ``decay`` out of range, non-finite ``reward_scaling``, mismatched
        lengths or ranks.
      TypeError: non-float rewards/baselines, non-integer ids.

    References:
      Liu et al. 2025, "SPIRAL" (role-conditioned advantage estimation); legos ``RAECredit``.

    Examples:
      >>> import kernel.jax as kj
      >>> res = kj.rae_advantages([1.0, 0.0, 3.0], [0, 1, 0], [0.5, 0.0], decay=0.5)
      >>> res.advantages.tolist(), res.baselines_K.tolist()
      ([0.5, 0.0, 2.5], [1.25, 0.0])
      >>> kj.rae_advantages([1.0, 3.0], [0, 0], [0.5], decay=0.5, order="spiral").advantages.tolist()
      [0.5, 2.25]
    """
    _check_order(order)
    d = _check_decay(decay, order)
    scale = _check_scaling(reward_scaling)
    rewards = as_float(rewards_PG, "rewards_PG")
    base = as_float(baselines_K, "baselines_K")
    key_ids = as_int32(key_ids_PG, "key_ids_PG")
    if rewards.ndim != 1:
        raise ValueError(f"rewards_PG must have rank 1, got shape {rewards.shape}")
    if base.ndim != 1:
        raise ValueError(f"baselines_K must have rank 1, got shape {base.shape}")
    if key_ids.shape != rewards.shape:
        raise ValueError(f"key_ids_PG must have shape {rewards.shape}, got {key_ids.shape}")
    num_keys = int(base.shape[0])
    live = (key_ids >= 0) & (key_ids < num_keys)
    if where is not None:
        mask = jnp.asarray(where)
        if mask.dtype != jnp.bool_:
            raise TypeError(f"where must be a bool array, got dtype {mask.dtype}")
        if mask.shape != rewards.shape:
            raise ValueError(f"where must have shape {rewards.shape}, got {mask.shape}")
        live = live & mask
    if not any(isinstance(a, jax.core.Tracer) for a in (rewards, base, live)):  # concrete: numpy's checks
        check_finite_values((np.asarray(rewards, np.float64) * scale)[np.asarray(live)], np.asarray(base))
    dtype = jnp.result_type(rewards.dtype, base.dtype)
    x = rewards.astype(dtype) * scale
    b = base.astype(dtype)
    ids = jnp.where(live, key_ids, num_keys)
    counts = jax.ops.segment_sum(live.astype(jnp.int32), ids, num_segments=num_keys + 1)[:num_keys]

    if order == "legos":
        read = jnp.append(b, jnp.zeros((1,), dtype))[ids]
        # Σ (x_i / n_k) in float32 at least: a plain sum overflows float16 past 65,504 and float32 past
        # 3.4e38, where every term and the mean itself are finite
        wide = jnp.result_type(dtype, jnp.float32)
        n_row = jnp.append(jnp.maximum(counts, 1), 1)[ids].astype(wide)
        shares = jnp.where(live, x.astype(wide) / n_row, 0.0)
        means = jax.ops.segment_sum(shares, ids, num_segments=num_keys + 1)[:num_keys]
        new = jnp.where(counts > 0, d * b.astype(wide) + (1 - d) * means, b.astype(wide)).astype(dtype)
    else:
        padded = jnp.append(b, jnp.zeros((1,), dtype))  # dead rows update the padding slot, dropped
        final, read = _spiral(padded, ids, x, d)
        new = final[:num_keys]

    zero = jnp.zeros((), dtype)
    return RAEAdvantagesJax(
        advantages=jnp.where(live, x - read, zero),
        baselines=jnp.where(live, read, zero),
        baselines_K=new,
        counts_K=counts,
    )


@partial(jax.jit, static_argnums=3)
def _spiral(padded: jax.Array, ids: jax.Array, x: jax.Array, d: float) -> tuple[jax.Array, jax.Array]:
    """The SPIRAL scan in row order: (final baselines [K + 1], each row's baseline before its update).
    One compiled program a shape and decay, also outside ``jit`` (an eager ``lax.scan`` of a fresh
    closure compiled again on every call: 51 ms a call on three rows)."""

    def step(state: jax.Array, row: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        k, xi = row
        old = state[k]
        return state.at[k].set(d * old + (1 - d) * xi), old

    return jax.lax.scan(step, padded, (ids, x))  # type: ignore[no-any-return]
