"""Conversion between Tinker SDK types and kernel datums: samples → trajectories → ``tinker.Datum``.

The kernel is token-only. Observations with non-text chunks (images) are handled here as the reference
does: a chunk is opaque, compared by value, and occupies ``chunk.length`` positions. Each distinct chunk
(by value) becomes a placeholder id ``-(k + 1)`` repeated over its length, so prefix merging in the
kernel compares images by value; on the way back a run of placeholders becomes the chunk again in the
model input and its target positions become token 0.

Every object handed to the SDK works in every SDK call that takes it: a model input's tokens are a
read-only :class:`~adapters.tinker.tokens.TokenArray` (an int64 array that reads as a sequence of Python
ints) that the SDK sends, dumps, compares and appends to exactly as it does the ``int`` list of
``ModelInput.from_ints``; where the installed pydantic cannot serialise it so (checked once per process
on a probe, :func:`~adapters.tinker.tokens.tokens_supported`), they are ``int`` lists. Datums are the
SDK's own ``tinker.Datum``. Tokens and loss inputs (``target_tokens`` int64, ``logprobs`` / ``advantages``
float32: the wire dtypes) are views of the packed batch's own arrays, which the conversion then makes
read-only: the SDK reads them on its own thread after ``forward_backward()`` returns, so a later write
through the batch raises instead of reaching the wire, and no second copy of the batch is made (``copy=
True`` converts a private copy and leaves the batch writeable). ``mask`` stays on the client unless asked
for (observation positions already carry advantage exactly 0). Nothing here touches the network.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

from adapters.tinker.tokens import model_input_of
from kernel import DatumBatch, DatumResult, DatumSpans, SpanTable, Trajectories, build_datums
from kernel.checks import check_each, check_type, checked_datum_batch

__all__ = [
    "ChunkedTrajectories",
    "build_tinker_datums",
    "datums_to_tinker",
    "trajectories_from_samples",
    "transitions_from_response",
    "without_mask",
]

Transition = tuple[tinker.ModelInput, types.SampledSequence]
_INT32_MAX = 2**31 - 1


class ChunkedTrajectories(NamedTuple):
    """Kernel trajectories plus the non-text chunks their placeholder tokens stand for.

    Attributes:
        trajectories: the packed batch; a non-text chunk k appears as ``chunk.length`` tokens ``-(k + 1)``.
        chunks: the distinct non-text chunks (images), by value, in order of first appearance.
    """

    trajectories: Trajectories
    chunks: tuple[Any, ...]


def transitions_from_response(prompt: tinker.ModelInput, response: types.SampleResponse) -> list[Transition]:
    """One ``(prompt, sequence)`` transition per sampled sequence of a response.

    Examples:
        >>> seq = types.SampledSequence("stop", "s", tokens_np=np.array([3], np.int32))
        >>> prompt = tinker.ModelInput.from_ints([1, 2])
        >>> len(transitions_from_response(prompt, types.SampleResponse([seq, seq])))
        2
    """
    check_type(prompt, tinker.ModelInput, "prompt")
    check_type(response, types.SampleResponse, "response")
    return [(prompt, seq) for seq in response.sequences]


def trajectories_from_samples(
    samples_B: Sequence[Sequence[Transition]], advantages_B: npt.ArrayLike
) -> ChunkedTrajectories:
    """Packs sampled transitions into kernel trajectories (observation = the prompt, action = the sample).

    Args:
        samples_B: per trajectory, its transitions ``(prompt ModelInput, SampledSequence)`` in order.
            Sequences use ``tokens_np`` / ``logprobs_np`` when set, else the lists; no logprobs → missing.
        advantages_B: [B] float, one advantage per trajectory.

    Returns:
        ``ChunkedTrajectories``; text-only prompts give no chunk.

    Raises:
        ValueError: if a non-text chunk has no length (an image without ``expected_tokens``) or a length
            below 1, a prompt or sampled token id is negative (negative ids stand for chunks here), or
            the advantages do not match the trajectories.
        TypeError: a transition that is not a ``(ModelInput, SampledSequence)`` pair, or sampled tokens
            that are not integers.

    Examples:
        >>> seq = types.SampledSequence(
        ...     "stop", "s", tokens_np=np.array([3], np.int32), logprobs_np=np.array([-0.5], np.float32)
        ... )
        >>> c = trajectories_from_samples([[(tinker.ModelInput.from_ints([1, 2]), seq)]], [1.0])
        >>> c.trajectories.ob_tokens.tolist(), c.trajectories.ac_tokens.tolist(), c.chunks
        ([1, 2], [3], ())
    """
    adv = np.asarray(advantages_B, dtype=np.float64)
    if adv.shape != (len(samples_B),):
        raise ValueError(f"advantages_B must have shape ({len(samples_B)},), got {adv.shape}")
    chunk_ids: dict[Any, int] = {}
    chunks: list[Any] = []
    obs: list[npt.NDArray[np.int64]] = []
    acs: list[npt.NDArray[Any]] = []
    lps: list[npt.NDArray[Any]] = []
    has: list[bool] = []
    for b, traj in enumerate(samples_B):
        for k, transition in enumerate(traj):
            where = f"samples_B[{b}][{k}]"
            if not (isinstance(transition, tuple | list) and len(transition) == 2):
                raise TypeError(
                    f"{where} must be a (prompt ModelInput, SampledSequence) pair, got {transition!r:.80}"
                )
            prompt, seq = transition
            check_type(prompt, tinker.ModelInput, f"{where} prompt")
            check_type(seq, types.SampledSequence, f"{where} sequence")
            obs.append(_prompt_tokens(prompt, chunk_ids, chunks, where))
            acs.append(_sampled_ids(seq, where))
            logprobs = seq.logprobs_np if seq.logprobs_np is not None else seq.logprobs
            has.append(logprobs is not None)
            lps.append(np.asarray(() if logprobs is None else logprobs, dtype=np.float64))
    counts = [len(traj) for traj in samples_B]
    trajectories = pack_trajectories(obs, acs, lps, has, counts, adv)
    return ChunkedTrajectories(trajectories, tuple(chunks))


def pack_trajectories(
    obs: Sequence[npt.NDArray[Any]],
    acs: Sequence[npt.NDArray[Any]],
    lps: Sequence[npt.NDArray[Any]],
    has_logprobs: Sequence[bool],
    counts_B: Sequence[int],
    advantages_B: npt.NDArray[np.float64],
) -> Trajectories:
    """:class:`kernel.Trajectories` of transitions given as per-transition arrays (observation, action and
    logprob tokens), the first ``counts_B[0]`` of them trajectory 0, the next ``counts_B[1]`` trajectory
    1, and so on: the arrays are concatenated, not converted to Python lists. Ids keep their common
    integer dtype (int32 ones are half the bytes to copy; ``build_datums`` writes the datums in int64)."""
    return Trajectories(
        ob_tokens=_concat(obs, None),
        ob_offsets_N1=_offsets(obs),
        ac_tokens=_concat(acs, None),
        ac_offsets_N1=_offsets(acs),
        logprobs=_concat(lps, np.float64),
        logprob_offsets_N1=_offsets(lps),
        has_logprobs_N=np.asarray(has_logprobs, dtype=np.bool_),
        traj_ids_N=np.repeat(np.arange(len(counts_B), dtype=np.int64), counts_B),
        advantages_B=advantages_B,
    )


def datums_to_tinker(
    batch: DatumBatch,
    *,
    chunks: Sequence[Any] = (),
    include_mask: bool = False,
    copy: bool = False,
    spans: DatumSpans | None = None,
    sequence_ids: Sequence[str] = (),
) -> list[tinker.Datum]:
    """``tinker.Datum`` per kernel datum: model input, and target_tokens / logprobs / advantages.

    Each datum's ``model_input`` equals ``ModelInput.from_ints(tokens)`` and can go to any SDK call (a
    sampler's ``sample`` / ``compute_logprobs`` included, as tinker-cookbook's KL helpers do); its
    tokens are a read-only ``TokenArray`` (see the module docstring). Tokens and loss inputs are views of
    the batch's arrays where these are in the wire dtypes (int64, float32) and writeable, and those arrays
    of ``batch`` become read-only here: a later write through ``batch`` raises instead of racing with the
    SDK's sender thread. An array in another dtype is converted (the new array is the datums' alone); the
    mask is converted to float32. What this saves: the datums hold no second copy of the batch; with
    ``build_datums`` of 640 trajectories × 4 turns (5.1 M positions) the two calls peak at 128 MiB against
    245 MiB with a private copy, where tinker-cookbook's ``trajectory_to_data`` peaks at 146 MiB
    (``python -m benchmarks datums``).

    Args:
        batch: kernel datums; negative tokens are placeholders of ``chunks``.
        chunks: the chunks of :func:`trajectories_from_samples` (needed only when there are placeholders).
        include_mask: also put ``mask`` (float32, 1 on action positions) in ``loss_fn_inputs``, as
            tinker-cookbook's ``trajectory_to_data`` does; its KL helpers (``incorporate_kl_penalty``,
            ``compute_post_kl``) read it. The mask is client-side data: the SDK does not strip it (its
            request encoder sends every ``loss_fn_inputs`` key), and tinker-cookbook removes it before
            ``forward_backward``; do the same with :func:`without_mask`.
        copy: convert a private copy of the tokens and loss inputs and leave ``batch`` writeable (the
            batch's size again in memory), for a caller that writes to the batch after the datums go.
            Writes through another view of the batch's memory, made before the call, are not stopped by
            the read-only flags: pass ``copy=True`` for such a batch.
        spans: the batch's provenance (``build_datums(..., sequence_ids_N=...).spans``): each datum that
            has it gets ``model_input_spans`` and ``loss_fn_input_spans`` (the SDK's span types), as
            ``Datum.with_provenance`` would set them; the others get neither.
        sequence_ids: the SDK's sequence ids that the spans' ``sequence_Q`` index.

    Returns:
        One ``tinker.Datum`` per datum, in order.

    Raises:
        ValueError: if a token id does not fit int32, a placeholder has no chunk, or a datum's sequence
            ends with a non-text chunk (the reference requires text last).

    Examples:
        >>> from kernel import build_datums, trajectories_from_lists
        >>> r = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0]))
        >>> (d,) = datums_to_tinker(r.datums)
        >>> d.model_input.to_ints(), d.loss_fn_inputs["target_tokens"].tolist(), sorted(d.loss_fn_inputs)
        ([1, 2], [2, 3], ['advantages', 'logprobs', 'target_tokens'])
        >>> d.model_input == tinker.ModelInput.from_ints([1, 2])
        True
        >>> r.datums.advantages.flags.writeable  # lent to the datums: read-only from now on
        False
        >>> datums_to_tinker(r.datums, include_mask=True)[0].loss_fn_inputs["mask"].tolist()
        [0.0, 1.0]
    """
    check_type(batch, DatumBatch, "batch")
    batch = checked_datum_batch(batch)
    for name in ("input_tokens", "target_tokens"):
        if getattr(batch, name).dtype.kind not in "iu":
            raise TypeError(f"batch.{name} must hold integer ids, got dtype {getattr(batch, name).dtype}")
    low = _lowest_id(batch.input_tokens, batch.target_tokens)
    if low < -len(chunks):
        raise ValueError(f"negative token ids are chunk placeholders; only {len(chunks)} chunks were given")
    bounds = batch.offsets_D1.tolist()
    provenance = _provenance(spans, sequence_ids, len(bounds) - 1)
    inputs, lent = _loss_inputs(batch, include_mask=include_mask, placeholders=low < 0, copy=copy)
    ids = np.array(batch.input_tokens, dtype=np.int64) if copy else batch.input_tokens
    out: list[tinker.Datum] = []
    for d, (s, e) in enumerate(itertools.pairwise(bounds)):
        if low < 0:
            if batch.target_tokens[e - 1] < 0:
                raise ValueError(f"datum {d} ends with a non-text chunk; the reference requires text last")
            model_input = _chunked_input(ids[s:e], chunks)
        else:
            model_input = model_input_of(ids[s:e])
        out.append(_public_datum(model_input, {k: v[s:e] for k, v in inputs.items()}, provenance[d]))
    for array in [*lent, ids] if not copy else []:  # lent: read-only once the views above are made
        array.flags.writeable = False
    return out


Spans = list[types.PromptProvenanceSpan | types.SampledProvenanceSpan]


def _provenance(
    spans: DatumSpans | None, sequence_ids: Sequence[str], num_datums: int
) -> list[tuple[Spans, Spans] | None]:
    """Per datum, its (model input, loss input) spans as SDK objects, or None: one pass over the spans.

    The SDK's span types check their values (an empty sequence id is a ValueError there)."""
    if spans is None:
        return [None] * num_datums
    check_type(spans, DatumSpans, "spans")
    if spans.has_provenance_D.shape[0] != num_datums:
        raise ValueError(
            f"spans must describe the batch's {num_datums} datums, got {spans.has_provenance_D.shape[0]}"
        )
    ids = list(sequence_ids)
    for table in (spans.model_input, spans.loss_fn_inputs):
        named = table.sequence_Q
        if named.size and not 0 <= int(named.min()) <= int(named.max()) < len(ids):
            raise ValueError(
                f"spans name sequences in [{named.min()}, {named.max()}]; {len(ids)} ids were given"
            )
    sides = [_sdk_spans(table, ids) for table in (spans.model_input, spans.loss_fn_inputs)]
    has = spans.has_provenance_D.tolist()
    return [(sides[0][d], sides[1][d]) if has[d] else None for d in range(num_datums)]


