"""Route-level faults for tests: ``debate-kernel serve --fault CALL:KIND:COUNT[:AFTER]``.

:class:`FaultMiddleware` is an ASGI middleware in front of the server's app: requests AFTER + 1 …
AFTER + COUNT of CALL (AFTER defaults to 0) get KIND instead of their answer, so the SDK meets what a
misbehaving server sends, and the client's boundary (:mod:`adapters.tinker.boundary`) meets whatever the
SDK does not absorb itself. A faulted request never reaches the core: nothing it asked for is done (on
``retrieve_future``, the work it polls for has run all the same). :class:`FaultPlan`, with no I/O, says
which request gets which fault; every fault injected is logged as one line, ``injected fault: KIND on
CALL request N``.

Calls (:data:`CALLS`), by the SDK's names: ``create_session``, ``session_heartbeat``, ``create_model``,
``get_info``, ``forward_backward`` (``forward`` too: one route), ``optim_step``, ``save_state`` and
``load_state`` (routes ``/save_weights`` and ``/load_weights``), ``save_weights_for_sampler`` (also
``save_weights_and_get_sampling_client``), ``create_sampling_session``, ``sample``, ``compute_logprobs``
(a sample request with ``prompt_logprobs``), ``retrieve_future`` (every poll of every future).

Kinds (:data:`KINDS`):

- ``429``, ``500``, ``503``: that HTTP status, with a ``RequestFailedResponse`` body (the SDK's
  ``RateLimitError``, ``InternalServerError``);
- ``drop``: the connection closes after the response's headers, before its body (the SDK's
  ``APIConnectionError``);
- ``failed-server``, ``failed-user``: for calls answered with a future, a future whose result is a
  ``RequestFailedResponse`` of that category (the SDK's ``RequestFailedError``); on ``retrieve_future``,
  that answer to the poll.
- ``paused-capacity``, ``paused-rate-limit`` (``retrieve_future`` only): the poll is answered
  ``try_again`` with that ``queue_state`` (``paused_capacity``, ``paused_rate_limit``), as Tinker 0.38
  answers while a request waits in a paused queue; the request itself goes on, and a later poll gets it.

What the SDK 0.38 does with each: it retries HTTP 429 and 5xx and dropped connections itself (a submission
up to 5 minutes with exponential backoff from 1 s, a poll without end), so those rarely reach its caller;
a failed future is raised at once as ``RequestFailedError``, which the boundary retries (``Server``
category) or not (``User``); a ``try_again`` is polled again, its queue state reported to the client's
queue-state observer (``paused``, then ``active`` with the result), which the boundary watches: a pause
is waited out, counted in ``service/pauses/STATE``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Final, Literal

import pydantic
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tinker import types
from tinker.types.try_again_response import TryAgainResponse

__all__ = [
    "CALLS",
    "FUTURE_CALLS",
    "KINDS",
    "DroppedConnection",
    "FaultMiddleware",
    "FaultPlan",
    "RouteFault",
    "call_of",
    "parse_fault",
]

_PREFIX = "/api/v1"

_ROUTES: Final[dict[str, str]] = {
    "/create_session": "create_session",
    "/session_heartbeat": "session_heartbeat",
    "/create_model": "create_model",
    "/get_info": "get_info",
    "/forward_backward": "forward_backward",
    "/optim_step": "optim_step",
    "/save_weights": "save_state",
    "/load_weights": "load_state",
    "/save_weights_for_sampler": "save_weights_for_sampler",
    "/create_sampling_session": "create_sampling_session",
    "/asample": "sample",
    "/retrieve_future": "retrieve_future",
}

CALLS: Final[tuple[str, ...]] = (*_ROUTES.values(), "compute_logprobs")
"""The calls a fault can name (see the module docstring)."""

FUTURE_CALLS: Final = frozenset(
    {
        "create_model",
        "forward_backward",
        "optim_step",
        "save_state",
        "load_state",
        "save_weights_for_sampler",
        "sample",
        "compute_logprobs",
        "retrieve_future",
    }
)
"""The calls answered with a future (or, ``retrieve_future``, with its result): the only ones that can
get ``failed-server`` or ``failed-user``."""

KINDS: Final[tuple[str, ...]] = (
    "429",
    "500",
    "503",
    "drop",
    "failed-server",
    "failed-user",
    "paused-capacity",
    "paused-rate-limit",
)
"""The kinds of fault (see the module docstring)."""

_PAUSED: Final[dict[str, Literal["paused_capacity", "paused_rate_limit"]]] = {
    "paused-capacity": "paused_capacity",
    "paused-rate-limit": "paused_rate_limit",
}
"""The ``queue_state`` of each pause kind."""

_CATEGORY = {
    "failed-server": types.RequestErrorCategory.Server,
    "failed-user": types.RequestErrorCategory.User,
}


@dataclasses.dataclass(frozen=True, slots=True)
class RouteFault:
    """One ``--fault``: requests ``after + 1 … after + count`` of ``call`` get ``kind``."""

    call: str
    kind: str
    count: int
    after: int = 0


def parse_fault(text: str) -> RouteFault:
    """``CALL:KIND:COUNT[:AFTER]`` (the ``--fault`` flag) as a :class:`RouteFault`.

    Raises:
        ValueError: an unknown call or kind (naming the known ones), a count that is not an int ≥ 1, an
            AFTER that is not an int ≥ 0, a ``failed-*`` kind on a call not answered with a future, or a
            ``paused-*`` kind on a call other than ``retrieve_future``.

    Examples:
        >>> parse_fault("sample:500:2")
        RouteFault(call='sample', kind='500', count=2, after=0)
        >>> parse_fault("save_state:failed-server:2:1")
        RouteFault(call='save_state', kind='failed-server', count=2, after=1)
        >>> parse_fault("retrieve_future:paused-capacity:3")
        RouteFault(call='retrieve_future', kind='paused-capacity', count=3, after=0)
    """
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"--fault: {text!r} is not CALL:KIND:COUNT[:AFTER]")
    call, kind, *numbers = (p.strip() for p in parts)
    if call not in CALLS:
        raise ValueError(f"--fault: unknown call {call!r} in {text!r}; calls: {', '.join(CALLS)}")
    if kind not in KINDS:
        raise ValueError(f"--fault: unknown kind {kind!r} in {text!r}; kinds: {', '.join(KINDS)}")
    if kind in _CATEGORY and call not in FUTURE_CALLS:
        raise ValueError(f"--fault: {call} is not answered with a future, so it cannot get {kind}")
    if kind in _PAUSED and call != "retrieve_future":
        raise ValueError(f"--fault: {kind} is an answer to a poll: its call is retrieve_future, not {call}")
    if not all(n.isdigit() for n in numbers) or int(numbers[0]) < 1:
        raise ValueError(f"--fault: {text!r} needs a COUNT >= 1 and an AFTER >= 0 (integers)")
    return RouteFault(call, kind, int(numbers[0]), int(numbers[1]) if len(numbers) > 1 else 0)


class FaultPlan:
    """Which request gets which fault: counts the requests of each call, no I/O.

    Args:
        faults: the faults; for a request that two of them cover, the first listed.

    Examples:
        >>> plan = FaultPlan([parse_fault("sample:500:1:1"), parse_fault("sample:drop:1")])
        >>> [plan.take("sample") for _ in range(3)]  # doctest: +ELLIPSIS
        [RouteFault(... kind='drop'...), RouteFault(... kind='500'...), None]
        >>> plan.injected
        [('sample', 'drop', 1), ('sample', '500', 2)]
    """

    def __init__(self, faults: Sequence[RouteFault]) -> None:
        self.faults = tuple(faults)
        self.seen: dict[str, int] = {}
        self.injected: list[tuple[str, str, int]] = []

    def take(self, call: str) -> RouteFault | None:
        """Counts one request of ``call``; the fault it gets, or None."""
        index = self.seen.get(call, 0)
        self.seen[call] = index + 1
        for fault in self.faults:
            if fault.call == call and fault.after <= index < fault.after + fault.count:
                self.injected.append((call, fault.kind, index + 1))
                return fault
        return None


def call_of(path: str, body: bytes) -> str | None:
    """The call a request makes (a :data:`CALLS` name), from its path and (for ``/asample``) its body.

    Examples:
        >>> call_of("/api/v1/asample", b'{"prompt_logprobs": true}'), call_of("/api/v1/save_weights", b"")
        ('compute_logprobs', 'save_state')
    """
    call = _ROUTES.get(path.removeprefix(_PREFIX)) if path.startswith(_PREFIX) else None
    if call == "sample" and _json_field(body, "prompt_logprobs"):
        return "compute_logprobs"
    return call


def _json_field(body: bytes, key: str) -> object:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get(key) if isinstance(data, dict) else None


class DroppedConnection(Exception):
    """Raised after a response's headers to make the ASGI server close the connection (the ``drop``
    fault); its log record is filtered out of uvicorn's error log."""


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], DroppedConnection))


