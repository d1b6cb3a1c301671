"""``python -m benchmarks NAME [--quick]``: run one benchmark (or ``all``, every one but ``suite`` and
``compare``). ``python -m benchmarks compare REV [NAME …]`` runs benchmarks against commit REV
(:mod:`benchmarks.bench_compare`).

Each benchmark module ``benchmarks/bench_<name>.py`` defines ``main(argv) -> int``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def names() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name[6:] for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv: list[str]) -> int:
    available = names()
    if not argv or argv[0] in {"-h", "--help"}:
        print(f"usage: python -m benchmarks {{{','.join([*available, 'all'])}}} [--quick]")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    # suite: the test run; compare: runs others against a commit
    selected = [n for n in available if n not in {"suite", "compare"}] if name == "all" else [name]
    for n in selected:
        if n not in available:
            print(f"unknown benchmark {n!r}; known: {', '.join(available)}", file=sys.stderr)
            return 2
        rc = importlib.import_module(f"benchmarks.bench_{n}").main(rest)
        if rc:
            return int(rc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
