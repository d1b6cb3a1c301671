"""The HTML report: one self-contained page about a scored batch (``debate-kernel report``).

The page has no external resources (inline CSS, JS and SVG): a batch summary with plots (reward and
advantage histograms, how debates ended, parse failures by reason, votes per debate), the lines that
were skipped and why, and per debate its question, every round's agents with their parsed fields, votes
and raw text (collapsible), a vote-matrix heatmap and the rewards and advantages as bars. Every piece of
text from the input is HTML-escaped.
"""

from __future__ import annotations

import html
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

import kernel
from adapters import _json, pipeline
from adapters.transcripts import TranscriptError
from kernel.checks import check_type

__all__ = ["DEFAULT_MAX_DEBATES", "SHOWN_CHARS", "Report", "render_html", "render_report", "svg_histogram"]

DEFAULT_MAX_DEBATES = 500

SHOWN_CHARS = 10_000
"""The most characters of one text (a parsed field, a turn's raw text) that a debate's section shows; the
rest is counted, not shown. A page is for reading, and so its size, and the memory that builds it, grow
with the debates shown, not with the length of their turns (a 20 M-token turn is one line of the page)."""


# ------------------------------------------------------------------------------------------------
# Small helpers


def _e(x: Any) -> str:
    """HTML-escapes any value (quotes included), for text and attribute values alike.

    A lone surrogate (not Unicode text, so not writable as UTF-8; e.g. from a command-line argument
    with bytes that are not UTF-8) is shown as its ``\\udcxx`` escape.
    """
    text = str(x)
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(text, quote=True)


def _fmt(x: float, signed: bool = False) -> str:
    s = f"{x:+.3f}" if signed else f"{x:.3f}"
    return "0.000" if s in ("+0.000", "-0.000") else s


_FLOAT_MAX = sys.float_info.max
_PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5")
_END_COLOURS = {"consensus": "#3ca951", "max_rounds": "#4269d0", "parse_error": "#ff725c", "open": "#9498a0"}


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values in ``[lo, hi]``: multiples of 1, 2, 2.5 or 5 × 10^k, about ``n`` of them.

    Total and bounded: at most ``max(n, 1) + 1`` distinct ticks, sorted, all within ``[lo, hi]``, for any
    floats (a range too narrow for its magnitude gives ``[lo]``; non-finite or reversed bounds give
    ``[lo]`` or nothing). Ticks are computed as ``start + k·step``, never by repeated addition.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [lo] if math.isfinite(lo) else []
    n = max(n, 1)
    raw = hi / n - lo / n  # never overflows; may underflow to 0
    if not (hi > lo and math.isfinite(raw) and raw > 0):
        return [lo]
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)
    if not step > 0:  # subnormal ranges: 10^k underflows to 0 below about 1e-323
        return [lo]
    start = math.ceil(lo / step) * step
    ticks: list[float] = []
    for k in range(n + 1):
        t = start + k * step
        if not math.isfinite(t):
            break
        # Keep the digits down to a hundredth of the step: drops noise such as 0.30000000000000004.
        places = math.floor(math.log10(abs(t))) - math.floor(math.log10(step)) + 3 if t else 1
        t = float(f"{t:.{min(max(places, 1), 17)}g}")
        if lo <= t <= hi and (not ticks or t > ticks[-1]):
            ticks.append(t)
    return ticks or [lo]


def _tick_label(t: float) -> str:
    return f"{t:g}"


# ------------------------------------------------------------------------------------------------
# SVG plots (all generated here, no library)


