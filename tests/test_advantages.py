"""Grouped advantages: hand-computed examples, option semantics, golden semantics, numpy ↔ JAX parity."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, replace
from functools import partial
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

import kernel
import kernel.jax as kjax
import tests.golden._advantages as golden_check
from kernel import (
    ADVANTAGE_PRESETS,
    AdvantageOptions,
    GroupedAdvantages,
    advantages_from_preset,
    constant_group_keep_mask,
    dense_group_ids,
    grouped_advantages,
    total_returns,
)
from kernel._advantages_exact import Blocks, Scatter, segments
from kernel._torch_sums import torch_sum_rows
from kernel.testing import reference_advantages
from kernel.testing.strategies import grouped_rewards
from tests.golden import VECTORS_DIR, read_records

GOLDEN = list(read_records(VECTORS_DIR / "advantages.jsonl"))


def adv(*args: Any, **kwargs: Any) -> np.ndarray:
    return grouped_advantages(*args, **kwargs).advantages


# --- the family, by hand --------------------------------------------------------------------------


def test_default_centres_and_reports() -> None:
    out = grouped_advantages([1.0, 0.0, 4.0, 2.0, 3.0, 7.0], [0, 0, 1, 1, 1, 2], 3)
    np.testing.assert_array_equal(out.advantages, [0.5, -0.5, 1.0, -1.0, 0.0, 0.0])
    np.testing.assert_array_equal(out.group_mean, [0.5, 3.0, 7.0])
    np.testing.assert_allclose(out.group_std, [math.sqrt(0.5), 1.0, 0.0])
    np.testing.assert_array_equal(out.group_count, [2, 3, 1])
    np.testing.assert_array_equal(out.group_constant, [False, False, True])
    assert (out.num_excluded, out.num_nonfinite) == (0, 0)
    assert isinstance(out, GroupedAdvantages)


def test_group_scale_ddof_and_eps_on_std() -> None:
    r, ids = [1.0, 3.0], [0, 0]  # μ = 2, Σ(r − μ)² = 2
    np.testing.assert_allclose(adv(r, ids, 1, scale="group", eps=0.0), [-1 / math.sqrt(2), 1 / math.sqrt(2)])
    np.testing.assert_allclose(adv(r, ids, 1, scale="group", ddof=0, eps=0.0), [-1.0, 1.0])
    np.testing.assert_allclose(adv(r, ids, 1, scale="group", ddof=0, eps=0.5), [-1 / 1.5, 1 / 1.5])


def test_variance_floor_and_min_std() -> None:
    near = [1.0, 1.0001]
    # verl vectorized: σ = √max(var, 1e-6) = 1e-3, then ÷ (σ + 1e-6): ±0.05 instead of ±0.71.
    floored = adv(near, [0, 0], 1, scale="group", var_floor=1e-6, eps=1e-6)
    np.testing.assert_allclose(floored, [-0.05 / 1.001, 0.05 / 1.001], rtol=1e-6)
    half = (near[1] - near[0]) / 2  # σ_u = √2·half
    want = np.array([-half, half]) / (math.sqrt(2) * half + 1e-6)
    np.testing.assert_allclose(adv(near, [0, 0], 1, scale="group", eps=1e-6), want, rtol=1e-9)
    # legos: population σ = 5e-5 ≤ 1e-4 → no division, the group stays centred only.
    np.testing.assert_allclose(
        adv(near, [0, 0], 1, scale="group", ddof=0, eps=0.0, min_std=1e-4), [-5e-5, 5e-5]
    )
    np.testing.assert_allclose(
        adv(near, [0, 0], 1, scale="group", ddof=0, eps=0.0, min_std=1e-5), [-1.0, 1.0]
    )


def test_batch_scale_keeps_group_means() -> None:
    r, ids = [0.0, 2.0, 10.0, 14.0], [0, 0, 1, 1]
    sigma_b = np.std(r, ddof=1)
    want = np.array([-1.0, 1.0, -2.0, 2.0]) / (sigma_b + 1e-4)
    np.testing.assert_allclose(adv(r, ids, 2, scale="batch", eps=1e-4), want)


def test_whiten_is_a_batch_z_score_of_the_advantages() -> None:
    r, ids = [0.0, 2.0, 10.0, 14.0, 5.0], [0, 0, 1, 1, 2]
    a0 = adv(r, ids, 3, baseline="leave_one_out")
    want = (a0 - a0.mean()) / (a0.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(adv(r, ids, 3, baseline="leave_one_out", scale="whiten", eps=1e-4), want)


def test_leave_one_out_matches_the_definition() -> None:
    r, ids = np.array([1.0, 3.0, 5.0, 2.0, 6.0]), np.array([0, 0, 0, 1, 1])
    want = [r[i] - np.mean([r[j] for j in range(5) if ids[j] == ids[i] and j != i]) for i in range(5)]
    np.testing.assert_allclose(adv(r, ids, 2, baseline="leave_one_out"), want)
    np.testing.assert_allclose(adv(r, ids, 2, baseline="leave_one_out"), [-3.0, 0.0, 3.0, -4.0, 4.0])


def test_positive_only_clamps_after_scaling() -> None:
    a = adv([0.0, 1.0, 2.0], [0, 0, 0], 1, scale="group", eps=0.0, positive_only=True)
    np.testing.assert_allclose(a, [0.0, 0.0, 1.0])


@pytest.mark.parametrize("scale", ["none", "group"])
def test_singleton_rules(scale: str) -> None:
    r, ids = [0.7, 1.0, 0.0], [0, 1, 1]
    assert adv(r, ids, 2, scale=scale)[0] == 0.0
    raw = adv(r, ids, 2, scale=scale, singleton="raw", eps=1e-6)[0]
    assert raw == (0.7 / (1 + 1e-6) if scale == "group" else 0.7)
    with pytest.raises(ValueError, match=r"groups \[0\] have exactly one sample"):
        grouped_advantages(r, ids, 2, scale=scale, singleton="error")
    assert adv(r, ids, 2, baseline="leave_one_out", singleton="raw")[0] == 0.7


def test_singleton_error_counts_included_samples_only() -> None:
    # Group 0 has two rows but one is masked: it is a group of one.
    with pytest.raises(ValueError, match=r"singleton='error': groups \[0\] have exactly one sample"):
        grouped_advantages(
            [1.0, 2.0, 3.0, 4.0], [0, 0, 1, 1], 2, where=[True, False, True, True], singleton="error"
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constant_groups_give_exact_zeros(dtype: type) -> None:
    r = np.array([1 / 3] * 7 + [0.1] * 3 + [1e6 + 0.1] * 4, dtype=dtype)
    ids = [0] * 7 + [1] * 3 + [2] * 4
    for scale in ("none", "group"):
        for baseline in ("mean", "leave_one_out"):
            out = grouped_advantages(r, ids, 3, scale=scale, baseline=baseline, eps=1e-6)
            assert np.all(out.advantages == 0.0), (scale, baseline, out.advantages)
            assert out.advantages.dtype == dtype
            np.testing.assert_array_equal(out.group_mean, r[[0, 7, 10]])
            np.testing.assert_array_equal(out.group_std, 0.0)
            assert out.group_constant.all()


def test_reference_presets_keep_their_constant_group_artefacts() -> None:
    third = [1 / 3] * 7
    np.testing.assert_array_equal(
        advantages_from_preset("verl_grpo.norm", third, [0] * 7, 1).advantages[0],
        np.float32(0.0288728978484869),
    )
    assert advantages_from_preset("tinker", third, [0] * 7, 1).advantages[0] == np.float32(2.9802322e-08)
    assert advantages_from_preset("default", third, [0] * 7, 1).advantages[0] == 0.0


def test_masked_and_nonfinite_rows_are_excluded_and_counted() -> None:
    r = np.array([1.0, np.nan, 3.0, 100.0, np.inf, 5.0, 2.0])
    ids = np.array([0, 0, 0, 0, 1, 1, 2])
    where = np.array([True, True, True, False, True, True, True])
    out = grouped_advantages(r, ids, 2, where=where, scale="group")
    clean = grouped_advantages([1.0, 3.0, 5.0], [0, 0, 1], 2, scale="group")
    np.testing.assert_array_equal(out.advantages[[0, 2, 5]], clean.advantages)
    np.testing.assert_array_equal(out.advantages[[1, 3, 4, 6]], 0.0)  # NaN, masked, inf, padding
    np.testing.assert_array_equal(out.group_mean, clean.group_mean)
    np.testing.assert_array_equal(out.group_count, [2, 1])
    assert (out.num_excluded, out.num_nonfinite) == (3, 2)  # padding row 6 is not counted


def test_padding_rows_are_zero_and_free() -> None:
    out = grouped_advantages([1.0, 2.0, 99.0, np.nan], [0, 0, 1, 1], 1)
    np.testing.assert_array_equal(out.advantages, [-0.5, 0.5, 0.0, 0.0])
    assert (out.num_excluded, out.num_nonfinite) == (0, 0)


def test_empty_groups_and_empty_input() -> None:
    out = grouped_advantages([1.0, 3.0], [2, 2], 4)
    np.testing.assert_array_equal(out.group_count, [0, 0, 2, 0])
    np.testing.assert_array_equal(out.group_mean, [0.0, 0.0, 2.0, 0.0])
    np.testing.assert_array_equal(out.group_constant, [False, False, False, False])
    empty = grouped_advantages([], [], 3, scale="whiten")
    assert empty.advantages.shape == (0,) and empty.group_count.tolist() == [0, 0, 0]


def test_trajectory_averaging_drmas_semantics() -> None:
    # One question, trajectories t0 (rows −0.1, 0, 0), t1 (0.0), t2 (0.3, 0.1): samples −1/30, 0, 0.2.
    r = [-0.1, 0.0, 0.3, 0.0, 0.0, 0.1]
    traj = [0, 1, 2, 0, 0, 2]
    out = grouped_advantages(r, [0] * 6, 1, trajectory_ids_PG=traj)
    samples = np.array([-1 / 30, 0.0, 0.2])
    want = (samples - samples.mean())[traj]
    np.testing.assert_allclose(out.advantages, want)
    assert out.group_count.tolist() == [3]
    # A question with a single (multi-row) trajectory is a group of one: raw keeps the trajectory mean.
    raw = grouped_advantages([1.0, 0.0, 5.0], [0, 0, 1], 2, trajectory_ids_PG=[7, 7, 7], singleton="raw")
    np.testing.assert_allclose(raw.advantages, [0.5, 0.5, 5.0])
    # Trajectory ids are scoped by group: the same id in two groups is two trajectories.
    two = grouped_advantages([1.0, 3.0, 2.0, 6.0], [0, 0, 1, 1], 2, trajectory_ids_PG=[0, 0, 0, 1])
    np.testing.assert_allclose(two.advantages, [0.0, 0.0, -2.0, 2.0])


def test_trajectory_rows_masked_out_leave_the_average() -> None:
    out = grouped_advantages(
        [1.0, 50.0, 3.0], [0, 0, 0], 1, trajectory_ids_PG=[0, 0, 1], where=[True, False, True]
    )
    np.testing.assert_allclose(out.advantages, [-1.0, 0.0, 1.0])


def test_dtypes() -> None:
    assert adv(np.array([1.0, 2.0], np.float32), [0, 0], 1).dtype == np.float32
    assert adv(np.array([1.0, 2.0]), [0, 0], 1).dtype == np.float64
    assert adv([1, 2], [0, 0], 1).dtype == np.float64
    out = grouped_advantages(np.array([1.0, 2.0], np.float32), np.array([0, 0], np.int32), 1)
    assert out.group_mean.dtype == np.float32 and out.group_count.dtype == np.int64


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: grouped_advantages([[1.0]], [0], 1), ValueError, "rewards_PG must have rank 1"),
        (lambda: grouped_advantages(["a"], [0], 1), TypeError, "rewards_PG must be a real float array"),
        (lambda: grouped_advantages([1.0], [0.5], 1), TypeError, "group_ids_PG must be an integer"),
        (lambda: grouped_advantages([1.0, 2.0], [0], 1), ValueError, "same length"),
        (lambda: grouped_advantages([1.0], [3], 1), ValueError, "group_ids_PG must lie in"),
        (lambda: grouped_advantages([1.0], [-1], 1), ValueError, "group_ids_PG must lie in"),
        (lambda: grouped_advantages([1.0], [0], 1.5), TypeError, "num_groups must be an int"),
        (lambda: grouped_advantages([1.0], [0], -1), ValueError, "num_groups must be >= 0"),
        (lambda: grouped_advantages([1.0], [0], 1, where=[1]), TypeError, "where must be a boolean"),
        (lambda: grouped_advantages([1.0], [0], 1, where=[True, False]), ValueError, "same length"),
        (lambda: grouped_advantages([1.0], [0], 1, trajectory_ids_PG=[0, 1]), ValueError, "same length"),
        (lambda: grouped_advantages([1.0], [0], 1, scale="std"), ValueError, "scale must be one of"),
        (lambda: grouped_advantages([1.0], [0], 1, baseline="median"), ValueError, "baseline must be"),
        (lambda: grouped_advantages([1.0], [0], 1, singleton="nan"), ValueError, "singleton must be"),
        (lambda: grouped_advantages([1.0], [0], 1, arithmetic="torch"), ValueError, "arithmetic must be"),
        (lambda: grouped_advantages([1.0], [0], 1, eps=-1.0), ValueError, "eps must be"),
        (lambda: grouped_advantages([1.0], [0], 1, var_floor=math.nan), ValueError, "var_floor must be"),
        (lambda: grouped_advantages([1.0], [0], 1, ddof=-1), ValueError, "ddof must be"),
        (
            lambda: grouped_advantages([1.0], [0], 1, eps="x"),
            TypeError,
            r"eps must be a finite number >= 0, got str",
        ),
        (
            lambda: grouped_advantages([1.0], [0], 1, ddof=1.5),
            TypeError,
            r"ddof must be an int >= 0, got float 1.5",
        ),
        (
            lambda: grouped_advantages([1.0], [0], 1, ddof=True),
            TypeError,
            r"ddof must be an int >= 0, got bool",
        ),
        (
            lambda: grouped_advantages([1.0], [0], 1, min_std="1"),
            TypeError,
            r"min_std must be a finite number",
        ),
        (lambda: grouped_advantages([1.0], [0], 1, var_floor=None), TypeError, r"var_floor must be a finite"),
        (
            lambda: grouped_advantages([1.0], [0], 1, positive_only="no"),
            TypeError,
            r"positive_only must be a bool",
        ),
        (lambda: grouped_advantages([1.0], [0], 1, scale=["group"]), ValueError, r"scale must be one of"),
        (lambda: grouped_advantages([1.0], [0], True), TypeError, "num_groups must be an int, got bool"),
        (lambda: AdvantageOptions(eps=math.inf), ValueError, r"eps must be a finite number >= 0, got inf"),
        (
            lambda: kjax.grouped_advantages(jnp.ones(1), jnp.zeros(1, int), 1, eps="x"),
            TypeError,
            r"eps must be",
        ),
        (
            lambda: kjax.grouped_advantages(jnp.ones(1), jnp.zeros(1, int), 1, ddof=1.5),
            TypeError,
            r"ddof must be",
        ),
        (
            lambda: constant_group_keep_mask([1.0], [0], 1, atol=math.inf),
            ValueError,
            r"atol must be a finite",
        ),
        (
            lambda: kjax.constant_group_keep_mask(jnp.ones(1), jnp.zeros(1, int), 1, atol=math.inf),
            ValueError,
            r"atol must be a finite",
        ),
        (
            lambda: constant_group_keep_mask([1.0], [0], 1, atol="0"),
            TypeError,
            r"atol must be a finite number",
        ),
        (
            lambda: kjax.constant_group_keep_mask(jnp.ones(1), jnp.zeros(1, int), 1, atol="0"),
            TypeError,
            r"atol must be a finite number",
        ),
        (lambda: advantages_from_preset("verl", [1.0], [0], 1), KeyError, "unknown advantage preset"),
    ],
)
def test_programmer_errors(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


# --- presets --------------------------------------------------------------------------------------


def test_presets_are_options_and_read_only() -> None:
    assert "default" in ADVANTAGE_PRESETS and len(ADVANTAGE_PRESETS) == 22
    assert all(isinstance(o, AdvantageOptions) for o in ADVANTAGE_PRESETS.values())
    assert ADVANTAGE_PRESETS["default"] == AdvantageOptions()
    with pytest.raises(TypeError, match="does not support item assignment"):
        ADVANTAGE_PRESETS["mine"] = AdvantageOptions()  # type: ignore[index]


# Each preset's expected advantages on _PRESET_R, from kernel.testing's slow per-group reference (an
# independent loop in math.fsum) plus the preset's documented singleton rule: (reference config, eps,
# singleton value as a function of r, positive_only). Groups: {0.25, 1, 0}, {0.5, 0.5} (constant),
# {0.75, NaN} (one sample left), {2} (one sample); row 6 (NaN) always gets 0.
_PRESET_R = np.array([0.25, 1.0, 0.0, 0.5, 0.5, 0.75, np.nan, 2.0])
_PRESET_IDS = np.array([0, 0, 0, 1, 1, 2, 2, 3])
_ZERO = 0.0
_RAW = 1.0
_RAW_NORM = 1.0 / (1.0 + 1e-6)
_PRESET_EXPECTED: dict[str, tuple[str, float, float, bool]] = {
    "default": ("center", 0.0, _ZERO, False),
    "dr_grpo": ("center", 0.0, _ZERO, False),
    "tinker": ("center", 0.0, _ZERO, False),
    "verl_grpo.norm": ("zscore_unbiased", 1e-6, _RAW_NORM, False),
    "verl_grpo.nonorm": ("center", 0.0, _RAW, False),
    "verl_grpo_vectorized.norm": ("zscore_unbiased", 1e-6, _RAW_NORM, False),  # var 0.27 > floor 1e-6
    "verl_grpo_vectorized.nonorm": ("center", 0.0, _RAW, False),
    "drmas_grpo.norm_agent": ("zscore_unbiased", 1e-6, _RAW_NORM, False),
    "drmas_grpo.nonorm_agent": ("center", 0.0, _RAW, False),
    "drmas_grpo.norm_traj": ("zscore_unbiased", 1e-6, _RAW_NORM, False),
    "drmas_grpo.nonorm_traj": ("center", 0.0, _RAW, False),
    "legos_grpo": ("center", 0.0, _ZERO, False),
    "legos_grpo.positive_only": ("center", 0.0, _ZERO, True),
    "legos_grpo.normalize": ("zscore_population", 0.0, _ZERO, False),
    "legos_grpo.normalize.positive_only": ("zscore_population", 0.0, _ZERO, True),
    "verl_rloo.loop": ("rloo", 0.0, _RAW, False),
    "verl_rloo.vectorized": ("rloo", 0.0, _ZERO, False),
    "trl_grpo.group": ("zscore_unbiased", 1e-4, _ZERO, False),
    "trl_grpo.none": ("center", 0.0, _ZERO, False),
    "trl_rloo.plain": ("rloo", 0.0, _ZERO, False),
    # batch scalings: the group stage, then a whole-batch statistic (below)
    "trl_grpo.batch": ("center", 0.0, _ZERO, False),
    "trl_rloo.normalize": ("rloo", 0.0, _ZERO, False),
}


def _preset_expected(name: str) -> np.ndarray:
    config, eps, singleton, positive_only = _PRESET_EXPECTED[name]
    live = np.isfinite(_PRESET_R)
    want = reference_advantages(_PRESET_R, _PRESET_IDS, 4, live, config=config, eps=eps)  # type: ignore[arg-type]
    want[[5, 7]] = singleton * _PRESET_R[[5, 7]]
    if name == "trl_grpo.batch":  # (r − μ_g)/(σ_B + 1e-4), σ_B over every included reward
        want = want / (np.std(_PRESET_R[live], ddof=1) + 1e-4)
    if name == "trl_rloo.normalize":  # whitened over the included rows
        want = np.where(live, (want - want[live].mean()) / (want[live].std(ddof=1) + 1e-4), 0.0)
    return np.maximum(want, 0.0) if positive_only else want


def test_preset_table_covers_every_preset() -> None:
    assert set(_PRESET_EXPECTED) == set(ADVANTAGE_PRESETS)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_PRESETS))
def test_every_preset_matches_the_slow_reference(name: str) -> None:
    got = advantages_from_preset(name, _PRESET_R, _PRESET_IDS, 4)
    want = _preset_expected(name)
    float32 = ADVANTAGE_PRESETS[name].arithmetic not in ("exact", "python")
    np.testing.assert_allclose(got.advantages, want, rtol=1e-6 if float32 else 1e-12, atol=1e-7)
    assert got.advantages.dtype == (np.float32 if float32 else np.float64)
    assert got.advantages[6] == 0.0 and (got.num_nonfinite, got.num_excluded) == (1, 1)
    # A sanity anchor by hand for the centred presets: group 0 has mean 5/12.
    if _PRESET_EXPECTED[name][0] == "center" and name not in ("trl_grpo.batch", "legos_grpo.positive_only"):
        np.testing.assert_allclose(got.advantages[:3], [0.25 - 5 / 12, 1 - 5 / 12, -5 / 12], rtol=1e-6)


def test_reference_arithmetic_differences_are_real() -> None:
    near = [1.0, 1.0001]
    loop = advantages_from_preset("verl_grpo.norm", near, [0, 0], 1).advantages
    vectorized = advantages_from_preset("verl_grpo_vectorized.norm", near, [0, 0], 1).advantages
    np.testing.assert_allclose(loop, [-0.70, 0.70], atol=0.01)  # the README's quirk, both ways
    np.testing.assert_allclose(vectorized, [-0.05, 0.05], atol=0.001)


@pytest.mark.parametrize(
    ("n", "seed", "torch_sum"),
    [(7, 0, 210.95779418945312), (13, 0, -3464.472900390625), (20, 0, -674.6890869140625),
     (45, 3, 3159.80712890625), (600, 0, -16491.6171875), (2100, 1, -29455.744140625)],
)  # fmt: skip
def test_torch_summation_order(n: int, seed: int, torch_sum: float) -> None:
    """torch 2.x CPU ``sum`` of float32 (values recorded from torch); neither sequential nor pairwise."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.array([1, 1e3, 1e-3])[rng.integers(0, 3, n)]).astype(np.float32)
    assert float(torch_sum_rows(x[None, :])[0]) == torch_sum
    sequential = np.float32(0)
    for v in x:
        sequential = np.float32(sequential + v)
    assert float(sequential) != torch_sum and float(np.sum(x)) != torch_sum


