"""Progress displays of the commands, drawn by tqdm on stderr: a bar with its rate and the time left.

A display is drawn only on a terminal and never with ``--quiet`` (:func:`display_on`): piped to a file
or another program, a command writes no progress at all (its results and errors only).

- :class:`Progress`: ``score`` and ``report`` reading a file: bytes read of the file's size (rate in
  MB/s and the time left), or lines read of standard input (rate in lines/s), with the lines read so far.
- :class:`TrainProgress`: ``train``, one bar per phase: the warm start and RL in optimizer steps
  (``step 83/110`` of the run and the step's reward and evaluation beside the bar), and each evaluation
  in debates while it runs.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["Progress", "TrainProgress", "display_on", "evaluation_debates", "step_line"]


def display_on(stream: Any, *, quiet: bool = False) -> bool:
    """Whether a progress display is drawn on ``stream``: a terminal, and not ``--quiet``.

    Examples:
        >>> import io
        >>> display_on(io.StringIO())
        False
    """
    if quiet:
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


BAR_OPTIONS: dict[str, Any] = {}
"""Options of every tqdm bar, over the defaults (tests draw every update: ``mininterval=0, miniters=1``)."""


def _bar(stream: IO[str], **options: Any) -> Any:
    """A tqdm bar on ``stream`` (imported here: a command that draws none never imports tqdm)."""
    from tqdm import tqdm

    return tqdm(file=stream, dynamic_ncols=True, **{**options, **BAR_OPTIONS})


class Progress:
    """The progress of ``score`` or ``report`` reading ``source`` (what :func:`open_lines` returned),
    drawn on ``stream`` when :func:`display_on` says so: of a regular file, the bytes read of its size
    (its ``tell``), with MB/s and the time left; otherwise the lines read, with lines/s. :meth:`close`
    clears the bar, however the run ends.

    Args:
      stream: where the bar is drawn (stderr).
      source: the lines being read; its ``fileno`` and ``tell``, when it has them, give the share read.
      quiet: draw nothing (``--quiet``).
      label: the bar's name (the command).
    """

    def __init__(self, stream: IO[str], source: object, *, quiet: bool = False, label: str = "score") -> None:
        self.on = display_on(stream, quiet=quiet)
        self.lines = 0
        self.file: Any = None
        self.bar: Any = None
        if not self.on:
            return
        total = 0
        if hasattr(source, "tell") and hasattr(source, "fileno"):
            try:
                info = os.fstat(source.fileno())
            except (OSError, ValueError):
                info = None
            if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > 0:
                self.file, total = source, info.st_size
        if self.file is not None:
            self.bar = _bar(stream, desc=label, total=total, unit="B", unit_scale=True, leave=False)
        else:
            self.bar = _bar(stream, desc=label, unit=" lines", unit_scale=False, leave=False)

    def update(self, lines: int) -> None:
        """``lines`` read so far (a running count)."""
        if self.bar is None or lines == self.lines:
            return
        self.lines = lines
        if self.file is None:
            self.bar.update(lines - self.bar.n)
            return
        with contextlib.suppress(OSError, ValueError):
            done = min(self.file.tell(), self.bar.total)
            self.bar.set_postfix_str(f"{lines:,} lines", refresh=False)
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        """Clears the bar (idempotent)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def step_line(step: int, total: int, record: Mapping[str, Any], *, warm_start_steps: int) -> str:
    """What a step of ``train`` is, in one line: the step of the run, then of its phase (``warm start
    K/W`` or ``RL K/R``; ``RL`` alone in a run without a warm start), the step's reward and evaluation,
    debates ended early and retries, its time.

    Examples:
        >>> step_line(82, 110, {"env/all/reward/total": 0.5, "time/total": 1.25}, warm_start_steps=80)
        'step 83/110  RL 3/30  reward 0.500  1.25s'
        >>> step_line(0, 2, {"time/total": 0.5}, warm_start_steps=0)
        'step 1/2  RL  0.50s'
    """
    reward = record.get("env/all/reward/total")
    if step < warm_start_steps:
        phase = f"warm start {step + 1}/{warm_start_steps}"
    elif warm_start_steps:
        phase = f"RL {step + 1 - warm_start_steps}/{total - warm_start_steps}"
    else:  # every step is RL's
        phase = "RL"
    parts = [f"step {step + 1}/{total}", phase]
    if isinstance(reward, float):
        parts.append(f"reward {reward:.3f}")
    if isinstance(record.get("eval/correct"), float):
        parts.append(f"eval/correct {record['eval/correct']:.3f}")
    ended = record.get("env/all/ended_early")
    if ended:
        ends = [k for k in record if k.startswith("env/all/end/sampler_")]
        if ends:
            worst = max(ends, key=lambda k: record.get(k) or 0)
            parts.append(f"ended early {ended} ({worst.rsplit('/', 1)[1]})")
        else:
            parts.append(f"ended early {ended}")
    if record.get("service/retries"):
        parts.append(f"retries {record['service/retries']:.0f}")
    parts.append(f"{record.get('time/total') or 0.0:.2f}s")
    return "  ".join(parts)