def svg_histogram(values: npt.ArrayLike, *, title: str, bins: int = 20, colour: str = "#4269d0") -> str:
    """A histogram of ``values`` as an inline SVG with axes, ticks and per-bar tooltips.

    Examples:
        >>> import re
        >>> svg = svg_histogram([0.1, 0.2, 0.2, 0.9], title="rewards", bins=4)
        >>> svg.startswith("<svg"), svg.count("<rect"), re.findall(r"<title>(.*?)</title>", svg)
        (True, 4, ['[0.1, 0.3): 3', '[0.3, 0.5): 0', '[0.5, 0.7): 0', '[0.7, 0.9): 1'])
    """
    w, h, ml, mr, mt, mb = 360, 200, 40, 10, 24, 30
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    parts = [_svg_open(w, h, title)]
    parts.append(f'<text x="{ml}" y="15" class="t">{_e(title)}</text>')
    if x.size == 0:
        parts.append(f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle" class="m">no data</text></svg>')
        return "".join(parts)
    lo, hi = float(x.min()), float(x.max())
    # Bins need distinct float edges: widen a range too narrow for its magnitude (a constant included).
    pad = max(abs(lo), abs(hi)) * 1e-6
    if hi - lo <= max(pad, 1e-12):
        pad = pad or 0.5
        lo, hi = max(lo - pad, -_FLOAT_MAX), min(hi + pad, _FLOAT_MAX)
    if not math.isfinite(hi - lo):  # beyond ±9e307 the width overflows: bin the halves
        x, lo, hi = x / 2, lo / 2, hi / 2
        scale = 2.0
    else:
        scale = 1.0
    counts, edges = np.histogram(x, bins=bins, range=(lo, hi))
    top = max(int(counts.max()), 1)
    pw, ph = w - ml - mr, h - mt - mb

    def sx(v: float) -> float:
        return ml + (v - lo) / (hi - lo) * pw

    def sy(c: float) -> float:
        return mt + ph - c / top * ph

    for k, c in enumerate(counts):
        x0, x1 = sx(edges[k]), sx(edges[k + 1])
        tip = f"[{edges[k] * scale:.3g}, {edges[k + 1] * scale:.3g}): {int(c)}"
        parts.append(
            f'<rect x="{x0 + 0.5:.1f}" y="{sy(c):.1f}" width="{max(x1 - x0 - 1, 0.5):.1f}" '
            f'height="{ph - (sy(c) - mt):.1f}" fill="{colour}"><title>{_e(tip)}</title></rect>'
        )
    parts.append(_axes(ml, mt, pw, ph))
    for t in _nice_ticks(lo, hi):
        parts.append(
            f'<text x="{sx(t):.1f}" y="{mt + ph + 14}" text-anchor="middle" class="a">'
            f"{_tick_label(t * scale)}</text>"
        )
    for t in _nice_ticks(0, top, 4):
        parts.append(
            f'<text x="{ml - 4}" y="{sy(t) + 3:.1f}" text-anchor="end" class="a">{_tick_label(t)}</text>'
        )
    parts.append(
        f'<text x="{w - mr}" y="15" text-anchor="end" class="a">'
        f"n={x.size}, mean={_mean(x) * scale:.3g}</text></svg>"
    )
    return "".join(parts)


def _mean(x: npt.NDArray[np.float64]) -> float:
    """The mean of finite ``x``, without overflow: the sum runs over ``x`` divided by its largest |x|
    (values near the float64 maximum sum past it)."""
    big = float(np.max(np.abs(x)))
    return float(np.mean(x / big)) * big if big > 0 else 0.0


def svg_category_bars(counts: dict[str, int], *, title: str, colours: dict[str, str] | None = None) -> str:
    """Horizontal bars, one per category, with the count at the end of each bar."""
    items = list(counts.items())
    row = 22
    w, ml, mr, mt = 360, 130, 40, 24
    h = mt + max(len(items), 1) * row + 8
    parts = [_svg_open(w, h, title), f'<text x="4" y="15" class="t">{_e(title)}</text>']
    if not items:
        parts.append(f'<text x="{w / 2}" y="{mt + 14}" text-anchor="middle" class="m">none</text></svg>')
        return "".join(parts)
    top = max(max(v for _, v in items), 1)
    pw = w - ml - mr
    for k, (name, v) in enumerate(items):
        y = mt + k * row
        colour = (colours or {}).get(name, _PALETTE[k % len(_PALETTE)])
        bw = v / top * pw
        parts.append(f'<text x="{ml - 6}" y="{y + 14}" text-anchor="end" class="a">{_e(name)}</text>')
        parts.append(
            f'<rect x="{ml}" y="{y + 3}" width="{bw:.1f}" height="{row - 6}" fill="{colour}">'
            f"<title>{_e(name)}: {v}</title></rect>"
        )
        parts.append(f'<text x="{ml + bw + 4:.1f}" y="{y + 14}" class="a">{v}</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_vote_matrix(wins: np.ndarray, ties: np.ndarray, *, title: str = "votes") -> str:
    """Heatmap of an N×N vote matrix: cell (i, j) counts valid votes 'Agent i > Agent j' (darker =
    more); ``=k`` marks k ties between i and j (shown in both of their cells)."""
    n = int(wins.shape[0])
    cell = 34 if n <= 5 else max(16, 170 // max(n, 1))
    ml, mt = 54, 40
    w, h = max(ml + n * cell + 10, 190), mt + n * cell + 10
    top = max(int(wins.max()) if wins.size else 0, 1)
    parts = [_svg_open(w, h, title), f'<text x="4" y="13" class="t">{_e(title)}</text>']
    parts.append(
        f'<text x="{ml + n * cell / 2:.1f}" y="26" text-anchor="middle" class="a">loser (column)</text>'
    )
    for j in range(n):
        parts.append(
            f'<text x="{ml + j * cell + cell / 2:.1f}" y="{mt - 3}" text-anchor="middle" class="a">{j}</text>'
        )
    for i in range(n):
        y = mt + i * cell
        parts.append(
            f'<text x="{ml - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end" class="a">A{i} &gt;</text>'
        )
        for j in range(n):
            x = ml + j * cell
            if i == j:
                parts.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" class="diag"/>')
                continue
            wv, tv = int(wins[i, j]), int(ties[i, j])
            alpha = wv / top
            fill = f"rgba(66,105,208,{0.08 + 0.92 * alpha:.3f})" if wv else "#f4f5f7"
            label = (f"{wv}" if wv else "") + (f" ={tv}" if tv else "") or "·"
            tip = f"Agent {i} > Agent {j}: {wv} vote(s); Agent {i} = Agent {j}: {tv}"
            text_cls = "cl" if alpha > 0.55 else "cd"
            parts.append(
                f'<g><title>{_e(tip)}</title><rect x="{x}" y="{y}" width="{cell}" height="{cell}" '
                f'fill="{fill}" stroke="#fff"/><text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" '
                f'text-anchor="middle" class="{text_cls}">{_e(label)}</text></g>'
            )
    parts.append("</svg>")
    return "".join(parts)


def svg_agent_bars(
    rewards: Sequence[float], advantages: Sequence[float], *, title: str = "reward / advantage"
) -> str:
    """Per agent: the pairwise reward and the advantage as bars around a zero line."""
    n = len(rewards)
    w, h, ml, mr, mt, mb = max(200, 60 + n * 56), 170, 34, 10, 22, 24
    vals = [*rewards, *advantages, 0.0, 1.0]
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-12:
        hi = lo + 1
    ph, pw = h - mt - mb, w - ml - mr

    def sy(v: float) -> float:
        return mt + (hi - v) / (hi - lo) * ph

    parts = [_svg_open(w, h, title), f'<text x="4" y="13" class="t">{_e(title)}</text>']
    parts.append(
        f'<text x="{w - mr}" y="13" text-anchor="end" class="a"><tspan fill="#4269d0">■ reward</tspan> '
        '<tspan fill="#efb118">■ advantage</tspan></text>'
    )
    for t in _nice_ticks(lo, hi, 4):
        parts.append(f'<line x1="{ml}" x2="{w - mr}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>')
        parts.append(
            f'<text x="{ml - 4}" y="{sy(t) + 3:.1f}" text-anchor="end" class="a">{_tick_label(t)}</text>'
        )
    zero = sy(0.0)
    slot = pw / max(n, 1)
    bw = min(18.0, slot / 2.6)
    for i in range(n):
        cx = ml + slot * i + slot / 2
        for k, (v, colour, name) in enumerate(
            ((rewards[i], "#4269d0", "reward"), (advantages[i], "#efb118", "advantage"))
        ):
            x = cx - bw - 1 + k * (bw + 2)
            y0, y1 = sorted((zero, sy(v)))
            parts.append(
                f'<rect x="{x:.1f}" y="{y0:.1f}" width="{bw:.1f}" height="{max(y1 - y0, 0.5):.1f}" '
                f'fill="{colour}"><title>Agent {i} {name}: {_fmt(v, signed=k == 1)}</title></rect>'
            )
        parts.append(f'<text x="{cx:.1f}" y="{h - 8}" text-anchor="middle" class="a">A{i}</text>')
    parts.append(f'<line x1="{ml}" x2="{w - mr}" y1="{zero:.1f}" y2="{zero:.1f}" class="zero"/></svg>')
    return "".join(parts)


def _svg_open(w: float, h: float, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'role="img" aria-label="{_e(label)}">'
    )


def _axes(ml: float, mt: float, pw: float, ph: float) -> str:
    return (
        f'<line x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}" class="ax"/>'
        f'<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}" class="ax"/>'
    )


# ------------------------------------------------------------------------------------------------
# The page


_CSS = """
:root{--fg:#1d2330;--mute:#5d6472;--line:#dfe2e8;--bg:#fff;--soft:#f6f7f9;--bad:#c23b22;--good:#23803a}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
margin:0;padding:0 24px 40px}
header{padding:18px 0 8px;border-bottom:1px solid var(--line);margin-bottom:16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px}h3{font-size:15px;margin:14px 0 6px}
.meta{color:var(--mute)}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 12px;min-width:130px;background:var(--soft)}
.card b{display:block;font-size:20px}.card span{color:var(--mute);font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:14px}
.plots svg,.dplots svg{border:1px solid var(--line);border-radius:6px;background:#fff}
svg .t{font-size:12px;font-weight:600;fill:#1d2330}svg .a{font-size:10px;fill:#5d6472}
svg .m{font-size:12px;fill:#9498a0}svg .ax{stroke:#9498a0}svg .grid{stroke:#eceef2}
svg .zero{stroke:#1d2330;stroke-width:1}svg .diag{fill:#e4e6eb}
svg .cl{font-size:11px;fill:#fff}svg .cd{font-size:11px;fill:#1d2330}
table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--soft)}td.n{text-align:right;font-variant-numeric:tabular-nums}
.toolbar{display:flex;gap:8px;align-items:center;margin:8px 0 12px;flex-wrap:wrap}
.toolbar input{padding:4px 8px;min-width:260px}
details.debate{border:1px solid var(--line);border-radius:8px;margin:8px 0;background:#fff}
details.debate>summary{cursor:pointer;padding:8px 12px;background:var(--soft);border-radius:8px}
details.debate[open]>summary{border-bottom:1px solid var(--line);border-radius:8px 8px 0 0}
.body{padding:8px 14px 12px}.q{font-size:15px;margin:6px 0 10px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff;margin-left:6px}
.dplots{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.round{margin:10px 0}.agents{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:10px}
.agent{border:1px solid var(--line);border-radius:6px;padding:6px 10px;background:#fff}
.agent.fail{border-color:var(--bad);background:#fff6f4}.agent.ignored{opacity:.6}
.agent h4{margin:0 0 4px;font-size:13px}.field{margin:4px 0}.field>b{color:var(--mute);font-size:12px;
display:block}.field pre,.raw pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-size:12px;
background:var(--soft);padding:4px 6px;border-radius:4px;max-height:260px;overflow:auto}
.ok{color:var(--good)}.bad{color:var(--bad)}
h1,h2,h3,summary,td,th,.q,.meta,.agent h4{overflow-wrap:anywhere;word-break:break-word;min-width:0}
"""

_JS = """
(function(){
  var box=document.getElementById('filter'), sel=document.getElementById('end-filter');
  var items=Array.prototype.slice.call(document.querySelectorAll('details.debate'));
  var count=document.getElementById('shown');
  function apply(){
    var q=(box.value||'').toLowerCase(), end=sel.value, n=0;
    items.forEach(function(d){
      var hit=(!q||d.getAttribute('data-search').indexOf(q)>=0)&&(!end||d.getAttribute('data-end')===end);
      d.style.display=hit?'':'none'; if(hit){n++;}
    });
    count.textContent=String(n);
  }
  box.addEventListener('input',apply); sel.addEventListener('change',apply);
  document.getElementById('expand').addEventListener('click',function(){items.forEach(function(d){d.open=true;});});
  document.getElementById('collapse').addEventListener('click',function(){items.forEach(function(d){d.open=false;});});
  apply();
  document.body.setAttribute('data-ready','1');
})();
"""


def _card(value: Any, label: str) -> str:
    return f'<div class="card"><b>{_e(value)}</b><span>{_e(label)}</span></div>'


def _vote_matrices(num: kernel.ScoredEpisodes, p: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = int(num.vote_offsets_P1[p]), int(num.vote_offsets_P1[p + 1])
    valid = np.asarray(num.validation.valid_V[lo:hi], dtype=bool)
    a = np.asarray(num.votes.a_V[lo:hi])[valid]
    b = np.asarray(num.votes.b_V[lo:hi])[valid]
    op = np.asarray(num.votes.op_V[lo:hi])[valid]
    wins = np.zeros((n, n), dtype=np.int64)
    ties = np.zeros((n, n), dtype=np.int64)
    gt = op == kernel.OP_GT
    np.add.at(wins, (a[gt], b[gt]), 1)
    eq = ~gt
    np.add.at(ties, (a[eq], b[eq]), 1)
    ties = ties + ties.T
    return wins, ties


def _clipped(text: str) -> str:
    """``text`` escaped, its first :data:`SHOWN_CHARS` characters and a count of the rest."""
    if len(text) <= SHOWN_CHARS:
        return _e(text)
    rest = len(text) - SHOWN_CHARS
    return f'{_e(text[:SHOWN_CHARS])}<span class="meta"> … {rest:,} more characters not shown</span>'


def _field(name: str, value: str) -> str:
    if not value:
        return f'<div class="field"><b>{_e(name)}</b><span class="meta">(empty)</span></div>'
    return f'<div class="field"><b>{_e(name)}</b><pre>{_clipped(value)}</pre></div>'


def _agent_card(r: pipeline.ReplayedDebate, k: int) -> str:
    turn = r.debate.turns[k]
    pr = r.parsed[k]
    ignored = k in r.ignored_turns
    cls = "agent" + ("" if pr.ok else " fail") + (" ignored" if ignored else "")
    status = (
        '<span class="ok">parsed</span>'
        if pr.ok
        else f'<span class="bad">parse failure: {_e(pr.reason)} (step reward −1, the debate ends)</span>'
    )
    if ignored:
        status += ' <span class="meta">(after the end: ignored)</span>'
    out = [f'<div class="{cls}" data-turn="{k}"><h4>Agent {turn.agent} · turn {k} · {status}</h4>']
    if pr.ok:
        out.append(_field("solution", pr.solution))
        out.append(_field("evaluation", pr.evaluation))
        out.append(_field("comparison", pr.comparison))
        votes = ", ".join(f"Agent {v.a} {v.op} Agent {v.b}" for v in pr.votes) or "none"
        extra = []
        if pr.self_votes_dropped:
            extra.append(f"{pr.self_votes_dropped} self-comparison(s) dropped")
        if pr.malformed_votes:
            extra.append("unreadable: " + "; ".join(f"{m.line!r} ({m.reason})" for m in pr.malformed_votes))
        out.append(
            f'<div class="field"><b>votes read</b>{_e(votes)}'
            + (f' <span class="meta">({_e("; ".join(extra))})</span>' if extra else "")
            + "</div>"
        )
        yes = '<span class="ok">YES</span>' if pr.consensus else '<span class="bad">NO</span>'
        out.append(f'<div class="field"><b>consensus</b>{yes}</div>')
        out.append(_field("consensus reason", pr.consensus_reason))
    tokens = ""
    if turn.action_tokens is not None:
        tokens = (
            f" · {len(turn.observation_tokens or ())} observation / {len(turn.action_tokens)} action tokens"
        )
    out.append(
        f'<details class="raw"><summary>raw text ({len(turn.text):,} characters{tokens})</summary>'
        f"<pre>{_clipped(turn.text)}</pre></details></div>"
    )
    return "".join(out)


def _debate_section(result: pipeline.BatchResult, p: int, index: int) -> str:
    """Debate ``p`` of ``result``, the ``index``-th debate of the page."""
    num = result.numeric
    r = result.replayed[p]
    d = r.debate
    n = d.num_agents
    lo, hi = int(num.offsets_P1[p]), int(num.offsets_P1[p + 1])
    rewards = [float(x) for x in num.pairwise.rewards_PG[lo:hi]]
    steps = [float(x) for x in num.step_rewards_PG[lo:hi]]
    returns = [float(x) for x in num.returns_PG[lo:hi]]
    advs = [float(x) for x in num.advantages_PG[lo:hi]]
    total = int(num.pairwise.total_votes_P[p])
    bad = int(num.pairwise.malformed_P[p])
    search = f"{d.id} {d.question[:SHOWN_CHARS]}".lower()
    colour = _END_COLOURS.get(r.end, "#9498a0")
    out = [
        f'<details class="debate" id="debate-{index}" data-id="{_e(d.id)}" data-end="{_e(r.end)}" '
        f'data-votes="{total}" data-malformed="{bad}" data-search="{_e(search)}">',
        f"<summary><b>{_e(d.id)}</b> · {n} agents · {r.num_rounds} round(s) · {total} votes"
        + (f", {bad} malformed" if bad else "")
        + f'<span class="badge" style="background:{colour}">{_e(r.end)}</span></summary>',
        '<div class="body">',
        f'<div class="q"><b>Question.</b> {_clipped(d.question)}</div>',
        f'<div class="meta">line {d.line} · max_rounds {_e("none" if d.max_rounds is None else d.max_rounds)}'
        f" · {len(r.replay.accepted)} turns scored"
        + (f" · {len(r.ignored_turns)} ignored after the end" if r.ignored_turns else "")
        + "</div>",
    ]
    wins, ties = _vote_matrices(num, p, n)
    out.append('<div class="dplots">')
    out.append(svg_vote_matrix(wins, ties, title="valid votes: row beats column"))
    out.append(svg_agent_bars(rewards, advs))
    out.append("</div>")
    out.append(
        "<table><thead><tr><th>agent</th><th>pairwise reward</th><th>step rewards</th><th>return</th>"
        "<th>advantage</th></tr></thead><tbody>"
    )
    for i in range(n):
        out.append(
            f'<tr data-agent="{i}" data-reward="{rewards[i]!r}" data-advantage="{advs[i]!r}">'
            f'<td>Agent {i}</td><td class="n">{_fmt(rewards[i])}</td><td class="n">{_fmt(steps[i])}</td>'
            f'<td class="n">{_fmt(returns[i])}</td><td class="n">{_fmt(advs[i], signed=True)}</td></tr>'
        )
    out.append("</tbody></table>")
    vlo, vhi = int(num.vote_offsets_P1[p]), int(num.vote_offsets_P1[p + 1])
    if vhi > vlo:
        out.append(
            f"<details><summary>all votes ({vhi - vlo})</summary><table><thead><tr><th>author</th>"
            "<th>vote</th><th>status</th></tr></thead><tbody>"
        )
        for v in range(vlo, vhi):
            op = {kernel.OP_GT: ">", kernel.OP_EQ: "="}.get(int(num.votes.op_V[v]), "?")
            valid = bool(num.validation.valid_V[v])
            why = (
                "round-1 vote on an agent who had not spoken (dropped)"
                if num.round1_dropped_V[v]
                else kernel.VOTE_REASONS[int(num.validation.reason_V[v])]
            )
            out.append(
                f"<tr><td>Agent {int(num.votes.authors_V[v])}</td>"
                f"<td>Agent {int(num.votes.a_V[v])} {_e(op)} Agent {int(num.votes.b_V[v])}</td>"
                f'<td class="{"ok" if valid else "bad"}">{_e(why)}</td></tr>'
            )
        out.append("</tbody></table></details>")
    num_turns = len(d.turns)
    for rnd in range((num_turns + n - 1) // n):
        out.append(f'<div class="round"><h3>Round {rnd + 1}</h3><div class="agents">')
        for k in range(rnd * n, min((rnd + 1) * n, num_turns)):
            out.append(_agent_card(r, k))
        out.append("</div></div>")
    out.append("</div></details>")
    return "\n".join(out)


def render_html(
    result: pipeline.BatchResult,
    *,
    source: str = "",
    title: str = "Debate report",
    max_debates: int = DEFAULT_MAX_DEBATES,
) -> str:
    """The whole report page of one scored batch as one HTML string (no external resources).

    Examples:
        >>> from adapters.transcripts import Debate, Turn
        >>> text = kernel.render_response(
        ...     solution="4", evaluation="N/A", consensus=True, consensus_reason="We agree.")
        >>> debate = Debate("d1", "What is 2 + 2?", 2, (Turn(0, text), Turn(1, text)), max_rounds=2)
        >>> page = render_html(pipeline.score([debate]), title="2 < 3")
        >>> page.startswith("<!DOCTYPE html>"), "<title>2 &lt; 3</title>" in page
        (True, True)
        >>> page.count('class="debate"')
        1
    """
    check_type(result, pipeline.BatchResult, "result")
    return render_report([result], result.options, source=source, title=title, max_debates=max_debates).page


class Report(NamedTuple):
    """A rendered page, how many debates it details and how many it covers, and the skipped lines."""

    page: str
    shown: int
    debates: int
    errors: list[TranscriptError]


def skipped_table(heading: str, errors: Sequence[TranscriptError]) -> str:
    """The table of skipped lines (line, id, turn, reason, message) under ``heading``; "" when none.

    Examples:
        >>> "<td>bad_json</td>" in skipped_table("Skipped", [TranscriptError(3, "bad_json", "bad JSON")])
        True
    """
    if not errors:
        return ""
    rows = [
        f"<h3>{_e(heading)} ({len(errors)})</h3><table><thead><tr><th>line</th><th>id</th>"
        "<th>turn</th><th>reason</th><th>message</th></tr></thead><tbody>"
    ]
    for e in errors:
        rows.append(
            f'<tr class="skipped" data-line="{e.line}"><td class="n">{e.line}</td>'
            f"<td>{_e(e.debate_id or '')}</td>"
            f'<td class="n">{_e("" if e.turn is None else e.turn)}</td><td>{_e(e.reason)}</td>'
            f"<td>{_e(e.message)}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def figures_json(figures: Mapping[str, Any]) -> str:
    """The run's figures as indented JSON in a closed ``<details>``, ending the summary section.

    Examples:
        >>> figures_json({"lines": 2}).startswith("<details><summary>all figures (JSON)</summary>")
        True
    """
    return (
        "<details><summary>all figures (JSON)</summary><pre>"
        + _e(_json.dumps(figures, indent=1, sort_keys=True))
        + "</pre></details></section>"
    )


def render_report(
    chunks: Iterable[pipeline.BatchResult],
    options: pipeline.ScoreOptions,
    *,
    source: str = "",
    title: str = "Debate report",
    max_debates: int = DEFAULT_MAX_DEBATES,
) -> Report:
    """The report page of a stream of scored chunks (:func:`pipeline.score_chunks`), in bounded memory.

    Of each chunk it keeps what the summary keeps (:class:`pipeline.ScoreAccumulator`, datum statistics
    without the datum arrays), one vote count per debate, and the detail sections of the first
    ``max_debates`` debates, rendered as their chunk arrives. The page is the same for any chunking
    of the same lines (``tests/test_report.py``).

    Examples:
        >>> line = '{"id": "%s", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
        >>> chunks = pipeline.score_chunks([line % "a", line % "b", "{", line % "c"], chunk_size=2)
        >>> report = render_report(chunks, pipeline.ScoreOptions(), source="batch.jsonl", max_debates=2)
        >>> report.shown, report.debates, [e.reason for e in report.errors]
        (2, 3, ['bad_json'])
        >>> report.page.count('class="skipped"'), report.page.count('class="debate"')
        (1, 2)
    """
    check_type(options, pipeline.ScoreOptions, "options")
    acc = pipeline.ScoreAccumulator(options, datum_sink=lambda arrays: None)
    votes_parts: list[npt.NDArray[np.float64]] = []  # valid votes per debate, chunk by chunk
    by_n: Counter[int] = Counter()
    sections: list[str] = []
    limit = max(max_debates, 0)
    for chunk in chunks:
        acc.add(chunk)
        num = chunk.numeric
        votes_parts.append(np.asarray(num.pairwise.total_votes_P, dtype=np.float64))
        by_n.update(int(x) for x in num.num_agents_P)
        for p in range(min(limit - len(sections), len(chunk.replayed))):
            sections.append(_debate_section(chunk, p, len(sections)))
    errors = acc.sorted_errors()
    s = acc.summary()
    votes_per_debate = np.concatenate(votes_parts) if votes_parts else np.zeros(0)
    body: list[str] = []
    body.append(
        f'<header><h1>{_e(title)}</h1><div class="meta">source <b>{_e(source)}</b> · policy '
        f"<b>{_e(s['policy'])}</b> · reward <b>{_e(s['reward'])}</b> · estimator <b>{_e(s['estimator'])}</b>"
        f" · {_e(s['lines'])} lines</div></header>"
    )
    body.append('<section id="summary"><h2>Batch summary</h2><div class="cards">')
    body.append(_card(s["debates_scored"], "debates scored"))
    body.append(_card(s["debates_skipped"], "lines skipped"))
    body.append(_card(s["turns_scored"], "turns scored"))
    body.append(_card(f"{100 * s['parse_failure_rate']:.1f}%", f"parse failures ({s['parse_failures']})"))
    body.append(_card(f"{100 * s['consensus_rate']:.1f}%", "debates ending in consensus"))
    body.append(_card(s["votes_total"], "valid votes"))
    body.append(_card(s["votes_malformed"], "malformed votes"))
    if "datums" in s:
        body.append(_card(s["datums"]["datums"], f"datums ({s['datums']['action_tokens']:,} action tokens)"))
    body.append('</div><div class="plots">')
    body.append(svg_histogram(acc.values("rewards"), title="pairwise rewards (all agents)"))
    body.append(svg_histogram(acc.values("returns"), title="total returns", colour="#6cc5b0"))
    body.append(svg_histogram(acc.values("advantages"), title="advantages", colour="#efb118"))
    body.append(
        svg_histogram(
            votes_per_debate,
            title="valid votes per debate",
            colour="#a463f2",
            bins=min(20, int(votes_per_debate.max(initial=0)) + 1),
        )
    )
    body.append(svg_category_bars(s["ends"], title="how debates ended", colours=_END_COLOURS))
    body.append(svg_category_bars(s["parse_failures_by_reason"], title="parse failures by reason"))
    body.append(
        svg_category_bars({f"{k} agents": v for k, v in sorted(by_n.items())}, title="debates by size")
    )
    body.append("</div>")
    body.append(skipped_table("Skipped lines", errors))
    body.append(figures_json(s))
    shown = len(sections)
    body.append(f'<section id="debates"><h2>Debates ({shown} of {acc.scored} shown)</h2>')
    body.append(
        '<div class="toolbar"><input id="filter" type="search" placeholder="filter by id or question" '
        'aria-label="filter"><select id="end-filter" aria-label="end"><option value="">any end</option>'
        + "".join(f'<option value="{k}">{k}</option>' for k in pipeline.END_REASONS)
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
    return Report(page, shown, acc.scored, errors)
