"""The ``debate-transcript/1`` reader and writer: every bad line named with its reason, nothing dropped."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters import transcripts
from adapters.tinker.tokens import TokenArray
from adapters.transcripts import (
    FORMAT,
    Debate,
    TranscriptError,
    Turn,
    debate_from_record,
    debate_to_record,
    dumps_debate,
    parse_line,
    read_transcript_file,
    read_transcripts,
    write_transcripts,
)
from tests._profile import examples
from tools import samples


def _rec(**over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": "d1",
        "question": "2 + 2?",
        "num_agents": 3,
        "max_rounds": 2,
        "turns": [{"agent": k % 3, "text": f"turn {k}"} for k in range(6)],
    }
    rec.update(over)
    return rec


def _err(rec: Any, line: int = 5) -> TranscriptError:
    got = parse_line(rec if isinstance(rec, str) else json.dumps(rec), line)
    assert isinstance(got, TranscriptError), got
    assert got.line == line
    return got


def test_a_good_line_reads_every_field() -> None:
    rec = _rec(format=FORMAT, meta={"source": "unit"})
    rec["turns"][0].update(round=0, observation_tokens=[1, 2], action_tokens=[3], logprobs=[-0.5], meta=[1])
    rec["turns"][0]["sequence_id"] = "session-0"
    d = parse_line(json.dumps(rec), 9)
    assert isinstance(d, Debate)
    assert (d.id, d.question, d.num_agents, d.max_rounds, d.line, d.meta) == (
        "d1",
        "2 + 2?",
        3,
        2,
        9,
        {"source": "unit"},
    )
    t0 = d.turns[0]
    assert (t0.agent, t0.text, t0.round, t0.observation_tokens, t0.action_tokens, t0.logprobs, t0.meta) == (
        0,
        "turn 0",
        0,
        (1, 2),
        (3,),
        (-0.5,),
        [1],
    )
    assert t0.has_tokens and not d.turns[1].has_tokens
    assert (t0.sequence_id, d.turns[1].sequence_id) == ("session-0", None)
    assert [t.agent for t in d.turns] == [0, 1, 2, 0, 1, 2]


def test_integer_ids_become_strings_and_max_rounds_is_optional() -> None:
    d = parse_line(json.dumps(_rec(id=17, max_rounds=None)), 1)
    assert isinstance(d, Debate)
    assert d.id == "17" and d.max_rounds is None
    rec = _rec()
    del rec["max_rounds"]
    d2 = parse_line(json.dumps(rec), 1)
    assert isinstance(d2, Debate) and d2.max_rounds is None


@pytest.mark.parametrize(
    ("line", "reason", "turn", "needle"),
    [
        ('{"id": "x", "question": ', "bad_json", None, "bad JSON"),
        ("[1, 2]", "not_object", None, "JSON object, got array"),
        ('{"id": "x", "num_agents": NaN}', "bad_json", None, "NaN"),
    ],
)
def test_unreadable_lines(line: str, reason: str, turn: int | None, needle: str) -> None:
    e = _err(line)
    assert (e.reason, e.turn) == (reason, turn)
    assert needle in e.message
    assert str(e).startswith("line 5")


@pytest.mark.parametrize(
    ("over", "reason", "needle"),
    [
        ({"format": "debate-transcript/2"}, "unsupported_format", "debate-transcript/2"),
        ({"question": 3}, "wrong_type", "question must be a string, got integer"),
        ({"id": 1.5}, "wrong_type", "id must be a string or an integer, got number"),
        ({"num_agents": "3"}, "wrong_type", "num_agents must be an integer, got string"),
        ({"num_agents": True}, "wrong_type", "num_agents must be an integer, got boolean"),
        ({"num_agents": 0}, "bad_value", "num_agents must be >= 1"),
        ({"num_agents": 10**6}, "bad_value", "num_agents must be <="),
        ({"max_rounds": 0}, "bad_value", "max_rounds must be >= 1"),
        ({"max_rounds": 2.0}, "wrong_type", "max_rounds must be an integer"),
        ({"turns": {}}, "wrong_type", "turns must be an array"),
        ({"turns": []}, "no_turns", "turns is empty"),
        ({"max_round": 3}, "unknown_field", "'max_round'"),
    ],
)
def test_wrong_debate_fields(over: dict[str, Any], reason: str, needle: str) -> None:
    e = _err(_rec(**over))
    assert e.reason == reason and e.turn is None
    assert needle in e.message, e.message


def test_missing_required_field() -> None:
    rec = _rec()
    del rec["question"]
    e = _err(rec)
    assert e.reason == "missing_field" and "'question'" in e.message
    assert e.debate_id == "d1"


def _turn_err(k: int, turn: Any, **over: Any) -> TranscriptError:
    rec = _rec(**over)
    rec["turns"][k] = turn
    return _err(rec)


@pytest.mark.parametrize(
    ("k", "turn", "reason", "needle"),
    [
        (2, "hello", "wrong_type", "a turn must be an object"),
        (2, {"agent": 2}, "missing_field", "'text'"),
        (2, {"agent": 2, "text": None}, "wrong_type", "text must be a string, got null"),
        (2, {"agent": "2", "text": "x"}, "wrong_type", "agent must be an integer"),
        (2, {"agent": 3, "text": "x"}, "agent_out_of_range", "agent 3 is out of range [0, 3)"),
        (2, {"agent": -1, "text": "x"}, "agent_out_of_range", "agent -1"),
        (2, {"agent": 1, "text": "x"}, "out_of_order", "expected agent 2"),
        (4, {"agent": 1, "text": "x", "round": 0}, "round_mismatch", "is round 1"),
        (1, {"agent": 1, "text": "x", "speaker": 1}, "unknown_field", "'speaker'"),
        (1, {"agent": 1, "text": "x", "action_tokens": [1]}, "incomplete_tokens", "observation_tokens"),
        (
            1,
            {"agent": 1, "text": "x", "observation_tokens": [1], "action_tokens": [1, 2], "logprobs": [-1.0]},
            "token_mismatch",
            "logprobs has 1 entries but action_tokens has 2",
        ),
        (
            1,
            {"agent": 1, "text": "x", "observation_tokens": [1.5], "action_tokens": [1], "logprobs": [-1.0]},
            "wrong_type",
            "observation_tokens must hold integers",
        ),
        (
            1,
            {"agent": 1, "text": "x", "observation_tokens": [-3], "action_tokens": [1], "logprobs": [-1.0]},
            "bad_value",
            "observation_tokens must hold ids",
        ),
        (
            1,
            {"agent": 1, "text": "x", "observation_tokens": [3], "action_tokens": [1], "logprobs": ["a"]},
            "wrong_type",
            "logprobs must hold numbers",
        ),
        (1, {"agent": 1, "text": "x", "sequence_id": 7}, "wrong_type", "sequence_id must be a string, got"),
        (1, {"agent": 1, "text": "x", "sequence_id": ""}, "bad_value", "sequence_id must not be empty"),
    ],
)
def test_wrong_turns_name_the_turn(k: int, turn: Any, reason: str, needle: str) -> None:
    e = _turn_err(k, turn)
    assert (e.reason, e.turn) == (reason, k), e
    assert needle in e.message, e.message
    assert f"turns[{k}]" in str(e) and "line 5" in str(e) and "'d1'" in str(e)


def test_turn_after_the_last_round_is_an_error() -> None:
    rec = _rec()
    rec["turns"].append({"agent": 0, "text": "one more"})
    e = _err(rec)
    assert (e.reason, e.turn) == ("turn_after_end", 6)
    assert "max_rounds=2" in e.message


def test_partial_last_round_is_fine() -> None:
    rec = _rec()
    rec["turns"] = rec["turns"][:4]
    d = parse_line(json.dumps(rec), 1)
    assert isinstance(d, Debate) and len(d.turns) == 4


def test_bad_utf8_is_an_error_for_that_line_only() -> None:
    good = json.dumps(_rec(id="ok")).encode()
    res = read_transcripts(b'{"id": "\xff"}\n' + good + b"\n")
    assert [e.reason for e in res.errors] == ["bad_encoding"]
    assert res.errors[0].line == 1
    assert [d.id for d in res.debates] == ["ok"]


def test_read_keeps_good_lines_and_names_every_bad_one() -> None:
    lines = [
        json.dumps(_rec(id="a")),
        "",
        "{oops",
        json.dumps(_rec(id="b", num_agents=2, turns=[{"agent": 1, "text": "x"}])),
        json.dumps(_rec(id="a")),
        "   ",
        json.dumps(_rec(id="c")),
    ]
    res = read_transcripts("\n".join(lines) + "\n")
    assert [d.id for d in res.debates] == ["a", "c"]
    assert [d.line for d in res.debates] == [1, 7]
    assert [(e.line, e.reason) for e in res.errors] == [
        (3, "bad_json"),
        (4, "out_of_order"),
        (5, "duplicate_id"),
    ]
    assert "line 1" in res.errors[2].message
    assert (res.num_lines, res.num_blank) == (7, 2)
    assert len(res.debates) + len(res.errors) + res.num_blank == res.num_lines


def test_line_separators_inside_strings_do_not_split_lines() -> None:
    rec = _rec(question="a\u2028b\u0085c")
    res = read_transcripts(dumps_debate(rec) + "\n")
    assert not res.errors and res.debates[0].question == "a\u2028b\u0085c"


def test_crlf_line_endings() -> None:
    res = read_transcripts(json.dumps(_rec()) + "\r\n" + json.dumps(_rec(id="e")) + "\r\n")
    assert [d.id for d in res.debates] == ["d1", "e"] and not res.errors


def test_file_reader(tmp_path: Any) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(_rec()) + "\n", encoding="utf-8")
    assert read_transcript_file(p).debates[0].id == "d1"
    with pytest.raises(OSError, match=r"missing\.jsonl"):
        read_transcript_file(tmp_path / "missing.jsonl")


def test_debate_from_record_raises_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"turns\[1\]: expected agent 1 .*\[out_of_order\]"):
        debate_from_record(_rec(turns=[{"agent": 0, "text": "a"}, {"agent": 0, "text": "b"}]))


_texts = st.text(max_size=30)
_tokens = st.lists(st.integers(0, 2**31 - 1), max_size=5)


@st.composite
def _debates(draw: st.DrawFn) -> Debate:
    n = draw(st.integers(1, 4))
    max_rounds = draw(st.one_of(st.none(), st.integers(1, 3)))
    limit = (max_rounds or 3) * n
    num_turns = draw(st.integers(1, limit))
    turns = []
    for k in range(num_turns):
        tokens = draw(st.booleans())
        act = draw(_tokens) if tokens else None
        turns.append(
            Turn(
                agent=k % n,
                text=draw(_texts),
                round=draw(st.sampled_from([None, k // n])),
                observation_tokens=tuple(draw(_tokens)) if tokens else None,
                action_tokens=tuple(act) if act is not None else None,
                logprobs=tuple(draw(st.lists(st.floats(-50, 0), min_size=len(act), max_size=len(act))))
                if act is not None
                else None,
                meta=draw(st.one_of(st.none(), st.integers(), st.text(max_size=5))),
                sequence_id=draw(st.one_of(st.none(), st.text(min_size=1, max_size=8))),
            )
        )
    return Debate(
        id=draw(_texts),
        question=draw(_texts),
        num_agents=n,
        turns=tuple(turns),
        max_rounds=max_rounds,
        meta=draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))),
    )


@given(st.lists(_debates(), max_size=4, unique_by=lambda d: d.id))
def test_write_then_read_round_trips(debates: list[Debate]) -> None:
    import io

    buf = io.StringIO()
    assert write_transcripts(debates, buf) == len(debates)
    res = read_transcripts(buf.getvalue())
    assert not res.errors
    assert list(res.debates) == debates
    assert [d.line for d in res.debates] == list(range(1, len(debates) + 1))


def _through_json(debate: Debate) -> Any:
    """The record as ``json`` writes and reads it (tuples and arrays as lists)."""
    return json.loads(json.dumps(debate_to_record(debate), ensure_ascii=False, allow_nan=False))


_ID_DTYPES = st.sampled_from([np.int64, np.int32, np.uint16, np.uint32, np.int8])


@st.composite
def _token_views(draw: st.DrawFn, debate: Debate) -> Debate:
    """``debate`` with its observation tokens as rollouts hand them over (a TokenArray), as a plain array
    or as a tuple."""
    turns = []
    for t in debate.turns:
        obs = t.observation_tokens
        if obs is not None:
            dtype = np.dtype(draw(_ID_DTYPES))
            info = np.iinfo(dtype)
            ids = draw(st.lists(st.integers(int(info.min), int(info.max)), max_size=40))
            ids = [min(max(x, int(info.min)), int(info.max)) for x in ids]
            arr = np.asarray(ids, dtype=dtype)
            obs = draw(st.sampled_from([TokenArray(arr), arr, tuple(ids)]))
        turns.append(dataclasses.replace(t, observation_tokens=obs))
    return dataclasses.replace(debate, turns=tuple(turns))


@given(_debates().flatmap(_token_views), st.lists(st.floats(-1e-3, 0) | st.floats(-1e30, -1e15), max_size=5))
def test_dumps_debate_gives_the_record_json_gives(debate: Debate, floats: list[float]) -> None:
    # orjson writes some floats in other words than json (-1.2e-05 as -0.000012): the values read back
    # are the same, bit for bit, by either reader; the rest of the text is json's
    debate = dataclasses.replace(debate, meta={"floats": floats})
    line = dumps_debate(debate)
    assert json.loads(line) == orjson.loads(line) == _through_json(debate)
    assert dumps_debate(debate_to_record(debate)) == line
    if not floats and all(t.logprobs is None for t in debate.turns):  # no float at all: json's text
        assert line == json.dumps(_through_json(debate), ensure_ascii=False, separators=(",", ":"))


def test_dumps_debate_writes_what_orjson_cannot_through_json() -> None:
    debate = Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "x"),), meta={"big": 2**70, 3: 0.5})
    line = dumps_debate(debate)
    assert line.endswith(',"meta":{"big":1180591620717411303424,"3":0.5}}')
    assert read_transcripts(line).debates[0].meta == {"big": 2**70, "3": 0.5}


def test_dumps_debate_refuses_nan_logprobs() -> None:
    turn = Turn(0, "x", observation_tokens=TokenArray(np.arange(3)), action_tokens=(1,), logprobs=(math.nan,))
    debate = Debate(id="a", question="q", num_agents=1, turns=(turn,))
    with pytest.raises(ValueError, match="logprobs must be finite"):
        dumps_debate(debate)


@given(st.text(max_size=200))
def test_reader_is_total_on_arbitrary_text(text: str) -> None:
    res = read_transcripts(text)
    assert len(res.debates) + len(res.errors) + res.num_blank == res.num_lines


@given(st.binary(max_size=200))
def test_reader_is_total_on_arbitrary_bytes(data: bytes) -> None:
    res = read_transcripts(data)
    assert len(res.debates) + len(res.errors) + res.num_blank == res.num_lines


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from([*_rec(), "x"]), c, max_size=4),
        max_leaves=12,
    )
)
def test_reader_is_total_on_arbitrary_json(value: Any) -> None:
    got = parse_line(json.dumps(value), 1)
    assert isinstance(got, Debate | TranscriptError)


def test_record_helpers_round_trip() -> None:
    d = debate_from_record(_rec(meta={"k": 1}))
    assert debate_from_record(debate_to_record(d)) == d
    assert "format" not in debate_to_record(d, with_format=False)
    assert json.loads(dumps_debate(d))["format"] == FORMAT


# --- the shipped samples ------------------------------------------------------------------------


def test_shipped_samples_are_up_to_date_and_all_readable() -> None:
    text = samples.sample_text()
    assert text == samples.render_file(), "run python -m tools.samples"
    res = read_transcripts(text)
    assert not res.errors, [str(e) for e in res.errors[:3]]
    assert len(res.debates) >= 100
    assert {d.num_agents for d in res.debates} == {2, 3, 4, 5}
    assert sum(1 for d in res.debates if d.turns[0].has_tokens) >= 5
    features = {f for d in res.debates for f in d.meta["features"]}
    for f in (
        "think_open",
        "think_noopen",
        "draft_comparison",
        "vote_lt",
        "vote_chain",
        "vote_bold",
        "stop_string",
        "duplicate",
        "fence",
        "consensus_variant",
        "two_agents",
        "tokens",
    ):
        assert f in features, f
    assert any(f.startswith("malformed_") for f in features)


def test_generator_is_deterministic_and_seeded() -> None:
    a = samples.generate_debates(5, seed=3)
    assert a == samples.generate_debates(5, seed=3)
    assert a != samples.generate_debates(5, seed=4)


def test_samples_check_mode(tmp_path: Any, capsys: Any) -> None:
    out = tmp_path / "s.jsonl"
    assert samples.main(["--count", "4", "--seed", "2", "--out", str(out)]) == 0
    assert samples.main(["--count", "4", "--seed", "2", "--out", str(out), "--check"]) == 0
    out.write_text("stale\n", encoding="utf-8")
    assert samples.main(["--count", "4", "--seed", "2", "--out", str(out), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err


# --- issue 8: crashes and small things in the reader ------------------------------------------------


def test_an_integer_logprob_beyond_float_range_is_one_bad_value() -> None:
    turns = [{"agent": 0, "text": "x", "observation_tokens": [1], "action_tokens": [2], "logprobs": [0]}]
    line = json.dumps(_rec(num_agents=1, turns=turns)).replace(
        '"logprobs": [0]', '"logprobs": [-' + "9" * 400 + "]"
    )
    err = _err(line)
    assert (err.reason, err.turn) == ("bad_value", 0)
    res = read_transcripts(line + "\n" + json.dumps(_rec(id="d2")) + "\n")
    assert [d.id for d in res.debates] == ["d2"] and [e.reason for e in res.errors] == ["bad_value"]


@pytest.mark.parametrize(
    ("over", "where"),
    [
        ({"id": "a\ud800"}, "id"),
        ({"question": "q\udfff"}, "question"),
        ({"turns": [{"agent": 0, "text": "x\ud800y"}]}, "turns[0].text"),
        ({"meta": {"note": ["ok", "\udc00"]}}, "meta.note[1]"),
        ({"meta": {"\ud800": 1}}, "(a key)"),
        ({"turns": [{"agent": 0, "text": "x", "meta": "\ud83d"}]}, "turns[0].meta"),
    ],
)
def test_a_lone_surrogate_in_any_string_refuses_the_line(over: dict[str, Any], where: str) -> None:
    line = json.dumps(_rec(**over))  # ensure_ascii: the surrogate travels as a valid JSON escape
    assert "\\ud" in line or "\\udc" in line or "\\udf" in line
    err = _err(line)
    assert err.reason == "bad_encoding" and where in err.message and "surrogate" in err.message
    assert err.turn == (0 if where.startswith("turns[0]") else None)
    str(err).encode("utf-8")  # the error itself prints
    assert isinstance(parse_line(line.encode("ascii"), 1), TranscriptError)  # the same from bytes
    raw = json.dumps(_rec(**over), ensure_ascii=False)  # a str holding the raw surrogate
    assert _err(raw).reason == "bad_encoding"


def test_a_surrogate_pair_escape_is_fine() -> None:
    d = parse_line(json.dumps(_rec(question="smile \U0001f600")), 1)
    assert isinstance(d, Debate) and d.question == "smile \U0001f600"


@given(st.lists(st.sampled_from(['"\\ud800"', '"\\udfff"', '"a"', '"\\ud83d\\ude00"', "1"]), max_size=4))
def test_every_debate_read_can_be_written_as_utf8(values: list[str]) -> None:
    line = (
        json.dumps(_rec())
        .replace('"2 + 2?"', '"q"')
        .replace('"max_rounds": 2', '"max_rounds": 2, "meta": [' + ", ".join(values) + "]")
    )
    got = parse_line(line, 1)
    if isinstance(got, Debate):
        dumps_debate(got).encode("utf-8")
    else:
        assert got.reason == "bad_encoding"


def test_bad_json_messages_say_at_once() -> None:
    msg = _err('{"id": "abc').message
    assert "at at" not in msg and msg == "bad JSON: Unterminated string starting at column 8"
    assert _err('{"id": 1, "question": "q"').message == "bad JSON: Expecting ',' delimiter at column 26"


def test_a_utf8_bom_does_not_cost_the_first_debate(tmp_path: Any) -> None:
    text = json.dumps(_rec()) + "\n" + json.dumps(_rec(id="d2")) + "\n"
    for source in (
        "\ufeff" + text,
        b"\xef\xbb\xbf" + text.encode(),
        ["\ufeff" + text.splitlines()[0], text.splitlines()[1]],
    ):
        res = read_transcripts(source)
        assert [d.id for d in res.debates] == ["d1", "d2"] and not res.errors
    path = tmp_path / "bom.jsonl"
    path.write_text(text, encoding="utf-8-sig")
    assert len(read_transcript_file(path).debates) == 2
    # Only at the start of the source: a BOM on a later line is an error on that line.
    res = read_transcripts(text + "\ufeff" + json.dumps(_rec(id="d3")) + "\n")
    assert [e.reason for e in res.errors] == ["bad_json"]


def test_has_tokens_checks_all_three_fields() -> None:
    assert Turn(0, "x", observation_tokens=(1,), action_tokens=(2,), logprobs=(-0.5,)).has_tokens
    assert not Turn(0, "x", observation_tokens=None, action_tokens=(2,), logprobs=(-0.5,)).has_tokens
    assert not Turn(0, "x", observation_tokens=(1,), action_tokens=(2,), logprobs=None).has_tokens
    assert not Turn(0, "x", observation_tokens=(1,), action_tokens=None, logprobs=None).has_tokens


def test_write_transcripts_to_a_path_is_all_or_nothing(tmp_path: Any) -> None:
    path = tmp_path / "out.jsonl"
    good = Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "x"),))
    write_transcripts([good], path)
    before = path.read_bytes()
    turn = Turn(0, "x", observation_tokens=(1,), action_tokens=(2,), logprobs=(float("nan"),))
    bad = Debate(id="b", question="q", num_agents=1, turns=(turn,))
    with pytest.raises(ValueError, match="logprobs must be finite"):
        write_transcripts([good, bad], path)  # a NaN logprob would not read back: refused after line 1
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_surrogate_deep_in_meta_is_found_without_recursion() -> None:
    deep = '"\\ud800"'
    for _ in range(900):
        deep = "[" + deep + "]"
    line = json.dumps(_rec()).replace('"max_rounds": 2', '"max_rounds": 2, "meta": ' + deep)
    err = _err(line)
    assert err.reason in ("bad_encoding", "bad_json")  # bad_json if this Python's decoder refuses the depth
    assert len(err.message) < 250


# --- fast paths of the reader against the value-by-value checks -----------------------------------

_odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5),
    st.integers(-(2**40), 2**40),
    st.floats(),
    st.text(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
)


def _outcome(f: Any, *args: Any) -> Any:
    """What ``f(*args)`` gives: its value, or the reason, message and turn of the ``_Invalid`` it raises."""
    try:
        return ("value", f(*args))
    except transcripts._Invalid as e:
        return ("invalid", e.reason, e.message, e.turn)


@example([0.5, float("nan"), -0.5])  # a NaN that min() and max() both step over
@example([-0.0, 3.4e38, -3.5e38])
@settings(max_examples=examples(300))
@given(st.lists(st.one_of(st.integers(-2, 2**31 + 1), st.booleans(), st.floats(0, 3)), max_size=6))
def test_token_ids_accept_exactly_the_ints_in_range(values: list[Any]) -> None:
    ok = all(type(v) is int for v in values) and all(0 <= v < 2**31 for v in values)
    got = _outcome(transcripts._token_ids, values, "action_tokens", 1)
    assert (got[0] == "value") == ok
    if ok:
        assert got[1] == tuple(values)


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(["\ud800", "\udc00x", "\ud83d\ude00", "\x00", "\u2028"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_BASE_LINES = [json.dumps(r, ensure_ascii=False) for r in samples.generate_debates(6, seed=11, token_every=2)]


@st.composite
def _edited_lines(draw: st.DrawFn) -> bytes:
    """A generated debate line, then edited: a field set to any JSON value (huge integers, NaN, lone
    surrogates included; json.dumps writes them), and / or bytes deleted, inserted or replaced."""
    rec = json.loads(draw(st.sampled_from(_BASE_LINES)))
    if draw(st.booleans()):
        path = draw(st.sampled_from(["id", "question", "num_agents", "max_rounds", "meta", "turns", "t"]))
        value = draw(_JSON_VALUES)
        if path == "t" and rec["turns"]:
            turn = rec["turns"][draw(st.integers(0, len(rec["turns"]) - 1))]
            turn[draw(st.sampled_from(["agent", "text", "round", "action_tokens", "logprobs", "x"]))] = value
        else:
            rec[path] = value
    text = json.dumps(rec, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.binary(max_size=3)) + text[at + cut :]
    return text


@settings(max_examples=examples(300), deadline=None)
@given(line=_edited_lines())
@example(line=json.dumps({**json.loads(_BASE_LINES[0]), "id": 2**66}).encode())  # orjson: a float
@example(line=b'{"id": "a", "question": "q", "num_agents": 2.0, "turns": [], "meta": [NaN, 1e999]}')
@example(line=b'{"id": "a", "question": "\\ud800", "num_agents": 2, "turns": []}')
@example(line=b'{"id": "a", "question": "\xed\xa0\x80", "num_agents": 2, "turns": []}')
def test_the_orjson_reader_reads_what_the_json_reader_reads(line: bytes) -> None:
    # parse_line through orjson where it stands in for json.loads, against the json path alone: the same
    # debate or the same error (reason and message) for any line, well-formed or not
    assert transcripts._orjson_loads is not None  # orjson comes with the tinker SDK of the test extra
    fast = transcripts.parse_line(line, 3)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(transcripts, "_orjson_loads", None)
        slow = transcripts.parse_line(line, 3)
    assert repr(fast) == repr(slow)


def test_a_line_that_is_not_text_is_a_type_error_naming_it_on_every_reader() -> None:
    # read_transcripts and the streaming pipeline share the line reader's check
    from adapters import pipeline

    with pytest.raises(TypeError, match="line 2 of source must be a str or bytes, got NoneType"):
        read_transcripts(["", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="line 2 of source must be a str or bytes, got int"):
        list(pipeline.score_chunks([b"", 3]))  # type: ignore[list-item]


def test_score_checks_in_memory_debates_as_the_reader_checks_lines() -> None:
    """Found by review: pipeline.score put a negative token id of a Debate built in memory into the
    datums, and a debate with num_agents = 0 raised ZeroDivisionError; a file holding either is refused
    line by line. Such debates are now skipped with the reader's reason; the others are scored."""
    from adapters import pipeline
    from adapters.transcripts import Debate, Turn, check_debates

    ok = (
        "<solution>1</solution><evaluation>e</evaluation><comparison>N/A</comparison>"
        "<consensus>NO</consensus><consensus_reason>r</consensus_reason>"
    )
    debates = [
        Debate(
            "neg",
            "q",
            2,
            (Turn(0, ok, None, (1, -2), (5,), (-0.1,)), Turn(1, ok, None, (1, 2), (5,), (-0.1,))),
        ),
        Debate("zero", "q", 0, (Turn(0, ok),)),
        Debate("round", "q", 2, (Turn(0, ok, round=3),)),
        Debate("good", "q", 2, (Turn(0, ok, None, (1, 2), (5,), (-0.1,)), Turn(1, ok))),
    ]
    good, errors = check_debates(debates)
    assert [d.id for d in good] == ["good"]
    assert [(e.debate_id, e.reason) for e in errors] == [
        ("neg", "bad_value"),
        ("zero", "bad_value"),
        ("round", "round_mismatch"),
    ]
    result = pipeline.score(debates)
    assert [r.debate.id for r in result.replayed] == ["good"]
    assert [e.debate_id for e in result.errors] == ["neg", "zero", "round"]
    assert (result.datums.arrays["input_tokens"] >= 0).all()


