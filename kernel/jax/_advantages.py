"""JAX twin of :mod:`kernel._advantages`: grouped advantages under ``jit`` / ``vmap``, float32.

Same signatures and equations as the numpy estimator; ``num_groups`` and every option are static
(Python values; jit with ``static_argnames`` or ``functools.partial``). Ids outside
``[0, num_groups)`` are padding (under jit a bad id cannot raise). Differences from numpy:

* float32 throughout (numpy's ``"exact"`` arithmetic is float64), with sums taken as deviations from
  each group's largest reward, so a constant group still gives exactly 0;
* only ``arithmetic="exact"``: the reference arithmetics reproduce torch / Python operation orders
  and live in numpy; :func:`advantages_from_preset` runs a preset's options in this arithmetic;
* ``singleton="error"`` cannot raise on traced values and is refused;
* with ``trajectory_ids``, samples are numbered in sorted (group, trajectory) order rather than
  first appearance (this changes nothing in the result).

Examples:
  >>> import jax
  >>> from functools import partial
  >>> fn = jax.jit(partial(grouped_advantages, num_groups=2, scale="group"))
  >>> fn(jnp.array([1.0, 3.0, 5.0, 5.0]), jnp.array([0, 0, 1, 1])).advantages
  Array([-0.7071063,  0.7071063,  0.       ,  0.       ], dtype=float32)
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from kernel._advantages import (
    ADVANTAGE_PRESETS,
    Arithmetic,
    Baseline,
    Scale,
    Singleton,
    _check_num_groups,
    _check_options,
)

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
      advantages: ``[N]`` float32, 0 on excluded and padding rows.
      group_mean: ``[P]`` float32 μ_g (0 for an empty group).
      group_std: ``[P]`` float32 σ_g with the requested ddof (0 where n ≤ ddof).
      group_count: ``[P]`` int32 included samples.
      group_constant: ``[P]`` bool, all included samples equal (false for an empty group).
      num_excluded: int32 scalar, live rows left out by ``where`` or a non-finite reward.
      num_nonfinite: int32 scalar, of those the rows with a NaN / ±inf reward.
    """

    advantages: jax.Array
    group_mean: jax.Array
    group_std: jax.Array
    group_count: jax.Array
    group_constant: jax.Array
    num_excluded: jax.Array
    num_nonfinite: jax.Array


def advantages_from_preset(
    name: str,
    rewards: ArrayLike,
    group_ids: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    trajectory_ids: ArrayLike | None = None,
) -> GroupedAdvantages:
    """Runs :func:`grouped_advantages` with the options of preset ``name`` in float32 ``"exact"``.

    The preset's semantics (baseline, scaling, eps, singleton rule…) carry over; its reference
    arithmetic does not (bit-exact reproduction of a reference is numpy's job).

    Args:
      name: a key of :data:`kernel.ADVANTAGE_PRESETS` (static).
      rewards, group_ids, num_groups, where, trajectory_ids: as in :func:`grouped_advantages`.

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      KeyError: unknown preset.

    Examples:
      >>> r, ids = jnp.array([1.0, 0.0, 0.7]), jnp.array([0, 0, 1])
      >>> advantages_from_preset("verl_grpo.norm", r, ids, 2).advantages
      Array([ 0.70710576, -0.70710576,  0.6999993 ], dtype=float32)
    """
    try:
        options = ADVANTAGE_PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown advantage preset {name!r}; known: {', '.join(ADVANTAGE_PRESETS)}") from None
    kwargs = asdict(replace(options, arithmetic="exact"))
    return grouped_advantages(
        rewards, group_ids, num_groups, where=where, trajectory_ids=trajectory_ids, **kwargs
    )