# --- keys, returns, filtering ---------------------------------------------------------------------


def test_dense_group_ids() -> None:
    ids, n = dense_group_ids(["q7", "q7", "q2", "q7", "q2"])
    assert ids.dtype == np.int32 and ids.tolist() == [0, 0, 1, 0, 1] and n == 2
    ids, n = dense_group_ids(np.array([5, 3, 5, 9]), ["a", "a", "b", "a"])
    assert ids.tolist() == [0, 1, 2, 3] and n == 4
    ids, n = dense_group_ids([1, "1", (1,), 1], [0, 0, 0, 0])  # mixed hashables stay distinct
    assert ids.tolist() == [0, 1, 2, 0] and n == 3
    ids, n = dense_group_ids(["q", "q", "q"], [0, 1, 0], ["x", "x", "x"])
    assert ids.tolist() == [0, 1, 0] and n == 2
    assert dense_group_ids([])[1] == 0
    with pytest.raises(ValueError, match="at least one key"):
        dense_group_ids()
    with pytest.raises(ValueError, match="same length"):
        dense_group_ids([1, 2], [1])
    with pytest.raises(ValueError, match="one-dimensional"):
        dense_group_ids(np.zeros((2, 2)))


def test_total_returns() -> None:
    out = total_returns([-1.0, 0.0, -1.0, 7.0], [0, 0, 1, 2], 2, [0.5, 1.0])
    np.testing.assert_array_equal(out, [-0.5, 0.0])
    masked = total_returns([-1.0, 0.0, -1.0], [0, 0, 1], 2, [0.5, 1.0], where=[False, True, True])
    np.testing.assert_array_equal(masked, [0.5, 0.0])
    f32 = total_returns(np.array([-1.0], np.float32), [0], 1, np.array([0.25], np.float32))
    assert f32.dtype == np.float32
    assert np.isnan(total_returns([np.nan], [0], 1, [1.0])[0])
    with pytest.raises(ValueError, match="final_rewards_E must have length"):
        total_returns([1.0], [0], 2, [1.0])


