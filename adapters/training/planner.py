"""The training loop's planner: a pure state machine (no ``await``, no clock, no I/O).

:func:`step` takes the loop state and one event (a result that arrived) and returns the new state and the
requests to execute next, in order. The async shell (:mod:`adapters.training.train`) executes requests
and feeds their results back as events; Hypothesis drives the same planner through arbitrary
interleavings and crash points (``tests/test_train_planner.py``).

One step ``s`` (``0 ≤ s < total_steps``; the first ``warm_start_steps`` are warm-start steps)::

    Prepare(s, batch) → Prepared(s, n) → SubmitSubstep(s, 0), SubmitSubstep(s, 1), AwaitSubstep(s, 0)
      → SubstepDone(s, 0) → SubmitSubstep(s, 2), AwaitSubstep(s, 1) → … → SubstepDone(s, n − 1)
      → RefreshSampler(s) → SamplerReady(s + 1) → [Evaluate(s) → Evaluated(s)]
      → WriteMetrics(s) → MetricsWritten(s) → [Save(s) → Saved(s)] → next step, or Finish

``SubmitSubstep`` submits forward_backward and optim_step back to back without awaiting, so substep
``k + 1`` is always submitted before substep ``k`` is awaited. The metrics line of a step is written
before its checkpoint: a checkpoint at step ``s`` implies metrics lines ``0 … s`` exist (resume truncates
any later lines), so every step appears exactly once across crashes.

Streaming (``stream_parts = P > 0``, on-policy only; tinker-cookbook's ``StreamMinibatchConfig``): the
batch of an RL step is cut into P parts in dataset order, ``P / num_substeps`` a substep. The shell reports
``Streamed(b, v, j)`` as soon as every debate of parts ``0 … j`` has finished, and ``Sampled(b, v)`` after
the last; the step starts with the first part::

    PreparePart(s, b, v, 0) → PartPrepared(s, 0) → SubmitPart(s, 0), PreparePart(s, b, v, 1) → …
      → SubmitPart(s, j) [the last part of substep k: its optim_step too], AwaitSubstep(s, k) → …
      → SubstepDone(s, S − 1) → RefreshSampler(s) → … as above

so a part's forward_backward runs on the service while later debates are still being sampled. One part
is prepared at a time, in order; ``AwaitSubstep(s, k)`` follows the submission of substep k's last part
and the end of substep k − 1 (substeps are awaited one at a time, in order).

Sampling (RL steps only; batch ``b`` holds the questions of dataset batch ``b``): ``Sample(b, v)`` asks
for the debates of batch ``b`` with the sampler of policy version ``v`` (the weights after ``v``
optimizer steps). With ``max_steps_off_policy = 0`` a batch is requested only with the sampler of the
weights it will be trained on, and when nothing else is pending (on-policy, staleness 0): the batch of step
``s + 1`` as soon as ``SamplerReady(s + 1)`` arrives, so its sampling overlaps the evaluation, metrics line
and checkpoint of step ``s``. With ``k > 0`` up to ``k + 1`` batches are
sampled or waiting while training goes on; a batch is trained at step ``s`` only if ``s − v ≤ k``,
else it is dropped and counted (its questions are not retried). A checkpoint lists batches that were
sampled but not trained (``to_sample``): a resumed run samples them again, so no batch is lost or
trained twice.

Examples:
    >>> cfg = PlanConfig(total_steps=1, num_substeps=1)
    >>> state, reqs = start(cfg)
    >>> reqs
    (Sample(batch=0, version=0),)
    >>> state, reqs = step(cfg, state, Sampled(0, 0))
    >>> reqs
    (Prepare(step=0, batch=0, version=0, warm=False),)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

__all__ = [
    "AwaitSubstep",
    "Evaluate",
    "Evaluated",
    "Event",
    "Finish",
    "LoopState",
    "MetricsWritten",
    "PartPrepared",
    "PlanConfig",
    "Prepare",
    "PreparePart",
    "Prepared",
    "RefreshSampler",
    "Request",
    "Sample",
    "Sampled",
    "SamplerReady",
    "Save",
    "Saved",
    "Streamed",
    "SubmitPart",
    "SubmitSubstep",
    "SubstepDone",
    "WriteMetrics",
    "checkpoint_state",
    "start",
    "state_from_dict",
    "state_to_dict",
    "step",
]


@dataclass(frozen=True, slots=True)
class PlanConfig:
    """The constants the planner needs (a projection of ``TrainConfig``).

    Attributes:
      total_steps: steps to run in all (warm-start steps included).
      warm_start_steps: the first steps, trained on rendered turns (no sampling).
      num_substeps: optimizer steps per batch.
      save_every: save after step s when ``(s + 1) % save_every == 0``; the last step always saves.
      eval_every: evaluate after step s when ``(s + 1) % eval_every == 0`` (RL steps); also after the last,
        and after the last warm-start step (the policy RL starts from).
      max_steps_off_policy: k (0: on-policy).
      stream_parts: P, the parts an RL batch is streamed in (a multiple of ``num_substeps``); 0: off.
    """

    total_steps: int
    warm_start_steps: int = 0
    num_substeps: int = 1
    save_every: int = 0
    eval_every: int = 0
    max_steps_off_policy: int = 0
    stream_parts: int = 0

    def __post_init__(self) -> None:
        for name in ("total_steps", "warm_start_steps", "save_every", "eval_every", "max_steps_off_policy"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_substeps < 1:
            raise ValueError(f"num_substeps must be >= 1, got {self.num_substeps}")
        if self.warm_start_steps > self.total_steps:
            raise ValueError("warm_start_steps must be <= total_steps")
        if self.stream_parts < 0 or self.stream_parts % self.num_substeps:
            raise ValueError(
                f"stream_parts must be 0 or a positive multiple of num_substeps = {self.num_substeps}, "
                f"got {self.stream_parts}"
            )
        if self.stream_parts and self.max_steps_off_policy:
            raise ValueError("stream_parts needs on-policy training (max_steps_off_policy = 0)")

    @property
    def parts_per_substep(self) -> int:
        """Parts of one substep when streaming (0 when not)."""
        return self.stream_parts // self.num_substeps


# ---- requests (planner → shell) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """Roll out the debates of dataset batch ``batch`` with the sampler of policy ``version``."""

    batch: int
    version: int


@dataclass(frozen=True, slots=True)
class Prepare:
    """Turn batch ``batch`` into datums for ``step`` (kernel stages; rendered turns when ``warm``)."""

    step: int
    batch: int
    version: int
    warm: bool


@dataclass(frozen=True, slots=True)
class PreparePart:
    """Turn part ``part`` of batch ``batch`` (its debates have all finished) into datums for ``step``."""

    step: int
    batch: int
    version: int
    part: int


@dataclass(frozen=True, slots=True)
class SubmitPart:
    """Submit forward_backward on part ``part``'s datums (none when it has none); after the last part of
    a substep, that substep's optim_step too (when any of its parts had datums). Do not await."""

    step: int
    part: int


