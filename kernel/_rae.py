"""Role-conditioned EMA baselines (RAE): one running baseline per (episode type, actor).

Self-play with a shared policy gives each role its own reward level (the first mover may win more
often); a baseline per role removes that offset. Every key k keeps ``b_k``, starting at 0, with

    b_k ← d·b_k + (1 − d)·x,        A = r − b_k (the baseline read *before* the update).

Two update orders, both from the literature, are a keyword (``order=``):

- ``"legos"``: read every baseline, compute the whole batch's advantages, then update each key
  once with the batch mean of its rewards (legos ``RAECredit``; 0 ≤ d ≤ 1).
- ``"spiral"``: row by row in order: read b, update it with this row's reward, A = r − b_old
  (SPIRAL; its EMA asserts 0 < d < 1, so we raise ValueError outside that range).

The state is explicit and immutable: :func:`rae_advantages` is the array core (``baselines_K`` with
dense key ids, state in → advantages and new state out); :func:`rae_batch` is a convenience layer over
games keyed by ``(episode_type, actor)`` strings that keeps the key ↔ id table in :class:`RAEState`.
Neither anchor applies bias correction; neither do we.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import as_bool_array, as_float_array, as_int_array, check_group_ids, check_same_length

__all__ = [
    "RAE_KEYINGS",
    "RAE_ORDERS",
    "RAE_POLICIES",
    "InconsistentRewardKeysError",
    "RAEAdvantages",
    "RAEBatch",
    "RAEGame",
    "RAEKey",
    "RAEState",
    "rae_advantages",
    "rae_batch",
]

RAEOrder = Literal["legos", "spiral"]
RAEKeying = Literal["episode_type_actor", "actor"]
RAEPolicy = Literal["strict", "reference"]

RAE_ORDERS: tuple[str, ...] = ("legos", "spiral")
"""Update orders of :func:`rae_advantages`: batch-mean update (legos) or sequential per row (SPIRAL)."""
RAE_KEYINGS: tuple[str, ...] = ("episode_type_actor", "actor")
"""Keyings of :func:`rae_batch`: legos keys by (episode type, actor); SPIRAL by player only."""
RAE_POLICIES: tuple[str, ...] = ("strict", "reference")
"""Error policies of :func:`rae_batch` (``"reference"`` replays legos' partial update on a bad batch)."""

RAEKey = tuple[str | None, str]
"""A baseline key: ``(episode_type, actor)``; ``episode_type`` is None when keyed by actor only."""

_NATIVE_KEYING: dict[str, RAEKeying] = {"legos": "episode_type_actor", "spiral": "actor"}

FloatArray = npt.NDArray[np.floating[Any]]


def _check_order(order: str) -> None:
    if order not in RAE_ORDERS:
        raise ValueError(f"order must be one of {RAE_ORDERS}, got {order!r}")


def _check_decay(decay: float, order: str) -> float:
    if isinstance(decay, bool) or not isinstance(decay, int | float | np.floating | np.integer):
        raise TypeError(f"decay must be a real number, got {type(decay).__name__}")
    d = float(decay)
    if order == "spiral":
        if not 0.0 < d < 1.0:
            raise ValueError(f"decay must satisfy 0 < decay < 1 for order='spiral', got {d}")
    elif not 0.0 <= d <= 1.0:
        raise ValueError(f"decay must satisfy 0 <= decay <= 1 for order='legos', got {d}")
    return d


def _check_scaling(reward_scaling: float) -> float:
    if isinstance(reward_scaling, bool) or not isinstance(
        reward_scaling, int | float | np.floating | np.integer
    ):
        raise TypeError(f"reward_scaling must be a real number, got {type(reward_scaling).__name__}")
    s = float(reward_scaling)
    if not math.isfinite(s):
        raise ValueError(f"reward_scaling must be finite, got {s}")
    return s


class RAEAdvantages(NamedTuple):
    """Result of :func:`rae_advantages`.

    Attributes:
      advantages: ``[PG]`` float, ``r − b_old`` per row; exactly 0 on masked and padding rows.
      baselines: ``[PG]`` float, the baseline each row was compared against (0 on masked/padding rows).
      baselines_K: ``[K]`` float, the new state.
      counts_K: ``[K]`` int64, how many live rows each key had in this batch.
    """

    advantages: FloatArray
    baselines: FloatArray
    baselines_K: FloatArray
    counts_K: npt.NDArray[np.int64]


def rae_advantages(
    rewards_PG: npt.ArrayLike,
    key_ids_PG: npt.ArrayLike,
    baselines_K: npt.ArrayLike,
    *,
    decay: float,
    order: RAEOrder = "legos",
    where: npt.ArrayLike | None = None,
    reward_scaling: float = 1.0,
) -> RAEAdvantages:
    """Advantages against per-key EMA baselines, and the updated baselines (array core, pure).

    With x = reward_scaling·r:

        legos:  A_i = x_i − b_{k_i};  then for each key k with rows: b_k ← d·b_k + (1 − d)·mean_{k_i=k} x_i
        spiral: for i in row order:  A_i = x_i − b_{k_i};  b_{k_i} ← d·b_{k_i} + (1 − d)·x_i

    Keys without live rows keep their baseline. The mean is a left-to-right sum over rows divided by
    the count, as the legos reference computes it, so results match it bit for bit in float64.

    Args:
      rewards_PG: ``[PG]`` float rewards, one row per (game, actor) sample; float32 or float64.
      key_ids_PG: ``[PG]`` int key id of each row in ``[0, K]``; ``K`` marks padding rows.
      baselines_K: ``[K]`` float, the current baselines (the state; zeros to start).
      decay: d. ``order="legos"`` accepts 0 ≤ d ≤ 1 (1 freezes the baselines, 0 makes each the last
        batch mean); ``order="spiral"`` requires 0 < d < 1 like SPIRAL's EMA.
      order: ``"legos"`` (batch-mean update after all reads) or ``"spiral"`` (sequential per row).
      where: optional ``[PG]`` bool; False rows neither read nor update a baseline and get 0.
      reward_scaling: multiplies every reward first (SPIRAL's ``reward_scaling``; 1.0 is exact).

    Returns:
      :class:`RAEAdvantages`, in the result dtype of ``rewards_PG`` and ``baselines_K`` (computed in
      float64, never downcast below the inputs).

    Raises:
      ValueError: unknown ``order``, ``decay`` out of range, mismatched lengths, ids outside
        ``[0, K]``, non-finite rewards on live rows or non-finite ``reward_scaling``.
      TypeError: non-float rewards/baselines, non-integer ids, non-bool ``where``.

    References:
      Liu et al. 2025, "SPIRAL: Self-Play on Zero-Sum Games Incentivizes Reasoning via Multi-Agent
      Multi-Turn RL" (role-conditioned advantage estimation); legos ``RAECredit`` (batch-mean update).

    Examples:
      >>> res = rae_advantages([1.0, 0.0, 3.0], [0, 1, 0], [0.5, 0.0], decay=0.5)
      >>> res.advantages
      array([0.5, 0. , 2.5])
      >>> res.baselines_K  # key 0: 0.5·0.5 + 0.5·mean(1, 3); key 1: 0.5·0 + 0.5·0
      array([1.25, 0.  ])
      >>> rae_advantages([1.0, 3.0], [0, 0], [0.5], decay=0.5, order="spiral").advantages
      array([0.5 , 2.25])
    """
    _check_order(order)
    d = _check_decay(decay, order)
    scale = _check_scaling(reward_scaling)
    rewards = as_float_array(rewards_PG, "rewards_PG")
    key_ids = as_int_array(key_ids_PG, "key_ids_PG")
    base = as_float_array(baselines_K, "baselines_K")
    n = check_same_length(rewards_PG=rewards, key_ids_PG=key_ids)
    num_keys = int(base.shape[0])
    check_group_ids(key_ids, num_keys, "key_ids_PG")
    live = key_ids < num_keys
    if where is not None:
        mask = as_bool_array(where, "where")
        check_same_length(rewards_PG=rewards, where=mask)
        live &= mask
    out_dtype = np.result_type(rewards.dtype, base.dtype)

    x = rewards.astype(np.float64) * scale
    check_finite_values(x[live], base)
    ids = np.where(live, key_ids, num_keys)  # dead rows read the padding slot
    b64 = base.astype(np.float64)
    counts = np.bincount(ids, minlength=num_keys + 1)[:num_keys].astype(np.int64)

    if order == "legos":
        read = np.append(b64, 0.0)[ids]
        sums = np.bincount(ids, weights=x, minlength=num_keys + 1)[:num_keys]
        means = sums / np.maximum(counts, 1)
        new = np.where(counts > 0, d * b64 + (1 - d) * means, b64)
    else:
        new_list = b64.tolist()
        read_list = [0.0] * n
        x_list = x.tolist()
        for i in np.flatnonzero(live).tolist():
            k = int(ids[i])
            b = new_list[k]
            read_list[i] = b
            new_list[k] = d * b + (1 - d) * x_list[i]
        read = np.asarray(read_list, dtype=np.float64)
        new = np.asarray(new_list, dtype=np.float64)

    advantages = np.where(live, x - read, 0.0)
    read = np.where(live, read, 0.0)
    return RAEAdvantages(
        advantages=advantages.astype(out_dtype, copy=False),
        baselines=read.astype(out_dtype, copy=False),
        baselines_K=new.astype(out_dtype, copy=False),
        counts_K=counts,
    )


# --- keyed convenience layer --------------------------------------------------------------------


class RAEState(NamedTuple):
    """Immutable RAE state: a key table and one baseline per key (dense ids = positions in ``keys``).

    A trainer may keep ``baselines_K`` in its own arrays and pass ids to :func:`rae_advantages`; the key
    table only grows (new keys are appended at 0), so ids stay stable across batches.

    Attributes:
      keys: ``(episode_type, actor)`` per id; ``episode_type`` is None for actor-only keying.
      baselines_K: ``[K]`` float64, read-only.

    Examples:
      >>> s = RAEState.from_dict({("debate", "0"): 0.25})
      >>> s.value(("debate", "0")), s.value(("debate", "1"))
      (0.25, 0.0)
      >>> s.with_keys([("debate", "1")]).as_dict()
      {('debate', '0'): 0.25, ('debate', '1'): 0.0}
    """

    keys: tuple[RAEKey, ...]
    baselines_K: npt.NDArray[np.float64]

    @classmethod
    def empty(cls) -> RAEState:
        """The initial state: no keys (every baseline reads 0 until first updated)."""
        return cls.from_dict({})

    @classmethod
    def from_dict(cls, baselines: Mapping[RAEKey, float]) -> RAEState:
        """Builds a state from ``{key: baseline}`` (ids in the mapping's order)."""
        keys = tuple((None if t is None else str(t), str(a)) for t, a in baselines)
        values = np.array([float(v) for v in baselines.values()], dtype=np.float64)
        if len(set(keys)) != len(keys):
            raise ValueError("baselines has duplicate keys after conversion to str")
        return cls._make_frozen(keys, values)

    @classmethod
    def _make_frozen(cls, keys: tuple[RAEKey, ...], values: npt.ArrayLike) -> RAEState:
        frozen = np.array(values, dtype=np.float64)
        frozen.setflags(write=False)
        return cls(keys, frozen)

    def value(self, key: RAEKey) -> float:
        """The baseline of ``key`` (0.0 for a key never seen)."""
        try:
            return float(self.baselines_K[self.keys.index(key)])
        except ValueError:
            return 0.0

    def as_dict(self) -> dict[RAEKey, float]:
        """``{key: baseline}`` in id order."""
        return {k: float(v) for k, v in zip(self.keys, self.baselines_K.tolist(), strict=True)}

    def with_keys(self, keys: Iterable[RAEKey]) -> RAEState:
        """The same state with any new ``keys`` appended at baseline 0 (first-seen order)."""
        known = dict.fromkeys(self.keys)
        new = [k for k in dict.fromkeys(keys) if k not in known]
        if not new:
            return self
        values = np.concatenate([self.baselines_K, np.zeros(len(new))])
        return RAEState._make_frozen((*self.keys, *new), values)

    def key_ids(self, keys: Iterable[RAEKey]) -> npt.NDArray[np.int64]:
        """Dense ids of ``keys`` (``K`` for a key not in the table, i.e. a padding id)."""
        table = {k: i for i, k in enumerate(self.keys)}
        return np.array([table.get(k, len(self.keys)) for k in keys], dtype=np.int64)


def check_finite_values(live_rewards: npt.NDArray[Any], baselines: npt.NDArray[Any]) -> None:
    """The value checks of :func:`rae_advantages` (the JAX twin runs them on concrete inputs): the scaled
    rewards of live rows, and the baselines, must be finite."""
    if not np.isfinite(live_rewards).all():
        raise ValueError("rewards_PG must be finite on live rows (mask bad rows with where=)")
    if not np.isfinite(baselines).all():
        raise ValueError("baselines_K must be finite (a state carried from an earlier batch always is)")


def _check_state(state: object) -> None:
    """Raises unless ``state`` is an :class:`RAEState` with one finite baseline per key."""
    if not isinstance(state, RAEState):
        raise TypeError(f"state must be an RAEState (RAEState.empty() to start), got {type(state).__name__}")
    if not isinstance(state.keys, tuple):
        raise TypeError(f"state.keys must be a tuple of keys, got {type(state.keys).__name__}")
    base = as_float_array(state.baselines_K, "state.baselines_K")
    if base.ndim != 1 or base.shape[0] != len(state.keys):
        raise ValueError(
            f"state.baselines_K must hold one baseline per key ({len(state.keys)}), got shape {base.shape}"
        )
    if len(set(state.keys)) != len(state.keys):
        raise ValueError("state.keys must not repeat a key")
    if not np.isfinite(base).all():
        raise ValueError("state.baselines_K must be finite")


class RAEGame(NamedTuple):
    """One finished game (rollout): its episode type, per-actor rewards and the actor of each step.

    Examples:
      >>> RAEGame("debate", {"0": 1.0, "1": 0.0}, ["0", "1", "0"]).step_actors
      ['0', '1', '0']
    """

    episode_type: str
    rewards: Mapping[str, float]
    step_actors: Sequence[str]


class RAEBatch(NamedTuple):
    """Result of :func:`rae_batch`.

    Attributes:
      step_advantages: one float64 ``[steps]`` array per game: the step's actor's advantage, or
        exactly 0 when the actor has no reward in that game (an environment or judge step).
      advantages: per game, ``{actor: r − b_old}`` for every rewarded actor.
      baselines: per game, ``{actor: b_old}``, the baseline each actor was compared against.
      state: the new :class:`RAEState`.
    """

    step_advantages: tuple[npt.NDArray[np.float64], ...]
    advantages: tuple[dict[str, float], ...]
    baselines: tuple[dict[str, float], ...]
    state: RAEState


class InconsistentRewardKeysError(ValueError):
    """Games of one episode type disagree on their reward keys (``order="legos"`` needs them equal).

    Attributes:
      episode_type: the offending episode type.
      game_index: index in the batch of the first game whose keys differ from the type's first game.
      state: the state to continue from. Under ``policy="strict"`` it is the input state (the batch
        was validated before anything was computed); under ``policy="reference"`` it holds the updates
        of the episode types processed before the offending one, as the legos reference leaves them.
    """

    def __init__(
        self, episode_type: str, game_index: int, expected: set[str], got: set[str], state: RAEState
    ):
        super().__init__(
            f"games of episode type {episode_type!r} must share reward keys (order='legos'): "
            f"the first game has {sorted(expected)}, game {game_index} of the batch has {sorted(got)}"
        )
        self.episode_type = episode_type
        self.game_index = game_index
        self.state = state


def _first_inconsistent(
    games: Sequence[RAEGame], indices: Sequence[int]
) -> tuple[int, set[str], set[str]] | None:
    first = set(games[indices[0]].rewards)
    for i in indices[1:]:
        got = set(games[i].rewards)
        if got != first:
            return i, first, got
    return None


def rae_batch(
    games: Sequence[RAEGame],
    state: RAEState,
    *,
    decay: float,
    order: RAEOrder = "legos",
    key_by: RAEKeying | None = None,
    reward_scaling: float = 1.0,
    policy: RAEPolicy = "strict",
) -> RAEBatch:
    """RAE advantages of one batch of games, keyed by strings; state in, (advantages, state) out.

    Each rewarded actor of each game is one row of :func:`rae_advantages` (game-major, the game's
    reward order), keyed by ``(episode_type, actor)`` or by ``(None, actor)``. A step gets its actor's
    advantage, or 0 when its actor has no reward in that game. New keys start at 0.

    Args:
      games: the batch, in order (the order matters for ``order="spiral"`` only).
      state: the current :class:`RAEState` (``RAEState.empty()`` to start).
      decay: EMA decay d (see :func:`rae_advantages` for the range of each order).
      order: ``"legos"`` or ``"spiral"``.
      key_by: ``"episode_type_actor"`` or ``"actor"``; None picks the order's anchor (legos keys by
        (episode type, actor); SPIRAL by player only, ignoring the episode type).
      reward_scaling: multiplies every reward first (SPIRAL's ``reward_scaling``).
      policy: what an ``order="legos"`` batch with inconsistent reward keys does. ``"strict"``
        validates every episode type before computing anything; ``"reference"`` processes episode
        types in order of first appearance like legos, so the error carries the partial update (see
        :class:`InconsistentRewardKeysError`; with ``key_by="actor"`` there is no per-type phase and
        it acts as ``"strict"``). Results are identical whenever no error is raised.

    Returns:
      :class:`RAEBatch` with per-step advantages, per-actor advantages and baselines, and the new state.

    Raises:
      InconsistentRewardKeysError: (a ValueError) ``order="legos"`` and two games of one episode type
        have different reward keys.
      ValueError / TypeError: as :func:`rae_advantages`; unknown ``key_by`` or ``policy``.

    References:
      legos ``RAECredit`` (per (episode type, actor), batch mean); SPIRAL (per player, per game).

    Examples:
      >>> games = [RAEGame("kuhn", {"0": 1.0, "1": -1.0}, ["0", "1", "env"]),
      ...          RAEGame("kuhn", {"0": 0.0, "1": 0.0}, ["1"])]
      >>> out = rae_batch(games, RAEState.empty(), decay=0.9)
      >>> [a.tolist() for a in out.step_advantages]
      [[1.0, -1.0, 0.0], [0.0]]
      >>> out.state.as_dict()  # 0.9·0 + 0.1·mean
      {('kuhn', '0'): 0.05, ('kuhn', '1'): -0.05}
      >>> rae_batch(games, RAEState.empty(), decay=0.9, order="spiral").state.as_dict()
      {(None, '0'): 0.09, (None, '1'): -0.09}
    """
    _check_order(order)
    d = _check_decay(decay, order)
    scale = _check_scaling(reward_scaling)
    if key_by is None:
        key_by = _NATIVE_KEYING[order]
    if key_by not in RAE_KEYINGS:
        raise ValueError(f"key_by must be one of {RAE_KEYINGS} or None, got {key_by!r}")
    if policy not in RAE_POLICIES:
        raise ValueError(f"policy must be one of {RAE_POLICIES}, got {policy!r}")
    if isinstance(games, str | bytes) or not isinstance(games, Sequence):
        raise TypeError(f"games must be a sequence of RAEGame, got {type(games).__name__}")
    for g, game in enumerate(games):
        if not isinstance(game, RAEGame):
            raise TypeError(f"games[{g}] must be an RAEGame, got {type(game).__name__}")
        if not isinstance(game.episode_type, str):
            raise TypeError(f"games[{g}].episode_type must be a str, got {type(game.episode_type).__name__}")
        if not isinstance(game.rewards, Mapping):
            raise TypeError(f"games[{g}].rewards must be a mapping actor -> reward, got {game.rewards!r}")
        if isinstance(game.step_actors, str | bytes) or not isinstance(game.step_actors, Sequence):
            raise TypeError(
                f"games[{g}].step_actors must be a sequence of actors, got {type(game.step_actors).__name__}"
            )
    _check_state(state)

    by_type: dict[str, list[int]] = {}
    for g, game in enumerate(games):
        by_type.setdefault(game.episode_type, []).append(g)

    # One row per (game, rewarded actor), game-major; keys per the keying.
    row_game: list[int] = []
    row_actor: list[str] = []
    row_key: list[RAEKey] = []
    row_reward: list[float] = []
    for g, game in enumerate(games):
        for actor, reward in game.rewards.items():
            row_game.append(g)
            row_actor.append(actor)
            row_key.append((game.episode_type if key_by == "episode_type_actor" else None, actor))
            if isinstance(reward, bool) or not isinstance(reward, int | float | np.floating | np.integer):
                raise TypeError(f"games[{g}].rewards[{actor!r}] must be a real number, got {reward!r}")
            if not math.isfinite(reward):
                raise ValueError(f"games[{g}].rewards[{actor!r}] must be finite, got {reward!r}")
            row_reward.append(float(reward))

    if order == "legos":
        # Phases: the episode types to process, each a list of games (legos: first-appearance order).
        failure = None
        for etype, idx in by_type.items():
            bad = _first_inconsistent(games, idx)
            if bad is not None:
                failure = (etype, *bad)
                break
        if failure is not None and policy == "strict":
            raise InconsistentRewardKeysError(*failure, state=state)
        per_type = policy == "reference" and key_by == "episode_type_actor"
        phases = list(by_type) if per_type else [None]
    else:
        failure, phases = None, [None]

    rewards = np.asarray(row_reward, dtype=np.float64)
    adv = np.zeros(len(row_reward))
    read = np.zeros(len(row_reward))
    game_type = [games[g].episode_type for g in row_game]
    for phase in phases:
        if failure is not None and phase in (None, failure[0]):
            raise InconsistentRewardKeysError(*failure, state=state)
        in_phase = [phase is None or t == phase for t in game_type]
        state = state.with_keys(k for k, keep in zip(row_key, in_phase, strict=True) if keep)
        ids = state.key_ids(row_key)
        res = rae_advantages(
            rewards,
            ids,
            state.baselines_K,
            decay=d,
            order=order,
            where=np.asarray(in_phase, dtype=bool),
            reward_scaling=scale,
        )
        adv = np.where(in_phase, res.advantages, adv)
        read = np.where(in_phase, res.baselines, read)
        state = RAEState._make_frozen(state.keys, res.baselines_K)

    per_adv: list[dict[str, float]] = [{} for _ in games]
    per_base: list[dict[str, float]] = [{} for _ in games]
    for i, (g, actor) in enumerate(zip(row_game, row_actor, strict=True)):
        per_adv[g][actor] = float(adv[i])
        per_base[g][actor] = float(read[i])
    steps = tuple(
        np.array([per_adv[g].get(a, 0.0) for a in game.step_actors], dtype=np.float64)
        for g, game in enumerate(games)
    )
    return RAEBatch(steps, tuple(per_adv), tuple(per_base), state)
