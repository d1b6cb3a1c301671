"""The estimator argument both bridges take: a spec string or :class:`kernel.AdvantageOptions`."""

from __future__ import annotations

import dataclasses
from typing import Any

import kernel
from adapters import pipeline


def estimator_options(estimator: str | kernel.AdvantageOptions) -> dict[str, Any]:
    """Keyword options of :func:`kernel.grouped_advantages` for ``estimator``.

    Args:
      estimator: a spec as ``debate-kernel score --estimator`` takes it (``NAME``, ``NAME,key=value,…``
        or ``key=value,…``; see :func:`adapters.pipeline.resolve_estimator`), or an
        :class:`kernel.AdvantageOptions`.

    Returns:
      The options as a dict.

    Raises:
      ValueError: an unknown preset or option, or a value of the wrong type.
      TypeError: ``estimator`` of another type.
    """
    return estimator_spec(estimator)[1]


def estimator_spec(estimator: str | kernel.AdvantageOptions) -> tuple[str | None, dict[str, Any]]:
    """``(preset name or None, options)`` of ``estimator``, the option values checked at once (by one tiny
    kernel call, :func:`adapters.pipeline.check_estimator`) rather than at a trainer's first step.

    Raises:
      ValueError: an unknown preset or option, or a value the kernel refuses (``eps=-1``).
      TypeError: ``estimator`` of another type.
    """
    if isinstance(estimator, kernel.AdvantageOptions):
        return None, dataclasses.asdict(estimator)
    if isinstance(estimator, str):
        return pipeline.check_estimator(estimator)
    raise TypeError(f"estimator must be a preset spec or AdvantageOptions, got {type(estimator).__name__}")


def drmas_grouping(preset: str | None) -> bool | None:
    """The grouping a DrMAS preset is defined with: True for ``drmas_grpo.*_agent`` (groups of uid and
    agent), False for ``drmas_grpo.*_traj`` (uid groups of trajectory means), None for any other preset."""
    if preset is None or not preset.startswith("drmas_grpo."):
        return None
    return preset.endswith("_agent") if preset.endswith(("_agent", "_traj")) else None
