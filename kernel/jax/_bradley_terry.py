"""JAX twins of the preference-model rewards (jit-compatible, static shapes).

The MM step, the reward scale and the Copeland score are :mod:`kernel._bradley_terry`'s own functions,
run with ``jax.numpy``; only the counting (``segment_sum`` over static bins) and the loop
(``lax.while_loop``) differ. Static sizes: ``max_agents`` (N ≥ max N_p) and ``num_rows`` (R ≥ Σ N_p),
both optional when ``num_agents_P`` is concrete. Votes with a group id outside ``[0, P)`` are padding.
Computed in JAX's default float dtype (float32 unless x64 is enabled). Judge votes (``votes.judge_V ≥ 0``)
are nobody's own votes, and weights come from ``votes.weight_V`` or ``weight_V`` (not both), as in numpy.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from kernel._bradley_terry import (
    BradleyTerryRewards,
    CopelandRewards,
    _check_leave_one_out,
    _check_options,
    _copeland,
    _fit_tensors,
    _mm_step,
    _reward,
)
from kernel._checks import check_int
from kernel._votes import VoteArrays
from kernel.jax._rewards import (
    _agents,
    _debater_authors,
    _fields,
    _judge_fields,
    _static_rows,
    _valid,
    _weights,
)

__all__ = ["bradley_terry_rewards", "copeland_rewards"]


def _static_agents(num_agents_P: ArrayLike, max_agents: int | None) -> int:
    if isinstance(num_agents_P, jax.core.Tracer) or max_agents is not None:
        if max_agents is None:
            raise ValueError("max_agents is required when num_agents_P is traced (e.g. under jit)")
        size = check_int(max_agents, "max_agents", low=1)
        if not isinstance(num_agents_P, jax.core.Tracer):
            n = _agents(num_agents_P)[0]
            if n.size and int(n.max()) > size:
                raise ValueError(f"max_agents must be >= max(num_agents_P) = {int(n.max())}, got {size}")
        return size
    n = _agents(num_agents_P)[0]
    return max(int(n.max()) if n.size else 0, 1)


def _vote_weights(votes: VoteArrays, weight_V: ArrayLike | None, num_votes: int) -> jax.Array:
    """Weights [V] from ``weight_V`` or ``votes.weight_V``, else all 1; both given is an error."""
    if weight_V is not None and votes.weight_V is not None:
        raise ValueError("weight_V: the votes carry weights already (votes.weight_V); pass one of the two")
    w = (
        _weights(weight_V, "weight_V", num_votes)
        if weight_V is not None
        else _judge_fields(votes, num_votes)[1]
    )
    return jnp.ones(num_votes, dtype=jnp.result_type(float)) if w is None else w


def _counts(
    votes: VoteArrays,
    num_agents_P: ArrayLike,
    weight_V: ArrayLike | None,
    leave_one_out: bool,
    size: int,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Dense counts [N, N, 2, B], present agents [N, B] and N_p [P]; fits as in numpy's ``_counts``."""
    g, u, a, op, b = _fields(votes)
    u = _debater_authors(u, _judge_fields(votes, g.shape[0])[0])
    n, _ = _agents(num_agents_P)
    w = _vote_weights(votes, weight_V, g.shape[0])
    num_groups = n.shape[0]
    valid, _, debate = _valid(g, a, op, b, n)
    n_v = jnp.append(n, 0)[debate]
    authors = size + 1 if leave_one_out else 1
    author = jnp.where((u >= 0) & (u < n_v), u, size) if leave_one_out else jnp.zeros_like(u)
    cells = authors * size * size * 2 * num_groups
    key = (((author * size + a) * size + b) * 2 + op) * num_groups + debate
    key = jnp.where(valid & (a < size) & (b < size), key, cells)
    by_author = jax.ops.segment_sum(w, key, num_segments=cells + 1)[:cells]
    by_author = by_author.reshape(authors, size, size, 2, num_groups)
    present = jnp.arange(size)[:, None] < n[None, :]
    if not leave_one_out:
        return by_author[0], present, n
    keep = (jnp.arange(size)[:, None] != jnp.arange(size + 1)[None, :]).astype(by_author.dtype)
    counts = jnp.einsum("uabcp,iu->abcip", by_author, keep).reshape(size, size, 2, size * num_groups)
    return counts, jnp.tile(present, (1, size)), n


