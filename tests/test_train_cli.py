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
from tests._marks import EXHAUSTIVE, SHORT_SAMPLES

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


_HUNG_S = 1800  # a subprocess still running after this long is hung, not slow


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
    # waits for the event (kill_after steps written, or the run ending), however slow a loaded machine
    # makes it; the guard only ends a hung run, far beyond any load (the whole suite takes under 12 min)
    hung = time.monotonic() + _HUNG_S
    while len(_steps(run)) < kill_after and proc.poll() is None and time.monotonic() < hung:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    assert kill_after <= len(_steps(run)) < steps, f"killed after {len(_steps(run))} steps"
    resumed = subprocess.run(
        _train("--resume", str(run)), capture_output=True, text=True, check=False, timeout=_HUNG_S
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _steps(run) == list(range(steps))
    assert "step " not in resumed.stderr  # piped: no progress (tests/test_progress.py: on a terminal)


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
    assert "--steps STEPS the run's optimizer steps in all, warm start included: RL takes the steps" in text
    assert "(default 170 on the local service, 10 on Tinker)" in text  # 150 warm-start and 20 RL steps
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
    starts, RL, final evaluation, and the report's eval curves. With no key it goes through the real
    tinker SDK over HTTP to a `debate-kernel serve` that `train` started (its log and folder in the run
    directory) after checking its contract; the server stops with the run."""
    pytest.importorskip("jax")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)  # the suite's compilation cache (tests/conftest.py)
    run = tmp_path / "run"
    # the contract check is left out here (its compilation doubles a cold run; test_contract.py runs it on
    # the local service, and the CLI runs on the fake below run it before step 0)
    quick = [
        "--model",
        "tiny",
        "--skip-checks",
        "--warm-start-steps",
        "1",
        "--steps",
        "2",
        "--batch-size",
        "1",
    ]
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
    assert (run / "service").is_dir() and "Traceback" not in (run / "serve.log").read_text()
    # the saved state is remote (tinker://): read back from its run's checkpoint list before it counted
    last = sorted((run / "checkpoints").glob("step-*"))[-1]
    loop_state = json.loads((last / "loop_state.json").read_text())
    assert loop_state["state_path"].startswith("tinker://")
    assert loop_state["state_check"]["listed"] is True and loop_state["state_check"]["size"] > 0
    ids = _transcript_ids(run)
    assert ids and len(ids) == len(set(ids))
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
    assert config("--steps", "153").steps == 3 and config("--steps", "153").dataset == preset_dataset
    toml = tmp_path / "c.toml"
    toml.write_text("batch_size = 5\n")
    from_file = config("--config", str(toml), "--max-tokens", "7")
    assert (from_file.batch_size, from_file.max_tokens, from_file.dataset) == (5, 7, preset_dataset)
    fake = config("--service", "fake")
    assert fake.dataset == "sample" and fake.warm_start_steps == 0  # the plain defaults
    monkeypatch.setenv("TINKER_API_KEY", "k")
    assert config("--model", "some/tinker-model").dataset == "sample"
    assert config("--model", "tiny").dataset == preset_dataset


def test_steps_counts_every_optimizer_step_and_zero_or_fewer_than_the_warm_start_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--steps N`` is the run's N optimizer steps, warm start included (the config key ``steps`` keeps
    counting the RL steps); ``--steps 0``, and fewer steps than the warm start, are refused before the run
    directory is made, saying what to pass."""
    run = tmp_path / "run"
    argv = ["train", *ARGS, "--warm-start-steps", "2", "--steps", "3", "--save-every", "1"]
    argv += ["--eval-every", "0", "--max-tokens", "256"]  # a warm-start turn fits in 256 tokens
    assert main([*argv, "--out", str(run)]) == 0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["phase"]) for x in lines] == [(0, "warm_start"), (1, "warm_start"), (2, "rl")]
    assert json.loads((run / "run.json").read_text())["config"]["steps"] == 1  # the key: RL steps
    err = capsys.readouterr().err
    assert "warm start" not in err  # not a terminal: no progress (the bars: tests/test_progress.py)
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "5"]) == 0  # 2 more
    assert _steps(run) == [0, 1, 2, 3, 4]
    capsys.readouterr()

    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    refused = {
        ("--steps", "0"): "--steps 0 trains nothing: pass --steps N >= 1, the run's optimizer steps (its "
        "warm start takes 150 of them)",
        ("--steps", "2"): "--steps 2 counts every optimizer step of the run, warm start included, and the "
        "warm start alone takes 150 (warm_start_steps): pass --steps 152 for 2 RL steps after it, or "
        "--warm-start-steps K with K <= 2",
        ("--steps", "0", "--warm-start-steps", "0"): "--steps 0 trains nothing: pass --steps N >= 1, the "
        "run's optimizer steps\n",
    }
    for flags, message in refused.items():  # the local preset: a 150-step warm start
        assert main(["train", "--model", "tiny", *flags, "--out", str(tmp_path / "no")]) == 2
        assert f"debate-kernel train: {message}" in capsys.readouterr().err
    toml = tmp_path / "zero.toml"
    toml.write_text("steps = 0\n")
    assert main(["train", "--service", "fake", "--config", str(toml), "--out", str(tmp_path / "no")]) == 2
    assert "steps = 0 and warm_start_steps = 0: the run would train nothing" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_the_readme_try_command_is_four_steps_two_of_them_rl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's try command, read from the README, means what its text says (issue 37)."""
    import re
    import shlex

    from adapters.cli import train as cli_train

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (line,) = re.findall(r"^debate-kernel train --model tiny .*$", readme, flags=re.M)
    argv = shlex.split(line)[1:]
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    config = cli_train._config(parser.parse_args(argv))
    assert (config.total_steps, config.warm_start_steps, config.steps) == (4, 2, 2)
    assert config.eval_questions * config.num_agents * config.eval_repeats == 24  # "evaluates 24 debates"


