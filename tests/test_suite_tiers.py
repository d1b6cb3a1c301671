"""The two tiers of the suite: the fast one runs every test file; ``--exhaustive`` adds a non-empty tier.

The session's own collection is the evidence (``tests/conftest.py`` keeps what the fast tier left out), so
these checks cost nothing; where the session collected only some files (``pytest tests/test_x.py``), the
files it did not collect are read as text instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import DESELECTED, EXHAUSTIVE

TESTS = Path(__file__).resolve().parent
FILES = sorted(TESTS.glob("test_*.py"))


def _marked_exhaustive(node: ast.AST) -> bool:
    return "EXHAUSTIVE" in ast.unparse(node) or f"mark.{EXHAUSTIVE}" in ast.unparse(node)


def _tests_in(path: Path) -> tuple[list[str], list[str]]:
    """The test functions of a file: (fast, exhaustive), as its decorators and module mark place them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    whole = any(
        isinstance(node, ast.Assign)
        and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
        and _marked_exhaustive(node.value)
        for node in tree.body
    )
    fast: list[str] = []
    slow: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            moved = whole or any(_marked_exhaustive(d) for d in node.decorator_list)
            (slow if moved else fast).append(node.name)
    return fast, slow


def _files(items: list[pytest.Item]) -> set[Path]:
    return {Path(str(item.path)) for item in items}


def _whole_run(request: pytest.FixtureRequest) -> bool:
    """Whether this session collected every test file (selected or left out)."""
    return _files(request.session.items) | _files(request.config.stash[DESELECTED]) >= set(FILES)


def test_the_exhaustive_switch_selects_something(request: pytest.FixtureRequest) -> None:
    config = request.config
    if config.getoption("--exhaustive"):
        assert not config.stash[DESELECTED]
        tier = [item for item in request.session.items if item.get_closest_marker(EXHAUSTIVE)]
    else:
        tier = config.stash[DESELECTED]
        assert all(item.get_closest_marker(EXHAUSTIVE) for item in tier)
    if _whole_run(request):
        assert tier, "no test is marked exhaustive: --exhaustive would add nothing"
    assert any(_tests_in(path)[1] for path in FILES)


def test_the_fast_tier_runs_every_test_file(request: pytest.FixtureRequest) -> None:
    for path in FILES:
        assert _tests_in(path)[0], f"{path.name}: every test is in the exhaustive tier"
    if _whole_run(request):
        assert not set(FILES) - _files(request.session.items)


def test_the_text_check_sees_marks(tmp_path: Path) -> None:
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\npytestmark = pytest.mark.exhaustive\ndef test_a(): pass\n", "utf-8")
    assert _tests_in(marked) == ([], ["test_a"])
    some = tmp_path / "test_some.py"
    some.write_text("@EXHAUSTIVE\ndef test_a(): pass\ndef test_b(): pass\n", "utf-8")
    assert _tests_in(some) == (["test_b"], ["test_a"])
