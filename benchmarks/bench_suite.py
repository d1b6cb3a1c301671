"""The test suite's own cost: wall time, time per test file and the slowest tests.

``python -m benchmarks suite`` runs the README's test run (``pytest -q``, the fast tier, on every core) with a
JUnit report and prints, per test file, its tests and seconds (summed over the workers, so a file's figure is
what it would cost alone), the slowest tests, and the total against the budget (12 minutes with the install,
the README's figure). ``--exhaustive`` times the opt-in tier too; ``--from FILE.xml`` reads a JUnit report
written earlier (``pytest --junitxml=FILE.xml``) instead of running; ``--quick`` times three small files
(a smoke run of this script). Arguments after ``--`` go to pytest. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 12 * 60
"""The README's budget for its test command, install included."""
QUICK = ["tests/test_suite_tiers.py", "tests/test_public_api.py", "tests/test_golden.py"]


class Case(NamedTuple):
    file: str
    name: str
    seconds: float
    outcome: str


def read_junit(path: Path) -> list[Case]:
    """Every test case of a JUnit XML report: its file (from the class name), name, time and outcome."""
    cases = []
    for case in ET.parse(path).iter("testcase"):
        classname = case.get("classname") or "?"
        if classname.endswith(".md"):  # a doctest of a text file
            file = classname
        else:  # tests.test_x[.Class] -> tests/test_x.py; doctests are named by their module
            file = "/".join(p for p in classname.split(".") if not p[:1].isupper()) + ".py"
        outcome = "passed"
        for child in case:
            if child.tag in {"failure", "error", "skipped"}:
                outcome = child.tag
        cases.append(Case(file, case.get("name") or "?", float(case.get("time") or 0.0), outcome))
    return cases


def per_file(cases: list[Case]) -> list[tuple[str, int, float]]:
    """(file, tests, seconds), the most expensive first."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for c in cases:
        seconds[c.file] += c.seconds
        count[c.file] += 1
    return sorted(((f, count[f], s) for f, s in seconds.items()), key=lambda row: -row[2])


def run_pytest(junit: Path, extra: list[str]) -> tuple[int, float]:
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *extra]
    rc = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    return rc, time.perf_counter() - start


def report(cases: list[Case], wall: float | None, top: int) -> dict[str, object]:
    files = per_file(cases)
    total = sum(c.seconds for c in cases)
    print(f"\n{'file':<48} {'tests':>6} {'seconds':>8} {'share':>6}")
    for file, n, s in files:
        print(f"{file:<48} {n:>6} {s:>8.1f} {s / max(total, 1e-9):>6.1%}")
    slow = sorted(cases, key=lambda c: -c.seconds)[:top]
    print(f"\nslowest {len(slow)} tests")
    for c in slow:
        print(f"{c.seconds:>8.2f}  {c.file}::{c.name}")
    outcomes: dict[str, int] = defaultdict(int)
    for c in cases:
        outcomes[c.outcome] += 1
    print(f"\n{len(cases)} tests ({dict(outcomes)}), {total:.0f} s of test time summed over workers")
    if wall is not None:
        print(f"wall {wall:.0f} s for the run; budget {BUDGET_S} s for install and run together")
    return {
        "benchmark": "suite",
        "tests": len(cases),
        "test_seconds": round(total, 1),
        "wall_seconds": None if wall is None else round(wall, 1),
        "slowest": {f"{c.file}::{c.name}": round(c.seconds, 2) for c in slow[:5]},
        "files": {f: round(s, 1) for f, _, s in files[:top]},
    }


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv, extra = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    else:
        extra = []
    parser = argparse.ArgumentParser(prog="python -m benchmarks suite", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="time three small test files")
    parser.add_argument("--exhaustive", action="store_true", help="time the opt-in tier too")
    parser.add_argument("--from", dest="source", type=Path, help="read this JUnit XML report instead")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list")
    args = parser.parse_args(argv)
    rc, wall = 0, None
    with tempfile.TemporaryDirectory() as tmp:
        junit = args.source or Path(tmp) / "suite.xml"
        if args.source is None:
            if args.quick:
                extra = [*QUICK, *extra]
            if args.exhaustive:
                extra = ["--exhaustive", *extra]
            rc, wall = run_pytest(junit, extra)
        if not junit.is_file():
            print(f"no JUnit report at {junit}", file=sys.stderr)
            return rc or 2
        figures = report(read_junit(junit), wall, args.top)
    print(json.dumps(figures))
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