def evaluation_debates(num_questions: int, *, eval_questions: int, eval_repeats: int, num_agents: int) -> int:
    """The debates of one evaluation (:mod:`adapters.training.evaluation`) on a dataset of
    ``num_questions`` questions: on each of the first ``eval_questions``, ``eval_repeats`` times, one
    debate per role against the fixed opponents, one of the policy with itself and one direct answer.

    Examples:
        >>> evaluation_debates(8, eval_questions=8, eval_repeats=6, num_agents=3)
        240
    """
    questions = min(num_questions, eval_questions)
    return questions * eval_repeats * (num_agents + 2)


class TrainProgress:
    """The display of ``train`` on ``stream``, when :func:`display_on` says so: a bar for the warm start
    and one for RL, in optimizer steps (a resumed run's bar starts where the run stands), with the step of
    the run and its figures beside it (:func:`step_line`), and while an evaluation runs a bar of its
    debates (``evaluation_size`` of them) under them, cleared when it ends.

    Called as the training loop's ``progress`` hook after each step's metrics line; the loop calls
    :meth:`on_eval_debate` as each evaluation debate ends.
    """

    def __init__(
        self, stream: IO[str], *, warm_start_steps: int, evaluation_size: int, quiet: bool = False
    ) -> None:
        self.stream, self.warm, self.evaluation_size = stream, warm_start_steps, evaluation_size
        self.on = display_on(stream, quiet=quiet)
        self.phase: str | None = None
        self.bar: Any = None
        self.eval_bar: Any = None
        self.evaluating_after = -1  # the last step written (the next one's evaluation: the one running)

    def _open(self, phase: str, first: int, total: int) -> None:
        """Opens the bar of ``phase`` at step ``first`` of the run (the steps before it: done)."""
        if phase == "warm start":
            start, end = 0, self.warm
        else:
            start, end = self.warm, total
        self.phase = phase
        self.bar = _bar(self.stream, desc=phase, total=end - start, initial=first - start, unit="step")

    def __call__(self, step: int, total: int, record: Mapping[str, Any]) -> None:
        if not self.on:
            return
        self._end_evaluation()
        phase = "warm start" if step < self.warm else "RL"
        if phase != self.phase:
            self._close_bar()
            self._open(phase, step, total)
        self.bar.set_postfix_str(step_line(step, total, record, warm_start_steps=self.warm), refresh=False)
        self.bar.update(1)
        self.evaluating_after = step
        if step + 1 >= (self.warm if phase == "warm start" else total):
            self._close_bar()

    def on_eval_debate(self, result: object) -> None:
        """Counts an evaluation debate that ended (a bar of the evaluation's debates while it runs)."""
        if not self.on:
            return
        if self.eval_bar is None:
            at = f" (step {self.evaluating_after + 2})" if self.evaluating_after >= 0 else ""
            self.eval_bar = _bar(
                self.stream,
                desc=f"evaluation{at}",
                total=self.evaluation_size or None,
                unit="debate",
                leave=False,
            )
        self.eval_bar.update(1)
        if self.evaluation_size and self.eval_bar.n >= self.evaluation_size:
            self._end_evaluation()

    def _end_evaluation(self) -> None:
        if self.eval_bar is not None:
            self.eval_bar.close()
            self.eval_bar = None

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.phase = None

    def close(self, *, failed: bool = False) -> None:
        """Closes every bar (idempotent); the bar of a run that stopped stays on the screen."""
        self._end_evaluation()
        self._close_bar()

    def __enter__(self) -> TrainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(failed=exc[0] is not None)