def test_constant_group_keep_mask() -> None:
    r, ids = [1.0, 1.0, 0.0, 1.0, 2.0, 2.0], [0, 0, 1, 1, 2, 3]
    np.testing.assert_array_equal(constant_group_keep_mask(r, ids, 3), [0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(constant_group_keep_mask(r, ids, 3, atol=1.0), [0, 0, 0, 0, 0, 0])
    keep = constant_group_keep_mask([3.0, 3.0, 2.0, 2.0], [1, 1, 0, 0], 2, keep_one_if_all_constant=True)
    np.testing.assert_array_equal(keep, [False, False, True, True])
    # Masked and NaN rows neither count nor get kept.
    keep = constant_group_keep_mask([1.0, 2.0, np.nan, 1.0], [0, 0, 0, 0], 1, where=[True, False, True, True])
    np.testing.assert_array_equal(keep, [False, False, False, False])
    assert not constant_group_keep_mask([np.nan], [0], 1, keep_one_if_all_constant=True).any()


# --- golden: semantics in exact arithmetic, and the bit-exact count -------------------------------


def test_golden_bit_exact_except_the_documented_square_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker passes everything; without the √ allowance exactly the 24 documented records fail."""
    monkeypatch.setattr(golden_check, "SQRT_ULPS", 0)
    failing = [r["id"] for r in GOLDEN if golden_check.check(r) is not None]
    assert len(failing) == 24
    monkeypatch.undo()
    assert all(golden_check.check(r) is None for r in GOLDEN)


def _tolerance(
    r: np.ndarray, spread: float, options: AdvantageOptions, reference: str
) -> tuple[float, float] | None:
    """README's rules for a float64 port: (atol, rtol), or None to skip (σ < 1e-3·(1 + max|r|)).

    ``spread`` is the σ the reference divides by (None-scaled estimators are centring only). verl's
    vectorized variance Σr² − (Σr)²/n in float32 adds a relative error of ~2⁻²⁴·(1 + max|r|)²/σ².
    """
    top = 1.0 + float(np.max(np.abs(r)))
    if options.scale == "none":
        return 4e-6 * top, 0.0
    spread = max(spread, math.sqrt(options.var_floor))
    if spread < 1e-3 * top:
        return None
    rtol = 1e-5 + (6e-8 * top**2 / spread**2 if reference == "torch_scatter" else 0.0)
    return 4e-6 * top / spread, rtol


@pytest.mark.parametrize("estimator", golden_check._ESTIMATORS, ids=lambda e: e[2])
def test_golden_semantics_in_exact_arithmetic(estimator: tuple[str, str | None, str, str, str]) -> None:
    """Each preset's options with arithmetic='exact' meet the README's float64-port tolerances."""
    key, sub, name, _, grouping = estimator
    preset = ADVANTAGE_PRESETS[name]
    options = replace(preset, arithmetic="exact")
    checked = 0
    for record in GOLDEN:
        want_raw = record["expected"][key] if sub is None else (record["expected"][key] or {}).get(sub)
        if want_raw is None:
            continue
        inp = record["input"]
        r = np.asarray(inp["rewards"])
        n = r.shape[0]
        questions = [str(q) for q in inp["group_ids"]]
        keys = [questions, inp.get("agent_ids", ["0"] * n)] if grouping == "agent" else [questions]
        ids, p = dense_group_ids(*keys)
        traj = None
        if grouping == "traj":
            traj = dense_group_ids(inp.get("traj_ids", [f"row{i}" for i in range(n)]))[0]
        got = grouped_advantages(r, ids, p, trajectory_ids_PG=traj, **asdict(options)).advantages
        want = np.asarray(want_raw)
        if options.scale in ("batch", "whiten"):
            centred = grouped_advantages(r, ids, p, **asdict(replace(options, scale="none"))).advantages
            base = r if options.scale == "batch" else centred
            tol = _tolerance(
                r, float(np.std(base, ddof=options.ddof)) if n > 1 else 0.0, options, preset.arithmetic
            )
            if tol is not None:
                np.testing.assert_allclose(got, want, atol=tol[0], rtol=tol[1], err_msg=record["id"])
                checked += 1
            continue
        for g in range(p):
            rows = ids == g
            samples = r[rows]
            if traj is not None:
                samples = np.array([samples[traj[rows] == u].mean() for u in np.unique(traj[rows])])
            spread = float(np.std(samples, ddof=options.ddof)) if samples.size > options.ddof else 0.0
            tol = _tolerance(r[rows], spread, options, preset.arithmetic)
            if tol is None or (samples.size == 1 and options.scale == "group"):
                continue
            np.testing.assert_allclose(got[rows], want[rows], atol=tol[0], rtol=tol[1], err_msg=record["id"])
            checked += 1
    assert checked > 100


# --- fast paths == the plain formulation ----------------------------------------------------------


def _plain_exact(
    rewards: np.ndarray,
    ids: np.ndarray,
    p: int,
    where: np.ndarray | None,
    *,
    baseline: str = "mean",
    scale: str = "none",
    ddof: int = 1,
    eps: float = 1e-6,
    var_floor: float = 0.0,
    min_std: float | None = None,
    singleton: str = "zero",
    positive_only: bool = False,
) -> tuple[np.ndarray, ...]:
    """The exact estimator written plainly: masked selects, sums in row order from 0.0, max = min
    for constant groups. The fast paths (blocks layout, constant groups from Σc² = 0 for float32
    samples, finite factors instead of explicit zeros) must reproduce it value for value."""
    ids = np.asarray(ids, np.int64)
    ok = (ids < p) & np.isfinite(rewards) & (True if where is None else where)
    h = np.where(ok, ids, p)
    x = np.where(ok, rewards, 0.0).astype(np.float64)
    n = np.bincount(h, minlength=p + 1)
    n[p] = 0
    nf = n.astype(np.float64)
    s, m2 = np.zeros(p + 1), np.zeros(p + 1)
    hi, lo = np.full(p + 1, -np.inf), np.full(p + 1, np.inf)
    np.add.at(s, h, x)
    np.maximum.at(hi, h, np.where(ok, x, -np.inf))
    np.minimum.at(lo, h, np.where(ok, x, np.inf))
    constant = (hi == lo) & (n > 0)
    mean = np.where(constant, hi, s / np.maximum(nf, 1.0))
    single, raw, group = n == 1, singleton == "raw", scale == "group"
    c = np.where(ok, x - np.where(single & raw, 0.0, mean)[h], 0.0)
    np.add.at(m2, h, c * c)
    m2 = np.where(constant, 0.0, m2)
    dof = nf - ddof
    std = np.where(dof > 0, np.sqrt(np.maximum(m2 / np.maximum(dof, 1.0), var_floor)), 0.0)
    factor = nf / np.maximum(nf - 1.0, 1.0) if baseline == "leave_one_out" else np.ones(p + 1)
    if group:
        denom = std + eps
        divide = (dof > 0) & (denom > 0) & (True if min_std is None else std > min_std)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(divide, factor / denom, factor)
    factor = np.where(constant | (n == 0), 0.0, factor)
    if raw:
        factor = np.where(single, 1.0 / (1.0 + eps) if group else 1.0, factor)
    a = c * factor[h]
    if positive_only:
        a = np.maximum(a, 0.0)
    dtype = np.float32 if rewards.dtype == np.float32 else np.float64
    out = (np.where(ok, a, 0.0), mean[:p], std[:p])
    return (*(v.astype(dtype) for v in out), n[:p], constant[:p])


_FAST_PATH_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "grpo": {"scale": "group"},
    "verl_vectorized": {"scale": "group", "singleton": "raw", "var_floor": 1e-6},
    "rloo": {"baseline": "leave_one_out"},
    "rloo_group_raw": {"baseline": "leave_one_out", "scale": "group", "singleton": "raw", "eps": 0.0},
    "legos": {"scale": "group", "ddof": 0, "eps": 0.0, "min_std": 1e-8, "positive_only": True},
    "ddof2": {"scale": "group", "ddof": 2, "eps": 0.0},
}


@st.composite
def _any_layout(draw: st.DrawFn) -> Any:
    """Grouped rewards in float32 or float64: ragged or equal blocks (the blocks path), with or
    without masks, NaN / inf on ignored rows and padding."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    if draw(st.booleans()):
        size = draw(st.integers(1, 5))
        return draw(
            grouped_rewards(
                min_size=size, max_size=size, masks=False, shuffled=False, dtype=dtype, max_groups=5
            )
        )
    return draw(grouped_rewards(min_size=0, masks=None, nan=True, padding=True, dtype=dtype))


@pytest.mark.parametrize("name", sorted(_FAST_PATH_OPTIONS))
@given(case=_any_layout())
def test_fast_paths_equal_the_plain_formulation(name: str, case: Any) -> None:
    options = _FAST_PATH_OPTIONS[name]
    out = grouped_advantages(case.rewards, case.group_ids, case.num_groups, where=case.where, **options)
    want = _plain_exact(case.rewards, case.group_ids, case.num_groups, case.where, **options)
    for field, expected in zip(
        ("advantages", "group_mean", "group_std", "group_count", "group_constant"), want, strict=True
    ):
        got = getattr(out, field)
        assert got.dtype == expected.dtype, field
        np.testing.assert_array_equal(got, expected, err_msg=field)


def test_blocks_layout_is_detected_and_matches_the_scatter_path() -> None:
    ids = np.repeat(np.arange(3), 4)
    assert isinstance(segments(ids, 3), Blocks)
    for not_blocks, p in ((ids[::-1], 3), (np.array([0, 0, 1, 1, 1, 2]), 3), (ids, 4), (np.zeros(0, int), 2)):
        assert isinstance(segments(not_blocks, p), Scatter)
    rng = np.random.default_rng(5)
    r = np.round(rng.normal(size=12), 1)
    r[4:8] = 0.3  # a constant group
    for options in _FAST_PATH_OPTIONS.values():
        blocks = grouped_advantages(r, ids, 3, **options)
        padded = grouped_advantages(np.append(r, 9.0), np.append(ids, 3), 3, **options)  # _Scatter
        np.testing.assert_array_equal(blocks.advantages, padded.advantages[:12])
        np.testing.assert_array_equal(blocks.group_std, padded.group_std)
        assert np.all(blocks.advantages[4:8] == 0.0)


@st.composite
def _blocks_case(draw: st.DrawFn) -> Any:
    """Equal contiguous blocks (the blocks path), masks and non-finite values on ignored rows
    included, float32 or float64 rewards, int32 or int64 ids."""
    size = draw(st.integers(1, 9))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    case = draw(
        grouped_rewards(
            min_size=size, max_size=size, masks=None, nan=True, shuffled=False, dtype=dtype, max_groups=7
        )
    )
    if draw(st.booleans()):
        case = case._replace(group_ids=case.group_ids.astype(np.int64))
    return case


@given(
    case=_blocks_case(),
    name=st.sampled_from([*sorted(_FAST_PATH_OPTIONS), "batch", "whiten"]),
    chunk=st.sampled_from([1, 2, 5, 1 << 15]),
)
def test_blocks_path_in_any_chunks_equals_the_plain_and_scatter_paths(
    case: Any, name: str, chunk: int
) -> None:
    """The blocks layout transposed in chunks of any size (down to one group per chunk) gives the
    plain formulation's values, and the scatter path's bits for the batch statistics too."""
    options = {"batch": {"scale": "batch"}, "whiten": {"scale": "whiten"}}.get(name) or _FAST_PATH_OPTIONS[
        name
    ]
    r, ids, p, w = case.rewards, case.group_ids, case.num_groups, case.where
    assert isinstance(segments(ids, p), Blocks)
    with mock.patch.object(kernel._advantages_exact, "_CHUNK", chunk):
        out = grouped_advantages(r, ids, p, where=w, **options)
    # One padding row sends the same problem down the scatter path.
    padded = grouped_advantages(
        np.append(r, r.dtype.type(7.0)),
        np.append(ids, p),
        p,
        where=None if w is None else np.append(w, True),
        **options,
    )
    fields = ("advantages", "group_mean", "group_std", "group_count", "group_constant")
    for field in fields:
        got, want = getattr(out, field), getattr(padded, field)
        want = want[:-1] if field == "advantages" else want
        assert got.dtype == want.dtype, field
        np.testing.assert_array_equal(got, want, err_msg=field)
    if name in _FAST_PATH_OPTIONS:
        plain = _plain_exact(r, ids, p, w, **options)
        for field, expected in zip(fields, plain, strict=True):
            np.testing.assert_array_equal(getattr(out, field), expected, err_msg=field)


def test_constant_detection_without_float32_values() -> None:
    # Float64 values that are not float32 take max = min: a sum of 1/3s is inexact, and squared
    # deviations of 1e-170 underflow to 0 although the group is not constant.
    out = grouped_advantages([1 / 3] * 3 + [1e-170, 2e-170], [0, 0, 0, 1, 1], 2, scale="group", eps=0.0)
    np.testing.assert_array_equal(out.group_constant, [True, False])
    assert out.group_mean[0] == 1 / 3 and np.all(out.advantages[:3] == 0.0)
    assert out.advantages[3] < 0 < out.advantages[4]
    # Float64 values that are float32 values take the Σc² = 0 test, with the same answers.
    grid = np.array([0.125, 0.125, 0.5, 0.25, 0.75])
    assert grouped_advantages(grid, [0, 0, 1, 1, 1], 2).group_constant.tolist() == [True, False]


def test_inputs_are_not_written_to() -> None:
    r = np.array([1.0, 3.0, 2.0, 2.0, 5.0, 4.0])  # float64, no mask: the estimator reads r itself
    before = r.copy()
    for options in [*_FAST_PATH_OPTIONS.values(), {"scale": "batch"}, {"scale": "whiten"}]:
        grouped_advantages(r, [0, 0, 1, 1, 2, 2], 3, **options)  # blocks
        grouped_advantages(r, [0, 0, 1, 1, 1, 2], 3, **options)  # ragged
        np.testing.assert_array_equal(r, before)


# --- numpy ↔ JAX ----------------------------------------------------------------------------------

N_ROWS, N_GROUPS = 16, 4
_JAX_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "grpo": {"scale": "group", "eps": 1e-6},
    "grpo_raw_floor": {"scale": "group", "singleton": "raw", "var_floor": 1e-6, "eps": 1e-6},
    "legos": {"scale": "group", "ddof": 0, "eps": 0.0, "min_std": 1e-8, "positive_only": True},
    "rloo_whiten": {"baseline": "leave_one_out", "scale": "whiten", "eps": 1e-4},
    "batch": {"scale": "batch", "eps": 1e-4, "singleton": "raw"},
}
_JITTED: dict[tuple[str, bool], Any] = {}


def _jitted(name: str, with_traj: bool) -> Any:
    key = (name, with_traj)
    if key not in _JITTED:
        fn = partial(kjax.grouped_advantages, num_groups=N_GROUPS, **_JAX_OPTIONS[name])
        if with_traj:
            _JITTED[key] = jax.jit(lambda r, g, w, t: fn(r, g, where=w, trajectory_ids_PG=t))
        else:
            _JITTED[key] = jax.jit(lambda r, g, w, t: fn(r, g, where=w))
    return _JITTED[key]


@st.composite
def grouped_problem(draw: st.DrawFn) -> dict[str, np.ndarray]:
    """Rewards on a 1/8 grid (exact in float32), some NaN; ids in [0, P] (P = padding)."""
    grid = st.integers(-16, 16).map(lambda k: k / 8)
    rewards = np.array(
        draw(st.lists(st.one_of(grid, grid, grid, st.just(math.nan)), min_size=N_ROWS, max_size=N_ROWS))
    )
    ids = np.array(draw(st.lists(st.integers(0, N_GROUPS), min_size=N_ROWS, max_size=N_ROWS)))
    where = np.ones(N_ROWS, bool)
    where[draw(st.lists(st.integers(0, N_ROWS - 1), max_size=3))] = False
    traj = np.array(draw(st.lists(st.integers(0, 2), min_size=N_ROWS, max_size=N_ROWS)))
    return {"rewards": rewards, "ids": ids, "where": where, "traj": traj}


def _scaled_atol(name: str, with_traj: bool, problem: dict[str, np.ndarray]) -> float:
    """Absolute tolerance of the float32 JAX advantages against numpy's.

    A batch-wide scale divides the group stage's values by ``std_B + eps``. Trajectory averaging divides by
    counts, so in float32 those values carry a few ulps of ``max |r|`` of rounding, which the division
    multiplies by ``1 / (std_B + eps)``: up to 10^4 × for a near-constant batch at eps = 1e-4. The bound uses
    the batch std of numpy's unscaled advantages (ddof 0, the smaller one).
    """
    options = _JAX_OPTIONS[name]
    if options.get("scale") not in ("batch", "whiten"):
        return 2e-5
    r, ids, w, t = problem["rewards"], problem["ids"], problem["where"], problem["traj"]
    unscaled = {**options, "scale": "none"}
    traj = t if with_traj else None
    a = grouped_advantages(r, ids, N_GROUPS, where=w, trajectory_ids_PG=traj, **unscaled).advantages
    finite = r[w & np.isfinite(r) & (ids < N_GROUPS)]
    if finite.size == 0:
        return 2e-5
    std = float(np.std(a[w & np.isfinite(r) & (ids < N_GROUPS)]))
    return 2e-5 + 8 * float(np.finfo(np.float32).eps) * float(np.max(np.abs(finite))) / (std + options["eps"])


@pytest.mark.parametrize("with_traj", [False, True])
@pytest.mark.parametrize("name", sorted(_JAX_OPTIONS))
@given(problem=grouped_problem())
def test_numpy_jax_parity_under_jit(name: str, with_traj: bool, problem: dict[str, np.ndarray]) -> None:
    r, ids, w, t = problem["rewards"], problem["ids"], problem["where"], problem["traj"]
    want = grouped_advantages(
        r, ids, N_GROUPS, where=w, trajectory_ids_PG=t if with_traj else None, **_JAX_OPTIONS[name]
    )
    got = _jitted(name, with_traj)(
        jnp.asarray(r, jnp.float32), jnp.asarray(ids, jnp.int32), jnp.asarray(w), jnp.asarray(t, jnp.int32)
    )
    np.testing.assert_allclose(
        np.asarray(got.advantages), want.advantages, rtol=2e-5, atol=_scaled_atol(name, with_traj, problem)
    )
    np.testing.assert_allclose(np.asarray(got.group_mean), want.group_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got.group_std), want.group_std, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(got.group_count), want.group_count)
    np.testing.assert_array_equal(np.asarray(got.group_constant), want.group_constant)
    assert int(got.num_excluded) == want.num_excluded and int(got.num_nonfinite) == want.num_nonfinite
    # A constant group is exactly 0 in both.
    constant_rows = np.isin(ids, np.flatnonzero(want.group_constant)) & (
        np.bincount(ids, minlength=N_GROUPS + 1)[ids] > 1
    )
    if not with_traj and name in ("default", "grpo", "legos"):
        assert np.all(np.asarray(got.advantages)[constant_rows] == 0.0)


