"""The local sampler's draw: the inverse CDF against a float64 search, and draws against the softmax.

``m._inverse_cdf`` is the sampler's one source of randomness per token (``m._choose`` gives it one
uniform a row); these tests hold it to the distribution it claims, independently of its two-level
arithmetic: a float64 running sum over the whole vocabulary is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from adapters.local import model as m  # noqa: E402

_inverse_cdf = jax.jit(m._inverse_cdf)
_choose = jax.jit(m._choose, static_argnums=5)


def _search64(u: float, logits: np.ndarray) -> tuple[np.ndarray, float]:
    """(float64 running sum of exp(l − max l), the target u · total)."""
    e = np.exp(logits.astype(np.float64) - logits.max())
    upto = np.cumsum(e)
    return upto, u * upto[-1]


@st.composite
def _rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Three rows of logits over 7, 128 or 300 ids (part of a block of the draw, one block, three with a
    partial last one; three shapes, so three programs compiled), some at −∞, and a u a row."""
    v = draw(st.sampled_from([7, 128, 300]))
    b = 3
    finite = st.floats(-60.0, 60.0, width=32)
    values = draw(st.lists(st.one_of(finite, st.just(-np.inf)), min_size=b * v, max_size=b * v))
    logits = np.asarray(values, np.float32).reshape(b, v)
    for r in range(b):  # at least one id with mass a row, anywhere
        if not np.isfinite(logits[r]).any():
            logits[r, draw(st.integers(0, v - 1))] = draw(finite)
    us = draw(
        st.lists(
            st.one_of(
                st.floats(0.0, 1.0, width=32, exclude_min=True),
                st.sampled_from([1.0, float(np.nextafter(np.float32(0), np.float32(1)))]),
            ),
            min_size=b,
            max_size=b,
        )
    )
    return logits, np.asarray(us, np.float32)


@given(_rows())
def test_inverse_cdf_is_the_float64_search_up_to_rounding(case: tuple[np.ndarray, np.ndarray]) -> None:
    """The id returned has mass and brackets u · total in the float64 running sum, to float32 rounding of
    the sums (1e-5 of the total): it is the float64 search's id unless u lies that close to an edge."""
    logits, u = case
    got = np.asarray(_inverse_cdf(jnp.asarray(u), jnp.asarray(logits)))
    for r in range(logits.shape[0]):
        j = int(got[r])
        assert 0 <= j < logits.shape[1]
        assert np.isfinite(logits[r, j]), (r, j)  # an id at −∞ is never drawn
        upto, target = _search64(float(u[r]), logits[r])
        slack = 1e-5 * upto[-1]
        assert upto[j] >= target - slack
        assert (upto[j - 1] if j > 0 else 0.0) <= target + slack
        exact = int(np.searchsorted(upto, target, side="left"))
        clear_above = abs(upto[min(exact, len(upto) - 1)] - target) > slack
        if clear_above and (exact == 0 or target - upto[exact - 1] > slack):
            assert j == exact  # away from every edge, the very id of the float64 search


def test_inverse_cdf_edges() -> None:
    """u = 1 gives the last id with mass, the smallest u the first, a single finite logit always itself,
    and a row whose mass sits in the last, partial block of 128 ids reaches it."""
    v = 300
    logits = np.full((4, v), -np.inf, np.float32)
    logits[0, [3, 150, 260]] = 0.0
    logits[1, [3, 150, 260]] = 0.0
    logits[2, 299] = -1e30
    logits[3, 257:] = 5.0
    tiny = np.nextafter(np.float32(0), np.float32(1))
    u = jnp.asarray([1.0, tiny, 0.5, 1.0], jnp.float32)
    assert np.asarray(_inverse_cdf(u, jnp.asarray(logits))).tolist() == [260, 3, 299, 299]


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_draws_follow_the_softmax(temperature: float) -> None:
    """40,000 draws through the sampler's own ``_choose`` over 300 ids (three blocks, masses from 0.3 down
    to 1e-4 and ids at −∞): every frequency within 5 standard errors of softmax(l / T), no −∞ id drawn,
    and the reported logprob the model's own at temperature 1."""
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 2.0, 300).astype(np.float32)
    logits[[0, 131, 299]] = [6.0, 5.0, 4.5]  # large masses in three blocks
    logits[rng.choice(300, 40, replace=False)] = -np.inf
    n = 40_000
    keys = jax.random.split(jax.random.key(11), n)
    rows = jnp.broadcast_to(jnp.asarray(logits), (n, 300))
    token, lp = _choose(keys, rows, jnp.full(n, temperature), jnp.ones(n), jnp.full(n, -1, jnp.int32), 0)
    token = np.asarray(token)
    scaled = np.where(np.isfinite(logits), logits.astype(np.float64) / temperature, -np.inf)
    p = np.exp(scaled - scaled.max())
    p /= p.sum()
    counts = np.bincount(token, minlength=300)
    assert counts[~np.isfinite(logits)].sum() == 0
    se = np.sqrt(n * p * (1 - p)) + 1.0
    assert (np.abs(counts - n * p) <= 5 * se).all(), np.abs(counts - n * p).max()
    assert p.max() > 0.2 and (p[p > 0] < 1e-3).sum() > 100  # both heads and a long tail were drawn from
    model = np.asarray(jax.nn.log_softmax(jnp.asarray(logits)))
    np.testing.assert_allclose(np.asarray(lp), model[token], rtol=1e-6)


