"""Training metrics: sampler–trainer KL and entropy over action tokens, batch token / turn statistics.

Everything is token-weighted across the whole batch: per-token quantities are summed over all action
tokens of all datums and divided once, so a long datum weighs more than a short one. The same functions
take packed flat arrays (``[T]``) or padded ones (``[D, T]``): they work elementwise, then reduce over
every axis.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from kernel._checks import (
    as_float_array,
    as_int_array,
    as_mask,
    check_group_ids,
    check_real,
    check_same_length,
    check_same_shape,
)
from kernel._groups import check_num_groups
from kernel._namespace import NUMPY, Backend

__all__ = [
    "KLMetrics",
    "StepMetrics",
    "TrajectoryMetrics",
    "kl_sample_train",
    "step_metrics",
    "trajectory_metrics",
]

ArrayT = TypeVar("ArrayT")


class KLMetrics(NamedTuple, Generic[ArrayT]):
    """Sampler–trainer divergence and sampler entropy over the action tokens of a batch.

    Every field is a 0-d array (numpy from :func:`kernel.kl_sample_train`, JAX from its twin in
    :mod:`kernel.jax`). With no action token at all the three values are NaN and ``num_action_tokens``
    is 0; :meth:`as_dict` then returns an empty dict.

    Attributes:
        kl_sample_train_v1: mean(lp_q − lp_θ), a first-order KL(q ‖ π_θ) estimate.
        kl_sample_train_v2: ½·mean((lp_q − lp_θ)²), a second-order estimate.
        entropy: −mean(lp_q), the sampler's per-token entropy estimate.
        num_action_tokens: number of positions with ``mask > 0`` (int).
    """

    kl_sample_train_v1: ArrayT
    kl_sample_train_v2: ArrayT
    entropy: ArrayT
    num_action_tokens: ArrayT

    def as_dict(self, prefix: str = "optim/") -> dict[str, float]:
        """The values under the reference's log names (``optim/kl_sample_train_v1`` ...); ``{}`` if empty."""
        if int(np.asarray(self.num_action_tokens)) == 0:
            return {}
        return {
            f"{prefix}kl_sample_train_v1": float(np.asarray(self.kl_sample_train_v1)),
            f"{prefix}kl_sample_train_v2": float(np.asarray(self.kl_sample_train_v2)),
            f"{prefix}entropy": float(np.asarray(self.entropy)),
        }


def _action_mask(bk: Backend, mask: Any) -> Any:
    """``mask > 0`` for a boolean or real mask (NaN and −0.0 are not action tokens); raises naming it."""
    arr = bk.xp.asarray(mask)
    if arr.size == 0 and arr.dtype.kind not in "biuf":
        arr = arr.astype(float)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"mask must be a boolean or real array, got dtype {arr.dtype}")
    return arr > 0


def _kl_sample_train(bk: Backend, sampler_logprobs: Any, train_logprobs: Any, mask: Any) -> KLMetrics[Any]:
    """The one implementation of :func:`kl_sample_train`, numpy or JAX (static shapes: no branch)."""
    xp = bk.xp
    lp_q = bk.as_float(sampler_logprobs, "sampler_logprobs")
    lp_t = bk.as_float(train_logprobs, "train_logprobs")
    action = _action_mask(bk, mask)
    check_same_shape(sampler_logprobs=lp_q, train_logprobs=lp_t, mask=action)
    dtype = xp.result_type(lp_q, lp_t)
    zero = xp.zeros((), dtype)
    lp_q = xp.where(action, lp_q.astype(dtype), zero)
    diff = lp_q - xp.where(action, lp_t.astype(dtype), zero)
    n = xp.count_nonzero(action)
    lp_q, diff = bk.wide(lp_q), bk.wide(diff)  # float16 / bfloat16: summed and divided in float32
    count = xp.maximum(n, 1).astype(lp_q.dtype)
    empty = n == 0
    nan = xp.asarray(xp.nan, dtype=lp_q.dtype)
    v1 = xp.where(empty, nan, xp.sum(diff) / count)
    v2 = xp.where(empty, nan, 0.5 * (xp.sum(diff * diff) / count))
    entropy = xp.where(empty, nan, -(xp.sum(lp_q) / count))
    return KLMetrics(
        xp.asarray(v1, dtype=dtype),
        xp.asarray(v2, dtype=dtype),
        xp.asarray(entropy, dtype=dtype),
        xp.asarray(n, dtype=bk.count_dtype),
    )


