"""parse_response: the v1 quirks (policy="reference"), the robust fixes, totality, and every shortcut
against the general reader (linear time is measured in benchmarks/bench_parse.py)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import sys
import typing
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernel import (
    MALFORMED_VOTE_REASONS,
    PARSE_FAILURE_REASONS,
    PARSE_POLICIES,
    MalformedVote,
    ParsedResponse,
    Vote,
    _parse,
    _parse_common,
    _parse_reference,
    _parse_robust,
    parse_response,
)
from kernel._types import SMALL_VOTES, pack_votes
from kernel.testing.strategies import agent_outputs, near_miss_xml
from tests.golden import VECTORS_DIR, read_records
from tests.golden._parse_v1 import check as golden_check

# ------------------------------------------------------------------------------------------------
# The v1 algorithm written literally from REFERENCE.md §1 (slow regexes and all): an oracle for small
# inputs. Returns the golden record's ``expected`` layout, without the error message. v1 also strips
# the text again after removing a fence and after deleting think markers (§1 leaves both out; no
# golden record tells, but a CRLF output ending in a fence does: its "\r" before the fence goes).


def v1_oracle(text: str, author_id: int) -> dict[str, Any]:
    t = text.strip()
    if t.startswith("```"):
        t = re.sub(r"^```[a-zA-Z0-9_-]*\n", "", t)
        t = re.sub(r"\n```$", "", t)
        t = t.strip()
    m = re.search(r"<(solution|evaluation|comparison|consensus)\b", t)
    if m:
        t = t[m.start() :]
    t = re.sub(r"</?think>", "", t, flags=re.IGNORECASE).strip()

    def tag(name: str, flags: int = 0) -> str | None:
        found = re.search(rf"<{name}>(.*?)</{name}>", t, re.DOTALL | flags)
        return None if found is None else found.group(1).strip()

    fields = {
        "solution": tag("solution"),
        "evaluation": tag("evaluation"),
        "consensus": tag("consensus", re.IGNORECASE),
        "consensus_reason": tag("consensus_reason"),
    }
    for name, value in fields.items():
        if value is None:
            return {"ok": False, "error": name}
    comparison = tag("comparison", re.IGNORECASE) or ""
    votes = [
        [int(a), op, int(b)] for a, op, b in re.findall(r"Agent\s+(\d+)\s*([>=])\s*Agent\s+(\d+)", comparison)
    ]
    return {
        "ok": True,
        "solution": fields["solution"],
        "evaluation": fields["evaluation"],
        "comparison_text": comparison,
        "consensus": str(fields["consensus"]).strip().upper() == "YES",
        "consensus_reason": fields["consensus_reason"],
        "comparisons": [v for v in votes if author_id not in (v[0], v[2])],
        "raw_response": t,
    }


def as_record(result: ParsedResponse) -> dict[str, Any]:
    if not result.ok:
        return {"ok": False, "error": result.reason.removeprefix("missing_")}
    return {
        "ok": True,
        "solution": result.solution,
        "evaluation": result.evaluation,
        "comparison_text": result.comparison,
        "consensus": result.consensus,
        "consensus_reason": result.consensus_reason,
        "comparisons": [list(v) for v in result.votes],
        "raw_response": result.normalized_text,
    }


def ref(text: str, author_id: int = -1) -> ParsedResponse:
    return parse_response(text, author_id, policy="reference")


def rob(text: str, author_id: int = -1) -> ParsedResponse:
    return parse_response(text, author_id)


def answer(comparison: str = "N/A", consensus: str = "NO", solution: str = "S", reason: str = "R") -> str:
    return (
        f"<solution>{solution}</solution><evaluation>E</evaluation><comparison>{comparison}</comparison>"
        f"<consensus>{consensus}</consensus><consensus_reason>{reason}</consensus_reason>"
    )


# ------------------------------------------------------------------------------------------------
# Golden vectors and the oracle.

GOLDEN = list(read_records(VECTORS_DIR / "parse_v1.jsonl"))


def test_golden_has_2100_records_and_all_pass() -> None:
    assert len(GOLDEN) == 2100
    failures = [(r["id"], msg) for r in GOLDEN if (msg := golden_check(r)) is not None]
    assert failures == []


def test_golden_checker_catches_a_wrong_field_and_a_wrong_reason() -> None:
    ok = next(r for r in GOLDEN if r["expected"]["ok"] and r["expected"]["comparisons"])
    bad = json.loads(json.dumps(ok))
    bad["expected"]["comparisons"][0][0] += 1
    assert golden_check(bad) is not None
    bad = json.loads(json.dumps(ok))
    bad["expected"]["raw_response"] += " "
    assert golden_check(bad) is not None
    failing = next(r for r in GOLDEN if r["expected"].get("error") == "evaluation")
    bad = json.loads(json.dumps(failing))
    bad["expected"]["error"] = "consensus"
    assert golden_check(bad) == "reason 'missing_evaluation', expected 'missing_consensus'"


def test_the_oracle_reproduces_the_golden_vectors() -> None:
    for record in GOLDEN:
        expected = dict(record["expected"])
        if not expected["ok"]:
            expected = {"ok": False, "error": expected["error"]}
        assert v1_oracle(**record["input"]) == expected, record["id"]


def _families(records: list[dict[str, Any]]) -> set[str]:
    return {record["id"].split("/")[2] for record in records}


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_reference_policy_on_other_line_endings_of_every_golden_record(newline: str) -> None:
    # Every golden input with its line breaks rewritten, against the oracle: every field compared.
    assert len(_families(GOLDEN)) == 23
    differ = []
    for record in GOLDEN:
        text, author_id = record["input"]["text"].replace("\n", newline), record["input"]["author_id"]
        got = ref(text, author_id)
        if (as_record(got), got.malformed_votes) != (v1_oracle(text, author_id), ()):
            differ.append(record["id"])
    assert differ == []


def test_robust_policy_reads_the_crlf_variant_of_every_golden_record_as_the_original() -> None:
    def fields(r: ParsedResponse, newline: str) -> tuple[object, ...]:
        texts = (r.solution, r.evaluation, r.comparison, r.consensus_reason, r.normalized_text)
        lines = tuple((m.line.replace(newline, "\n"), m.reason) for m in r.malformed_votes)
        fixed = (r.ok, r.reason, r.votes, r.consensus, r.self_votes_dropped)
        return (*fixed, lines, *(t.replace(newline, "\n") for t in texts))

    differ = []
    for record in GOLDEN:
        text, author_id = record["input"]["text"], record["input"]["author_id"]
        crlf = rob(text.replace("\n", "\r\n"), author_id)
        if fields(crlf, "\r\n") != fields(rob(text, author_id), "\n"):
            differ.append(record["id"])
    assert differ == []


def test_reference_strips_again_after_the_fence_and_the_think_markers() -> None:
    crlf = ref("```xml\r\n" + answer().replace("><", ">\r\n<") + "\r\n```")
    assert crlf.ok and crlf.normalized_text == answer().replace("><", ">\r\n<")
    assert ref("```\n" + answer() + " \n\n```").normalized_text == answer()
    assert ref(answer() + "\n</think>").normalized_text == answer()
    assert ref("<think>\n</think>\n" + answer()).normalized_text == answer()


@given(st.one_of(near_miss_xml(), agent_outputs(), st.text(max_size=60)), st.sampled_from([-1, 0, 1, 2, 7]))
def test_reference_policy_equals_the_v1_algorithm(text: str, author_id: int) -> None:
    assert as_record(ref(text, author_id)) == v1_oracle(text, author_id)


# ------------------------------------------------------------------------------------------------
# policy="reference": each quirk of v1, hand-computed.


@pytest.mark.parametrize(
    ("line", "votes"),
    [
        ("Agent 1 > Agent 2", [(1, ">", 2)]),
        ("Agent 1 = Agent 2", [(1, "=", 2)]),
        ("Agent 1 < Agent 2", []),
        ("Agent 1 >= Agent 2", []),
        ("Agent 1 == Agent 2", []),
        ("Agent 1 => Agent 2", []),
        ("Agent 1 ≻ Agent 2", []),
        ("Agent 1 ≥ Agent 2", []),
        ("agent 1 > agent 2", []),
        ("AGENT 1 > AGENT 2", []),
        ("Agent1 > Agent2", []),
        ("**Agent 1** > **Agent 2**", []),
        ("| Agent 1 | > | Agent 2 |", []),
        ("**Agent 1 > Agent 2**", [(1, ">", 2)]),
        ("Agent 1 > Agent 2 > Agent 3", [(1, ">", 2)]),
        ("I rank Agent 1 > Agent 2 and Agent 3 = Agent 1.", [(1, ">", 2), (3, "=", 1)]),
        ("Agent\n1 >\tAgent 2", [(1, ">", 2)]),
        ("Agent\u00a01 >\u2003Agent\u30002", [(1, ">", 2)]),
        ("Agent ١ > Agent ٢", [(1, ">", 2)]),
        ("Agent ３ = Agent ४", [(3, "=", 4)]),
        ("Agent 01 > Agent 007", [(1, ">", 7)]),
        ("Agent 9 > Agent 99", [(9, ">", 99)]),
        ("Agent 2 = Agent 2", [(2, "=", 2)]),
    ],
)
def test_reference_vote_regex_quirks(line: str, votes: list[tuple[int, str, int]]) -> None:
    got = ref(answer(line))
    assert got.ok
    assert got.votes == tuple(Vote(*v) for v in votes)
    assert got.malformed_votes == ()


def test_reference_self_votes_dropped_out_of_range_and_ties_kept() -> None:
    text = answer(
        "Agent 0 > Agent 1\nAgent 1 > Agent 0\nAgent 5 > Agent 9\nAgent 2 = Agent 2\nAgent 0 = Agent 0"
    )
    got = ref(text, 0)
    assert got.votes == (Vote(5, ">", 9), Vote(2, "=", 2))
    assert got.self_votes_dropped == 3
    assert len(ref(text, -1).votes) == 5
    assert ref(text, -1).self_votes_dropped == 0


def test_reference_tag_case_rules() -> None:
    assert ref(answer().replace("solution>", "SOLUTION>")).reason == "missing_solution"
    assert ref(answer().replace("<evaluation>", "<Evaluation>")).reason == "missing_evaluation"
    assert (
        ref(answer().replace("consensus_reason>", "Consensus_Reason>")).reason == "missing_consensus_reason"
    )
    mixed = ref(
        answer("Agent 1 > Agent 2", "yes")
        .replace("</comparison>", "</COMPARISON>")
        .replace("<consensus>", "<CONSENSUS>")
    )
    assert mixed.ok and mixed.consensus and mixed.votes == (Vote(1, ">", 2),)
    # re.IGNORECASE also matches the long s, dotless i and the Kelvin sign.
    odd = ref(
        answer(consensus="YES")
        .replace("consensus>", "conſenſus>")
        .replace("<comparison>", "<\u212aomparison>")
    )
    assert odd.ok and odd.consensus
    assert ref("<thınk>" + answer()).normalized_text == answer()


def test_reference_think_markers_removed_anywhere_and_text_kept() -> None:
    got = ref(answer(solution="a<think>b</THINK>c<Think>", consensus="YE<think>S"))
    assert got.solution == "abc" and got.consensus
    assert ref("<think>x</think>" + answer()).normalized_text == answer()
    assert ref("</<think>think>" + answer()).normalized_text == answer()  # one pass: "</think>" left
    joined = ref(answer(solution="</<think>think>"))
    assert joined.solution == "</think>"


def test_reference_first_occurrence_wins_and_order_is_not_checked() -> None:
    two = ref(answer(solution="first", consensus="YES") + answer(solution="second"))
    assert two.solution == "first" and two.consensus
    backwards = (
        "<consensus_reason>R</consensus_reason><consensus>NO</consensus>"
        "<evaluation>E</evaluation><solution>S</solution>"
    )
    assert ref(backwards).reason == "missing_consensus_reason"  # cut at <consensus: the reason is lost
    nested = ref(
        "<solution>a <evaluation>inner</evaluation> b</solution>" + answer()[len("<solution>S</solution>") :]
    )
    assert nested.evaluation == "inner"


def test_reference_preamble_cut() -> None:
    mention = "I will put the answer in <solution> tags.\n" + answer(solution="real")
    got = ref(mention)
    assert got.solution == "tags.\n<solution>real"
    assert got.normalized_text.startswith("<solution> tags.")
    draft = ref("<think>Draft: <solution>draft</solution></think>" + answer(solution="final"))
    assert draft.solution == "draft"
    echo = ref("<think>Use <consensus>, <consensus_reason> and so on.</think>" + answer(consensus="YES"))
    assert echo.ok and not echo.consensus  # the value ", <consensus_reason> and so on." is not YES
    assert ref("<consensus_reasonable>" + answer()).normalized_text.startswith("<solution>")
    assert ref("<solutions>" + answer()).normalized_text.startswith("<solution>S")
    assert ref("\ufeff" + answer()).normalized_text == answer()  # a BOM goes only through the cut


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("```xml\n" + answer() + "\n```", answer()),
        ("```\n" + answer() + "\n```", answer()),
        ("```xml-v1\n" + answer() + "\n```", answer()),
        ("```xml\r\n" + answer(), answer()),  # not a fence line for v1; the cut removes it
        ("``` xml\n" + answer() + "\n```", answer()),
        ("Here:\n```xml\n" + answer() + "\n```", answer() + "\n```"),  # not at the start: kept
        ("```xml\n" + answer() + "\n```\nDone.", answer() + "\n```\nDone."),
    ],
)
def test_reference_fence_rules(text: str, normalized: str) -> None:
    assert ref(text).normalized_text == normalized


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("YES", True), ("yes", True), ("yEs", True), ("\tyes\t", True), ("YES\u00a0", True),
        (" YES\u3000", True),
        ("Yes.", False), ("YES - agreed", False), ("**YES**", False), ("'YES'", False), ("YES\u200b", False),
        ("ＹＥＳ", False), ("ｙｅｓ", False), ("N/A", False), ("NO", False), ("", False),
    ],
)  # fmt: skip
def test_reference_consensus(value: str, expected: bool) -> None:
    got = ref(answer(consensus=value))
    assert got.ok and got.consensus is expected


def test_reference_strip_set_is_python_whitespace() -> None:
    for ch in "\x1c\x1d\x1e\x1f\x85\u00a0\u2028\u3000\u2003":
        assert ref(answer(solution=f"{ch}x{ch}")).solution == "x"
    for ch in "\u200b\ufeff":
        assert ref(answer(solution=f"{ch}x{ch}")).solution == f"{ch}x{ch}"


def test_reference_optional_comparison_and_empty_fields() -> None:
    no_comparison = ref(answer().replace("<comparison>N/A</comparison>", ""))
    assert no_comparison.ok and no_comparison.comparison == "" and no_comparison.votes == ()
    unclosed = ref(answer("Agent 1 > Agent 2").replace("</comparison>", ""))
    assert unclosed.ok and unclosed.votes == () and unclosed.comparison == ""
    skeleton = ref(answer("", "", "", ""))
    assert skeleton.ok and skeleton.solution == "" and skeleton.consensus is False
    assert ref(answer().replace("<consensus>NO</consensus>", "<consensus></consensus>")).ok


def test_reference_failure_reasons_in_v1_order() -> None:
    assert ref("").reason == "missing_solution"
    assert ref("<evaluation>E</evaluation>").reason == "missing_solution"
    assert ref("<solution>S</solution><consensus>YES</consensus>").reason == "missing_evaluation"
    assert ref("<solution>S</solution><evaluation>E</evaluation>").reason == "missing_consensus"
    got = ref(answer().removesuffix("</consensus_reason>"))  # a stripped stop string
    assert (got.ok, got.reason, got.votes, got.consensus) == (False, "missing_consensus_reason", (), False)
    assert got.solution == "S"  # the fields found are kept for diagnostics


def test_reference_giant_agent_id_is_malformed_instead_of_raising() -> None:
    digits = "7" * 5000
    got = ref(answer(f"Agent {digits} > Agent 1\nAgent {'0' * 5000}2 > Agent 1"))
    assert got.ok
    assert got.votes == (Vote(2, ">", 1),)
    assert [m.reason for m in got.malformed_votes] == ["bad_agent_id"]


# ------------------------------------------------------------------------------------------------
# policy="robust": each fix, hand-computed.


@pytest.mark.parametrize(
    ("line", "votes"),
    [
        ("Agent 1 < Agent 2", [(2, ">", 1)]),
        ("Agent 1 > Agent 2 > Agent 3", [(1, ">", 2), (2, ">", 3)]),
        ("Agent 1 > Agent 2 = Agent 3", [(1, ">", 2), (2, "=", 3)]),
        ("Agent 3 < Agent 2 < Agent 1", [(2, ">", 3), (1, ">", 2)]),
        ("Agent 1 == Agent 2", [(1, "=", 2)]),
        ("agent 1 > agent 2", [(1, ">", 2)]),
        ("AGENT 1 > AGENT 2", [(1, ">", 2)]),
        ("Agent1 > Agent2", [(1, ">", 2)]),
        ("Agent #1 > Agent-2", [(1, ">", 2)]),
        ("Agent-1 > agent-01", [(1, ">", 1)]),
        ("**Agent 1** > **Agent 2**", [(1, ">", 2)]),
        ("*Agent 1* = *Agent 2*", [(1, "=", 2)]),
        ("`Agent 1` > __Agent 2__", [(1, ">", 2)]),
        ("- Agent 1 > Agent 2: clearer proof (Agent 2 skipped a step)", [(1, ">", 2)]),
        ("1. Agent 4 > Agent 1; Agent 2 = Agent 3", [(4, ">", 1), (2, "=", 3)]),
        ("Agent ١ > Agent 0٢", [(1, ">", 2)]),
        ("Agent 2 = Agent 2", [(2, "=", 2)]),
        ("Agent 8 > Agent 99", [(8, ">", 99)]),
    ],
)
@pytest.mark.parametrize("reader", ["shipped", "general"])
def test_robust_vote_syntax(line: str, votes: list[tuple[int, str, int]], reader: str) -> None:
    with _patched(READERS[reader]):
        got = rob(answer(line))
    assert got.ok
    assert got.votes == tuple(Vote(*v) for v in votes)
    assert got.malformed_votes == ()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("Agent 1 >= Agent 2", "ambiguous_operator"),
        ("Agent 1 => Agent 2", "ambiguous_operator"),
        ("Agent 1 <= Agent 2", "ambiguous_operator"),
        ("Agent 1 ≥ Agent 2", "ambiguous_operator"),
        ("Agent 1 ≤ Agent 2", "ambiguous_operator"),
        ("Agent 1 >> Agent 2", "unknown_operator"),
        ("Agent 1 ≻ Agent 2", "unknown_operator"),
        ("Agent 1 -> Agent 2", "unknown_operator"),
        ("Agent 1 != Agent 2", "unknown_operator"),
        ("Agent 1 is better than Agent 2", "no_operator"),
        ("Agent 1", "no_operator"),
        ("Both answers look fine to me.", "no_comparison"),
        ("1 > 2", "no_comparison"),
        ("Agent 1234567890 > Agent 2", "bad_agent_id"),
        ("Agent 1 >", "no_operator"),
        ("- **Agent 1** >", "no_operator"),
        ("< Agent 2", "no_operator"),
        ("Agent 1 Agent 2", "no_operator"),
        ("Agent -1 > Agent 2", "signed_agent_id"),
        ("Agent 1 > Agent +2", "signed_agent_id"),
        ("agent+1 = agent 2", "signed_agent_id"),
        ("Agent #-1 < Agent 2", "signed_agent_id"),
        ("Agent--1 > Agent 2", "signed_agent_id"),
        ("Agent \u22121 > Agent 2", "signed_agent_id"),
    ],
)
@pytest.mark.parametrize("reader", ["shipped", "general"])
def test_robust_unreadable_lines_are_counted_with_a_reason(line: str, reason: str, reader: str) -> None:
    with _patched(READERS[reader]):
        got = rob(answer(line))
    assert got.ok and got.votes == ()
    assert got.malformed_votes == (MalformedVote(line, reason),)
    assert reason in MALFORMED_VOTE_REASONS


@pytest.mark.parametrize(
    "block", ["N/A", "n/a (first round)", "None yet.", "none", "No comparisons yet.", "", "-", "---", "```"]
)
def test_robust_not_a_comparison_lines_are_skipped(block: str) -> None:
    got = rob(answer(block))
    assert got.ok and got.votes == () and got.malformed_votes == ()


def test_robust_mixed_line_keeps_votes_and_records_the_bad_operator() -> None:
    got = rob(answer("Agent 1 > Agent 2 >= Agent 3\n\n  Agent 0 = Agent 3  \nsome prose"), author_id=0)
    assert got.votes == (Vote(1, ">", 2),)
    assert got.self_votes_dropped == 1
    assert got.malformed_votes == (
        MalformedVote("Agent 1 > Agent 2 >= Agent 3", "ambiguous_operator"),
        MalformedVote("some prose", "no_comparison"),
    )


def test_robust_self_votes_dropped_inside_chains() -> None:
    got = rob(answer("Agent 2 > Agent 1 > Agent 3\nAgent 1 < Agent 0"), author_id=1)
    assert got.votes == ()
    assert got.self_votes_dropped == 3


def test_robust_comparison_limits() -> None:
    many_lines = rob(answer("\n".join(f"Agent {i} > Agent {i + 1}" for i in range(600))))
    assert len(many_lines.votes) == 512
    assert many_lines.malformed_votes == (MalformedVote("Agent 512 > Agent 513", "comparison_limit"),)
    long_chain = rob(answer(" > ".join(f"Agent {i}" for i in range(2000))))
    assert len(long_chain.votes) == 1023
    assert [m.reason for m in long_chain.malformed_votes] == ["comparison_limit"]


def test_robust_qwen3_reasoning_without_an_opening_tag_is_never_parsed() -> None:
    text = "Okay, the user wants <solution>5</solution> maybe; Agent 1 > Agent 2.\n</think>\n\n" + answer(
        "Agent 2 > Agent 1"
    )
    got = rob(text)
    assert got.ok and got.solution == "S" and got.votes == (Vote(2, ">", 1),)
    assert got.normalized_text == answer("Agent 2 > Agent 1")
    v1 = ref(text)
    assert v1.solution == "5"  # the reference takes the tag mentioned in the reasoning


def test_robust_tags_inside_a_think_block_are_never_parsed() -> None:
    text = (
        "<think>Draft: " + answer(solution="draft", consensus="YES") + "</think>" + answer(solution="final")
    )
    got = rob(text)
    assert got.solution == "final" and not got.consensus
    only_reasoning = rob("<think>\n" + answer())
    assert (only_reasoning.ok, only_reasoning.reason) == (False, "unclosed_think")
    assert rob("  <THINK>" + answer()).reason == "unclosed_think"
    mention = rob(answer(solution="Models write <think> first"))
    assert mention.ok and mention.solution == "Models write <think> first"
    nested = rob("<think>a <think> b </think> c </think>" + answer())
    assert nested.ok and nested.normalized_text == answer()


def test_robust_last_complete_block_wins() -> None:
    two = rob(answer(solution="draft", consensus="YES") + "\nWait, let me redo.\n" + answer(solution="final"))
    assert two.solution == "final" and not two.consensus
    incomplete_last = rob(answer(solution="complete") + "<solution>new</solution><evaluation>E2</evaluation>")
    assert incomplete_last.solution == "complete" and incomplete_last.evaluation == "E"
    junk_after = rob(answer(solution="real") + "\nHope the <solution>")
    assert junk_after.ok and junk_after.solution == "real"
    duplicate_tag = rob(answer(consensus="YES") + "<consensus>YES</consensus>")
    assert duplicate_tag.ok and duplicate_tag.consensus


def test_robust_block_fields_do_not_leak_between_blocks() -> None:
    text = answer("Agent 1 > Agent 2", solution="draft") + (
        "<solution>final</solution><evaluation>E2</evaluation><consensus>YES</consensus>"
        "<consensus_reason>R2</consensus_reason>"
    )
    got = rob(text)
    assert (got.solution, got.evaluation, got.consensus_reason, got.consensus) == ("final", "E2", "R2", True)
    assert got.comparison == "" and got.votes == ()


def test_robust_misordered_block_and_preamble_mentions() -> None:
    backwards = (
        "<consensus_reason>R</consensus_reason><consensus>yes</consensus>"
        "<evaluation>E</evaluation><solution>S</solution>"
    )
    got = rob(backwards)
    assert got.ok and got.consensus and got.consensus_reason == "R"
    preamble = rob("I answer with <consensus>YES</consensus> or NO and a <solution> tag.\n" + answer())
    assert preamble.ok and preamble.solution == "S" and not preamble.consensus


def test_robust_unclosed_last_tag_runs_to_the_end() -> None:
    stop = rob(answer(consensus="YES", reason="We agree.").removesuffix("</consensus_reason>") + "\n")
    assert stop.ok and stop.consensus_reason == "We agree." and stop.consensus
    fenced = rob("```xml\n" + answer(reason="Because.").removesuffix("</consensus_reason>") + "\n```")
    assert fenced.ok and fenced.consensus_reason == "Because."
    closed_wins = rob(answer(consensus="YES") + "\n<consensus>")
    assert closed_wins.ok and closed_wins.consensus
    middle = rob(answer().replace("</evaluation>", ""))  # only the last tag may be unclosed
    assert middle.reason == "missing_evaluation"


def test_robust_tag_case_attributes_and_fences() -> None:
    upper = rob(answer().upper().replace("<CONSENSUS>NO", "<CONSENSUS>yes"))
    assert upper.ok and upper.solution == "S" and upper.consensus
    attrs = rob(answer().replace("<consensus_reason>", '<consensus_reason type="final">'))
    assert attrs.ok and attrs.consensus_reason == "R"
    assert rob("```xml\n" + answer() + "\n```\nLet me know!").ok


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("YES", True), ("yes", True), ("Yes.", True), ("**YES**", True), ("YES - agreed", True),
        ("'YES'", True), ("ＹＥＳ", True), ("YES\u200b", True), ("true", True), ("Yes, no objections.", True),
        ("NO", False), ("No.", False), ("N/A", False), ("", False), ("YES/NO", False), ("yes | no", False),
        ("Yes or no", False), ("YESS", False), ("Not yet", False), ("Agreed", False), ("maybe yes", False),
    ],
)  # fmt: skip
def test_robust_consensus(value: str, expected: bool) -> None:
    got = rob(answer(consensus=value))
    assert got.ok and got.consensus is expected


def test_robust_field_strip_includes_zero_width_characters() -> None:
    got = rob(answer(solution="\ufeff\u200b x \u200b", reason="\u2060R\u00a0"))
    assert (got.solution, got.consensus_reason) == ("x", "R")


def test_failed_parse_carries_no_votes_and_no_consensus() -> None:
    got = rob("<solution>S</solution><comparison>Agent 1 > Agent 2</comparison><consensus>YES</consensus>")
    assert (got.ok, got.reason, got.votes, got.consensus, got.solution) == (
        False, "missing_evaluation", (), False, "S",
    )  # fmt: skip
    assert got.comparison == "Agent 1 > Agent 2"


# ------------------------------------------------------------------------------------------------
# Arguments.


@pytest.mark.parametrize("policy", PARSE_POLICIES)
@pytest.mark.parametrize("value", [None, b"<solution>", 5, ["x"], 3.5])
def test_non_text_gives_not_text(policy: str, value: Any) -> None:
    got = parse_response(value, 1, policy=policy)
    assert (got.ok, got.reason, got.policy, got.author_id, got.votes) == (False, "not_text", policy, 1, ())


def test_bad_policy_and_author_raise() -> None:
    with pytest.raises(ValueError, match="policy"):
        parse_response("x", policy="v1")
    with pytest.raises(TypeError, match="author_id"):
        parse_response("x", "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="author_id"):
        parse_response("x", 1.0)  # type: ignore[arg-type]
    assert parse_response(answer("Agent 1 > Agent 2"), np.int64(1)).self_votes_dropped == 1  # type: ignore[arg-type]


def test_closed_option_and_reason_sets() -> None:
    assert PARSE_POLICIES == ("robust", "reference")
    assert PARSE_FAILURE_REASONS == (
        "missing_solution", "missing_evaluation", "missing_consensus", "missing_consensus_reason",
        "unclosed_think", "not_text",
    )  # fmt: skip
    assert MALFORMED_VOTE_REASONS == (
        "no_comparison", "no_operator", "ambiguous_operator", "unknown_operator", "bad_agent_id",
        "signed_agent_id", "comparison_limit",
    )  # fmt: skip
    assert typing.get_args(_parse.ParsePolicy) == PARSE_POLICIES
    hints = typing.get_type_hints(parse_response)
    assert hints["policy"] == _parse.ParsePolicy


def test_policy_is_recorded() -> None:
    assert rob("").policy == "robust" and ref("").policy == "reference"
    assert parse_response("").policy == PARSE_POLICIES[0] == "robust"


# ------------------------------------------------------------------------------------------------
# Properties.


def check_contract(result: ParsedResponse, policy: str, author_id: int) -> None:
    assert isinstance(result, ParsedResponse)
    assert result.policy == policy and result.author_id == author_id
    if result.ok:
        assert result.reason == ""
    else:
        assert result.reason in PARSE_FAILURE_REASONS
        assert result.votes == () and result.consensus is False and result.self_votes_dropped == 0
    for vote in result.votes:
        assert type(vote) is Vote and vote.op in (">", "=")
        assert type(vote.a) is int and type(vote.b) is int and vote.a >= 0 and vote.b >= 0
        assert author_id not in (vote.a, vote.b)
    for bad in result.malformed_votes:
        assert isinstance(bad, MalformedVote) and bad.reason in MALFORMED_VOTE_REASONS
    assert all(isinstance(s, str) for s in (result.solution, result.evaluation, result.comparison))
    assert isinstance(result.consensus, bool) and isinstance(result.normalized_text, str)


TEXTS = st.one_of(st.text(), near_miss_xml(), agent_outputs())


@given(TEXTS, st.integers(-3, 9), st.sampled_from(PARSE_POLICIES))
def test_total_on_any_text(text: str, author_id: int, policy: str) -> None:
    check_contract(parse_response(text, author_id, policy=policy), policy, author_id)


@given(TEXTS, st.integers(0, 5), st.sampled_from(PARSE_POLICIES))
def test_self_votes_are_exactly_the_votes_naming_the_author(text: str, author_id: int, policy: str) -> None:
    everyone = parse_response(text, -1, policy=policy)
    mine = parse_response(text, author_id, policy=policy)
    assert mine.votes == tuple(v for v in everyone.votes if author_id not in (v.a, v.b))
    assert mine.self_votes_dropped == len(everyone.votes) - len(mine.votes)
    assert mine.ok == everyone.ok and mine.solution == everyone.solution


@given(agent_outputs(), st.integers(0, 3))
def test_robust_reads_qwen3_and_think_wrapped_outputs_like_the_answer(text: str, author_id: int) -> None:
    plain = rob(text, author_id)
    for wrapped in (
        "Reasoning that mentions <solution>x</solution> and Agent 1 > Agent 2.\n</think>\n" + text,
        "<think>\nReasoning <consensus>YES</consensus>\n</think>\n\n" + text,
    ):
        if "</think>" in text.lower() or text.lstrip().lower().startswith("<think>"):
            continue  # the text has reasoning of its own
        got = rob(wrapped, author_id)
        assert (got.ok, got.reason, got.solution, got.votes, got.consensus) == (
            plain.ok, plain.reason, plain.solution, plain.votes, plain.consensus,
        )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Private tables, recomputed from Python itself.


@pytest.mark.parametrize("last", [0x7F, 0xFF, sys.maxunicode], ids=["ascii", "latin-1", "every"])
def test_fold_equals_re_ignorecase_on_every_code_point(last: int) -> None:
    # One text per branch of _fold: ASCII, Latin-1 and any other text.
    every = "".join(map(chr, range(last + 1)))
    folded = _parse_common._fold(every)
    assert len(folded) == len(every)
    for letter in "abcdefghijklmnopqrstuvwxyz<>/_":
        by_regex = {m.start() for m in re.finditer(re.escape(letter), every, re.IGNORECASE)}
        by_fold = {i for i, ch in enumerate(folded) if ch == letter}
        assert by_regex == by_fold, letter


def test_zero_digits_and_whitespace_tables() -> None:
    chars = [chr(c) for c in range(sys.maxunicode + 1)]
    assert set(_parse_common._ZEROS) == {c for c in chars if c.isdecimal() and int(c) == 0}
    space = {c for c in chars if c.isspace()}
    assert (
        _parse_robust._strip(
            "".join(sorted(space)) + _parse_robust._ZERO_WIDTH + "x" + _parse_robust._ZERO_WIDTH
        )
        == "x"
    )
    assert {c for c in chars if re.fullmatch(r"\s", c)} == space


# ------------------------------------------------------------------------------------------------
# Fast paths. parse_response reads the usual outputs with shortcuts (the common tag layout in one
# regex pass, whole-block vote chains, look-up tables, ASCII-only regexes) and switches between two
# ways of computing one result at size thresholds. Each is a module attribute: the tests switch it
# off, or set its threshold to 0 and to a huge value, and compare with the parser as shipped (and,
# for the reference policy, with the oracle) on inputs small enough to cross every threshold.

_HUGE = 10**9
# Each shortcut: the module attributes that switch it off or move its threshold, and their values.
SHORTCUTS: dict[str, dict[str, Any]] = {
    "layout: no one-pass reading": {"_simple_fields": lambda text: None},
    "layout: rules instead of the table": {"_LAYOUTS": {}},
    "layout: one pass up to two '<'": {"_MAX_SIMPLE_CHARS": 0, "_MAX_SIMPLE_LT": 2},
    "layout: one pass only without '<'": {"_MAX_SIMPLE_CHARS": 0, "_MAX_SIMPLE_LT": 0},
    "layout: no match of the usual layout": {"_CANONICAL": re.compile("(?!)")},
    "votes: no chain reader": {"_chain_votes": lambda block, author_id: None},
    "votes: no table of plain lines": {"_PLAIN_CODES": {}},
    "votes: chain reader without its table": {"_CHAIN_VOTES": {}},
    "votes: no table of empty blocks": {"_NO_VOTES": frozenset()},
    "votes: general agent regex on ASCII": {"_ASCII_REF": _parse_robust._REF},
    "fields: zero-width strip on ASCII": {"_ASCII_STRIP": _parse_robust._strip},
    "consensus: no table of plain words": {"_PLAIN_CONSENSUS": {}},
    "v1 cut: regex at the first near miss": {"_V1_CUT_TRIES": 0},
    "v1 cut: never the regex": {"_V1_CUT_TRIES": _HUGE},
    "v1 think: bulk removal from one marker": {"_V1_THINK_BULK": 0},
    "v1 think: never bulk removal": {"_V1_THINK_BULK": _HUGE},
    "v1 votes: no small-block reading": {"_V1_SMALL_BLOCK": -1},
    "v1 votes: small-block reading at any size": {"_V1_SMALL_BLOCK": _HUGE},
    "v1 votes: no small-vote table": {"_V1_SMALL_VOTES": {}},
    "v1 votes: general regex on ASCII": {"_V1_ASCII_VOTE": _parse_reference._V1_VOTE},
}
GENERAL = {
    name: value
    for key in (
        "layout: no one-pass reading",
        "layout: no match of the usual layout",
        "votes: no chain reader",
        "votes: no table of plain lines",
        "votes: no table of empty blocks",
        "votes: general agent regex on ASCII",
        "fields: zero-width strip on ASCII",
        "consensus: no table of plain words",
        "v1 cut: never the regex",
        "v1 think: never bulk removal",
        "v1 votes: no small-block reading",
        "v1 votes: general regex on ASCII",
    )
    for name, value in SHORTCUTS[key].items()
}
"""Every shortcut off (and every threshold where the general code runs): the general reader."""
READERS = {"shipped": {}, "general": GENERAL}


@contextmanager
def _patched(settings: dict[str, Any]) -> Iterator[None]:
    with ExitStack() as stack:
        for name, value in settings.items():
            stack.enter_context(mock.patch.object(_policy_module(name), name, value))
        yield


def _policy_module(name: str) -> Any:
    """The one parser module that holds the shortcut attribute ``name``."""
    (module,) = [m for m in (_parse_robust, _parse_reference) if hasattr(m, name)]
    return module


def test_every_shortcut_setting_names_a_module_attribute_and_changes_it() -> None:
    for settings in SHORTCUTS.values():
        for name, value in settings.items():
            assert getattr(_policy_module(name), name) != value, name


# Comparison blocks: mostly clean vote chains (the chain reader's domain), with the faults that must
# send a block to the line reader mixed in.
_CLEAN = {
    "head": ("", "", "- ", "1. ", "aagent 4: "),
    "agent": ("Agent ", "Agent ", "agent", "AGENT #", "**Agent ", "`Agent ", "Agent-", "Agent\t"),
    "id": ("0", "1", "2", "3", "15", "16", "01"),
    "op": (" > ", " < ", " = ", " == ", ">", "<"),
    "tail": ("", "", ": agent two slipped", ".", " (aaagent 5)"),
    "break": ("\n", "\n", "\n", "\n\n", "\n \t\n"),
}
_FAULTY = {
    "head": ("xagent 4 ", "Agent 1 ", "Agent 1 > ", "> "),
    "agent": (
        "xagent ",
        "Agent\x1f",
        "Agent",
        "agents ",
        "Agent -",
        "Agent +",
        "Agent #-",
        "Agent--",
        "Agent−",
    ),
    "id": ("12345678901", "0000000000002", "٣", "", "-1", "+2"),
    "op": (" >= ", " ≥ ", " >> ", " is better than ", ", ", " ", " === ", " = = ", " - "),
    "tail": (": Agent 3 too", " \u200b", " > Agent", " >", " > ", " <"),
    "break": ("\r\n", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\n```\n", "\nN/A\n"),
}


@st.composite
def comparison_blocks(draw: st.DrawFn, *, faults: bool = True) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        faulty = (
            draw(st.sampled_from((None,) * 12 + tuple(_FAULTY))) if faults else None
        )  # one a line at most

        def pick(part: str, faulty: str | None = faulty) -> str:
            return draw(st.sampled_from((_FAULTY if part == faulty else _CLEAN)[part]))

        line = [pick("head")]
        for i in range(draw(st.sampled_from((2, 2, 2, 3, 4, 1)))):
            agent = pick("agent")
            line += [pick("op")] if i else []
            line += [agent, pick("id"), {"*": "**", "`": "`"}.get(agent[0], "")]
        lines.append("".join(line) + pick("tail") + pick("break"))
    return "".join(lines).strip()


# Pieces of the reference policy's hard cases: think markers in every case and split so that deleting
# one joins another, the cut words and their near misses, fences and line breaks.
_PIECES = (
    "<think>", "</think>", "<THINK>", "</Think>", "<thİnk>", "<", "</", "think>", "thi", "nk>", "/",
    "<solution>", "</solution>", "<solutions", "<solution_", "<solution", "<evaluation>", "</evaluation>",
    "<evaluation2", "<comparison>", "</comparison>", "<comparisons>", "<consensus>", "</consensus>",
    "<consensus_reason>", "</consensus_reason>", "<consensus_reasons", "<consensusX", "<consensus ",
    "```xml\n", "```\r\n", "\n```", "\r\n", "\n", " ", "\t", "x", "YES", "Agent 1 > Agent 2",
    "Agent 3 = Agent 0",
)  # fmt: skip


@st.composite
def reference_pieces(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(st.sampled_from(_PIECES), max_size=30)))


SHORTCUT_TEXTS = st.one_of(
    TEXTS,
    reference_pieces(),
    comparison_blocks().map(answer),
    comparison_blocks().map(lambda block: block + "\n</think>\n" + answer(block)),
)


# Inputs on which a shortcut's guard decides: think markers of mixed case, a "</think>" whose deletion
# joins a new "<think>" (v1 deletes in one pass, so that one stays), and near misses of the cut words.
_GUARDED = (
    answer(solution="a<THINK>b<think>c</Think>d"),
    answer(solution="<</think>think>"),
    answer(solution="</<think>think>"),
    "Use <solutions> and <solution_x> well.\n" + answer(),
    "See <consensus_reason> and <consensusX>, then <consensus>:\n" + answer(),
)


@pytest.mark.parametrize("shortcut", sorted(SHORTCUTS))
@given(text=SHORTCUT_TEXTS, author_id=st.sampled_from([-1, 0, 1, 2]), policy=st.sampled_from(PARSE_POLICIES))
@example(text=_GUARDED[0], author_id=-1, policy="reference")
@example(text=_GUARDED[1], author_id=-1, policy="reference")
@example(text=_GUARDED[2], author_id=-1, policy="reference")
@example(text=_GUARDED[3], author_id=-1, policy="reference")
@example(text=_GUARDED[4], author_id=-1, policy="reference")
def test_each_shortcut_gives_what_the_parser_gives_without_it(
    shortcut: str, text: str, author_id: int, policy: str
) -> None:
    shipped = parse_response(text, author_id, policy=policy)
    with _patched(SHORTCUTS[shortcut]):
        got = parse_response(text, author_id, policy=policy)
    assert got == shipped
    if policy == "reference":
        assert as_record(got) == v1_oracle(text, author_id)


# The usual layout with "<" that may or may not start a tag in its text, and blocks of plain lines
# with one line that is not: what the one-match layout reader and the table of plain lines decide on.
_LT_PIECES = (
    "<",
    "< ",
    "<<",
    "<=",
    "<3",
    "<b>",
    "</b>",
    "<ſolution>",
    "<solution ",
    "<Solution>",
    "</",
    "<-",
)
_PLAIN = (
    "Agent 1 > Agent 2",
    "agent 0 = Agent 3",
    "Agent 2 < agent 1",
    "Agent 3 == Agent 0",
    "Agent 9 > Agent 1",
)
_NOT_PLAIN = ("Agent 1 > Agent 2 ", "AGENT 1 > Agent 2", "Agent 1 >= Agent 2", "Agent 10 > Agent 2", "", "x")


@st.composite
def usual_layouts(draw: st.DrawFn) -> str:
    def text() -> str:
        return "".join(draw(st.lists(st.sampled_from(("x", " ", "\n", *_LT_PIECES)), max_size=4)))

    lines = draw(st.lists(st.sampled_from(_PLAIN), min_size=1, max_size=4))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(_NOT_PLAIN)))
    block = draw(st.sampled_from(("\n", "\n\n", "\r\n"))).join(lines) if len(lines) > 1 else lines[0]
    return text() + answer(block, solution=text() + "S" + text(), reason=text()) + text()


@pytest.mark.parametrize(
    "shortcut", ["layout: no match of the usual layout", "votes: no table of plain lines"]
)
@given(text=usual_layouts(), author_id=st.sampled_from([-1, 0, 1, 2, 3, 9, 12]))
def test_usual_layout_shortcuts_give_what_the_parser_gives_without_them(
    shortcut: str, text: str, author_id: int
) -> None:
    shipped = rob(text, author_id)
    with _patched(SHORTCUTS[shortcut]):
        assert rob(text, author_id) == shipped
    with _patched(GENERAL):
        assert rob(text, author_id) == shipped
    assert shipped.vote_codes == pack_votes(shipped.votes)


_TAG_SPELLINGS = {t: (t, t, t.upper(), t.title()) for t in _parse_robust._TAGS}


@st.composite
def answers_written_again(draw: st.DrawFn) -> str:
    """Tags in pairs, ``<tag>…</tag>``, one after another (the one-pass reading's layout when a name
    repeats): blocks of the five tags or some of them, in any order and spelling, with the usual
    contents, the last tag unclosed or not, a fence after it or not."""

    pieces = ("x", " ", "\n", "```", "<", "<b>", "</", "<=")  # none a tag of the five, nor think
    pieces += draw(st.sampled_from(((), _LT_PIECES)))  # or "<Solution>", "<solution " ... as well

    def text() -> str:
        return "".join(draw(st.lists(st.sampled_from(pieces), max_size=3)))

    contents = {
        "comparison": st.sampled_from(
            ("Agent 1 > Agent 2", "agent 0 = Agent 3\nAgent 2 < Agent 1", "N/A", "")
        ),
        "consensus": st.sampled_from(("YES", "no", " Yes. ", "")),
    }
    pairs = []
    for _ in range(draw(st.integers(1, 3))):
        names = draw(st.lists(st.sampled_from(_parse_robust._TAGS), max_size=6))
        if draw(st.booleans()):
            names = [n for n in _parse_robust._TAGS if n not in names[:1]]  # a usual block, less a tag
        for name in names:
            spelled = draw(st.sampled_from(_TAG_SPELLINGS[name]))
            content = draw(contents.get(name, st.just("")) | st.builds(text))
            pairs.append(f"{text()}<{spelled}>{content}</{spelled}>")
    out = "".join(pairs)
    if out and draw(st.booleans()):  # a stop string stripped: the last closing tag is cut
        out = out[: out.rfind("</")] + draw(st.sampled_from(("", "\n```", "\n```\n")))
    return out + text()


@pytest.mark.parametrize("steps", [5, 7, 512])  # one block of the five tags fits in any
@given(text=answers_written_again(), author_id=st.sampled_from([-1, 0, 1, 2]))
def test_answers_written_again_read_in_one_pass_as_the_general_reader_reads_them(
    steps: int, text: str, author_id: int
) -> None:
    with _patched({"_MAX_TAG_STEPS": steps}):  # the reader gives up on tags past this many closing ones
        shipped = rob(text, author_id)
        with _patched(SHORTCUTS["layout: no one-pass reading"]):
            assert rob(text, author_id) == shipped
        with _patched(GENERAL):
            assert rob(text, author_id) == shipped


def test_answers_written_again_hand_checked() -> None:
    first = answer("Agent 1 > Agent 2", "YES", solution="A")
    assert isinstance(_parse_robust._simple_fields(first + "\nWait, again:\n" + first), list)
    again = rob(first + "\nWait:\n" + answer("Agent 2 > Agent 1", solution="B"), 0)
    assert again.solution == "B" and again.votes == (Vote(2, ">", 1),) and not again.consensus
    # The later block lacks its consensus: the earlier complete block is the answer.
    cut = rob(first + "<solution>C</solution><evaluation>E</evaluation>", 0)
    assert cut.solution == "A" and cut.consensus
    lone = rob("<comparison>Agent 1 > Agent 2</comparison>")  # no required tag: nothing kept
    assert lone.reason == "missing_solution" and lone.comparison == ""


@pytest.mark.parametrize("threshold", [0, _HUGE])
def test_reference_size_gates_on_hand_checked_inputs(threshold: int) -> None:
    with _patched({"_V1_CUT_TRIES": threshold, "_V1_THINK_BULK": threshold}):
        got = [ref(text) for text in _GUARDED]
    assert [r.solution for r in got[:3]] == ["abcd", "<think>", "</think>"]
    assert got[3].normalized_text == answer()  # "<solution_x" is a near miss too
    assert got[4].normalized_text == "<consensus>:\n" + answer()
    assert got[4].consensus is False  # the field is ":\n<solution>S…" up to the first </consensus>


@given(
    st.one_of(TEXTS, comparison_blocks().map(answer), comparison_blocks(faults=False).map(answer)),
    st.sampled_from([-1, 0, 1, 2]),
    st.integers(-2, 2),
    st.integers(-2, 2),
)
@example(answer("Agent 1 > Agent 2\nAgent 2 > Agent 3"), -1, -1, 1)  # the last line is past the limit
@example(answer("Agent 1 > Agent 2 > Agent 3\nAgent 0 = Agent 1"), -1, 1, 0)  # the limit on the last mention
@example(answer("NA"), -1, 0, 0)  # no mention allowed: even a no-vote line is past the limit
def test_chain_reader_respects_the_comparison_limits_at_every_size(
    text: str, author_id: int, lines_offset: int, refs_offset: int
) -> None:
    # The limits set around the block's own line and mention counts, so that small blocks fall on
    # either side of them and on them: the chain reader must step aside exactly when the line
    # reader would stop at a limit.
    block = rob(text).comparison.lower()
    max_lines = max(block.count("\n") + 1 + lines_offset, 0)
    max_refs = max(block.count("agent") + refs_offset, 0)
    limits = {"_MAX_COMPARISON_LINES": max_lines, "_MAX_COMPARISON_REFS": max_refs}
    with _patched(limits):
        fast = rob(text, author_id)
    with _patched({**limits, **GENERAL}):
        assert rob(text, author_id) == fast


def test_limits_set_to_zero_stop_at_the_first_line() -> None:
    with _patched({"_MAX_COMPARISON_LINES": 0}):
        got = rob(answer("Agent 1 > Agent 2\nAgent 2 > Agent 3"))
    assert got.votes == () and got.malformed_votes == (
        MalformedVote("Agent 1 > Agent 2", "comparison_limit"),
    )
    with _patched({"_MAX_COMPARISON_REFS": 2}):
        got = rob(answer("Agent 1 > Agent 2\nAgent 2 > Agent 3"))
    assert got.votes == (Vote(1, ">", 2),)
    assert got.malformed_votes == (MalformedVote("Agent 2 > Agent 3", "comparison_limit"),)


@pytest.mark.parametrize("reader", ["shipped", "general"])
def test_usual_layouts_shipped_and_general(reader: str) -> None:
    texts = {
        "all": answer("Agent 1 > Agent 2\n- Agent 2 < Agent 0: why", "YES"),
        "unclosed": answer("Agent 1 == Agent 2", "Yes")[: -len("</consensus_reason>")] + "\n```",
        "no comparison": "<solution>S</solution><evaluation>E</evaluation><consensus>no</consensus>"
        "<consensus_reason>R</consensus_reason>",
        "no comparison, unclosed": "<solution>S</solution><evaluation>E</evaluation><consensus>NO"
        "</consensus><consensus_reason>R",
        "other order": "<Consensus>YES</Consensus><solution>S</solution><consensus_reason>R"
        "</consensus_reason><evaluation>E</evaluation>",
    }
    with _patched(READERS[reader]):
        got = {name: rob(text, 0) for name, text in texts.items()}
    assert all(r.ok and r.solution == "S" and r.consensus_reason == "R" for r in got.values())
    assert got["all"].votes == (Vote(1, ">", 2),) and got["all"].self_votes_dropped == 1
    assert got["unclosed"].votes == (Vote(1, "=", 2),) and got["unclosed"].consensus
    assert [r.consensus for r in got.values()] == [True, True, False, False, True]


def test_layout_table_holds_the_four_usual_layouts() -> None:
    o = {t: f"<{t}>" for t in ("solution", "evaluation", "comparison", "consensus", "consensus_reason")}
    c = {t: f"</{t}>" for t in o}
    five = ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
    four = ("solution", "evaluation", "consensus", "consensus_reason")
    assert _parse_robust._LAYOUTS == {
        tuple(x for t in five for x in (o[t], c[t])): five,
        tuple(x for t in five for x in (o[t], c[t]))[:-1]: five,
        tuple(x for t in four for x in (o[t], c[t])): four,
        tuple(x for t in four for x in (o[t], c[t]))[:-1]: four,
    }
    assert len(_parse_robust._LAYOUTS) == 4


def test_lookup_tables_hold_hand_checked_entries() -> None:
    votes = _parse_robust._CHAIN_VOTES
    assert len(votes) == 16 * 16 * 4
    assert votes["1", ">", "2"] == Vote(1, ">", 2)
    assert votes["1", "<", "2"] == Vote(2, ">", 1)
    assert votes["15", "=", "0"] == Vote(15, "=", 0)
    assert votes["3", "==", "3"] == Vote(3, "=", 3)
    assert ("16", ">", "1") not in votes and ("01", ">", "1") not in votes
    small = _parse_reference._V1_SMALL_VOTES
    assert small["7", ">", "63"] == Vote(7, ">", 63) and small["0", "=", "0"] == Vote(0, "=", 0)
    assert len(small) == 64 * 64 * 2 and ("64", ">", "1") not in small and ("07", ">", "1") not in small
    # the parsers' small votes are the shared objects that pack_votes finds by identity
    assert all(v is SMALL_VOTES[v] for v in [*small.values(), *votes.values()])
    plain = _parse_robust._PLAIN_LINES
    assert plain[-1]["Agent 1 > Agent 2"] == Vote(1, ">", 2) and plain[3]["agent 4 < Agent 0"] == Vote(
        0, ">", 4
    )
    assert plain[2]["Agent 2 == agent 7"] is _parse_robust._SELF is plain[7]["Agent 2 == agent 7"]
    assert plain[5]["Agent 2 == agent 7"] == Vote(2, "=", 7)
    assert len(plain) == 11 and all(len(lines) == 2 * 2 * 10 * 10 * 4 for lines in plain.values())
    assert plain[-1] == _parse_robust._PLAIN_VOTES  # what each line gives when no author is named
    assert _parse_robust._PLAIN_VOTES["agent 4 < Agent 0"] is SMALL_VOTES[0, ">", 4]
    codes = _parse_robust._PLAIN_CODES
    assert (
        codes[-1]["Agent 1 > Agent 2"] == pack_votes([Vote(1, ">", 2)])
        and codes[2]["Agent 2 = Agent 1"] == b""
    )
    assert _parse_robust._CANONICAL.fullmatch(answer("Agent 1 < Agent 2", solution="a <b> c")) is None
    usual = _parse_robust._CANONICAL.fullmatch("pre < 3 " + answer("Agent 1 < Agent 2", solution="x <= y"))
    assert usual is not None and usual.group(1) == "x <= y"
    assert _parse_robust._PLAIN_CONSENSUS == {
        "YES": True,
        "Yes": True,
        "yes": True,
        "NO": False,
        "No": False,
        "no": False,
    }
    for block in _parse_robust._NO_VOTES:  # the line reader reads each as no vote and no malformed line
        assert _parse_robust._line_votes(block, -1) == ([], 0, [])


def test_responses_built_by_the_parsers_are_the_frozen_dataclass() -> None:
    votes = (Vote(1, ">", 2), Vote(3, "=", 1))
    values = (True, "s", "e", "c", True, "r", votes, 3, 1, (MalformedVote("x", "no_comparison"),), "", "n")
    values += ("robust", pack_votes(votes))
    built, expected = _parse_common._new_response(*values), ParsedResponse(*values)
    assert type(built) is ParsedResponse and built == expected and hash(built) == hash(expected)
    assert [getattr(built, f.name) for f in dataclasses.fields(ParsedResponse)] == list(values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.ok = False  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(built)) == expected
    assert dataclasses.replace(built, solution="t") == dataclasses.replace(expected, solution="t")
    assert repr(built) == repr(expected)


def test_ascii_character_classes_of_the_shortcuts() -> None:
    every = [chr(c) for c in range(sys.maxunicode + 1)]
    ascii_chars = every[:128]
    breaks = {c for c in every if len(f"a{c}b".splitlines()) == 2}  # what splitlines() breaks at
    assert breaks == set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
    space = {c for c in ascii_chars if c.isspace()}
    assert space - breaks == set(" \t\x1f")  # the in-line spaces of _CHAIN_BLOCK and _CHAIN_PAIR
    assert space == {c for c in ascii_chars if re.fullmatch(r"[\t-\r\x1c-\x20]", c)}  # _V1_ASCII_VOTE
    digits = {c for c in ascii_chars if re.fullmatch(r"\d", c)}
    assert digits == set("0123456789")
