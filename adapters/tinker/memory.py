"""glibc ``malloc`` settings: freed memory kept for reuse while the training loop runs
(``adapters.training.train`` enters :func:`freed_memory_kept`), one arena for the local service's XLA
threads (:func:`one_malloc_arena`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

__all__ = ["freed_memory_kept", "glibc_function", "one_malloc_arena"]


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
_KEEP_MMAP, _KEEP_TRIM = 1 << 30, 1 << 31  # inside: freed blocks up to 1 GiB stay in the heap
_AFTER_MMAP, _AFTER_TRIM = 32 << 20, 64 << 20  # after: where glibc's own adaptive thresholds end up
_depth = 0  # runs inside freed_memory_kept (concurrent loops): the last one out sets the values after


@contextlib.contextmanager
def freed_memory_kept() -> Iterator[None]:
    """glibc's ``malloc`` keeps freed memory for reuse while the loop runs, instead of handing it back to
    the system. Every step allocates some 100 MB of arrays anew (packed tokens, datums, the service's
    copies); memory handed back must be faulted in again on the next step, and on a virtual machine a
    fresh (transparent huge) page costs about 0.1 ms: 30-130 ms of system time per step here, on the
    critical path. Raises ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` for the loop's duration (the
    outermost of concurrent loops, for all of them). What it saves: ``python -m benchmarks train``'s step
    with 50 / 200 ms latencies is 6.6 % longer without it (median of 8 interleaved pairs, 0.96-1.33 ×),
    its kernel stages 1.7 × (every pair 1.3-2.5 ×), its client overhead 1.37 × (every pair above 1).

    After, the thresholds are 32 MiB (mmap) and 64 MiB (trim), then free memory is trimmed. glibc's
    defaults cannot be set back: they adapt (a freed mmapped block raises both, up to those values), and
    any ``mallopt`` of them stops that for the life of the process. Setting the starting values (128 KiB)
    again, as this did before, left the process slower than it found it: every block over 128 KiB then
    went to ``mmap`` and came back as fresh pages on each use (JAX training a ``tiny`` model on 32 × 1024
    tokens, two CPU devices: 1.69 s a step with glibc's adaptive defaults, 2.36 s after, with 1.1 M page
    faults a step; 1.57 s with these values). Nothing is done on other C libraries.

    Examples:
        >>> import numpy as np
        >>> with freed_memory_kept():  # each 64 MiB block freed stays in the heap for the next one
        ...     for _ in range(3):
        ...         block = np.ones(1 << 23)
        >>> float(block.sum())
        8388608.0
    """
    global _depth
    mallopt = glibc_function("mallopt")
    if mallopt is None:
        yield
        return
    if _depth == 0:
        mallopt(_M_MMAP_THRESHOLD, _KEEP_MMAP)
        mallopt(_M_TRIM_THRESHOLD, _KEEP_TRIM)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            mallopt(_M_MMAP_THRESHOLD, _AFTER_MMAP)
            mallopt(_M_TRIM_THRESHOLD, _AFTER_TRIM)
            trim = glibc_function("malloc_trim")
            if trim is not None:
                trim(0)


def one_malloc_arena() -> bool:
    """Has every thread started from now on allocate from glibc's main arena (``M_ARENA_MAX`` = 1);
    returns whether it took effect (False on other C libraries).

    For a process about to run the local service's JAX computations on CPU: XLA's threads otherwise get
    arenas of their own, whose heaps are capped at 64 MiB, so each of their larger blocks is an ``mmap``
    faulted in afresh on every call whatever :func:`freed_memory_kept` sets. ``debate-kernel train`` on
    the local service calls it before JAX starts (two CPU devices, 20 warm-start and 20 RL steps, two runs
    each: 4.18 M page faults and 8.9-9.2 s of system time without, 0.33-0.74 M and 2.0-3.0 s with; wall
    time 45.5-49.6 s → 43.3-48.0 s). Threads that have an arena already keep it.

    Examples:
        >>> import platform
        >>> one_malloc_arena() == (platform.libc_ver()[0] == "glibc")
        True
    """
    mallopt = glibc_function("mallopt")
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, 1))


def glibc_function(name: str) -> Callable[..., int] | None:
    """A function of the process's glibc, or None on another C library (or a name it lacks).

    Examples:
        >>> import platform
        >>> (glibc_function("malloc_trim") is not None) == (platform.libc_ver()[0] == "glibc")
        True
        >>> glibc_function("no_such_function") is None
        True
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn: Callable[..., int] = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    return fn
