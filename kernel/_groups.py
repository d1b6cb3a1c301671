"""Group keys, episode returns and constant-group filtering: the steps around the advantage estimator.

:func:`dense_group_ids` turns row keys (question, agent, …) into the int32 group ids the estimators
take; :func:`total_returns` sums per-step rewards into one return per episode; and
:func:`constant_group_keep_mask` drops groups whose rewards are all equal (tinker-cookbook
``remove_constant_reward_groups``). The argument checks shared with the JAX twins live here too.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Hashable, Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from kernel._checks import (
    as_bool_array,
    as_float_array,
    as_int_array,
    check_bool,
    check_group_ids,
    check_same_length,
)

__all__ = ["constant_group_keep_mask", "dense_group_ids", "total_returns"]

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]


def check_num_groups(num_groups: int, name: str = "num_groups") -> int:
    """``num_groups`` as a Python int >= 0; raises TypeError / ValueError naming ``name`` otherwise."""
    if isinstance(num_groups, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        p = operator.index(num_groups)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(num_groups).__name__}") from None
    if p < 0:
        raise ValueError(f"{name} must be >= 0, got {p}")
    return p


def check_nonnegative(value: object, name: str, *, optional: bool = False) -> float:
    """A finite real number >= 0 (None allowed when ``optional``); raises naming ``name`` otherwise."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        expected = "a finite number >= 0" + (" or None" if optional else "")
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def dense_group_ids(*keys_PG: npt.ArrayLike | Sequence[Hashable]) -> tuple[npt.NDArray[np.int32], int]:
    """Dense int32 group ids of the distinct key tuples, numbered in order of first appearance.

    id_i = rank of (k¹_i, k²_i, …) among the distinct tuples, by first row where it occurs.

    Args:
      *keys_PG: one or more ``[PG]`` arrays or sequences of hashables (str, int, …), one value per
        row: question id, agent id, episode type, hierarchy level… A row's group is the tuple of its
        keys.

    Returns:
      ``(group_ids_PG [PG] int32, num_groups)``.

    Raises:
      ValueError: no keys, a key that is not one-dimensional, keys of different lengths, or a NaN key
        (NaN ≠ NaN: its rows would be one group or many depending on how the keys were passed).

    Examples:
      >>> dense_group_ids(["q7", "q7", "q2", "q7"], ["a", "b", "a", "a"])
      (array([0, 1, 2, 0], dtype=int32), 3)
    """
    if not keys_PG:
        raise ValueError("dense_group_ids needs at least one key array")
    codes = [_dense_codes(k, f"keys_PG[{i}]") for i, k in enumerate(keys_PG)]
    check_same_length(**{f"keys_PG[{i}]": c for i, c in enumerate(codes)})
    combined = codes[0]
    for c in codes[1:]:
        width = int(c.max()) + 1 if c.size else 1
        combined, _ = _first_appearance(combined * width + c)
    ids, count = _first_appearance(combined)
    return ids.astype(np.int32), count


def _dense_codes(key: Any, name: str) -> IntArray:
    """Codes of one key array in first-appearance order (numpy fast path, else a dict over values)."""
    if isinstance(key, (list, tuple)):
        arr = np.empty(len(key), dtype=object)
        arr[:] = list(key)
    else:
        arr = np.asarray(key)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "fc" and bool(np.isnan(arr).any()):
        row = int(np.flatnonzero(np.isnan(arr))[0])
        raise ValueError(f"{name} holds NaN at row {row}: a key must equal itself")
    if arr.dtype.kind in "biufUS":
        return _first_appearance(arr)[0]
    lookup: dict[Hashable, int] = {}
    codes = np.fromiter((lookup.setdefault(v, len(lookup)) for v in arr), np.int64, arr.shape[0])
    # each distinct key once, compared with itself in one numpy pass: a NaN (any float type) would be a
    # group of its own per object (a dict finds a key by identity first)
    distinct = np.fromiter(lookup, object, len(lookup))
    unequal = np.flatnonzero(distinct != distinct)
    if unequal.size:
        row = int(np.flatnonzero(codes == unequal[0])[0])
        raise ValueError(f"{name} holds NaN at row {row}: a key must equal itself")
    return codes


def _first_appearance(arr: npt.NDArray[Any]) -> tuple[IntArray, int]:
    if arr.size == 0:
        return np.zeros(0, np.int64), 0
    _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)], int(first.shape[0])


