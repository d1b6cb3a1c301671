"""Preference-model rewards: closed forms, likelihood optimality, invariances, leave-one-out, JAX parity."""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel.jax as kj
from kernel import (
    OP_EQ,
    OP_GT,
    VoteArrays,
    bradley_terry_rewards,
    copeland_rewards,
    pairwise_rewards,
    vote_arrays,
)
from kernel.testing import run_reward_suite
from kernel.testing.strategies import VoteBatch, vote_batches
from tests._profile import examples


def _votes(rows: list[tuple[int, int, str, int]], debate: int = 0) -> VoteArrays:
    """Votes ``(author, a, op, b)`` of one debate."""
    if not rows:
        return vote_arrays([], [], [], [], [])
    u, a, op, b = zip(*rows, strict=True)
    return vote_arrays([debate] * len(rows), list(u), list(a), list(op), list(b))


def _log_likelihood(theta: np.ndarray, wins: np.ndarray, ties: np.ndarray, prior: float, nu: float) -> float:
    """ℓ(θ) of one debate, written from the model (Davidson 1970), independently of the kernel's MM.

    wins[i, j]: weight of i > j; ties[i, j]: weight of votes ``i = j`` (each counted once).
    """
    n = len(theta)
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            d = np.exp(theta[i]) + np.exp(theta[j]) + nu * np.exp(0.5 * (theta[i] + theta[j]))
            total += (wins[i, j] + prior) * (theta[i] - np.log(d))
            total += ties[i, j] * (0.5 * (theta[i] + theta[j]) - np.log(d))
    return total


def _count(num_agents: int, rows: list[tuple[int, int, str, int]], weights: list[float] | None = None) -> Any:
    wins = np.zeros((num_agents, num_agents))
    ties = np.zeros((num_agents, num_agents))
    for k, (_, a, op, b) in enumerate(rows):
        w = 1.0 if weights is None else weights[k]
        (wins if op == ">" else ties)[a, b] += w
    return wins, ties


def _scipy_fit(num_agents: int, wins: np.ndarray, ties: np.ndarray, prior: float, nu: float) -> np.ndarray:
    def loss(theta: np.ndarray) -> float:
        return -_log_likelihood(theta, wins, ties, prior, nu)

    res = scipy.optimize.minimize(loss, np.zeros(num_agents), method="BFGS", options={"gtol": 1e-11})
    return res.x - res.x.mean()


@st.composite
def _debate(draw: st.DrawFn, max_agents: int = 5, max_votes: int = 12) -> tuple[int, list[Any], list[float]]:
    n = draw(st.integers(2, max_agents))
    pair = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
    vote = st.tuples(st.integers(-1, n - 1), pair, st.sampled_from([">", ">", "="]))
    raw = draw(st.lists(vote, max_size=max_votes))
    rows = [(u, a, op, b) for u, (a, b), op in raw]
    weights = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=len(rows), max_size=len(rows)))
    return n, rows, weights


# --- examples ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("wins", "losses", "prior"), [(2, 1, 1.0), (5, 0, 0.5), (0, 0, 1.0), (0, 7, 2.0)])
def test_two_agents_closed_form(wins: int, losses: int, prior: float) -> None:
    """BT with two agents: π_0/π_1 = (w_01 + prior) / (w_10 + prior), log π_0 = −log π_1."""
    rows = [(-1, 0, ">", 1)] * wins + [(-1, 1, ">", 0)] * losses
    fit = bradley_terry_rewards(_votes(rows), [2], prior=prior, leave_one_out=False, tol=1e-14)
    ratio = (wins + prior) / (losses + prior)
    np.testing.assert_allclose(fit.log_strengths_PG, [0.5 * np.log(ratio), -0.5 * np.log(ratio)], atol=1e-12)
    np.testing.assert_allclose(fit.rewards_PG[0], np.sqrt(ratio) / (np.sqrt(ratio) + 1), atol=1e-12)
    assert fit.converged_PG.all()


