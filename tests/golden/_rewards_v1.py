"""Checker for ``rewards_v1.jsonl``: both reward modes and the group metrics, compared exactly.

Each record is one debate. Its votes go through two paths that must agree: ``vote_arrays`` from the
record's lists, and ``votes_from_responses`` from ``ParsedResponse`` objects built the way the vectors
were (consecutive votes of one author form one response).
"""

from __future__ import annotations

import itertools
from typing import Any

from kernel import PairwiseRewards, ParsedResponse, Vote, pairwise_rewards, vote_arrays, votes_from_responses


def _response(author: int, votes: list[Vote]) -> ParsedResponse:
    return ParsedResponse.make(author, votes=tuple(votes), policy="reference")


def _compare(got: PairwiseRewards, expected: dict[str, Any], mode: str) -> str | None:
    rewards = [float(x) for x in got.rewards_PG]
    if rewards != expected[mode]:
        return f"{mode}: got {rewards}, expected {expected[mode]}"
    metrics = {
        "total_votes": float(got.total_votes_P[0]),
        "malformed": float(got.malformed_P[0]),
        "any_votes": float(got.any_votes_P[0]),
    }
    for key, value in metrics.items():
        if value != expected[key]:
            return f"{mode}: {key} got {value}, expected {expected[key]}"
    if [int(x) for x in got.group_ids_PG] != [0] * len(rewards):
        return f"{mode}: group_ids_PG {got.group_ids_PG}"
    return None


def check(record: dict[str, Any]) -> str | None:
    n = int(record["input"]["num_agents"])
    raw = record["input"]["votes"]
    expected = record["expected"]
    direct = vote_arrays(
        [0] * len(raw), [v[0] for v in raw], [v[1] for v in raw], [v[2] for v in raw], [v[3] for v in raw]
    )
    responses = [
        _response(author, [Vote(a, op, b) for _, a, op, b in run])
        for author, run in itertools.groupby(raw, key=lambda v: v[0])
    ]
    from_responses = votes_from_responses([responses])
    for path, votes in (("vote_arrays", direct), ("votes_from_responses", from_responses)):
        for mode in ("win_rate", "win_minus_loss"):
            message = _compare(pairwise_rewards(votes, [n], mode=mode), expected, mode)
            if message is not None:
                return f"{path}: {message}"
    return None
