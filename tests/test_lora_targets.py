"""The LoRA target keys of ``train`` (``train_attn``, ``train_mlp``, ``train_unembed``): config checks, the
flags, and the call that creates the run's training client. (Served runs: tests/test_serve.py.)"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from adapters.cli.train import add_parser
from adapters.training.config import TrainConfig
from adapters.training.train import _new_training_client, config_boundary


def test_targets_all_off_or_chosen_for_full_fine_tuning_are_refused_by_name() -> None:
    off = {"train_attn": False, "train_mlp": False, "train_unembed": False}
    with pytest.raises(ValueError, match="train_attn, train_mlp and train_unembed are all false"):
        TrainConfig.from_mapping({"lora_rank": 4, **off})
    with pytest.raises(ValueError, match=r"config key train_mlp = false .* lora_rank = 0"):
        TrainConfig.from_mapping({"lora_rank": 0, "train_mlp": False})
    assert TrainConfig.from_mapping({"lora_rank": 4, "train_attn": False}).train_mlp


def test_flags_read_true_and_false() -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", "--train-mlp", "false", "--train-unembed", "Off"])
    assert (args.train_mlp, args.train_unembed, args.train_attn) == (False, False, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--train-attn", "maybe"])


class _Recorder:
    """A service whose ``create_lora_training_client`` records its arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def create_lora_training_client(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append((args, kwargs))
        return "client"


@pytest.mark.parametrize(
    ("keys", "sent"),
    [
        ({}, {}),  # Tinker's defaults: no flag sent, so any service takes the call
        ({"train_unembed": False}, {"train_attn": True, "train_mlp": True, "train_unembed": False}),
    ],
)
def test_the_run_asks_for_its_targets(keys: dict[str, bool], sent: dict[str, bool]) -> None:
    config = TrainConfig.from_mapping({"model": "tiny", "lora_rank": 4, **keys})
    service = _Recorder()
    assert asyncio.run(_new_training_client(service, config, config_boundary(config))) == "client"  # type: ignore[arg-type]
    assert service.calls == [(("tiny", 4), sent)]
