"""``debate-kernel score [FILE]``: score debate transcripts and print a summary table.

Reads ``debate-transcript/1`` JSON Lines (the shipped sample debates when FILE is omitted, ``-`` for
standard input), parses every turn, replays every debate through the kernel's state machine, and
computes votes, pairwise rewards, total returns, advantages and, when tokens are present, datums.
Bad lines are reported on stderr (line, turn, reason) and counted in the summary; the other debates
are scored. Exit status 0 when the input was processed (even with bad lines), 2 when it is unusable.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import gc
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import numpy as np

import kernel
from adapters import _json, data, pipeline
from adapters._atomic import atomic_write, same_file
from adapters._gc import GC_THRESHOLDS, fewer_gc_passes
from adapters.tinker.checkpoint import transcript_files
from adapters.transcripts import (
    Debate,
    LineReader,
    TranscriptError,
)

__all__ = [
    "Progress",
    "ScoredLines",
    "add_common_arguments",
    "add_parser",
    "check_options",
    "check_outputs",
    "count_argument",
    "format_summary",
    "format_table",
    "open_lines",
    "run",
    "run_transcripts",
    "score_lines",
    "scored_in_parallel",
]

EXIT_UNUSABLE = 2


def count_argument(text: str) -> int:
    """An argparse ``type``: a non-negative integer (a negative count is a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """Input and scoring options shared by ``score`` and ``report``."""
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="transcript file (debate-transcript/1 JSON Lines; '-' reads stdin) or a training run's "
        "directory (score: its transcripts in step order; report: its training curves); default: the "
        "sample debates",
    )
    p.add_argument(
        "--policy",
        default="robust",
        choices=kernel.PARSE_POLICIES,
        help="parse policy: 'robust' (default) or 'reference' (the reference recipe's parser, quirks kept)",
    )
    p.add_argument(
        "--reward",
        default="win_rate",
        choices=kernel.PAIRWISE_MODES,
        help="pairwise reward mode (default win_rate)",
    )
    p.add_argument(
        "--estimator",
        default="default",
        metavar="SPEC",
        help="advantage estimator: a preset name (e.g. default, tinker, verl_grpo.norm), optionally with "
        "',key=value' overrides, or only key=value options (default: 'default'); 'list' shows the presets",
    )
    p.add_argument(
        "--after-end",
        default="error",
        choices=pipeline.AFTER_END_POLICIES,
        help="turns recorded after the debate ended (under the chosen policy): 'error' skips the debate "
        "with an error naming the turn (default); 'truncate' ignores and counts them",
    )
    p.add_argument(
        "--round1-votes",
        default="count",
        choices=pipeline.ROUND1_VOTE_POLICIES,
        help="round-1 votes on agents who had not spoken yet: 'count' (reference, default) or 'drop'",
    )
    p.add_argument(
        "--datum-mode",
        default="robust",
        choices=kernel.DATUM_MODES,
        help="datums of a trajectory with a bad segment: 'robust' loses only that segment (default), "
        "'reference' loses the trajectory",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``score``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "score",
        help="score debate transcripts: parse, replay, vote, reward, advantage, datums",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", "") if __doc__ else None,
    )
    add_common_arguments(p)
    p.add_argument(
        "--out", type=Path, default=None, metavar="FILE", help="write per-debate results as JSON Lines here"
    )
    p.add_argument(
        "--datums-out",
        type=Path,
        default=None,
        metavar="FILE",
        help="write datum arrays as .npz here (default with --out: <out stem>.datums.npz, when tokens exist)",
    )
    p.add_argument(
        "--limit", type=count_argument, default=None, metavar="N", help="show only the first N table rows"
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary, not the per-debate table")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line instead of text")
    p.add_argument(
        "--jobs",
        type=count_argument,
        default=1,
        metavar="N",
        help="score chunks of the input in N worker processes (0: one per CPU; default 1, this process); "
        "the output is the same for any N",
    )
    p.add_argument(
        "--chunk-size", type=count_argument, default=pipeline.DEFAULT_CHUNK_SIZE, help=argparse.SUPPRESS
    )
    p.set_defaults(func=run)
    return p


# ------------------------------------------------------------------------------------------------


def _err(msg: str) -> None:
    print(f"debate-kernel: {msg}", file=sys.stderr)


