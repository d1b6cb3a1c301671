"""``debate-kernel score [FILE]``: score debate transcripts and print a summary table.

Reads ``debate-transcript/1`` JSON Lines (the shipped sample debates when FILE is omitted, ``-`` for
standard input), parses every turn, replays every debate through the kernel's state machine, and
computes votes, pairwise rewards, total returns, advantages and, when tokens are present, datums.
Bad lines are reported on stderr (line, turn, reason) and counted in the summary; the other debates
are scored. Exit status 0 when the input was processed (even with bad lines), 2 when it is unusable: a
file whose first record is not a debate (the results of ``score --out``, a run's ``metrics.jsonl``, a
question set, any other JSON Lines) is refused in one line that says what it looks like and what to pass.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

import kernel
from adapters import _json, pipeline
from adapters._atomic import atomic_write
from adapters._gc import CHUNK_GC_THRESHOLDS, fewer_gc_passes
from adapters.cli._common import (
    EXIT_UNUSABLE,
    Progress,
    add_common_arguments,
    check_options,
    count_argument,
    directory_hint,
    err,
    input_names,
    open_lines,
    refusal,
    run_transcripts,
    sigterm_interrupts,
    sniff,
    stopped,
)
from adapters.cli._score_jobs import ScoredLines, record_line, score_lines, scored_in_parallel
from adapters.cli._score_text import format_summary, format_table, render_table, table_rows
from adapters.transcripts import (
    LineTooLarge,
    TranscriptError,
)

__all__ = [
    "ScoredLines",
    "add_parser",
    "format_summary",
    "format_table",
    "run",
    "score_lines",
    "scored_in_parallel",
]


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
    p.add_argument(
        "--quiet",
        action="store_true",
        help="print only the summary: no per-debate table, no progress bar (drawn only on a terminal)",
    )
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
        "--judge-rewards",
        default="off",
        choices=("off", *kernel.JUDGE_PRESETS),
        help="score every turn as an answer and as a judge (the datums carry each turn's combined "
        "advantage): 'default' (ours) or 'reference_v2' (the debate recipe's V2); default off",
    )
    p.add_argument(
        "--chunk-size", type=count_argument, default=pipeline.DEFAULT_CHUNK_SIZE, help=argparse.SUPPRESS
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Runs ``score``; returns the exit status (130 when interrupted, 143 on SIGTERM: what was written
    then is said)."""
    outputs = _Outputs(args.out, *_datums_target(args))
    try:
        with sigterm_interrupts():
            return _run(args, outputs)
    except KeyboardInterrupt as e:
        return stopped(e, outputs.written, note=outputs.datums_note())
    except _Unusable as e:
        err(str(e))
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
    options = check_options(args, {"--out": args.out, "--datums-out": outputs.datums})
    if isinstance(options, int):
        return options
    if args.judge_rewards != "off":
        try:
            judge = kernel.JUDGE_PRESETS[args.judge_rewards]
            options = dataclasses.replace(options, scoring=dataclasses.replace(options.scoring, judge=judge))
        except ValueError as e:  # an estimator the judge rewards cannot use (RAE)
            err(f"--judge-rewards: {e}")
            return EXIT_UNUSABLE
    with contextlib.ExitStack() as stack:
        stack.enter_context(fewer_gc_passes(CHUNK_GC_THRESHOLDS))
        try:
            source, lines = open_lines(args.file, stack)
            if args.file is not None and not run_transcripts(args.file):
                sniffed = sniff(lines)
                if sniffed.kind != "transcripts":  # results, a run's metrics, questions, ...
                    err(refusal(sniffed, args.file, "score"))
                    return EXIT_UNUSABLE
                lines = sniffed.lines
        except OSError as e:
            err(f"cannot read {args.file}: {e.strerror or e}{directory_hint(args.file)}")
            return EXIT_UNUSABLE
        progress = Progress(sys.stderr, lines, quiet=args.quiet)
        stack.callback(progress.close)  # the line is cleared before anything else is printed
        spool = _NpzSpool() if outputs.datums is not None else None
        if spool is not None:
            stack.callback(spool.close)
        sink = None if spool is None else spool.add
        acc = pipeline.ScoreAccumulator(options, datum_sink=sink, keep_values=False)  # flat memory
        keep_rows = 0 if args.quiet or args.json else args.limit
        with outputs:  # commits --out and the datums together, on success only
            table = _score_into(args, lines, options, acc, progress, outputs, keep_rows)
            errors = acc.sorted_errors()
            for rec in pipeline.skipped_records(errors):
                outputs.write(record_line(rec))
            if spool is not None and acc.datums() is not None:
                outputs.add_datums(spool)
    _print_results(args, outputs, source, acc, table, errors)
    return 0


def _score_into(
    args: argparse.Namespace,
    lines: Iterable[str | bytes | LineTooLarge],
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
                    table.extend(table_rows(chunk, None if keep_rows is None else keep_rows - len(table)))
                if records:
                    scored = pipeline.debate_records(dataclasses.replace(chunk, errors=()))
                    outputs.writelines(map(record_line, scored))
                    del scored
                del chunk  # neither the chunk nor its records stay alive while the next one is read
    except OSError as e:  # raised on through the outputs, which discard a partial --out
        name = getattr(e, "filename", None)
        if outputs.out is None or name in input_names(args.file):
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
        err(f"{source}: {error}")
    out = sys.stdout
    summ = acc.summary()
    summ["source"] = source
    if args.json:
        print(_json.dumps(summ, sort_keys=True), file=out)
    else:
        if not args.quiet:
            print(render_table(table, acc.scored), file=out)
            print(file=out)
        print(format_summary(summ), file=out)
    if args.out is not None and not args.json:
        print(f"wrote {acc.scored + len(errors)} records to {args.out}", file=out)
    datums = acc.datums()
    if datums is None and args.datums_out is not None:
        err("no turn carries tokens: no datums to write")
    if datums is not None and outputs.datums is not None and not args.json:
        print(f"wrote {datums.stats['datums']} datums to {outputs.datums}", file=out)
    if outputs.removed is not None and not args.quiet:
        stale = f"it held the datums of an earlier {args.out}"
        err(f"removed {outputs.removed}: {stale}, and no turn of this input carries tokens")
    if outputs.removal_error is not None:
        err(f"{outputs.removal_error}: it holds an earlier run's datums, not those of {args.out}")


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
