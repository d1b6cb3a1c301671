"""``train`` and ``serve`` tell a model the local service runs without importing JAX
(:mod:`adapters.local_models`, the service's own rule), and a mistyped ``serve --model`` is refused, with
the nearest name, before JAX or the SDK is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.local_models import LOCAL_MODELS, served_locally

jax = pytest.importorskip("jax")


def test_the_names_and_paths_the_local_service_runs(tmp_path: Path) -> None:
    """The sizes the model builds, an existing weights file and a checkpoint directory; not a typo, a hub
    name, the fake, a missing file, a directory named like a weights file or one without config.json.
    ``adapters.local.serves`` and ``hf.is_checkpoint`` are this rule."""
    from adapters.local import SIZES, hf, serves

    assert sorted(LOCAL_MODELS) == sorted(SIZES)
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"not checked here")
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir.safetensors").mkdir()
    expected = {
        **{name: True for name in LOCAL_MODELS},
        str(weights): True,
        str(checkpoint): True,
        "tinyy": False,
        "TINY": False,
        "": False,
        "fake": False,
        "Qwen/Qwen3-8B": False,
        str(tmp_path / "missing.safetensors"): False,
        str(tmp_path / "dir.safetensors"): False,
        str(tmp_path / "empty"): False,
    }
    assert {name: served_locally(name) for name in expected} == expected
    assert {name: serves(name) for name in expected} == expected
    assert hf.is_checkpoint(checkpoint) and not hf.is_checkpoint(tmp_path / "empty")


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
