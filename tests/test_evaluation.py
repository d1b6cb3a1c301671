"""The debate evaluation (did debate help?): the policy debating itself against the same policy answering
alone, on the fake service's scripted policy; and every evaluation step of a run records its figures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.tinker.fake import FakePolicy, FakeSamplingClient, FakeServiceClient, initial_model_state
from adapters.tinker.renderers import ByteRenderer
from adapters.training.config import TrainConfig
from adapters.training.dataset import Question
from adapters.training.evaluation import DEBATE_EVAL_NAMES, debate_evaluation
from adapters.training.train import run_training

QUESTIONS = [Question(f"What is {a} + {b}?", str(a + b)) for a, b in [(2, 3), (7, 5), (1, 1), (4, 9)]]


def _figures(accuracy: float, repeats: int, malformed: float = 0.0) -> dict[str, float]:
    policy = FakePolicy(base_accuracy=accuracy, accuracy_gain=0.0, malformed_rate=malformed)
    sampler = FakeSamplingClient(initial_model_state("fake", 1, 0), policy)
    config = TrainConfig(num_agents=3, max_rounds=2, max_tokens=512, eval_questions=4, eval_repeats=repeats)
    return asyncio.run(debate_evaluation(config, QUESTIONS, ByteRenderer(), sampler))


@pytest.mark.parametrize("accuracy", [0.0, 1.0])
def test_an_always_right_or_always_wrong_policy_scores_one_or_zero(accuracy: float) -> None:
    figures = _figures(accuracy, repeats=2)
    assert set(figures) == set(DEBATE_EVAL_NAMES)
    assert all(v == accuracy for v in figures.values()), figures


@pytest.mark.parametrize("repeats", [1, 3])
def test_k_sample_figures_are_ordered(repeats: int) -> None:
    figures = _figures(0.5, repeats, malformed=0.1)
    for who in ("debate", "direct"):
        avg, passed = figures[f"eval/{who}/avg@k"], figures[f"eval/{who}/pass@k"]
        assert 0.0 <= avg <= passed <= 1.0
        if repeats == 1:  # one sample: every figure is that sample's correctness
            assert avg == passed == figures[f"eval/{who}/cons@k"]
    assert 0.0 <= figures["eval/debate/first_round_majority"] <= 1.0


def test_every_evaluation_step_of_a_run_records_the_debate_figures(tmp_path: Path) -> None:
    config = TrainConfig.from_mapping(
        {
            "out": str(tmp_path / "run"),
            "steps": 2,
            "batch_size": 2,
            "num_agents": 2,
            "max_rounds": 1,
            "max_tokens": 64,
            "eval_questions": 2,
            "eval_every": 1,
        }
    )
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert all(isinstance(m[name], float) for m in result.metrics for name in DEBATE_EVAL_NAMES)


def test_each_step_accounts_its_tokens(tmp_path: Path) -> None:
    """tokens/prompt and tokens/sampled are the rollouts' own counts (the transcripts' token columns);
    tokens/trained is what the step's datums hold; warm-start steps sample nothing."""
    from adapters.transcripts import read_transcripts

    config = TrainConfig.from_mapping(
        {
            "out": str(tmp_path / "run"),
            "steps": 2,
            "warm_start_steps": 1,
            "dataset": "arithmetic",
            "batch_size": 2,
            "num_agents": 2,
            "max_rounds": 1,
            "max_tokens": 512,
            "eval_every": 0,
        }
    )
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    warm, rl = result.metrics[0], result.metrics[1]
    assert warm["tokens/sampled"] == warm["tokens/prompt"] == 0 and warm["tokens/trained"] > 0
    debates = read_transcripts((tmp_path / "run" / "transcripts" / "step-000001.jsonl").read_bytes()).debates
    turns = [t for d in debates for t in d.turns]
    assert rl["tokens/prompt"] == sum(len(t.observation_tokens or ()) for t in turns)
    assert rl["tokens/sampled"] == sum(len(t.action_tokens or ()) for t in turns)
    assert 0 < rl["tokens/trained"] and rl["tokens/prompt_cached"] == 0  # the fake reports no cache hits
