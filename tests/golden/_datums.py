"""Golden checker for ``datums.jsonl``: tinker-cookbook ``trajectory_to_data`` against :func:`build_datums`.

Each record is one trajectory. Our status codes map to the reference's exceptions; datums compare token
arrays exactly and float32 values exactly. The reference's advantages are int64 for a datum with no
action token (a ``torch.tensor`` of Python ints); ours are always float32, so only the values are
compared there, and the checker confirms that such a datum indeed has no trained position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel import DATUM_STATUS, build_datums, trajectories_from_lists

# Our status -> the reference's exception record.
ERRORS: dict[str, dict[str, str]] = {
    "short_segment": {"type": "ValueError", "message": "need at least 2 tokens for input/target split"},
    "logprob_count_mismatch": {"type": "AssertionError", "message": ""},
    "missing_logprobs": {"type": "ValueError", "message": "Logprobs are not available"},
}


def expected_from_kernel(record: dict[str, Any]) -> dict[str, Any]:
    """Our result for one record, in the reference's record format (advantages always float32)."""
    inp = record["input"]
    transitions = [(tr["ob"], tr["ac"], tr["logprobs"]) for tr in inp["transitions"]]
    result = build_datums(trajectories_from_lists([transitions], [inp["advantage"]]))
    status = DATUM_STATUS[int(result.status_B[0])]
    if status != "ok":
        return {"error": ERRORS[status]}
    d = result.datums
    out = []
    for k in range(d.num_datums):
        s = slice(int(d.offsets_D1[k]), int(d.offsets_D1[k + 1]))
        out.append(
            {
                "input_tokens": d.input_tokens[s].tolist(),
                "num_input_chunks": 1,
                "target_tokens": d.target_tokens[s].tolist(),
                "logprobs": d.logprobs[s].tolist(),
                "advantages": d.advantages[s].tolist(),
                "mask": d.mask[s].astype(np.float32).tolist(),
                "dtypes": {
                    "target_tokens": str(d.target_tokens.dtype),
                    "logprobs": str(d.logprobs.dtype),
                    "advantages": str(d.advantages.dtype),
                    "mask": "float32",
                },
            }
        )
    return {"datums": out}


def check(record: dict[str, Any]) -> str | None:
    """None when our datums (or error) equal the reference's for this record, else a short message."""
    got = expected_from_kernel(record)
    want = record["expected"]
    if "error" in want or "error" in got:
        if got.get("error") != want.get("error"):
            return f"expected {want.get('error', 'datums')}, got {got.get('error', 'datums')}"
        return None
    if len(got["datums"]) != len(want["datums"]):
        return f"expected {len(want['datums'])} datums, got {len(got['datums'])}"
    for k, (g, w) in enumerate(zip(got["datums"], want["datums"], strict=True)):
        if w["dtypes"]["advantages"] == "int64":
            # The reference quirk: no action token in the labels. Ours are float32 zeros there.
            if any(g["mask"]):
                return (
                    f"datum {k}: reference advantages are int64 (no action token) but ours has a trained one"
                )
            g = {**g, "dtypes": {**g["dtypes"], "advantages": "int64"}}
        for key in (
            "input_tokens",
            "num_input_chunks",
            "target_tokens",
            "logprobs",
            "advantages",
            "mask",
            "dtypes",
        ):
            if g[key] != w[key]:
                return f"datum {k}: {key} differs"
    return None
