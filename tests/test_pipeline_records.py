"""``debate_records`` (columns converted to Python lists once per batch) gives the records of the obvious
per-value construction, kept here as the reference."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from adapters import pipeline
from adapters._json import round_or_none, rounded_list
from adapters.pipeline import records
from adapters.transcripts import read_transcripts
from tests._profile import examples
from tests.test_pipeline_stream import LINES, OPTIONS
from tools import samples


def _reference_records(result: pipeline.BatchResult) -> list[dict[str, Any]]:
    """The per-value construction: numpy scalars indexed and converted one at a time."""
    num = result.numeric
    out: list[dict[str, Any]] = []
    valid = np.asarray(num.validation.valid_V)
    reason = np.asarray(num.validation.reason_V)
    reasons = kernel.VOTE_REASONS
    u, a, op, b = (np.asarray(x) for x in num.votes[1:5])
    datum_counts = records._datum_counts(result)
    for p, r in enumerate(result.replayed):
        lo, hi = int(num.offsets_P1[p]), int(num.offsets_P1[p + 1])
        vlo, vhi = int(num.vote_offsets_P1[p]), int(num.vote_offsets_P1[p + 1])
        vote_list = [
            {
                "author": int(u[v]),
                "a": int(a[v]),
                "op": ">" if op[v] == kernel.OP_GT else "=" if op[v] == kernel.OP_EQ else "?",
                "b": int(b[v]),
                "valid": bool(valid[v]),
                "reason": "round1_not_yet_spoken" if num.round1_dropped_V[v] else reasons[int(reason[v])],
            }
            for v in range(vlo, vhi)
        ]
        turns = []
        for k, (t, pr) in enumerate(zip(r.debate.turns, r.parsed, strict=True)):
            turns.append(
                {
                    "turn": k,
                    "agent": t.agent,
                    "round": k // r.debate.num_agents,
                    "ok": pr.ok,
                    "reason": pr.reason,
                    "consensus": pr.consensus,
                    "votes": [[v.a, v.op, v.b] for v in pr.votes],
                    "self_votes_dropped": pr.self_votes_dropped,
                    "malformed_votes": [[m.line, m.reason] for m in pr.malformed_votes],
                    "ignored": k in r.ignored_turns,
                }
            )
        rec: dict[str, Any] = {
            "id": r.debate.id,
            "line": r.debate.line,
            "status": "scored",
            "num_agents": r.debate.num_agents,
            "max_rounds": r.debate.max_rounds,
            "num_turns": len(r.replay.accepted),
            "rounds": r.num_rounds,
            "end": r.end,
            "consensus": bool(r.state.consensus),
            "parse_failures": [{"turn": k, "agent": i, "reason": why} for k, i, why in r.parse_failures],
            "ignored_turns": list(r.ignored_turns),
            "votes": {
                "total": int(num.pairwise.total_votes_P[p]),
                "malformed": int(num.pairwise.malformed_P[p]),
                "any": bool(num.pairwise.any_votes_P[p]),
                "round1_dropped": int(num.round1_dropped_V[vlo:vhi].sum()),
                "list": vote_list,
            },
            "rewards": [round_or_none(x) for x in num.pairwise.rewards_PG[lo:hi]],
            "step_rewards": [round_or_none(x) for x in num.step_rewards_PG[lo:hi]],
            "returns": [round_or_none(x) for x in num.returns_PG[lo:hi]],
            "advantages": [round_or_none(x) for x in num.advantages_PG[lo:hi]],
            "turns": turns,
        }
        if p in datum_counts:
            rec["datums"] = datum_counts[p]
        out.append(rec)
    out.extend(pipeline.skipped_records(result.errors))
    return out


def _typed(value: Any) -> Any:
    """``value`` with every leaf paired with its type, so that ``1 == 1.0 == True`` cannot hide a change."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _score(lines: list[str], options: pipeline.ScoreOptions) -> pipeline.BatchResult:
    read = read_transcripts("".join(line + "\n" for line in lines))
    return pipeline.score(read.debates, options=options, read_errors=read.errors, num_lines=read.num_lines)


@settings(max_examples=examples(30))
@given(which=st.integers(0, len(OPTIONS) - 1), seed=st.integers(0, 2**16), size=st.integers(0, 30))
def test_records_are_the_per_value_constructions(which: int, seed: int, size: int) -> None:
    options = OPTIONS[which]
    lines = LINES + [json.dumps(r) for r in samples.generate_debates(size, seed=seed, token_every=3)]
    result = _score(lines, options)
    got, want = pipeline.debate_records(result), _reference_records(result)
    assert _typed(got) == _typed(want)
    assert json.dumps(got) == json.dumps(want)


@given(st.lists(st.floats(), max_size=30), st.booleans())
def test_rounded_list_is_round_or_none_of_each_value(xs: list[float], float32: bool) -> None:
    with np.errstate(over="ignore"):
        x = np.asarray(xs, dtype=np.float32 if float32 else np.float64)
    got = rounded_list(x)
    assert [(type(g), g) for g in got] == [(type(w), w) for w in (round_or_none(v) for v in x)]
    assert all(g is None or math.isfinite(g) for g in got)
