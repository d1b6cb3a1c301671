"""The ``--estimator`` spec language: ``NAME``, ``NAME,key=value,...`` or ``key=value,...`` over
``kernel.ADVANTAGE_PRESETS`` and the fields of ``kernel.AdvantageOptions``."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Final, Literal

import numpy as np

import kernel
from kernel.checks import check_type, did_you_mean

__all__ = ["check_estimator", "resolve_estimator"]


_OPTION_TYPES: Final[dict[str, Any]] = typing.get_type_hints(kernel.AdvantageOptions)


def _coerce(key: str, value: str) -> Any:
    """Reads the text of ``key=value`` as the type ``kernel.AdvantageOptions`` declares for ``key``."""
    text = value.strip()
    low = text.lower()
    kind = _OPTION_TYPES[key]
    choices = typing.get_args(kind) if typing.get_origin(kind) is Literal else ()
    if choices:
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text
    if kind is bool:
        if low in ("true", "yes", "on", "1"):
            return True
        if low in ("false", "no", "off", "0"):
            return False
        raise ValueError(f"expected true or false, got {text!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
    if type(None) in typing.get_args(kind) and low in ("none", "null"):
        return None
    try:
        number = float(text)
    except ValueError:
        raise ValueError(
            f"expected a number{' or none' if type(None) in typing.get_args(kind) else ''}, got {text!r}"
        ) from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {text!r}")
    return number


def resolve_estimator(spec: str) -> tuple[str, dict[str, Any]]:
    """Reads an estimator spec: ``NAME``, ``NAME,key=value,...`` or ``key=value,...``.

    ``NAME`` is a key of ``kernel.ADVANTAGE_PRESETS``; ``key=value`` pairs are fields of
    ``kernel.AdvantageOptions`` (keyword options of ``kernel.grouped_advantages``) and override the
    preset's. Each value is read as the type the field declares: one of its names for a closed option
    set, ``true``/``false`` for a flag, an integer for ``ddof``, a finite number for the others
    (``none`` where the field may be None). Options alone start from the ``"default"`` preset.

    Returns:
      ``(preset name, options)`` with the preset's options merged under the overrides.

    Raises:
      ValueError: an unknown preset or option, a malformed item, or a value not of the option's type
        (the message names the option and lists what is known).

    Examples:
      >>> name, opts = resolve_estimator("verl_grpo.norm,eps=1e-4")
      >>> name, opts["scale"], opts["eps"]
      ('verl_grpo.norm', 'group', 0.0001)
      >>> resolve_estimator("ddof=1.5")
      Traceback (most recent call last):
      ...
      ValueError: estimator option ddof: expected an integer, got '1.5'
    """
    check_type(spec, str, "estimator spec")
    presets = kernel.ADVANTAGE_PRESETS
    items = [s.strip() for s in spec.split(",") if s.strip()]
    name = "default"
    if items and "=" not in items[0]:
        name = items.pop(0)
    if name not in presets:
        hint = did_you_mean(name, presets)
        raise ValueError(f"unknown estimator {name!r}{hint}; known presets: {', '.join(sorted(presets))}")
    base = dataclasses.asdict(presets[name])
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"estimator option {item!r} must look like key=value")
        if key not in base:
            hint = did_you_mean(key, base)
            raise ValueError(f"unknown estimator option {key!r}{hint}; options: {', '.join(base)}")
        try:
            overrides[key] = _coerce(key, value)
        except ValueError as e:
            raise ValueError(f"estimator option {key}: {e}") from None
    return name, {**base, **overrides}


def check_estimator(spec: str) -> tuple[str, dict[str, Any]]:
    """:func:`resolve_estimator`, then one tiny ``grouped_advantages`` call so that option values the
    kernel refuses (e.g. ``eps=-1``) are reported before any work is done.

    ``singleton="error"`` is not an error here: debates with one agent are skipped at scoring, each with
    the reason ``singleton_group`` (see :func:`score`).

    Raises:
      ValueError, TypeError: the spec or an option value is not accepted.

    Examples:
      >>> name, opts = check_estimator("verl_grpo.norm,eps=1e-4")
      >>> name, opts["scale"], opts["eps"]
      ('verl_grpo.norm', 'group', 0.0001)
      >>> check_estimator("eps=-1")  # resolve_estimator reads it; the kernel refuses it
      Traceback (most recent call last):
      ...
      ValueError: eps must be a finite number >= 0, got -1.0
    """
    name, opts = resolve_estimator(spec)
    kernel.grouped_advantages(np.array([0.0, 1.0]), np.array([0, 0]), 1, **opts)
    return name, opts
