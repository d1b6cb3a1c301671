"""Leave-one-out pairwise rewards: numpy and jitted JAX against the per-debate reference loop.

A second table times parsed responses → rewards: from the parser's own vote columns
(``kernel.parse_responses`` → ``ParsedBatch.votes`` + ``pairwise_rewards``: the same responses written as
agent outputs and parsed once, outside the timer, as the reference's parsed responses are), and from a
list of ``ParsedResponse`` objects with our ``votes_from_responses`` + ``pairwise_rewards`` (reading the
votes the parser packed into ``ParsedResponse.vote_codes``; the packing's own cost, paid at parse time,
and the per-vote path for responses without codes are rows of their own)
against the reference's own reward computation on the same parsed responses (collect each debate's
votes from its responses, then the per-agent loop), 4,096 debates × 5 agents × 120 votes (15
responses of 8 votes each). tinker-cookbook 0.5.8 does not ship the debate recipe, so the peer is a
transcription of REFERENCE.md §1–2 as straightforward Python; everything it does is in its timer. A
third table shows what the columns cost the parser: ``parse_responses`` against ``parse_response`` one
text at a time, best of 7.

``python -m benchmarks rewards [--quick]``. Workload: D debates × N agents × V votes per debate
(default 4,096 × 5 × 120 ≈ 491 k votes, ~3% malformed), plus a ragged batch with N ∈ [3, 8].
The peer is the reference algorithm, measured in the same run: per debate, for each agent, a loop
over that debate's votes. Every implementation's rewards are checked against it before timing.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

from benchmarks._common import emit_json, print_table, time_call, time_compile
from kernel import (
    ParsedResponse,
    Vote,
    VoteArrays,
    pack_votes,
    pairwise_rewards,
    parse_response,
    parse_responses,
    vote_arrays,
    votes_from_responses,
)

_OPS = (">", "=", "<", ">=")
_VOTES: dict[tuple[int, str, int], Vote] = {}


def _shared_vote(v: tuple[int, str, int]) -> Vote:
    """One Vote object per distinct vote, as the parsers return them (they share small votes)."""
    if v not in _VOTES:
        _VOTES[v] = Vote(*v)
    return _VOTES[v]


_OP_P = (0.62, 0.35, 0.02, 0.01)


def make_votes(
    num_agents_P: np.ndarray, votes_per_debate: int, seed: int
) -> tuple[list[tuple[int, list[tuple[int, int, str, int]]]], VoteArrays]:
    """Random debates as Python lists (the reference's input) and as ``VoteArrays`` (ours)."""
    rng = np.random.default_rng(seed)
    num_debates = len(num_agents_P)
    total = num_debates * votes_per_debate
    g = np.repeat(np.arange(num_debates), votes_per_debate)
    n_v = num_agents_P[g]
    author = (rng.random(total) * n_v).astype(np.int64)
    a = (rng.random(total) * n_v).astype(np.int64)
    b = (a + 1 + (rng.random(total) * (n_v - 1)).astype(np.int64)) % n_v  # b ≠ a
    ops = rng.choice(np.array(_OPS), size=total, p=_OP_P)
    bad = rng.random(total) < 0.01  # a few ids out of range as well
    b = np.where(bad, n_v, b)
    votes = vote_arrays(g, author, a, ops, b)
    debates: list[tuple[int, list[tuple[int, int, str, int]]]] = []
    cols = (author.tolist(), a.tolist(), ops.tolist(), b.tolist())
    for p in range(num_debates):
        lo, hi = p * votes_per_debate, (p + 1) * votes_per_debate
        rows = list(zip(*(c[lo:hi] for c in cols), strict=True))
        debates.append((int(num_agents_P[p]), rows))
    return debates, votes


def reference_rewards(debates: list[tuple[int, list[tuple[int, int, str, int]]]]) -> list[float]:
    """The reference algorithm (win_rate): per debate, per agent, one pass over the votes."""
    out: list[float] = []
    for n, votes in debates:
        for i in range(n):
            wins, total = 0.0, 0
            for author, a, op, b in votes:
                if author == i:
                    continue
                if not (0 <= a < n and 0 <= b < n) or a == b or op not in (">", "="):
                    continue
                if i == a:
                    total += 1
                    wins += 1.0 if op == ">" else 0.5
                elif i == b:
                    total += 1
                    wins += 0.5 if op == "=" else 0.0
            out.append(wins / total if total else 0.0)
        # group metrics, as the reference computes them in the same call
        malformed = sum(
            1 for _, a, op, b in votes if not (0 <= a < n and 0 <= b < n) or a == b or op not in (">", "=")
        )
        _ = (len(votes) - malformed, malformed)
    return out


def _run_case(name: str, num_agents_P: np.ndarray, votes_per_debate: int, quick: bool) -> dict[str, Any]:
    import jax

    import kernel.jax as kj

    debates, votes = make_votes(num_agents_P, votes_per_debate, seed=0)
    num_votes = int(votes.a_V.size)
    num_rows = int(num_agents_P.sum())
    repeat = 3 if quick else 7

    expected = reference_rewards(debates)
    got = pairwise_rewards(votes, num_agents_P)
    assert got.rewards_PG.tolist() == expected, "numpy differs from the reference loop"

    jitted = jax.jit(lambda v, n: kj.pairwise_rewards(v, n, num_rows=num_rows))
    votes_dev = VoteArrays(*(jax.device_put(x) for x in votes[:5]))
    n_dev = jax.device_put(num_agents_P.astype(np.int32))
    compile_s = time_compile(lambda: jitted(votes_dev, n_dev))
    got_jax = np.asarray(jitted(votes_dev, n_dev).rewards_PG)
    assert got_jax.tolist() == np.asarray(expected, np.float32).tolist(), "JAX differs from numpy"

    t_ref = time_call(lambda: reference_rewards(debates), repeat=max(repeat // 2, 1), warmup=0)
    t_np = time_call(lambda: pairwise_rewards(votes, num_agents_P), repeat=repeat, min_time=0.05)
    t_np_wml = time_call(
        lambda: pairwise_rewards(votes, num_agents_P, mode="win_minus_loss"), repeat=repeat, min_time=0.05
    )
    t_jax = time_call(lambda: jitted(votes_dev, n_dev), repeat=repeat, min_time=0.05)
    flat = [(p, *vote) for p, (_, rows) in enumerate(debates) for vote in rows]
    lists = [list(col) for col in zip(*flat, strict=True)]
    t_build = time_call(lambda: vote_arrays(*lists), repeat=max(repeat // 2, 1))

    rows = [
        ("reference loop (Python)", t_ref),
        ("numpy win_rate", t_np),
        ("numpy win_minus_loss", t_np_wml),
        ("jax.jit win_rate (CPU)", t_jax),
    ]
    table = [(label, t * 1e3, num_votes / t / 1e6, t_ref / t) for label, t in rows]
    table.append(("vote_arrays from lists (info)", t_build * 1e3, num_votes / t_build / 1e6, t_ref / t_build))
    title = (
        f"{name}: {len(num_agents_P):,} debates, N = {int(num_agents_P.min())}..{int(num_agents_P.max())}, "
        f"{votes_per_debate} votes each = {num_votes:,} votes; JAX compile {compile_s:.2f} s (apart)"
    )
    print_table(title, ["implementation", "ms", "M votes/s", "× reference"], table)
    return {
        f"{name}.votes": num_votes,
        f"{name}.ref_votes_per_s": num_votes / t_ref,
        f"{name}.numpy_votes_per_s": num_votes / t_np,
        f"{name}.jax_votes_per_s": num_votes / t_jax,
        f"{name}.numpy_x_ref": t_ref / t_np,
        f"{name}.numpy_wml_x_ref": t_ref / t_np_wml,
        f"{name}.jax_x_ref": t_ref / t_jax,
        f"{name}.jax_compile_s": compile_s,
    }


def make_responses(
    num_debates: int, num_agents: int, responses_per_agent: int, votes_per_response: int, seed: int
) -> tuple[list[list[dict[str, Any]]], list[list[ParsedResponse]]]:
    """Parsed responses in the reference's form (dicts with the author and ``(a, op, b)`` tuples) and as
    ``ParsedResponse`` (ours); the parser has already dropped self-comparisons."""
    rng = np.random.default_rng(seed)
    ref: list[list[dict[str, Any]]] = []
    ours: list[list[ParsedResponse]] = []
    for _ in range(num_debates):
        ref_d, ours_d = [], []
        for k in range(num_agents * responses_per_agent):
            author = k % num_agents
            others = [i for i in range(num_agents) if i != author]
            a = rng.choice(others, votes_per_response).tolist()
            b = rng.choice(others, votes_per_response).tolist()
            ops = rng.choice(np.array([">", "="]), votes_per_response, p=[0.7, 0.3]).tolist()
            votes = list(zip(a, ops, b, strict=True))
            ref_d.append({"author": author, "votes": votes})
            # as the parsers return them: the shared Vote object of each small (a, op, b)
            ours_d.append(ParsedResponse.make(author, votes=tuple(_shared_vote(v) for v in votes)))
        ref.append(ref_d)
        ours.append(ours_d)
    return ref, ours


def _response_texts(debates: list[list[dict[str, Any]]]) -> tuple[list[str], list[int], list[int]]:
    """Each reference response written as an agent output (its votes one per line), with its author and
    debate, debate-major."""
    texts, authors, groups = [], [], []
    for p, responses in enumerate(debates):
        for r in responses:
            lines = "\n".join(f"Agent {a} {op} Agent {b}" for a, op, b in r["votes"])
            texts.append(
                f"<solution>42</solution><evaluation>fine</evaluation><comparison>{lines}</comparison>"
                "<consensus>NO</consensus><consensus_reason>not yet</consensus_reason>"
            )
            authors.append(r["author"])
            groups.append(p)
    return texts, authors, groups


def reference_from_responses(debates: list[list[dict[str, Any]]], num_agents: int) -> list[float]:
    """The reference's reward computation from parsed responses: gather each debate's votes, then
    :func:`reference_rewards`."""
    gathered = [
        (num_agents, [(r["author"], a, op, b) for r in responses for a, op, b in r["votes"]])
        for responses in debates
    ]
    return reference_rewards(gathered)


def _run_parsed(quick: bool) -> dict[str, Any]:
    num_debates, num_agents = (512 if quick else 4096), 5
    ref, ours = make_responses(num_debates, num_agents, 3, 8, seed=2)
    n_P = np.full(num_debates, num_agents, dtype=np.int64)
    num_votes = num_debates * num_agents * 3 * 8

    def run_ours() -> Any:
        return pairwise_rewards(votes_from_responses(ours), n_P)

    expected = reference_from_responses(ref, num_agents)
    assert run_ours().rewards_PG.tolist() == expected, "ours differs from the reference"
    repeat = 3 if quick else 5
    t_ref = time_call(lambda: reference_from_responses(ref, num_agents), repeat=repeat, warmup=0)
    t_ours = time_call(run_ours, repeat=repeat)
    t_votes = time_call(lambda: votes_from_responses(ours), repeat=repeat)
    unpacked = [[dataclasses.replace(r, vote_codes=None) for r in d] for d in ours]
    t_unpacked = time_call(lambda: pairwise_rewards(votes_from_responses(unpacked), n_P), repeat=repeat)
    every = [r.votes for d in ours for r in d]
    t_pack = time_call(lambda: [pack_votes(v) for v in every], repeat=repeat)
    # The parser's own vote columns (kernel.parse_responses): the same responses as texts, parsed once
    # outside the timer on both sides, as the parsed responses above are.
    texts, authors, groups = _response_texts(ref)
    batch = parse_responses(texts, authors)
    assert [r.votes for r in batch.responses_R] == [r.votes for d in ours for r in d], "other votes parsed"

    def run_columns() -> Any:
        return pairwise_rewards(batch.votes(groups), n_P)

    assert run_columns().rewards_PG.tolist() == expected
    t_columns = time_call(run_columns, repeat=repeat)
    table = [
        ("reference (gather + loop)", t_ref * 1e3, num_votes / t_ref / 1e6, 1.0),
        (
            "ours from the parser's columns (ParsedBatch.votes + pairwise_rewards)",
            t_columns * 1e3,
            num_votes / t_columns / 1e6,
            t_ref / t_columns,
        ),
        (
            "ours (votes_from_responses + pairwise_rewards)",
            t_ours * 1e3,
            num_votes / t_ours / 1e6,
            t_ref / t_ours,
        ),
        ("  of which votes_from_responses", t_votes * 1e3, num_votes / t_votes / 1e6, t_ref / t_votes),
        (
            "ours, responses without vote_codes (per-vote path)",
            t_unpacked * 1e3,
            num_votes / t_unpacked / 1e6,
            t_ref / t_unpacked,
        ),
        (
            "pack_votes of every response (paid by the parser)",
            t_pack * 1e3,
            num_votes / t_pack / 1e6,
            t_ref / t_pack,
        ),
    ]
    title = (
        f"parsed responses → rewards: {num_debates:,} debates × {num_agents} agents × 120 votes "
        f"= {num_votes:,} votes"
    )
    print_table(title, ["implementation", "ms", "M votes/s", "× reference"], table)
    # What the columns cost the parser: parse_responses against parse_response one text at a time.
    sub = slice(0, len(texts) if quick else len(texts) // 8)
    t_one = time_call(
        lambda: [parse_response(t, a) for t, a in zip(texts[sub], authors[sub], strict=True)], repeat=7
    )
    t_batch = time_call(lambda: parse_responses(texts[sub], authors[sub]), repeat=7)
    print_table(
        f"the columns' cost at parse time ({len(texts[sub]):,} responses)",
        ["parser", "ms", "× one by one"],
        [
            ("parse_response, one by one", t_one * 1e3, 1.0),
            ("parse_responses (columns)", t_batch * 1e3, t_one / t_batch),
        ],
    )
    return {
        "parsed.columns_x_ref": t_ref / t_columns,
        "parsed.parse_batch_x_one_by_one": t_one / t_batch,
        "parsed.votes": num_votes,
        "parsed.x_ref": t_ref / t_ours,
        "parsed.votes_from_responses_x_ref": t_ref / t_votes,
        "parsed.unpacked_x_ref": t_ref / t_unpacked,
        "parsed.pack_x_ref": t_ref / t_pack,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks rewards", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (well under a minute)")
    args = parser.parse_args(argv)
    num_debates = 512 if args.quick else 4096
    votes_per_debate = 120
    uniform = np.full(num_debates, 5, dtype=np.int64)
    ragged = np.random.default_rng(1).integers(3, 9, num_debates).astype(np.int64)
    figures: dict[str, Any] = {"benchmark": "rewards", "quick": args.quick}
    figures.update(_run_case("uniform", uniform, votes_per_debate, args.quick))
    figures.update(_run_case("ragged", ragged, votes_per_debate, args.quick))
    figures.update(_run_parsed(args.quick))
    emit_json(figures)
    return 0
