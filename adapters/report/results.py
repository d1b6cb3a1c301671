"""The HTML page of ``score`` results (``debate-kernel report results.jsonl``): what the records of
``score --out`` hold, drawn as they are, with nothing scored again.

The page is the transcript report's without the text (a results record keeps the figures, not the
turns): the batch summary's cards and plots, the lines ``score`` skipped, and per debate its end, vote
matrix, rewards and advantages as bars and in a table, its votes and its parse failures.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from adapters import _json
from adapters.pipeline.results import ResultReader, ScoredRecord, SkippedRecord
from adapters.pipeline.stages import END_REASONS
from adapters.report.html import (
    _CSS,
    _END_COLOURS,
    _JS,
    DEFAULT_MAX_DEBATES,
    Report,
    _card,
    _e,
    _fmt,
    figures_json,
    skipped_table,
    svg_agent_bars,
    svg_category_bars,
    svg_histogram,
    svg_vote_matrix,
)
from adapters.transcripts import LineTooLarge, TranscriptError

__all__ = ["render_results_report"]


def _vote_matrices(r: ScoredRecord) -> tuple[np.ndarray, np.ndarray]:
    """Valid votes of ``r`` as the transcript page counts them: wins[a, b] for ``a > b``; ties in both
    cells of ``a = b``."""
    n = r.num_agents
    wins = np.zeros((n, n), dtype=np.int64)
    ties = np.zeros((n, n), dtype=np.int64)
    for v in r.votes:
        if v.valid and v.op == ">":
            wins[v.a, v.b] += 1
        elif v.valid:
            ties[v.a, v.b] += 1
    return wins, ties + ties.T


def _number(x: float, signed: bool = False) -> str:
    """A figure of the table; ``n/a`` for one written as null (not finite when scored)."""
    return _fmt(x, signed) if math.isfinite(x) else "n/a"


def _drawn(figures: tuple[float, ...]) -> list[float]:
    """Figures for the bars: one written as null is drawn as no bar (0)."""
    return [x if math.isfinite(x) else 0.0 for x in figures]


def _section(r: ScoredRecord, index: int) -> str:
    colour = _END_COLOURS.get(r.end, "#9498a0")
    bad = r.votes_malformed
    out = [
        f'<details class="debate" id="debate-{index}" data-id="{_e(r.id)}" data-end="{_e(r.end)}" '
        f'data-votes="{r.votes_total}" data-malformed="{bad}" data-search="{_e(r.id.lower())}">',
        f"<summary><b>{_e(r.id)}</b> · {r.num_agents} agents · {r.rounds} round(s) · {r.votes_total} votes"
        + (f", {bad} malformed" if bad else "")
        + f'<span class="badge" style="background:{colour}">{_e(r.end)}</span></summary>',
        '<div class="body">',
        f'<div class="meta">line {r.line} of the scored input · {r.num_turns} turns scored'
        + ("" if r.datums is None else f" · {r.datums[0]} datums ({r.datums[2]:,} action tokens)")
        + "</div>",
        '<div class="dplots">',
        svg_vote_matrix(*_vote_matrices(r), title="valid votes: row beats column"),
        svg_agent_bars(_drawn(r.rewards), _drawn(r.advantages)),
        "</div>",
        "<table><thead><tr><th>agent</th><th>pairwise reward</th><th>step rewards</th><th>return</th>"
        "<th>advantage</th></tr></thead><tbody>",
    ]
    for i in range(r.num_agents):
        adv = r.advantages[i]
        out.append(
            f'<tr data-agent="{i}" data-reward="{r.rewards[i]!r}" data-advantage="{adv!r}">'
            f'<td>Agent {i}</td><td class="n">{_number(r.rewards[i])}</td>'
            f'<td class="n">{_number(r.step_rewards[i])}</td><td class="n">{_number(r.returns[i])}</td>'
            f'<td class="n">{_number(adv, signed=True)}</td></tr>'
        )
    out.append("</tbody></table>")
    if r.votes:
        out.append(
            f"<details><summary>all votes ({len(r.votes)})</summary><table><thead><tr><th>author</th>"
            "<th>vote</th><th>status</th></tr></thead><tbody>"
        )
        for v in r.votes:
            out.append(
                f"<tr><td>Agent {v.author}</td><td>Agent {v.a} {_e(v.op)} Agent {v.b}</td>"
                f'<td class="{"ok" if v.valid else "bad"}">{_e(v.reason)}</td></tr>'
            )
        out.append("</tbody></table></details>")
    for turn, agent, reason in r.parse_failures:
        out.append(
            f'<div class="field bad">turn {turn} (Agent {agent}): parse failure {_e(reason)} '
            "(step reward −1, the debate ends)</div>"
        )
    out.append("</div></details>")
    return "\n".join(out)


def _stats(x: np.ndarray) -> dict[str, float | None]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None}
    figures = (np.mean(x), np.std(x), np.min(x), np.max(x))
    return dict(zip(("mean", "std", "min", "max"), map(_json.round_or_none, figures), strict=True))


def render_results_report(
    lines: Iterable[str | bytes | LineTooLarge],
    *,
    source: str = "",
    title: str = "Score results",
    max_debates: int = DEFAULT_MAX_DEBATES,
) -> Report:
    """The page of the ``score --out`` records in ``lines`` (read by
    :class:`~adapters.pipeline.results.ResultReader`), in memory that grows with the detail sections
    shown and one float per agent and figure. ``Report.errors``: the lines of ``lines`` that were not
    results records (the records of lines ``score`` skipped are drawn, not errors).

    Examples:
        >>> from adapters import data, pipeline
        >>> from adapters.transcripts import debate_from_record
        >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
        >>> records = pipeline.debate_records(pipeline.score(debates))
        >>> report = render_results_report([_json.dumps(r) for r in records] + ["{"], max_debates=3)
        >>> report.shown, report.debates, [e.reason for e in report.errors]
        (3, 4, ['bad_json'])
        >>> '<b>4</b><span>debates scored</span>' in report.page, report.page.count('class="debate"')
        (True, 3)
    """
    reader = ResultReader()
    limit = max(max_debates, 0)
    sections: list[str] = []
    errors: list[TranscriptError] = []
    skipped: list[TranscriptError] = []
    values: dict[str, list[float]] = {"rewards": [], "returns": [], "advantages": []}
    votes_per_debate: list[int] = []
    ends: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    sizes: Counter[int] = Counter()
    counts: Counter[str] = Counter()
    for raw in lines:
        got = reader.feed(raw)
        if isinstance(got, TranscriptError):
            errors.append(got)
        elif isinstance(got, SkippedRecord):
            skipped.append(got.error)
        elif isinstance(got, ScoredRecord):
            if len(sections) < limit:
                sections.append(_section(got, len(sections)))
            values["rewards"] += got.rewards
            values["returns"] += got.returns
            values["advantages"] += got.advantages
            votes_per_debate.append(got.votes_total)
            ends[got.end] += 1
            failures.update(reason for _, _, reason in got.parse_failures)
            sizes[got.num_agents] += 1
            counts.update(turns=got.num_turns, votes=got.votes_total, malformed=got.votes_malformed)
            if got.datums is not None:
                counts.update(datums=got.datums[0], action_tokens=got.datums[2])
    scored = len(votes_per_debate)
    num_failures = sum(failures.values())
    figures: dict[str, Any] = {
        "lines": reader.num_lines,
        "blank_lines": reader.num_blank,
        "unreadable_lines": len(errors),
        "debates_scored": scored,
        "debates_skipped": len(skipped),
        "skipped_by_reason": dict(sorted(Counter(e.reason for e in skipped).items())),
        "turns_scored": counts["turns"],
        "ends": {k: ends.get(k, 0) for k in (*END_REASONS, *sorted(set(ends) - set(END_REASONS)))},
        "parse_failures": num_failures,
        "parse_failures_by_reason": dict(sorted(failures.items())),
        "parse_failure_rate": _json.round_or_none(num_failures / max(counts["turns"], 1)),
        "consensus_rate": _json.round_or_none(ends.get("consensus", 0) / max(scored, 1)),
        "votes_total": counts["votes"],
        "votes_malformed": counts["malformed"],
        **{name: _stats(np.asarray(v, dtype=np.float64)) for name, v in values.items()},
    }
    body = [
        f'<header><h1>{_e(title)}</h1><div class="meta">source <b>{_e(source)}</b> · the records of '
        "<b>score --out</b>, drawn as written (the options they were scored with are not in the file; "
        "nothing is scored again)"
        f" · {reader.num_lines} lines</div></header>",
        '<section id="summary"><h2>Batch summary</h2><div class="cards">',
        _card(scored, "debates scored"),
        _card(len(skipped), "lines skipped"),
        _card(counts["turns"], "turns scored"),
        _card(f"{100 * num_failures / max(counts['turns'], 1):.1f}%", f"parse failures ({num_failures})"),
        _card(f"{100 * ends.get('consensus', 0) / max(scored, 1):.1f}%", "debates ending in consensus"),
        _card(counts["votes"], "valid votes"),
        _card(counts["malformed"], "malformed votes"),
    ]
    if counts["datums"]:
        body.append(_card(counts["datums"], f"datums ({counts['action_tokens']:,} action tokens)"))
    if errors:
        body.append(_card(len(errors), "unreadable lines of this file"))
    votes = np.asarray(votes_per_debate, dtype=np.float64)
    body += [
        '</div><div class="plots">',
        svg_histogram(values["rewards"], title="pairwise rewards (all agents)"),
        svg_histogram(values["returns"], title="total returns", colour="#6cc5b0"),
        svg_histogram(values["advantages"], title="advantages", colour="#efb118"),
        svg_histogram(
            votes,
            title="valid votes per debate",
            colour="#a463f2",
            bins=min(20, int(votes.max(initial=0)) + 1),
        ),
        svg_category_bars(figures["ends"], title="how debates ended", colours=_END_COLOURS),
        svg_category_bars(figures["parse_failures_by_reason"], title="parse failures by reason"),
        svg_category_bars({f"{k} agents": v for k, v in sorted(sizes.items())}, title="debates by size"),
        "</div>",
    ]
    body.append(skipped_table("Lines score skipped", sorted(skipped, key=lambda e: e.line)))
    body.append(figures_json(figures))
    shown = len(sections)
    body.append(f'<section id="debates"><h2>Debates ({shown} of {scored} shown)</h2>')
    body.append(
        '<div class="toolbar"><input id="filter" type="search" placeholder="filter by id" '
        'aria-label="filter"><select id="end-filter" aria-label="end"><option value="">any end</option>'
        + "".join(f'<option value="{_e(k)}">{_e(k)}</option>' for k in figures["ends"])
        + '</select><button id="expand" type="button">expand all</button>'
        '<button id="collapse" type="button">collapse all</button><span class="meta"><span id="shown">'
        f"{shown}</span> shown</span></div>"
    )
    body.extend(sections)
    body.append("</section>")
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<script>{_JS}</script></body></html>\n"
    )
    return Report(page, shown, scored, errors)
