"""render_response: the exact layout, argument checks, and render → parse round trips (both policies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import PARSE_POLICIES, Vote, parse_response, render_response
from kernel.testing.strategies import agent_field_texts, agent_response_fields


def fields(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "solution": "S",
        "evaluation": "E",
        "comparisons": (),
        "consensus": True,
        "consensus_reason": "R",
    }
    return {**base, **overrides}


def test_layout_is_exact() -> None:
    text = render_response(**fields(comparisons=[Vote(0, ">", 1), Vote(2, "=", 0)]))
    assert text == (
        "<solution>\nS\n</solution>\n"
        "<evaluation>\nE\n</evaluation>\n"
        "<comparison>\nAgent 0 > Agent 1\nAgent 2 = Agent 0\n</comparison>\n"
        "<consensus>YES</consensus>\n"
        "<consensus_reason>\nR\n</consensus_reason>"
    )


def test_empty_comparisons_are_written_na_and_text_is_used_as_is() -> None:
    assert "<comparison>\nN/A\n</comparison>" in render_response(**fields())
    assert "<comparison>\nN/A\n</comparison>" in render_response(**fields(comparisons="  \n"))
    raw = "Agent 1 < Agent 2 (typo kept)"
    assert f"<comparison>\n{raw}\n</comparison>" in render_response(**fields(comparisons=raw))
    assert "<consensus>NO</consensus>" in render_response(**fields(consensus=np.bool_(False)))


def test_plain_tuples_and_numpy_ids_are_votes() -> None:
    text = render_response(**fields(comparisons=[(np.int32(3), ">", 1)]))
    assert "Agent 3 > Agent 1" in text


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"solution": None}, TypeError, "solution"),
        ({"consensus_reason": b"R"}, TypeError, "consensus_reason"),
        ({"consensus": "YES"}, TypeError, "consensus"),
        ({"consensus": 1}, TypeError, "consensus"),
        ({"comparisons": [Vote(0, "<", 1)]}, ValueError, r"comparisons\[0\]\.op"),
        ({"comparisons": [Vote(0, ">=", 1)]}, ValueError, r"comparisons\[0\]\.op"),
        ({"comparisons": [Vote(0, ">", 1), Vote(-1, ">", 1)]}, ValueError, r"comparisons\[1\]"),
        ({"comparisons": [(0, ">")]}, ValueError, r"comparisons\[0\]"),
        ({"comparisons": [(0.5, ">", 1)]}, TypeError, r"comparisons\[0\]"),
        ({"comparisons": [7]}, TypeError, r"comparisons\[0\]"),
    ],
)
def test_bad_arguments_raise_naming_them(
    overrides: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        render_response(**fields(**overrides))


@given(agent_response_fields(), st.integers(-1, 4), st.sampled_from(PARSE_POLICIES))
def test_render_then_parse_round_trips(f: dict[str, Any], author_id: int, policy: str) -> None:
    got = parse_response(render_response(**f), author_id, policy=policy)
    assert got.ok and got.reason == ""
    assert (got.solution, got.evaluation, got.consensus_reason) == (
        f["solution"],
        f["evaluation"],
        f["consensus_reason"],
    )
    assert got.consensus is f["consensus"]
    assert got.votes == tuple(v for v in f["comparisons"] if author_id not in (v.a, v.b))
    assert got.self_votes_dropped == len(f["comparisons"]) - len(got.votes)
    assert got.malformed_votes == ()
    expected_comparison = "\n".join(f"Agent {v.a} {v.op} Agent {v.b}" for v in f["comparisons"]) or "N/A"
    assert got.comparison == expected_comparison


@given(agent_response_fields(), agent_field_texts())
def test_robust_round_trip_survives_reasoning_fences_and_stop_strings(
    f: dict[str, Any], reasoning: str
) -> None:
    text = render_response(**f)
    variants = [
        f"{reasoning}\n</think>\n\n{text}",  # Qwen3: the sample starts inside the think block
        f"<think>\n{reasoning}\n</think>\n{text}",
        f"```xml\n{text}\n```",
        text.removesuffix("</consensus_reason>"),  # the sampler stripped the stop string
        render_response(**{**f, "solution": "draft"}) + "\n" + text,  # a draft block first
    ]
    if f["consensus_reason"].rpartition("\n")[2].strip() == "```":
        variants.remove(text.removesuffix("</consensus_reason>"))  # an unclosed field drops a final fence
    for variant in variants:
        got = parse_response(variant)
        assert got.ok, variant
        assert (got.solution, got.consensus_reason, got.consensus) == (
            f["solution"],
            f["consensus_reason"],
            f["consensus"],
        )
        assert got.votes == tuple(f["comparisons"])


def test_render_refuses_votes_the_parser_would_not_read_back() -> None:
    """An id of 10 digits rendered fine and parsed back as a malformed vote, as did a 513th vote line."""
    with pytest.raises(ValueError, match=r"comparisons\[0\] agent ids must have at most 9 digits"):
        render_response(
            solution="s",
            evaluation="e",
            comparisons=[Vote(10**9, ">", 1)],
            consensus=True,
            consensus_reason="r",
        )
    with pytest.raises(ValueError, match="comparisons must hold at most 512 votes"):
        render_response(
            solution="s",
            evaluation="e",
            comparisons=[Vote(1, ">", 2)] * 513,
            consensus=True,
            consensus_reason="r",
        )
    for votes in ([Vote(10**9 - 1, ">", 1)], [Vote(1, ">", 2)] * 512):
        text = render_response(
            solution="s", evaluation="e", comparisons=votes, consensus=True, consensus_reason="r"
        )
        for policy in PARSE_POLICIES:
            parsed = parse_response(text, 0, policy=policy)
            assert list(parsed.votes) == votes and not parsed.malformed_votes
