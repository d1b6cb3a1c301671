"""Golden check of ``parse_response(policy="reference")`` against the v1 parser (parse_v1.jsonl).

Every field is compared exactly: the five field texts, the consensus flag, the votes (author's own
removed), ``normalized_text`` (= v1 ``raw_response``) and, for failures, the missing tag mapped to our
reason code (``"solution"`` → ``"missing_solution"`` …). v1's error message is not ours to copy.
"""

from __future__ import annotations

from typing import Any

from kernel import Vote, parse_response

_REASON = {
    "solution": "missing_solution",
    "evaluation": "missing_evaluation",
    "consensus": "missing_consensus",
    "consensus_reason": "missing_consensus_reason",
}


def check(record: dict[str, Any]) -> str | None:
    """None when the record passes, else a short message naming the first field that differs."""
    inp, exp = record["input"], record["expected"]
    got = parse_response(inp["text"], inp["author_id"], policy="reference")
    if got.policy != "reference":
        return f"policy {got.policy!r}"
    if not exp["ok"]:
        if got.ok:
            return f"parsed, expected a missing <{exp['error']}>"
        want = _REASON.get(exp["error"], "?")
        if got.reason != want:
            return f"reason {got.reason!r}, expected {want!r}"
        if got.votes:
            return "a failed parse carries votes"
        return None
    if not got.ok:
        return f"failed with {got.reason!r}, expected success"
    pairs = {
        "solution": (got.solution, exp["solution"]),
        "evaluation": (got.evaluation, exp["evaluation"]),
        "comparison_text": (got.comparison, exp["comparison_text"]),
        "consensus": (got.consensus, exp["consensus"]),
        "consensus_reason": (got.consensus_reason, exp["consensus_reason"]),
        "comparisons": (got.votes, tuple(Vote(a, op, b) for a, op, b in exp["comparisons"])),
        "raw_response": (got.normalized_text, exp["raw_response"]),
        "malformed_votes": (got.malformed_votes, ()),
        "reason": (got.reason, ""),
    }
    for key, (ours, theirs) in pairs.items():
        if ours != theirs or type(ours) is not type(theirs):
            return f"{key}: {ours!r:.120} != {theirs!r:.120}"
    for vote in got.votes:
        if type(vote.a) is not int or type(vote.b) is not int:
            return f"vote ids are not int: {vote!r}"
    return None