def options_from_args(args: argparse.Namespace) -> pipeline.ScoreOptions:
    """The pipeline options of the parsed CLI arguments."""
    return pipeline.ScoreOptions(
        policy=args.policy,
        reward=args.reward,
        estimator=args.estimator,
        after_end=args.after_end,
        round1_votes=args.round1_votes,
        datum_mode=args.datum_mode,
    )


def check_outputs(file: str | None, outputs: Mapping[str, Path | None]) -> str | None:
    """Why the output paths cannot be used, or None: an output that is the input file (the shipped samples
    when FILE is omitted; standard input when it is a regular file), a directory, or two outputs of the
    run naming the same file.

    Args:
      file: the FILE argument (None: the samples; ``-``: standard input).
      outputs: option name → output path (None when not written).

    Examples:
      >>> check_outputs("runs.jsonl", {"--out": Path("./runs.jsonl")})
      '--out runs.jsonl is the input file; refusing to overwrite it'
      >>> check_outputs(None, {"--out": Path("a.jsonl"), "--datums-out": Path("a.jsonl")})
      '--out and --datums-out both name a.jsonl'
      >>> check_outputs(None, {"--out": Path(".")})
      '--out . is a directory, not a file'
    """
    source = data.path(data.SAMPLE_DEBATES) if file is None else None if file == "-" else Path(file)
    sources = run_transcripts(file) or ([] if source is None else [source])
    named = [(option, path) for option, path in outputs.items() if path is not None]
    for i, (option, path) in enumerate(named):
        if any(same_file(path, s) for s in sources):
            what = "the input file" if len(sources) == 1 else "an input file (a transcript of the run)"
            return f"{option} {path} is {what}; refusing to overwrite it"
        if file == "-" and _is_stdin(path):
            return f"{option} {path} is the input file (standard input); refusing to overwrite it"
        if os.path.isdir(path):
            return f"{option} {path} is a directory, not a file"
        for other, other_path in named[:i]:
            if same_file(path, other_path):
                return f"{other} and {option} both name {path}"
    return None


def _is_stdin(path: Path) -> bool:
    """Whether standard input is the regular file ``path`` (the same device and inode).

    Examples:
      >>> _is_stdin(Path("no/such/file.jsonl"))
      False
    """
    try:
        given = os.fstat(0)
        other = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(given.st_mode) and (given.st_dev, given.st_ino) == (other.st_dev, other.st_ino)


def check_options(args: argparse.Namespace, outputs: Mapping[str, Path | None]) -> int | None:
    """``--estimator list`` (prints the presets: exit 0), a bad ``--estimator`` or an unusable output path
    (exit 2); None when the run can go on."""
    if args.estimator.strip() == "list":
        for name in sorted(kernel.ADVANTAGE_PRESETS):
            print(name)
        return 0
    try:
        pipeline.check_estimator(args.estimator)
    except (ValueError, TypeError) as e:
        _err(f"--estimator: {e}")
        return EXIT_UNUSABLE
    refused = check_outputs(args.file, outputs)
    if refused is not None:
        _err(refused)
        return EXIT_UNUSABLE
    return None


EXIT_INTERRUPTED: Final = 130
"""Exit status of a run stopped by Ctrl-C (SIGINT)."""
EXIT_TERMINATED: Final = 143
"""Exit status of a run stopped by SIGTERM."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the signal lands (see :func:`_sigterm_interrupts`): the run stops as on
    Ctrl-C, so every output it was writing is discarded, and exits :data:`EXIT_TERMINATED`."""


