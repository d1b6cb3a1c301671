"""Rewards from a preference model: Bradley–Terry / Davidson strengths and Copeland scores per debate.

Debate p has N_p agents; every valid vote (see :func:`kernel.validate_votes`) is one weighted pairwise
comparison: ``a > b`` a win of a over b, ``a = b`` a tie. Per debate, the Davidson (1970) model with tie
parameter ν ≥ 0 gives

  P(i ≻ j) = π_i / D_ij,   P(i = j) = ν·√(π_i·π_j) / D_ij,   D_ij = π_i + π_j + ν·√(π_i·π_j),

which is Bradley–Terry for ν = 0 (a tie then counts as half a win and half a loss). Strengths are fitted
by maximum likelihood with a prior of ``prior`` pseudo-wins for every ordered pair of agents (a
symmetric pseudo-count, so every strength stays finite however one-sided the votes), normalised to
Σ_i log π_i = 0 (geometric mean 1). The reward is the expected score (win 1, tie ½) against an agent of
strength 1, the debate's geometric-mean agent:

  r_i = (π_i + ½·ν·√π_i) / (π_i + 1 + ν·√π_i)  ∈ (0, 1),  = σ(log π_i) for ν = 0,

on the scale of ``pairwise_rewards(mode="win_rate")``: 0.5 is average, and in a balanced round robin
(every pair compared equally often) the BT ranking is the win-rate ranking. Leave-one-out (the default)
fits agent i's strength without the votes authored by i, as one more pseudo-debate per (debate, agent):
all fits of a batch run as one vectorised MM iteration over a dense [N, N, B] count tensor (batch
axis last; N = max N_p; memory O(P·N³) with leave-one-out (per-author counts), O(P·N²) without).
Each fit stops on its own tolerance; numpy drops converged fits from its working set as it goes.

The Copeland score counts pairwise majorities instead: c_i = Σ_{j≠i} sign(m_ij − m_ji) / (N_p − 1) ∈
[−1, 1] with m_ij the weight of votes for i over j (ties add ½ to both).

Judge votes (``votes.judge_V ≥ 0``, see :class:`kernel.VoteArrays`) are nobody's own votes: leave-one-out
keeps them in every fit. Weights come from ``votes.weight_V`` or the ``weight_V`` keyword (not both).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import check_bool, check_int, check_real
from kernel._votes import VoteArrays, _as_weights, _checked, _debater_authors, _judge_fields, _valid_mask

__all__ = ["BradleyTerryRewards", "CopelandRewards", "bradley_terry_rewards", "copeland_rewards"]

FloatArray = npt.NDArray[np.float64]


class BradleyTerryRewards(NamedTuple):
    """Result of :func:`bradley_terry_rewards`.

    Attributes:
      rewards_PG: float [R], R = Σ_p N_p: expected score of each agent against strength 1, in (0, 1).
      log_strengths_PG: float [R]: fitted log π_i (Σ log π = 0 over the agents of each fit).
      group_ids_PG: int32 [R], the debate of each row.
      converged_PG: bool [R], the fit behind each row moved by at most ``tol`` in its last step.
      num_iters: MM iterations of the slowest fit of the batch.
    """

    rewards_PG: Any
    log_strengths_PG: Any
    group_ids_PG: Any
    converged_PG: Any
    num_iters: Any


class CopelandRewards(NamedTuple):
    """Result of :func:`copeland_rewards`.

    Attributes:
      rewards_PG: float [R]: (majority wins − majority losses) / max(N_p − 1, 1), in [−1, 1].
      group_ids_PG: int32 [R], the debate of each row.
    """

    rewards_PG: Any
    group_ids_PG: Any


# --- the shared algorithm, written against the array namespace xp ---------------------------------


class _Fit(NamedTuple):
    """What the MM step reads for a batch of B fits, batch axis last (see :func:`_fit_tensors`)."""

    n: Any  # [N, N, B] comparisons n_ij (zero on the diagonal and for absent agents)
    score: Any  # [N, B] W_i + ½T_i where fitted, else 1
    pad: Any  # [N, B] 0 where fitted, else 1 (so an unfitted agent's update is 1 / (0 + 1) = 1)
    fitted: Any  # [N, B] float 1.0 for a fitted agent (present, in a fit with two or more agents)
    count: Any  # [B] number of fitted agents, at least 1


def _fit_tensors(xp: Any, counts: Any, present: Any, prior: Any) -> _Fit:
    """The tensors of B fits from counts [N, N, 2, B] and present agents [N, B].

    counts[a, b, 0] is the weight of ``a > b``, counts[a, b, 1] of ``a = b``. With w_ij the wins plus
    ``prior`` for each pair of present agents and t_ij the ties either way round: n_ij = w_ij + w_ji +
    t_ij and score_i = Σ_j w_ij + ½·Σ_j t_ij; agent i is fitted iff score_i > 0. The batch axis is
    last so that every broadcast of the MM step runs over contiguous memory.
    """
    size = present.shape[0]
    eye = xp.eye(size, dtype=bool)[:, :, None]
    pair = present[:, None, :] & present[None, :, :] & ~eye
    wins = counts[:, :, 0] + xp.where(pair, prior, 0.0)
    ties = counts[:, :, 1] + xp.swapaxes(counts[:, :, 1], 0, 1)
    n = wins + xp.swapaxes(wins, 0, 1) + ties
    score = xp.sum(wins, axis=1) + 0.5 * xp.sum(ties, axis=1)
    fitted = score > 0
    count = xp.maximum(xp.sum(fitted, axis=0), 1).astype(n.dtype)
    one = xp.ones_like(score)
    return _Fit(n, xp.where(fitted, score, one), xp.where(fitted, 0.0, one), fitted.astype(n.dtype), count)


def _mm_step(xp: Any, log_pi: Any, fit: _Fit, nu: float) -> Any:
    """One MM update of log-strengths [N, B], renormalised to Σ log π = 0 over the fitted agents.

    π_i ← (W_i + ½T_i) / Σ_j n_ij·(1 + ½ν·√(π_j/π_i)) / D_ij, D_ij = π_i + π_j + ν·√(π_iπ_j).
    D_ij > 0 everywhere (π > 0) and n_ij = 0 off the pairs of present agents, so no mask is needed
    inside the sum; ν is a Python float, and ν = 0 takes the cheaper Bradley–Terry form. An unfitted
    agent keeps log π = 0.
    """
    pi = xp.exp(log_pi)
    if nu == 0:
        denom = xp.sum(fit.n / (pi[:, None, :] + pi[None, :, :]), axis=1)
    else:
        root = xp.exp(0.5 * log_pi)
        r_i, r_j = root[:, None, :], root[None, :, :]
        d = pi[:, None, :] + pi[None, :, :] + nu * r_i * r_j
        denom = xp.sum(fit.n * (r_i + 0.5 * nu * r_j) / d, axis=1) / root
    new = xp.log(fit.score / (denom + fit.pad))  # 0 for an unfitted agent
    return (new - xp.sum(new, axis=0) / fit.count) * fit.fitted


def _reward(xp: Any, log_pi: Any, nu: Any) -> Any:
    """r = (π + ½ν√π) / (π + 1 + ν√π), the expected score against strength 1."""
    pi = xp.exp(log_pi)
    root = xp.exp(0.5 * log_pi)
    return (pi + 0.5 * nu * root) / (pi + 1.0 + nu * root)


def _copeland(xp: Any, counts: Any, agents_per_fit: Any) -> Any:
    """Σ_j sign(m_ij − m_ji) / max(N − 1, 1) with m_ij = w_ij + ½·t_ij (ties cancel): [N, B]."""
    margin = counts[:, :, 0] - xp.swapaxes(counts[:, :, 0], 0, 1)
    return xp.sum(xp.sign(margin), axis=1) / xp.maximum(agents_per_fit - 1, 1)


# --- numpy --------------------------------------------------------------------------------------------


def _check_options(
    prior: object, tie_strength: object, max_iters: object, tol: object
) -> tuple[float, float, int, float]:
    p = check_real(prior, "prior", finite=True, positive=True)
    nu = check_real(tie_strength, "tie_strength", finite=True)
    if nu < 0:
        raise ValueError(f"tie_strength must be >= 0, got {tie_strength!r}")
    iters = check_int(max_iters, "max_iters", low=1)
    t = check_real(tol, "tol", finite=True)
    if t < 0:
        raise ValueError(f"tol must be >= 0, got {tol!r}")
    return p, nu, iters, t


def _check_leave_one_out(leave_one_out: object) -> bool:
    return check_bool(leave_one_out, "leave_one_out")


def _weights(votes: VoteArrays, weight_V: npt.ArrayLike | None, num_votes: int) -> FloatArray | None:
    """The vote weights from ``weight_V`` or ``votes.weight_V`` (None: all 1); both given is an error."""
    if weight_V is not None and votes.weight_V is not None:
        raise ValueError("weight_V: the votes carry weights already (votes.weight_V); pass one of the two")
    if weight_V is not None:
        return _as_weights(weight_V, "weight_V", num_votes)
    return _judge_fields(votes, num_votes)[1]


def _counts(
    votes: VoteArrays, num_agents_P: npt.ArrayLike, weight_V: npt.ArrayLike | None, leave_one_out: bool
) -> tuple[FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Dense counts [N, N, 2, B] of B fits (batch axis last), their present agents [N, B], and N_p.

    Without leave-one-out B = P (fit p); with it B = N·P, fit i·P + p excludes the votes authored by
    agent i of debate p. An author outside ``[0, N_p)`` excludes nobody, and neither does a judge vote.
    N = max N_p.
    """
    g, u, a, op, b, n = _checked(votes, num_agents_P)
    u = _debater_authors(u, _judge_fields(votes, int(g.shape[0]))[0])
    w = _weights(votes, weight_V, int(g.shape[0]))
    num_groups = int(n.shape[0])
    size = int(n.max()) if n.size else 0
    valid = _valid_mask(g, a, op, b, n)
    n_v = np.append(n, 0)[g]
    authors = size + 1 if leave_one_out else 1  # author slot `size` = "no agent of this debate"
    cells = authors * size * size * 2 * num_groups
    idx = np.int32 if cells < np.iinfo(np.int32).max else np.int64
    # key = (((author·N + a)·N + b)·2 + op)·P + g, in place on one buffer (this part is memory-bound)
    key: npt.NDArray[Any]
    if leave_one_out:
        key = np.where((u >= 0) & (u < n_v), u, size).astype(idx)
        key *= size
        key += a
    else:
        key = a.astype(idx)
    key *= size
    key += b
    key *= 2
    key += op
    key *= num_groups
    key += g
    key = np.where(valid, key, cells)
    if w is None:  # an integer bincount is faster than a weighted one
        by_author: FloatArray = np.bincount(key, minlength=cells + 1)[:cells].astype(np.float64)
    else:
        by_author = np.asarray(np.bincount(key, weights=w, minlength=cells + 1)[:cells], dtype=np.float64)
    by_author = by_author.reshape(authors, size, size, 2, num_groups)
    present = np.arange(size)[:, None] < n[None, :]  # [N, P]
    if not leave_one_out:
        return by_author[0], present, n
    # fit (i, p): every author but i, summed in one fixed order (adding i's votes changes nothing)
    keep = (np.arange(size)[:, None] != np.arange(size + 1)[None, :]).astype(np.float64)  # [i, author]
    counts = np.einsum("uabcp,iu->abcip", by_author, keep).reshape(size, size, 2, size * num_groups)
    return counts, np.tile(present, (1, size)), n


