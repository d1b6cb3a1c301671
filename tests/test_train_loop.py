"""The training shell on the in-repo fake service: exactly-once training across crashes, pipelining, the
staleness bound, metric names, warm start, evaluation, run-directory errors. Tests taking ``fake_backend``
run twice: on the fake in process, and on ``debate-kernel serve --model fake`` through the unmodified
``tinker`` SDK over 127.0.0.1 (``tests/_served.py``); no other network."""

from __future__ import annotations

import asyncio
import collections
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel
from adapters.tinker.fake import FakeServiceClient
from adapters.tinker.faults import Fault, FaultPlan, SimulatedCrash, with_faults
from adapters.tinker.renderers import ByteRenderer
from adapters.training import checkpoint as ck
from adapters.training import train as train_module
from adapters.training.config import TrainConfig
from adapters.training.dataset import load_questions
from adapters.training.train import METRIC_NAMES, run_training
from adapters.transcripts import read_transcripts
from tests._marks import SHORT_SAMPLES
from tests._profile import examples
from tests._served import MODEL, Backend, ServedFake

SMALL = {
    "batch_size": 2,
    "num_agents": 2,
    "max_rounds": 2,
    "max_tokens": 128,
    "eval_questions": 1,
    "model": MODEL,
}


def _config(tmp: Path, **kw: Any) -> TrainConfig:
    return TrainConfig.from_mapping({**SMALL, "out": str(tmp / "run"), **kw})


def _has_crash(e: BaseException) -> bool:
    if isinstance(e, SimulatedCrash):
        return True
    if isinstance(e, BaseExceptionGroup):
        return any(_has_crash(x) for x in e.exceptions)
    return False


def _latest(run_dir: Path) -> ck.Checkpoint:
    run = ck.RunInfo(run_dir, json.loads((run_dir / ck.RUN_FILE).read_text())["run_id"], {})
    latest = ck.latest_checkpoint(run)
    assert latest is not None
    return latest


INPROCESS = Backend.inprocess()


def _final_lineage(run_dir: Path, backend: Backend = INPROCESS) -> list[str]:
    return backend.load_state(_latest(run_dir).state["state_path"]).trained_batches()


def _run_until_crash(config: TrainConfig, service: Any) -> bool:
    try:
        asyncio.run(run_training(config, service))
    except BaseException as e:  # the simulated SIGKILL
        if not _has_crash(e):
            raise
        return True
    return False


def _figures(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """A run's metrics without its timings, and its transcripts without the sampled sequences' ids (the
    session's: each service names them its own way), each turn checked to have one."""
    metrics = [{k: v for k, v in m.items() if not k.startswith("time/")} for m in ck.read_metrics(run_dir)]
    transcripts = {}
    for path in ck.transcript_files(run_dir):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for turn in (t for r in records for t in r["turns"]):
            assert isinstance(turn.pop("sequence_id"), str)
        transcripts[path.name] = records
    return metrics, transcripts


@SHORT_SAMPLES
def test_a_run_through_the_sdk_computes_what_the_in_process_fake_computes(
    tmp_path: Path, served_fake: ServedFake
) -> None:
    """Warm start, substeps, a KL penalty (``compute_logprobs`` on a base-model sampler), evaluations and
    checkpoints: every figure and transcript equal, and the same batches trained."""
    keys = {"warm_start_steps": 1, "steps": 3, "num_substeps": 2, "kl_penalty_coef": 0.1}
    keys |= {"eval_every": 2, "save_every": 2, "batch_size": 4}
    runs = {}
    for backend in (Backend.inprocess(), Backend.sdk(served_fake)):
        config = _config(tmp_path / backend.name, **keys)
        result = asyncio.run(run_training(config, backend.service(tmp_path / backend.name / "service")))
        runs[backend.name] = (*_figures(result.run_dir), _final_lineage(result.run_dir, backend))
    metrics, transcripts, lineage = runs["sdk"]
    assert [m["step"] for m in metrics] == [0, 1, 2, 3] and len(transcripts) == 3 and len(lineage) == 8
    assert all(m["optim/num_datums"] > 0 and "eval/correct" in m for m in metrics[1::2])
    assert runs["sdk"] == runs["inprocess"]


def test_crash_after_a_checkpoint_then_resume(tmp_path: Path, fake_backend: Backend) -> None:
    config = _config(tmp_path, steps=4, save_every=2, eval_every=0)
    root = tmp_path / "service"
    plan = FaultPlan(at={("optim_step", 3): Fault("crash", after=True)})  # step 3 trained, then killed
    service, _ = with_faults(fake_backend.service(root), plan)
    assert _run_until_crash(config, service)
    assert [m["step"] for m in ck.read_metrics(config.out)] == [0, 1, 2]  # step 2 written, not saved
    result = asyncio.run(run_training(config, fake_backend.service(root), resume=True))
    assert [m["step"] for m in ck.read_metrics(result.run_dir)] == [0, 1, 2, 3]
    lineage = _final_lineage(result.run_dir, fake_backend)
    assert len(lineage) == len(set(lineage)) == 4


CRASHES = {
    "method": st.sampled_from(
        ["forward_backward", "optim_step", "save_state", "save_weights_and_get_sampling_client", "sample"]
    ),
    "index": st.integers(0, 8),
    "after": st.booleans(),
    "substeps": st.integers(1, 2),
    "async_k": st.sampled_from([0, 1]),
}
"""Where a run crashes: the call, its index, before or after the service did it; and the run's shape."""


def _trained_once_across_a_crash(
    tmp: Path, backend: Backend, method: str, index: int, after: bool, substeps: int, async_k: int
) -> None:
    config = _config(
        tmp, steps=4, save_every=2, eval_every=0, num_substeps=substeps, max_steps_off_policy=async_k
    )
    root = tmp / "service"
    calls = index * 9 if method == "sample" else index  # about 9 samples per step
    plan = FaultPlan(at={(method, calls): Fault("crash", after=after)})
    service, _ = with_faults(backend.service(root), plan)
    _run_until_crash(config, service)
    # a second process resumes (after a completed run it finds nothing left to do)
    result = asyncio.run(run_training(config, backend.service(root), resume=True))
    steps = [m["step"] for m in ck.read_metrics(result.run_dir)]
    assert steps == list(range(config.total_steps))
    lineage = _final_lineage(result.run_dir, backend)
    counts = collections.Counter(lineage)
    assert all(c == 1 for c in counts.values()), counts  # no batch twice
    trained = sum(m["optim/num_substeps"] for m in ck.read_metrics(result.run_dir))
    assert len(lineage) == trained  # none lost
    assert _groups_written(result.run_dir) == list(range(config.total_steps * config.batch_size))


def _groups_written(run_dir: Path) -> list[int]:
    """The groups of every debate in the run's transcripts (debate ``g{group}-d{j}``), each debate checked
    to appear once, sorted."""
    ids = [
        json.loads(line)["id"]
        for path in ck.transcript_files(run_dir)
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(ids) == len(set(ids)), collections.Counter(ids).most_common(3)
    return sorted({int(i.split("-")[0][1:]) for i in ids})


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(**CRASHES)
def test_every_batch_trained_exactly_once_across_a_crash(
    tmp_path_factory: pytest.TempPathFactory,
    method: str,
    index: int,
    after: bool,
    substeps: int,
    async_k: int,
) -> None:
    tmp = tmp_path_factory.mktemp("crash")
    _trained_once_across_a_crash(tmp, INPROCESS, method, index, after, substeps, async_k)


@settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))
@given(**CRASHES)
def test_every_batch_trained_exactly_once_across_a_crash_through_the_sdk(
    tmp_path_factory: pytest.TempPathFactory,
    served_fake: ServedFake,
    method: str,
    index: int,
    after: bool,
    substeps: int,
    async_k: int,
) -> None:
    """The same property on the served fake: a request the crash interrupts after its submission has
    reached the server (or not), as with a real process killed mid-call."""
    tmp = tmp_path_factory.mktemp("crash")
    _trained_once_across_a_crash(tmp, Backend.sdk(served_fake), method, index, after, substeps, async_k)


