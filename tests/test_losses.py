"""Token losses: hand values, analytic gradients, clipping regions, masking, aggregation, numpy ↔ JAX."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernel
import kernel.jax as kjax
from kernel import LOSS_AGGREGATIONS, TokenLoss

LN2 = math.log(2.0)

# Every loss behind one calling convention f(module, lp, lp_q, adv, **options); cross_entropy uses the
# advantages as its weights.
LOSS_NAMES = ("importance_sampling", "ppo", "gspo", "cispo", "dro", "cross_entropy")
GSPO_CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
"""gspo has no default thresholds; these are ppo's (the tests' sequences are the rows of the last axis)."""


def call(mod: Any, name: str, lp: Any, lp_q: Any, adv: Any, **kw: Any) -> TokenLoss[Any]:
    if name == "cross_entropy":
        return mod.cross_entropy_loss(lp, adv, **kw)
    if name == "dro":
        kw.setdefault("beta", 0.3)
    if name == "gspo":
        kw = {**GSPO_CLIP, **kw}
    return getattr(mod, f"{name}_loss")(lp, lp_q, adv, **kw)


def gspo_ratio(lp: np.ndarray, lp_q: np.ndarray, where: np.ndarray) -> np.ndarray:
    """s per token: exp of the mean log-ratio over ``where`` in its row (1 for an empty row), float64."""
    gap = np.where(where, lp.astype(np.float64) - lp_q, 0.0)
    mean = gap.sum(axis=-1, keepdims=True) / np.maximum(where.sum(axis=-1, keepdims=True), 1)
    return np.broadcast_to(np.exp(mean), lp.shape)


def analytic_grad(
    name: str, lp: np.ndarray, lp_q: np.ndarray, adv: np.ndarray, beta: float = 0.3, where: Any = None
) -> np.ndarray:
    """∂ℓ_t/∂lp_θ,t for the default options (PPO and GSPO 0.8 / 1.2, CISPO 0 / 4)."""
    rho = np.exp(lp - lp_q)
    if name == "gspo":  # the token's own gradient, scaled by its row's ratio s
        rho = gspo_ratio(lp, lp_q, np.ones(lp.shape, bool) if where is None else where)
        name = "ppo"
    if name == "importance_sampling":
        return -rho * adv
    if name == "ppo":
        clipped = ((adv > 0) & (rho > 1.2)) | ((adv < 0) & (rho < 0.8))
        return np.where(clipped, 0.0, -rho * adv)
    if name == "cispo":
        return -np.clip(rho, 0.0, 4.0) * adv
    if name == "dro":
        return -(adv - beta * (lp - lp_q))
    return -adv


# --- strategies (local: fixed small shapes so JAX compiles once per test) ---------------------------

SHAPE = (3, 5)


@st.composite
def loss_inputs(draw: st.DrawFn, shape: tuple[int, ...] = SHAPE) -> tuple[np.ndarray, ...]:
    """(lp_θ, lp_q, A, where), float32 with |lp_θ − lp_q| ≤ 2 and a boolean mask."""
    lp_q = draw(hnp.arrays(np.float32, shape, elements=st.floats(-8.0, 0.0, width=32)))
    delta = draw(hnp.arrays(np.float32, shape, elements=st.floats(-2.0, 2.0, width=32)))
    adv = draw(hnp.arrays(np.float32, shape, elements=st.floats(-3.0, 3.0, width=32)))
    where = draw(hnp.arrays(np.bool_, shape))
    return (lp_q + delta).astype(np.float32), lp_q, adv, where


# --- hand-computed values ----------------------------------------------------------------------------


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_importance_sampling_hand_values(mod: Any) -> None:
    lp = np.array([-1.0, -2.0, -0.5], np.float32)
    lp_q = np.array([-1.0, -2.0 - LN2, -0.5], np.float32)  # ρ = [1, 2, 1]
    adv = np.array([1.0, 0.5, -2.0], np.float32)
    out = mod.importance_sampling_loss(lp, lp_q, adv)
    np.testing.assert_allclose(np.asarray(out.per_token_loss), [-1.0, -1.0, 2.0], rtol=1e-6)
    assert float(out.loss) == pytest.approx(0.0, abs=1e-6)
    assert int(out.num_tokens) == 3 and float(out.clip_fraction) == 0.0


# ρ ∈ {0.5, 0.9, 1.5} × A ∈ {+1, −1}; default thresholds 0.8 / 1.2.
PPO_RHO = np.array([0.5, 0.9, 1.5, 0.5, 0.9, 1.5])
PPO_ADV = np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
PPO_LOSS = np.array([-0.5, -0.9, -1.2, 0.8, 0.9, 1.5])
PPO_GRAD = np.array([-0.5, -0.9, 0.0, 0.0, 0.9, 1.5])


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_ppo_clipping_regions_values(mod: Any) -> None:
    out = mod.ppo_loss(np.log(PPO_RHO), np.zeros(6), PPO_ADV)
    np.testing.assert_allclose(np.asarray(out.per_token_loss), PPO_LOSS, rtol=1e-6)
    assert float(out.loss) == pytest.approx(PPO_LOSS.sum(), abs=1e-6)
    assert float(out.clip_fraction) == pytest.approx(2 / 6)


def test_ppo_clipping_regions_gradients() -> None:
    lp = jnp.log(jnp.asarray(PPO_RHO, jnp.float32))
    grad = jax.grad(lambda x: kjax.ppo_loss(x, jnp.zeros(6), PPO_ADV).loss)(lp)
    np.testing.assert_allclose(np.asarray(grad), PPO_GRAD, rtol=1e-6, atol=0)
    # clipped tokens get exactly zero; inside the range the gradient is −ρ·A
    assert np.asarray(grad)[[2, 3]].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_ppo_configurable_thresholds(mod: Any) -> None:
    out = mod.ppo_loss(np.log(PPO_RHO), np.zeros(6), PPO_ADV, clip_low_threshold=0.4, clip_high_threshold=1.6)
    np.testing.assert_allclose(np.asarray(out.per_token_loss), -PPO_RHO * PPO_ADV, rtol=1e-6)
    assert float(out.clip_fraction) == 0.0


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_cispo_hand_values(mod: Any) -> None:
    lp = np.array([-1.0, -2.0, -0.5], np.float32)
    lp_q = np.array([-1.0 + LN2, -2.0 - LN2, -0.5 - 3 * LN2], np.float32)  # ρ = [0.5, 2, 8] → w [0.5, 2, 4]
    adv = np.array([1.0, -1.0, 2.0], np.float32)
    out = mod.cispo_loss(lp, lp_q, adv)
    np.testing.assert_allclose(np.asarray(out.per_token_loss), [0.5, -4.0, 4.0], rtol=1e-5)
    assert float(out.clip_fraction) == pytest.approx(1 / 3)
    tight = mod.cispo_loss(lp, lp_q, adv, clip_low_threshold=0.8, clip_high_threshold=1.5)
    np.testing.assert_allclose(np.asarray(tight.per_token_loss), [0.8, -3.0, 1.5], rtol=1e-5)
    assert float(tight.clip_fraction) == 1.0


def test_cispo_gradient_is_stop_gradient_weight() -> None:
    lp = jnp.array([-1.0, -2.0, -0.5])
    lp_q = lp - jnp.log(jnp.array([0.5, 2.0, 8.0]))
    adv = jnp.array([1.0, -1.0, 2.0])
    grad = jax.grad(lambda x: kjax.cispo_loss(x, lp_q, adv).loss)(lp)
    np.testing.assert_allclose(np.asarray(grad), [-0.5, 2.0, -8.0], rtol=1e-5)


# --- gspo: one ratio per sequence, each token's own gradient ----------------------------------------

# row 0: log-ratios log 1.5 and 3·log 1.5, s = 1.5² = 2.25; row 1: log 0.5 and log 2, the second outside M,
# so s = 0.5. A = +1, −1 in each row; thresholds 0.8 / 1.2.
GSPO_LP = np.log(np.array([[1.5, 1.5**3], [0.5, 2.0]], np.float32))
GSPO_ADV = np.array([[1.0, -1.0], [1.0, -1.0]], np.float32)
GSPO_M = np.array([[True, True], [True, False]])


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_gspo_hand_values(mod: Any) -> None:
    out = mod.gspo_loss(GSPO_LP, np.zeros((2, 2), np.float32), GSPO_ADV, ratio_where=GSPO_M, **GSPO_CLIP)
    # (A > 0, s = 2.25 > hi): clipped, −1.2; (A < 0): −2.25·(−1); (A > 0, s = 0.5): −0.5;
    # (A < 0, s = 0.5 < lo): clipped, −0.8·(−1)
    np.testing.assert_allclose(np.asarray(out.per_token_loss), [[-1.2, 2.25], [-0.5, 0.8]], rtol=1e-5)
    assert float(out.clip_fraction) == 0.5 and int(out.num_tokens) == 4
    # the whole sequence in M: row 1's s = exp(½(log 0.5 + log 2)) = 1, nothing clipped there
    whole = mod.gspo_loss(GSPO_LP, np.zeros((2, 2), np.float32), GSPO_ADV, **GSPO_CLIP)
    np.testing.assert_allclose(np.asarray(whole.per_token_loss)[1], [-1.0, 1.0], rtol=1e-5)
    # a sequence with no token in M has s = 1
    none = np.zeros((2, 2), bool)
    empty = mod.gspo_loss(GSPO_LP, np.zeros((2, 2)), GSPO_ADV, ratio_where=none, **GSPO_CLIP)
    np.testing.assert_allclose(np.asarray(empty.per_token_loss), -GSPO_ADV, rtol=1e-6)


def test_gspo_gradient_is_the_tokens_own_scaled_by_the_sequence_ratio() -> None:
    lp_q = jnp.zeros((2, 2))

    def per_token(lp: jax.Array) -> jax.Array:
        return kjax.gspo_loss(lp, lp_q, GSPO_ADV, ratio_where=GSPO_M, **GSPO_CLIP).per_token_loss

    jac = np.asarray(jax.jacobian(per_token)(jnp.asarray(GSPO_LP))).reshape(4, 4)
    # ∂ℓ_t/∂lp_t = −s·A_t unless clipped; the sequence ratio is a stop-gradient: no token reaches another
    np.testing.assert_allclose(np.diag(jac), [0.0, 2.25, -0.5, 0.0], rtol=1e-5)
    assert np.all(jac[~np.eye(4, dtype=bool)] == 0.0)


@given(loss_inputs(), st.sampled_from(LOSS_AGGREGATIONS))
def test_gspo_padded_rows_equal_packed_sequences(inputs: tuple[np.ndarray, ...], aggregation: str) -> None:
    lp, lp_q, adv, where = inputs
    padded = kernel.gspo_loss(lp, lp_q, adv, where=where, aggregation=aggregation, **GSPO_CLIP)
    ids = np.repeat(np.arange(SHAPE[0]), SHAPE[1])
    for mod in (kernel, kjax):
        packed = mod.gspo_loss(
            lp.reshape(-1),
            lp_q.reshape(-1),
            adv.reshape(-1),
            where=where.reshape(-1),
            aggregation=aggregation,
            segment_ids=ids,
            num_segments=SHAPE[0],
            **GSPO_CLIP,
        )
        got = np.asarray(packed.per_token_loss).reshape(SHAPE)
        np.testing.assert_allclose(got, padded.per_token_loss, rtol=1e-5, atol=1e-5)
        assert float(packed.loss) == pytest.approx(float(padded.loss), rel=1e-4, abs=1e-4)


def test_gspo_tokens_outside_the_ratio_mask_do_not_move_the_ratio() -> None:
    lp_q = np.zeros((1, 3))
    adv = np.array([[1.0, 0.0, -1.0]])
    m = np.array([[True, False, True]])
    base = kernel.gspo_loss([[0.1, -3.0, 0.05]], lp_q, adv, ratio_where=m, **GSPO_CLIP)
    moved = kernel.gspo_loss([[0.1, 40.0, 0.05]], lp_q, adv, ratio_where=m, **GSPO_CLIP)
    np.testing.assert_array_equal(base.per_token_loss, moved.per_token_loss)


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_gspo_extreme_finite_inputs_never_give_nan(mod: Any) -> None:
    big = float(np.finfo(np.float32).max)
    # row 0: lp − lp_q overflows per token (±inf) but the half log-ratios cancel: s = 1; row 1: the mean
    # itself is beyond float32 (s saturates: A > 0 clips, A < 0 is +inf, its true value's overflow)
    lp = np.array([[big, -big], [big, big]], np.float32)
    lp_q = np.array([[-big, big], [-big, -big]], np.float32)
    adv = np.array([[1.0, -1.0], [1.0, -1.0]], np.float32)
    for aggregation in LOSS_AGGREGATIONS:
        out = mod.gspo_loss(lp, lp_q, adv, aggregation=aggregation, **GSPO_CLIP)
        ell = np.asarray(out.per_token_loss)
        assert not np.any(np.isnan(ell)) and not np.isnan(float(out.loss)), aggregation
        assert ell[0].tolist() == [-1.0, 1.0] and ell[1, 0] == pytest.approx(-1.2) and ell[1, 1] == np.inf
    if mod is kjax:
        grad = jax.grad(lambda x: kjax.gspo_loss(x, lp_q, adv, **GSPO_CLIP).loss)(jnp.asarray(lp))
        assert not np.any(np.isnan(np.asarray(grad)))
        assert np.asarray(grad)[0].tolist() == [-1.0, 1.0]


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_dro_and_cross_entropy_hand_values(mod: Any) -> None:
    out = mod.dro_loss([-1.0, -2.0], [-3.0, -2.0], [2.0, -1.0], beta=0.5)
    # token 0: −(−2 − ¼·4) = 3; token 1: −(2 − 0) = −2
    np.testing.assert_allclose(np.asarray(out.per_token_loss), [3.0, -2.0])
    ce = mod.cross_entropy_loss([-0.5, -2.0, -1.0], [0.0, 1.0, 0.5])
    np.testing.assert_allclose(np.asarray(ce.per_token_loss), [0.0, 2.0, 0.5])
    assert float(ce.loss) == 2.5


def test_dro_without_mask_charges_observation_positions_like_tinker() -> None:
    # An observation position carries lp_q = 0 and A = 0; Tinker (no mask) still adds ½β·lp_θ².
    lp, lp_q, adv = np.array([-2.0, -1.0]), np.array([0.0, -1.0]), np.array([0.0, 1.0])
    unmasked = kernel.dro_loss(lp, lp_q, adv, beta=1.0)
    masked = kernel.dro_loss(lp, lp_q, adv, beta=1.0, where=np.array([False, True]))
    assert float(unmasked.loss) == pytest.approx(2.0 + 1.0)
    assert float(masked.loss) == pytest.approx(1.0)


# --- gradients against the analytic forms -----------------------------------------------------------


def _grads(name: str, lp: np.ndarray, lp_q: np.ndarray, adv: np.ndarray, where: np.ndarray) -> jax.Array:
    return jax.grad(lambda x: call(kjax, name, x, lp_q, adv, where=where).loss)(jnp.asarray(lp))


_GRAD_ALL = jax.jit(
    lambda lp, lp_q, adv, where: {n: _grads(n, lp, lp_q, adv, where) for n in LOSS_NAMES},
)


@given(loss_inputs())
def test_gradients_match_analytic_forms(inputs: tuple[np.ndarray, ...]) -> None:
    lp, lp_q, adv, where = inputs
    rho = np.exp(lp.astype(np.float64) - lp_q)
    assume(np.all(np.abs(rho - 0.8) > 1e-3) and np.all(np.abs(rho - 1.2) > 1e-3))
    assume(np.all(np.abs(rho - 4.0) > 1e-3))
    s = gspo_ratio(lp, lp_q, where)
    assume(np.all(np.abs(s - 0.8) > 1e-3) and np.all(np.abs(s - 1.2) > 1e-3))
    grads = _GRAD_ALL(lp, lp_q, adv, where)
    for name in LOSS_NAMES:
        want = np.where(where, analytic_grad(name, lp.astype(np.float64), lp_q, adv, where=where), 0.0)
        np.testing.assert_allclose(np.asarray(grads[name]), want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_importance_sampling_gradient_at_ratio_one_is_minus_advantage() -> None:
    lp = jnp.array([-1.0, -0.2, -3.0])
    adv = jnp.array([0.7, -1.3, 0.0])
    for name in ("importance_sampling", "ppo", "gspo", "cispo"):
        grad = jax.grad(lambda x, n=name: call(kjax, n, x, lp, adv).loss)(lp)
        np.testing.assert_allclose(np.asarray(grad), -np.asarray(adv), rtol=1e-6, err_msg=name)


# --- masking: NaN / inf at masked positions never leak ----------------------------------------------


MASK_WHERE = np.array([[True, False, True], [False, True, True]])
DIRTY = (
    np.array([[-1.0, np.nan, -0.5], [np.inf, -2.0, -0.1]], np.float32),
    np.array([[-1.2, -np.inf, -0.4], [np.nan, -2.5, -0.3]], np.float32),
    np.array([[1.0, np.nan, -1.0], [np.inf, 0.5, 2.0]], np.float32),
)
CLEAN = tuple(np.where(MASK_WHERE, x, np.float32(-0.7)) for x in DIRTY)


@pytest.mark.parametrize("aggregation", LOSS_AGGREGATIONS)
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_masked_nan_inputs_do_not_leak_numpy(name: str, aggregation: str) -> None:
    kw = {"where": MASK_WHERE, "aggregation": aggregation}
    dirty, clean = call(kernel, name, *DIRTY, **kw), call(kernel, name, *CLEAN, **kw)
    assert np.isfinite(float(dirty.loss))
    assert float(dirty.loss) == float(clean.loss)
    np.testing.assert_array_equal(dirty.per_token_loss[~MASK_WHERE], 0.0)


@jax.jit
def _values_and_grads(lp: jax.Array, lp_q: jax.Array, adv: jax.Array, where: jax.Array) -> dict[Any, Any]:
    out = {}
    for name in LOSS_NAMES:
        for agg in LOSS_AGGREGATIONS:

            def loss(x: jax.Array, name: str = name, agg: str = agg) -> jax.Array:
                return call(kjax, name, x, lp_q, adv, where=where, aggregation=agg).loss

            out[name, agg] = jax.value_and_grad(loss)(lp)
    return out


def test_masked_nan_inputs_do_not_leak_jax() -> None:
    dirty = _values_and_grads(*DIRTY, MASK_WHERE)
    clean = _values_and_grads(*CLEAN, MASK_WHERE)
    for key, (value, grad) in dirty.items():
        assert np.isfinite(float(value)) and float(value) == float(clean[key][0]), key
        assert np.all(np.isfinite(np.asarray(grad))), key
        np.testing.assert_array_equal(np.asarray(grad)[~MASK_WHERE], 0.0, err_msg=str(key))
        np.testing.assert_array_equal(np.asarray(grad), np.asarray(clean[key][1]), err_msg=str(key))


def test_where_must_be_boolean() -> None:
    for mod in (kernel, kjax):
        with pytest.raises(TypeError, match="where"):
            mod.importance_sampling_loss([-1.0], [-1.0], [1.0], where=[1.0])
        with pytest.raises(ValueError, match="where"):
            mod.importance_sampling_loss([-1.0, -2.0], [-1.0, -2.0], [1.0, 1.0], where=[True])


# --- aggregation -------------------------------------------------------------------------------------

ELL = np.array([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]])
KEEP = np.array([[True, True, True, False], [True, False, False, False], [False] * 4])


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_aggregation_hand_values(mod: Any) -> None:
    agg = mod.aggregate_token_loss
    assert float(agg(ELL, where=KEEP)) == 10.0
    assert float(agg(ELL, where=KEEP, aggregation="token_mean")) == 2.5
    # sequence means 2 and 4; the empty third row is left out
    assert float(agg(ELL, where=KEEP, aggregation="seq_mean_token_mean")) == 3.0
    assert float(agg(ELL, where=KEEP, normalizer=8.0)) == 1.25
    assert float(agg(ELL, where=KEEP, aggregation="token_mean", normalizer=2.0)) == 1.25
    none = np.zeros_like(KEEP)
    for aggregation in LOSS_AGGREGATIONS:
        assert float(agg(ELL, where=none, aggregation=aggregation)) == 0.0


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_seq_mean_on_packed_input_with_segment_ids(mod: Any) -> None:
    flat_ell, flat_keep = ELL.reshape(-1), KEEP.reshape(-1)
    ids = np.repeat(np.arange(3), 4)
    got = mod.aggregate_token_loss(
        flat_ell, where=flat_keep, aggregation="seq_mean_token_mean", segment_ids=ids, num_segments=3
    )
    assert float(got) == 3.0
    # id == num_segments marks padding tokens, which drop out
    padded_ids = np.where(np.arange(12) >= 8, 2, ids)
    got = mod.aggregate_token_loss(
        flat_ell, aggregation="seq_mean_token_mean", segment_ids=padded_ids, num_segments=2
    )
    assert float(got) == pytest.approx((15.0 / 4 + 31.0 / 4) / 2)


@given(loss_inputs(), st.sampled_from(LOSS_AGGREGATIONS))
def test_aggregation_padded_equals_packed(inputs: tuple[np.ndarray, ...], aggregation: str) -> None:
    lp, lp_q, adv, where = inputs
    padded = kernel.ppo_loss(lp, lp_q, adv, where=where, aggregation=aggregation)
    ids = np.repeat(np.arange(SHAPE[0]), SHAPE[1])
    packed = kernel.ppo_loss(
        lp.reshape(-1),
        lp_q.reshape(-1),
        adv.reshape(-1),
        where=where.reshape(-1),
        aggregation=aggregation,
        segment_ids=ids,
        num_segments=SHAPE[0],
    )
    assert float(packed.loss) == pytest.approx(float(padded.loss), rel=1e-5, abs=1e-5)


def test_sum_is_tinker_no_length_normalisation() -> None:
    lp, adv = np.full(7, -1.0), np.ones(7)
    assert float(kernel.importance_sampling_loss(lp, lp, adv).loss) == -7.0
    assert float(kernel.importance_sampling_loss(lp, lp, adv, aggregation="token_mean").loss) == -1.0


def test_aggregation_option_errors() -> None:
    for mod in (kernel, kjax):
        with pytest.raises(ValueError, match="aggregation"):
            mod.ppo_loss([-1.0], [-1.0], [1.0], aggregation="mean")
        with pytest.raises(ValueError, match="normalizer"):
            mod.ppo_loss([-1.0], [-1.0], [1.0], normalizer=0.0)
        with pytest.raises(ValueError, match="low <= high"):
            mod.ppo_loss([-1.0], [-1.0], [1.0], clip_low_threshold=1.2, clip_high_threshold=0.8)
        with pytest.raises(ValueError, match="low <= high"):
            mod.cispo_loss([-1.0], [-1.0], [1.0], clip_low_threshold=float("nan"))
        with pytest.raises(ValueError, match="segment_ids"):
            mod.ppo_loss([-1.0], [-1.0], [1.0], aggregation="seq_mean_token_mean")
        with pytest.raises(ValueError, match="same shape"):
            mod.dro_loss([-1.0, -2.0], [-1.0], [1.0, 1.0], beta=0.1)
        with pytest.raises(ValueError, match="rank"):
            mod.cross_entropy_loss(-1.0, 1.0)
        with pytest.raises(TypeError, match="advantages"):
            mod.importance_sampling_loss([-1.0], [-1.0], ["x"] if mod is kernel else [1j])
    with pytest.raises(ValueError, match="segment_ids must lie"):
        kernel.aggregate_token_loss(
            [1.0, 2.0], aggregation="seq_mean_token_mean", segment_ids=[0, 3], num_segments=2
        )


# --- relations between losses ------------------------------------------------------------------------


@given(loss_inputs())
def test_related_losses_agree(inputs: tuple[np.ndarray, ...]) -> None:
    lp, lp_q, adv, where = (x.astype(np.float64) if x.dtype != np.bool_ else x for x in inputs)
    is_loss = kernel.importance_sampling_loss(lp, lp_q, adv, where=where)
    unclipped = kernel.ppo_loss(
        lp, lp_q, adv, where=where, clip_low_threshold=0.0, clip_high_threshold=np.inf
    )
    np.testing.assert_allclose(unclipped.per_token_loss, is_loss.per_token_loss, rtol=1e-12)
    # PPO's objective is a pessimistic bound on the importance-sampled one: ℓ_ppo ≥ ℓ_is per token
    ppo = kernel.ppo_loss(lp, lp_q, adv, where=where)
    assert np.all(ppo.per_token_loss >= is_loss.per_token_loss - 1e-12)
    # DRO with β = 0 and CISPO at ρ = 1 are both REINFORCE on lp_θ: cross-entropy weighted by A
    ce = kernel.cross_entropy_loss(lp, adv, where=where)
    np.testing.assert_allclose(
        kernel.dro_loss(lp, lp_q, adv, beta=0.0, where=where).loss, ce.loss, rtol=1e-12
    )
    np.testing.assert_allclose(kernel.cispo_loss(lp, lp, adv, where=where).loss, ce.loss, rtol=1e-12)
    # GSPO on-policy is importance sampling (s = 1); with one token per sequence it is PPO, exactly
    on_policy = kernel.gspo_loss(lp, lp, adv, where=where, **GSPO_CLIP)
    np.testing.assert_array_equal(
        on_policy.per_token_loss, kernel.importance_sampling_loss(lp, lp, adv, where=where).per_token_loss
    )
    ids = np.arange(lp.size).reshape(lp.shape)
    single = kernel.gspo_loss(lp, lp_q, adv, where=where, segment_ids=ids, num_segments=lp.size, **GSPO_CLIP)
    np.testing.assert_array_equal(single.per_token_loss, ppo.per_token_loss)
    assert float(single.clip_fraction) == float(ppo.clip_fraction)


# --- numpy ↔ JAX parity under jit, no retrace --------------------------------------------------------

_TRACES = [0]


@jax.jit
def _all_losses_jit(lp: jax.Array, lp_q: jax.Array, adv: jax.Array, where: jax.Array) -> dict[str, Any]:
    _TRACES[0] += 1
    return {
        (name, agg): call(kjax, name, lp, lp_q, adv, where=where, aggregation=agg)
        for name in LOSS_NAMES
        for agg in LOSS_AGGREGATIONS
    }


@given(loss_inputs())
@example(  # every advantage subnormal, every ratio e > 1.2: PPO clips all 15 tokens or, to XLA, none
    (np.ones((3, 5), np.float32), np.zeros((3, 5), np.float32), np.full((3, 5), 1.557e-41, np.float32),
     np.ones((3, 5), bool))
)  # fmt: skip
def test_numpy_jax_parity_under_jit(inputs: tuple[np.ndarray, ...]) -> None:
    lp, lp_q, adv, where = inputs
    got = _all_losses_jit(lp, lp_q, adv, where)
    # XLA on CPU flushes subnormal float32 inputs to zero (an advantage of 1.6e-41 is 0 to JAX, so PPO
    # clips no token where numpy clips every one: found by the deep profile); numpy gets them flushed too
    tiny = np.finfo(np.float32).tiny
    lp, lp_q, adv = (np.where(np.abs(x) < tiny, np.float32(0), x) for x in (lp, lp_q, adv))
    for (name, agg), out in got.items():
        want = call(kernel, name, lp, lp_q, adv, where=where, aggregation=agg)
        scale = float(np.abs(want.per_token_loss).sum()) + 1.0
        np.testing.assert_allclose(float(out.loss), float(want.loss), rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(
            np.asarray(out.per_token_loss), want.per_token_loss, rtol=1e-5, atol=1e-5, err_msg=name
        )
        assert int(out.num_tokens) == int(want.num_tokens)
        # float32 exp may put a ratio on the other side of a threshold: at most one token differs
        flips = abs(float(out.clip_fraction) - float(want.clip_fraction)) * max(int(want.num_tokens), 1)
        assert flips <= 1 + 1e-4, (name, agg)


def test_no_retrace_under_fixed_shapes() -> None:
    rng = np.random.default_rng(0)

    def draw() -> tuple[np.ndarray, ...]:
        lp_q = rng.uniform(-5, 0, SHAPE).astype(np.float32)
        lp = (lp_q + rng.normal(0, 0.2, SHAPE)).astype(np.float32)
        return lp, lp_q, rng.normal(size=SHAPE).astype(np.float32), rng.random(SHAPE) > 0.3

    _all_losses_jit(*draw())
    before = _TRACES[0]
    for _ in range(3):
        _all_losses_jit(*draw())
    assert _TRACES[0] == before


def test_dtypes() -> None:
    lp32 = np.array([-1.0, -2.0], np.float32)
    for name in LOSS_NAMES:
        out32 = call(kernel, name, lp32, lp32, lp32)
        assert out32.loss.dtype == np.float32 and out32.per_token_loss.dtype == np.float32, name
        out64 = call(kernel, name, lp32.astype(np.float64), lp32, lp32)
        assert out64.loss.dtype == np.float64, name
        assert call(kjax, name, lp32, lp32, lp32).loss.dtype == jnp.float32, name


def test_public_names_exported_with_docstrings() -> None:
    names: list[str] = [f"{n}_loss" for n in LOSS_NAMES] + ["aggregate_token_loss"]
    for name in names:
        assert name in kernel.__all__ and name in kjax.__all__
        for mod in (kernel, kjax):
            fn: Callable[..., Any] = getattr(mod, name)
            assert fn.__doc__ and "Examples:" in fn.__doc__
    assert "TokenLoss" in kernel.__all__ and "LOSS_AGGREGATIONS" in kernel.__all__


# --- finite inputs never give NaN: ρ overflows, A = 0 (issue 8, item 11) --------------------------

# float32 exp overflows past a gap of ~88.7; float64 past ~709.8.
HUGE_GAP = {np.float32: 100.0, np.float64: 800.0}


@pytest.mark.parametrize("aggregation", LOSS_AGGREGATIONS)
@pytest.mark.parametrize("name", LOSS_NAMES)
@pytest.mark.parametrize(
    ("mod", "dtype"),
    [(kernel, np.float32), (kernel, np.float64), (kjax, np.float32)],
    ids=["numpy32", "numpy64", "jax32"],
)
def test_huge_logprob_gap_with_zero_advantage_is_not_nan(
    mod: Any, dtype: Any, name: str, aggregation: str
) -> None:
    gap = HUGE_GAP[dtype]
    lp = np.array([[-1.0, -0.5]], dtype)
    lp_q = np.array([[-1.0 - gap, -0.7]], dtype)  # token 0: ρ = e^gap overflows
    adv = np.array([[0.0, 1.0]], dtype)
    out = call(mod, name, lp, lp_q, adv, aggregation=aggregation)
    assert np.all(np.isfinite(np.asarray(out.per_token_loss))), name
    assert np.isfinite(float(out.loss)), name
    if name != "dro":  # dro charges ½β·gap² whatever A is
        assert float(np.asarray(out.per_token_loss)[0, 0]) == 0.0


def test_huge_logprob_gap_gradients_stay_finite() -> None:
    lp = jnp.array([[-1.0, -1.0, -1.0, -0.5]], jnp.float32)
    lp_q = jnp.array([[-101.0, -101.0, 99.0, -0.7]], jnp.float32)  # gaps 100, 100, −100, 0.2
    adv = jnp.array([[0.0, 1.0, -1.0, 1.0]], jnp.float32)  # token 1: ppo clips it; token 2: ρ → 0
    for name in LOSS_NAMES:
        for agg in LOSS_AGGREGATIONS:
            fn = jax.jit(lambda x, n=name, a=agg: call(kjax, n, x, lp_q, adv, aggregation=a).loss)
            grad = np.asarray(jax.grad(fn)(lp))
            assert not np.any(np.isnan(grad)), (name, agg)
            if name in ("importance_sampling", "ppo", "gspo"):
                assert grad[0, 0] == 0.0, (name, agg)  # A = 0: no gradient, not inf·0
    ppo_grad = np.asarray(jax.grad(lambda x: kjax.ppo_loss(x, lp_q, adv).loss)(lp))
    assert ppo_grad[0, :3].tolist() == [0.0, 0.0, 0.0] and np.isfinite(ppo_grad[0, 3])


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_overflowing_ratio_times_small_advantage_is_exact(mod: Any) -> None:
    # e^100 overflows float32, but e^100 · 1e-20 ≈ 2.69e23 does not: no spurious inf.
    out = mod.importance_sampling_loss(np.float32([0.0]), np.float32([-100.0]), np.float32([1e-20]))
    assert float(np.asarray(out.per_token_loss)[0]) == pytest.approx(-math.exp(100.0) * 1e-20, rel=1e-5)
    # a product that really overflows is ±inf, never NaN
    big = mod.importance_sampling_loss(np.float32([0.0]), np.float32([-100.0]), np.float32([2.0]))
    assert float(np.asarray(big.per_token_loss)[0]) == -np.inf


@pytest.mark.parametrize("mod", [kernel, kjax], ids=["numpy", "jax"])
def test_option_types_are_named(mod: Any) -> None:
    args = ([-1.0], [-1.0], [1.0])
    with pytest.raises(TypeError, match="normalizer"):
        mod.ppo_loss(*args, normalizer="2")
    with pytest.raises(TypeError, match="clip_high_threshold"):
        mod.ppo_loss(*args, clip_high_threshold="1.2")
    with pytest.raises(TypeError, match="beta"):
        mod.dro_loss(*args, beta="0.1")
    with pytest.raises(TypeError, match="clip_low_threshold"):
        mod.gspo_loss(*args)  # no default thresholds
    with pytest.raises(TypeError, match="ratio_where"):
        mod.gspo_loss(*args, ratio_where=[1.0], **GSPO_CLIP)
    with pytest.raises(ValueError, match="aggregation"):
        mod.ppo_loss(*args, aggregation=["sum"])
    with pytest.raises(TypeError, match="num_segments"):
        mod.aggregate_token_loss([1.0], aggregation="seq_mean_token_mean", segment_ids=[0], num_segments=1.0)


@given(
    hnp.arrays(np.float32, 6, elements=st.floats(-150.0, 150.0, width=32)),
    hnp.arrays(
        np.float32,
        6,
        elements=st.floats(-1e3, 1e3, width=32) | st.just(0.0) | st.floats(-(2.0**-66), 2.0**-66, width=32),
    ),
)
@example(  # −e^88·1.5 = −2.48e38 is a finite float32 (it was once required to overflow)
    np.array([88.0, 0, 0, 0, 0, 0], np.float32), np.array([1.5, 0, 0, 0, 0, 0], np.float32)
)
def test_ratio_times_advantage_matches_float64_wherever_representable(
    gap: np.ndarray, adv: np.ndarray
) -> None:
    tiny = np.finfo(np.float32).tiny
    for mod in (kernel, kjax):
        # XLA on CPU flushes subnormal float32 inputs to zero: JAX sees a subnormal advantage as 0
        a = adv if mod is kernel else np.where(np.abs(adv) < tiny, np.float32(0), adv)
        want = -np.exp(gap.astype(np.float64)) * a.astype(np.float64)
        if mod is not kernel:  # and it flushes a subnormal exp(gap) to zero too: ρ·A is 0 there
            want = np.where(np.exp(gap.astype(np.float64)) < tiny, 0.0, want)
        with np.errstate(invalid="ignore"):  # the summed loss may be inf − inf: overflow is real there
            got = np.asarray(mod.importance_sampling_loss(gap, np.zeros(6, np.float32), adv).per_token_loss)
        assert not np.any(np.isnan(got))
        fits = np.abs(want) < 1e38
        np.testing.assert_allclose(got[fits], want[fits], rtol=5e-5, atol=1e-37)
        over = np.abs(want) > float(np.finfo(np.float32).max) * (1 + 1e-6)
        assert np.all(np.isinf(got[over]) & (np.sign(got[over]) == np.sign(want[over])))
        # at the edge of float32 (1e38 to its max) a value is finite or ±inf, but always of its sign
        edge, w = got[~fits & ~over], want[~fits & ~over]
        assert np.all((np.isinf(edge) | np.isclose(edge, w, rtol=5e-5)) & (np.sign(edge) == np.sign(w)))


@pytest.mark.parametrize("xp_name", ["numpy", "jax"])
def test_half_precision_means_divide_in_float32(xp_name: str) -> None:
    """A float16 count is inf past 65,504 tokens: token means over 70,000 float16 tokens were 0 (and the
    KL metrics 0 / NaN). Sums and divisions now run in float32, the result rounds back to float16."""
    n = 70_000
    mod: Any = kernel if xp_name == "numpy" else kjax
    arr: Any = np.asarray if xp_name == "numpy" else jnp.asarray
    ell = arr(np.full(n, 0.001, np.float16))
    for agg in ("token_mean", "seq_mean_token_mean"):
        x = ell if agg == "token_mean" else ell.reshape(2, -1)
        out = mod.aggregate_token_loss(x, aggregation=agg)
        assert out.dtype == np.float16 and abs(float(out) - 0.001) < 1e-5
    loss = mod.importance_sampling_loss(
        arr(np.zeros(n, np.float16)),
        arr(np.zeros(n, np.float16)),
        arr(np.ones(n, np.float16)),
        aggregation="token_mean",
    )
    assert float(loss.loss) == -1.0 and float(loss.clip_fraction) == 0.0
    m = mod.kl_sample_train(
        arr(np.full(n, -1, np.float16)), arr(np.full(n, -1.5, np.float16)), np.ones(n, bool)
    )
    assert (float(m.kl_sample_train_v1), float(m.kl_sample_train_v2), float(m.entropy)) == (0.5, 0.125, 1.0)
    assert m.entropy.dtype == np.float16
