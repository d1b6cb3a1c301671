"""Rubrics: hand-computed examples, a slow per-row reference, properties, numpy ↔ JAX parity, errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import RUBRIC_PRESETS, RubricRewards, component_weights, rubric_rewards

MODES = ("renormalize", "zero")


def slow_rubric(
    x: np.ndarray, w: np.ndarray, m: np.ndarray, missing: str, empty: float = 0.0
) -> tuple[list[float], list[float]]:
    """Row by row, component by component, in Python floats: rewards and coverage."""
    rewards, coverage = [], []
    for r in range(x.shape[0]):
        present = sum(float(w[r, c]) for c in range(x.shape[1]) if m[r, c])
        full = sum(float(w[r, c]) for c in range(x.shape[1]))
        total = sum(float(w[r, c]) * float(x[r, c]) for c in range(x.shape[1]) if m[r, c])
        if missing == "zero":
            rewards.append(total)
        elif present > 0:
            rewards.append(full * total / present)
        else:
            rewards.append(empty if full > 0 else total)
        coverage.append(present / full if full > 0 else 1.0)
    return rewards, coverage


@st.composite
def rubric_cases(draw: st.DrawFn) -> dict[str, Any]:
    rows, cols = draw(st.integers(0, 6)), draw(st.integers(1, 4))
    small = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, -1.0, -0.75, 3.0])
    x = np.array([[draw(small) for _ in range(cols)] for _ in range(rows)], dtype=np.float64).reshape(
        rows, cols
    )
    m = np.array([[draw(st.booleans()) for _ in range(cols)] for _ in range(rows)], dtype=bool).reshape(
        rows, cols
    )
    x = np.where(m, x, np.nan)  # absent entries hold NaN: they must never be read
    weights = st.sampled_from([0.0, 0.5, 1.0, 2.0])
    case: dict[str, Any] = {"x": x, "m": m}
    if draw(st.booleans()):
        actors = draw(st.integers(1, 3))
        case["weights_A_C"] = np.array([[draw(weights) for _ in range(cols)] for _ in range(actors)])
        case["actor_ids_PG"] = np.array(
            [draw(st.integers(0, actors - 1)) for _ in range(rows)], dtype=np.int64
        )
        case["w"] = case["weights_A_C"][case["actor_ids_PG"]].reshape(rows, cols)
    else:
        case["weights_C"] = np.array([draw(weights) for _ in range(cols)])
        case["w"] = np.broadcast_to(case["weights_C"], (rows, cols))
    return case


def _kwargs(case: dict[str, Any]) -> dict[str, Any]:
    return {k: case[k] for k in ("weights_C", "weights_A_C", "actor_ids_PG") if k in case}


# --- examples --------------------------------------------------------------------------------------


def test_every_mode_gives_the_weighted_sum_when_everything_is_present() -> None:
    x = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])
    for missing in MODES:
        r = rubric_rewards(x, weights_C=[1.0, 2.0, 4.0], missing=missing)
        assert r.rewards_PG.tolist() == [3.0, 6.0]
        assert r.coverage_PG.tolist() == [1.0, 1.0]
    default = rubric_rewards(x)
    assert default.rewards_PG.tolist() == [1.5, 2.0]  # weights default to 1 (legos)


def test_a_missing_component_is_never_read_as_zero_by_default() -> None:
    x = np.array([[1.0, np.nan], [1.0, 0.0]])
    m = np.array([[True, False], [True, True]])
    r = rubric_rewards(x, where=m)
    assert r.rewards_PG.tolist() == [2.0, 1.0]  # row 0: its one measured component, scaled to weight 2
    assert r.coverage_PG.tolist() == [0.5, 1.0]
    legos = rubric_rewards(x, where=m, **RUBRIC_PRESETS["legos"])
    assert legos.rewards_PG.tolist() == [1.0, 1.0]  # legos: the unscored component adds 0
    assert r.component_count_C.tolist() == [2, 1]
    assert r.component_mean_C.tolist() == [1.0, 0.0]
    assert r.contribution_mean_C.tolist() == [1.0, 0.0]


def test_per_actor_weights_pick_each_rows_actor() -> None:
    # actor 0 (the debater) is scored on correctness, actor 1 (a judge role) on format only
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    r = rubric_rewards(x, weights_A_C=[[1.0, 0.0], [0.0, 2.0]], actor_ids_PG=[0, 1, 0])
    assert r.rewards_PG.tolist() == [1.0, 2.0, 1.0]


def test_empty_rows_and_rows_with_nothing_present() -> None:
    x = np.array([[np.nan, np.nan], [1.0, 1.0]])
    m = np.array([[False, False], [True, True]])
    r = rubric_rewards(x, where=m, empty=-1.0)
    assert r.rewards_PG.tolist() == [-1.0, 2.0] and r.coverage_PG.tolist() == [0.0, 1.0]
    assert rubric_rewards(x, where=m, missing="zero").rewards_PG.tolist() == [0.0, 2.0]
    none = rubric_rewards(np.zeros((0, 3)))
    assert none.rewards_PG.shape == (0,) and none.component_count_C.tolist() == [0, 0, 0]
    zero_weight = rubric_rewards(x, where=m, weights_C=[0.0, 0.0])
    assert zero_weight.rewards_PG.tolist() == [0.0, 0.0] and zero_weight.coverage_PG.tolist() == [1.0, 1.0]


def test_missing_error_names_the_first_gap() -> None:
    x = np.array([[1.0, 2.0], [3.0, np.nan]])
    m = np.array([[True, True], [True, False]])
    with pytest.raises(ValueError, match=r"where\[1, 1\] is False"):
        rubric_rewards(x, where=m, missing="error")
    ok = rubric_rewards(x, where=m, weights_C=[1.0, 0.0], missing="error")  # weight 0: not needed
    assert ok.rewards_PG.tolist() == [1.0, 3.0]


def test_float32_stays_float32() -> None:
    r = rubric_rewards(np.ones((2, 2), np.float32), weights_C=np.array([1.0, 2.0], np.float32))
    assert r.rewards_PG.dtype == np.float32 and r.coverage_PG.dtype == np.float32


def test_component_weights_by_name() -> None:
    assert component_weights(["a", "b"]).tolist() == [1.0, 1.0]
    assert component_weights(["a", "b"], {"b": 3}, default=0.5).tolist() == [0.5, 3.0]
    with pytest.raises(ValueError, match=r"weights names unknown component\(s\) \['c'\]; the components are"):
        component_weights(["a", "b"], {"c": 1.0})
    with pytest.raises(ValueError, match=r"weights\['a'\] must be >= 0"):
        component_weights(["a", "b"], {"a": -1.0})
    with pytest.raises(ValueError, match="weights\\['a'\\]"):
        component_weights(["a"], {"a": math.nan})
    with pytest.raises(ValueError, match="distinct"):
        component_weights(["a", "a"])


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"weights_C": [1.0, -1.0]}, ValueError, "weights_C must be finite and >= 0"),
        ({"weights_C": [1.0, math.nan]}, ValueError, "weights_C must be finite and >= 0"),
        ({"weights_C": [1.0]}, ValueError, "weights_C must have shape"),
        ({"weights_C": ["a", "b"]}, TypeError, "weights_C"),
        ({"weights_A_C": [[1.0, 1.0]]}, ValueError, "weights_A_C needs actor_ids_PG"),
        (
            {"weights_A_C": [[1.0, 1.0]], "actor_ids_PG": [0, 1]},
            ValueError,
            r"actor_ids_PG must lie in \[0, 1\)",
        ),
        ({"weights_A_C": [[1.0, 1.0]], "actor_ids_PG": [0.0, 0.0]}, TypeError, "actor_ids_PG"),
        ({"weights_A_C": [1.0, 1.0], "actor_ids_PG": [0, 0]}, ValueError, "weights_A_C must have shape"),
        ({"weights_A_C": [[1.0, -2.0]], "actor_ids_PG": [0, 0]}, ValueError, "weights_A_C must be finite"),
        ({"weights_C": [1.0, 1.0], "weights_A_C": [[1.0, 1.0]]}, ValueError, "not both"),
        ({"actor_ids_PG": [0, 0]}, ValueError, "read only with weights_A_C"),
        ({"where": [[1, 1], [1, 1]]}, TypeError, "where must be a boolean array"),
        ({"where": [[True, True]]}, ValueError, "where must have shape"),
        ({"missing": "drop"}, ValueError, "missing"),
        ({"empty": "x"}, TypeError, "empty"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        rubric_rewards(np.ones((2, 2)), **kwargs)


def test_bad_components_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"components_PG_C must have rank 2"):
        rubric_rewards(np.ones(3))
    with pytest.raises(TypeError, match="components_PG_C"):
        rubric_rewards(np.array([["a"]]))
    with pytest.raises(ValueError, match=r"components_PG_C\[0, 1\] is present but not finite"):
        rubric_rewards(np.array([[1.0, math.inf]]))


# --- properties ------------------------------------------------------------------------------------


@given(rubric_cases(), st.sampled_from(MODES))
def test_matches_the_slow_reference(case: dict[str, Any], missing: str) -> None:
    r = rubric_rewards(case["x"], where=case["m"], missing=missing, **_kwargs(case))
    rewards, coverage = slow_rubric(case["x"], case["w"], case["m"], missing)
    np.testing.assert_allclose(r.rewards_PG, rewards, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.coverage_PG, coverage, rtol=1e-12)
    assert r.component_count_C.tolist() == case["m"].sum(axis=0).tolist()


@given(rubric_cases(), st.sampled_from(MODES), st.floats(-5, 5))
def test_absent_entries_are_never_read(case: dict[str, Any], missing: str, value: float) -> None:
    other = np.where(case["m"], case["x"], value)
    a = rubric_rewards(case["x"], where=case["m"], missing=missing, **_kwargs(case))
    b = rubric_rewards(other, where=case["m"], missing=missing, **_kwargs(case))
    for name in RubricRewards._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@given(rubric_cases(), st.sampled_from(MODES), st.data())
def test_permuting_components_with_their_weights_changes_nothing(
    case: dict[str, Any], missing: str, data: st.DataObject
) -> None:
    cols = case["x"].shape[1]
    perm = np.array(data.draw(st.permutations(range(cols))))
    kw = _kwargs(case)
    if "weights_C" in kw:
        kw["weights_C"] = kw["weights_C"][perm]
    else:
        kw["weights_A_C"] = kw["weights_A_C"][:, perm]
    a = rubric_rewards(case["x"], where=case["m"], missing=missing, **_kwargs(case))
    b = rubric_rewards(case["x"][:, perm], where=case["m"][:, perm], missing=missing, **kw)
    np.testing.assert_allclose(b.rewards_PG, a.rewards_PG, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(b.component_count_C, a.component_count_C[perm])


@given(rubric_cases(), st.sampled_from(MODES), st.sampled_from([0.5, 2.0, 4.0]))
def test_scaling_every_weight_scales_the_rewards(case: dict[str, Any], missing: str, k: float) -> None:
    kw = {name: (v * k if name.startswith("weights") else v) for name, v in _kwargs(case).items()}
    a = rubric_rewards(case["x"], where=case["m"], missing=missing, **_kwargs(case))
    b = rubric_rewards(case["x"], where=case["m"], missing=missing, **kw)
    np.testing.assert_allclose(b.rewards_PG, k * a.rewards_PG, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.coverage_PG, a.coverage_PG, rtol=1e-12)


@given(rubric_cases())
def test_the_modes_agree_on_complete_rows_and_renormalize_is_the_scaled_weighted_mean(
    case: dict[str, Any],
) -> None:
    re = rubric_rewards(case["x"], where=case["m"], **_kwargs(case)).rewards_PG
    zero = rubric_rewards(case["x"], where=case["m"], missing="zero", **_kwargs(case)).rewards_PG
    complete = case["m"].all(axis=1)
    np.testing.assert_allclose(re[complete], zero[complete], rtol=1e-12, atol=1e-12)
    w, m = case["w"], case["m"]
    present = (w * m).sum(axis=1)
    has = present > 0
    mean = zero[has] / present[has]
    np.testing.assert_allclose(re[has], w.sum(axis=1)[has] * mean, rtol=1e-12, atol=1e-12)


# --- JAX twin --------------------------------------------------------------------------------------


_ROWS, _COLS, _ACTORS = 6, 4, 3  # rubric_cases' largest sizes: every case is padded to them
_JITTED: dict[str, Any] = {}


def _padded(case: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """The case in one bucket: absent padding rows and columns of weight 0 change no row's reward."""
    rows, cols = case["m"].shape
    x = np.zeros((_ROWS, _COLS))
    x[:rows, :cols] = np.where(case["m"], case["x"], 0.0)
    m = np.zeros((_ROWS, _COLS), bool)
    m[:rows, :cols] = case["m"]
    if "weights_C" in case:
        w = np.zeros(_COLS)
        w[:cols] = case["weights_C"]
        return x, m, {"weights_C": w}
    w_a = np.zeros((_ACTORS, _COLS))
    w_a[: case["weights_A_C"].shape[0], :cols] = case["weights_A_C"]
    actors = np.zeros(_ROWS, np.int64)
    actors[:rows] = case["actor_ids_PG"]
    return x, m, {"weights_A_C": w_a, "actor_ids_PG": actors}


