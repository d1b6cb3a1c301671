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
Any other line that cannot be read stops the resume, the file untouched: nothing else is cut.

A fresh run is made only in a new or empty directory: one that holds files but no ``run.json`` is
refused, so nothing of the user's is overwritten. A checkpoint records the service's saved states that
lie inside the run directory as ``$RUN_DIR/…`` (after the URI scheme, if any), so a run resumes from any
working directory and after a move (:func:`stored_path`, :func:`saved_path`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from adapters._atomic import atomic_write

__all__ = [
    "CHECKPOINTS",
    "COMPLETE",
    "METRICS",
    "RESUMABLE_KEYS",
    "RUN_DIR_MARK",
    "RUN_FILE",
    "TRANSCRIPTS",
    "Checkpoint",
    "CheckpointError",
    "RunInfo",
    "append_metrics",
    "check_listed_state",
    "check_saved_state",
    "init_run",
    "latest_checkpoint",
    "listed_state",
    "local_file",
    "read_metrics",
    "read_run",
    "remote_run_id",
    "save_checkpoint",
    "saved_path",
    "stored_path",
    "transcript_files",
    "transcript_path",
    "truncate_metrics",
    "verify_saved_state",
    "write_text_atomic",
]

RUN_FILE = "run.json"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
TRANSCRIPTS = "transcripts"
COMPLETE = "COMPLETE"
LOOP_STATE = "loop_state.json"
RUN_DIR_MARK = "$RUN_DIR"
"""Stands for the run directory at the start of a saved-state path a checkpoint records."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")

RESUMABLE_KEYS = frozenset(
    {
        "steps",
        "num_epochs",
        "out",
        "save_every",
        "eval_every",
        "max_concurrent_debates",
        "sample_timeout_s",
        "deadlines",
        "retry_attempts",
        "retry_max_s",
        "max_empty_steps",
    }
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
    """Writes ``text`` to ``path`` via a fsynced temporary file in the same directory and ``os.replace``.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> target = Path(tmp.name, "notes", "a.txt")  # its directory is made
        >>> write_text_atomic(target, "old")
        >>> write_text_atomic(target, "new")
        >>> target.read_text(), os.listdir(target.parent)  # replaced, no temporary file left
        ('new', ['a.txt'])
        >>> tmp.cleanup()
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as f:
        f.write(text)
    _fsync_dir(target.parent)


def _write_json_atomic(path: str | Path, obj: Any) -> None:
    """:func:`write_text_atomic` of ``obj`` as indented JSON.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> _write_json_atomic(Path(tmp.name, "state.json"), {"step": 2, "loss": 0.5})
        >>> print(Path(tmp.name, "state.json").read_text(), end="")
        {
         "loss": 0.5,
         "step": 2
        }
        >>> tmp.cleanup()
    """
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


def init_run(
    run_dir: str | Path,
    config: Mapping[str, Any],
    *,
    resume: bool,
    defaults: Mapping[str, Any] | None = None,
) -> RunInfo:
    """Creates a run directory (``resume=False``) or checks that ``config`` may continue it.

    On resume, a key missing from the run's saved config (a key added after the run started) compares
    as its value in ``defaults``.

    Raises:
      CheckpointError: a fresh run into a directory that already holds a run, into a directory that
        holds other files, or into a path that is not a directory; a resume of a directory without
        ``run.json``; or a config whose keys outside :data:`RESUMABLE_KEYS` differ (named).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> run = init_run(Path(tmp.name, "run"), {"steps": 10, "seed": 0}, resume=False)
        >>> os.listdir(run.run_dir), len(run.run_id)
        (['run.json'], 32)
        >>> again = init_run(run.run_dir, {"steps": 20, "seed": 0}, resume=True)  # steps may change
        >>> again.run_id == run.run_id, again.config
        (True, {'steps': 20, 'seed': 0})
        >>> init_run(run.run_dir, {"steps": 20, "seed": 1}, resume=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        adapters.training.checkpoint.CheckpointError: ... a run with another config (seed: run has 0, given 1)
        >>> tmp.cleanup()
    """
    root = Path(run_dir)
    if not resume:
        return _new_run(root, config)
    run_id, saved_config = read_run(root)
    saved_config = {**(defaults or {}), **saved_config}
    differ = sorted(
        k for k in {*saved_config, *config} - RESUMABLE_KEYS if saved_config.get(k) != config.get(k)
    )
    if differ:
        detail = ", ".join(f"{k}: run has {saved_config.get(k)!r}, given {config.get(k)!r}" for k in differ)
        raise CheckpointError(f"{root} is a run with another config ({detail})")
    return RunInfo(root, run_id, dict(config))


SERVICE_FILES: Final = frozenset({"service", "serve.log"})
"""What a run's service may have put in its directory before the run starts: the folder of its runs and
checkpoints and the log of the ``debate-kernel serve`` that ``train`` started for it."""


def _new_run(root: Path, config: Mapping[str, Any]) -> RunInfo:
    """Writes ``run.json`` of a fresh run in ``root``, a new or empty directory (the service's own files,
    :data:`SERVICE_FILES`, aside)."""
    check_new_run_dir(root)
    info = RunInfo(root, uuid.uuid4().hex, dict(config))
    run_file = root / RUN_FILE
    try:
        _write_json_atomic(run_file, {"run_id": info.run_id, "config": info.config})
    except OSError as e:
        raise CheckpointError(f"{run_file}: cannot write: {e.strerror or e}") from None
    return info


def check_new_run_dir(root: str | Path) -> None:
    """Checks that a fresh run can start in ``root``: a new directory, or one that holds nothing but the
    service's own files (:data:`SERVICE_FILES`), so that nothing of the user's is overwritten.

    Raises:
      CheckpointError: ``root`` holds a run (naming ``--resume``), is a file, or holds other files.

    Examples:
      >>> check_new_run_dir("no/such/dir") is None
      True
    """
    root = Path(root)
    run_file = root / RUN_FILE
    if run_file.exists():
        raise CheckpointError(
            f"{root} already holds a run; pass --resume {root} to continue it with its config, "
            "or remove it (or name another directory) to start a new run"
        )
    if root.exists() and not root.is_dir():
        raise CheckpointError(f"{root} is not a directory; name a new or empty directory for the run")
    if root.is_dir() and any(p.name not in SERVICE_FILES for p in root.iterdir()):
        raise CheckpointError(
            f"{root} is not empty and holds no run ({RUN_FILE}); name a new or empty directory for the "
            "run, so that nothing in it is overwritten"
        )


def read_run(run_dir: str | Path) -> tuple[str, dict[str, Any]]:
    """The run id and the saved config of the run in ``run_dir`` (its ``run.json``).

    Raises:
      CheckpointError: no ``run.json`` there, or one that is not ``{"run_id": str, "config": {...}}``
        (naming the file).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> run = init_run(tmp.name, {"steps": 3, "dataset": "sample"}, resume=False)
        >>> run_id, config = read_run(tmp.name)
        >>> run_id == run.run_id, config
        (True, {'dataset': 'sample', 'steps': 3})
        >>> tmp.cleanup()
    """
    run_file = Path(run_dir) / RUN_FILE
    try:
        saved = json.loads(run_file.read_bytes().decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise CheckpointError(f"{run_dir} is not a run directory (no {RUN_FILE})") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{run_file} is unreadable: {e}") from None
    if not isinstance(saved, dict):
        raise CheckpointError(f"{run_file} is unreadable: not a JSON object")
    if not isinstance(saved.get("run_id"), str):
        raise CheckpointError(f'{run_file} is unreadable: its "run_id" is not a string')
    if not isinstance(saved.get("config"), dict):
        raise CheckpointError(f'{run_file} is unreadable: its "config" is not an object of config keys')
    return saved["run_id"], dict(saved["config"])


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
    """Where a run writes the debates of step ``step``: ``transcripts/step-NNNNNN.jsonl``.

    Examples:
        >>> transcript_path("runs/a", 12).as_posix()
        'runs/a/transcripts/step-000012.jsonl'
    """
    return Path(run_dir, TRANSCRIPTS, _step_name(step, ".jsonl"))


def local_file(path: str) -> Path | None:
    """The local file of a saved-state path (``fake:///abs``, ``file:///abs``, a plain path), or None for a
    remote URI (``tinker://…``).

    Examples:
        >>> local_file("fake:///runs/a/x.json").as_posix(), local_file("tinker://r/w")
        ('/runs/a/x.json', None)
    """
    scheme, rest = _split_scheme(path)
    if scheme and not os.path.isabs(rest):
        return None
    return Path(rest)


def verify_saved_state(path: str) -> dict[str, Any] | None:
    """Reads back a state the service says it saved, as resume will need it: the file exists and is not
    empty, and its index loads (a ``.json`` file parses; a ``.safetensors`` file's header parses and its
    tensors end at the file's end). Returns ``{"size", "sha256"}`` to record with the checkpoint, or None
    for a remote path (``tinker://``: the service keeps it, the client cannot read it).

    Raises:
        CheckpointError: the file is missing, empty, truncated or its index does not load (naming it).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> state = Path(tmp.name, "step-000001.json")
        >>> _ = state.write_text('{"state": 1}')
        >>> verify_saved_state(f"fake://{state}")["size"], verify_saved_state("tinker://run/w") is None
        (12, True)
        >>> _ = state.write_text('{"sta')  # half-written
        >>> verify_saved_state(str(state))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        adapters.training.checkpoint.CheckpointError: saved state ... is unusable: it is not complete JSON ...
        >>> tmp.cleanup()
    """
    file = local_file(path)
    if file is None:
        return None
    try:
        data = file.read_bytes()
    except OSError as e:
        raise CheckpointError(f"saved state {path}: cannot read it back: {e.strerror or e}") from None
    problem = _index_problem(file, data)
    if problem:
        raise CheckpointError(f"saved state {path} is unusable: {problem}")
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _index_problem(file: Path, data: bytes) -> str:
    """What keeps a saved state's index from loading ("" when nothing does)."""
    if not data:
        return "the file is empty"
    if file.suffix == ".json":
        try:
            json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            return f"it is not complete JSON ({e})"
        return ""
    if file.suffix == ".safetensors":
        if len(data) < 8:
            return f"{len(data)} bytes, shorter than a safetensors header"
        n = int.from_bytes(data[:8], "little")
        try:
            header = json.loads(data[8 : 8 + n])
            end = max(
                (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0
            )
        except (ValueError, UnicodeDecodeError, TypeError, KeyError, IndexError) as e:
            return f"its safetensors header does not load ({e})"
        if 8 + n + end != len(data):
            return f"{len(data)} bytes where its header says {8 + n + end}: a partial write"
    return ""


def check_saved_state(path: str, recorded: Any, *, checkpoint: Path) -> None:
    """Checks a saved state against the size and checksum its checkpoint recorded (nothing when none was
    recorded or the path is remote).

    Raises:
        CheckpointError: the file changed, shrank or went missing since it was saved (naming both files).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> state = Path(tmp.name, "s.json")
        >>> _ = state.write_text("{}")
        >>> recorded = verify_saved_state(str(state))
        >>> check_saved_state(str(state), recorded, checkpoint=Path("loop_state.json"))  # unchanged
        >>> _ = state.write_text("{} ")
        >>> check_saved_state(str(state), recorded, checkpoint=Path("loop_state.json"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        adapters.training.checkpoint.CheckpointError: checkpoint ...: ... not the file the run saved ...
        >>> tmp.cleanup()
    """
    file = local_file(path)
    if file is None or not isinstance(recorded, dict):
        return
    try:
        data = file.read_bytes()
    except OSError as e:
        raise CheckpointError(
            f"checkpoint {checkpoint}: cannot load its saved state {path}: {e.strerror or e}"
        ) from None
    if len(data) != recorded.get("size") or hashlib.sha256(data).hexdigest() != recorded.get("sha256"):
        raise CheckpointError(
            f"checkpoint {checkpoint}: cannot load its saved state {path}: it is not the file the run saved "
            f"({len(data)} bytes now, {recorded.get('size')} then, or another checksum)"
        )


def remote_run_id(path: str) -> str | None:
    """The training run of a ``tinker://RUN/KIND/NAME`` path (the id its checkpoint list is asked by);
    None for any other path.

    Examples:
        >>> remote_run_id("tinker://run-7/weights/step-000004"), remote_run_id("fake:///a/b.json")
        ('run-7', None)
    """
    if not path.startswith("tinker://"):
        return None
    run, _, rest = path.removeprefix("tinker://").partition("/")
    return run if run and rest else None


def listed_state(path: str, listing: Any) -> dict[str, Any]:
    """Reads back a remote state (``tinker://``) the service says it saved: it must be in its training
    run's checkpoint list (``RestClient.list_checkpoints``, given as ``listing``: the SDK's
    ``CheckpointsListResponse`` or a list of its ``Checkpoint``), and not empty when the list gives its
    size. Returns ``{"listed": True, "size": bytes or None}`` to record with the checkpoint.

    Raises:
        CheckpointError: the state is not listed, or is listed with 0 bytes (naming it).

    Examples:
        >>> from datetime import datetime, UTC
        >>> from tinker import types
        >>> saved = types.Checkpoint(checkpoint_id="weights/s1", checkpoint_type="training",
        ...     time=datetime.now(UTC), tinker_path="tinker://r/weights/s1", size_bytes=4096)
        >>> listed_state("tinker://r/weights/s1", [saved])
        {'listed': True, 'size': 4096}
        >>> listed_state("tinker://r/weights/s2", [saved])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        adapters.training.checkpoint.CheckpointError: saved state tinker://r/weights/s2 is not in ...
    """
    entries = getattr(listing, "checkpoints", listing)
    found = [c for c in entries if getattr(c, "tinker_path", None) == path]
    if not found:
        raise CheckpointError(
            f"saved state {path} is not in the service's checkpoint list of run {remote_run_id(path)!r} "
            f"({len(entries)} listed): the save was reported but cannot be found"
        )
    size = found[-1].size_bytes
    if size == 0:
        raise CheckpointError(f"saved state {path} is unusable: the service lists it with 0 bytes")
    return {"listed": True, "size": size}


def check_listed_state(path: str, recorded: Any, listing: Any, *, checkpoint: Path) -> None:
    """Checks a remote saved state against what its checkpoint recorded (:func:`listed_state`): still
    listed, and of the recorded size when both sizes are known. Nothing when the checkpoint recorded no
    listing (a local state, or a run from before this check).

    Raises:
        CheckpointError: the state is gone from the list or changed size (naming the checkpoint).

    Examples:
        >>> from pathlib import Path
        >>> path, where = "tinker://r/weights/s1", Path("c")
        >>> check_listed_state(path, {"size": 8}, [], checkpoint=where)  # recorded no listing
        >>> try:
        ...     check_listed_state(path, {"listed": True, "size": 8}, [], checkpoint=where)
        ... except CheckpointError as e:
        ...     print(str(e)[:60])
        checkpoint c: cannot load its saved state tinker://r/weights
    """
    if not (isinstance(recorded, dict) and recorded.get("listed")):
        return
    try:
        now = listed_state(path, listing)
    except CheckpointError as e:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot load its saved state {path}: {e}") from None
    if None not in (now["size"], recorded.get("size")) and now["size"] != recorded.get("size"):
        raise CheckpointError(
            f"checkpoint {checkpoint}: cannot load its saved state {path}: the service lists "
            f"{now['size']} bytes, {recorded.get('size')} when it was saved"
        )


def transcript_files(run_dir: str | Path) -> list[Path]:
    """The transcript files of the run in ``run_dir``, in step order (by number: ``step-1000000`` after
    ``step-999999``); [] when it has none.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> transcript_files(tmp.name)
        []
        >>> for step in (1000000, 2, 999999):
        ...     write_text_atomic(transcript_path(tmp.name, step), "")
        >>> write_text_atomic(Path(tmp.name, TRANSCRIPTS, "notes.txt"), "")  # not a step's file: left out
        >>> [p.name for p in transcript_files(tmp.name)]
        ['step-000002.jsonl', 'step-999999.jsonl', 'step-1000000.jsonl']
        >>> tmp.cleanup()
    """
    folder = Path(run_dir, TRANSCRIPTS)
    if not folder.is_dir():
        return []
    found = [(_step_of(p.name, ".jsonl"), p) for p in folder.iterdir()]
    return [p for _, p in sorted((s, p) for s, p in found if s is not None)]


def save_checkpoint(run: RunInfo, steps_done: int, state: Mapping[str, Any]) -> Path:
    """Writes the loop state of a checkpoint after ``steps_done`` steps, then its ``COMPLETE`` marker.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> run = init_run(tmp.name, {"steps": 4}, resume=False)
        >>> path = save_checkpoint(run, 2, {"cursor": [0, 8]})
        >>> path.relative_to(tmp.name).as_posix(), sorted(os.listdir(path))
        ('checkpoints/step-000002', ['COMPLETE', 'loop_state.json'])
        >>> state = json.loads((path / "loop_state.json").read_text())
        >>> state["cursor"], state["steps_done"], state["run_id"] == run.run_id
        ([0, 8], 2, True)
        >>> tmp.cleanup()
    """
    path = run.run_dir / CHECKPOINTS / _step_name(steps_done)
    path.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(path / LOOP_STATE, {**state, "run_id": run.run_id, "steps_done": steps_done})
    write_text_atomic(path / COMPLETE, run.run_id + "\n")
    return path


def latest_checkpoint(run: RunInfo) -> Checkpoint | None:
    """The complete checkpoint with the most steps, or None when there is none.

    Raises:
      CheckpointError: a complete checkpoint that belongs to another run or cannot be read.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> run = init_run(tmp.name, {"steps": 6}, resume=False)
        >>> print(latest_checkpoint(run))
        None
        >>> _ = save_checkpoint(run, 2, {"cursor": [0, 8]}), save_checkpoint(run, 4, {"cursor": [1, 0]})
        >>> (run.run_dir / CHECKPOINTS / "step-000006").mkdir()  # killed before its COMPLETE: ignored
        >>> ckpt = latest_checkpoint(run)
        >>> ckpt.steps_done, ckpt.path.name, ckpt.state["cursor"]
        (4, 'step-000004', [1, 0])
        >>> tmp.cleanup()
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
    file = path / LOOP_STATE
    try:
        state = json.loads(file.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {file} is unreadable: {e}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {file} is unreadable: not a JSON object")
    if state.get("run_id") != run.run_id:
        raise CheckpointError(f"checkpoint {path} belongs to another run (run id {state.get('run_id')!r})")
    return Checkpoint(steps_done, path, state)


def stored_path(run_dir: str | Path, path: str) -> str:
    """How a checkpoint records ``path``, a saved state's path as the service gave it: a local file inside
    the run directory as ``$RUN_DIR/…`` (after the URI scheme, if any); another local file absolute (a
    relative one is relative to the working directory, where the service wrote it); a remote URI
    (``tinker://…``) as given.

    Examples:
        >>> stored_path("/runs/a", "/runs/a/service/states/step-000002.json")
        '$RUN_DIR/service/states/step-000002.json'
        >>> stored_path("/runs/a", "fake:///runs/a/service/x.json"), stored_path("/runs/a", "tinker://r/w")
        ('fake://$RUN_DIR/service/x.json', 'tinker://r/w')
    """
    scheme, rest = _split_scheme(path)
    if scheme and not os.path.isabs(rest):
        return path
    file = Path(rest).resolve()
    try:
        inside = file.relative_to(Path(run_dir).resolve())
    except ValueError:
        return scheme + str(file)
    return f"{scheme}{RUN_DIR_MARK}/{inside.as_posix()}"


def saved_path(run_dir: str | Path, stored: str, *, checkpoint: Path) -> str:
    """The path to give the service for ``stored``, a path a checkpoint recorded (:func:`stored_path`):
    ``$RUN_DIR`` resolved against ``run_dir``. A relative path without it comes from a checkpoint written
    before paths were recorded so; it was relative to the working directory of the run, and is used only
    when it resolves inside ``run_dir`` (never another run's state).

    Raises:
      CheckpointError: a ``$RUN_DIR`` path that leaves the run directory, or an old relative path that
        does not resolve inside it (naming ``checkpoint``, the loop-state file).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> run_dir = Path(tmp.name).resolve()  # where the run directory is now, after a move
        >>> file = Path("loop_state.json")
        >>> path = saved_path(run_dir, "$RUN_DIR/service/step-000002.json", checkpoint=file)
        >>> Path(path).relative_to(run_dir).as_posix(), saved_path(run_dir, "tinker://r/w", checkpoint=file)
        ('service/step-000002.json', 'tinker://r/w')
        >>> saved_path(run_dir, "$RUN_DIR/../other/x.json", checkpoint=file)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        adapters.training.checkpoint.CheckpointError: checkpoint loop_state.json: ... outside the run ...
        >>> tmp.cleanup()
    """
    scheme, rest = _split_scheme(stored)
    root = Path(run_dir).resolve()
    if rest.startswith(RUN_DIR_MARK + "/"):
        file = (root / rest[len(RUN_DIR_MARK) + 1 :]).resolve()
        if not file.is_relative_to(root):
            raise CheckpointError(
                f"checkpoint {checkpoint}: saved state {stored!r} lies outside the run directory"
            )
        return scheme + str(file)
    if scheme or os.path.isabs(rest):
        return stored
    file = Path(rest).resolve()
    if not file.is_relative_to(root):
        raise CheckpointError(
            f"checkpoint {checkpoint}: saved state {stored!r} is recorded relative to the directory the run "
            f"was started from, and from here it lies outside {run_dir}: resume from that directory"
        )
    return str(file)


def _split_scheme(path: str) -> tuple[str, str]:
    """``("scheme://", rest)`` of a URI, ``("", path)`` of a plain path."""
    match = _SCHEME.match(path)
    return (match.group(), path[match.end() :]) if match else ("", path)


def append_metrics(run_dir: str | Path, record: Mapping[str, Any]) -> None:
    """Appends one JSON line to ``metrics.jsonl`` and fsyncs it (one ``write`` call per line).

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> append_metrics(tmp.name, {"step": 0, "loss": 1.5})
        >>> append_metrics(tmp.name, {"step": 1, "loss": float("nan")})
        >>> print(Path(tmp.name, METRICS).read_text(), end="")
        {"loss": 1.5, "step": 0}
        {"loss": NaN, "step": 1}
        >>> tmp.cleanup()
    """
    line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
    with open(Path(run_dir) / METRICS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_metrics(
    run_dir: str | Path, *, strict: bool = False, skipped: list[str] | None = None
) -> list[dict[str, Any]]:
    """The JSON object lines of ``metrics.jsonl``; [] when absent. Blank lines are left out. A last line
    without its newline (a crash in the middle of its write) is left out with ``strict`` (a resume cuts
    it); without, it is kept when it is a whole record and left out as torn otherwise.

    Args:
      strict: any other line that is not a JSON object with an int ``step`` (not UTF-8, not JSON) raises;
        without it, such a line is left out (a reader such as the report shows what it can).
      skipped: without ``strict``, receives ``"FILE:LINE: what is wrong"`` for each line left out (a torn
        last line included).

    Raises:
      CheckpointError: with ``strict``, a line that cannot be read, naming the file and the line.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> read_metrics(tmp.name)
        []
        >>> append_metrics(tmp.name, {"step": 0, "loss": 1.5})
        >>> append_metrics(tmp.name, {"step": 1, "loss": 1.2})
        >>> with open(Path(tmp.name, METRICS), "a") as f:
        ...     _ = f.write('{"step": 2, "lo')  # killed in the middle of a line
        >>> skipped = []
        >>> read_metrics(tmp.name, skipped=skipped)
        [{'loss': 1.5, 'step': 0}, {'loss': 1.2, 'step': 1}]
        >>> print(skipped[0].partition(METRICS + ":")[2])  # doctest: +ELLIPSIS
        3: torn last line (no newline), not JSON (...); left out
        >>> tmp.cleanup()
    """
    path = Path(run_dir) / METRICS
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    last = lines.pop()  # b"" after a last newline; otherwise a torn line
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record, problem = _metrics_record(raw)
        if record is not None:
            out.append(record)
        elif strict:
            raise CheckpointError(
                f"{path}:{number}: {problem}; only a torn last line is cut on resume: "
                "repair or remove that line, then resume again"
            )
        elif skipped is not None:
            skipped.append(f"{path}:{number}: {problem}")
    if last.strip() and not strict:  # a reader keeps a whole record and says a torn one was left out
        record, problem = _metrics_record(last)
        if record is not None:
            out.append(record)
        elif skipped is not None:
            skipped.append(f"{path}:{len(lines) + 1}: torn last line (no newline), {problem}; left out")
    return out


def _metrics_record(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """A metrics line as its record, or ``(None, what is wrong with it)``."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text ({e.reason} at byte {e.start} of the line)"
    except (ValueError, RecursionError) as e:
        return None, f"not JSON ({e})"
    if not isinstance(record, dict):
        return None, f"not a JSON object ({type(record).__name__})"
    step = record.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return None, f'no step number ("step": {step!r})'
    return record, ""


def truncate_metrics(run_dir: str | Path, steps_done: int) -> list[dict[str, Any]]:
    """Keeps the lines of steps ``< steps_done`` (the first of each), rewritten atomically; returns them.

    Raises:
      CheckpointError: a line other than a torn last one cannot be read (:func:`read_metrics`,
        ``strict``); the file is left as it is.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> for step in (0, 1, 2):
        ...     append_metrics(tmp.name, {"step": step})
        >>> with open(Path(tmp.name, METRICS), "a") as f:
        ...     _ = f.write('{"step": 3, "lo')  # killed while writing step 3's line
        >>> truncate_metrics(tmp.name, 2)  # a resume from the checkpoint after 2 steps
        [{'step': 0}, {'step': 1}]
        >>> print(Path(tmp.name, METRICS).read_text(), end="")
        {"step": 0}
        {"step": 1}
        >>> tmp.cleanup()
    """
    kept: dict[int, dict[str, Any]] = {}
    for record in read_metrics(run_dir, strict=True):
        step = record["step"]
        if step < steps_done and step not in kept:
            kept[step] = record
    records = [kept[s] for s in sorted(kept)]
    path = Path(run_dir) / METRICS
    if path.exists() or records:
        write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return records
