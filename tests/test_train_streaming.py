"""Streamed steps (``stream_minibatches``): the same datums as the whole batch, trained while later debates
are still sampled, exactly once across crashes (also through the unmodified SDK against ``debate-kernel
serve --model fake`` on 127.0.0.1, ``tests/_served.py``); the part tracker; the config's refusals. No
other network."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.tinker.fake import FakeServiceClient
from adapters.tinker.faults import Fault, FaultPlan, SimulatedCrash, with_faults
from adapters.training import checkpoint as ck
from adapters.training.config import TrainConfig
from adapters.training.streaming import PartTracker, part_bounds
from adapters.training.train import METRIC_NAMES, run_training
from tests._profile import examples
from tests._served import MODEL, Backend, ServedFake

SMALL = {
    "batch_size": 6,
    "num_agents": 2,
    "max_rounds": 2,
    "max_tokens": 128,
    "eval_every": 0,
    "model": MODEL,
}
INPROCESS = Backend.inprocess()


def _config(out: Path, **kw: Any) -> TrainConfig:
    return TrainConfig.from_mapping({**SMALL, "out": str(out), **kw})


class _Capture:
    """A training client wrapper that logs, in order, each forward_backward's datums and each optim_step."""

    def __init__(self, inner: Any, log: list[Any]) -> None:
        self.inner, self.log = inner, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def forward_backward(self, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        self.log.append(("fb", [_parts(d) for d in data]))
        return self.inner.forward_backward(data, loss_fn, loss_fn_config)

    def optim_step(self, adam: Any) -> Any:
        self.log.append(("opt", None))
        return self.inner.optim_step(adam)


class _CapturingService:
    def __init__(self, inner: Any, log: list[Any]) -> None:
        self.inner, self.log = inner, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _client(self, fut: Any) -> Any:
        return _Capture(await fut, self.log)

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Any:
        return self._client(self.inner.create_lora_training_client(base_model, rank))


def _parts(d: Any) -> tuple[list[int], dict[str, list[Any]]]:
    return d.model_input.to_ints(), {k: v.to_numpy().tolist() for k, v in d.loss_fn_inputs.items()}


def _trained(config: TrainConfig, plan: FaultPlan) -> tuple[list[Any], list[dict[str, Any]]]:
    log: list[Any] = []
    faulty, _ = with_faults(FakeServiceClient(seed=0), plan)
    result = asyncio.run(run_training(config, _CapturingService(faulty, log)))  # type: ignore[arg-type]
    return log, result.metrics


@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    substeps=st.integers(1, 2),
    per_substep=st.integers(1, 3),
    group_size=st.integers(1, 2),
    error_rate=st.sampled_from([0.0, 0.2]),
    seed=st.integers(0, 20),
    remove_constant=st.booleans(),
    order=st.sampled_from(["completion", "dataset"]),
)
def test_a_streamed_step_trains_the_datums_of_the_whole_batch(
    tmp_path_factory: pytest.TempPathFactory,
    substeps: int,
    per_substep: int,
    group_size: int,
    error_rate: float,
    seed: int,
    remove_constant: bool,
    order: str,
) -> None:
    """Debates finish in a random order (random delays) and some fail: the streamed step's
    forward_backward calls hold exactly the unstreamed step's datums (in the same order with
    ``stream_order = "dataset"``), one optim_step per substep that has any, and its metrics line is the
    same but for the timings."""
    tmp = tmp_path_factory.mktemp("stream")
    plan = FaultPlan(seed=seed, rates={"delay": 0.6, "error": error_rate}, max_delay=0.004)
    keys: dict[str, Any] = {"steps": 1, "num_substeps": substeps, "group_size": group_size}
    keys["remove_constant_reward_groups"] = remove_constant
    whole_log, whole = _trained(_config(tmp / "whole", **keys), plan)
    keys.update(stream_minibatches=per_substep, stream_order=order)
    parts_log, parts = _trained(_config(tmp / "parts", **keys), plan)
    sent = [d for kind, data in parts_log if kind == "fb" for d in data]
    want = [d for kind, data in whole_log if kind == "fb" for d in data]
    if order == "dataset":
        assert sent == want
    else:
        assert sorted(map(repr, sent)) == sorted(map(repr, want))
    fbs = [len(data) for kind, data in parts_log if kind == "fb"]
    assert all(fbs) and len(fbs) <= substeps * per_substep  # a part without datums sends nothing
    trained_substeps = parts[0]["optim/num_substeps"]
    assert sum(kind == "opt" for kind, _ in parts_log) == trained_substeps <= substeps
    # with two substeps the second one's trainer logprobs come from new weights, and which datums it holds
    # differs (the batch cut by datums, by debates, or by when debates ended): its KL and loss differ
    trainer = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2", "optim/loss")
    for name in METRIC_NAMES:
        if name.startswith("time/") or name == "optim/num_substeps" or (substeps > 1 and name in trainer):
            continue
        a, b = whole[0][name], parts[0][name]
        assert a == b or (a is None and b is None) or math.isclose(a, b, rel_tol=1e-6), name


