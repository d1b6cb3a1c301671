"""The estimator argument both bridges take: a spec string or :class:`kernel.AdvantageOptions`."""

from __future__ import annotations

import dataclasses
from typing import Any

import kernel


def estimator_options(estimator: str | kernel.AdvantageOptions) -> dict[str, Any]:
    """Keyword options of :func:`kernel.grouped_advantages` for ``estimator``.

    Args:
      estimator: a spec as ``debate-kernel score --estimator`` takes it (``NAME``, ``NAME,key=value,…``
        or ``key=value,…``; see :func:`kernel.read_estimator_spec`), or an
        :class:`kernel.AdvantageOptions`.

    Returns:
      The options as a dict.

    Raises:
      ValueError: an unknown preset or option, or a value of the wrong type.
      TypeError: ``estimator`` of another type.
    """
    return estimator_spec(estimator)[1]


def estimator_spec(estimator: str | kernel.AdvantageOptions) -> tuple[str | None, dict[str, Any]]:
    """``(preset name or None, options)`` of ``estimator``, read once, when the bridge is built (the
    options are checked then, :class:`kernel.AdvantageOptions`), not at a trainer's first step.

    Raises:
      ValueError: an unknown preset or option, a value the kernel refuses (``eps=-1``), or ``rae`` (the
        bridges score rows by their group, with no role baselines carried between steps).
      TypeError: ``estimator`` of another type.
    """
    if isinstance(estimator, kernel.AdvantageOptions):
        return None, dataclasses.asdict(estimator)
    if isinstance(estimator, str):
        name, options = kernel.read_estimator_spec(estimator)
        if not isinstance(options, kernel.AdvantageOptions):
            raise ValueError(f"estimator {name!r} is not grouped advantages: the bridges take a preset spec")
        return name, dataclasses.asdict(options)
    raise TypeError(f"estimator must be a preset spec or AdvantageOptions, got {type(estimator).__name__}")


def drmas_grouping(preset: str | None) -> bool | None:
    """The grouping a DrMAS preset is defined with: True for ``drmas_grpo.*_agent`` (groups of uid and
    agent), False for ``drmas_grpo.*_traj`` (uid groups of trajectory means), None for any other preset."""
    if preset is None or not preset.startswith("drmas_grpo."):
        return None
    return preset.endswith("_agent") if preset.endswith(("_agent", "_traj")) else None
