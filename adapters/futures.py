"""Small futures that satisfy :class:`adapters.tinker.protocol.Future`, for services written in-repo.

- :class:`CompletedFuture`: a result (or an exception) known at submission; awaiting it never suspends.
  The fake service's core computes every answer at once, so its shell returns these.
- :class:`DeferredFuture`: a :class:`CompletedFuture` whose outcome is a pure computation run once, on
  the first ``result()`` (or :meth:`DeferredFuture.force`): the fake's samples, which the fault
  injector's latency then computes while the caller waits rather than when it submits.
- :class:`AwaitableFuture`: wraps a coroutine, an ``asyncio`` task or future, or a
  ``concurrent.futures.Future`` (work running in a thread). A coroutine runs on the first await; every
  later await gets the same outcome. A cancelled awaiter cancels the work (there is no one else to end
  it), and the future then reports ``asyncio.CancelledError`` to everyone.

Both can be awaited any number of times, like the SDK's ``APIFuture``; ``result_async(timeout)`` raises
``TimeoutError`` when the result does not arrive in time (the work goes on for a later await).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["AwaitableFuture", "CompletedFuture", "DeferredFuture", "as_awaitable", "completed", "failed"]

T = TypeVar("T")


class CompletedFuture(Generic[T]):
    """A future whose outcome is already known: a value, or an exception raised on every await.

    Examples:
        >>> import asyncio
        >>> asyncio.run(completed(3).result_async())
        3
        >>> async def main():
        ...     try:
        ...         await failed(KeyError("k"))
        ...     except KeyError as e:
        ...         return repr(e)
        >>> asyncio.run(main())
        "KeyError('k')"
    """

    __slots__ = ("_error", "_value")

    def __init__(self, value: T | None = None, *, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def result(self, timeout: float | None = None) -> T:
        """The value, synchronously (raises the stored exception instead, if any)."""
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    async def result_async(self, timeout: float | None = None) -> T:
        """The value (``timeout`` is accepted for the protocol and never needed)."""
        return self.result()

    def __await__(self) -> Generator[Any, None, T]:
        return self.result_async().__await__()

    def done(self) -> bool:
        """Always True."""
        return True


class DeferredFuture(CompletedFuture[T]):
    """A :class:`CompletedFuture` computed on demand: ``work()`` runs once, on the first :meth:`result`
    or :meth:`force`; its value, or the ``Exception`` it raised, is then the outcome of every await.
    ``work`` must not depend on when it runs (a pure function of what it captured at submission).

    Examples:
        >>> import asyncio
        >>> calls = []
        >>> fut = DeferredFuture(lambda: calls.append(1) or len(calls))
        >>> len(calls)  # nothing ran yet
        0
        >>> asyncio.run(fut.result_async()), fut.result(), len(calls)  # ran once
        (1, 1, 1)
        >>> bad = DeferredFuture(lambda: 1 // 0)
        >>> bad.force()  # runs it; the error waits for an await
        >>> bad.result()
        Traceback (most recent call last):
        ZeroDivisionError: integer division or modulo by zero
    """

    __slots__ = ("_work",)

    def __init__(self, work: Callable[[], T]) -> None:
        super().__init__()
        self._work: Callable[[], T] | None = work

    def force(self) -> None:
        """Runs the work now if it has not run (errors are kept for :meth:`result`)."""
        work, self._work = self._work, None
        if work is not None:
            try:
                self._value = work()
            except Exception as e:
                self._error = e

    def result(self, timeout: float | None = None) -> T:
        """The value, computed on the first call (raises the work's exception instead, if any)."""
        self.force()
        return super().result(timeout)


def completed(value: T) -> CompletedFuture[T]:
    """A :class:`CompletedFuture` holding ``value``."""
    return CompletedFuture(value)


def failed(error: BaseException) -> CompletedFuture[Any]:
    """A :class:`CompletedFuture` that raises ``error`` on every await."""
    if not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception, got {type(error).__name__}")
    return CompletedFuture(None, error=error)


class AwaitableFuture(Generic[T]):
    """A future over pending work: a coroutine (run on first await), an asyncio future, or a thread's future.

    Args:
        work: a coroutine, an ``asyncio.Future`` / ``asyncio.Task``, or a ``concurrent.futures.Future``.

    Raises:
        TypeError: if ``work`` is none of these.

    Examples:
        >>> import asyncio
        >>> async def answer():
        ...     await asyncio.sleep(0)
        ...     return 42
        >>> async def main():
        ...     fut = AwaitableFuture(answer())
        ...     return await fut, await fut.result_async(timeout=1.0)
        >>> asyncio.run(main())
        (42, 42)
    """

    __slots__ = ("_coro", "_future")

    def __init__(
        self, work: Coroutine[Any, Any, T] | asyncio.Future[T] | concurrent.futures.Future[T]
    ) -> None:
        self._coro: Coroutine[Any, Any, T] | None = None
        self._future: asyncio.Future[T] | concurrent.futures.Future[T] | None = None
        if isinstance(work, asyncio.Future | concurrent.futures.Future):
            self._future = work
        elif asyncio.iscoroutine(work):
            self._coro = work
        else:
            raise TypeError(
                f"work must be a coroutine, an asyncio or a concurrent future, got {type(work).__name__}"
            )

    def _started(self) -> asyncio.Future[T]:
        if self._coro is not None:
            self._future = asyncio.ensure_future(self._coro)
            self._coro = None
        fut = self._future
        assert fut is not None
        if isinstance(fut, concurrent.futures.Future):
            return asyncio.wrap_future(fut)
        return fut

    async def result_async(self, timeout: float | None = None) -> T:
        """The result; ``TimeoutError`` after ``timeout`` seconds (the work is then left running)."""
        fut = self._started()
        if timeout is None:
            return await fut
        return await asyncio.wait_for(asyncio.shield(fut), timeout)

    def __await__(self) -> Generator[Any, None, T]:
        return self.result_async().__await__()

    def __del__(self) -> None:
        if self._coro is not None:  # never awaited: close it quietly instead of a RuntimeWarning
            self._coro.close()

    def done(self) -> bool:
        """Whether the work has finished (a coroutine not yet awaited has not)."""
        return self._future is not None and self._future.done()

    def cancel(self) -> bool:
        """Cancels the work (closes a coroutine that never started). True if something was cancelled."""
        if self._coro is not None:
            self._coro.close()
            self._coro = None
            never: concurrent.futures.Future[T] = concurrent.futures.Future()
            never.cancel()
            self._future = never
            return True
        return self._future is not None and self._future.cancel()


def as_awaitable(value: Awaitable[T]) -> AwaitableFuture[T]:
    """Wraps any awaitable (an SDK future included) in an :class:`AwaitableFuture`."""

    async def _wait() -> T:
        return await value

    return AwaitableFuture(_wait())
