"""The training loop's async shell: executes what :mod:`adapters.training.planner` asks, feeds results back.

Per step (see ``docs/training.md`` for the diagram): questions of the step's dataset batch → debates
(:func:`adapters.training.rollouts.run_debates`, self-play) → one batched kernel call per stage through
the scoring pipeline (votes → pairwise rewards → total returns, plus ``correctness_weight × correct``
→ advantages with the configured preset, or RAE baselines → datums) → optional constant-group removal →
optional KL penalty against the reference sampler → ``num_substeps`` pipelined forward_backward +
optim_step → a fresh sampling client → (evaluation) → the metrics line → (checkpoint).

What a step sends and records is computed without I/O by :mod:`adapters.training.prepare` (the kernel
stages, the datums, the metrics); a ``kernel:`` loss goes through :mod:`adapters.training.kernel_loss`.
Everything runs in one ``asyncio.TaskGroup``: sampling tasks of later steps overlap training in async
mode; a failure in any task cancels the others and propagates; sampling still running at the end is
cancelled. Nothing here decides *what* to do next: that is the planner's job.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

from adapters._json import finite_or_none
from adapters.futures import CompletedFuture
from adapters.tinker.boundary import (
    NOT_REPLAYED,
    Boundary,
    RetryPolicy,
    ServiceError,
    check_forward_backward,
    check_logprobs,
)
from adapters.tinker.contract import inflight_refusal
from adapters.tinker.memory import freed_memory_kept
from adapters.tinker.protocol import SamplingClient, ServiceClient, TrainingClient
from adapters.tinker.renderers import Renderer, choose_renderer
from adapters.training import checkpoint as ck
from adapters.training import planner as pl
from adapters.training.config import TrainConfig
from adapters.training.dataset import DatasetError, Question, batch_at, cursor_at, load_split
from adapters.training.evaluation import answer_baselines, debate_evaluation, evaluate
from adapters.training.kernel_loss import kernel_loss
from adapters.training.prepare import (
    SERVICE_ENDS,
    Prepared,
    check_warm_turns_fit,
    dominant_reason,
    empty_reasons,
    kl_penalized,
    prepare_rl,
    prepare_warm,
    rl_record,
    rl_stages,
    train_metrics,
)
from adapters.training.rollouts import (
    END_REASONS,
    DebateResult,
    RolloutConfig,
    run_debates,
    self_play,
)
from adapters.training.streaming import PartTracker, part_bounds
from adapters.transcripts import Debate, dumps_debate

__all__ = [
    "METRIC_NAMES",
    "NothingToTrain",
    "TrainResult",
    "check_answers",
    "check_service",
    "config_boundary",
    "run_training",
]

_log = logging.getLogger(__name__)


class NothingToTrain(RuntimeError):
    """``max_empty_steps`` consecutive RL steps had no datum; the message names the dominant reason.

    Attributes:
      step: the last of those steps.
      reason: the dominant reason (an end reason of their debates, or ``constant_groups_removed``).
    """

    def __init__(self, message: str, *, step: int, reason: str) -> None:
        super().__init__(message)
        self.step = step
        self.reason = reason


METRIC_NAMES = (
    "step",
    "phase",
    "policy_version",
    "staleness",
    "env/all/parse_error",
    "env/all/consensus_reached",
    "env/all/round",
    "env/all/pairwise_total_votes",
    "env/all/pairwise_malformed",
    "env/all/pairwise_any_votes",
    "env/all/ac_tokens_per_turn",
    "env/all/ob_tokens_per_turn",
    "env/all/turns_per_episode",
    "env/all/total_episodes",
    "env/all/total_turns",
    "env/all/reward/total",
    "env/all/correct",
    "env/all/by_group/frac_mixed",
    "advantage/mean",
    "advantage/std",
    "advantage/min",
    "advantage/max",
    "optim/kl_sample_train_v1",
    "optim/kl_sample_train_v2",
    "optim/entropy",
    "optim/loss",
    "optim/num_datums",
    "optim/num_substeps",
    "optim/kl_penalty",
    "async/staleness_min",
    "async/staleness_mean",
    "async/staleness_max",
    "data/constant_groups_removed",
    "time/sample",
    "time/prepare",
    "time/train",
    "time/step",
    "time/total",
    "env/all/ended_early",
    *(f"env/all/end/{reason}" for reason in END_REASONS),
    "service/retries",
    "time/retries",
    "service/failures",
    "tokens/prompt",
    "tokens/prompt_cached",
    "tokens/sampled",
    "tokens/trained",
)
"""Keys of every metrics line (``eval/correct``, ``eval/parse_ok``, ``eval/pairwise_reward``, the
debate evaluation's :data:`~adapters.training.evaluation.DEBATE_EVAL_NAMES` and ``time/eval`` are added on
evaluation steps). NaN marks a value that does not exist for the step
(e.g. no action tokens). ``env/all/end/REASON`` counts the step's debates by how they ended and
``env/all/ended_early`` those the service ended (a sample that could not be had or failed its check);
``service/retries`` counts the calls retried since the previous line (``service/retries/KIND/CAUSE`` per
cause), ``time/retries`` the seconds they cost.
``tokens/*`` account the step's tokens: its prompts (``prompt_cached``: billed as prefix-cache hits, where
the service reports them), its samples, and its datums' (``trained``; warm-start steps sample nothing).
``async/staleness_*`` summarise ``step − v`` over the step's groups, ``v`` the policy version that
sampled each (0 on-policy; NaN on warm-start steps); ``policy_version`` is the oldest group's.
``time/step`` runs from the step's Prepare to its metrics line, ``time/total`` from
the previous step's metrics line (or the loop's start) to this one's: the run's wall time per step. In
on-policy mode the next batch's sampling starts as soon as its sampler is ready, while the step still
evaluates and writes its metrics, so ``time/sample + time/step`` may exceed ``time/total``."""


class TrainResult(NamedTuple):
    """What :func:`run_training` returns: the run directory and every step's metrics line, in order."""

    run_dir: Path
    metrics: list[dict[str, Any]]


@dataclass
class _Streamed:
    """A streamed step so far (``stream_minibatches``): the part prepared and not yet submitted, and per
    substep the forward_backward futures and datums of its parts."""

    batch: int
    version: int
    whole: Prepared  # the step as its parts are submitted: datums, KL inputs, then its record
    fbs: list[list[tuple[Any, int]]]
    chunks: list[list[tinker.Datum]]
    part: Prepared | None = None
    prepare_time: float = 0.0
    kl: tuple[float, int] = (0.0, 0)  # Σ KL and action tokens of the parts, for the penalty's mean


@dataclass
class _Shell:
    config: TrainConfig
    service: ServiceClient
    run: ck.RunInfo
    questions: tuple[Question, ...]
    renderer: Renderer
    training: TrainingClient
    sampler: SamplingClient
    fixed: SamplingClient | None
    fixed_state_path: str | None
    rae: npt.NDArray[np.float64]
    progress: Callable[[int, int, dict[str, Any]], None] | None
    clock: Callable[[], float]
    boundary: Boundary = field(default_factory=lambda: Boundary())
    eval_set: tuple[Question, ...] = ()  # what evaluations play (config keys eval_split, eval_dataset)
    queue: asyncio.Queue[pl.Event] = field(default_factory=asyncio.Queue)
    groups: dict[int, tuple[list[DebateResult], float]] = field(default_factory=dict)  # finished groups:
    # their debates in order, their sampling time
    prepared: Prepared | None = None
    futures: dict[int, tuple[list[tuple[Any, int]], Any]] = field(default_factory=dict)  # per substep:
    # (forward_backward future, its datums) of each request, the optim_step future
    outputs: list[types.ForwardBackwardOutput] = field(default_factory=list)
    substeps: int = 0  # substeps of the step in training
    streams: dict[int, tuple[PartTracker[DebateResult], list[float]]] = field(default_factory=dict)
    streamed: _Streamed | None = None
    record: dict[str, Any] = field(default_factory=dict)
    step_start: float = 0.0
    train_start: float = 0.0
    last_end: float = 0.0  # when the previous step's metrics line was written (or the loop started)
    state_path: str = ""
    metrics: list[dict[str, Any]] = field(default_factory=list)
    sampling_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    group: asyncio.TaskGroup | None = None
    unwritten: tuple[int, list[DebateResult]] | None = None  # a prepared step's debates, not yet written
    writing: set[asyncio.Task[None]] = field(default_factory=set)  # transcript writes not finished
    empty: list[dict[str, int]] = field(default_factory=list)  # why each consecutive empty RL step was
    rest: Any = None  # the SDK's REST client, which lists remote saved states (_rest_client)

    @property
    def rollout_config(self) -> RolloutConfig:
        return self.config.rollout_config

    def batch_questions(self, batch: int) -> list[Question]:
        n = len(self.questions)
        idx, _ = batch_at(
            cursor_at(batch, self.config.batch_size, n), self.config.batch_size, n, seed=self.config.seed
        )
        return [self.questions[i] for i in idx]

    def group_questions(self, groups: Sequence[int]) -> list[Question]:
        """The question of each group: group g is question g mod G of dataset batch g div G."""
        size = self.config.batch_size
        batches = {b: self.batch_questions(b) for b in {g // size for g in groups}}
        return [batches[g // size][g % size] for g in groups]

    # ---- requests -----------------------------------------------------------------------------------

    def execute(self, tg: asyncio.TaskGroup, state: pl.LoopState, request: pl.Request) -> None:
        match request:
            case pl.Sample(groups, version):
                if self.config.stream_minibatches:
                    sampling = self.sample(groups[0], version, self.sampler)
                else:
                    sampling = self.sample_groups(groups, version, self.sampler)
                task = tg.create_task(sampling)
                self.sampling_tasks.add(task)
                task.add_done_callback(self.sampling_tasks.discard)
            case pl.Prepare():
                self.step_start = self.clock()
                tg.create_task(self.prepare(request, state))
            case pl.PreparePart(part=part):
                if part == 0:
                    self.step_start = self.clock()
                tg.create_task(self.prepare_part(request))
            case pl.SubmitPart(step, part):
                self.submit_part(step, part)
            case pl.SubmitSubstep(step, index):
                assert self.prepared is not None
                if index == 0:
                    self.train_start = self.clock()
                    self.substeps = len(self.prepared.chunks)
                chunk = self.prepared.chunks[index]
                fb, opt = self.submit(chunk)
                self.futures[index] = ([(fb, len(chunk))], opt)
                if index == 0:
                    self.start_transcript_write()
                    self.prepared.finish()  # while the service computes
            case pl.AwaitSubstep(step, index):
                tg.create_task(self.await_substep(step, index))
            case pl.RefreshSampler(step):
                tg.create_task(self.refresh(step))
            case pl.Evaluate(step):
                tg.create_task(self.evaluate(step))
            case pl.WriteMetrics(step):
                tg.create_task(self.write_metrics_later(step, state))
            case pl.Save(step):
                tg.create_task(self.save(step, pl.checkpoint_state(state)))
            case pl.Finish():
                for task in list(self.sampling_tasks):
                    task.cancel()

    async def sample_groups(self, groups: Sequence[int], version: int, sampler: SamplingClient) -> None:
        """Rolls out the debates of ``groups`` in one batch of rollouts and reports each group as soon as
        its ``group_size`` debates have ended (``Sampled``), with their time since the request."""
        t0, size = self.clock(), self.config.group_size
        qs = [q for q in self.group_questions(groups) for _ in range(size)]
        played = self_play(
            [q.question for q in qs],
            sampler,
            num_agents=self.config.num_agents,
            answers=[q.answer for q in qs],
        )
        specs = [  # debate j of group g: its id unique across the run; its group the question's (g), shared
            # by the group's debates, which turn-level advantages per (round, agent) compare
            replace(spec, group=groups[i // size], id=f"g{groups[i // size]}-d{i % size}")
            for i, spec in enumerate(played)
        ]
        done: dict[int, list[DebateResult]] = {}

        def on_result(result: DebateResult) -> None:
            g = groups[result.index // size]
            debates = done.setdefault(g, [])
            debates.append(result)
            if len(debates) == size:
                debates.sort(key=lambda r: r.index)
                self.groups[g] = (debates, self.clock() - t0)
                self.queue.put_nowait(pl.Sampled(g, version))

        await run_debates(
            specs,
            self.renderer,
            config=self.rollout_config,
            policy_version=version,
            on_result=on_result,
            boundary=self.boundary,
        )

    async def sample(self, batch: int, version: int, sampler: SamplingClient) -> None:
        """Streaming: rolls out dataset batch ``batch`` as one unit, reporting its parts as they end."""
        t0 = self.clock()
        qs = [q for q in self.batch_questions(batch) for _ in range(self.config.group_size)]
        specs = self_play(
            [q.question for q in qs],
            sampler,
            num_agents=self.config.num_agents,
            answers=[q.answer for q in qs],
            id_prefix=f"b{batch}-q",
        )
        await run_debates(
            specs,
            self.renderer,
            config=self.rollout_config,
            policy_version=version,
            on_result=self.stream(batch, version, len(specs), t0),
            boundary=self.boundary,
        )
        self.queue.put_nowait(pl.Sampled(batch, version))

    def stream(self, batch: int, version: int, num_debates: int, t0: float) -> Callable[[DebateResult], None]:
        """The rollouts' ``on_result`` of a streamed batch: reports each part as it completes."""
        c = self.config
        tracker: PartTracker[DebateResult] = PartTracker(
            part_bounds(num_debates, c.num_substeps * c.stream_minibatches), order=c.stream_order
        )
        sample_time: list[float] = []
        self.streams[batch] = (tracker, sample_time)

        def on_result(result: DebateResult) -> None:
            for part in tracker.add(result.index, result):
                if part == tracker.num_parts - 1:
                    sample_time.append(self.clock() - t0)
                self.queue.put_nowait(pl.Streamed(batch, version, part))

        return on_result

    async def prepare(self, request: pl.Prepare, state: pl.LoopState) -> None:
        t0 = self.clock()
        version = request.version
        if request.warm:
            prepared = prepare_warm(self.config, self.renderer, self.batch_questions(request.step))
        else:
            taken = [self.groups.pop(g) for g, _ in request.groups]
            results = [r for debates, _ in taken for r in debates]
            played = [r for r in results if r.turns]
            self.unwritten = (request.step, results)
            prepared, self.rae = prepare_rl(self.config, self.renderer, results, played, self.rae)
            prepared.record.update(_end_counts(results))
            prepared.record["time/sample"] = max(t for _, t in taken)
            prepared.record.update(staleness_metrics(request.step, [v for _, v in request.groups]))
            version = min(v for _, v in request.groups)
            if self.config.kl_penalty_coef > 0 and prepared.data:
                prepared.finish()
                total, count = await self.kl_penalty(prepared, request.step)
                prepared.record["optim/kl_penalty"] = total / max(count, 1)
        prepared.record.update(_step_fields(request.step, request.warm, version, self.clock() - t0))
        self.prepared = prepared
        self.outputs = []
        self.futures = {}
        if not prepared.chunks:
            self.start_transcript_write()
            prepared.finish()
        self.queue.put_nowait(pl.Prepared(request.step, len(prepared.chunks)))

    async def prepare_part(self, request: pl.PreparePart) -> None:
        """The datums of one part of a streamed step (its debates have all finished)."""
        t0 = self.clock()
        c = self.config
        if request.part == 0:
            step = Prepared([], [], {}, [], [])
            empty: list[list[tuple[Any, int]]] = [[] for _ in range(c.num_substeps)]
            self.streamed = _Streamed(request.batch, request.version, step, empty, [[] for _ in empty])
            self.prepared, self.outputs, self.futures, self.substeps = step, [], {}, c.num_substeps
        assert self.streamed is not None
        results = self.streams[request.batch][0].part(request.part)
        played = [r for r in results if r.turns]
        part, self.rae = prepare_rl(self.config, self.renderer, results, played, self.rae, record=False)
        if c.kl_penalty_coef > 0 and part.data:
            part.finish()
            total, count = await self.kl_penalty(part, request.step)
            kl_total, kl_count = self.streamed.kl
            self.streamed.kl = (kl_total + total, kl_count + count)
        self.streamed.part = part
        self.streamed.prepare_time += self.clock() - t0
        self.queue.put_nowait(pl.PartPrepared(request.step, request.part))

    def submit_part(self, step: int, index: int) -> None:
        """Submits a part's forward_backward (and, after its substep's last part, the substep's optim_step
        when any of its parts had datums); after the batch's last part, the step's record and transcripts
        while the service computes."""
        streamed, c = self.streamed, self.config
        assert streamed is not None and streamed.part is not None
        part, streamed.part = streamed.part, None
        per = c.stream_minibatches
        k = index // per
        if index == 0:
            self.train_start = self.clock()
        if part.data:
            streamed.fbs[k].append((self.forward_backward(part.data), len(part.data)))
            streamed.chunks[k].extend(part.data)
        if index % per == per - 1:
            self.futures[k] = (streamed.fbs[k], self.optim_step() if streamed.chunks[k] else None)
        part.finish()
        whole = streamed.whole
        whole.data.extend(part.data)
        whole.sampler_logprobs.extend(part.sampler_logprobs)
        whole.masks.extend(part.masks)
        if index == c.num_substeps * per - 1:
            self.finish_streamed_step(step)

    def finish_streamed_step(self, step: int) -> None:
        """A streamed step's transcripts and record, over its whole batch (as an unstreamed step's)."""
        streamed = self.streamed
        assert streamed is not None
        tracker, sample_time = self.streams.pop(streamed.batch)
        results = tracker.results()
        played = [r for r in results if r.turns]
        self.unwritten = (step, results)
        self.start_transcript_write()
        whole = streamed.whole
        whole.chunks = [chunk for chunk in streamed.chunks if chunk]
        # the record over the whole batch (streaming excludes RAE, so no baselines move here)
        whole.record.update(rl_record(results, rl_stages(self.config, self.renderer, played, self.rae)))
        whole.record.update(_end_counts(results))
        whole.record["tokens/trained"] = sum(d.model_input.length for d in whole.data)
        whole.record["time/sample"] = sample_time[0]
        if self.config.kl_penalty_coef > 0 and whole.data:
            total, count = streamed.kl
            whole.record["optim/kl_penalty"] = total / max(count, 1)
        whole.record.update(_step_fields(step, False, streamed.version, streamed.prepare_time))
        whole.record.update(staleness_metrics(step, [streamed.version]))
        self.streamed = None

    def start_transcript_write(self) -> None:
        """Writes the step's transcripts in a task of the group (encoded and written in a thread). Building
        and encoding them costs time, so it starts once the step's requests are submitted: it then runs
        while the loop waits for the service instead of slowing the kernel stages and the submission. A
        checkpoint waits for it (:meth:`save`)."""
        if self.unwritten is not None:
            assert self.group is not None
            task = self.group.create_task(self.write_transcripts(*self.unwritten))
            self.writing.add(task)
            task.add_done_callback(self.writing.discard)
            self.unwritten = None

    async def write_transcripts(self, step: int, results: Sequence[DebateResult]) -> None:
        """The step's transcripts, one record per debate the metrics count: a debate that ended before its
        first turn is a record without turns whose ``meta`` says why (readers call it ``no_turns``)."""
        path = ck.transcript_path(self.run.run_dir, step)
        debates = [r.to_transcript() for r in results]
        await asyncio.to_thread(_write_transcripts, path, debates)

    async def kl_penalty(self, prepared: Prepared, step: int) -> tuple[float, int]:
        """Fetches the reference logprobs of ``prepared``'s datums and applies
        :func:`~adapters.training.prepare.kl_penalized` to their advantages; returns ``(Σ KL_t, action
        tokens)``."""
        reference = self.fixed or self.sampler
        compute = getattr(reference, "compute_logprobs", None)
        if compute is None:
            raise TypeError("kl_penalty_coef > 0 needs a reference sampler with compute_logprobs")
        reference_lps: list[npt.NDArray[np.float64]] = []
        advantages: list[npt.NDArray[np.float32]] = []
        for datum in prepared.data:
            target = np.asarray(datum.loss_fn_inputs["target_tokens"].to_numpy())
            tokens = [*datum.model_input.to_ints(), int(target[-1])]
            ref = await self.reference_logprobs(compute, tokens, step)
            reference_lps.append(np.asarray([0.0 if x is None else x for x in ref[1:]], dtype=np.float64))
            advantages.append(np.asarray(datum.loss_fn_inputs["advantages"].to_numpy(), dtype=np.float32))
        penalized, total, count = kl_penalized(
            advantages, prepared.sampler_logprobs, reference_lps, prepared.masks, self.config.kl_penalty_coef
        )
        for datum, adv in zip(prepared.data, penalized, strict=True):
            datum.loss_fn_inputs["advantages"] = types.TensorData.from_numpy(adv)
        return total, count

    async def reference_logprobs(
        self, compute: Callable[[tinker.ModelInput], Any], tokens: list[int], step: int
    ) -> list[float | None]:
        """The reference sampler's ``compute_logprobs`` of ``tokens``, through the boundary (checked: one
        entry per token, None first, finite)."""
        prompt = tinker.ModelInput.from_ints(tokens)

        def check(reply: list[float | None]) -> str | None:
            return check_logprobs(reply, prompt_length=len(tokens))

        reply: list[float | None] = await self.boundary.call(
            "compute_logprobs", lambda: compute(prompt), check, step=step
        )
        return reply

    def submit(self, chunk: list[tinker.Datum]) -> tuple[Any, Any]:
        """forward_backward and optim_step of one substep, back to back."""
        return self.forward_backward(chunk), self.optim_step()

    def forward_backward(self, chunk: list[tinker.Datum]) -> Any:
        """Submits ``chunk``'s forward_backward; an error at the submission comes back as its future's."""
        return _submitted(lambda: self._forward_backward(chunk))

    def _forward_backward(self, chunk: list[tinker.Datum]) -> Any:
        c = self.config
        assert self.prepared is not None
        if self.prepared.record.get("phase") == "warm_start":
            return self.training.forward_backward(chunk, "cross_entropy")
        if c.loss_fn.startswith("kernel:"):
            return self.training.forward_backward_custom(
                chunk, kernel_loss(c.loss_fn[7:], dict(c.loss_fn_config))
            )
        return self.training.forward_backward(chunk, c.loss_fn, dict(c.loss_fn_config) or None)  # type: ignore[arg-type]

    def optim_step(self) -> Any:
        """Submits the optim_step; an error at the submission comes back as its future's."""
        return _submitted(self._optim_step)

    def _optim_step(self) -> Any:
        c = self.config
        assert self.prepared is not None
        step = self.prepared.record.get("step")  # a streamed part's record has none yet: an RL step
        lr = c.learning_rate if step is None else c.learning_rate_at(step)
        adam = types.AdamParams(learning_rate=lr, beta1=c.beta1, beta2=c.beta2, eps=c.eps)
        return self.training.optim_step(adam)

    async def await_substep(self, step: int, index: int) -> None:
        fbs, opt = self.futures.pop(index, ([], None))
        call = self.boundary.call
        for fb, n in fbs:
            self.outputs.append(await call("forward_backward", _returning(fb), _fb_check(n), step=step))
        if opt is not None:
            await call("optim_step", lambda: opt, step=step)
        if index == self.substeps - 1:
            self.record["time/train"] = self.clock() - self.train_start
        self.queue.put_nowait(pl.SubstepDone(step, index))

    async def refresh(self, step: int) -> None:
        training, call = self.training, self.boundary.call
        maker = _sampler_maker(training, self.config.sampler_kind, stability=_stability(self.config))
        self.sampler = await call("refresh", maker, step=step)
        if step + 1 == self.config.warm_start_steps or self.fixed is None:
            # the fixed policy (evaluation opponents, KL reference): the initial or warm-started weights
            self.fixed = await self.snapshot(step)
            # one name per save: a Tinker server refuses to save over an existing name
            self.fixed_state_path = (await self.saved_state(f"fixed-{step + 1:06d}", step))[0].path
        self.queue.put_nowait(pl.SamplerReady(step + 1))

    async def snapshot(self, step: int) -> SamplingClient:
        """A frozen sampler of the current weights: the one in use, or with ``sampler_kind = "inflight"``
        a new one (what evaluations and the fixed policy sample)."""
        if self.config.sampler_kind == "snapshot":
            return self.sampler
        return await self.boundary.call(
            "refresh", self.training.save_weights_and_get_sampling_client, step=step
        )

    async def evaluate(self, step: int) -> None:
        t0 = self.clock()
        c, b = self.config, self.boundary
        seen = getattr(self.progress, "on_eval_debate", None)  # a display's count of evaluation debates
        policy = await self.snapshot(step)  # evaluations sample fixed weights, whatever sampler_kind
        qs = self.eval_set
        self.record.update(
            await evaluate(c, qs, self.renderer, policy, self.fixed, boundary=b, on_result=seen)
        )
        self.record.update(await debate_evaluation(c, qs, self.renderer, policy, boundary=b, on_result=seen))
        self.record.update(answer_baselines(self.questions, qs[: c.eval_questions]))
        self.record["time/eval"] = self.clock() - t0
        self.queue.put_nowait(pl.Evaluated(step))

    async def write_metrics_later(self, step: int, state: pl.LoopState) -> None:
        """:meth:`write_metrics` after one turn of the event loop: the rollouts of the next batch, requested
        just before (on-policy, as soon as its sampler is ready), send their first requests first, and the
        bookkeeping runs while the service samples."""
        await asyncio.sleep(0)
        self.write_metrics(step, state)

    def write_metrics(self, step: int, state: pl.LoopState) -> None:
        assert self.prepared is not None
        p = self.prepared
        record = {name: math.nan for name in METRIC_NAMES}
        record["time/train"] = 0.0
        record.update(p.record)
        record.update(self.record)
        record.update(self.train_metrics())
        record.update(self.boundary.stats.take())
        record["optim/num_datums"] = len(p.data)
        record["optim/num_substeps"] = len(p.chunks)
        now = self.clock()
        record["time/step"] = now - self.step_start
        record["time/total"] = now - self.last_end
        self.last_end = now
        record = finite_or_none(record)  # NaN → null, numpy scalars → Python numbers
        ck.append_metrics(self.run.run_dir, record)
        self.metrics.append(record)
        self.record = {}
        self.count_empty(step, record)
        # the step's datums and outputs are done with: freed now, the next step's arrays reuse their memory
        self.prepared, self.outputs = None, []
        if self.progress is not None:
            self.progress(step, self.config.total_steps, record)
        self.queue.put_nowait(pl.MetricsWritten(step))

    def count_empty(self, step: int, record: dict[str, Any]) -> None:
        """Counts consecutive RL steps without a datum; ``max_empty_steps`` of them end the run.

        Raises:
          NothingToTrain: naming the dominant reason of those steps (:func:`~adapters.training.prepare.
            dominant_reason`).
        """
        limit = self.config.max_empty_steps
        if record.get("phase") != "rl" or record.get("optim/num_datums"):
            self.empty = []
            return
        self.empty.append(empty_reasons(record))
        if not limit or len(self.empty) < limit:
            return
        reason, n = dominant_reason(self.empty)
        raise NothingToTrain(
            f"{limit} consecutive RL steps (to step {step}) had nothing to train on; the dominant reason: "
            f"{reason} ({n} debates or groups); the run's metrics.jsonl and transcripts show each step's",
            step=step,
            reason=reason,
        )

    def train_metrics(self) -> dict[str, Any]:
        """:func:`~adapters.training.prepare.train_metrics` of the step in training."""
        p = self.prepared
        if p is None:
            return {}
        return train_metrics(self.outputs, p.data, p.sampler_logprobs, p.masks)

    async def saved_state(
        self, name: str, step: int
    ) -> tuple[types.SaveWeightsResponse, dict[str, Any] | None]:
        """``save_state(name)``, read back (:func:`checkpoint.verify_saved_state`) before any checkpoint
        records it; a save that fails the read-back is made once more, then the run stops.

        Raises:
          ServiceError: the save failed, or its file failed the read-back twice (cause ``unverified``).
        """
        return await _save_verified(self.boundary, self.training, name, step, self.rest)

    async def save(self, step: int, saved: pl.LoopState) -> None:
        if self.writing:  # a checkpoint implies the transcripts of every step it covers are on disk
            pending = set(self.writing)
            await asyncio.wait(pending)
            if any(t.cancelled() or t.exception() is not None for t in pending):
                return  # the failed write ends the group: no checkpoint after a lost file
        response, check = await self.saved_state(f"step-{step + 1:06d}", step)
        n, size = len(self.questions), self.config.batch_size
        first = saved.to_sample[0] if saved.to_sample else saved.next_group  # the first group not trained
        cursor = cursor_at(first // size, size, n)
        run_dir = self.run.run_dir
        fixed = self.fixed_state_path
        payload = {
            "loop": pl.state_to_dict(saved),
            "state_path": ck.stored_path(run_dir, response.path),
            "state_check": check,
            "fixed_state_path": None if fixed is None else ck.stored_path(run_dir, fixed),
            "policy_version": saved.version,
            "dataset_cursor": {"epoch": cursor.epoch, "position": cursor.position},
            "rng": {"kind": "counter", "seed": self.config.seed, "next_group": saved.next_group},
            "rae_baselines": self.rae.tolist(),
        }
        ck.save_checkpoint(self.run, step + 1, payload)
        self.queue.put_nowait(pl.Saved(step))


async def run_training(
    config: TrainConfig,
    service_client: ServiceClient,
    *,
    resume: bool = False,
    renderer: Renderer | None = None,
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    boundary: Boundary | None = None,
) -> TrainResult:
    """Trains debating agents; returns the run directory and the metrics of every step.

    Args:
      config: the :class:`~adapters.training.config.TrainConfig`; ``config.out`` is the run directory.
      service_client: anything with the :class:`~adapters.tinker.protocol.ServiceClient` surface.
      resume: continue the run in ``config.out`` from its last complete checkpoint (keyword).
      renderer: the chat format; default the one the config key ``renderer`` chooses for the training
        client's tokenizer (:func:`~adapters.tinker.renderers.choose_renderer`).
      progress: called after each step's metrics line with ``(step, total_steps, record)`` (a display,
        loggers: :class:`adapters.training.loggers.Sinks`); its ``on_eval_debate``, if it has one, with
        each evaluation debate as it ends.
      clock: the clock of the ``time/*`` metrics.
      boundary: where every service call goes through (:mod:`adapters.tinker.boundary`); default one with
        the config's ``deadlines``, ``retry_attempts`` and ``retry_max_s``, its backoff seeded by ``seed``.

    Returns:
      :class:`TrainResult`; ``metrics`` holds every step's line (those before a resume re-read from disk).

    Raises:
      adapters.training.checkpoint.CheckpointError: a run directory that cannot be used as asked (a fresh
        run needs a new or empty one), or a checkpoint that cannot be resumed (naming its file).
      adapters.training.dataset.DatasetError: a bad dataset, or one without answers where the config
        needs them (:func:`check_answers`).
      ValueError: a service that cannot start the run (:func:`check_service`), before the run directory
        is made; with no ``renderer``, a tokenizer that does not fit the config's ``renderer`` (found
        once the training client exists: ``debate-kernel train`` chooses before the run directory).
      ServiceError: a service call failed for good (retries ran out, a permanent error, a bad reply or a
        save that fails its read-back), naming the call, the step and the cause; the run directory stays
        resumable from its last checkpoint.
      NothingToTrain: ``max_empty_steps`` consecutive RL steps had no datum (naming the dominant reason).

    Examples:
      Two steps of two debates of two agents on the in-repo fake service:

      >>> import asyncio, tempfile
      >>> from adapters.training import TrainConfig
      >>> from adapters.tinker.fake import FakeServiceClient
      >>> with tempfile.TemporaryDirectory() as tmp:
      ...     config = TrainConfig(out=f"{tmp}/run", steps=2, batch_size=2, num_agents=2, max_rounds=1,
      ...                          max_tokens=64, eval_questions=1)
      ...     result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
      ...     sorted(p.name for p in result.run_dir.iterdir())
      ['checkpoints', 'metrics.jsonl', 'run.json', 'transcripts']
      >>> [(m["step"], m["env/all/total_episodes"]) for m in result.metrics]
      [(0, 2), (1, 2)]
    """
    if boundary is None:
        boundary = config_boundary(config)
    failed: list[ServiceError] = []  # the restarts' causes since the run last got past a failed step
    while True:
        try:
            return await _run_training(config, service_client, resume, renderer, progress, clock, boundary)
        except BaseExceptionGroup as group:  # a task's failure, unwrapped: one named error, not a group
            error = _named(group)
        except ServiceError as e:
            error = e
        if not (isinstance(error, ServiceError) and _restartable(error, failed, config.retry_attempts)):
            raise error from None
        failed.append(error)
        boundary.stats.retries[f"{error.kind}/{error.cause}"] += 1
        _log.warning("%s; restarting from the last checkpoint (restart %d)", error, len(failed))
        resume = True


def config_boundary(config: TrainConfig) -> Boundary:
    """The boundary of a run of ``config``: its per-kind ``deadlines``, ``retry_attempts`` and
    ``retry_max_s``, the backoff jitter seeded by ``seed``."""
    policy = RetryPolicy(max_attempts=config.retry_attempts, max_total_s=config.retry_max_s)
    return Boundary(config.call_deadlines, policy, rng=random.Random(config.seed))


def _restartable(error: ServiceError, failed: list[ServiceError], attempts: int) -> bool:
    """Whether a failed ``forward_backward`` / ``optim_step`` (never replayed in place:
    :data:`~adapters.tinker.boundary.NOT_REPLAYED`) is retried by restarting the run from its last
    checkpoint, in this process, as ``--resume`` would: when its failure is transient and fewer than
    ``attempts − 1`` restarts were made since the run last got past the step of a failure (``failed`` is
    cleared then). The checkpoint's saved state holds exactly the updates it recorded, so an update
    whose reply was lost is neither lost nor applied twice."""
    if error.kind not in NOT_REPLAYED or not error.transient:
        return False
    if failed and error.step is not None and all(f.step is not None and f.step < error.step for f in failed):
        failed.clear()  # the run got past every step that failed before
    return len(failed) < attempts - 1


def _named(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error a task group's failure stands for: its first project error (ServiceError,
    NothingToTrain, CheckpointError), else the group itself (a programmer error or a simulated crash
    propagates as the group raised it)."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        e = pending.pop(0)
        if isinstance(e, BaseExceptionGroup):
            pending[:0] = list(e.exceptions)
        elif not isinstance(e, asyncio.CancelledError):
            leaves.append(e)
    for e in leaves:
        if isinstance(e, ServiceError | NothingToTrain | ck.CheckpointError):
            return e
    return group


async def _run_training(
    config: TrainConfig,
    service_client: ServiceClient,
    resume: bool,
    renderer: Renderer | None,
    progress: Callable[[int, int, dict[str, Any]], None] | None,
    clock: Callable[[], float],
    boundary: Boundary,
) -> TrainResult:
    """:func:`run_training`'s body."""
    split = load_split(config.dataset, eval_split=config.eval_split, eval_dataset=config.eval_dataset)
    questions = split.train
    config = config.for_dataset(len(questions))  # num_epochs: the run's steps
    check_answers(config, questions)
    if not resume:
        check_service(config, service_client)
    run = ck.init_run(config.out, config.to_dict(), resume=resume, defaults=TrainConfig().to_dict())
    latest = ck.latest_checkpoint(run) if resume else None
    resumed: pl.LoopState | None = None
    rae = np.zeros(config.num_agents, dtype=np.float64)
    fixed_state_path: str | None = None
    fixed_client: TrainingClient | None = None
    rest = _rest_client(service_client)
    if latest is not None:
        saved = _saved_loop(run, latest, config.num_agents, plan_config(config))
        recorded = latest.state.get("state_check")
        if rest is not None and isinstance(recorded, dict) and recorded.get("listed"):
            listing = await _listing(boundary, rest, saved.state_path, "restore", None)
            ck.check_listed_state(saved.state_path, recorded, listing, checkpoint=latest.path / ck.LOOP_STATE)
        training = await _restore(service_client, saved.state_path, latest, boundary)
        if saved.fixed_state_path is not None:
            fixed_client = await _restore(service_client, saved.fixed_state_path, latest, boundary)
        resumed, rae, fixed_state_path = saved.loop, saved.rae, saved.fixed_state_path
        kept = ck.truncate_metrics(run.run_dir, latest.steps_done)
    else:
        training = await _new_training_client(service_client, config, boundary)
        kept = ck.truncate_metrics(run.run_dir, 0) if resume else []
    boundary.watch(training)  # a paused queue is waited out (tinker 0.38's queue states)
    if renderer is None:
        renderer = choose_renderer(config.renderer, training.get_tokenizer(), model=config.model)
    if boundary.vocab_size is None:
        boundary.vocab_size = _vocab_size(training.get_tokenizer())
    if config.warm_start_steps > 0:
        check_warm_turns_fit(config, renderer, questions)
    if config.sampler_kind == "inflight" and (refusal := inflight_refusal(training)) is not None:
        raise ValueError(f"config key sampler_kind 'inflight' needs a service that makes them: {refusal}")
    maker = _sampler_maker(training, config.sampler_kind, stability=_stability(config))
    sampler = await boundary.call("refresh", maker)
    fixed: SamplingClient | None = None
    if fixed_client is not None:
        fixed = await boundary.call("refresh", fixed_client.save_weights_and_get_sampling_client)
    elif config.warm_start_steps == 0:
        snapshot = config.sampler_kind == "snapshot"
        fixed = (
            sampler
            if snapshot
            else await boundary.call("refresh", training.save_weights_and_get_sampling_client)
        )
        fixed_state_path = (await _save_verified(boundary, training, "fixed", None, rest))[0].path
    shell = _Shell(
        config,
        service_client,
        run,
        questions,
        renderer,
        training,
        sampler,
        fixed,
        fixed_state_path,
        rae,
        progress,
        clock,
        boundary,
    )
    shell.metrics = list(kept)
    shell.eval_set = split.eval
    shell.rest = rest
    shell.last_end = clock()
    plan = plan_config(config)
    if resumed is not None and resumed.step >= plan.total_steps:
        return TrainResult(run.run_dir, shell.metrics)
    with freed_memory_kept():
        async with asyncio.TaskGroup() as tg:
            shell.group = tg
            state, requests = pl.start(plan, resumed)
            while True:
                for request in requests:
                    shell.execute(tg, state, request)
                if state.phase == "done":
                    break
                event = await shell.queue.get()
                state, requests = pl.step(plan, state, event)
    return TrainResult(run.run_dir, shell.metrics)


# ---------------------------------------------------------------------------------------------------------


def plan_config(config: TrainConfig) -> pl.PlanConfig:
    """The planner's constants of a run: its unit is a question's group of debates, ``batch_size`` a
    step, or the whole batch when streaming."""
    return pl.PlanConfig(
        total_steps=config.total_steps,
        warm_start_steps=config.warm_start_steps,
        num_substeps=config.num_substeps,
        save_every=config.save_every,
        eval_every=config.eval_every,
        max_steps_off_policy=config.max_steps_off_policy,
        stream_parts=config.num_substeps * config.stream_minibatches,
        groups_per_step=1 if config.stream_minibatches else config.batch_size,
    )


def check_service(config: TrainConfig, service_client: ServiceClient) -> None:
    """Checks that ``service_client`` can start the run ``config`` asks for (before its directory is made).

    Raises:
      ValueError: ``lora_rank = 0`` (full fine-tuning) on a service without
        ``create_full_training_client`` (Tinker and the fake train LoRA adapters only).
    """
    if config.lora_rank == 0 and getattr(service_client, "create_full_training_client", None) is None:
        raise ValueError(
            "config key lora_rank = 0 (full fine-tuning) needs the local service; "
            f"{type(service_client).__name__} trains LoRA adapters only (lora_rank >= 1)"
        )


def check_answers(config: TrainConfig, questions: Sequence[Question]) -> None:
    """Checks that the dataset has reference answers where the config needs them.

    Raises:
      DatasetError: no question has an answer, while the warm start (its turns carry the answers) or
        the correctness reward (``correctness_weight`` ≠ 0) needs them.
    """
    if any(q.answer is not None for q in questions):
        return
    needs = []
    if config.warm_start_steps > 0:
        needs.append(f"warm_start_steps = {config.warm_start_steps} (its turns carry the reference answers)")
    if config.correctness_weight != 0:
        needs.append(f"correctness_weight = {config.correctness_weight} (it rewards right answers)")
    if needs:
        keys = "that key" if len(needs) == 1 else "those keys"
        raise DatasetError(
            f'{config.dataset}: no question has an "answer", and config key {" and ".join(needs)} needs '
            f"answers: add them, or set {keys} to 0"
        )


class _SavedLoop(NamedTuple):
    """What a checkpoint's loop state restores, checked (:func:`_saved_loop`)."""

    loop: pl.LoopState
    state_path: str  # the service's path of the saved weights and optimizer state
    fixed_state_path: str | None  # the fixed policy's, if it was saved
    rae: npt.NDArray[np.float64]


def _saved_loop(run: ck.RunInfo, latest: ck.Checkpoint, num_agents: int, plan: pl.PlanConfig) -> _SavedLoop:
    """The loop state of ``latest``, its saved-state paths resolved against the run directory.

    Raises:
      CheckpointError: a field missing or malformed, naming the checkpoint's loop-state file.
    """
    where = latest.path / ck.LOOP_STATE
    state = latest.state
    if "loop" not in state:
        raise ck.CheckpointError(f'checkpoint {where} is unusable: it has no "loop" state')
    try:
        loop = pl.state_from_dict(state["loop"], plan)
    except ValueError as e:
        raise ck.CheckpointError(f"checkpoint {where} is unusable: {e}") from None
    state_path = _saved_state_path(run, state.get("state_path"), "state_path", where)
    ck.check_saved_state(state_path, state.get("state_check"), checkpoint=where)
    fixed = state.get("fixed_state_path")
    fixed_path = None if fixed is None else _saved_state_path(run, fixed, "fixed_state_path", where)
    rae = np.zeros(num_agents, dtype=np.float64)
    if state.get("rae_baselines") is not None:
        rae = _saved_baselines(state["rae_baselines"], num_agents, where)
    return _SavedLoop(loop, state_path, fixed_path, rae)


def _saved_state_path(run: ck.RunInfo, value: Any, key: str, where: Path) -> str:
    """The path a checkpoint recorded under ``key``, for the service (:func:`checkpoint.saved_path`)."""
    if not isinstance(value, str) or not value:
        raise ck.CheckpointError(f"checkpoint {where} is unusable: {key!r} is {value!r}, not a path")
    return ck.saved_path(run.run_dir, value, checkpoint=where)


def _saved_baselines(value: Any, num_agents: int, where: Path) -> npt.NDArray[np.float64]:
    """The RAE baselines a checkpoint saved: ``num_agents`` finite numbers."""
    try:
        rae = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        rae = np.full(0, np.nan)
    if rae.shape != (num_agents,) or not np.all(np.isfinite(rae)):
        raise ck.CheckpointError(
            f"checkpoint {where} is unusable: 'rae_baselines' is {value!r}, not {num_agents} numbers"
        )
    return rae


async def _restore(
    service_client: ServiceClient, path: str, latest: ck.Checkpoint, boundary: Boundary
) -> TrainingClient:
    """A training client on the state ``latest`` saved at ``path`` (through the boundary: ``restore``).

    Raises:
      CheckpointError: the service cannot read it (missing or corrupt), naming the checkpoint.
      ServiceError: the service failed otherwise (retries ran out, or a permanent SDK error).
    """
    try:
        return await boundary.call(
            "restore", lambda: service_client.create_training_client_from_state_with_optimizer(path)
        )
    except ServiceError as e:
        # the service refusing the path (its own error, or the SDK's user-category failure, 400 or 404: the
        # state is missing or unreadable) is the checkpoint's problem; transport and server errors are not
        if e.cause not in ("error", "request_failed_user", "bad_request", "not_found"):
            raise
        raise ck.CheckpointError(
            f"checkpoint {latest.path / ck.LOOP_STATE}: cannot load its saved state {path}: {e.detail}"
        ) from None


async def _new_training_client(
    service_client: ServiceClient, config: TrainConfig, boundary: Boundary
) -> TrainingClient:
    """A LoRA client of rank ``lora_rank``, or with ``lora_rank = 0`` a full fine-tuning client (a method
    only the local service has: its models start from random weights, which LoRA alone learns slowly)."""
    if config.lora_rank > 0:
        targets = {"train_attn": config.train_attn, "train_mlp": config.train_mlp}
        targets["train_unembed"] = config.train_unembed
        chosen = {} if all(targets.values()) else targets  # the defaults: a service need not know the flags
        return await boundary.call(
            "create",
            lambda: service_client.create_lora_training_client(config.model, config.lora_rank, **chosen),
        )
    check_service(config, service_client)
    full = service_client.create_full_training_client  # type: ignore[attr-defined]
    client: TrainingClient = await boundary.call("create", lambda: full(config.model))
    return client


def _vocab_size(tokenizer: Any) -> int | None:
    """How many ids the tokenizer decodes (``len``, which counts added tokens, else ``vocab_size``)."""
    try:
        return len(tokenizer)
    except TypeError:
        size = getattr(tokenizer, "vocab_size", None)
        return int(size) if isinstance(size, int) else None


def _rest_client(service_client: ServiceClient) -> Any:
    """The SDK's REST client of ``service_client``'s server (it lists a training run's saved states), or
    None for a service without one (the in-repo fake and the in-process service save local files, read
    back directly). SDK 0.38 deprecates ``ServiceClient.create_rest_client`` in favour of
    ``tinker.RestClient(base_url=, api_key=)``, which would need the URL and key the caller gave the
    service client; the deprecated method reaches the same server with the same key, so it is used,
    quietly, while it exists (without it, remote states are not read back)."""
    make = getattr(service_client, "create_rest_client", None)
    if not callable(make):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return make()


async def _listing(boundary: Boundary, rest: Any, path: str, kind: str, step: int | None) -> Any:
    """The checkpoint list of the training run that saved the remote state ``path``, through the boundary
    under ``kind``'s deadline and retries."""
    run_id = ck.remote_run_id(path)
    return await boundary.call(kind, lambda: rest.list_checkpoints(run_id), step=step)


async def _save_verified(
    boundary: Boundary, training: TrainingClient, name: str, step: int | None, rest: Any = None
) -> tuple[types.SaveWeightsResponse, dict[str, Any] | None]:
    """``save_state(name)`` through the boundary, read back: a local file as resume will load it
    (:func:`checkpoint.verify_saved_state`), a remote state (``tinker://``) in its run's checkpoint list
    when ``rest`` is the SDK's REST client (:func:`checkpoint.listed_state`). A save that fails the
    read-back is made once more. Returns the reply and what the checkpoint records of the state (size
    and checksum of a file, the listed size of a remote state; None when nothing could be read back).

    Raises:
      ServiceError: the save failed, or its state failed the read-back twice (cause ``unverified``).
    """
    problem = ""
    for _ in range(2):
        response = await boundary.call("save_state", lambda: training.save_state(name), step=step)
        try:
            if rest is not None and ck.remote_run_id(response.path) is not None:
                listing = await _listing(boundary, rest, response.path, "save_state", step)
                return response, ck.listed_state(response.path, listing)
            return response, await asyncio.to_thread(ck.verify_saved_state, response.path)
        except ck.CheckpointError as e:
            problem = str(e)
    raise ServiceError("save_state", "unverified", problem, step=step, attempts=2, transient=False)


def _sampler_maker(training: TrainingClient, kind: str, *, stability: bool = False) -> Callable[[], Any]:
    """The call that makes the run's sampler of the current weights: a snapshot, or with ``kind``
    ``"inflight"`` tinker 0.38's shared inflight sampler (the service's support is checked at the start);
    with ``stability`` (``loss_fn = "stable_reinforce"``) one made with ``record_stability_info=True``,
    whose samples the service records for the loss."""
    save: Any = training.save_weights_and_get_sampling_client
    options: dict[str, Any] = {"record_stability_info": True} if stability else {}
    if kind != "snapshot":
        options["kind"] = kind
    return (lambda: save(**options)) if options else save


def _stability(config: TrainConfig) -> bool:
    """Whether the run's samplers record stability info (``stable_reinforce`` trains on their samples)."""
    return config.loss_fn == "stable_reinforce"


def _returning(future: Any) -> Callable[[], Any]:
    """A request maker that hands back an already submitted ``future`` (a call that is never replayed)."""
    return lambda: future


def _fb_check(num_datums: int) -> Callable[[types.ForwardBackwardOutput], str | None]:
    """The check of a forward_backward reply to ``num_datums`` datums."""
    return lambda out: check_forward_backward(out, num_datums=num_datums)


def _submitted(submit: Callable[[], Any]) -> Any:
    """``submit()``'s future; an exception it raises comes back as a failed future's, so that the
    boundary meets it where the reply is awaited."""
    try:
        return submit()
    except Exception as e:
        return CompletedFuture(error=e)


def _end_counts(results: Sequence[DebateResult]) -> dict[str, int]:
    """``env/all/end/REASON`` for every end reason and ``env/all/ended_early`` (see :data:`METRIC_NAMES`)."""
    counts = {f"env/all/end/{reason}": 0 for reason in END_REASONS}
    for r in results:
        counts[f"env/all/end/{r.end_reason}"] += 1
    counts["env/all/ended_early"] = sum(1 for r in results if r.end_reason in SERVICE_ENDS)
    return counts


def _write_transcripts(path: Path, debates: Sequence[Debate]) -> None:
    """``debates`` as JSON Lines in ``path``, atomically (a fsynced temporary file, renamed)."""
    ck.write_text_atomic(path, "".join(dumps_debate(d) + "\n" for d in debates))


def staleness_metrics(step: int, versions: Sequence[int]) -> dict[str, float]:
    """``async/staleness_{min,mean,max}`` of a step: ``step − v`` over the policy versions ``v`` that
    sampled its groups.

    Examples:
      >>> staleness_metrics(5, [5, 4, 4, 2])
      {'async/staleness_min': 0.0, 'async/staleness_mean': 1.25, 'async/staleness_max': 3.0}
    """
    ages = [step - v for v in versions]
    return {
        "async/staleness_min": float(min(ages)),
        "async/staleness_mean": sum(ages) / len(ages),
        "async/staleness_max": float(max(ages)),
    }


def _step_fields(step: int, warm: bool, version: int, prepare_time: float) -> dict[str, Any]:
    return {
        "step": step,
        "phase": "warm_start" if warm else "rl",
        "policy_version": version,
        "staleness": step - version,
        "time/prepare": prepare_time,
    }
