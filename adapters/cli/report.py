"""``debate-kernel report [FILE] -o report.html``: one self-contained HTML page of what FILE holds.

FILE tells what it is: a training run's directory (its training curves; ``report RUN_A RUN_B …`` overlays
several runs' curves), debate transcripts (scored as
``score`` scores them, then drawn), or the results of ``score --out`` (drawn as written: the rewards,
advantages and votes already computed, nothing scored again), by the first record of the file
(:func:`adapters.cli._common.sniff`). Any other JSON Lines file is refused in one line that says what it
looks like and what to pass, exit status 2."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from adapters import pipeline
from adapters._atomic import atomic_write, same_file
from adapters._gc import fewer_gc_passes
from adapters.cli import _common as common
from adapters.report import DEFAULT_MAX_DEBATES, render_report
from adapters.report.results import render_results_report
from adapters.report.training import SKIPPED_SHOWN, render_training_html
from adapters.training.checkpoint import METRICS, RUN_FILE, transcript_files
from adapters.transcripts import LineTooLarge

__all__ = ["DEFAULT_TITLE", "add_parser", "check_run_output", "run"]

DEFAULT_TITLE = "Debate report"
"""The page title of scored debates when ``--title`` is not given."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``report``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of debates, score results or a training run",
        description="Write one self-contained HTML page of what FILE holds: debate transcripts (scored as "
        "`score` scores them), the results of `score --out` (drawn as written, not scored again) or a "
        "training run's directory (its training curves).",
    )
    common.add_common_arguments(
        p,
        file_help="transcript file (debate-transcript/1 JSON Lines; '-' reads stdin), the results of "
        "score --out, or a training run's directory (its training curves); default: the sample debates",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN_DIR",
        help="more training run directories, after a first one: their curves overlaid on one page, one "
        "colour a run",
    )
    p.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), help="HTML file (default report.html)"
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress bar (it is drawn on a terminal only, for a file)"
    )
    p.add_argument(
        "--max-debates",
        type=common.count_argument,
        default=DEFAULT_MAX_DEBATES,
        metavar="N",
        help=f"detail sections for the first N debates (default {DEFAULT_MAX_DEBATES}); "
        "the summary covers all",
    )
    p.add_argument(
        "--title",
        default=None,
        help=f"page title (default {DEFAULT_TITLE!r}; of a run directory's curves: 'Training run NAME')",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Runs ``report``; returns the exit status (130 when interrupted, 143 on SIGTERM). A run directory
    of ``train`` gives its training curves."""
    written: list[Path] = []
    try:
        with common.sigterm_interrupts():
            if args.runs:
                return _training_report(args, written)
            if args.file is not None and Path(args.file).is_dir():
                return _training_report(args, written)
            return _report(args, written)
    except KeyboardInterrupt as e:
        return common.stopped(e, written)


def check_run_output(run_dir: Path, output: Path) -> str | None:
    """Why ``output`` cannot take the training report of the run in ``run_dir``, or None: a directory, an
    input of the run (its ``metrics.jsonl``, ``run.json``, transcripts or any other existing file of the
    run that is not an HTML page), or a new file inside the run directory that is not an ``.html`` page.

    Examples:
      >>> check_run_output(Path("runs/r1"), Path("runs/r1/metrics.jsonl"))
      '--output runs/r1/metrics.jsonl is an input of the run in runs/r1; refusing to overwrite it'
      >>> check_run_output(Path("runs/r1"), Path("runs/r1/curves.html")) is None
      True
    """
    if output.is_dir():
        return f"--output {output} is a directory, not a file"
    inputs = [run_dir / METRICS, run_dir / RUN_FILE, *transcript_files(run_dir)]
    inside = output.resolve().is_relative_to(run_dir.resolve())
    page = output.suffix.lower() in (".html", ".htm")
    if any(same_file(output, p) for p in inputs) or (inside and output.exists() and not page):
        return f"--output {output} is an input of the run in {run_dir}; refusing to overwrite it"
    if inside and not page:
        return (
            f"--output {output} is inside the run directory {run_dir}: a report there must be an .html file"
        )
    return None


def _training_report(args: argparse.Namespace, written: list[Path]) -> int:
    """Writes the training curves of the run directory ``args.file``, or of it and ``args.runs``
    overlaid; returns the exit status."""
    run_dirs = [Path(args.file), *map(Path, args.runs)]
    not_runs = [str(d) for d in run_dirs if not d.is_dir()]
    if not_runs:
        common.err(
            f"{', '.join(not_runs)}: not a directory; report overlays training runs (RUN_DIR RUN_DIR …), "
            "and draws one transcript or results file alone"
        )
        return common.EXIT_UNUSABLE
    for run_dir in run_dirs:
        refused = check_run_output(run_dir, args.output)
        if refused is not None:
            common.err(refused)
            return common.EXIT_UNUSABLE
    skipped: list[str] = []
    try:
        page = render_training_html(
            run_dirs if len(run_dirs) > 1 else run_dirs[0], title=args.title, skipped=skipped
        )
    except OSError as e:
        common.err(f"cannot read {e.filename or run_dirs[0] / METRICS}: {e.strerror or e}")
        return common.EXIT_UNUSABLE
    except ValueError as e:
        common.err(str(e))
        return common.EXIT_UNUSABLE
    for line in skipped[:SKIPPED_SHOWN]:
        common.err(f"warning: left out {line}")
    if len(skipped) > SKIPPED_SHOWN:
        common.err(f"warning: left out {len(skipped) - SKIPPED_SHOWN} more unreadable metrics lines")
    if not _write_page(args.output, page, written):
        return common.EXIT_UNUSABLE
    print(f"wrote {args.output} (training curves of {', '.join(map(str, run_dirs))})")
    return 0


def _write_page(path: Path, page: str, written: list[Path]) -> bool:
    """Writes ``page`` to ``path`` (atomically); False, with the reason on stderr, when it cannot."""
    try:
        with atomic_write(path) as f:
            f.write(page)
    except OSError as e:
        common.err(f"cannot write {path}: {e.strerror or e}")
        return False
    written.append(path)
    return True


def _report(args: argparse.Namespace, written: list[Path]) -> int:
    """Reads, scores and renders the input chunk by chunk (:func:`render_report`): memory stays bounded
    as the file grows, and the page is that of the whole file scored at once. Score results are drawn
    as written (:func:`_results_report`); another kind of file is refused."""
    options = common.check_options(args, {"--output": args.output})
    if isinstance(options, int):
        return options
    with contextlib.ExitStack() as stack:
        stack.enter_context(fewer_gc_passes())
        try:
            source, lines = common.open_lines(args.file, stack)
            if args.file is not None and not common.run_transcripts(args.file):
                sniffed = common.sniff(lines)
                if sniffed.kind == "results":
                    return _results_report(args, source, sniffed.lines, written)
                if sniffed.kind != "transcripts":
                    common.err(common.refusal(sniffed, args.file, "report"))
                    return common.EXIT_UNUSABLE
                lines = sniffed.lines
            progress = common.Progress(sys.stderr, lines, quiet=args.quiet, label="report")
            stack.callback(progress.close)
            chunks = pipeline.score_chunks(lines, options=options)
            report = render_report(
                _shown(chunks, progress),
                options,
                source=source,
                title=DEFAULT_TITLE if args.title is None else args.title,
                max_debates=args.max_debates,
            )
        except OSError as e:
            common.err(f"cannot read {args.file}: {e.strerror or e}")
            return common.EXIT_UNUSABLE
    for error in report.errors:
        common.err(f"{source}: {error}")
    if not _write_page(args.output, report.page, written):
        return common.EXIT_UNUSABLE
    size = len(report.page.encode("utf-8"))
    print(f"wrote {args.output} ({size:,} bytes; {report.shown} of {report.debates} debates)")
    return 0


def _results_report(
    args: argparse.Namespace,
    source: str,
    lines: Iterable[str | bytes | LineTooLarge],
    written: list[Path],
) -> int:
    """Draws the results of ``score --out`` in ``lines`` as written (:func:`render_results_report`);
    refuses scoring options, which would not apply (nothing is scored again)."""
    given = [
        f"--{name.replace('_', '-')} {getattr(args, name)}"
        for name, default in common.SCORING_DEFAULTS.items()
        if getattr(args, name) != default
    ]
    if given:
        common.err(
            f"{source} holds the results of debate-kernel score --out, already scored: {', '.join(given)} "
            "would not apply (report draws them as written); score the transcripts again with those "
            "options, or leave them out"
        )
        return common.EXIT_UNUSABLE
    progress = common.Progress(sys.stderr, lines, quiet=args.quiet, label="report")
    try:
        report = render_results_report(
            _counted(lines, progress),
            source=source,
            title="Score results" if args.title is None else args.title,
            max_debates=args.max_debates,
        )
    except OSError as e:
        common.err(f"cannot read {args.file}: {e.strerror or e}")
        return common.EXIT_UNUSABLE
    finally:
        progress.close()
    for error in report.errors:
        common.err(f"{source}: {error}")
    if not _write_page(args.output, report.page, written):
        return common.EXIT_UNUSABLE
    size = len(report.page.encode("utf-8"))
    print(f"wrote {args.output} ({size:,} bytes; score results: {report.shown} of {report.debates} debates)")
    return 0


def _counted(lines: Iterable[Any], progress: Any) -> Iterator[Any]:
    """``lines``, counted on the progress line every 1,000."""
    n = 0
    for n, line in enumerate(lines, 1):
        yield line
        if n % 1000 == 0:
            progress.update(n)
    progress.update(n)


def _shown(chunks: Iterator[pipeline.BatchResult], progress: Any) -> Iterator[pipeline.BatchResult]:
    """The chunks, each counted on the progress line as it is scored."""
    for chunk in chunks:
        progress.update(chunk.num_lines)
        yield chunk
