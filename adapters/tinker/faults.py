"""Fault injection for any service satisfying the protocol: a wrapper, not flags in the fake.

A :class:`FaultPlan` (no I/O, no clock, no state) says which fault, if any, hits the k-th call of each
method; :func:`with_faults` wraps a service client so that every training and sampling client it hands
out obeys the plan. The k-th call of a method is counted across all clients of the wrapped service.

Faults (:data:`FAULT_KINDS`):

- ``"error"``: the request fails with :class:`InjectedError` (an error the boundary does not retry) and
  never reaches the service.
- ``"hang"``: the future never completes (the request never reaches the service); only a timeout or a
  cancellation ends the wait.
- ``"cancel"``: the future reports ``asyncio.CancelledError`` although nobody cancelled the caller.
- ``"delay"``: the request runs at once (submission order is kept) but its result arrives after
  ``delay`` seconds; different delays give out-of-order completion.
- ``"crash"``: the process "dies" at the call: :class:`SimulatedCrash` (a ``BaseException``, so no
  ``except Exception`` swallows it) is raised synchronously, before the request (``after=False``), or
  after the service did the work but before the caller learns of it (``after=True``: a checkpoint
  written but never reported, an optimizer step applied but never acknowledged).

- ``"pause"``: the service's queue is paused for ``delay`` seconds before the request reaches it, as
  tinker 0.38 reports one: the client's ``on_queue_state_change`` hears the ``variant`` state
  (:data:`QUEUE_STATES`, ``paused_capacity`` by default) when the wait starts and ``active`` when it ends,
  then the request runs and its reply arrives. Nothing failed: a pause is waited out
  (:meth:`adapters.tinker.boundary.Boundary.watch`).
- ``"sdk_error"``: the request fails with a real SDK exception, named by ``variant``
  (:data:`SDK_ERRORS`: ``rate_limit``, ``server_error``, ``connection``, ``timeout``,
  ``request_failed_server``, ``request_failed_unknown``, ``request_failed_user``, ``billing``,
  ``bad_request``, ``promise_expired``), and never reaches the service.
- ``"bad_reply"``: the request runs, and its reply is malformed as ``variant`` says
  (:data:`BAD_REPLIES`): a sample with NaN / −inf / missing / too few logprobs, ids outside the vocabulary,
  an empty sequence or none; a ``compute_logprobs`` with a NaN, one entry short, or a number first; a
  forward_backward without outputs, with a NaN loss or without metrics; a ``save_state`` whose file is
  half-written after the service reported success.

A plan with ``unfrozen=True`` breaks a contract instead of single calls: its samplers are not frozen
snapshots but follow their training client's current weights (each sample or ``compute_logprobs`` is
answered from a new snapshot), the service that the start-of-run contract check
(:mod:`adapters.tinker.contract`) must catch before a KL penalty or off-policy sampling relies on it.

A crash "between forward_backward and optim_step" is ``{("optim_step", k): Fault("crash")}``; a crash
"in the middle of a checkpoint" is ``{("save_state", k): Fault("crash", after=True)}``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx
import numpy as np
import tinker
from tinker import types
from tinker.lib.api_future_impl import QueueState
from tinker.lib.retryable_exception import RetryableException

from adapters.futures import AwaitableFuture, CompletedFuture, DeferredFuture
from adapters.tinker.contract import inflight_refusal
from adapters.tinker.protocol import CustomLossFn, Future, SamplingClient, ServiceClient, TrainingClient
from adapters.training.checkpoint import local_file

__all__ = [
    "BAD_REPLIES",
    "FAULT_KINDS",
    "METHODS",
    "QUEUE_STATES",
    "SDK_ERRORS",
    "Fault",
    "FaultPlan",
    "FaultyService",
    "InjectedError",
    "SimulatedCrash",
    "with_faults",
    "wrap_sampler",
]

FaultKind = Literal["error", "hang", "cancel", "delay", "crash", "sdk_error", "bad_reply", "pause"]
FAULT_KINDS: Final[tuple[FaultKind, ...]] = (
    "error",
    "hang",
    "cancel",
    "delay",
    "crash",
    "sdk_error",
    "bad_reply",
    "pause",
)
"""The kinds of fault a plan can inject (``sdk_error``, ``bad_reply`` and ``pause`` only explicitly)."""

QUEUE_STATES: Final = ("paused_capacity", "paused_rate_limit")
"""The variants of a ``"pause"`` fault: the queue state the service reports (tinker 0.38's
``TryAgainResponse.queue_state`` values other than ``active``)."""

SDK_ERRORS: Final = (
    "rate_limit",
    "server_error",
    "connection",
    "timeout",
    "request_failed_server",
    "request_failed_unknown",
    "request_failed_user",
    "billing",
    "bad_request",
    "promise_expired",
)
"""The variants of an ``"sdk_error"`` fault: which SDK exception the request raises (``promise_expired``:
the SDK's ``RetryableException``, what a future raises when the service no longer holds its request,
HTTP 410, for the request to be sent again)."""

BAD_REPLIES: Final[Mapping[str, tuple[str, ...]]] = {
    "sample": (
        "nan_logprobs",
        "neginf_logprobs",
        "no_logprobs",
        "short_logprobs",
        "ids_outside",
        "empty",
        "no_sequences",
    ),
    "compute_logprobs": ("nan", "short", "first_not_none"),
    "forward_backward": ("no_outputs", "nan_loss", "no_metrics"),
    "forward_backward_custom": ("no_outputs", "nan_loss", "no_metrics"),
    "save_state": ("half_written",),
}
"""The variants of a ``"bad_reply"`` fault, by method."""

METHODS: Final = (
    "sample",
    "compute_logprobs",
    "forward_backward",
    "forward_backward_custom",
    "optim_step",
    "save_state",
    "save_weights_and_get_sampling_client",
    "create_lora_training_client",
    "create_training_client_from_state_with_optimizer",
    "create_sampling_client",
)
"""The protocol methods a plan can target."""


class InjectedError(RuntimeError):
    """A service error raised by an ``"error"`` fault: an exception the boundary does not know, so not
    retried (a sample's ends its debate, a training call's ends the run); ``"sdk_error"`` faults raise the
    SDK's own classes, transient ones included."""