def _fit_numpy(
    counts: FloatArray, present: npt.NDArray[np.bool_], prior: float, nu: float, max_iters: int, tol: float
) -> tuple[FloatArray, npt.NDArray[np.bool_], int]:
    """MM until each fit's own step moves no log π by more than ``tol`` (a fit that did is frozen).

    Frozen fits leave the working set, which is compacted whenever half of it has converged, so the
    work follows the sum of the fits' iteration counts rather than B times the largest one.
    """
    fit = _fit_tensors(np, counts, present, prior)
    log_pi = np.zeros(present.shape)  # [N, B]
    converged = np.zeros(present.shape[1], dtype=bool)
    idx = np.arange(present.shape[1])  # the working set: fits by index, some possibly frozen
    alive = np.ones(idx.size, dtype=bool)
    cur = log_pi
    it = 0
    while it < max_iters and alive.any():
        new = _mm_step(np, cur, fit, nu)
        it += 1
        done = alive & (np.max(np.abs(new - cur), axis=0, initial=0.0) <= tol)
        if done.any():
            log_pi[:, idx[done]] = new[:, done]
            converged[idx[done]] = True
            alive &= ~done
        cur = new
        if 2 * int(alive.sum()) <= alive.size:
            idx, cur = idx[alive], cur[:, alive]
            fit = _Fit(*(x[..., alive] for x in fit))
            alive = np.ones(idx.size, dtype=bool)
    log_pi[:, idx[alive]] = cur[:, alive]
    return log_pi, converged, it


