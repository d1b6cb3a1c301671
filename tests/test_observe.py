"""Observations: system prompt contract, history window, clipping, turn rules and stop sequences."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import (
    CONSENSUS_REASON_STOP,
    ELLIPSIS,
    OBSERVATION_PRESETS,
    DebateState,
    Message,
    Observation,
    ObservationConfig,
    ParsedResponse,
    abort,
    build_observation,
    clip_field,
    current_agent,
    history_window,
    initial_state,
    stop_sequences,
    submit,
    system_prompt,
)

REF = ObservationConfig.REFERENCE
DEF = ObservationConfig.DEFAULT


def resp(
    author: int,
    *,
    yes: bool = False,
    solution: str | None = None,
    evaluation: str = "N/A",
    comparison: str = "",
    reason: str = "fine",
) -> ParsedResponse:
    """A parsed response of ``author``; its solution names its round position by default."""
    return ParsedResponse.make(
        author,
        solution=f"answer of agent {author}" if solution is None else solution,
        evaluation=evaluation,
        comparison=comparison,
        consensus=yes,
        consensus_reason=reason,
        policy="robust",
    )


def advance(state: DebateState, turns: int, **kwargs: object) -> DebateState:
    for _ in range(turns):
        agent = current_agent(state)
        assert agent is not None
        step = submit(state, agent, resp(agent, **kwargs))  # type: ignore[arg-type]
        assert step.ok
        state = step.state
    return state


def user(obs: Observation) -> str:
    assert [m.role for m in obs.messages] == ["system", "user"]
    return obs.messages[1].content


def shown_rounds(text: str) -> list[str]:
    return re.findall(r"^=== Round (\d+)( \(in progress\))? ===$", text, flags=re.M)


def numbered(state: DebateState) -> DebateState:
    """Rebuilds ``state`` with solutions naming round and agent, e.g. ``r2a1``."""
    s = initial_state(state.question, num_agents=state.num_agents, max_rounds=state.max_rounds)
    for r, rnd in enumerate(state.rounds):
        for a, _ in enumerate(rnd):
            s = submit(s, a, resp(a, solution=f"r{r + 1}a{a}")).state
    return s


# --- system prompt -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("agent", "n"), [(0, 2), (1, 3), (4, 5)])
def test_system_prompt_states_id_and_contract(agent: int, n: int) -> None:
    text = system_prompt(agent, n)
    assert f"You are Agent {agent}," in text
    positions = [text.index(tag) for tag in ("<solution>", "<evaluation>", "<comparison>", "<consensus>")]
    positions.append(text.index("<consensus_reason>"))
    assert positions == sorted(positions)
    assert "`Agent a > Agent b`" in text and "`Agent a = Agent b`" in text and "N/A" in text
    assert "<consensus>YES or NO</consensus>" in text
    assert f"never name yourself (Agent {agent}) in a comparison" in text
    assert "Agent a < Agent b" not in text  # only > and = are offered


def test_observation_messages_and_dicts() -> None:
    obs = build_observation(initial_state("Why?", num_agents=3, max_rounds=2), 0)
    assert obs.agent_id == 0 and obs.round == 0
    assert obs.messages[0] == Message("system", system_prompt(0, 3))
    assert obs.as_dicts() == [{"role": m.role, "content": m.content} for m in obs.messages]


# --- round-1 rules per position ----------------------------------------------------------------------


def test_round1_first_agent_proposes_only() -> None:
    text = user(build_observation(initial_state("What is 7*6?", num_agents=4, max_rounds=3), 0, config=REF))
    assert text.startswith("Question:\nWhat is 7*6?\n\n")
    assert "round 1 of 3" in text
    assert "N/A in both <evaluation> and <comparison>" in text
    assert "=== Round" not in text


def test_round1_second_agent_evaluates_agent0_without_comparisons() -> None:
    s = advance(initial_state("q", num_agents=4, max_rounds=3), 1)
    text = user(build_observation(s, 1, config=DEF))
    assert "Only Agent 0 has answered so far" in text
    assert "Evaluate Agent 0's answer" in text
    assert "Make no comparisons yet: write N/A in <comparison>" in text
    assert shown_rounds(text) == [("1", " (in progress)")]


@pytest.mark.parametrize(
    ("agent", "names"), [(2, "Agent 0 and Agent 1"), (3, "Agent 0, Agent 1 and Agent 2")]
)
def test_round1_later_agents_compare_only_agents_who_spoke(agent: int, names: str) -> None:
    s = advance(initial_state("q", num_agents=4, max_rounds=3), agent)
    ref = user(build_observation(s, agent, config=REF))
    ours = user(build_observation(s, agent, config=DEF))
    for text in (ref, ours):
        assert f"So far {names} have answered." in text
        assert f"compare only agents who have already answered ({names}); never yourself" in text
    assert "are discarded" in ours and "are discarded" not in ref


@pytest.mark.parametrize("n", [3, 4])
def test_later_rounds_judge_everything_and_compare_others(n: int) -> None:
    s = advance(initial_state("q", num_agents=n, max_rounds=2), n + 1)
    text = user(build_observation(s, 1, config=REF))
    assert "round 2 of 2 (the last round)" in text
    assert "judge the solutions and whether the earlier evaluations and comparisons hold up" in text
    assert "compare other agents only (never Agent 1)" in text


def test_two_agents_have_nobody_to_compare_after_round_one() -> None:
    s = advance(initial_state("q", num_agents=2, max_rounds=3), 2)
    text = user(build_observation(s, 0))
    assert "round 2 of 3." in text and "write N/A in <comparison>" in text


# --- history window ----------------------------------------------------------------------------------


def test_history_window_with_and_without_partial_round() -> None:
    # 3 agents, 4 rounds: two complete rounds, then agent 0 of round 3 has answered; agent 1 is to act.
    s = numbered(advance(initial_state("q", num_agents=3, max_rounds=4), 7))
    assert current_agent(s) == 1
    ref = user(build_observation(s, 1, config=REF))  # the partial round counts: rounds 2 and 3
    ours = user(build_observation(s, 1, config=DEF))  # two complete rounds plus the partial one
    assert shown_rounds(ref) == [("2", ""), ("3", " (in progress)")]
    assert shown_rounds(ours) == [("1", ""), ("2", ""), ("3", " (in progress)")]
    assert "r1a0" not in ref and "r1a0" in ours and "r3a0" in ref and "r3a0" in ours
    assert history_window(s, REF) == range(1, 3)
    assert history_window(s, DEF) == range(0, 3)


def test_history_window_at_a_round_boundary_is_the_same_for_both() -> None:
    s = numbered(advance(initial_state("q", num_agents=3, max_rounds=4), 9))  # agent 0, round 4
    for cfg in (REF, DEF):
        assert shown_rounds(user(build_observation(s, 0, config=cfg))) == [("2", ""), ("3", "")]
        assert history_window(s, cfg) == range(1, 3)


@pytest.mark.parametrize(
    ("k", "partial", "expected"),
    [
        (-1, True, ["1", "2", "3"]),
        (-1, False, ["1", "2", "3"]),
        (0, True, []),
        (0, False, []),
        (1, True, ["3"]),
        (1, False, ["2", "3"]),
        (5, True, ["1", "2", "3"]),
    ],
)
def test_history_window_sizes(k: int, partial: bool, expected: list[str]) -> None:
    s = advance(initial_state("q", num_agents=3, max_rounds=4), 8)  # round 3 in progress (2 answers)
    cfg = ObservationConfig(history_rounds=k, count_partial_round=partial)
    assert [r for r, _ in shown_rounds(user(build_observation(s, 2, config=cfg)))] == expected


def test_history_marks_own_responses_and_shows_comparison_only_when_given() -> None:
    s = initial_state("q", num_agents=3, max_rounds=2)
    s = submit(s, 0, resp(0, comparison="")).state
    s = submit(s, 1, resp(1, comparison="Agent 0 = Agent 2", yes=True, reason="same")).state
    s = submit(s, 2, resp(2, comparison="   ")).state
    text = user(build_observation(s, 1))
    assert "Agent 1 (you):" in text and "Agent 0:" in text and "Agent 2:" in text
    assert text.count("Comparison:") == 1 and "Comparison: Agent 0 = Agent 2" in text
    assert "Consensus: YES. Reason: same" in text and text.count("Consensus: NO. Reason: fine") == 2


# --- clipping -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abcdef", 3, "abc…"),
        ("abc", 3, "abc"),
        ("  abc  ", 3, "abc"),  # stripped before measuring
        ("ab  cdef", 4, "ab…"),  # the cut is right-stripped
        ("😀😀😀😀", 2, "😀😀…"),  # one code point per emoji
        ("e\u0301e\u0301e\u0301", 3, "e\u0301e…"),  # a combining mark is a code point of its own
        ("e\u0301x", 1, "e…"),
        ("👨\u200d👩\u200d👧", 2, "👨\u200d…"),  # a ZWJ sequence is five code points
        ("👍🏽👍🏽", 3, "👍🏽👍…"),  # skin-tone modifier is one more code point
        ("x" * 900, None, "x" * 900),
    ],
)
def test_clip_field_counts_code_points(text: str, limit: int | None, expected: str) -> None:
    assert clip_field(text, limit) == expected


@given(st.text(max_size=40), st.integers(1, 20))
def test_clip_field_is_a_prefix_of_at_most_max_code_points(text: str, limit: int) -> None:
    out = clip_field(text, limit)
    stripped = text.strip()
    if len(stripped) <= limit:
        assert out == stripped
    else:
        assert out.endswith(ELLIPSIS)
        body = out[: -len(ELLIPSIS)]
        assert body == stripped[:limit].rstrip()
        assert len(out) <= limit + 1


def test_fields_are_clipped_in_the_observation_but_not_the_question() -> None:
    long = "y" * 1000
    s = initial_state("Q" * 900, num_agents=2, max_rounds=2)
    s = submit(s, 0, resp(0, solution="s" * 801, evaluation=long, comparison=long, reason=long)).state
    text = user(build_observation(s, 1, config=REF))
    assert "Q" * 900 in text
    assert f"Solution: {'s' * 800}…\n" in text and "s" * 801 not in text
    assert text.count("y" * 800 + "…") == 3 and "y" * 801 not in text
    whole = user(build_observation(s, 1, config=ObservationConfig(max_chars_per_field=None)))
    assert "s" * 801 in whole and ELLIPSIS not in whole


# --- stop sequences -----------------------------------------------------------------------------------


def test_stop_sequences() -> None:
    assert stop_sequences([128009, 128001, 128009]) == (128009, 128001, 128009)
    assert stop_sequences([np.int64(7)]) == (7,)
    assert stop_sequences(["<|im_end|>"]) == ("<|im_end|>", CONSENSUS_REASON_STOP)
    assert stop_sequences(["\n\nUser:", "<|im_end|>", "\n\nUser:", CONSENSUS_REASON_STOP]) == (
        "\n\nUser:",
        "<|im_end|>",
        CONSENSUS_REASON_STOP,
    )
    assert stop_sequences([CONSENSUS_REASON_STOP, "a"]) == (CONSENSUS_REASON_STOP, "a")
    assert stop_sequences([]) == (CONSENSUS_REASON_STOP,)
    assert stop_sequences(()) == ("</consensus_reason>",)


@pytest.mark.parametrize("bad", [[1, "a"], [True], [1.0], "</x>", [None]])
def test_stop_sequences_refuse_mixed_or_odd_values(bad: object) -> None:
    with pytest.raises(TypeError, match="renderer_stops"):
        stop_sequences(bad)  # type: ignore[arg-type]


# --- configuration and argument checks ------------------------------------------------------------------


def test_presets() -> None:
    assert REF == ObservationConfig(
        history_rounds=2, count_partial_round=True, max_chars_per_field=800, enforce_round1_votes=False
    )
    assert DEF == ObservationConfig()
    assert (DEF.history_rounds, DEF.count_partial_round, DEF.max_chars_per_field) == (2, False, 800)
    compact = ObservationConfig(history_rounds=1, max_chars_per_field=200, brief=True)
    assert OBSERVATION_PRESETS == {"reference": REF, "default": DEF, "compact": compact}


def test_brief_observation_by_hand() -> None:
    s = initial_state("24+48=?", num_agents=3, max_rounds=2)
    s = submit(s, 0, resp(0, yes=False, solution="72")).state
    s = submit(s, 1, resp(1, yes=False, solution="70")).state
    obs = build_observation(s, 2, config=OBSERVATION_PRESETS["compact"])
    assert obs.messages[0].content == (
        "Agent 2 of 3. Reply with the tags solution, evaluation, comparison (Agent a > Agent b, or N/A), "
        "consensus (YES or NO), consensus_reason."
    )
    text = user(obs)
    assert text.startswith("Question:\n24+48=?\n\n=== Round 1 (in progress) ===")
    assert "Solution: 72" in text and "Solution: 70" in text
    assert text.endswith("\n\nRound 1 of 2, Agent 2: compare Agent 0 and Agent 1.")
    first = build_observation(
        initial_state("q", num_agents=3, max_rounds=1), 0, config=OBSERVATION_PRESETS["compact"]
    )
    assert user(first) == "Question:\nq\n\nRound 1 of 1, Agent 0: no comparison."
    # the same history as the full observation, far shorter instructions
    full = build_observation(s, 2, config=ObservationConfig(history_rounds=1, max_chars_per_field=200))
    assert shown_rounds(user(full)) == shown_rounds(text)
    assert len(obs.messages[0].content) < len(full.messages[0].content) // 4


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"history_rounds": -2}, ValueError, "history_rounds"),
        ({"history_rounds": 1.0}, TypeError, "history_rounds"),
        ({"history_rounds": True}, TypeError, "history_rounds"),
        ({"max_chars_per_field": 0}, ValueError, "max_chars_per_field"),
        ({"max_chars_per_field": "800"}, TypeError, "max_chars_per_field"),
        ({"count_partial_round": 1}, TypeError, "count_partial_round"),
        ({"enforce_round1_votes": None}, TypeError, "enforce_round1_votes"),
        ({"brief": "yes"}, TypeError, "brief"),
    ],
)
def test_config_validation_names_the_field(kwargs: dict[str, object], exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        ObservationConfig(**kwargs)  # type: ignore[arg-type]


def test_build_observation_argument_errors() -> None:
    s = initial_state("q", num_agents=2, max_rounds=1)
    with pytest.raises(ValueError, match="agent_id"):
        build_observation(s, 2)
    with pytest.raises(ValueError, match="agent_id"):
        build_observation(s, -1)
    with pytest.raises(TypeError, match="agent_id"):
        build_observation(s, True)
    with pytest.raises(TypeError, match="config"):
        build_observation(s, 0, config={"history_rounds": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="state"):
        build_observation("s", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="over"):
        build_observation(abort(s, "x"), 0)
    assert build_observation(s, np.int64(1)).agent_id == 1  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------------------


@st.composite
def open_debates(draw: st.DrawFn) -> DebateState:
    n = draw(st.integers(1, 4))
    rounds = draw(st.integers(1, 4))
    s = initial_state(draw(st.text(max_size=10)), num_agents=n, max_rounds=rounds)
    for _ in range(draw(st.integers(0, n * rounds - 1))):
        agent = current_agent(s)
        assert agent is not None
        fields = st.text(max_size=12)
        parsed = resp(
            agent,
            yes=False,
            solution=draw(fields),
            evaluation=draw(fields),
            comparison=draw(fields),
            reason=draw(fields),
        )
        s = submit(s, agent, parsed).state
    return s


_configs = st.builds(
    ObservationConfig,
    history_rounds=st.integers(-1, 4),
    count_partial_round=st.booleans(),
    max_chars_per_field=st.one_of(st.none(), st.integers(1, 8)),
    enforce_round1_votes=st.booleans(),
    brief=st.booleans(),
)


@given(open_debates(), _configs)
def test_observation_of_the_current_agent_is_consistent(state: DebateState, cfg: ObservationConfig) -> None:
    agent = current_agent(state)
    assert agent is not None
    obs = build_observation(state, agent, config=cfg)
    text = user(obs)
    assert text.startswith(f"Question:\n{state.question}\n\n")
    if cfg.brief:
        assert obs.messages[0].content.startswith(f"Agent {agent} of {state.num_agents}.")
    else:
        assert f"You are Agent {agent}," in obs.messages[0].content
    window = history_window(state, cfg)
    assert list(window) == _slow_window(state, cfg)
    assert [int(r) for r, _ in shown_rounds(text)] == [r + 1 for r in window]
    # Fields are at most 12 code points, too short to forge a header line.
    assert text.count("\nSolution: ") == sum(len(state.rounds[r]) for r in window)
    if cfg.brief:
        assert f"\n\nRound {obs.round + 1} of {state.max_rounds}, Agent {agent}: " in text
    else:
        assert f"It is your turn, Agent {agent}: round {obs.round + 1} of {state.max_rounds}" in text


def _slow_window(state: DebateState, cfg: ObservationConfig) -> list[int]:
    everything = list(range(len(state.rounds)))
    complete = [r for r in everything if len(state.rounds[r]) == state.num_agents]
    partial = [r for r in everything if len(state.rounds[r]) < state.num_agents]
    k = cfg.history_rounds
    if k < 0:
        return everything
    if k == 0:
        return []
    if cfg.count_partial_round:
        return everything[-k:]
    return complete[-k:] + partial


def test_system_prompt_checks_its_ids() -> None:
    """It rendered ``Agent 5, one of 3 agents`` and ``one of 0 agents (Agent 0 to Agent -1)``."""
    from kernel import system_prompt

    with pytest.raises(ValueError, match=r"agent_id must lie in \[0, 2\], got 5"):
        system_prompt(5, 3)
    with pytest.raises(ValueError, match="num_agents must be >= 1, got 0"):
        system_prompt(0, 0)
    for bad in (1.5, True, "x"):
        with pytest.raises(TypeError, match="agent_id must be an integer"):
            system_prompt(bad, 3)  # type: ignore[arg-type]
    assert system_prompt(np.int64(2), 3).startswith("You are Agent 2, one of 3 agents")
