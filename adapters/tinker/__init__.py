"""The Tinker side of debate-kernel: the client protocol, conversion, renderers, rollouts, a fake service.

- :mod:`adapters.tinker.protocol`: ``typing.Protocol``s naming exactly the SDK surface we use; the real
  ``tinker.ServiceClient``, the in-repo fake and the local service (:mod:`adapters.local`) satisfy them.
- :mod:`adapters.tinker.convert`: kernel datums ↔ ``tinker.Datum``, sampling results → trajectories;
  :mod:`adapters.tinker.tokens`: ``TokenArray``, the read-only token view a datum's input holds.
- :mod:`adapters.tinker.tokenizers`: ``ByteTokenizer``, UTF-8 bytes plus chat special tokens.
- :mod:`adapters.tinker.futures`: futures satisfying ``protocol.Future`` for in-repo services.
- :mod:`adapters.tinker.renderers`: messages → prompt tokens and stop sequences; tokens → text.
- :mod:`adapters.tinker.rollouts`: many debates at once over the kernel's episode state machine.
- :mod:`adapters.tinker.fake` and :mod:`adapters.tinker.faults`: a seeded offline fake of the service
  returning real SDK types, and a wrapper that injects faults into any service.
- :mod:`adapters.tinker.config`, :mod:`adapters.tinker.dataset`, :mod:`adapters.tinker.planner` (the
  I/O-free loop), :mod:`adapters.tinker.prepare` (a step's datums and metrics from its rollouts, also
  I/O-free), :mod:`adapters.tinker.kernel_loss` (kernel losses through ``forward_backward_custom``),
  :mod:`adapters.tinker.credit` (which tokens carry a turn's advantage), :mod:`adapters.tinker.streaming`
  (a batch streamed in parts), :mod:`adapters.tinker.transcript_writer` (a step's transcripts written
  off the event loop), :mod:`adapters.tinker.checkpoint`, :mod:`adapters.tinker.evaluation` (fixed opponents),
  :mod:`adapters.tinker.memory` (the loop's collector and ``malloc`` settings) and
  :mod:`adapters.tinker.train` (its async shell): ``run_training(config, service_client)``, see
  ``docs/training.md``.
"""

import importlib
from typing import Any

__all__ = ["TrainConfig", "TrainResult", "run_training"]


def __getattr__(name: str) -> Any:
    """``run_training``, ``TrainResult`` and ``TrainConfig``, imported on first use (so that importing
    a light module such as ``adapters.tinker.protocol`` does not load the training loop)."""
    if name in ("run_training", "TrainResult"):
        return getattr(importlib.import_module("adapters.tinker.train"), name)
    if name == "TrainConfig":
        return importlib.import_module("adapters.tinker.config").TrainConfig
    raise AttributeError(f"module 'adapters.tinker' has no attribute {name!r}")
