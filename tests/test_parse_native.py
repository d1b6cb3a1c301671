"""The compiled reader of the usual output (benchmarks/prototypes/parse_native, optional) against the
pure-Python robust parser, its oracle: on every text it either declines (None) or gives the oracle's
result, votes' packed codes included; and it reads the usual outputs rather than declining them.

The reader is a prototype that the default install does not build (it needs Cython and a C compiler):
the comparisons are skipped where it is not installed. The switch that plugs it in is tested with a
stand-in reader everywhere.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernel import ParsedResponse, Vote, _parse_robust
from kernel.testing.strategies import agent_outputs, near_miss_xml
from tests.test_parse import _LT_PIECES, answer, answers_written_again, comparison_blocks, usual_layouts

oracle = _parse_robust._PYTHON_PARSE_ROBUST
built = importlib.util.find_spec("debate_parse_native") is not None
needs_native = pytest.mark.skipif(
    not built,
    reason="the native parser prototype is not built: pip install benchmarks/prototypes/parse_native",
)


def test_the_switch_asks_the_native_reader_first_and_the_parser_when_it_declines() -> None:
    asked = []

    def native(text: str, author_id: int) -> ParsedResponse | None:
        asked.append(text)
        return ParsedResponse.make(author_id, solution="native") if text == "mine" else None

    parse = _parse_robust._native_first(native, oracle)
    assert parse("mine", 1).solution == "native"
    assert parse(answer("Agent 1 > Agent 2"), 0) == oracle(answer("Agent 1 > Agent 2"), 0)
    assert asked == ["mine", answer("Agent 1 > Agent 2")]


def _same_or_declined(text: str, author_id: int) -> bool:
    """The native reader's result equals the oracle's (codes included), or it declined; whether it read."""
    from debate_parse_native import read_usual

    got = read_usual(text, author_id)
    if got is not None:
        want = oracle(text, author_id)
        assert got == want
        assert got.vote_codes == want.vote_codes and type(got) is ParsedResponse
    return got is not None


# Pieces of usual outputs and of their near misses: whitespace and zero-width characters at field edges,
# "<" runs before characters that do and do not start a tag (non-ASCII letters and digits too), tags
# in another case or nested, think markers.
_FIELD_PIECES = (
    "x", " ", "\n", "\t", "\u00a0", "\u2003", "\u200b", "\ufeff", "\x1c", "é", "√", "Ж",
    *_LT_PIECES, "<é", "<٣", "<_", "<<x", "< /", "<SOLUTION>", "<solution>", "</solution>",
    "<comparison>", "</think>", "</THINK>", "<think>",
)  # fmt: skip
_LINES = (
    "Agent 1 > Agent 2",
    "agent 0 = Agent 3",
    "Agent 2 < agent 1",
    "Agent 3 == Agent 0",
    "Agent 9 > Agent 1",
    "Agent 1 >  Agent 2",
    "Agent 1 > Agent 2\r",
    "agent 10 > Agent 2",
    "Agent ١ > Agent 2",
    "AGENT 1 > Agent 2",
    "Agent 1 >= Agent 2",
    "Agent 1 > Agent 2 > Agent 3",
    "- Agent 1 > Agent 2",
    "- agent 3 == Agent 0",
    "-  Agent 1 > Agent 2",
    "-Agent 1 > Agent 2",
    "- ",
    "-",
    "",
    " ",
    "\u200b",
    "**",
    " \t",
    "**Agent 1** > **Agent 2**",
    "Agent1 = Agent3 (same answer)",
    "1. agent 0 < AGENT 2",
    "Agent 1 > Agent 2 (agent 3 too)",
    "a) Agent 1 > Agent 2",
    "Agent 1 > Agent 2 \u2014 ok",
    "Agent 1 > Agent 2 > Agent",
    "Agent 1 >\tAgent 2",
    "Agent 1 =*= Agent 2",
    "Agent 1*2 > Agent 3",
    "Agent 1 > Agent 2 > Agent 3 > Agent 1",
    "Agent #1 > Agent 2",
    "Agent-1 > Agent 2",
    "Agent 1 > Agent 2 >= Agent 3",
    "x Agent 1 > Agent 2",
    "None yet.",
    "n/a - agent 2",
    "**N/A**",
    "n/ab",
    "N/a.",
    "nothing here",
    "noted",
    "1 none",
    "---",
    "_none_",
    "not *sure*",
    "né",
)
_EMPTY_BLOCKS = ("", "N/A", "n/a", "NA", "None", "none", "None.", "N/A.", "n/a.", "NONE", "-")
_CONSENSUS = ("YES", "NO", "Yes", "no", "yes.", "**YES**", "YES/NO", "Ｙｅｓ", "", "true")


@st.composite
def usual_outputs(draw: st.DrawFn) -> str:
    """Answers in the usual layout and their near misses."""

    def text(size: int = 3) -> str:
        return "".join(draw(st.lists(st.sampled_from(_FIELD_PIECES), max_size=size)))

    if draw(st.booleans()):
        block = draw(st.sampled_from(_EMPTY_BLOCKS))
    else:
        block = draw(st.sampled_from(("\n", "\n\n"))).join(
            draw(st.lists(st.sampled_from(_LINES), max_size=5))
        )
    out = answer(
        text() + block + text(),
        text() + draw(st.sampled_from(_CONSENSUS)) + text(),
        solution=text() + "S" + text(),
        reason=text(),
    )
    head = draw(st.sampled_from(("", "", "reasoning</think>", "<think>x</think>\n", "</THINK>", "Sure: ")))
    out = text() + head + out + text()
    if draw(st.integers(0, 5)) == 0:  # the stop string stripped
        out = out[: out.rfind("</")]
    return out


AUTHORS = st.sampled_from([-1, 0, 1, 2, 3, 9, 10, 12, -5, 2**70])


@needs_native
@given(usual_outputs(), AUTHORS)
@example("<solution>S</solution><evaluation>E</evaluation><comparison>Agent 1 > Agent 2</comparison>", 0)
def test_native_reader_gives_the_oracles_result_or_declines_on_usual_outputs(
    text: str, author_id: int
) -> None:
    _same_or_declined(text, author_id)


@needs_native
@given(
    st.one_of(
        st.text(),
        near_miss_xml(),
        agent_outputs(),
        usual_layouts(),
        answers_written_again(),
        comparison_blocks().map(answer),
    ),
    AUTHORS,
)
def test_native_reader_gives_the_oracles_result_or_declines_on_any_text(text: str, author_id: int) -> None:
    _same_or_declined(text, author_id)


@needs_native
def test_native_reader_reads_the_usual_outputs_and_declines_the_others() -> None:
    usual = {
        "plain lines": answer("Agent 1 > Agent 2\nagent 3 == Agent 0\nAgent 2 < Agent 1", "YES"),
        "self-votes": answer("Agent 0 > Agent 2\nAgent 1 = Agent 0"),
        "no vote": answer("N/A", "no"),
        "empty block": answer(""),
        "after reasoning": "Let me think. <b>bold</b></think>\n" + answer("Agent 1 > Agent 2"),
        "unicode and zero-width edges": answer(
            "\u200b Agent 1 > Agent 2\u2003", "Yes", solution="\ufeff√2\u200b"
        ),
        "consensus read by the oracle's rule": answer("N/A", "**YES**"),
        "a '<' that starts no tag": answer("Agent 1 > Agent 2", solution="x < y, a <= b, <<< 3"),
        "list items": answer("- Agent 1 > Agent 2\nAgent 2 = Agent 3\n-agent 0 < Agent 3"),
        "clean chains": answer("Agent 1 > Agent 2 > Agent 3\n\n**Agent 1** = **Agent3** (same answer)"),
        "lines that say there is no vote": answer("None yet.\n- Agent 1 > Agent 2\n**N/A**\n---", "NO"),
        "emphasis and case": answer("1. *agent 0* < AGENT 2: better reasoning\n`Agent 2` == Agent 1", "NO"),
    }
    for name, text in usual.items():
        assert _same_or_declined(text, 0), name
    declined = {
        "ambiguous operator": answer("Agent 1 >= Agent 2"),
        "prose": answer("Agent 1 is better than Agent 2"),
        "an id of two digits": answer("Agent 12 > Agent 1"),
        "an agent in the tail": answer("Agent 1 > Agent 2 (so does agent 3)"),
        "a letter in the head": answer("a) Agent 1 > Agent 2"),
        "a non-ASCII tail": answer("Agent 1 > Agent 2 \u2014 yes"),
        "a blank last line": answer("Agent 1 > Agent 2\n**"),
        "a line without a comparison": answer("Agent 1 > Agent 2\nI agree with most."),
        "other tag": answer(solution="<b>x</b>"),
        "tag case": answer().replace("<solution>", "<Solution>"),
        "unclosed": answer()[: -len("</consensus_reason>")],
        "answer written twice": answer() + answer(),
        "think marker of another spelling": answer(solution="</Think>"),
        "non-ASCII letter after '<'": answer(solution="<é"),
    }
    for name, text in declined.items():
        assert not _same_or_declined(text, 0), name
    r = _same_or_declined(answer("Agent 0 > Agent 2\nAgent 1 = Agent 0"), 0)
    assert (
        r
        and _parse_robust._PYTHON_PARSE_ROBUST(answer("Agent 0 > Agent 2\nAgent 1 = Agent 0"), 0).votes == ()
    )


@needs_native
@pytest.mark.parametrize("lines", [1, 510, 511, 512, 513])
def test_native_reader_at_the_line_limits(lines: int) -> None:
    block = "\n".join(["Agent 1 > Agent 2"] * lines)
    read = _same_or_declined(answer(block), 0)
    assert read == (lines <= 511)  # past that the line reader records a limit: the oracle reads it
    assert oracle(answer(block), 0).votes[:1] == (Vote(1, ">", 2),)


@needs_native
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_native_reader_at_the_size_limit_and_on_huge_inputs(extra: int) -> None:
    base = answer("Agent 1 > Agent 2")
    limit = _parse_robust._MAX_SIMPLE_CHARS
    text = answer("Agent 1 > Agent 2", solution="x" * (limit - len(base) + 1 + extra))
    assert len(text) == limit + extra
    assert _same_or_declined(text, 0) == (extra <= 0)
    assert _same_or_declined("reasoning " * 100_000 + "</think>" + base, 0)  # the answer alone counts
    assert not _same_or_declined("<" * 100_000 + "<solution>" * 10_000, 0)
