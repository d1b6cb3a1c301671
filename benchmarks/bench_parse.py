"""Agent-output parsing: MB/s on realistic 8 KB outputs, µs per short output, and ms per parse on
adversarial inputs.

``python -m benchmarks parse [--quick] [--skip-adversarial]``. Workload: seeded agent outputs of
1.5–16 KB, mean about 8 KB (reasoning blocks, some in the Qwen3 form without an opening tag,
preambles, fences, the five tags, 0–8 comparison lines in assorted syntax) parsed under both of our
policies; then short outputs (about 290 B: the five tags around eight vote lines, as
``bench_rewards`` writes them, 15 a debate), parsed alone and from texts to win-rate rewards: ours
(``parse_responses``, ``ParsedBatch.votes``, ``pairwise_rewards``) against the fork's parser (the
peer below) with the reference's win rates (``bench_rewards.reference_rewards``), where this
revision's kernel has that API.

The peer. tinker-cookbook 0.5.8 (PyPI) does not ship the multi-agent debate recipe, so its parser
cannot be called; the peer is a transcription of the v1 algorithm as REFERENCE.md §1 states it, step
for step (re.search for the preamble cut, re.sub for think markers, one DOTALL re.search per tag,
findall for votes). Our ``policy="reference"`` is checked to give exactly its fields on every
realistic output before timing.

Timing: CPU time (``time.process_time``; parsing is single-threaded). The three parsers run in
interleaved rounds (best round each), over the whole corpus and by output size, so a load change on
the machine hits all three alike; MB/s and ratios come from the same rounds. Adversarial families
are then timed from 10 KB to 1 MB; the peer runs in a child process and is skipped from the first
size where it needs more than 2 s.
"""

from __future__ import annotations

import argparse
import functools
import gc
import multiprocessing as mp
import random
import re
import time
from collections.abc import Callable
from typing import Any

from benchmarks._common import emit_json, print_table, time_call
from kernel import parse_response

# ------------------------------------------------------------------------------------------------
# The peer: the v1 algorithm, regex for regex.

_CUT = re.compile(r"<(solution|evaluation|comparison|consensus)\b")
_THINK = re.compile(r"</?think>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^```[a-zA-Z0-9_-]*\n")
_FENCE_CLOSE = re.compile(r"\n```$")
_TAG = {
    "solution": re.compile(r"<solution>(.*?)</solution>", re.DOTALL),
    "evaluation": re.compile(r"<evaluation>(.*?)</evaluation>", re.DOTALL),
    "comparison": re.compile(r"<comparison>(.*?)</comparison>", re.DOTALL | re.IGNORECASE),
    "consensus": re.compile(r"<consensus>(.*?)</consensus>", re.DOTALL | re.IGNORECASE),
    "consensus_reason": re.compile(r"<consensus_reason>(.*?)</consensus_reason>", re.DOTALL),
}
_VOTE = re.compile(r"Agent\s+(\d+)\s*([>=])\s*Agent\s+(\d+)")


def reference_peer(text: str, author_id: int = -1) -> dict[str, Any]:
    """The v1 parser: raises ValueError naming the first missing required tag."""
    t = text.strip()
    if t.startswith("```"):
        t = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", t)).strip()
    m = _CUT.search(t)
    if m:
        t = t[m.start() :]
    t = _THINK.sub("", t).strip()
    found = {name: pattern.search(t) for name, pattern in _TAG.items()}
    for name in ("solution", "evaluation", "consensus", "consensus_reason"):
        if found[name] is None:
            raise ValueError(f"Missing <{name}> tag")
    fields = {name: (m.group(1).strip() if m else "") for name, m in found.items()}
    votes = [(int(a), op, int(b)) for a, op, b in _VOTE.findall(fields["comparison"])]
    fields["consensus"] = fields["consensus"].upper() == "YES"  # type: ignore[assignment]
    fields["votes"] = [v for v in votes if author_id not in (v[0], v[2])]  # type: ignore[assignment]
    fields["raw"] = t
    return fields


