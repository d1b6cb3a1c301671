"""``votes_from_responses`` builds columns without a Python step per vote: it equals the obvious loop."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel import OP_EQ, OP_GT, OP_OTHER, ParsedResponse, Vote, votes_from_responses

_I32 = (-(2**31), 2**31 - 1)
_ids = st.one_of(st.integers(-3, 8), st.integers(-(2**70), 2**70))
_votes = st.lists(st.builds(Vote, _ids, st.sampled_from([">", "=", "<", ">=", "", "=>"]), _ids), max_size=6)
_responses = st.lists(
    st.builds(lambda u, v, ok: ParsedResponse.make(u, votes=tuple(v), ok=ok), _ids, _votes, st.booleans()),
    max_size=5,
)


def _loop(responses_P: list[list[ParsedResponse]], include_failed: bool) -> list[tuple[int, ...]]:
    """The slow path: one row per vote, ids clamped to int32 one at a time."""

    def clamp(x: int) -> int:
        return min(max(x, _I32[0]), _I32[1])

    rows = []
    for p, responses in enumerate(responses_P):
        for r in responses:
            if r.ok or include_failed:
                for v in r.votes:
                    op = OP_GT if v.op == ">" else OP_EQ if v.op == "=" else OP_OTHER
                    rows.append((p, clamp(r.author_id), clamp(v.a), op, clamp(v.b)))
    return rows


@given(st.lists(_responses, max_size=6), st.booleans())
def test_columns_equal_the_per_vote_loop(
    responses_P: list[list[ParsedResponse]], include_failed: bool
) -> None:
    got = votes_from_responses(responses_P, include_failed=include_failed)
    assert all(x.dtype == np.int32 for x in got[:5])
    assert list(zip(*(x.tolist() for x in got[:5]), strict=True)) == _loop(responses_P, include_failed)


def test_non_string_operators_and_mixed_ids_take_the_general_path() -> None:
    r = ParsedResponse.make(1, votes=(Vote(0, ">", 2), Vote(2**40, 7, True), Vote(np.int64(3), "=", 0)))  # type: ignore[arg-type]
    got = votes_from_responses([[r]])
    assert [x.tolist() for x in got[:5]] == [
        [0, 0, 0],
        [1, 1, 1],
        [0, _I32[1], 3],
        [OP_GT, OP_OTHER, OP_EQ],
        [2, 1, 0],
    ]