def _sdk_spans(table: SpanTable, ids: list[str]) -> list[Spans]:
    kinds = (types.PromptProvenanceSpan, types.SampledProvenanceSpan)
    made = [
        kinds[sampled](sequence_id=ids[q], offset=offset, length=length)
        for q, sampled, offset, length in zip(
            table.sequence_Q.tolist(),
            table.sampled_Q.tolist(),
            table.offset_Q.tolist(),
            table.length_Q.tolist(),
            strict=True,
        )
    ]
    bounds = table.offsets_D1.tolist()
    return [made[a:b] for a, b in itertools.pairwise(bounds)]


def without_mask(data: Sequence[tinker.Datum]) -> list[tinker.Datum]:
    """The datums without the client-side ``mask`` loss input, ready for ``forward_backward``.

    Examples:
        >>> from kernel import build_datums, trajectories_from_lists
        >>> r = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0]))
        >>> sorted(without_mask(datums_to_tinker(r.datums, include_mask=True))[0].loss_fn_inputs)
        ['advantages', 'logprobs', 'target_tokens']
    """
    if isinstance(data, tinker.Datum):
        raise TypeError("data must be a sequence of tinker.Datum, got one Datum (wrap it in a list)")
    data = list(data)
    check_each(data, tinker.Datum, "data")
    # replace() keeps every other field (the provenance spans included); the inputs dict is a new one
    return [
        dataclasses.replace(d, loss_fn_inputs={k: v for k, v in d.loss_fn_inputs.items() if k != "mask"})
        for d in data
    ]