def test_jax_no_retrace_for_new_values() -> None:
    traces = 0

    def fn(r: jax.Array, g: jax.Array, w: jax.Array) -> jax.Array:
        nonlocal traces
        traces += 1
        return kjax.grouped_advantages(r, g, N_GROUPS, where=w, scale="group").advantages

    jitted = jax.jit(fn)
    rng = np.random.default_rng(0)
    for _ in range(4):
        r = jnp.asarray(rng.random(N_ROWS), jnp.float32)
        g = jnp.asarray(rng.integers(0, N_GROUPS + 1, N_ROWS), jnp.int32)
        w = jnp.asarray(rng.random(N_ROWS) < 0.9)
        jitted(r, g, w).block_until_ready()
    assert traces == 1


def test_jax_vmap_matches_per_problem_calls() -> None:
    rng = np.random.default_rng(1)
    r = jnp.asarray(rng.integers(-8, 9, (3, N_ROWS)) / 4, jnp.float32)
    g = jnp.asarray(rng.integers(0, N_GROUPS, (3, N_ROWS)), jnp.int32)
    fn = partial(kjax.grouped_advantages, num_groups=N_GROUPS, scale="group")
    batched = jax.jit(jax.vmap(fn))(r, g)
    for b in range(3):
        np.testing.assert_allclose(batched.advantages[b], fn(r[b], g[b]).advantages, rtol=1e-6, atol=1e-7)