_TINY = m.SIZES["tiny"]
_PARAMS = m.init_params(_TINY, jax.random.key(0))
_POOL = [[5, 9, 17], list(range(40, 52)), [7], [200, 3, 3, 9, 100]]


def _count_prefilled_rows(patch: pytest.MonkeyPatch) -> list[int]:
    """The rows each later ``_generate`` call prefills, appended as calls are made."""
    prefilled: list[int] = []
    generate = m._generate

    def spy(params: object, arrays: m._RowArrays, **kw: object) -> m.GenerateResult:
        prefilled.append(int(arrays.prompts_U_P.shape[0]))
        return generate(params, arrays, **kw)

    patch.setattr(m, "_generate", spy)
    return prefilled


@given(which=st.lists(st.integers(0, 3), min_size=8, max_size=8), seed=st.integers(0, 2**31 - 1))
def test_a_shared_prefill_samples_what_one_prefill_a_row_does(which: list[int], seed: int) -> None:
    """8 rows drawn from a pool of 4 prompts (1–4 distinct), some greedy: with every prompt prefilled once
    (``_SHARED_PREFILL_AT_MOST = 1``) the tokens are those of one prefill a row (``0``) and the logprobs
    agree to float rounding; the shared call really prefilled only the distinct prompts."""
    key = jax.random.key(seed)
    rows = [
        m.SampleRow(_POOL[w], jax.random.fold_in(key, b), 6, temperature=0.0 if b % 3 == 0 else 1.0)
        for b, w in enumerate(which)
    ]
    with pytest.MonkeyPatch.context() as patch:
        prefilled = _count_prefilled_rows(patch)
        patch.setattr(m, "_SHARED_PREFILL_AT_MOST", 1.0)
        shared = m.generate_rows(_TINY, _PARAMS, rows)
        patch.setattr(m, "_SHARED_PREFILL_AT_MOST", 0.0)
        alone = m.generate_rows(_TINY, _PARAMS, rows)
    assert prefilled == [m.bucket(len(set(which))), 8]
    np.testing.assert_array_equal(np.asarray(shared.tokens_B_M), np.asarray(alone.tokens_B_M))
    np.testing.assert_array_equal(np.asarray(shared.lengths_B), np.asarray(alone.lengths_B))
    np.testing.assert_allclose(np.asarray(shared.logprobs_B_M), np.asarray(alone.logprobs_B_M), atol=1e-5)


def test_group_sampling_prefills_its_prompt_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``generate``'s ``num_samples`` rows of one prompt, and a batch of two prompts × 4 rows, share their
    prefills under the default threshold; 3 distinct prompts in 4 rows do not (4 ≤ 4 · ½ fails)."""
    prefilled = _count_prefilled_rows(monkeypatch)
    m.generate(_TINY, _PARAMS, [1, 2, 3], num_samples=8, max_tokens=4, key=jax.random.key(0))
    two = [m.SampleRow(_POOL[b % 2], jax.random.key(b), 4) for b in range(8)]
    m.generate_rows(_TINY, _PARAMS, two)
    three = [m.SampleRow(_POOL[min(b, 2)], jax.random.key(b), 4) for b in range(4)]
    m.generate_rows(_TINY, _PARAMS, three)
    assert prefilled == [1, 2, 4]