def grouped_advantages(
    rewards: ArrayLike,
    group_ids: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    trajectory_ids: ArrayLike | None = None,
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
      rewards: ``[N]`` float (cast to float32).
      group_ids: ``[N]`` int; ids outside ``[0, num_groups)`` are padding.
      num_groups: P (static).
      where: ``[N]`` bool, rows to include.
      trajectory_ids: ``[N]`` int; rows with equal (group, trajectory) are averaged into one sample.
      baseline, scale, ddof, eps, var_floor, min_std, singleton, positive_only: as in numpy (static).
      arithmetic: must be ``"exact"``.

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      ValueError: bad shapes or options, ``arithmetic`` other than ``"exact"``, ``singleton="error"``.

    Examples:
      >>> r, ids = jnp.array([1.0, 0.0, 0.5, 0.5, 2.0]), jnp.array([0, 0, 1, 1, 2])
      >>> grouped_advantages(r, ids, 3).advantages
      Array([ 0.5, -0.5,  0. ,  0. ,  0. ], dtype=float32)
    """
    p = _check_num_groups(num_groups)
    _check_options(baseline, scale, ddof, eps, var_floor, min_std, singleton, arithmetic)
    if arithmetic != "exact":
        raise ValueError(
            f"arithmetic={arithmetic!r} reproduces a reference's float32 operation order and exists only in "
            "numpy (kernel.grouped_advantages); the JAX twin computes arithmetic='exact'"
        )
    if singleton == "error":
        raise ValueError("singleton='error' cannot raise on traced values; use 'zero' or 'raw'")
    r = _vector(rewards, "rewards", jnp.float32)
    g = _vector(group_ids, "group_ids", jnp.int32, r.shape[0])
    live = (g >= 0) & (g < p)
    asked = live if where is None else live & _vector(where, "where", jnp.bool_, r.shape[0])
    valid = asked & jnp.isfinite(r)
    x = jnp.where(valid, r, 0.0)

    sample_of_row, h, included = None, g, valid
    if trajectory_ids is not None:
        t = _vector(trajectory_ids, "trajectory_ids", jnp.int32, r.shape[0])
        sample_of_row, x, h = _trajectory_samples(x, jnp.where(valid, g, p), t, valid, p)
        included = h < p

    a, mean, std, count, constant = _core(
        x, h, included, p, baseline, scale, ddof, eps, var_floor, min_std, singleton
    )
    if positive_only:
        a = jnp.maximum(a, 0.0)
    if sample_of_row is not None:
        a = a[sample_of_row]
    a = jnp.where(valid, a, 0.0)
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
    )


def _vector(x: ArrayLike, name: str, dtype: Any, length: int | None = None) -> jax.Array:
    arr = jnp.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have rank 1, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} must have length {length} (as rewards), got {arr.shape[0]}")
    if dtype is jnp.bool_ and arr.dtype != jnp.bool_:
        raise TypeError(f"{name} must be a boolean array, got dtype {arr.dtype}")
    if dtype is jnp.int32 and not jnp.issubdtype(arr.dtype, jnp.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(dtype)


def _trajectory_samples(
    x: jax.Array, h: jax.Array, t: jax.Array, valid: jax.Array, p: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Averages the rows of each (group, trajectory) pair into one sample (N sample slots)."""
    n = x.shape[0]
    order = jnp.lexsort((t, h))
    hs, ts = h[order], t[order]
    new = jnp.ones(n, bool).at[1:].set((hs[1:] != hs[:-1]) | (ts[1:] != ts[:-1])) if n else hs > 0
    pair = jnp.zeros(n, jnp.int32).at[order].set(jnp.cumsum(new, dtype=jnp.int32) - 1)
    count = jax.ops.segment_sum(valid.astype(jnp.int32), pair, n)
    total = jax.ops.segment_sum(x, pair, n)
    values = total / jnp.maximum(count, 1)
    group = jax.ops.segment_max(h, pair, n)
    group = jnp.where(count > 0, group, p)
    return pair, values, group


def _core(
    x: jax.Array,
    h: jax.Array,
    included: jax.Array,
    p: int,
    baseline: str,
    scale: str,
    ddof: int,
    eps: float,
    var_floor: float,
    min_std: float | None,
    singleton: str,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """float32 estimator on samples ``x`` (0 where not ``included``) with groups ``h``.

    Sums are of deviations d = x − max_g ≤ 0 from the group's largest sample: a group is constant
    exactly when Σd = 0 (a sum of non-positive numbers), its mean is then max_g exactly, and a large
    common offset costs float32 no precision. Ids outside ``[0, p)`` fall out of every segment op.
    """
    n = jax.ops.segment_sum(included.astype(jnp.int32), h, p)
    top = jax.ops.segment_max(jnp.where(included, x, -jnp.inf), h, p)
    top = jnp.where(n > 0, top, 0.0)
    d = jnp.where(included, x - top[h], 0.0)
    total = jax.ops.segment_sum(d, h, p)
    constant = (total == 0.0) & (n > 0)
    shift = total / jnp.maximum(n, 1)
    mean = top + shift
    single = n == 1
    # verl's group of one: μ := 0, so the centred value is the sample itself (d − (−top) = x).
    centre = jnp.where(single, -top, shift) if singleton == "raw" else shift
    c = jnp.where(included, d - centre[h], 0.0)
    m2 = jnp.where(constant, 0.0, jax.ops.segment_sum(c * c, h, p))
    dof = n - ddof
    std = jnp.where(dof > 0, jnp.sqrt(jnp.maximum(m2 / jnp.maximum(dof, 1), var_floor)), 0.0)
    if baseline == "leave_one_out":
        factor = n / jnp.maximum(n - 1, 1).astype(jnp.float32)
    else:
        factor = jnp.ones(p, jnp.float32)
    if scale == "group":
        denom = std + eps
        divide = (dof > 0) & (denom > 0)
        if min_std is not None:
            divide = divide & (std > min_std)
        factor = jnp.where(divide, factor / jnp.where(divide, denom, 1.0), factor)
    factor = jnp.where(constant | (n == 0), 0.0, factor)
    if singleton == "raw":
        factor = jnp.where(single, 1.0 / (1.0 + eps) if scale == "group" else 1.0, factor)
    a = jnp.where(included, c * factor[h], 0.0)
    if scale == "batch":
        _, sd = _masked_mean_std(x, included, ddof)
        a = a / jnp.where(sd + eps > 0, sd + eps, 1.0)
    elif scale == "whiten":
        mu, sd = _masked_mean_std(a, included, ddof)
        a = jnp.where(sd > 0, (a - mu) / jnp.where(sd > 0, sd + eps, 1.0), 0.0)
    mean = jnp.where(n > 0, mean, 0.0)
    return a, mean, std, n, constant


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
    step_rewards: ArrayLike,
    step_episode_ids: ArrayLike,
    num_episodes: int,
    final_rewards: ArrayLike,
    *,
    where: ArrayLike | None = None,
) -> jax.Array:
    """Episode returns R_e = Σ_{t ∈ e} r_t + R_final,e in float32 (see :func:`kernel.total_returns`).

    Args:
      step_rewards: ``[T]`` float.
      step_episode_ids: ``[T]`` int; ids outside ``[0, num_episodes)`` are padding.
      num_episodes: E (static).
      final_rewards: ``[E]`` float.
      where: ``[T]`` bool, steps to count.

    Returns:
      ``[E]`` float32.

    Raises:
      ValueError: bad shapes.

    Examples:
      >>> total_returns(jnp.array([-1.0, 0.0, -1.0]), jnp.array([0, 0, 1]), 2, jnp.array([0.5, 1.0]))
      Array([-0.5,  0. ], dtype=float32)
    """
    e = _check_num_groups(num_episodes)
    r = _vector(step_rewards, "step_rewards", jnp.float32)
    ids = _vector(step_episode_ids, "step_episode_ids", jnp.int32, r.shape[0])
    final = _vector(final_rewards, "final_rewards", jnp.float32, e)
    counted = (ids >= 0) & (ids < e)
    if where is not None:
        counted = counted & _vector(where, "where", jnp.bool_, r.shape[0])
    steps = jax.ops.segment_sum(jnp.where(counted, r, 0.0), jnp.where(counted, ids, e), e + 1)
    return steps[:e] + final


def constant_group_keep_mask(
    rewards: ArrayLike,
    group_ids: ArrayLike,
    num_groups: int,
    *,
    where: ArrayLike | None = None,
    atol: float = 0.0,
    keep_one_if_all_constant: bool = False,
) -> jax.Array:
    """Rows to keep after dropping constant-reward groups (see :func:`kernel.constant_group_keep_mask`).

    Args:
      rewards: ``[N]`` float.
      group_ids: ``[N]`` int; ids outside ``[0, num_groups)`` are padding (never kept).
      num_groups: P (static).
      where: ``[N]`` bool, rows to consider.
      atol: groups spanning at most ``atol`` are constant.
      keep_one_if_all_constant: keep the lowest-id non-empty group when every group is constant.

    Returns:
      ``[N]`` bool.

    Raises:
      ValueError: bad shapes or ``atol``.

    Examples:
      >>> constant_group_keep_mask(jnp.array([1.0, 1.0, 0.0, 1.0]), jnp.array([0, 0, 1, 1]), 2)
      Array([False, False,  True,  True], dtype=bool)
    """
    p = _check_num_groups(num_groups)
    if not atol >= 0:
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    r = _vector(rewards, "rewards", jnp.float32)
    g = _vector(group_ids, "group_ids", jnp.int32, r.shape[0])
    valid = (g >= 0) & (g < p) & jnp.isfinite(r)
    if where is not None:
        valid = valid & _vector(where, "where", jnp.bool_, r.shape[0])
    h = jnp.where(valid, g, p)
    hi = jax.ops.segment_max(jnp.where(valid, r, -jnp.inf), h, p + 1)
    lo = jax.ops.segment_min(jnp.where(valid, r, jnp.inf), h, p + 1)
    varying = (hi - lo) > atol
    keep = valid & varying[h]
    if keep_one_if_all_constant:
        first = jnp.min(jnp.where(valid, h, p), initial=p)
        keep = jnp.where(jnp.any(keep), keep, valid & (h == first))
    return keep
