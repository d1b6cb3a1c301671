"""``python -m benchmarks suite`` reads a JUnit report into per-file times and the slowest tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_suite

_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.test_a" name="test_one" time="2.5"/>
<testcase classname="tests.test_a.TestSuite" name="test_two" time="1.0"><skipped message="x"/></testcase>
<testcase classname="tests.test_b" name="test_three[1]" time="4.0"><failure message="y"/></testcase>
<testcase classname="kernel._parse" name="kernel._parse.parse_response" time="0.5"/>
<testcase classname="README.md" name="README.md" time="0.25"/>
</testsuite></testsuites>
"""


def test_cases_files_and_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(_JUNIT, "utf-8")
    cases = bench_suite.read_junit(path)
    assert [(c.file, c.outcome) for c in cases] == [
        ("tests/test_a.py", "passed"),
        ("tests/test_a.py", "skipped"),
        ("tests/test_b.py", "failure"),
        ("kernel/_parse.py", "passed"),
        ("README.md", "passed"),
    ]
    assert bench_suite.per_file(cases) == [
        ("tests/test_b.py", 1, 4.0),
        ("tests/test_a.py", 2, 3.5),
        ("kernel/_parse.py", 1, 0.5),
        ("README.md", 1, 0.25),
    ]


def test_the_report_from_a_file_ends_with_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.xml"
    path.write_text(_JUNIT, "utf-8")
    assert bench_suite.main(["--from", str(path), "--top", "2"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["tests"] == 5 and figures["test_seconds"] == 8.2 and figures["wall_seconds"] is None
    assert list(figures["slowest"]) == ["tests/test_b.py::test_three[1]", "tests/test_a.py::test_one"]


def test_a_missing_report_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_suite.main(["--from", str(tmp_path / "none.xml")]) == 2
    assert "no JUnit report" in capsys.readouterr().err
