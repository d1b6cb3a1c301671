"""Progress displays (issue 37): drawn on a terminal (a pseudo-terminal from Python's ``pty`` module), with a
rate and the time left; nothing when stderr is piped, nor with ``--quiet``."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import _progress, main
from adapters.cli._progress import TrainProgress, evaluation_debates
from tools.samples import sample_text

TRAIN = ["train", "--service", "fake", "--batch-size", "2", "--num-agents", "2", "--max-rounds", "1"]
TRAIN += ["--max-tokens", "256", "--eval-questions", "1", "--warm-start-steps", "2", "--eval-every", "2"]

ETA = re.compile(r"\d\d:\d\d<\d\d:\d\d")
"""tqdm's ``[elapsed<left`` : the time left is shown."""


class _Pty:
    """A pseudo-terminal as ``sys.stderr``: what the commands write to it is read from its master side by
    a thread (the terminal's reader), so a write never blocks on a full buffer."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.stream = io.TextIOWrapper(
            os.fdopen(slave, "wb", buffering=0), encoding="utf-8", write_through=True
        )
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the slave side closed
                return
            if not data:
                return
            self.chunks.append(data)

    def close(self) -> str:
        """Closes the terminal; everything written to it."""
        self.stream.close()
        self.thread.join(timeout=30)
        os.close(self.master)
        return b"".join(self.chunks).decode("utf-8", "replace")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], _Pty]]:
    """Opens a pseudo-terminal as ``sys.stderr`` (called in the test's body: pytest's capture sets
    ``sys.stderr`` again between a fixture's setup and the test)."""
    opened: list[_Pty] = []
    monkeypatch.setattr(_progress, "BAR_OPTIONS", {"mininterval": 0, "miniters": 1})  # every update drawn

    def open_terminal() -> _Pty:
        term = _Pty()
        opened.append(term)
        monkeypatch.setattr(sys, "stderr", term.stream)
        return term

    yield open_terminal
    for term in opened:
        if not term.stream.closed:
            term.close()


def test_train_on_a_terminal_draws_a_bar_per_phase_with_rate_and_time_left(
    terminal: Callable[[], _Pty], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    run = tmp_path / "run"
    term = terminal()
    assert sys.stderr.isatty()
    assert main([*TRAIN, "--steps", "4", "--save-every", "2", "--out", str(run)]) == 0
    shown = term.close()
    assert "warm start: 100%" in shown and "2/2 [" in shown  # the warm start in steps, to its end
    assert "RL: 100%" in shown and "step 4/4  RL 2/2" in shown  # the step of the run beside the bar
    assert ETA.search(shown) and re.search(r"(step/s|s/step)", shown), shown
    # each evaluation in debates: where RL starts (step 2) and at the end (step 4)
    size = evaluation_debates(64, eval_questions=1, eval_repeats=1, num_agents=2)
    assert "evaluation (step 2): 100%" in shown and f"{size}/{size} [" in shown, shown
    assert "evaluation (step 4)" in shown and "debate/s" in shown
    assert "wrote" in capsys.readouterr().out

    # a resumed run's bar starts where the run stands (steps 5-6 of 6: RL 3/4 and 4/4); --quiet: nothing
    again = terminal()
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "6"]) == 0
    resumed = again.close()
    assert "RL:  50%" in resumed and "step 6/6  RL 4/4" in resumed and "warm start" not in resumed
    quiet = terminal()
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "7", "--quiet"]) == 0
    assert quiet.close() == ""
    # not a terminal (pytest's captured stderr): nothing
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    capsys.readouterr()
    assert main(["train", "--service", "fake", "--resume", str(run), "--steps", "8"]) == 0
    assert capsys.readouterr().err == ""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == list(range(8))


@pytest.mark.parametrize("command", ["score", "report"])
def test_score_and_report_of_a_file_show_bytes_rate_and_time_left_on_a_terminal_only(
    command: str, terminal: Callable[[], _Pty], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "debates.jsonl"
    path.write_text(sample_text(), encoding="utf-8")
    argv = [command, str(path), *(["--json"] if command == "score" else ["-o", str(tmp_path / "r.html")])]
    term = terminal()
    assert main([*argv, "--chunk-size", "8"] if command == "score" else argv) == 0
    shown = term.close()
    assert f"{command}: 100%" in shown and "B/s" in shown and "120 lines" in shown, shown
    assert ETA.search(shown), shown
    assert shown.rsplit("\r", 1)[-1].strip() == ""  # cleared: the terminal's last line is blank
    quiet = terminal()
    assert main([*argv, "--quiet"]) == 0
    assert quiet.close() == ""
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().err == ""


def test_standard_input_on_a_terminal_counts_lines(
    terminal: Callable[[], _Pty], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = sample_text().encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    term = terminal()
    assert main(["score", "-", "--json"]) == 0
    shown = term.close()
    assert "score: 120 lines [" in shown and "lines/s" in shown, shown


def test_a_display_off_a_terminal_draws_nothing() -> None:
    stream = io.StringIO()
    display = TrainProgress(stream, warm_start_steps=1, evaluation_size=3)
    display(0, 2, {"time/total": 0.1})
    display.on_eval_debate(object())
    display.close()
    assert stream.getvalue() == "" and display.bar is None
