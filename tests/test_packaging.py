"""Packaging: the short top-level names resolve into this project, markers and entry points exist.

``kernel`` and ``adapters`` are short names that unrelated distributions also use (AdapterHub installs a
top-level ``adapters``). If one of those shadows ours, these tests fail loudly instead of the library
misbehaving.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["kernel", "adapters"])
def test_top_level_package_resolves_into_this_project(name: str) -> None:
    module = importlib.import_module(name)
    path = Path(module.__file__ or "").resolve()
    assert path.is_relative_to(ROOT / name), f"{name} resolves to {path}, not to this project"
    assert (path.parent / "py.typed").exists()


def test_distribution_metadata_and_console_script() -> None:
    dist = importlib.metadata.distribution("debate-kernel")
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts.get("debate-kernel") == "adapters.cli:main"
    requires = dist.requires or []
    base = [r for r in requires if "extra ==" not in r]
    assert sorted(r.split(">")[0] for r in base) == ["numpy", "orjson", "tqdm"], base
    extras = set(dist.metadata.get_all("Provides-Extra") or [])
    assert {"jax", "tinker", "test", "bench", "wandb", "tensorboard"} <= extras


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    marker = "<!-- test-command -->"
    assert marker in readme
    block = readme.split(marker, 1)[1].split("```", 2)[1]
    command = block.removeprefix("bash").strip()
    assert command, "no test command under the marker"
    assert command in ci.splitlines(), f"{command!r} is not a line of .ci/run"
