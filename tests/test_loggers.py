"""``train --log wandb|tensorboard`` (issue 37): what to log (pure), each step logged once across resumes
(stand-in loggers), and the real loggers offline: W&B's offline run files read back by W&B's own reader
(``wandb leet inspect --json``), TensorBoard's event files by its ``EventAccumulator``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.cli import main
from adapters.training import checkpoint as ck
from adapters.training.loggers import STATE_FILE, LogEntry, RunLoggers, log_entries, parse_loggers
from tests._profile import examples


@settings(max_examples=examples(100))
@given(steps=st.lists(st.integers(0, 12), max_size=12), through=st.integers(-1, 6))
def test_each_step_is_logged_once_after_what_was_logged(steps: list[int], through: int) -> None:
    records = [{"step": s, "x": float(k)} for k, s in enumerate(steps)]
    got = log_entries(records, logged_through=through, config={})
    want, last = [], through
    for k, s in enumerate(steps):  # the obvious loop: a step past every step logged before it
        if s > last:
            want.append((s, float(k)))
            last = s
    assert [(e.step, e.scalars["x"]) for e in got] == want


def test_an_evaluation_step_logs_its_table_with_standard_errors() -> None:
    record = {"step": 4, "phase": "rl", "eval/correct": 0.5, "eval/debates": 144.0, "eval/debate/pass@k": 1.0}
    record |= {"time/total": None, "flag": True, "huge": 10**400}
    (entry,) = log_entries([record], logged_through=-1, config={"num_agents": 3, "eval_repeats": 6})
    assert set(entry.scalars) == {"eval/correct", "eval/debates", "eval/debate/pass@k"}
    table = entry.tables["eval/table"]
    assert table.rows == (("eval/correct", 0.5, 0.0417, 144), ("eval/debate/pass@k", 1.0, 0.0, 8))
    assert "| eval/correct | 0.5 | 0.0417 | 144 |" in table.markdown()
    assert parse_loggers(["tensorboard", "wandb,tensorboard"]) == ("tensorboard", "wandb")
    with pytest.raises(ValueError, match="expected wandb or tensorboard"):
        parse_loggers(["mlflow"])


class _Recorder:
    """A stand-in logger: what it was asked to log."""

    def __init__(self, name: str, events: list[tuple[str, int]]) -> None:
        self.name, self.events = name, events

    def log_config(self, config: Mapping[str, Any], step: int) -> None:
        self.events.append(("config", step))

    def log(self, entry: LogEntry) -> None:
        self.events.append(("step", entry.step))

    def close(self, *, failed: bool) -> None:
        self.events.append(("closed", int(failed)))


def test_a_resumed_run_backfills_what_was_never_logged_and_logs_no_step_twice(tmp_path: Path) -> None:
    events: list[tuple[str, int]] = []
    seen_state: list[dict[str, Any]] = []

    def opener(name: str, run_dir: Path, state: dict[str, Any], config: dict[str, Any]) -> _Recorder:
        seen_state.append(dict(state))
        return _Recorder(name, events)

    def line(step: int) -> dict[str, Any]:
        record = {"step": step, "optim/loss": 1.0 / (step + 1)}
        ck.append_metrics(tmp_path, record)
        return record

    line(0), line(1)  # a run started without --log
    first = RunLoggers(["wandb"], tmp_path, {"steps": 5}, open_logger=opener)
    first(2, 5, line(2))  # opened at the first line it sees: steps 0 and 1 are logged first
    first(3, 5, line(3))
    first.close(failed=True)  # the process stops; its checkpoint holds 2 steps
    ck.truncate_metrics(tmp_path, 2)
    again = RunLoggers(["wandb"], tmp_path, {"steps": 5}, open_logger=opener)
    for step in (2, 3, 4):  # steps 2 and 3 are trained again: logged already
        again(step, 5, line(step))
    again.close()
    assert events == [
        ("config", 0),
        ("step", 0),
        ("step", 1),
        ("step", 2),
        ("step", 3),
        ("closed", 1),
        ("step", 4),
        ("closed", 0),
    ]
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["wandb"]["logged_through"] == 4 and state["wandb"]["config"] is True
    run_id = state["wandb"]["id"]
    assert len(run_id) == 16 and seen_state[1]["id"] == run_id  # the same W&B run when resumed


class _Broken(_Recorder):
    """A stand-in logger whose ``log`` fails from step ``fails_at`` on."""

    def __init__(self, name: str, events: list[tuple[str, int]], fails_at: int) -> None:
        super().__init__(name, events)
        self.fails_at = fails_at

    def log(self, entry: LogEntry) -> None:
        if entry.step >= self.fails_at:
            raise OSError(28, "No space left on device")
        super().log(entry)


def test_a_logger_that_fails_is_reported_once_and_a_resume_sends_what_it_missed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events: dict[str, list[tuple[str, int]]] = {"wandb": [], "tensorboard": []}
    broken = {"tensorboard": 1}

    def opener(name: str, run_dir: Path, state: dict[str, Any], config: dict[str, Any]) -> _Recorder:
        if name == "wandb" and "wandb" in broken:
            raise ConnectionError("W&B is unreachable")
        return _Broken(name, events[name], broken.get(name, 99))

    hook = RunLoggers(["wandb", "tensorboard"], tmp_path, {}, open_logger=opener)
    broken["wandb"] = 0
    for step in range(3):
        ck.append_metrics(tmp_path, {"step": step, "optim/loss": 1.0})
        hook(step, 3, {"step": step, "optim/loss": 1.0})
    hook.close()
    err = capsys.readouterr().err
    assert err.count("warning: --log wandb stopped: W&B is unreachable; the run goes on") == 1
    assert err.count("warning: --log tensorboard stopped: [Errno 28] No space left on device") == 1
    assert events["tensorboard"] == [("config", 0), ("step", 0), ("closed", 1)]
    broken.clear()  # resumed with --log: each logger sends the steps it missed
    RunLoggers(["wandb", "tensorboard"], tmp_path, {}, open_logger=opener)(2, 3, {"step": 2})
    assert events["tensorboard"][3:] == [("step", 1), ("step", 2)]
    assert events["wandb"] == [("config", 0), ("step", 0), ("step", 1), ("step", 2)]


# --- the real loggers, offline ---------------------------------------------------------------------


def test_tensorboard_reopened_drops_what_an_earlier_process_wrote_past_its_recorded_step(
    tmp_path: Path,
) -> None:
    """A process killed after writing steps 4 and 5 but recording only step 2 as logged: the next one
    writes its restart marker at step 3, and TensorBoard shows its steps from there, the orphans gone."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from adapters.training.loggers import TensorBoardLogger

    first = TensorBoardLogger(tmp_path, restart_at=None)
    for step in range(6):
        first.log(LogEntry(step, {"x": float(step)}, {}))
    first.close(failed=True)
    again = TensorBoardLogger(tmp_path, restart_at=3)
    for step in (3, 4):
        again.log(LogEntry(step, {"x": 10.0 + step}, {}))
    again.close(failed=False)
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    assert [(e.step, e.value) for e in accumulator.Scalars("x")] == [(0, 0), (1, 1), (2, 2), (3, 13), (4, 14)]