@SHORT_SAMPLES
def test_fake_run_evaluates_where_rl_starts_and_the_report_draws_eval_curves(tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = [*ARGS, "--out", str(run), "--warm-start-steps", "2", "--steps", "6", "--eval-every", "2"]
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

    from adapters.training.config import TrainConfig

    doc = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text(encoding="utf-8")
    first_cells = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    named = set(re.findall(r"`([a-z_0-9]+)`", " ".join(first_cells)))
    assert [k for k in TrainConfig.keys() if k not in named] == []


FAKE = ["train", *ARGS, "--eval-every", "0"]


def test_resume_takes_run_json_as_the_base_and_defaults_for_keys_it_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([*FAKE, "--steps", "1", "--out", str(run)]) == 0
    saved = json.loads((run / "run.json").read_text())
    del saved["config"]["eval_repeats"]  # a run started before the key was added
    (run / "run.json").write_text(json.dumps(saved))
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "2"]) == 0
    more = tmp_path / "more.toml"
    more.write_text("steps = 3\n")  # the run's batch_size (2) stays: the file sits over run.json
    assert main(["train", "--service", "fake", "--resume", str(run), "--config", str(more)]) == 0
    assert _steps(run) == [0, 1, 2]
    more.write_text("steps = 4\nbatch_size = 16\n")
    capsys.readouterr()
    assert main(["train", "--service", "fake", "--resume", str(run), "--config", str(more)]) == 2
    assert "batch_size: run has 2, given 16" in capsys.readouterr().err


