"""The ASGI app of ``debate-kernel serve``: Tinker's HTTP API over :class:`adapters.serve.state.ServeCore`.

Each route decodes its body with the SDK's own request type (pydantic ``model_validate``; the
forward/backward protobuf with :func:`adapters.serve.wire.parse_forward_backward_request`), asks the
core, and encodes the SDK response type (JSON, or protobuf for ``SampleResponse`` and
``ForwardBackwardOutput``, the two types the SDK reads only as protobuf).

Futures: the work of a request answered with a future runs on one worker thread, in submission order
(so one training run's requests keep the order the SDK sends them in, and the event loop stays free
for heartbeats and polls). Concurrent samples of one sampler run together (:class:`_Worker`), in
batches of :data:`BATCH_ROWS` rows: requests of one row each (a debate's turn) never need a program of
a row count outside those five, however many come together. ``retrieve_future`` waits up to
:data:`POLL_SECONDS` for the result and otherwise answers ``try_again``; a failed job answers
``RequestFailedResponse``, which the SDK raises as ``tinker.RequestFailedError`` with the message. A
request refused outright gets a 4xx whose JSON body is a ``RequestFailedResponse`` too (the SDK raises
``tinker.BadRequestError``, ``NotFoundError`` … with the message in it); an unknown route gets a 404
of the same shape.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pydantic
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tinker import types
from tinker.types.try_again_response import TryAgainResponse

from adapters._gc import fewer_gc_passes
from adapters.serve import wire
from adapters.serve.state import Job, ServeCore, ServeError, failure
from adapters.tinker.memory import freed_memory_kept

__all__ = ["BATCH_ROWS", "POLL_SECONDS", "create_app", "row_batches"]

POLL_SECONDS = 20.0
"""How long ``retrieve_future`` waits for a result before answering ``try_again`` (the SDK's own
timeout for the poll is 45 s)."""

BATCH_ROWS = (64, 32, 16, 8, 4)
"""The rows of a batched sampling call: sizes the local service keeps as they are (at least its
``_MIN_ROWS``, powers of two up to its ``_MAX_ROWS``), so that whatever number of requests come together,
the batches need only these five row shapes. The requests left with fewer rows than the smallest run
together, padded to it (a request left alone runs as it is)."""

GATHER_QUIET_S = 0.010
"""A sample waits until no request has come for this long, so that the samples a client sends at once
(its concurrent debates' turns) arrive before their batch starts: they reach the server one by one,
each after the client has read its debate's previous turn. At 3 ms (and at most 30 ms) a shortened default
run made 43-47 sampling calls, 11-16 of them of one row, against 12 in process; at 10 ms it makes 25, and
its RL steps and evaluations take what the in-process client's take (medians of 3 interleaved runs on the
shared 2-core machine: RL step 1.23 s against 1.30 at 3 ms and 1.22 in process; evaluation 3.33 s against
3.49 and 3.17)."""

GATHER_MAX_S = 0.06
"""The longest a sample waits for others."""

M = TypeVar("M", bound=pydantic.BaseModel)
Handler = Callable[[Request], Awaitable[Response]]


def _json(model: pydantic.BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", exclude_none=True), status_code=status)


def _error(message: str, status: int) -> JSONResponse:
    body = types.RequestFailedResponse(error=message, category=types.RequestErrorCategory.User)
    return _json(body, status)


async def _body(request: Request, kind: type[M]) -> M:
    """The JSON body as the SDK request type ``kind``; a body that is not one is a 400."""
    try:
        return kind.model_validate(await request.json())
    except (ValueError, pydantic.ValidationError) as exc:
        raise ServeError(f"invalid {kind.__name__} body: {exc}") from None


def _guarded(handler: Handler) -> Handler:
    """Checks the API key header and turns the core's refusals and any other exception into the SDK's
    error shape: the core's :class:`ServeError` with its status, bad input 400, anything else 500 (with
    ``x-should-retry: false``: a fault here does not go away by asking again)."""

    async def endpoint(request: Request) -> Response:
        if not request.headers.get("x-api-key"):
            return _error("missing X-API-Key header (any key starting with 'tml-' will do)", 401)
        try:
            return await handler(request)
        except ServeError as exc:
            return _error(exc.message, exc.status)
        except Exception as exc:  # bad input found by the local service (400), or a fault (500); no traceback
            answer = failure(exc)
            user = answer.category == types.RequestErrorCategory.User
            response = _json(answer, 400 if user else 500)
            response.headers["x-should-retry"] = "false"
            return response

    return endpoint


def _result(value: Any) -> Response:
    """A finished job's answer: protobuf for the two types the SDK reads that way, JSON otherwise."""
    if isinstance(value, types.SampleResponse):
        return Response(wire.encode_sample_response(value), media_type=wire.PROTO_CONTENT_TYPE)
    if isinstance(value, types.ForwardBackwardOutput):
        return Response(wire.encode_forward_backward_output(value), media_type=wire.PROTO_CONTENT_TYPE)
    assert isinstance(value, pydantic.BaseModel), f"a job returned {type(value).__name__}"
    return _json(value)