def bradley_terry_rewards(
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    weight_V: npt.ArrayLike | None = None,
    prior: float = 1.0,
    tie_strength: float = 0.0,
    leave_one_out: bool = True,
    max_iters: int = 1000,
    tol: float = 1e-10,
) -> BradleyTerryRewards:
    """Bradley–Terry / Davidson strengths fitted per debate by MM, and the rewards they imply.

    Per fit, with w_ij the weight of votes ``i > j`` plus ``prior``, t_ij the weight of ties, n_ij =
    w_ij + w_ji + t_ij, the log-likelihood is

      ℓ(π) = Σ_{i≠j} w_ij·log(π_i/D_ij) + ½·Σ_{i≠j} t_ij·log(ν·√(π_iπ_j)/D_ij),
      D_ij = π_i + π_j + ν·√(π_iπ_j)

    and the minorise–maximise update (tangent line of −log D, AM–GM on √(π_iπ_j)) is

      π_i ← (Σ_j w_ij + ½·Σ_j t_ij) / Σ_j n_ij·(1 + ½ν·√(π_j/π_i)) / D_ij,

    then Σ log π = 0. For ν = 0 this is Hunter's (2004) MM for Bradley–Terry with a tie as half a win
    and half a loss. Each fit stops after its first step that moved no log π by more than ``tol``, or
    after ``max_iters`` steps (then ``converged_PG`` is False for its rows).
    Reward r_i = (π_i + ½ν√π_i) / (π_i + 1 + ν√π_i) ∈ (0, 1), the expected score against the
    geometric-mean agent. A debate of one agent (or an agent nobody compared) gets log π = 0, r = ½.

    Args:
      votes: ``VoteArrays`` of length V; invalid and padding votes are ignored.
      num_agents_P: int [P], agent count N_p of each debate.
      weight_V: keyword-only; float [V] weight of each vote (finite, ≥ 0); None takes ``votes.weight_V``,
        or weighs each vote 1 when the votes carry none (giving both is an error).
      prior: keyword-only; pseudo-wins of every agent over every other agent of its debate (> 0).
      tie_strength: keyword-only; Davidson's ν ≥ 0 (0: Bradley–Terry, ties count half).
      leave_one_out: keyword-only; fit agent i's strength without the votes authored by i (judge votes,
        ``votes.judge_V ≥ 0``, are nobody's and always count).
      max_iters: keyword-only; at most this many MM steps (≥ 1).
      tol: keyword-only; a fit stops after its first step that moves no log π by more than ``tol``.

    Returns:
      ``BradleyTerryRewards`` with float64 ``rewards_PG`` and ``log_strengths_PG`` of shape [Σ N_p].

    Raises:
      ValueError: ``prior`` ≤ 0, ``tie_strength`` < 0, ``max_iters`` < 1, ``tol`` < 0 or not finite; a
        negative or NaN weight; weights in both ``weight_V`` and ``votes.weight_V``; mismatched lengths;
        a group id outside ``[0, P]``.
      TypeError: non-integer vote fields, non-real options, a non-bool ``leave_one_out``.

    References:
      Bradley & Terry (1952), Biometrika 39; Davidson (1970), JASA 65(329), "On extending the
      Bradley–Terry model to accommodate ties in paired comparison experiments"; Hunter (2004), Annals
      of Statistics 32(1), "MM algorithms for generalized Bradley–Terry models".

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 0], [-1, -1, -1], [0, 0, 1], [">", ">", ">"], [1, 1, 0])
      >>> fit = bradley_terry_rewards(v, [2], leave_one_out=False)
      >>> float(np.exp(fit.log_strengths_PG[0] - fit.log_strengths_PG[1]))  # (2 + 1) / (1 + 1)
      1.5
      >>> fit.rewards_PG.round(4), fit.converged_PG
      (array([0.5505, 0.4495]), array([ True,  True]))
    """
    p, nu, iters, t = _check_options(prior, tie_strength, max_iters, tol)
    loo = _check_leave_one_out(leave_one_out)
    counts, present, n = _counts(votes, num_agents_P, weight_V, loo)
    log_pi, converged, it = _fit_numpy(counts, present, p, nu, iters, t)
    log_rows = _rows(log_pi, n, loo)
    conv_rows = _rows(np.broadcast_to(converged, log_pi.shape), n, loo)
    group_ids = np.repeat(np.arange(n.shape[0], dtype=np.int32), n)
    return BradleyTerryRewards(_reward(np, log_rows, nu), log_rows, group_ids, conv_rows, it)


