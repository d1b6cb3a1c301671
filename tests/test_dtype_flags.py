"""``--dtype`` of ``train`` and ``serve`` (the local service's ``compute_dtype``): parsing, refusals by
name, and the value reaching the service that computes, without a run. (The bfloat16 numbers themselves:
tests/test_local_hf.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import build_parser
from adapters.training.config import DTYPES, TrainConfig


def test_the_train_flag_and_key_take_the_two_dtypes_and_name_a_wrong_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from adapters.cli.train import _config

    parser = build_parser()
    assert _config(parser.parse_args(["train", "--dtype", "bfloat16"])).dtype == "bfloat16"
    assert parser.parse_args(["train"]).dtype is None  # the config's key decides
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--dtype", "float16"])
    assert "argument --dtype: expected one of float32, bfloat16, got 'float16'" in capsys.readouterr().err
    assert TrainConfig().dtype == "float32"
    assert TrainConfig.from_mapping({"dtype": "bfloat16"}).dtype == "bfloat16"
    with pytest.raises(ValueError, match=r"config key dtype must be one of float32, bfloat16, got 'fp8'"):
        TrainConfig.from_mapping({"dtype": "fp8"})


def test_the_keys_values_are_the_models() -> None:
    model = pytest.importorskip("adapters.local.model")
    assert model.COMPUTE_DTYPES == DTYPES


@pytest.mark.parametrize(("dtype", "extra"), [("float32", []), ("bfloat16", ["--dtype", "bfloat16"])])
def test_train_sends_a_dtype_to_its_serve_only_when_not_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dtype: str, extra: list[str]
) -> None:
    pytest.importorskip("adapters.local")
    from adapters.cli.train import _service
    from adapters.serve import process

    calls: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def served(model: str, **kwargs: Any) -> Iterator[str]:
        calls.append({"model": model, **kwargs})
        raise process.ServerError("recorded")  # stop before a server or a client is made
        yield ""

    monkeypatch.setattr(process, "served", served)
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    config = TrainConfig.from_mapping({"model": "tiny", "dtype": dtype, "out": str(tmp_path)})
    with contextlib.ExitStack() as stack, pytest.raises(RuntimeError, match="recorded"):
        _service("local", config, stack)
    assert [c["model"] for c in calls] == ["tiny"] and list(calls[0]["extra"]) == extra


@pytest.mark.parametrize("kind", ["fake", "tinker"])
def test_train_refuses_a_dtype_for_a_service_that_chooses_its_own(tmp_path: Path, kind: str) -> None:
    from adapters.cli.train import _service

    config = TrainConfig.from_mapping({"model": "tiny", "dtype": "bfloat16", "out": str(tmp_path)})
    with contextlib.ExitStack() as stack, pytest.raises(ValueError, match="config key dtype = bfloat16"):
        _service(kind, config, stack)


def test_the_serve_flag_reaches_the_local_service(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("adapters.local")
    from adapters.serve import state
    from adapters.serve.engine import engine

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--model", "tiny", "--dtype", "half"])
    assert "argument --dtype: invalid choice: 'half'" in capsys.readouterr().err
    args = parser.parse_args(["serve", "--model", "fake", "--dtype", "bfloat16", "--root", str(tmp_path)])
    assert args.func(args) == 2  # refused before binding: the fake engine has no matrix products
    assert "--dtype bfloat16 needs a local model" in capsys.readouterr().err

    made: list[dict[str, Any]] = []

    def core(**kwargs: Any) -> None:
        made.append(kwargs)
        raise ValueError("recorded")

    monkeypatch.setattr(state, "ServeCore", core)
    args = parser.parse_args(["serve", "--model", "fake", "--dtype", "bfloat16", "--root", str(tmp_path)])
    assert args.func(args) == 2 and made[0]["compute_dtype"] == "bfloat16"
    assert parser.parse_args(["serve", "--model", "tiny"]).dtype == "float32"
    service = engine("tiny", "bfloat16").service(0, tmp_path)
    assert getattr(service, "compute_dtype", None) == "bfloat16"
    assert getattr(engine("tiny").service(0, tmp_path), "compute_dtype", None) == "float32"
    with pytest.raises(ValueError, match=r"^--dtype must be one of 'float32', 'bfloat16', got 'fp8'$"):
        engine("tiny", "fp8")
