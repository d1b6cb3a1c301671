"""kernel.testing: the grouped-rewards strategies and the advantage invariant suite.

Correct estimators pass every check; deliberately wrong ones (batch mean instead of group mean,
masked rows leaking, eps noise on constant groups, ...) are caught, both by the single checks on
hand-made inputs and by the Hypothesis runner.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import Phase, given
from hypothesis import strategies as st

import kernel
from kernel.testing import (
    AdvantageInvariants,
    GroupedRewards,
    as_estimator,
    check_constant_groups_zero,
    check_group_relabel_invariance,
    check_group_sums_zero,
    check_masked_rows_isolated,
    check_matches_reference,
    check_output_contract,
    check_row_permutation_equivariance,
    check_scale_invariance,
    check_scale_linearity,
    check_shift_invariance,
    grouped_rewards,
    reference_advantages,
    run_invariant_suite,
)

F = npt.NDArray[np.float64]
FIXED = {"derandomize": True, "database": None}  # the same examples in every run of a test
NO_SHRINK = {"phases": (Phase.explicit, Phase.reuse, Phase.generate)}  # failing fast is all we need here


# --- correct vectorised estimators (what a user would write) ------------------------------------


def _stats(r: F, ids: Any, p: int, where: Any) -> tuple[Any, Any, F, Any, Any]:
    live = ids < p if where is None else (ids < p) & where
    idx = np.where(live, ids, p)
    x = np.where(live, r, 0.0).astype(np.float64)
    n = np.bincount(idx, minlength=p + 1)
    mean = np.bincount(idx, x, p + 1) / np.maximum(n, 1)
    hi = np.full(p + 1, -np.inf)
    lo = np.full(p + 1, np.inf)
    np.maximum.at(hi, idx, x)
    np.minimum.at(lo, idx, x)
    varying = (live & (hi > lo)[idx]).astype(bool)
    return idx, x, mean, n, varying


def centred(r: F, ids: Any, p: int, where: Any) -> F:
    idx, x, mean, _, varying = _stats(r, ids, p, where)
    return np.where(varying, x - mean[idx], 0.0)


def zscore_population(r: F, ids: Any, p: int, where: Any) -> F:
    idx, x, mean, n, varying = _stats(r, ids, p, where)
    d = np.where(varying, x - mean[idx], 0.0)
    std = np.sqrt(np.bincount(idx, d * d, p + 1) / np.maximum(n, 1))
    return np.where(varying, d / np.where(varying, std[idx], 1.0), 0.0)


def rloo(r: F, ids: Any, p: int, where: Any) -> F:
    idx, x, mean, n, varying = _stats(r, ids, p, where)
    k = n[idx]
    return np.where(varying, (x - mean[idx]) * k / np.maximum(k - 1, 1), 0.0)


# --- deliberately wrong estimators ----------------------------------------------------------------


def batch_mean(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: the baseline is the mean of the whole batch, not of the group."""
    idx, x, *_ = _stats(r, ids, p, where)
    live = idx < p
    return np.where(live, x - x[live].mean() if live.any() else 0.0, 0.0)


