"""The run directory: its identity, checkpoints that count only once complete, and exactly-once metrics.

Layout of ``RUN_DIR``::

    run.json                      {"run_id", "config"}            written once, atomically
    metrics.jsonl                 one JSON object per step         appended line by line, fsynced
    transcripts/step-000012.jsonl the step's debates               tmp + os.replace
    checkpoints/step-000012/      loop_state.json, then COMPLETE   a checkpoint counts once COMPLETE exists

Durability rules: every file that is replaced is written to a temporary file in the same directory,
fsynced and renamed over the target (``os.replace``). A checkpoint directory without its ``COMPLETE``
marker is ignored (a crash in the middle of a checkpoint). The metrics line of step ``s`` is written
before the checkpoint after ``s``; on resume from the checkpoint after step ``s``, every line of a later
step (and a torn last line) is cut, so each step appears exactly once however often the run is killed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from adapters._atomic import atomic_write

__all__ = [
    "CHECKPOINTS",
    "COMPLETE",
    "METRICS",
    "RESUMABLE_KEYS",
    "RUN_FILE",
    "TRANSCRIPTS",
    "Checkpoint",
    "CheckpointError",
    "RunInfo",
    "append_metrics",
    "init_run",
    "latest_checkpoint",
    "read_metrics",
    "save_checkpoint",
    "transcript_files",
    "transcript_path",
    "truncate_metrics",
    "write_json_atomic",
    "write_text_atomic",
]

RUN_FILE = "run.json"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
TRANSCRIPTS = "transcripts"
COMPLETE = "COMPLETE"
LOOP_STATE = "loop_state.json"

RESUMABLE_KEYS = frozenset(
    {"steps", "out", "save_every", "eval_every", "max_concurrent_debates", "sample_timeout_s"}
)
"""Config keys that may change when a run is resumed; every other key must match the run's."""


class CheckpointError(ValueError):
    """A run directory that cannot be used as asked (another run's, a mismatched config, corrupt)."""


class RunInfo(NamedTuple):
    """A run directory's identity: its id and the config it was started with."""

    run_dir: Path
    run_id: str
    config: dict[str, Any]


class Checkpoint(NamedTuple):
    """A complete checkpoint: the number of steps done and its loop-state payload."""

    steps_done: int
    path: Path
    state: dict[str, Any]


