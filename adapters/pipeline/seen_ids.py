"""The ids of the debates read so far, each with the line of its first use: how a stream scored chunk by
chunk finds an id that an earlier chunk used, exactly, in memory that grows by about 2 bytes an id.

An id is kept as a 128-bit BLAKE2b digest and an int64 line (24 bytes). The newest ids sit in memory as
sorted runs (a binary counter's: an id is copied O(log n) times); at ``memory_ids`` of them they are
written, as one sorted run, to an unnamed temporary file (in ``TMPDIR``: gone with the process). A run on
disk keeps in memory only a Bloom filter of its digests (16 bits an id, 8 probes: a false positive for one
id in one run has probability ≈ (1 − e^{−1/2})⁸ ≈ 6 × 10⁻⁴) and the first digest of each ``block`` of
records; an id its filter admits is looked up by reading that one block (``block × 24`` bytes). Memory:
the held runs (``memory_ids × 24`` bytes at most, 1.5 MiB by default, about twice that while they are
written) and 2 + 16 / ``block`` bytes an id on disk (2.1 MiB for 10⁶ ids, against 23 MiB all in memory).
Time: a lookup reads the disk only for an id seen before (a duplicate, rare) or let through by a filter;
each run on disk adds one filter test an id (15 runs at 10⁶ ids).

Two distinct ids share a digest with a probability below 2⁻¹²⁸ a pair (below 10⁻²⁵ for 10⁹ ids).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import IO, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["SeenIds"]

_RECORD = np.dtype([("key", "S16"), ("line", "<i8")])
"""One id on disk: its digest and the line of its first use (24 bytes)."""
_PROBES = 8
"""Bloom filter probes an id."""
_BITS_PER_ID = 16
"""Bloom filter bits an id (rounded up to a power of two a run)."""


class _DiskRun(NamedTuple):
    """A sorted run of records in the temporary file, with what stays in memory to search it."""

    offset: int  # byte offset of the first record
    length: int  # records
    fence: npt.NDArray[np.bytes_]  # the first digest of each block
    bloom: npt.NDArray[np.uint8]  # the filter's bits (a power of two of them), packed little-endian


class SeenIds:
    """The ids added so far, each with the line of its first use (see the module docstring for memory).

    Args:
      memory_ids: ids held in memory before they go to disk as one run (≥ 0; 0: every ``add`` writes).
      block: records a disk run is read by on a lookup (≥ 1).

    Use it as a context manager, or call :meth:`close`, to remove the temporary file at once.

    Examples:
      >>> with SeenIds() as seen:
      ...     seen.add(["a", "b"], [1, 2])
      ...     seen.first_lines(["b", "c"]).tolist()
      [2, 0]
    """

    __slots__ = ("_block", "_disk", "_file", "_held", "_memory_ids", "_runs")

    def __init__(self, *, memory_ids: int = 2**16, block: int = 256) -> None:
        for name, value, least in (("memory_ids", memory_ids, 0), ("block", block, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        self._memory_ids = memory_ids
        self._block = block
        self._runs: list[tuple[npt.NDArray[np.bytes_], npt.NDArray[np.int64]]] = []
        self._held = 0
        self._disk: list[_DiskRun] = []
        self._file: IO[bytes] | None = None

    def __enter__(self) -> SeenIds:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Removes the temporary file (the ids on disk are forgotten). Idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._disk = []

    def __len__(self) -> int:
        return self._held + sum(run.length for run in self._disk)

    def first_lines(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """Per id, the line of its first use, or 0 when it was not added."""
        out = np.zeros(len(ids), np.int64)
        if not ids or not (self._runs or self._disk):
            return out
        digests = _digests(ids)
        for keys, lines in self._runs:
            at = np.minimum(np.searchsorted(keys, digests), keys.shape[0] - 1)
            hit = keys[at] == digests
            out[hit] = lines[at[hit]]
        for run in self._disk:
            for i in np.flatnonzero((out == 0) & _bloom_admits(run, digests)).tolist():
                out[i] = self._line_on_disk(run, digests[i])
        return out

    def add(self, ids: Sequence[str], lines: Sequence[int]) -> None:
        """Adds ids not added before (each once) with the lines of their first use."""
        if len(ids) != len(lines):
            raise ValueError(f"ids and lines must have the same length, got {len(ids)} and {len(lines)}")
        if not ids:
            return
        if self._held and self._held + len(ids) > self._memory_ids:
            self._spill()  # a run on disk holds at most memory_ids ids (or one add's)
        digests = _digests(ids)
        order = np.argsort(digests, kind="stable")
        run = (digests[order], np.asarray(lines, dtype=np.int64)[order])
        del digests, order
        while self._runs and self._runs[-1][0].shape[0] <= run[0].shape[0]:
            keys, lines_ = self._runs.pop()
            at = np.searchsorted(keys, run[0])
            run = (np.insert(keys, at, run[0]), np.insert(lines_, at, run[1]))
        self._runs.append(run)
        self._held += len(ids)
        if self._held >= self._memory_ids:
            self._spill()

    def _spill(self) -> None:
        """Writes the runs held in memory to the file as one sorted run (what it holds meanwhile: about
        twice the held runs' 24 bytes an id, and 2 bytes an id for the filter)."""
        runs, self._runs, self._held = self._runs, [], 0
        keys = np.concatenate([k for k, _ in runs])
        lines = np.concatenate([v for _, v in runs])
        del runs
        order = np.argsort(keys, kind="stable")
        keys, lines = keys[order], lines[order]
        del order
        offset = len(self) * _RECORD.itemsize  # after every run on disk (none is held now)
        run = _DiskRun(offset, keys.shape[0], keys[:: self._block].copy(), _bloom(keys))
        records = np.empty(keys.shape[0], _RECORD)
        records["key"], records["line"] = keys, lines
        del keys, lines
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="debate-kernel-ids-")
        data = records.view(np.uint8).data
        written = 0
        while written < len(data):
            written += os.pwrite(self._file.fileno(), data[written:], offset + written)
        self._disk.append(run)

    def _line_on_disk(self, run: _DiskRun, digest: np.bytes_) -> int:
        """The line of ``digest`` in ``run``, or 0: one block read."""
        b = int(np.searchsorted(run.fence, digest, side="right")) - 1
        if b < 0:
            return 0
        assert self._file is not None
        start = b * self._block
        count = min(self._block, run.length - start)
        size = count * _RECORD.itemsize
        data = os.pread(self._file.fileno(), size, run.offset + start * _RECORD.itemsize)
        if len(data) != size:
            raise OSError(f"the ids' temporary file gave {len(data)} bytes where {size} were written")
        records = np.frombuffer(data, _RECORD)
        at = int(np.searchsorted(records["key"], digest))
        return int(records["line"][at]) if at < count and records["key"][at] == digest else 0