# --- issue 36: memory bounded by the work, not by the file ---------------------------------------------


@settings(max_examples=examples(100))
@given(
    lengths=st.lists(st.integers(0, 12), max_size=8),
    last_newline=st.booleans(),
    limit=st.integers(1, 8),
)
def test_bounded_lines_keep_short_lines_and_stand_in_for_long_ones(
    lengths: list[int], last_newline: bool, limit: int
) -> None:
    """Every line keeps its place: short ones as their bytes (ending included), each longer than the limit
    as LineTooLarge with its length, whatever the pieces it was read in."""
    import io

    lines = [bytes([97 + i % 26]) * n for i, n in enumerate(lengths)]
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    want: list[Any] = []
    for i, line in enumerate(lines):
        if i == len(lines) - 1 and not line and not last_newline:
            break  # "a\n" then nothing: no line after the last newline
        ending = b"\n" if i < len(lines) - 1 or last_newline else b""
        want.append(line + ending if len(line) <= limit else transcripts.LineTooLarge(len(line)))
    assert list(transcripts.bounded_lines(io.BytesIO(data), limit)) == want


def test_a_line_over_the_limit_is_an_error_in_its_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setattr(transcripts, "MAX_LINE_BYTES", 400)
    good = json.dumps(_rec(id="a"))
    long = json.dumps(_rec(id="b", question="x" * 500))
    assert len(good) < 400 < len(long)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good, long, good.replace('"a"', '"c"')]) + "\n", "utf-8")
    res = read_transcript_file(path)
    assert [d.id for d in res.debates] == ["a", "c"] and res.num_lines == 3
    (err,) = res.errors
    assert (err.line, err.reason) == (2, "line_too_large")
    assert f"has {len(long):,} bytes, over the 400" in err.message
    # the same for lines handed over in memory (str: characters)
    assert [e.reason for e in read_transcripts([good, long]).errors] == ["line_too_large"]


