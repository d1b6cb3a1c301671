"""Bradley–Terry fits per debate: vectorised numpy and jitted JAX against a per-debate loop and choix.

``python -m benchmarks bradley_terry [--quick]``. Workload: D debates × 5 agents × 120 votes (default
4,096 × 5 × 120 ≈ 491 k votes, a third of them ties, ~1% malformed). Peers, measured in the same run in
interleaved rounds (best of k), each with everything it needs inside its timer:

- loop: the same MM algorithm, one debate at a time (split the votes, count with ``np.add.at``,
  iterate on [N, N] arrays until max |Δ log π| ≤ tol);
- choix (``choix.ilsr_pairwise``, if installed): the BT maximum-likelihood fit per debate from
  (winner, loser) lists; a tie is one comparison each way and the prior one pseudo-win each way per
  pair, both doubled with every win so that all counts stay integers (the MLE is unchanged).

Fits without leave-one-out (ν = 0, prior 1) are compared as log-strengths (Σ log π = 0); the
leave-one-out rewards (5 fits per debate) are timed against the loop as well. JAX runs in float64
(``jax.enable_x64``) so that its fits can be compared at 1e-6.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._common import block, emit_json, print_table, time_compile
from kernel import VoteArrays, bradley_terry_rewards, vote_arrays

_TOL = 1e-12


def make_votes(num_debates: int, num_agents: int, votes_per_debate: int, seed: int) -> VoteArrays:
    """Random debates: agent k wins with odds ∝ its hidden skill; a third ties; ~1% malformed."""
    rng = np.random.default_rng(seed)
    total = num_debates * votes_per_debate
    g = np.repeat(np.arange(num_debates), votes_per_debate)
    skill = rng.normal(size=(num_debates, num_agents))
    a = rng.integers(0, num_agents, total)
    b = (a + rng.integers(1, num_agents, total)) % num_agents
    p_a = 1 / (1 + np.exp(skill[g, b] - skill[g, a]))
    op = np.where(rng.random(total) < 1 / 3, "=", ">")
    swap = (op == ">") & (rng.random(total) > p_a)
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    b = np.where(rng.random(total) < 0.01, num_agents, b)  # out of range: malformed
    author = rng.integers(-1, num_agents, total)
    return vote_arrays(g, author, a, op, b)


def _split(votes: VoteArrays, num_debates: int) -> list[tuple[np.ndarray, ...]]:
    order = np.argsort(votes.group_ids_V, kind="stable")
    bounds = np.searchsorted(votes.group_ids_V[order], np.arange(1, num_debates))
    cols = [np.split(x[order], bounds) for x in votes[:5]]
    return list(zip(*cols, strict=True))


def _loop_fit(
    n: int, u: np.ndarray, a: np.ndarray, op: np.ndarray, b: np.ndarray, prior: float
) -> np.ndarray:
    """One debate, the same MM as the kernel on [n, n] arrays (ν = 0)."""
    valid = (a >= 0) & (a < n) & (b >= 0) & (b < n) & (a != b) & (op <= 1)
    wins = np.zeros((n, n))
    ties = np.zeros((n, n))
    gt = valid & (op == 0)
    eq = valid & (op == 1)
    np.add.at(wins, (a[gt], b[gt]), 1.0)
    np.add.at(ties, (a[eq], b[eq]), 1.0)
    wins += prior * (1 - np.eye(n))
    ties += ties.T
    comparisons = wins + wins.T + ties
    score = wins.sum(1) + 0.5 * ties.sum(1)
    log_pi = np.zeros(n)
    for _ in range(100_000):
        pi = np.exp(log_pi)
        new = np.log(score) - np.log((comparisons / (pi[:, None] + pi[None, :])).sum(1))
        new -= new.mean()
        done = np.max(np.abs(new - log_pi)) <= _TOL
        log_pi = new
        if done:
            break
    return log_pi


def loop_fits(votes: VoteArrays, num_agents_P: np.ndarray, *, leave_one_out: bool) -> np.ndarray:
    """Per debate (and, with leave-one-out, per left-out author) one fit; log-strengths or rewards."""
    out = []
    for p, (_, u, a, op, b) in enumerate(_split(votes, len(num_agents_P))):
        n = int(num_agents_P[p])
        if not leave_one_out:
            out.append(_loop_fit(n, u, a, op, b, 1.0))
            continue
        for i in range(n):
            keep = u != i
            log_pi = _loop_fit(n, u[keep], a[keep], op[keep], b[keep], 1.0)
            out.append([1 / (1 + np.exp(-log_pi[i]))])
    return np.concatenate(out)


def choix_fits(choix: Any, votes: VoteArrays, num_agents_P: np.ndarray) -> np.ndarray:
    out = []
    for p, (_, _, a, op, b) in enumerate(_split(votes, len(num_agents_P))):
        n = int(num_agents_P[p])
        valid = (a >= 0) & (a < n) & (b >= 0) & (b < n) & (a != b) & (op <= 1)
        a, op, b = a[valid].tolist(), op[valid].tolist(), b[valid].tolist()
        data = [(i, j) for i in range(n) for j in range(n) if i != j] * 2  # prior 1, doubled
        for x, o, y in zip(a, op, b, strict=True):
            data += [(x, y), (x, y)] if o == 0 else [(x, y), (y, x)]
        params = choix.ilsr_pairwise(n, data, tol=1e-13, max_iter=1000)
        out.append(params - params.mean())
    return np.concatenate(out)


def _interleaved(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            block(fn())
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks bradley_terry", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (well under a minute)")
    args = parser.parse_args(argv)
    num_debates = 256 if args.quick else 4096
    rounds = 2 if args.quick else 3
    votes = make_votes(num_debates, 5, 120, seed=0)
    n = np.full(num_debates, 5, dtype=np.int64)
    try:
        import choix
    except ImportError:
        choix = None

    import jax

    import kernel.jax as kj

    def ours(loo: bool) -> Any:
        return bradley_terry_rewards(votes, n, leave_one_out=loo, tol=_TOL)

    figures: dict[str, Any] = {"benchmark": "bradley_terry", "quick": args.quick, "debates": num_debates}
    with jax.enable_x64(True):
        votes_dev = VoteArrays(*(jax.device_put(x) for x in votes[:5]))
        n_dev = jax.device_put(n.astype(np.int32))
        jitted = {
            loo: jax.jit(
                lambda v, k, loo=loo: kj.bradley_terry_rewards(
                    v, k, leave_one_out=loo, tol=_TOL, max_agents=5, num_rows=5 * num_debates
                )
            )
            for loo in (False, True)
        }
        compile_s = {
            loo: time_compile(lambda loo=loo: jitted[loo](votes_dev, n_dev)) for loo in (False, True)
        }

        fit = ours(False)
        diffs = {
            "loop": float(np.max(np.abs(fit.log_strengths_PG - loop_fits(votes, n, leave_one_out=False))))
        }
        got_jax = np.asarray(jitted[False](votes_dev, n_dev).log_strengths_PG)
        diffs["jax"] = float(np.max(np.abs(fit.log_strengths_PG - got_jax)))
        if choix is not None:
            diffs["choix"] = float(np.max(np.abs(fit.log_strengths_PG - choix_fits(choix, votes, n))))
        loo_fit = ours(True)
        diffs["loop_loo_rewards"] = float(
            np.max(np.abs(loo_fit.rewards_PG - loop_fits(votes, n, leave_one_out=True)))
        )
        diffs["jax_loo_rewards"] = float(
            np.max(np.abs(loo_fit.rewards_PG - np.asarray(jitted[True](votes_dev, n_dev).rewards_PG)))
        )

        fns: dict[str, Callable[[], Any]] = {
            "loop fit": lambda: loop_fits(votes, n, leave_one_out=False),
            "numpy fit": lambda: ours(False),
            "jax.jit fit (CPU, float64)": lambda: jitted[False](votes_dev, n_dev),
        }
        if choix is not None:
            fns["choix.ilsr_pairwise per debate"] = lambda: choix_fits(choix, votes, n)
        loo_fns: dict[str, Callable[[], Any]] = {
            "loop leave-one-out": lambda: loop_fits(votes, n, leave_one_out=True),
            "numpy leave-one-out": lambda: ours(True),
            "jax.jit leave-one-out (CPU, float64)": lambda: jitted[True](votes_dev, n_dev),
        }
        times = _interleaved(fns, rounds)
        loo_times = _interleaved(loo_fns, rounds)

    num_votes = int(votes.a_V.size)
    t_loop, t_loop_loo = times["loop fit"], loo_times["loop leave-one-out"]
    table = [(k, t * 1e3, num_debates / t, t_loop / t) for k, t in times.items()]
    table += [(k, t * 1e3, num_debates / t, t_loop_loo / t) for k, t in loo_times.items()]
    title = (
        f"{num_debates:,} debates × 5 agents × 120 votes = {num_votes:,} votes; ν = 0, prior 1, "
        f"tol {_TOL:g}; JAX compile {compile_s[False]:.2f} s / {compile_s[True]:.2f} s (apart); "
        f"best of {rounds} interleaved"
    )
    print_table(title, ["implementation", "ms", "debates/s", "× its loop"], table)
    print_table("max |difference| against our numpy fit", ["peer", "max abs diff"], list(diffs.items()))
    if choix is None:
        print("choix is not installed: its row is missing (pip install choix)")
    figures.update({f"ms.{k}": t * 1e3 for k, t in {**times, **loo_times}.items()})
    figures["numpy_x_loop"] = t_loop / times["numpy fit"]
    figures["jax_x_loop"] = t_loop / times["jax.jit fit (CPU, float64)"]
    figures["numpy_loo_x_loop"] = t_loop_loo / loo_times["numpy leave-one-out"]
    figures["jax_loo_x_loop"] = t_loop_loo / loo_times["jax.jit leave-one-out (CPU, float64)"]
    if choix is not None:
        figures["numpy_x_choix"] = times["choix.ilsr_pairwise per debate"] / times["numpy fit"]
    figures.update({f"max_abs_diff.{k}": v for k, v in diffs.items()})
    emit_json(figures)
    return 0
