"""Provenance spans of token datums: which sampled sequence each input and target position came from.

Tinker 0.38's ``Datum.with_provenance`` annotates a datum with spans that tile its model input and its
target tokens in order: a *prompt* span claims positions ``[offset, offset + length)`` of the prompt of the
sampling request that produced a sequence, a *sampled* span the same range of that sequence's sampled
tokens. tinker-cookbook 0.6.1 builds them in ``trajectory_to_data(..., include_provenance=True)`` and its
``stable_reinforce`` loss refuses datums without them.

Per datum (REFERENCE §11), over its transitions in order, with ``L`` the running sequence's length before
the transition, ``δ`` its observation delta and ``k`` its action length:

* a transition with a sequence adds ``Prompt(seq, L, δ)`` when δ > 0, then ``Sampled(seq, 0, k)`` when
  k > 0 (spans are never merged);
* a transition without a sequence that adds tokens (δ + k > 0) leaves its whole datum without provenance;
* the target side is the list without its first position (the first span loses a token: dropped at length
  1, else ``offset + 1, length − 1``), the input side without its last (the last span: dropped at length 1,
  else ``length − 1``); a datum whose target side holds no sampled span has no provenance.

Shape suffixes: ``_M`` the transitions that datums are made of (in datum order), ``_Q`` spans, ``_D``
datums, ``_D1`` datum offsets into the spans.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["DatumSpans", "SpanTable"]

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class SpanTable(NamedTuple):
    """One side's spans of a datum batch; datum d's spans are ``offsets_D1[d]:offsets_D1[d+1]``, in order.

    Attributes:
        sequence_Q: [Q] int64, the sampled sequence each span names: an index into the caller's sequence ids.
        sampled_Q: [Q] bool, True for a sampled span (the sequence's sampled tokens), False for a prompt span.
        offset_Q: [Q] int64, the first position the span claims in its sequence's prompt or sampled tokens.
        length_Q: [Q] int64, positions claimed (≥ 1).
        offsets_D1: [D+1] int64.
    """

    sequence_Q: Int64Array
    sampled_Q: BoolArray
    offset_Q: Int64Array
    length_Q: Int64Array
    offsets_D1: Int64Array


class DatumSpans(NamedTuple):
    """The provenance of a datum batch (``build_datums(..., sequence_ids_N=...)``).

    A datum with provenance has spans on both sides, tiling its positions (the lengths of ``model_input``'s
    spans sum to its input length, those of ``loss_fn_inputs`` to its target length); one without has none.

    Attributes:
        has_provenance_D: [D] bool.
        model_input: spans of each datum's input tokens (``Datum.model_input_spans``).
        loss_fn_inputs: spans of each datum's target tokens (``Datum.loss_fn_input_spans``).
    """

    has_provenance_D: BoolArray
    model_input: SpanTable
    loss_fn_inputs: SpanTable


def datum_spans(
    datum_M: Int64Array,
    sequence_M: Int64Array,
    before_M: Int64Array,
    delta_M: Int64Array,
    action_M: Int64Array,
    num_datums: int,
) -> DatumSpans:
    """The spans of ``num_datums`` datums from the transitions they are made of (module docstring).

    Args:
        datum_M: [M] int64, the datum of each transition, non-decreasing in [0, D).
        sequence_M: [M] int64, its sampled sequence (index ≥ 0), or −1 for none.
        before_M: [M] int64, L: the running sequence's length before its observation delta.
        delta_M: [M] int64, δ: observation tokens it adds.
        action_M: [M] int64, k: action tokens it adds.
        num_datums: D.

    Returns:
        :class:`DatumSpans`.
    """
    m = datum_M.shape[0]
    stripped_D = np.bincount(datum_M[(sequence_M < 0) & (delta_M + action_M > 0)], minlength=num_datums) > 0
    # every transition's would-be spans, prompt then sampled, in datum order
    datum_Q = np.repeat(datum_M, 2)
    sequence_Q = np.repeat(sequence_M, 2)
    sampled_Q = np.tile(np.array([False, True]), m)
    offset_Q = np.stack([before_M, np.zeros(m, np.int64)], axis=1).reshape(-1)
    length_Q = np.stack([delta_M, action_M], axis=1).reshape(-1)
    real = (sequence_Q >= 0) & (length_Q > 0) & ~stripped_D[datum_Q]
    datum_Q, sequence_Q, sampled_Q = datum_Q[real], sequence_Q[real], sampled_Q[real]
    offset_Q, length_Q = offset_Q[real], length_Q[real]
    count_D = np.bincount(datum_Q, minlength=num_datums)
    first_Q = np.zeros(datum_Q.shape[0], np.bool_)
    first_Q[np.cumsum(count_D)[count_D > 0] - count_D[count_D > 0]] = True
    last_Q = np.zeros(datum_Q.shape[0], np.bool_)
    last_Q[np.cumsum(count_D)[count_D > 0] - 1] = True

    # the target side: the datum's first position dropped
    loss_keep = ~(first_Q & (length_Q == 1))
    loss_offset = offset_Q + first_Q
    loss_length = length_Q - first_Q
    sampled_loss_D = np.bincount(datum_Q[loss_keep & sampled_Q], minlength=num_datums) > 0
    has_D = sampled_loss_D & ~stripped_D
    # the input side: the datum's last position dropped
    input_keep = ~(last_Q & (length_Q == 1))
    input_length = length_Q - last_Q

    ours = has_D[datum_Q]
    return DatumSpans(
        has_provenance_D=has_D,
        model_input=_table(
            ours & input_keep, datum_Q, sequence_Q, sampled_Q, offset_Q, input_length, num_datums
        ),
        loss_fn_inputs=_table(
            ours & loss_keep, datum_Q, sequence_Q, sampled_Q, loss_offset, loss_length, num_datums
        ),
    )


def _table(
    keep: BoolArray,
    datum_Q: Int64Array,
    sequence_Q: Int64Array,
    sampled_Q: BoolArray,
    offset_Q: Int64Array,
    length_Q: Int64Array,
    num_datums: int,
) -> SpanTable:
    offsets_D1 = np.zeros(num_datums + 1, np.int64)
    np.cumsum(np.bincount(datum_Q[keep], minlength=num_datums), out=offsets_D1[1:])
    return SpanTable(
        sequence_Q[keep].astype(np.int64),
        sampled_Q[keep],
        offset_Q[keep].astype(np.int64),
        length_Q[keep].astype(np.int64),
        offsets_D1,
    )