class _Log(list[Any]):
    """A log that also notes, at each forward_backward, how many samples had been requested."""

    def __init__(self) -> None:
        super().__init__()
        self.samples_at_fb: list[int] = []
        self.faults: Any = None

    def append(self, entry: Any) -> None:
        if entry[0] == "fb":
            self.samples_at_fb.append(self.faults.calls["sample"])
        super().append(entry)


def test_a_part_trains_while_a_straggler_of_a_later_part_is_still_sampled(tmp_path: Path) -> None:
    """Debate 5's first sample takes 0.3 s; debates 0-4 (parts 0-4) end meanwhile and are trained: their
    forward_backward calls go before debate 5 has made all its sample requests."""
    log = _Log()
    plan = FaultPlan(at={("sample", 5): Fault("delay", delay=0.3)})  # the six debates' first turns: 0-5
    faulty, log.faults = with_faults(FakeServiceClient(seed=0), plan)
    config = _config(tmp_path, steps=1, stream_minibatches=6)
    result = asyncio.run(run_training(config, _CapturingService(faulty, log)))  # type: ignore[arg-type]
    assert result.metrics[0]["optim/num_substeps"] == 1
    assert len(log.samples_at_fb) == 6 and log.samples_at_fb == sorted(log.samples_at_fb)
    assert log.samples_at_fb[4] < log.faults.calls["sample"]  # part 4 went while debate 5 still sampled


def _trained_state(run_dir: Path, backend: Backend = INPROCESS) -> Any:
    """The fake's model state at the run's last checkpoint (what it trained on, step by step)."""
    run = ck.RunInfo(run_dir, json.loads((run_dir / ck.RUN_FILE).read_text())["run_id"], {})
    latest = ck.latest_checkpoint(run)
    assert latest is not None
    return backend.load_state(latest.state["state_path"])


def _crash_and_resume(
    config: TrainConfig,
    root: Path,
    crash: tuple[str, int, bool],
    plan: FaultPlan,
    backend: Backend = INPROCESS,
) -> Path:
    """Runs until the simulated SIGKILL at call ``crash = (method, k, after)`` (if the run gets there),
    then resumes in a new service over the same files; returns the run directory."""
    method, k, after = crash
    plan = dataclasses.replace(plan, at={(method, k): Fault("crash", after=after)})
    service, _ = with_faults(backend.service(root), plan)
    try:
        asyncio.run(run_training(config, service))
    except BaseException as e:
        if not _crashed(e):
            raise
    return asyncio.run(run_training(config, backend.service(root), resume=True)).run_dir


STREAMED_CRASHES = {
    "method": st.sampled_from(["forward_backward", "optim_step", "save_state", "sample"]),
    "index": st.integers(0, 10),
    "after": st.booleans(),
    "substeps": st.integers(1, 2),
}


