"""kernel.testing's reward suite: our pairwise_rewards passes; one broken implementation per invariant is
caught by that invariant; the reference's own quirk (a reward without leave-one-out) is found."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import kernel
from kernel import OP_EQ, OP_GT, VoteArrays
from kernel.testing import (
    REWARD_CHECKS,
    RewardInvariants,
    check_reward_leave_one_out,
    reference_pairwise_rewards,
    run_reward_suite,
)

FIND = {"max_examples": 150, "hypothesis_settings": {"derandomize": True, "database": None}}


def loop_rewards(votes: VoteArrays, num_agents_P: Any, *, bug: str = "") -> Any:
    """A per-debate loop like the reference, with one deliberate bug (``bug``) switched on."""
    out: list[float] = []
    rows = list(zip(*(np.asarray(x).tolist() for x in votes[:5]), strict=True))
    for p, n in enumerate(np.asarray(num_agents_P).tolist()):
        mine = [(u, a, op, b) for g, u, a, op, b in rows if g == p]
        valid = [
            v for v in mine if 0 <= v[1] < n and 0 <= v[3] < n and v[1] != v[3] and v[2] in (OP_GT, OP_EQ)
        ]
        if bug == "first_votes_only":  # a cap of 3 counted votes per debate: which ones depends on order
            valid = valid[:3]
        for i in range(n):
            score, total = 0.0, 0
            for u, a, op, b in valid:
                if (u == i and bug != "no_leave_one_out") or i not in (a, b):
                    continue
                weight = 2 if bug == "agent0_weighs_double" and a == 0 and op == OP_GT else 1
                total += weight
                if op == OP_EQ:
                    if bug == "tie_to_first":
                        score += 1.0 if a == i else 0.0
                    elif bug == "ties_not_counted":
                        total -= 1
                        score += 0.5
                    else:
                        score += 0.5
                elif a == i:
                    score += weight
            value = score / total if total else 0.0
            if bug == "unvoted_half":
                value = score / total if total else 0.5
            out.append(value)
    return np.asarray(out, dtype=np.float64)


BROKEN = {
    "leave_one_out": "no_leave_one_out",
    "relabel_equivariance": "agent0_weighs_double",
    "tie_symmetry": "tie_to_first",
    "bounds": "ties_not_counted",
    "vote_order_invariance": "first_votes_only",
    "matches_reference": "unvoted_half",
}


def test_the_loop_without_bugs_is_the_reference() -> None:
    outcome = run_reward_suite(loop_rewards, max_examples=50)
    assert set(outcome.values()) == {"passed"}, outcome


@pytest.mark.parametrize("check", REWARD_CHECKS)
def test_each_broken_implementation_is_caught_by_its_invariant(check: str) -> None:
    broken = functools.partial(loop_rewards, bug=BROKEN[check])
    outcome = run_reward_suite(broken, checks=[check], raise_on_failure=False, **FIND)
    assert outcome[check].startswith(f"failed: check_reward_{check}"), outcome


@pytest.mark.parametrize("mode", ["win_rate", "win_minus_loss"])
@pytest.mark.parametrize("unvoted", [0.0, 0.5])
def test_our_pairwise_rewards_pass(mode: str, unvoted: float) -> None:
    fn = functools.partial(kernel.pairwise_rewards, mode=mode, unvoted=unvoted)
    outcome = run_reward_suite(fn, mode=mode, unvoted=unvoted)  # type: ignore[arg-type]
    assert set(outcome.values()) == {"passed"}, outcome


def test_reward_without_leave_one_out_is_found_on_a_hand_made_debate() -> None:
    # agent 0 votes 0 > 1: without leave-one-out its own vote makes it win
    v = kernel.vote_arrays(group_ids=[0, 0], authors=[0, 2], a=[0, 1], ops=[">", ">"], b=[1, 0])
    assert loop_rewards(v, [3], bug="no_leave_one_out")[0] == 0.5
    assert reference_pairwise_rewards(v, [3])[0] == 0.0
    with pytest.raises(AssertionError, match="authored by agent 0 changed the reward of agent 0"):
        check_reward_leave_one_out(functools.partial(loop_rewards, bug="no_leave_one_out"), v, [3])


def test_reference_loop_hand_values() -> None:
    v = kernel.vote_arrays(
        group_ids=[0, 0, 0, 1, 2],
        authors=[2, 0, 1, 0, 0],
        a=[0, 1, 0, 0, 5],
        ops=[">", "=", ">", ">", ">"],
        b=[1, 2, 2, 1, 0],
    )
    # debate 0: agent 0 wins twice (votes by 2 and 1); agent 1 loses once, ties once (author 0) -> 0.25;
    # agent 2 ties once (author 0), loses once (author 1; counted) -> 0.25. debate 1: two agents, every
    # vote involves its author -> 0. debate 2: the vote names agent 5 of 1 -> malformed, 0.
    np.testing.assert_array_equal(reference_pairwise_rewards(v, [3, 2, 1]), [1.0, 0.25, 0.25, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(
        reference_pairwise_rewards(v, [3, 2, 1], mode="win_minus_loss", unvoted=9.0),
        [1.0, -0.5, -0.5, 9.0, -1.0, 9.0],
    )
    with pytest.raises(ValueError, match="mode"):
        reference_pairwise_rewards(v, [3, 2, 1], mode="nope")  # type: ignore[arg-type]


def test_runner_rejects_unknown_checks_and_skips_with_reason() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        run_reward_suite(kernel.pairwise_rewards, checks=["loo"])
    outcome = run_reward_suite(kernel.pairwise_rewards, reference=False, checks=["matches_reference"])
    assert outcome["matches_reference"].startswith("skipped: declared reference=False")


class TestOurRewardsThroughTheBaseClass(RewardInvariants):
    reward_fn = staticmethod(functools.partial(kernel.pairwise_rewards, mode="win_minus_loss"))
    mode = "win_minus_loss"


def test_a_reward_function_returning_nan_fails_with_one_clear_message() -> None:
    """Each invariance compared NaN with NaN and blamed the votes ("got [nan], expected [nan]")."""
    from kernel.testing import run_reward_suite

    def nan_reward(votes: Any, num_agents: Any) -> Any:
        out = kernel.pairwise_rewards(votes, num_agents)
        return out._replace(rewards_PG=np.full_like(out.rewards_PG, np.nan))

    report = run_reward_suite(
        nan_reward, raise_on_failure=False, max_examples=5, hypothesis_settings={"deadline": None}
    )
    assert report and all(
        status.startswith("failed")
        and "rewards are not finite on rows" in status
        and "expected" not in status
        for status in report.values()
    ), report
