"""A batch streamed in parts: which debates each part holds, and when it is complete (I/O-free).

With ``stream_minibatches = m`` (:class:`~adapters.training.config.TrainConfig`) an RL batch of D debates is
cut into P = ``num_substeps × m`` parts of fixed sizes: part j holds ``bounds[j + 1] − bounds[j]`` debates,
``bounds[j] = ⌊j·D / P⌋`` (sizes differ by at most one). Which debates, ``stream_order`` says:

- ``"completion"`` (tinker-cookbook's streaming): the debates in the order they ended, part j the
  ``bounds[j]``-th to the ``bounds[j + 1]``-th to end. A part is complete as soon as that many debates
  have ended, so the slowest debate holds back only the last part.
- ``"dataset"``: debates ``bounds[j] : bounds[j + 1]`` of the batch; a part is complete once each of its
  debates and of every earlier part has ended. Which debates a part holds never depends on timing, so a
  run is reproducible to the bit where the service is (the local one), at the price of waiting for the
  slowest debate of each part.

Either way parts complete in order and each debate is in exactly one part, listed in dataset order.

Examples:
    >>> tracker = PartTracker(part_bounds(5, 2), order="dataset")
    >>> tracker.bounds
    [0, 2, 5]
    >>> [list(tracker.add(i, f"debate {i}")) for i in (3, 1, 0, 2, 4)]
    [[], [], [0], [], [1]]
    >>> tracker.part(0)
    ['debate 0', 'debate 1']
    >>> tracker = PartTracker(part_bounds(5, 2), order="completion")
    >>> [list(tracker.add(i, f"debate {i}")) for i in (3, 1, 0, 2, 4)]
    [[], [0], [], [], [1]]
    >>> tracker.part(0), tracker.results()[0]
    (['debate 1', 'debate 3'], 'debate 0')
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Final, Generic, Literal, TypeAlias, TypeVar

__all__ = ["STREAM_ORDERS", "PartTracker", "StreamOrder", "part_bounds"]

T = TypeVar("T")
StreamOrder: TypeAlias = Literal["completion", "dataset"]
STREAM_ORDERS: Final[tuple[StreamOrder, ...]] = ("completion", "dataset")


def part_bounds(num_debates: int, num_parts: int) -> list[int]:
    """``[⌊j·D / P⌋ for j in 0 … P]``: where each part starts, then D.

    Raises:
        ValueError: fewer debates than parts (a part would be empty), or ``num_parts < 1``.
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if num_debates < num_parts:
        raise ValueError(f"{num_debates} debates cannot fill {num_parts} parts: each part needs one")
    return [j * num_debates // num_parts for j in range(num_parts + 1)]


class PartTracker(Generic[T]):
    """The ended debates of one streamed batch, and how many of its parts are complete.

    Args:
        bounds: :func:`part_bounds` of the batch.
        order: ``"completion"`` or ``"dataset"`` (keyword; see the module docstring).

    Raises:
        ValueError: an unknown order.
    """

    def __init__(self, bounds: Sequence[int], *, order: StreamOrder = "completion") -> None:
        if order not in STREAM_ORDERS:
            raise ValueError(f"order must be one of {list(STREAM_ORDERS)}, got {order!r}")
        self.bounds = list(bounds)
        self.order = order
        self._results: list[T | None] = [None] * self.bounds[-1]
        self._ended: list[int] = []  # debate indices in the order they ended
        self._ended_in_part = [0] * (len(self.bounds) - 1)  # dataset order: ended debates per part
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
            raise ValueError(f"debate {index} ended twice")
        self._results[index] = result
        self._ended.append(index)
        first = self.complete
        if self.order == "completion":
            while self.complete < self.num_parts and len(self._ended) >= self.bounds[self.complete + 1]:
                self.complete += 1
        else:
            self._ended_in_part[bisect_right(self.bounds, index) - 1] += 1
            while self.complete < self.num_parts and self._ended_in_part[self.complete] == self._size(
                self.complete
            ):
                self.complete += 1
        return range(first, self.complete)

    def part(self, j: int) -> list[T]:
        """The results of part ``j``, in dataset order.

        Raises:
            ValueError: a part that is not complete.
        """
        if not 0 <= j < self.complete:
            raise ValueError(f"part {j} is not complete ({self.complete} of {self.num_parts} are)")
        if self.order == "completion":
            members = sorted(self._ended[self.bounds[j] : self.bounds[j + 1]])
        else:
            members = list(range(self.bounds[j], self.bounds[j + 1]))
        return [r for r in (self._results[i] for i in members) if r is not None]

    def results(self) -> list[T]:
        """Every result, in dataset order.

        Raises:
            ValueError: the batch is not complete.
        """
        if self.complete < self.num_parts:
            raise ValueError(f"{self.complete} of {self.num_parts} parts are complete")
        return [r for r in self._results if r is not None]

    def _size(self, j: int) -> int:
        return self.bounds[j + 1] - self.bounds[j]
