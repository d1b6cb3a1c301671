"""A batch streamed in parts: which parts have all their debates finished (I/O-free).

With ``stream_minibatches = m`` (:class:`~adapters.tinker.config.TrainConfig`) an RL batch of D debates is
cut into P = ``num_substeps × m`` parts in dataset order: part j holds the debates
``bounds[j] : bounds[j + 1]``, ``bounds[j] = ⌊j·D / P⌋`` (sizes differ by at most one). Debates finish in
any order; a part is *complete* once every debate of it and of every earlier part has finished. Parts
therefore complete in order, and which debates a part holds never depends on the order they finished in:
a streamed step trains the same datums as the whole batch, cut at the same places.

Examples:
    >>> tracker = PartTracker(part_bounds(5, 2))
    >>> tracker.bounds
    [0, 2, 5]
    >>> [list(tracker.add(i, f"debate {i}")) for i in (3, 1, 0, 2, 4)]
    [[], [], [0], [], [1]]
    >>> tracker.part(0)
    ['debate 0', 'debate 1']
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["PartTracker", "part_bounds"]

T = TypeVar("T")


def part_bounds(num_debates: int, num_parts: int) -> list[int]:
    """``[⌊j·D / P⌋ for j in 0 … P]``: the first debate of each part, then D.

    Raises:
        ValueError: fewer debates than parts (a part would be empty), or ``num_parts < 1``.
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if num_debates < num_parts:
        raise ValueError(f"{num_debates} debates cannot fill {num_parts} parts: each part needs one")
    return [j * num_debates // num_parts for j in range(num_parts + 1)]


class PartTracker(Generic[T]):
    """The finished debates of one streamed batch, and how many of its parts are complete.

    Args:
        bounds: :func:`part_bounds` of the batch.
    """

    def __init__(self, bounds: Sequence[int]) -> None:
        self.bounds = list(bounds)
        self._results: list[T | None] = [None] * self.bounds[-1]
        self._finished = [0] * (len(self.bounds) - 1)
        self.complete = 0
        """Parts complete so far (parts ``0 … complete − 1``)."""

    @property
    def num_parts(self) -> int:
        return len(self.bounds) - 1

    def add(self, index: int, result: T) -> range:
        """Records debate ``index``'s result; returns the parts it completes (maybe none, maybe several).

        Raises:
            ValueError: an index outside the batch, or one recorded already.
        """
        if not 0 <= index < len(self._results):
            raise ValueError(f"index must lie in [0, {len(self._results)}), got {index}")
        if self._results[index] is not None:
            raise ValueError(f"debate {index} finished twice")
        self._results[index] = result
        self._finished[bisect_right(self.bounds, index) - 1] += 1
        first = self.complete
        while self.complete < self.num_parts and self._finished[self.complete] == self._size(self.complete):
            self.complete += 1
        return range(first, self.complete)

    def part(self, j: int) -> list[T]:
        """The results of part ``j``, in dataset order.

        Raises:
            ValueError: a part that is not complete.
        """
        if not 0 <= j < self.complete:
            raise ValueError(f"part {j} is not complete ({self.complete} of {self.num_parts} are)")
        return [r for r in self._results[self.bounds[j] : self.bounds[j + 1]] if r is not None]

    def _size(self, j: int) -> int:
        return self.bounds[j + 1] - self.bounds[j]
