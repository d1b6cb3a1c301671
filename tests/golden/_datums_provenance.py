"""Golden checker for ``datums_provenance.jsonl``: tinker-cookbook 0.6.1 ``trajectory_to_data(...,
include_provenance=...)`` against :func:`kernel.build_datums` (``sequence_ids_N``) and
:func:`adapters.tinker.convert.datums_to_tinker` (``spans``), down to the SDK's protobuf bytes.

Per record: the kernel's status maps to the reference's exception; an empty sequence id is refused by the
SDK's own span types when our conversion builds the span (the reference's message, from the same class);
otherwise every datum's tokens, loss inputs (name, dtype, shape, values, in the Datum's key order),
provenance spans and wire bytes are compared: the ``Datum`` message as returned (mask included), as sent
(mask removed, spans kept), and the whole ``ForwardBackwardRequest`` of the sent datums, each serialized
deterministically (the SDK's map order varies between processes).

One documented difference: the reference's advantages are int64 zeros in a datum with no action token (a
``torch.tensor`` of Python ints); ours are float32. There the checker confirms that the datum trains no
position and compares our bytes with the advantages written as the reference's int64 zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tinker
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto

from adapters.tinker.convert import datums_to_tinker, without_mask
from kernel import DATUM_STATUS, build_datums, trajectories_from_lists

ERRORS: dict[str, dict[str, Any]] = {
    "short_segment": {
        "type": "DataValidationError",
        "message": "need at least 2 tokens for input/target split",
        "is_value_error": True,
    },
    "logprob_count_mismatch": {"type": "AssertionError", "message": "", "is_value_error": False},
    "missing_logprobs": {
        "type": "ValueError",
        "message": "Logprobs are not available",
        "is_value_error": True,
    },
}


def ours(record: dict[str, Any]) -> dict[str, Any] | list[tinker.Datum]:
    """Our datums for one record (as SDK objects, mask included), or the reference-format error."""
    inp = record["input"]
    transitions = inp["transitions"]
    masked = [float((tr.get("metrics") or {}).get("parse_error_masked", 0.0)) >= 1.0 for tr in transitions]
    index: dict[str, int] = {}
    sequence = [
        -1 if tr["sequence_id"] is None else index.setdefault(tr["sequence_id"], len(index))
        for tr in transitions
    ]
    ids = list(index)
    result = build_datums(
        trajectories_from_lists(
            [[(tr["ob"], tr["ac"], tr["logprobs"]) for tr in transitions]], [inp["advantage"]]
        ),
        parse_failed_N=masked,
        sequence_ids_N=sequence if inp["include_provenance"] else None,
    )
    status = DATUM_STATUS[int(result.status_B[0])]
    if status != "ok":
        return {"error": ERRORS[status]}
    try:
        return datums_to_tinker(result.datums, include_mask=True, spans=result.spans, sequence_ids=ids)
    except ValueError as e:
        return {"error": {"type": "ValueError", "message": str(e), "is_value_error": True}}


def _span(span: Any) -> dict[str, Any]:
    return {
        "type": type(span).__name__,
        "sequence_id": span.sequence_id,
        "offset": span.offset,
        "length": span.length,
    }


def _as_reference(datum: tinker.Datum, int64_advantages: bool) -> tinker.Datum:
    """The datum with its advantages as the reference writes them where it writes int64 zeros."""
    if not int64_advantages:
        return datum
    inputs = dict(datum.loss_fn_inputs)
    n = len(inputs["advantages"].to_numpy())
    inputs["advantages"] = types.TensorData.from_numpy(np.zeros(n, np.int64))
    return tinker.Datum(
        model_input=datum.model_input,
        loss_fn_inputs=inputs,
        model_input_spans=datum.model_input_spans,
        loss_fn_input_spans=datum.loss_fn_input_spans,
    )


def _request(data: list[tinker.Datum]) -> Any:
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="stable_reinforce"),
        model_id="golden3-model",
        seq_id=1,
    )
    return forward_backward_request_to_proto(request)


def _hex(message: Any) -> str:
    return bytes(message.SerializeToString(deterministic=True)).hex()


def _compare(k: int, got: tinker.Datum, want: dict[str, Any]) -> str | None:
    if (
        got.model_input.to_ints() != want["input_tokens"]
        or len(got.model_input.chunks) != want["num_input_chunks"]
    ):
        return f"datum {k}: input tokens differ"
    names = list(got.loss_fn_inputs)
    if names != [x["name"] for x in want["loss_fn_inputs"]]:
        return f"datum {k}: loss inputs {names}, expected {[x['name'] for x in want['loss_fn_inputs']]}"
    for x in want["loss_fn_inputs"]:
        array = got.loss_fn_inputs[x["name"]].to_numpy()
        dtype = str(array.dtype)
        if x["name"] == "advantages" and x["dtype"] == "int64":
            if np.any(got.loss_fn_inputs["mask"].to_numpy()) or np.any(array):
                return f"datum {k}: reference advantages are int64 zeros (no action token) but ours train one"
            dtype = "int64"
        if dtype != x["dtype"] or list(array.shape) != x["shape"] or array.tolist() != x["values"]:
            return f"datum {k}: {x['name']} differs"
    spans = None
    if got.model_input_spans is not None:
        spans = {
            "model_input": [_span(s) for s in got.model_input_spans],
            "loss_fn_inputs": [_span(s) for s in got.loss_fn_input_spans or ()],
        }
    if spans != want["provenance"]:
        return f"datum {k}: provenance {spans}, expected {want['provenance']}"
    return None


def check(record: dict[str, Any]) -> str | None:
    """None when our datums (or error) equal the reference's for this record, else a short message."""
    got = ours(record)
    want = record["expected"]
    if isinstance(got, dict) or "error" in want:
        ours_error = got.get("error", "datums") if isinstance(got, dict) else "datums"
        if ours_error != want.get("error", "datums"):
            return f"expected {want.get('error', 'datums')}, got {ours_error}"
        return None
    if len(got) != len(want["datums"]):
        return f"expected {len(want['datums'])} datums, got {len(got)}"
    quirk = [
        any(x["name"] == "advantages" and x["dtype"] == "int64" for x in w["loss_fn_inputs"])
        for w in want["datums"]
    ]
    for k, (g, w) in enumerate(zip(got, want["datums"], strict=True)):
        message = _compare(k, g, w)
        if message is not None:
            return message
    shown = [_as_reference(g, q) for g, q in zip(got, quirk, strict=True)]
    sent = without_mask(shown)
    returned_msg, sent_msg = _request(shown), _request(sent)
    for k, w in enumerate(want["datums"]):
        if _hex(returned_msg.data[k]) != w["wire"]["datum_hex"]:
            return f"datum {k}: wire bytes (as returned) differ"
        if _hex(sent_msg.data[k]) != w["wire"]["sent_hex"]:
            return f"datum {k}: wire bytes (as sent) differ"
    request = want.get("request")
    if got and request is not None and _hex(sent_msg) != request["hex"]:
        return "the ForwardBackwardRequest bytes differ"
    return None
