"""Training curves of one run directory, or several overlaid, as one self-contained HTML page (inline SVG,
no external resources).

``debate-kernel report RUN_DIR [RUN_DIR …]`` reads each run's ``metrics.jsonl`` (and its ``run.json``
for the config) and draws one chart per group of series (:data:`CURVES`: reward, correctness, advantage
spread, KL, loss, entropy, parse failures, step time, tokens, evaluations). A chart has tick labels on
both axes and a grid; a series measured every step is drawn raw (faint) with a smoothed line over it
(:func:`adapters.report.figures.smooth`); an evaluation is drawn as points with their standard errors
(:func:`adapters.report.figures.evaluation_rows`); correctness charts carry the chance and majority-answer
baselines of the questions they are measured on; the step where RL starts after a warm start is marked.
Several runs share each chart, one colour a run. Tables: every evaluation with its standard errors, and
the last step's metrics, numbers formatted (:func:`adapters.report.figures.format_number`). A missing
value (null, NaN) leaves a gap; a series with no value at all is left out of its chart.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from adapters.report.figures import (
    EVAL_RATES,
    AnswerBaselines,
    answer_baselines,
    evaluation_rows,
    format_number,
    smooth,
    smoothing_span,
)
from adapters.report.html import _nice_ticks
from adapters.training.checkpoint import CheckpointError, read_metrics, read_run

__all__ = [
    "CURVES",
    "Baseline",
    "ChartLine",
    "RunCurves",
    "read_run_curves",
    "render_training_html",
    "svg_line_chart",
]

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
    (
        "Staleness: steps between a trained group's sampler and the weights it trains",
        ("async/staleness_min", "async/staleness_mean", "async/staleness_max"),
    ),
)
"""Charts: a title and the metric names drawn in it. Series measured only on some steps (``eval/*``,
every ``eval_every`` steps) are drawn as points joined by a line, with their standard errors."""

_RATES = {
    "eval/correct",
    "eval/parse_ok",
    "env/all/correct",
    "env/all/parse_error",
    "env/all/consensus_reached",
    *EVAL_RATES,
}
"""Series in [0, 1]: their charts show at least that range."""

_CORRECTNESS = {"env/all/correct", *EVAL_RATES}
"""Series of correct answers: their charts carry the chance and majority-answer baselines (of the
training questions for ``env/*``, of the evaluation questions for ``eval/*``)."""

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_DASHES = ("", "6,3", "2,2", "8,3,2,3")
_BASELINE_COLOUR = "#6b6f78"


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


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


# ------------------------------------------------------------------------------------------------
# One chart


class ChartLine(NamedTuple):
    """A line of a chart: its legend ``label``, ``colour``, dash pattern (SVG ``stroke-dasharray``, ""
    solid), the ``values`` at ``steps`` (None: no point), their standard errors (None: none), whether
    it is measured on some steps only (``sparse``: points joined, and drawn as points), the ``run`` it
    belongs to (for the page's structure) and the smoothing span (1: none)."""

    label: str
    colour: str
    steps: Sequence[int]
    values: Sequence[float | None]
    errors: Sequence[float | None] | None = None
    sparse: bool = False
    dash: str = ""
    run: str = ""
    span: int = 1


class Baseline(NamedTuple):
    """A horizontal reference line: its legend ``label``, its ``value`` and kind (``chance``,
    ``majority``)."""

    label: str
    value: float
    kind: str


_W, _H = 540, 250
_ML, _MR, _MT = 56, 14, 26
_PLOT_H = 170
_LEGEND_ROW = 15


def _legend_rows(items: Sequence[tuple[str, str]], width: float) -> list[list[tuple[float, int]]]:
    """Where each legend item goes: rows of (x offset, item index), wrapped at ``width`` (an item is a
    swatch and its label, about 6 px a character)."""
    rows: list[list[tuple[float, int]]] = [[]]
    x = 0.0
    for k, (label, _) in enumerate(items):
        w = 26 + 6.0 * len(label)
        if x > 0 and x + w > width:
            rows.append([])
            x = 0.0
        rows[-1].append((x, k))
        x += w + 12
    return rows if rows[0] else []


def _clip(label: str, most: int = 60) -> str:
    return label if len(label) <= most else label[: most - 1] + "…"


def svg_line_chart(
    title: str,
    lines: Sequence[ChartLine],
    *,
    bounds: tuple[float, float] | None = None,
    baselines: Sequence[Baseline] = (),
    marks: Sequence[tuple[int, str]] = (),
    width: int = _W,
) -> str:
    """One inline SVG line chart with tick labels and a grid on both axes, a legend, and for each line:
    the raw values (faint when smoothed), the smoothed line (``span`` > 1), points and standard-error
    bars (``sparse`` lines, ``errors``). A None breaks a dense line; a sparse one joins the points on
    either side. ``bounds``: the y range to show at least (e.g. (0, 1) for rates); ``baselines``: dashed
    horizontal lines; ``marks``: vertical lines at a step, labelled (e.g. where RL starts).

    Examples:
        >>> svg = svg_line_chart("r", [ChartLine("a", "#000", [0, 1, 2], [0.0, 0.5, 1.0])])
        >>> svg.startswith("<svg"), svg.count('class="tick-label x"'), svg.count('class="legend-entry"')
        (True, 3, 1)
    """
    legend = [(ln.label, ln.colour) for ln in lines] + [(b.label, _BASELINE_COLOUR) for b in baselines]
    rows = _legend_rows(legend, width - _ML - _MR)
    heading = _title_lines(title, (width - 20) // 7)
    top = _MT + 14 * (len(heading) - 1)
    height = top + _PLOT_H + 44 + _LEGEND_ROW * len(rows)
    w, h = width - _ML - _MR, _PLOT_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}" class="chart">',
        '<text x="10" y="16" class="title">'
        + "".join(f'<tspan x="10" dy="{14 if k else 0}">{_e(t)}</tspan>' for k, t in enumerate(heading))
        + f"<title>{_e(title)}</title></text>",
    ]
    steps = [s for ln in lines for s, v in zip(ln.steps, ln.values, strict=True) if v is not None]
    values = [v for ln in lines for v in ln.values if v is not None]
    if not values:
        parts.append(f'<text x="{_ML}" y="{top + h // 2}" class="none">no data</text></svg>')
        return "".join(parts)
    lo, hi = min(values), max(values)
    for ln in lines:
        for v, se in zip(ln.values, ln.errors or (), strict=False):
            if v is not None and se is not None:
                lo, hi = min(lo, v - se), max(hi, v + se)
    for b in baselines:
        lo, hi = min(lo, b.value), max(hi, b.value)
    if bounds is not None:
        lo, hi = min(lo, bounds[0]), max(hi, bounds[1])
        if bounds == (0.0, 1.0):  # a rate: error bars past its bounds are cut, not the axis widened
            lo, hi = max(lo, 0.0), min(hi, 1.0)
    lo, hi, yticks = _axis(lo, hi)
    s0, s1 = min(steps), max(steps)
    span = max(s1 - s0, 1)

    def sx(step: float) -> float:
        return _ML + w * (step - s0) / span

    def sy(v: float) -> float:
        v = min(max(v, lo), hi)
        # halves: hi − lo overflows to inf for values near ±1.8e308
        return top + h * (1 - (v * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5))

    parts.append(f'<rect x="{_ML}" y="{top}" width="{w}" height="{h}" class="frame"/>')
    for t in yticks:
        y = sy(t)
        parts.append(
            f'<g class="tick y"><line x1="{_ML}" x2="{_ML + w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{_ML - 5}" y="{y + 3.5:.1f}" text-anchor="end" class="tick-label y">'
            f"{_e(_tick(t, hi - lo))}</text></g>"
        )
    xticks = [t for t in _nice_ticks(float(s0), float(s1), 6) if t == int(t)] or [float(s0)]
    for t in xticks:
        x = sx(t)
        parts.append(
            f'<g class="tick x"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}" class="grid"/>'
            f'<text x="{x:.1f}" y="{top + h + 13}" text-anchor="middle" class="tick-label x">'
            f"{int(t):,}</text></g>"
        )
    parts.append(
        f'<text x="{_ML + w / 2:.1f}" y="{top + h + 27}" text-anchor="middle" class="axis">step</text>'
    )
    for k, (step, label) in enumerate(marks):
        if s0 <= step <= s1:
            x = sx(step)
            parts.append(
                f'<g class="mark"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}"/>'
                f'<text x="{x + 3:.1f}" y="{top + 10 + 11 * k}" class="mark-label">{_e(label)}</text></g>'
            )
    for b in baselines:
        y = sy(b.value)
        parts.append(
            f'<line x1="{_ML}" x2="{_ML + w}" y1="{y:.1f}" y2="{y:.1f}" class="baseline" '
            f'data-kind="{_e(b.kind)}" stroke="{_BASELINE_COLOUR}" stroke-dasharray="{_baseline_dash(b)}">'
            f"<title>{_e(b.label)}</title></line>"
        )
    for ln in lines:
        parts.extend(_draw_line(ln, sx, sy))
    y0 = top + h + 44
    for r, row in enumerate(rows):
        for x, k in row:
            label, colour = legend[k]
            y = y0 + r * _LEGEND_ROW
            if k < len(lines):
                ln = lines[k]
                swatch = _swatch(_ML + x, y - 4, colour, ln.dash, 2.0)
                attrs = f'class="legend-entry" data-run="{_e(ln.run)}" data-series="{_e(label)}"'
            else:
                b = baselines[k - len(lines)]
                swatch = _swatch(_ML + x, y - 4, colour, _baseline_dash(b), 1.5)
                attrs = f'class="legend-entry baseline" data-kind="{_e(b.kind)}"'
            parts.append(
                f'<g {attrs}>{swatch}<text x="{_ML + x + 25:.1f}" y="{y}" class="legend">{_e(_clip(label))}'
                f"<title>{_e(label)}</title></text></g>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _axis(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """A y axis for values in [lo, hi]: the range widened to whole tick steps, and its ticks (at least
    three where the floats allow).

    Examples:
        >>> _axis(0.0023, 0.0083)
        (0.002, 0.01, [0.002, 0.004, 0.006, 0.008, 0.01])
        >>> _axis(0.0, 1.0)[2], _axis(3.0, 3.0)[2]
        ([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], [2.5, 2.75, 3.0, 3.25, 3.5])
    """
    if not hi - lo > 0:
        lo, hi = lo - 0.5, hi + 0.5
    if not math.isfinite(hi * 0.5 - lo * 0.5):
        lo, hi = -1.0, 1.0
    ticks = _nice_ticks(lo, hi, 5)
    if len(ticks) >= 2:
        step = ticks[1] - ticks[0]
        wide_lo, wide_hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
        if math.isfinite(wide_lo) and math.isfinite(wide_hi) and wide_hi > wide_lo:
            lo, hi = min(lo, wide_lo), max(hi, wide_hi)
            ticks = _nice_ticks(lo, hi, 5)
    if len(ticks) < 3:
        ticks = _nice_ticks(lo, hi, 8)
    return lo, hi, ticks


def _title_lines(title: str, most: int) -> list[str]:
    """A chart title in at most two lines of about ``most`` characters (the rest clipped with an
    ellipsis; the whole title is the tooltip).

    Examples:
        >>> _title_lines("a b c", 3), _title_lines("short", 40)
        (['a b', 'c'], ['short'])
    """
    if len(title) <= most:
        return [title]
    cut = title.rfind(" ", 0, most + 1)
    cut = cut if cut > 0 else most
    return [title[:cut], _clip(title[cut:].strip(), most)]


def _swatch(x: float, y: float, colour: str, dash: str, stroke: float) -> str:
    """A legend's line sample, 20 px long."""
    return (
        f'<line x1="{x:.1f}" x2="{x + 20:.1f}" y1="{y}" y2="{y}" stroke="{colour}" stroke-width="{stroke}" '
        f'stroke-dasharray="{dash}"/>'
    )


def _baseline_dash(b: Baseline) -> str:
    return "4,3" if b.kind == "chance" else "1,3"


def _tick(t: float, span: float) -> str:
    """A y tick label: enough digits to tell ticks ``span`` apart, no float noise."""
    if t == 0:
        return "0"
    if abs(t) >= 1e5 or abs(t) < 1e-3:
        return f"{t:.3g}"
    digits = max(0, min(6, 2 - math.floor(math.log10(span)))) if span > 0 else 2
    text = f"{t:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _draw_line(ln: ChartLine, sx: Any, sy: Any) -> list[str]:
    """The SVG elements of one line: raw runs (polylines, or points where a run is one value), the
    smoothed line, and for a sparse line its points with standard-error bars and tooltips."""
    out: list[str] = []
    smoothed = ln.span > 1 and not ln.sparse
    raw_class = "raw faint" if smoothed else "raw"
    runs: list[list[tuple[int, float]]] = [[]]
    for step, v in zip(ln.steps, ln.values, strict=True):
        if v is None:
            if not ln.sparse and runs[-1]:
                runs.append([])
            continue
        runs[-1].append((step, v))
    dash = f' stroke-dasharray="{ln.dash}"' if ln.dash else ""
    for run in runs:
        if len(run) > 1:
            points = _points([(sx(s), sy(v)) for s, v in run])
            out.append(
                f'<polyline class="{raw_class}" fill="none" stroke="{ln.colour}"{dash} points="{points}"/>'
            )
        elif run and not ln.sparse:
            s, v = run[0]
            out.append(f'<circle class="point" cx="{sx(s):.1f}" cy="{sy(v):.1f}" r="2" fill="{ln.colour}"/>')
    if smoothed:
        values = smooth(ln.values, ln.span)
        part: list[tuple[float, float]] = []
        for step, v in zip(ln.steps, values, strict=True):
            if v is None:
                if len(part) > 1:
                    out.append(_smoothed(part, ln.colour, dash))
                part = []
                continue
            part.append((sx(step), sy(v)))
        if len(part) > 1:
            out.append(_smoothed(part, ln.colour, dash))
    if ln.sparse:
        errors = ln.errors or [None] * len(ln.values)
        for step, v, se in zip(ln.steps, ln.values, errors, strict=True):
            if v is None:
                continue
            x, y = sx(step), sy(v)
            tip = f"{ln.label} at step {step:,}: {format_number(v)}" + (
                "" if se is None else f" ± {format_number(se)} (standard error)"
            )
            bar = ""
            if se is not None and se > 0:
                y1, y2 = sy(v - se), sy(v + se)
                bar = (
                    f'<line class="errorbar" x1="{x:.1f}" x2="{x:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" '
                    f'stroke="{ln.colour}"/>'
                    f'<line class="errorcap" x1="{x - 3:.1f}" x2="{x + 3:.1f}" y1="{y1:.1f}" y2="{y1:.1f}" '
                    f'stroke="{ln.colour}"/>'
                    f'<line class="errorcap" x1="{x - 3:.1f}" x2="{x + 3:.1f}" y1="{y2:.1f}" y2="{y2:.1f}" '
                    f'stroke="{ln.colour}"/>'
                )
            out.append(
                f'<g class="eval-point">{bar}<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" '
                f'fill="{ln.colour}"/><title>{_e(tip)}</title></g>'
            )
    return out


def _smoothed(points: list[tuple[float, float]], colour: str, dash: str) -> str:
    return f'<polyline class="smoothed" fill="none" stroke="{colour}"{dash} points="{_points(points)}"/>'


def _extremes(column: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The first, lowest, highest and last points of a pixel column, in order."""
    keep = {0, len(column) - 1}
    keep.add(min(range(len(column)), key=lambda k: column[k][1]))
    keep.add(max(range(len(column)), key=lambda k: column[k][1]))
    return [column[k] for k in sorted(keep)]


def _points(xy: Sequence[tuple[float, float]]) -> str:
    """A polyline's points attribute; beyond two points a pixel column, each column's points are its
    first, lowest, highest and last (the line looks the same, and a run of 100,000 steps stays a few
    thousand points).

    Examples:
        >>> _points([(0.0, 5.0), (0.2, 9.0), (0.3, 1.0), (0.4, 4.0), (1.0, 2.0)])
        '0.0,5.0 0.2,9.0 0.3,1.0 0.4,4.0 1.0,2.0'
        >>> _points([(0.0, 5.0), (0.1, 9.0), (0.2, 7.0), (0.3, 1.0), (0.4, 4.0), (1.0, 2.0)])
        '0.0,5.0 0.1,9.0 0.3,1.0 0.4,4.0 1.0,2.0'
    """
    if len(xy) > 2 * (max(x for x, _ in xy) - min(x for x, _ in xy) + 1):
        kept: list[tuple[float, float]] = []
        column: list[tuple[float, float]] = []
        for point in xy:
            if column and round(point[0]) != round(column[0][0]):
                kept += _extremes(column)
                column = []
            column.append(point)
        xy = kept + _extremes(column)
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)


# ------------------------------------------------------------------------------------------------
# Runs


class RunCurves(NamedTuple):
    """What the page draws of one run: its ``label``, metrics lines (each with an int ``step``), config
    (its ``run.json``; {} when unreadable), the baselines of its training and evaluation questions (None
    when the dataset has no answers or cannot be read), and the lines left out of ``metrics.jsonl``."""

    label: str
    path: Path
    records: list[dict[str, Any]]
    config: dict[str, Any]
    baselines: dict[str, AnswerBaselines | None]
    skipped: list[str]
    notes: list[str]


def read_run_curves(run_dir: str | Path, *, label: str | None = None) -> RunCurves:
    """The metrics, config and baselines of the run in ``run_dir`` (:class:`RunCurves`).

    Raises:
      ValueError: the directory has no metrics lines.
    """
    path = Path(run_dir)
    skipped: list[str] = []
    records = read_metrics(path, skipped=skipped)  # each with an int step
    if not records:
        raise ValueError(f"{run_dir} has no metrics.jsonl lines (is it a training run directory?)")
    notes: list[str] = []
    config: dict[str, Any] = {}
    try:
        _, config = read_run(path)
    except CheckpointError as e:
        notes.append(f"no config ({e}): no baselines, no standard errors")
    baselines: dict[str, AnswerBaselines | None] = {"train": None, "eval": None}
    dataset = config.get("dataset")
    if isinstance(dataset, str) and dataset:
        from adapters.training.dataset import DatasetError, load_split

        share, other = config.get("eval_split") or 0.0, config.get("eval_dataset") or ""
        try:  # the run's own training and evaluation questions (a held-out split, or another set)
            split = load_split(dataset, eval_split=float(share), eval_dataset=str(other))
        except (DatasetError, TypeError, ValueError) as e:
            notes.append(f"no baselines: the dataset cannot be read ({e})")
        else:
            first = config.get("eval_questions")
            baselines["train"] = answer_baselines([q.answer for q in split.train])
            if isinstance(first, int):
                baselines["eval"] = answer_baselines([q.answer for q in split.eval[:first]])
    return RunCurves(label or path.name, path, records, config, baselines, skipped, notes)


def _labels(run_dirs: Sequence[Path]) -> list[str]:
    """Short distinct labels of run directories: their names, or as many trailing path parts as it
    takes to tell them apart.

    Examples:
        >>> _labels([Path("/runs/a/x"), Path("/runs/b/x")]), _labels([Path("/runs/a"), Path("/runs/b")])
        (['a/x', 'b/x'], ['a', 'b'])
    """
    parts = [p.resolve().parts for p in run_dirs]
    for k in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-k:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(p) for p in run_dirs]


def _series(run: RunCurves, key: str) -> tuple[list[int], list[float | None], list[float | None] | None]:
    """A metric of a run: the steps, the values, and their standard errors (evaluation shares)."""
    steps = [int(r["step"]) for r in run.records]
    values = [_value(r.get(key)) for r in run.records]
    if key not in EVAL_RATES:
        return steps, values, None
    errors: list[float | None] = []
    for r, v in zip(run.records, values, strict=True):
        se = None
        if v is not None:
            row = next((x for x in evaluation_rows(r, run.config) if x.name == key), None)
            se = None if row is None else row.se
        errors.append(se)
    return steps, values, errors


def _baselines(runs: Sequence[RunCurves], keys: Sequence[str]) -> list[Baseline]:
    """The chance and majority-answer lines of a correctness chart (none for other charts); one line per
    distinct value over the runs, named after the runs it stands for when they differ."""
    if not set(keys) & _CORRECTNESS:
        return []
    which = "train" if any(k.startswith("env/") for k in keys) else "eval"
    found: dict[tuple[str, float], list[tuple[str, AnswerBaselines]]] = {}
    for run in runs:
        b = run.baselines.get(which)
        if b is None:
            continue
        found.setdefault(("chance", round(b.chance, 9)), []).append((run.label, b))
        found.setdefault(("majority", round(b.majority, 9)), []).append((run.label, b))
    out = []
    questions = "training" if which == "train" else "evaluation"
    for (kind, value), owners in found.items():
        b = owners[0][1]
        if kind == "chance":
            text = f"chance {format_number(value)} (1 of {round(1 / b.chance)} answers)"
        else:
            text = f"majority answer {b.answer!r} {format_number(value)} ({questions} questions)"
        if len(found) > 2:
            text += " · " + ", ".join(label for label, _ in owners)
        out.append(Baseline(text, value, kind))
    return out


def _rl_marks(runs: Sequence[RunCurves]) -> list[tuple[int, str]]:
    """The first RL step of each run that had a warm start (one mark per distinct step)."""
    marks: dict[int, str] = {}
    for run in runs:
        phases = [r.get("phase") for r in run.records]
        if "warm_start" in phases and "rl" in phases:
            first = next(int(r["step"]) for r in run.records if r.get("phase") == "rl")
            marks.setdefault(first, "RL starts")
    return sorted(marks.items())


def _charts(runs: Sequence[RunCurves]) -> list[str]:
    charts = []
    many = len(runs) > 1
    for title, keys in CURVES:
        lines: list[ChartLine] = []
        for r, run in enumerate(runs):
            for k, key in enumerate(keys):
                steps, values, errors = _series(run, key)
                if all(v is None for v in values):
                    continue
                colour = _COLOURS[r % len(_COLOURS)] if many else _COLOURS[k % len(_COLOURS)]
                dash = _DASHES[k % len(_DASHES)] if many else ""
                label = f"{run.label} · {key}" if many and len(keys) > 1 else run.label if many else key
                sparse = key.startswith("eval/")
                present = sum(v is not None for v in values)
                lines.append(
                    ChartLine(
                        label,
                        colour,
                        steps,
                        values,
                        errors,
                        sparse=sparse,
                        dash=dash,
                        run=run.label,
                        span=smoothing_span(present),
                    )
                )
        rates = (0.0, 1.0) if set(keys) <= _RATES else None
        svg = svg_line_chart(
            title, lines, bounds=rates, baselines=_baselines(runs, keys), marks=_rl_marks(runs)
        )
        charts.append(f'<figure data-chart="{_e(title)}">{svg}</figure>')
    return charts


SKIPPED_SHOWN = 20
"""Metrics lines left out that are listed one by one (on the page and by ``report``); the rest counted."""


def _skipped_note(skipped: list[str]) -> str:
    """A warning paragraph listing the metrics lines left out ("" when none)."""
    if not skipped:
        return ""
    items = "".join(f"<li>{_e(s)}</li>" for s in skipped[:SKIPPED_SHOWN])
    rest = len(skipped) - SKIPPED_SHOWN
    more = f"<li>… and {rest} more</li>" if rest > 0 else ""
    head = f"<p><b>{len(skipped)} metrics line(s) could not be read and are left out:</b></p>"
    return f"{head}<ul>{items}{more}</ul>"


def _evaluation_table(run: RunCurves) -> str:
    """Every evaluation of a run: a row per figure, a column per evaluation step, each value with its
    standard error and count."""
    evals = [(int(r["step"]), evaluation_rows(r, run.config)) for r in run.records]
    evals = [(s, rows) for s, rows in evals if rows]
    if not evals:
        return ""
    names = list(dict.fromkeys(row.name for _, rows in evals for row in rows))
    head = "".join(f'<th class="n">step {s:,}</th>' for s, _ in evals)
    body = []
    for name in names:
        cells = []
        for _, rows in evals:
            row = next((x for x in rows if x.name == name), None)
            if row is None:
                cells.append('<td class="n">–</td>')
                continue
            se = "" if row.se is None else f" ± {format_number(round(row.se, 4))}"
            n = "" if row.n is None else f' <span class="meta">n {row.n:,}</span>'
            cells.append(f'<td class="n" data-value="{row.value!r}">{format_number(row.value)}{se}{n}</td>')
        body.append(f"<tr><td>{_e(name)}</td>{''.join(cells)}</tr>")
    return (
        f'<h3>{_e(run.label)}</h3><table class="evaluations" data-run="{_e(run.label)}"><thead><tr>'
        f"<th>figure</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _last_step_table(runs: Sequence[RunCurves]) -> str:
    """The last metrics line of each run, a column per run, numbers formatted."""
    keys = sorted({k for run in runs for k in run.records[-1]})
    head = "".join(f'<th class="n">{_e(run.label)}</th>' for run in runs)
    rows = []
    for key in keys:
        cells = "".join(f'<td class="n">{_e(format_number(run.records[-1].get(key)))}</td>' for run in runs)
        rows.append(f"<tr><td>{_e(key)}</td>{cells}</tr>")
    return (
        f'<table class="last-step"><thead><tr><th>metric</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _run_line(run: RunCurves, colour: str | None) -> str:
    steps = [int(r["step"]) for r in run.records]
    c = run.config
    what = ", ".join(
        f"{k} {_e(c[k])}" for k in ("model", "dataset", "warm_start_steps", "steps", "eval_every") if k in c
    )
    chip = f'<span class="chip" style="background:{colour}"></span>' if colour else ""
    notes = "".join(f'<br><span class="meta">{_e(n)}</span>' for n in run.notes)
    return (
        f'<li class="run" data-run="{_e(run.label)}">{chip}<b>{_e(run.label)}</b>: {len(steps)} steps '
        f"(steps {steps[0]}–{steps[-1]})" + (f" · {what}" if what else "") + f"{notes}</li>"
    )


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em;color:#1d2330}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:1.4em}h3{font-size:15px}"
    "figure{display:inline-block;margin:6px;vertical-align:top}"
    "svg.chart{border:1px solid #e3e5ea;border-radius:6px;background:#fff}"
    "svg .title{font-size:12.5px;font-weight:600;fill:#1d2330}svg .tick-label{font-size:10px;fill:#5d6472}"
    "svg .axis{font-size:10px;fill:#5d6472}svg .legend{font-size:10px;fill:#1d2330}"
    "svg .grid{stroke:#eef0f3}svg .frame{fill:none;stroke:#c9ccd3}svg .none{font-size:12px;fill:#9498a0}"
    "svg .raw{stroke-width:1.5}svg .raw.faint{stroke-width:1;opacity:.35}svg .smoothed{stroke-width:2}"
    "svg .baseline{stroke-width:1.5}svg .mark line{stroke:#9498a0;stroke-dasharray:3,3}"
    "svg .mark-label{font-size:9.5px;fill:#6b6f78}svg .errorbar,svg .errorcap{stroke-width:1.2}"
    "table{border-collapse:collapse;font-size:12px;margin:6px 0}"
    "td,th{border:1px solid #dfe2e8;padding:2px 8px;text-align:left}th{background:#f6f7f9}"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.meta{color:#6b6f78;font-size:11px}"
    ".chip{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}"
    "ul.runs{padding-left:1.2em}.wide{overflow-x:auto}"
)


def render_training_html(
    run_dir: str | Path | Sequence[str | Path],
    *,
    title: str | None = None,
    skipped: list[str] | None = None,
) -> str:
    """The page of training curves of ``run_dir`` (its ``metrics.jsonl`` and ``run.json``), or of
    several run directories overlaid (one colour a run). Lines that cannot be read are left out of the
    curves and listed on the page (and in ``skipped``, when given).

    Raises:
      ValueError: a directory has no metrics lines.
    """
    dirs = [Path(run_dir)] if isinstance(run_dir, str | Path) else [Path(d) for d in run_dir]
    if not dirs:
        raise ValueError("no run directory given")
    labels = _labels(dirs) if len(dirs) > 1 else [dirs[0].name]
    runs = [read_run_curves(d, label=label) for d, label in zip(dirs, labels, strict=True)]
    left_out = [line for run in runs for line in run.skipped]
    if skipped is not None:
        skipped.extend(left_out)
    many = len(runs) > 1
    name = title or (
        f"Training runs {', '.join(r.label for r in runs)}" if many else f"Training run {runs[0].label}"
    )
    run_list = "".join(
        _run_line(run, _COLOURS[k % len(_COLOURS)] if many else None) for k, run in enumerate(runs)
    )
    first = runs[0]
    summary = (
        f"<p>{len(first.records)} steps (steps {first.records[0]['step']}–{first.records[-1]['step']}).</p>"
        if not many
        else ""
    )
    evaluations = "".join(_evaluation_table(run) for run in runs)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(name)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(name)}</h1>{summary}<ul class='runs'>{run_list}</ul>"
        + _skipped_note(left_out)
        + "<p class='meta'>Faint: the raw values; bold: smoothed (an exponential moving average over about a "
        "fifteenth of the steps). Evaluations: points with ± one standard error (binomial, counting "
        "each debate or question once). Dashed: chance (a uniform guess among the questions' answers) and "
        "the majority answer (always giving the most frequent one).</p>"
        + "".join(_charts(runs))
        + (f"<h2>Evaluations</h2><div class='wide'>{evaluations}</div>" if evaluations else "")
        + f"<h2>Last step</h2><div class='wide'>{_last_step_table(runs)}</div></body></html>"
    )