def write_text_atomic(path: str | Path, text: str) -> None:
    """Writes ``text`` to ``path`` via a fsynced temporary file in the same directory and ``os.replace``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as f:
        f.write(text)
    _fsync_dir(target.parent)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """:func:`write_text_atomic` of ``obj`` as indented JSON."""
    write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def init_run(run_dir: str | Path, config: Mapping[str, Any], *, resume: bool) -> RunInfo:
    """Creates a run directory (``resume=False``) or checks that ``config`` may continue it.

    Raises:
      CheckpointError: a fresh run into a directory that already holds a run; a resume of a directory
        without ``run.json``; or a config whose keys outside :data:`RESUMABLE_KEYS` differ (named).
    """
    root = Path(run_dir)
    run_file = root / RUN_FILE
    if not resume:
        if run_file.exists():
            raise CheckpointError(f"{root} already holds a run; pass --resume {root} to continue it")
        info = RunInfo(root, uuid.uuid4().hex, dict(config))
        write_json_atomic(run_file, {"run_id": info.run_id, "config": info.config})
        return info
    try:
        saved = json.loads(run_file.read_text(encoding="utf-8"))
        run_id, saved_config = str(saved["run_id"]), dict(saved["config"])
    except FileNotFoundError:
        raise CheckpointError(f"{root} is not a run directory (no {RUN_FILE})") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{run_file} is unreadable: {e}") from None
    differ = sorted(
        k for k in {*saved_config, *config} - RESUMABLE_KEYS if saved_config.get(k) != config.get(k)
    )
    if differ:
        detail = ", ".join(f"{k}: run has {saved_config.get(k)!r}, given {config.get(k)!r}" for k in differ)
        raise CheckpointError(f"{root} is a run with another config ({detail})")
    return RunInfo(root, run_id, dict(config))


def _step_name(step: int, suffix: str = "") -> str:
    return f"step-{step:06d}{suffix}"


def _step_of(name: str, suffix: str = "") -> int | None:
    """N of a ``step-N`` name ending in ``suffix`` (ASCII digits only), or None for any other name.

    Examples:
        >>> _step_of("step-000012"), _step_of("step-1000000.jsonl", ".jsonl"), _step_of("step-\u00b2")
        (12, 1000000, None)
    """
    if not (name.startswith("step-") and name.endswith(suffix)):
        return None
    digits = name[5 : len(name) - len(suffix)]
    return int(digits) if digits.isascii() and digits.isdigit() else None


def transcript_path(run_dir: str | Path, step: int) -> Path:
    """Where a run writes the debates of step ``step``: ``transcripts/step-NNNNNN.jsonl``."""
    return Path(run_dir, TRANSCRIPTS, _step_name(step, ".jsonl"))


def transcript_files(run_dir: str | Path) -> list[Path]:
    """The transcript files of the run in ``run_dir``, in step order (by number: ``step-1000000`` after
    ``step-999999``); [] when it has none."""
    folder = Path(run_dir, TRANSCRIPTS)
    if not folder.is_dir():
        return []
    found = [(_step_of(p.name, ".jsonl"), p) for p in folder.iterdir()]
    return [p for _, p in sorted((s, p) for s, p in found if s is not None)]


def save_checkpoint(run: RunInfo, steps_done: int, state: Mapping[str, Any]) -> Path:
    """Writes the loop state of a checkpoint after ``steps_done`` steps, then its ``COMPLETE`` marker."""
    path = run.run_dir / CHECKPOINTS / _step_name(steps_done)
    path.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path / LOOP_STATE, {**state, "run_id": run.run_id, "steps_done": steps_done})
    write_text_atomic(path / COMPLETE, run.run_id + "\n")
    return path


def latest_checkpoint(run: RunInfo) -> Checkpoint | None:
    """The complete checkpoint with the most steps, or None when there is none.

    Raises:
      CheckpointError: a complete checkpoint that belongs to another run or cannot be read.
    """
    root = run.run_dir / CHECKPOINTS
    if not root.is_dir():
        return None
    found: list[tuple[int, Path]] = []
    for child in root.iterdir():
        step = _step_of(child.name)
        if step is not None and (child / COMPLETE).is_file():
            found.append((step, child))
    if not found:
        return None
    steps_done, path = max(found)
    try:
        state = json.loads((path / LOOP_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path} is unreadable: {e}") from None
    if not isinstance(state, dict) or state.get("run_id") != run.run_id:
        raise CheckpointError(f"checkpoint {path} belongs to another run (run id {state.get('run_id')!r})")
    return Checkpoint(steps_done, path, state)


def append_metrics(run_dir: str | Path, record: Mapping[str, Any]) -> None:
    """Appends one JSON line to ``metrics.jsonl`` and fsyncs it (one ``write`` call per line)."""
    line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
    with open(Path(run_dir) / METRICS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The complete JSON lines of ``metrics.jsonl`` (a torn last line is skipped); [] when absent."""
    path = Path(run_dir) / METRICS
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def truncate_metrics(run_dir: str | Path, steps_done: int) -> list[dict[str, Any]]:
    """Keeps the lines of steps ``< steps_done`` (the first of each), rewritten atomically; returns them."""
    kept: dict[int, dict[str, Any]] = {}
    for record in read_metrics(run_dir):
        step = record.get("step")
        if isinstance(step, int) and 0 <= step < steps_done and step not in kept:
            kept[step] = record
    records = [kept[s] for s in sorted(kept)]
    path = Path(run_dir) / METRICS
    if path.exists() or records:
        write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return records
