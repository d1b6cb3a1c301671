"""Metrics: sampler–trainer KL / entropy (numpy and JAX), trajectory statistics, step means."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernel
import kernel.jax as kjax
from kernel import (
    KLMetrics,
    StepMetrics,
    TrajectoryMetrics,
    kl_sample_train,
    step_metrics,
    trajectory_metrics,
)
from tests.golden import VECTORS_DIR, read_records
from tests.golden._kl_metrics import packed_inputs

KL_FIELDS = ("kl_sample_train_v1", "kl_sample_train_v2", "entropy")

# --- strategies (local: small shapes, float32 logprobs) ----------------------------------------------

_logprob = st.floats(-12.0, 0.0, width=32)
_mask_value = st.sampled_from([0.0, 1.0, 1.0, 1.0, -0.0, -1.0, 0.5, 2.0, 1e-9])


@st.composite
def kl_batches(draw: st.DrawFn, *, size: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sampler_logprobs, train_logprobs, mask), float32 [n], nonbinary mask values included."""
    n = size if size is not None else draw(st.integers(0, 24))
    q = draw(hnp.arrays(np.float32, n, elements=_logprob))
    t = draw(hnp.arrays(np.float32, n, elements=_logprob))
    m = draw(hnp.arrays(np.float32, n, elements=_mask_value))
    return q, t, m


def _kl_oracle(q: np.ndarray, t: np.ndarray, m: np.ndarray) -> tuple[float, float, float, int]:
    """The obvious float64 loop over action tokens."""
    diffs, samples = [], []
    for qi, ti, mi in zip(q.tolist(), t.tolist(), m.tolist(), strict=True):
        if mi > 0:
            diffs.append(qi - ti)
            samples.append(qi)
    n = len(diffs)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    return sum(diffs) / n, 0.5 * sum(d * d for d in diffs) / n, -sum(samples) / n, n


def _assert_kl_close(got: KLMetrics[Any], want: tuple[float, float, float, int], *, scale: float) -> None:
    assert int(got.num_action_tokens) == want[3]
    for name, w in zip(KL_FIELDS, want[:3], strict=True):
        g = float(got._asdict()[name])
        if math.isnan(w):
            assert math.isnan(g), name
        else:
            assert abs(g - w) <= 1e-5 * (scale + abs(w)), (name, g, w)


# --- kl_sample_train: examples -----------------------------------------------------------------------


def test_kl_hand_computed() -> None:
    # action diffs d = q - t = [0.5, -1.0, 0.0]; sampler logprobs on actions [-1, -3, -0.5].
    q = np.array([-1.0, -3.0, -7.0, -0.5])
    t = np.array([-1.5, -2.0, -0.1, -0.5])
    m = np.array([1.0, 1.0, 0.0, 1.0])
    out = kl_sample_train(q, t, m)
    assert float(out.kl_sample_train_v1) == pytest.approx(-0.5 / 3)
    assert float(out.kl_sample_train_v2) == pytest.approx(0.5 * 1.25 / 3)
    assert float(out.entropy) == pytest.approx(4.5 / 3)
    assert int(out.num_action_tokens) == 3
    assert out.as_dict() == {
        "optim/kl_sample_train_v1": pytest.approx(-0.5 / 3),
        "optim/kl_sample_train_v2": pytest.approx(0.5 * 1.25 / 3),
        "optim/entropy": pytest.approx(1.5),
    }


def test_kl_nonbinary_mask_semantics() -> None:
    mask = np.array([0.5, 2.0, 1e-9, -1.0, 0.0, -0.0, np.nan, 1.0], dtype=np.float32)
    q = np.arange(-8.0, 0.0, dtype=np.float32)
    out = kl_sample_train(q, q, mask)
    assert int(out.num_action_tokens) == 4
    assert float(out.entropy) == pytest.approx(-(q[0] + q[1] + q[2] + q[7]) / 4)
    assert float(out.kl_sample_train_v1) == 0.0
    # boolean and integer masks are accepted with the same meaning
    assert int(kl_sample_train(q, q, mask > 0).num_action_tokens) == 4
    assert int(kl_sample_train(q, q, (mask > 0).astype(np.int32)).num_action_tokens) == 4


