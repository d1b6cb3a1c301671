"""Golden-vector checks: every record of a reference vector file against the kernel.

Each known file maps to a module ``tests.golden._<stem>`` that defines ``check(record) -> str | None``
(None when the record passes, else a short failure message). ``python -m tests.golden [DIR]`` runs them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

VECTORS_DIR = Path(__file__).parent / "vectors"

# file name -> checker module (relative to this package).
KNOWN_FILES: dict[str, str] = {
    "parse_v1.jsonl": "_parse_v1",
    "rewards_v1.jsonl": "_rewards_v1",
    "advantages.jsonl": "_advantages",
    "rae.jsonl": "_rae",
    "datums.jsonl": "_datums",
    "kl_metrics.jsonl": "_kl_metrics",
    "datums_provenance.jsonl": "_datums_provenance",
    "rewards_v2.jsonl": "_rewards_v2",
    "credit_v2.jsonl": "_credit_v2",
}

Record = dict[str, Any]
Checker = Callable[[Record], "str | None"]


def available_checkers() -> dict[str, Checker]:
    """File name -> checker, for every known file."""
    return {
        name: importlib.import_module(f"{__name__}.{module}").check for name, module in KNOWN_FILES.items()
    }


def read_records(path: Path) -> Iterator[Record]:
    """Yields the JSON records of one JSON Lines file."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def run_file(path: Path, check: Checker) -> tuple[int, list[tuple[str, str]]]:
    """Checks every record of ``path``; returns (passed, [(record id, failure message)])."""
    passed, failures = 0, []
    for record in read_records(path):
        try:
            message = check(record)
        except Exception as e:  # a crash is a failure of that record, not of the run
            message = f"raised {type(e).__name__}: {e}"
        if message is None:
            passed += 1
        else:
            failures.append((str(record.get("id")), message))
    return passed, failures