def test_two_agents_weighted_closed_form() -> None:
    rows = [(-1, 0, ">", 1), (-1, 0, ">", 1), (-1, 1, ">", 0)]
    fit = bradley_terry_rewards(_votes(rows), [2], weight_V=[0.5, 2.0, 1.5], leave_one_out=False, tol=1e-14)
    np.testing.assert_allclose(np.exp(np.diff(fit.log_strengths_PG)), [(1.5 + 1) / (2.5 + 1)], rtol=1e-12)


def test_two_agents_davidson_closed_form() -> None:
    """Davidson with 2 agents, s = √(π_0/π_1) = π_0 (Σ log π = 0), W = w + p, L = l + p, T ties: the score
    equation W + T/2 = n·(s² + ½νs)/(s² + 1 + νs) is (L + T/2)·s² + ½ν(L − W)·s − (W + T/2) = 0."""
    rows = [(-1, 0, ">", 1)] * 3 + [(-1, 1, ">", 0)] + [(-1, 0, "=", 1)] * 4
    big_w, big_l, t = 3 + 1.0, 1 + 1.0, 4.0
    for nu in (0.0, 0.5, 2.0):
        fit = bradley_terry_rewards(_votes(rows), [2], tie_strength=nu, leave_one_out=False, tol=1e-14)
        qa, qb, qc = big_l + t / 2, 0.5 * nu * (big_l - big_w), -(big_w + t / 2)
        s = (-qb + np.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
        np.testing.assert_allclose(fit.log_strengths_PG, [np.log(s), -np.log(s)], atol=1e-10)
        r = (s + 0.5 * nu * np.sqrt(s)) / (s + 1 + nu * np.sqrt(s))  # π_0 = s
        np.testing.assert_allclose(fit.rewards_PG[0], r, atol=1e-10)


def test_three_agents_cycle_is_even_and_a_dominant_agent_leads() -> None:
    cycle = [(-1, 0, ">", 1), (-1, 1, ">", 2), (-1, 2, ">", 0)]
    fit = bradley_terry_rewards(_votes(cycle), [3], leave_one_out=False)
    np.testing.assert_allclose(fit.rewards_PG, [0.5, 0.5, 0.5], atol=1e-12)
    dominant = [(-1, 0, ">", 1), (-1, 0, ">", 2), (-1, 1, "=", 2)]
    fit = bradley_terry_rewards(_votes(dominant), [3], leave_one_out=False)
    assert fit.rewards_PG[0] > 0.5 > fit.rewards_PG[1]
    np.testing.assert_allclose(fit.rewards_PG[1], fit.rewards_PG[2], atol=1e-12)


def test_no_votes_and_single_agents_are_finite_and_neutral() -> None:
    empty = _votes([])
    for loo in (False, True):
        fit = bradley_terry_rewards(empty, [3, 1, 0, 2], leave_one_out=loo)
        np.testing.assert_array_equal(fit.rewards_PG, np.full(6, 0.5))
        np.testing.assert_array_equal(fit.group_ids_PG, [0, 0, 0, 1, 3, 3])
        np.testing.assert_array_equal(
            copeland_rewards(empty, [3, 1, 0, 2], leave_one_out=loo).rewards_PG, 0.0
        )


def test_one_sided_votes_stay_finite() -> None:
    rows = [(-1, 0, ">", 1)] * 50 + [(-1, 0, ">", 2)] * 50
    fit = bradley_terry_rewards(_votes(rows), [3], prior=1e-3)
    assert np.isfinite(fit.log_strengths_PG).all()
    assert 0 < fit.rewards_PG.min() and fit.rewards_PG.max() < 1


def test_leave_one_out_ignores_own_votes_example() -> None:
    rows = [(0, 0, ">", 1), (0, 0, ">", 2), (1, 1, ">", 0), (2, 2, ">", 0)]
    fit = bradley_terry_rewards(_votes(rows), [3])
    assert fit.rewards_PG[0] < 0.5  # only the others' votes, both against agent 0
    cope = copeland_rewards(_votes(rows), [3])
    np.testing.assert_allclose(cope.rewards_PG, [-1.0, -0.5, -0.5])  # 1 and 2: lost to 0, unjudged pair
    np.testing.assert_allclose(copeland_rewards(_votes(rows), [3], leave_one_out=False).rewards_PG, [0, 0, 0])


def test_invalid_votes_and_padding_are_ignored() -> None:
    good = _votes([(-1, 0, ">", 1), (-1, 2, "=", 1)])
    noisy = vote_arrays(
        [0, 0, 0, 0, 0, 1],
        [-1, -1, -1, 5, -1, 0],
        [0, 2, 0, 1, 3, 0],
        [">", "=", "<", ">", ">", ">"],
        [1, 1, 0, 1, 0, 1],
    )
    np.testing.assert_array_equal(
        bradley_terry_rewards(noisy, [3]).rewards_PG, bradley_terry_rewards(good, [3]).rewards_PG
    )


def test_max_iters_and_tol() -> None:
    rows = [(-1, 0, ">", 1)] * 9 + [(-1, 1, ">", 2)] * 3 + [(-1, 2, ">", 0)]
    one = bradley_terry_rewards(_votes(rows), [3], max_iters=1, tol=0.0)
    assert one.num_iters == 1 and not one.converged_PG.any()
    full = bradley_terry_rewards(_votes(rows), [3], tol=1e-13)
    assert full.converged_PG.all() and 1 < full.num_iters < 1000
    fixed = bradley_terry_rewards(_votes(rows), [3], max_iters=full.num_iters + 5, tol=0.0)
    assert fixed.num_iters == full.num_iters + 5
    np.testing.assert_allclose(fixed.log_strengths_PG, full.log_strengths_PG, atol=1e-12)


def test_jax_float32_fits_converge_with_the_default_tol() -> None:
    """In float32 the MM steps settle into rounding noise near 1e-7: with tol = 1e-10 every fit ran all
    1000 steps and reported not converged. Now a move within 4 ulps of the fit's |log π| is no move."""
    rng = np.random.default_rng(0)
    p, n, v = 20, 5, 60
    rows = [(int(u), int(a), str(o), int(b)) for u, a, o, b in zip(
        rng.integers(0, n, p * v), rng.integers(0, n, p * v),
        np.where(rng.random(p * v) < 0.8, ">", "="), rng.integers(0, n, p * v), strict=True
    )]  # fmt: skip
    g = np.repeat(np.arange(p), v)
    votes = vote_arrays(g, *(np.array(c) for c in zip(*rows, strict=True)))
    want = bradley_terry_rewards(votes, [n] * p, tie_strength=0.5)
    got = kj.bradley_terry_rewards(votes, [n] * p, tie_strength=0.5)
    assert np.asarray(got.converged_PG).all() and int(got.num_iters) < 200
    np.testing.assert_allclose(np.asarray(got.rewards_PG), want.rewards_PG, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prior": 0.0}, "prior"),
        ({"prior": -1.0}, "prior"),
        ({"prior": float("nan")}, "prior"),
        ({"tie_strength": -0.5}, "tie_strength"),
        ({"max_iters": 0}, "max_iters"),
        ({"tol": -1e-9}, "tol"),
        ({"tol": float("inf")}, "tol"),
        ({"weight_V": [1.0, -1.0]}, "weight_V"),
        ({"weight_V": [1.0, float("nan")]}, "weight_V"),
        ({"weight_V": [1.0]}, "weight_V"),
    ],
)
def test_bad_options_name_the_argument(kwargs: dict[str, Any], match: str) -> None:
    v = _votes([(-1, 0, ">", 1), (-1, 1, ">", 0)])
    with pytest.raises(ValueError, match=match):
        bradley_terry_rewards(v, [2], **kwargs)
    with pytest.raises(ValueError, match=match):
        kj.bradley_terry_rewards(v, [2], **kwargs)


