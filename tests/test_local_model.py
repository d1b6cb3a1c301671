"""The local model's CPU fast paths against their plain forms: blocked causal attention, recomputation."""

from __future__ import annotations

from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from adapters.local import model as m  # noqa: E402
from tests._marks import EXHAUSTIVE  # noqa: E402
from tests._profile import examples  # noqa: E402


def _plain_attention(q: Any, k: Any, v: Any) -> np.ndarray:
    """Causal attention by the textbook formula in float64: softmax over keys s ≤ t of q·k / √dh."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    t = q.shape[1]
    scores = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhts,bshd->bthd", weights, v)
    return out.reshape(*out.shape[:2], -1)


_ATTEND = jax.jit(m._causal_attend, static_argnums=3)


@settings(max_examples=examples(15))
@given(
    t=st.integers(1, 40),
    block=st.integers(1, 48),
    heads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_blocked_causal_attention_equals_the_formula(t: int, block: int, heads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.standard_normal((2, t, heads, 4)), jnp.float32) for _ in range(3))
    want = _plain_attention(q, k, v)
    np.testing.assert_allclose(np.asarray(_ATTEND(q, k, v, block)), want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("t", [1, 5, pytest.param(40, marks=EXHAUSTIVE)])  # 40: ten blocks
def test_blocked_forward_and_gradient_equal_the_plain_ones(t: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fast paths taken at every length (blocks of 4 queries: one block, whole blocks, a partial last
    # one; with and without recomputed layers): logits and gradients against one attention block and
    # stored activations
    cfg = m.SIZES["tiny"]
    params = m.init_params(cfg, jax.random.key(0))
    tokens = jnp.asarray(np.random.default_rng(t).integers(0, 256, (2, t)), jnp.int32)

    def run() -> tuple[Any, Any]:
        def objective(p: Any) -> Any:
            return m.token_logprobs(cfg, p, tokens, tokens).sum()

        return jax.jit(lambda p: (m.forward(cfg, p, tokens), jax.grad(objective)(p)))(params)

    monkeypatch.setattr(m, "_layout", lambda b, n: ("all", n))
    plain = run()
    for keep in get_args(m.Kept):  # every layout: recomputed layers, kept products, stored activations
        monkeypatch.setattr(m, "_layout", lambda b, n, keep=keep: (keep, 4))
        fast = run()
        np.testing.assert_allclose(np.asarray(fast[0]), np.asarray(plain[0]), atol=2e-5, rtol=1e-5)
        for a, b in zip(jax.tree_util.tree_leaves(fast[1]), jax.tree_util.tree_leaves(plain[1]), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-4, rtol=1e-4)


def test_query_blocks_grow_with_the_length() -> None:
    # at most _MAX_QUERY_BLOCKS blocks (compilation), at least _MIN_QUERY_BLOCK queries each
    assert [m._query_block(t, 64) for t in (1, 64, 1024, 1025, 4096)] == [64, 64, 64, 65, 256]
    assert [m._query_block(t, 128) for t in (1, 512, 2048, 2049)] == [128, 128, 128, 129]
    for t in range(1, 5000, 7):
        assert -(-t // m._query_block(t, 64)) <= m._MAX_QUERY_BLOCKS


def test_the_layout_follows_the_backend_and_the_call_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPU: blocks of 64 queries or more; layers recomputed, keeping their products' outputs in calls of
    # up to 512 tokens per device. Elsewhere: stored activations, blocks of 128 queries or more
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    monkeypatch.setattr(jax, "device_count", lambda: 2)
    assert [m._layout(b, t) for b, t in ((32, 32), (2, 512), (8, 128), (1, 4096))] == [
        ("projections", 64),
        ("projections", 64),
        ("projections", 64),
        ("inputs", 256),
    ]
    assert [m._layout(b, t) for b, t in ((33, 32), (16, 128), (3, 512))] == [("inputs", 64)] * 3
    monkeypatch.setattr(jax, "device_count", lambda: 1)
    assert m._layout(8, 128) == ("inputs", 64)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert [m._layout(b, t) for b, t in ((1, 32), (64, 512), (1, 4096))] == [
        ("all", 128),
        ("all", 128),
        ("all", 256),
    ]


_PICK = jax.jit(m._pick)
# the gradient as one program a shape (op by op, each operation compiled for each shape: 3 x the time)
_PICK_GRAD = jax.jit(jax.grad(lambda v, i, w: jnp.sum(m._pick(v, i) * w)))


@settings(max_examples=examples(25))
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 9), st.integers(1, 300)),
    scale=st.sampled_from([1e-30, 1.0, 1e30]),
    seed=st.integers(0, 2**16),
)
def test_the_one_hot_pick_equals_a_gather_with_its_gradient(
    shape: tuple[int, int, int], scale: float, seed: int
) -> None:
    # the trainer's logprob of each target (m._pick) against numpy's gather, bit for bit, at every
    # vocabulary size; and its gradient: 1 at the picked entry, 0 elsewhere
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(shape) * scale).astype(np.float32)
    index = rng.integers(0, shape[-1], shape[:2]).astype(np.int32)
    want = np.take_along_axis(values, index[..., None], axis=-1)[..., 0]
    got = np.asarray(_PICK(jnp.asarray(values), jnp.asarray(index)))
    assert got.dtype == np.float32 and np.array_equal(got, want)
    weights = rng.standard_normal(shape[:2]).astype(np.float32)
    grad = np.asarray(_PICK_GRAD(jnp.asarray(values), jnp.asarray(index), jnp.asarray(weights)))
    expected = np.zeros(shape, np.float32)
    np.put_along_axis(expected, index[..., None], weights[..., None], axis=-1)
    assert np.array_equal(grad, expected)
