"""Checker for ``kl_metrics.jsonl``: reference ``compute_kl_sample_train`` vs :func:`kernel.kl_sample_train`.

The datums are concatenated into packed float32 arrays (the reference computes in float32). Where the
reference raises ``AssertionError`` (no action token anywhere) our result must be the explicit empty
one: ``num_action_tokens == 0`` and NaN values. Values compare within a few float32 ulps of the
magnitudes summed, since the reference's summation order (torch) differs from numpy's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernel import kl_sample_train

_NAMES = ("kl_sample_train_v1", "kl_sample_train_v2", "entropy")


def packed_inputs(record: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sampler_logprobs_T, train_logprobs_T, mask_T) of a record, concatenated over datums, float32."""
    inp = record["input"]
    pieces = [
        (d["logprobs"], t, d["mask"]) for d, t in zip(inp["datums"], inp["training_logprobs"], strict=True)
    ]
    out = []
    for k in range(3):
        flat = [x for p in pieces for x in p[k]]
        out.append(np.asarray(flat, dtype=np.float32).reshape(-1))
    return out[0], out[1], out[2]


def check(record: dict[str, Any]) -> str | None:
    inp = record["input"]
    if len(inp["datums"]) != len(inp["training_logprobs"]):
        return "malformed record: datums and training_logprobs differ in length"
    lp_q, lp_t, mask = packed_inputs(record)
    got = kl_sample_train(lp_q, lp_t, mask)
    expected = record["expected"]
    if "error" in expected:
        if expected["error"]["type"] != "AssertionError":
            return f"unexpected reference error {expected['error']}"
        if int(got.num_action_tokens) != 0:
            return f"expected no action tokens, got {int(got.num_action_tokens)}"
        if not all(math.isnan(float(getattr(got, k))) for k in _NAMES):
            return f"empty result must be NaN, got {got}"
        return None
    for k in _NAMES:
        if np.asarray(getattr(got, k)).dtype != np.float32:
            return f"{k}: computed in {np.asarray(getattr(got, k)).dtype}, expected float32"
    action = mask > 0
    d = (lp_q - lp_t)[action].astype(np.float64)
    scale = {
        "kl_sample_train_v1": float(np.abs(d).mean()),
        "kl_sample_train_v2": float(0.5 * (d * d).mean()),
        "entropy": float(np.abs(lp_q[action]).mean()),
    }
    for k in _NAMES:
        want, have = float(expected[k]), float(getattr(got, k))
        tol = 8 * np.finfo(np.float32).eps * (scale[k] + abs(want)) + 1e-30
        if not abs(have - want) <= tol:
            return f"{k}: got {have!r}, expected {want!r} (|Δ| = {abs(have - want):.3g} > {tol:.3g})"
    return None