class FaultMiddleware:
    """Injects a :class:`FaultPlan`'s faults in front of an ASGI app (see the module docstring).

    Args:
        app: the server's app.
        plan: which requests get which fault.
        log: receives one line per fault injected (default: none).
    """

    def __init__(self, app: ASGIApp, plan: FaultPlan, *, log: Callable[[str], object] | None = None) -> None:
        self.app, self.plan, self.log = app, plan, log
        self._failed: dict[str, types.RequestFailedResponse] = {}  # our futures' request ids -> answers
        self._ids = itertools.count()
        uvicorn_log = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, _QuietDrops) for f in uvicorn_log.filters):
            uvicorn_log.addFilter(_QuietDrops())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or call_of(scope["path"], b"") is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        replay = _replaying(body, receive)
        call = call_of(scope["path"], body)
        assert call is not None
        if call == "retrieve_future":
            answer = self._failed.pop(str(_json_field(body, "request_id")), None)
            if answer is not None:  # a future of ours: not counted as a poll of the server's
                await _json(answer)(scope, replay, send)
                return
        fault = self.plan.take(call)
        if fault is None:
            await self.app(scope, replay, send)
            return
        what = f"{fault.kind} on {call} request {self.plan.seen[call]}"
        if self.log is not None:
            self.log(f"injected fault: {what}")
        error = types.RequestFailedResponse(
            error=f"injected fault: {what}",
            category=_CATEGORY.get(fault.kind, types.RequestErrorCategory.Server),
        )
        if fault.kind in _PAUSED:  # the request waits in a paused queue; a later poll gets its result
            request_id = str(_json_field(body, "request_id"))
            paused = TryAgainResponse(request_id=request_id, queue_state=_PAUSED[fault.kind])
            await _json(paused)(scope, replay, send)
            return
        if fault.kind == "drop":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]}
            )
            raise DroppedConnection(what)
        if fault.kind not in _CATEGORY:
            await _json(error, int(fault.kind))(scope, replay, send)
        elif call == "retrieve_future":
            await _json(error)(scope, replay, send)
        else:
            request_id = f"fault-{next(self._ids)}"
            self._failed[request_id] = error
            await _json(types.UntypedAPIFuture(request_id=request_id))(scope, replay, send)


def _json(model: pydantic.BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", exclude_none=True), status_code=status)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then what the server sends next."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