def row_batches(rows: list[int]) -> list[list[int]]:
    """Consecutive requests of ``rows[i]`` rows each, split into batches: each batch the largest of
    :data:`BATCH_ROWS` that the rows left can fill (a request is never split, and one too big for the
    size goes alone); the requests left once fewer rows remain than the smallest size make one last
    batch, which the local service pads to that size (so a debate step's tail of 1–3 turns is one call
    of a shape already compiled, not one call each).

    Args:
        rows: each request's rows (``num_samples``), in submission order.

    Returns:
        The requests' indices, batch by batch, in submission order.

    Examples:
        >>> [len(b) for b in row_batches([1] * 31)]
        [16, 8, 4, 3]
        >>> row_batches([2, 3, 1, 5])
        [[0, 1, 2], [3]]
        >>> row_batches([1, 2])  # fewer rows than any size: one padded call
        [[0, 1]]
    """
    out: list[list[int]] = []
    start = 0
    while start < len(rows):
        left = sum(rows[start:])
        size = next((b for b in BATCH_ROWS if b <= left), left)  # the tail: the rows left, together
        batch, taken = [start], rows[start]
        while start + len(batch) < len(rows) and taken + rows[start + len(batch)] <= size:
            taken += rows[start + len(batch)]
            batch.append(start + len(batch))
        out.append(batch)
        start += len(batch)
    return out


class _Worker:
    """Runs jobs on one thread in submission order and keeps their futures until retrieved.

    Samples run together: the worker takes every sample job waiting at the head of the queue (after
    :data:`GATHER_QUIET_S` without a new request, at most :data:`GATHER_MAX_S`), and runs each sampler's
    in :func:`row_batches`, each batch in one event loop, where the local service samples its requests in
    one call. Each sampler's requests are made in submission order, so they are numbered (and their
    random streams drawn) as one by one. Any other job runs alone.

    ``try_again_first`` injects a fault for tests: every future answers ``try_again`` that many times
    before its result, as a busy server would."""

    def __init__(self, *, poll_seconds: float, try_again_first: int) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-worker")
        self.pending: dict[str, concurrent.futures.Future[Any]] = {}
        self.delays: dict[str, int] = {}
        self.poll_seconds, self.try_again_first = poll_seconds, try_again_first
        self.waiting: collections.deque[tuple[Job, concurrent.futures.Future[Any]]] = collections.deque()
        self.lock = threading.Lock()  # the waiting queue: appended by the event loop, taken by the worker
        self.arrivals = 0

    def submit(self, job: Job) -> JSONResponse:
        """Queues ``job`` (its work runs on the worker thread) and answers its future."""
        outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.pending[job.future.request_id] = outcome
        self.delays[job.future.request_id] = self.try_again_first
        with self.lock:
            self.waiting.append((job, outcome))
            self.arrivals += 1
        self.pool.submit(self._run_next)  # one call per job; a call finding the queue empty does nothing
        return _json(job.future)

    def _take_samples(self) -> list[tuple[Job, concurrent.futures.Future[Any]]]:
        """The sample jobs at the head of the queue (up to the first job of another kind)."""
        taken = []
        with self.lock:
            while self.waiting and self.waiting[0][0].together is not None:
                taken.append(self.waiting.popleft())
        return taken

    def _run_next(self) -> None:
        """On the worker thread: the oldest waiting job, or the samples waiting at the queue's head."""
        with self.lock:
            if not self.waiting:
                return
            alone = self.waiting.popleft() if self.waiting[0][0].together is None else None
        if alone is not None:
            _settle(alone[1], alone[0].work)
            return
        start, seen = time.monotonic(), -1
        while seen != self.arrivals and time.monotonic() - start < GATHER_MAX_S:
            seen = self.arrivals
            time.sleep(GATHER_QUIET_S)
        by_sampler: dict[str | None, list[tuple[Job, concurrent.futures.Future[Any]]]] = {}
        for item in self._take_samples():
            by_sampler.setdefault(item[0].batch, []).append(item)
        for same in by_sampler.values():
            for batch in row_batches([job.rows for job, _ in same]):
                if len(batch) == 1:
                    _settle(same[batch[0]][1], same[batch[0]][0].work)
                else:
                    asyncio.run(_together([same[i] for i in batch]))

    async def call(self, work: Callable[[], M]) -> M:
        """Runs ``work`` after every job submitted before it and waits for it."""
        return await asyncio.wrap_future(self.pool.submit(work))

    async def retrieve(self, request_id: str) -> Response:
        future = self.pending.get(request_id)
        if future is None:
            raise ServeError(f"unknown request_id {request_id!r}", status=404)
        await asyncio.wait({asyncio.wrap_future(future)}, timeout=self.poll_seconds)
        if not future.done() or self.delays.get(request_id, 0) > 0:
            self.delays[request_id] = self.delays.get(request_id, 0) - 1
            return _json(TryAgainResponse(request_id=request_id, queue_state="active"))
        self.pending.pop(request_id, None)
        self.delays.pop(request_id, None)
        exc = future.exception()
        return _json(failure(exc)) if exc is not None else _result(future.result())


