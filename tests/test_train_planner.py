"""The I/O-free training planner, driven through random interleavings and crash points."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.training import planner as pl
from adapters.training.planner import (
    AwaitSubstep,
    Evaluate,
    Finish,
    LoopState,
    PlanConfig,
    Prepare,
    PreparePart,
    RefreshSampler,
    Sample,
    Save,
    SubmitPart,
    SubmitSubstep,
    WriteMetrics,
)


@dataclass
class Sim:
    """A simulated shell: outstanding results complete in an order Hypothesis picks."""

    config: PlanConfig
    chunks: int
    outstanding: list[pl.Event] = field(default_factory=list)
    submitted: set[tuple[int, int]] = field(default_factory=set)
    trained: list[int] = field(default_factory=list)  # groups trained in the current lineage, in order
    staleness: list[int] = field(default_factory=list)  # of each group trained
    step_sizes: list[int] = field(default_factory=list)  # groups of each RL step trained
    metrics: list[int] = field(default_factory=list)
    checkpoint: tuple[LoopState, list[int], int] | None = None
    candidate: tuple[LoopState, list[int], int] | None = None
    order: list[pl.Request] = field(default_factory=list)
    finished: bool = False
    current: Prepare | PreparePart | None = None
    parts: list[int] = field(default_factory=list)  # the parts of the current step prepared, in order
    parts_submitted: set[tuple[int, int]] = field(default_factory=set)
    open: set[int] = field(default_factory=set)  # groups started and not trained, in this lineage
    ready: set[tuple[int, int]] = field(default_factory=set)  # (group, version) finished, not taken
    most_open: int = 0

    def run(self, reqs: tuple[pl.Request, ...], state: LoopState) -> None:
        for r in reqs:
            self.order.append(r)
            match r:
                case Sample(groups, version):
                    assert not self.open & set(groups)  # a group is started once (per lineage)
                    self.open |= set(groups)
                    self.most_open = max(self.most_open, len(self.open))
                    assert len(self.open) <= self.config.cap  # the pacing rule
                    if self.config.stream_parts:
                        (batch,) = groups
                        self.outstanding.append(pl.Streamed(batch, version, 0))
                    else:
                        self.outstanding.extend(pl.Sampled(g, version) for g in groups)
                case PreparePart(step, batch, version, part):
                    assert self.config.stream_parts and step >= self.config.warm_start_steps
                    if part == 0:
                        self.current, self.parts = r, []
                    assert isinstance(self.current, PreparePart)
                    current = self.current
                    assert (current.step, current.batch, current.version) == (step, batch, version)
                    assert part == len(self.parts)  # one at a time, in order
                    self.parts.append(part)
                    self.outstanding.append(pl.PartPrepared(step, part))
                case SubmitPart(step, part):
                    assert (step, part) not in self.parts_submitted and part == self.parts[-1]
                    self.parts_submitted.add((step, part))
                case Prepare():
                    self.current = r
                    if not r.warm:  # the oldest finished groups (version, then dataset order)
                        taken = set(r.groups)
                        assert taken <= self.ready and len(taken) == len(r.groups)
                        left = sorted(self.ready - taken, key=lambda x: (x[1], x[0]))
                        assert not left or max((v, g) for g, v in taken) < (left[0][1], left[0][0])
                        self.ready -= taken
                    n = 0 if r.warm else self.chunks
                    self.outstanding.append(pl.Prepared(r.step, max(n, 1 if r.warm else 0)))
                case SubmitSubstep(step, index):
                    assert (step, index) not in self.submitted
                    self.submitted.add((step, index))
                case AwaitSubstep(step, index) if state.phase == "streaming":
                    per = self.config.parts_per_substep  # every part of the substep went first
                    parts = range(index * per, (index + 1) * per)
                    assert all((step, j) in self.parts_submitted for j in parts)
                    self.outstanding.append(pl.SubstepDone(step, index))
                case AwaitSubstep(step, index):
                    assert (step, index) in self.submitted
                    # pipelining: the next substep is submitted before this one is awaited
                    if index + 1 < state.chunks:
                        assert (step, index + 1) in self.submitted
                    self.outstanding.append(pl.SubstepDone(step, index))
                case RefreshSampler(step):
                    assert self.current is not None
                    if isinstance(self.current, PreparePart):  # every part, once
                        assert self.parts == list(range(self.config.stream_parts))
                        assert all((step, j) in self.parts_submitted for j in self.parts)
                        groups = ((self.current.batch, self.current.version),)
                    else:
                        groups = self.current.groups
                    if groups:
                        self.trained.extend(g for g, _ in groups)
                        self.staleness.extend(step - v for _, v in groups)
                        self.step_sizes.append(len(groups))
                    self.outstanding.append(pl.SamplerReady(step + 1))
                case Evaluate(step):
                    self.outstanding.append(pl.Evaluated(step))
                case WriteMetrics(step):
                    self.metrics.append(step)
                    self.outstanding.append(pl.MetricsWritten(step))
                case Save(step):
                    saved = (pl.checkpoint_state(state), list(self.trained), len(self.metrics))
                    self.candidate = saved
                    self.outstanding.append(pl.Saved(step))
                case Finish():
                    self.finished = True

    def release(self) -> None:
        """``SamplerReady``: the step's groups are trained (the planner counts them until now)."""
        current = self.current
        if isinstance(current, PreparePart):
            self.open.discard(current.batch)
        elif current is not None:
            self.open -= {g for g, _ in current.groups}


