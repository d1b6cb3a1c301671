"""The JAX twins under ``jax.jit`` with inputs split across devices give the numpy kernel's results.

The suite runs with JAX's CPU split into two devices (tests/conftest.py), so each input here is put on
a two-device mesh, split along its leading axis (rows, votes, steps), and the jitted twin runs as one
program over both devices (XLA inserts the cross-device sums). Sizes are even so that the split is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from tests._profile import examples

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import kernel.jax as kj  # noqa: E402


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    cpus = jax.devices("cpu")  # two after tests/conftest.py split the CPU, whatever the default backend
    assert len(cpus) >= 2, "tests/conftest.py should have split JAX's CPU into two devices"
    return Mesh(np.array(cpus[:2]), ("rows",))


def _split(mesh: Mesh, *arrays: Any) -> tuple[Any, ...]:
    """Each array on the mesh, split along its first axis (checked: both devices hold a part)."""
    out = tuple(jax.device_put(jnp.asarray(a), NamedSharding(mesh, P("rows"))) for a in arrays)
    assert all(len(x.sharding.device_set) == 2 and not x.is_fully_replicated for x in out)
    return out


halves = st.integers(1, 40)  # the first axis is twice this
seeds = st.integers(0, 2**31 - 1)


@settings(max_examples=examples(6))  # each new shape compiles: a few in the fast tier, 120 under --exhaustive
@given(half=halves, groups=st.integers(1, 9), seed=seeds, scale=st.sampled_from(["group", "none", "batch"]))
def test_grouped_advantages_split_by_rows(mesh: Mesh, half: int, groups: int, seed: int, scale: str) -> None:
    rng = np.random.default_rng(seed)
    rewards = rng.integers(-8, 9, 2 * half) / 4
    ids = rng.integers(0, groups, 2 * half)
    where = rng.random(2 * half) < 0.8
    r, g, w = _split(mesh, rewards.astype(np.float32), ids.astype(np.int32), where)
    fn = jax.jit(lambda r, g, w: kj.grouped_advantages(r, g, groups, where=w, scale=scale).advantages)
    want = kernel.grouped_advantages(rewards, ids, groups, where=where, scale=scale).advantages
    np.testing.assert_allclose(np.asarray(fn(r, g, w)), want, rtol=1e-4, atol=1e-5)


@settings(max_examples=examples(6))  # each new shape compiles: a few in the fast tier, 120 under --exhaustive
@given(half=halves, t=st.integers(1, 12), seed=seeds, loss=st.sampled_from(["importance_sampling", "ppo"]))
def test_token_losses_split_by_rows(mesh: Mesh, half: int, t: int, seed: int, loss: str) -> None:
    rng = np.random.default_rng(seed)
    train, sampler = (rng.normal(-1.0, 0.5, (2 * half, t)) for _ in range(2))
    adv = rng.normal(size=(2 * half, t))
    mask = rng.random((2 * half, t)) < 0.7
    numpy_fn, jax_fn = getattr(kernel, f"{loss}_loss"), getattr(kj, f"{loss}_loss")
    arrays = _split(mesh, *(x.astype(np.float32) for x in (train, sampler, adv)), mask)
    got = jax.jit(lambda a, b, c, m: jax_fn(a, b, c, where=m))(*arrays)
    want = numpy_fn(train, sampler, adv, where=mask)
    assert float(got.loss) == pytest.approx(float(want.loss), rel=1e-4, abs=1e-4)
    np.testing.assert_allclose(np.asarray(got.per_token_loss), want.per_token_loss, rtol=1e-4, atol=1e-5)


@settings(max_examples=examples(6))  # each new shape compiles: a few in the fast tier, 120 under --exhaustive
@given(half=halves, t=st.integers(1, 12), seed=seeds)
def test_kl_sample_train_split_by_rows(mesh: Mesh, half: int, t: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    sampler, train = (rng.normal(-1.0, 0.5, (2 * half, t)) for _ in range(2))
    mask = rng.random((2 * half, t)) < 0.7
    got = jax.jit(kj.kl_sample_train)(
        *_split(mesh, sampler.astype(np.float32), train.astype(np.float32), mask)
    )
    want = kernel.kl_sample_train(sampler, train, mask)
    for name in ("kl_sample_train_v1", "kl_sample_train_v2", "entropy"):
        a, b = float(getattr(got, name)), float(getattr(want, name))
        assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-4, abs=1e-5), name


@settings(max_examples=examples(6))  # each new shape compiles: a few in the fast tier, 120 under --exhaustive
@given(
    half=halves, debates=st.integers(1, 6), seed=seeds, mode=st.sampled_from(["win_rate", "win_minus_loss"])
)
def test_pairwise_rewards_split_by_votes(mesh: Mesh, half: int, debates: int, seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    agents = rng.integers(2, 5, debates)
    v = 2 * half
    group = rng.integers(0, debates, v)
    columns = (
        group,
        rng.integers(0, agents[group]),
        rng.integers(0, agents[group]),
        rng.integers(0, 3, v),
        rng.integers(0, agents[group]),
    )
    votes = kernel.VoteArrays(*(c.astype(np.int32) for c in columns))
    rows = int(agents.sum())
    fn = jax.jit(lambda vs, n: kj.pairwise_rewards(vs, n, mode=mode, num_rows=rows).rewards_PG)
    got = fn(kernel.VoteArrays(*_split(mesh, *votes[:5])), jnp.asarray(agents, jnp.int32))
    want = kernel.pairwise_rewards(votes, agents, mode=mode).rewards_PG
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


@settings(max_examples=examples(6))  # each new shape compiles: a few in the fast tier, 120 under --exhaustive
@given(half=halves, episodes=st.integers(1, 7), seed=seeds)
def test_total_returns_split_by_steps(mesh: Mesh, half: int, episodes: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=2 * half)
    ids = rng.integers(0, episodes, 2 * half)
    final = rng.normal(size=episodes)
    s, i = _split(mesh, steps.astype(np.float32), ids.astype(np.int32))
    got = jax.jit(lambda s, i, f: kj.total_returns(s, i, episodes, f))(s, i, jnp.asarray(final, jnp.float32))
    np.testing.assert_allclose(
        np.asarray(got), kernel.total_returns(steps, ids, episodes, final), rtol=1e-4, atol=1e-5
    )
