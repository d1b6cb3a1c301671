"""``debate-kernel train`` end to end on the in-repo fake: SIGKILL mid-run, ``--resume``, every step once."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from tests._marks import SHORT_SAMPLES

ARGS = [
    "--service",
    "fake",
    "--batch-size",
    "2",
    "--num-agents",
    "2",
    "--max-rounds",
    "2",
    "--max-tokens",
    "128",
]


def _train(*extra: str) -> list[str]:
    return [sys.executable, "-m", "adapters.cli", "train", *ARGS, *extra]


def _steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("kill_after", [1, 4])
def test_sigkill_then_resume_writes_every_step_once(tmp_path: Path, kill_after: int) -> None:
    run = tmp_path / "run"
    steps = 8
    cmd = _train("--out", str(run), "--steps", str(steps), "--save-every", "3", "--eval-every", "0")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    deadline = time.monotonic() + 120
    while len(_steps(run)) < kill_after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    assert len(_steps(run)) < steps
    resumed = subprocess.run(
        _train("--resume", str(run)), capture_output=True, text=True, check=False, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _steps(run) == list(range(steps))
    assert "step 8/8" in resumed.stderr


def test_cli_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text("stepz = 3\n")
    assert main(["train", "--service", "fake", "--config", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "unknown config key 'stepz' (did you mean 'steps'?); valid keys:" in capsys.readouterr().err
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n{oops\n')
    assert main(["train", "--service", "fake", "--dataset", str(data), "--out", str(tmp_path / "r2")]) == 2
    assert "q.jsonl:2: not JSON" in capsys.readouterr().err
    assert main(["train", "--service", "fake", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_a_model_the_local_service_cannot_run_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    assert main(["train", "--model", "Qwen/Qwen3-8B", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "model 'Qwen/Qwen3-8B' is not served by the local service" in err
    assert "needs TINKER_API_KEY" in err
    assert main(["train", "--model", "smal", "--out", str(tmp_path / "r1")]) == 2
    assert "model 'smal' (did you mean 'small'?) is not served" in capsys.readouterr().err
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"\x10" * 300)  # not a safetensors file
    assert main(["train", "--model", str(weights), "--out", str(tmp_path / "r2")]) == 2
    assert "cannot read weights file" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not (tmp_path / "r2" / "metrics.jsonl").exists()


def test_every_flag_says_what_it_sets_and_its_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--steps STEPS RL steps (optimizer steps on debate batches), after the warm-start steps." in text
    assert "(default 30 on the local service, 10 on Tinker)" in text
    assert "--seed SEED seeds the dataset order and sampling. (default 0)" in text
    from adapters.cli.train import _FLAGS

    starts = sorted(text.index(f"--{key.replace('_', '-')} {key.upper()} ") for key in _FLAGS)
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        assert "(default " in text[start:end], text[start:end]


def test_report_draws_training_curves_of_a_run_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, "--out", str(run), "--steps", "2", "--eval-every", "1"]) == 0
    out = tmp_path / "curves.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count("<svg") >= 8 and "polyline" in page and "eval/correct" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    assert main(["report", str(tmp_path), "-o", str(out)]) == 2  # a directory without metrics
    assert "no metrics.jsonl" in capsys.readouterr().err


@SHORT_SAMPLES
def test_local_tiny_run_through_the_cli_evaluates_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default local run, shrunk (its time is nearly all compilation): warm start, evaluation where RL
    starts, RL, final evaluation, and the report's eval curves."""
    pytest.importorskip("jax")
    monkeypatch.setenv("DEBATE_KERNEL_JAX_CACHE", "")  # no cache outside tmp_path
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    run = tmp_path / "run"
    quick = ["--model", "tiny", "--warm-start-steps", "1", "--steps", "1", "--batch-size", "1"]
    quick += ["--num-agents", "2", "--eval-questions", "1", "--max-tokens", "8", "--out", str(run)]
    assert main(["train", *quick]) == 0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["phase"]) for x in lines] == [(0, "warm_start"), (1, "rl")]
    saved = json.loads((run / "run.json").read_text())["config"]
    from adapters.cli import train as cli_train

    preset = {k: saved[k] for k in ("dataset", "correctness_weight", "credit", "warm_start_answers")}
    assert preset == {k: cli_train.LOCAL_PRESET[k] for k in preset}  # the local preset
    for line in lines:  # evaluated where RL starts and at the end
        for name in ("eval/correct", "eval/parse_ok", "eval/pairwise_reward"):
            assert isinstance(line[name], float), (line["step"], name)
    assert abs(lines[1]["optim/kl_sample_train_v1"]) < 1e-3  # same weights, same logprobs
    out = tmp_path / "curves.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    page = out.read_text()
    assert "eval/correct" in page and "eval/parse_ok" in page and "eval/pairwise_reward" in page
    assert "correct, parse-success" in page


def test_local_runs_get_the_local_preset_under_file_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.cli import train as cli_train

    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())

    def config(*argv: str) -> Any:
        return cli_train._config(parser.parse_args(["train", *argv]))

    plain = config("--out", str(tmp_path / "a"))
    assert {k: getattr(plain, k) for k in cli_train.LOCAL_PRESET} == cli_train.LOCAL_PRESET
    preset_dataset = cli_train.LOCAL_PRESET["dataset"]
    assert config("--steps", "3").steps == 3 and config("--steps", "3").dataset == preset_dataset
    toml = tmp_path / "c.toml"
    toml.write_text("batch_size = 5\n")
    from_file = config("--config", str(toml), "--max-tokens", "7")
    assert (from_file.batch_size, from_file.max_tokens, from_file.dataset) == (5, 7, preset_dataset)
    fake = config("--service", "fake")
    assert fake.dataset == "sample" and fake.warm_start_steps == 0  # the plain defaults
    monkeypatch.setenv("TINKER_API_KEY", "k")
    assert config("--model", "some/tinker-model").dataset == "sample"
    assert config("--model", "tiny").dataset == preset_dataset


@SHORT_SAMPLES
def test_fake_run_evaluates_where_rl_starts_and_the_report_draws_eval_curves(tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = [*ARGS, "--out", str(run), "--warm-start-steps", "2", "--steps", "4", "--eval-every", "2"]
    assert main(["train", *argv]) == 0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [x["step"] for x in lines if isinstance(x.get("eval/correct"), float)]
    assert evaluated == [1, 3, 5]  # the end of the warm start, then every 2 steps and the last
    out = tmp_path / "curves.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    page = out.read_text()
    chart = page[page.index("correct, parse-success") :].split("</svg>")[0]
    assert chart.count("<polyline") == 2  # eval/correct and eval/parse_ok joined across steps


def test_every_config_key_has_a_row_in_the_training_docs() -> None:
    """docs/training.md promises a table of every config key with its reference value."""
    import re

    from adapters.tinker.config import TrainConfig

    doc = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text(encoding="utf-8")
    first_cells = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    named = set(re.findall(r"`([a-z_0-9]+)`", " ".join(first_cells)))
    assert [k for k in TrainConfig.keys() if k not in named] == []