def drive(config: PlanConfig, chunks: int, data: st.DataObject, crashes: int) -> Sim:
    sim = Sim(config, chunks)
    state, reqs = pl.start(config)
    sim.run(reqs, state)
    for _ in range(10_000):
        if sim.finished:
            return sim
        assert sim.outstanding, f"deadlock in {state}"
        if crashes and data.draw(st.integers(0, 30), label="crash?") == 0:
            crashes -= 1
            # SIGKILL: everything after the last complete checkpoint is lost
            if sim.checkpoint is None:
                saved, sim.trained, kept = None, [], 0
            else:
                saved, trained, kept = sim.checkpoint
                sim.trained = list(trained)
            del sim.metrics[kept:]
            del sim.staleness[len(sim.trained) :]
            sizes = list(itertools.accumulate(sim.step_sizes))
            del sim.step_sizes[bisect.bisect_right(sizes, len(sim.trained)) :]
            sim.outstanding.clear()
            sim.submitted.clear()
            sim.parts_submitted.clear()
            sim.open.clear()
            sim.ready.clear()
            sim.current = None
            state, reqs = pl.start(config, saved)
            sim.run(reqs, state)
            continue
        i = data.draw(st.integers(0, len(sim.outstanding) - 1), label="next result")
        event = sim.outstanding.pop(i)
        if isinstance(event, pl.Streamed):  # the shell reports parts in order, then the whole batch
            b, v, j = event.batch, event.version, event.part
            more = j + 1 < config.stream_parts
            sim.outstanding.append(pl.Streamed(b, v, j + 1) if more else pl.Sampled(b, v))
        if isinstance(event, pl.Sampled) and not config.stream_parts:
            sim.ready.add((event.group, event.version))
        if isinstance(event, pl.SamplerReady):
            sim.release()
        if isinstance(event, pl.Saved):
            sim.checkpoint = sim.candidate  # the marker file exists: the checkpoint counts
        state, reqs = pl.step(config, state, event)
        sim.run(reqs, state)
    raise AssertionError("the loop did not finish")


configs = st.builds(
    lambda total, warm, substeps, save, ev, k, g, final: PlanConfig(
        total_steps=total + warm,
        warm_start_steps=warm,
        num_substeps=substeps,
        save_every=save,
        eval_every=ev,
        max_steps_off_policy=k,
        groups_per_step=g,
        final_groups=min(final, g),
    ),
    st.integers(1, 6),
    st.integers(0, 1),
    st.integers(1, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(1, 3),
    st.integers(0, 3),
)


streaming_configs = st.builds(
    lambda total, warm, substeps, per, save, ev: PlanConfig(
        total_steps=total + warm,
        warm_start_steps=warm,
        num_substeps=substeps,
        save_every=save,
        eval_every=ev,
        stream_parts=substeps * per,
    ),
    st.integers(1, 6),
    st.integers(0, 2),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 3),
    st.integers(0, 3),
)