def test_a_fresh_run_refuses_a_directory_of_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "d"
    (mine / "transcripts").mkdir(parents=True)
    (mine / "metrics.jsonl").write_text('{"my": "metrics"}\n')
    (mine / "transcripts" / "step-000000.jsonl").write_text("PRECIOUS\n")
    assert main([*FAKE, "--steps", "1", "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine} is not empty and holds no run (run.json)" in err and "Traceback" not in err
    assert (mine / "metrics.jsonl").read_text() == '{"my": "metrics"}\n'
    assert (mine / "transcripts" / "step-000000.jsonl").read_text() == "PRECIOUS\n"
    data = tmp_path / "q" / "metrics.jsonl"
    data.parent.mkdir()
    data.write_text('{"question": "1+1?", "answer": "2"}\n')
    assert main([*FAKE, "--steps", "1", "--dataset", str(data), "--out", str(data.parent)]) == 2
    assert data.read_text() == '{"question": "1+1?", "answer": "2"}\n'
    (tmp_path / "file").write_text("x")
    assert main([*FAKE, "--steps", "1", "--out", str(tmp_path / "file")]) == 2
    assert "file is not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([*FAKE, "--steps", "1", "--out", str(tmp_path / "empty")]) == 0


def test_resume_stops_at_an_unreadable_metrics_line_and_cuts_only_a_torn_last_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "r3"
    assert main([*FAKE, "--steps", "3", "--save-every", "1", "--out", str(run)]) == 0
    metrics = run / "metrics.jsonl"
    good = metrics.read_bytes()
    lines = good.splitlines(keepends=True)
    metrics.write_bytes(lines[0] + b'{"advantage/max": 0.3\n' + lines[2])
    broken = metrics.read_bytes()
    resume = ["train", "--service", "fake", "--resume", str(run), "--steps", "4"]
    capsys.readouterr()
    assert main(resume) == 2
    err = capsys.readouterr().err
    assert f"{metrics}:2: not JSON" in err and "Traceback" not in err
    assert metrics.read_bytes() == broken
    metrics.write_bytes(good[:-1] + b"\xff\n")  # invalid UTF-8 in the middle of the last complete line
    assert main(resume) == 2
    assert f"{metrics}:3: not UTF-8 text" in capsys.readouterr().err
    metrics.write_bytes(good + b"\xff")  # a torn last line: cut
    assert main(resume) == 0
    assert _steps(run) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ("[]", "is unreadable: not a JSON object"),
        ('{"run_id": "RUN"}', 'has no "loop" state'),
        ('{"run_id": "RUN", "loop": {"step": "x"}}', "loop state is malformed"),
        ("drop state_path", "'state_path' is None, not a path"),
        ("garbage state", "cannot load its saved state"),
        ("missing state", "cannot load its saved state"),
    ],
)
def test_a_corrupt_checkpoint_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str, problem: str
) -> None:
    run = tmp_path / "run"
    assert main([*FAKE, "--steps", "2", "--save-every", "1", "--out", str(run)]) == 0
    loop_state = run / "checkpoints" / "step-000002" / "loop_state.json"
    saved = json.loads(loop_state.read_text())
    state_file = run / "service" / "states" / "step-000002.json"
    if edit == "drop state_path":
        loop_state.write_text(json.dumps({k: v for k, v in saved.items() if k != "state_path"}))
    elif edit == "garbage state":
        state_file.write_text("garbage")
    elif edit == "missing state":
        state_file.unlink()
    else:
        loop_state.write_text(edit.replace("RUN", saved["run_id"]))
    capsys.readouterr()
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "3"]) == 2
    err = capsys.readouterr().err
    assert str(loop_state) in err and problem in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "toml", "error"),
    [
        (
            ["--correctness-weight", "nan"],
            "",
            "config key correctness_weight must be a finite number, got nan",
        ),
        (
            ["--correctness-weight", "inf"],
            "",
            "config key correctness_weight must be a finite number, got inf",
        ),
        (["--kl-penalty-coef", "inf"], "", "config key kl_penalty_coef must be a finite number, got inf"),
        (["--kl-penalty-coef", "nan"], "", "config key kl_penalty_coef must be a finite number, got nan"),
        (["--seed", "-1"], "", "config key seed must be an int in [0, 2**32), got -1"),
        ([], "temperature = inf", "config key temperature must be a finite number, got inf"),
        ([], "eps = -1.0", "config key eps must be a finite number > 0, got -1.0"),
        ([], "sample_timeout_s = nan", "config key sample_timeout_s must be a finite number, got nan"),
        ([], 'dataset = ""', "config key dataset is empty"),
        (["--num-agents", "1", "--estimator", "default,singleton=error"], "", "refuses groups of one sample"),
        ([], "lora_rank = 0", "config key lora_rank = 0 (full fine-tuning) needs the local service"),
        ([], "[train]\nsteps = 1\n[eval]\nx = 1", "unknown config key or table 'eval' beside [train]"),
    ],
)
def test_config_errors_come_before_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], toml: str, error: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml + "\n")
    run = tmp_path / "run"
    assert main([*FAKE, "--steps", "1", "--config", str(config), *argv, "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err
    assert not run.exists()  # a corrected rerun is not told the directory holds a run


def test_a_dataset_without_answers_is_refused_for_the_correctness_reward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "q1"}\n')
    argv = [
        *FAKE,
        "--steps",
        "1",
        "--dataset",
        str(data),
        "--correctness-weight",
        "1",
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(argv) == 2
    assert 'no question has an "answer", and config key correctness_weight = 1.0' in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_run_files_and_config_files_are_named_in_their_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([*FAKE, "--steps", "1", "--out", str(run)]) == 0
    saved = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**saved, "config": []}))
    capsys.readouterr()
    assert main(["train", "--service", "fake", "--resume", str(run)]) == 2
    assert f'{run / "run.json"} is unreadable: its "config" is not an object' in capsys.readouterr().err
    (run / "run.json").write_text(json.dumps({**saved, "config": {**saved["config"], "retired_key": 1}}))
    assert main(["train", "--service", "fake", "--resume", str(run)]) == 2
    assert f"{run / 'run.json'}: unknown config key 'retired_key'" in capsys.readouterr().err
    toml = tmp_path / "c.toml"
    toml.write_bytes(b"steps = \xff\n")
    assert main([*FAKE, "--config", str(toml), "--out", str(tmp_path / "r2")]) == 2
    assert f"{toml}: not UTF-8 text" in capsys.readouterr().err
    toml.write_bytes(b"\xef\xbb\xbfsteps = 1\n")  # a byte order mark
    assert main([*FAKE, "--config", str(toml), "--out", str(tmp_path / "r2")]) == 0