def _streamed_once_across_a_crash(
    tmp: Path, backend: Backend, method: str, index: int, after: bool, substeps: int
) -> None:
    keys: dict[str, Any] = {"steps": 4, "save_every": 2, "num_substeps": substeps, "stream_minibatches": 2}
    keys["stream_order"] = "dataset"
    clean = asyncio.run(run_training(_config(tmp / "clean", **keys), INPROCESS.service(tmp / "s0")))
    calls = index * 12 if method == "sample" else index
    crash = (method, calls, after)
    run_dir = _crash_and_resume(_config(tmp / "run", **keys), tmp / "s1", crash, FaultPlan(), backend)
    assert [m["step"] for m in ck.read_metrics(run_dir)] == list(range(4))
    assert (
        _trained_state(run_dir, backend).trained_batches() == _trained_state(clean.run_dir).trained_batches()
    )


@settings(max_examples=examples(10), deadline=None, suppress_health_check=list(HealthCheck))
@given(**STREAMED_CRASHES)
def test_a_streamed_run_trains_every_part_exactly_once_across_a_crash(
    tmp_path_factory: pytest.TempPathFactory, method: str, index: int, after: bool, substeps: int
) -> None:
    """Killed anywhere and resumed, a streamed run (dataset order: nothing depends on timing) trains what
    an uninterrupted one trains, in order."""
    _streamed_once_across_a_crash(tmp_path_factory.mktemp("crash"), INPROCESS, method, index, after, substeps)


@settings(max_examples=examples(3), deadline=None, suppress_health_check=list(HealthCheck))
@given(**STREAMED_CRASHES)
def test_a_streamed_run_through_the_sdk_trains_every_part_exactly_once_across_a_crash(
    tmp_path_factory: pytest.TempPathFactory,
    served_fake: ServedFake,
    method: str,
    index: int,
    after: bool,
    substeps: int,
) -> None:
    """Killed anywhere and resumed on the served fake, through the SDK, a streamed run trains what an
    uninterrupted in-process run trains, in order."""
    tmp = tmp_path_factory.mktemp("crash")
    _streamed_once_across_a_crash(tmp, Backend.sdk(served_fake), method, index, after, substeps)


@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    method=st.sampled_from(["forward_backward", "optim_step", "save_state", "sample"]),
    index=st.integers(0, 10),
    after=st.booleans(),
    seed=st.integers(0, 5),
)
def test_a_run_streamed_in_completion_order_trains_every_batch_once_across_a_crash(
    tmp_path_factory: pytest.TempPathFactory, method: str, index: int, after: bool, seed: int
) -> None:
    """Completion order (parts depend on timing; random delays): resumed after a crash, every step is
    written once, one optimizer step per trained substep, no forward_backward batch applied twice."""
    tmp = tmp_path_factory.mktemp("crash")
    config = _config(tmp / "run", steps=4, save_every=2, num_substeps=2, stream_minibatches=2)
    calls = index * 12 if method == "sample" else index
    plan = FaultPlan(seed=seed, rates={"delay": 0.5}, max_delay=0.003)
    run_dir = _crash_and_resume(config, tmp / "service", (method, calls, after), plan)
    metrics = ck.read_metrics(run_dir)
    assert [m["step"] for m in metrics] == list(range(4))
    state = _trained_state(run_dir)
    assert len(state.lineage) == sum(m["optim/num_substeps"] for m in metrics)  # none lost
    batches = state.trained_batches()
    assert len(batches) == len(set(batches))  # none twice


