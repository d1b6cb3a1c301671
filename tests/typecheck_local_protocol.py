"""Static check (run by mypy through ``[tool.mypy] files``): the local service satisfies the protocols."""

from __future__ import annotations

from adapters.local import LocalSamplingClient, LocalServiceClient, LocalTrainingClient
from adapters.tinker import protocol


def as_protocols(
    service: LocalServiceClient, trainer: LocalTrainingClient, sampler: LocalSamplingClient
) -> tuple[protocol.ServiceClient, protocol.TrainingClient, protocol.SamplingClient]:
    """Type-checks only when each local client satisfies its protocol."""
    return service, trainer, sampler