def _rows(n: jax.Array, rows: int) -> tuple[jax.Array, jax.Array]:
    """Group id [R] (P for padding rows) and agent index within the debate [R] of each packed row."""
    ends = jnp.cumsum(n)
    group_ids = jnp.searchsorted(ends, jnp.arange(rows, dtype=jnp.int32), side="right").astype(jnp.int32)
    agent = jnp.arange(rows, dtype=jnp.int32) - jnp.append(ends - n, 0)[group_ids]
    return group_ids, agent


def _gather(values: jax.Array, n: jax.Array, rows: int, size: int, leave_one_out: bool) -> tuple[Any, Any]:
    group_ids, agent = _rows(n, rows)
    live = group_ids < n.shape[0]
    p = jnp.where(live, group_ids, 0)
    i = jnp.clip(agent, 0, size - 1)
    fit = i * n.shape[0] + p if leave_one_out else p
    # the zero of the values' own dtype: a bool mask stays bool (an int 0 would promote it to int32)
    return jnp.where(live, values[i, fit], jnp.zeros((), values.dtype)), group_ids


_ULPS = 4.0
"""A fit has converged once a step moves no log π by more than ``tol`` or than this many ulps of its
largest |log π| (in float32 the MM steps settle into rounding noise near 1e-7, so the default tol = 1e-10
was never met: every fit ran all ``max_iters`` steps and reported not converged)."""


