"""The scoring job, stage by stage, on synthetic debates built from the sample templates.

``python -m benchmarks score [--quick]``. Workload: N debates (1 k, 10 k, 100 k; ``--quick``: 1 k and
10 k) of 2–5 agents and 1–3 rounds written by :mod:`tools.samples` (a pool of distinct debates tiled
to N with fresh ids); one debate in 30 carries byte-level token ids and logprobs. Stages, each timed
on its own: read (JSON decode + transcript validation), parse (``parse_response`` on every turn),
replay (the episode state machine), votes (``votes_from_responses`` + ``validate_votes``), rewards
(``pairwise_rewards``), advantages (``total_returns`` + ``grouped_advantages``), datums
(``build_datums``). The host stages (read, parse, replay) run per turn and dominate; the numeric
stages run once per batch.

The peer, measured in the same run: the same numeric stages as a per-debate Python loop (one kernel
call per debate and stage, as a script that scores debates one at a time would do). Its results are
checked against the batched ones before the ratio is printed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import kernel
from adapters import pipeline
from adapters.transcripts import dumps_debate, read_transcripts
from benchmarks._common import emit_json, print_table
from tools import samples

_POOL = 2000
_TOKEN_EVERY = 30


def synthetic_jsonl(num_debates: int, *, seed: int = 7) -> str:
    """JSON Lines text of ``num_debates`` debates: a pool of distinct generated debates, tiled (new ids)."""
    pool = samples.generate_debates(min(num_debates, _POOL), seed=seed, token_every=_TOKEN_EVERY)
    lines = []
    for i in range(num_debates):
        rec = dict(pool[i % len(pool)])
        rec["id"] = f"bench-{i:06d}"
        lines.append(dumps_debate(rec))
    return "\n".join(lines) + "\n"


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _votes(replayed: list[pipeline.ReplayedDebate]) -> tuple[Any, Any, np.ndarray]:
    num_agents = np.fromiter((r.debate.num_agents for r in replayed), np.int64, len(replayed))
    votes = kernel.votes_from_responses([r.state.responses for r in replayed])
    return votes, kernel.validate_votes(votes, num_agents), num_agents


def _steps(replayed: list[pipeline.ReplayedDebate], offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = [
        int(offsets[p]) + r.debate.turns[k].agent for p, r in enumerate(replayed) for k in r.replay.accepted
    ]
    step = [r.replay.rewards[k] for r in replayed for k in r.replay.accepted]
    return np.asarray(rows, np.int64), np.asarray(step, np.float64)


def _peer(replayed: list[pipeline.ReplayedDebate]) -> tuple[np.ndarray, np.ndarray, int]:
    """The numeric stages one debate at a time; returns rewards, advantages and the datum count."""
    rewards, advantages, datums = [], [], 0
    for r in replayed:
        n = r.debate.num_agents
        votes = kernel.votes_from_responses([r.state.responses])
        kernel.validate_votes(votes, [n])
        pw = kernel.pairwise_rewards(votes, [n])
        rows = np.asarray([r.debate.turns[k].agent for k in r.replay.accepted], np.int64)
        step = np.asarray([r.replay.rewards[k] for k in r.replay.accepted], np.float64)
        ret = kernel.total_returns(step, rows, n, pw.rewards_PG)
        adv = kernel.grouped_advantages(ret, np.zeros(n, np.int64), 1).advantages
        rewards.append(pw.rewards_PG)
        advantages.append(adv)
        per_agent: list[list[Any]] = [[] for _ in range(n)]
        for k in r.replay.accepted:
            t = r.debate.turns[k]
            if t.action_tokens is not None:
                per_agent[t.agent].append((t.observation_tokens or (), t.action_tokens, t.logprobs))
        keep = [i for i in range(n) if per_agent[i]]
        if keep:
            traj = kernel.trajectories_from_lists([per_agent[i] for i in keep], np.asarray(adv)[keep])
            datums += kernel.build_datums(traj, mode="robust").datums.num_datums
    return np.concatenate(rewards), np.concatenate(advantages), datums


def run_size(num_debates: int, repeat: int) -> dict[str, Any]:
    """Times every stage on ``num_debates`` debates; returns the figures."""
    text = [synthetic_jsonl(num_debates)]
    t_read, read = _timed(lambda: read_transcripts(text[0]), repeat)
    text.clear()  # 100 k debates hold a few GB at the peak; free what is no longer needed
    debates = list(read.debates)
    assert len(debates) == num_debates and not read.errors
    turns = sum(len(d.turns) for d in debates)
    t_parse, parsed = _timed(lambda: pipeline.parse_turns(debates), repeat)
    t_replay, (replayed, errors) = _timed(lambda: pipeline.replay_debates(debates, parsed), repeat)
    assert not errors
    t_votes, (votes, _, num_agents) = _timed(lambda: _votes(replayed), repeat)
    t_rewards, pw = _timed(lambda: kernel.pairwise_rewards(votes, num_agents), repeat)
    offsets = np.concatenate(([0], np.cumsum(num_agents)))
    rows, step = _steps(replayed, offsets)

    def advantages() -> Any:
        ret = kernel.total_returns(step, rows, int(offsets[-1]), pw.rewards_PG)
        return kernel.grouped_advantages(ret, pw.group_ids_PG, len(replayed)).advantages

    t_adv, adv = _timed(advantages, repeat)
    t_episodes, episodes = _timed(lambda: pipeline.episodes_of(replayed), repeat)
    t_core, scored = _timed(lambda: kernel.score_episodes(episodes), repeat)
    datums = pipeline.datum_output(scored, "robust")
    t_peer, (peer_rewards, peer_adv, peer_datums) = _timed(
        lambda: _peer(replayed), 1 if num_debates > 10_000 else repeat
    )
    np.testing.assert_array_equal(peer_rewards, pw.rewards_PG)
    np.testing.assert_allclose(peer_adv, adv, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(scored.advantages_PG, adv)
    assert datums is not None and peer_datums == datums.stats["datums"]
    stages = {
        "read": t_read,
        "parse": t_parse,
        "replay": t_replay,
        "episodes": t_episodes,
        "score_episodes": t_core,
    }
    numeric_batched = t_core
    return {
        "debates": num_debates,
        "turns": turns,
        "datums": int(datums.stats["datums"]),
        "seconds": stages,
        "total_s": sum(stages.values()),
        "numeric_batched_s": numeric_batched,
        "votes_s": t_votes,
        "rewards_s": t_rewards,
        "advantages_s": t_adv,
        "numeric_peer_s": t_peer,
        "peer_ratio": t_peer / numeric_batched,
    }


def main(argv: list[str]) -> int:
    """``python -m benchmarks score [--quick]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks score", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 k and 10 k debates only")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="override the sizes")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    figures: dict[str, Any] = {"benchmark": "score", "quick": bool(args.quick), "sizes": {}}
    for n in sizes:
        repeat = 3 if n <= 1_000 else 1
        res = run_size(n, repeat=repeat)
        total = res["total_s"]
        rows = [
            [stage, sec, n / sec if sec > 0 else float("inf"), f"{100 * sec / total:.1f}%"]
            for stage, sec in res["seconds"].items()
        ]
        rows.append(["all stages", total, n / total, "100%"])
        print_table(
            f"score: {n:,} debates, {res['turns']:,} turns, {res['datums']:,} datums (best of {repeat})",
            ["stage", "seconds", "debates/s", "share"],
            rows,
        )
        host = sum(res["seconds"][s] for s in ("read", "parse", "replay"))
        print(
            f"host stages (read + parse + replay): {100 * host / total:.1f}% of the time; "
            f"parse alone {100 * res['seconds']['parse'] / total:.1f}%"
        )
        print_table(
            "numeric stages (votes + rewards + advantages + datums): batched vs per-debate loop",
            ["implementation", "seconds", "debates/s", "ratio"],
            [
                [
                    "batched (one kernel call per stage)",
                    res["numeric_batched_s"],
                    n / res["numeric_batched_s"],
                    1.0,
                ],
                [
                    "per-debate Python loop (peer)",
                    res["numeric_peer_s"],
                    n / res["numeric_peer_s"],
                    res["peer_ratio"],
                ],
            ],
        )
        print(f"peer / batched: {res['peer_ratio']:.1f}× slower")
        figures["sizes"][str(n)] = {
            "debates_per_s": {k: (n / v if v > 0 else None) for k, v in res["seconds"].items()},
            "seconds": res["seconds"],
            "parse_share": res["seconds"]["parse"] / total,
            "host_share": host / total,
            "numeric_batched_s": res["numeric_batched_s"],
            "numeric_peer_s": res["numeric_peer_s"],
            "peer_ratio": res["peer_ratio"],
            "turns": res["turns"],
            "datums": res["datums"],
        }
    emit_json(figures)
    return 0