@given(streaming_configs, st.data(), st.integers(0, 3))
def test_streamed_steps_prepare_and_submit_every_part_once_in_order(
    config: PlanConfig, data: st.DataObject, crashes: int
) -> None:
    """Parts are prepared one at a time in order and each submitted once; a substep is awaited only after
    its last part went; the sampler is refreshed after every part (checked in ``Sim``); across crashes
    every step is written once and batches are trained on-policy, in order."""
    sim = drive(config, config.num_substeps, data, crashes)
    assert sim.metrics == list(range(config.total_steps))
    assert sim.trained == list(range(config.warm_start_steps, config.total_steps))
    assert set(sim.staleness) <= {0}


def test_a_streamed_step_starts_with_its_first_part_and_overlaps_sampling() -> None:
    config = PlanConfig(total_steps=1, num_substeps=2, stream_parts=4)
    state, reqs = pl.start(config)
    assert reqs == (Sample((0,), 0),)
    state, reqs = pl.step(config, state, pl.Streamed(0, 0, 0))
    assert reqs == (PreparePart(0, 0, 0, 0),)  # the rest of the batch is still being sampled
    state, reqs = pl.step(config, state, pl.Streamed(0, 0, 1))
    assert reqs == ()  # one part at a time
    state, reqs = pl.step(config, state, pl.PartPrepared(0, 0))
    assert reqs == (SubmitPart(0, 0), PreparePart(0, 0, 0, 1))
    state, reqs = pl.step(config, state, pl.PartPrepared(0, 1))
    assert reqs == (SubmitPart(0, 1), AwaitSubstep(0, 0))  # substep 0's optim_step goes with part 1
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 0))
    assert reqs == ()
    for part in (2, 3):
        state, reqs = pl.step(config, state, pl.Streamed(0, 0, part))
    assert reqs == () and state.part_pending
    state, reqs = pl.step(config, state, pl.Sampled(0, 0))
    state, reqs = pl.step(config, state, pl.PartPrepared(0, 2))
    assert reqs == (SubmitPart(0, 2), PreparePart(0, 0, 0, 3))
    state, reqs = pl.step(config, state, pl.PartPrepared(0, 3))
    assert reqs == (SubmitPart(0, 3), AwaitSubstep(0, 1))
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 1))
    assert reqs == (RefreshSampler(0),)


def test_streaming_refuses_off_policy_and_parts_that_do_not_split_into_substeps() -> None:
    with pytest.raises(ValueError, match="on-policy"):
        PlanConfig(total_steps=2, stream_parts=2, max_steps_off_policy=1)
    with pytest.raises(ValueError, match="multiple of num_substeps = 2"):
        PlanConfig(total_steps=2, num_substeps=2, stream_parts=3)
    config = PlanConfig(total_steps=1, stream_parts=2)
    state, _ = pl.start(config)
    with pytest.raises(ValueError, match="does not fit"):
        pl.step(config, state, pl.Streamed(0, 0, 1))  # parts arrive in order
    with pytest.raises(ValueError, match="does not fit"):
        pl.step(config, state, pl.Sampled(0, 0))  # after every part


def _rl_range(config: PlanConfig) -> list[int]:
    first = config.warm_start_steps * config.groups_per_step
    return list(range(first, first + config.rl_groups))


