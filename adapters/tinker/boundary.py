"""The client's one service boundary: deadlines, retries, error mapping and reply checks.

Every call the training loop makes to the service goes through :meth:`Boundary.call`. Above this module
nobody sees an SDK exception: a call either returns a checked reply or raises :class:`ServiceError`,
which names the kind of call, the step and the cause.

Two parts, as h11 splits a state machine from its socket loop:

- a policy with no I/O, no clock and no randomness of its own: :func:`classify` names an exception's
  cause and says whether it is transient; :meth:`RetryPolicy.backoff` and :meth:`RetryPolicy.decide` say
  how long to wait before the next attempt, or that there is none; ``check_*`` say what is wrong with a
  reply (``None`` when nothing is);
- :class:`Boundary`, a few lines of ``await``: the request under ``asyncio.timeout`` (a call past its
  deadline is transient), the policy's decision, an injected sleep, the reply's check, and
  :class:`CallStats` counting retries, their causes and the time they took (the shell puts them into each
  step's metrics).

Queue-state pauses (tinker 0.38): a service that holds a request because its queue is paused (for
capacity or for the rate limit of concurrent clients) answers the SDK's polls with ``try_again`` and a
``queue_state``, which the SDK reports to the client's ``QueueStateObserver`` (a sampling client is its
own; a training client has a ``QueueStateLogger``), ``ACTIVE`` again when the result arrives. The request
has not failed: it waits its turn. :meth:`Boundary.watch` hooks a client's reports, and while any watched
client is paused no attempt's deadline runs (each resumes with the time it had left), so a pause is waited
out, neither a failure nor a retry; :class:`CallStats` counts the pauses and their seconds.

Transient: rate limits (429), server errors (5xx), connection errors and timeouts, a deadline passed, a
request the service cancelled, :class:`tinker.RequestFailedError` in the ``Server`` or ``Unknown``
category, the SDK's ``RetryableException`` (a future the service no longer holds: ``promise_expired``), and
:class:`TransientError`. Never retried: ``User``-category request failures, billing,
authentication, permission and other 4xx errors, a reply that fails its check, any other exception.

``forward_backward`` and ``optim_step`` are never replayed in place (:data:`NOT_REPLAYED`): the loop
submits a substep's two requests back to back, so a replayed ``forward_backward`` would land after the
``optim_step`` it belongs before, and an ``optim_step`` whose reply was lost may have been applied (its
replay would apply it twice). Their failure raises a :class:`ServiceError` here; the training loop
(:func:`adapters.training.train.run_training`) reconciles a transient one by restarting from the last
checkpoint in the same run, as ``--resume`` would (at most ``retry_attempts − 1`` times in a row),
whose saved state holds exactly the updates it recorded, so no update is lost or applied twice.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np
import tinker
from tinker import types
from tinker.lib.retryable_exception import RetryableException

from adapters.training.config import CALL_KINDS, DEFAULT_DEADLINES

__all__ = [
    "CALL_KINDS",
    "DEFAULT_DEADLINES",
    "NOT_REPLAYED",
    "Boundary",
    "CallStats",
    "Failure",
    "RetryPolicy",
    "ServiceError",
    "TransientError",
    "check_forward_backward",
    "check_logprobs",
    "check_sample",
    "classify",
    "parse_deadlines",
]

T = TypeVar("T")

NOT_REPLAYED: Final = frozenset({"forward_backward", "optim_step"})
"""Kinds of call never replayed in place after a failure (see the module docstring): the run restarts
from its last checkpoint instead, or ends."""


class TransientError(Exception):
    """A service error known to be transient (e.g. one injected by :mod:`adapters.tinker.faults`)."""


class ServiceError(Exception):
    """A service call that failed for good: retries ran out, or the error or the reply is permanent.

    Attributes:
      kind: the kind of call (one of :data:`CALL_KINDS`).
      cause: the cause's name (``rate_limit``, ``deadline``, ``bad_reply``, ...; see :func:`classify`).
      detail: what happened, in words.
      step: the training step the call belonged to (None before the first step).
      attempts: how many attempts were made.
      transient: whether the last failure was transient (retries ran out or the call is not replayed).
    """

    def __init__(
        self,
        kind: str,
        cause: str,
        detail: str,
        *,
        step: int | None = None,
        attempts: int = 1,
        transient: bool,
    ) -> None:
        self.kind = kind
        self.cause = cause
        self.detail = detail
        self.step = step
        self.attempts = attempts
        self.transient = transient
        super().__init__(self._message())

    def _message(self) -> str:
        at = "" if self.step is None else f" at step {self.step}"
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"the service's {self.kind} call{at} failed{tries} ({self.cause}): {self.detail}"


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed attempt as the policy sees it: the cause's name, transient or not, and the detail."""

    cause: str
    transient: bool
    detail: str