def test_jax_presets_total_returns_and_keep_mask() -> None:
    r, ids = jnp.array([1.0, 0.0, 0.7, 2.0, 2.0]), jnp.array([0, 0, 1, 2, 2])
    for name in ("verl_grpo.norm", "trl_rloo.normalize", "legos_grpo.normalize.positive_only"):
        want = grouped_advantages(
            np.asarray(r), np.asarray(ids), 3, **asdict(replace(ADVANTAGE_PRESETS[name], arithmetic="exact"))
        )
        np.testing.assert_allclose(
            kjax.advantages_from_preset(name, r, ids, 3).advantages, want.advantages, rtol=1e-6, atol=1e-7
        )
    steps = jnp.array([-1.0, 0.0, -1.0, 9.0])
    np.testing.assert_array_equal(
        kjax.total_returns(
            steps,
            jnp.array([0, 0, 1, 2]),
            2,
            jnp.array([0.5, 1.0]),
            where=jnp.array([True, True, False, True]),
        ),
        [-0.5, 1.0],
    )
    for kw in ({}, {"keep_one_if_all_constant": True}, {"atol": 0.5}):
        vals = np.array([1.0, 1.0, 0.0, 1.0, 3.0, 3.0])
        gids = np.array([0, 0, 1, 1, 2, 2])
        np.testing.assert_array_equal(
            kjax.constant_group_keep_mask(jnp.asarray(vals), jnp.asarray(gids), 3, **kw),
            constant_group_keep_mask(vals, gids, 3, **kw),
        )
    assert not bool(kjax.constant_group_keep_mask(jnp.array([2.0, 2.0]), jnp.array([0, 0]), 1).any())
    one = kjax.constant_group_keep_mask(
        jnp.array([2.0, 2.0, 5.0]), jnp.array([1, 1, 0]), 2, keep_one_if_all_constant=True
    )
    np.testing.assert_array_equal(one, [False, False, True])