def test_bad_types_name_the_argument() -> None:
    v = _votes([(-1, 0, ">", 1)])
    with pytest.raises(TypeError, match="max_iters"):
        bradley_terry_rewards(v, [2], max_iters=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="leave_one_out"):
        copeland_rewards(v, [2], leave_one_out="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="weight_V"):
        copeland_rewards(v, [2], weight_V=["a"])
    with pytest.raises(ValueError, match="weight_V"):
        copeland_rewards(v, [2], weight_V=[-1.0])


# --- properties ----------------------------------------------------------------------------------------


@given(_debate(), st.sampled_from([0.0, 0.8]), st.sampled_from([0.5, 1.0]))
def test_fit_maximises_the_likelihood(debate: Any, nu: float, prior: float) -> None:
    """The MM fixed point equals scipy's BFGS optimum of ℓ, and ℓ's gradient vanishes there."""
    n, rows, weights = debate
    wins, ties = _count(n, rows, weights)
    v = _votes(rows)
    fit = bradley_terry_rewards(
        v,
        [n],
        weight_V=weights,
        prior=prior,
        tie_strength=nu,
        leave_one_out=False,
        tol=1e-13,
        max_iters=100_000,
    )
    theta = fit.log_strengths_PG
    np.testing.assert_allclose(theta.sum(), 0.0, atol=1e-12)
    grad = scipy.optimize.approx_fprime(theta, _log_likelihood, 1e-7, wins, ties, prior, nu)
    np.testing.assert_allclose(grad, 0.0, atol=1e-5)
    np.testing.assert_allclose(theta, _scipy_fit(n, wins, ties, prior, nu), atol=1e-5)


@given(vote_batches(max_agents=5, max_votes=12, padding=True), st.booleans(), st.data())
def test_relabelling_and_vote_order(batch: VoteBatch, loo: bool, data: st.DataObject) -> None:
    votes, n = batch
    fn = functools.partial(bradley_terry_rewards, leave_one_out=loo, tol=1e-13)
    base = fn(votes, n)
    order = np.array(data.draw(st.permutations(range(len(votes.a_V)))), dtype=np.int64)
    shuffled = votes.take(order)
    np.testing.assert_allclose(fn(shuffled, n).rewards_PG, base.rewards_PG, atol=1e-9)
    # relabel agents of every debate by a random permutation
    offsets = np.cumsum(n) - n
    perms = [np.array(data.draw(st.permutations(range(int(k)))), dtype=np.int64) for k in n]
    n_v = np.append(n, 0)[votes.group_ids_V]

    def relabel(x: np.ndarray) -> np.ndarray:
        out = x.copy()
        for k, g in enumerate(votes.group_ids_V):
            if g < len(n) and 0 <= x[k] < n_v[k]:
                out[k] = perms[g][x[k]]
        return out

    moved = votes._replace(authors_V=relabel(votes.authors_V), a_V=relabel(votes.a_V), b_V=relabel(votes.b_V))
    got = fn(moved, n).rewards_PG
    for p in range(len(n)):
        want = base.rewards_PG[offsets[p] : offsets[p] + n[p]]
        np.testing.assert_allclose(got[offsets[p] + perms[p]], want, atol=1e-9)


@given(vote_batches(max_agents=5, max_votes=10), st.sampled_from([0.0, 1.0]))
def test_leave_one_out_equals_one_fit_per_agent(batch: VoteBatch, nu: float) -> None:
    """Agent i's leave-one-out reward is its reward in a full fit of the votes not written by i."""
    votes, n = batch
    got = bradley_terry_rewards(votes, n, tie_strength=nu, tol=1e-13)
    cope = copeland_rewards(votes, n)
    offsets = np.cumsum(n) - n
    for p, k in enumerate(n):
        for i in range(int(k)):
            keep = votes.authors_V != i
            sub = votes.take(keep)
            full = bradley_terry_rewards(sub, n, tie_strength=nu, tol=1e-13, leave_one_out=False)
            np.testing.assert_allclose(
                got.rewards_PG[offsets[p] + i], full.rewards_PG[offsets[p] + i], atol=1e-9
            )
            want = copeland_rewards(sub, n, leave_one_out=False).rewards_PG[offsets[p] + i]
            assert cope.rewards_PG[offsets[p] + i] == want


@given(_debate(max_votes=10), st.data())
def test_a_new_win_never_lowers_the_winner(debate: Any, data: st.DataObject) -> None:
    n, rows, _ = debate
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1).filter(lambda j: j != i))
    before = bradley_terry_rewards(_votes(rows), [n], leave_one_out=False, tol=1e-13)
    after = bradley_terry_rewards(_votes([*rows, (-1, i, ">", j)]), [n], leave_one_out=False, tol=1e-13)
    assert after.rewards_PG[i] >= before.rewards_PG[i] - 1e-12
    assert after.rewards_PG[j] <= before.rewards_PG[j] + 1e-12