@dataclass(frozen=True, slots=True)
class SubmitSubstep:
    """Submit forward_backward and optim_step of substep ``index`` back to back; do not await."""

    step: int
    index: int


@dataclass(frozen=True, slots=True)
class AwaitSubstep:
    """Await the results of substep ``index`` (already submitted)."""

    step: int
    index: int


@dataclass(frozen=True, slots=True)
class RefreshSampler:
    """A fresh sampling client with the weights after ``step`` (policy version ``step + 1``)."""

    step: int


@dataclass(frozen=True, slots=True)
class Evaluate:
    """Evaluate the current policy against the fixed opponents."""

    step: int


@dataclass(frozen=True, slots=True)
class WriteMetrics:
    """Append the metrics line of ``step`` (durably)."""

    step: int


@dataclass(frozen=True, slots=True)
class Save:
    """Save weights, optimizer and :func:`checkpoint_state` of the state after ``step``."""

    step: int


@dataclass(frozen=True, slots=True)
class Finish:
    """Every step is done; cancel any sampling still running."""


Request: TypeAlias = (
    Sample
    | Prepare
    | SubmitSubstep
    | PreparePart
    | SubmitPart
    | AwaitSubstep
    | RefreshSampler
    | Evaluate
    | WriteMetrics
    | Save
    | Finish
)

# ---- events (shell → planner) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sampled:
    """The debates of ``batch`` (sampled with policy ``version``) are ready."""

    batch: int
    version: int