class SimulatedCrash(BaseException):
    """The process died here (a ``"crash"`` fault). Catch it only where a test plays the restart."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: its kind, the delay of a ``"delay"``, and whether a ``"crash"`` strikes after the work."""

    kind: FaultKind
    delay: float = 0.0
    after: bool = False
    variant: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"kind must be one of {list(FAULT_KINDS)}, got {self.kind!r}")
        if self.kind == "sdk_error" and self.variant not in SDK_ERRORS:
            raise ValueError(
                f"an sdk_error's variant must be one of {list(SDK_ERRORS)}, got {self.variant!r}"
            )
        if self.kind == "pause" and self.variant not in ("", *QUEUE_STATES):
            raise ValueError(f"a pause's variant must be one of {list(QUEUE_STATES)}, got {self.variant!r}")
        every = sorted({v for vs in BAD_REPLIES.values() for v in vs})
        if self.kind == "bad_reply" and self.variant not in every:
            raise ValueError(f"a bad_reply's variant must be one of {every}, got {self.variant!r}")
        if not self.delay >= 0.0:
            raise ValueError(f"delay must be >= 0, got {self.delay!r}")


def _unit(seed: int, method: str, index: int) -> tuple[float, float]:
    digest = hashlib.sha256(f"{seed}|{method}|{index}".encode()).digest()
    a, b = np.frombuffer(digest[:16], dtype="<u8")
    return float(a) / 2.0**64, float(b) / 2.0**64


