"""``python -m benchmarks local``'s part 2 arithmetic: how many evaluations a run makes, per-phase step
times from metrics lines, and the projection of the default run (no benchmark is run here)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from benchmarks.bench_local import evaluations, phase_times, projected


@pytest.mark.parametrize(("warm", "steps", "every"), [(2, 3, 2), (0, 5, 0), (1, 4, 3), (3, 2, 10)])
def test_evaluations_counts_what_the_loop_evaluates(
    tmp_path: Path, warm: int, steps: int, every: int
) -> None:
    from adapters.tinker.fake import FakeServiceClient
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    config = TrainConfig.from_mapping(
        {
            "out": str(tmp_path / "run"),
            "warm_start_steps": warm,
            "steps": steps,
            "eval_every": every,
            "eval_questions": 1,
            "batch_size": 2,
            "num_agents": 2,
            "max_rounds": 1,
            "max_tokens": 256,
        }
    )
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    evaluated = [r for r in result.metrics if isinstance(r.get("eval/correct"), float)]
    assert evaluations(warm, steps, every) == len(evaluated)


def test_phase_times_leave_out_each_phases_first_step_and_the_steps_that_evaluate() -> None:
    rows = [
        {"phase": "warm_start", "time/total": 5.0, "time/eval": None},
        {"phase": "warm_start", "time/total": 1.0, "time/eval": 0.0},
        {"phase": "warm_start", "time/total": 3.0, "time/eval": 0.0},
        {"phase": "warm_start", "time/total": 13.0, "time/eval": 10.0},  # the evaluation where RL starts
        {"phase": "rl", "time/total": 6.0, "time/eval": 0.0},
        {"phase": "rl", "time/total": 4.0, "time/eval": 0.0},
        {"phase": "rl", "time/total": 20.0, "time/eval": 14.0},
    ]
    assert phase_times(rows) == {"warm_start_s": 2.0, "rl_s": 4.0, "eval_s": 12.0}
    only_rl = phase_times([{"phase": "rl", "time/total": 3.0, "time/eval": 0.0}])
    assert only_rl["rl_s"] == 3.0 and math.isnan(only_rl["warm_start_s"]) and math.isnan(only_rl["eval_s"])
    assert projected(only_rl, 80, 30, 4) == 90.0  # the phases a run lacks add nothing
    assert projected({"warm_start_s": 2.0, "rl_s": 5.0, "eval_s": 12.0}, 80, 30, 4) == 160 + 150 + 48