def flipped(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: the sign (A = μ − r): centred, shift-invariant and linear, so only monotonicity sees it."""
    return -centred(r, ids, p, where)


def nothing(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: no signal at all (every reference-free invariance holds for A = 0)."""
    return np.zeros_like(np.asarray(r, dtype=np.float64))


def batch_sized_rloo(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: leave-one-out with every group's size taken as the batch's live rows ÷ P (equal groups)."""
    idx, x, mean, n, varying = _stats(r, ids, p, where)
    k = max(int(n[:p].sum()) // max(p, 1), 2)
    return np.where(varying, (x - mean[idx]) * k / (k - 1), 0.0)


def clipped_zscore(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: z-scores clipped at ±3 (no longer zero-sum); no group of at most 6 rows reaches |z| = 3."""
    return np.clip(zscore_population(r, ids, p, where), -3.0, 3.0)


def leaky_mask(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: masked rows enter the group mean (only padding is dropped)."""
    return centred(r, ids, p, None) * (1.0 if where is None else where)


def nan_leaky_mask(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: masks by multiplying, so a NaN on a masked row poisons its group."""
    w = np.ones(r.shape) if where is None else where.astype(np.float64)
    live = ids < p
    idx = np.where(live, ids, p)
    mean = np.bincount(idx, r * w, p + 1) / np.maximum(np.bincount(idx, w, p + 1), 1)
    return np.where(live & (w > 0), r - mean[idx], 0.0)


def eps_noise(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: z-score with eps and no explicit constant-group branch; the float mean leaves ulp noise."""
    idx, x, mean, n, _ = _stats(r, ids, p, where)
    live = idx < p
    d = x - mean[idx]
    std = np.sqrt(np.bincount(idx, np.where(live, d * d, 0.0), p + 1) / np.maximum(n, 1))
    return np.where(live, d / (std[idx] + 1e-6), 0.0)


def unmasked_output(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: ignored rows get r − μ instead of 0."""
    mean = _stats(r, ids, p, where)[2]
    return np.where(ids < p, r - mean[np.minimum(ids, p)], r)


def first_row_baseline(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: the baseline is the group's first row (depends on row order)."""
    idx, x, _, _, varying = _stats(r, ids, p, where)
    first = np.zeros(p + 1)
    for i in range(r.size - 1, -1, -1):
        first[idx[i]] = x[i]
    return np.where(varying, x - first[idx], 0.0)


def group_zero_special(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: group 0 is left uncentred (depends on the group's label)."""
    a = centred(r, ids, p, where)
    idx, x, _, _, varying = _stats(r, ids, p, where)
    return np.where(varying & (idx == 0), x, a)


def partial_centring(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: subtracts 0.9·μ (not shift invariant, sums not zero)."""
    idx, x, mean, _, varying = _stats(r, ids, p, where)
    return np.where(varying, x - 0.9 * mean[idx], 0.0)


def in_place(r: F, ids: Any, p: int, where: Any) -> F:
    """Bug: writes into the caller's rewards."""
    out = centred(r, ids, p, where)
    r[:] = 0.0
    return out


# --- hand-made inputs -------------------------------------------------------------------------------

R = np.array([1.0, 2.0, 6.0, 10.0, 10.0, 0.5, 7.0])
IDS = np.array([0, 0, 0, 1, 1, 2, 2])
WHERE = np.array([True, True, True, True, True, True, False])
P = 3


def test_reference_advantages_hand_values() -> None:
    np.testing.assert_array_equal(
        reference_advantages(R, IDS, P, config="center"), [-2, -1, 3, 0, 0, -3.25, 3.25]
    )
    # rloo: 1 − (2 + 6)/2 = −3, 2 − 3.5 = −1.5, 6 − 1.5 = 4.5; group 2 masked down to one row -> 0.
    np.testing.assert_array_equal(
        reference_advantages(R, IDS, P, WHERE, config="rloo"), [-3, -1.5, 4.5, 0, 0, 0, 0]
    )
    # zscore_unbiased of [1, 2, 6]: σ_u = sqrt((4 + 1 + 9)/2) = sqrt(7).
    z = reference_advantages(R, IDS, P, WHERE, config="zscore_unbiased")
    np.testing.assert_allclose(z[:3], np.array([-2.0, -1.0, 3.0]) / math.sqrt(7), rtol=1e-15)
    zp = reference_advantages([1.0, 3.0], [0, 0], 1, config="zscore_population", eps=1.0)
    np.testing.assert_array_equal(zp, [-0.5, 0.5])
    np.testing.assert_array_equal(reference_advantages([5.0, 1.0], [1, 1], 1), [0.0, 0.0])  # padding
    # zscore_batch: group means, one σ_u over every live row: [1, 3, 5, 5] → σ = sqrt(11/3)
    zb = reference_advantages([1.0, 3.0, 5.0, 5.0, 99.0], [0, 0, 1, 1, 2], 2, config="zscore_batch")
    np.testing.assert_allclose(zb, np.array([-1.0, 1.0, 0.0, 0.0, 0.0]) / math.sqrt(11 / 3), rtol=1e-15)
    with pytest.raises(ValueError, match="config"):
        reference_advantages(R, IDS, P, config="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("estimator", [centred, zscore_population, rloo])
def test_correct_estimators_pass_single_checks(estimator: Any) -> None:
    args = (estimator, R, IDS, P, WHERE)
    check_output_contract(*args)
    check_group_sums_zero(*args)
    check_constant_groups_zero(*args)
    check_row_permutation_equivariance(*args, seed=3)
    check_group_relabel_invariance(*args, seed=3)
    check_shift_invariance(*args, seed=3)
    check_masked_rows_isolated(*args, seed=3)
    if estimator is zscore_population:
        check_scale_invariance(*args, factor=0.1)
    else:
        check_scale_linearity(*args, factor=0.1)


@pytest.mark.parametrize(
    ("estimator", "check", "kwargs", "message"),
    [
        (batch_mean, check_group_sums_zero, {}, "group 0 advantages sum to"),
        (batch_mean, check_shift_invariance, {"shifts_P": [0.0, 5.0, 0.0]}, "changed its advantages"),
        (batch_mean, check_matches_reference, {}, "disagrees with the reference"),
        (leaky_mask, check_masked_rows_isolated, {}, "live rows differ from the estimator's result"),
        (unmasked_output, check_masked_rows_isolated, {}, r"ignored rows \[6\] .* expected exactly 0"),
        (first_row_baseline, check_row_permutation_equivariance, {"seed": 0}, "rows permuted"),
        (group_zero_special, check_group_relabel_invariance, {"seed": 0}, "groups renamed"),
        (partial_centring, check_shift_invariance, {"shifts_P": [1.0, 0.0, 0.0]}, "adding 1.0 to group 0"),
        (centred, check_scale_invariance, {"factor": 2.0}, "A unchanged"),
        (zscore_population, check_scale_linearity, {"factor": 2.0}, "A·k"),
        (zscore_population, check_matches_reference, {"config": "zscore_unbiased"}, "zscore_unbiased"),
        (in_place, check_output_contract, {}, "modified its inputs"),
    ],
)
def test_checks_catch_bugs_on_hand_made_input(estimator: Any, check: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check(estimator, R, IDS, P, WHERE, **kwargs)


def test_masked_nan_poisoning_is_caught() -> None:
    r = np.array([1.0, 2.0, np.nan])
    with pytest.raises(AssertionError, match="check_masked_rows_isolated"):
        check_masked_rows_isolated(nan_leaky_mask, [1.0, 2.0, 3.0], [0, 0, 0], 1, [True, True, False])
    # the NaN reaches the live rows only through the ignored row: the output contract (live rows alone)
    # does not report it a second time
    check_output_contract(nan_leaky_mask, r, np.array([0, 0, 0]), 1, np.array([True, True, False]))
    with pytest.raises(AssertionError, match="non-finite"), np.errstate(divide="ignore"):
        check_output_contract(lambda r, i, p, w: r / 0.0, np.array([1.0]), np.array([0]), 1)
    check_masked_rows_isolated(centred, r, np.array([0, 0, 0]), 1, np.array([True, True, False]))


def test_eps_noise_on_a_constant_group_is_caught() -> None:
    r, ids = np.full(3, 0.1), np.zeros(3, dtype=np.int32)
    assert np.any(eps_noise(r, ids, 1, None) != 0)  # the bug is real: (0.1 + 0.1 + 0.1)/3 ≠ 0.1 in floats
    with pytest.raises(AssertionError, match="constant group 0"):
        check_constant_groups_zero(eps_noise, r, ids, 1)
    check_constant_groups_zero(eps_noise, r, ids, 1, atol=1e-8)  # the tolerance is explicit
    check_constant_groups_zero(zscore_population, r, ids, 1)


def test_tolerance_is_relative_to_the_group_and_explicit() -> None:
    def off_by(delta: float) -> Any:
        return lambda r, ids, p, w: centred(r, ids, p, w) * (1 + delta)

    r = np.array([1e6, 1e6 + 1.0, 3.0, 5.0])
    ids = np.array([0, 0, 1, 1])
    check_matches_reference(off_by(1e-15), r, ids, 2)  # κ(group 0) ≈ 1e6: rounding-level noise passes
    with pytest.raises(AssertionError, match="tolerance"):
        check_matches_reference(off_by(1e-6), r, ids, 2)
    check_matches_reference(off_by(1e-6), r, ids, 2, rtol=1e-5)


def test_as_estimator_unwraps_named_tuples_and_passes_options() -> None:
    class Out(NamedTuple):
        advantages: F
        extra: int

    seen: dict[str, Any] = {}

    def kernel_style(r: F, ids: Any, p: int, *, where: Any = None, scale: float = 1.0) -> Out:
        seen["where"], seen["scale"] = where, scale
        return Out(centred(r, ids, p, where) * scale, 0)

    est = as_estimator(kernel_style, scale=2.0)
    np.testing.assert_array_equal(est(np.array([1.0, 3.0]), np.array([0, 0]), 1, None), [-2.0, 2.0])
    assert seen == {"where": None, "scale": 2.0}
    check_output_contract(est, R, IDS, P, WHERE)


# --- the Hypothesis runner ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimator", "options"),
    [
        (centred, {"reference": "center"}),
        (rloo, {"reference": "rloo"}),
        (zscore_population, {"std_normalized": True, "reference": "zscore_population"}),
        (
            as_estimator(
                lambda r, i, p, *, where: reference_advantages(r, i, p, where, config="zscore_unbiased")
            ),
            {"std_normalized": True, "reference": "zscore_unbiased"},
        ),
    ],
)
def test_runner_passes_correct_estimators(estimator: Any, options: Any) -> None:
    run_invariant_suite(estimator, **options)


def test_runner_float32_estimator_with_explicit_tolerance() -> None:
    def centred32(r: F, ids: Any, p: int, where: Any) -> Any:
        return centred(r, ids, p, where).astype(np.float32)

    run_invariant_suite(centred32, dtype=np.float32, rtol=1e-5, reference="center", max_condition=1e3)


@pytest.mark.parametrize(
    ("estimator", "options", "failing"),
    [
        # (its rounding is relative to other groups' magnitudes, so only the checks about its bug run)
        (
            batch_mean,
            {
                "checks": [
                    "group_sums_zero",
                    "constant_groups_zero",
                    "shift_invariance",
                    "matches_reference",
                ],
                "reference": "center",
            },
            {"group_sums_zero", "constant_groups_zero", "shift_invariance", "matches_reference"},
        ),
        (leaky_mask, {"masks": True}, {"masked_rows_isolated"}),
        # both also leave float noise on constant groups (r − Σr/n without an exact branch)
        (nan_leaky_mask, {"masks": True}, {"masked_rows_isolated", "(constant_groups_zero)"}),
        (
            eps_noise,
            {"std_normalized": True, "eps": 1e-6, "kinds": ("constant", "continuous")},
            {"constant_groups_zero"},
        ),
        (unmasked_output, {"masks": True}, {"masked_rows_isolated", "(constant_groups_zero)"}),
        (first_row_baseline, {"checks": ["row_permutation_equivariance"]}, {"row_permutation_equivariance"}),
        (group_zero_special, {"checks": ["group_relabel_invariance"]}, {"group_relabel_invariance"}),
        (partial_centring, {"checks": ["shift_invariance"]}, {"shift_invariance"}),
        (zscore_population, {"checks": ["scale_linearity"]}, {"scale_linearity"}),
        (flipped, {}, {"monotone_in_reward"}),
        (nothing, {}, {"monotone_in_reward"}),
        (batch_sized_rloo, {}, {"group_independence", "(masked_rows_isolated)"}),
        (clipped_zscore, {"std_normalized": True}, {"group_sums_zero", "(shift_invariance)"}),
    ],
)
def test_runner_reports_each_bug_by_its_checks(
    estimator: Any, options: dict[str, Any], failing: set[str]
) -> None:
    outcome = run_invariant_suite(
        estimator, max_examples=300, raise_on_failure=False, hypothesis_settings=FIXED, **options
    )
    required = {c for c in failing if not c.startswith("(")}  # "(name)": may fail too, not always found
    allowed = required | {c.strip("()") for c in failing}
    found = {c for c, result in outcome.items() if result.startswith("failed")}
    assert required <= found <= allowed, outcome
    with pytest.raises(AssertionError, match="check_" + sorted(required)[0]):
        run_invariant_suite(
            estimator,
            max_examples=300,
            hypothesis_settings=NO_SHRINK,
            **{**options, "checks": sorted(required)[:1]},
        )


def test_only_the_large_groups_reach_a_clip_at_three_sigma() -> None:
    """Groups of at most 6 rows never have |z| ≥ 3 ((n − 1)/√n < 2.05): the clipped estimator passed the
    suite before it drew a large group (``large_size``, default 64)."""
    outcome = run_invariant_suite(
        clipped_zscore, std_normalized=True, large_size=0, max_examples=300, raise_on_failure=False
    )
    assert all(result.startswith(("passed", "skipped")) for result in outcome.values()), outcome


def test_leaky_mask_is_reported_by_the_masked_check_only() -> None:
    check_matches_reference(leaky_mask, R, IDS, P, WHERE)  # the other checks see the live rows alone
    check_group_sums_zero(leaky_mask, R, IDS, P, WHERE)


def test_runner_rejects_unknown_checks() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        run_invariant_suite(centred, checks=["group_sums"])
    outcome = run_invariant_suite(centred, checks=["matches_reference"])
    assert outcome == {"matches_reference": "skipped: no reference declared (reference=None)"}


class TestCentredThroughTheBaseClass(AdvantageInvariants):
    """How a user plugs an estimator into pytest: one test per invariant."""

    estimator = staticmethod(centred)
    reference = "center"


class TestZscoreThroughTheBaseClass(AdvantageInvariants):
    estimator = staticmethod(zscore_population)
    std_normalized = True
    reference = "zscore_population"


def test_base_class_skips_what_does_not_apply() -> None:
    with pytest.raises(pytest.skip.Exception, match="declared std_normalized=True"):
        TestZscoreThroughTheBaseClass().test_scale_linearity()
    with pytest.raises(pytest.skip.Exception, match="declared std_normalized=False"):
        TestCentredThroughTheBaseClass().test_scale_invariance()


def test_base_class_reports_the_bug() -> None:
    class Buggy(AdvantageInvariants):
        estimator = staticmethod(batch_mean)
        hypothesis_settings = NO_SHRINK

    with pytest.raises(AssertionError, match="check_group_sums_zero"):
        Buggy().test_group_sums_zero()


# --- the strategy -------------------------------------------------------------------------------------


@given(grouped_rewards(min_size=0, max_size=5, nan=True, padding=True, masks=True, max_groups=5))
def test_grouped_rewards_shapes_and_ignored_rows(case: GroupedRewards) -> None:
    r, ids, p, where = case.rewards, case.group_ids, case.num_groups, case.where
    assert ids.dtype == np.int32 and r.dtype == np.float64 and where is not None and where.dtype == np.bool_
    assert r.shape == ids.shape == where.shape
    assert 0 <= ids.min(initial=0) and ids.max(initial=0) <= p
    np.testing.assert_array_equal(np.bincount(ids, minlength=p + 1)[:p], case.sizes_P)
    live = (ids < p) & where
    assert np.isfinite(r[live]).all()  # non-finite values only ever sit on ignored rows


@given(grouped_rewards(min_size=2, max_size=4, masks=False, dtype=np.float32, shuffled=False))
def test_grouped_rewards_options(case: GroupedRewards) -> None:
    assert case.where is None and case.rewards.dtype == np.float32
    assert (np.diff(case.group_ids) >= 0).all()  # group-major when not shuffled
    assert ((case.sizes_P >= 2) & (case.sizes_P <= 4)).all()


@given(st.data())
def test_grouped_rewards_draws_constant_groups(data: st.DataObject) -> None:
    case = data.draw(grouped_rewards(kinds=("constant",), masks=False, padding=False))
    for g in range(case.num_groups):
        values = case.rewards[case.group_ids == g]
        assert (values == values[0]).all()


# --- our own estimators -----------------------------------------------------------------------------


ALWAYS = [
    "output_contract",
    "masked_rows_isolated",
    "row_permutation_equivariance",
    "group_relabel_invariance",
]
CENTRED_BUT_CONSTANT = ["group_sums_zero", "shift_invariance"]


def _preset(name: str) -> Any:
    return as_estimator(lambda r, i, p, *, where: kernel.advantages_from_preset(name, r, i, p, where=where))


@pytest.mark.parametrize(
    ("estimator", "options"),
    [
        (as_estimator(kernel.grouped_advantages), {"reference": "center"}),
        (_preset("default"), {"reference": "center"}),
        (_preset("dr_grpo"), {"reference": "center"}),
        # legos computes r − Σr/n like its reference, so a constant group may keep an ulp of noise
        # (see test_suite_flags_the_documented_reference_quirks); every other invariant holds.
        (
            _preset("legos_grpo"),
            {
                "reference": "center",
                "checks": [*ALWAYS, *CENTRED_BUT_CONSTANT, "scale_linearity", "matches_reference"],
            },
        ),
        (
            _preset("legos_grpo.normalize"),
            {
                "std_normalized": True,
                "reference": "zscore_population",
                "checks": [*ALWAYS, *CENTRED_BUT_CONSTANT, "scale_invariance", "matches_reference"],
                # legos does not divide when σ ≤ 1e-8, and divides the ulp noise of an inexact constant
                # group's mean by itself (±1): use dyadic rewards, whose sums are exact
                "magnitudes": (1.0, 1e2),
                "kinds": ("binary", "levels"),
            },
        ),
        (
            as_estimator(kernel.grouped_advantages, scale="group", ddof=1, eps=0.0),
            {"std_normalized": True, "reference": "zscore_unbiased"},
        ),
        (as_estimator(kernel.grouped_advantages, baseline="leave_one_out"), {"reference": "rloo"}),
        # float32 arithmetic of the reference: the same invariants at a float32 tolerance, on rewards
        # whose float32 sums are exact (a constant group of 6 × 1e-6 does not give 0 in float32)
        (
            _preset("verl_rloo.vectorized"),
            {"reference": "rloo", "rtol": 1e-5, "magnitudes": (1.0,), "kinds": ("binary", "levels")},
        ),
    ],
    ids=[
        "grouped_advantages",
        "default",
        "dr_grpo",
        "legos_grpo",
        "legos_normalize",
        "zscore",
        "rloo",
        "verl_rloo",
    ],
)
def test_our_estimators_pass_the_suite(estimator: Any, options: dict[str, Any]) -> None:
    run_invariant_suite(estimator, **options)


def test_suite_flags_the_documented_reference_quirks() -> None:
    # tinker computes the mean in float32: a constant group of 5 × 925781.25 does not give 0.
    const = np.full(5, 925781.25)
    with pytest.raises(AssertionError, match="check_constant_groups_zero"):
        check_constant_groups_zero(_preset("tinker"), const, np.zeros(5, dtype=np.int32), 1)
    check_constant_groups_zero(_preset("default"), const, np.zeros(5, dtype=np.int32), 1)
    # legos: r − Σr/n in float64 leaves an ulp on 5 × 8.75e-07.
    tiny = np.full(5, 8.75e-07)
    with pytest.raises(AssertionError, match="check_constant_groups_zero"):
        check_constant_groups_zero(_preset("legos_grpo"), tiny, np.zeros(5, dtype=np.int32), 1)
    # verl GRPO gives a group of one its raw reward: neither zero nor shift invariant.
    r, ids = np.array([1.0, 2.0, 4.0]), np.array([0, 0, 1], dtype=np.int32)
    with pytest.raises(AssertionError, match="constant group 1"):
        check_constant_groups_zero(_preset("verl_grpo.norm"), r, ids, 2)
    # ... and only there: the shift check is about varying groups, so it does not report it again
    check_shift_invariance(_preset("verl_grpo.nonorm"), r, ids, 2, shifts_P=[0.0, 1.0], rtol=1e-5)
    # TRL divides by σ + 1e-4: not scale invariant at small σ.
    small = np.array([0.0, 1e-3, 0.0, 1.0])
    with pytest.raises(AssertionError, match="check_scale_invariance"):
        check_scale_invariance(_preset("trl_grpo.group"), small, np.array([0, 0, 1, 1]), 2, rtol=1e-5)
    # ... which is exactly the eps effect: within the eps bound it passes
    check_scale_invariance(_preset("trl_grpo.group"), small, np.array([0, 0, 1, 1]), 2, rtol=1e-5, eps=1e-4)


def test_rae_baselines_are_not_group_relative_and_the_suite_says_so() -> None:
    def rae_as_grouped(r: F, ids: Any, p: int, where: Any) -> Any:
        return kernel.rae_advantages(r, ids, np.ones(p), decay=0.5, where=where).advantages

    with pytest.raises(AssertionError, match="check_group_sums_zero"):
        check_group_sums_zero(rae_as_grouped, R, IDS, P, WHERE)


def test_every_public_function_of_kernel_testing_documents_args_and_returns() -> None:
    import inspect

    import kernel.testing as kt

    missing = [
        name
        for name in kt.__all__
        if inspect.isfunction(getattr(kt, name))
        and not all(section in (getattr(kt, name).__doc__ or "") for section in ("Args:", "Returns:"))
    ]
    assert not missing, missing