@dataclass(frozen=True, slots=True)
class Streamed:
    """Every debate of parts ``0 … part`` of ``batch`` (sampled with policy ``version``) has finished."""

    batch: int
    version: int
    part: int


@dataclass(frozen=True, slots=True)
class PartPrepared:
    """The datums of part ``part`` of the step's batch are ready."""

    step: int
    part: int


@dataclass(frozen=True, slots=True)
class Prepared:
    """The step's datums are ready, split into ``num_chunks`` substeps (0: nothing to train)."""

    step: int
    num_chunks: int


@dataclass(frozen=True, slots=True)
class SubstepDone:
    """Substep ``index`` of ``step`` finished (forward_backward and optim_step results arrived)."""

    step: int
    index: int


@dataclass(frozen=True, slots=True)
class SamplerReady:
    """The sampler of policy ``version`` is in use."""

    version: int


@dataclass(frozen=True, slots=True)
class Evaluated:
    step: int


@dataclass(frozen=True, slots=True)
class MetricsWritten:
    step: int


@dataclass(frozen=True, slots=True)
class Saved:
    step: int


Event: TypeAlias = (
    Sampled
    | Streamed
    | Prepared
    | PartPrepared
    | SubstepDone
    | SamplerReady
    | Evaluated
    | MetricsWritten
    | Saved
)

Phase = Literal[
    "idle", "preparing", "streaming", "training", "refreshing", "evaluating", "writing", "saving", "done"
]


@dataclass(frozen=True, slots=True)
class LoopState:
    """Everything the planner knows.

    Attributes:
      step: optimizer steps completed (the step in progress, when ``phase`` is not idle).
      version: policy version of the sampler in use.
      next_batch: the next never-requested dataset batch.
      to_sample: batches to request before ``next_batch`` (sampled before a crash, never trained).
      inflight: ``(batch, version)`` being sampled.
      ready: ``(batch, version)`` sampled, waiting to be trained.
      current: ``(batch, version)`` being trained (``(-1, -1)`` when idle or warm).
      phase: where the step in progress is.
      chunks: substeps of the step in progress; ``done_chunks`` of them finished.
      dropped: batches dropped as too stale, in all.
      arrived: streaming: ``(batch, parts)`` for each batch whose parts are arriving (entry dropped at
        its ``Sampled``).
      streaming: streaming: the batch the current (or just finished) step took from ``inflight`` before
        its ``Sampled`` arrived; ``(-1, -1)`` when none.
      parts_done: streaming: parts of the step prepared (and submitted).
      part_pending: streaming: a part is being prepared.
    """

    step: int = 0
    version: int = 0
    next_batch: int = 0
    to_sample: tuple[int, ...] = ()
    inflight: tuple[tuple[int, int], ...] = ()
    ready: tuple[tuple[int, int], ...] = ()
    current: tuple[int, int] = (-1, -1)
    phase: Phase = "idle"
    chunks: int = 0
    done_chunks: int = 0
    dropped: int = 0
    arrived: tuple[tuple[int, int], ...] = ()
    streaming: tuple[int, int] = (-1, -1)
    parts_done: int = 0
    part_pending: bool = False


def start(config: PlanConfig, resumed: LoopState | None = None) -> tuple[LoopState, tuple[Request, ...]]:
    """The first state and requests: fresh, or from a checkpoint's state (:func:`checkpoint_state`).

    Examples:
      >>> cfg = PlanConfig(total_steps=3, warm_start_steps=1)
      >>> state, reqs = start(cfg)
      >>> state.phase, reqs
      ('preparing', (Prepare(step=0, batch=0, version=0, warm=True),))
      >>> start(cfg, LoopState(step=2, version=2, next_batch=3, to_sample=(2,)))[1]
      (Sample(batch=2, version=2),)
    """
    state = resumed if resumed is not None else LoopState(next_batch=config.warm_start_steps)
    if state.phase != "idle" or state.inflight or state.ready or state.arrived or state.streaming != (-1, -1):
        raise ValueError("a resumed state must come from checkpoint_state (idle, nothing in flight)")
    return _advance(config, state, ())