def build_tinker_datums(
    samples_B: Sequence[Sequence[Transition]],
    advantages_B: npt.ArrayLike,
    *,
    include_mask: bool = False,
    **options: Any,
) -> tuple[list[tinker.Datum], DatumResult]:
    """Samples to ``tinker.Datum`` in one call: :func:`trajectories_from_samples`, ``build_datums``, then
    :func:`datums_to_tinker` (``include_mask`` goes there). ``options`` go to ``kernel.build_datums``
    (mode, where, parse_failed_N, drop_zero_advantage). The loss inputs share their arrays with
    ``result.datums`` (no second copy), which are read-only from then on.

    Examples:
        >>> seq = types.SampledSequence(
        ...     "stop", "s", tokens_np=np.array([3], np.int32), logprobs_np=np.array([-0.5], np.float32)
        ... )
        >>> data, result = build_tinker_datums([[(tinker.ModelInput.from_ints([1, 2]), seq)]], [1.0])
        >>> data[0].loss_fn_inputs["advantages"].tolist(), result.report.datums
        ([0.0, 1.0], 1)
    """
    chunked = trajectories_from_samples(samples_B, advantages_B)
    result = build_datums(chunked.trajectories, **options)
    data = datums_to_tinker(result.datums, chunks=chunked.chunks, include_mask=include_mask)
    return data, result


