"""``score --out`` records read back (:mod:`adapters.pipeline.results`): every field the report draws is the
one written, and the reader is total (any line gives a record or an error with a reason code)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import pipeline
from adapters.pipeline import ResultReader, ScoredRecord, SkippedRecord, read_result
from adapters.transcripts import LineTooLarge, TranscriptError, read_transcripts
from tests._profile import examples
from tools.samples import sample_text

REASONS = {
    "bad_json",
    "bad_encoding",
    "not_object",
    "missing_field",
    "wrong_type",
    "bad_value",
    "line_too_large",
}


def _records() -> list[dict[str, Any]]:
    """The records ``score --out`` writes for the samples, and for two lines it skips."""
    read = read_transcripts(sample_text() + "{oops\n[1]\n")
    return pipeline.debate_records(pipeline.score(read.debates, read_errors=read.errors))


RECORDS = _records()


def _same(figures: tuple[float, ...], written: list[float | None]) -> bool:
    return all((math.isnan(x) and w is None) or x == w for x, w in zip(figures, written, strict=True))


def test_every_record_reads_back_as_written() -> None:
    for k, rec in enumerate(RECORDS, 1):
        got = read_result(json.loads(json.dumps(rec)), k)
        if rec["status"] == "skipped":
            assert isinstance(got, SkippedRecord), got
            assert got.error.to_record() == rec["error"]
            continue
        assert isinstance(got, ScoredRecord), got
        assert (got.id, got.line, got.num_agents, got.rounds, got.num_turns, got.end) == (
            rec["id"],
            rec["line"],
            rec["num_agents"],
            rec["rounds"],
            rec["num_turns"],
            rec["end"],
        )
        for name in ("rewards", "step_rewards", "returns", "advantages"):
            assert _same(getattr(got, name), rec[name]), (rec["id"], name)
        votes = rec["votes"]
        assert (got.votes_total, got.votes_malformed) == (votes["total"], votes["malformed"])
        assert [[v.author, v.a, v.op, v.b, v.valid, v.reason] for v in got.votes] == [
            [v["author"], v["a"], v["op"], v["b"], v["valid"], v["reason"]] for v in votes["list"]
        ]
        assert [list(f) for f in got.parse_failures] == [
            [f["turn"], f["agent"], f["reason"]] for f in rec["parse_failures"]
        ]
        d = rec.get("datums")
        assert got.datums == (None if d is None else (d["count"], d["tokens"], d["action_tokens"]))
    assert {type(read_result(r, 1)) for r in RECORDS} == {ScoredRecord, SkippedRecord}


def test_a_null_figure_reads_as_nan_and_more_fields_are_ignored() -> None:
    rec = copy.deepcopy(next(r for r in RECORDS if r["status"] == "scored"))
    rec["advantages"][0] = None
    rec["added_later"] = {"x": 1}
    got = read_result(rec, 1)
    assert isinstance(got, ScoredRecord) and math.isnan(got.advantages[0])


@pytest.mark.parametrize(
    ("change", "reason", "words"),
    [
        (lambda r: r.pop("status"), "missing_field", "missing required field 'status'"),
        (lambda r: r.update(status="done"), "bad_value", "status must be 'scored' or 'skipped'"),
        (lambda r: r.update(num_agents=0), "bad_value", "num_agents must be in [1, 1025), got 0"),
        (lambda r: r.update(rewards=r["rewards"][:-1]), "bad_value", "rewards must hold num_agents"),
        (lambda r: r["advantages"].__setitem__(0, "1"), "wrong_type", "advantages must hold numbers or null"),
        (lambda r: r["votes"].pop("list"), "missing_field", "missing required field 'list'"),
        (lambda r: r.update(end=3), "wrong_type", "end must be a string, got integer"),
        (lambda r: r.update(id=True), "wrong_type", "id must be a string or an integer, got boolean"),
    ],
)
def test_a_damaged_record_is_an_error_naming_the_field(change: Any, reason: str, words: str) -> None:
    rec = copy.deepcopy(next(r for r in RECORDS if r["status"] == "scored" and r["votes"]["list"]))
    change(rec)
    got = read_result(rec, 7)
    assert isinstance(got, TranscriptError) and got.line == 7, got
    assert got.reason == reason and words in got.message, got


def test_a_valid_vote_names_two_agents_of_the_debate_and_an_invalid_one_any() -> None:
    rec = copy.deepcopy(next(r for r in RECORDS if r["status"] == "scored" and r["votes"]["list"]))
    vote = rec["votes"]["list"][0]
    vote.update(valid=False, a=99, reason="out_of_range")
    assert isinstance(read_result(rec, 1), ScoredRecord)
    vote.update(valid=True)
    got = read_result(rec, 1)
    assert isinstance(got, TranscriptError) and "votes.list a (of a valid vote) must be in [0," in got.message


def test_the_reader_counts_lines_skips_a_bom_and_refuses_what_it_cannot_read() -> None:
    reader = ResultReader()
    good = json.dumps(RECORDS[0])
    got = [reader.feed(x) for x in ["\ufeff" + good, "", b"\xff\n", LineTooLarge(10), good.encode()]]
    assert isinstance(got[0], ScoredRecord) and got[1] is None and isinstance(got[4], ScoredRecord)
    assert [(e.line, e.reason) for e in got[2:4] if isinstance(e, TranscriptError)] == [
        (3, "bad_encoding"),
        (4, "line_too_large"),
    ]
    assert (reader.num_lines, reader.num_blank) == (5, 1)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_FIELDS = sorted({k for r in RECORDS for k in r} | {"count", "tokens", "a", "b", "op", "valid", "list"})


@settings(max_examples=examples(200))
@given(
    base=st.sampled_from(RECORDS),
    edits=st.lists(st.tuples(st.sampled_from(_FIELDS), _JSON), max_size=3),
    value=_JSON,
)
def test_the_reader_is_total(base: dict[str, Any], edits: list[tuple[str, Any]], value: Any) -> None:
    """A record with any fields replaced by any JSON, and any JSON value, reads as a record or an error
    with a known reason code; never an exception."""
    rec = copy.deepcopy(base)
    for name, new in edits:
        for target in (rec, rec.get("votes"), rec.get("datums")):
            if isinstance(target, dict) and name in target:
                target[name] = new
    for candidate in (rec, value):
        got = read_result(candidate, 3)
        assert isinstance(got, ScoredRecord | SkippedRecord | TranscriptError)
        if isinstance(got, TranscriptError):
            assert got.reason in REASONS and got.line == 3, got
        line = ResultReader().feed(json.dumps(candidate))
        assert type(line) is type(got)