@given(rubric_cases(), st.sampled_from(MODES))
def test_jax_twin_matches_numpy_under_jit(case: dict[str, Any], missing: str) -> None:
    """Under one jit per mode: each case padded to one bucket, so the twin compiles a few times in all."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from kernel.jax import rubric_rewards as jax_rubric

    if missing not in _JITTED:
        _JITTED[missing] = jax.jit(lambda x, m, kw: jax_rubric(x, where=m, missing=missing, **kw))
    x, m, kw = _padded(case)
    got = _JITTED[missing](
        jnp.asarray(x, jnp.float32), jnp.asarray(m), {k: jnp.asarray(v) for k, v in kw.items()}
    )
    want = rubric_rewards(case["x"], where=case["m"], missing=missing, **_kwargs(case))
    rows, cols = case["m"].shape
    for name in RubricRewards._fields:
        value = np.asarray(getattr(got, name))
        value = value[:rows] if name.endswith("_PG") else value[:cols]
        if name == "contribution_mean_C":  # a mean over every row, the padding ones (all 0) included
            value = value * _ROWS / max(rows, 1)
        np.testing.assert_allclose(value, getattr(want, name), rtol=1e-5, atol=1e-5)
    assert got.rewards_PG.dtype == jnp.float32


def test_jax_twin_checks_host_values_and_refuses_error_mode() -> None:
    pytest.importorskip("jax")
    from kernel.jax import rubric_rewards as jax_rubric

    with pytest.raises(ValueError, match="weights_C must be finite and >= 0"):
        jax_rubric(np.ones((2, 2)), weights_C=[1.0, -1.0])
    with pytest.raises(ValueError, match=r"actor_ids_PG must lie in \[0, 1\)"):
        jax_rubric(np.ones((2, 2)), weights_A_C=[[1.0, 1.0]], actor_ids_PG=[0, 3])
    with pytest.raises(ValueError, match="numpy"):
        jax_rubric(np.ones((2, 2)), missing="error")
    with pytest.raises(ValueError, match="components_PG_C must have rank 2"):
        jax_rubric(np.ones(2))


def test_weights_must_survive_the_components_dtype() -> None:
    """Weights were checked in float64 and then cast to the components' float32: 1e39 became inf (NaN
    rewards) and 1e-46 became 0 (a missing component with that weight passed ``missing="error"``)."""
    x = np.ones((1, 2), np.float32)
    for w in (1e39, 1e-46):
        with pytest.raises(
            ValueError, match="weights_C must be representable in the components' dtype float32"
        ):
            rubric_rewards(x, weights_C=[w, 1.0])
    with pytest.raises(ValueError, match="weights_A_C must be representable"):
        rubric_rewards(x, weights_A_C=[[1e39, 1.0]], actor_ids_PG=[0])
    assert np.isfinite(rubric_rewards(x.astype(np.float64), weights_C=[1e39, 1.0]).rewards_PG).all()


def test_component_weights_refuses_a_string_of_names_and_a_list_of_weights() -> None:
    """``component_weights("abc")`` made three components a, b, c."""
    with pytest.raises(TypeError, match="names must be a sequence of component names, got the string 'abc'"):
        component_weights("abc")
    with pytest.raises(TypeError, match="names must be strings"):
        component_weights([1, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="weights must be a mapping name -> weight, got list"):
        component_weights(["a", "b"], [1.0, 2.0])  # type: ignore[arg-type]


def test_jax_twin_checks_concrete_values_even_when_some_are_jax_arrays() -> None:
    """The host checks ran only when no argument was a JAX array: a JAX component array let a negative
    weight, an out-of-range actor id and a present NaN through."""
    import jax
    import jax.numpy as jnp

    import kernel.jax as kj

    x = jnp.asarray(np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0]], np.float32))
    with pytest.raises(ValueError, match="weights_C must be finite and >= 0"):
        kj.rubric_rewards(x, weights_C=[-1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"actor_ids_PG must lie in \[0, 2\)"):
        kj.rubric_rewards(x, weights_A_C=np.ones((2, 3), np.float32), actor_ids_PG=[0, 5])
    with pytest.raises(ValueError, match="present but not finite"):
        kj.rubric_rewards(jnp.array([[np.nan, 1.0]]))
    traced = jax.jit(lambda a: kj.rubric_rewards(a).rewards_PG)(x)  # under jit: shapes only
    assert traced.shape == (2,)
