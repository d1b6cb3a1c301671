"""ruff and mypy stay clean (skipped only where the tools are not installed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_clean() -> None:
    pytest.importorskip("ruff")
    out = _run(sys.executable, "-m", "ruff", "check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_clean() -> None:
    pytest.importorskip("ruff")
    out = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_clean_on_kernel_and_adapters() -> None:
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy not installed")
    out = _run(sys.executable, "-m", "mypy")
    assert out.returncode == 0, out.stdout + out.stderr


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
