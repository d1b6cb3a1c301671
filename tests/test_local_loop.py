"""The training loop (``run_training``) runs against the local JAX service on the tiny model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

from adapters.local import LocalServiceClient
from adapters.tinker.config import TrainConfig
from adapters.tinker.train import run_training


def test_run_training_on_the_local_service(tmp_path: Path) -> None:
    config = TrainConfig(
        model="tiny",
        lora_rank=4,
        steps=2,
        batch_size=2,
        num_agents=2,
        max_rounds=1,
        max_tokens=16,
        eval_questions=2,
        out=str(tmp_path / "run"),
    )
    service = LocalServiceClient(seed=0, root=tmp_path / "run" / "service")
    result = asyncio.run(run_training(config, service))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1]
    assert len(result.metrics) == 2
    assert all(x["optim/num_datums"] > 0 for x in lines)  # the service sampled and trained