def _ours_as_peer(text: str, author_id: int) -> dict[str, Any] | None:
    r = parse_response(text, author_id, policy="reference")
    if not r.ok:
        return None
    return {
        "solution": r.solution,
        "evaluation": r.evaluation,
        "comparison": r.comparison,
        "consensus": r.consensus,
        "consensus_reason": r.consensus_reason,
        "votes": [tuple(v) for v in r.votes],
        "raw": r.normalized_text,
    }


def _peer_or_none(text: str, author_id: int) -> dict[str, Any] | None:
    try:
        return reference_peer(text, author_id)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------
# Realistic outputs.

_WORDS = (
    "the answer follows from the constraint so we substitute x and simplify both sides then check "
    "the boundary case carefully because agent two made an arithmetic slip while agent one is right "
    "wait let me recompute the derivative at zero it is positive hence the function is increasing"
).split()


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + rng.choice(".!?:")


def _paragraphs(rng: random.Random, sentences: int) -> str:
    out = [_sentence(rng, 6, 18) for _ in range(sentences)]
    return "\n\n".join(" ".join(out[i : i + 3]) for i in range(0, len(out), 3))


def realistic_output(rng: random.Random, num_agents: int = 4) -> tuple[str, int]:
    """One agent output (1.5–16 KB, mean about 8 KB; 30 % without a reasoning block) and its author id."""
    author = rng.randrange(num_agents)
    others = [a for a in range(num_agents) if a != author]
    lines = []
    for _ in range(rng.choice((0, 1, 2, 3, 4, 6, 8))):
        a, b = rng.sample(others, 2) if len(others) > 1 else (others[0], author)
        form = rng.random()
        if form < 0.6:
            lines.append(f"Agent {a} {rng.choice('>>>=')} Agent {b}")
        elif form < 0.75:
            lines.append(f"- Agent {a} > Agent {b}: {_sentence(rng, 4, 10)}")
        elif form < 0.85:
            lines.append(f"Agent {a} < Agent {b}")
        elif form < 0.93:
            lines.append(f"Agent {a} > Agent {b} > Agent {author}")
        else:
            lines.append(f"**Agent {a}** > **Agent {b}**")
    body = (
        f"<solution>\n{_paragraphs(rng, rng.randint(12, 40))}\n</solution>\n\n"
        f"<evaluation>\n{_paragraphs(rng, rng.randint(4, 16))}\n</evaluation>\n\n"
        f"<comparison>\n{chr(10).join(lines) or 'N/A'}\n</comparison>\n\n"
        f"<consensus>{rng.choice(('YES', 'NO', 'NO'))}</consensus>\n\n"
        f"<consensus_reason>\n{_paragraphs(rng, rng.randint(2, 6))}\n</consensus_reason>"
    )
    if rng.random() < 0.1:
        body = f"```xml\n{body}\n```"
    if rng.random() < 0.2:
        body = _sentence(rng, 5, 12) + "\n\n" + body
    style = rng.random()
    thinking = _paragraphs(rng, rng.randint(45, 150))
    if style < 0.4:
        body = f"<think>\n{thinking}\n</think>\n\n{body}"
    elif style < 0.7:
        body = f"{thinking}\n</think>\n\n{body}"  # Qwen3: the prompt opened the block
    return body, author


# ------------------------------------------------------------------------------------------------
# Adversarial families.

_W = "<solution>x</solution><evaluation>y</evaluation><comparison>"
_E = "</comparison><consensus>YES</consensus><consensus_reason>z</consensus_reason>"


