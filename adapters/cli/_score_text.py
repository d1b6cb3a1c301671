"""``score``'s text on stdout: the per-debate table and the summary."""

from __future__ import annotations

from typing import Any

from adapters import pipeline

__all__: list[str] = []


def _nums(xs: Any, signed: bool = False) -> str:
    fmt = "{:+.2f}" if signed else "{:.2f}"
    return " ".join(fmt.format(float(x)).replace("+0.00", " 0.00").replace("-0.00", " 0.00") for x in xs)


def format_table(result: pipeline.BatchResult, *, limit: int | None = None) -> str:
    """The per-debate table: id, agents, rounds, end, parse failures, consensus, votes, malformed,
    rewards per agent, advantages per agent."""
    return render_table(table_rows(result, limit), len(result.replayed))


def table_rows(result: pipeline.BatchResult, limit: int | None) -> list[list[str]]:
    num = result.numeric
    rows: list[list[str]] = []
    shown = result.replayed if limit is None else result.replayed[: max(limit, 0)]
    for p, r in enumerate(shown):
        lo, hi = int(num.offsets_P1[p]), int(num.offsets_P1[p + 1])
        ident = r.debate.id if len(r.debate.id) <= 32 else r.debate.id[:31] + "…"
        rows.append(
            [
                ident,
                str(r.debate.num_agents),
                str(r.num_rounds),
                r.end,
                str(len(r.parse_failures)),
                "yes" if r.state.consensus else "no",
                str(int(num.pairwise.total_votes_P[p])),
                str(int(num.pairwise.malformed_P[p])),
                _nums(num.pairwise.rewards_PG[lo:hi]),
                _nums(num.advantages_PG[lo:hi], signed=True),
            ]
        )
    return rows


def render_table(rows: list[list[str]], total: int) -> str:
    header = ["id", "agents", "rounds", "end", "fail", "cons", "votes", "bad", "rewards", "advantages"]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]
    right = {1, 2, 4, 6, 7}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [line(header), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in rows]
    if len(rows) < total:
        lines.append(f"… {total - len(rows)} more debates (use --limit or --out)")
    return "\n".join(lines)


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def _fig(value: float | None, spec: str) -> str:
    """A summary figure; ``n/a`` for a non-finite one (None in :func:`pipeline.summary`)."""
    return "n/a" if value is None else format(value, spec)


def _stats(s: dict[str, float | None], signed: bool = False) -> str:
    sign = "+" if signed else ""
    return (
        f"mean {_fig(s['mean'], sign + '.3f')}, std {_fig(s['std'], '.3f')}, "
        f"range [{_fig(s['min'], sign + '.3f')}, {_fig(s['max'], sign + '.3f')}]"
    )


def format_summary(s: dict[str, Any]) -> str:
    """The batch summary (of :func:`pipeline.summary`) as readable text; a non-finite figure reads n/a."""
    scored, skipped = s["debates_scored"], s["debates_skipped"]
    lines = [
        f"source: {s.get('source', '?')} ({s['lines']} lines, {s['blank_lines']} blank)",
        f"debates: {scored} scored, {skipped} skipped"
        + (f" ({_counts(s['skipped_by_reason'])})" if skipped else ""),
        f"ends: {_counts(s['ends'])}; consensus rate {100 * s['consensus_rate']:.1f}%",
        f"turns: {s['turns_scored']} scored"
        + (f", {s['turns_ignored_after_end']} ignored after the end" if s["turns_ignored_after_end"] else "")
        + f"; parse failures {s['parse_failures']} ({100 * s['parse_failure_rate']:.1f}%)"
        + (f": {_counts(s['parse_failures_by_reason'])}" if s["parse_failures"] else ""),
        f"votes: {s['votes_total']} valid, {s['votes_malformed']} malformed"
        + (f", {s['votes_round1_dropped']} dropped (round 1)" if s["votes_round1_dropped"] else "")
        + f"; {s['votes_self_dropped']} self-comparisons dropped by the parser"
        + f", {s['comparison_lines_unreadable']} unreadable comparison lines",
        f"rewards: {_stats(s['rewards'])}",
        f"returns: {_stats(s['returns'])}",
        f"advantages: {_stats(s['advantages'], signed=True)}",
    ]
    if "datums" in s:
        d = s["datums"]
        lines.append(
            f"datums: {d['datums']} ({d['tokens']:,} tokens, {d['action_tokens']:,} action tokens); "
            f"mean sampler logprob {_fig(d['mean_logprob'], '.3f')}, "
            f"entropy estimate {_fig(d['entropy'], '.3f')}"
        )
    lines.append(f"policy {s['policy']}, reward {s['reward']}, estimator {s['estimator']}")
    return "\n".join(lines)