def test_an_integer_of_thousands_of_digits_is_named_in_plain_words() -> None:
    got = _err('{"id": 1' + "1" * 5000 + ', "question": "q", "num_agents": 2, "turns": []}', 3)
    assert got.reason == "bad_json" and "set_int_max_str_digits" not in got.message
    assert got.message == "bad JSON: an integer with more than 4300 digits"


_TRICKY = st.sampled_from(
    [
        *(None, True, False, 0, 1, 2, -1, 3, 2**31, 2**31 - 1, 2**70, 1.0, 0.5, -0.5, 1e39, -1e39),
        *(math.inf, math.nan, "", "x", FORMAT, [], [1], [True], [1.0], [-1], [2**31], [0.5], [-0.25, 1]),
        *([2**1100], [math.inf], [-3.5e38], {}, {"a": 1}),
    ]
)


_TOKEN_LINES = [orjson.dumps(r) for r in samples.generate_debates(8, seed=12, token_every=4)[3::4]]
_SCALARS = st.sampled_from([True, 0, -1, 2**31, 2**70, 1.0, -0.5, 1e39, -3.5e38, math.inf, math.nan, "1"])


@st.composite
def _edited_records(draw: st.DrawFn) -> Any:
    """A generated debate record (as orjson reads it), most with tokens, with a few edits: a field of
    the debate or of a turn set to a value near what the checks accept or refuse, deleted or added, or
    one entry of a turn's token ids or logprobs replaced."""
    rec = orjson.loads(draw(st.sampled_from([*_BASE_LINES, *_TOKEN_LINES])))
    for _ in range(draw(st.integers(0, 3))):
        turns = rec.get("turns")
        if not (isinstance(turns, list) and turns and draw(st.integers(0, 3))):
            target, names = rec, [*transcripts._DEBATE_FIELDS, "x"]
        else:
            tokens = [t for t in turns if isinstance(t, dict) and isinstance(t.get("logprobs"), list)]
            if tokens and draw(st.booleans()):
                target, names = (
                    draw(st.sampled_from(tokens)),
                    ["observation_tokens", "action_tokens", "logprobs"],
                )
            else:
                target, names = draw(st.sampled_from(turns)), [*transcripts._TURN_FIELDS, "x"]
        if not isinstance(target, dict):
            continue
        name = draw(st.sampled_from(names))
        value = target.get(name)
        if isinstance(value, list) and value and draw(st.booleans()):
            value[draw(st.integers(0, len(value) - 1))] = draw(_SCALARS)
        elif draw(st.integers(0, 4)) == 0:
            target.pop(name, None)
        else:
            target[name] = draw(_TRICKY)
    return rec if draw(st.integers(0, 9)) else draw(st.sampled_from([rec.get("turns"), 3]))


