"""The training loop's glibc malloc settings (``adapters.tinker.memory.freed_memory_kept``)."""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from adapters.tinker import memory

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


class _FakeGlibc:
    """Records ``mallopt`` and ``malloc_trim`` calls instead of making them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def function(self, name: str) -> Callable[..., int]:
        def call(*args: int) -> int:
            self.calls.append((name, args))
            return 1

        return call


@pytest.fixture
def glibc(monkeypatch: pytest.MonkeyPatch) -> _FakeGlibc:
    fake = _FakeGlibc()
    monkeypatch.setattr(memory, "glibc_function", fake.function)
    return fake


KEPT = [("mallopt", (M_MMAP_THRESHOLD, 1 << 30)), ("mallopt", (M_TRIM_THRESHOLD, 1 << 31))]
AFTER = [
    ("mallopt", (M_MMAP_THRESHOLD, 32 << 20)),
    ("mallopt", (M_TRIM_THRESHOLD, 64 << 20)),
    ("malloc_trim", (0,)),
]


def test_thresholds_raised_inside_and_left_where_glibc_would_adapt_them_after(glibc: _FakeGlibc) -> None:
    """Found by review: the exit set glibc's starting thresholds (128 KiB) again, which, fixed, sent
    every block over 128 KiB to mmap for the rest of the process (a JAX training step 34 % slower after a
    run than before it); it now leaves 32 MiB / 64 MiB, where glibc's adaptive thresholds end up."""
    with memory.freed_memory_kept():
        assert glibc.calls == KEPT
    assert glibc.calls == KEPT + AFTER
    assert all(args[1] > 128 * 1024 for name, args in glibc.calls if name == "mallopt")


def test_the_last_of_concurrent_loops_sets_the_values_after(glibc: _FakeGlibc) -> None:
    with memory.freed_memory_kept():
        with memory.freed_memory_kept():  # a second loop in the same process
            pass
        assert glibc.calls == KEPT  # the first loop still runs with the raised thresholds
    assert glibc.calls == KEPT + AFTER


def test_values_after_are_set_on_error_too(glibc: _FakeGlibc) -> None:
    with pytest.raises(RuntimeError, match="boom"), memory.freed_memory_kept():
        raise RuntimeError("boom")
    assert glibc.calls == KEPT + AFTER
    with memory.freed_memory_kept():  # and the depth count is back at 0
        pass
    assert glibc.calls == 2 * (KEPT + AFTER)


def test_other_c_libraries_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "glibc_function", lambda name: None)
    with memory.freed_memory_kept():
        pass  # nothing to call, nothing raised


def _faults_of(fn: Callable[[], Any], times: int) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(memory.glibc_function("mallopt") is None, reason="glibc only")
def test_a_freed_4_mib_block_is_reused_after_the_loop() -> None:
    """On the real glibc: after the context, a 4 MiB array allocated, written and freed again and again
    reuses the same pages. With the old exit (128 KiB thresholds, fixed) each one was a fresh mmap whose
    pages were faulted in anew (at least one fault per 2 MiB huge page, per array)."""
    with memory.freed_memory_kept():
        pass

    def cycle() -> None:
        np.ones(1 << 19)  # 4 MiB of float64, written, then freed

    _faults_of(cycle, 3)  # the heap grows once
    assert _faults_of(cycle, 20) < 20


def test_one_malloc_arena(glibc: _FakeGlibc, monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.one_malloc_arena() is True
    assert glibc.calls == [("mallopt", (-8, 1))]  # M_ARENA_MAX
    monkeypatch.setattr(memory, "glibc_function", lambda name: None)
    assert memory.one_malloc_arena() is False


def test_train_sets_one_arena_before_jax_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """``train`` on the local service asks for one malloc arena before it splits the CPU backend (which
    must come before JAX's first computation, and so before XLA's threads exist)."""
    pytest.importorskip("adapters.local")
    from adapters import local
    from adapters.cli import train as cli_train
    from adapters.training.config import TrainConfig

    order: list[str] = []
    monkeypatch.setattr(cli_train, "one_malloc_arena", lambda: order.append("arena") or True)
    monkeypatch.setattr(local, "split_cpu", lambda: order.append("split") or True)
    with contextlib.ExitStack() as stack:  # the in-process service (through serve, the server sets them)
        service, _ = cli_train._service(
            "inprocess", TrainConfig(model="tiny", out=str(tmp_path / "run")), stack
        )
    assert order == ["arena", "split"] and isinstance(service, local.LocalServiceClient)