def bradley_terry_rewards(
    votes: VoteArrays,
    num_agents_P: ArrayLike,
    *,
    weight_V: ArrayLike | None = None,
    prior: float = 1.0,
    tie_strength: float = 0.0,
    leave_one_out: bool = True,
    max_iters: int = 1000,
    tol: float = 1e-10,
    max_agents: int | None = None,
    num_rows: int | None = None,
) -> BradleyTerryRewards:
    """JAX twin of :func:`kernel.bradley_terry_rewards`: Davidson / Bradley–Terry fits by MM.

    π_i ← (Σ_j w_ij + ½·Σ_j t_ij) / Σ_j n_ij·(1 + ½ν·√(π_j/π_i)) / D_ij, D_ij = π_i + π_j + ν·√(π_iπ_j),
    renormalised to Σ log π = 0, in a ``lax.while_loop`` of at most ``max_iters`` steps; each fit is frozen
    after its first step that moved no log π by more than ``tol`` (as numpy);
    r_i = (π_i + ½ν√π_i) / (π_i + 1 + ν√π_i).

    Args:
      votes: ``VoteArrays`` of int arrays [V]; padding votes carry a group id outside ``[0, P)``.
      num_agents_P: int [P], agent count of each debate.
      weight_V: keyword-only; float [V] weights (finite, ≥ 0; checked when concrete); None: the
        votes' own ``weight_V``, else all 1 (giving both is an error).
      prior: keyword-only, static; pseudo-wins per ordered pair of agents (> 0).
      tie_strength: keyword-only, static; Davidson's ν ≥ 0.
      leave_one_out: keyword-only, static; fit agent i without the votes authored by i.
      max_iters: keyword-only, static; MM step limit (≥ 1).
      tol: keyword-only, static; a fit stops after a step that moved no log π by more than ``tol``, or
        by more than 4 ulps of its largest |log π| (:data:`_ULPS`: the reach of float32, JAX's default).
      max_agents: keyword-only, static; N ≥ max N_p (optional when ``num_agents_P`` is concrete).
      num_rows: keyword-only, static; R ≥ Σ N_p (optional when ``num_agents_P`` is concrete). Rows past
        Σ N_p have group id P and reward 0.

    Returns:
      ``BradleyTerryRewards`` with ``rewards_PG``, ``log_strengths_PG`` [R] and int32 ``num_iters``.

    Raises:
      ValueError: bad options (as numpy); ``max_agents`` or ``num_rows`` missing under jit or too small
        when known; a negative or non-finite concrete weight.
      TypeError: non-integer vote fields, non-real options.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 0], [-1, -1, -1], [0, 0, 1], [">", ">", ">"], [1, 1, 0])
      >>> bradley_terry_rewards(v, [2], leave_one_out=False).rewards_PG.round(4)
      Array([0.5505, 0.4495], dtype=float32)
    """
    p, nu, iters, t = _check_options(prior, tie_strength, max_iters, tol)
    loo = _check_leave_one_out(leave_one_out)
    size = _static_agents(num_agents_P, max_agents)
    counts, present, n = _counts(votes, num_agents_P, weight_V, loo, size)
    rows = _static_rows(_agents(num_agents_P)[1], num_rows)
    fit = _fit_tensors(jnp, counts, present, p)
    ulps = _ULPS * float(np.finfo(counts.dtype).eps)
    start = (jnp.int32(0), jnp.zeros(present.shape, counts.dtype), jnp.ones(present.shape[1], bool))
    it, log_pi, alive = _fit_by_mm(fit, start, nu, iters, t, ulps)
    log_rows, group_ids = _gather(log_pi, n, rows, size, loo)
    conv_rows, _ = _gather(jnp.broadcast_to(~alive[None, :], present.shape), n, rows, size, loo)
    live = group_ids < n.shape[0]
    rewards = jnp.where(live, _reward(jnp, log_rows, nu), 0.0)
    return BradleyTerryRewards(rewards, log_rows, group_ids, conv_rows & live, it)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _fit_by_mm(
    fit: Any, start: tuple[Any, Any, Any], nu: float, iters: int, tol: float, ulps: float
) -> tuple[Any, Any, Any]:
    """MM steps from ``start`` = (step, log π [N, F], alive [F]) until ``iters`` steps or no fit alive.
    One compiled program a shape and option set, also outside ``jit`` (an eager ``lax.while_loop`` of
    fresh closures compiled again on every call: 78 ms a call on one two-agent debate)."""

    def cond(state: tuple[Any, Any, Any]) -> Any:
        it, _, alive = state
        return (it < iters) & jnp.any(alive)

    def body(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        it, log_pi, alive = state
        new = _mm_step(jnp, log_pi, fit, nu)
        # a move within a few ulps of the fit's largest |log π| is rounding, not progress
        floor = ulps * jnp.maximum(jnp.max(jnp.abs(new), axis=0, initial=0.0), 1.0)
        moved = jnp.max(jnp.abs(new - log_pi), axis=0, initial=0.0) > jnp.maximum(tol, floor)
        return it + 1, jnp.where(alive[None, :], new, log_pi), alive & moved

    return jax.lax.while_loop(cond, body, start)


def copeland_rewards(
    votes: VoteArrays,
    num_agents_P: ArrayLike,
    *,
    weight_V: ArrayLike | None = None,
    leave_one_out: bool = True,
    max_agents: int | None = None,
    num_rows: int | None = None,
) -> CopelandRewards:
    """JAX twin of :func:`kernel.copeland_rewards`: c_i = Σ_{j≠i} sign(w_ij − w_ji) / max(N_p − 1, 1).

    Args:
      votes: ``VoteArrays`` of int arrays [V]; padding votes carry a group id outside ``[0, P)``.
      num_agents_P: int [P], agent count of each debate.
      weight_V: keyword-only; float [V] weights (finite, ≥ 0); None: the votes' own ``weight_V``, else
        all 1 (giving both is an error).
      leave_one_out: keyword-only, static; ignore agent i's own votes for agent i's score.
      max_agents: keyword-only, static; N ≥ max N_p (optional when ``num_agents_P`` is concrete).
      num_rows: keyword-only, static; R ≥ Σ N_p (optional when ``num_agents_P`` is concrete).

    Returns:
      ``CopelandRewards`` with ``rewards_PG`` [R] in [−1, 1] and int32 ``group_ids_PG`` [R].

    Raises:
      ValueError: ``max_agents`` or ``num_rows`` missing under jit or too small when known; a negative
        or non-finite concrete weight.
      TypeError: non-integer vote fields; a non-bool ``leave_one_out``.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 0], [-1, -1, -1], [0, 1, 2], [">", ">", "="], [1, 2, 0])
      >>> copeland_rewards(v, [3]).rewards_PG
      Array([ 0.5,  0. , -0.5], dtype=float32)
    """
    loo = _check_leave_one_out(leave_one_out)
    size = _static_agents(num_agents_P, max_agents)
    counts, _, n = _counts(votes, num_agents_P, weight_V, loo, size)
    rows = _static_rows(_agents(num_agents_P)[1], num_rows)
    agents_per_fit = jnp.tile(n, size) if loo else n
    scores, group_ids = _gather(_copeland(jnp, counts, agents_per_fit), n, rows, size, loo)
    return CopelandRewards(scores, group_ids)