def _raise_terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler of :func:`_sigterm_interrupts`."""
    raise _Terminated


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`_Terminated` (the previous handler is put back after);
    outside the main thread, where no handler can be set, signals stay as they are."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stopped(e: KeyboardInterrupt, written: Sequence[Path], *, note: str = "") -> int:
    """Reports a run stopped by Ctrl-C or SIGTERM (what was written, complete, before it stopped) and
    returns its exit status."""
    what = "terminated" if isinstance(e, _Terminated) else "interrupted"
    done = " and ".join(map(str, written))
    _err(f"{what} after writing {done} (complete){note}" if written else f"{what}; nothing was written")
    return EXIT_TERMINATED if isinstance(e, _Terminated) else EXIT_INTERRUPTED


def run(args: argparse.Namespace) -> int:
    """Runs ``score``; returns the exit status (130 when interrupted, 143 on SIGTERM: what was written
    then is said)."""
    outputs = _Outputs(args.out, *_datums_target(args))
    try:
        with _sigterm_interrupts():
            return _run(args, outputs)
    except KeyboardInterrupt as e:
        return _stopped(e, outputs.written, note=outputs.datums_note())
    except _Unusable as e:
        _err(str(e))
        return EXIT_UNUSABLE


class _Unusable(Exception):
    """Ends ``score`` with exit status 2 and its message; raised out of the run's :class:`_Outputs`,
    which then discards what it was writing (a ``return`` from inside would commit the partial file)."""


def _cannot_write(path: Path, e: OSError) -> str:
    return f"cannot write {path}: {e.strerror or e}"


def _datums_target(args: argparse.Namespace) -> tuple[Path | None, bool]:
    """Where the datums go (None: nowhere), and whether that is the default path next to ``--out``."""
    if args.datums_out is not None:
        return args.datums_out, False
    if args.out is None:
        return None, False
    return args.out.with_name(args.out.stem + ".datums.npz"), True  # written only when tokens exist


class _Outputs:
    """The files of one ``score`` run, committed together: ``--out`` and its datums are each written to a
    temporary file (:func:`atomic_write`), and renamed over their targets only once both are complete,
    ``--out`` first. An error or interruption before then discards both.

    A datums file at the default path (``<out stem>.datums.npz``) belongs to the records next to it: when
    ``--out`` is committed without datums of its own (no turn carries tokens, or the datums' rename
    failed or was interrupted), an earlier file there is removed, so that it is never taken for the
    datums of the new records. A ``--datums-out`` the user named is never removed.

    Attributes:
      out, datums: the target paths (None: not written).
      default_datums: ``datums`` is the default path of ``out``.
      records: the open temporary ``--out`` file while the run writes it (None without ``--out``).
      written: the targets committed so far, in order.
      removed: the stale datums file removed, or None.
    """

    def __init__(self, out: Path | None, datums: Path | None, default_datums: bool) -> None:
        self.out, self.datums, self.default_datums = out, datums, default_datums
        self.records: IO[str] | None = None
        self.written: list[Path] = []
        self.removed: Path | None = None
        self.datums_expected = False
        self.removal_error: str | None = None
        self._stack = contextlib.ExitStack()
        self._late = contextlib.ExitStack()  # the datums: closed (committed) after --out

    def __enter__(self) -> _Outputs:
        self._stack.enter_context(self._late)
        if self.out is not None:
            self._stack.push(self._note(self.out))
            try:
                self.records = self._stack.enter_context(atomic_write(self.out))
            except OSError as e:
                self._stack.close()
                raise _Unusable(_cannot_write(self.out, e)) from None
        return self

    def _note(self, path: Path) -> Callable[..., None]:
        """An exit callback that records ``path`` as written when the writer below it committed it."""

        def note(exc_type: type[BaseException] | None, *rest: object) -> None:
            if exc_type is None:
                self.written.append(path)

        return note

    def write(self, text: str) -> None:
        """Appends to the ``--out`` temporary file (a no-op without ``--out``)."""
        self.writelines((text,))

    def writelines(self, lines: Iterable[str]) -> None:
        """Appends ``lines`` to the ``--out`` temporary file (a no-op without ``--out``); a failed write
        is an :class:`_Unusable` naming ``--out``."""
        if self.records is None or self.out is None:
            return
        try:
            self.records.writelines(lines)
        except OSError as e:
            raise _Unusable(_cannot_write(self.out, e)) from None

    def add_datums(self, spool: _NpzSpool) -> None:
        """Writes the datums to their temporary file (fsync'ed: their rename is all that is left)."""
        assert self.datums is not None
        self.datums_expected = True
        try:
            self._late.push(self._note(self.datums))
            f = self._late.enter_context(atomic_write(self.datums, "wb"))
            spool.write_npz(f)
            f.flush()
            os.fsync(f.fileno())
        except OSError as e:
            raise _Unusable(_cannot_write(self.datums, e)) from None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        """Commits (no exception) or discards both files; a failed rename is an :class:`_Unusable` that
        says what was written."""
        try:
            self._stack.__exit__(exc_type, exc, tb)
        except BaseException as e:
            self._drop_stale()
            if isinstance(e, OSError):
                raise _Unusable(self._commit_failure(e)) from None
            raise
        self._drop_stale()

    def _drop_stale(self) -> None:
        """Removes the default datums file when ``--out`` was committed without its new datums."""
        if self.out not in self.written or self.datums in self.written or not self.default_datums:
            return
        assert self.datums is not None
        try:
            if stat.S_ISREG(os.stat(self.datums).st_mode):
                os.unlink(self.datums)
                self.removed = self.datums
        except FileNotFoundError:
            pass
        except OSError as e:
            self.removal_error = f"cannot remove {self.datums}: {e.strerror or e}"

    def _commit_failure(self, e: OSError) -> str:
        """The message of a failed commit: the file whose rename failed, and what was written."""
        if self.out in self.written:  # the datums' rename failed, after --out's
            assert self.datums is not None
            return _cannot_write(self.datums, e) + self.datums_note()
        failed = self.out if self.out is not None else self.datums
        assert failed is not None
        return _cannot_write(failed, e)

    def datums_note(self) -> str:
        """What became of the datums file when ``--out`` was committed without new datums ("" when both
        were committed, or neither)."""
        if self.out not in self.written or self.datums in self.written:
            return ""
        if not self.datums_expected:
            return (
                ""
                if self.removed is None
                else f"; removed the earlier {self.removed} (no turn carries tokens)"
            )
        note = f"; {self.out} was written without its datums"
        if self.removed is not None:
            return note + f" (the earlier {self.removed}, of the records it replaced, was removed)"
        if self.removal_error is not None:
            return note + f"; {self.removal_error}: it holds an earlier run's datums"
        if self.datums is not None and self.datums.exists():
            return note + f"; {self.datums} still holds an earlier run's datums"
        return note


def _run(args: argparse.Namespace, outputs: _Outputs) -> int:
    """Runs ``score``; returns the exit status.

    The input is read and scored in chunks of ``pipeline.DEFAULT_CHUNK_SIZE`` debates
    (:func:`pipeline.score_chunks`); records go to ``--out`` as each chunk is scored (the file appears
    only once the run succeeds, together with its datums), so memory stays flat as the file grows. The
    output is the same as one whole-file :func:`pipeline.score`.
    """
    early = check_options(args, {"--out": args.out, "--datums-out": outputs.datums})
    if early is not None:
        return early
    with contextlib.ExitStack() as stack:
        stack.enter_context(fewer_gc_passes())
        try:
            source, lines = open_lines(args.file, stack)
        except OSError as e:
            _err(f"cannot read {args.file}: {e.strerror or e}{_directory_hint(args.file)}")
            return EXIT_UNUSABLE
        progress = Progress(sys.stderr, lines)
        stack.callback(progress.close)  # the line is cleared before anything else is printed
        options = options_from_args(args)
        spool = _NpzSpool() if outputs.datums is not None else None
        if spool is not None:
            stack.callback(spool.close)
        acc = pipeline.ScoreAccumulator(options, datum_sink=None if spool is None else spool.add)
        keep_rows = 0 if args.quiet or args.json else args.limit
        with outputs:  # commits --out and the datums together, on success only
            table = _score_into(args, lines, options, acc, progress, outputs, keep_rows)
            errors = acc.sorted_errors()
            for rec in pipeline.skipped_records(errors):
                outputs.write(_record_line(rec))
            if spool is not None and acc.datums() is not None:
                outputs.add_datums(spool)
    _print_results(args, outputs, source, acc, table, errors)
    return 0


def _score_into(
    args: argparse.Namespace,
    lines: Iterable[str | bytes],
    options: pipeline.ScoreOptions,
    acc: pipeline.ScoreAccumulator,
    progress: Progress,
    outputs: _Outputs,
    keep_rows: int | None,
) -> list[list[str]]:
    """Scores every line into ``acc``, writing the records of scored debates to ``outputs``; returns the
    first ``keep_rows`` table rows (all when None). An ``OSError`` is an :class:`_Unusable` naming the
    file (an input it names, else ``--out``)."""
    table: list[list[str]] = []
    records = outputs.records is not None
    try:
        chunk_size = max(args.chunk_size, 1)
        jobs = (os.cpu_count() or 1) if args.jobs == 0 else args.jobs
        if jobs > 1 and not pipeline.batch_wide(options):  # batch-wide: one chunk, in this process
            for part in scored_in_parallel(
                lines, options, jobs=jobs, chunk_lines=chunk_size, records=records, table_rows=keep_rows
            ):
                acc.num_lines += part.num_lines
                acc.num_blank += part.num_blank
                acc.add_figures(part.figures)
                progress.update(acc.num_lines)
                if keep_rows is None or len(table) < keep_rows:
                    table.extend(part.table[: None if keep_rows is None else keep_rows - len(table)])
                outputs.write(part.records)
        else:
            for chunk in pipeline.score_chunks(lines, options=options, chunk_size=chunk_size):
                acc.add(chunk)
                progress.update(acc.num_lines)
                if keep_rows is None or len(table) < keep_rows:
                    table.extend(_table_rows(chunk, None if keep_rows is None else keep_rows - len(table)))
                if records:
                    scored = pipeline.debate_records(dataclasses.replace(chunk, errors=()))
                    outputs.writelines(map(_record_line, scored))
                    del scored
                del chunk  # neither the chunk nor its records stay alive while the next one is read
    except OSError as e:  # raised on through the outputs, which discard a partial --out
        name = getattr(e, "filename", None)
        if outputs.out is None or name in _input_names(args.file):
            raise _Unusable(f"cannot read {name or args.file}: {e.strerror or e}") from None
        raise _Unusable(_cannot_write(outputs.out, e)) from None
    return table


def _print_results(
    args: argparse.Namespace,
    outputs: _Outputs,
    source: str,
    acc: pipeline.ScoreAccumulator,
    table: list[list[str]],
    errors: Sequence[TranscriptError],
) -> None:
    """The bad lines (stderr), then the table and summary, then what was written (stdout)."""
    for error in errors:
        _err(f"{source}: {error}")
    out = sys.stdout
    summ = acc.summary()
    summ["source"] = source
    if args.json:
        print(_json.dumps(summ, sort_keys=True), file=out)
    else:
        if not args.quiet:
            print(_render_table(table, acc.scored), file=out)
            print(file=out)
        print(format_summary(summ), file=out)
    if args.out is not None and not args.json:
        print(f"wrote {acc.scored + len(errors)} records to {args.out}", file=out)
    datums = acc.datums()
    if datums is None and args.datums_out is not None:
        _err("no turn carries tokens: no datums to write")
    if datums is not None and outputs.datums is not None and not args.json:
        print(f"wrote {datums.stats['datums']} datums to {outputs.datums}", file=out)
    if outputs.removed is not None and not args.quiet:
        stale = f"it held the datums of an earlier {args.out}"
        _err(f"removed {outputs.removed}: {stale}, and no turn of this input carries tokens")
    if outputs.removal_error is not None:
        _err(f"{outputs.removal_error}: it holds an earlier run's datums, not those of {args.out}")


class Progress:
    """A status line on stderr, rewritten as chunks are scored, when stderr is a terminal (nothing is
    written otherwise): lines read, the share of the file read when it is a regular file, and lines
    per second; at most every ``every`` seconds. :meth:`close` clears it, however the run ends."""

    def __init__(self, stream: IO[str], source: object, *, clock: Any = None, every: float = 0.5) -> None:
        self.stream, self.clock, self.every = stream, clock or time.monotonic, every
        isatty = getattr(stream, "isatty", None)
        self.on = bool(isatty is not None and isatty())
        self.file: Any = None
        self.total = 0
        if self.on and hasattr(source, "tell") and hasattr(source, "fileno"):
            try:
                info = os.fstat(source.fileno())
            except (OSError, ValueError):
                info = None
            if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > 0:
                self.file, self.total = source, info.st_size
        self.start = self.last = self.clock()
        self.lines = 0
        self.shown = False

    def update(self, lines: int) -> None:
        if not self.on or lines == self.lines:
            return
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last, self.lines = now, lines
        text = f"score: {lines:,} lines"
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):
                text += f", {min(self.file.tell() / self.total, 1.0):.0%} of {self.total / 2**20:,.0f} MB"
        text += f", {lines / max(now - self.start, 1e-9):,.0f} lines/s"
        self.stream.write("\r" + text + "\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


@dataclasses.dataclass(frozen=True)
class ScoredLines:
    """One chunk of input lines scored (in this process or a worker): what ``run`` writes and adds up.

    Attributes:
      num_lines, num_blank: the chunk's lines and blank lines.
      ids: (id, line) of every debate read (the parent checks them against earlier chunks' ids).
      figures: the chunk's :class:`pipeline.ChunkFigures` (errors with their file line numbers).
      records: the ``--out`` lines of its scored debates ("" when not asked).
      table: its first table rows (as many as asked).
    """

    num_lines: int
    num_blank: int
    ids: tuple[tuple[str, int], ...]
    figures: pipeline.ChunkFigures
    records: str
    table: list[list[str]]


def score_lines(
    lines: Sequence[str | bytes],
    first_line: int,
    options: pipeline.ScoreOptions,
    *,
    records: bool,
    table_rows: int | None,
    seen: dict[str, int] | None = None,
) -> ScoredLines:
    """Reads and scores ``lines`` (file lines ``first_line`` …); ``seen``: the ids of earlier lines
    (id → first line), added to; None: only this chunk's ids count for duplicates.

    Examples:
      >>> line = '{"id": "a", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
      >>> part = score_lines([line, "", line], 7, pipeline.ScoreOptions(), records=True, table_rows=0)
      >>> part.num_lines, part.num_blank, part.ids, [(e.line, e.reason) for e in part.figures.errors]
      (3, 1, (('a', 7),), [(9, 'duplicate_id')])
      >>> part.records.count("\\n"), score_lines([line], 1, pipeline.ScoreOptions(), records=False,
      ...     table_rows=None, seen={"a": 2}).figures.errors[0].message
      (1, "id 'a' was already used on line 2")
    """
    reader = LineReader(first_line=first_line, seen=seen)
    debates: list[Debate] = []
    errors: list[TranscriptError] = []
    for raw in lines:
        got = reader.feed(raw)
        if isinstance(got, TranscriptError):
            errors.append(got)
        elif got is not None:
            debates.append(got)
    result = pipeline.score(debates, options=options, read_errors=errors, checked=True)
    text = ""
    if records:
        text = "".join(map(_record_line, pipeline.debate_records(dataclasses.replace(result, errors=()))))
    table = [] if table_rows == 0 else _table_rows(result, table_rows)
    ids = tuple((d.id, d.line) for d in debates)
    return ScoredLines(len(lines), reader.num_blank, ids, pipeline.chunk_figures(result), text, table)


def scored_in_parallel(
    lines: Iterable[str | bytes],
    options: pipeline.ScoreOptions,
    *,
    jobs: int,
    chunk_lines: int,
    records: bool,
    table_rows: int | None,
    executor: concurrent.futures.Executor | None = None,
) -> Iterator[ScoredLines]:
    """Chunks of ``chunk_lines`` input lines scored by ``jobs`` worker processes, yielded in input order.

    Every figure of a debate depends on that debate alone, except whether its id was used before: a
    worker sees only its chunk's ids, so a chunk holding an id from an earlier chunk is read again here
    with every id seen so far (rare: the result is the same as one reader over the whole file). At most
    ``2 × jobs`` chunks are in flight, so memory stays bounded. The workers are started with ``spawn``
    and shut down on return, error or interruption (pending chunks cancelled). ``executor``: use this
    one instead (left running; tests pass a thread pool).
    """
    pool = executor or concurrent.futures.ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init
    )
    seen: dict[str, int] = {}
    pending: collections.deque[tuple[list[str | bytes], int, concurrent.futures.Future[ScoredLines]]]
    pending = collections.deque()
    source = iter(lines)
    first = 1
    work = functools.partial(score_lines, options=options, records=records, table_rows=table_rows)
    try:
        while True:
            chunk = list(itertools.islice(source, chunk_lines))
            if chunk:
                pending.append((chunk, first, pool.submit(work, chunk, first)))
                first += len(chunk)
            while pending and (not chunk or len(pending) >= 2 * jobs):
                part_lines, part_first, future = pending.popleft()
                part = future.result()
                if any(ident in seen for ident, _ in part.ids):
                    part = work(part_lines, part_first, seen=seen)
                else:
                    for ident, line in part.ids:
                        seen[ident] = line
                yield part
            if not chunk:
                return
    finally:
        for _, _, future in pending:
            future.cancel()
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)