def kl_sample_train(
    sampler_logprobs: npt.ArrayLike, train_logprobs: npt.ArrayLike, mask: npt.ArrayLike
) -> KLMetrics[npt.NDArray[Any]]:
    """KL between the sampling and the training policy, and sampler entropy, over action tokens.

    With d = lp_q − lp_θ on the n action tokens (positions with mask > 0) of the whole batch:

        kl_sample_train_v1 = Σ d / n,   kl_sample_train_v2 = ½·Σ d² / n,   entropy = −Σ lp_q / n.

    Token-weighted: datums are not averaged separately. Computed in the inputs' float dtype (float32
    stays float32, as in the reference; float64 is never downcast; float16 and bfloat16 are summed and
    divided in float32, then rounded back). Values at positions with mask ≤ 0
    (including NaN or ±inf ones) never reach the result.

    Args:
        sampler_logprobs: lp_q, float [...], the sampler's logprob of each target token (any shape:
            packed ``[T]`` or padded ``[D, T]``).
        train_logprobs: lp_θ, float [...], the trainer's logprob of the same tokens; same shape.
        mask: bool or real [...], same shape; a position is an action token iff ``mask > 0``
            (so 0.5, 2 and 1e-9 count; 0, −0.0, −1 and NaN do not).

    Returns:
        :class:`KLMetrics` of 0-d arrays; NaN values and ``num_action_tokens == 0`` when there is no
        action token (the reference raises ``AssertionError`` there instead).

    Raises:
        TypeError: non-real inputs.
        ValueError: the three shapes differ.

    References:
        tinker-cookbook ``rl`` training loop, ``compute_kl_sample_train``; J. Schulman, "Approximating KL
        divergence" (2020) for the k1 / k2 estimators.

    Examples:
        >>> m = kl_sample_train([-1.0, -2.0, -0.5], [-1.5, -2.0, -9.0], [1, 1, 0])
        >>> float(m.kl_sample_train_v1), float(m.kl_sample_train_v2), float(m.entropy)
        (0.25, 0.0625, 1.5)
        >>> int(m.num_action_tokens)
        2
        >>> kl_sample_train([-1.0], [-1.0], [0.0]).as_dict()
        {}
    """
    return _kl_sample_train(NUMPY, sampler_logprobs, train_logprobs, mask)


class TrajectoryMetrics(NamedTuple):
    """Token, turn and reward statistics of one batch of episodes (Python numbers, ready to log).

    Ratios whose denominator is zero (no turn, no episode, no group) are 0.0.

    Attributes:
        ac_tokens_per_turn: Σ action tokens / number of turns.
        ob_tokens_per_turn: Σ observation tokens / number of turns.
        turns_per_episode: number of turns / number of episodes.
        total_episodes: number of episodes (an episode with no turn counts).
        total_turns: number of turns.
        total_ac_tokens: Σ action tokens.
        total_ob_tokens: Σ observation tokens.
        reward_total: mean episode return.
        frac_mixed: share of non-empty groups whose returns are not all equal.
        frac_all_good: share of non-empty groups with all returns equal and ≥ ``good_threshold``.
        frac_all_bad: share of non-empty groups with all returns equal and < ``good_threshold``.
    """

    ac_tokens_per_turn: float
    ob_tokens_per_turn: float
    turns_per_episode: float
    total_episodes: int
    total_turns: int
    total_ac_tokens: int
    total_ob_tokens: int
    reward_total: float
    frac_mixed: float
    frac_all_good: float
    frac_all_bad: float

    def as_dict(self, prefix: str = "env/all/") -> dict[str, float]:
        """The values under the reference's log names, e.g. ``env/all/ac_tokens_per_turn``."""
        names = {
            "ac_tokens_per_turn": self.ac_tokens_per_turn,
            "ob_tokens_per_turn": self.ob_tokens_per_turn,
            "turns_per_episode": self.turns_per_episode,
            "total_episodes": self.total_episodes,
            "total_turns": self.total_turns,
            "total_ac_tokens": self.total_ac_tokens,
            "total_ob_tokens": self.total_ob_tokens,
            "reward/total": self.reward_total,
            "by_group/frac_mixed": self.frac_mixed,
            "by_group/frac_all_good": self.frac_all_good,
            "by_group/frac_all_bad": self.frac_all_bad,
        }
        return {prefix + k: float(v) for k, v in names.items()}