SDK_ARGS = ["--model", "tiny", "--warm-start-steps", "1", "--batch-size", "1", "--num-agents", "2"]
SDK_ARGS += ["--max-rounds", "1", "--eval-questions", "0", "--eval-every", "0", "--max-tokens", "16"]


def _transcript_ids(run: Path) -> list[str]:
    return [
        json.loads(line)["id"]
        for path in sorted((run / "transcripts").glob("step-*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


@EXHAUSTIVE
@SHORT_SAMPLES
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_run_through_serve_killed_mid_run_resumes(tmp_path: Path) -> None:
    """A SIGKILL mid-run stops the server too (its stdin ends); `--resume` starts another on the same
    folder and finishes: every step once in metrics.jsonl, every debate's transcript record once. (The
    fast tier kills and resumes a run on the fake: test_sigkill_then_resume_writes_every_step_once.)"""
    pytest.importorskip("jax")
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("TINKER_API_KEY", "TINKER_BASE_URL")}
    cmd = [sys.executable, "-m", "adapters.cli", "train", *SDK_ARGS, "--steps", "4", "--save-every", "1"]
    proc = subprocess.Popen(
        [*cmd, "--out", str(run)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    deadline = time.monotonic() + 600  # a bound for a broken run only: the loop waits on the first step
    while len(_steps(run)) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(_steps(run)) >= 1
    resume = [sys.executable, "-m", "adapters.cli", "train", "--resume", str(run)]
    resumed = subprocess.run(resume, capture_output=True, text=True, check=False, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run) == list(range(4))
    ids = _transcript_ids(run)
    assert ids and len(ids) == len(set(ids))
    assert "Traceback" not in (run / "serve.log").read_text()


def test_a_renderer_that_cannot_fit_is_refused_before_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    run = tmp_path / "run"
    assert main(["train", "--service", "fake", "--renderer", "chat", "--out", str(run)]) == 2
    assert "model 'tiny'" in capsys.readouterr().err
    assert not run.exists()


def test_the_renderer_config_key_is_refused_before_the_run_directory_and_the_flag_overrides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``renderer`` in a config file chooses as ``--renderer`` does (a tokenizer that does not fit it is
    refused before the run directory exists); the flag, when given, wins; a resume keeps the run's value,
    as every key outside the resumable ones."""
    config = tmp_path / "train.toml"
    config.write_text('renderer = "chat"\n')
    run = tmp_path / "run"
    base = [*FAKE, "--steps", "1", "--config", str(config)]
    assert main([*base, "--out", str(run)]) == 2
    assert "model 'tiny': --renderer chat needs a tokenizer with a chat template" in capsys.readouterr().err
    assert not run.exists()
    config.write_text('renderer = "bytes"\n')
    assert main([*base, "--out", str(run)]) == 2
    assert "config key renderer must be one of 'auto', 'byte', 'chat', got 'bytes'" in capsys.readouterr().err
    config.write_text('renderer = "chat"\n')
    assert main([*base, "--renderer", "byte", "--out", str(run)]) == 0
    assert json.loads((run / "run.json").read_text())["config"]["renderer"] == "byte"
    resume = ["train", "--service", "fake", "--resume", str(run), "--steps", "2"]
    assert main([*resume, "--renderer", "auto"]) == 2
    assert "renderer: run has 'byte', given 'auto'" in capsys.readouterr().err
    assert main(resume) == 0
    assert _steps(run) == [0, 1]


def test_a_broken_service_contract_ends_the_run_before_step_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI checks the service's contract before step 0: a failed check ends the run with exit 2 and a
    message naming it, before any step is written; --skip-checks trains."""
    from adapters.tinker import contract

    async def broken(*args: Any, **kwargs: Any) -> contract.ContractReport:
        bad = contract.CheckResult("compute_logprobs", False, "one entry per prompt token", "one fewer")
        return contract.ContractReport((bad,))

    monkeypatch.setattr(contract, "check_contract", broken)
    run = tmp_path / "run"
    args = ["train", *ARGS, "--steps", "1", "--eval-every", "0", "--out", str(run)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "compute_logprobs: expected one entry per prompt token; got one fewer" in err
    assert not (run / "metrics.jsonl").exists()
    assert (
        main(
            [
                "train",
                *ARGS,
                "--steps",
                "1",
                "--eval-every",
                "0",
                "--skip-checks",
                "--out",
                str(tmp_path / "ok"),
            ]
        )
        == 0
    )