def _worker_init() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops us


class _NpzSpool:
    """Datum arrays of each chunk appended to one temporary file per array, then written as one ``.npz``
    (each member an ``.npy`` whose header carries the total length): memory stays one chunk's."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}  # anonymous: removed when closed or collected
        self._dtypes: dict[str, np.dtype[Any]] = {}
        self._lengths: dict[str, int] = {}

    def add(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> None:
        for name, x in arrays.items():
            if name not in self._files:
                self._files[name] = tempfile.TemporaryFile()  # closed by close()
                self._dtypes[name] = x.dtype
                self._lengths[name] = 0
            self._files[name].write(np.ascontiguousarray(x, dtype=self._dtypes[name]).tobytes())
            self._lengths[name] += int(x.shape[0])

    def write_npz(self, f: IO[bytes]) -> None:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, tmp in self._files.items():
                header = {
                    "descr": np.lib.format.dtype_to_descr(self._dtypes[name]),
                    "fortran_order": False,
                    "shape": (self._lengths[name],),
                }
                with z.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array_header_2_0(member, header)  # type: ignore[no-untyped-call]
                    tmp.seek(0)
                    shutil.copyfileobj(tmp, member, 1 << 20)

    def close(self) -> None:
        for tmp in self._files.values():
            tmp.close()


_PLAIN_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)
"""The encoder ``json.dumps(rec, ensure_ascii=False, allow_nan=False)`` builds on every call, built once,
without the cycle check (a set insertion and removal per dict and list): a record is a fresh tree."""


def _record_line(rec: dict[str, Any]) -> str:
    """One ``--out`` line: ``_json.dumps`` of the record, without its walk over every value when the
    record holds only plain finite JSON values (then the two texts are the same)."""
    try:
        return _PLAIN_ENCODER.encode(rec) + "\n"
    except (TypeError, ValueError):  # a numpy scalar or a non-finite float: the strict encoder's walk
        return _json.dumps(rec, ensure_ascii=False) + "\n"


def run_transcripts(file: str | None) -> list[Path]:
    """The transcript files of the training run in directory ``file``, in step order (a run writes
    ``transcripts/step-NNNNNN.jsonl`` per step); [] when ``file`` is not such a directory.

    Examples:
      >>> run_transcripts("no/such/run")
      []
    """
    return [] if file is None or file == "-" else transcript_files(file)


def _input_names(file: str | None) -> set[str]:
    """The paths ``score`` reads for FILE, as an ``OSError`` names them: FILE, or a run's transcripts."""
    return {str(p) for p in run_transcripts(file)} or {str(file)}


