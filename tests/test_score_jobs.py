"""``score --jobs N``: chunks scored in worker processes give the records, summary and datums of one
whole-file run, whatever N and the chunk size (ids repeated across chunks included)."""

from __future__ import annotations

import concurrent.futures
import functools
import json
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters import pipeline
from adapters.cli import _score_jobs, main
from adapters.cli import score as cli_score
from tests.test_pipeline_stream import LINES, OPTIONS, _same_datums, _whole

_PER_DEBATE = [o for o in OPTIONS if not pipeline.batch_wide(o)]


def _parallel(
    lines: list[str], options: pipeline.ScoreOptions, jobs: int, chunk_lines: int
) -> tuple[str, dict[str, Any], Any, list[list[str]]]:
    acc = pipeline.ScoreAccumulator(options)
    parts: list[str] = []
    table: list[list[str]] = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for part in cli_score.scored_in_parallel(
            iter(lines),
            options,
            jobs=jobs,
            chunk_lines=chunk_lines,
            records=True,
            table_rows=None,
            executor=pool,
        ):
            acc.num_lines += part.num_lines
            acc.num_blank += part.num_blank
            acc.add_figures(part.figures)
            parts.append(part.records)
            table.extend(part.table)
    for rec in pipeline.skipped_records(acc.sorted_errors()):
        parts.append(_score_jobs.record_line(rec))
    return "".join(parts), acc.summary(), acc.datums(), table


@given(
    jobs=st.integers(1, 3),
    chunk_lines=st.integers(1, 12),
    which=st.integers(0, len(_PER_DEBATE) - 1),
    cut=st.integers(0, len(LINES)),
    bom=st.booleans(),
    memory_ids=st.sampled_from([None, 0, 1]),  # None: the default; 0 and 1: the earlier ids on disk
)
def test_parallel_chunks_give_the_whole_file_results(
    jobs: int, chunk_lines: int, which: int, cut: int, bom: bool, memory_ids: int | None
) -> None:
    options = _PER_DEBATE[which]
    lines = LINES[cut:] + LINES[:cut]  # moves the bad lines and the repeated id across chunk edges
    if bom:
        lines = ["\ufeff" + lines[0], *lines[1:]]
    want_records, want_summary, want_datums = _whole(lines, options)
    seen = (
        pipeline.SeenIds if memory_ids is None else functools.partial(pipeline.SeenIds, memory_ids=memory_ids)
    )
    with mock.patch.object(pipeline, "SeenIds", seen):
        got_records, got_summary, got_datums, table = _parallel(lines, options, jobs, chunk_lines)
    assert got_records == want_records
    assert got_summary == want_summary
    _same_datums(got_datums, want_datums)
    assert len(table) == want_summary["debates_scored"]


def test_an_id_from_an_earlier_chunk_is_a_duplicate() -> None:
    first = LINES[0]
    lines = [first, "", first, first]  # chunks of one line: every repeat lies in another chunk
    records, summary, _, _ = _parallel(lines, pipeline.ScoreOptions(), 2, 1)
    assert summary["debates_scored"] == 1 and summary["skipped_by_reason"] == {"duplicate_id": 2}
    assert records == _whole(lines, pipeline.ScoreOptions())[0]


def test_a_failing_chunk_raises_and_cancels_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = _score_jobs.score_lines

    def failing(lines: Any, first_line: int, **kw: Any) -> Any:
        calls.append(first_line)
        if first_line == 3:
            raise RuntimeError("worker failed")
        return real(lines, first_line, **kw)

    monkeypatch.setattr(_score_jobs, "score_lines", failing)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parts = cli_score.scored_in_parallel(
            iter(LINES),
            pipeline.ScoreOptions(),
            jobs=1,
            chunk_lines=2,
            records=False,
            table_rows=0,
            executor=pool,
        )
        assert next(parts).num_lines == 2
        with pytest.raises(RuntimeError, match="worker failed"):
            next(parts)
    assert max(calls) <= 5  # at most two chunks in flight beyond the one that failed


def test_cli_jobs_in_worker_processes(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(LINES) + "\n", "utf-8")
    outputs = {}
    for jobs in ("1", "2"):
        out_file = tmp_path / f"o{jobs}.jsonl"
        argv = ["score", str(path), "--out", str(out_file), "--json", "--jobs", jobs, "--chunk-size", "4"]
        assert main(argv) == 0
        with np.load(tmp_path / f"o{jobs}.datums.npz") as z:
            outputs[jobs] = (out_file.read_text("utf-8"), {name: z[name] for name in z.files})
    assert outputs["1"][0] == outputs["2"][0] == _whole(LINES, pipeline.ScoreOptions())[0]
    for name, x in outputs["1"][1].items():
        np.testing.assert_array_equal(outputs["2"][1][name], x, err_msg=name)


def test_cli_table_and_summary_are_the_same_with_jobs(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(LINES) + "\n", "utf-8")
    printed = {}
    for jobs in ("1", "2", "0"):
        assert main(["score", str(path), "--limit", "5", "--jobs", jobs, "--chunk-size", "3"]) == 0
        printed[jobs] = capsys.readouterr()
    assert printed["1"] == printed["2"] == printed["0"]
    assert "duplicate_id" in printed["1"].err
    for jobs in ("1", "2"):
        assert main(["score", str(path), "--json", "--jobs", jobs, "--estimator", "trl_grpo.batch"]) == 0
        printed[jobs] = capsys.readouterr()
    assert json.loads(printed["1"].out) == json.loads(printed["2"].out)  # batch-wide: one chunk, here


def test_interrupted_run_writes_nothing(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(LINES) + "\n", "utf-8")

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        yield from ()
        raise KeyboardInterrupt

    for jobs, name in (("1", "score_chunks"), ("2", "scored_in_parallel")):
        target = pipeline if name == "score_chunks" else cli_score
        monkeypatch.setattr(target, name, interrupted)
        out_file = tmp_path / f"o{jobs}.jsonl"
        assert main(["score", str(path), "--out", str(out_file), "--jobs", jobs]) == 130
        assert "interrupted; nothing was written" in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
