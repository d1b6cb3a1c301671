"""Writing a training step's transcripts without holding up the event loop.

A step's transcripts file is mostly numbers: every turn's prompt ids, sampled ids and logprobs (at 64
debates × 4 agents × 3 rounds with ≈1,200-token prompts, some 9 MB of JSON). Encoding it holds the GIL
for about 0.1 s a step, most of it formatting the logprobs as the shortest repr that round-trips
(``json``'s float repr). In a thread that time is taken from the event loop while the next step's
rollouts start, so :class:`TranscriptWriter` sends large steps to a worker process of its own and keeps
small steps in a thread, where starting a process would cost more than it saves.

The worker is this module run as a script (``python -m adapters.tinker.transcript_writer``), started on
the first large step and fed over its stdin: not ``multiprocessing``, whose ``spawn`` method re-imports
the caller's main module (a user's script without a ``__main__`` guard would start training again) and
whose ``fork`` method is unsafe in a process holding threads or JAX. Both paths write the same bytes:
:func:`encode_and_write` runs in either.

A step can also be handed over as :class:`TranscriptColumns` (built by
:func:`adapters.training.rollouts.transcript_columns`): every turn's token ids and logprobs concatenated into
three arrays, the rest in plain lists. Building and pickling them costs a few milliseconds where building
the step's ``Debate`` objects and pickling their per-turn arrays cost about 0.1 s of the event loop's
thread; the worker (or the thread) turns them into the same debates before encoding.

Frame (parent → worker): 8-byte big-endian length, then the pickle of ``(path, debates)`` (a list of
``Debate`` or a :class:`TranscriptColumns`); reply (worker → parent): one line, ``ok`` or the error.
Closing the worker's stdin ends it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import struct
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np
import numpy.typing as npt

from adapters.training.checkpoint import write_text_atomic
from adapters.transcripts import Debate, Turn, dumps_debate

__all__ = [
    "PROCESS_TOKENS",
    "TranscriptColumns",
    "TranscriptWriteError",
    "TranscriptWriter",
    "encode_and_write",
    "token_count",
]

PROCESS_TOKENS = 200_000
"""Steps whose transcripts hold at least this many token ids (prompts and samples) go to the worker
process: about 2 MB of JSON and 20 ms of encoding, above the cost of sending them there."""

_HEADER = struct.Struct(">Q")


@dataclass(frozen=True, slots=True, repr=False)
class TranscriptColumns:
    """A step's debates as columns: what :meth:`debates` turns back into ``Debate`` objects.

    Debate p has header ``(ids[p], questions[p], num_agents[p], max_rounds[p], metas[p])`` and turns
    ``turn_offsets_P1[p] : turn_offsets_P1[p + 1]``. Turn k has ``agents[k]``, ``rounds[k]``, ``texts[k]``
    and, where ``has_tokens_K[k]``, its observation ids ``ob_tokens[ob_offsets_K1[k] : ob_offsets_K1[k+1]]``,
    action ids and logprobs likewise (a turn without tokens has empty ranges).

    Examples:
      >>> cols = TranscriptColumns(
      ...     ids=["a"], questions=["q"], num_agents=[1], max_rounds=[None], metas=[None],
      ...     turn_offsets_P1=np.array([0, 2]), agents=[0, 0], rounds=[0, 1], texts=["x", "y"],
      ...     has_tokens_K=np.array([True, False]),
      ...     ob_tokens=np.array([1, 2]), ob_offsets_K1=np.array([0, 2, 2]),
      ...     ac_tokens=np.array([3]), ac_offsets_K1=np.array([0, 1, 1]), logprobs=np.array([-0.5]))
      >>> [(t.text, t.observation_tokens, t.action_tokens, t.logprobs) for t in cols.debates()[0].turns]
      [('x', (1, 2), (3,), (-0.5,)), ('y', None, None, None)]
    """

    ids: list[str]
    questions: list[str]
    num_agents: list[int]
    max_rounds: list[int | None]
    metas: list[Any]
    turn_offsets_P1: npt.NDArray[np.int64]
    agents: list[int]
    rounds: list[int | None]
    texts: list[str]
    has_tokens_K: npt.NDArray[np.bool_]
    ob_tokens: npt.NDArray[np.signedinteger[Any]]
    ob_offsets_K1: npt.NDArray[np.int64]
    ac_tokens: npt.NDArray[np.signedinteger[Any]]
    ac_offsets_K1: npt.NDArray[np.int64]
    logprobs: npt.NDArray[np.float64]

    def __repr__(self) -> str:
        return f"TranscriptColumns({len(self.ids)} debates, {len(self.texts)} turns)"

    @property
    def token_count(self) -> int:
        """The token ids the transcripts hold (observations and actions), as :func:`token_count`."""
        return int(self.ob_tokens.shape[0] + self.ac_tokens.shape[0])

    def debates(self) -> list[Debate]:
        """The debates, with token ids and logprobs as tuples of Python ints and floats."""
        ob, ac, lp = self.ob_tokens.tolist(), self.ac_tokens.tolist(), self.logprobs.tolist()
        ob_at, ac_at = self.ob_offsets_K1.tolist(), self.ac_offsets_K1.tolist()
        has = self.has_tokens_K.tolist()
        turns: list[Turn] = []
        for k, (agent, round_, text) in enumerate(zip(self.agents, self.rounds, self.texts, strict=True)):
            if has[k]:
                turns.append(
                    Turn(
                        agent=agent,
                        text=text,
                        round=round_,
                        observation_tokens=tuple(ob[ob_at[k] : ob_at[k + 1]]),
                        action_tokens=tuple(ac[ac_at[k] : ac_at[k + 1]]),
                        logprobs=tuple(lp[ac_at[k] : ac_at[k + 1]]),
                    )
                )
            else:
                turns.append(Turn(agent=agent, text=text, round=round_))
        bounds = self.turn_offsets_P1.tolist()
        return [
            Debate(
                id=self.ids[p],
                question=self.questions[p],
                num_agents=self.num_agents[p],
                turns=tuple(turns[bounds[p] : bounds[p + 1]]),
                max_rounds=self.max_rounds[p],
                meta=self.metas[p],
            )
            for p in range(len(self.ids))
        ]


class TranscriptWriteError(RuntimeError):
    """The worker process could not write a transcripts file (its error is the message)."""


def encode_and_write(path: str | Path, debates: Sequence[Debate]) -> None:
    """Writes ``debates`` to ``path`` as JSON Lines, atomically (a temporary file, fsynced, renamed).

    Examples:
      >>> import tempfile
      >>> from adapters.transcripts import Turn
      >>> out = Path(tempfile.mkdtemp()) / "step.jsonl"
      >>> encode_and_write(out, [Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "x"),))])
      >>> out.read_text()[:40]
      '{"format":"debate-transcript/1","id":"a"'
    """
    write_text_atomic(path, "".join(dumps_debate(d) + "\n" for d in debates))


def token_count(debates: Sequence[Debate]) -> int:
    """The token ids the transcripts of ``debates`` hold (observations and actions).

    Examples:
      >>> from adapters.transcripts import Turn
      >>> turn = Turn(0, "x", observation_tokens=(1, 2, 3), action_tokens=(4,), logprobs=(-0.5,))
      >>> token_count([Debate(id="a", question="q", num_agents=1, turns=(turn, Turn(0, "y")))])
      4
    """
    return sum(
        (0 if t.observation_tokens is None else len(t.observation_tokens))
        + (0 if t.action_tokens is None else len(t.action_tokens))
        for d in debates
        for t in d.turns
    )


def _encode_and_write_any(path: str | Path, debates: Sequence[Debate] | TranscriptColumns) -> None:
    encode_and_write(path, debates.debates() if isinstance(debates, TranscriptColumns) else debates)


def _portable(debate: Debate) -> Debate:
    """``debate`` with array-backed token sequences as plain arrays, so the worker unpickles it without
    importing the SDK (the transcript encoder writes an integer array's ids as it writes a list's)."""
    turns = tuple(
        dataclasses.replace(t, observation_tokens=cast("Sequence[int]", np.asarray(t.observation_tokens)))
        if t.observation_tokens is not None and hasattr(t.observation_tokens, "__array__")
        else t
        for t in debate.turns
    )
    return dataclasses.replace(debate, turns=turns)


class TranscriptWriter:
    """Writes transcripts files off the event loop: in a thread, or in a worker process for large steps.

    Use as an async context manager (or await :meth:`aclose`): the worker, if one was started, finishes
    the write it has and exits; on cancellation it is killed (a write is atomic: a file is whole or
    absent). Writes are sent to the worker one at a time, in call order.

    Args:
      process_tokens: the size, in token ids, from which a step goes to the worker process (keyword);
        0 sends every step there, ``None`` none.

    Examples:
      >>> import asyncio, tempfile
      >>> from pathlib import Path
      >>> from adapters.transcripts import Turn, read_transcripts
      >>> out = Path(tempfile.mkdtemp()) / "step.jsonl"
      >>> debate = Debate(id="a", question="q", num_agents=1, turns=(Turn(0, "x"),))
      >>> async def main():
      ...     async with TranscriptWriter() as writer:
      ...         await writer.write(out, [debate])
      >>> asyncio.run(main())
      >>> read_transcripts(out.read_text()).debates[0].id
      'a'
    """

    def __init__(self, *, process_tokens: int | None = PROCESS_TOKENS) -> None:
        if process_tokens is not None and (
            isinstance(process_tokens, bool) or not isinstance(process_tokens, int) or process_tokens < 0
        ):
            raise ValueError(f"process_tokens must be an int >= 0 or None, got {process_tokens!r}")
        self.process_tokens = process_tokens
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> TranscriptWriter:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            await self.aclose()
        else:
            await self.kill()

    @property
    def started_process(self) -> bool:
        """Whether a worker process was started."""
        return self._proc is not None

    async def write(self, path: str | Path, debates: Sequence[Debate] | TranscriptColumns) -> None:
        """Writes ``debates`` to ``path`` (see :func:`encode_and_write`); returns once the file is in place.

        A worker that cannot start or exits without answering is not an error of the write: the file is
        written in a thread instead, with a ``RuntimeWarning``, and so is every later step.

        Raises:
          OSError: the file could not be written (thread path).
          TranscriptWriteError: the worker process answered that it could not write the file.
        """
        body: list[Debate] | TranscriptColumns
        if isinstance(debates, TranscriptColumns):
            body = debates
            size = debates.token_count
        else:
            body = debates = list(debates)
            size = token_count(debates)
        if self.process_tokens is not None and size >= self.process_tokens:
            if not isinstance(body, TranscriptColumns):
                body = [_portable(d) for d in body]
            payload = pickle.dumps((str(path), body), protocol=5)
            async with self._lock:
                if self.process_tokens is not None:  # not given up on by a write before this one
                    reply = await self._exchange(payload)
                    if reply == b"ok\n":
                        return
                    if reply:
                        message = reply.decode(errors="replace").strip()
                        raise TranscriptWriteError(
                            f"the transcript writer process could not write {path}: {message}"
                        )
                    await self._give_up()
        await asyncio.to_thread(_encode_and_write_any, path, debates)

    async def _exchange(self, payload: bytes) -> bytes:
        """Sends one request; the worker's reply line, or b"" when it could not start or died."""
        try:
            proc = await self._worker()
        except OSError:
            return b""
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(_HEADER.pack(len(payload)))
            proc.stdin.write(payload)
            await proc.stdin.drain()
            return await proc.stdout.readline()
        except (BrokenPipeError, ConnectionResetError):
            return b""

    async def _give_up(self) -> None:
        proc = self._proc
        code = None if proc is None else proc.returncode
        await self.kill()
        self.process_tokens = None
        warnings.warn(
            f"the transcript writer process is gone (exit code {code}); transcripts are written in a "
            "thread from now on",
            RuntimeWarning,
            stacklevel=3,
        )

    async def _worker(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            here = str(Path(__file__).resolve().parents[2])  # the folder holding this ``adapters``
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "adapters.tinker.transcript_writer",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
        return self._proc

    async def aclose(self) -> None:
        """Ends the worker after its current write (closes its stdin, waits for its exit); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            await proc.wait()

    async def kill(self) -> None:
        """Ends the worker now (on an error or cancellation); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.returncode is None:
                proc.kill()
            await asyncio.shield(proc.wait())


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> int:
    """The worker: writes each framed request's file and replies, until its stdin closes."""
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return 0
        (size,) = _HEADER.unpack(header)
        body = stdin.read(size)
        try:
            path, debates = pickle.loads(body)
            _encode_and_write_any(path, debates)
            reply = "ok"
        except Exception as e:  # reported to the parent, which raises it there
            reply = f"{type(e).__name__}: {e}".replace("\n", " ")
        stdout.write(reply.encode() + b"\n")
        stdout.flush()


def main() -> int:
    """The worker's entry point: serves requests on stdin until it closes."""
    return _serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    # Run as a script this file is ``__main__``; serve from the imported module, whose classes are the
    # ones the parent pickled (``__main__.TranscriptColumns`` would be another class).
    from adapters.tinker import transcript_writer

    raise SystemExit(transcript_writer.main())
