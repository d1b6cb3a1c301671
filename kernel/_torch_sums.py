"""torch's CPU float32 summation order, emulated in numpy (for the reference arithmetics).

torch 2.x sums a float32 row neither sequentially nor pairwise: it keeps 4 independent accumulators
(``row_sum``), over 8-lane vectors when the row is long enough, and flushes them in a cascade of
levels (``multi_row_sum``). The references recorded in the golden vectors (tinker-cookbook, verl, DrMAS,
TRL) took their group sums that way, so reproducing their float32 results bit for bit needs the same
order. Exact for rows below 32768 samples (beyond that torch splits a reduction across threads).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__: list[str] = []

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]


def torch_segment_sums(x: FloatArray, h: IntArray, size: int) -> FloatArray:
    """float32 sum of each group's samples (in sample order) as torch's CPU ``sum`` orders it."""
    out = np.zeros(size, np.float32)
    order = np.argsort(h, kind="stable")
    counts = np.bincount(h, minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    for k in np.unique(counts[counts > 0]):
        groups = np.flatnonzero(counts == k)
        rows = order[starts[groups][:, None] + np.arange(k)]
        out[groups] = torch_sum_rows(x[rows].astype(np.float32))
    return out


_TORCH_LANES = 8  # float32 lanes of torch's vectorised CPU sum (256-bit kernel)
_TORCH_ILP = 4  # independent accumulators of torch's ``row_sum``


def torch_sum_rows(x: FloatArray) -> Any:
    """float32 sum of each row of ``x`` (``[M, K]``) in the order of torch's CPU reduction kernel.

    Rows shorter than the vector width are summed as 4 interleaved accumulators (the remainder added
    to the first), then combined; longer rows run the same scheme over 8-lane vectors, then add the
    scalar tail and the 8 lanes left to right. Accumulators of long rows are flushed in a cascade of
    levels every 16 steps.
    """
    m, k = x.shape
    x = x.astype(np.float32, copy=False)
    if k < _TORCH_LANES:
        return _ilp_sum([x[:, j] for j in range(k)], (m,))
    num_vec = k // _TORCH_LANES
    vectors = [x[:, _TORCH_LANES * i : _TORCH_LANES * (i + 1)] for i in range(num_vec)]
    lanes = _ilp_sum(vectors, (m, _TORCH_LANES))
    total: FloatArray = np.zeros(m, np.float32)
    for j in range(num_vec * _TORCH_LANES, k):
        total = total + x[:, j]
    for lane in range(_TORCH_LANES):
        total = total + lanes[:, lane]
    return total


def _ilp_sum(items: Sequence[FloatArray], shape: tuple[int, ...]) -> FloatArray:
    """torch ``row_sum``: items read as rows of 4, summed per column by a cascade, then folded."""
    full = len(items) // _TORCH_ILP
    acc: list[FloatArray] = [np.zeros(shape, np.float32) for _ in range(_TORCH_ILP)]
    if full:
        acc = _cascade_sum([items[_TORCH_ILP * i : _TORCH_ILP * (i + 1)] for i in range(full)], shape)
    for j in range(full * _TORCH_ILP, len(items)):
        acc[0] = acc[0] + items[j]
    total = acc[0]
    for j in range(1, _TORCH_ILP):
        total = total + acc[j]
    return total


def _cascade_sum(steps: Sequence[Sequence[FloatArray]], shape: tuple[int, ...]) -> list[FloatArray]:
    """torch ``multi_row_sum``: 4 levels of accumulators; level 0 is pushed up every 2^power steps."""
    levels = 4
    size = len(steps)
    power = max(4, (math.ceil(math.log2(size)) if size > 1 else 0) // levels)
    step, mask = 1 << power, (1 << power) - 1
    acc: list[list[FloatArray]] = [
        [np.zeros(shape, np.float32) for _ in range(_TORCH_ILP)] for _ in range(levels)
    ]
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = [a + b for a, b in zip(acc[0], steps[i], strict=True)]
            i += 1
        for lvl in range(1, levels):
            acc[lvl] = [a + b for a, b in zip(acc[lvl], acc[lvl - 1], strict=True)]
            acc[lvl - 1] = [np.zeros(shape, np.float32) for _ in range(_TORCH_ILP)]
            if i & (mask << (lvl * power)):
                break
    while i < size:
        acc[0] = [a + b for a, b in zip(acc[0], steps[i], strict=True)]
        i += 1
    for lvl in range(1, levels):
        acc[0] = [a + b for a, b in zip(acc[0], acc[lvl], strict=True)]
    return acc[0]
