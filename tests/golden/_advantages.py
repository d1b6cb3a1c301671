"""Golden check of ``advantages.jsonl``: every estimator of every record, by its preset, bit for bit.

Each expected key maps to a preset of :data:`kernel.ADVANTAGE_PRESETS`. The float32 references are
reproduced in float32 with their own operation order, so the comparison is exact equality (no
skipped groups); the record's ``dtypes`` field must match our output dtype too.

One allowance: verl's vectorized GRPO and TRL take σ with torch's float32 vectorised square root,
which on the machine that recorded the vectors rounded a few near-halfway cases one ulp low (18 of
3293 verl group σ's, 9 TRL σ's; every one is a value whose exact root lies within 0.02 ulp of a
rounding midpoint). We use the correctly rounded root, so for those four estimators rows may differ
by at most :data:`SQRT_ULPS` float32 ulps (24 records). Everything else is bit-exact.

Group keys as the references built them: question ids alone, (question, agent) pairs for DrMAS
``agent`` mode, question ids plus trajectory ids for DrMAS ``traj`` mode. DrMAS collects an agent
group's rows trajectory by trajectory, so for ``agent`` mode the rows are passed in that order (and the
result put back in row order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel import advantages_from_preset, dense_group_ids

SQRT_ULPS = 2
"""Largest float32 ulp distance allowed for the estimators in :data:`SQRT_F32`."""

SQRT_F32 = frozenset({"verl_grpo_vectorized.norm", "trl_grpo.group", "trl_grpo.batch", "trl_rloo.normalize"})
"""Presets whose reference divides by a float32 vectorised √ (see the module docstring)."""

# (expected key, sub-key or None, preset, dtypes key, grouping)
_ESTIMATORS: list[tuple[str, str | None, str, str, str]] = [
    ("tinker", None, "tinker", "tinker", "question"),
    ("verl_grpo", "norm", "verl_grpo.norm", "verl_grpo", "question"),
    ("verl_grpo", "nonorm", "verl_grpo.nonorm", "verl_grpo", "question"),
    ("verl_grpo_vectorized", "norm", "verl_grpo_vectorized.norm", "verl_grpo_vectorized", "question"),
    ("verl_grpo_vectorized", "nonorm", "verl_grpo_vectorized.nonorm", "verl_grpo_vectorized", "question"),
    ("drmas_grpo", "norm_agent", "drmas_grpo.norm_agent", "drmas_grpo", "agent"),
    ("drmas_grpo", "nonorm_agent", "drmas_grpo.nonorm_agent", "drmas_grpo", "agent"),
    ("drmas_grpo", "norm_traj", "drmas_grpo.norm_traj", "drmas_grpo", "traj"),
    ("drmas_grpo", "nonorm_traj", "drmas_grpo.nonorm_traj", "drmas_grpo", "traj"),
    ("legos_grpo", "normalize=F,positive_only=F", "legos_grpo", "legos_grpo", "question"),
    ("legos_grpo", "normalize=F,positive_only=T", "legos_grpo.positive_only", "legos_grpo", "question"),
    ("legos_grpo", "normalize=T,positive_only=F", "legos_grpo.normalize", "legos_grpo", "question"),
    (
        "legos_grpo",
        "normalize=T,positive_only=T",
        "legos_grpo.normalize.positive_only",
        "legos_grpo",
        "question",
    ),
    ("verl_rloo", "loop", "verl_rloo.loop", "verl_rloo_loop", "question"),
    ("verl_rloo", "vectorized", "verl_rloo.vectorized", "verl_rloo_vectorized", "question"),
    ("trl_grpo", "group", "trl_grpo.group", "trl_grpo", "question"),
    ("trl_grpo", "batch", "trl_grpo.batch", "trl_grpo", "question"),
    ("trl_grpo", "none", "trl_grpo.none", "trl_grpo", "question"),
    ("trl_rloo", "plain", "trl_rloo.plain", "trl_rloo", "question"),
    ("trl_rloo", "normalize", "trl_rloo.normalize", "trl_rloo", "question"),
]


def check(record: dict[str, Any]) -> str | None:
    inp, expected = record["input"], record["expected"]
    rewards = np.asarray(inp["rewards"], dtype=np.float64)
    n = rewards.shape[0]
    questions = [str(q) for q in inp["group_ids"]]
    agents = inp.get("agent_ids", ["0"] * n)
    trajs = inp.get("traj_ids", [f"row{i}" for i in range(n)])
    q_ids, q_num = dense_group_ids(questions)
    qa_ids, qa_num = dense_group_ids(questions, agents)
    traj_ids, _ = dense_group_ids(trajs)
    # DrMAS visits an agent group's rows trajectory by trajectory (in order of first appearance).
    pair_ids, _ = dense_group_ids(qa_ids, traj_ids)
    traj_major = np.argsort(pair_ids, kind="stable")

    for key, sub, preset, dtype_key, grouping in _ESTIMATORS:
        want_raw = expected[key] if sub is None else (expected[key] or {}).get(sub)
        if want_raw is None:
            if key.startswith("trl_"):
                continue  # TRL applies only to equal contiguous blocks
            return f"{key}.{sub}: no expected values"
        if grouping == "agent":
            out = advantages_from_preset(preset, rewards[traj_major], qa_ids[traj_major], qa_num)
            got = np.empty_like(out.advantages)
            got[traj_major] = out.advantages
        elif grouping == "traj":
            got = advantages_from_preset(preset, rewards, q_ids, q_num, trajectory_ids_PG=traj_ids).advantages
        else:
            got = advantages_from_preset(preset, rewards, q_ids, q_num).advantages
        want = np.asarray(want_raw, dtype=np.float64)
        if got.dtype != np.dtype(expected["dtypes"][dtype_key]):
            return f"{preset}: dtype {got.dtype}, reference computed in {expected['dtypes'][dtype_key]}"
        got64 = got.astype(np.float64)
        if preset in SQRT_F32 and got64.shape == want.shape and ulp_distance(got, want) <= SQRT_ULPS:
            continue
        if got64.shape != want.shape or not np.array_equal(got64, want):
            bad = np.flatnonzero(got64 != want) if got64.shape == want.shape else np.arange(n)
            i = int(bad[0])
            return (
                f"{preset}: {bad.size} of {n} rows differ; row {i}: got {got64[i]!r}, "
                f"expected {want[i]!r} (reward {rewards[i]!r}, group {questions[i]!r})"
            )
    return None


def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in float32 ulps between two arrays of float32 values (NaN counts as huge)."""
    x = np.asarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    y = np.asarray(b, dtype=np.float32).view(np.int32).astype(np.int64)
    # Map the sign-magnitude bit patterns onto a monotonic integer line.
    x = np.where(x < 0, -(x & 0x7FFFFFFF), x)
    y = np.where(y < 0, -(y & 0x7FFFFFFF), y)
    if np.isnan(a).any() or np.isnan(b).any():
        return 1 << 40
    return int(np.abs(x - y).max()) if x.size else 0