def total_returns(
    step_rewards_U: npt.ArrayLike,
    step_episode_ids_U: npt.ArrayLike,
    num_episodes: int,
    final_rewards_E: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
) -> FloatArray:
    """Episode returns: the sum of an episode's per-step rewards plus its final reward.

    R_e = Σ_{t : episode(t) = e} r_t + R_final,e (e.g. −1 parse penalties plus the pairwise reward).

    Args:
      step_rewards_U: ``[U]`` float, one per step (turn) of any episode.
      step_episode_ids_U: ``[U]`` int in ``[0, num_episodes]``; ``num_episodes`` marks padding steps.
      num_episodes: E.
      final_rewards_E: ``[E]`` float.
      where: ``[U]`` bool, steps to count (default all).

    Returns:
      ``[E]`` float in the wider of the two input dtypes. A NaN step or final reward makes that
      episode's return NaN (which :func:`grouped_advantages` then excludes).

    Raises:
      ValueError / TypeError: bad shapes, dtypes or ids.

    Examples:
      >>> total_returns([-1.0, 0.0, -1.0], [0, 0, 1], 2, [0.5, 1.0])
      array([-0.5,  0. ])
    """
    e = check_num_groups(num_episodes, "num_episodes")
    r = as_float_array(step_rewards_U, "step_rewards_U")
    ids = as_int_array(step_episode_ids_U, "step_episode_ids_U")
    final = as_float_array(final_rewards_E, "final_rewards_E")
    check_same_length(step_rewards_U=r, step_episode_ids_U=ids)
    check_group_ids(ids, e, "step_episode_ids_U")
    if final.shape[0] != e:
        raise ValueError(f"final_rewards_E must have length num_episodes={e}, got {final.shape[0]}")
    if where is not None:
        w = as_bool_array(where, "where")
        check_same_length(step_rewards_U=r, where=w)
        ids = np.where(w, ids, e)
    steps = np.zeros(e + 1, np.float64)
    np.add.at(steps, ids, r.astype(np.float64))
    out = steps[:e] + final
    return out.astype(np.result_type(r.dtype, final.dtype), copy=False)


def constant_group_keep_mask(
    rewards_PG: npt.ArrayLike,
    group_ids_PG: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    atol: float = 0.0,
    keep_one_if_all_constant: bool = False,
) -> BoolArray:
    """Rows to keep after dropping constant-reward groups (they carry no GRPO gradient).

    keep_i = where_i ∧ finite(r_i) ∧ (max_g r − min_g r > atol), g = group of row i.

    Args:
      rewards_PG: ``[PG]`` float.
      group_ids_PG: ``[PG]`` int in ``[0, num_groups]`` (``num_groups`` = padding, never kept).
      num_groups: P.
      where: ``[PG]`` bool, rows to consider (default all); others are never kept.
      atol: groups whose included rewards span at most ``atol`` count as constant.
      keep_one_if_all_constant: when every group is constant, keep the lowest-id non-empty group
        rather than nothing (tinker-cookbook ``remove_constant_reward_groups``).

    Returns:
      ``[PG]`` bool. A group of one is constant.

    Raises:
      ValueError / TypeError: bad shapes, dtypes or ids.

    Examples:
      >>> constant_group_keep_mask([1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1], 2)
      array([False, False,  True,  True])
      >>> constant_group_keep_mask([1.0, 1.0, 2.0], [0, 0, 1], 2, keep_one_if_all_constant=True)
      array([ True,  True, False])
    """
    p = check_num_groups(num_groups)
    tolerance = check_nonnegative(atol, "atol")
    r = as_float_array(rewards_PG, "rewards_PG")
    g = as_int_array(group_ids_PG, "group_ids_PG")
    check_same_length(rewards_PG=r, group_ids_PG=g)
    check_group_ids(g, p, "group_ids_PG")
    keep_one = check_bool(keep_one_if_all_constant, "keep_one_if_all_constant")
    valid = (g < p) & np.isfinite(r)
    if where is not None:
        w = as_bool_array(where, "where")
        check_same_length(rewards_PG=r, where=w)
        valid &= w
    h = np.where(valid, g, p)
    lo = np.full(p + 1, np.inf)
    hi = np.full(p + 1, -np.inf)
    np.minimum.at(lo, h, np.where(valid, r, np.inf))
    np.maximum.at(hi, h, np.where(valid, r, -np.inf))
    varying = (hi - lo) > tolerance  # inf - inf is nan for empty groups: not varying
    keep: BoolArray = valid & varying[h]
    if keep_one and not keep.any() and valid.any():
        keep = valid & (h == h[valid].min())
    return keep
