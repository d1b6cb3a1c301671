"""parse_responses / ParsedBatch.votes: the parser's vote columns against the votes of each response,
read one by one (no packed codes), and against votes_from_responses."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import (
    OP_EQ,
    OP_GT,
    OP_OTHER,
    ParsedBatch,
    ParsedResponse,
    parse_response,
    parse_responses,
    votes_from_responses,
)
from kernel.testing.strategies import agent_outputs

_I32 = (-(2**31), 2**31 - 1)


def _clamp(x: int) -> int:
    return min(max(int(x), _I32[0]), _I32[1])


def _oracle(
    responses: list[ParsedResponse], groups: list[int], include_failed: bool
) -> list[tuple[int, int, int, int, int]]:
    """Rows (group, author, a, op code, b) read from each response's ``votes`` tuple, one at a time."""
    op = {">": OP_GT, "=": OP_EQ}
    rows = []
    for r, g in zip(responses, groups, strict=True):
        if r.ok or include_failed:
            for v in r.votes:
                rows.append(
                    (_clamp(g), _clamp(r.author_id), _clamp(v.a), op.get(v.op, OP_OTHER), _clamp(v.b))
                )
    return rows


def _rows(batch: ParsedBatch, groups: Any, include_failed: bool) -> list[tuple[int, ...]]:
    v = batch.votes(groups, include_failed=include_failed)
    for column in v[:5]:
        assert column.dtype == np.int32
    return list(zip(*(c.tolist() for c in v[:5]), strict=True))


@given(
    st.lists(st.tuples(agent_outputs(num_agents=5), st.integers(-1, 4), st.integers(0, 6)), max_size=12),
    st.sampled_from(["robust", "reference"]),
    st.booleans(),
)
def test_columns_are_each_responses_votes(
    items: list[tuple[str, int, int]], policy: Any, failed: bool
) -> None:
    texts = [t for t, _, _ in items]
    authors = [a for _, a, _ in items]
    groups = [g for _, _, g in items]
    batch = parse_responses(texts, authors, policy=policy)
    expected = [parse_response(t, a, policy=policy) for t, a in zip(texts, authors, strict=True)]
    assert list(batch.responses_R) == expected
    assert batch.ok_R.tolist() == [r.ok for r in expected]
    assert np.diff(batch.vote_offsets_R1).tolist() == [len(r.votes) for r in expected]
    assert _rows(batch, np.array(groups, np.int64), failed) == _oracle(expected, groups, failed)
    # debate-major groups: the same arrays as votes_from_responses of the responses grouped so
    order = sorted(range(len(items)), key=lambda i: groups[i])
    sorted_batch = parse_responses([texts[i] for i in order], [authors[i] for i in order], policy=policy)
    sorted_groups = [groups[i] for i in order]
    by_debate: list[list[ParsedResponse]] = [[] for _ in range(7)]
    for i in order:
        by_debate[groups[i]].append(expected[i])
    ours = sorted_batch.votes(sorted_groups, include_failed=failed)
    theirs = votes_from_responses(by_debate, include_failed=failed)
    for x, y in zip(ours[:5], theirs[:5], strict=True):
        np.testing.assert_array_equal(x, y)


def test_failed_responses_and_hand_made_votes() -> None:
    tags = (
        "<solution>1</solution><evaluation>e</evaluation><comparison>{}</comparison>"
        "<consensus>NO</consensus><consensus_reason>r</consensus_reason>"
    )
    batch = parse_responses(
        [tags.format("Agent 1 > Agent 2\nAgent 3 < Agent 2"), "nothing", tags], [0, 2, 2**40]
    )
    assert batch.ok_R.tolist() == [True, False, True]
    assert batch.author_ids_R.tolist() == [0, 2, _I32[1]]  # saturated
    assert _rows(batch, [5, 6, 2**35], False) == [(5, 0, 1, OP_GT, 2), (5, 0, 2, OP_GT, 3)]
    # a failed response carries no votes from the parser; one given votes by hand counts only if asked
    failed = dataclasses.replace(batch.responses_R[0], ok=False)
    hand = ParsedBatch(
        (failed,),
        np.array([False]),
        np.array([0], np.int32),
        np.array([0, 1]),
        *(np.array([v], np.int32) for v in (1, 0, 2)),
    )
    assert _rows(hand, [3], False) == []
    assert _rows(hand, [3], True) == [(3, 0, 1, OP_GT, 2)]
    empty = parse_responses([], [])
    assert empty.vote_offsets_R1.tolist() == [0] and _rows(empty, [], False) == []


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="author_ids_R must hold one id per text"):
        parse_responses(["a", "b"], [0])
    with pytest.raises(ValueError, match="policy must be one of"):
        parse_responses(["a"], [0], policy="strict")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="author_id must be an integer"):
        parse_responses(["a"], [1.5])  # type: ignore[list-item]
    batch = parse_responses(["a", "b"], [0, 1])
    with pytest.raises(ValueError, match="group_ids_R must be 2 integers"):
        batch.votes([0])
    with pytest.raises(ValueError, match="group_ids_R must be 2 integers"):
        batch.votes([0.5, 1.0])
    assert parse_responses([None], [0]).responses_R[0].reason == "not_text"  # type: ignore[list-item]
