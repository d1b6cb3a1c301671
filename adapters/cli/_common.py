"""What the ``score`` and ``report`` commands share: the scoring options as arguments, errors on stderr and
exit statuses, SIGTERM stopping a run as Ctrl-C does, checks of the output paths, reading FILE (a
transcript file, standard input, a training run's directory or the shipped samples), telling what a file
holds by its first record (:func:`sniff`), and the progress display (:class:`Progress`, from
:mod:`adapters.cli._progress`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import sys
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

import kernel
from adapters import data, pipeline
from adapters._atomic import same_file
from adapters.cli._progress import Progress as Progress  # score and report draw it
from adapters.training.checkpoint import transcript_files
from adapters.transcripts import LineTooLarge, bounded_lines

__all__: list[str] = []

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


SCORING_DEFAULTS: Final = {
    "policy": "robust",
    "reward": "win_rate",
    "estimator": "default",
    "after_end": "error",
    "round1_votes": "count",
    "datum_mode": "robust",
}
"""The scoring options' defaults, by their ``args`` attribute (``--after-end`` is ``after_end``)."""


def add_common_arguments(p: argparse.ArgumentParser, *, file_help: str | None = None) -> None:
    """Input and scoring options shared by ``score`` and ``report`` (``file_help``: FILE's help)."""
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help=file_help
        or "transcript file (debate-transcript/1 JSON Lines; '-' reads stdin) or a training run's "
        "directory (its transcripts in step order); default: the sample debates",
    )
    d = SCORING_DEFAULTS
    p.add_argument(
        "--policy",
        default=d["policy"],
        choices=kernel.PARSE_POLICIES,
        help="parse policy: 'robust' (default) or 'reference' (the reference recipe's parser, quirks kept)",
    )
    p.add_argument(
        "--reward",
        default=d["reward"],
        choices=kernel.PAIRWISE_MODES,
        help="pairwise reward mode (default win_rate)",
    )
    p.add_argument(
        "--estimator",
        default=d["estimator"],
        metavar="SPEC",
        help="advantage estimator: a preset name (e.g. default, tinker, verl_grpo.norm), optionally with "
        "',key=value' overrides, or only key=value options (default: 'default'); 'list' shows the presets",
    )
    p.add_argument(
        "--after-end",
        default=d["after_end"],
        choices=pipeline.AFTER_END_POLICIES,
        help="turns recorded after the debate ended (under the chosen policy): 'error' skips the debate "
        "with an error naming the turn (default); 'truncate' ignores and counts them",
    )
    p.add_argument(
        "--round1-votes",
        default=d["round1_votes"],
        choices=kernel.ROUND1_VOTE_POLICIES,
        help="round-1 votes on agents who had not spoken yet: 'count' (reference, default) or 'drop'",
    )
    p.add_argument(
        "--datum-mode",
        default=d["datum_mode"],
        choices=kernel.DATUM_MODES,
        help="datums of a trajectory with a bad segment: 'robust' loses only that segment (default), "
        "'reference' loses the trajectory",
    )


def err(msg: str) -> None:
    print(f"debate-kernel: {msg}", file=sys.stderr)


def options_from_args(args: argparse.Namespace) -> pipeline.ScoreOptions:
    """The pipeline options of the parsed CLI arguments: the one place where ``--estimator`` is read.

    Raises:
      ValueError, TypeError: a bad ``--estimator`` (:func:`kernel.read_estimator_spec`).
    """
    _, estimator = kernel.read_estimator_spec(args.estimator)
    scoring = kernel.ScoringOptions(
        parse_policy=args.policy,
        reward_mode=args.reward,
        estimator=estimator,
        round1_votes=args.round1_votes,
        datum_mode=args.datum_mode,
    )
    return pipeline.ScoreOptions(scoring, after_end=args.after_end)


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


def check_options(
    args: argparse.Namespace, outputs: Mapping[str, Path | None]
) -> int | pipeline.ScoreOptions:
    """The run's options (:func:`options_from_args`) when it can go on; else its exit status:
    ``--estimator list`` (prints the presets: 0), a bad ``--estimator`` or an unusable output path (2)."""
    if args.estimator.strip() == "list":
        for name in sorted([*kernel.ADVANTAGE_PRESETS, kernel.RAE_SPEC_NAME]):
            print(name)
        return 0
    try:
        options = options_from_args(args)
    except (ValueError, TypeError) as e:
        err(f"--estimator: {e}")
        return EXIT_UNUSABLE
    refused = check_outputs(args.file, outputs)
    if refused is not None:
        err(refused)
        return EXIT_UNUSABLE
    return options