def _settle(outcome: concurrent.futures.Future[Any], work: Callable[[], Any]) -> None:
    """``outcome`` gets what ``work()`` returns, or the exception it raises."""
    try:
        outcome.set_result(work())
    except Exception as exc:
        outcome.set_exception(exc)


async def _together(batch: list[tuple[Job, concurrent.futures.Future[Any]]]) -> None:
    """Runs a batch's jobs in one event loop, their requests made in queue order; each outcome is its
    own job's (a request that fails, fails alone)."""
    jobs = [job.together() for job, _ in batch if job.together is not None]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for (_, outcome), result in zip(batch, results, strict=True):
        if isinstance(result, BaseException):
            outcome.set_exception(result)
        else:
            outcome.set_result(result)


def _routes(core: ServeCore, worker: _Worker) -> list[Route]:
    """The API: one thin handler per SDK call."""

    async def client_config(request: Request) -> Response:
        return _json(core.client_config())

    async def dynamic_config(request: Request) -> Response:
        return _json(types.ClientDynamicConfigResponse())

    async def healthz(request: Request) -> Response:
        return _json(types.HealthResponse(status="ok"))

    async def capabilities(request: Request) -> Response:
        return _json(core.capabilities())

    async def create_session(request: Request) -> Response:
        return _json(core.create_session(await _body(request, types.CreateSessionRequest)))

    async def heartbeat(request: Request) -> Response:
        return _json(core.heartbeat(await _body(request, types.SessionHeartbeatRequest)))

    async def finish_session(request: Request) -> Response:
        core.finish_session(request.path_params["session_id"])
        return Response(status_code=204)

    async def telemetry(request: Request) -> Response:
        return _json(types.TelemetryResponse(status="accepted"))

    async def create_model(request: Request) -> Response:
        return worker.submit(core.create_model(await _body(request, types.CreateModelRequest)))

    async def get_info(request: Request) -> Response:
        return _json(core.get_info(await _body(request, types.GetInfoRequest)))

    async def forward_backward(request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompress(body)
        try:
            fb, forward_only = wire.parse_forward_backward_request(body)
        except ValueError as exc:
            raise ServeError(str(exc)) from None
        return worker.submit(core.forward_backward(fb, forward_only=forward_only))

    async def optim_step(request: Request) -> Response:
        return worker.submit(core.optim_step(await _body(request, types.OptimStepRequest)))

    async def save_weights(request: Request) -> Response:
        return worker.submit(core.save_weights(await _body(request, types.SaveWeightsRequest)))

    async def load_weights(request: Request) -> Response:
        return worker.submit(core.load_weights(await _body(request, types.LoadWeightsRequest)))

    async def save_for_sampler(request: Request) -> Response:
        req = await _body(request, types.SaveWeightsForSamplerRequest)
        return worker.submit(core.save_weights_for_sampler(req))

    async def create_sampling_session(request: Request) -> Response:
        req = await _body(request, types.CreateSamplingSessionRequest)
        return _json(await worker.call(lambda: core.create_sampling_session(req)))

    async def get_sampler(request: Request) -> Response:
        return _json(core.get_sampler(request.path_params["sampler_id"]))

    async def asample(request: Request) -> Response:
        return worker.submit(core.asample(await _body(request, types.SampleRequest)))

    async def retrieve_future(request: Request) -> Response:
        req = await _body(request, types.FutureRetrieveRequest)
        return await worker.retrieve(req.request_id)

    async def list_checkpoints(request: Request) -> Response:
        return _json(core.list_checkpoints(request.path_params["model_id"]))

    async def list_user_checkpoints(request: Request) -> Response:
        limit, offset = request.query_params.get("limit", "100"), request.query_params.get("offset", "0")
        if not (limit.isdigit() and offset.isdigit()):
            raise ServeError(f"limit and offset must be integers >= 0, got {limit!r} and {offset!r}")
        return _json(core.list_user_checkpoints(int(limit), int(offset)))

    table: list[tuple[str, Handler, str]] = [
        ("/client/config", client_config, "POST"),
        ("/client/dynamic_config", dynamic_config, "POST"),
        ("/healthz", healthz, "GET"),
        ("/get_server_capabilities", capabilities, "GET"),
        ("/create_session", create_session, "POST"),
        ("/session_heartbeat", heartbeat, "POST"),
        ("/sessions/{session_id}/finish", finish_session, "POST"),
        ("/telemetry", telemetry, "POST"),
        ("/create_model", create_model, "POST"),
        ("/get_info", get_info, "POST"),
        ("/forward_backward", forward_backward, "POST"),
        ("/optim_step", optim_step, "POST"),
        ("/save_weights", save_weights, "POST"),
        ("/load_weights", load_weights, "POST"),
        ("/save_weights_for_sampler", save_for_sampler, "POST"),
        ("/create_sampling_session", create_sampling_session, "POST"),
        ("/samplers/{sampler_id}", get_sampler, "GET"),
        ("/asample", asample, "POST"),
        ("/retrieve_future", retrieve_future, "POST"),
        ("/training_runs/{model_id}/checkpoints", list_checkpoints, "GET"),
        ("/checkpoints", list_user_checkpoints, "GET"),
    ]
    return [Route(f"/api/v1{path}", _guarded(h), methods=[method]) for path, h, method in table]


async def _not_found(request: Request, exc: Exception) -> Response:
    """Unknown routes and methods, in the SDK's error shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    return _error(f"debate-kernel serve does not support {request.method} {request.url.path}", status)


def create_app(core: ServeCore, *, poll_seconds: float = POLL_SECONDS, try_again_first: int = 0) -> Starlette:
    """The Starlette app serving ``core`` (its worker thread stops when the app shuts down).

    While the app runs, Python's cyclic collector makes fewer passes (:func:`adapters._gc.fewer_gc_passes`,
    as ``train`` runs its loop): requests leave many short-lived objects that reference counting frees,
    and with the default thresholds a shortened default run of ``benchmarks local --only paths`` made
    about 130 passes in the server, and in two runs of three a full one, which took 0.6-1.1 s with the
    interpreter lock held (the worker could not start a computation, nor the event loop answer, meanwhile).
    And glibc keeps freed memory for reuse (:func:`adapters.tinker.memory.freed_memory_kept`, which
    ``train``'s loop enters in its own process): without it, XLA's large buffers were faulted in afresh on
    every call, and a warm-start ``forward_backward`` of the default run took 0.70-0.78 s here against
    0.56-0.67 s in process (7.0 s of system time over 14 steps, against 1.8 s with it).

    Args:
        core: the sessions, runs and samplers behind the API.
        poll_seconds: how long ``retrieve_future`` waits for a result before answering ``try_again``.
        try_again_first: a fault for tests: answer ``try_again`` this many times to every future first.

    Returns:
        An ASGI app for uvicorn (or any ASGI server).
    """
    worker = _Worker(poll_seconds=poll_seconds, try_again_first=try_again_first)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with fewer_gc_passes(), freed_memory_kept():
            yield
        worker.pool.shutdown(wait=False, cancel_futures=True)

    return Starlette(
        routes=_routes(core, worker),
        exception_handlers={404: _not_found, 405: _not_found},
        lifespan=lifespan,
    )
