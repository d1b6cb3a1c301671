"""What a service checks of a batch's provenance spans before a loss that needs them (tinker 0.38).

``stable_reinforce`` trains on information its service recorded when the tokens were sampled, so every
datum must name its sampled sequences (``Datum.with_provenance``) and each sequence it names must have
been sampled, in the session that trains, by a sampler made with ``record_stability_info=True``. Tinker
refuses anything else as a user error; the in-repo fake, the local service and ``debate-kernel serve``
refuse it with the reasons these functions give. The loss also takes advantages on sampled tokens only
(:func:`prompt_advantage_refusal`).
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Final

import numpy as np
from tinker import types

__all__ = ["SPAN_LOSSES", "prompt_advantage_refusal", "provenance_refusal", "span_ids", "unrecorded_refusal"]

SPAN_LOSSES: Final = frozenset({"stable_reinforce"})
"""Losses whose every datum must carry provenance spans (tinker 0.38, cookbook 0.6.1)."""


def provenance_refusal(data: Sequence[types.Datum], loss_fn: str) -> str | None:
    """Why a service refuses ``data`` for ``loss_fn`` for want of provenance spans (None: it does not).

    Examples:
        >>> import numpy as np, tinker
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> provenance_refusal([d], "ppo") is None
        True
        >>> provenance_refusal([d], "stable_reinforce")
        'stable_reinforce needs provenance spans on every datum (Datum.with_provenance); data[0] has none'
    """
    if loss_fn not in SPAN_LOSSES:
        return None
    for d, datum in enumerate(data):
        if not datum.loss_fn_input_spans:
            return (
                f"{loss_fn} needs provenance spans on every datum (Datum.with_provenance); data[{d}] has none"
            )
    return None


def span_ids(data: Sequence[types.Datum]) -> list[str]:
    """The sequence ids the datums' spans name, each once, in order of appearance.

    Examples:
        >>> import numpy as np, tinker
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> d = d.with_provenance(
        ...     model_input=[types.PromptProvenanceSpan(sequence_id="a", length=2)],
        ...     loss_fn_inputs=[types.PromptProvenanceSpan(sequence_id="a", offset=1, length=1),
        ...                     types.SampledProvenanceSpan(sequence_id="b", length=1)])
        >>> span_ids([d])
        ['a', 'b']
    """
    seen: dict[str, None] = {}
    for datum in data:
        for span in (*(datum.model_input_spans or ()), *(datum.loss_fn_input_spans or ())):
            seen.setdefault(span.sequence_id, None)
    return list(seen)


def unrecorded_refusal(
    data: Sequence[types.Datum], loss_fn: str, recorded: Container[str], holder: str = "this service"
) -> str | None:
    """Why ``data`` cannot train ``loss_fn`` on ``holder``: the first datum whose spans name a sequence
    not in ``recorded`` (the ids its samplers made with ``record_stability_info=True`` returned); None
    when every named sequence is there.

    Examples:
        >>> import numpy as np, tinker
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> d = d.with_provenance(
        ...     model_input=[types.PromptProvenanceSpan(sequence_id="a", length=2)],
        ...     loss_fn_inputs=[types.PromptProvenanceSpan(sequence_id="a", offset=1, length=1),
        ...                     types.SampledProvenanceSpan(sequence_id="a", length=1)])
        >>> unrecorded_refusal([d], "stable_reinforce", {"a"}) is None
        True
        >>> print(unrecorded_refusal([d], "stable_reinforce", set(), "this server"))
        stable_reinforce: data[0] names sequence 'a', of which this server holds no stability record:
        sample it with record_stability_info=True on this server
    """
    for d, datum in enumerate(data):
        for span in (*(datum.model_input_spans or ()), *(datum.loss_fn_input_spans or ())):
            if span.sequence_id not in recorded:
                return (
                    f"{loss_fn}: data[{d}] names sequence {span.sequence_id!r}, of which {holder} holds no "
                    f"stability record: sample it with record_stability_info=True on {holder}"
                )
    return None


def prompt_advantage_refusal(data: Sequence[types.Datum], loss_fn: str) -> str | None:
    """Why a service refuses ``data`` for ``loss_fn`` for a nonzero advantage on a prompt token: the first
    position that a datum's ``loss_fn_input_spans`` give to a prompt span and its ``advantages`` to a
    nonzero value (None: there is none, or ``loss_fn`` needs no spans). tinker-cookbook 0.6.1
    (``rl/train.py``, where it refuses ``kl_discount_factor > 0`` with this loss): "stable_reinforce only
    accepts nonzero advantages on sampled tokens". A datum without spans or advantages is passed over
    (:func:`provenance_refusal` and the loss's input check name those).

    Examples:
        >>> import tinker
        >>> def datum(advantages):
        ...     d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2, 3]),
        ...                     loss_fn_inputs={"target_tokens": [2, 3, 4], "advantages": advantages})
        ...     return d.with_provenance(
        ...         model_input=[types.PromptProvenanceSpan(sequence_id="a", length=2),
        ...                      types.SampledProvenanceSpan(sequence_id="a", length=1)],
        ...         loss_fn_inputs=[types.PromptProvenanceSpan(sequence_id="a", offset=1, length=1),
        ...                         types.SampledProvenanceSpan(sequence_id="a", length=2)])
        >>> prompt_advantage_refusal([datum([0.0, 1.0, 1.0])], "stable_reinforce") is None
        True
        >>> prompt_advantage_refusal([datum([0.5, 1.0, 1.0])], "ppo") is None
        True
        >>> print(prompt_advantage_refusal([datum([0, 1, 1]), datum([0.5, 1, 1])], "stable_reinforce"))
        stable_reinforce takes advantages on sampled tokens only: data[1] has advantage 0.5 at position 0,
        a prompt token by its loss_fn_input_spans
    """
    if loss_fn not in SPAN_LOSSES:
        return None
    for d, datum in enumerate(data):
        advantages = datum.loss_fn_inputs.get("advantages")
        if not datum.loss_fn_input_spans or advantages is None:
            continue
        a_T = np.asarray(advantages.to_numpy()).reshape(-1)
        start = 0
        for span in datum.loss_fn_input_spans:
            stop = start + span.length
            if isinstance(span, types.PromptProvenanceSpan) and np.any(a_T[start:stop] != 0):
                t = start + int(np.flatnonzero(a_T[start:stop])[0])
                return (
                    f"{loss_fn} takes advantages on sampled tokens only: data[{d}] has advantage "
                    f"{float(a_T[t]):g} at position {t}, a prompt token by its loss_fn_input_spans"
                )
            start = stop
    return None
