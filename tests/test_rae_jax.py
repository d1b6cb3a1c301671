"""kernel.jax.rae_advantages: hand values, golden replay through the JAX core, numpy ↔ JAX parity."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel
import kernel._rae as rae_module
import kernel.jax as kj
from tests.golden import _rae as golden_rae

VECTORS = Path(__file__).parent / "golden" / "vectors" / "rae.jsonl"


@pytest.fixture(autouse=True)
def _x64() -> Iterator[None]:
    with jax.enable_x64(True):
        yield


@functools.cache
def _jitted(order: str, decay: float, scaling: float) -> Any:
    """One jitted JAX core per option set (recompiled only for new shapes)."""
    return jax.jit(
        lambda r, k, b, w: kj.rae_advantages(
            r, k, b, decay=decay, order=order, where=w, reward_scaling=scaling
        )
    )


def _bucket(n: int) -> int:
    return max(8, 1 << max(n - 1, 0).bit_length())


def _jax_core(*args: Any, **kwargs: Any) -> kernel.RAEAdvantages:
    """The JAX core under jit, returned as the numpy result type (so rae_batch can drive it).

    Rows and keys are padded to powers of two (padding rows: key id K and ``where`` False; padding keys:
    no rows, so they keep their baseline), as a caller bucketing shapes would, so few shapes compile.
    """
    rewards, ids, base = (np.asarray(a) for a in args)
    where = kwargs.get("where")
    where = np.ones(len(rewards), bool) if where is None else np.asarray(where, bool)
    n, k = len(rewards), len(base)
    rows, keys = _bucket(n), _bucket(k)
    ids = np.where((ids >= 0) & (ids < k), ids, keys).astype(np.int64)  # out of range: padding, as numpy
    fn = _jitted(kwargs["order"], kwargs["decay"], kwargs.get("reward_scaling", 1.0))
    out = fn(
        jnp.asarray(np.pad(rewards.astype(np.float64), (0, rows - n))),
        jnp.asarray(np.pad(ids, (0, rows - n), constant_values=keys)),
        jnp.asarray(np.pad(base.astype(np.float64), (0, keys - k))),
        jnp.asarray(np.pad(where, (0, rows - n))),
    )
    return kernel.RAEAdvantages(
        np.asarray(out.advantages)[:n],
        np.asarray(out.baselines)[:n],
        np.asarray(out.baselines_K)[:k],
        np.asarray(out.counts_K, np.int64)[:k],
    )


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in VECTORS.read_text().splitlines() if line.strip()]


def test_every_golden_record_agrees_through_the_jax_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call the golden records make to the numpy core is made to the JAX core too and compared.

    The JAX core agrees to 1e-12 (XLA may contract d·b + (1 − d)·m into one fused multiply-add, so the
    last bit can differ); the records themselves are then checked exactly against the numpy result.
    """
    numpy_core = rae_module.rae_advantages
    calls = []

    def both(*args: Any, **kwargs: Any) -> kernel.RAEAdvantages:
        want = numpy_core(*args, **kwargs)  # raises first on bad input, as the records expect
        got = _jax_core(*args, **{"order": "legos", "reward_scaling": 1.0, **kwargs})
        for name in ("advantages", "baselines", "baselines_K"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(got.counts_K, want.counts_K)
        calls.append(1)
        return want

    monkeypatch.setattr(rae_module, "rae_advantages", both)
    records = _records()
    assert len(records) > 100
    failures = [(r["id"], m) for r in records if (m := golden_rae.check(r)) is not None]
    assert failures == []
    assert len(calls) > len(records) // 2  # the JAX core saw the records' batches


def test_hand_values_both_orders() -> None:
    res = kj.rae_advantages(
        jnp.array([1.0, 0.0, 3.0, 9.0]), jnp.array([0, 1, 0, 2]), jnp.array([0.5, 0.0]), decay=0.5
    )
    assert res.advantages.tolist() == [0.5, 0.0, 2.5, 0.0]  # id 2 = K: padding
    assert res.baselines_K.tolist() == [1.25, 0.0]
    assert res.counts_K.tolist() == [2, 1]
    spiral = kj.rae_advantages(
        [1.0, 3.0, 5.0], [0, 0, 0], [0.5], decay=0.5, order="spiral", where=[True, True, False]
    )
    assert spiral.advantages.tolist() == [0.5, 2.25, 0.0]  # b: 0.5 → 0.75 → 1.875
    assert spiral.baselines.tolist() == [0.5, 0.75, 0.0]
    assert spiral.baselines_K.tolist() == [1.875]


@given(
    st.lists(st.tuples(st.floats(-4, 4), st.integers(0, 3), st.booleans()), max_size=12),
    st.lists(st.floats(-2, 2), min_size=3, max_size=3),
    st.sampled_from(["legos", "spiral"]),
    st.sampled_from([0.1, 0.5, 0.9]),
    st.sampled_from([1.0, 0.5]),
)
def test_parity_with_numpy_under_jit(
    rows: list[tuple[float, int, bool]], base: list[float], order: str, decay: float, scaling: float
) -> None:
    with jax.enable_x64(True):
        rewards = np.array([r for r, _, _ in rows], np.float64)
        ids = np.array([k for _, k, _ in rows], np.int64)  # 3 = K: padding
        where = np.array([w for _, _, w in rows], bool)
        kwargs: dict[str, Any] = {"decay": decay, "order": order, "reward_scaling": scaling}
        want = kernel.rae_advantages(rewards, ids, np.array(base), where=where, **kwargs)
        got = _jax_core(rewards, ids, np.array(base), where=where, **kwargs)
    for name in ("advantages", "baselines", "baselines_K"):
        np.testing.assert_allclose(
            getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-12, err_msg=name
        )
    np.testing.assert_array_equal(got.counts_K, want.counts_K)


def test_float32_stays_float32_and_jit_does_not_retrace_per_call() -> None:
    with jax.enable_x64(False):
        traces = []

        def body(r: jax.Array, k: jax.Array, b: jax.Array) -> Any:
            traces.append(1)
            return kj.rae_advantages(r, k, b, decay=0.9, order="spiral")

        fn = jax.jit(body)
        for shift in range(3):
            out = fn(jnp.arange(4.0) + shift, jnp.array([0, 1, 0, 2]), jnp.zeros(2))
        assert out.advantages.dtype == jnp.float32
        assert len(traces) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"order": "nope"}, ValueError, "order"),
        ({"decay": 1.0, "order": "spiral"}, ValueError, "decay"),
        ({"decay": math.nan}, ValueError, "decay"),
        ({"reward_scaling": math.inf}, ValueError, "reward_scaling"),
        ({"key_ids_PG": [0.0, 1.0]}, TypeError, "key_ids_PG"),
        ({"key_ids_PG": [0]}, ValueError, "key_ids_PG"),
        ({"baselines_K": [[0.0]]}, ValueError, "baselines_K"),
        ({"where": [1, 0]}, TypeError, "where"),
        ({"where": [True]}, ValueError, "where"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    args: dict[str, Any] = {
        "rewards_PG": [1.0, 2.0],
        "key_ids_PG": [0, 1],
        "baselines_K": [0.0, 0.0],
        "decay": 0.5,
    }
    args.update(kwargs)
    with pytest.raises(error, match=match):
        kj.rae_advantages(**args)


def test_jax_rae_means_do_not_overflow_and_concrete_bad_input_is_refused() -> None:
    """Found by review: the legos mean summed in the input dtype (float16 past 65,504 and float32 past
    3.4e38 gave an inf baseline that poisoned every later batch of that key), and NaN rewards or baselines
    given as concrete arrays were accepted where numpy raises."""
    import kernel.jax as kj

    r16 = np.full(100, 700, np.float16)
    got = kj.rae_advantages(r16, np.zeros(100, np.int64), np.zeros(1, np.float16), decay=0.9).baselines_K
    want = kernel.rae_advantages(r16, np.zeros(100, np.int64), np.zeros(1, np.float16), decay=0.9).baselines_K
    assert got.dtype == np.float16 and float(got[0]) == float(want[0]) == 70.0
    big = kj.rae_advantages(np.array([3e38, 3e38], np.float32), [0, 0], np.zeros(1, np.float32), decay=0.5)
    assert np.isfinite(np.asarray(big.baselines_K)).all() and float(big.baselines_K[0]) == pytest.approx(
        1.5e38
    )
    with pytest.raises(ValueError, match="rewards_PG must be finite on live rows"):
        kj.rae_advantages([np.nan, 0.0, 3.0], [0, 1, 0], [0.5, 0.0], decay=0.5)
    with pytest.raises(ValueError, match="baselines_K must be finite"):
        kj.rae_advantages([1.0], [0], [np.inf], decay=0.5)
    masked = kj.rae_advantages([np.nan, 0.0], [0, 1], [0.5, 0.0], decay=0.5, where=[False, True])
    assert float(masked.advantages[0]) == 0.0  # a masked NaN row is not live: accepted, as in numpy
