"""A regression comparison: the working tree against a commit, benchmark by benchmark, in one session.

``python -m benchmarks compare REV [NAME …] [--rounds N] [--quick] [--figures REGEX]
[--benchmarks-from rev|tree] [--keep] [-- ARGS]``

REV (any commit git can name) is checked out with ``git worktree add`` into a scratch directory and
installed there into a scratch virtual environment (``python -m venv --without-pip``, then this
interpreter's pip: ``pip --python … install --no-deps --no-build-isolation --no-index -e``), which
reads every dependency from this environment's site-packages through a ``.pth`` line: nothing is
downloaded. Each named benchmark (``python -m benchmarks NAME [--quick] ARGS``) then runs in its own
process, alternately, REV then the working tree, ``--rounds`` times (A B A B …), so a change of load
on a shared machine falls on both. Every benchmark prints one JSON line of figures last (a
benchmark that runs children prints one per child: their figures are numbered ``0.``, ``1.``, …);
the figures both revisions print are paired round by round, and the table gives, per figure, the
medians of both and the median and spread (min–max) of the paired ratios, working tree / REV. A
figure's name says which way is better, where it can (``…per_s``, ``…tok_s`` (tokens a second),
``…vs_peer``, ``…_x_ref``: higher; ``…_s``, ``…_ms``, ``…_mb``: lower). Benchmarks or figures that only
one revision has are listed, not compared.

By default each side runs its own benchmark code. A benchmark whose figures were renamed or whose
timing changed since REV compares better with ``--benchmarks-from tree``: REV's code is then measured
by the working tree's benchmark scripts (a copy of ``benchmarks/`` beside REV's installed package),
so the figures match, as long as the script asks nothing of the kernel that REV lacks.

Without NAME it compares every benchmark both revisions have (but ``suite`` and ``compare``). The
scratch directory is removed at the end (``--keep`` leaves it and prints its path). The last line is
one JSON object: the revision, the rounds and per benchmark and figure the paired ratios' median,
minimum, maximum and count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from benchmarks._common import emit_json, print_table

ROOT = Path(__file__).resolve().parents[1]
NOT_COMPARED = frozenset({"suite", "compare"})  # the test run, and this comparison itself

_HIGHER = re.compile(r"(per_s|tok_s|vs_peer|speedup|throughput)(_|$)|(^|_)x_")  # x_ref: times the reference
_LOWER = re.compile(r"(_s|_ms|_us|_ns|seconds|_mb|_kb|_bytes|peak_rss|_rss)$")


class Options(NamedTuple):
    rev: str
    names: tuple[str, ...]
    rounds: int
    quick: bool
    figures: re.Pattern[str] | None
    keep: bool
    benchmarks_from: str
    extra: tuple[str, ...]


class UsageError(Exception):
    """A command line that cannot run; its message says why (exit status 2)."""


class Summary(NamedTuple):
    """Paired ratios (working tree / REV) of one figure over the rounds."""

    old: float
    new: float
    median: float
    low: float
    high: float
    rounds: int


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: Sequence[str], available: Sequence[str]) -> Options:
    """The command line, checked: REV given, known benchmark names, at least one round.

    Arguments after ``--`` go to every benchmark unchanged.

    Raises:
      UsageError: naming what is wrong.
    """
    argv = list(argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = _Parser(prog="python -m benchmarks compare", add_help=False, exit_on_error=False)
    parser.add_argument("rev")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--figures")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--benchmarks-from", choices=("rev", "tree"), default="rev")
    try:
        args, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise UsageError(str(exc)) from None
    if unknown:
        raise UsageError(f"unknown arguments {' '.join(unknown)} (benchmark arguments go after --)")
    if args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
    for name in args.names:
        if name in NOT_COMPARED:
            raise UsageError(f"{name!r} cannot be compared (it is not a benchmark of the code)")
        if name not in available:
            raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(available)}")
    try:
        figures = re.compile(args.figures) if args.figures is not None else None
    except re.error as exc:
        raise UsageError(f"--figures is not a regular expression: {exc}") from None
    names = tuple(dict.fromkeys(args.names))
    return Options(
        args.rev, names, args.rounds, args.quick, figures, args.keep, args.benchmarks_from, tuple(extra)
    )


def figures_of(stdout: str) -> dict[str, float]:
    """The numeric figures of a benchmark's output: its JSON lines (objects), flattened with dots.

    One JSON line gives its keys as they are; several (a benchmark that runs children) are numbered
    ``0.``, ``1.``, … in order. Booleans, strings and non-finite numbers are left out.
    """
    lines = []
    for line in stdout.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    out: dict[str, float] = {}
    for i, value in enumerate(lines):
        for key, number in _flatten(value, "" if len(lines) == 1 else f"{i}."):
            out[key] = number
    return out


def _flatten(value: dict[str, Any], prefix: str) -> Iterator[tuple[str, float]]:
    for key, item in value.items():
        if isinstance(item, dict):
            yield from _flatten(item, f"{prefix}{key}.")
        elif isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item):
            yield f"{prefix}{key}", float(item)


def paired_ratios(old: Sequence[dict[str, float]], new: Sequence[dict[str, float]]) -> dict[str, list[float]]:
    """Per figure both sides have in a round, the ratios new / old of that round (rounds paired in
    order; a figure that is 0 on the old side is left out of that round)."""
    ratios: dict[str, list[float]] = {}
    for before, after in zip(old, new, strict=True):
        for key in before.keys() & after.keys():
            if before[key] != 0:
                ratios.setdefault(key, []).append(after[key] / before[key])
    return {key: ratios[key] for key in sorted(ratios)}


def summarize(old: Sequence[dict[str, float]], new: Sequence[dict[str, float]]) -> dict[str, Summary]:
    """Per figure: the medians of both sides and the median, minimum, maximum and count of the paired
    ratios."""
    out = {}
    for key, ratios in paired_ratios(old, new).items():
        out[key] = Summary(
            statistics.median(r[key] for r in old if key in r),
            statistics.median(r[key] for r in new if key in r),
            statistics.median(ratios),
            min(ratios),
            max(ratios),
            len(ratios),
        )
    return out


def better(key: str) -> str:
    """``"higher"``, ``"lower"`` or ``""``: which way a figure's name says is better (its last part
    that says, ``realistic.mb_per_s.ours robust`` as ``mb_per_s``; nothing for a difference)."""
    for part in reversed(key.split(".")):
        if "diff" in part:
            return ""
        if _HIGHER.search(part):
            return "higher"
        if _LOWER.search(part):
            return "lower"
    return ""


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise UsageError(done.stderr.strip() or f"git {' '.join(args)} failed")
    return done.stdout.strip()


def resolve(rev: str) -> str:
    """The full commit id that ``rev`` names.

    Raises:
      UsageError: git cannot name a commit by it.
    """
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except UsageError:
        raise UsageError(f"REV {rev!r} names no commit of this repository") from None


def _benchmarks_of(tree: Path) -> set[str]:
    return {p.stem[6:] for p in (tree / "benchmarks").glob("bench_*.py")}


@contextmanager
def scratch_install(commit: str, *, keep: bool) -> Iterator[tuple[Path, Path]]:
    """(scratch directory, its virtual environment's python): ``commit`` checked out into
    ``tree/`` and installed (module docstring). Removed on exit unless ``keep``."""
    base = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    tree, env = base / "tree", base / "venv"
    added = False
    try:
        _git("worktree", "add", "--detach", str(tree), commit)
        added = True
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
        python = env / "bin" / "python"
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        here = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        (Path(purelib) / "_compare_dependencies.pth").write_text("".join(f"{p}\n" for p in here))
        install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        install += ["--no-deps", "--no-build-isolation", "--no-index", "-e", str(tree)]
        done = subprocess.run(install, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"installing {commit[:12]} failed:\n{done.stdout}{done.stderr}")
        yield base, python
    finally:
        if keep:
            print(f"scratch directory kept: {base}", flush=True)
        else:
            if added:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                    check=False,
                )
            shutil.rmtree(base, ignore_errors=True)


def run_one(python: Path | str, cwd: Path, name: str, args: Sequence[str]) -> tuple[dict[str, float], float]:
    """One benchmark in its own process: its figures and wall seconds. Its output is shown as it runs
    only on failure (then RuntimeError)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # each tree imports its own code
    start = time.perf_counter()
    done = subprocess.run(
        [str(python), "-m", "benchmarks", name, *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(
            f"{name} exited {done.returncode} in {cwd}:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
        )
    return figures_of(done.stdout), seconds


def report(name: str, commit: str, summary: dict[str, Summary], only: tuple[set[str], set[str]]) -> None:
    rows = [
        [key, s.old, s.new, f"{s.median:.3f}", f"{s.low:.3f}–{s.high:.3f}", s.rounds, better(key)]
        for key, s in summary.items()
    ]
    print_table(
        f"{name}: working tree / {commit[:12]} (paired per round)",
        ["figure", "REV median", "tree median", "ratio", "spread", "n", "better"],
        rows,
    )
    old_only, new_only = only
    if old_only:
        print(f"  only at {commit[:12]}: {', '.join(sorted(old_only))}")
    if new_only:
        print(f"  only in the working tree: {', '.join(sorted(new_only))}")


def main(argv: list[str]) -> int:
    from benchmarks.__main__ import names as available

    try:
        options = parse_args(argv, [n for n in available() if n not in NOT_COMPARED])
        commit = resolve(options.rev)
    except UsageError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    args = [*(["--quick"] if options.quick else []), *options.extra]
    results: dict[str, Any] = {"benchmark": "compare", "rev": commit, "rounds": options.rounds, "figures": {}}
    try:
        with scratch_install(commit, keep=options.keep) as (base, python):
            tree = base / "tree"
            theirs = _benchmarks_of(tree)
            if options.benchmarks_from == "tree":  # REV's package, the working tree's scripts
                shutil.copytree(ROOT / "benchmarks", base / "scripts" / "benchmarks")
                tree, theirs = base / "scripts", _benchmarks_of(ROOT)
            wanted = options.names or tuple(sorted((_benchmarks_of(ROOT) & theirs) - NOT_COMPARED))
            missing = [n for n in wanted if n not in theirs]
            if missing:
                print(f"not at {commit[:12]}, skipped: {', '.join(missing)}")
            for name in (n for n in wanted if n in theirs):
                old: list[dict[str, float]] = []
                new: list[dict[str, float]] = []
                for i in range(options.rounds):
                    a, a_s = run_one(python, tree, name, args)
                    b, b_s = run_one(sys.executable, ROOT, name, args)
                    print(
                        f"{name} round {i + 1}/{options.rounds}: REV {a_s:.1f} s, tree {b_s:.1f} s",
                        flush=True,
                    )
                    if options.figures is not None:
                        a = {k: v for k, v in a.items() if options.figures.search(k)}
                        b = {k: v for k, v in b.items() if options.figures.search(k)}
                    old.append(a)
                    new.append(b)
                summary = summarize(old, new)
                only = (
                    {k for r in old for k in r} - summary.keys(),
                    {k for r in new for k in r} - summary.keys(),
                )
                report(name, commit, summary, only)
                results["figures"][name] = {
                    key: {"median": s.median, "min": s.low, "max": s.high, "n": s.rounds}
                    for key, s in summary.items()
                }
    except (RuntimeError, subprocess.CalledProcessError, UsageError) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 3
    emit_json(results)
    return 0
