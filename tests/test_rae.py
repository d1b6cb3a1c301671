"""RAE baselines: hand-computed examples, validation, and properties of both update orders."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kernel import (
    InconsistentRewardKeysError,
    RAEGame,
    RAEState,
    rae_advantages,
    rae_batch,
)
from kernel.testing import GroupedRewards, grouped_rewards

# --- the array core: hand-computed values --------------------------------------------------------


def test_legos_order_hand_values() -> None:
    # keys: 0 has rows 2.0 and 4.0 (mean 3), 1 has one row 1.0, 2 has none.
    res = rae_advantages([2.0, 1.0, 4.0], [0, 1, 0], [1.0, -1.0, 7.0], decay=0.75)
    np.testing.assert_array_equal(res.advantages, [1.0, 2.0, 3.0])  # r − b_old
    np.testing.assert_array_equal(res.baselines, [1.0, -1.0, 1.0])
    # 0.75·1 + 0.25·3 = 1.5;  0.75·(−1) + 0.25·1 = −0.5;  key 2 untouched
    np.testing.assert_array_equal(res.baselines_K, [1.5, -0.5, 7.0])
    np.testing.assert_array_equal(res.counts_K, [2, 1, 0])


def test_spiral_order_hand_values() -> None:
    # one key, decay 0.5: b 0 → 0.5·0 + 0.5·2 = 1 → 0.5·1 + 0.5·4 = 2.5 → 0.5·2.5 + 0.5·(−1) = 0.75
    res = rae_advantages([2.0, 4.0, -1.0], [0, 0, 0], [0.0], decay=0.5, order="spiral")
    np.testing.assert_array_equal(res.baselines, [0.0, 1.0, 2.5])
    np.testing.assert_array_equal(res.advantages, [2.0, 3.0, -3.5])
    np.testing.assert_array_equal(res.baselines_K, [0.75])


def test_reward_scaling_applies_before_everything() -> None:
    res = rae_advantages([1.0, -1.0], [0, 1], [0.0, 0.0], decay=0.5, order="spiral", reward_scaling=2.0)
    np.testing.assert_array_equal(res.advantages, [2.0, -2.0])
    np.testing.assert_array_equal(res.baselines_K, [1.0, -1.0])


def test_masked_and_padding_rows_get_zero_and_do_not_update() -> None:
    for order in ("legos", "spiral"):
        res = rae_advantages(
            [5.0, np.nan, 9.0, 1.0],
            [0, 0, 1, 2],
            [1.0, 2.0],
            decay=0.5,
            order=order,
            where=[True, False, True, True],
        )
        np.testing.assert_array_equal(res.advantages, [4.0, 0.0, 7.0, 0.0])
        np.testing.assert_array_equal(res.baselines, [1.0, 0.0, 2.0, 0.0])
        np.testing.assert_array_equal(res.baselines_K, [3.0, 5.5])
        np.testing.assert_array_equal(res.counts_K, [1, 1])


def test_empty_batch_and_no_keys() -> None:
    res = rae_advantages([], [], [0.25], decay=0.9)
    assert res.advantages.shape == (0,)
    np.testing.assert_array_equal(res.baselines_K, [0.25])
    res = rae_advantages([3.0], [0], np.zeros(0), decay=0.9)  # only a padding row
    np.testing.assert_array_equal(res.advantages, [0.0])
    assert res.baselines_K.shape == (0,)


def test_dtypes_follow_inputs_and_inputs_are_not_modified() -> None:
    state = np.array([0.5, 0.5], dtype=np.float32)
    res = rae_advantages(np.array([1.0, 2.0], dtype=np.float32), [0, 1], state, decay=0.5)
    assert res.advantages.dtype == res.baselines_K.dtype == np.float32
    np.testing.assert_array_equal(state, [0.5, 0.5])
    res = rae_advantages(np.array([1.0], dtype=np.float32), [0], np.zeros(1), decay=0.5)
    assert res.baselines_K.dtype == np.float64  # never downcast below the float64 state
    assert rae_advantages([1, 2], [0, 0], [0.0], decay=0.5).advantages.dtype == np.float64  # ints ok


@pytest.mark.parametrize("decay", [0.0, 1.0, 0.5])
def test_legos_accepts_closed_interval(decay: float) -> None:
    rae_advantages([1.0], [0], [0.0], decay=decay, order="legos")


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_spiral_requires_open_interval(decay: float) -> None:
    with pytest.raises(ValueError, match="0 < decay < 1 for order='spiral'"):
        rae_advantages([1.0], [0], [0.0], decay=decay, order="spiral")
    with pytest.raises(ValueError, match="decay"):
        rae_batch([], RAEState.empty(), decay=decay, order="spiral")


@pytest.mark.parametrize("decay", [-1e-9, 1.0000001, math.nan, math.inf])
def test_legos_rejects_out_of_range(decay: float) -> None:
    with pytest.raises(ValueError, match="0 <= decay <= 1 for order='legos'"):
        rae_advantages([1.0], [0], [0.0], decay=decay)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"decay": True}, TypeError, "decay must be a real number"),
        ({"decay": "0.5"}, TypeError, "decay must be a real number"),
        ({"decay": 0.5, "order": "gae"}, ValueError, "order must be one of"),
        ({"decay": 0.5, "reward_scaling": math.inf}, ValueError, "reward_scaling must be finite"),
        ({"decay": 0.5, "key_ids_PG": [0, 3]}, ValueError, r"key_ids_PG must lie in \[0, num_groups\]"),
        ({"decay": 0.5, "key_ids_PG": [0.0, 1.0]}, TypeError, "key_ids_PG must be an integer array"),
        ({"decay": 0.5, "key_ids_PG": [0]}, ValueError, "same length"),
        ({"decay": 0.5, "rewards_PG": [[1.0, 2.0]]}, ValueError, "rewards_PG must have rank 1"),
        ({"decay": 0.5, "rewards_PG": ["a", "b"]}, TypeError, "rewards_PG must be a real float array"),
        ({"decay": 0.5, "where": [1, 0]}, TypeError, "where must be a boolean array"),
        ({"decay": 0.5, "where": [True]}, ValueError, "same length"),
        ({"decay": 0.5, "rewards_PG": [1.0, np.inf]}, ValueError, "finite on live rows"),
    ],
)
def test_programmer_errors_name_the_argument(kwargs: dict[str, Any], error: type, match: str) -> None:
    args = {"rewards_PG": [1.0, 2.0], "key_ids_PG": [0, 1], "baselines_K": [0.0, 0.0]}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        rae_advantages(**args)


# --- the keyed layer -------------------------------------------------------------------------------


def test_rae_batch_legos_hand_values_and_missing_step_actors() -> None:
    games = [
        RAEGame("kuhn", {"0": 1.0, "1": -1.0}, ["0", "env", "1", "0"]),
        RAEGame("kuhn", {"0": 0.0, "1": 0.0}, ["judge"]),
        RAEGame("debate", {"a": 0.5}, ["a", "b"]),
    ]
    start = RAEState.from_dict({("kuhn", "0"): 0.5})
    out = rae_batch(games, start, decay=0.5)
    assert [a.tolist() for a in out.step_advantages] == [[0.5, 0.0, -1.0, 0.5], [0.0], [0.5, 0.0]]
    assert out.advantages == ({"0": 0.5, "1": -1.0}, {"0": -0.5, "1": 0.0}, {"a": 0.5})
    assert out.baselines == ({"0": 0.5, "1": 0.0}, {"0": 0.5, "1": 0.0}, {"a": 0.0})
    # kuhn/0: 0.5·0.5 + 0.5·mean(1, 0) = 0.5; kuhn/1: 0.5·mean(−1, 0) = −0.25; debate/a: 0.25
    assert out.state.as_dict() == {("kuhn", "0"): 0.5, ("kuhn", "1"): -0.25, ("debate", "a"): 0.25}
    assert start.as_dict() == {("kuhn", "0"): 0.5}  # the input state is untouched


def test_rae_batch_spiral_keys_by_player_across_episode_types() -> None:
    games = [RAEGame("kuhn", {"0": 1.0}, ["0"]), RAEGame("tictactoe", {"0": 3.0}, ["0"])]
    out = rae_batch(games, RAEState.empty(), decay=0.5, order="spiral")
    assert out.baselines == ({"0": 0.0}, {"0": 0.5})
    assert out.advantages == ({"0": 1.0}, {"0": 2.5})
    assert out.state.as_dict() == {(None, "0"): 1.75}
    typed = rae_batch(games, RAEState.empty(), decay=0.5, order="spiral", key_by="episode_type_actor")
    assert typed.advantages == ({"0": 1.0}, {"0": 3.0})
    merged = rae_batch(games, RAEState.empty(), decay=0.5, order="legos", key_by="actor")
    assert merged.advantages == ({"0": 1.0}, {"0": 3.0})
    assert merged.state.as_dict() == {(None, "0"): 1.0}  # 0.5·mean(1, 3)


def test_rae_batch_empty_batch_keeps_state() -> None:
    state = RAEState.from_dict({("x", "0"): 0.3})
    for order in ("legos", "spiral"):
        out = rae_batch([], state, decay=0.5, order=order)  # type: ignore[arg-type]
        assert out.step_advantages == () and out.state.as_dict() == state.as_dict()


def test_inconsistent_keys_strict_validates_before_computing() -> None:
    games = [
        RAEGame("a", {"0": 1.0}, ["0"]),
        RAEGame("b", {"0": 1.0, "1": 0.0}, ["0"]),
        RAEGame("b", {"0": 1.0}, ["0"]),
    ]
    state = RAEState.empty()
    with pytest.raises(InconsistentRewardKeysError, match="episode type 'b'") as info:
        rae_batch(games, state, decay=0.5)
    assert isinstance(info.value, ValueError)
    assert info.value.episode_type == "b" and info.value.game_index == 2
    assert info.value.state is state
    with pytest.raises(InconsistentRewardKeysError, match="episode type 'b'") as info:
        rae_batch(games, state, decay=0.5, policy="reference")
    # legos processes "a" first, so its baseline is already updated when "b" fails.
    assert info.value.state.as_dict() == {("a", "0"): 0.5}
    # SPIRAL does not need consistent keys.
    assert rae_batch(games, state, decay=0.5, order="spiral").state.as_dict() == {
        (None, "0"): 0.875,
        (None, "1"): 0.0,
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"key_by": "role"}, "key_by must be one of"), ({"policy": "lenient"}, "policy must be one of")],
)
def test_rae_batch_option_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        rae_batch([], RAEState.empty(), decay=0.5, **kwargs)


def test_rae_batch_bad_game_types() -> None:
    with pytest.raises(TypeError, match="episode_type must be a str"):
        rae_batch([RAEGame(3, {}, [])], RAEState.empty(), decay=0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"games\[0\].rewards\['0'\] must be a real number"):
        rae_batch([RAEGame("x", {"0": "high"}, [])], RAEState.empty(), decay=0.5)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="finite"):
        rae_batch([RAEGame("x", {"0": math.nan}, [])], RAEState.empty(), decay=0.5)


def test_state_is_immutable_and_ids_stable() -> None:
    s = RAEState.from_dict({("t", "0"): 1.0})
    with pytest.raises(ValueError, match="read-only"):
        s.baselines_K[0] = 2.0
    grown = s.with_keys([("t", "1"), ("t", "0"), ("t", "1")])
    assert grown.keys == (("t", "0"), ("t", "1"))
    assert grown.with_keys([("t", "0")]) is grown
    np.testing.assert_array_equal(grown.key_ids([("t", "1"), ("u", "0")]), [1, 2])
    assert grown.value(("u", "0")) == 0.0
    with pytest.raises(ValueError, match="duplicate"):
        RAEState.from_dict({("t", 0): 1.0, ("t", "0"): 2.0})  # type: ignore[dict-item]


# --- properties ---------------------------------------------------------------------------------------

ORDERS = st.sampled_from(["legos", "spiral"])
# Dyadic rewards (k/8, |k| ≤ 64) keep every batch sum exact, so order-free identities hold bit for bit.
DYADIC = ("levels", "binary")


def _state(case: GroupedRewards, data: st.DataObject) -> Any:
    values = st.integers(-16, 16).map(lambda k: k / 8)
    return np.asarray(data.draw(st.lists(values, min_size=case.num_groups, max_size=case.num_groups)))


@given(grouped_rewards(padding=True, nan=True), st.data())
def test_decay_one_freezes_legos_baselines(case: GroupedRewards, data: st.DataObject) -> None:
    state = _state(case, data)
    res = rae_advantages(case.rewards, case.group_ids, state, decay=1.0, where=case.where)
    np.testing.assert_array_equal(res.baselines_K, state)
    live = (
        case.group_ids < case.num_groups
        if case.where is None
        else (case.group_ids < case.num_groups) & case.where
    )
    expected = np.where(live, case.rewards - np.append(state, 0.0)[case.group_ids], 0.0)
    np.testing.assert_array_equal(res.advantages, expected)


@given(grouped_rewards(padding=True), st.data())
def test_decay_zero_makes_legos_baseline_the_last_batch_mean(
    case: GroupedRewards, data: st.DataObject
) -> None:
    state = _state(case, data)
    res = rae_advantages(case.rewards, case.group_ids, state, decay=0.0, where=case.where)
    live = (
        case.group_ids < case.num_groups
        if case.where is None
        else (case.group_ids < case.num_groups) & case.where
    )
    for k in range(case.num_groups):
        xs = case.rewards[live & (case.group_ids == k)].tolist()
        expected = sum(xs) / len(xs) if xs else state[k]
        assert res.baselines_K[k] == expected


@given(grouped_rewards(kinds=DYADIC, magnitudes=(1.0,), padding=True), st.data(), st.randoms())
def test_legos_is_invariant_to_row_order(case: GroupedRewards, data: st.DataObject, rnd: Any) -> None:
    state = _state(case, data)
    decay = data.draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    perm = np.arange(case.rewards.size)
    rnd.shuffle(perm)
    where = None if case.where is None else case.where[perm]
    a = rae_advantages(case.rewards, case.group_ids, state, decay=decay, where=case.where)
    b = rae_advantages(case.rewards[perm], case.group_ids[perm], state, decay=decay, where=where)
    np.testing.assert_array_equal(b.advantages, a.advantages[perm])
    np.testing.assert_array_equal(b.baselines_K, a.baselines_K)


def _spiral_loop(rewards: list[float], keys: list[int], state: list[float], decay: float) -> tuple[Any, Any]:
    """SPIRAL as written: one EMA per key, read then update, game by game."""
    b = list(state)
    adv = []
    for r, k in zip(rewards, keys, strict=True):
        old = b[k]
        b[k] = decay * b[k] + (1 - decay) * r
        adv.append(r - old)
    return adv, b


@given(grouped_rewards(), st.data(), st.floats(0.01, 0.99))
def test_spiral_matches_the_sequential_loop_and_per_game_calls(
    case: GroupedRewards, data: st.DataObject, decay: float
) -> None:
    state = _state(case, data)
    res = rae_advantages(case.rewards, case.group_ids, state, decay=decay, order="spiral")
    adv, final = _spiral_loop(case.rewards.tolist(), case.group_ids.tolist(), state.tolist(), decay)
    np.testing.assert_array_equal(res.advantages, adv)
    np.testing.assert_array_equal(res.baselines_K, final)
    # the same, one row (game) per call, threading the state
    s = state
    for i in range(case.rewards.size):
        step = rae_advantages(
            case.rewards[i : i + 1], case.group_ids[i : i + 1], s, decay=decay, order="spiral"
        )
        assert step.advantages[0] == res.advantages[i]
        s = step.baselines_K
    np.testing.assert_array_equal(s, res.baselines_K)


def _legos_loop(rewards: list[float], keys: list[int], state: list[float], decay: float) -> tuple[Any, Any]:
    """legos as written: read every baseline, then one update per key with sum/len of its rewards."""
    adv = [r - state[k] for r, k in zip(rewards, keys, strict=True)]
    b = list(state)
    for k in set(keys):
        xs = [r for r, kk in zip(rewards, keys, strict=True) if kk == k]
        b[k] = decay * b[k] + (1 - decay) * (sum(xs) / len(xs))
    return adv, b


@given(grouped_rewards(), st.data(), st.floats(0.0, 1.0))
def test_legos_matches_the_obvious_loop_bit_for_bit(
    case: GroupedRewards, data: st.DataObject, decay: float
) -> None:
    state = _state(case, data)
    res = rae_advantages(case.rewards, case.group_ids, state, decay=decay)
    adv, final = _legos_loop(case.rewards.tolist(), case.group_ids.tolist(), state.tolist(), decay)
    np.testing.assert_array_equal(res.advantages, adv)
    np.testing.assert_array_equal(res.baselines_K, final)


@given(grouped_rewards(padding=True), st.data(), ORDERS)
def test_key_relabelling_permutes_the_state(case: GroupedRewards, data: st.DataObject, order: Any) -> None:
    state = _state(case, data)
    sigma = np.asarray(data.draw(st.permutations(range(case.num_groups))), dtype=np.int64)
    ids = np.where(
        case.group_ids < case.num_groups, np.append(sigma, case.num_groups)[case.group_ids], case.group_ids
    )
    new_state = np.empty_like(state)
    new_state[sigma] = state
    a = rae_advantages(case.rewards, case.group_ids, state, decay=0.5, order=order, where=case.where)
    b = rae_advantages(case.rewards, ids, new_state, decay=0.5, order=order, where=case.where)
    np.testing.assert_array_equal(b.advantages, a.advantages)
    np.testing.assert_array_equal(b.baselines_K[sigma], a.baselines_K)


@given(grouped_rewards(padding=True, nan=True, masks=True), st.data(), ORDERS)
def test_masked_rows_never_matter(case: GroupedRewards, data: st.DataObject, order: Any) -> None:
    assert case.where is not None
    state = _state(case, data)
    dead = ~case.where | (case.group_ids == case.num_groups)
    other = np.where(dead, 12345.0, case.rewards)
    a = rae_advantages(case.rewards, case.group_ids, state, decay=0.5, order=order, where=case.where)
    b = rae_advantages(other, case.group_ids, state, decay=0.5, order=order, where=case.where)
    np.testing.assert_array_equal(a.advantages, b.advantages)
    np.testing.assert_array_equal(a.baselines_K, b.baselines_K)
    assert (a.advantages[dead] == 0).all()


@given(grouped_rewards(kinds=DYADIC, magnitudes=(1.0,)), st.data(), ORDERS, st.sampled_from([0.5, 2.0, -1.0]))
def test_reward_scaling_equals_prescaled_rewards(
    case: GroupedRewards, data: st.DataObject, order: Any, k: float
) -> None:
    state = _state(case, data)
    a = rae_advantages(case.rewards, case.group_ids, state, decay=0.5, order=order, reward_scaling=k)
    b = rae_advantages(case.rewards * k, case.group_ids, state, decay=0.5, order=order)
    np.testing.assert_array_equal(a.advantages, b.advantages)
    np.testing.assert_array_equal(a.baselines_K, b.baselines_K)


@st.composite
def _games(draw: st.DrawFn, consistent: bool = True) -> list[RAEGame]:
    types = draw(st.lists(st.sampled_from(["kuhn", "debate", "chess"]), min_size=0, max_size=6))
    actors_of = {t: draw(st.sets(st.sampled_from(["0", "1", "2"]), min_size=1)) for t in set(types)}
    games = []
    for t in types:
        actors = actors_of[t] if consistent else draw(st.sets(st.sampled_from(["0", "1"]), min_size=1))
        rewards = {a: draw(st.integers(-8, 8)) / 4 for a in sorted(actors)}
        steps = draw(st.lists(st.sampled_from(["0", "1", "2", "env"]), max_size=4))
        games.append(RAEGame(t, rewards, steps))
    return games


@given(_games(), _games())
def test_policies_agree_when_keys_are_consistent(first: list[RAEGame], second: list[RAEGame]) -> None:
    s_strict = s_ref = RAEState.empty()
    for games in (first, second):
        a = rae_batch(games, s_strict, decay=0.9)
        b = rae_batch(games, s_ref, decay=0.9, policy="reference")
        assert [x.tolist() for x in a.step_advantages] == [x.tolist() for x in b.step_advantages]
        assert a.state.as_dict() == b.state.as_dict()
        for game, steps, adv in zip(games, a.step_advantages, a.advantages, strict=True):
            assert steps.tolist() == [adv.get(actor, 0.0) for actor in game.step_actors]
        s_strict, s_ref = a.state, b.state


@given(_games(consistent=False))
def test_reference_error_state_holds_earlier_types_only(games: list[RAEGame]) -> None:
    try:
        rae_batch(games, RAEState.empty(), decay=0.5)
    except InconsistentRewardKeysError as strict_error:
        with pytest.raises(
            InconsistentRewardKeysError, match=r"episode type .* must share reward keys"
        ) as info:
            rae_batch(games, RAEState.empty(), decay=0.5, policy="reference")
        order = list(dict.fromkeys(g.episode_type for g in games))
        earlier = set(order[: order.index(strict_error.episode_type)])
        assert {t for t, _ in info.value.state.keys} == earlier
        good = [g for g in games if g.episode_type in earlier]
        assert info.value.state.as_dict() == rae_batch(good, RAEState.empty(), decay=0.5).state.as_dict()
    else:
        assume(False)


def test_a_state_whose_keys_and_baselines_disagree_is_refused() -> None:
    """A state built by hand with one baseline too few read 0 for the missing key (and one too many read
    the stray value); a NaN baseline gave NaN advantages. Each is an error naming the state now."""
    from kernel import RAEGame, RAEState, rae_advantages, rae_batch

    games = [RAEGame("kuhn", {"0": 1.0, "1": -1.0}, ["0", "1"])]
    two_keys = (("kuhn", "0"), ("kuhn", "1"))
    with pytest.raises(ValueError, match=r"state\.baselines_K must hold one baseline per key \(2\)"):
        rae_batch(games, RAEState(two_keys, np.array([0.0])), decay=0.9)
    with pytest.raises(ValueError, match=r"one baseline per key \(1\)"):
        rae_batch(games, RAEState(two_keys[:1], np.array([0.0, 5.0])), decay=0.9)
    with pytest.raises(ValueError, match=r"state\.baselines_K must be finite"):
        rae_batch(games, RAEState(two_keys, np.array([0.0, np.nan])), decay=0.9)
    with pytest.raises(ValueError, match=r"state\.keys must not repeat"):
        rae_batch(games, RAEState(two_keys[:1] * 2, np.zeros(2)), decay=0.9)
    with pytest.raises(TypeError, match=r"state must be an RAEState"):
        rae_batch(games, None, decay=0.9)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"games\[0\]\.rewards must be a mapping"):
        rae_batch([RAEGame("k", [1.0], ["0"])], RAEState.empty(), decay=0.9)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"games\[0\]\.step_actors must be a sequence"):
        rae_batch([RAEGame("k", {"0": 1.0}, 5)], RAEState.empty(), decay=0.9)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"baselines_K must be finite"):
        rae_advantages([1.0], [0], [np.nan], decay=0.5)
    # a consistent state built by hand still works
    out = rae_batch(games, RAEState(two_keys, np.array([0.5, 0.0])), decay=0.5)
    assert out.advantages[0] == {"0": 0.5, "1": -1.0}


def test_a_nan_reward_in_a_game_is_named_by_its_game_and_actor() -> None:
    from kernel import RAEGame, RAEState, rae_batch

    with pytest.raises(ValueError, match=r"games\[1\]\.rewards\['0'\] must be finite, got nan"):
        rae_batch(
            [RAEGame("k", {"0": 1.0}, ["0"]), RAEGame("k", {"0": math.nan}, ["0"])],
            RAEState.empty(),
            decay=0.9,
        )
