"""The training loop (``run_training``) runs against the local JAX service on the tiny model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

from adapters.local import LocalServiceClient
from adapters.training.config import TrainConfig
from adapters.training.train import run_training
from tests._marks import EXHAUSTIVE, SHORT_SAMPLES


def _tiny(out: Path, **overrides: Any) -> TrainConfig:
    """A run of the tiny model that takes seconds: 2 debates of 2 agents, one round, 16-token turns."""
    values: dict[str, Any] = {"model": "tiny", "lora_rank": 4, "batch_size": 2, "num_agents": 2}
    values.update(max_rounds=1, max_tokens=16, out=str(out))
    return TrainConfig(**{**values, **overrides})


@EXHAUSTIVE  # the fast tier trains LoRA in process (the resume test), evaluates in process (rank 0 below)
def test_run_training_on_the_local_service(tmp_path: Path) -> None:
    config = _tiny(tmp_path / "run", steps=2, eval_questions=2)
    service = LocalServiceClient(seed=0, root=tmp_path / "run" / "service")
    result = asyncio.run(run_training(config, service))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1]
    assert len(result.metrics) == 2
    assert all(x["optim/num_datums"] > 0 for x in lines)  # the service sampled and trained


class _Recording(LocalServiceClient):
    """The local service, noting which kind of training client the loop asked for."""

    made: list[str]

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Any:
        self.made.append(f"lora-{rank}")
        return super().create_lora_training_client(base_model, rank)

    def create_full_training_client(self, base_model: str) -> Any:
        self.made.append("full")
        return super().create_full_training_client(base_model)


@SHORT_SAMPLES
def test_lora_rank_zero_trains_every_weight_on_the_local_service(tmp_path: Path) -> None:
    config = TrainConfig(
        model="tiny",
        lora_rank=0,
        dataset="arithmetic",
        observation="compact",
        warm_start_steps=1,
        steps=1,
        batch_size=1,
        num_agents=2,
        max_rounds=1,
        max_tokens=16,
        eval_questions=1,
        out=str(tmp_path / "run"),
    )
    service = _Recording(seed=0)
    service.made = []
    result = asyncio.run(run_training(config, service))
    assert service.made == ["full"]
    assert [m["phase"] for m in result.metrics] == ["warm_start", "rl"]
    assert all(m["optim/num_datums"] > 0 for m in result.metrics)


def test_lora_rank_zero_is_refused_where_only_lora_exists(tmp_path: Path) -> None:
    from adapters.tinker.fake import FakeServiceClient

    config = TrainConfig(lora_rank=0, steps=1, out=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"lora_rank = 0 .*needs the local service"):
        asyncio.run(run_training(config, FakeServiceClient()))
    assert not (tmp_path / "run").exists()  # refused before run.json, which a corrected rerun would meet
    with pytest.raises(ValueError, match="config key lora_rank must be >= 0"):
        TrainConfig(lora_rank=-1)


def test_a_resumed_run_repeats_the_uninterrupted_one(tmp_path: Path) -> None:
    """Crashed in its fourth step (a checkpoint after every step) and resumed, the run's metrics equal
    those of the run that was not interrupted, step for step: a resumed run's samplers draw the random
    streams the uninterrupted run's did."""
    from adapters.tinker.faults import Fault, FaultPlan, SimulatedCrash, with_faults

    def config(run: str) -> TrainConfig:
        return _tiny(tmp_path / run, steps=4, eval_every=0, eval_questions=0, save_every=1, temperature=1.0)

    whole = asyncio.run(run_training(config("whole"), LocalServiceClient(seed=0, root=tmp_path / "s1")))
    plan = FaultPlan(at={("optim_step", 3): Fault("crash")})  # the fourth step dies before its update
    crashing, _ = with_faults(LocalServiceClient(seed=0, root=tmp_path / "s2"), plan)
    with pytest.raises(BaseExceptionGroup) as caught:
        asyncio.run(run_training(config("resumed"), crashing))
    assert caught.group_contains(SimulatedCrash)
    resumed = asyncio.run(
        run_training(config("resumed"), LocalServiceClient(seed=0, root=tmp_path / "s2"), resume=True)
    )

    def untimed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]

    assert [r["step"] for r in resumed.metrics] == [0, 1, 2, 3]
    # as JSON: NaN metrics compare equal, and the lines read back from disk keep their own key order
    assert json.dumps(untimed(resumed.metrics), sort_keys=True) == json.dumps(
        untimed(whole.metrics), sort_keys=True
    )


def test_a_run_resumes_from_another_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service was given a root relative to the working directory; the checkpoint records the saved
    states against the run directory, so a resume from elsewhere loads this run's state, not a
    same-named path's there."""
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    config = _tiny(Path("run"), steps=1, eval_every=0, eval_questions=0, save_every=1)
    asyncio.run(run_training(config, LocalServiceClient(seed=0, root=Path("run", "service"))))
    saved = json.loads(Path("run/checkpoints/step-000001/loop_state.json").read_text())
    assert saved["state_path"] == "$RUN_DIR/service/states/step-000001.safetensors"
    decoy = tmp_path / "c" / "run" / "service" / "states"
    decoy.mkdir(parents=True)
    (decoy / "step-000001.safetensors").write_bytes(b"another run's state")
    monkeypatch.chdir(tmp_path / "c")
    run_dir = tmp_path / "a" / "run"
    more = TrainConfig.from_mapping({"steps": 2, "out": str(run_dir)}, base=config)
    result = asyncio.run(
        run_training(more, LocalServiceClient(seed=0, root=run_dir / "service"), resume=True)
    )
    assert [m["step"] for m in result.metrics] == [0, 1]
