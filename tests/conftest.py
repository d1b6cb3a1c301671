"""Hypothesis profiles, registered once; JAX's CPU split into two devices, as ``debate-kernel train`` does.

``HYPOTHESIS_PROFILE`` picks one explicitly; otherwise ``CI=true`` selects ``ci`` and anything else
``dev``. ``deep`` (thousands of examples) is opt-in: ``HYPOTHESIS_PROFILE=deep pytest``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

try:  # before any JAX computation: the local service's training calls then run data-parallel, as in
    # `debate-kernel train`, whichever test runs first (tests/test_local_devices.py checks one device)
    from adapters.local import split_cpu
except ImportError:  # the local extra is not installed
    pass
else:
    split_cpu(2)

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("dev", deadline=None, max_examples=25, suppress_health_check=_SUPPRESS)
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=100,
    derandomize=True,
    suppress_health_check=_SUPPRESS,
    print_blob=True,
)
settings.register_profile("deep", deadline=None, max_examples=3000, suppress_health_check=_SUPPRESS)


def _profile() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE")
    if explicit:
        return explicit
    return "ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev"


settings.load_profile(_profile())