@given(st.integers(2, 6), st.integers(1, 3), st.data())
def test_balanced_round_robin_ranks_as_win_rate(n: int, repeats: int, data: st.DataObject) -> None:
    """Every pair compared equally often: BT (ν = 0) orders agents exactly as their win rates do."""
    rows = []
    for i in range(n):
        for j in range(i + 1, n):
            for _ in range(repeats):
                op = data.draw(st.sampled_from([">", "<", "="]))
                rows.append((-1, j, ">", i) if op == "<" else (-1, i, op, j))
    v = _votes(rows)
    bt = bradley_terry_rewards(v, [n], leave_one_out=False, tol=1e-13).rewards_PG
    wr = pairwise_rewards(v, [n], mode="win_rate").rewards_PG
    for i in range(n):
        for j in range(n):
            if wr[i] > wr[j] + 1e-12:
                assert bt[i] > bt[j]
            elif abs(wr[i] - wr[j]) <= 1e-12:
                assert abs(bt[i] - bt[j]) <= 1e-9


@given(_debate(max_votes=10), st.booleans())
def test_weights_are_vote_multiplicities(debate: Any, loo: bool) -> None:
    """Weight 0 removes a vote, weight 2 counts it twice (for both fits and Copeland scores)."""
    n, rows, _ = debate
    weights = [float(k % 3) for k in range(len(rows))]
    repeated = [row for row, w in zip(rows, weights, strict=True) for _ in range(int(w))]
    for fn in (functools.partial(bradley_terry_rewards, tol=1e-13), copeland_rewards):
        got = fn(_votes(rows), [n], weight_V=weights, leave_one_out=loo).rewards_PG
        np.testing.assert_allclose(got, fn(_votes(repeated), [n], leave_one_out=loo).rewards_PG, atol=1e-10)