def test_jax_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="exists only in numpy"):
        kjax.grouped_advantages(jnp.zeros(2), jnp.zeros(2, jnp.int32), 1, arithmetic="torch_loop")
    with pytest.raises(ValueError, match="cannot raise on traced values"):
        kjax.grouped_advantages(jnp.zeros(2), jnp.zeros(2, jnp.int32), 1, singleton="error")
    with pytest.raises(ValueError, match="group_ids_PG must have length"):
        kjax.grouped_advantages(jnp.zeros(2), jnp.zeros(3, jnp.int32), 1)
    with pytest.raises(TypeError, match="group_ids_PG must be an integer"):
        kjax.grouped_advantages(jnp.zeros(2), jnp.zeros(2), 1)


def test_public_names() -> None:
    for module, names in (
        (kernel, [*kernel._advantages.__all__, *kernel._groups.__all__]),
        (kjax, kjax._advantages.__all__),
    ):
        for name in names:
            obj = getattr(module, name)
            assert obj.__doc__ if callable(obj) else isinstance(obj, Mapping)
    assert json.dumps(asdict(ADVANTAGE_PRESETS["trl_grpo.batch"]))  # plain values, serialisable


# --- range: extreme magnitudes (issue 8, items 6 and 7) -------------------------------------------


@pytest.mark.parametrize("options", [{}, {"scale": "group"}, {"scale": "whiten"}, {"singleton": "raw"}])
def test_jax_num_groups_zero_gives_zeros_as_numpy(options: dict[str, Any]) -> None:
    r, ids = np.array([1.0, 2.0, 5.0]), np.array([0, 0, 0])  # every id is padding when P = 0
    want = grouped_advantages(r, ids, 0, **options)
    fn = jax.jit(partial(kjax.grouped_advantages, num_groups=0, **options))
    got = fn(jnp.asarray(r, jnp.float32), jnp.asarray(ids, jnp.int32))
    np.testing.assert_array_equal(want.advantages, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(got.advantages, want.advantages)
    assert got.group_mean.shape == want.group_mean.shape == (0,)
    assert int(got.num_excluded) == want.num_excluded == 0


def test_numpy_extreme_float64_magnitudes_are_finite() -> None:
    big = grouped_advantages([1.7e308, -1.7e308, -1.7e308], [0, 0, 0], 1)
    assert np.all(np.isfinite(big.advantages)) and np.isfinite(big.group_std).all()
    top = np.finfo(np.float64).max
    np.testing.assert_allclose(big.advantages, [top, -1.7e308 / 1.5, -1.7e308 / 1.5], rtol=1e-15)
    assert big.num_out_of_range == 1  # 1.7e308 − (−1.7e308/3) does not fit: saturated and counted
    plain = grouped_advantages([1.0, -1.0, 3.0], [0, 0, 0], 1, scale="group", eps=0.0)
    for scale in ("group", "batch", "whiten"):
        out = grouped_advantages([1e200, -1e200, 3e200], [0, 0, 0], 1, scale=scale, eps=0.0)
        want = grouped_advantages([1.0, -1.0, 3.0], [0, 0, 0], 1, scale=scale, eps=0.0)
        np.testing.assert_array_equal(out.advantages, want.advantages)
        assert np.all(out.advantages[1:] != 0) and out.num_out_of_range == 0
    np.testing.assert_array_equal(plain.advantages, [0.0, -1.0, 1.0])
    tiny = grouped_advantages([1e-320, 2e-320, 3e-320], [0, 0, 0], 1, scale="group", eps=0.0)
    np.testing.assert_allclose(tiny.advantages, [-1.0, 0.0, 1.0], atol=1e-3)  # 1e-320 has few bits


def test_jax_extreme_float32_magnitudes_are_finite() -> None:
    fn = jax.jit(partial(kjax.grouped_advantages, num_groups=2))
    near_max = fn(jnp.array([2e38, -2e38, 1.0, 2.0]), jnp.array([0, 0, 1, 1]))
    np.testing.assert_allclose(near_max.advantages, [2e38, -2e38, -0.5, 0.5], rtol=1e-7)
    over = fn(jnp.array([3e38, -3e38, -3e38, 0.0]), jnp.array([0, 0, 0, 1]))
    assert np.isfinite(np.asarray(over.advantages)).all() and int(over.num_out_of_range) == 1
    grouped = jax.jit(partial(kjax.grouped_advantages, num_groups=2, scale="group", eps=0.0))
    for scale in (1e20, 1e30, 1e-30):  # squares of these overflow or underflow float32
        out = grouped(jnp.array([1.0, -1.0, 3.0, 5.0]) * scale, jnp.array([0, 0, 0, 1]))
        np.testing.assert_allclose(out.advantages, [0.0, -1.0, 1.0, 0.0], atol=1e-6)
    # Subnormal rewards, which XLA on CPU flushes in arithmetic: a non-constant group stays one.
    sub = grouped(jnp.array([1e-40, 2e-40, 3e-40, 0.0]), jnp.array([0, 0, 0, 1]))
    np.testing.assert_allclose(sub.advantages, [-1.0, 0.0, 1.0, 0.0], atol=1e-5)
    assert not bool(sub.group_constant[0])
    centred = fn(jnp.array([1e-40, 2e-40, 1.0, 1.0]), jnp.array([0, 0, 1, 1]))  # ±5e-41: below normal
    assert int(centred.num_out_of_range) == 2


_SCALE_FREE: dict[str, dict[str, Any]] = {
    "group": {"scale": "group", "eps": 0.0},
    "group_rloo": {"scale": "group", "eps": 0.0, "baseline": "leave_one_out", "ddof": 0},
    "batch": {"scale": "batch", "eps": 0.0},
    "whiten": {"scale": "whiten", "eps": 0.0, "baseline": "leave_one_out"},
    "legos": {"scale": "group", "ddof": 0, "eps": 0.0, "min_std": 0.0, "positive_only": True},
}


@pytest.mark.parametrize("name", sorted(_SCALE_FREE))
@given(problem=grouped_problem(), shift=st.sampled_from([-1071, -1000, -600, 400, 700, 1000]))
def test_numpy_scale_free_options_ignore_the_magnitude(
    name: str, problem: dict[str, np.ndarray], shift: int
) -> None:
    """Rewards m/8·2^k are exact at any k, so a scale-free estimator gives the same bits."""
    r, ids, w = problem["rewards"], problem["ids"], problem["where"]
    want = grouped_advantages(r, ids, N_GROUPS, where=w, **_SCALE_FREE[name])
    got = grouped_advantages(np.ldexp(r, shift), ids, N_GROUPS, where=w, **_SCALE_FREE[name])
    np.testing.assert_array_equal(got.advantages, want.advantages)
    np.testing.assert_array_equal(got.group_constant, want.group_constant)
    assert got.num_out_of_range == 0


@given(problem=grouped_problem(), shift=st.sampled_from([-900, -600, 600, 900, 1019]))
def test_numpy_centred_advantages_scale_with_the_rewards(problem: dict[str, np.ndarray], shift: int) -> None:
    r, ids, w = problem["rewards"], problem["ids"], problem["where"]
    for options in ({}, {"baseline": "leave_one_out"}, {"singleton": "raw"}):
        want = grouped_advantages(r, ids, N_GROUPS, where=w, **options)
        got = grouped_advantages(np.ldexp(r, shift), ids, N_GROUPS, where=w, **options)
        np.testing.assert_array_equal(got.advantages, np.ldexp(want.advantages, shift))
        np.testing.assert_array_equal(got.group_std, np.ldexp(want.group_std, shift))
        assert got.num_out_of_range == 0


_JAX_EXTREME: dict[str, Any] = {}


@pytest.mark.parametrize("name", sorted(_SCALE_FREE))
@given(problem=grouped_problem(), shift=st.sampled_from([-146, -140, -120, -60, 40, 100, 120]))
def test_jax_scale_free_options_ignore_the_magnitude(
    name: str, problem: dict[str, np.ndarray], shift: int
) -> None:
    """float32 rewards m/8·2^k (subnormal ones included) give what m/8 gives, bit for bit."""
    if name not in _JAX_EXTREME:
        _JAX_EXTREME[name] = jax.jit(
            partial(kjax.grouped_advantages, num_groups=N_GROUPS, **_SCALE_FREE[name])
        )
    fn = _JAX_EXTREME[name]
    r = np.where(np.isfinite(problem["rewards"]), problem["rewards"], 0.0).astype(np.float32)
    ids, w = jnp.asarray(problem["ids"], jnp.int32), jnp.asarray(problem["where"])
    want = fn(jnp.asarray(r), ids, where=w)
    got = fn(jnp.asarray(np.ldexp(r, shift)), ids, where=w)
    np.testing.assert_array_equal(np.asarray(got.advantages), np.asarray(want.advantages))
    np.testing.assert_array_equal(np.asarray(got.group_constant), np.asarray(want.group_constant))
    assert int(got.num_out_of_range) == 0


def test_rescaled_path_equals_the_fast_path_bit_for_bit() -> None:
    """Forcing the rescaled path (threshold 0) changes no bit at ordinary magnitudes."""

    @given(case=_any_layout(), name=st.sampled_from([*sorted(_FAST_PATH_OPTIONS), "batch", "whiten"]))
    def check(case: Any, name: str) -> None:
        options = {"batch": {"scale": "batch"}, "whiten": {"scale": "whiten"}}.get(
            name
        ) or _FAST_PATH_OPTIONS[name]
        args = (case.rewards, case.group_ids, case.num_groups)
        fast = grouped_advantages(*args, where=case.where, **options)
        with mock.patch.object(kernel._advantages, "exact_core", lambda *a, **k: None):
            slow = grouped_advantages(*args, where=case.where, **options)
        for field in ("advantages", "group_mean", "group_std", "group_count", "group_constant"):
            got, want = getattr(slow, field), getattr(fast, field)
            assert got.dtype == want.dtype, field
            np.testing.assert_array_equal(got, want, err_msg=field)
        assert slow.num_out_of_range == 0

    check()


def test_dense_group_ids_refuses_nan_keys() -> None:
    """NaN keys made two groups from a list and one from an array: a key must equal itself."""
    from kernel import dense_group_ids

    for keys in ([float("nan"), float("nan")], np.array([1.0, np.nan]), ["a", np.float32("nan")]):
        with pytest.raises(ValueError, match=r"keys_PG\[0\] holds NaN at row \d: a key must equal itself"):
            dense_group_ids(keys)
    with pytest.raises(ValueError, match=r"keys_PG\[1\] holds NaN at row 1"):
        dense_group_ids([1, 2], np.array([0.5, np.nan]))
    with pytest.raises(ValueError, match=r"keys_PG\[0\] holds NaN at row 3"):  # the first NaN's own row
        dense_group_ids(["a", "b", "a", complex("nan"), float("nan")])
    assert dense_group_ids([1.5, 2.5, 1.5])[0].tolist() == [0, 1, 0]


def test_jax_twins_refuse_host_ids_beyond_int32() -> None:
    """Found by review: without x64, JAX wrapped a host id of 2**32 to 0, merging that row into group,
    trajectory or segment 0 (numpy raises for the out-of-range group id). An empty id list is accepted."""
    import kernel.jax as kj

    r = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"trajectory_ids_PG must hold int32 ids"):
        kj.grouped_advantages(r, [0, 0, 0], 1, trajectory_ids_PG=np.array([0, 1, 2**32]))
    with pytest.raises(ValueError, match=r"group_ids_PG must hold int32 ids"):
        kj.grouped_advantages(r, np.array([2**32, 0, 0]), 1)
    with pytest.raises(ValueError, match=r"step_episode_ids_U must hold int32 ids"):
        kj.total_returns(r, np.array([2**32, 0, 0]), 1, [0.0])
    with pytest.raises(ValueError, match=r"group_ids_PG must hold int32 ids"):
        kj.constant_group_keep_mask(r, np.array([-(2**40), 0, 0]), 1)
    with pytest.raises(ValueError, match=r"segment_ids must hold int32 ids"):
        kj.aggregate_token_loss(
            r, aggregation="seq_mean_token_mean", segment_ids=np.array([0, 1, 2**32]), num_segments=2
        )
    assert kj.grouped_advantages([], [], 2).advantages.shape == (0,)


