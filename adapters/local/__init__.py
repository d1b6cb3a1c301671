"""A local training service in JAX with Tinker's client surface (see :mod:`adapters.local.service`).

Needs the ``local`` extra (optax, safetensors) and JAX. ``LocalServiceClient`` satisfies
:class:`adapters.tinker.protocol.ServiceClient`, so the training loop runs on one machine.
"""

from adapters.local.model import SIZES, ModelConfig
from adapters.local.service import (
    CPU_DEVICES,
    LocalSamplingClient,
    LocalServiceClient,
    LocalTrainingClient,
    serves,
    split_cpu,
)

__all__ = [
    "CPU_DEVICES",
    "SIZES",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "ModelConfig",
    "serves",
    "split_cpu",
]