def _directory_hint(file: str | None) -> str:
    """What to pass instead when FILE is a directory that holds no run's transcripts (else "").

    Examples:
      >>> _directory_hint("no/such/file.jsonl")
      ''
    """
    if file is None or file == "-" or not os.path.isdir(file):
        return ""
    return (
        "; FILE must be a transcript file (debate-transcript/1 JSON Lines) or the directory of a "
        "training run (with transcripts/step-*.jsonl)"
    )


def open_lines(file: str | None, stack: contextlib.ExitStack) -> tuple[str, Iterable[str | bytes]]:
    """The source name and its lines, read lazily: the samples when FILE is omitted, ``-`` stdin, the
    directory of a training run its transcript files one after the other in step order (line numbers
    then count across them, as for their concatenation on stdin)."""
    if file is None:
        lines = data.read_text(data.SAMPLE_DEBATES).split("\n")
        if not lines[-1]:
            lines.pop()  # the text ends with a newline: no line after it
        return data.SAMPLE_DEBATES, lines
    if file == "-":
        return "<stdin>", sys.stdin.buffer
    name = file.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    steps = run_transcripts(file)
    if steps:
        chained = _lines_of(steps)
        stack.callback(chained.close)  # closes the file being read if the run stops early
        return str(Path(name, "transcripts", "step-*.jsonl")), chained
    return name, stack.enter_context(open(file, "rb"))  # closed by the stack


