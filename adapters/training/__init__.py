"""Training debating agents on any service the ``tinker`` SDK reaches (hosted Tinker, ``debate-kernel
serve``, the in-process local service): what is about training, apart from the SDK (:mod:`adapters.tinker`)
and the offline jobs (:mod:`adapters.pipeline`).

- :mod:`adapters.training.config`: every knob (``TrainConfig``, TOML and flags), read and checked once;
- :mod:`adapters.training.dataset`: questions, the seeded cursor over them;
- :mod:`adapters.training.planner`: the I/O-free loop (what to do next, given an event);
- :mod:`adapters.training.train`: its async shell, ``run_training(config, service_client)``;
- :mod:`adapters.training.rollouts`: many debates at once over the kernel's episode state machine;
- :mod:`adapters.training.prepare`: a step's datums and metrics from its rollouts (the kernel's scoring
  core, :func:`kernel.score_episodes`), with no I/O; :mod:`adapters.training.credit` (which tokens carry
  a turn's advantage), :mod:`adapters.training.kernel_loss` (kernel losses through
  ``forward_backward_custom``), :mod:`adapters.training.streaming` (a batch streamed in parts);
- :mod:`adapters.training.evaluation`: against fixed opponents, and whether debate helped;
- :mod:`adapters.training.checkpoint`: checkpoints, exactly-once metrics and transcripts.

See ``docs/training.md``.
"""

import importlib
from typing import Any

__all__ = ["TrainConfig", "TrainResult", "run_training"]


def __getattr__(name: str) -> Any:
    """``run_training``, ``TrainResult`` and ``TrainConfig``, imported on first use (so that importing a
    light module such as ``adapters.training.config`` does not load the training loop)."""
    if name in ("run_training", "TrainResult"):
        return getattr(importlib.import_module("adapters.training.train"), name)
    if name == "TrainConfig":
        return importlib.import_module("adapters.training.config").TrainConfig
    raise AttributeError(f"module 'adapters.training' has no attribute {name!r}")
