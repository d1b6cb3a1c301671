"""The ``debate-kernel`` command line. Each subcommand lives in its own module ``adapters/cli/<name>.py``
defining ``add_parser(subparsers)`` (registering the subcommand with ``func=run``) and
``run(args) -> int``. The modules whose names start with ``_`` are not commands: ``_common`` holds
what ``score`` and ``report`` share, ``_score_jobs`` and ``_score_text`` the parts of ``score`` beside
its run (worker processes; the text it prints).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("score", "report", "train", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="debate-kernel",
        description="Debating LLM agents: score transcripts (parse, vote, reward, advantage, datums), draw "
        "HTML reports, and train the agents with RL on Tinker or the local service.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"adapters.cli.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return 0