def _digests(ids: Sequence[str]) -> npt.NDArray[np.bytes_]:
    blake2b = hashlib.blake2b
    return np.array(
        [blake2b(i.encode("utf-8", "surrogatepass"), digest_size=16).digest() for i in ids], dtype="S16"
    )


def _bloom_bits(n: int) -> int:
    """Filter bits for ``n`` ids: the power of two ≥ ``_BITS_PER_ID × n``, at least 64."""
    return max(64, 1 << max(0, _BITS_PER_ID * n - 1).bit_length())


def _probes(digests: npt.NDArray[np.bytes_], mask: int) -> Iterator[npt.NDArray[np.uint64]]:
    """The filter positions of each digest, one probe at a time: (h₁ + i·h₂) mod 2ᵇ for i < probes,
    with h₁, h₂ its two 64-bit halves (h₂ made odd so the probes differ)."""
    halves = digests.view("<u8").reshape(-1, 2)
    h1, h2 = halves[:, 0], halves[:, 1] | np.uint64(1)
    m = np.uint64(mask)
    for i in range(_PROBES):
        yield (h1 + np.uint64(i) * h2) & m


def _bloom(digests: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint8]:
    """The Bloom filter of ``digests`` (contiguous) in :func:`_bloom_bits` bits, packed little-endian."""
    bits = _bloom_bits(digests.shape[0])
    on = np.zeros(bits, bool)
    for positions in _probes(digests, bits - 1):
        on[positions] = True
    return np.packbits(on, bitorder="little")


def _bloom_admits(run: _DiskRun, digests: npt.NDArray[np.bytes_]) -> npt.NDArray[np.bool_]:
    """Per digest (contiguous), whether ``run``'s filter admits it (always when it is in the run)."""
    admits = np.ones(digests.shape[0], bool)
    for positions in _probes(digests, run.bloom.shape[0] * 8 - 1):
        byte = run.bloom[positions >> np.uint64(3)]
        admits &= ((byte >> (positions & np.uint64(7)).astype(np.uint8)) & 1) == 1
    return admits