def checkpoint_state(state: LoopState) -> LoopState:
    """The state a checkpoint stores, taken when ``Save(s)`` is requested: the state after step ``s``,
    idle, with sampled-but-untrained batches moved to ``to_sample`` (a resumed run samples them again).

    Raises:
      ValueError: the state is not saving.

    Examples:
      >>> cfg = PlanConfig(total_steps=2, save_every=1)
      >>> state, _ = start(cfg)
      >>> for event in (Sampled(0, 0), Prepared(0, 1), SubstepDone(0, 0), SamplerReady(1), MetricsWritten(0)):
      ...     state, reqs = step(cfg, state, event)
      >>> reqs, state.phase, state.inflight
      ((Save(step=0),), 'saving', ((1, 1),))
      >>> saved = checkpoint_state(state)
      >>> saved.step, saved.phase, saved.inflight, saved.to_sample
      (1, 'idle', (), (1,))
    """
    if state.phase != "saving":
        raise ValueError(f"checkpoint_state needs a state that is saving, got phase {state.phase!r}")
    pending = sorted({*state.to_sample, *(b for b, _ in state.inflight), *(b for b, _ in state.ready)})
    return replace(
        _step_done(state), inflight=(), ready=(), to_sample=tuple(pending), arrived=(), streaming=(-1, -1)
    )