@pytest.mark.parametrize(
    "q, m",
    [
        ([], []),
        ([-1.0, -2.0], [0.0, -1.0]),
        ([[-1.0, -2.0], [-3.0, -4.0]], [[0.0, 0.0], [-0.0, 0.0]]),
    ],
)
def test_kl_no_action_tokens_is_explicit(q: list[Any], m: list[Any]) -> None:
    out = kl_sample_train(q, q, m)
    assert int(out.num_action_tokens) == 0
    assert all(math.isnan(float(v)) for v in (out.kl_sample_train_v1, out.kl_sample_train_v2, out.entropy))
    assert out.as_dict() == {}


def test_kl_dtypes_float32_stays_float32_float64_stays_float64() -> None:
    q32 = np.array([-1.0, -2.0], dtype=np.float32)
    out32 = kl_sample_train(q32, q32 - 1, [1, 1])
    assert all(np.asarray(v).dtype == np.float32 for v in out32[:3])
    out64 = kl_sample_train(q32.astype(np.float64), q32.astype(np.float64), [1, 1])
    assert all(np.asarray(v).dtype == np.float64 for v in out64[:3])
    # mixed precision promotes, never downcasts
    assert np.asarray(kl_sample_train(q32, q32.astype(np.float64), [1, 1])[0]).dtype == np.float64


def test_kl_masked_nan_and_inf_do_not_leak() -> None:
    q = np.array([-1.0, np.nan, -np.inf, -2.0])
    t = np.array([-1.5, np.inf, np.nan, -2.0])
    m = np.array([1.0, 0.0, -1.0, 1.0])
    out = kl_sample_train(q, t, m)
    clean = kl_sample_train([-1.0, -2.0], [-1.5, -2.0], [1.0, 1.0])
    for a, b in zip(out[:3], clean[:3], strict=True):
        assert float(a) == float(b)


