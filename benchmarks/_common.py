"""Shared benchmark machinery: timing with warm-up, readable tables, one JSON line of figures."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def block(x: Any) -> Any:
    """Waits for JAX results (``block_until_ready``); a no-op for anything else.

    A list or tuple whose first item is not a JAX array is returned as it is: ``block_until_ready``
    would walk every item (some 13 ms for a reference's list of 20 k floats), time that would be
    charged to the callee. Without JAX imported, no result can be pending.
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return x
    plain = isinstance(x, list | tuple) and not hasattr(x, "_fields")
    if plain and (not x or not isinstance(x[0], jax.Array)):
        return x
    return jax.block_until_ready(x)


def time_call(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1, min_time: float = 0.0) -> float:
    """Best-of-``repeat`` wall time in seconds of ``fn()`` after ``warmup`` calls (results blocked)."""
    for _ in range(warmup):
        block(fn())
    best = float("inf")
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        n = 0
        while True:
            block(fn())
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / n)
    return best


def time_compile(fn: Callable[[], Any]) -> float:
    """Wall time of the first call (trace + compile + run), reported apart from steady-state time."""
    start = time.perf_counter()
    block(fn())
    return time.perf_counter() - start


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Prints a plain aligned table."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for k, row in enumerate(cells):
        print("  ".join(c.rjust(w) if k else c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if x == 0 or 1e-3 <= abs(x) < 1e6:
            return f"{x:,.3f}"
        return f"{x:.3e}"
    return str(x)


def emit_json(figures: dict[str, Any]) -> None:
    """Prints the single closing JSON line of a benchmark."""
    print(json.dumps(figures, sort_keys=True))


def single_thread() -> dict[str, int | None]:
    """Pins every contender to one thread where it can be told; returns the thread counts set.

    torch gets ``set_num_threads(1)``; BLAS / OpenMP pools through ``threadpoolctl`` when it is
    installed (numpy's own ufuncs, ``bincount`` and ``take`` are single-threaded anyway). CPU time
    (:func:`time_cpu_rounds`) counts every thread of the process, so a contender that still runs
    several threads gains nothing from them in the ratios.
    """
    counts: dict[str, int | None] = {"torch": None, "blas": None}
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.set_num_threads(1)
        counts["torch"] = torch.get_num_threads()
    try:
        import threadpoolctl
    except ImportError:
        pass
    else:
        threadpoolctl.threadpool_limits(1)
        counts["blas"] = 1
    return counts


def time_cpu_rounds(
    contenders: dict[str, Callable[[], Any]], *, rounds: int = 15, warmup: int = 1, min_time: float = 0.0
) -> dict[str, float]:
    """Best-of-``rounds`` CPU seconds (``time.process_time``) per call of each contender.

    The contenders run in interleaved rounds (each once per round, in turn, results blocked), so a
    change of load on a shared machine hits them alike; each contender's best round counts. A round
    repeats a call until ``min_time`` CPU seconds have passed and divides by the calls made.
    """
    for fn in contenders.values():
        for _ in range(warmup):
            block(fn())
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(max(rounds, 1)):
        for name, fn in contenders.items():
            start = time.process_time()
            n = 0
            while True:
                block(fn())
                n += 1
                elapsed = time.process_time() - start
                if elapsed >= min_time:
                    break
            best[name] = min(best[name], elapsed / n)
    return best
