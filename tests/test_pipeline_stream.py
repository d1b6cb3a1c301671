"""Streaming ``score``: any chunk size gives the records, summary and datums of one whole-file run."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel
from adapters import _json, pipeline
from adapters.cli import main
from adapters.cli._score_jobs import record_line  # read back as the strict encoder's text: tested below
from adapters.pipeline import stages
from adapters.transcripts import read_transcripts
from tools import samples

_RESP = (
    "<solution>4</solution><evaluation>ok</evaluation><comparison>{c}</comparison>"
    "<consensus>{y}</consensus><consensus_reason>r</consensus_reason>"
)


def _lines() -> list[str]:
    """Generated debates (some with tokens) mixed with every kind of skipped line."""
    recs = samples.generate_debates(14, seed=3, token_every=4)
    lines = [json.dumps(r) for r in recs]
    one = {"id": "solo", "question": "q", "num_agents": 1, "turns": [{"agent": 0, "text": "x"}]}
    over = {
        "id": "over",
        "question": "q",
        "num_agents": 2,
        "max_rounds": 1,
        "turns": [{"agent": k % 2, "text": _RESP.format(c="Agent 0 > Agent 1", y="NO")} for k in range(3)],
    }
    lines[2:2] = ["", "{not json", json.dumps(one), "   "]
    lines[9:9] = [json.dumps(over), lines[0]]  # the second is a repeated id
    lines.append("")
    return lines


LINES = _lines()
assert sum('"action_tokens"' in line for line in LINES) >= 3  # datums are part of what is compared


def _options(estimator: str = "default", after_end: Any = "error", **scoring: Any) -> pipeline.ScoreOptions:
    spec = kernel.AdvantageOptions.from_spec(estimator)
    return pipeline.ScoreOptions(kernel.ScoringOptions(estimator=spec, **scoring), after_end=after_end)


OPTIONS = [
    pipeline.ScoreOptions(),
    _options("tinker", parse_policy="reference", reward_mode="win_minus_loss", datum_mode="reference"),
    _options("verl_grpo.norm", after_end="truncate", round1_votes="drop"),
    _options("default,singleton=zero"),
    _options("trl_grpo.batch"),  # batch-wide statistics: one chunk
]


def whole_result(lines: list[str], options: pipeline.ScoreOptions) -> pipeline.BatchResult:
    """The lines read and scored at once: the oracle of every streamed path."""
    read = read_transcripts("".join(line + "\n" for line in lines))
    return pipeline.score(
        read.debates,
        options=options,
        read_errors=read.errors,
        num_lines=read.num_lines,
        num_blank=read.num_blank,
    )


def _whole(lines: list[str], options: pipeline.ScoreOptions) -> tuple[str, dict[str, Any], Any]:
    result = whole_result(lines, options)
    records = "".join(map(record_line, pipeline.debate_records(result)))
    return records, pipeline.summary(result), result.datums


def _streamed(
    lines: list[str], options: pipeline.ScoreOptions, chunk_size: int
) -> tuple[str, dict[str, Any], Any, int]:
    acc = pipeline.ScoreAccumulator(options)
    parts: list[str] = []
    chunks = 0
    for chunk in pipeline.score_chunks(iter(lines), options=options, chunk_size=chunk_size):
        chunks += 1
        acc.add(chunk)
        for rec in pipeline.debate_records(dataclasses.replace(chunk, errors=())):
            parts.append(record_line(rec))
    for rec in pipeline.skipped_records(acc.sorted_errors()):
        parts.append(record_line(rec))
    return "".join(parts), acc.summary(), acc.datums(), chunks


def _same_datums(got: Any, want: Any) -> None:
    assert (got is None) == (want is None)
    if want is not None:
        assert got.stats == want.stats
        assert sorted(got.arrays) == sorted(want.arrays)
        for name, x in want.arrays.items():
            assert got.arrays[name].dtype == x.dtype, name
            np.testing.assert_array_equal(got.arrays[name], x, err_msg=name)


@given(
    chunk_size=st.integers(1, 20),
    which=st.integers(0, len(OPTIONS) - 1),
    cut=st.integers(0, len(LINES)),
)
def test_any_chunk_size_gives_the_whole_file_results(chunk_size: int, which: int, cut: int) -> None:
    options = OPTIONS[which]
    lines = LINES[cut:] + LINES[:cut]  # rotations move the skipped lines and the repeated id around
    want_records, want_summary, want_datums = _whole(lines, options)
    got_records, got_summary, got_datums, chunks = _streamed(lines, options, chunk_size)
    assert got_records == want_records
    assert got_summary == want_summary
    _same_datums(got_datums, want_datums)
    if not pipeline.batch_wide(options) and chunk_size < 10:
        assert chunks > 1  # the test really splits the input


def test_empty_input_is_one_empty_chunk() -> None:
    for lines in ([], ["", "  "]):
        got = _streamed(lines, pipeline.ScoreOptions(), 3)
        want = _whole(lines, pipeline.ScoreOptions())
        assert got[:3] == want and got[3] == 1


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        next(pipeline.score_chunks([], chunk_size=0))


@pytest.mark.parametrize("chunk_size", [1, 4, 10_000])
def test_cli_out_is_the_whole_file_run(
    chunk_size: int, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(LINES) + "\n", "utf-8")
    out_file = tmp_path / "o.jsonl"
    monkeypatch.setattr(pipeline, "DEFAULT_CHUNK_SIZE", chunk_size)
    assert main(["score", str(path), "--out", str(out_file), "--json"]) == 0
    want_records, want_summary, want_datums = _whole(LINES, pipeline.ScoreOptions())
    assert out_file.read_text("utf-8") == want_records
    summ = json.loads(capsys.readouterr().out)
    assert summ.pop("source") == str(path)
    assert summ == json.loads(_json.dumps(want_summary))
    with np.load(tmp_path / "o.datums.npz") as z:
        for name, x in want_datums.arrays.items():
            np.testing.assert_array_equal(z[name], x, err_msg=name)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),  # NaN and ±inf included
    st.text(max_size=5),
    st.integers(-5, 5).map(np.int64),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
)
_values = st.recursive(
    _leaf, lambda x: st.lists(x, max_size=3) | st.dictionaries(st.text(max_size=3), x, max_size=3)
)


@given(st.dictionaries(st.text(max_size=4), _values, max_size=4))
def test_record_lines_read_back_as_the_strict_encoders_text(rec: dict[str, Any]) -> None:
    line = record_line(rec)
    assert line.endswith("\n") and "\n" not in line[:-1]
    strict = json.loads(_json.dumps(rec, ensure_ascii=False))  # non-finite floats as null
    assert json.loads(line, parse_constant=_refuse) == strict
    assert json.dumps(json.loads(line)) == json.dumps(strict)  # the same floats, bit for bit


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=40))
def test_exact_logprob_sum_is_the_correctly_rounded_sum(xs: list[float]) -> None:
    import math

    exact = stages._exact_sum(np.asarray(xs, dtype=np.float64))
    assert exact / (1 << 172) == math.fsum(xs)
    halves = stages._exact_sum(np.asarray(xs[::2])) + stages._exact_sum(np.asarray(xs[1::2]))
    assert halves == exact  # partial sums merge exactly


_finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.lists(st.lists(_finite, max_size=6), max_size=4))
def test_summary_moments_are_exact_whatever_the_split(parts: list[list[float]]) -> None:
    from fractions import Fraction

    from adapters.pipeline.summary import _Moments

    m, whole = _Moments(), _Moments()
    for part in parts:
        m.add(np.array(part, dtype=np.float64))
    values = [x for part in parts for x in part]
    whole.add(np.array(values, dtype=np.float64))
    assert m.figures() == whole.figures()
    if not values:
        assert m.figures() == {"mean": None, "std": None, "min": None, "max": None}
        return
    n = len(values)
    exact = [Fraction(x) for x in values]
    mean = sum(exact) / n
    variance = sum((x - mean) ** 2 for x in exact) / n
    assert m.mean() == float(mean)  # Fraction → float rounds once, to nearest
    std, ulp = Fraction(m.std()), Fraction(math.ulp(m.std()))  # within 2 ulps of the exact root
    assert max(std - 2 * ulp, 0) ** 2 <= variance <= (std + 2 * ulp) ** 2
    assert (m.min, m.max) == (min(values), max(values))


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([1.0, float("nan")], (None, None, None, None)),
        ([1.0, float("inf")], (None, None, 1.0, None)),
        ([float("-inf"), 2.0], (None, None, None, 2.0)),
        ([float("-inf"), float("inf")], (None, None, None, None)),
    ],
)
def test_summary_moments_of_non_finite_values_are_null_where_numpy_is_not_finite(
    values: list[float], want: tuple[float | None, ...]
) -> None:
    from adapters.pipeline.summary import _Moments

    m = _Moments()
    m.add(np.array(values))
    x = np.array(values)
    with np.errstate(invalid="ignore"):
        numpy = [float(np.mean(x)), float(np.std(x)), float(np.min(x)), float(np.max(x))]
    assert tuple(m.figures().values()) == want
    assert [v is None for v in want] == [not np.isfinite(v) for v in numpy]


@pytest.mark.parametrize("memory_ids", [None, 0, 2])  # None: the default; 0 and 2: earlier ids on disk
def test_an_id_from_an_earlier_chunk_is_a_duplicate_naming_its_first_line(
    memory_ids: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if memory_ids is not None:
        monkeypatch.setattr(
            stages, "SeenIds", functools.partial(pipeline.SeenIds, memory_ids=memory_ids, block=1)
        )
    line = '{"id": "%s", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
    lines = [line % "a", line % "b", line % "c", line % "a", line % "a", line % "b"]
    want = read_transcripts(lines).errors  # one reader over the whole input
    for size in (1, 2, 3):
        chunks = list(pipeline.score_chunks(lines, chunk_size=size))
        got = sorted((e for c in chunks for e in c.errors), key=lambda e: e.line)
        assert got == list(want), size
        assert [r.debate.id for c in chunks for r in c.replayed] == ["a", "b", "c"]
    assert [e.message for e in want] == [
        f"id {i!r} was already used on line {n}" for i, n in zip("aab", (1, 1, 2), strict=True)
    ]


def test_seen_ids_merge_their_runs_and_find_every_first_line() -> None:
    seen = pipeline.SeenIds()
    for k in range(0, 100, 7):  # runs of 7 ids: merged as a binary counter
        seen.add([f"id{j}" for j in range(k, min(k + 7, 100))], list(range(k + 1, min(k + 8, 101))))
    assert (
        seen.first_lines([f"id{j}" for j in range(-5, 105)]).tolist()
        == [0] * 5 + list(range(1, 101)) + [0] * 5
    )
