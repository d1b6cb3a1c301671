"""The debate state machine: hand-computed episodes, protocol errors, replay and properties."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel import (
    PARSE_FAILURE_REWARD,
    ROUND1_NOT_YET_SPOKEN,
    ROUND1_VALID,
    ROUND1_VOTE_REASONS,
    SUBMIT_REJECTIONS,
    DebateState,
    ParsedResponse,
    RejectedTurn,
    StepResult,
    Vote,
    abort,
    current_agent,
    current_round,
    initial_state,
    replay,
    round1_vote_check,
    round1_vote_violations,
    submit,
)
from tests._profile import examples

# --- a small local factory (the parser is tested on its own) -------------------------------------


def resp(
    author: int,
    *,
    yes: bool = False,
    ok: bool = True,
    reason: str = "",
    votes: tuple[Vote, ...] = (),
    solution: str = "42",
) -> ParsedResponse:
    """A ParsedResponse as a parser would return it for agent ``author``."""
    return ParsedResponse.make(
        author,
        ok=ok,
        solution=solution if ok else "",
        evaluation="N/A" if ok else "",
        consensus=yes and ok,
        consensus_reason="fine" if ok else "",
        votes=votes,
        reason=None if ok else (reason or "missing_solution"),
        policy="robust",
    )


def play(state: DebateState, *consensus: bool) -> DebateState:
    """Submits one accepted response per flag, from whoever is to act; fails if one is rejected."""
    for yes in consensus:
        agent = current_agent(state)
        assert agent is not None
        step = submit(state, agent, resp(agent, yes=yes))
        assert step.ok, step.reason
        assert step.reward == 0.0
        state = step.state
    return state


# --- hand-computed episodes ----------------------------------------------------------------------


def test_two_agents_run_to_max_rounds_in_order() -> None:
    s = initial_state("q", num_agents=2, max_rounds=2)
    seen = []
    while (agent := current_agent(s)) is not None:
        seen.append((agent, current_round(s)))
        s = play(s, False)
    assert seen == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert (s.done, s.consensus, s.aborted, s.parse_failed, s.abort_reason) == (True, False, False, False, "")
    assert s.turn == 4 and current_round(s) == 2
    assert [len(r) for r in s.rounds] == [2, 2]
    assert [r.author_id for r in s.responses] == [0, 1, 0, 1]


def test_three_agents_unanimous_yes_stops_after_round_one() -> None:
    s = initial_state("q", num_agents=3, max_rounds=3)
    s = play(s, True, True)
    assert not s.done and current_agent(s) == 2  # never mid-round
    s = play(s, True)
    assert s.done and s.consensus and not s.aborted
    assert current_agent(s) is None and current_round(s) == 1 and s.turn == 3


def test_consensus_by_only_some_agents_continues() -> None:
    s = play(initial_state("q", num_agents=3, max_rounds=3), True, False, True)
    assert not s.done and not s.consensus
    assert current_agent(s) == 0 and current_round(s) == 1
    s = play(s, True, True, True)
    assert s.done and s.consensus and s.turn == 6 and len(s.rounds) == 2


def test_earlier_rounds_do_not_count_towards_consensus() -> None:
    # Round 1 is all YES except agent 2; round 2 is all NO except agent 2: never unanimous in one round.
    s = play(initial_state("q", num_agents=3, max_rounds=2), True, True, False, False, False, True)
    assert s.done and not s.consensus  # ended by max_rounds


def test_unanimous_last_round_counts_as_consensus() -> None:
    s = play(initial_state("q", num_agents=2, max_rounds=2), False, False, True, True)
    assert s.done and s.consensus  # consensus is checked before the round limit


def test_single_agent_debate() -> None:
    s = play(initial_state("q", num_agents=1, max_rounds=3), False, False)
    assert not s.done and current_agent(s) == 0 and current_round(s) == 2
    assert play(s, True).consensus


def test_parse_failure_ends_with_minus_one_and_is_not_stored() -> None:
    s = play(initial_state("q", num_agents=3, max_rounds=3), False, False, False, True)
    step = submit(s, 1, resp(1, ok=False, reason="missing_evaluation"))
    assert step == StepResult(step.state, -1.0, True, "")
    t = step.state
    assert (t.done, t.aborted, t.parse_failed, t.consensus) == (True, True, True, False)
    assert t.abort_reason == "missing_evaluation"
    assert t.turn == s.turn == 4 and t.rounds == s.rounds
    assert current_agent(t) is None
    after = submit(t, 2, resp(2))
    assert (after.ok, after.reason, after.reward, after.state) == (False, "debate_over", 0.0, t)


def test_parse_failure_without_reason_is_recorded_as_parse_error() -> None:
    bad = replace(resp(0, ok=False), reason="")
    step = submit(initial_state("q", num_agents=2, max_rounds=1), 0, bad, parse_failure_reward=-0.5)
    assert step.reward == -0.5 and step.state.abort_reason == "parse_error"


def test_abort_mid_round_and_idempotent() -> None:
    s = play(initial_state("q", num_agents=3, max_rounds=3), False)
    t = abort(s, "sampler_timeout")
    assert (t.done, t.aborted, t.parse_failed, t.consensus, t.abort_reason) == (
        True,
        True,
        False,
        False,
        "sampler_timeout",
    )
    assert t.rounds == s.rounds and current_agent(t) is None
    assert abort(t, "again") is t
    finished = play(initial_state("q", num_agents=1, max_rounds=1), True)
    assert abort(finished, "late") is finished and not finished.aborted
    with pytest.raises(ValueError, match="reason"):
        abort(s, "")
    with pytest.raises(TypeError, match="reason"):
        abort(s, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="state"):
        abort("state", "x")  # type: ignore[arg-type]


# --- protocol errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "author", "reason"),
    [
        (-1, -1, "agent_out_of_range"),
        (3, 3, "agent_out_of_range"),
        (0, 0, "not_your_turn"),
        (2, 2, "not_your_turn"),
        (1, 2, "author_mismatch"),
        (1, -1, "author_mismatch"),
    ],
)
def test_protocol_errors_are_results_not_exceptions(agent: int, author: int, reason: str) -> None:
    s = play(initial_state("q", num_agents=3, max_rounds=2), False)  # agent 1 to act
    step = submit(s, agent, resp(author))
    assert step == StepResult(s, 0.0, False, reason)
    assert step.state is s
    assert reason in SUBMIT_REJECTIONS


def test_protocol_errors_come_before_parse_failures() -> None:
    s = initial_state("q", num_agents=2, max_rounds=1)
    step = submit(s, 1, resp(1, ok=False))
    assert (step.ok, step.reason, step.reward, step.state.done) == (False, "not_your_turn", 0.0, False)


def test_out_of_range_is_reported_before_debate_over() -> None:
    done = abort(initial_state("q", num_agents=2, max_rounds=1), "x")
    assert submit(done, 5, resp(5)).reason == "agent_out_of_range"
    assert submit(done, 1, resp(1)).reason == "debate_over"


def test_numpy_integer_agent_ids_are_accepted() -> None:
    step = submit(initial_state("q", num_agents=2, max_rounds=1), np.int32(0), resp(0))  # type: ignore[arg-type]
    assert step.ok


@pytest.mark.parametrize("bad", ["0", 0.0, True, None])
def test_agent_id_of_wrong_type_raises(bad: object) -> None:
    with pytest.raises(TypeError, match="agent_id"):
        submit(initial_state("q", num_agents=2, max_rounds=1), bad, resp(0))  # type: ignore[arg-type]


def test_wrong_state_or_response_type_raises() -> None:
    s = initial_state("q", num_agents=2, max_rounds=1)
    with pytest.raises(TypeError, match="state"):
        submit("s", 0, resp(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parsed"):
        submit(s, 0, "<solution>4</solution>")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"num_agents": 0, "max_rounds": 1}, ValueError, "num_agents"),
        ({"num_agents": 2, "max_rounds": 0}, ValueError, "max_rounds"),
        ({"num_agents": -3, "max_rounds": 2}, ValueError, "num_agents"),
        ({"num_agents": 2.0, "max_rounds": 2}, TypeError, "num_agents"),
        ({"num_agents": 2, "max_rounds": True}, TypeError, "max_rounds"),
    ],
)
def test_initial_state_validates_arguments(kwargs: dict[str, object], exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        initial_state("q", **kwargs)  # type: ignore[arg-type]


def test_initial_state_rejects_non_string_question() -> None:
    with pytest.raises(TypeError, match="question"):
        initial_state(7, num_agents=2, max_rounds=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"turn": 1}, "turn must equal the number of stored responses 0"),  # no stored response
        ({"done": False, "consensus": True}, "consensus and aborted imply done"),
        ({"done": True, "aborted": True}, "abort_reason must be non-empty exactly when aborted"),  # no reason
        (
            {"done": True, "aborted": True, "consensus": True, "abort_reason": "x"},
            "either by consensus or by an abort, not both",
        ),
        ({"done": True, "parse_failed": True}, "parse_failed implies aborted"),
        ({"abort_reason": "x"}, "abort_reason must be non-empty exactly when aborted"),
    ],
)
def test_inconsistent_states_are_refused(fields: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DebateState(question="q", num_agents=2, max_rounds=2, **fields)  # type: ignore[arg-type]


def test_states_where_nobody_could_act_are_refused() -> None:
    r = resp(0)
    with pytest.raises(ValueError, match="must be done"):
        DebateState(question="q", num_agents=1, max_rounds=1, turn=1, rounds=((r,),))
    with pytest.raises(ValueError, match="YES"):
        DebateState(question="q", num_agents=1, max_rounds=2, turn=1, rounds=((resp(0, yes=True),),))
    with pytest.raises(ValueError, match="rounds"):
        DebateState(question="q", num_agents=2, max_rounds=2, turn=3, rounds=((r,), (r, r)))


# --- replay ----------------------------------------------------------------------------------------


def test_replay_reports_every_rejected_turn() -> None:
    turns = [
        (0, resp(0)),
        (0, resp(0)),  # out of order
        (1, resp(1)),
        (7, resp(7)),  # unknown agent
        (0, resp(0, yes=True)),
        (1, resp(1, ok=False)),  # ends the debate with -1
        (0, resp(0)),  # after the end
        (1, resp(1)),
    ]
    r = replay("q", turns, num_agents=2, max_rounds=3)
    assert r.rewards == (0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0)
    assert r.accepted == (0, 2, 4, 5)
    assert r.rejected == (
        RejectedTurn(1, 0, "not_your_turn"),
        RejectedTurn(3, 7, "agent_out_of_range"),
        RejectedTurn(6, 0, "debate_over"),
        RejectedTurn(7, 1, "debate_over"),
    )
    assert r.state.parse_failed and r.state.turn == 3


def test_replay_of_nothing_is_the_initial_state() -> None:
    r = replay("q", [], num_agents=3, max_rounds=2)
    assert r.state == initial_state("q", num_agents=3, max_rounds=2)
    assert (r.rewards, r.accepted, r.rejected) == ((), (), ())


def test_replay_validates_counts() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        replay("q", [], num_agents=3, max_rounds=0)


# --- round-1 speaking order --------------------------------------------------------------------------


def test_round1_vote_check_hand_computed() -> None:
    # author, a, b, round
    rows = [
        (2, 0, 1, 0),  # spoke before: valid
        (2, 1, 3, 0),  # 3 has not spoken
        (1, 0, 2, 0),  # 2 has not spoken
        (1, 0, 1, 0),  # names the author: left to the vote validator
        (1, 2, 0, 1),  # round 2: everyone has spoken
        (-1, 5, 6, 0),  # unknown author: cannot tell
        (0, -1, -2, 0),  # negative ids: the validator's business
    ]
    u, a, b, rnd = (list(c) for c in zip(*rows, strict=True))
    chk = round1_vote_check(u, a, b, rnd)
    assert chk.valid_V.dtype == np.bool_ and chk.reason_V.dtype == np.int8
    assert chk.valid_V.tolist() == [True, False, False, True, True, True, True]
    assert [ROUND1_VOTE_REASONS[c] for c in chk.reason_V] == [
        "valid",
        "not_yet_spoken",
        "not_yet_spoken",
        "valid",
        "valid",
        "valid",
        "valid",
    ]
    assert ROUND1_VOTE_REASONS[ROUND1_VALID] == "valid"
    assert ROUND1_VOTE_REASONS[ROUND1_NOT_YET_SPOKEN] == "not_yet_spoken"


def test_round1_vote_check_validates_inputs() -> None:
    with pytest.raises(ValueError, match="same length"):
        round1_vote_check([0], [1], [2], [0, 0])
    with pytest.raises(TypeError, match="a_V"):
        round1_vote_check([0], [1.5], [2], [0])
    empty = round1_vote_check([], [], [], [])
    assert empty.valid_V.shape == (0,) and empty.reason_V.shape == (0,)


def test_round1_vote_violations_align_with_votes_from_responses() -> None:
    from kernel import votes_from_responses

    def debate(votes_by_turn: list[tuple[Vote, ...]], n: int) -> DebateState:
        s = initial_state("q", num_agents=n, max_rounds=3)
        for vs in votes_by_turn:
            agent = current_agent(s)
            assert agent is not None
            s = submit(s, agent, resp(agent, votes=vs)).state
        return s

    s1 = debate([(Vote(1, ">", 2),), (), (Vote(0, "=", 1), Vote(0, ">", 3)), (Vote(1, ">", 2),)], 3)
    s2 = debate([(), (Vote(0, ">", 2), Vote(0, ">", 3)), (Vote(0, ">", 1),), (), (Vote(1, ">", 0),)], 4)
    chk = round1_vote_violations([s1, s2])
    assert chk.valid_V.tolist() == [False, True, False, True, False, False, True, True]
    votes = votes_from_responses([s1.responses, s2.responses])
    assert chk.valid_V.shape == votes.a_V.shape
    # The same verdicts from the struct-of-arrays path, given each vote's round.
    rounds = [0, 0, 0, 1, 0, 0, 0, 1]
    again = round1_vote_check(votes.authors_V, votes.a_V, votes.b_V, rounds)
    np.testing.assert_array_equal(again.valid_V, chk.valid_V)


# --- properties --------------------------------------------------------------------------------------


@dataclass
class SlowCoordinator:
    """An obviously-correct mutable model of the reference coordinator, plus our protocol checks."""

    n: int
    max_rounds: int
    spoken: list[tuple[int, bool]] = field(default_factory=list)  # (agent, consensus)
    done: bool = False
    consensus: bool = False
    aborted: bool = False
    parse_failed: bool = False

    def step(self, agent: int, author: int, ok: bool, yes: bool) -> tuple[bool, str, float]:
        if not 0 <= agent < self.n:
            return False, "agent_out_of_range", 0.0
        if self.done:
            return False, "debate_over", 0.0
        if agent != len(self.spoken) % self.n:
            return False, "not_your_turn", 0.0
        if author != agent:
            return False, "author_mismatch", 0.0
        if not ok:
            self.done = self.aborted = self.parse_failed = True
            return True, "", -1.0
        self.spoken.append((agent, yes))
        if len(self.spoken) % self.n == 0:
            last_round = self.spoken[-self.n :]
            if all(y for _, y in last_round):
                self.done = self.consensus = True
            elif len(self.spoken) // self.n >= self.max_rounds:
                self.done = True
        return True, "", 0.0

    def abort(self) -> None:
        if not self.done:
            self.done = self.aborted = True


# An action: ("submit", agent or None for "whoever is to act", author offset, ok, yes) or ("abort",).
_submit_actions = st.tuples(
    st.just("submit"),
    st.one_of(st.none(), st.none(), st.none(), st.integers(-1, 5)),
    st.sampled_from([0, 0, 0, 0, 0, 1]),  # author = agent + offset: mostly consistent
    st.sampled_from([True] * 9 + [False]),  # ok: parse failures are rare, as they end the debate
    st.booleans(),
)
_actions = st.lists(
    st.integers(0, 39).flatmap(lambda k: st.just(("abort",)) if k == 0 else _submit_actions), max_size=40
)


@st.composite
def debates(draw: st.DrawFn) -> tuple[int, int, list[tuple[object, ...]]]:
    n = draw(st.integers(1, 4))
    rounds = draw(st.integers(1, 3))
    return n, rounds, draw(_actions)


def _run(n: int, max_rounds: int, actions: list[tuple[object, ...]]):  # type: ignore[no-untyped-def]
    """Yields (state_before, action, step or None for abort, state_after) and checks against the model."""
    model = SlowCoordinator(n, max_rounds)
    s = initial_state("q", num_agents=n, max_rounds=max_rounds)
    for action in actions:
        if action[0] == "abort":
            t = abort(s, "external")
            model.abort()
            yield s, action, None, t
        else:
            _, agent_opt, offset, ok, yes = action
            agent = (current_agent(s) or 0) if agent_opt is None else agent_opt
            assert isinstance(agent, int) and isinstance(offset, int)
            step = submit(s, agent, resp(agent + offset, ok=bool(ok), yes=bool(yes)))
            expected = model.step(agent, agent + offset, bool(ok), bool(yes) and bool(ok))
            assert (step.ok, step.reason, step.reward) == expected
            t = step.state
            if not step.ok:
                assert t is s
            yield s, action, step, t
        assert (t.done, t.consensus, t.aborted, t.parse_failed) == (
            model.done,
            model.consensus,
            model.aborted,
            model.parse_failed,
        )
        assert [r.author_id for r in t.responses] == [a for a, _ in model.spoken]
        s = t


@given(debates())
def test_matches_the_slow_reference_coordinator(case: tuple[int, int, list[tuple[object, ...]]]) -> None:
    for _ in _run(*case):
        pass


@given(debates())
def test_turn_order_is_zero_to_n_minus_one_every_round(
    case: tuple[int, int, list[tuple[object, ...]]],
) -> None:
    n = case[0]
    accepted = []
    final = None
    for _, _, step, after in _run(*case):
        if step is not None and step.ok and step.reward == 0.0:
            accepted.append(after.responses[-1].author_id)
        final = after
    assert accepted == [k % n for k in range(len(accepted))]
    if final is not None:
        for rnd in final.rounds:
            assert [r.author_id for r in rnd] == list(range(len(rnd)))


@given(debates())
def test_termination_only_at_round_ends(case: tuple[int, int, list[tuple[object, ...]]]) -> None:
    n, max_rounds, _ = case
    for before, _, step, after in _run(*case):
        if after.done and not before.done and not after.aborted:
            assert step is not None and step.ok
            assert after.turn % n == 0 and after.turn > 0
            assert after.consensus or after.turn == n * max_rounds


@given(debates())
def test_nobody_stuck_and_not_done_is_impossible(case: tuple[int, int, list[tuple[object, ...]]]) -> None:
    n, max_rounds, _ = case
    for _, _, _, after in _run(*case):
        agent = current_agent(after)
        assert (agent is None) == after.done
        assert after.turn <= n * max_rounds
        if agent is not None:
            assert 0 <= agent < n
            probe = submit(after, agent, resp(agent))
            assert probe.ok and probe.reward == 0.0 and probe.state.turn == after.turn + 1


@given(debates())
def test_rewards_sum_to_minus_parse_failures(case: tuple[int, int, list[tuple[object, ...]]]) -> None:
    total = 0.0
    failures = 0
    for _, _, step, _after in _run(*case):
        if step is not None:
            total += step.reward
            failures += step.ok and step.reward == PARSE_FAILURE_REWARD
    assert failures <= 1
    assert total == -failures


@st.composite
def recorded(draw: st.DrawFn) -> tuple[int, int, list[tuple[object, ...]]]:
    """Transcripts as a file records them: speaking order, mostly parsed, often run to their end and past
    it, with a few protocol errors."""
    n = draw(st.integers(1, 4))
    rounds = draw(st.integers(1, 3))
    length = draw(st.integers(0, n * (rounds + 1) + 1))
    actions: list[tuple[object, ...]] = []
    for k in range(length):
        agent = draw(st.sampled_from([k % n] * 12 + [None, -1, n]))
        offset = draw(st.sampled_from([0] * 20 + [1]))
        ok = draw(st.sampled_from([True] * 15 + [False]))
        actions.append(("submit", agent, offset, ok, draw(st.booleans())))
    return n, rounds, actions


@settings(max_examples=examples(200))
@given(st.one_of(debates(), recorded()), st.sampled_from([PARSE_FAILURE_REWARD, -2, 0.5]), st.booleans())
def test_replay_equals_folding_submit(
    case: tuple[int, int, list[tuple[object, ...]]], failure_reward: float, numpy_ids: bool
) -> None:
    """``replay`` folds the transcript without intermediate states: the same as folding ``submit``."""
    n, max_rounds, actions = case
    turns: list[tuple[int, ParsedResponse]] = []
    s = initial_state("q", num_agents=n, max_rounds=max_rounds)
    steps = []
    for action in actions:
        if action[0] != "submit":
            continue
        _, agent_opt, offset, ok, yes = action
        agent = (current_agent(s) or 0) if agent_opt is None else agent_opt
        assert isinstance(agent, int) and isinstance(offset, int)
        parsed = resp(agent + offset, ok=bool(ok), yes=bool(yes))
        agent_id = np.int64(agent) if numpy_ids else agent
        turns.append((agent_id, parsed))  # type: ignore[arg-type]
        step = submit(s, agent_id, parsed, parse_failure_reward=failure_reward)  # type: ignore[arg-type]
        steps.append(step)
        s = step.state
    r = replay("q", turns, num_agents=n, max_rounds=max_rounds, parse_failure_reward=failure_reward)
    assert r.state == s
    assert all(type(x) is float for x in r.rewards)
    assert all(type(t.agent_id) is int for t in r.rejected)
    assert r.rewards == tuple(st_.reward for st_ in steps)
    assert r.accepted == tuple(i for i, st_ in enumerate(steps) if st_.ok)
    assert r.rejected == tuple(
        RejectedTurn(i, turns[i][0], st_.reason) for i, st_ in enumerate(steps) if not st_.ok
    )
    assert sorted([*r.accepted, *(t.turn_index for t in r.rejected)]) == list(range(len(turns)))
    assert sum(r.rewards) == failure_reward * int(r.state.parse_failed)


@pytest.mark.parametrize("at", [0, 1, 3])
def test_replay_raises_as_submit_does_on_a_bad_turn(at: int) -> None:
    """A turn of the wrong type raises the TypeError submit raises, wherever it is (even after the end)."""
    good = [(k % 2, resp(k % 2)) for k in range(4)]
    for bad, match in (((0, "text"), "parsed"), (("0", resp(0)), "agent_id"), ((True, resp(1)), "agent_id")):
        turns = [*good[:at], bad, *good[at:]]
        with pytest.raises(TypeError, match=match):
            replay("q", turns, num_agents=2, max_rounds=1)  # type: ignore[arg-type]


def test_round1_vote_violations_total_on_ids_beyond_int64() -> None:
    # The reference parser keeps any digits: an id of 2**63 (or -2**63 - 1) must not overflow the packing.
    s = initial_state("q", num_agents=2, max_rounds=2)
    s = submit(s, 0, resp(0, votes=(Vote(1, ">", 2**63), Vote(-(2**63) - 1, "=", 0)))).state
    s = submit(s, 1, resp(1, votes=(Vote(0, ">", 2**70),))).state
    chk = round1_vote_violations([s])
    assert chk.valid_V.tolist() == [False, True, False]


_vote_ids = st.integers(-2, 6)


@given(
    st.lists(st.tuples(st.integers(-1, 5), _vote_ids, _vote_ids, st.integers(0, 2)), max_size=20),
)
def test_round1_vote_check_matches_a_loop(rows: list[tuple[int, int, int, int]]) -> None:
    u = [r[0] for r in rows]
    a = [r[1] for r in rows]
    b = [r[2] for r in rows]
    rnd = [r[3] for r in rows]
    chk = round1_vote_check(u, a, b, rnd)
    for v, (author, x, y, r) in enumerate(rows):
        spoken_before = set(range(author))  # round 1: agents 0 .. author-1 have answered
        named_later = any(t > author and t not in spoken_before for t in (x, y))
        bad = r == 0 and author >= 0 and named_later
        assert chk.valid_V[v] == (not bad)
        assert chk.reason_V[v] == (ROUND1_NOT_YET_SPOKEN if bad else ROUND1_VALID)


def test_parse_failure_reward_must_be_a_finite_number() -> None:
    import math

    from kernel import ParsedResponse, initial_state, submit

    state = initial_state("q", num_agents=2, max_rounds=1)
    failed = ParsedResponse.make(0, ok=False)
    with pytest.raises(TypeError, match="parse_failure_reward must be a real number"):
        submit(state, 0, failed, parse_failure_reward="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="parse_failure_reward must be finite"):
        submit(state, 0, failed, parse_failure_reward=math.nan)
    assert submit(state, 0, failed, parse_failure_reward=-2).reward == -2.0


def test_replay_checks_parse_failure_reward_as_submit_does() -> None:
    import math

    from kernel import replay

    with pytest.raises(ValueError, match="parse_failure_reward must be finite"):
        replay("q", [], num_agents=2, max_rounds=1, parse_failure_reward=math.nan)
    with pytest.raises(TypeError, match="parse_failure_reward must be a real number"):
        replay("q", [], num_agents=2, max_rounds=1, parse_failure_reward="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("question", ["q", 7])
@pytest.mark.parametrize("num_agents", [0, 2, 2.0, True, np.int64(2)])
@pytest.mark.parametrize("max_rounds", [0, 1, False, np.int32(3)])
def test_replay_checks_its_arguments_as_initial_state_does(
    question: object, num_agents: object, max_rounds: object
) -> None:
    """replay checks the question and counts without building the initial state: the same error (type
    and message, the same one first when several are wrong) or, with no turns, the same state."""

    def outcome(f: Any) -> Any:
        try:
            return f()
        except (TypeError, ValueError) as e:
            return type(e), str(e)

    kwargs: Any = {"num_agents": num_agents, "max_rounds": max_rounds}
    want = outcome(lambda: initial_state(question, **kwargs))
    assert outcome(lambda: replay(question, [], **kwargs).state) == want
    said = ParsedResponse.make(0, solution="4", consensus=False)
    got = outcome(lambda: replay(question, [(0, said)], **kwargs).state)
    assert got == want if isinstance(want, tuple) else got.turn == 1