_USER = {
    tinker.BillingError: "billing",
    tinker.AuthenticationError: "authentication",
    tinker.PermissionDeniedError: "permission_denied",
    tinker.NotFoundError: "not_found",
    tinker.ConflictError: "conflict",
    tinker.UnprocessableEntityError: "unprocessable",
    tinker.BadRequestError: "bad_request",
}


def classify(error: BaseException) -> Failure:
    """Names the cause of a failed attempt and says whether it is transient (see the module docstring).

    Args:
      error: what the request raised (not a deadline: :class:`Boundary` names that ``deadline`` itself).

    Returns:
      A :class:`Failure`.

    Examples:
      >>> classify(TransientError("try later"))
      Failure(cause='transient', transient=True, detail='TransientError: try later')
      >>> f = classify(tinker.RequestFailedError("bad input", "r1", types.RequestErrorCategory.User))
      >>> f.cause, f.transient
      ('request_failed_user', False)
      >>> classify(ValueError("no")).transient
      False
    """
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, tinker.RateLimitError):
        return Failure("rate_limit", True, detail)
    if isinstance(error, tinker.InternalServerError):
        return Failure("server_error", True, detail)
    if isinstance(error, tinker.APITimeoutError):
        return Failure("timeout", True, detail)
    if isinstance(error, tinker.APIConnectionError):
        return Failure("connection", True, detail)
    if isinstance(error, tinker.RequestFailedError):
        category = str(getattr(error, "category", "unknown")).lower()
        category = category if category in ("server", "user") else "unknown"
        return Failure(f"request_failed_{category}", category != "user", detail)
    for cls, cause in _USER.items():
        if isinstance(error, cls):
            return Failure(cause, False, detail)
    if isinstance(error, tinker.APIStatusError):
        status = int(getattr(error, "status_code", 0))
        return Failure(f"http_{status}", status >= 500 or status == 408, detail)
    if isinstance(error, TimeoutError):  # a timeout inside the client, not our deadline
        return Failure("timeout", True, detail)
    if isinstance(error, TransientError):
        return Failure("transient", True, detail)
    if isinstance(error, RetryableException):  # the service lost the request (410): send it again
        return Failure("promise_expired", True, detail)
    return Failure("error", False, detail)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed attempts are retried: full-jitter exponential backoff, bounded in count and total time.

    The wait before attempt k + 1 (k ≥ 0 failed attempts so far) is ``u · min(cap_s, base_s · 2ᵏ)`` with
    ``u`` uniform in [0, 1) from the caller's generator (AWS's "full jitter").

    Attributes:
      max_attempts: attempts at most per call (1: no retry).
      max_total_s: no retry starts once the call has taken this long, waits included.
      base_s: the first backoff's bound.
      cap_s: the largest backoff's bound.

    Examples:
      >>> p = RetryPolicy(max_attempts=3, base_s=1.0, cap_s=4.0)
      >>> [p.backoff(k, 0.5) for k in range(1, 5)]
      [0.5, 1.0, 2.0, 2.0]
      >>> ok = Failure("rate_limit", True, "429")
      >>> p.decide("sample", ok, attempts=1, elapsed=0.0, wait=0.5)
      0.5
      >>> p.decide("sample", ok, attempts=3, elapsed=0.0, wait=0.5) is None  # attempts ran out
      True
      >>> p.decide("optim_step", ok, attempts=1, elapsed=0.0, wait=0.5) is None  # never replayed
      True
    """

    max_attempts: int = 5
    max_total_s: float = 1800.0
    base_s: float = 1.0
    cap_s: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"max_attempts must be an int, got {type(self.max_attempts).__name__}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("max_total_s", "base_s", "cap_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def backoff(self, failed: int, u: float) -> float:
        """The wait after ``failed`` failed attempts, for a uniform draw ``u`` in [0, 1)."""
        return u * min(self.cap_s, self.base_s * 2.0 ** min(failed - 1, 62)) if failed > 0 else 0.0

    def decide(
        self, kind: str, failure: Failure, *, attempts: int, elapsed: float, wait: float
    ) -> float | None:
        """The wait before the next attempt, or None when there is none.

        Args:
          kind: the kind of call.
          failure: the last attempt's failure.
          attempts: attempts made so far (≥ 1).
          elapsed: seconds since the call started.
          wait: the backoff drawn for this retry (:meth:`backoff`).
        """
        if not failure.transient or kind in NOT_REPLAYED or attempts >= self.max_attempts:
            return None
        if elapsed + wait > self.max_total_s:
            return None
        return wait


@dataclass
class CallStats:
    """Counts of retries and failures by ``kind/cause``, the seconds retries cost (waits and the failed
    attempts' own time), and the service's queue pauses by state with the seconds they lasted;
    :meth:`take` hands them to a step's metrics line and starts over."""

    retries: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    retry_time: float = 0.0
    pauses: Counter[str] = field(default_factory=Counter)
    paused_time: float = 0.0

    def take(self) -> dict[str, float]:
        """The metrics since the last call: ``service/retries``, ``time/retries``,
        ``service/failures`` and one ``service/retries/KIND/CAUSE`` per cause seen; where the service
        paused, ``time/paused`` and one ``service/pauses/STATE`` per queue state reported."""
        record: dict[str, float] = {
            "service/retries": float(sum(self.retries.values())),
            "time/retries": self.retry_time,
            "service/failures": float(sum(self.failures.values())),
        }
        for key, n in sorted(self.retries.items()):
            record[f"service/retries/{key}"] = float(n)
        if self.pauses:
            record["time/paused"] = self.paused_time
            for key, n in sorted(self.pauses.items()):
                record[f"service/pauses/{key}"] = float(n)
        self.retries, self.failures, self.retry_time = Counter(), Counter(), 0.0
        self.pauses, self.paused_time = Counter(), 0.0
        return record


ACTIVE: Final = "active"
"""The queue state of a service that runs requests (tinker's ``QueueState.ACTIVE``); any other reported
state (``paused_capacity``, ``paused_rate_limit``, ``unknown``) holds them."""


class _Pauses:
    """Which watched clients report a paused queue, and the deadlines suspended meanwhile: the boundary's
    one piece of pause state, touched only on its event loop."""

    def __init__(self, stats: CallStats, clock: Callable[[], float]) -> None:
        self.stats = stats
        self.clock = clock
        self.paused: dict[int, float] = {}  # watched client -> when its pause began (the boundary's clock)
        self.timers: dict[asyncio.Timeout, float | None] = {}  # in-flight attempts: seconds left if paused

    def report(self, client: int, state: str) -> None:
        """A watched client's queue state (``state`` the SDK's value, e.g. ``"paused_capacity"``)."""
        was = bool(self.paused)
        if state == ACTIVE:
            began = self.paused.pop(client, None)
            if began is not None:
                self.stats.paused_time += self.clock() - began
        elif client not in self.paused:
            self.paused[client] = self.clock()
            self.stats.pauses[state] += 1
        if was != bool(self.paused):
            loop = asyncio.get_running_loop()
            for timer in list(self.timers):
                self._suspend(timer, loop) if self.paused else self._resume(timer, loop)

    def _suspend(self, timer: asyncio.Timeout, loop: asyncio.AbstractEventLoop) -> None:
        when = timer.when()
        if when is not None and not timer.expired():
            self.timers[timer] = max(0.0, when - loop.time())
            timer.reschedule(None)

    def _resume(self, timer: asyncio.Timeout, loop: asyncio.AbstractEventLoop) -> None:
        left = self.timers.get(timer)
        if left is not None:
            self.timers[timer] = None
            timer.reschedule(loop.time() + left)

    def enter(self, timer: asyncio.Timeout) -> None:
        """An attempt starts under ``timer`` (suspended at once while a pause lasts)."""
        self.timers[timer] = None
        if self.paused:
            self._suspend(timer, asyncio.get_running_loop())

    def leave(self, timer: asyncio.Timeout) -> None:
        """An attempt ended. When none is left in flight, a pause still on record is closed: no request
        waits on it, and a paused queue is reported again at the SDK's next poll (a request cancelled
        while paused never gets its ``ACTIVE``)."""
        self.timers.pop(timer, None)
        if not self.timers and self.paused:
            now = self.clock()
            self.stats.paused_time += sum(now - began for began in self.paused.values())
            self.paused.clear()


class Boundary:
    """Where every service call goes through (see the module docstring).

    Args:
      deadlines: seconds per attempt by kind (a kind left out takes :data:`DEFAULT_DEADLINES`; None: no
        deadline).
      policy: the :class:`RetryPolicy`.
      rng: draws the backoff jitter (seeded by the caller: reproducible waits).
      sleep: awaited for each backoff (tests pass one that returns at once).
      clock: seconds, for the total-time bound and the retry time.
      vocab_size: sampled ids must lie in ``[0, vocab_size)`` (None: not checked).
      strict: check sample replies fully (:func:`check_sample`); off, only that a sequence came back.
    """

    def __init__(
        self,
        deadlines: Mapping[str, float | None] | None = None,
        policy: RetryPolicy = RetryPolicy(),
        *,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        vocab_size: int | None = None,
        strict: bool = True,
    ) -> None:
        unknown = sorted(set(deadlines or {}) - set(CALL_KINDS))
        if unknown:
            raise ValueError(f"deadlines: unknown kinds of call {unknown}; kinds: {', '.join(CALL_KINDS)}")
        self.deadlines: dict[str, float | None] = {**DEFAULT_DEADLINES, **(deadlines or {})}
        self.policy = policy
        self.rng = rng if rng is not None else random.Random(0)
        self.sleep = sleep
        self.clock = clock
        self.vocab_size = vocab_size
        self.strict = strict
        self.stats = CallStats()
        self._pauses = _Pauses(self.stats, clock)

    async def call(
        self,
        kind: str,
        make_request: Callable[[], Awaitable[T]],
        check: Callable[[T], str | None] | None = None,
        *,
        step: int | None = None,
    ) -> T:
        """``await make_request()`` under the kind's deadline, retried while the policy allows, checked.

        Args:
          kind: one of :data:`CALL_KINDS`.
          make_request: submits the request and returns its future (called once per attempt).
          check: the reply's check: a reason when the reply is unusable, None when it is fine.
          step: the step the call belongs to, for the error.

        Returns:
          The reply.

        Raises:
          ServiceError: retries ran out, or the failure or the reply is permanent.
          asyncio.CancelledError: the caller was cancelled (never a service failure).
        """
        deadline = self.deadlines[kind]
        start = self.clock()
        attempts = 0
        while True:
            attempts += 1
            t0 = self.clock()
            timer = asyncio.timeout(deadline)
            try:
                async with timer:
                    self._pauses.enter(timer)
                    try:
                        reply = await make_request()
                    finally:
                        self._pauses.leave(timer)
            except TimeoutError as e:
                if timer.expired():
                    failure = Failure("deadline", True, f"no reply within {deadline:g} s")
                else:
                    failure = classify(e)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # we are being cancelled: not the service's doing
                failure = Failure("cancelled", True, "the service cancelled the request")
            except Exception as e:
                failure = classify(e)
            else:
                problem = check(reply) if check is not None else None
                if problem is None:
                    return reply
                failure = Failure("bad_reply", False, problem)
            now = self.clock()
            wait = self.policy.decide(
                kind,
                failure,
                attempts=attempts,
                elapsed=now - start,
                wait=self.policy.backoff(attempts, self.rng.random()),
            )
            if wait is None:
                self.stats.failures[f"{kind}/{failure.cause}"] += 1
                raise ServiceError(
                    kind,
                    failure.cause,
                    failure.detail,
                    step=step,
                    attempts=attempts,
                    transient=failure.transient,
                )
            self.stats.retries[f"{kind}/{failure.cause}"] += 1
            await self.sleep(wait)
            self.stats.retry_time += self.clock() - t0

    def watch(self, client: Any) -> None:
        """Hooks ``client``'s queue-state reports (see the module docstring): while it reports a pause,
        no deadline runs. Works on the SDK's sampling client (its own ``on_queue_state_change``), its
        training client (its ``_queue_state_logger``) and anything with an ``on_queue_state_change``
        (the fault injector's clients); a client that reports nothing is left as it is. Once per client.

        Must be called on the event loop that runs the calls; reports may come from any thread (the
        SDK's own loop runs in one of its threads).
        """
        logger = getattr(client, "_queue_state_logger", None)
        target: Any = logger if callable(getattr(logger, "on_queue_state_change", None)) else client
        report = getattr(target, "on_queue_state_change", None)
        if not callable(report) or getattr(report, "boundary", None) is self:
            return  # nothing reported, or hooked already
        loop = asyncio.get_running_loop()
        key, home = id(target), threading.get_ident()

        def on_queue_state_change(queue_state: Any, queue_state_reason: str | None = None) -> None:
            state = str(getattr(queue_state, "value", queue_state))
            if threading.get_ident() == home:  # on the loop: at once, before the request waits on
                self._pauses.report(key, state)
            elif not loop.is_closed():  # from the SDK's thread
                loop.call_soon_threadsafe(self._pauses.report, key, state)
            report(queue_state, queue_state_reason)  # the client's own (the SDK logs a long pause)

        on_queue_state_change.boundary = self  # type: ignore[attr-defined]
        target.on_queue_state_change = on_queue_state_change

    def check_sample(self, num_samples: int) -> Callable[[types.SampleResponse], str | None]:
        """The check of a ``sample`` reply under this boundary's settings."""
        if not self.strict:
            return lambda r: None if r.sequences else "the sampler returned no sequence"
        return lambda r: check_sample(r, num_samples=num_samples, vocab_size=self.vocab_size)


def parse_deadlines(text: str) -> dict[str, float]:
    """``KIND=SECONDS,...`` (the ``--deadlines`` flag) as a dict; 0 means no deadline for that kind.

    Raises:
      ValueError: an unknown kind (naming it and the kinds) or a value that is not a finite number ≥ 0.

    Examples:
      >>> parse_deadlines("sample=60, forward_backward=900")
      {'sample': 60.0, 'forward_backward': 900.0}
    """
    out: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        kind, sep, value = part.partition("=")
        kind = kind.strip().replace("-", "_")
        if not sep or kind not in CALL_KINDS:
            raise ValueError(
                f"--deadlines: {part.strip()!r} is not KIND=SECONDS with KIND one of {', '.join(CALL_KINDS)}"
            )
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(
                f"--deadlines: {kind} must be a finite number of seconds >= 0, got {value.strip()!r}"
            )
        out[kind] = seconds
    return out


# ---- reply checks: pure, a reason or None ------------------------------------------------------------


def check_sample(
    response: types.SampleResponse, *, num_samples: int, vocab_size: int | None = None
) -> str | None:
    """What is wrong with a ``sample`` reply: the sequence count, an empty sequence, ids outside
    ``[0, vocab_size)``, or not one finite logprob per token; None when nothing is.

    Examples:
      >>> ids = np.array([5, 6], np.int32)
      >>> seq = types.SampledSequence("stop", "s", ids, np.array([-0.5, np.nan], np.float32))
      >>> check_sample(types.SampleResponse(sequences=[seq]), num_samples=1)
      'sequence 0: logprob 1 is nan'
      >>> ok = types.SampledSequence("stop", "s", ids, np.array([-0.5, -1.0], np.float32))
      >>> check_sample(types.SampleResponse(sequences=[ok]), num_samples=1, vocab_size=6)
      'sequence 0: token id 6 at 1 is outside the vocabulary [0, 6)'
    """
    seqs = response.sequences
    if len(seqs) != num_samples:
        return f"{len(seqs)} sequences for {num_samples} asked"
    for k, seq in enumerate(seqs):
        tokens = np.asarray(seq.tokens_np if seq.tokens_np is not None else seq.tokens)
        if tokens.size == 0:
            return f"sequence {k} is empty"
        if tokens.dtype.kind not in "iu":
            return f"sequence {k}: token ids of dtype {tokens.dtype}, not integers"
        low = int(tokens.min())
        high = int(tokens.max())
        if low < 0 or (vocab_size is not None and high >= vocab_size):
            bad = low if low < 0 else high
            at = int(np.flatnonzero(tokens == bad)[0])
            return f"sequence {k}: token id {bad} at {at} is outside the vocabulary [0, {vocab_size})"
        raw = seq.logprobs_np if seq.logprobs_np is not None else seq.logprobs
        if raw is None:
            return f"sequence {k} has no logprobs"
        if len(raw) != tokens.size:
            return f"sequence {k}: {len(raw)} logprobs for {tokens.size} tokens"
        if not isinstance(raw, np.ndarray) and any(x is None for x in raw):
            return f"sequence {k}: logprob {[x is None for x in raw].index(True)} is None"
        values = np.asarray(raw, dtype=np.float64)
        bad_at = np.flatnonzero(~np.isfinite(values))
        if bad_at.size:
            return f"sequence {k}: logprob {int(bad_at[0])} is {values[bad_at[0]]}"
    return None


def check_logprobs(reply: Sequence[float | None], *, prompt_length: int) -> str | None:
    """What is wrong with a ``compute_logprobs`` reply: its length, a first entry other than None, an entry
    that is not a finite number; None when nothing is.

    Examples:
      >>> check_logprobs([None, -1.0, -2.0], prompt_length=3) is None
      True
      >>> check_logprobs([None, -1.0], prompt_length=3)
      '2 logprobs for a prompt of 3 tokens'
      >>> check_logprobs([None, float("-inf"), -2.0], prompt_length=3)
      'logprob 1 is -inf'
    """
    if len(reply) != prompt_length:
        return f"{len(reply)} logprobs for a prompt of {prompt_length} tokens"
    if prompt_length and reply[0] is not None:
        return f"the first logprob is {reply[0]!r}, not None"
    for i, x in enumerate(reply[1:], start=1):
        if isinstance(x, bool) or not isinstance(x, int | float | np.floating) or not math.isfinite(x):
            return f"logprob {i} is {x!r}"
    return None


def check_forward_backward(out: types.ForwardBackwardOutput, *, num_datums: int) -> str | None:
    """What is wrong with a ``forward_backward`` reply: not one output per datum, no metrics, or a metric
    that is not finite (a NaN loss); None when nothing is.

    Examples:
      >>> out = types.ForwardBackwardOutput(loss_fn_output_type="x", loss_fn_outputs=[], metrics={})
      >>> check_forward_backward(out, num_datums=2)
      '0 outputs for 2 datums'
    """
    outputs = out.loss_fn_outputs
    if len(outputs) != num_datums:
        return f"{len(outputs)} outputs for {num_datums} datums"
    if not out.metrics:
        return "no metrics (no loss)"
    for name, value in out.metrics.items():
        if not (isinstance(value, int | float) and math.isfinite(value)):
            return f"metric {name!r} is {value!r}"
    return None