EXIT_INTERRUPTED: Final = 130
"""Exit status of a run stopped by Ctrl-C (SIGINT)."""
EXIT_TERMINATED: Final = 143
"""Exit status of a run stopped by SIGTERM."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the signal lands (see :func:`sigterm_interrupts`): the run stops as on
    Ctrl-C, so every output it was writing is discarded, and exits :data:`EXIT_TERMINATED`."""


def _raise_terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler of :func:`sigterm_interrupts`."""
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (the previous handler is put back after);
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


def stopped(e: KeyboardInterrupt, written: Sequence[Path], *, note: str = "") -> int:
    """Reports a run stopped by Ctrl-C or SIGTERM (what was written, complete, before it stopped) and
    returns its exit status."""
    what = "terminated" if isinstance(e, Terminated) else "interrupted"
    done = " and ".join(map(str, written))
    err(f"{what} after writing {done} (complete){note}" if written else f"{what}; nothing was written")
    return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED


def run_transcripts(file: str | None) -> list[Path]:
    """The transcript files of the training run in directory ``file``, in step order (a run writes
    ``transcripts/step-NNNNNN.jsonl`` per step); [] when ``file`` is not such a directory.

    Examples:
      >>> run_transcripts("no/such/run")
      []
    """
    return [] if file is None or file == "-" else transcript_files(file)


def input_names(file: str | None) -> set[str]:
    """The paths ``score`` reads for FILE, as an ``OSError`` names them: FILE, or a run's transcripts."""
    return {str(p) for p in run_transcripts(file)} or {str(file)}


def directory_hint(file: str | None) -> str:
    """What to pass instead when FILE is a directory that holds no run's transcripts (else "").

    Examples:
      >>> directory_hint("no/such/file.jsonl")
      ''
    """
    if file is None or file == "-" or not os.path.isdir(file):
        return ""
    return (
        "; FILE must be a transcript file (debate-transcript/1 JSON Lines) or the directory of a "
        "training run (with transcripts/step-*.jsonl)"
    )


def open_lines(
    file: str | None, stack: contextlib.ExitStack
) -> tuple[str, Iterable[str | bytes | LineTooLarge]]:
    """The source name and its lines, read lazily: the samples when FILE is omitted, ``-`` stdin, the
    directory of a training run its transcript files one after the other in step order (line numbers
    then count across them, as for their concatenation on stdin)."""
    if file is None:
        lines = data.read_text(data.SAMPLE_DEBATES).split("\n")
        if not lines[-1]:
            lines.pop()  # the text ends with a newline: no line after it
        return data.SAMPLE_DEBATES, lines
    if file == "-":
        return "<stdin>", bounded_lines(sys.stdin.buffer)
    name = file.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    steps = run_transcripts(file)
    if steps:
        chained = _lines_of(steps)
        stack.callback(chained.close)  # closes the file being read if the run stops early
        return str(Path(name, "transcripts", "step-*.jsonl")), chained
    return name, _FileLines(stack.enter_context(open(file, "rb")))  # closed by the stack


