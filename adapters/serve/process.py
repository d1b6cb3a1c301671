"""``debate-kernel serve`` as a child process: started on a free loopback port, ready when it says so,
stopped whatever happens.

``debate-kernel train`` without a Tinker key trains through the real SDK against such a child, and the
tests start theirs the same way. The child prints one line, ``serving on URL``, once it accepts requests;
its log (stderr) goes to a file. It is stopped with SIGTERM (it exits 0 after closing its connections),
and killed if it has not exited after a grace period; it also stops by itself when this process ends in
any way (SIGKILL included): its stdin is a pipe from this process, and it stops at the pipe's end.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["API_KEY", "ServedClient", "ServerError", "first_line", "served"]

API_KEY = "tml-local"
"""The key the SDK sends to a local server (the SDK refuses keys that do not start with ``tml-``; the
server reads none)."""

READY_SECONDS = 300.0
"""How long a child may take to print its ready line: generous (a loaded machine imports JAX slowly), so
that only a broken server, never a slow one, fails; a child that exits before it is reported at once."""

STOP_SECONDS = 30.0
"""How long a stopped child may take to exit before it is killed."""


class ServerError(RuntimeError):
    """The server could not be started: it exited, or printed something else, before its ready line."""


@contextlib.contextmanager
def served(
    model: str,
    *,
    root: Path,
    log: Path,
    seed: int = 0,
    extra: Sequence[str] = (),
    ready_seconds: float = READY_SECONDS,
) -> Iterator[str]:
    """Runs ``debate-kernel serve --model MODEL --port 0 --root ROOT`` for the ``with`` block; yields its URL.

    Args:
      model: what ``serve --model`` takes.
      root: the server's folder for runs and checkpoints.
      log: the file that receives the server's log (appended to).
      seed: the server's seed.
      extra: more ``serve`` arguments.
      ready_seconds: the most time the ready line may take.

    Yields:
      The base URL (``http://127.0.0.1:PORT``).

    Raises:
      ServerError: the child exited or printed something else first (its log's last lines quoted), or
        did not get ready in time.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "adapters.cli", "serve", "--model", model, "--port", "0"]
    cmd += ["--root", str(root), "--seed", str(seed), "--stop-with-parent", *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as err:  # stdin: a pipe whose end (this process's exit) stops the child
        child = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.PIPE, text=True, env=env
        )
    try:
        line = first_line(child, ready_seconds)
        if not line.startswith("serving on "):
            tail = _tail(log)
            raise ServerError(
                f"debate-kernel serve did not start ({_said(line, child)}); its log ends:\n{tail}"
            )
        yield line.removeprefix("serving on ").strip()
    finally:
        _stop(child)


def first_line(child: subprocess.Popen[str], seconds: float) -> str:
    """The child's first stdout line ("" at its exit), read on a thread so that a silent child fails:
    ``<nothing within N s>`` when none came in ``seconds``."""
    assert child.stdout is not None
    stdout = child.stdout
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=seconds)
    except queue.Empty:
        return f"<nothing within {seconds:.0f} s>"


def _said(line: str, child: subprocess.Popen[str]) -> str:
    if not line:
        return f"it exited with status {child.wait()}"
    return f"it printed {line.strip()!r}"


def _stop(child: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if the child is still there after :data:`STOP_SECONDS`; always reaped."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    for pipe in (child.stdout, child.stdin):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ServedClient:
    """The SDK's ``ServiceClient`` of a ``debate-kernel serve``, plus what that server alone has.

    ``create_full_training_client(base_model)`` asks for a LoRA client of rank 0, which ``serve`` reads as
    full fine-tuning (the local models start from random weights, and LoRA alone learns slowly); every
    other attribute is the SDK client's own.
    """

    def __init__(self, sdk: Any) -> None:
        self._sdk = sdk

    def create_full_training_client(self, base_model: str) -> Any:
        """A training client of every weight of ``base_model`` (a LoRA client of rank 0 to the server)."""
        return self._sdk.create_lora_training_client(base_model, rank=0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sdk, name)