# ---------------------------------------------------------------------------------------------------------


def _chunk_key(chunk: Any) -> Any:
    """A hashable key equal for chunks equal by value (pydantic compares field values)."""
    return (type(chunk), tuple(chunk.model_dump().items()))


def _prompt_tokens(
    prompt: tinker.ModelInput, chunk_ids: dict[Any, int], chunks: list[Any], where: str = "prompt"
) -> npt.NDArray[np.int64]:
    """The prompt's ids, each non-text chunk as ``length`` placeholders ``-(chunk index + 1)``."""
    parts: list[Any] = []
    for j, chunk in enumerate(prompt.chunks):
        if isinstance(chunk, types.EncodedTextChunk):
            ids = np.asarray(chunk.tokens, dtype=np.int64)
            if ids.size and int(ids.min()) < 0:  # would read as a placeholder: another chunk
                raise ValueError(f"{where} prompt chunk {j} holds a negative token id {int(ids.min())}")
            parts.append(ids)
            continue
        key = _chunk_key(chunk)
        length = int(chunk.length)  # an image without expected_tokens raises ValueError, as in the reference
        if length < 1:  # no placeholder would be left to rebuild it from: the chunk would vanish
            raise ValueError(
                f"{where} prompt chunk {j} ({type(chunk).__name__}) has length {length}; expected >= 1"
            )
        if key not in chunk_ids:
            chunk_ids[key] = len(chunks)
            chunks.append(chunk)
        parts.append(np.full(length, -(chunk_ids[key] + 1), dtype=np.int64))
    return _concat(parts, np.int64)