@given(configs, st.integers(0, 4), st.data(), st.integers(0, 3))
def test_every_group_trained_exactly_once_and_steps_written_once_across_crashes(
    config: PlanConfig, chunks: int, data: st.DataObject, crashes: int
) -> None:
    """Paced async: at most G × (k + 1) groups started and not trained (checked in ``Sim`` at every
    request), each step takes the oldest finished groups (``Sim``), and after any crashes every group of
    the run is trained exactly once (nothing sampled is discarded) and every step is written once."""
    chunks = min(chunks, config.num_substeps)
    sim = drive(config, chunks, data, crashes)
    assert sim.metrics == list(range(config.total_steps))  # every step exactly once, in order
    assert sorted(sim.trained) == _rl_range(config)  # every group once
    assert all(s >= 0 for s in sim.staleness)
    g, final = config.groups_per_step, config.final_groups or config.groups_per_step
    rl_steps = config.total_steps - config.warm_start_steps
    assert sim.step_sizes == [g] * (rl_steps - 1) + [final]  # full batches, then a final short one


@given(configs, st.data())
def test_on_policy_trains_groups_in_order_with_staleness_zero(
    config: PlanConfig, data: st.DataObject
) -> None:
    config = replace(config, max_steps_off_policy=0)
    sim = drive(config, config.num_substeps, data, crashes=2)
    assert sim.trained == _rl_range(config)
    assert set(sim.staleness) <= {0}


@given(configs, st.data())
def test_sampling_runs_ahead_up_to_the_cap(config: PlanConfig, data: st.DataObject) -> None:
    """Without crashes the cap is reached whenever the run has that many groups left: sampling is not
    held back by training (and the ``Sim`` checks it is never exceeded)."""
    sim = drive(config, 1, data, crashes=0)
    assert sim.most_open == min(config.cap, config.rl_groups)


@given(st.integers(1, 5), st.integers(0, 3), st.data())
def test_warm_start_steps_come_first_without_sampling(total: int, warm: int, data: st.DataObject) -> None:
    config = PlanConfig(total_steps=total + warm, warm_start_steps=warm)
    sim = drive(config, 1, data, crashes=0)
    prepares = [r for r in sim.order if isinstance(r, Prepare)]
    assert [p.warm for p in prepares] == [True] * warm + [False] * total
    assert [r.groups for r in sim.order if isinstance(r, Sample)][:1] in ([], [(warm,)])
    assert sim.trained == list(range(warm, warm + total))


def test_pipelined_order_for_three_substeps() -> None:
    config = PlanConfig(total_steps=1, num_substeps=3)
    state, _ = pl.start(config)
    state, reqs = pl.step(config, state, pl.Sampled(0, 0))
    state, reqs = pl.step(config, state, pl.Prepared(0, 3))
    assert reqs == (SubmitSubstep(0, 0), SubmitSubstep(0, 1), AwaitSubstep(0, 0))
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 0))
    assert reqs == (SubmitSubstep(0, 2), AwaitSubstep(0, 1))
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 1))
    assert reqs == (AwaitSubstep(0, 2),)
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 2))
    assert reqs == (RefreshSampler(0),)
    state, reqs = pl.step(config, state, pl.SamplerReady(1))
    assert reqs == (Evaluate(0),)  # the last step always evaluates, writes metrics, then saves
    state, reqs = pl.step(config, state, pl.Evaluated(0))
    assert reqs == (WriteMetrics(0),)
    state, reqs = pl.step(config, state, pl.MetricsWritten(0))
    assert reqs == (Save(0),)
    state, reqs = pl.step(config, state, pl.Saved(0))
    assert reqs == (Finish(),)


