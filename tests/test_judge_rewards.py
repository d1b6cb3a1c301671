"""Judge rewards (issue 39 item 2): the kernel's array functions against hand-computed values and a
brute-force loop, numpy ↔ JAX parity, the invariant suite (and that each of its checks catches a broken
implementation), judge rewards through the scoring core, per-token datums and field credit."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from kernel import (
    FIELD_BOTH,
    FIELD_GENERATOR,
    FIELD_JUDGE,
    JUDGE_PRESETS,
    OP_EQ,
    OP_GT,
    Episode,
    JudgeOptions,
    ParsedResponse,
    ScoringOptions,
    Vote,
)
from kernel.testing import judge_debates, reference_judge_step_rewards, run_judge_suite
from tests._profile import examples

DEFAULT = JUDGE_PRESETS["default"]
REFERENCE = JUDGE_PRESETS["reference_v2"]


def _one_debate(n: int, cycles: int, comparisons: dict[int, list[tuple[int, int, int]]], **kw: Any) -> Any:
    """judge_step_rewards of one round-robin debate; ``comparisons``: turn → (a, op, b) rows."""
    turn_V, a_V, op_V, b_V = [], [], [], []
    for t, rows in sorted(comparisons.items()):
        for a, op, b in rows:
            turn_V.append(t)
            a_V.append(a)
            op_V.append(op)
            b_V.append(b)
    turns = n * cycles
    return kernel.judge_step_rewards(
        [0] * turns,
        range(turns),
        [t % n for t in range(turns)],
        turn_V,
        a_V,
        op_V,
        b_V,
        [n],
        [cycles] * n,
        **kw,
    )


# --- hand-computed examples: the reference's quirks and our fixes ------------------------------------


def test_a_lone_voter_is_rewarded_by_the_reference_and_not_scored_by_ours() -> None:
    # 3 agents, 2 parallel cycles; agent 0 alone judges agents 1 and 2 in cycle 1
    votes = {3: [(1, OP_GT, 2)]}
    ours = _one_debate(3, 2, votes)
    ref = _one_debate(3, 2, votes, options=REFERENCE)
    assert ours.scored_V.tolist() == [False] and ours.judge_N[1] == 0.0
    assert ref.scores.tolist() == [1.0] and ref.judge_N[1] == 1.0  # agrees with its own vote


def test_two_opposed_judges_and_a_third_who_agrees() -> None:
    # 4 agents, cycle 1: judges 0 and 1 say 2 > 3, judge 3 says 3 > 2 (it names itself: dropped)
    votes = {4: [(2, OP_GT, 3)], 5: [(2, OP_GT, 3)], 7: [(3, OP_GT, 2)]}
    ours = _one_debate(4, 2, votes)
    # judge 3 names itself (dropped); judges 0 and 1 each agree with the other: +1
    assert ours.scores.tolist() == [1.0, 1.0, 0.0]
    assert ours.vote_V.tolist() == [True, True, False]
    # generator: agent 2's step 0 won both votes, agent 3's lost both
    assert ours.generator_N.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    ref = _one_debate(4, 2, votes, options=REFERENCE)
    # the reference attributes by position: judge 0 (k=0) sees agents 2, 3 at step 0, judge 1 (k=1)
    # the same; judge 3 (k=3) sees agent 2 at step 1 and itself... its self-vote counts
    assert ref.vote_V.tolist() == [True, True, True]


def test_unknown_ids_score_in_the_reference_and_judge_nothing_in_ours() -> None:
    # REFERENCE §12: N = 3, turn 7, "Agent 3 > Agent 0" gives -1; "Agent 3 = Agent 0" gives +1
    votes = {7: [(3, OP_GT, 0)], 4: [(3, OP_EQ, 0)]}
    ref = _one_debate(3, 3, votes, options=REFERENCE)
    assert ref.scores.tolist() == [1.0, -1.0]
    ours = _one_debate(3, 3, votes)
    assert ours.scored_V.tolist() == [False, False]
    assert ours.judge_N[[4, 5]].tolist() == [0.0, 0.0]  # agent 1's steps 1 and 2: listed, not penalised


def test_first_round_penalty_reference_versus_ours() -> None:
    # 4 agents, 1 cycle, nobody compares: the reference penalises agents 2 and 3 (turns >= 2)
    ref = _one_debate(4, 1, {}, options=REFERENCE)
    assert ref.judge_N.tolist() == [0.0, 0.0, -0.5, -0.5]
    assert ref.penalised_U.tolist() == [False, False, True, True]
    assert not _one_debate(4, 1, {}).penalised_U.any()
    # from the second cycle on both penalise an empty list, and only an empty one
    ours = _one_debate(4, 2, {5: [(9, OP_GT, 0)]})
    assert ours.penalised_U.tolist() == [False] * 4 + [True, False, True, True]
    assert ours.judge_N.tolist() == [0.0, -0.5, 0.0, 0.0, 0.0, -0.5, 0.0, -0.5]


def test_sequential_schedule_judges_the_latest_answers_seen() -> None:
    # round-robin turns: at turn 4 (agent 1, round 1) agent 0 has answered twice, agent 2 once
    r = _one_debate(3, 2, {4: [(0, OP_GT, 2)]}, schedule="sequential")
    assert (r.step_a_V.tolist(), r.step_b_V.tolist()) == ([1], [0])
    # in round 0 agent 1 has seen agent 0 only: its vote on agent 2 is no vote
    r = _one_debate(3, 2, {1: [(0, OP_GT, 2)]}, schedule="sequential")
    assert r.step_b_V.tolist() == [-1] and not r.vote_V.any()


def test_steps_beyond_a_trajectory_lose_their_side_of_the_vote() -> None:
    # agent 2 has one step only: a vote about its (missing) step 1 still counts for the winner
    r = kernel.judge_step_rewards([0] * 9, range(9), [0, 1, 2] * 3, [7], [0], [OP_GT], [2], [3], [3, 3, 1])
    assert r.vote_V.tolist() == [True]
    assert r.generator_N.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_options_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match="no_consensus"):
        JudgeOptions(no_consensus="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="format_exempt_steps"):
        JudgeOptions(format_exempt_steps=-1)
    with pytest.raises(ValueError, match="lambda_gen"):
        JudgeOptions(lambda_gen=float("inf"))
    with pytest.raises(ValueError, match="num_steps_PG"):
        kernel.judge_step_rewards([0], [0], [0], [], [], [], [], [2], [1])
    with pytest.raises(ValueError, match="turn_V"):
        kernel.judge_step_rewards([0], [0], [0], [2], [0], [OP_GT], [1], [2], [1, 1])


# --- brute force: the loop of kernel.testing ---------------------------------------------------------

VARIANTS = [
    DEFAULT,
    REFERENCE,
    dataclasses.replace(DEFAULT, no_consensus="tie", self_comparisons="count"),
    dataclasses.replace(DEFAULT, consensus="pair"),
    dataclasses.replace(DEFAULT, consensus="pair", no_consensus="tie"),
    dataclasses.replace(DEFAULT, consensus="pair_with_own_vote", format_penalty=None),
    dataclasses.replace(REFERENCE, attribution="seen", format_exempt_steps=1),
]


@settings(max_examples=examples(25))
@given(debates=judge_debates(max_agents=5, max_cycles=3), variant=st.integers(0, len(VARIANTS) - 1))
def test_judge_step_rewards_equal_the_brute_force_loop(debates: Any, variant: int) -> None:
    options = VARIANTS[variant]
    for schedule in ("parallel", "sequential"):
        got = kernel.judge_step_rewards(*debates, schedule=schedule, options=options)
        gen, judge = reference_judge_step_rewards(debates, schedule=schedule, options=options)
        np.testing.assert_array_equal(got.generator_N, gen)
        np.testing.assert_array_equal(got.judge_N, judge)


def test_dual_advantages_centre_each_stream_and_combine() -> None:
    g, j = np.array([1.0, 0.0, 0.5, 0.2, 0.9]), np.array([0.0, -0.5, 1.0, 1.0, 0.25])
    ids = np.array([0, 0, 0, 1, 1])
    d = kernel.dual_step_advantages(g, j, ids, 2, lambda_gen=0.25, lambda_judge=2.0)
    for p in (0, 1):
        rows = ids == p
        np.testing.assert_allclose(d.generator_N[rows], g[rows] - g[rows].mean(), atol=1e-15)
        np.testing.assert_allclose(d.judge_N[rows], j[rows] - j[rows].mean(), atol=1e-15)
    np.testing.assert_array_equal(d.advantages, 0.25 * d.generator_N + 2.0 * d.judge_N)


# --- numpy ↔ JAX ---------------------------------------------------------------------------------------


def test_jax_twins_match_numpy_under_jit() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import kernel.jax as kj

    rng = np.random.default_rng(0)
    v, cells, u = 64, 12, 16

    @functools.partial(jax.jit, static_argnames=())
    def twins(
        w: Any, lo: Any, keep: Any, o: Any, q: Any, own: Any, votes: Any, s: Any, c: Any, pen: Any
    ) -> Any:
        gen = kj.generator_rewards(w, lo, cells, where=keep)
        sc = kj.consensus_scores(o, q, 8, vote_V=votes, own_V=own, num_own=20, where=keep)
        ans = kj.answer_consensus_scores(
            o, q, s % 9, 8, vote_V=votes, own_a_V=own, own_b_V=c, num_own=20, where=keep
        )
        judge, counts = kj.judge_rewards(c, sc.scores, cells, where=sc.scored_V, penalty_cell_U=pen)
        steps = kj.judged_steps(s, o + 1, 3, rule="sequential")
        dual = kj.dual_step_advantages(gen.rewards, judge, jnp.arange(cells) % 3, 3, lambda_judge=0.5)
        return gen, sc, judge, counts, steps, dual, ans

    for _ in range(3):
        w, lo = rng.integers(0, cells + 1, v), rng.integers(0, cells + 1, v)
        keep = rng.random(v) < 0.8
        o, q = rng.integers(-1, 2, v), rng.integers(0, 9, v)
        own, votes = rng.integers(0, 21, v), rng.random(v) < 0.7
        s, c, pen = rng.integers(0, 9, v), rng.integers(0, cells + 1, v), rng.integers(0, cells + 1, u)
        got = twins(*(jnp.asarray(x) for x in (w, lo, keep, o, q, own, votes, s, c, pen)))
        gen = kernel.generator_rewards(w, lo, cells, where=keep)
        sc = kernel.consensus_scores(o, q, 8, vote_V=votes, own_V=own, num_own=20, where=keep)
        ans = kernel.answer_consensus_scores(
            o, q, s % 9, 8, vote_V=votes, own_a_V=own, own_b_V=c, num_own=20, where=keep
        )
        judge, counts = kernel.judge_rewards(c, sc.scores, cells, where=sc.scored_V, penalty_cell_U=pen)
        steps = kernel.judged_steps(s, o + 1, 3, rule="sequential")
        dual = kernel.dual_step_advantages(gen.rewards, judge, np.arange(cells) % 3, 3, lambda_judge=0.5)
        np.testing.assert_allclose(np.asarray(got[0].rewards), gen.rewards, rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(got[0].votes_N), gen.votes_N)
        np.testing.assert_array_equal(np.asarray(got[1].scores), sc.scores)
        np.testing.assert_array_equal(np.asarray(got[1].scored_V), sc.scored_V)
        np.testing.assert_allclose(np.asarray(got[2]), judge, rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(got[3]), counts)
        np.testing.assert_array_equal(np.asarray(got[4]), steps)
        for field in ("scores", "scored_V", "consensus_V"):
            np.testing.assert_array_equal(np.asarray(getattr(got[6], field)), getattr(ans, field))
        assert ans.scored_V.any() and (ans.scores == -1).any()
        np.testing.assert_allclose(np.asarray(got[5].advantages), dual.advantages, rtol=1e-5, atol=1e-6)
        flags = kj.format_penalties(
            jnp.asarray(c % 2), jnp.asarray(s % 4), jnp.asarray(s), jnp.asarray(w % 3)
        )
        want = kernel.format_penalties(c % 2, s % 4, s, w % 3)
        np.testing.assert_array_equal(np.asarray(flags), want)


# --- the invariant suite, and that each check catches a broken implementation ------------------------

OURS = functools.partial(kernel.judge_step_rewards, schedule="parallel")


def test_ours_pass_the_judge_suite() -> None:
    outcome = run_judge_suite(OURS, options=DEFAULT, max_examples=examples(30))
    assert set(outcome.values()) == {"passed"}, outcome


def _silent_judges(*args: Any) -> Any:
    """Judging earns nothing (the v1 rewards)."""
    r = OURS(*args)
    return r._replace(judge_N=np.zeros_like(r.judge_N))


BROKEN = {
    # the fork's sequential attribution depends on where an agent sits in the cycle
    "relabel_invariance": functools.partial(
        OURS, options=dataclasses.replace(DEFAULT, attribution="reference_v2")
    ),
    "unanimous_vote": _silent_judges,
    # the consensus of the exact pair (leave-one-out): no other judge compared x with y
    "each_answer_evidence": functools.partial(OURS, options=dataclasses.replace(DEFAULT, consensus="pair")),
    # self-comparisons counted (for the author's own generator reward too) ...
    "never_scores_itself": functools.partial(
        OURS, options=dataclasses.replace(DEFAULT, self_comparisons="count")
    ),
    "matches_reference": functools.partial(OURS, options=dataclasses.replace(DEFAULT, format_penalty=-1.0)),
}


@pytest.mark.parametrize("check", sorted(BROKEN))
def test_each_check_catches_a_broken_implementation(check: str) -> None:
    outcome = run_judge_suite(
        BROKEN[check], options=DEFAULT, checks=[check], raise_on_failure=False, max_examples=examples(60)
    )
    assert outcome[check].startswith("failed"), outcome


def test_own_vote_in_the_consensus_is_caught() -> None:
    # ... and a judge scored against a consensus holding its own vote (the reference's consensus)
    fn = functools.partial(
        OURS, options=dataclasses.replace(DEFAULT, consensus="pair_with_own_vote", no_consensus="tie")
    )
    outcome = run_judge_suite(
        fn, checks=["never_scores_itself"], raise_on_failure=False, max_examples=examples(60)
    )
    assert outcome["never_scores_itself"].startswith("failed"), outcome
    assert run_judge_suite(
        functools.partial(OURS, options=REFERENCE),
        checks=["never_scores_itself"],
        raise_on_failure=False,
        max_examples=examples(60),
    )["never_scores_itself"].startswith("failed")


def test_a_consensus_leaving_out_only_the_comparison_itself_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the judge's other votes on the same two answers (or copies of the comparison) are its own votes too
    import kernel._judge_rewards as jr

    def per_comparison(keep: Any, key: Any, judge: Any) -> tuple[Any, int]:
        return np.where(keep, np.arange(keep.size), keep.size), int(keep.size)

    monkeypatch.setattr(jr, "_own_groups", per_comparison)
    outcome = run_judge_suite(
        OURS, checks=["never_scores_itself"], raise_on_failure=False, max_examples=examples(30)
    )
    assert outcome["never_scores_itself"].startswith("failed"), outcome


# --- three agents in sequential rounds: the project's default training layout -----------------------


def _sequential_three(flip: int | None = None) -> dict[int, list[tuple[int, int, int]]]:
    """3 agents, 3 rounds, answers ranked by agent (0 best, 2 worst); from turn 2 on each judge compares
    the latest answers of the other two, truthfully except agent ``flip``."""
    votes = {}
    for t in range(2, 9):
        judge = t % 3
        x, y = sorted({0, 1, 2} - {judge})
        votes[t] = [(y, OP_GT, x) if judge == flip else (x, OP_GT, y)]
    return votes


def test_three_sequential_agents_get_judge_rewards_that_follow_the_other_judges() -> None:
    # no two judges ever see the same two answers: the exact-pair consensus scores nothing
    pair = _one_debate(
        3, 3, _sequential_three(), schedule="sequential", options=JudgeOptions(consensus="pair")
    )
    assert not pair.scored_V.any() and not pair.judge_N.any()
    # but each answer is judged by both other agents. Cells: agent x's step s is 3x + s. Turn 4: agent 1
    # says answer (0, 1) > (2, 0); judge 2 saw (0, 1) win (turn 5), judge 0 saw (2, 0) lose (turn 3): +1
    ours = _one_debate(3, 3, _sequential_three(), schedule="sequential")
    assert ours.scores.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert ours.judge_N.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    # agent 1 votes against the others: its judgments score -1; with 3 agents each side's rate rests on
    # one other judge's vote, so its votes also turn the judgments of agents 0 and 2 (turns 3, 5, 6) to -1
    flipped = _one_debate(3, 3, _sequential_three(flip=1), schedule="sequential")
    assert flipped.judge_N[[4, 5]].tolist() == [-1.0, -1.0]
    assert flipped.scores.tolist() == [0.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0.0]
    assert (flipped.generator_N != ours.generator_N).any()


def _sequential_episode(flip: int | None = None) -> Episode:
    comparisons = _sequential_three(flip)
    said = tuple(
        ParsedResponse.make(
            t % 3, solution="4", votes=tuple(Vote(a, ">", b) for a, _, b in comparisons.get(t, []))
        )
        for t in range(9)
    )
    return Episode(3, tuple(t % 3 for t in range(9)), said, (0.0,) * 9)


def test_three_sequential_agents_through_the_scoring_core() -> None:
    """The same debate as an Episode: the judge stream of the turn-level advantages is not constant."""
    s = kernel.score_episodes([_sequential_episode()], ScoringOptions(judge=DEFAULT))
    assert s.judge is not None and s.dual is not None
    np.testing.assert_array_equal(s.judge.judge_N, [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    assert np.ptp(s.dual.judge_N) > 0


# --- the scoring core ------------------------------------------------------------------------------------


def _episode(**kw: Any) -> Episode:
    """3 agents, 2 rounds: agent 2 votes 0 > 1, then 1 > 2 and 2 > 0, and agent 2 owes a comparison in
    round 1 (penalised); each turn 4 action tokens: [solution, evaluation, comparison, other]."""
    votes = [(), (), (Vote(0, ">", 1),), (Vote(1, ">", 2),), (Vote(2, ">", 0),), ()]
    said = tuple(ParsedResponse.make(t % 3, solution="4", votes=v) for t, v in enumerate(votes))
    tokens = tuple(([1, 2], [3, 4, 5, 6], [-0.5] * 4) for _ in said)
    fields = tuple(np.array([FIELD_GENERATOR, FIELD_GENERATOR, FIELD_JUDGE, FIELD_BOTH]) for _ in said)
    return Episode(
        3, tuple(t % 3 for t in range(6)), said, (0.0,) * 6, tokens_T=tokens, fields_T=fields, **kw
    )


def test_scoring_core_routes_each_advantage_to_its_own_tokens() -> None:
    options = dataclasses.replace(DEFAULT, lambda_gen=0.5, lambda_judge=2.0)
    s = kernel.score_episodes([_episode()], ScoringOptions(judge=options))
    assert s.judge is not None and s.dual is not None
    labels = s.datums.datums.advantages.reshape(6, -1)[:, 1:]  # the 4 action positions of each turn's datum
    cell = np.asarray([0, 2, 4, 1, 3, 5])  # turn t of agent t % 3, step t // 3
    gen = np.float32(0.5 * s.dual.generator_N[cell])
    judge = np.float32(2.0 * s.dual.judge_N[cell])
    np.testing.assert_array_equal(labels[:, 0], gen)
    np.testing.assert_array_equal(labels[:, 2], judge)
    np.testing.assert_array_equal(labels[:, 3], np.float32(s.dual.advantages[cell]))
    np.testing.assert_array_equal(s.turn_advantages_T, s.dual.advantages[cell])
    assert labels[:, 2].any() and labels[:, 0].any()
    # the reference's credit: every action token of a step carries the combined advantage
    ref = kernel.score_episodes([_episode()], ScoringOptions(judge=REFERENCE))
    ref_labels = ref.datums.datums.advantages.reshape(6, -1)[:, 1:]
    assert ref.dual is not None
    np.testing.assert_array_equal(
        ref_labels, np.repeat(np.float32(ref.dual.advantages[cell])[:, None], 4, axis=1)
    )


def test_scoring_core_with_judge_rewards_refuses_what_it_would_ignore() -> None:
    for bad in ({"credit": "solution"}, {"turn_groups": "round"}, {"correctness_weight": 1.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ScoringOptions(judge=DEFAULT, **bad)
    with pytest.raises(ValueError, match="RAE"):
        ScoringOptions(judge=DEFAULT, estimator=kernel.RAEOptions())
    e = _episode()
    shuffled = dataclasses.replace(e, agents_T=(1, 0, 2, 0, 1, 2))
    with pytest.raises(ValueError, match="round-robin"):
        kernel.score_episodes([shuffled], ScoringOptions(judge=DEFAULT))


def test_a_failed_parse_keeps_its_step_penalty_in_the_generator_stream() -> None:
    e = _episode()
    failed = dataclasses.replace(
        e, responses_T=(*e.responses_T[:5], ParsedResponse.make(2, ok=False)), rewards_T=(0.0,) * 5 + (-1.0,)
    )
    s = kernel.score_episodes([failed], ScoringOptions(judge=DEFAULT, negative_advantages="zero"))
    assert s.turn_returns_T[5] < 0 and s.turn_advantages_T.min() == 0.0
    assert s.datums.datums.advantages.min() == 0.0


# --- per-token datums and field credit -------------------------------------------------------------------


def test_build_datums_takes_per_token_advantages() -> None:
    t = kernel.trajectories_from_lists(
        [[([1, 2], [3, 4], [-0.5, -0.5])], [([5], [6, 7], [-1.0, -1.0])]], [9.0, 9.0]
    )
    r = kernel.build_datums(t, ac_advantages=[0.25, -1.5, 1e-3, 0.0], drop_zero_advantage=True)
    assert r.datums.advantages.tolist() == [0.0, 0.25, -1.5, np.float32(1e-3), 0.0]
    with pytest.raises(ValueError, match="not both"):
        kernel.build_datums(t, ac_advantages=[0.0] * 4, ac_weights=[1.0] * 4)
    out = kernel.build_datums(t, ac_advantages=[0.0, 0.0, 1e39, 0.0])
    assert [kernel.DATUM_STATUS[c] for c in out.status_B] == ["ok", "value_out_of_range"]


def test_credit_fields_follow_the_blocks_the_parser_read() -> None:
    from adapters.tinker.renderers import ByteRenderer
    from adapters.training.credit import credit_fields

    r = ByteRenderer()
    text = (
        "<think>a <comparison> idea</think><solution>7</solution>\n<evaluation>ok</evaluation>\n"
        "<comparison>Agent 1 > Agent 2</comparison>\n<consensus>YES</consensus>"
    )
    ids = r.tokenizer.encode(text)
    codes = credit_fields(r, ids)
    picked = {k: r.text([t for t, c in zip(ids, codes, strict=True) if c == k]) for k in (1, 2)}
    assert picked[FIELD_GENERATOR] == "<solution>7</solution><evaluation>ok</evaluation>"
    assert picked[FIELD_JUDGE] == "<comparison>Agent 1 > Agent 2</comparison>"
    assert (credit_fields(r, r.tokenizer.encode("no tags")) == FIELD_BOTH).all()


def test_training_metrics_log_the_judge_streams() -> None:
    from adapters.training.prepare import batch_metrics

    episodes = [_sequential_episode(), _sequential_episode(flip=1)]
    m = batch_metrics(episodes, kernel.score_episodes(episodes, ScoringOptions(judge=DEFAULT)))
    # 2 debates x 9 cells; judge rewards: +1 twice in the first, -1 for five steps in the second
    assert m["env/all/reward/judge/mean"] == pytest.approx((2 - 5) / 18)
    assert m["env/all/reward/judge/std"] > 0 and 0 < m["env/all/reward/gen/mean"] < 1
    assert m["env/all/reward/total_votes"] == 7 and m["env/all/reward/missing_comparisons"] == 0
    assert m["env/all/reward/judge/scored"] == (2 + 5) / 2
    assert m["env/all/reward/judge/agreement"] == pytest.approx(2 / 7)
    # an empty list after round 0 is a format penalty; without judge rewards the keys are absent
    e = _sequential_episode()
    e = dataclasses.replace(
        e, responses_T=(*e.responses_T[:4], ParsedResponse.make(1, solution="4"), *e.responses_T[5:])
    )
    silent = batch_metrics([e], kernel.score_episodes([e], ScoringOptions(judge=DEFAULT)))
    assert silent["env/all/reward/missing_comparisons"] == 1
    assert not any("reward/judge" in k for k in batch_metrics(episodes, kernel.score_episodes(episodes)))


def test_a_run_trains_on_judge_rewards(tmp_path: Any) -> None:
    """The config key reaches the kernel: a run on the fake trains per-turn, field-credited datums."""
    import asyncio

    from adapters.tinker.fake import FakeServiceClient
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    base = {"out": str(tmp_path / "run"), "steps": 1, "batch_size": 2, "num_agents": 3, "max_rounds": 2,
            "max_tokens": 256, "eval_every": 0, "judge_rewards": "default"}  # fmt: skip
    config = TrainConfig.from_mapping(base)
    assert config.scoring_options.judge == DEFAULT
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert result.metrics[-1]["optim/num_datums"] > 0
    assert "env/all/reward/judge/agreement" in result.metrics[-1]
    with pytest.raises(ValueError, match=r"config keys estimator and judge_rewards: .*credit"):
        _ = TrainConfig.from_mapping({**base, "credit": "solution"}).scoring_options


def test_score_cli_takes_judge_rewards(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``debate-kernel score --judge-rewards``: each preset reaches the datums; RAE is refused by name."""
    from adapters.cli import main

    advantages = {}
    for preset in ("off", "default", "reference_v2"):
        target = tmp_path / f"{preset}.npz"
        assert main(["score", "--quiet", "--judge-rewards", preset, "--datums-out", str(target)]) == 0
        with np.load(target) as npz:
            advantages[preset] = npz["advantages"]
    assert not np.array_equal(advantages["off"], advantages["default"])
    assert not np.array_equal(advantages["default"], advantages["reference_v2"])
    capsys.readouterr()
    assert main(["score", "--quiet", "--judge-rewards", "default", "--estimator", "rae"]) == 2
    assert "--judge-rewards: judge rewards need grouped advantages" in capsys.readouterr().err