def _rows(values: npt.NDArray[Any], n: npt.NDArray[np.int64], leave_one_out: bool) -> npt.NDArray[Any]:
    """Packed rows [Σ N_p] (group-major) from values [N, B]: agent i of debate p is values[i, p], or
    values[i, i·P + p] with leave-one-out."""
    size, num_groups = values.shape[0], n.shape[0]
    group_ids = np.repeat(np.arange(num_groups), n)
    agent = np.arange(group_ids.size) - np.repeat(np.cumsum(n) - n, n)
    fit = agent * num_groups + group_ids if leave_one_out else group_ids
    return values[agent, fit] if size else values.reshape(0)


def copeland_rewards(
    votes: VoteArrays,
    num_agents_P: npt.ArrayLike,
    *,
    weight_V: npt.ArrayLike | None = None,
    leave_one_out: bool = True,
) -> CopelandRewards:
    """Copeland score: pairwise majority wins minus losses of each agent, over N_p − 1.

    c_i = Σ_{j≠i} sign(w_ij − w_ji) / max(N_p − 1, 1) ∈ [−1, 1], w_ij the weight of votes ``i > j``
    (ties add ½ to both sides and cancel; a pair nobody compared counts 0). With ``leave_one_out``
    agent i's score ignores the votes authored by i.

    Args:
      votes: ``VoteArrays`` of length V; invalid and padding votes are ignored.
      num_agents_P: int [P], agent count of each debate.
      weight_V: keyword-only; float [V] weight of each vote (finite, ≥ 0); None takes ``votes.weight_V``,
        or weighs each vote 1 when the votes carry none (giving both is an error).
      leave_one_out: keyword-only; ignore agent i's own votes for agent i's score (judge votes count).

    Returns:
      ``CopelandRewards`` with float64 ``rewards_PG`` [Σ N_p] and int32 ``group_ids_PG``.

    Raises:
      ValueError: a negative or NaN weight; weights in both ``weight_V`` and ``votes.weight_V``;
        mismatched lengths; a group id outside ``[0, P]``.
      TypeError: non-integer vote fields; a non-bool ``leave_one_out``.

    References:
      Copeland (1951), "A reasonable social welfare function", University of Michigan seminar.

    Examples:
      >>> from kernel import vote_arrays
      >>> v = vote_arrays([0, 0, 0], [-1, -1, -1], [0, 1, 2], [">", ">", "="], [1, 2, 0])
      >>> copeland_rewards(v, [3]).rewards_PG
      array([ 0.5,  0. , -0.5])
    """
    loo = _check_leave_one_out(leave_one_out)
    counts, _, n = _counts(votes, num_agents_P, weight_V, loo)
    agents_per_fit = np.tile(n, counts.shape[0]) if loo else n
    scores = _rows(_copeland(np, counts, agents_per_fit), n, loo)
    return CopelandRewards(scores, np.repeat(np.arange(n.shape[0], dtype=np.int32), n))
