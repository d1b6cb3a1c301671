"""The contract check as ``debate-kernel train`` runs it: with the run's shapes (its LoRA rank, or full
fine-tuning; its ``max_tokens``; its first turn as the probe prompt) and, through the SDK, in a session
of its own that is closed after the check, so its throwaway client keeps no adapter slot."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from adapters.tinker import contract
from adapters.tinker.contract import check_contract
from adapters.tinker.fake import FakeServiceClient

VOCAB = 262


class _FullFake(FakeServiceClient):
    """The fake with a full fine-tuning client (a LoRA client underneath), counting what was created."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.created: list[str] = []

    def create_full_training_client(self, base_model: str) -> Any:
        self.created.append("full")
        return super().create_lora_training_client(base_model, 8)

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Any:
        self.created.append(f"lora {rank}")
        return super().create_lora_training_client(base_model, rank)


def test_rank_0_checks_a_full_fine_tuning_client() -> None:
    service = _FullFake()
    report = asyncio.run(check_contract(service, base_model="fake", vocab_size=VOCAB, rank=0))
    assert report.passed and service.created == ["full"]
    assert asyncio.run(check_contract(service, base_model="fake", vocab_size=VOCAB, rank=4)).passed
    assert service.created == ["full", "lora 4"]


def test_rank_0_on_a_service_without_full_fine_tuning_is_refused_before_any_call() -> None:
    service = FakeServiceClient(seed=0)
    for rank in (0, -1, True):
        with pytest.raises(ValueError, match=r"rank must be an int >= 1, or 0 on a service with"):
            asyncio.run(check_contract(service, base_model="fake", vocab_size=VOCAB, rank=rank))
    assert service.events == []


def test_train_checks_with_the_runs_rank_max_tokens_and_first_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI hands the check the run's ``lora_rank`` and ``max_tokens``, and agent 0's first prompt on
    the dataset's first question (rendered as the run renders it)."""
    from adapters.training.dataset import load_questions

    seen: dict[str, Any] = {}
    real = contract.check_contract

    async def spy(service: Any, **kwargs: Any) -> contract.ContractReport:
        seen.update(kwargs, service=service)
        return await real(service, **kwargs)

    monkeypatch.setattr(contract, "check_contract", spy)
    argv = ["train", "--service", "fake", "--batch-size", "2", "--num-agents", "2", "--max-rounds", "1"]
    argv += ["--max-tokens", "96", "--steps", "1", "--eval-every", "0", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert (seen["rank"], seen["max_tokens"], seen["base_model"]) == (32, 96, "tiny")
    text = bytes(t for t in seen["prompt"] if t < 256).decode()
    assert load_questions("sample")[0].question in text and "Agent 0" in text
    assert isinstance(seen["service"], FakeServiceClient)  # in this process: the run's own service


class _Client:
    """Stands for an SDK ``ServiceClient``: records how its session was closed."""

    def __init__(self) -> None:
        self.closed: list[str] = []

    def close(self, status: str) -> concurrent.futures.Future[None]:
        self.closed.append(status)
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done


def test_an_sdk_check_runs_in_a_session_of_its_own_closed_when_it_ends() -> None:
    from adapters.cli.train import _own_session

    made: list[_Client] = []

    def make() -> _Client:
        made.append(_Client())
        return made[-1]

    session = _own_session(make)

    async def use(fail: bool) -> None:
        async with session() as client:
            assert client is made[-1] and not client.closed
            if fail:
                raise RuntimeError("the service broke")

    asyncio.run(use(False))
    with pytest.raises(RuntimeError, match="the service broke"):
        asyncio.run(use(True))
    assert [c.closed for c in made] == [["success"], ["errored"]]
