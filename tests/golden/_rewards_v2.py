"""Checker for ``rewards_v2.jsonl``: the V2 generator and judge rewards, votes, metrics and step credit of
the fork at 2a0b18e2 against :func:`kernel.judge_step_rewards` under ``JUDGE_PRESETS["reference_v2"]``
and :func:`kernel.dual_step_advantages`, compared exactly (the four mean / std metrics are numpy's
``mean`` / ``std``, as the reference computed them).

``a < b`` is given to the kernel as ``b > a``; any operator other than ``>``, ``<`` and ``=`` is
``OP_OTHER``. Records of the ``from_text`` family are scored from the reference parser's comparisons and
counters (``expected.parsed``): the V2 parser itself is not a policy of ours.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel import (
    JUDGE_PRESETS,
    OP_EQ,
    OP_GT,
    OP_OTHER,
    JudgeOptions,
    dual_step_advantages,
    judge_step_rewards,
)

_COUNTERS = ("comparison_lines_total", "comparison_lines_invalid", "comparison_pairs_tie")


def options_of(inp: dict[str, Any]) -> JudgeOptions:
    """The reference preset with the record's constants and switches."""
    base = JUDGE_PRESETS["reference_v2"]
    return JudgeOptions(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "format_penalty": float(inp["format_penalty"]) if inp["enable_format_penalty"] else None,
            "format_exempt_turns": int(inp["format_exempt_turns"]),
            "lambda_gen": float(inp["lambda_gen"]),
            "lambda_judge": float(inp["lambda_judge"]),
        }
    )


def encode(a: int, op: str, b: int) -> tuple[int, int, int]:
    """One comparison as kernel codes: ``<`` reversed, unknown operators ``OP_OTHER``."""
    if op == "<":
        return b, OP_GT, a
    return a, {">": OP_GT, "=": OP_EQ}.get(op, OP_OTHER), b


def turns_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's turns with their comparisons and parser counters (``from_text``: the reference's)."""
    turns = record["input"]["turns"]
    parsed = record["expected"].get("parsed")
    if parsed is None:
        return list(turns)
    return [{"author": t["author"], **p} for t, p in zip(turns, parsed, strict=True)]


def compute(record: dict[str, Any]) -> dict[str, Any]:
    """Our result for one record, in the reference's record layout (``parsed`` left out)."""
    inp = record["input"]
    n = int(inp["num_agents"])
    steps = [int(s) for s in inp["num_steps"]]
    turns = turns_of(record)
    turn_V, a_V, op_V, b_V = [], [], [], []
    for k, turn in enumerate(turns):
        for a, op, b in turn["comparisons"]:
            x, code, y = encode(a, op, b)
            turn_V.append(k)
            a_V.append(x)
            op_V.append(code)
            b_V.append(y)
    r = judge_step_rewards(
        [0] * len(turns),
        range(len(turns)),
        [t["author"] for t in turns],
        turn_V,
        a_V,
        op_V,
        b_V,
        [n],
        steps,
        options=options_of(inp),
    )
    off = r.step_offsets_PG1
    rows = [slice(int(off[i]), int(off[i + 1])) for i in range(n)]
    authors = [turns[k]["author"] for k in turn_V]
    votes = [
        [authors[v], turn_V[v], a_V[v], int(r.step_a_V[v]), b_V[v], int(r.step_b_V[v])]
        for v in np.flatnonzero(r.vote_V)
    ]
    dual = dual_step_advantages(
        r.generator_N,
        r.judge_N,
        np.zeros(r.generator_N.shape[0], np.int64),
        1,
        lambda_gen=float(inp["lambda_gen"]),
        lambda_judge=float(inp["lambda_judge"]),
    )
    metrics: dict[str, float] = {
        "reward/total_votes": float(len(votes)),
        "reward/votes_per_step": len(votes) / max(1, sum(steps)),
        "reward/missing_comparisons": float(np.count_nonzero(r.penalised_U)),
        **{f"reward/{c}": float(sum(t[c] for t in turns)) for c in _COUNTERS},
    }
    if r.generator_N.size:
        metrics["reward/gen/mean"] = float(np.mean(r.generator_N))
        metrics["reward/gen/std"] = float(np.std(r.generator_N))
        metrics["reward/judge/mean"] = float(np.mean(r.judge_N))
        metrics["reward/judge/std"] = float(np.std(r.judge_N))
    return {
        "votes": votes,
        "gen_rewards": [r.generator_N[s].tolist() for s in rows],
        "judge_rewards": [r.judge_N[s].tolist() for s in rows],
        "final_rewards": [0.0] * n,
        "metrics": [{"agent_id": i, **metrics} for i in range(n)],
        "credit": {
            "gen_advantages": [dual.generator_N[s].tolist() for s in rows],
            "judge_advantages": [dual.judge_N[s].tolist() for s in rows],
            "combined_step_advantages": [dual.advantages[s].tolist() for s in rows],
        },
    }


def check(record: dict[str, Any]) -> str | None:
    """None when every field equals the reference's exactly, else the first that differs."""
    got = compute(record)
    want = record["expected"]
    for key, value in got.items():
        if value != want[key]:
            return f"{key}: got {value}, expected {want[key]}"
    return None