def _plain_record(num_agents: int, turns: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A debate record of ``num_agents`` agents with turns in speaking order, plus the given fields."""
    rec = {"id": "a", "question": "q", "num_agents": num_agents, **fields}
    rec["turns"] = [{"agent": k % num_agents, "text": "x", **t} for k, t in enumerate(turns)]
    return rec


@settings(max_examples=examples(300), deadline=None)
@given(rec=_edited_records())
@example(rec=_plain_record(1, [{"round": 0}], id=1))
@example(rec=_plain_record(2, [{}, {}, {}], max_rounds=1))  # a turn after the end
@example(rec=_plain_record(1025, [{}]))
@example(rec=_plain_record(2, [{"agent": False}]))
@example(rec=_plain_record(2, [{}, {"round": 1}]))
@example(rec=_plain_record(2, [{"round": 0.0, "meta": 1}]))
@example(rec=_plain_record(2, [{"sequence_id": ""}]))
@example(rec=_plain_record(2, [{"observation_tokens": [1], "action_tokens": [2, 3], "logprobs": [-1, -0.5]}]))
@example(rec=_plain_record(2, [{"observation_tokens": [-1], "action_tokens": [2], "logprobs": [-0.5]}]))
@example(rec=_plain_record(2, [{"observation_tokens": [], "action_tokens": [2], "logprobs": [-3.5e38]}]))
@example(rec=_plain_record(2, [{"observation_tokens": [], "action_tokens": [], "logprobs": []}]))
def test_the_plain_checks_read_what_the_full_checks_read(rec: Any) -> None:
    # _plain_debate vouches only for records that pass every check: with it and without it the same
    # debate, or the same error (reason, message, turn), for any record
    fast = transcripts._debate_or_error(rec, 4)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(transcripts, "_plain_debate_of", None)
        slow = transcripts._debate_or_error(rec, 4)
    assert repr(fast) == repr(slow)
    plain = transcripts._plain_debate(rec, 4)
    assert plain is None or repr(plain) == repr(slow)


def test_the_plain_checks_vouch_for_the_generated_debates() -> None:
    # the path the reader takes for the lines it is usually given (else it would save nothing)
    for line in _BASE_LINES:
        assert isinstance(transcripts._plain_debate(orjson.loads(line), 1), Debate)


@given(
    agent=st.integers(0, 3),
    text=st.text(max_size=5),
    rnd=st.none() | st.integers(0, 3),
    tokens=st.none()
    | st.tuples(st.lists(st.integers(0, 9), max_size=3), st.lists(st.integers(0, 9), max_size=3)),
    meta=st.none() | st.integers() | st.text(max_size=3),
    sequence_id=st.none() | st.text(min_size=1, max_size=3),
)
def test_a_drafted_turn_is_the_dataclass_turn(
    agent: int, text: str, rnd: int | None, tokens: Any, meta: Any, sequence_id: str | None
) -> None:
    obs, act = (None, None) if tokens is None else (tuple(tokens[0]), tuple(tokens[1]))
    lps = None if act is None else tuple(-0.5 for _ in act)
    fields = (agent, text, rnd, obs, act, lps, meta, sequence_id)
    drafted, built = transcripts._new_turn(*fields), Turn(*fields)
    assert type(drafted) is Turn
    assert drafted == built and hash(drafted) == hash(built) and repr(drafted) == repr(built)
    assert pickle.loads(pickle.dumps(drafted)) == built
    assert dataclasses.replace(drafted, text="other") == dataclasses.replace(built, text="other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        drafted.text = "other"  # type: ignore[misc]
