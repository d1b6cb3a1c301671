"""Training curves of a run directory as one self-contained HTML page (inline SVG, no external resources).

``debate-kernel report RUN_DIR`` reads ``RUN_DIR/metrics.jsonl`` and draws one line chart per series
(reward, advantage spread, KL, entropy, parse failures, step time, evaluation). A missing value (null,
NaN) leaves a gap; a series with no value at all is listed as absent.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.training.checkpoint import read_metrics

__all__ = ["CURVES", "render_training_html", "svg_line_chart"]

CURVES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Reward (mean total return)", ("env/all/reward/total",)),
    ("Correct (training debates)", ("env/all/correct",)),
    ("Advantage spread", ("advantage/std", "advantage/min", "advantage/max")),
    ("KL sample → train", ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")),
    ("Loss per trained token (warm start: cross-entropy)", ("optim/loss",)),
    ("Entropy", ("optim/entropy",)),
    ("Parse failures", ("env/all/parse_error",)),
    ("Consensus reached", ("env/all/consensus_reached",)),
    ("Step time (s)", ("time/total", "time/sample", "time/train")),
    ("Tokens per step", ("tokens/prompt", "tokens/prompt_cached", "tokens/sampled", "tokens/trained")),
    ("Evaluation vs fixed opponents: correct, parse-success", ("eval/correct", "eval/parse_ok")),
    ("Evaluation vs fixed opponents: pairwise reward", ("eval/pairwise_reward",)),
    (
        "Did debate help? Correct answers: debate (final, first-round majority) vs one agent alone",
        ("eval/debate/final_majority", "eval/debate/first_round_majority", "eval/direct/avg@k"),
    ),
    (
        "Debates over k repeats: avg@k, pass@k, cons@k",
        ("eval/debate/avg@k", "eval/debate/pass@k", "eval/debate/cons@k"),
    ),
    ("Dropped stale batches (cumulative)", ("async/dropped_stale",)),
)
"""Charts: a title and the metric names drawn in it. Series measured only on some steps (``eval/*``,
every ``eval_every`` steps) are drawn as lines through their points."""

_RATES = {
    "eval/correct",
    "eval/parse_ok",
    "env/all/correct",
    "env/all/parse_error",
    "eval/debate/final_majority",
    "eval/debate/first_round_majority",
    "eval/debate/avg@k",
    "eval/debate/pass@k",
    "eval/debate/cons@k",
    "eval/direct/avg@k",
}
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _value(v: Any) -> float | None:
    """A metric's point: a finite float, or None (no point) for anything else, an integer beyond float
    range included.

    Examples:
        >>> _value(2), _value(float("nan")), _value(10**400), _value(True)
        (2.0, None, None, None)
    """
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def svg_line_chart(
    title: str,
    steps: Sequence[int],
    series: Mapping[str, Sequence[float | None]],
    *,
    width: int = 460,
    height: int = 200,
    connect: bool = False,
    bounds: tuple[float, float] | None = None,
) -> str:
    """One inline SVG line chart: ``series`` name → values per step (None: no point).

    A None breaks the line, unless ``connect``: then the line joins the points on either side (for a
    series measured every k steps). ``bounds``: the y range to show at least (e.g. (0, 1) for rates).

    Examples:
        >>> svg = svg_line_chart("r", [0, 1], {"a": [0.0, 1.0]})
        >>> svg.startswith("<svg") and "polyline" in svg
        True
    """
    pad_l, pad_r, pad_t, pad_b = 48, 8, 22, 34
    values = [v for vs in series.values() for v in vs if v is not None]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{pad_l}" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>')
    if not values or not steps:
        parts.append(f'<text x="{pad_l}" y="{height // 2}" font-size="12">no data</text></svg>')
        return "".join(parts)
    lo, hi = min(values), max(values)
    if bounds is not None:
        lo, hi = min(lo, bounds[0]), max(hi, bounds[1])
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    s0, s1 = min(steps), max(steps)
    span = max(s1 - s0, 1)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def xy(step: int, v: float) -> str:
        # halves: hi − lo overflows to inf for values near ±1.8e308 (the point would be nan)
        frac = (v * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5)
        return f"{pad_l + w * (step - s0) / span:.1f},{pad_t + h * (1 - frac):.1f}"

    parts.append(f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>')
    for frac, tick in ((0.0, hi), (1.0, lo)):
        parts.append(
            f'<text x="{pad_l - 4}" y="{pad_t + h * frac + 4:.1f}" font-size="10" '
            f'text-anchor="end">{tick:.3g}</text>'
        )
    parts.append(f'<text x="{pad_l}" y="{height - 20}" font-size="10">step {s0}</text>')
    parts.append(f'<text x="{pad_l + w}" y="{height - 20}" font-size="10" text-anchor="end">step {s1}</text>')
    for k, (name, vs) in enumerate(series.items()):
        color = _COLORS[k % len(_COLORS)]
        run: list[str] = []
        runs: list[list[str]] = []
        for step, v in zip(steps, vs, strict=True):
            if v is None:
                if connect:
                    continue
                if run:
                    runs.append(run)
                run = []
            else:
                run.append(xy(step, v))
        if run:
            runs.append(run)
        for r in runs:
            if len(r) == 1:
                x, y = r[0].split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{color}"/>')
            else:
                parts.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(r)}"/>'
                )
        parts.append(
            f'<text x="{pad_l + 110 * k}" y="{height - 6}" font-size="10" '
            f'fill="{color}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


SKIPPED_SHOWN = 20
"""Metrics lines left out that are listed one by one (on the page and by ``report``); the rest counted."""


def _skipped_note(skipped: list[str]) -> str:
    """A warning paragraph listing the metrics lines left out ("" when none)."""
    if not skipped:
        return ""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in skipped[:SKIPPED_SHOWN])
    rest = len(skipped) - SKIPPED_SHOWN
    more = f"<li>… and {rest} more</li>" if rest > 0 else ""
    head = f"<p><b>{len(skipped)} metrics line(s) could not be read and are left out:</b></p>"
    return f"{head}<ul>{items}{more}</ul>"


def render_training_html(
    run_dir: str | Path, *, title: str | None = None, skipped: list[str] | None = None
) -> str:
    """The page of training curves of ``run_dir`` (its ``metrics.jsonl``). Lines that cannot be read are
    left out of the curves and listed on the page (and in ``skipped``, when given).

    Raises:
        ValueError: the directory has no metrics lines.
    """
    left_out: list[str] = []
    records = read_metrics(run_dir, skipped=left_out)  # each with an int step
    if skipped is not None:
        skipped.extend(left_out)
    if not records:
        raise ValueError(f"{run_dir} has no metrics.jsonl lines (is it a training run directory?)")
    steps = [int(r["step"]) for r in records]
    name = title or f"Training run {Path(run_dir).name}"
    charts: list[str] = []
    for chart_title, keys in CURVES:
        series = {k: [_value(r.get(k)) for r in records] for k in keys}
        series = {k: v for k, v in series.items() if any(x is not None for x in v)}
        sparse = all(k.startswith("eval/") for k in keys)
        rates = (0.0, 1.0) if set(keys) <= _RATES else None
        chart = svg_line_chart(chart_title, steps, series, connect=sparse, bounds=rates)
        charts.append(f"<figure>{chart}</figure>")
    last = records[-1]
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in sorted(last.items())
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(name)}</title><style>body{{font-family:sans-serif;margin:1.5em}}"
        "figure{display:inline-block;margin:6px}table{border-collapse:collapse;font-size:12px}"
        "td{border:1px solid #ddd;padding:2px 6px}</style></head><body>"
        f"<h1>{html.escape(name)}</h1><p>{len(records)} steps (steps {steps[0]}–{steps[-1]}).</p>"
        + _skipped_note(left_out)
        + "".join(charts)
        + f"<h2>Last step</h2><table>{rows}</table></body></html>"
    )