class _FileLines:
    """The lines of an open file (:func:`bounded_lines`), with the file's ``tell`` and ``fileno`` for
    the progress display."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file, self.lines = file, bounded_lines(file)

    def __iter__(self) -> Iterator[bytes | LineTooLarge]:
        return self.lines

    def tell(self) -> int:
        return self.file.tell()

    def fileno(self) -> int:
        return self.file.fileno()


def _lines_of(paths: Sequence[Path]) -> Generator[bytes | LineTooLarge, None, None]:
    """The lines of each file in turn (a last line without a newline stays a line of its own)."""
    for path in paths:
        with open(path, "rb") as f:
            yield from bounded_lines(f)


# ------------------------------------------------------------------------------------------------
# What FILE is: its first record tells


INPUT_KINDS: Final = ("transcripts", "results", "metrics", "questions", "other")
"""What a JSON Lines file can be, by its first record (:func:`record_kind`)."""

TRANSCRIPTS_ARE = "transcripts (debate-transcript/1 JSON Lines: id, question, num_agents, turns)"


def record_kind(rec: Any) -> str:
    """What a decoded JSON Lines record is: ``"transcripts"`` (a debate: ``turns``, ``num_agents`` or a
    ``format``), ``"results"`` (a line of ``score --out``: ``status`` scored or skipped), ``"metrics"``
    (a line of a run's ``metrics.jsonl``: ``step`` and figures), ``"questions"`` (a question set, what
    ``train --dataset`` reads: ``question`` alone), else ``"other"``.

    Examples:
      >>> record_kind({"id": "a", "question": "q", "num_agents": 2, "turns": []})
      'transcripts'
      >>> record_kind({"id": "a", "status": "scored", "advantages": [0.5, -0.5], "turns": []})
      'results'
      >>> record_kind({"step": 0, "phase": "rl"}), record_kind({"question": "q", "answer": "a"})
      ('metrics', 'questions')
      >>> record_kind([1, 2]), record_kind({"text": "hello"})
      ('other', 'other')
    """
    if not isinstance(rec, dict):
        return "other"
    if rec.get("status") in ("scored", "skipped") and "question" not in rec:
        return "results"
    if "format" in rec or "turns" in rec or "num_agents" in rec:
        return "transcripts"
    if "step" in rec and ("phase" in rec or any("/" in str(k) for k in rec)):
        return "metrics"
    if "question" in rec:
        return "questions"
    return "other"


class Sniffed(NamedTuple):
    """What :func:`sniff` found: the kind of the first non-blank line (``"transcripts"`` when it holds no
    JSON: the transcript reader then says why), its decoded record and line number (None, 0 when none),
    and the lines, the peeked ones included."""

    kind: str
    record: Any
    line: int
    lines: Iterable[str | bytes | LineTooLarge]


def sniff(lines: Iterable[str | bytes | LineTooLarge]) -> Sniffed:
    """Reads ``lines`` up to the first non-blank one and tells what the file is by it
    (:func:`record_kind`); the lines come back whole, with the ``tell`` and ``fileno`` of ``lines``.

    Examples:
      >>> s = sniff(["", '{"question": "2 + 2?", "answer": "4"}', "{"])
      >>> s.kind, s.line, list(s.lines)
      ('questions', 2, ['', '{"question": "2 + 2?", "answer": "4"}', '{'])
      >>> sniff(["{not json"]).kind, sniff([]).kind
      ('transcripts', 'transcripts')
    """
    it = iter(lines)
    seen: list[str | bytes | LineTooLarge] = []
    kind, record, line = "transcripts", None, 0
    for raw in it:
        seen.append(raw)
        if isinstance(raw, LineTooLarge):
            break
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        text = text.removeprefix("\ufeff").strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            break
        kind, line = record_kind(record), len(seen)
        break
    return Sniffed(kind, record, line, _Peeked(seen, it, lines))


class _Peeked:
    """The lines :func:`sniff` read, then the rest; ``tell`` and ``fileno`` of the source (for
    :class:`Progress`)."""

    def __init__(self, seen: list[Any], rest: Iterator[Any], source: Any) -> None:
        self._seen, self._rest, self._source = seen, rest, source

    def __iter__(self) -> Iterator[Any]:
        yield from self._seen
        self._seen = []
        yield from self._rest

    def __getattr__(self, name: str) -> Any:
        if name in ("tell", "fileno"):
            return getattr(self._source, name)
        raise AttributeError(name)


def refusal(sniffed: Sniffed, file: str | None, command: str) -> str:
    """The one-line refusal of FILE by ``command`` (``score`` or ``report``): what the file looks like, by
    its first record, and what to pass instead.

    Examples:
      >>> s = sniff(['{"step": 3, "phase": "rl", "time/total": 1.5}'])
      >>> print(refusal(s, "runs/a/metrics.jsonl", "report"))
      runs/a/metrics.jsonl looks like a training run's metrics.jsonl (line 1 has step, phase, time/total); \
pass the run's directory instead: debate-kernel report runs/a
    """
    name = "standard input" if file in (None, "-") else str(file)
    fields = _fields(sniffed.record)
    where = f"line {sniffed.line} {fields}"
    if sniffed.kind == "results":
        return (
            f"{name} looks like the results of debate-kernel score --out ({where}), already scored: "
            f"draw them with debate-kernel report {'-' if file == '-' else name}; score reads "
            f"{TRANSCRIPTS_ARE} or a run's directory"
        )
    if sniffed.kind == "metrics":
        run = Path(name).parent if file not in (None, "-") else Path("RUN_DIR")
        does = "draw its training curves" if command == "report" else "score its transcripts"
        return (
            f"{name} looks like a training run's metrics.jsonl ({where}); pass the run's directory "
            f"instead: debate-kernel {command} {run}" + ("" if command == "report" else f" ({does})")
        )
    reads = (
        f"{TRANSCRIPTS_ARE}, the results of score --out or a training run's directory"
        if command == "report"
        else f"{TRANSCRIPTS_ARE} or a training run's directory"
    )
    if sniffed.kind == "questions":
        return (
            f"{name} looks like a question set, what train --dataset reads ({where}): it holds no debates; "
            f"{command} reads {reads}"
        )
    return f"{name} is not a file {command} reads ({where}); {command} reads {reads}"


def _fields(record: Any) -> str:
    """How a first record looks: ``has a, b, c`` (its first 6 keys) or ``is a JSON array``."""
    if isinstance(record, dict):
        keys = [str(k) for k in record]
        shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more fields" if len(keys) > 6 else "")
        return f"has {shown}" if keys else "is an empty object"
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "is JSON null" if record is None else f"is {kinds.get(type(record), 'a value')}, not an object"
