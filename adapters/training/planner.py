"""The training loop's planner: a pure state machine (no ``await``, no clock, no I/O).

:func:`step` takes the loop state and one event (a result that arrived) and returns the new state and the
requests to execute next, in order. The async shell (:mod:`adapters.training.train`) executes requests
and feeds their results back as events; Hypothesis drives the same planner through arbitrary
interleavings and crash points (``tests/test_train_planner.py``).

One step ``s`` (``0 ≤ s < total_steps``; the first ``warm_start_steps`` are warm-start steps)::

    Prepare(s, groups, v, warm) → Prepared(s, n) → SubmitSubstep(s, 0), SubmitSubstep(s, 1),
      AwaitSubstep(s, 0)
      → SubstepDone(s, 0) → SubmitSubstep(s, 2), AwaitSubstep(s, 1) → … → SubstepDone(s, n − 1)
      → RefreshSampler(s) → SamplerReady(s + 1) → [Evaluate(s) → Evaluated(s)]
      → WriteMetrics(s) → MetricsWritten(s) → [Save(s) → Saved(s)] → next step, or Finish

``SubmitSubstep`` submits forward_backward and optim_step back to back without awaiting, so substep
``k + 1`` is always submitted before substep ``k`` is awaited. The metrics line of a step is written
before its checkpoint: a checkpoint at step ``s`` implies metrics lines ``0 … s`` exist (resume truncates
any later lines), so every step appears exactly once across crashes.

Sampling (RL steps only). The unit is a *group*: one question's ``group_size`` debates, numbered in
dataset order (group ``g`` is question ``g mod G`` of dataset batch ``g div G``, ``G = groups_per_step``).
``Sample(groups, v)`` starts those groups with the sampler of policy version ``v`` (the weights after
``v`` optimizer steps); ``Sampled(g, v)`` reports one group finished. The pacing rule is
tinker-cookbook 0.6.1's: with ``k = max_steps_off_policy`` (its ``steps_ahead``), at most ``G × (k + 1)``
groups are started and not yet trained (sampling, finished, or in the step being trained, until the
sampler with that step's weights is in use), and as many are started as the rule allows, with the sampler
in use. A step takes the ``G`` finished groups sampled from the *oldest* weights (then in dataset order);
the others carry over to later steps. Every group sampled is trained, once: nothing is dropped. The last
RL step trains ``final_groups`` groups (a final short batch) when the run's groups do not fill it.
With ``k = 0`` this is on-policy: the next ``G`` groups start when the sampler of the weights they will be
trained on is ready (``SamplerReady(s + 1)``), so their sampling overlaps the evaluation, metrics line and
checkpoint of step ``s``. A group trained at step ``s`` has staleness ``s − v``; a slow group may be
trained later than ``k`` steps after it started (the rule caps the groups ahead, not their age), and the
shell logs the staleness of every step (``async/staleness_{min,mean,max}``).

A checkpoint lists the groups that were started but not trained (``to_sample``): a resumed run samples
them again, with its current sampler, so every group is trained exactly once across crashes.

Streaming (``stream_parts = P > 0``, on-policy only; tinker-cookbook's ``StreamMinibatchConfig``): the
unit is the step's whole batch (``groups_per_step = 1``: group ``b`` is batch ``b``), cut into P parts in
dataset order, ``P / num_substeps`` a substep. The shell reports ``Streamed(b, v, j)`` as soon as every
debate of parts ``0 … j`` has finished, and ``Sampled(b, v)`` after the last; the step starts with the
first part::

    PreparePart(s, b, v, 0) → PartPrepared(s, 0) → SubmitPart(s, 0), PreparePart(s, b, v, 1) → …
      → SubmitPart(s, j) [the last part of substep k: its optim_step too], AwaitSubstep(s, k) → …
      → SubstepDone(s, S − 1) → RefreshSampler(s) → … as above

so a part's forward_backward runs on the service while later debates are still being sampled. One part
is prepared at a time, in order; ``AwaitSubstep(s, k)`` follows the submission of substep k's last part
and the end of substep k − 1 (substeps are awaited one at a time, in order).

Examples:
    >>> cfg = PlanConfig(total_steps=1, num_substeps=1, groups_per_step=2)
    >>> state, reqs = start(cfg)
    >>> reqs
    (Sample(groups=(0, 1), version=0),)
    >>> state, reqs = step(cfg, state, Sampled(1, 0))
    >>> state, reqs = step(cfg, state, Sampled(0, 0))
    >>> reqs
    (Prepare(step=0, groups=((0, 0), (1, 0)), version=0, warm=False),)
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
      max_steps_off_policy: k, tinker-cookbook's ``steps_ahead``: at most ``groups_per_step × (k + 1)``
        groups started and not yet trained (0: on-policy).
      stream_parts: P, the parts an RL batch is streamed in (a multiple of ``num_substeps``); 0: off.
      groups_per_step: G, the groups an RL step trains (the config's ``batch_size``; 1 when streaming,
        whose unit is the whole batch).
      final_groups: the groups of the last RL step, ``1 … G`` (a final short batch); 0: G.
    """

    total_steps: int
    warm_start_steps: int = 0
    num_substeps: int = 1
    save_every: int = 0
    eval_every: int = 0
    max_steps_off_policy: int = 0
    stream_parts: int = 0
    groups_per_step: int = 1
    final_groups: int = 0

    def __post_init__(self) -> None:
        names = ("total_steps", "warm_start_steps", "save_every", "eval_every", "max_steps_off_policy")
        for name in (*names, "final_groups"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("num_substeps", "groups_per_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.final_groups > self.groups_per_step:
            raise ValueError(
                f"final_groups must be <= groups_per_step = {self.groups_per_step}, got {self.final_groups}"
            )
        if self.warm_start_steps > self.total_steps:
            raise ValueError("warm_start_steps must be <= total_steps")
        if self.stream_parts < 0 or self.stream_parts % self.num_substeps:
            raise ValueError(
                f"stream_parts must be 0 or a positive multiple of num_substeps = {self.num_substeps}, "
                f"got {self.stream_parts}"
            )
        if self.stream_parts and self.max_steps_off_policy:
            raise ValueError("stream_parts needs on-policy training (max_steps_off_policy = 0)")
        if self.stream_parts and self.groups_per_step != 1:
            raise ValueError(
                f"stream_parts samples a step's batch as one unit: groups_per_step must be 1, "
                f"got {self.groups_per_step}"
            )

    @property
    def parts_per_substep(self) -> int:
        """Parts of one substep when streaming (0 when not)."""
        return self.stream_parts // self.num_substeps

    @property
    def rl_groups(self) -> int:
        """The groups the run trains in all: G per RL step, the last one ``final_groups`` when set.

        Examples:
          >>> PlanConfig(total_steps=4, warm_start_steps=1, groups_per_step=3, final_groups=2).rl_groups
          8
        """
        rl_steps = self.total_steps - self.warm_start_steps
        if rl_steps == 0:
            return 0
        return (rl_steps - 1) * self.groups_per_step + (self.final_groups or self.groups_per_step)

    @property
    def cap(self) -> int:
        """The most groups started and not yet trained: ``G × (k + 1)``."""
        return self.groups_per_step * (self.max_steps_off_policy + 1)


# ---- requests (planner → shell) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """Roll out the debates of ``groups`` (one ``Sampled`` each as it finishes) with the sampler of policy
    ``version`` (when streaming: the one group is dataset batch ``groups[0]``)."""

    groups: tuple[int, ...]
    version: int


@dataclass(frozen=True, slots=True)
class Prepare:
    """Turn ``groups`` (``(group, version)`` each, oldest first) into datums for ``step`` (kernel stages);
    a warm-start step (``warm``, no groups) renders the turns of dataset batch ``step``. ``version``: the
    sampler in use."""

    step: int
    groups: tuple[tuple[int, int], ...]
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
    """The debates of group ``group`` (sampled with policy ``version``) have all finished."""

    group: int
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
      next_group: the next never-requested group.
      to_sample: groups to request before ``next_group`` (started before a crash, never trained).
      inflight: ``(group, version)`` being sampled.
      ready: ``(group, version)`` sampled, waiting to be trained.
      current: ``(group, version)`` of the step being trained, held (counted as started and not trained)
        until the sampler with its weights is in use; ``()`` when idle or warm.
      trained: groups trained in all (released from ``current``).
      phase: where the step in progress is.
      chunks: substeps of the step in progress; ``done_chunks`` of them finished.
      arrived: streaming: ``(batch, parts)`` for each batch whose parts are arriving (entry dropped at
        its ``Sampled``).
      streaming: streaming: the batch the current (or just finished) step took from ``inflight`` before
        its ``Sampled`` arrived; ``(-1, -1)`` when none.
      parts_done: streaming: parts of the step prepared (and submitted).
      part_pending: streaming: a part is being prepared.
    """

    step: int = 0
    version: int = 0
    next_group: int = 0
    to_sample: tuple[int, ...] = ()
    inflight: tuple[tuple[int, int], ...] = ()
    ready: tuple[tuple[int, int], ...] = ()
    current: tuple[tuple[int, int], ...] = ()
    trained: int = 0
    phase: Phase = "idle"
    chunks: int = 0
    done_chunks: int = 0
    arrived: tuple[tuple[int, int], ...] = ()
    streaming: tuple[int, int] = (-1, -1)
    parts_done: int = 0
    part_pending: bool = False

    @property
    def unfinished(self) -> int:
        """Groups started and not yet trained (what the pacing rule caps)."""
        return len(self.inflight) + len(self.ready) + len(self.current)


def start(config: PlanConfig, resumed: LoopState | None = None) -> tuple[LoopState, tuple[Request, ...]]:
    """The first state and requests: fresh, or from a checkpoint's state (:func:`checkpoint_state`).

    Raises:
      ValueError: ``resumed`` is not a checkpoint's state (not idle, or something in flight).

    Examples:
      >>> cfg = PlanConfig(total_steps=3, warm_start_steps=1, groups_per_step=2)
      >>> state, reqs = start(cfg)
      >>> state.phase, reqs
      ('preparing', (Prepare(step=0, groups=(), version=0, warm=True),))
      >>> start(cfg, LoopState(step=2, version=2, next_group=4, to_sample=(1,), trained=2))[1]
      (Sample(groups=(1, 4), version=2),)
    """
    # group g is question g mod G of dataset batch g div G: RL starts after the warm-start steps' batches
    fresh = LoopState(next_group=config.warm_start_steps * config.groups_per_step)
    state = resumed if resumed is not None else fresh
    if (
        state.phase != "idle"
        or state.inflight
        or state.ready
        or state.current
        or state.arrived
        or state.streaming != (-1, -1)
    ):
        raise ValueError("a resumed state must come from checkpoint_state (idle, nothing in flight)")
    return _advance(config, state, ())


def checkpoint_state(state: LoopState) -> LoopState:
    """The state a checkpoint stores, taken when ``Save(s)`` is requested: the state after step ``s``,
    idle, with started-but-untrained groups moved to ``to_sample`` (a resumed run samples them again).

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
      >>> saved.step, saved.phase, saved.inflight, saved.to_sample, saved.trained
      (1, 'idle', (), (1,), 1)
    """
    if state.phase != "saving":
        raise ValueError(f"checkpoint_state needs a state that is saving, got phase {state.phase!r}")
    pending = sorted({*state.to_sample, *(g for g, _ in state.inflight), *(g for g, _ in state.ready)})
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
        case Sampled(group, version) if s.streaming == (group, version):
            if _arrived(s, group) != config.stream_parts:
                _unexpected(event, s)
            s = replace(s, streaming=(-1, -1), arrived=_without(s.arrived, group))
        case Sampled(group, version):
            if (group, version) not in s.inflight:
                _unexpected(event, s)
            if config.stream_parts and _arrived(s, group) != config.stream_parts:
                _unexpected(event, s)
            inflight = tuple(x for x in s.inflight if x != (group, version))
            arrived = _without(s.arrived, group)
            s = replace(s, inflight=inflight, ready=(*s.ready, (group, version)), arrived=arrived)
        case Streamed(batch, version, part):
            mine = s.streaming == (batch, version) or (batch, version) in s.inflight
            if not config.stream_parts or not mine or part != _arrived(s, batch):
                _unexpected(event, s)
            s = replace(s, arrived=(*_without(s.arrived, batch), (batch, part + 1)))
            if s.phase == "streaming" and s.current == ((batch, version),):
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
            # the step's groups are trained: the sampler with their weights is in use
            s = replace(s, version=version, current=(), trained=s.trained + len(s.current))
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
        current=(),
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
    ((batch, version),) = s.current
    available = _arrived(s, batch) if s.streaming == (batch, version) else config.stream_parts
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
    """Starts the next step when idle and its groups are there, then starts as many groups as the pacing
    rule allows (first: the shell starts the rollouts before the step's bookkeeping)."""
    reqs = list(out)
    if s.phase == "idle" and s.step < config.total_steps:
        if s.step < config.warm_start_steps:
            s = replace(s, phase="preparing", current=())
            reqs.append(Prepare(s.step, (), s.version, True))
        elif config.stream_parts:
            s = _start_streaming(config, s, reqs)
        else:
            n = min(config.groups_per_step, config.rl_groups - s.trained)
            if len(s.ready) >= n:  # the n finished groups of the oldest weights, then in dataset order
                ready = sorted(s.ready, key=lambda x: (x[1], x[0]))
                s = replace(s, ready=tuple(ready[n:]), phase="preparing", current=tuple(ready[:n]))
                reqs.append(Prepare(s.step, s.current, s.version, False))
    if s.phase != "done" and s.version >= config.warm_start_steps:  # RL's sampler is in use
        s, sample = _request_samples(config, s)
        reqs[:0] = sample
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
        current=((batch, version),),
        chunks=config.num_substeps,
        done_chunks=0,
        parts_done=0,
        part_pending=False,
    )
    return _next_part(config, s, reqs)


def _request_samples(config: PlanConfig, s: LoopState) -> tuple[LoopState, list[Request]]:
    """Starts groups (those of ``to_sample`` first) while fewer than ``G × (k + 1)`` are started and not
    trained and the run still has groups to train, with the sampler in use."""
    count = min(config.cap - s.unfinished, config.rl_groups - s.trained - s.unfinished)
    if count <= 0:
        return s, []
    redo, to_sample = s.to_sample[:count], s.to_sample[count:]
    fresh = tuple(range(s.next_group, s.next_group + count - len(redo)))
    groups = (*redo, *fresh)
    s = replace(
        s,
        to_sample=to_sample,
        next_group=s.next_group + len(fresh),
        inflight=(*s.inflight, *((g, s.version) for g in groups)),
    )
    return s, [Sample(groups, s.version)]


def state_to_dict(state: LoopState) -> dict[str, Any]:
    """A checkpoint state (from :func:`checkpoint_state`) as a JSON-ready dict.

    Examples:
      >>> state_to_dict(LoopState(step=2, version=2, next_group=8, to_sample=(5,), trained=4))
      {'step': 2, 'version': 2, 'next_group': 8, 'to_sample': [5], 'trained': 4}
    """
    s = state
    return {
        "step": s.step,
        "version": s.version,
        "next_group": s.next_group,
        "to_sample": list(s.to_sample),
        "trained": s.trained,
    }


def state_from_dict(d: dict[str, Any], config: PlanConfig | None = None) -> LoopState:
    """The inverse of :func:`state_to_dict`. A state saved before the pacing rule (its unit the dataset
    batch: ``next_batch``, batches in ``to_sample``, a count of ``dropped`` batches) is read as groups with
    ``config`` (its ``groups_per_step`` and ``warm_start_steps``).

    Raises:
      ValueError: a missing or malformed field; an old state without ``config``.

    Examples:
      >>> state = state_from_dict({"step": 2, "version": 2, "next_group": 8, "to_sample": [3], "trained": 4})
      >>> state.phase, state.to_sample, state_from_dict(state_to_dict(state)) == state
      ('idle', (3,), True)
      >>> old = {"step": 2, "version": 2, "next_batch": 4, "to_sample": [3], "dropped": 1}
      >>> state = state_from_dict(old, PlanConfig(total_steps=5, warm_start_steps=1, groups_per_step=2))
      >>> state.next_group, state.to_sample, state.trained
      (8, (6, 7), 2)
    """
    try:
        step_, version = int(d["step"]), int(d["version"])
        to_sample = tuple(int(g) for g in d["to_sample"])
        if "next_group" in d:
            return LoopState(
                step=step_,
                version=version,
                next_group=int(d["next_group"]),
                to_sample=to_sample,
                trained=int(d["trained"]),
            )
        if config is None:
            raise ValueError("a state saved by batches (next_batch) needs the run's PlanConfig")
        g, warm = config.groups_per_step, config.warm_start_steps
        return LoopState(  # batch b was groups b·G … b·G + G − 1, the warm-start steps' batches included
            step=step_,
            version=version,
            next_group=int(d["next_batch"]) * g,
            to_sample=tuple(b * g + j for b in to_sample for j in range(g)),
            trained=max(step_ - warm, 0) * g,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"loop state is malformed: {e!r}") from None