@dataclass(frozen=True)
class FaultPlan:
    """Which fault hits the k-th call of each method: explicit entries first, then seeded random rates.

    Attributes:
        at: explicit faults by ``(method, k)`` (k counts from 0).
        seed: seeds the random faults (a pure function of seed, method and k).
        rates: probability of each fault kind per call of the methods in ``methods`` (kinds listed in
            :data:`FAULT_KINDS` order, their rates summed; crash is never random).
        max_delay: a random ``"delay"`` is uniform in ``[0, max_delay]`` seconds.
        methods: the methods random faults apply to (default: ``sample`` only).
        latency: a fixed delay in seconds per method for every call that draws no other fault (a
            service with constant latency, e.g. ``{"sample": 0.05, "forward_backward": 0.2}``).
        unfrozen: the samplers made by ``save_weights_and_get_sampling_client`` follow the training
            client's current weights instead of keeping the snapshot (the snapshots they read are taken
            through the wrapped client and are not counted as calls).
        compute_per_token: seconds of compute per token of a ``forward_backward`` /
            ``forward_backward_custom`` request (its datums' model inputs), the requests of a method
            computed one after another as a training client's queue is: a request's delay is the wait
            for those submitted before it plus its own compute, plus any latency or delay fault. A
            streamed step's early parts are then computed while later debates are still sampled.

    Examples:
        >>> plan = FaultPlan(at={("optim_step", 1): Fault("crash")})
        >>> plan.fault_for("optim_step", 0) is None, plan.fault_for("optim_step", 1).kind
        (True, 'crash')
        >>> p = FaultPlan(seed=3, rates={"error": 0.5})
        >>> [p.fault_for("sample", k) is not None for k in range(6)] == [
        ...     p.fault_for("sample", k) is not None for k in range(6)]
        True
    """

    at: Mapping[tuple[str, int], Fault] = field(default_factory=dict)
    seed: int = 0
    rates: Mapping[str, float] = field(default_factory=dict)
    max_delay: float = 0.01
    methods: Sequence[str] = ("sample",)
    latency: Mapping[str, float] = field(default_factory=dict)
    compute_per_token: Mapping[str, float] = field(default_factory=dict)
    unfrozen: bool = False

    def __post_init__(self) -> None:
        for method, k in self.at:
            if method not in METHODS:
                raise ValueError(f"at: method must be one of {list(METHODS)}, got {method!r}")
            fault = self.at[(method, k)]
            if fault.kind == "bad_reply" and fault.variant not in BAD_REPLIES.get(method, ()):
                raise ValueError(
                    f"at: a bad_reply of {method} must be one of {list(BAD_REPLIES.get(method, ()))}, "
                    f"got {fault.variant!r}"
                )
            if k < 0:
                raise ValueError(f"at: call index must be >= 0, got {k}")
        for kind, rate in self.rates.items():
            if kind not in FAULT_KINDS or kind in ("crash", "sdk_error", "bad_reply", "pause"):
                raise ValueError(f"rates: kind must be one of error, hang, cancel, delay, got {kind!r}")
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"rates[{kind!r}] must lie in [0, 1], got {rate!r}")
        if sum(self.rates.values()) > 1.0 + 1e-12:
            raise ValueError(f"rates must sum to at most 1, got {sum(self.rates.values())}")
        for method, seconds in self.latency.items():
            if method not in METHODS:
                raise ValueError(f"latency: method must be one of {list(METHODS)}, got {method!r}")
            if not seconds >= 0.0:
                raise ValueError(f"latency[{method!r}] must be >= 0, got {seconds!r}")
        for method, seconds in self.compute_per_token.items():
            if method not in ("forward_backward", "forward_backward_custom"):
                raise ValueError(
                    "compute_per_token: method must be forward_backward or forward_backward_custom, "
                    f"got {method!r}"
                )
            if not seconds >= 0.0:
                raise ValueError(f"compute_per_token[{method!r}] must be >= 0, got {seconds!r}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"methods must be among {list(METHODS)}, got {unknown}")

    def fault_for(self, method: str, index: int) -> Fault | None:
        """The fault of call ``index`` of ``method``: explicit, else random, else fixed latency, else None."""
        explicit = self.at.get((method, index))
        if explicit is not None:
            return explicit
        if method in self.methods and self.rates:
            u, v = _unit(self.seed, method, index)
            edge = 0.0
            for kind in FAULT_KINDS:
                edge += self.rates.get(kind, 0.0)
                if u < edge:
                    return Fault(kind, delay=v * self.max_delay if kind == "delay" else 0.0)
        seconds = self.latency.get(method, 0.0)
        return Fault("delay", delay=seconds) if seconds > 0 else None


async def _never() -> Any:
    await asyncio.Event().wait()


def _clock() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # submitted outside a loop: the loop's default clock is this one
        return time.monotonic()


async def _later(
    deadline: float, inner: Future[Any], submitted: float = 0.0, record: Callable[[float], None] | None = None
) -> Any:
    """``inner``'s result, not before ``deadline`` (on the loop's clock, counted from submission)."""
    await asyncio.sleep(max(0.0, deadline - _clock()))
    try:
        return await inner
    finally:
        if record is not None:
            record(_clock() - submitted)


def _delayed(
    submitted: float, deadline: float, inner: Future[Any], record: Callable[[float], None] | None = None
) -> AwaitableFuture[Any]:
    """``inner``'s outcome at ``deadline``. An outcome known at submission (a :class:`CompletedFuture`,
    as the fake's) is delivered by one timer callback on a plain asyncio future: no task per request,
    and the awaiting task wakes on the timer's own turn of the loop, as it would on a network reply. A
    :class:`DeferredFuture` (the fake's samples) is computed halfway to its deadline, while its caller
    waits, as a remote service computes during its latency, not when the request is sent. Pending work,
    or a submission outside a running loop, goes through :func:`_later`. ``record`` gets the delay as
    delivered (from ``submitted`` to the moment the outcome is set; the loop's timers fire late by up to a
    millisecond or so)."""
    if isinstance(inner, CompletedFuture):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            fut: asyncio.Future[Any] = loop.create_future()
            if isinstance(inner, DeferredFuture):
                loop.call_at(submitted + (deadline - submitted) / 2, inner.force)
            loop.call_at(deadline, _settle, fut, inner, submitted, record)
            return AwaitableFuture(fut)
    return AwaitableFuture(_later(deadline, inner, submitted, record))


def _settle(
    fut: asyncio.Future[Any],
    inner: CompletedFuture[Any],
    submitted: float = 0.0,
    record: Callable[[float], None] | None = None,
) -> None:
    if fut.done():  # its awaiter cancelled it
        return
    if record is not None:
        record(_clock() - submitted)
    try:
        fut.set_result(inner.result())
    except Exception as e:
        fut.set_exception(e)


def _cancelled() -> AwaitableFuture[Any]:
    fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut.cancel()
    return AwaitableFuture(fut)


class FaultyService:
    """The state shared by the wrappers of one service: call counters and the faults injected so far."""

    def __init__(self, inner: ServiceClient, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan
        self.calls: Counter[str] = Counter()
        self.injected: list[tuple[str, int, Fault]] = []
        self.delivered: defaultdict[str, list[float]] = defaultdict(list)
        """Per method, the delay of each delayed call as delivered (seconds from submission)."""
        self.busy_until: defaultdict[str, float] = defaultdict(float)
        """Per method with ``compute_per_token``: when the service finishes the requests so far."""

    def call(
        self,
        method: str,
        run: Any,
        wrap: Any = None,
        tokens: Callable[[], int] | None = None,
        client: Any = None,
    ) -> Any:
        """Runs ``run()`` (which submits the request and returns its future) under the plan's fault;
        ``tokens()`` sizes the request for ``compute_per_token`` (called only when the method has one: it
        walks the whole batch, which would delay every submission); ``client`` hears a pause's queue
        states."""
        index = self.calls[method]
        self.calls[method] += 1
        fault = self.plan.fault_for(method, index)
        if fault is not None:
            self.injected.append((method, index, fault))
        if fault is None or fault.kind == "delay":
            submitted = _clock()
            queued = self._computed(method, tokens, submitted)
            inner = run()
            if wrap is not None:
                inner = _Mapped(inner, wrap)
            if fault is None and not queued:
                return inner
            # The delay runs from submission, as a request's latency does, not from the first await (a
            # coroutine starts only when the loop next gets to it); an in-process service's own compute
            # counts inside it, as a real service computes within its latency.
            delay = queued + (fault.delay if fault is not None else 0.0)
            return _delayed(submitted, submitted + delay, inner, self.delivered[method].append)
        if fault.kind == "error":
            return CompletedFuture(error=InjectedError(f"injected error in {method} call {index}"))
        if fault.kind == "sdk_error":
            return CompletedFuture(
                error=sdk_error(fault.variant, f"injected {fault.variant} in {method} call {index}")
            )
        if fault.kind == "bad_reply":
            return _Mapped(run(), lambda reply: _malformed(method, fault.variant, reply))
        if fault.kind == "pause":
            return AwaitableFuture(_paused(fault, run, wrap, client))
        if fault.kind == "hang":
            return AwaitableFuture(_never())
        if fault.kind == "cancel":
            return _cancelled()
        if fault.after:
            run()
        raise SimulatedCrash(f"simulated crash in {method} call {index}")

    def _computed(self, method: str, tokens: Callable[[], int] | None, now: float) -> float:
        """Seconds from ``now`` until the service has computed this request after those before it."""
        per_token = self.plan.compute_per_token.get(method, 0.0)
        if not per_token:
            return 0.0
        size = tokens() if tokens is not None else 0
        self.busy_until[method] = max(now, self.busy_until[method]) + per_token * size
        return self.busy_until[method] - now


async def _paused(fault: Fault, run: Any, wrap: Any, client: Any) -> Any:
    """A request held ``fault.delay`` seconds by a paused queue, the states reported to ``client`` as the
    SDK reports them (paused on a ``try_again`` poll, ``active`` with the result), then run."""
    report = getattr(client, "on_queue_state_change", None) or (lambda state, reason: None)
    report(QueueState(fault.variant or "paused_capacity"), None)
    try:
        await asyncio.sleep(fault.delay)
    finally:
        report(QueueState.ACTIVE, None)
    inner = run()
    return await (_Mapped(inner, wrap) if wrap is not None else inner)


def sdk_error(variant: str, message: str) -> Exception:
    """The SDK exception of an ``"sdk_error"`` fault (a real ``tinker`` class, with an httpx request and
    response where the class needs them).

    Examples:
        >>> type(sdk_error("rate_limit", "slow down")).__name__, sdk_error("rate_limit", "x").status_code
        ('RateLimitError', 429)
    """
    request = httpx.Request("POST", "http://127.0.0.1/api/v1/fault")

    def status(code: int) -> httpx.Response:
        return httpx.Response(code, request=request)

    category = types.RequestErrorCategory
    errors: dict[str, Callable[[], Exception]] = {
        "rate_limit": lambda: tinker.RateLimitError(message, response=status(429), body=None),
        "server_error": lambda: tinker.InternalServerError(message, response=status(503), body=None),
        "connection": lambda: tinker.APIConnectionError(request=request, message=message),
        "timeout": lambda: tinker.APITimeoutError(request=request),
        "request_failed_server": lambda: tinker.RequestFailedError(message, "req-fault", category.Server),
        "request_failed_unknown": lambda: tinker.RequestFailedError(message, "req-fault", category.Unknown),
        "request_failed_user": lambda: tinker.RequestFailedError(message, "req-fault", category.User),
        "billing": lambda: tinker.BillingError(message, response=status(402), body=None),
        "bad_request": lambda: tinker.BadRequestError(message, response=status(400), body=None),
        "promise_expired": lambda: RetryableException(message),
    }
    return errors[variant]()


def _malformed(method: str, variant: str, reply: Any) -> Any:
    """``reply`` malformed as a ``"bad_reply"`` fault's ``variant`` says (see the module docstring)."""
    if method == "sample":
        return _bad_sample(variant, reply)
    if method == "compute_logprobs":
        values = list(reply)
        if variant == "nan":
            values[-1] = math.nan
        elif variant == "short":
            values = values[:-1]
        else:
            values[0] = -1.0
        return values
    if method == "save_state":
        file = local_file(reply.path)
        if file is not None:
            data = file.read_bytes()
            file.write_bytes(data[: len(data) // 2])
        return reply
    if variant == "no_outputs":
        return dataclasses.replace(reply, loss_fn_outputs=[])
    if variant == "nan_loss":
        return dataclasses.replace(reply, metrics={**reply.metrics, "loss:sum": math.nan})
    return dataclasses.replace(reply, metrics={})


def _bad_sample(variant: str, response: types.SampleResponse) -> types.SampleResponse:
    if variant == "no_sequences":
        return types.SampleResponse(sequences=[])
    seqs = []
    for seq in response.sequences:
        ids = np.asarray(seq.tokens_np if seq.tokens_np is not None else seq.tokens, dtype=np.int32)
        raw = seq.logprobs_np if seq.logprobs_np is not None else seq.logprobs
        lps: np.ndarray[Any, Any] | None = np.array(raw, dtype=np.float32)
        assert lps is not None
        if variant == "nan_logprobs":
            lps[0] = np.nan
        elif variant == "neginf_logprobs":
            lps[-1] = -np.inf
        elif variant == "short_logprobs":
            lps = lps[:-1]
        elif variant == "no_logprobs":
            lps = None
        elif variant == "ids_outside":
            ids = ids.copy()
            ids[0] = 1_000_000
        else:  # empty
            ids, lps = ids[:0], lps[:0]
        seqs.append(types.SampledSequence(seq.stop_reason, seq.sequence_id, tokens_np=ids, logprobs_np=lps))
    return types.SampleResponse(sequences=seqs)


class _Mapped:
    """A future whose result goes through ``fn`` (wraps clients handed out by the service)."""

    def __init__(self, inner: Future[Any], fn: Any) -> None:
        self.inner = inner
        self.fn = fn

    async def result_async(self, timeout: float | None = None) -> Any:
        return self.fn(await self.inner.result_async(timeout))

    def __await__(self) -> Any:
        return self.result_async().__await__()


class _FaultyServiceClient:
    def __init__(self, faults: FaultyService) -> None:
        self.faults = faults

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Future[TrainingClient]:
        inner = self.faults.inner
        return self.faults.call(  # type: ignore[no-any-return]
            "create_lora_training_client",
            lambda: inner.create_lora_training_client(base_model, rank),
            lambda tc: _faulty_training(tc, self.faults),
        )

    def create_training_client_from_state_with_optimizer(self, path: str) -> Future[TrainingClient]:
        inner = self.faults.inner
        return self.faults.call(  # type: ignore[no-any-return]
            "create_training_client_from_state_with_optimizer",
            lambda: inner.create_training_client_from_state_with_optimizer(path),
            lambda tc: _faulty_training(tc, self.faults),
        )

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None, **options: Any
    ) -> Future[SamplingClient]:
        inner: Any = self.faults.inner  # options (record_stability_info): passed on as given
        return self.faults.call(  # type: ignore[no-any-return]
            "create_sampling_client",
            lambda: inner.create_sampling_client(model_path, base_model, **options),
            lambda sc: _FaultySamplingClient(sc, self.faults),
        )


def _log_queue_state(queue_state: Any, queue_state_reason: str | None = None) -> None:
    """A wrapped client's own queue-state observer: nothing (:meth:`Boundary.watch` hooks it)."""


class _FaultyTrainingClient:
    def __init__(self, inner: TrainingClient, faults: FaultyService) -> None:
        self.inner = inner
        self.faults = faults
        self.on_queue_state_change = _log_queue_state  # where a pause is reported, as the SDK's client

    def __getattr__(self, name: str) -> Any:  # state, client_id, ... of the wrapped client
        return getattr(self.inner, name)

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> Future[types.ForwardBackwardOutput]:
        return self.faults.call(  # type: ignore[no-any-return]
            "forward_backward",
            lambda: self.inner.forward_backward(data, loss_fn, loss_fn_config),
            tokens=lambda: _tokens(data),
            client=self,
        )

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> Future[types.ForwardBackwardOutput]:
        return self.faults.call(  # type: ignore[no-any-return]
            "forward_backward_custom",
            lambda: self.inner.forward_backward_custom(data, loss_fn),
            tokens=lambda: _tokens(data),
            client=self,
        )

    def optim_step(self, optim_params: types.AdamParams) -> Future[types.OptimStepResponse]:
        return self.faults.call("optim_step", lambda: self.inner.optim_step(optim_params), client=self)  # type: ignore[no-any-return]

    def save_state(self, name: str) -> Future[types.SaveWeightsResponse]:
        return self.faults.call("save_state", lambda: self.inner.save_state(name), client=self)  # type: ignore[no-any-return]

    def save_weights_and_get_sampling_client(
        self, name: str | None = None, *, record_stability_info: bool = False
    ) -> Future[SamplingClient]:
        return self._save(name, record_stability_info, "snapshot")

    def _save(self, name: str | None, record_stability_info: bool, kind: str) -> Future[SamplingClient]:
        """The wrapped save; tinker 0.38's keywords are passed on only when they ask for something."""
        save: Any = self.inner.save_weights_and_get_sampling_client
        options: dict[str, Any] = {"record_stability_info": True} if record_stability_info else {}
        if kind != "snapshot":
            options["kind"] = kind
        return self.faults.call(  # type: ignore[no-any-return]
            "save_weights_and_get_sampling_client",
            lambda: save(name, **options),
            lambda sc: _FaultySamplingClient(
                sc, self.faults, self.inner if self.faults.plan.unfrozen else None
            ),
        )

    def get_tokenizer(self) -> Any:
        return self.inner.get_tokenizer()


class _FaultyInflightTrainingClient(_FaultyTrainingClient):
    """A training client under the plan whose service makes inflight samplers: ``kind`` is passed on
    (:func:`adapters.tinker.contract.inflight_refusal` reads it in this signature)."""

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        *,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> Future[SamplingClient]:
        return self._save(name, record_stability_info, kind)


def _faulty_training(inner: TrainingClient, faults: FaultyService) -> _FaultyTrainingClient:
    """``inner`` under the plan, taking tinker 0.38's ``kind`` exactly when ``inner`` takes it.

    Examples:
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> from adapters.local.service import LocalTrainingClient
        >>> _, faults = with_faults(FakeServiceClient(), FaultPlan())
        >>> type(_faulty_training(LocalTrainingClient.__new__(LocalTrainingClient), faults)).__name__
        '_FaultyInflightTrainingClient'
        >>> fake = FakeServiceClient().create_lora_training_client("fake", rank=1).result()
        >>> type(_faulty_training(fake, faults)).__name__
        '_FaultyTrainingClient'
    """
    if inflight_refusal(inner) is None:
        return _FaultyInflightTrainingClient(inner, faults)
    return _FaultyTrainingClient(inner, faults)


def _tokens(data: Sequence[types.Datum]) -> int:
    return sum(d.model_input.length for d in data)


class _FaultySamplingClient:
    """A sampler under the plan; with ``follow`` (a plan's ``unfrozen``), each call is answered from a new
    snapshot of that training client's current weights instead of from ``inner``."""

    def __init__(
        self, inner: SamplingClient, faults: FaultyService, follow: TrainingClient | None = None
    ) -> None:
        self.inner = inner
        self.faults = faults
        self.follow = follow
        self.on_queue_state_change = _log_queue_state  # where a pause is reported, as the SDK's sampler

    def __getattr__(self, name: str) -> Any:  # state, policy, ... of the wrapped sampler
        return getattr(self.inner, name)

    def _on_weights(self, ask: Callable[[SamplingClient], Future[Any]]) -> Future[Any]:
        """``ask(sampler)`` on this sampler's weights: its snapshot, or (following) the trainer's now."""
        if self.follow is None:
            return ask(self.inner)
        snapshot = self.follow.save_weights_and_get_sampling_client(None)
        if isinstance(snapshot, CompletedFuture):
            return ask(snapshot.result())

        async def later() -> Any:
            return await ask(await snapshot)

        return AwaitableFuture(later())

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> Future[types.SampleResponse]:
        return self.faults.call(  # type: ignore[no-any-return]
            "sample",
            lambda: self._on_weights(lambda s: s.sample(prompt, num_samples, sampling_params)),
            client=self,
        )

    def compute_logprobs(self, prompt: types.ModelInput) -> Future[list[float | None]]:
        return self.faults.call(  # type: ignore[no-any-return]
            "compute_logprobs", lambda: self._on_weights(lambda s: s.compute_logprobs(prompt)), client=self
        )


def with_faults(service: ServiceClient, plan: FaultPlan) -> tuple[ServiceClient, FaultyService]:
    """Wraps ``service`` so that it and every client it hands out obey ``plan``.

    Returns:
        ``(wrapped service, its FaultyService)``: the second holds the call counters and the list of
        injected faults, for assertions.

    Examples:
        >>> import asyncio
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> async def main():
        ...     plan = FaultPlan(at={("optim_step", 0): Fault("error")})
        ...     service, faults = with_faults(FakeServiceClient(), plan)
        ...     tc = await service.create_lora_training_client("fake", rank=1)
        ...     try:
        ...         await tc.optim_step(types.AdamParams())
        ...     except InjectedError as e:
        ...         return str(e), tc.state.version
        >>> asyncio.run(main())
        ('injected error in optim_step call 0', 0)
    """
    faults = FaultyService(service, plan)
    return _FaultyServiceClient(faults), faults


def wrap_sampler(sampler: SamplingClient, faults: FaultyService) -> SamplingClient:
    """Wraps one sampler (made outside the wrapped service) so its calls obey ``faults.plan``.

    Examples:
        >>> import tinker
        >>> from adapters.tinker.fake import FakeSamplingClient, FakeServiceClient, initial_model_state
        >>> _, faults = with_faults(FakeServiceClient(), FaultPlan(at={("sample", 0): Fault("error")}))
        >>> sampler = wrap_sampler(FakeSamplingClient(initial_model_state("base", 1, 0)), faults)
        >>> prompt, params = tinker.ModelInput.from_ints([1, 2, 3]), types.SamplingParams(max_tokens=8)
        >>> for _ in range(2):
        ...     try:
        ...         print(len(sampler.sample(prompt, 1, params).result().sequences[0].tokens))
        ...     except InjectedError as e:
        ...         print(e)
        injected error in sample call 0
        8
        >>> faults.calls["sample"], sampler.state.version
        (2, 0)
    """
    return _FaultySamplingClient(sampler, faults)