TRAIN = ["train", "--service", "fake", "--batch-size", "2", "--num-agents", "2", "--max-rounds", "1"]
TRAIN += ["--max-tokens", "256", "--eval-questions", "1", "--warm-start-steps", "1", "--eval-every", "2"]
TRAIN += ["--save-every", "2", "--log", "wandb,tensorboard"]


def _wandb_history(run_file: Path) -> tuple[str, dict[str, Any], dict[int, dict[str, Any]]]:
    """A W&B offline run file read by W&B's own reader: its run id, config and history by step."""
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_file)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    run_id, config, history = "", {}, {}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if record["type"] == "run":
            run_id = record["run"]["run_id"]
            config = record["run"].get("config", {}).get("update", {})
        elif record["type"] == "history":
            step = int(record["history"]["step"]["num"])
            assert step not in history, f"step {step} logged twice in {run_file}"
            history[step] = record["history"]["item"]
    return run_id, config, history


def test_wandb_offline_and_tensorboard_continue_the_run_on_resume_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for name, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off"}.items():
        monkeypatch.setenv(name, value)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    run = tmp_path / "run"
    assert main([*TRAIN, "--steps", "4", "--out", str(run)]) == 0
    first = {r["step"]: r for r in ck.read_metrics(run)}
    shutil.rmtree(run / "checkpoints" / "step-000004")  # as if killed before its last checkpoint
    assert main([*TRAIN[:3], "--resume", str(run), "--steps", "6", "--log", "tensorboard,wandb"]) == 0
    metrics = {r["step"]: r for r in ck.read_metrics(run)}
    assert sorted(metrics) == list(range(6))
    logged = {s: first.get(s, metrics[s]) for s in range(6)}  # steps 2-3 trained twice: logged once, first
    state = json.loads((run / STATE_FILE).read_text())

    files = sorted((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 2  # one a process, the same run
    history: dict[int, dict[str, Any]] = {}
    tables: dict[int, Any] = {}
    for f in files:
        run_id, config, part = _wandb_history(f)
        assert run_id == state["wandb"]["id"] and config["model"] == "tiny"
        assert not set(part) & set(history)
        history |= part
        for step, item in part.items():  # a table: a file of the run's, named in the history (flattened)
            if item.get("eval/table._type") == "table-file":
                tables[step] = json.loads((f.parent / "files" / item["eval/table.path"]).read_text())
    assert sorted(history) == list(range(6))
    for step, item in history.items():
        assert item["optim/loss"] == pytest.approx(logged[step]["optim/loss"])
    eval_steps = [s for s in range(6) if logged[s].get("eval/correct") is not None]
    assert sorted(tables) == eval_steps and len(eval_steps) >= 2
    table = tables[eval_steps[0]]
    assert table["columns"] == ["metric", "value", "standard error", "n"]
    correct = logged[eval_steps[0]]["eval/correct"]
    row = next(r for r in table["data"] if r[0] == "eval/correct")
    assert (
        row[1] == correct
        and row[3] == 2
        and row[2] == pytest.approx((correct * (1 - correct) / 2) ** 0.5, abs=1e-4)
    )

    accumulator = EventAccumulator(str(run / "tensorboard"))
    accumulator.Reload()
    loss = accumulator.Scalars("optim/loss")
    assert [e.step for e in loss] == list(range(6))
    assert [e.value for e in loss] == pytest.approx([logged[s]["optim/loss"] for s in range(6)], rel=1e-6)
    texts = accumulator.Tensors("eval/table")
    assert [e.step for e in texts] == eval_steps
    assert f"| eval/correct | {correct:g} |".encode() in texts[0].tensor_proto.string_val[0]
    (config,) = accumulator.Tensors("config")
    assert b'| model | "tiny" |' in config.tensor_proto.string_val[0]