def test_on_policy_sampling_of_the_next_batch_starts_when_its_sampler_is_ready() -> None:
    config = PlanConfig(total_steps=3, eval_every=1, save_every=1)
    state, reqs = pl.start(config)
    assert reqs == (Sample((0,), 0),)
    state, reqs = pl.step(config, state, pl.Sampled(0, 0))
    assert reqs == (Prepare(0, ((0, 0),), 0, False),)  # nothing else: the sampler is about to go stale
    state, reqs = pl.step(config, state, pl.Prepared(0, 1))
    state, reqs = pl.step(config, state, pl.SubstepDone(0, 0))
    assert reqs == (RefreshSampler(0),)  # not yet: batch 1 needs the weights after step 0
    state, reqs = pl.step(config, state, pl.SamplerReady(1))
    # the sampler of version 1 is ready: batch 1 starts before step 0's evaluation, metrics and save
    assert reqs == (Sample((1,), 1), Evaluate(0))
    state, reqs = pl.step(config, state, pl.Evaluated(0))
    assert reqs == (WriteMetrics(0),)
    state, reqs = pl.step(config, state, pl.MetricsWritten(0))
    assert reqs == (Save(0),)
    assert pl.checkpoint_state(state).to_sample == (1,)  # a crash now samples batch 1 again
    state, reqs = pl.step(config, state, pl.Saved(0))
    assert reqs == ()  # batch 1 is still being sampled
    state, reqs = pl.step(config, state, pl.Sampled(1, 1))
    assert reqs == (Prepare(1, ((1, 1),), 1, False),)  # staleness 0


def test_paced_async_trains_the_oldest_finished_groups_and_carries_the_rest_over() -> None:
    config = PlanConfig(total_steps=3, max_steps_off_policy=1, groups_per_step=2, final_groups=1)
    state, reqs = pl.start(config)
    assert reqs == (Sample((0, 1, 2, 3), 0),)  # G × (k + 1) = 4 groups ahead
    state, reqs = pl.step(config, state, pl.Sampled(3, 0))
    assert reqs == ()  # a step waits for G finished groups
    state, reqs = pl.step(config, state, pl.Sampled(1, 0))  # finished first, trained first
    assert reqs == (Prepare(0, ((1, 0), (3, 0)), 0, False),)
    state, reqs = pl.step(config, state, pl.Sampled(0, 0))
    assert reqs == () and state.ready == ((0, 0),)  # carried over; 4 started and not trained: no more
    for event in (pl.Prepared(0, 1), pl.SubstepDone(0, 0)):
        state, reqs = pl.step(config, state, event)
    state, reqs = pl.step(config, state, pl.SamplerReady(1))
    assert reqs == (Sample((4,), 1), WriteMetrics(0))  # 1 + 2 + 1 = 5 groups in all: one more
    state, reqs = pl.step(config, state, pl.Sampled(4, 1))
    state, reqs = pl.step(config, state, pl.MetricsWritten(0))
    # group 2 is still sampling: the step takes the finished ones, oldest weights first
    assert reqs == (Prepare(1, ((0, 0), (4, 1)), 1, False),)
    for event in (pl.Prepared(1, 1), pl.SubstepDone(1, 0), pl.SamplerReady(2), pl.MetricsWritten(1)):
        state, reqs = pl.step(config, state, event)
    assert reqs == () and state.trained == 4 and state.unfinished == 1
    state, reqs = pl.step(config, state, pl.Sampled(2, 0))
    assert reqs == (Prepare(2, ((2, 0),), 2, False),)  # the final short batch: a slow group, staleness 2


def test_old_checkpoint_states_read_as_groups() -> None:
    config = PlanConfig(total_steps=4, groups_per_step=3)
    old = {"step": 1, "version": 1, "next_batch": 3, "to_sample": [2], "dropped": 0}
    state = pl.state_from_dict(old, config)
    assert (state.next_group, state.to_sample, state.trained) == (9, (6, 7, 8), 3)
    with pytest.raises(ValueError, match="needs the run's PlanConfig"):
        pl.state_from_dict(old)


def test_unexpected_events_are_errors() -> None:
    config = PlanConfig(total_steps=1)
    state, _ = pl.start(config)
    with pytest.raises(ValueError, match="does not fit"):
        pl.step(config, state, pl.Sampled(5, 0))
    with pytest.raises(ValueError, match="does not fit"):
        pl.step(config, state, pl.SubstepDone(0, 0))


def test_state_round_trips_through_dict() -> None:
    s = LoopState(step=3, version=3, next_group=7, to_sample=(5,), trained=2)
    assert pl.state_from_dict(pl.state_to_dict(s)) == s
    with pytest.raises(ValueError, match="malformed"):
        pl.state_from_dict({"step": 1})
