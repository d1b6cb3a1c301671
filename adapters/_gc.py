"""Fewer passes of Python's cyclic garbage collector while a command runs.

``score``, ``report`` and ``train`` allocate hundreds of thousands of short-lived container objects
(debates, parsed turns, records) that reference counting frees; almost none of them forms a cycle the
collector must find. With the default thresholds (700, 10, 10) the collector runs every few hundred
net allocations and walks the young objects, and every tenth time the older ones too. What it saves
(interleaved pairs against the default thresholds): ``score`` of 30 k generated debates 11 % of its CPU
time (median of 7 pairs, 1.09-1.16 ×), ``report`` of 10 k 5.5 % (1.03-1.09 ×); ``python -m benchmarks
train``'s step moved within noise (0.96 ×, 4 pairs), where ``train`` enters it too.

``score`` goes further (:data:`CHUNK_GC_THRESHOLDS`): the collector counts net allocations (a freed
object takes one back), and a chunk of 2,048 debates holds fewer than 250,000 container objects at its
fullest, all freed when the next chunk starts; so no pass runs at all. At :data:`GC_THRESHOLDS` a young
pass of 14-30 ms ran about twice a chunk. ``score --out`` of 30 k generated debates, CPU time, 4
interleaved rounds: 1.06 × (1.05-1.10) at :data:`GC_THRESHOLDS`, 1.23 × (1.18-1.28) at the defaults.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

__all__ = ["CHUNK_GC_THRESHOLDS", "GC_THRESHOLDS", "fewer_gc_passes"]

GC_THRESHOLDS: Final = (50_000, 20, 20)
"""``gc.set_threshold`` while a command runs: a young-generation pass every 50,000 net allocations."""

CHUNK_GC_THRESHOLDS: Final = (250_000, 20, 20)
"""``score``'s thresholds: above what one chunk of debates holds alive, so that a streamed run has no
pass per chunk; cyclic garbage (a few objects per thousand debates) still goes once it adds up."""


@contextlib.contextmanager
def fewer_gc_passes(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> Iterator[None]:
    """``thresholds`` for the duration, the previous thresholds after (however the block ends).

    Examples:
        >>> import gc
        >>> before = gc.get_threshold()
        >>> with fewer_gc_passes():
        ...     gc.get_threshold()
        (50000, 20, 20)
        >>> gc.get_threshold() == before
        True
    """
    previous = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