def _lines_of(paths: Sequence[Path]) -> Generator[bytes, None, None]:
    """The lines of each file in turn (a last line without a newline stays a line of its own)."""
    for path in paths:
        with open(path, "rb") as f:
            yield from f


# ------------------------------------------------------------------------------------------------
# Text output


def _nums(xs: Any, signed: bool = False) -> str:
    fmt = "{:+.2f}" if signed else "{:.2f}"
    return " ".join(fmt.format(float(x)).replace("+0.00", " 0.00").replace("-0.00", " 0.00") for x in xs)


def format_table(result: pipeline.BatchResult, *, limit: int | None = None) -> str:
    """The per-debate table: id, agents, rounds, end, parse failures, consensus, votes, malformed,
    rewards per agent, advantages per agent."""
    return _render_table(_table_rows(result, limit), len(result.replayed))


def _table_rows(result: pipeline.BatchResult, limit: int | None) -> list[list[str]]:
    num = result.numeric
    rows: list[list[str]] = []
    shown = result.replayed if limit is None else result.replayed[: max(limit, 0)]
    for p, r in enumerate(shown):
        lo, hi = int(num.offsets_P1[p]), int(num.offsets_P1[p + 1])
        ident = r.debate.id if len(r.debate.id) <= 32 else r.debate.id[:31] + "…"
        rows.append(
            [
                ident,
                str(r.debate.num_agents),
                str(r.num_rounds),
                r.end,
                str(len(r.parse_failures)),
                "yes" if r.state.consensus else "no",
                str(int(num.pairwise.total_votes_P[p])),
                str(int(num.pairwise.malformed_P[p])),
                _nums(num.pairwise.rewards_PG[lo:hi]),
                _nums(num.advantages_PG[lo:hi], signed=True),
            ]
        )
    return rows