def test_reward_suite() -> None:
    """kernel.testing's reward invariants; matches_reference is win_rate's own loop, so it is skipped."""
    for fn, mode in (
        (functools.partial(bradley_terry_rewards, tol=1e-13), "win_rate"),
        (copeland_rewards, "win_minus_loss"),
    ):
        outcome = run_reward_suite(fn, mode=mode, reference=False, unvoted=0.5, max_examples=25)
        assert outcome["matches_reference"].startswith("skipped"), outcome
        assert all(r == "passed" for c, r in outcome.items() if c != "matches_reference"), outcome


# --- numpy ↔ JAX -----------------------------------------------------------------------------------------


def _padded(batch: VoteBatch, num_groups: int = 4, num_votes: int = 96) -> tuple[VoteArrays, np.ndarray]:
    votes, n = batch
    n4 = np.zeros(num_groups, dtype=np.int64)
    n4[: len(n)] = n
    g = np.where(votes.group_ids_V >= len(n), num_groups, votes.group_ids_V)
    fields = [g, *votes[1:5]]
    pad = num_votes - len(g)
    fields = [
        np.concatenate([x, np.full(pad, num_groups if k == 0 else 0)]).astype(np.int32)
        for k, x in enumerate(fields)
    ]
    return VoteArrays(*fields), n4