def _exact_total(counts: npt.NDArray[np.integer[Any]]) -> int:
    """Σ counts as a Python int: numpy's int64 sum, or Python's where that could wrap (counts near 2**63)."""
    if counts.size == 0:
        return 0
    if int(counts.max()) <= np.iinfo(np.int64).max // counts.size:
        return int(counts.sum(dtype=np.int64))
    return sum(counts.tolist())


def trajectory_metrics(
    ob_tokens: npt.ArrayLike,
    ac_tokens: npt.ArrayLike,
    turn_episode_ids: npt.ArrayLike,
    returns_PG: npt.ArrayLike,
    group_ids_PG: npt.ArrayLike,
    num_groups: int,
    *,
    good_threshold: float = 0.5,
) -> TrajectoryMetrics:
    """Per-batch token, turn and reward statistics, from flat per-turn and per-episode arrays.

    With turns t, episodes e and groups p (padding excluded):

        ac_tokens_per_turn = Σ_t ac_t / #t,   ob_tokens_per_turn = Σ_t ob_t / #t,
        turns_per_episode = #t / #e,   reward_total = Σ_e R_e / #e,
        frac_mixed = #{p non-empty : min_{e∈p} R_e ≠ max_{e∈p} R_e} / #{p non-empty},

    every division by max(count, 1). A group of one is never mixed; a NaN return makes its group mixed
    (NaN equals nothing). Equality is exact: no tolerance.

    Args:
        ob_tokens: int [N], observation tokens of each turn (≥ 0).
        ac_tokens: int [N], action tokens of each turn (≥ 0).
        turn_episode_ids: int [N], the episode of each turn, in [0, E]; E marks a padding turn.
        returns_PG: float [E], the total return of each episode.
        group_ids_PG: int [E], the group of each episode, in [0, num_groups]; ``num_groups`` marks a
            padding episode, which drops out together with its turns.
        num_groups: number of groups P.
        good_threshold: the return at or above which a constant group counts as all good.

    Returns:
        :class:`TrajectoryMetrics`; ``.as_dict()`` gives the ``env/all/...`` log names.

    Raises:
        TypeError: ids or token counts that are not integers, returns that are not real.
        ValueError: wrong ranks, mismatched lengths, ids out of range, negative token counts.

    References:
        tinker-cookbook ``rl/metric_util.py`` (``compute_trajectory_metrics``, by-group metrics).

    Examples:
        >>> m = trajectory_metrics(
        ...     ob_tokens=[10, 20, 30], ac_tokens=[4, 6, 8], turn_episode_ids=[0, 0, 1],
        ...     returns_PG=[1.0, 0.0, 1.0, 1.0], group_ids_PG=[0, 0, 1, 1], num_groups=2)
        >>> m.ac_tokens_per_turn, m.turns_per_episode, m.frac_mixed, m.frac_all_good
        (6.0, 0.75, 0.5, 0.5)
        >>> m.as_dict()["env/all/by_group/frac_mixed"]
        0.5
    """
    ob = as_int_array(ob_tokens, "ob_tokens")
    ac = as_int_array(ac_tokens, "ac_tokens")
    turn_ep = as_int_array(turn_episode_ids, "turn_episode_ids")
    returns = as_float_array(returns_PG, "returns_PG")
    groups = as_int_array(group_ids_PG, "group_ids_PG")
    check_same_length(ob_tokens=ob, ac_tokens=ac, turn_episode_ids=turn_ep)
    num_episodes = check_same_length(returns_PG=returns, group_ids_PG=groups)
    num_groups = check_num_groups(num_groups)
    good_threshold = check_real(good_threshold, "good_threshold")
    check_group_ids(groups, num_groups, "group_ids_PG")
    check_group_ids(turn_ep, num_episodes, "turn_episode_ids")
    for name, counts in (("ob_tokens", ob), ("ac_tokens", ac)):
        if counts.size and counts.min() < 0:
            raise ValueError(f"{name} must be >= 0, got {counts.min()}")

    episode_ok = groups < num_groups
    turn_ok = turn_ep < num_episodes
    turn_ok[turn_ok] = episode_ok[turn_ep[turn_ok]]
    turns = int(np.count_nonzero(turn_ok))
    episodes = int(np.count_nonzero(episode_ok))
    total_ac = _exact_total(ac[turn_ok])
    total_ob = _exact_total(ob[turn_ok])
    reward_mean = float(returns[episode_ok].sum(dtype=np.float64)) / max(episodes, 1)

    g, r = groups[episode_ok], returns[episode_ok].astype(np.float64)
    size = np.bincount(g, minlength=num_groups)
    low = np.full(num_groups, np.inf)
    high = np.full(num_groups, -np.inf)
    with np.errstate(invalid="ignore"):  # a NaN return propagates, leaving its group mixed
        np.minimum.at(low, g, r)
        np.maximum.at(high, g, r)
    present = size > 0
    constant = present & (low == high)
    nonempty = int(np.count_nonzero(present))
    mixed = nonempty - int(np.count_nonzero(constant))
    good = int(np.count_nonzero(constant & (low >= good_threshold)))
    bad = int(np.count_nonzero(constant)) - good
    per_group = max(nonempty, 1)
    return TrajectoryMetrics(
        ac_tokens_per_turn=total_ac / max(turns, 1),
        ob_tokens_per_turn=total_ob / max(turns, 1),
        turns_per_episode=turns / max(episodes, 1),
        total_episodes=episodes,
        total_turns=turns,
        total_ac_tokens=total_ac,
        total_ob_tokens=total_ob,
        reward_total=reward_mean,
        frac_mixed=mixed / per_group,
        frac_all_good=good / per_group,
        frac_all_bad=bad / per_group,
    )