def _repeat(unit: str, prefix: str = "", suffix: str = "") -> Callable[[int], str]:
    return lambda n: prefix + unit * max((n - len(prefix) - len(suffix)) // len(unit), 1) + suffix


FAMILIES: dict[str, Callable[[int], str]] = {
    '"<solution>" * k': _repeat("<solution>"),
    '"<" * n': _repeat("<"),
    '"Agent 1 > " * n (in <comparison>)': _repeat("Agent 1 > ", _W, _E),
    '"<think>" * k': _repeat("<think>"),
    '"</think>" * k': _repeat("</think>"),
    "think markers, mixed case": _repeat("<Think>x</THINK>"),
    "unclosed tags": _repeat("<solution><evaluation><comparison><consensus><consensus_reason>"),
    "stray closing tags": _repeat("</solution></evaluation></consensus>", "<solution>"),
    "nested opening tags": _repeat("<solution><comparison>"),
    "deep nesting": lambda n: "<solution>" * (n // 21) + "x" + "</solution>" * (n // 21),
    "tags with attributes": _repeat("<comparison a='1'>x</comparison>"),
    "unclosed attributes": _repeat("<solution a='"),
    "cut near misses": _repeat("<consensus_reason"),
    "digit line (vote id)": _repeat("7", _W + "Agent 1 > Agent ", _E),
    "vote lines": _repeat("Agent 1 < Agent 2 = Agent 3\n", _W, _E),
    "agent, long spaces": _repeat("Agent " + " " * 40, _W, _E),
    "chain, long spaces": _repeat("Agent 1 >" + " " * 30, _W, _E),
    "vote tail letters": _repeat("a", _W + "Agent 1 > Agent 2: ", _E),
    "vote tail agents": _repeat("agent ", _W + "- Agent 1 > Agent 2 ", _E),
    "whitespace": _repeat(" \t\u00a0\n"),
    "zero-width whitespace": _repeat(" \u200b\n"),
}

_PEER_LIMIT_S = 2.0


def _peer_child(text: str, repeat: int, queue: Any) -> None:
    best, spent = float("inf"), 0.0
    for _ in range(repeat):  # best of `repeat`, while the runs fit in the limit
        start = time.perf_counter()
        _peer_or_none(text, 1)
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
        if spent > _PEER_LIMIT_S:
            break
    queue.put(best)


def _time_peer(text: str, repeat: int) -> float | None:
    """Best seconds of the peer on ``text`` in a child process, or None when one run exceeds the limit."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peer_child, args=(text, repeat, queue))
    proc.start()
    proc.join(2 * _PEER_LIMIT_S + 1)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None
    seconds = float(queue.get())
    return seconds if seconds <= _PEER_LIMIT_S else None


# ------------------------------------------------------------------------------------------------


_SIZE_BUCKETS = (("< 6 KB", 0, 6000), ("6–10 KB", 6000, 10000), ("10 KB +", 10000, 1 << 62))
_CHUNK = 10  # outputs timed together


def _parsers() -> dict[str, Callable[[str, int], object]]:
    return {
        "ours robust": parse_response,
        "ours reference": functools.partial(parse_response, policy="reference"),
        "peer (v1 regex)": _peer_or_none,
    }


def _time_by_size(corpus: list[tuple[str, int]], rounds: int) -> dict[str, dict[str, float]]:
    """Seconds each parser needs for each size bucket of ``corpus`` (and "all"), robust to load.

    The corpus is cut into chunks of ``_CHUNK`` outputs of one bucket; in every round each parser
    parses each chunk in turn, and a chunk's time is its best round. A burst of load on the machine
    then only costs the chunks it hits in one round, and hits the three parsers alike.
    """
    parsers = _parsers()
    chunks = []
    for label, lo, hi in _SIZE_BUCKETS:
        outputs = [(t, a) for t, a in corpus if lo <= len(t.encode()) < hi]
        chunks += [(label, outputs[i : i + _CHUNK]) for i in range(0, len(outputs), _CHUNK)]

    def runner(parse: Callable[[str, int], object], chunk: list[tuple[str, int]]) -> Callable[[], None]:
        def run() -> None:  # returns None: the harness's block() would otherwise walk the results
            for text, author in chunk:
                parse(text, author)

        return run

    runs = [{name: runner(parse, chunk) for name, parse in parsers.items()} for _, chunk in chunks]
    best = [dict.fromkeys(parsers, float("inf")) for _ in chunks]
    for _ in range(rounds):
        for run, chunk_best in zip(runs, best, strict=True):
            for name, fn in run.items():
                start = time.process_time()
                fn()
                chunk_best[name] = min(chunk_best[name], time.process_time() - start)
    totals: dict[str, dict[str, float]] = {"all": dict.fromkeys(parsers, 0.0)}
    for (label, _), chunk_best in zip(chunks, best, strict=True):
        totals.setdefault(label, dict.fromkeys(parsers, 0.0))
        for name, seconds in chunk_best.items():
            totals[label][name] += seconds
            totals["all"][name] += seconds
    return totals


def short_outputs(num_debates: int, seed: int = 2) -> tuple[list[str], list[int], list[int]]:
    """Short agent outputs (texts, authors, debates): per debate 5 agents × 3 responses, each the five
    tags around 8 vote lines ``Agent a > Agent b`` (70 %) or ``=``, a and b other agents."""
    rng = random.Random(seed)
    texts, authors, groups = [], [], []
    for debate in range(num_debates):
        for k in range(15):
            author = k % 5
            others = [i for i in range(5) if i != author]
            lines = [
                f"Agent {rng.choice(others)} {'>' if rng.random() < 0.7 else '='} Agent {rng.choice(others)}"
                for _ in range(8)
            ]
            texts.append(
                f"<solution>42</solution><evaluation>fine</evaluation><comparison>{chr(10).join(lines)}"
                "</comparison><consensus>NO</consensus><consensus_reason>not yet</consensus_reason>"
            )
            authors.append(author)
            groups.append(debate)
    return texts, authors, groups


def _fork_rewards(texts: list[str], authors: list[int], per_debate: int) -> list[float]:
    """Texts to win rates the fork's way: the v1 parser, then the reference's loop per debate."""
    from benchmarks.bench_rewards import reference_rewards

    debates = []
    for lo in range(0, len(texts), per_debate):
        votes = []
        for text, author in zip(texts[lo : lo + per_debate], authors[lo : lo + per_debate], strict=True):
            parsed = _peer_or_none(text, author)
            if parsed is not None:
                votes += [(author, a, op, b) for a, op, b in parsed["votes"]]
        debates.append((5, votes))
    return reference_rewards(debates)


def _native_parser() -> Callable[[str, int], object] | None:
    """``parse_response`` with the compiled reader of benchmarks/prototypes/parse_native in front (what
    DEBATE_KERNEL_NATIVE_PARSE=1 plugs in: the reader's response, or the pure-Python parser's where the
    reader returns None), where that prototype is installed; else None."""
    try:
        from debate_parse_native import read_usual  # type: ignore[import-not-found]
    except ImportError:
        return None

    def parse(text: str, author: int) -> object:
        got = read_usual(text, author)
        return parse_response(text, author) if got is None else got

    return parse


def _run_short(quick: bool, rounds: int) -> dict[str, float]:
    texts, authors, groups = short_outputs(160 if quick else 800)
    contenders: dict[str, Callable[[], object]] = {
        "ours robust": lambda: [parse_response(t, a) for t, a in zip(texts, authors, strict=True)],
        "peer (v1 regex)": lambda: [_peer_or_none(t, a) for t, a in zip(texts, authors, strict=True)],
    }
    native = _native_parser()
    if native is not None:  # the optional compiled prototype, where it is installed
        contenders["native prototype"] = lambda: [native(t, a) for t, a in zip(texts, authors, strict=True)]
    try:  # texts -> rewards: the batch API (not in every revision this script may measure)
        import numpy as np

        from kernel import pairwise_rewards, parse_responses

        fork = _fork_rewards(texts, authors, 15)
    except ImportError:
        pass
    else:
        n_P = np.full(len(texts) // 15, 5)

        def ours_rewards() -> object:
            return pairwise_rewards(parse_responses(texts, authors).votes(groups), n_P).rewards_PG

        if np.asarray(ours_rewards()).tolist() != fork:
            raise AssertionError("short outputs: our rewards differ from the fork's")
        contenders["ours: texts -> rewards"] = ours_rewards
        contenders["fork: texts -> rewards"] = lambda: _fork_rewards(texts, authors, 15)
    best = dict.fromkeys(contenders, float("inf"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in contenders.items():
                start = time.process_time()
                fn()
                best[name] = min(best[name], time.process_time() - start)
    finally:
        gc.enable()
    us = {name: s / len(texts) * 1e6 for name, s in best.items()}
    peer = {
        "ours robust": "peer (v1 regex)",
        "native prototype": "peer (v1 regex)",
        "ours: texts -> rewards": "fork: texts -> rewards",
    }
    print_table(
        f"Short outputs: {len(texts):,} of {sum(map(len, texts)) / len(texts):.0f} B"
        " (CPU µs a text, best round)",
        ["contender", "µs a text", "× fork"],
        [[name, t, f"{us[peer[name]] / t:.2f}" if name in peer else "1"] for name, t in us.items()],
    )
    figures = {
        "bytes_mean": sum(map(len, texts)) / len(texts),
        "robust_us": us["ours robust"],
        "peer_us": us["peer (v1 regex)"],
        "robust_x_peer": us["peer (v1 regex)"] / us["ours robust"],
    }
    if "native prototype" in us:
        figures["native_us"] = us["native prototype"]
        figures["native_x_peer"] = us["peer (v1 regex)"] / us["native prototype"]
    if "ours: texts -> rewards" in us:
        figures["rewards_us"] = us["ours: texts -> rewards"]
        figures["fork_rewards_us"] = us["fork: texts -> rewards"]
        figures["rewards_x_fork"] = us["fork: texts -> rewards"] / us["ours: texts -> rewards"]
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks parse")
    parser.add_argument("--quick", action="store_true", help="smaller corpus and fewer repeats (CI smoke)")
    parser.add_argument("--skip-adversarial", action="store_true", help="realistic and short outputs only")
    args = parser.parse_args(argv)
    count, repeat, rounds = (100, 5, 15) if args.quick else (500, 7, 30)
    sizes = (10_000, 100_000, 1_000_000)

    rng = random.Random(0)
    corpus = [realistic_output(rng) for _ in range(count)]
    agree = sum(_ours_as_peer(t, a) == _peer_or_none(t, a) for t, a in corpus)
    if agree != len(corpus):
        print(f"policy='reference' differs from the peer on {len(corpus) - agree} of {len(corpus)} outputs")
        return 1
    ok_robust = sum(parse_response(t, a).ok for t, a in corpus)
    ok_peer = sum(_peer_or_none(t, a) is not None for t, a in corpus)
    corpora = {"all": corpus}
    for label, lo, hi in _SIZE_BUCKETS:
        corpora[label] = [(t, a) for t, a in corpus if lo <= len(t.encode()) < hi]

    gc.collect()
    gc.disable()  # as timeit does: collector pauses depend on the harness's heap, not the parser
    try:
        seconds = _time_by_size(corpus, rounds)
    finally:
        gc.enable()
    mbytes = {label: sum(len(t.encode()) for t, _ in c) / 1e6 for label, c in corpora.items()}
    peer = "peer (v1 regex)"
    overall = seconds["all"]
    rows = [
        [
            name,
            mbytes["all"] / s,
            len(corpus) / s / 1e3,
            overall[peer] / s,
            ok_robust if "robust" in name else ok_peer,
        ]
        for name, s in overall.items()
    ]
    print_table(
        f"Realistic outputs: {len(corpus)} outputs, {mbytes['all']:.2f} MB, mean"
        f" {mbytes['all'] * 1e3 / len(corpus):.1f} KB (policy='reference' equals the peer on all {agree})",
        ["parser", "MB/s", "k outputs/s", "speed vs peer", "parsed ok"],
        rows,
    )
    by_size = {
        label: {name: secs[peer] / s for name, s in secs.items() if name != peer}
        for label, secs in seconds.items()
    }
    print_table(
        "Speed vs peer by output size (same rounds, CPU time; > 1 means faster than the peer)",
        ["outputs", "count", "peer MB/s", "ours robust", "ours reference"],
        [
            [label, len(corpora[label]), mbytes[label] / seconds[label][peer], *by_size[label].values()]
            for label in seconds
        ],
    )
    short = _run_short(args.quick, rounds // 3)
    realistic = {
        "outputs": len(corpus),
        "megabytes": mbytes["all"],
        "mb_per_s": {name: mbytes["all"] / s for name, s in overall.items()},
        "ratio_vs_peer": by_size["all"],
        "ratio_vs_peer_by_size": {label: by_size[label] for label in seconds if label != "all"},
        "reference_agrees_with_peer": agree,
    }
    if args.skip_adversarial:
        emit_json({"bench": "parse", "quick": args.quick, "realistic": realistic, "short": short})
        return 0

    adversarial: dict[str, dict[str, dict[str, float | None]]] = {}
    table = []
    for family, make in FAMILIES.items():
        adversarial[family] = {}
        peer_alive = True
        for size in sizes:
            text = make(size)
            robust = time_call(functools.partial(parse_response, text, 1), repeat=repeat)
            reference = time_call(
                functools.partial(parse_response, text, 1, policy="reference"), repeat=repeat
            )
            peer_s = _time_peer(text, repeat) if peer_alive else None
            peer_alive = peer_s is not None
            adversarial[family][str(size)] = {
                "robust_ms": robust * 1e3,
                "reference_ms": reference * 1e3,
                "peer_ms": None if peer_s is None else peer_s * 1e3,
            }
            peer_cell = "skipped (>2s)" if peer_s is None else f"{peer_s * 1e3:,.1f}"
            table.append([family, f"{len(text) / 1e3:,.0f} KB", robust * 1e3, reference * 1e3, peer_cell])
    print_table(
        "Adversarial inputs: ms per parse (best of runs; the peer in a child process, stopped past 2 s)",
        ["family", "size", "ours robust", "ours reference", "peer (v1 regex)"],
        table,
    )
    worst = {}
    for policy in ("robust", "reference"):
        family = max(adversarial, key=lambda f: adversarial[f][str(sizes[-1])][f"{policy}_ms"] or 0.0)
        worst[policy] = {"ms": adversarial[family][str(sizes[-1])][f"{policy}_ms"], "family": family}
    # Linear time: ten times the text takes about ten times as long (a quadratic parser: a hundred).
    growth = {
        family: {
            policy: (by[str(sizes[-1])][f"{policy}_ms"] or 0.0)
            / max(by[str(sizes[-2])][f"{policy}_ms"] or 0.0, 1e-6)
            for policy in ("robust", "reference")
        }
        for family, by in adversarial.items()
    }
    print_table(
        f"Growth: time at {sizes[-1] // 1000:,} KB / time at {sizes[-2] // 1000:,} KB (linear: about 10)",
        ["family", "ours robust", "ours reference"],
        [[family, g["robust"], g["reference"]] for family, g in growth.items()],
    )
    steepest = {p: max(growth, key=lambda f, p=p: growth[f][p]) for p in ("robust", "reference")}
    print(
        "\nworst ms per 1 MB parse: "
        + ", ".join(f"{p} {w['ms']:.1f} ({w['family']})" for p, w in worst.items())
        + "\nsteepest growth (x10 size): "
        + ", ".join(f"{p} {growth[f][p]:.1f}x ({f})" for p, f in steepest.items())
        + "\nspeed vs peer on realistic outputs: "
        + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in by_size["all"].items())
    )
    emit_json(
        {
            "bench": "parse",
            "quick": args.quick,
            "realistic": realistic,
            "short": short,
            "adversarial_ms": adversarial,
            "worst_1mb_ms": {policy: w["ms"] for policy, w in worst.items()},
            "worst_1mb_family": {policy: w["family"] for policy, w in worst.items()},
            "growth_x10": growth,
        }
    )
    return 0
