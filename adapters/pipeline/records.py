"""Scored debates as JSON-ready records (one per debate, the lines of ``score --out``), and the records of
skipped lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

import kernel
from adapters._json import rounded_list
from adapters.pipeline.stages import BatchResult, ReplayedDebate
from adapters.transcripts import TranscriptError
from kernel.checks import check_each, check_type

__all__ = ["debate_records", "skipped_records"]


def _turn_records(r: ReplayedDebate) -> list[dict[str, Any]]:
    """The ``turns`` entries of a scored debate's record."""
    n = r.debate.num_agents
    ignored = r.ignored_turns
    return [
        {
            "turn": k,
            "agent": t.agent,
            "round": k // n,
            "ok": pr.ok,
            "reason": pr.reason,
            "consensus": pr.consensus,
            "votes": [[v.a, v.op, v.b] for v in pr.votes] if pr.votes else [],
            "self_votes_dropped": pr.self_votes_dropped,
            "malformed_votes": [[m.line, m.reason] for m in pr.malformed_votes] if pr.malformed_votes else [],
            "ignored": k in ignored,
        }
        for k, (t, pr) in enumerate(zip(r.debate.turns, r.parsed, strict=True))
    ]


def debate_records(result: BatchResult) -> list[dict[str, Any]]:
    """One JSON-ready record per input debate: the scored ones, then one per skipped line (its error).

    Scored records hold: id, line, num_agents, max_rounds, turns (accepted), rounds, end, consensus,
    parse_failures, ignored_turns, votes (counts and the list), rewards, step_rewards, returns,
    advantages, per-turn parse summaries, and datum counts when tokens were present. A figure that is
    not finite is None (JSON null).

    Every vote's entry is built once per batch from the vote columns and sliced per debate (the faster
    loops of :func:`~adapters.pipeline.replay_debates` say what they save together).

    Examples:
      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
      >>> from adapters.pipeline import score
      >>> rec = debate_records(score(debates))[3]
      >>> rec["status"], rec["end"], rec["votes"]["total"], rec["rewards"], rec["advantages"], rec["datums"]
      ('scored', 'max_rounds', 1, [1.0, 0.0, 0.0], [0.666667, -0.333333, -0.333333],
       {'count': 3, 'tokens': 2037, 'action_tokens': 963})
    """
    check_type(result, BatchResult, "result")
    num = result.numeric
    out: list[dict[str, Any]] = []
    # Every per-vote and per-agent column as a Python list once per batch (no numpy scalar per value).
    valid: list[bool] = np.asarray(num.validation.valid_V, dtype=bool).tolist()
    dropped: list[bool] = np.asarray(num.round1_dropped_V, dtype=bool).tolist()
    reasons = kernel.VOTE_REASONS
    vote_why = [
        "round1_not_yet_spoken" if d else reasons[c]
        for d, c in zip(dropped, np.asarray(num.validation.reason_V).tolist(), strict=True)
    ]
    u, a, op_code, b = (np.asarray(x, dtype=np.int64).tolist() for x in num.votes[1:5])
    op_text = {kernel.OP_GT: ">", kernel.OP_EQ: "="}
    op = [op_text.get(c, "?") for c in op_code]
    total: list[int] = np.asarray(num.pairwise.total_votes_P, dtype=np.int64).tolist()
    malformed: list[int] = np.asarray(num.pairwise.malformed_P, dtype=np.int64).tolist()
    any_votes: list[bool] = np.asarray(num.pairwise.any_votes_P, dtype=bool).tolist()
    rewards = rounded_list(num.pairwise.rewards_PG)
    step_rewards = rounded_list(num.step_rewards_PG)
    returns = rounded_list(num.returns_PG)
    advantages = rounded_list(num.advantages_PG)
    offsets: list[int] = np.asarray(num.offsets_P1).tolist()
    vote_offsets: list[int] = np.asarray(num.vote_offsets_P1).tolist()
    counts_by_debate = _datum_counts(result)
    votes = [  # every vote's entry once per batch, sliced per debate
        {"author": uv, "a": av, "op": opv, "b": bv, "valid": ok, "reason": why}
        for uv, av, opv, bv, ok, why in zip(u, a, op, b, valid, vote_why, strict=True)
    ]
    for p, r in enumerate(result.replayed):
        lo, hi = offsets[p], offsets[p + 1]
        vlo, vhi = vote_offsets[p], vote_offsets[p + 1]
        vote_list = votes[vlo:vhi]
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
                "total": total[p],
                "malformed": malformed[p],
                "any": any_votes[p],
                "round1_dropped": sum(dropped[vlo:vhi]),
                "list": vote_list,
            },
            "rewards": rewards[lo:hi],
            "step_rewards": step_rewards[lo:hi],
            "returns": returns[lo:hi],
            "advantages": advantages[lo:hi],
            "turns": _turn_records(r),
        }
        if p in counts_by_debate:
            rec["datums"] = counts_by_debate[p]
        out.append(rec)
    out.extend(skipped_records(result.errors))
    return out


def skipped_records(errors: Iterable[TranscriptError]) -> list[dict[str, Any]]:
    """One JSON-ready record per skipped line: id (None when unread), line, status, and the error.

    Examples:
      >>> errors = [TranscriptError(4, "bad_json", "bad JSON: Expecting value at column 1")]
      >>> (rec,) = skipped_records(errors)
      >>> rec["id"], rec["line"], rec["status"], rec["error"]["reason"]
      (None, 4, 'skipped', 'bad_json')
    """
    errors = list(errors)
    check_each(errors, TranscriptError, "errors")
    return [{"id": e.debate_id, "line": e.line, "status": "skipped", "error": e.to_record()} for e in errors]


def _datum_counts(result: BatchResult) -> dict[int, dict[str, int]]:
    """Per debate that has datums: their count, their tokens and their action tokens."""
    if result.datums is None:
        return {}
    arrays = result.datums.arrays
    debate = np.asarray(arrays["debate_D"], dtype=np.int64)
    offsets = np.asarray(arrays["offsets_D1"], dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(np.asarray(arrays["mask"], dtype=np.int64))))
    num_debates = len(result.replayed)
    count = np.bincount(debate, minlength=num_debates)
    tokens = np.bincount(debate, weights=np.diff(offsets), minlength=num_debates)
    action = np.bincount(debate, weights=cum[offsets[1:]] - cum[offsets[:-1]], minlength=num_debates)
    return {
        int(p): {"count": int(count[p]), "tokens": int(tokens[p]), "action_tokens": int(action[p])}
        for p in np.flatnonzero(count)
    }