class StepMetrics(NamedTuple):
    """Per-step debate metrics averaged over the steps of a batch (Python numbers, ready to log).

    Attributes:
        parse_error: share of steps whose response failed to parse.
        consensus_reached: share of steps at which the agent declared consensus.
        round: mean round index of the steps.
        num_steps: number of steps averaged (0 gives 0.0 everywhere).
    """

    parse_error: float
    consensus_reached: float
    round: float
    num_steps: int

    def as_dict(self, prefix: str = "env/all/") -> dict[str, float]:
        """The means under the reference's log names (``env/all/parse_error`` ...)."""
        return {
            f"{prefix}parse_error": self.parse_error,
            f"{prefix}consensus_reached": self.consensus_reached,
            f"{prefix}round": self.round,
        }


def step_metrics(
    parse_error: npt.ArrayLike,
    consensus_reached: npt.ArrayLike,
    round_index: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
) -> StepMetrics:
    """Means of the per-step debate metrics over all steps (turns) of a batch.

        m = Σ_s w_s·x_s / max(Σ_s w_s, 1),   w_s = where_s ∈ {0, 1}.

    Each step weighs the same, whatever its episode, as when the reference averages the metric dicts
    of every transition.

    Args:
        parse_error: bool or real [N], 1 where the step's response failed to parse.
        consensus_reached: bool or real [N], 1 where the step's response declared consensus.
        round_index: int or real [N], the debate round of each step.
        where: bool [N], steps to include (default all).

    Returns:
        :class:`StepMetrics`.

    Raises:
        TypeError: non-real values or a non-boolean ``where``.
        ValueError: arrays of rank ≠ 1 or of different lengths.

    References:
        tinker-cookbook ``rl/metric_util.py`` (per-transition metrics averaged with ``dict_mean``).

    Examples:
        >>> m = step_metrics([False, True, False, False], [0, 0, 1, 1], [0, 0, 1, 1])
        >>> m.parse_error, m.consensus_reached, m.round, m.num_steps
        (0.25, 0.5, 0.5, 4)
    """
    values = {
        "parse_error": as_float_array(parse_error, "parse_error"),
        "consensus_reached": as_float_array(consensus_reached, "consensus_reached"),
        "round_index": as_float_array(round_index, "round_index"),
    }
    n = check_same_length(**values)
    if where is None:
        keep = np.ones(n, dtype=bool)
    else:
        keep = as_mask(where, "where", shape=(n,))
    count = int(np.count_nonzero(keep))

    def mean(x: npt.NDArray[np.floating[Any]]) -> float:
        return float(np.sum(x, where=keep, dtype=np.float64)) / max(count, 1)

    return StepMetrics(
        parse_error=mean(values["parse_error"]),
        consensus_reached=mean(values["consensus_reached"]),
        round=mean(values["round_index"]),
        num_steps=count,
    )
