"""``debate-kernel report [FILE] -o report.html``: score debates and write one self-contained HTML page."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapters import pipeline
from adapters._atomic import atomic_write
from adapters._gc import fewer_gc_passes
from adapters.cli import score as cmd_score
from adapters.report import DEFAULT_MAX_DEBATES, render_report

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``report``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of scored debates",
        description="Score debate transcripts (as `score` does) and write one self-contained HTML page.",
    )
    cmd_score.add_common_arguments(p)
    p.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), help="HTML file (default report.html)"
    )
    p.add_argument(
        "--max-debates",
        type=cmd_score.count_argument,
        default=DEFAULT_MAX_DEBATES,
        metavar="N",
        help=f"detail sections for the first N debates (default {DEFAULT_MAX_DEBATES}); "
        "the summary covers all",
    )
    p.add_argument("--title", default="Debate report", help="page title")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Runs ``report``; returns the exit status. A run directory of ``train`` gives its training curves."""
    if args.file is not None and Path(args.file).is_dir():
        from adapters.report.training import render_training_html

        try:
            page = render_training_html(args.file)
            with atomic_write(args.output) as f:
                f.write(page)
        except (OSError, ValueError) as e:
            print(f"debate-kernel: {e}", file=sys.stderr)
            return cmd_score.EXIT_UNUSABLE
        print(f"wrote {args.output} (training curves of {args.file})")
        return 0
    try:
        return _report(args)
    except KeyboardInterrupt:
        cmd_score._err("interrupted; nothing was written")
        return 130


def _report(args: argparse.Namespace) -> int:
    """Reads, scores and renders the input chunk by chunk (:func:`render_report`): memory stays bounded
    as the file grows, and the page is that of the whole file scored at once."""
    early = cmd_score.check_options(args, {"--output": args.output})
    if early is not None:
        return early
    options = cmd_score.options_from_args(args)
    with contextlib.ExitStack() as stack:
        stack.enter_context(fewer_gc_passes())
        try:
            source, lines = cmd_score.open_lines(args.file, stack)
            progress = cmd_score.Progress(sys.stderr, lines)
            stack.callback(progress.close)
            chunks = pipeline.score_chunks(lines, options=options)
            report = render_report(
                _shown(chunks, progress),
                options,
                source=source,
                title=args.title,
                max_debates=args.max_debates,
            )
        except OSError as e:
            cmd_score._err(f"cannot read {args.file}: {e.strerror or e}")
            return cmd_score.EXIT_UNUSABLE
    for error in report.errors:
        cmd_score._err(f"{source}: {error}")
    try:
        with atomic_write(args.output) as f:
            f.write(report.page)
    except OSError as e:
        print(f"debate-kernel: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return cmd_score.EXIT_UNUSABLE
    size = len(report.page.encode("utf-8"))
    print(f"wrote {args.output} ({size:,} bytes; {report.shown} of {report.debates} debates)")
    return 0


def _shown(chunks: Iterator[pipeline.BatchResult], progress: Any) -> Iterator[pipeline.BatchResult]:
    """The chunks, each counted on the progress line as it is scored."""
    for chunk in chunks:
        progress.update(chunk.num_lines)
        yield chunk
