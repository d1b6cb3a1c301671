"""The protobuf bodies of ``debate-kernel serve``: the server's half of the SDK's converters.

The ``tinker`` SDK ships one direction of each protobuf conversion: it encodes a forward/backward
request (:func:`tinker.proto.request_conv.forward_backward_request_to_proto`) and decodes a
``SampleResponse`` or ``ForwardBackwardOutput``
(:func:`tinker.proto.response_conv.deserialize_proto_response`). A server needs the other direction.
These functions are that direction, written with the SDK's generated message classes
(:mod:`tinker.proto.tinker_public_pb2`) and its own tensor decoder, so every byte on the wire is laid
out by protobuf itself; the tests check each one against the SDK's converter (a round trip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from tinker import types
from tinker.proto import tinker_public_pb2 as pb
from tinker.proto.response_conv import _tensor_data_from_proto

__all__ = [
    "PROTO_CONTENT_TYPE",
    "encode_forward_backward_output",
    "encode_sample_response",
    "parse_forward_backward_request",
]

PROTO_CONTENT_TYPE = "application/x-protobuf"
"""The content type of protobuf bodies, both ways."""

_STOP_REASONS = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}
_DTYPES = {"float32": (pb.DTYPE_FLOAT32, np.float32), "int64": (pb.DTYPE_INT64, np.int64)}


def _chunk(msg: pb.Chunk) -> types.EncodedTextChunk:
    """An ``EncodedTextChunk`` from its message (tokens are int32 bytes).

    Raises:
        ValueError: for image and audio chunks, which the local models cannot read.
    """
    kind = msg.WhichOneof("chunk")
    if kind != "encoded_text":
        raise ValueError(f"model_input chunks must be token chunks (encoded_text), got {kind!r}")
    return types.EncodedTextChunk(tokens=np.frombuffer(msg.encoded_text.tokens, np.int32).tolist())


def _span(msg: pb.ProvenanceSpan) -> types.PromptProvenanceSpan | types.SampledProvenanceSpan:
    """A provenance span from its message (prompt or sampled tokens of a sequence)."""
    kind = msg.WhichOneof("span")
    if kind is None:
        raise ValueError("a provenance span must be prompt_tokens or sampled_tokens, got neither")
    inner = getattr(msg, kind)
    made = types.PromptProvenanceSpan if kind == "prompt_tokens" else types.SampledProvenanceSpan
    return made(sequence_id=inner.sequence_id, offset=inner.offset, length=inner.length)


def _datum(msg: pb.Datum) -> types.Datum:
    """A ``Datum`` from its message, with its provenance spans where it has them (``stable_reinforce``)."""
    return types.Datum(
        model_input=types.ModelInput(chunks=[_chunk(c) for c in msg.model_input]),
        loss_fn_inputs={k: _tensor_data_from_proto(v) for k, v in msg.loss_fn_inputs.items()},
        model_input_spans=[_span(x) for x in msg.model_input_spans] or None,
        loss_fn_input_spans=[_span(x) for x in msg.loss_fn_input_spans] or None,
    )


def _loss_fn_config(msg: pb.ForwardBackwardRequest) -> dict[str, float | str] | None:
    """The loss options: the typed ``loss_fn_config_v2`` map when sent, else the legacy float map."""
    if msg.loss_fn_config_v2:
        return {
            k: (v.text if v.WhichOneof("value") == "text" else v.number)
            for k, v in msg.loss_fn_config_v2.items()
        }
    if msg.loss_fn_config:
        return {k: float(v) for k, v in msg.loss_fn_config.items()}
    return None


def parse_forward_backward_request(body: bytes) -> tuple[types.ForwardBackwardRequest, bool]:
    """Decodes a ``/api/v1/forward_backward`` body (the inverse of the SDK's
    ``forward_backward_request_to_proto``).

    Args:
        body: the serialized ``ForwardBackwardRequest`` message (not compressed).

    Returns:
        The SDK request and its ``forward_only`` flag.

    Raises:
        ValueError: if the body is not a valid message or holds non-token chunks.
    """
    msg = pb.ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # protobuf raises its own DecodeError
        raise ValueError(f"the body is not a ForwardBackwardRequest protobuf message: {exc}") from None
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=[_datum(d) for d in msg.data],
            loss_fn=msg.loss_fn,  # type: ignore[arg-type]  # checked by the core against the losses it has
            loss_fn_config=_loss_fn_config(msg),
        ),
        model_id=msg.model_id,
        seq_id=msg.seq_id,
    )
    return request, msg.forward_only


def _batched(arrays: Sequence[np.ndarray], dtype: str) -> pb.BatchedTensor:
    """One field of every datum as a ``BatchedTensor``: the flat arrays back to back, with byte offsets."""
    code, np_dtype = _DTYPES[dtype]
    flat = [np.ascontiguousarray(a, dtype=np_dtype).ravel() for a in arrays]
    offsets = np.concatenate([[0], np.cumsum([a.nbytes for a in flat])]).astype(np.int64)
    data = b"".join(a.tobytes() for a in flat)
    return pb.BatchedTensor(data=data, offsets=offsets.tobytes(), dtype=code)


def _record(outputs: Sequence[Mapping[str, types.TensorData]]) -> pb.ArrayRecord:
    """Every datum's outputs as one ``ArrayRecord`` (1-D fields, the local service's only kind)."""
    names = list(outputs[0]) if outputs else []
    fields = {name: _batched([o[name].to_numpy() for o in outputs], outputs[0][name].dtype) for name in names}
    return pb.ArrayRecord(fields=fields, num_datums=len(outputs))


def encode_forward_backward_output(output: types.ForwardBackwardOutput) -> bytes:
    """Serializes a ``ForwardBackwardOutput`` (the inverse of the SDK's
    ``deserialize_forward_backward_output``).

    Args:
        output: per-datum 1-D tensors (``logprobs``, ``elementwise_loss``) and metrics.

    Returns:
        The ``ForwardBackwardOutput`` message's bytes.
    """
    msg = pb.ForwardBackwardOutput(
        loss_fn_output_type=output.loss_fn_output_type,
        loss_fn_outputs=[_record(output.loss_fn_outputs)],
        metrics={k: float(v) for k, v in output.metrics.items()},
    )
    data: bytes = msg.SerializeToString()
    return data


def _sequence(seq: types.SampledSequence) -> pb.SampledSequence:
    tokens = np.asarray(seq.tokens_np if seq.tokens_np is not None else seq.tokens, np.int32)
    msg = pb.SampledSequence(stop_reason=_STOP_REASONS[seq.stop_reason], tokens=tokens.tobytes())
    if seq.logprobs_np is not None:
        msg.logprobs = np.asarray(seq.logprobs_np, np.float32).tobytes()
    return msg


def encode_sample_response(response: types.SampleResponse) -> bytes:
    """Serializes a ``SampleResponse`` (the inverse of the SDK's ``deserialize_sample_response``).

    Args:
        response: the sequences and, when asked for, the prompt logprobs (NaN where there is none).

    Returns:
        The ``SampleResponse`` message's bytes.
    """
    msg = pb.SampleResponse(sequences=[_sequence(s) for s in response.sequences])
    if response.prompt_logprobs_np is not None:
        msg.prompt_logprobs = np.asarray(response.prompt_logprobs_np, np.float32).tobytes()
    data: bytes = msg.SerializeToString()
    return data
