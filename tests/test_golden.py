"""Every record of every known golden file passes (the same checks as ``python -m tests.golden``)."""

from __future__ import annotations

import pytest

from tests.golden import KNOWN_FILES, VECTORS_DIR, available_checkers, run_file

CHECKERS = available_checkers()


@pytest.mark.parametrize("name", sorted(KNOWN_FILES))
def test_golden_file(name: str) -> None:
    passed, failures = run_file(VECTORS_DIR / name, CHECKERS[name])
    shown = "\n".join(f"{rid}: {msg}" for rid, msg in failures[:10])
    assert not failures, f"{len(failures)} of {passed + len(failures)} records fail:\n{shown}"
    assert passed > 0


def test_vectors_copied_match_shared_when_present() -> None:
    from pathlib import Path

    shared = Path(__file__).resolve().parents[1].parent / "shared" / "golden"
    if not shared.is_dir():
        pytest.skip("../shared/golden not present")
    for name in KNOWN_FILES:
        if (shared / name).exists():
            assert (shared / name).read_bytes() == (VECTORS_DIR / name).read_bytes(), name
