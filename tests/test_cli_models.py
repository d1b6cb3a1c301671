"""``train`` and ``serve`` tell a model the local service runs without importing JAX: the rule agrees with
the service's own (:func:`adapters.local.serves`), and a mistyped ``serve --model`` is refused, with the
nearest name, before JAX or the SDK is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.cli._models import LOCAL_MODELS, served_locally

jax = pytest.importorskip("jax")


def test_the_names_and_paths_agree_with_the_service(tmp_path: Path) -> None:
    from adapters.local import SIZES, serves

    assert sorted(LOCAL_MODELS) == sorted(SIZES)
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"not checked here")
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir.safetensors").mkdir()
    candidates = [
        *LOCAL_MODELS,
        "tinyy",
        "TINY",
        "",
        "fake",
        "Qwen/Qwen3-8B",
        str(weights),
        str(tmp_path / "missing.safetensors"),
        str(tmp_path / "dir.safetensors"),
        str(checkpoint),
        str(tmp_path / "empty"),
    ]
    got = {name: served_locally(name) for name in candidates}
    assert got == {name: serves(name) for name in candidates}
    assert sum(got.values()) == len(LOCAL_MODELS) + 2  # the sizes, the weights file and the checkpoint


def test_a_mistyped_serve_model_is_refused_before_jax_and_the_sdk_are_imported() -> None:
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "rc = main(['serve', '--model', 'tinyy'])\n"
        "print(rc, sorted(m for m in ('jax', 'tinker', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.stdout.split("\n")[0] == "2 []", done.stderr
    assert "model 'tinyy' (did you mean 'tiny'?) is not served by the local service" in done.stderr
    assert "or 'fake' (the in-repo fake)" in done.stderr
