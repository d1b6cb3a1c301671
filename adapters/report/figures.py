"""The figures a training report and the loggers derive from a run's metrics lines, with no I/O: standard
errors of the evaluations, the chance and majority-answer baselines of correctness, a smoothed series,
and numbers formatted for reading.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from adapters.answers import answer_key

__all__ = [
    "EVAL_RATES",
    "AnswerBaselines",
    "EvalRow",
    "answer_baselines",
    "evaluation_rows",
    "format_number",
    "smooth",
    "smoothing_span",
    "standard_error",
]

EVAL_RATES: dict[str, str] = {
    "eval/correct": "debates",
    "eval/debate/first_round_majority": "answers",
    "eval/debate/final_majority": "answers",
    "eval/debate/avg@k": "answers",
    "eval/debate/pass@k": "questions",
    "eval/debate/cons@k": "questions",
    "eval/direct/avg@k": "answers",
    "eval/direct/pass@k": "questions",
    "eval/direct/cons@k": "questions",
}
"""The evaluation shares with a standard error, and what each is a share of: ``debates`` (the
fixed-opponent debates, ``eval/debates``), ``answers`` (one a question and repeat: ``eval_questions ×
eval_repeats``) or ``questions`` (one a question: ``pass@k``, ``cons@k``)."""

_EVAL_OTHERS = ("eval/parse_ok", "eval/pairwise_reward")
"""Evaluation figures drawn and tabled without a standard error (their counts are not recorded)."""


def standard_error(p: float, n: int) -> float | None:
    """The standard error of a share ``p`` of ``n`` independent trials, √(p (1 − p) / n); None when it
    does not exist (no trials, ``p`` outside [0, 1] or not finite).

    Examples:
        >>> round(standard_error(0.5, 144), 4), standard_error(1.0, 10), standard_error(0.5, 0)
        (0.0417, 0.0, None)
    """
    if n < 1 or not (math.isfinite(p) and 0.0 <= p <= 1.0):
        return None
    return math.sqrt(p * (1.0 - p) / n)


class EvalRow(NamedTuple):
    """One evaluation figure: its metric name, value, standard error and trial count (None: unknown)."""

    name: str
    value: float
    se: float | None
    n: int | None


def _sizes(record: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, int]:
    """The trial count of each kind of :data:`EVAL_RATES` in an evaluation's metrics line; a kind whose
    count the line and config do not give is absent."""
    debates = record.get("eval/debates")
    sizes: dict[str, int] = {}
    if isinstance(debates, int | float) and not isinstance(debates, bool) and math.isfinite(debates):
        sizes["debates"] = int(debates)
        agents, repeats = config.get("num_agents"), config.get("eval_repeats")
        if isinstance(agents, int) and isinstance(repeats, int) and agents > 0 and repeats > 0:
            questions, rest = divmod(int(debates), agents * repeats)
            if not rest:
                sizes["questions"] = questions
                sizes["answers"] = questions * repeats
    return sizes


def evaluation_rows(record: Mapping[str, Any], config: Mapping[str, Any]) -> list[EvalRow]:
    """The evaluation figures of one metrics line, each with its standard error where it is a share of
    counted trials (:data:`EVAL_RATES`; the counts from ``eval/debates`` and the run's ``num_agents``
    and ``eval_repeats``); [] on a step without an evaluation. The errors treat trials as independent
    (the repeats of one question are not), so they are a lower bound; a standard error the line records
    (``<name>_se``: ``eval/correct_se``, by question) is shown instead.

    Examples:
        >>> rows = evaluation_rows({"eval/correct": 0.5, "eval/debates": 144.0, "eval/parse_ok": 0.9},
        ...                        {"num_agents": 3, "eval_repeats": 6})
        >>> [(r.name, r.value, r.se and round(r.se, 4), r.n) for r in rows]
        [('eval/correct', 0.5, 0.0417, 144), ('eval/parse_ok', 0.9, None, None)]
        >>> evaluation_rows({"eval/correct": 0.5, "eval/correct_se": 0.1, "eval/debates": 144.0},
        ...                 {"num_agents": 3, "eval_repeats": 6})[0].se
        0.1
    """
    sizes = _sizes(record, config)
    rows = []
    for name in (*EVAL_RATES, *_EVAL_OTHERS):
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        n = sizes.get(EVAL_RATES[name]) if name in EVAL_RATES else None
        se = standard_error(float(value), n) if n is not None else None
        recorded = record.get(f"{name}_se")
        if isinstance(recorded, int | float) and not isinstance(recorded, bool) and math.isfinite(recorded):
            se = float(recorded)
        rows.append(EvalRow(name, float(value), se, n))
    return rows


class AnswerBaselines(NamedTuple):
    """Correctness without a model: ``chance`` (a uniform guess among the distinct answers) and
    ``majority`` (always the most frequent answer, ``answer``), over ``questions`` answered questions."""

    chance: float
    majority: float
    answer: str
    questions: int


def answer_baselines(answers: Sequence[str | None]) -> AnswerBaselines | None:
    """The baselines of a question set's reference answers (None: no question has one). Answers count as
    the same as :func:`adapters.answers.is_correct` would (:func:`adapters.answers.answer_key`).

    Examples:
        >>> answer_baselines(["yes", "no", "Yes", "yes", None])
        AnswerBaselines(chance=0.5, majority=0.75, answer='yes', questions=4)
        >>> answer_baselines([None]) is None
        True
    """
    keyed = [(answer_key(a), a) for a in answers if a is not None]
    keyed = [(k, a) for k, a in keyed if k is not None]
    if not keyed:
        return None
    counts = Counter(k for k, _ in keyed)
    best, top = counts.most_common(1)[0]
    shown = next(a for k, a in keyed if k == best)
    return AnswerBaselines(1.0 / len(counts), top / len(keyed), shown, len(keyed))


def smoothing_span(points: int) -> int:
    """The span of the smoothing of a series of ``points`` values: about a fifteenth of them, 1 (no
    smoothing) below 30 points, at most 25.

    Examples:
        >>> smoothing_span(10), smoothing_span(110), smoothing_span(10_000)
        (1, 7, 25)
    """
    return 1 if points < 30 else min(25, max(2, round(points / 15)))


def smooth(values: Sequence[float | None], span: int) -> list[float | None]:
    """An exponential moving average of span ``span`` (α = 2 / (span + 1)), debiased as TensorBoard's:
    s_t = Σ_{i≤t} (1 − α)^(t−i) x_i / Σ_{i≤t} (1 − α)^(t−i) over the values present; a missing value
    (None) stays missing and does not move the average.

    Examples:
        >>> smooth([1.0, None, 3.0], 1)
        [1.0, None, 3.0]
        >>> [round(v, 3) for v in smooth([0.0, 1.0, 1.0], 3)]
        [0.0, 0.667, 0.857]
    """
    decay = 1.0 - 2.0 / (max(span, 1) + 1)
    out: list[float | None] = []
    num = den = 0.0
    for v in values:
        if v is None:
            out.append(None)
            continue
        num = decay * num + v
        den = decay * den + 1.0
        out.append(num / den)
    return out


def format_number(value: Any) -> str:
    """A metric's value for reading: whole numbers with thousands separators, others to 4 significant
    digits (one decimal from 1,000 to 10^5; scientific from 10^5 and below 10^-4), text as it is, a
    missing value as ``–``.

    Examples:
        >>> format_number(0.40277780530353385), format_number(12345), format_number(3.0), format_number(None)
        ('0.4028', '12,345', '3', '–')
        >>> format_number(2345.678), format_number(-0.000012), format_number(123456.7)
        ('2,345.7', '-1.2e-05', '1.235e+05')
        >>> format_number(1.5e-07), format_number(float("nan")), format_number(True), format_number("rl")
        ('1.5e-07', '–', 'True', 'rl')
    """
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return "–"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if 1e3 <= abs(value) < 1e5:
        return f"{value:,.1f}"
    return f"{value:.4g}"
