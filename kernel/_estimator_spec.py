"""Estimators as values, and the one text form they take at the edges (CLI flags, config files, records).

An estimator is either grouped advantages (:class:`~kernel.AdvantageOptions`, the GRPO / RLOO family)
or RAE (:class:`RAEOptions`, per-role EMA baselines). Inside the library it travels as that value;
text is read once where a user typed it (:func:`read_estimator_spec`) and written back for records
(:func:`estimator_spec`).

The spec language: ``NAME``, ``NAME,key=value,...`` or ``key=value,...``. ``NAME`` is a key of
:data:`~kernel.ADVANTAGE_PRESETS` (options alone start from ``default``) or ``rae``; ``key=value`` pairs
override the fields of the named value (``rae,decay=0.9``). Each value is read as the type the field
declares: one of its names for a closed option set, ``true``/``false`` for a flag, an integer for an
integer field, a finite number for the others (``none`` where the field may be None). The value's own
checks then run (``eps=-1`` is refused by :class:`~kernel.AdvantageOptions`).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Final, Literal, TypeAlias

from kernel._advantages import ADVANTAGE_PRESETS, AdvantageOptions
from kernel._checks import check_real, check_type, did_you_mean

__all__ = ["RAE_SPEC_NAME", "Estimator", "RAEOptions", "estimator_spec", "read_estimator_spec"]

RAE_SPEC_NAME: Final = "rae"
"""The spec name of :class:`RAEOptions`."""


@dataclasses.dataclass(frozen=True, slots=True)
class RAEOptions:
    """RAE as an estimator: ``A = r − b_role``, then each role's baseline ``b ← d·b + (1 − d)·mean r``
    (:func:`~kernel.rae_advantages`, ``order="legos"``; the baselines are state the caller carries).

    Raises:
      ValueError: ``decay`` outside [0, 1].

    Examples:
      >>> RAEOptions(decay=0.9).decay
      0.9
    """

    decay: float = 0.95

    def __post_init__(self) -> None:
        d = check_real(self.decay, "decay", finite=True)
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"decay must lie in [0, 1], got {self.decay!r}")


Estimator: TypeAlias = AdvantageOptions | RAEOptions
"""What computes advantages from returns: grouped advantages or RAE."""


def _coerce(kind: Any, key: str, text: str) -> Any:
    """Reads the text of ``key=value`` as the type ``kind`` a field declares."""
    low = text.lower()
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
    optional = type(None) in typing.get_args(kind)
    if optional and low in ("none", "null"):
        return None
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"expected a number{' or none' if optional else ''}, got {text!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {text!r}")
    return number


def read_estimator_spec(spec: str) -> tuple[str, Estimator]:
    """Reads an estimator spec (see the module docstring).

    Returns:
      ``(name, estimator)``: the preset (or ``"rae"``) the spec starts from, and the estimator with the
      overrides applied (the name matters only where a preset means more than its options, e.g. the
      grouping a DrMAS preset is defined with).

    Raises:
      ValueError: an unknown preset or option, a malformed item, or a value not of the option's type or
        refused by the estimator (the message names the option and lists what is known).
      TypeError: ``spec`` is not a str.

    Examples:
      >>> name, options = read_estimator_spec("verl_grpo.norm,eps=1e-4")
      >>> name, options.scale, options.eps
      ('verl_grpo.norm', 'group', 0.0001)
      >>> read_estimator_spec("rae,decay=0.5")
      ('rae', RAEOptions(decay=0.5))
      >>> read_estimator_spec("ddof=1.5")
      Traceback (most recent call last):
      ...
      ValueError: estimator option ddof: expected an integer, got '1.5'
    """
    check_type(spec, str, "estimator spec")
    items = [s.strip() for s in spec.split(",") if s.strip()]
    name = "default"
    if items and "=" not in items[0]:
        name = items.pop(0)
    base: Estimator
    if name == RAE_SPEC_NAME:
        base = RAEOptions()
    elif name in ADVANTAGE_PRESETS:
        base = ADVANTAGE_PRESETS[name]
    else:
        known = [*ADVANTAGE_PRESETS, RAE_SPEC_NAME]
        raise ValueError(
            f"unknown estimator {name!r}{did_you_mean(name, known)}; known: {', '.join(sorted(known))}"
        )
    types = typing.get_type_hints(type(base))
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"estimator option {item!r} must look like key=value")
        if key not in types:
            raise ValueError(
                f"unknown estimator option {key!r}{did_you_mean(key, types)}; options: {', '.join(types)}"
            )
        try:
            overrides[key] = _coerce(types[key], key, value.strip())
        except ValueError as e:
            raise ValueError(f"estimator option {key}: {e}") from None
    return name, dataclasses.replace(base, **overrides)


def estimator_spec(estimator: Estimator) -> str:
    """The spec of ``estimator``: the name of the first preset equal to it (``rae`` for RAE, with
    ``decay`` when it is not the default), else ``default`` followed by the options that differ from it.
    :func:`read_estimator_spec` reads it back to an equal value.

    Examples:
      >>> estimator_spec(ADVANTAGE_PRESETS["tinker"]), estimator_spec(AdvantageOptions(eps=1e-4))
      ('tinker', 'default,eps=0.0001')
      >>> estimator_spec(RAEOptions()), estimator_spec(RAEOptions(decay=0.5))
      ('rae', 'rae,decay=0.5')
      >>> read_estimator_spec(estimator_spec(AdvantageOptions(min_std=None, ddof=0)))[1].ddof
      0
    """
    if isinstance(estimator, RAEOptions):
        return RAE_SPEC_NAME if estimator == RAEOptions() else f"{RAE_SPEC_NAME},decay={estimator.decay!r}"
    check_type(estimator, AdvantageOptions, "estimator")
    for name, preset in ADVANTAGE_PRESETS.items():
        if preset == estimator:
            return name
    default = ADVANTAGE_PRESETS["default"]
    parts = ["default"]
    for f in dataclasses.fields(estimator):
        value = getattr(estimator, f.name)
        if value != getattr(default, f.name):
            parts.append(f"{f.name}={_text(value)}")
    return ",".join(parts)


def _text(value: object) -> str:
    """A field's value as the spec writes it (``none``, ``true`` / ``false``, names bare, numbers as
    ``repr`` gives them, which reads back to the same float)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else repr(value)
