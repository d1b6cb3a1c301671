"""``debate-kernel report [FILE] -o report.html``: score debates and write one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from adapters._atomic import atomic_write
from adapters.cli import score as cmd_score
from adapters.report import DEFAULT_MAX_DEBATES, render_html

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
    got = cmd_score.prepare(args, {"--output": args.output})
    if isinstance(got, int):
        return got
    source, result = got
    page = render_html(result, source=source, title=args.title, max_debates=args.max_debates)
    try:
        with atomic_write(args.output) as f:
            f.write(page)
    except OSError as e:
        print(f"debate-kernel: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return cmd_score.EXIT_UNUSABLE
    shown = min(len(result.replayed), args.max_debates)
    size = len(page.encode("utf-8"))
    print(f"wrote {args.output} ({size:,} bytes; {shown} of {len(result.replayed)} debates)")
    return 0