def _sampled_ids(seq: types.SampledSequence, where: str) -> npt.NDArray[np.int64]:
    """The sampled token ids as int64, checked: integers (3.7 or "4" are not ids) and not negative."""
    raw = seq.tokens_np if seq.tokens_np is not None else seq.tokens
    values = np.asarray(raw)
    if values.size and values.dtype.kind not in "iu":
        raise TypeError(f"{where} sequence tokens must be integers, got dtype {values.dtype}")
    ids = values.astype(np.int64, copy=False)
    if ids.size and int(ids.min()) < 0:
        raise ValueError(f"{where} sequence holds a negative token id {int(ids.min())}")
    return ids


def _concat(parts: Sequence[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
    """The parts end to end, in ``dtype`` (None: their common dtype; int64 when there are none)."""
    if not parts:
        return np.zeros(0, dtype or np.int64)
    return np.concatenate(parts, dtype=dtype)


def _offsets(parts: Sequence[npt.NDArray[Any]]) -> npt.NDArray[np.int64]:
    out = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p.shape[0] for p in parts], out=out[1:])
    return out


def _lowest_id(*columns: npt.NDArray[Any]) -> int:
    """The lowest token id in ``columns`` (0 when none is negative, or all are empty), once every id is
    checked to fit int32.

    Raises:
        ValueError: an id above int32's maximum.
    """
    filled = [c for c in columns if c.size]
    if filled and max(int(c.max()) for c in filled) > _INT32_MAX:
        raise ValueError("token ids must fit int32 (Tinker sends them as int32)")
    return min([0, *(int(c.min()) for c in filled)])


def _loss_inputs(
    batch: DatumBatch, *, include_mask: bool, placeholders: bool, copy: bool
) -> tuple[dict[str, npt.NDArray[Any]], list[npt.NDArray[Any]]]:
    """The loss inputs in the wire dtypes, writeable (a chunk placeholder's target becomes 0), and which
    of the batch's own arrays they are (lent: not copied, to be made read-only once the datums view them).

    Copies when ``copy`` is True or an array is not writeable; converts one not in its wire dtype.
    """
    target = np.maximum(batch.target_tokens, 0) if placeholders else batch.target_tokens
    columns = [("target_tokens", target, np.int64), ("logprobs", batch.logprobs, np.float32)]
    columns.append(("advantages", batch.advantages, np.float32))
    if include_mask:
        columns.append(("mask", batch.mask, np.float32))
    inputs: dict[str, npt.NDArray[Any]] = {}
    lent: list[npt.NDArray[Any]] = []
    for key, values, dtype in columns:
        if copy or values.dtype != dtype or not values.flags.writeable:
            inputs[key] = np.array(values, dtype=dtype)
            continue
        inputs[key] = values
        if values is getattr(batch, key):  # not np.maximum's new array of targets
            lent.append(values)
    return inputs, lent


def _public_datum(
    model_input: tinker.ModelInput,
    inputs: dict[str, npt.NDArray[Any]],
    provenance: tuple[Spans, Spans] | None = None,
) -> tinker.Datum:
    """The SDK's own constructor (it wraps each array with ``TensorData.from_numpy``)."""
    model_spans, loss_spans = provenance or (None, None)
    return tinker.Datum(
        model_input=model_input,
        loss_fn_inputs=inputs,  # type: ignore[arg-type]
        model_input_spans=model_spans,
        loss_fn_input_spans=loss_spans,
    )


def _chunked_input(tokens: npt.NDArray[np.integer[Any]], chunks: Sequence[Any]) -> tinker.ModelInput:
    """Text runs become text chunks; a run of placeholder k becomes chunk k, once per ``chunk.length``."""
    is_chunk = tokens < 0
    cuts = np.flatnonzero(np.diff(tokens) != 0) + 1
    cuts = cuts[is_chunk[cuts] | is_chunk[cuts - 1]]  # split only where a chunk run starts or ends
    out: list[Any] = []
    for run in np.split(tokens, cuts):
        if run.size == 0:
            continue
        if run[0] >= 0:
            out.append(types.EncodedTextChunk(tokens=run.tolist()))
            continue
        chunk = chunks[-int(run[0]) - 1]
        repeats, partial = divmod(run.size, int(chunk.length))
        if partial:
            raise ValueError("a datum's input ends inside a non-text chunk; the reference requires text last")
        out.extend([chunk] * repeats)
    return tinker.ModelInput(chunks=out)