def _crashed(e: BaseException) -> bool:
    if isinstance(e, SimulatedCrash):
        return True
    return isinstance(e, BaseExceptionGroup) and any(_crashed(x) for x in e.exceptions)


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ({"stream_minibatches": 2, "max_steps_off_policy": 1}, "on-policy batches only"),
        ({"stream_minibatches": 1, "estimator": "rae"}, "within each debate"),
        ({"stream_minibatches": 1, "estimator": "trl_grpo.batch"}, "within each debate"),
        ({"stream_minibatches": 3, "num_substeps": 2, "batch_size": 5}, "6 parts, more than its 5 debates"),
        ({"stream_minibatches": -1}, "stream_minibatches must be >= 0"),
        ({"stream_minibatches": 1, "stream_order": "random"}, "stream_order must be one of"),
    ],
)
def test_streaming_config_errors_name_the_keys(keys: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        TrainConfig.from_mapping(keys)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 30), st.sampled_from(["completion", "dataset"]), st.data())
def test_parts_complete_in_order_with_the_debates_their_order_gives_them(
    n: int, order: str, data: st.DataObject
) -> None:
    parts = data.draw(st.integers(1, n), label="parts")
    bounds = part_bounds(n, parts)
    assert bounds[0] == 0 and bounds[-1] == n
    assert {bounds[j + 1] - bounds[j] for j in range(parts)} <= {n // parts, -(-n // parts)}
    tracker: PartTracker[int] = PartTracker(bounds, order=order)  # type: ignore[arg-type]
    ended: list[int] = []
    reported: list[int] = []
    for i in data.draw(st.permutations(range(n)), label="finish order"):
        ended.append(i)
        reported += tracker.add(i, i)
        if order == "dataset":  # part j: every debate before its end has ended
            want = [j for j in range(parts) if all(k in ended for k in range(bounds[j + 1]))]
        else:  # part j: as many debates as it and the earlier parts hold have ended
            want = [j for j in range(parts) if len(ended) >= bounds[j + 1]]
        assert reported == want
    if order == "dataset":
        members = [list(range(bounds[j], bounds[j + 1])) for j in range(parts)]
    else:
        members = [sorted(ended[bounds[j] : bounds[j + 1]]) for j in range(parts)]
    assert [tracker.part(j) for j in range(parts)] == members
    assert tracker.results() == list(range(n))
    with pytest.raises(ValueError, match="ended twice"):
        tracker.add(0, 0)


def test_part_bounds_refuse_empty_parts() -> None:
    with pytest.raises(ValueError, match="3 debates cannot fill 4 parts"):
        part_bounds(3, 4)
    tracker: PartTracker[int] = PartTracker(part_bounds(4, 2))
    with pytest.raises(ValueError, match="not complete"):
        tracker.part(0)
    with pytest.raises(ValueError, match="0 of 2 parts"):
        tracker.results()
    with pytest.raises(ValueError, match="order must be one of"):
        PartTracker([0, 1], order="random")  # type: ignore[arg-type]


@pytest.mark.parametrize("per_substep", [1, 3])
def test_a_kl_penalty_is_taken_per_part(tmp_path: Path, per_substep: int) -> None:
    """One part: the penalised datums and ``optim/kl_penalty`` of the unstreamed step; three parts: each
    part's mean (the step's record is their token-weighted mean), every datum sent once."""
    # two steps with one part (the same training); one step with three (the weights would then differ)
    keys: dict[str, Any] = {"steps": 2 if per_substep == 1 else 1, "kl_penalty_coef": 0.5}
    whole_log, whole = _trained(_config(tmp_path / "whole", **keys), FaultPlan())
    keys.update(stream_minibatches=per_substep, stream_order="dataset")
    parts_log, parts = _trained(_config(tmp_path / "parts", **keys), FaultPlan())
    sent = [d for kind, data in parts_log if kind == "fb" for d in data]
    want = [d for kind, data in whole_log if kind == "fb" for d in data]
    assert len(sent) == len(want)
    if per_substep == 1:
        assert sent == want
        assert [m["optim/kl_penalty"] for m in parts] == [m["optim/kl_penalty"] for m in whole]
    else:  # the tokens and the unpenalised inputs are the same; the advantages move by the part's mean
        assert [(t, {k: v for k, v in i.items() if k != "advantages"}) for t, i in sent] == [
            (t, {k: v for k, v in i.items() if k != "advantages"}) for t, i in want
        ]
        assert all(math.isfinite(m["optim/kl_penalty"]) for m in parts)
