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
    if isinstance(estimator, kernel.AdvantageOptions):
        return dataclasses.asdict(estimator)
    if isinstance(estimator, str):
        return pipeline.resolve_estimator(estimator)[1]
    raise TypeError(f"estimator must be a preset spec or AdvantageOptions, got {type(estimator).__name__}")