def test_jax_trajectory_means_of_extreme_rewards_stay_finite() -> None:
    """Found by review: three float32 rewards of ±3e38 in one trajectory gave NaN (a sum of
    half-deviations overflowed), where the docstring promises finite results up to ±3.4e38."""
    import kernel.jax as kj

    r = np.array([3e38, -3e38, -3e38], np.float32)
    out = kj.grouped_advantages(r, [0, 0, 0], 1, trajectory_ids_PG=[0, 0, 0])
    want = grouped_advantages(r, [0, 0, 0], 1, trajectory_ids_PG=[0, 0, 0])
    assert np.isfinite(np.asarray(out.advantages)).all() and np.isfinite(np.asarray(out.group_mean)).all()
    np.testing.assert_allclose(np.asarray(out.group_mean), want.group_mean, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out.advantages), want.advantages, atol=1e-6)


def test_jax_whiten_is_not_zeroed_by_a_large_constant_group() -> None:
    """Found by review: with scale="whiten", a constant group of 1e25 rewards set the batch unit, the
    other groups' squares underflowed, and every advantage in the batch came out 0 (none counted)."""
    import kernel.jax as kj

    r = np.array([0.0, 1.0, 1e25, 1e25], np.float32)
    g = np.array([0, 0, 1, 1])
    want = grouped_advantages(r, g, 2, scale="whiten").advantages
    got = np.asarray(kj.grouped_advantages(r, g, 2, scale="whiten").advantages)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert abs(got[0]) > 1.0