def test_kl_padded_equals_packed() -> None:
    q = np.array([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    t = np.array([[-1.2, -2.5, 9.0], [-0.1, 9.0, 9.0]])
    m = np.array([[1, 1, 0], [1, 0, 0]])
    padded = kl_sample_train(q, t, m)
    packed = kl_sample_train([-1.0, -2.0, -0.5], [-1.2, -2.5, -0.1], [1, 1, 1])
    np.testing.assert_allclose(np.array(padded[:3]), np.array(packed[:3]), rtol=1e-15)


def test_kl_argument_errors() -> None:
    with pytest.raises(ValueError, match="same shape"):
        kl_sample_train([-1.0, -2.0], [-1.0], [1, 1])
    with pytest.raises(ValueError, match="same shape"):
        kl_sample_train([[-1.0, -2.0]], [-1.0, -2.0], [1, 1])
    with pytest.raises(TypeError, match="sampler_logprobs"):
        kl_sample_train(["a"], [-1.0], [1])
    with pytest.raises(TypeError, match="mask"):
        kl_sample_train([-1.0], [-1.0], ["x"])
    with pytest.raises(TypeError, match="train_logprobs"):
        kl_sample_train([-1.0], [1j], [1])


# --- kl_sample_train: properties ---------------------------------------------------------------------


@given(kl_batches())
def test_kl_matches_loop_oracle(batch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    q, t, m = batch
    scale = float(np.abs(q).sum() + np.abs(t).sum()) / max(len(q), 1) + 1.0
    _assert_kl_close(kl_sample_train(q, t, m), _kl_oracle(q, t, m), scale=scale**2)


@given(kl_batches(), kl_batches())
def test_kl_token_weighting_concatenation(
    a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    ma, mb = kl_sample_train(*a), kl_sample_train(*b)
    joint = kl_sample_train(*(np.concatenate([x, y]) for x, y in zip(a, b, strict=True)))
    na, nb = int(ma.num_action_tokens), int(mb.num_action_tokens)
    assert int(joint.num_action_tokens) == na + nb
    assume(na + nb > 0)
    for name in KL_FIELDS:
        parts = [(n, float(m._asdict()[name])) for n, m in ((na, ma), (nb, mb)) if n]
        want = sum(n * v for n, v in parts) / (na + nb)
        scale = sum(n * abs(v) for n, v in parts) / (na + nb) + 1.0
        assert float(joint._asdict()[name]) == pytest.approx(want, abs=1e-5 * scale)


@given(kl_batches(), st.sampled_from([0.25, 1.0, 3.0, 1e6]))
def test_kl_binary_mask_scale_invariance(batch: tuple[np.ndarray, np.ndarray, np.ndarray], c: float) -> None:
    q, t, m = batch
    binary = (m > 0).astype(np.float32)
    base = kl_sample_train(q, t, binary)
    for mask in (binary * np.float32(c), binary > 0):
        scaled = kl_sample_train(q, t, mask)
        for x, y in zip(base, scaled, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@given(kl_batches(), st.randoms(use_true_random=False))
def test_kl_permutation_invariance_and_v2_bound(
    batch: tuple[np.ndarray, np.ndarray, np.ndarray], rnd: Any
) -> None:
    q, t, m = batch
    perm = list(range(len(q)))
    rnd.shuffle(perm)
    a, b = kl_sample_train(q, t, m), kl_sample_train(q[perm], t[perm], m[perm])
    assert int(a.num_action_tokens) == int(b.num_action_tokens)
    assume(int(a.num_action_tokens) > 0)
    for x, y in zip(a[:3], b[:3], strict=True):
        assert float(x) == pytest.approx(float(y), rel=1e-5, abs=1e-4)
    # Jensen: ½·mean(d²) ≥ ½·mean(d)²
    v1, v2 = float(a.kl_sample_train_v1), float(a.kl_sample_train_v2)
    assert v2 >= 0.5 * v1 * v1 * (1 - 1e-4) - 1e-6


# --- kl_sample_train: JAX twin -----------------------------------------------------------------------

_KL_TRACES = [0]


@jax.jit
def _kl_jit(q: jax.Array, t: jax.Array, m: jax.Array) -> KLMetrics[jax.Array]:
    _KL_TRACES[0] += 1
    return kjax.kl_sample_train(q, t, m)


@given(kl_batches(size=16))
def test_kl_jax_parity_under_jit(batch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    q, t, m = batch
    got, want = _kl_jit(q, t, m), kl_sample_train(q, t, m)
    assert isinstance(got, KLMetrics)
    assert int(got.num_action_tokens) == int(want.num_action_tokens)
    for x, y in zip(got[:3], want[:3], strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-5, atol=2e-4)


def test_kl_jax_no_retrace_and_empty_value() -> None:
    _kl_jit(np.zeros(16, np.float32), np.zeros(16, np.float32), np.ones(16, np.float32))
    before = _KL_TRACES[0]
    for seed in range(4):
        rng = np.random.default_rng(seed)
        q = rng.uniform(-5, 0, 16).astype(np.float32)
        _kl_jit(q, q - 0.1, (rng.random(16) > 0.5).astype(np.float32))
    out = _kl_jit(np.zeros(16, np.float32), np.zeros(16, np.float32), np.zeros(16, np.float32))
    assert _KL_TRACES[0] == before
    assert int(out.num_action_tokens) == 0 and math.isnan(float(out.entropy))
    assert out.as_dict() == {}


def test_kl_jax_golden_vectors_vmapped() -> None:
    """Every golden record through the JAX twin: one compile, records padded with NaN non-actions."""
    records = list(read_records(VECTORS_DIR / "kl_metrics.jsonl"))
    width = 2048
    qs = np.full((len(records), width), np.nan, np.float32)
    ts = np.full((len(records), width), np.nan, np.float32)
    ms = np.zeros((len(records), width), np.float32)
    for i, r in enumerate(records):
        q, t, m = packed_inputs(r)
        qs[i, : len(q)], ts[i, : len(t)], ms[i, : len(m)] = q, t, m
    out = jax.jit(jax.vmap(kjax.kl_sample_train))(qs, ts, ms)
    for i, r in enumerate(records):
        expected = r["expected"]
        if "error" in expected:
            assert int(out.num_action_tokens[i]) == 0, r["id"]
            assert math.isnan(float(out.entropy[i])), r["id"]
            continue
        for name in KL_FIELDS:
            got = float(out._asdict()[name][i])
            assert got == pytest.approx(expected[name], rel=1e-5, abs=1e-5), (r["id"], name)


def test_kl_jax_gradient_ignores_masked_nan() -> None:
    q = jnp.array([-1.0, jnp.nan, -2.0, -0.5])
    t = jnp.array([-1.5, jnp.nan, -2.0, jnp.inf])
    m = jnp.array([1.0, 0.0, 1.0, -1.0])
    grad = jax.grad(lambda t_: kjax.kl_sample_train(q, t_, m).kl_sample_train_v1)(t)
    np.testing.assert_array_equal(np.asarray(grad), [-0.5, 0.0, -0.5, 0.0])


def test_kl_jax_argument_errors() -> None:
    with pytest.raises(ValueError, match="same shape"):
        kjax.kl_sample_train(jnp.zeros(3), jnp.zeros(2), jnp.ones(3))
    with pytest.raises(TypeError, match="mask"):
        kjax.kl_sample_train(jnp.zeros(2), jnp.zeros(2), jnp.ones(2, jnp.complex64))


# --- trajectory_metrics ------------------------------------------------------------------------------


def test_trajectory_metrics_hand_computed() -> None:
    # Episodes 0..4; groups: {0, 1} mixed, {2, 3} all good (1.0 >= 0.5), {4} all bad (0.0).
    m = trajectory_metrics(
        ob_tokens=[100, 150, 200, 50, 60, 70],
        ac_tokens=[10, 20, 30, 5, 6, 7],
        turn_episode_ids=[0, 0, 1, 2, 3, 4],
        returns_PG=[1.0, 0.0, 1.0, 1.0, 0.0],
        group_ids_PG=[0, 0, 1, 1, 2],
        num_groups=3,
    )
    assert m == TrajectoryMetrics(
        ac_tokens_per_turn=78 / 6,
        ob_tokens_per_turn=630 / 6,
        turns_per_episode=6 / 5,
        total_episodes=5,
        total_turns=6,
        total_ac_tokens=78,
        total_ob_tokens=630,
        reward_total=3 / 5,
        frac_mixed=1 / 3,
        frac_all_good=1 / 3,
        frac_all_bad=1 / 3,
    )
    d = m.as_dict()
    assert set(d) == {
        "env/all/" + k
        for k in (
            "ac_tokens_per_turn",
            "ob_tokens_per_turn",
            "turns_per_episode",
            "total_episodes",
            "total_turns",
            "total_ac_tokens",
            "total_ob_tokens",
            "reward/total",
            "by_group/frac_mixed",
            "by_group/frac_all_good",
            "by_group/frac_all_bad",
        )
    }
    assert d["env/all/by_group/frac_mixed"] == pytest.approx(1 / 3)
    assert all(isinstance(v, float) for v in d.values())


def test_trajectory_metrics_empty_batch_is_zero() -> None:
    m = trajectory_metrics([], [], [], [], [], 0)
    assert m == TrajectoryMetrics(0.0, 0.0, 0.0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0)


def test_trajectory_metrics_episode_without_turns_and_empty_groups() -> None:
    m = trajectory_metrics([3], [4], [1], [0.2, 0.2], [0, 0], num_groups=4)
    assert m.total_episodes == 2 and m.total_turns == 1 and m.turns_per_episode == 0.5
    assert (m.frac_mixed, m.frac_all_good, m.frac_all_bad) == (0.0, 0.0, 1.0)  # groups 1..3 empty


def test_trajectory_metrics_nan_return_makes_group_mixed() -> None:
    m = trajectory_metrics([], [], [], [np.nan, 1.0, 1.0], [0, 1, 1], num_groups=2)
    assert (m.frac_mixed, m.frac_all_good) == (0.5, 0.5)


def test_trajectory_metrics_argument_errors() -> None:
    with pytest.raises(ValueError, match="ob_tokens must be >= 0"):
        trajectory_metrics([-1], [1], [0], [1.0], [0], 1)
    with pytest.raises(ValueError, match="turn_episode_ids"):
        trajectory_metrics([1], [1], [2], [1.0], [0], 1)
    with pytest.raises(ValueError, match="group_ids_PG"):
        trajectory_metrics([1], [1], [0], [1.0], [2], 1)
    with pytest.raises(ValueError, match="same length"):
        trajectory_metrics([1, 2], [1], [0], [1.0], [0], 1)
    with pytest.raises(TypeError, match="ac_tokens"):
        trajectory_metrics([1], [1.5], [0], [1.0], [0], 1)


@st.composite
def episode_batches(draw: st.DrawFn) -> dict[str, Any]:
    """Groups of episodes with small integer-valued returns (so ties happen) and random turns."""
    num_groups = draw(st.integers(1, 5))
    num_episodes = draw(st.integers(0, 10))
    groups = draw(st.lists(st.integers(0, num_groups - 1), min_size=num_episodes, max_size=num_episodes))
    returns = draw(
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -1.0]), min_size=num_episodes, max_size=num_episodes)
    )
    num_turns = draw(st.integers(0, 15)) if num_episodes else 0
    turn_eps = draw(
        st.lists(st.integers(0, max(num_episodes - 1, 0)), min_size=num_turns, max_size=num_turns)
    )
    ob = draw(st.lists(st.integers(0, 500), min_size=num_turns, max_size=num_turns))
    ac = draw(st.lists(st.integers(0, 500), min_size=num_turns, max_size=num_turns))
    return {
        "ob_tokens": ob,
        "ac_tokens": ac,
        "turn_episode_ids": turn_eps,
        "returns_PG": returns,
        "group_ids_PG": groups,
        "num_groups": num_groups,
    }


def _trajectory_oracle(b: dict[str, Any], good: float = 0.5) -> dict[str, float]:
    """The reference's loops over nested groups → trajectories → transitions (guarded divisions)."""
    episodes: dict[int, list[int]] = defaultdict(list)
    for turn, ep in enumerate(b["turn_episode_ids"]):
        episodes[ep].append(turn)
    groups: dict[int, list[int]] = defaultdict(list)
    for ep, g in enumerate(b["group_ids_PG"]):
        groups[g].append(ep)
    flat = [ep for g in sorted(groups) for ep in groups[g]]
    turns = [t for ep in flat for t in episodes[ep]]
    n_turns, n_eps, n_groups = len(turns), len(flat), len(groups)
    mixed = good_n = bad_n = 0
    for eps in groups.values():
        rs = [b["returns_PG"][e] for e in eps]
        if all(r == rs[0] for r in rs):
            if rs[0] >= good:
                good_n += 1
            else:
                bad_n += 1
        else:
            mixed += 1
    out = {
        "ac_tokens_per_turn": sum(b["ac_tokens"][t] for t in turns) / n_turns if n_turns else 0.0,
        "ob_tokens_per_turn": sum(b["ob_tokens"][t] for t in turns) / n_turns if n_turns else 0.0,
        "turns_per_episode": n_turns / n_eps if n_eps else 0.0,
        "total_episodes": n_eps,
        "total_turns": n_turns,
        "total_ac_tokens": sum(b["ac_tokens"][t] for t in turns),
        "total_ob_tokens": sum(b["ob_tokens"][t] for t in turns),
        "reward/total": float(np.mean([b["returns_PG"][e] for e in flat])) if n_eps else 0.0,
        "by_group/frac_mixed": mixed / n_groups if n_groups else 0.0,
        "by_group/frac_all_good": good_n / n_groups if n_groups else 0.0,
        "by_group/frac_all_bad": bad_n / n_groups if n_groups else 0.0,
    }
    return {"env/all/" + k: float(v) for k, v in out.items()}


@given(episode_batches())
def test_trajectory_metrics_match_reference_loops(b: dict[str, Any]) -> None:
    got = trajectory_metrics(**b).as_dict()
    want = _trajectory_oracle(b)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-12, abs=1e-12), k


@given(episode_batches(), st.integers(1, 4), st.integers(0, 4))
def test_trajectory_metrics_padding_drops_out(b: dict[str, Any], pad_eps: int, pad_turns: int) -> None:
    base = trajectory_metrics(**b)
    n_eps, num_groups = len(b["returns_PG"]), b["num_groups"]
    padded = dict(b)
    padded["returns_PG"] = b["returns_PG"] + [123.0] * pad_eps
    padded["group_ids_PG"] = b["group_ids_PG"] + [num_groups] * pad_eps
    # turns of padding episodes and padding turns (id = number of episodes) both drop out
    extra_turns = [n_eps] * pad_eps + [n_eps + pad_eps] * pad_turns
    padded["turn_episode_ids"] = b["turn_episode_ids"] + extra_turns
    padded["ob_tokens"] = b["ob_tokens"] + [999] * len(extra_turns)
    padded["ac_tokens"] = b["ac_tokens"] + [999] * len(extra_turns)
    assert trajectory_metrics(**padded) == base


# --- step_metrics ------------------------------------------------------------------------------------


def test_step_metrics_hand_computed_and_where() -> None:
    m = step_metrics([1, 0, 0, 1], [True, True, False, False], [0, 1, 2, 3])
    assert m == StepMetrics(parse_error=0.5, consensus_reached=0.5, round=1.5, num_steps=4)
    assert m.as_dict() == {"env/all/parse_error": 0.5, "env/all/consensus_reached": 0.5, "env/all/round": 1.5}
    keep = np.array([True, True, False, False])
    m = step_metrics([1, 0, np.nan, 1], [True, True, False, False], [0, 1, 2, 3], where=keep)
    assert m == StepMetrics(parse_error=0.5, consensus_reached=1.0, round=0.5, num_steps=2)


def test_step_metrics_empty_and_errors() -> None:
    assert step_metrics([], [], []) == StepMetrics(0.0, 0.0, 0.0, 0)
    assert step_metrics([1], [1], [1], where=[False]) == StepMetrics(0.0, 0.0, 0.0, 0)
    with pytest.raises(TypeError, match="where"):
        step_metrics([1], [1], [1], where=[1])
    with pytest.raises(ValueError, match="same length"):
        step_metrics([1, 0], [1], [1])
    with pytest.raises(ValueError, match="where"):
        step_metrics([1], [1], [1], where=[True, False])


def test_public_names_exported_with_docstrings() -> None:
    for name in ("KLMetrics", "TrajectoryMetrics", "StepMetrics", "kl_sample_train", "trajectory_metrics"):
        assert name in kernel.__all__ and getattr(kernel, name).__doc__
    assert "kl_sample_train" in kjax.__all__


def test_trajectory_metrics_checks_num_groups_and_the_threshold() -> None:
    args = ([1], [1], [0], [1.0], [0])
    for bad in (1.0, None, True, np.array([1])):
        with pytest.raises(TypeError, match="num_groups must be an int"):
            kernel.trajectory_metrics(*args, num_groups=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_groups must be >= 0"):
        kernel.trajectory_metrics(*args, num_groups=-1)
    with pytest.raises(TypeError, match="good_threshold must be a real number"):
        kernel.trajectory_metrics(*args, num_groups=1, good_threshold="0.5")  # type: ignore[arg-type]
    assert kernel.trajectory_metrics(*args, num_groups=np.int64(1)).frac_all_good == 1.0


def test_trajectory_metrics_token_totals_beyond_int64_are_exact() -> None:
    """Found by review: the totals were int64 sums, which wrapped to a negative count past 2**63."""
    big = 2**62
    m = trajectory_metrics([big, big, 1], [big, big, big], [0, 0, 0], [1.0], [0], 1)
    assert m.total_ob_tokens == 2 * big + 1 and m.total_ac_tokens == 3 * big
    assert m.ac_tokens_per_turn == float(big) and m.ob_tokens_per_turn > 0
