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

SUBCOMMANDS: dict[str, str] = {
    "score": "score debate transcripts: parse, replay, vote, reward, advantage, datums",
    "report": "write a self-contained HTML report of debates, score results or a training run",
    "train": "train debating agents with RL (Tinker or the local service)",
    "serve": "serve the local JAX training service over Tinker's HTTP API",
}
"""Each subcommand and its one-line help (each module's ``add_parser`` registers the same line; a test
checks it). ``debate-kernel --help`` is printed from this table alone, importing no command."""

_DESCRIPTION = (
    "Debating LLM agents: score transcripts (parse, vote, reward, advantage, datums), draw HTML reports, "
    "train the agents with RL on Tinker or the local service, and serve the local service over Tinker's "
    "HTTP API."
)


def build_parser(commands: Sequence[str] = tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The whole parser: every command in ``commands`` registered by its module (each one imported)."""
    parser = argparse.ArgumentParser(prog="debate-kernel", description=_DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        if name in commands:
            importlib.import_module(f"adapters.cli.{name}").add_parser(sub)
        else:  # named in the usage and the list of commands, not imported
            sub.add_parser(name, help=SUBCOMMANDS[name], add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``debate-kernel``: only the command asked for is imported (``--help`` imports none), so the
    command line starts in the time of the interpreter plus that command's own imports."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args[:1] if a in SUBCOMMANDS), None)
    parser = build_parser(() if command is None else (command,))
    parsed = parser.parse_args(args)
    try:
        return int(parsed.func(parsed))
    except BrokenPipeError:
        return 0
