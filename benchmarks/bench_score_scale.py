"""``debate-kernel score --out`` at scale: debates/s and peak memory against a minimal reference scorer.

``python -m benchmarks score_scale [--quick] [--sizes N ...]``. Workload: N debates (10 k, 100 k and
1 M; ``--quick``: 10 k) written on the fly to a temporary directory by tiling a pool of 2,000 debates of
:mod:`tools.samples` (2–5 agents, 1–3 rounds, one debate in 30 with token ids and logprobs) with fresh
ids; nothing is shipped. Each side runs as its own child process on the same file and writes its
per-debate results; the time is the child's wall time (start-up included), the memory its peak RSS
(``os.wait4``; with ``--jobs``, Linux reports the largest peak of the process and of the workers it
reaped). Ours:
``python -m adapters.cli score FILE --out OUT --quiet --json`` (the streaming CLI: records, datums and
the summary), in this process and with ``--jobs 0`` (one worker process per CPU; the output is checked to
be the same). The peer: ``benchmarks._score_peer``, a minimal scorer assembled
from the reference's steps (v1 parser, win rates, float32 centering, tinker-cookbook's
``trajectory_to_data``); see its docstring. Also ``debate-kernel report FILE -o OUT`` (the streamed
HTML report: our time and peak memory, no peer). Sides alternate per round; best of k rounds each. The
peer runs up to ``--peer-max`` (default 100 k) debates; at 1 M only our time and memory are measured.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import emit_json, print_table
from tools import samples

_POOL = 2000
_TOKEN_EVERY = 30


def write_transcript(path: Path, num_debates: int, *, seed: int = 7) -> int:
    """Writes ``num_debates`` debates (a tiled pool, fresh ids) to ``path``; returns the file's bytes."""
    pool = samples.generate_debates(min(num_debates, _POOL), seed=seed, token_every=_TOKEN_EVERY)
    texts = []
    for rec in pool:
        body = json.dumps({k: v for k, v in rec.items() if k != "id"}, ensure_ascii=False)
        texts.append(body[1:])  # without the opening brace: the id goes first
    with open(path, "w", encoding="utf-8") as f:
        for i in range(num_debates):
            f.write(f'{{"id": "bench-{i:07d}", {texts[i % len(texts)]}\n')
    return path.stat().st_size


def run_child(cmd: list[str]) -> tuple[float, int]:
    """Runs ``cmd``; returns its wall seconds and its peak RSS in bytes (Linux ru_maxrss is in KiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return seconds, int(usage.ru_maxrss) * 1024


def run_size(num_debates: int, rounds: int, tmp: Path, *, peer: bool = True) -> dict[str, Any]:
    """Times both sides on one generated file; returns the figures."""
    src = tmp / "in.jsonl"
    size = write_transcript(src, num_debates)
    ours_cmd = [sys.executable, "-m", "adapters.cli", "score", str(src), "--out", str(tmp / "ours.jsonl")]
    ours_cmd += ["--quiet", "--json"]
    jobs_cmd = [*ours_cmd, "--jobs", "0"]  # one worker process per CPU
    jobs_cmd[jobs_cmd.index(str(tmp / "ours.jsonl"))] = str(tmp / "ours_jobs.jsonl")
    peer_cmd = [sys.executable, "-m", "benchmarks._score_peer", str(src), str(tmp / "peer.jsonl")]
    report_cmd = [sys.executable, "-m", "adapters.cli", "report", str(src), "-o", str(tmp / "report.html")]
    best: dict[str, tuple[float, int]] = {}
    for _ in range(rounds):
        sides = [("ours", ours_cmd), ("jobs", jobs_cmd), ("report", report_cmd)]
        sides += [("peer", peer_cmd)] if peer else []
        for name, cmd in sides:
            t, rss = run_child(cmd)
            old = best.get(name)
            best[name] = (min(t, old[0]), max(rss, old[1])) if old else (t, rss)
    with open(tmp / "ours.jsonl", "rb") as f:
        assert sum(1 for _ in f) == num_debates
    assert filecmp.cmp(tmp / "ours.jsonl", tmp / "ours_jobs.jsonl", shallow=False), (
        "--jobs changed the output"
    )
    mine = {
        "debates": num_debates,
        "file_bytes": size,
        "ours_s": best["ours"][0],
        "ours_rss": best["ours"][1],
        "jobs": os.cpu_count() or 1,
        "jobs_s": best["jobs"][0],
        "jobs_rss": best["jobs"][1],  # the largest of the parent's and the workers' peaks
        "report_s": best["report"][0],
        "report_rss": best["report"][1],
    }
    if not peer:
        return mine
    else:
        with open(tmp / "peer.jsonl", "rb") as f:
            assert sum(1 for _ in f) == num_debates
    return {
        **mine,
        "peer_s": best["peer"][0],
        "peer_rss": best["peer"][1],
        "ratio": best["peer"][0] / best["ours"][0],
        "jobs_ratio": best["peer"][0] / best["jobs"][0],
    }


def main(argv: list[str]) -> int:
    """``python -m benchmarks score_scale``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks score_scale", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="10 k debates only")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="override the sizes")
    parser.add_argument(
        "--peer-max", type=int, default=100_000, help="run the peer only up to this size (it is slow)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds per size (default 3, 1 from 1 M)")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([10_000] if args.quick else [10_000, 100_000, 1_000_000])
    figures: dict[str, Any] = {"benchmark": "score_scale", "quick": bool(args.quick), "sizes": {}}
    rows = []
    for n in sizes:
        rounds = args.rounds or (3 if n < 1_000_000 else 1)
        with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
            res = run_size(n, rounds, Path(tmp), peer=n <= args.peer_max)
        mb = 1 << 20
        rows.append(
            [
                f"{n:,}",
                f"{res['file_bytes'] / mb:,.0f}",
                n / res["ours_s"],
                n / res["jobs_s"],
                n / res["peer_s"] if "peer_s" in res else "-",
                res.get("ratio", "-"),
                res.get("jobs_ratio", "-"),
                f"{res['ours_rss'] / mb:,.0f}",
                f"{res['peer_rss'] / mb:,.0f}" if "peer_rss" in res else "-",
                n / res["report_s"],
                f"{res['report_rss'] / mb:,.0f}",
            ]
        )
        figures["sizes"][str(n)] = res
        print_table(
            "score --out (child processes, best of rounds) vs the minimal reference scorer",
            [
                "debates",
                "file MB",
                "ours debates/s",
                f"--jobs {os.cpu_count() or 1} debates/s",
                "peer debates/s",
                "× peer",
                "--jobs × peer",
                "ours peak MB",
                "peer peak MB",
                "report debates/s",
                "report peak MB",
            ],
            rows,
        )
    emit_json(figures)
    return 0