@st.composite
def _equal_mean_trajectories(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """One group of 2-4 trajectories whose means are all m exactly: m plus integer deviations (in
    eighths) that sum to 0, so every row is exact in float32, with different row counts and maxima."""
    m = draw(st.integers(-64, 64)) / 8
    rows: list[float] = []
    traj: list[int] = []
    for j in range(draw(st.integers(2, 4))):
        d = draw(st.lists(st.integers(-16, 16), min_size=0, max_size=7))
        d.append(-sum(d))
        order = draw(st.permutations(d))
        rows += [m + v / 8 for v in order]
        traj += [j] * len(order)
    return np.array(rows), np.array(traj)


_EQUAL_MEANS_ROWS = 32  # 4 trajectories of at most 8 rows, padded to one bucket: one compilation per eps
_EQUAL_MEANS_JITTED: dict[float, Any] = {}


def _equal_means_jitted(eps: float) -> Any:
    if eps not in _EQUAL_MEANS_JITTED:
        fn = partial(kjax.grouped_advantages, num_groups=1, scale="group", eps=eps)
        _EQUAL_MEANS_JITTED[eps] = jax.jit(lambda r, g, w, t: fn(r, g, where=w, trajectory_ids_PG=t))
    return _EQUAL_MEANS_JITTED[eps]


@given(problem=_equal_mean_trajectories(), eps=st.sampled_from([0.0, 1e-6, 1e-4]))
def test_jax_trajectories_with_equal_means_make_a_constant_group(
    problem: tuple[np.ndarray, np.ndarray], eps: float
) -> None:
    """Found by the deep profile: the JAX twin divided each row's deviation by its trajectory's row count
    before summing, and measured each trajectory from its own largest row, so trajectories whose means
    are equal came out an ulp apart: the group was not constant and its advantages were noise (±0.004
    for means 1/24 in two trajectories of 3 and 6 rows) where numpy gives exact zeros.

    The rows are padded to one bucket (padding rows: group id 1 = num_groups, masked out, large rewards
    that would show if they leaked into the group), so the jitted twin compiles once per eps."""
    r, t = problem
    n = r.shape[0]
    g = np.zeros(n, np.int64)
    want = grouped_advantages(r, g, 1, trajectory_ids_PG=t, scale="group", eps=eps)
    pad = _EQUAL_MEANS_ROWS - n
    got = _equal_means_jitted(eps)(
        jnp.asarray(np.concatenate([r, np.full(pad, 1e3)]), jnp.float32),
        jnp.asarray(np.concatenate([g, np.ones(pad, np.int64)]), jnp.int32),
        jnp.asarray(np.arange(_EQUAL_MEANS_ROWS) < n),
        jnp.asarray(np.concatenate([t, np.zeros(pad, np.int64)]), jnp.int32),
    )
    assert bool(want.group_constant[0]) and bool(np.asarray(got.group_constant)[0])
    assert not np.asarray(got.advantages).any()
    np.testing.assert_array_equal(np.asarray(got.group_mean), want.group_mean.astype(np.float32))


def test_jax_trajectory_constant_group_found_by_the_deep_profile() -> None:
    """The falsifying example: trajectory means 0.625 (five rows) and 0.625 (one row) in group 0."""
    import kernel.jax as kj

    r = np.array([0.0, 1.25, 0.375, 0.625, 0.0, 0.0, 0.0, 0.0, 1.5])
    g = np.array([0, 0, 0, 0, 0, 1, 1, 1, 0])
    t = np.array([0, 0, 0, 1, 0, 0, 0, 0, 0])
    options: dict[str, Any] = {"scale": "batch", "eps": 1e-4, "singleton": "raw"}
    want = grouped_advantages(r, g, 2, trajectory_ids_PG=t, **options)
    got = kj.grouped_advantages(r.astype(np.float32), g, 2, trajectory_ids_PG=t, **options)
    np.testing.assert_array_equal(np.asarray(got.group_constant), want.group_constant)
    assert want.group_constant.all() and not np.asarray(got.advantages).any()


# --- JAX: the blocks layout and the unscaled scatter path (issue 35) -----------------------------

import kernel.jax._advantages as jax_advantages  # noqa: E402

_BLOCK_IDS = np.repeat(np.arange(N_GROUPS), N_ROWS // N_GROUPS)  # equal contiguous blocks: the dense path
_LAYOUT_JITTED: dict[tuple[str, str], Any] = {}


def _layout_jitted(name: str, path: str) -> Any:
    """``kernel.jax.grouped_advantages`` (``path="public"``), or its scatter path forced."""
    key = (name, path)
    if key not in _LAYOUT_JITTED:
        options = AdvantageOptions(**_JAX_OPTIONS[name])
        if path == "public":
            fn = partial(kjax.grouped_advantages, num_groups=N_GROUPS, **_JAX_OPTIONS[name])
            _LAYOUT_JITTED[key] = jax.jit(lambda r, g, w: fn(r, g, where=w))
        else:

            def scattered(r: jax.Array, g: jax.Array, w: jax.Array) -> tuple[jax.Array, ...]:
                valid = jax_advantages._rows(r, g, w, N_GROUPS)[2]
                a, *rest = jax_advantages._scattered(jnp.where(valid, r, 0.0), g, valid, N_GROUPS, options)
                return (jnp.maximum(a, 0.0) if options.positive_only else a, *rest)

            _LAYOUT_JITTED[key] = jax.jit(scattered)
    return _LAYOUT_JITTED[key]


@pytest.mark.parametrize("name", sorted(_JAX_OPTIONS))
@given(problem=grouped_problem())
def test_jax_blocks_layout_matches_numpy_and_the_scatter_path(
    name: str, problem: dict[str, np.ndarray]
) -> None:
    """Ids 0 0 0 0 1 1 1 1 … run as dense [P, k] rows: numpy's values, the scatter path's values (to
    float32 rounding: the sums run in another order) and the same statistics; constant groups 0."""
    problem = {**problem, "ids": _BLOCK_IDS}
    r, w = problem["rewards"], problem["where"]
    want = grouped_advantages(r, _BLOCK_IDS, N_GROUPS, where=w, **_JAX_OPTIONS[name])
    args = (jnp.asarray(r, jnp.float32), jnp.asarray(_BLOCK_IDS, jnp.int32), jnp.asarray(w))
    got = _layout_jitted(name, "public")(*args)
    atol = _scaled_atol(name, False, problem)
    np.testing.assert_allclose(np.asarray(got.advantages), want.advantages, rtol=2e-5, atol=atol)
    np.testing.assert_allclose(np.asarray(got.group_std), want.group_std, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(got.group_constant), want.group_constant)
    assert int(got.num_excluded) == want.num_excluded and int(got.num_nonfinite) == want.num_nonfinite
    a, _, mean, std, count, constant = _layout_jitted(name, "scatter")(*args)
    np.testing.assert_allclose(np.asarray(got.advantages), np.asarray(a), rtol=2e-6, atol=atol / 10)
    np.testing.assert_allclose(np.asarray(got.group_mean), np.asarray(mean), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(got.group_std), np.asarray(std), rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(got.group_count), np.asarray(count))
    np.testing.assert_array_equal(np.asarray(got.group_constant), np.asarray(constant))
    if name in ("default", "grpo", "legos"):
        assert not np.asarray(got.advantages)[np.repeat(want.group_constant, N_ROWS // N_GROUPS)].any()


@pytest.mark.parametrize("name", sorted(_SCALE_FREE))
@given(problem=grouped_problem(), shift=st.sampled_from([-146, -120, -60, 40, 120]))
def test_jax_blocks_layout_ignores_the_magnitude(
    name: str, problem: dict[str, np.ndarray], shift: int
) -> None:
    """The dense path scales each group by a power of two as the scatter path does: m/8·2^k gives what
    m/8 gives, bit for bit, subnormal rewards included."""
    key = (name, "blocks-extreme")
    if key not in _LAYOUT_JITTED:
        _LAYOUT_JITTED[key] = jax.jit(
            partial(kjax.grouped_advantages, num_groups=N_GROUPS, **_SCALE_FREE[name])
        )
    fn = _LAYOUT_JITTED[key]
    r = np.where(np.isfinite(problem["rewards"]), problem["rewards"], 0.0).astype(np.float32)
    ids, w = jnp.asarray(_BLOCK_IDS, jnp.int32), jnp.asarray(problem["where"])
    want = fn(jnp.asarray(r), ids, where=w)
    got = fn(jnp.asarray(np.ldexp(r, shift)), ids, where=w)
    np.testing.assert_array_equal(np.asarray(got.advantages), np.asarray(want.advantages))
    np.testing.assert_array_equal(np.asarray(got.group_constant), np.asarray(want.group_constant))
    assert np.isfinite(np.asarray(got.advantages)).all() and int(got.num_out_of_range) == 0


_UNSCALED: dict[str, Any] = {}


def _both_scatter_paths(name: str) -> Any:
    """Jitted: (the unscaled path's result, whether it holds, the rescaled path's result)."""
    if name not in _UNSCALED:
        options = AdvantageOptions(**_JAX_OPTIONS[name])
        whitened = options.scale == "whiten"

        def both(r: jax.Array, g: jax.Array) -> tuple[Any, jax.Array, Any]:
            valid = jax_advantages._rows(r, g, None, N_GROUPS)[2]
            x, segments = jnp.where(valid, r, 0.0), jax_advantages._Scatter(g, N_GROUPS)
            results = []
            for rescale in (False, True):
                part, holds = jax_advantages._core(x, valid, segments, options, rescale=rescale)
                results.append((jax_advantages._finish(part, valid, segments, whitened), holds))
            return results[0][0], results[0][1], results[1][0]

        _UNSCALED[name] = jax.jit(both)
    return _UNSCALED[name]


@st.composite
def _magnitudes(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """float32 rewards m/8·2^k with one k per group, k near the unscaled path's limits (2^−21, 2^20),
    with zeros and subnormal or huge groups mixed in; ragged ids in [0, P]."""
    ids = np.array(draw(st.lists(st.integers(0, N_GROUPS), min_size=N_ROWS, max_size=N_ROWS)))
    m = np.array(draw(st.lists(st.integers(-16, 16), min_size=N_ROWS, max_size=N_ROWS)), np.float64)
    k = np.array(
        draw(
            st.lists(
                st.sampled_from([-140, -24, -22, -20, -18, -13, -3, 0, 14, 17, 19, 20, 100]),
                min_size=N_GROUPS + 1,
                max_size=N_GROUPS + 1,
            )
        )
    )
    return np.ldexp(m / 8, k[ids]).astype(np.float32), ids


@pytest.mark.parametrize("name", sorted(_JAX_OPTIONS))
@given(case=_magnitudes())
def test_jax_unscaled_path_holds_only_where_it_gives_the_rescaled_bits(
    name: str, case: tuple[np.ndarray, np.ndarray]
) -> None:
    """Where the scatter path's unscaled result claims to hold, it is the rescaled result bit for bit;
    it holds for every batch (groups of up to 16 rows) whose nonzero |r| lie in [2^−16, 2^16)."""
    r, ids = case
    fast, holds, rescaled = _both_scatter_paths(name)(jnp.asarray(r), jnp.asarray(ids, jnp.int32))
    magnitude = np.abs(r[ids < N_GROUPS])
    moderate = magnitude[magnitude > 0]
    if moderate.size == 0 or (moderate.min() >= 2.0**-16 and moderate.max() < 2.0**16):
        assert bool(holds)
    if bool(holds):
        for got, want in zip(fast, rescaled, strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_jax_unscaled_path_tells_subnormal_groups_from_zeros() -> None:
    """Found while writing the unscaled path: XLA on CPU compares a subnormal reward as 0, so a group of
    subnormals (or 0 and a subnormal) looked like an all-zero group and the check passed; a subnormal
    reward now fails it, and the rescaled path decodes it."""
    fn = jax.jit(partial(kjax.grouped_advantages, num_groups=3, scale="group", eps=0.0))
    got = fn(jnp.array([0.0, 1e-40, 2e-40, 3e-40, 0.5, 1.0]), jnp.array([0, 0, 1, 1, 2, 2]))
    np.testing.assert_allclose(np.asarray(got.advantages), [-0.70710677, 0.70710677] * 3, rtol=1e-6)
    assert not np.asarray(got.group_constant).any()


def test_jax_a_batch_with_one_extreme_group_gives_the_others_their_bits() -> None:
    """A group beyond 2^±19 sends the whole batch down the rescaled path; every other group keeps the
    bits the unscaled path gives it, and the extreme group its finite values."""
    fn = jax.jit(
        partial(kjax.grouped_advantages, num_groups=4, scale="group", singleton="raw", var_floor=1e-6)
    )
    r = np.array([0.25, 1.0, 0.0, 1.9e-6, 0.5, -0.125, 0.875, 0.0], np.float32)  # 1.9e-6 < 2^-19, with 0.5
    ids = np.array([0, 0, 1, 2, 2, 2, 3, 3])
    plain = fn(jnp.asarray(r), jnp.asarray(ids))
    for extreme in (3e38, 1e-40, 1e-30, 1e25):
        mixed = r.copy()
        mixed[2] = extreme  # group 1, a group of one
        got = fn(jnp.asarray(mixed), jnp.asarray(ids))
        keep = ids != 1
        np.testing.assert_array_equal(np.asarray(got.advantages)[keep], np.asarray(plain.advantages)[keep])
        assert np.isfinite(np.asarray(got.advantages)).all()
        if extreme < 2.0**-126:  # its advantage, r/(1 + eps), is below the normal range: counted
            assert int(got.num_out_of_range) == 1
        else:
            np.testing.assert_allclose(np.asarray(got.advantages)[2], extreme / (1 + 1e-6), rtol=1e-6)
