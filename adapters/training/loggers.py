"""A training run's metrics to Weights & Biases and TensorBoard (``debate-kernel train --log wandb``,
``--log tensorboard``; the ``wandb`` and ``tensorboard`` extras).

Each step's metrics line (what ``metrics.jsonl`` holds: every number in it, under its own name, at its
step), the run's config (once) and, on evaluation steps, the evaluation table (each figure with its
standard error, :func:`adapters.report.figures.evaluation_rows`) go to each logger. A resumed run
continues the same W&B run, whose id is kept in the run directory (:data:`STATE_FILE`), and the same
TensorBoard directory (``RUN_DIR/tensorboard``) at its own steps; every step is logged once: a logger
keeps the last step it logged in :data:`STATE_FILE` and leaves out steps up to it (the steps a resume
trains again after its checkpoint keep the values first logged), and when it opens in a run that has
more lines in ``metrics.jsonl`` than it logged (a run started without it), it logs them first. A logger
that fails during the run is reported on stderr once and left out; the run goes on (``metrics.jsonl``
has every step, and a later ``--resume`` with ``--log`` sends the steps it missed).

The core is pure (:func:`log_entries`, :func:`config_table`: what to log); the shells
(:class:`WandbLogger`, :class:`TensorBoardLogger`) write it, and :class:`RunLoggers` is the training
loop's ``progress`` hook that drives them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from adapters.report.figures import evaluation_rows, format_number
from adapters.training import checkpoint as ck

__all__ = [
    "LOGGERS",
    "STATE_FILE",
    "LogEntry",
    "LoggerError",
    "RunLoggers",
    "Sinks",
    "Table",
    "TensorBoardLogger",
    "WandbLogger",
    "check_loggers",
    "config_table",
    "log_entries",
    "parse_loggers",
]

LOGGERS = ("wandb", "tensorboard")
"""The loggers ``--log`` takes."""

STATE_FILE = "loggers.json"
"""In the run directory: per logger the last step it logged (and the W&B run's id)."""

TENSORBOARD_DIR = "tensorboard"
"""The TensorBoard log directory, in the run directory."""


class LoggerError(RuntimeError):
    """A logger that cannot start (not installed, no W&B credentials, a directory it cannot write). Before
    the run (:func:`check_loggers`) it stops ``train``; during it (:class:`RunLoggers`) it is reported and
    the run goes on without that logger."""


# ------------------------------------------------------------------------------------------------
# What to log (pure)


class Table(NamedTuple):
    """A table: column names and rows of cells (text and numbers)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def markdown(self) -> str:
        """The table in Markdown (TensorBoard's text dashboard renders it).

        Examples:
            >>> print(Table(("a", "b"), ((1, 0.25),)).markdown())
            | a | b |
            |---|---|
            | 1 | 0.25 |
        """
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    return format_number(value) if isinstance(value, int | float) or value is None else str(value)


class LogEntry(NamedTuple):
    """What one step logs: its scalars (metric name → value) and tables (name → :class:`Table`)."""

    step: int
    scalars: dict[str, float]
    tables: dict[str, Table]


def _scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a metrics line (finite ints and floats, ``step`` and booleans left out)."""
    out: dict[str, float] = {}
    for name, value in record.items():
        if name == "step" or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        try:
            x = float(value)
        except OverflowError:
            continue
        if math.isfinite(x):
            out[name] = x
    return out


def evaluation_table(record: Mapping[str, Any], config: Mapping[str, Any]) -> Table | None:
    """The evaluation figures of a metrics line as a table (metric, value, standard error, n); None on a
    step without an evaluation.

    Examples:
        >>> config = {"num_agents": 3, "eval_repeats": 1}
        >>> evaluation_table({"eval/correct": 0.5, "eval/debates": 24.0}, config)
        Table(columns=('metric', 'value', 'standard error', 'n'), rows=(('eval/correct', 0.5, 0.1021, 24),))
    """
    rows = evaluation_rows(record, config)
    if not rows:
        return None
    cells = tuple((r.name, r.value, None if r.se is None else round(r.se, 4), r.n) for r in rows)
    return Table(("metric", "value", "standard error", "n"), cells)


def log_entries(
    records: Iterable[Mapping[str, Any]], *, logged_through: int, config: Mapping[str, Any]
) -> list[LogEntry]:
    """What to log of ``records`` (metrics lines, in order) when steps up to ``logged_through`` are logged
    already (-1: none): each later step once (its first line), with its scalars and, on an evaluation
    step, the table ``eval/table`` (:func:`evaluation_table`).

    Examples:
        >>> lines = [{"step": 0, "optim/loss": 1.5}, {"step": 1, "optim/loss": None, "phase": "rl"},
        ...          {"step": 1, "optim/loss": 9.0}]
        >>> log_entries(lines, logged_through=-1, config={})
        [LogEntry(step=0, scalars={'optim/loss': 1.5}, tables={}), LogEntry(step=1, scalars={}, tables={})]
        >>> log_entries(lines, logged_through=0, config={})[0].step
        1
    """
    entries: list[LogEntry] = []
    last = logged_through
    for record in records:
        step = record.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step <= last:
            continue
        last = step
        table = evaluation_table(record, config)
        entries.append(LogEntry(step, _scalars(record), {} if table is None else {"eval/table": table}))
    return entries


def config_table(config: Mapping[str, Any]) -> Table:
    """The run's config as a table of keys and values (values as JSON), sorted by key.

    Examples:
        >>> config_table({"steps": 30, "dataset": "yesno"}).rows
        (('dataset', '"yesno"'), ('steps', '30'))
    """
    return Table(("key", "value"), tuple((k, json.dumps(config[k])) for k in sorted(config)))


# ------------------------------------------------------------------------------------------------
# The shells


class Logger(Protocol):
    """A logger's shell: what :class:`RunLoggers` asks of it."""

    name: str

    def log_config(self, config: Mapping[str, Any], step: int) -> None: ...

    def log(self, entry: LogEntry) -> None: ...

    def close(self, *, failed: bool) -> None: ...


def parse_loggers(values: Sequence[str]) -> tuple[str, ...]:
    """The loggers of ``--log`` values (each one name or several, comma-separated), each once, in order.

    Raises:
      ValueError: a name that is not in :data:`LOGGERS`.

    Examples:
        >>> parse_loggers(["wandb,tensorboard", "wandb"])
        ('wandb', 'tensorboard')
    """
    names: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if name not in LOGGERS:
                raise ValueError(f"--log {value!r}: expected {' or '.join(LOGGERS)} (several: --log a,b)")
            if name not in names:
                names.append(name)
    return tuple(names)


_EXTRA_HINT = "install it with: pip install -e '.[{name}]'"


def check_loggers(names: Sequence[str]) -> None:
    """Checks, before the run starts, that each logger can: its package is installed; for W&B, an API key
    or an offline mode is set (no interactive login in the middle of a run).

    Raises:
      LoggerError: naming the logger and what to do.
    """
    for name in names:
        module = "wandb" if name == "wandb" else "tensorboard.summary.writer.event_file_writer"
        try:
            __import__(module)
        except ImportError:
            raise LoggerError(
                f"--log {name}: {name} is not installed; {_EXTRA_HINT.format(name=name)}"
            ) from None
        if name == "wandb" and not _wandb_can_start():
            raise LoggerError(
                "--log wandb: no W&B API key (WANDB_API_KEY, or `wandb login`); set WANDB_MODE=offline to "
                "log to local files and `wandb sync` them later"
            )


def _wandb_can_start() -> bool:
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    if mode in ("offline", "disabled", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        return "api.wandb.ai" in netrc.read_text(encoding="utf-8", errors="replace") or bool(
            os.environ.get("WANDB_BASE_URL")
        )
    except OSError:
        return bool(os.environ.get("WANDB_BASE_URL"))


class WandbLogger:
    """A W&B run (``wandb.init`` with the run's id, ``resume="allow"``; its files under ``RUN_DIR/wandb``,
    project ``$WANDB_PROJECT`` or ``debate-kernel``, named after the run directory). Tables are
    ``wandb.Table``."""

    name = "wandb"

    def __init__(self, run_dir: Path, run_id: str, config: Mapping[str, Any]) -> None:
        import wandb

        self._wandb = wandb
        try:
            self.run = wandb.init(
                project=os.environ.get("WANDB_PROJECT") or "debate-kernel",
                id=run_id,
                name=run_dir.resolve().name,
                dir=str(run_dir),
                config=dict(config),
                resume="allow",
            )
        except Exception as e:  # wandb raises its own errors for credentials, network and settings
            raise LoggerError(f"--log wandb: cannot start the W&B run: {e}") from None

    def log_config(self, config: Mapping[str, Any], step: int) -> None:
        """The config went with ``wandb.init``; also as a table at the first step, for the run's page."""
        table = config_table(config)
        self.run.log(
            {"config": self._wandb.Table(columns=list(table.columns), data=list(map(list, table.rows)))},
            step=step,
        )

    def log(self, entry: LogEntry) -> None:
        data: dict[str, Any] = dict(entry.scalars)
        for name, table in entry.tables.items():
            data[name] = self._wandb.Table(columns=list(table.columns), data=[list(r) for r in table.rows])
        self.run.log(data, step=entry.step)

    def close(self, *, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


class TensorBoardLogger:
    """Event files in ``RUN_DIR/tensorboard``, written with tensorboard's own writer and protocol buffers
    (no TensorFlow, no torch): scalars, and tables as Markdown in the text dashboard. Opened in a run that
    logged before, it first writes a restart marker (``SessionLog.START``) at the next step, so that
    TensorBoard drops whatever an earlier process wrote past its last recorded step."""

    name = "tensorboard"

    def __init__(self, run_dir: Path, *, restart_at: int | None) -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event_pb2 = event_pb2
        try:
            self.writer = EventFileWriter(str(run_dir / TENSORBOARD_DIR), flush_secs=30)
        except OSError as e:
            raise LoggerError(f"--log tensorboard: cannot write {run_dir / TENSORBOARD_DIR}: {e}") from None
        if restart_at is not None:
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=restart_at, session_log=start))

    def _summary(self, step: int, values: list[Any]) -> None:
        from tensorboard.compat.proto import summary_pb2

        summary = summary_pb2.Summary(value=values)
        self.writer.add_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def _text(self, tag: str, text: str) -> Any:
        from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
        from tensorboard.plugins.text import metadata

        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            string_val=[text.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(),
        )
        return summary_pb2.Summary.Value(
            tag=tag,
            metadata=metadata.create_summary_metadata(display_name=tag, description=""),
            tensor=tensor,
        )

    def log_config(self, config: Mapping[str, Any], step: int) -> None:
        self._summary(step, [self._text("config", config_table(config).markdown())])
        self.writer.flush()

    def log(self, entry: LogEntry) -> None:
        from tensorboard.compat.proto import summary_pb2

        values: list[Any] = [
            summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in entry.scalars.items()
        ]
        values += [self._text(name, table.markdown()) for name, table in entry.tables.items()]
        self._summary(entry.step, values)
        self.writer.flush()

    def close(self, *, failed: bool) -> None:
        self.writer.close()


class RunLoggers:
    """The loggers of a run, as the training loop's ``progress`` hook: opened at the first metrics line
    (the run directory exists by then), they log what :func:`log_entries` says of ``metrics.jsonl`` and
    of each new line, and record each logger's last step in :data:`STATE_FILE` after it logged.

    Args:
      names: loggers, of :data:`LOGGERS`.
      run_dir: the run directory.
      config: the run's config (logged once per logger).
      open_logger: makes a logger's shell from its name, the run directory, its saved state and the
        config (tests pass stand-ins); default :func:`_open_logger`.
    """

    def __init__(
        self,
        names: Sequence[str],
        run_dir: str | Path,
        config: Mapping[str, Any],
        *,
        open_logger: Callable[[str, Path, dict[str, Any], dict[str, Any]], Logger] | None = None,
    ) -> None:
        self.names, self.run_dir, self.config = tuple(names), Path(run_dir), dict(config)
        self.open_logger = open_logger or _open_logger
        self.loggers: list[Logger] | None = None
        self.state: dict[str, dict[str, Any]] = {}

    def _read_state(self) -> dict[str, dict[str, Any]]:
        try:
            state = json.loads((self.run_dir / STATE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise LoggerError(f"{self.run_dir / STATE_FILE}: cannot read it: {e}") from None
        if not isinstance(state, dict) or not all(isinstance(v, dict) for v in state.values()):
            raise LoggerError(f"{self.run_dir / STATE_FILE}: not an object of objects")
        return state

    def _write_state(self) -> None:
        ck.write_text_atomic(
            self.run_dir / STATE_FILE, json.dumps(self.state, indent=1, sort_keys=True) + "\n"
        )

    def _open(self, first_step: int) -> list[Logger]:
        """Opens each logger (one that cannot open is dropped: :meth:`_drop`) and logs the config once."""
        try:
            self.state = self._read_state()
        except LoggerError as e:
            self._warn(f"--log: {e}; logging to {', '.join(self.names)} is off for this run")
            return []
        loggers: list[Logger] = []
        for name in self.names:
            mine = self.state.setdefault(name, {})
            if name == "wandb" and not isinstance(mine.get("id"), str):
                mine["id"] = _new_wandb_id()
            try:
                loggers.append(self.open_logger(name, self.run_dir, mine, self.config))
            except Exception as e:
                self._drop(name, e)
            self._write_state()  # the W&B id, before anything is logged under it
        for logger in list(loggers):
            mine = self.state[logger.name]
            if not mine.get("config"):
                try:
                    logger.log_config(self.config, first_step)
                except Exception as e:
                    loggers.remove(logger)
                    self._drop(logger.name, e)
                    continue
                mine["config"] = True
        self._write_state()
        return loggers

    def _drop(self, name: str, error: BaseException) -> None:
        """Reports a logger that failed, once; the run goes on without it (``metrics.jsonl`` has every
        step, and a ``--resume`` with ``--log`` sends the steps it missed)."""
        self._warn(
            f"--log {name} stopped: {error}; the run goes on (metrics.jsonl has every step; --resume "
            f"{self.run_dir} --log {name} sends the steps it missed)"
        )

    def _warn(self, message: str) -> None:
        print(f"debate-kernel train: warning: {message}", file=sys.stderr)

    def __call__(self, step: int, total: int, record: Mapping[str, Any]) -> None:
        if self.loggers is None:
            earlier = ck.read_metrics(self.run_dir)  # this line included: append_metrics came first
            steps = [r["step"] for r in earlier] or [step]
            self.loggers = self._open(min(steps))
            records: list[Mapping[str, Any]] = list(earlier)
        else:
            records = [record]
        for logger in list(self.loggers):
            mine = self.state[logger.name]
            through = mine.get("logged_through", -1)
            try:
                for entry in log_entries(records, logged_through=through, config=self.config):
                    logger.log(entry)
                    mine["logged_through"] = entry.step
            except Exception as e:
                self.loggers.remove(logger)
                self._drop(logger.name, e)
                with contextlib.suppress(Exception):
                    logger.close(failed=True)
        if self.names:
            self._write_state()

    def close(self, *, failed: bool = False) -> None:
        """Closes every logger (idempotent)."""
        for logger in self.loggers or []:
            logger.close(failed=failed)
        self.loggers = []


def _new_wandb_id() -> str:
    """A new W&B run id: 16 lowercase letters and digits."""
    import secrets
    import string

    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(16))


def _open_logger(name: str, run_dir: Path, state: dict[str, Any], config: dict[str, Any]) -> Logger:
    """The shell of logger ``name`` in ``run_dir``, given its saved ``state`` and the run's ``config``."""
    if name == "wandb":
        return WandbLogger(run_dir, state["id"], config)
    through = state.get("logged_through")
    return TensorBoardLogger(run_dir, restart_at=None if through is None else int(through) + 1)


class Sinks:
    """Several ``progress`` hooks as one: each called in turn; ``on_eval_debate`` goes to those that take
    it; :meth:`close` closes those that close."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def __call__(self, step: int, total: int, record: Mapping[str, Any]) -> None:
        for sink in self.sinks:
            sink(step, total, record)

    def on_eval_debate(self, result: object) -> None:
        for sink in self.sinks:
            hook = getattr(sink, "on_eval_debate", None)
            if hook is not None:
                hook(result)

    def close(self, *, failed: bool = False) -> None:
        """Closes each hook that has a ``close(failed=...)``, in turn; the first error is raised once all
        were closed."""
        errors: list[Exception] = []
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is None:
                continue
            try:
                close(failed=failed)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> Sinks:
        return self

    def __exit__(self, *exc: object) -> None:
        """Closes the hooks; ``failed`` when the block raised."""
        self.close(failed=exc[0] is not None)
