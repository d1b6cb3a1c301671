"""``debate-kernel train`` end to end on the in-repo fake: SIGKILL mid-run, ``--resume``, every step once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.cli import main

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
    assert "unknown config key 'stepz'; valid keys:" in capsys.readouterr().err
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n{oops\n')
    assert main(["train", "--service", "fake", "--dataset", str(data), "--out", str(tmp_path / "r2")]) == 2
    assert "q.jsonl:2: not JSON" in capsys.readouterr().err
    assert main(["train", "--service", "fake", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err


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