@SHORT_SAMPLES
def test_metric_names_and_eval_lines(tmp_path: Path, fake_backend: Backend) -> None:
    config = _config(tmp_path, steps=2, warm_start_steps=1, eval_every=1)
    result = asyncio.run(run_training(config, fake_backend.service()))
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    for m in result.metrics:
        assert set(METRIC_NAMES) <= set(m)
    assert result.metrics[0]["phase"] == "warm_start"  # its last step evaluates where RL starts
    # the loss per trained token, on warm-start and RL steps alike (the fake's cross-entropy is −Σ lp)
    assert all(math.isfinite(m["optim/loss"]) for m in result.metrics)
    assert result.metrics[0]["optim/loss"] > 0
    for m in result.metrics[1:]:
        assert m["phase"] == "rl"
    for m in result.metrics:
        for name in ("eval/correct", "eval/parse_ok", "eval/pairwise_reward"):
            assert name in m
    assert ck.read_metrics(result.run_dir) == result.metrics
    transcripts = sorted((result.run_dir / "transcripts").iterdir())
    assert [p.name for p in transcripts] == ["step-000001.jsonl", "step-000002.jsonl"]
    line = json.loads(transcripts[0].read_text().splitlines()[0])
    assert line["meta"]["policy_version"] == 1


class _Recorder:
    """A training client wrapper that logs submissions and awaits, in order."""

    def __init__(self, inner: Any, log: list[str]) -> None:
        self.inner, self.log = inner, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _wrap(self, label: str, fut: Any) -> Any:
        self.log.append("submit " + label)
        log = self.log

        async def waited() -> Any:
            log.append("await " + label)
            return await fut

        return waited()

    def forward_backward(self, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        n = sum(x.startswith("submit fb") for x in self.log)
        return self._wrap(f"fb{n}", self.inner.forward_backward(data, loss_fn, loss_fn_config))

    def optim_step(self, adam: Any) -> Any:
        n = sum(x.startswith("submit opt") for x in self.log)
        return self._wrap(f"opt{n}", self.inner.optim_step(adam))


class _RecordingService:
    def __init__(self, inner: FakeServiceClient, log: list[str]) -> None:
        self.inner, self.log = inner, log

    async def _client(self, fut: Any) -> Any:
        return _Recorder(await fut, self.log)

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Any:
        return self._client(self.inner.create_lora_training_client(base_model, rank))

    def create_training_client_from_state_with_optimizer(self, path: str) -> Any:
        return self._client(self.inner.create_training_client_from_state_with_optimizer(path))


def test_substep_k_plus_1_is_submitted_before_substep_k_is_awaited(tmp_path: Path) -> None:
    log: list[str] = []
    config = _config(tmp_path, steps=1, num_substeps=3, batch_size=3, eval_every=0)
    asyncio.run(run_training(config, _RecordingService(FakeServiceClient(seed=0), log)))  # type: ignore[arg-type]
    for k in range(2):
        assert log.index(f"submit fb{k + 1}") < log.index(f"await fb{k}")
        assert log.index(f"submit opt{k}") < log.index(f"submit fb{k + 1}")  # fb and optim back to back


@pytest.mark.parametrize("k", [1, 2])
def test_paced_async_trains_every_group_once_and_logs_its_staleness(
    tmp_path: Path, k: int, fake_backend: Backend
) -> None:
    """max_steps_off_policy = k: samples run up to k steps ahead, nothing sampled is discarded (every
    group of the run is in the transcripts once, each with its group_size debates) and each step logs the
    staleness of its groups."""
    plan = FaultPlan(seed=k, rates={"delay": 0.5}, max_delay=0.01)
    service, _ = with_faults(fake_backend.service(), plan)
    config = _config(tmp_path, steps=5, max_steps_off_policy=k, eval_every=0, group_size=2)
    result = asyncio.run(run_training(config, service))
    assert [m["step"] for m in result.metrics] == list(range(5))
    assert _groups_written(result.run_dir) == list(range(5 * config.batch_size))
    for m in result.metrics:
        assert m["env/all/total_episodes"] == config.batch_size * config.group_size
        low, mean, high = (m[f"async/staleness_{x}"] for x in ("min", "mean", "max"))
        assert 0 <= low <= mean <= high == m["staleness"] == m["step"] - m["policy_version"]
    assert result.metrics[0]["async/staleness_max"] == 0  # the first step's groups: the first weights


class _Kinds(_Recorder):
    """A fake training client that takes ``kind`` (as tinker 0.38's does), logging each sampler's kind and
    tagging the sampler with it (the fake's samplers stay snapshots: the loop cannot tell)."""

    def save_weights_and_get_sampling_client(self, name: str | None = None, *, kind: str = "snapshot") -> Any:
        self.log.append(kind)
        future = self.inner.save_weights_and_get_sampling_client(name)
        future.result().kind = kind
        return future


def test_inflight_samplers_train_and_every_evaluation_samples_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds: list[str] = []
    evaluated: list[str] = []
    for name in ("evaluate", "debate_evaluation"):
        original = getattr(train_module, name)

        async def checked(
            config: Any, questions: Any, renderer: Any, policy: Any, *a: Any, _f: Any = original, **kw: Any
        ) -> Any:
            evaluated.append(policy.kind)
            return await _f(config, questions, renderer, policy, *a, **kw)

        monkeypatch.setattr(train_module, name, checked)
    service = _RecordingService(FakeServiceClient(seed=0), kinds)
    service._client = lambda fut: _kinds_client(fut, kinds)  # type: ignore[method-assign]
    config = _config(tmp_path, steps=3, eval_every=1, max_steps_off_policy=1, sampler_kind="inflight")
    result = asyncio.run(run_training(config, service))  # type: ignore[arg-type]
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    # the first sampler and one a step are inflight; the fixed policy and each evaluation's are snapshots
    assert kinds.count("inflight") == 4 and kinds.count("snapshot") == 1 + 3
    assert evaluated == ["snapshot"] * 6


async def _kinds_client(fut: Any, log: list[str]) -> Any:
    return _Kinds(await fut, log)


def test_inflight_samplers_are_refused_where_the_service_makes_none(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=1, sampler_kind="inflight")
    with pytest.raises(ValueError, match=r"sampler_kind 'inflight' needs a service.*takes no 'kind'"):
        asyncio.run(run_training(config, FakeServiceClient(seed=0)))


def test_resume_refuses_another_runs_config(tmp_path: Path, fake_backend: Backend) -> None:
    config = _config(tmp_path, steps=1, eval_every=0)
    asyncio.run(run_training(config, fake_backend.service()))
    with pytest.raises(ck.CheckpointError, match="already holds a run"):
        asyncio.run(run_training(config, fake_backend.service()))
    other = TrainConfig.from_mapping({"seed": 5}, base=config)
    with pytest.raises(ck.CheckpointError, match=r"another config .*seed"):
        asyncio.run(run_training(other, fake_backend.service(), resume=True))


def test_incomplete_checkpoint_is_ignored_and_foreign_one_refused(tmp_path: Path) -> None:
    run = ck.init_run(tmp_path / "r", {"a": 1}, resume=False)
    ck.save_checkpoint(run, 2, {"x": 1})
    (tmp_path / "r" / "checkpoints" / "step-000004").mkdir()  # crashed before its marker
    odd = tmp_path / "r" / "checkpoints" / "step-\u00b2"  # a digit to str.isdigit, not to int()
    odd.mkdir()
    (odd / ck.COMPLETE).write_text("x\n")
    latest = ck.latest_checkpoint(run)
    assert latest is not None and latest.steps_done == 2
    other = run._replace(run_id="someone-else")
    with pytest.raises(ck.CheckpointError, match="another run"):
        ck.latest_checkpoint(other)


def test_transcript_files_are_the_step_files_in_numeric_order(tmp_path: Path) -> None:
    assert ck.transcript_files(tmp_path) == []
    steps = (999_999, 2, 1_000_000)
    for step in steps:
        ck.transcript_path(tmp_path, step).parent.mkdir(exist_ok=True)
        ck.transcript_path(tmp_path, step).write_text("")
    for other in ("notes.jsonl", "step-\u00b2.jsonl", "step-3.json"):
        (tmp_path / ck.TRANSCRIPTS / other).write_text("")
    assert ck.transcript_files(tmp_path) == [ck.transcript_path(tmp_path, s) for s in sorted(steps)]
    assert ck.transcript_path(tmp_path, 12).name == "step-000012.jsonl"


def test_metrics_truncation_drops_torn_and_later_lines(tmp_path: Path) -> None:
    for step in (0, 1, 2):
        ck.append_metrics(tmp_path, {"step": step})
    with open(tmp_path / ck.METRICS, "a") as f:
        f.write('{"step": 3')  # SIGKILL mid-line
    assert [r["step"] for r in ck.truncate_metrics(tmp_path, 2)] == [0, 1]
    assert [r["step"] for r in ck.read_metrics(tmp_path)] == [0, 1]


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown config key 'bogus'; valid keys: model"):
        TrainConfig.from_mapping({"bogus": 1})
    hint = r"unknown config key 'learning-rat' \(did you mean 'learning_rate'\?\)"
    with pytest.raises(ValueError, match=hint):
        TrainConfig.from_mapping({"learning-rat": 1e-4})
    with pytest.raises(TypeError, match="config key steps must be an int"):
        TrainConfig.from_mapping({"steps": "3"})
    with pytest.raises(ValueError, match="config key loss_fn"):
        TrainConfig.from_mapping({"loss_fn": "mse"})
    with pytest.raises(ValueError, match="config key estimator"):
        TrainConfig.from_mapping({"estimator": "nope"})
    toml = tmp_path / "c.toml"
    toml.write_text("steps = 7\nloss_fn_config = { clip_low_threshold = 0.8 }\n[extra]\nx = 1\n")
    with pytest.raises(ValueError, match="unknown config key 'extra'"):
        ck_config = __import__("adapters.training.config", fromlist=["load_config"]).load_config
        ck_config(toml)
    toml.write_text('[train]\nsteps = 7\nloss_fn = "ppo"\n')
    from adapters.training.config import load_config

    assert load_config(toml, overrides={"seed": 2}).steps == 7


@SHORT_SAMPLES
def test_gspo_needs_its_thresholds_and_stable_reinforce_is_accepted() -> None:
    clip = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    assert TrainConfig.from_mapping({"loss_fn": "gspo", "loss_fn_config": clip}).loss_fn == "gspo"
    with pytest.raises(ValueError, match="must set clip_high_threshold for loss_fn 'gspo'"):
        TrainConfig.from_mapping({"loss_fn": "gspo", "loss_fn_config": {"clip_low_threshold": 0.8}})
    assert TrainConfig.from_mapping({"loss_fn": "stable_reinforce"}).loss_fn == "stable_reinforce"


def test_a_gspo_run_sends_gspo_with_its_thresholds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.tinker.fake import FakeTrainingClient

    sent: list[tuple[Any, Any]] = []
    masks: list[bool] = []
    real = FakeTrainingClient.forward_backward

    def recording(self: Any, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        sent.append((loss_fn, dict(loss_fn_config or {})))
        for d in data:  # the ratio mask is the datum's action tokens (0/1; every advantage inside it)
            if loss_fn == "gspo":
                mask = d.loss_fn_inputs["sequence_ratio_mask"].to_numpy()
                advantage = d.loss_fn_inputs["advantages"].to_numpy()
                masks.append(
                    set(mask.tolist()) <= {0.0, 1.0} and mask.any() and bool(mask[advantage != 0].all())
                )
        return real(self, data, loss_fn, loss_fn_config)

    monkeypatch.setattr(FakeTrainingClient, "forward_backward", recording)
    clip = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    config = _config(tmp_path, steps=1, eval_every=0, loss_fn="gspo", loss_fn_config=clip)
    asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    rl = [x for x in sent if x[0] != "cross_entropy"]  # a warm start would send cross_entropy
    assert rl and all(x == ("gspo", clip) for x in rl)
    assert masks and all(masks)


def test_warm_start_learning_rate_decays_linearly_then_rl_uses_the_configured_rate(
    tmp_path: Path, fake_backend: Backend
) -> None:
    config = _config(
        tmp_path,
        dataset="arithmetic",
        warm_start_steps=3,
        warm_start_learning_rate=2e-3,
        warm_start_lr_decay=0.1,
        steps=1,
        learning_rate=1e-3,
        save_every=4,
        eval_questions=0,
    )
    asyncio.run(run_training(config, fake_backend.service(tmp_path / "service")))
    latest = _latest(Path(config.out))
    rates = [step.learning_rate for step in fake_backend.load_state(latest.state["state_path"]).lineage]
    assert rates == pytest.approx([2e-3, 1.1e-3, 2e-4, 1e-3])
    with pytest.raises(ValueError, match="warm_start_lr_decay must lie in"):
        TrainConfig(warm_start_lr_decay=0.0)
    with pytest.raises(ValueError, match="warm_start_learning_rate must be a finite number > 0"):
        TrainConfig(warm_start_learning_rate=-1.0)


@pytest.mark.parametrize(("silent", "lowest", "highest"), [("exclude", 0.0, 0.0), ("include", -2 / 3, 1 / 3)])
def test_agents_that_never_spoke_stay_out_of_the_advantages(
    tmp_path: Path, silent: str, lowest: float, highest: float
) -> None:
    """Every answer is malformed: each debate ends at agent 0's first turn, agents 1 and 2 never speak."""
    from adapters.tinker.fake import FakePolicy

    config = _config(tmp_path, num_agents=3, steps=1, eval_questions=0, silent_agents=silent)
    service = FakeServiceClient(seed=0, policy=FakePolicy(malformed_rate=1.0))
    (m,) = asyncio.run(run_training(config, service)).metrics
    assert m["env/all/parse_error"] == 1.0 and m["optim/num_datums"] == config.batch_size
    # agent 0 returns −1, the silent agents 0: alone in its statistics its advantage is 0 ("exclude");
    # averaged with them it is −1 − (−1/3) = −2/3 on every token of the failed turn, and the silent
    # rows (no datum) get +1/3 ("include")
    assert m["advantage/min"] == pytest.approx(lowest, abs=1e-6)
    assert m["advantage/max"] == pytest.approx(highest, abs=1e-6)


def test_a_max_tokens_shorter_than_the_warm_start_turns_is_warned_about(tmp_path: Path) -> None:
    # every sampled turn would be cut before its closing tags: a parse failure, not a learning signal
    config = _config(tmp_path, steps=1, warm_start_steps=1, max_tokens=100, eval_every=0)
    with pytest.warns(RuntimeWarning, match=r"max_tokens=100 is shorter than a warm-start turn \(\d+ tokens"):
        asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asyncio.run(
            run_training(
                _config(tmp_path / "b", steps=1, warm_start_steps=1, max_tokens=400, eval_every=0),
                FakeServiceClient(seed=0),
            )
        )


class _DataRecorder(_RecordingService):
    """Keeps every forward_backward batch (the recorder's log is unused)."""

    def __init__(self, inner: FakeServiceClient) -> None:
        super().__init__(inner, [])
        self.batches: list[Any] = []

    async def _client(self, fut: Any) -> Any:
        client = _Recorder(await fut, self.log)
        inner_fb, batches = client.forward_backward, self.batches

        def forward_backward(data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
            batches.append(list(data))
            return inner_fb(data, loss_fn, loss_fn_config)

        client.forward_backward = forward_backward  # type: ignore[method-assign]
        return client


@pytest.mark.parametrize("mode", ["reference", "shuffled"])
def test_warm_start_answers_are_the_questions_own_or_other_questions(tmp_path: Path, mode: str) -> None:
    service = _DataRecorder(FakeServiceClient(seed=0))
    config = _config(tmp_path, steps=0, warm_start_steps=1, batch_size=4, max_tokens=400, eval_every=0)
    config = TrainConfig.from_mapping({"warm_start_answers": mode}, base=config)
    asyncio.run(run_training(config, service))  # type: ignore[arg-type]
    (batch,) = service.batches
    truth = {q.question: q.answer for q in load_questions(config.dataset)}
    seen: dict[tuple[str, int], str] = {}  # (question, agent) → the answer its warm turn carries
    for datum in batch:
        prompt = bytes(t for t in datum.model_input.to_ints() if t < 256).decode()
        question = prompt.split("Question:\n")[1].split("\n")[0]
        agent = int(prompt.split("You are Agent ")[1].split(",")[0])
        weights = datum.loss_fn_inputs["weights"].to_numpy()
        targets = datum.loss_fn_inputs["target_tokens"].to_numpy()
        text = bytes(int(t) for t, w in zip(targets, weights, strict=True) if w > 0 and t < 256).decode()
        solution = kernel.parse_response(text, agent).solution
        seen[question, agent] = solution.removeprefix("The answer is ").rstrip(".")
    questions = list(dict.fromkeys(q for q, _ in seen))
    assert len(questions) == 4 and len(seen) == 4 * config.num_agents
    for k, q in enumerate(questions):
        for i in range(config.num_agents):
            source = questions[(k + 1 + i) % 4] if mode == "shuffled" else q
            assert seen[q, i] == truth[source]


def test_group_size_plays_each_question_in_that_many_debates(tmp_path: Path, fake_backend: Backend) -> None:
    config = _config(tmp_path, steps=2, batch_size=2, group_size=3, eval_questions=0, eval_every=0)
    result = asyncio.run(run_training(config, fake_backend.service()))
    for m in result.metrics:
        assert m["env/all/total_episodes"] == 6
        debates = read_transcripts(
            (result.run_dir / "transcripts" / f"step-{m['step']:06d}.jsonl").read_text()
        ).debates
        questions = [d.question for d in debates]
        assert len({d.id for d in debates}) == len(debates)  # distinct ids
        assert sorted(questions.count(q) for q in set(questions)) == [3, 3]
        # a question's debates share its group (turn_groups = "round_agent" compares their turns): the
        # g in their ids "g{g}-d{j}", as their questions say
        groups = {d.id: d.meta["group"] for d in debates}
        assert all(g == int(i.split("-")[0][1:]) for i, g in groups.items()), groups
        assert len({(d.question, d.meta["group"]) for d in debates}) == 2
    with pytest.raises(ValueError, match="config key group_size must be >= 1, got 0"):
        TrainConfig.from_mapping({"group_size": 0})


def test_an_evaluation_plays_each_debate_eval_repeats_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_backend: Backend
) -> None:
    from adapters.training import evaluation

    played: list[Any] = []
    run_debates = evaluation.run_debates

    async def recording(specs: Any, *args: Any, **kw: Any) -> Any:
        played.extend(specs)
        return await run_debates(specs, *args, **kw)

    monkeypatch.setattr(evaluation, "run_debates", recording)
    questions = load_questions("sample")[:2]
    policy = fake_backend.service().create_sampling_client(base_model=MODEL).result()
    for repeats, prefixes in ((1, ["eval-q"]), (3, ["eval0-q", "eval1-q", "eval2-q"])):
        played.clear()
        config = _config(tmp_path, eval_questions=2, num_agents=2, eval_repeats=repeats)
        out = asyncio.run(evaluation.evaluate(config, questions, ByteRenderer(), policy, None))
        assert out["eval/debates"] == 2 * 2 * repeats
        expected = [f"{pre}{p}-r{i}" for pre in prefixes for p in range(2) for i in range(2)]
        assert [s.id for s in played] == expected
        assert [s.question for s in played] == [q.question for q in questions for _ in range(2)] * repeats
    with pytest.raises(ValueError, match="eval_repeats must be >= 1"):
        _config(tmp_path, eval_repeats=0)


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"correctness_weight": math.nan}, "config key correctness_weight must be a finite number, got nan"),
        ({"correctness_weight": math.inf}, "config key correctness_weight must be a finite number, got inf"),
        ({"kl_penalty_coef": math.inf}, "config key kl_penalty_coef must be a finite number, got inf"),
        ({"kl_penalty_coef": math.nan}, "config key kl_penalty_coef must be a finite number, got nan"),
        ({"temperature": math.inf}, "config key temperature must be a finite number, got inf"),
        ({"sample_timeout_s": math.nan}, "config key sample_timeout_s must be a finite number, got nan"),
        ({"rae_decay": math.nan}, "config key rae_decay must be a finite number, got nan"),
        ({"learning_rate": 10**400}, "config key learning_rate must be a finite number"),
        ({"eps": -1.0}, r"config key eps must be a finite number > 0, got -1.0"),
        ({"eps": 0}, r"config key eps must be a finite number > 0, got 0"),
        ({"loss_fn_config": {"clip": math.nan}}, "config key loss_fn_config: clip must be a finite number"),
        ({"seed": -1}, r"config key seed must be an int in \[0, 2\*\*32\), got -1"),
        ({"seed": 2**32}, r"config key seed must be an int in \[0, 2\*\*32\)"),
        (
            {"num_agents": 1, "estimator": "default,singleton=error"},
            r"config key estimator 'default,singleton=error' refuses groups of one sample",
        ),
    ],
)
def test_non_finite_and_out_of_range_values_are_refused(values: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        TrainConfig.from_mapping(values)


def test_ints_are_numbers_for_optional_number_keys_too(tmp_path: Path) -> None:
    from adapters.training.config import load_config

    toml = tmp_path / "c.toml"
    toml.write_text("warm_start_learning_rate = 1\nlearning_rate = 1\n")
    config = load_config(toml)
    assert config.warm_start_learning_rate == 1.0 and isinstance(config.warm_start_learning_rate, float)
    assert isinstance(config.learning_rate, float)
    message = r"config key warm_start_learning_rate must be a number \(or left out\), got str 'x'"
    with pytest.raises(TypeError, match=message):
        TrainConfig.from_mapping({"warm_start_learning_rate": "x"})
    with pytest.raises(TypeError, match="config key steps must be an int, got bool True"):
        TrainConfig.from_mapping({"steps": True})


def test_config_files_name_themselves_and_take_a_bom_and_one_train_table(tmp_path: Path) -> None:
    from adapters.training.config import load_config

    toml = tmp_path / "c.toml"
    toml.write_bytes(b"\xef\xbb\xbfsteps = 3\n")
    assert load_config(toml).steps == 3
    toml.write_bytes(b"steps = \xff\n")
    with pytest.raises(ValueError, match=r"c\.toml: not UTF-8 text \(invalid start byte at byte 8\)"):
        load_config(toml)
    toml.write_text("[train]\nsteps = 3\n[train.loss_fn_config]\nclip_low_threshold = 0.8\n")
    assert load_config(toml).loss_fn_config == {"clip_low_threshold": 0.8}
    toml.write_text("[train]\nsteps = 3\n[eval]\nx = 1\n")
    with pytest.raises(ValueError, match=r"c\.toml: unknown config key or table 'eval' beside \[train\]"):
        load_config(toml)
    toml.write_text("seed = 1\n[train]\nsteps = 3\n")
    with pytest.raises(ValueError, match=r"c\.toml: seed lies outside the \[train\] table"):
        load_config(toml)
    toml.write_text("temperature = inf\n")
    with pytest.raises(ValueError, match=r"c\.toml: config key temperature must be a finite number, got inf"):
        load_config(toml)
    with pytest.raises(FileNotFoundError, match=r"missing\.toml: cannot read: No such file or directory$"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(IsADirectoryError, match=r": cannot read: Is a directory$"):
        load_config(tmp_path)


def test_a_resumed_run_whose_config_lacks_a_later_key_takes_its_default(
    tmp_path: Path, fake_backend: Backend
) -> None:
    config = _config(tmp_path, steps=1, eval_every=0)
    asyncio.run(run_training(config, fake_backend.service(tmp_path / "service")))
    run_file = tmp_path / "run" / ck.RUN_FILE
    saved = json.loads(run_file.read_text())
    del saved["config"]["eval_repeats"]  # a run started before the key existed
    run_file.write_text(json.dumps(saved))
    more = TrainConfig.from_mapping({"steps": 2}, base=config)
    result = asyncio.run(run_training(more, fake_backend.service(tmp_path / "service"), resume=True))
    assert [m["step"] for m in result.metrics] == [0, 1]
    other = TrainConfig.from_mapping({"eval_repeats": 2}, base=more)
    with pytest.raises(ck.CheckpointError, match="eval_repeats: run has 1, given 2"):
        asyncio.run(run_training(other, fake_backend.service(), resume=True))


def test_a_fresh_run_needs_a_new_or_empty_directory(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    (busy / "transcripts").mkdir(parents=True)
    (busy / "metrics.jsonl").write_text('{"my": "metrics"}\n')
    with pytest.raises(ck.CheckpointError, match="busy is not empty and holds no run"):
        ck.init_run(busy, {}, resume=False)
    assert (busy / "metrics.jsonl").read_text() == '{"my": "metrics"}\n'
    assert sorted(p.name for p in busy.iterdir()) == ["metrics.jsonl", "transcripts"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ck.CheckpointError, match="file is not a directory"):
        ck.init_run(tmp_path / "file", {}, resume=False)
    (tmp_path / "empty").mkdir()
    assert ck.init_run(tmp_path / "empty", {"a": 1}, resume=False).config == {"a": 1}
    with pytest.raises(ck.CheckpointError, match=r"already holds a run; pass --resume .* or remove it"):
        ck.init_run(tmp_path / "empty", {"a": 1}, resume=False)


def _metrics_file(tmp_path: Path, tail: bytes) -> bytes:
    for step in (0, 1, 2):
        ck.append_metrics(tmp_path, {"step": step})
    with open(tmp_path / ck.METRICS, "ab") as f:
        f.write(tail)
    return (tmp_path / ck.METRICS).read_bytes()


@pytest.mark.parametrize(
    ("tail", "line", "problem"),
    [
        (b'{"advantage/max": 0.3\n{"step": 3}\n', 4, "not JSON"),
        (b"\xff\n", 4, "not UTF-8 text"),
        (b'[1]\n{"step": 3}\n', 4, "not a JSON object"),
        (b'{"loss": 1}\n', 4, "no step number"),
    ],
)
def test_an_unreadable_metrics_line_before_the_last_stops_a_resume(
    tmp_path: Path, tail: bytes, line: int, problem: str
) -> None:
    before = _metrics_file(tmp_path, tail)
    with pytest.raises(ck.CheckpointError, match=rf"metrics\.jsonl:{line}: {problem}"):
        ck.truncate_metrics(tmp_path, 2)
    assert (tmp_path / ck.METRICS).read_bytes() == before  # untouched
    assert [r["step"] for r in ck.read_metrics(tmp_path)] == [0, 1, 2, 3][: 3 + tail.count(b'"step"')]


@pytest.mark.parametrize("torn", [b'{"step": 3', b"\xff", b'{"step": 3}'])
def test_a_torn_last_line_is_cut(tmp_path: Path, torn: bytes) -> None:
    _metrics_file(tmp_path, torn)
    assert [r["step"] for r in ck.truncate_metrics(tmp_path, 3)] == [0, 1, 2]
    assert (tmp_path / ck.METRICS).read_bytes().count(b"\n") == 3


def test_saved_state_paths_inside_the_run_are_recorded_against_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    inside = str(run / "service" / "states" / "s.json")
    assert ck.stored_path(run, inside) == "$RUN_DIR/service/states/s.json"
    assert ck.stored_path(run, "fake://" + inside) == "fake://$RUN_DIR/service/states/s.json"
    assert ck.stored_path(run, str(tmp_path / "elsewhere")) == str(tmp_path / "elsewhere")
    assert ck.stored_path(run, "tinker://abc/weights/1") == "tinker://abc/weights/1"
    moved = tmp_path / "moved"
    where = moved / "checkpoints" / "step-000001" / "loop_state.json"
    expected = str(moved.resolve() / "service" / "states" / "s.json")
    assert (
        ck.saved_path(moved, "fake://$RUN_DIR/service/states/s.json", checkpoint=where)
        == "fake://" + expected
    )
    with pytest.raises(ck.CheckpointError, match="lies outside the run directory"):
        ck.saved_path(moved, "$RUN_DIR/../other/s.json", checkpoint=where)


def test_old_checkpoints_with_working_directory_paths_resume_only_from_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints used to record the path the service gave, relative to the working directory; from
    another one, a same-named path would be another run's state."""
    monkeypatch.chdir(tmp_path)
    where = Path("run", "checkpoints", "step-000001", "loop_state.json")
    old = "run/service/states/step-000001.json"
    assert ck.saved_path("run", old, checkpoint=where) == str((tmp_path / old).resolve())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(
        ck.CheckpointError, match="recorded relative to the directory the run was started from"
    ):
        ck.saved_path(tmp_path / "run", old, checkpoint=where)


def test_a_run_resumes_from_another_directory_and_after_a_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    config = TrainConfig.from_mapping({**SMALL, "out": "run", "steps": 2, "save_every": 1, "eval_every": 0})
    asyncio.run(run_training(config, FakeServiceClient(seed=0, root=Path("run", "service"))))
    saved = json.loads((tmp_path / "a/run/checkpoints/step-000002/loop_state.json").read_text())
    assert saved["state_path"] == "fake://$RUN_DIR/service/states/step-000002.json"
    assert saved["fixed_state_path"] == "fake://$RUN_DIR/service/states/fixed.json"
    (tmp_path / "a" / "run").rename(tmp_path / "b")
    decoy = tmp_path / "c" / "run" / "service" / "states"  # the same relative path, another run's
    decoy.mkdir(parents=True)
    (decoy / "step-000002.json").write_text("not this run's state")
    monkeypatch.chdir(tmp_path / "c")
    moved = TrainConfig.from_mapping({"out": str(tmp_path / "b"), "steps": 3}, base=config)
    service = FakeServiceClient(seed=0, root=tmp_path / "b" / "service")
    result = asyncio.run(run_training(moved, service, resume=True))
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    loads = [e.detail for e in service.events if e.kind == "load"]
    assert loads == [
        f"fake://{(tmp_path / 'b/service/states').resolve()}/{n}.json" for n in ("step-000002", "fixed")
    ]


def test_a_run_through_the_sdk_resumes_after_a_move(
    tmp_path: Path, served_fake: ServedFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its saved states are the server's (``tinker://`` paths, recorded as they are): moving the run
    directory, and resuming from another working directory, finds them."""
    backend = Backend.sdk(served_fake)
    config = _config(tmp_path, steps=2, save_every=1, eval_every=0)
    asyncio.run(run_training(config, backend.service()))
    saved = json.loads((tmp_path / "run/checkpoints/step-000002/loop_state.json").read_text())
    assert saved["state_path"].startswith("tinker://") and saved["fixed_state_path"].startswith("tinker://")
    (tmp_path / "run").rename(tmp_path / "moved")
    monkeypatch.chdir(tmp_path / "moved")
    moved = TrainConfig.from_mapping({"out": str(tmp_path / "moved"), "steps": 3}, base=config)
    result = asyncio.run(run_training(moved, backend.service(), resume=True))
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    assert len(_final_lineage(result.run_dir, backend)) == 3


def _checkpointed_run(tmp_path: Path) -> tuple[TrainConfig, Path]:
    config = _config(tmp_path, steps=2, save_every=1, eval_every=0)
    asyncio.run(run_training(config, FakeServiceClient(seed=0, root=tmp_path / "run" / "service")))
    return TrainConfig.from_mapping({"steps": 3}, base=config), tmp_path / "run/checkpoints/step-000002"


def _edit_loop_state(checkpoint: Path, edit: Any) -> None:
    path = checkpoint / "loop_state.json"
    state = json.loads(path.read_text())
    path.write_text(json.dumps(edit(state)))


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: [], "is unreadable: not a JSON object"),
        (lambda s: {k: v for k, v in s.items() if k != "state_path"}, "'state_path' is None, not a path"),
        (lambda s: {**s, "loop": {"step": "x"}}, "is unusable: loop state is malformed"),
        (lambda s: {k: v for k, v in s.items() if k != "loop"}, 'has no "loop" state'),
        (lambda s: {**s, "fixed_state_path": 3}, "'fixed_state_path' is 3, not a path"),
        (lambda s: {**s, "rae_baselines": ["x"]}, "'rae_baselines' is \\['x'\\], not 2 numbers"),
    ],
)
def test_a_corrupt_loop_state_is_named(tmp_path: Path, edit: Any, problem: str) -> None:
    config, checkpoint = _checkpointed_run(tmp_path)
    _edit_loop_state(checkpoint, edit)
    with pytest.raises(ck.CheckpointError, match=rf"step-000002/loop_state\.json.* {problem}"):
        asyncio.run(run_training(config, FakeServiceClient(seed=0), resume=True))


@pytest.mark.parametrize("name", ["step-000002.json", "fixed.json"])
@pytest.mark.parametrize("content", [None, "garbage", "{}"])
def test_a_missing_or_corrupt_saved_state_is_named(tmp_path: Path, name: str, content: str | None) -> None:
    config, _ = _checkpointed_run(tmp_path)
    state = tmp_path / "run" / "service" / "states" / name
    if content is None:
        state.unlink()
    else:
        state.write_text(content)
    before = (tmp_path / "run" / ck.METRICS).read_bytes()
    with pytest.raises(ck.CheckpointError, match=rf"loop_state\.json: cannot load its saved state .*{name}"):
        asyncio.run(run_training(config, FakeServiceClient(seed=0), resume=True))
    assert (tmp_path / "run" / ck.METRICS).read_bytes() == before


@pytest.mark.parametrize("name", ["step-000002", "fixed"])
@pytest.mark.parametrize("content", [None, "garbage"])
def test_a_missing_or_corrupt_served_state_is_named(
    tmp_path: Path, served_fake: ServedFake, name: str, content: str | None
) -> None:
    """Through the SDK the saved states are the server's files: one deleted or overwritten there stops the
    resume with the checkpoint named, as a local file does."""
    backend = Backend.sdk(served_fake)
    config = _config(tmp_path, steps=2, save_every=1, eval_every=0)
    asyncio.run(run_training(config, backend.service()))
    saved = json.loads((tmp_path / "run/checkpoints/step-000002/loop_state.json").read_text())
    state = served_fake.state_file(saved["fixed_state_path" if name == "fixed" else "state_path"])
    if content is None:
        state.unlink()
    else:
        state.write_text(content)
    before = (tmp_path / "run" / ck.METRICS).read_bytes()
    more = TrainConfig.from_mapping({"steps": 3}, base=config)
    with pytest.raises(ck.CheckpointError, match=rf"loop_state\.json: cannot load its saved state .*{name}"):
        asyncio.run(run_training(more, backend.service(), resume=True))
    assert (tmp_path / "run" / ck.METRICS).read_bytes() == before
