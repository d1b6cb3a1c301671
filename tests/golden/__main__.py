"""``python -m tests.golden [DIR]``: check every known vector file in DIR (default: the in-repo copy).

Prints ``<file name>: <N> passed, <M> failed`` per file; exits 1 if any record fails or no file is known.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.golden import VECTORS_DIR, available_checkers, run_file


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else VECTORS_DIR
    if not directory.is_dir():
        print(f"not a directory: {directory}", file=sys.stderr)
        return 2
    checked, failed_any = 0, False
    for name, check in available_checkers().items():
        path = directory / name
        if not path.exists():
            continue
        passed, failures = run_file(path, check)
        checked += 1
        failed_any |= bool(failures)
        print(f"{name}: {passed} passed, {len(failures)} failed")
        for rid, message in failures[:5]:
            print(f"  {rid}: {message}", file=sys.stderr)
    if checked == 0:
        print(f"no known vector file in {directory}", file=sys.stderr)
        return 1
    return 1 if failed_any else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