def step(config: PlanConfig, state: LoopState, event: Event) -> tuple[LoopState, tuple[Request, ...]]:
    """Feeds one event; returns the new state and the requests to run, in order.

    Raises:
      ValueError: an event that does not fit the state (a shell bug), naming both.

    Examples:
      >>> cfg = PlanConfig(total_steps=1, num_substeps=2)
      >>> state, _ = start(cfg)
      >>> state, _ = step(cfg, state, Sampled(0, 0))
      >>> state, reqs = step(cfg, state, Prepared(0, 2))
      >>> state.phase, reqs
      ('training',
       (SubmitSubstep(step=0, index=0), SubmitSubstep(step=0, index=1), AwaitSubstep(step=0, index=0)))
    """
    out: list[Request] = []
    s = state
    match event:
        case Sampled(batch, version) if s.streaming == (batch, version):
            if _arrived(s, batch) != config.stream_parts:
                _unexpected(event, s)
            s = replace(s, streaming=(-1, -1), arrived=_without(s.arrived, batch))
        case Sampled(batch, version):
            if (batch, version) not in s.inflight:
                _unexpected(event, s)
            if config.stream_parts and _arrived(s, batch) != config.stream_parts:
                _unexpected(event, s)
            inflight = tuple(x for x in s.inflight if x != (batch, version))
            arrived = _without(s.arrived, batch)
            s = replace(s, inflight=inflight, ready=(*s.ready, (batch, version)), arrived=arrived)
        case Streamed(batch, version, part):
            mine = s.streaming == (batch, version) or (batch, version) in s.inflight
            if not config.stream_parts or not mine or part != _arrived(s, batch):
                _unexpected(event, s)
            s = replace(s, arrived=(*_without(s.arrived, batch), (batch, part + 1)))
            if s.phase == "streaming" and s.current == (batch, version):
                s = _next_part(config, s, out)
        case PartPrepared(step_, part):
            _expect(s, "streaming", step_, event)
            if not s.part_pending or part != s.parts_done:
                _unexpected(event, s)
            s = replace(s, parts_done=part + 1, part_pending=False)
            out.append(SubmitPart(s.step, part))
            per = config.parts_per_substep
            if (part + 1) % per == 0 and part // per == s.done_chunks:  # awaited one at a time, in order
                out.append(AwaitSubstep(s.step, part // per))
            s = _next_part(config, s, out)
        case Prepared(step_, n):
            _expect(s, "preparing", step_, event)
            if n < 0:
                raise ValueError(f"Prepared.num_chunks must be >= 0, got {n}")
            s = replace(s, chunks=n, done_chunks=0, phase="training")
            if n == 0:
                s = replace(s, phase="refreshing")
                out.append(RefreshSampler(s.step))
            else:
                out.append(SubmitSubstep(s.step, 0))
                if n > 1:
                    out.append(SubmitSubstep(s.step, 1))
                out.append(AwaitSubstep(s.step, 0))
        case SubstepDone(step_, index) if s.phase == "streaming":
            _expect(s, "streaming", step_, event)
            if index != s.done_chunks or s.parts_done < (index + 1) * config.parts_per_substep:
                _unexpected(event, s)
            s = replace(s, done_chunks=index + 1)
            if index + 1 == s.chunks:
                s = replace(s, phase="refreshing")
                out.append(RefreshSampler(s.step))
            elif s.parts_done >= (index + 2) * config.parts_per_substep:  # the next one went already
                out.append(AwaitSubstep(s.step, index + 1))
        case SubstepDone(step_, index):
            _expect(s, "training", step_, event)
            if index != s.done_chunks:
                _unexpected(event, s)
            s = replace(s, done_chunks=index + 1)
            if index + 2 < s.chunks:
                out.append(SubmitSubstep(s.step, index + 2))
            if index + 1 < s.chunks:
                out.append(AwaitSubstep(s.step, index + 1))
            else:
                s = replace(s, phase="refreshing")
                out.append(RefreshSampler(s.step))
        case SamplerReady(version):
            if s.phase != "refreshing" or version != s.step + 1:
                _unexpected(event, s)
            s = replace(s, version=version)
            if _eval_due(s.step, config):
                s = replace(s, phase="evaluating")
                out.append(Evaluate(s.step))
            else:
                s = replace(s, phase="writing")
                out.append(WriteMetrics(s.step))
        case Evaluated(step_):
            _expect(s, "evaluating", step_, event)
            s = replace(s, phase="writing")
            out.append(WriteMetrics(s.step))
        case MetricsWritten(step_):
            _expect(s, "writing", step_, event)
            if _due(config.save_every, s.step, config):
                s = replace(s, phase="saving")
                out.append(Save(s.step))
            else:
                s = _step_done(s)
        case Saved(step_):
            _expect(s, "saving", step_, event)
            s = _step_done(s)
        case _:
            raise TypeError(f"event must be a planner event, got {type(event).__name__}")
    return _advance(config, s, tuple(out))


# ---------------------------------------------------------------------------------------------------------


def _due(every: int, step_: int, config: PlanConfig) -> bool:
    return step_ + 1 == config.total_steps or (every > 0 and (step_ + 1) % every == 0)


def _eval_due(step_: int, config: PlanConfig) -> bool:
    if step_ + 1 == config.warm_start_steps:  # the warm-started policy: where RL starts
        return True
    return _due(config.eval_every, step_, config) and step_ + 1 > config.warm_start_steps


def _step_done(s: LoopState) -> LoopState:
    return replace(
        s,
        step=s.step + 1,
        phase="idle",
        current=(-1, -1),
        chunks=0,
        done_chunks=0,
        parts_done=0,
        part_pending=False,
    )


def _arrived(s: LoopState, batch: int) -> int:
    """Parts of ``batch`` that arrived (streaming)."""
    return next((n for b, n in s.arrived if b == batch), 0)


def _without(arrived: tuple[tuple[int, int], ...], batch: int) -> tuple[tuple[int, int], ...]:
    return tuple(x for x in arrived if x[0] != batch)


def _next_part(config: PlanConfig, s: LoopState, out: list[Request]) -> LoopState:
    """Streaming: requests the step's next part when it has arrived and no part is being prepared (a
    batch whose ``Sampled`` came before its step started has every part)."""
    batch, version = s.current
    available = _arrived(s, batch) if s.streaming == s.current else config.stream_parts
    if s.part_pending or s.parts_done >= available:
        return s
    out.append(PreparePart(s.step, batch, version, s.parts_done))
    return replace(s, part_pending=True)


def _expect(s: LoopState, phase: str, step_: int, event: Event) -> None:
    if s.phase != phase or s.step != step_:
        _unexpected(event, s)


def _unexpected(event: Event, s: LoopState) -> None:
    raise ValueError(f"event {event!r} does not fit the loop state (phase {s.phase!r}, step {s.step})")


def _advance(
    config: PlanConfig, s: LoopState, out: tuple[Request, ...]
) -> tuple[LoopState, tuple[Request, ...]]:
    """Drops stale batches, starts the next step when idle, requests sampling within the window."""
    reqs = list(out)
    k = config.max_steps_off_policy
    if s.phase == "idle" and s.step < config.total_steps:
        fresh = tuple(x for x in s.ready if s.step - x[1] <= k)
        if len(fresh) != len(s.ready):
            s = replace(s, ready=fresh, dropped=s.dropped + len(s.ready) - len(fresh))
    if s.phase == "idle" and s.step < config.total_steps:
        if s.step < config.warm_start_steps:
            s = replace(s, phase="preparing", current=(s.step, s.version))
            reqs.append(Prepare(s.step, s.step, s.version, True))
        elif config.stream_parts:
            s = _start_streaming(config, s, reqs)
        elif s.ready:
            batch, version = min(s.ready)
            s = replace(s, ready=tuple(x for x in s.ready if x != (batch, version)))
            s = replace(s, phase="preparing", current=(batch, version))
            reqs.append(Prepare(s.step, batch, version, False))
    if s.phase != "done" and _training_step(s) >= config.warm_start_steps:
        s, sample = _request_samples(config, s)
        reqs[:0] = sample  # first: the shell starts the rollouts before the step's bookkeeping
    if s.phase == "idle" and s.step >= config.total_steps:
        s = replace(s, phase="done")
        reqs.append(Finish())
    return s, tuple(reqs)


def _start_streaming(config: PlanConfig, s: LoopState, reqs: list[Request]) -> LoopState:
    """Starts a streamed step on a fully sampled batch, else on the batch in flight once a part arrived."""
    if s.ready:
        batch, version = min(s.ready)
        s = replace(s, ready=tuple(x for x in s.ready if x != (batch, version)))
    elif s.streaming == (-1, -1) and s.inflight and _arrived(s, s.inflight[0][0]):
        batch, version = s.inflight[0]
        s = replace(s, inflight=s.inflight[1:], streaming=(batch, version))
    else:
        return s
    s = replace(
        s,
        phase="streaming",
        current=(batch, version),
        chunks=config.num_substeps,
        done_chunks=0,
        parts_done=0,
        part_pending=False,
    )
    return _next_part(config, s, reqs)


def _training_step(s: LoopState) -> int:
    """The step that will train a batch requested now: the next one while a step is in progress."""
    return s.step + (1 if s.phase not in ("idle", "done") else 0)


def _request_samples(config: PlanConfig, s: LoopState) -> tuple[LoopState, list[Request]]:
    k = config.max_steps_off_policy
    out: list[Request] = []
    window = k + 1
    while True:
        pending = len(s.inflight) + len(s.ready)
        in_progress = s.phase not in ("idle", "done")
        remaining = config.total_steps - s.step - (1 if in_progress else 0)
        if pending >= min(window, remaining):
            break
        if k == 0 and s.version != _training_step(s):
            break  # on-policy: only with the sampler of the weights the batch will be trained on
        if s.to_sample:
            batch, to_sample = s.to_sample[0], s.to_sample[1:]
            s = replace(s, to_sample=to_sample)
        else:
            batch = s.next_batch
            s = replace(s, next_batch=batch + 1)
        s = replace(s, inflight=(*s.inflight, (batch, s.version)))
        out.append(Sample(batch, s.version))
    return s, out


def state_to_dict(state: LoopState) -> dict[str, Any]:
    """A checkpoint state (from :func:`checkpoint_state`) as a JSON-ready dict.

    Examples:
      >>> state_to_dict(LoopState(step=2, version=2, next_batch=4, to_sample=(3,), dropped=1))
      {'step': 2, 'version': 2, 'next_batch': 4, 'to_sample': [3], 'dropped': 1}
    """
    s = state
    return {
        "step": s.step,
        "version": s.version,
        "next_batch": s.next_batch,
        "to_sample": list(s.to_sample),
        "dropped": s.dropped,
    }


def state_from_dict(d: dict[str, Any]) -> LoopState:
    """The inverse of :func:`state_to_dict`.

    Raises:
      ValueError: a missing or malformed field.

    Examples:
      >>> state = state_from_dict({"step": 2, "version": 2, "next_batch": 4, "to_sample": [3], "dropped": 1})
      >>> state.phase, state.to_sample, state_from_dict(state_to_dict(state)) == state
      ('idle', (3,), True)
    """
    try:
        return LoopState(
            step=int(d["step"]),
            version=int(d["version"]),
            next_batch=int(d["next_batch"]),
            to_sample=tuple(int(b) for b in d["to_sample"]),
            dropped=int(d["dropped"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"loop state is malformed: {e!r}") from None