def _render_table(rows: list[list[str]], total: int) -> str:
    header = ["id", "agents", "rounds", "end", "fail", "cons", "votes", "bad", "rewards", "advantages"]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]
    right = {1, 2, 4, 6, 7}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [line(header), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in rows]
    if len(rows) < total:
        lines.append(f"… {total - len(rows)} more debates (use --limit or --out)")
    return "\n".join(lines)


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def _fig(value: float | None, spec: str) -> str:
    """A summary figure; ``n/a`` for a non-finite one (None in :func:`pipeline.summary`)."""
    return "n/a" if value is None else format(value, spec)


def _stats(s: dict[str, float | None], signed: bool = False) -> str:
    sign = "+" if signed else ""
    return (
        f"mean {_fig(s['mean'], sign + '.3f')}, std {_fig(s['std'], '.3f')}, "
        f"range [{_fig(s['min'], sign + '.3f')}, {_fig(s['max'], sign + '.3f')}]"
    )


def format_summary(s: dict[str, Any]) -> str:
    """The batch summary (of :func:`pipeline.summary`) as readable text; a non-finite figure reads n/a."""
    scored, skipped = s["debates_scored"], s["debates_skipped"]
    lines = [
        f"source: {s.get('source', '?')} ({s['lines']} lines, {s['blank_lines']} blank)",
        f"debates: {scored} scored, {skipped} skipped"
        + (f" ({_counts(s['skipped_by_reason'])})" if skipped else ""),
        f"ends: {_counts(s['ends'])}; consensus rate {100 * s['consensus_rate']:.1f}%",
        f"turns: {s['turns_scored']} scored"
        + (f", {s['turns_ignored_after_end']} ignored after the end" if s["turns_ignored_after_end"] else "")
        + f"; parse failures {s['parse_failures']} ({100 * s['parse_failure_rate']:.1f}%)"
        + (f": {_counts(s['parse_failures_by_reason'])}" if s["parse_failures"] else ""),
        f"votes: {s['votes_total']} valid, {s['votes_malformed']} malformed"
        + (f", {s['votes_round1_dropped']} dropped (round 1)" if s["votes_round1_dropped"] else "")
        + f"; {s['votes_self_dropped']} self-comparisons dropped by the parser"
        + f", {s['comparison_lines_unreadable']} unreadable comparison lines",
        f"rewards: {_stats(s['rewards'])}",
        f"returns: {_stats(s['returns'])}",
        f"advantages: {_stats(s['advantages'], signed=True)}",
    ]
    if "datums" in s:
        d = s["datums"]
        lines.append(
            f"datums: {d['datums']} ({d['tokens']:,} tokens, {d['action_tokens']:,} action tokens); "
            f"mean sampler logprob {_fig(d['mean_logprob'], '.3f')}, "
            f"entropy estimate {_fig(d['entropy'], '.3f')}"
        )
    lines.append(f"policy {s['policy']}, reward {s['reward']}, estimator {s['estimator']}")
    return "\n".join(lines)