_JIT_BT = jax.jit(
    kj.bradley_terry_rewards,
    static_argnames=(
        "prior",
        "tie_strength",
        "leave_one_out",
        "max_iters",
        "tol",
        "max_agents",
        "num_rows",
    ),
)
_JIT_COPELAND = jax.jit(kj.copeland_rewards, static_argnames=("leave_one_out", "max_agents", "num_rows"))


@settings(max_examples=examples(20))
@given(
    vote_batches(max_groups=4, max_agents=5, max_votes=20, padding=True),
    st.booleans(),
    st.sampled_from([0.0, 0.5]),
)
def test_jax_matches_numpy_under_jit(batch: VoteBatch, loo: bool, nu: float) -> None:
    votes, n = _padded(batch)
    weights = (np.arange(len(votes.a_V)) % 3).astype(np.float64) * 0.5
    want = bradley_terry_rewards(votes, n, weight_V=weights, tie_strength=nu, leave_one_out=loo, tol=1e-13)
    with jax.enable_x64(True):
        got = _JIT_BT(
            votes,
            n,
            weight_V=weights,
            tie_strength=nu,
            leave_one_out=loo,
            tol=1e-13,
            max_agents=5,
            num_rows=24,
        )
        cope = _JIT_COPELAND(votes, n, weight_V=weights, leave_one_out=loo, max_agents=5, num_rows=24)
    rows = int(n.sum())
    np.testing.assert_allclose(np.asarray(got.rewards_PG)[:rows], want.rewards_PG, atol=1e-9)
    np.testing.assert_allclose(np.asarray(got.log_strengths_PG)[:rows], want.log_strengths_PG, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(got.group_ids_PG)[:rows], want.group_ids_PG)
    np.testing.assert_array_equal(np.asarray(got.converged_PG)[:rows], want.converged_PG)
    assert int(got.num_iters) == max(want.num_iters, 1)  # JAX's padded fits take one step
    np.testing.assert_array_equal(np.asarray(got.rewards_PG)[rows:], 0.0)
    np.testing.assert_array_equal(np.asarray(got.group_ids_PG)[rows:], 4)
    want_c = copeland_rewards(votes, n, weight_V=weights, leave_one_out=loo).rewards_PG
    np.testing.assert_array_equal(np.asarray(cope.rewards_PG)[:rows], want_c)


def test_jax_float32_default_and_traced_sizes() -> None:
    v = _votes([(-1, 0, ">", 1), (-1, 0, ">", 1), (-1, 1, ">", 0)])
    got = kj.bradley_terry_rewards(v, [2], leave_one_out=False)
    assert got.rewards_PG.dtype == np.float32
    np.testing.assert_allclose(
        got.rewards_PG, bradley_terry_rewards(v, [2], leave_one_out=False).rewards_PG, atol=1e-6
    )
    with pytest.raises(ValueError, match="max_agents"):
        jax.jit(lambda n: kj.bradley_terry_rewards(v, n, num_rows=2).rewards_PG)(np.array([2]))
    with pytest.raises(ValueError, match="max_agents"):
        kj.copeland_rewards(v, [3], max_agents=2)


def test_ops_are_the_kernel_codes() -> None:
    assert (OP_GT, OP_EQ) == (0, 1)


def test_jax_converged_is_a_bool_mask() -> None:
    """It was int32 (the padding zero promoted it), so using it as a mask gathered rows 1 and 1."""
    import jax.numpy as jnp

    import kernel
    import kernel.jax as kj

    v = kernel.vote_arrays([0, 0, 0], [-1, -1, -1], [0, 0, 1], [">", ">", ">"], [1, 1, 0])
    converged = kj.bradley_terry_rewards(v, [2]).converged_PG
    assert converged.dtype == jnp.bool_
    assert jnp.array([10.0, 20.0])[converged].tolist() == [10.0, 20.0]
