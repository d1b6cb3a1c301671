"""The training loop's transcript writer: its worker process writes what its thread writes, and fails
loudly (and ends) instead of losing a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.tinker import transcript_writer as tw
from adapters.tinker.fake import FakePolicy, FakeServiceClient
from adapters.tinker.tokens import TokenArray
from adapters.tinker.transcript_writer import TranscriptWriteError, TranscriptWriter, token_count
from adapters.training import train as train_module
from adapters.training.config import TrainConfig
from adapters.training.rollouts import _narrow, transcript_columns
from adapters.training.train import run_training
from adapters.transcripts import Debate, Turn, dumps_debate, read_transcripts
from tests._profile import examples
from tests.test_train_loop import SMALL
from tests.test_train_prepare import _rollouts
from tests.test_transcripts import _debates, _token_views

_steps = st.lists(st.lists(_debates().flatmap(_token_views), max_size=4), min_size=1, max_size=4)


# Each example starts a worker process (about 0.1-0.3 s): a few examples of several steps each.
@settings(max_examples=12)
@given(_steps)
def test_the_worker_writes_the_bytes_the_thread_writes(steps: list[list[Debate]]) -> None:
    import tempfile

    root = Path(tempfile.mkdtemp())

    async def main() -> bool:
        async with (
            TranscriptWriter(process_tokens=0) as process,
            TranscriptWriter(process_tokens=None) as thread,
        ):
            for k, debates in enumerate(steps):
                await process.write(root / f"p{k}.jsonl", debates)
                await thread.write(root / f"t{k}.jsonl", debates)
            return process.started_process and not thread.started_process

    assert asyncio.run(main())
    for k in range(len(steps)):
        assert (root / f"p{k}.jsonl").read_bytes() == (root / f"t{k}.jsonl").read_bytes()


def _debate(n: int) -> Debate:
    obs = TokenArray(np.arange(n, dtype=np.int64) % 256)
    turn = Turn(0, "x", observation_tokens=obs, action_tokens=(1, 2), logprobs=(-0.5, -1.25))
    return Debate(id="d", question="q", num_agents=1, turns=(turn,))


def test_token_count_and_the_size_rule(tmp_path: Path) -> None:
    small, large = _debate(3), _debate(50)
    assert token_count([small, large]) == 5 + 52

    async def main() -> tuple[bool, bool]:
        async with TranscriptWriter(process_tokens=52) as writer:
            await writer.write(tmp_path / "a.jsonl", [small])  # 5 tokens: the thread
            first = writer.started_process
            await writer.write(tmp_path / "b.jsonl", [large])  # 52 tokens: the worker
            return first, writer.started_process

    assert asyncio.run(main()) == (False, True)
    (debate,) = read_transcripts((tmp_path / "b.jsonl").read_text()).debates
    assert debate.turns[0].observation_tokens == tuple(range(50))


def test_a_failed_write_is_an_error_naming_the_file_and_the_worker_goes_on(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "step.jsonl"  # its parent is a file

    async def main() -> None:
        async with TranscriptWriter(process_tokens=0) as writer:
            with pytest.raises(
                TranscriptWriteError, match=r"step\.jsonl.*(FileExistsError|NotADirectoryError)"
            ):
                await writer.write(bad, [_debate(3)])
            await writer.write(tmp_path / "good.jsonl", [_debate(3)])

    asyncio.run(main())
    assert (tmp_path / "good.jsonl").exists()


def test_a_dead_worker_falls_back_to_the_thread_with_a_warning(tmp_path: Path) -> None:
    async def main() -> bool:
        async with TranscriptWriter(process_tokens=0) as writer:
            await writer.write(tmp_path / "a.jsonl", [_debate(3)])
            proc = writer._proc
            assert proc is not None
            proc.kill()
            await proc.wait()
            with pytest.warns(RuntimeWarning, match="exit code -9.*in a thread"):
                await writer.write(tmp_path / "b.jsonl", [_debate(3)])
            await writer.write(tmp_path / "c.jsonl", [_debate(3)])  # no second warning: the thread
            return writer.started_process

    assert asyncio.run(main()) is False
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    assert (tmp_path / "c.jsonl").exists()


def test_a_worker_that_cannot_start_falls_back_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("no interpreter")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", broken)

    async def main() -> None:
        async with TranscriptWriter(process_tokens=0) as writer:
            with pytest.warns(RuntimeWarning, match="in a thread"):
                await writer.write(tmp_path / "a.jsonl", [_debate(3)])

    asyncio.run(main())
    assert (tmp_path / "a.jsonl").exists()


def test_cancellation_ends_the_worker(tmp_path: Path) -> None:
    async def main() -> asyncio.subprocess.Process:
        writer = TranscriptWriter(process_tokens=0)
        async with writer:
            await writer.write(tmp_path / "a.jsonl", [_debate(3)])  # the worker is up
        proc = writer._proc
        assert proc is None  # closed: a normal exit
        writer = TranscriptWriter(process_tokens=0)
        with pytest.raises(asyncio.CancelledError):
            async with writer:
                big = [_debate(200_000) for _ in range(20)]
                task = asyncio.ensure_future(writer.write(tmp_path / "b.jsonl", big))
                while writer._proc is None:
                    await asyncio.sleep(0.001)
                started = writer._proc
                task.cancel()
                await task
        return started

    proc = asyncio.run(main())
    assert proc.returncode is not None  # killed and reaped, not left running


def test_bad_process_tokens() -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="process_tokens"):
            TranscriptWriter(process_tokens=bad)  # type: ignore[arg-type]


def test_the_loop_writes_the_same_transcripts_through_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(name: str) -> dict[str, bytes]:
        config = TrainConfig.from_mapping({**SMALL, "out": str(tmp_path / name), "steps": 3, "save_every": 1})
        asyncio.run(run_training(config, FakeServiceClient(seed=0)))
        folder = tmp_path / name / "transcripts"
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}

    thread = run("thread")
    monkeypatch.setattr(tw, "PROCESS_TOKENS", 0)
    assert train_module._transcript_writer().process_tokens == 0
    process = run("process")
    assert thread and process == thread


def test_a_checkpoint_waits_for_the_transcripts_it_covers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from adapters.training import checkpoint as ck

    write = tw.encode_and_write

    def slow(path: str | Path, debates: list[Debate]) -> None:
        time.sleep(0.2)  # slower than the rest of the step on the fake
        write(path, debates)

    seen: list[tuple[int, list[str]]] = []
    save = ck.save_checkpoint

    def checked(run: ck.RunInfo, steps_done: int, payload: dict[str, object]) -> None:
        seen.append((steps_done, sorted(p.name for p in (run.run_dir / "transcripts").iterdir())))
        save(run, steps_done, payload)

    monkeypatch.setattr(tw, "encode_and_write", slow)
    monkeypatch.setattr(ck, "save_checkpoint", checked)
    config = TrainConfig.from_mapping({**SMALL, "out": str(tmp_path / "run"), "steps": 3, "save_every": 1})
    asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert [s for s, _ in seen] == [1, 2, 3]
    for steps_done, names in seen:
        assert names[:steps_done] == [f"step-{s:06d}.jsonl" for s in range(steps_done)]


@settings(max_examples=examples(10), deadline=None)
@given(
    num_agents=st.integers(2, 4),
    max_rounds=st.integers(1, 3),
    malformed=st.sampled_from([0.0, 0.3]),
    strip=st.sampled_from([0, 2, 5]),
    seed=st.integers(0, 30),
)
def test_columns_hold_the_debates_of_to_transcript(
    num_agents: int, max_rounds: int, malformed: float, strip: int, seed: int
) -> None:

    played = [
        r
        for r in _rollouts(num_agents, max_rounds, FakePolicy(malformed_rate=malformed), 0.1, strip, seed)
        if r.turns
    ]
    columns = transcript_columns(played)
    want = [r.to_transcript() for r in played]
    # the same debates (observation ids as a tuple rather than the loop's read-only array view)
    assert [dumps_debate(d) for d in columns.debates()] == [dumps_debate(d) for d in want]
    got_turns = [t for d in columns.debates() for t in d.turns]
    want_turns = [t for d in want for t in d.turns]
    for a, b in zip(got_turns, want_turns, strict=True):
        assert a.observation_tokens is None or a.observation_tokens == tuple(b.observation_tokens)
        assert (a.action_tokens, a.logprobs, a.text, a.round) == (
            b.action_tokens,
            b.logprobs,
            b.text,
            b.round,
        )
    assert columns.token_count == token_count(want)
    # a turn whose sampler gave no logprob per token keeps no tokens, in the columns as in the debates
    assert columns.has_tokens_K.tolist() == [t.arrays is not None for r in played for t in r.turns]
    assert columns.has_tokens_K.tolist() == [t.action_tokens is not None for d in want for t in d.turns]


def test_the_worker_and_the_thread_write_columns_as_the_debates(tmp_path: Path) -> None:

    played = [r for r in _rollouts(3, 2, FakePolicy(malformed_rate=0.2), 0.0, 3, 4) if r.turns]
    columns = transcript_columns(played)
    assert columns.ob_tokens.dtype == np.int32  # byte ids fit: half the bytes to send

    async def main() -> bool:
        async with (
            TranscriptWriter(process_tokens=0) as process,
            TranscriptWriter(process_tokens=None) as thread,
        ):
            await process.write(tmp_path / "p.jsonl", columns)
            await thread.write(tmp_path / "t.jsonl", columns)
            await thread.write(tmp_path / "d.jsonl", [r.to_transcript() for r in played])
            return process.started_process

    assert asyncio.run(main())
    want = (tmp_path / "d.jsonl").read_bytes()
    assert (tmp_path / "p.jsonl").read_bytes() == want
    assert (tmp_path / "t.jsonl").read_bytes() == want


def test_ids_beyond_int32_stay_int64() -> None:

    assert _narrow(np.array([1, 2**31 - 1])).dtype == np.int32
    assert _narrow(np.array([1, 2**31])).dtype == np.int64
    assert _narrow(np.array([-(2**31) - 1])).dtype == np.int64
    assert _narrow(np.zeros(0, np.int64)).dtype == np.int32
