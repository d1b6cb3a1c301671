"""``debate-kernel score`` writes the same bytes as before its stages were made faster (issue 35): the
``--out`` lines, the summary and the errors on stderr, pinned as digests of what commit 5f02734 wrote for
the shipped sample debates and for a generated transcript with bad lines of every kind; and the faster
per-debate loops of the pipeline equal the obvious loops they replace, on generated debates."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from adapters import data, pipeline
from adapters.cli import main
from adapters.transcripts import Debate, debate_from_record
from tests._profile import examples
from tools import samples


def _edited_transcript() -> str:
    """80 generated debates (one in 7 with tokens) with turns after the end, turns out of order,
    repeated ids, lines cut short (bad JSON) and blank lines mixed in."""
    recs = samples.generate_debates(80, seed=5, token_every=7)
    lines = []
    for i, rec in enumerate(recs):
        if i % 9 == 1:
            rec["turns"] = rec["turns"] + rec["turns"][: rec["num_agents"]]  # turns after the end
        if i % 13 == 2 and len(rec["turns"]) > 1:
            rec["turns"][1]["agent"] = 0  # out of order
        if i % 17 == 3:
            rec["id"] = recs[0]["id"]  # a repeated id
        lines.append(json.dumps(rec, ensure_ascii=False))
        if i % 11 == 4:
            lines.append(lines[-1][: len(lines[-1]) // 2])  # cut short: bad JSON
        if i % 19 == 5:
            lines.append("")
    return "\n".join(lines) + "\n"


def _digests(path: Path, after_end: str, tmp: Path, capsys: Any) -> tuple[str, str, str]:
    """sha256 (16 hex digits) of ``score PATH --out``'s lines, its JSON summary (less the source path)
    and its stderr (the paths replaced)."""
    out = tmp / f"out-{after_end}.jsonl"
    argv = ["score", str(path), "--after-end", after_end, "--chunk-size", "7", "--out", str(out), "--json"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    summary = json.loads(printed.out)
    summary.pop("source")
    stderr = printed.err.replace(str(path), "FILE").replace(str(out), "OUT")

    def digest(b: bytes) -> str:
        return hashlib.sha256(b).hexdigest()[:16]

    return (
        digest(out.read_bytes()),
        digest(json.dumps(summary, sort_keys=True).encode()),
        digest(stderr.encode()),
    )


# What 5f02734 (before issue 35's faster reader and stages) wrote, by the digests above.
_AT_5F02734 = {
    ("samples", "error"): ("cccea89f1d6eb66c", "99689e9936911ac5", "e3b0c44298fc1c14"),
    ("samples", "truncate"): ("cccea89f1d6eb66c", "99689e9936911ac5", "e3b0c44298fc1c14"),
    ("edited", "error"): ("92c5908f0c8d5223", "03295bea64ea13f2", "e9ed0caa39a3682c"),
    ("edited", "truncate"): ("e3750a4b9fac0375", "3387f14d3f3b6699", "46e6564417e2e1c7"),
}


@pytest.mark.parametrize("after_end", ["error", "truncate"])
@pytest.mark.parametrize("source", ["samples", "edited"])
def test_score_writes_what_it_wrote_before(source: str, after_end: str, tmp_path: Path, capsys: Any) -> None:
    path = Path(data.path(data.SAMPLE_DEBATES))
    if source == "edited":
        path = tmp_path / "edited.jsonl"
        path.write_text(_edited_transcript(), encoding="utf-8")
    assert _digests(path, after_end, tmp_path, capsys) == _AT_5F02734[source, after_end]


# ------------------------------------------------------------------------------------------------
# The per-debate loops against the obvious ones

_POOL = [debate_from_record(r) for r in samples.generate_debates(24, seed=9, token_every=5)]


def _episodes_obviously(replayed: list[pipeline.ReplayedDebate]) -> list[kernel.Episode]:
    out = []
    for r in replayed:
        turns, accepted = r.debate.turns, r.replay.accepted
        tokens = tuple(
            None
            if turns[k].action_tokens is None
            else (turns[k].observation_tokens or (), turns[k].action_tokens, turns[k].logprobs)
            for k in accepted
        )
        out.append(
            kernel.Episode(
                r.debate.num_agents,
                tuple(turns[k].agent for k in accepted),
                tuple(r.parsed[k] for k in accepted),
                tuple(r.replay.rewards[k] for k in accepted),
                consensus=r.state.consensus,
                tokens_T=tokens if any(t is not None for t in tokens) else (),
            )
        )
    return out


def _counts_obviously(replayed: list[pipeline.ReplayedDebate]) -> tuple[collections.Counter[str], ...]:
    c: collections.Counter[str] = collections.Counter()
    ends: collections.Counter[str] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    for r in replayed:
        c["turns"] += len(r.replay.accepted)
        c["ignored"] += len(r.ignored_turns)
        ends[r.end] += 1
        for k in r.replay.accepted:
            pr = r.parsed[k]
            c["self_dropped"] += pr.self_votes_dropped
            c["unreadable"] += len(pr.malformed_votes)
            if not pr.ok:
                failures[pr.reason] += 1
    return c, ends, failures


@settings(max_examples=examples(20), deadline=None)
@given(
    picks=st.lists(st.integers(0, len(_POOL) - 1), max_size=6),
    late=st.lists(st.integers(0, len(_POOL) - 1), max_size=3),
)
def test_the_stages_loops_equal_the_obvious_loops(picks: list[int], late: list[int]) -> None:
    # a few debates, some with turns after their end (ignored under truncate: not the first m turns)
    debates: list[Debate] = []
    for j, i in enumerate(picks):
        d = dataclasses.replace(_POOL[i], id=f"d{j}")
        if i in late:
            d = dataclasses.replace(d, turns=(*d.turns, *d.turns[: d.num_agents]))
        debates.append(d)
    options = pipeline.ScoreOptions(after_end="truncate")
    result = pipeline.score(debates, options=options)
    replayed = list(result.replayed)
    assert pipeline.episodes_of(replayed) == _episodes_obviously(replayed)
    # accepted turns that are not the first m: a turn the state machine rejected in the middle (the
    # pipeline's replay skips such a debate; a ReplayedDebate built by hand may hold one)
    for r in replayed[:2]:
        d = r.debate
        turns, parsed = (d.turns[0], *d.turns), (r.parsed[0], *r.parsed)
        res = kernel.replay(
            d.question,
            [(t.agent, p) for t, p in zip(turns, parsed, strict=True)],
            num_agents=d.num_agents,
            max_rounds=99,
        )
        assert res.accepted[:2] != (0, 1)
        odd = pipeline.ReplayedDebate(dataclasses.replace(d, turns=turns), parsed, res, "open")
        assert pipeline.episodes_of([odd]) == _episodes_obviously([odd])
    figures = pipeline.chunk_figures(result)
    c, ends, failures = _counts_obviously(replayed)
    assert (figures.ends, figures.failures) == (ends, failures)
    assert {k: v for k, v in figures.counts.items() if not k.startswith("votes_")} == c
    records = pipeline.debate_records(result)
    num = result.numeric
    for p, (rec, r) in enumerate(zip(records, replayed, strict=False)):
        lo, hi = int(num.vote_offsets_P1[p]), int(num.vote_offsets_P1[p + 1])
        assert [(v["author"], v["a"], v["op"], v["b"]) for v in rec["votes"]["list"]] == [
            (
                int(num.votes.authors_V[v]),
                int(num.votes.a_V[v]),
                ">=?"[int(num.votes.op_V[v])],
                int(num.votes.b_V[v]),
            )
            for v in range(lo, hi)
        ]
        assert [t["votes"] for t in rec["turns"]] == [[list(v) for v in pr.votes] for pr in r.parsed]
