"""Answer checking, shared by training, evaluation and the trainer bridges: a solution's final answer,
whether it is correct, the majority answer of several solutions, and the k-sample figures.

The final answer of a solution is the content of its last ``\\boxed{…}`` if there is one, else the last
number in the text (``-12``, ``3.5``, ``7/2``, ``1,024``). Two answers are the same when they are equal as
numbers (exact rational comparison) or, when either is not a number, as text after case folding and
whitespace collapsing (:func:`answer_key`). A solution is correct when its final answer is the reference
answer.

Examples:
    >>> is_correct("so the total is 1,024.", "1024"), is_correct("x = 7/2", "3.5"), is_correct("5", "6")
    (True, True, False)
    >>> majority_answer(["it is 4", "4.0", "5"]), majority_answer(["", " "])
    ('4', None)
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np

__all__ = [
    "KSampleFigures",
    "answer_key",
    "extract_final_answer",
    "is_correct",
    "k_sample_figures",
    "majority_answer",
]


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")


def extract_final_answer(solution: str) -> str | None:
    """The final answer of a solution: its last ``\\boxed{…}``, else its last number, else None.

    Examples:
      >>> extract_final_answer("3 + 4 = 7, so \\\\boxed{7}")
      '7'
      >>> extract_final_answer("twelve minus 1,000 is -988")
      '-988'
    """
    boxed = _BOXED.findall(solution)
    if boxed:
        return str(boxed[-1]).strip()
    numbers = _NUMBER.findall(solution)
    return str(numbers[-1]) if numbers else None


@functools.lru_cache(maxsize=1 << 16)  # a step checks the same few answers hundreds of times
def _as_number(text: str) -> Fraction | None:
    clean = text.strip().replace(",", "").rstrip(".")
    try:
        return Fraction(clean)
    except (ValueError, ZeroDivisionError):
        return None


def _normal(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


def is_correct(solution: str, answer: str | None) -> bool:
    """Whether the solution's final answer (:func:`extract_final_answer`) equals the reference ``answer``.

    Numbers compare exactly as rationals; otherwise case-folded, whitespace-collapsed text. No answer
    (``None``) or no final answer in the solution is False.

    Examples:
      >>> is_correct("7/2 = 3.5", "7/2"), is_correct("2 + 2 = 5", "4")
      (True, False)
      >>> is_correct("\\\\boxed{ Paris }", "paris"), is_correct("Paris", None)
      (True, False)
    """
    if answer is None:
        return False
    final = extract_final_answer(solution)
    if final is None:
        return _normal(solution) == _normal(answer) if answer.strip() else False
    a, b = _as_number(final), _as_number(answer)
    if a is not None and b is not None:
        return a == b
    return _normal(final) == _normal(answer)


def answer_key(solution: str) -> str | None:
    """The canonical form of a solution's final answer, equal for answers :func:`is_correct` would call
    the same (a number as its exact rational, text case-folded and whitespace-collapsed); None when the
    solution gives no answer.

    Examples:
        >>> answer_key("x = 7/2"), answer_key("3.5"), answer_key(" Paris. "), answer_key("")
        ('7/2', '7/2', 'paris', None)
    """
    final = extract_final_answer(solution)
    if final is None:
        text = _normal(solution)
        return text or None
    number = _as_number(final)
    return str(number) if number is not None else _normal(final)


def majority_answer(solutions: Sequence[str]) -> str | None:
    """The final answer most of ``solutions`` give (:func:`answer_key`; solutions without an answer do not
    vote), ties broken by the earliest solution; None when none gives an answer. The result is the first
    voting solution's final answer text, so :func:`is_correct` reads it as that solution.

    Examples:
        >>> majority_answer(["4", "5", "\\boxed{5}", "4"]), majority_answer(["7/2", "3.5", "4"])
        ('4', '7/2')
    """
    keys = [answer_key(s) for s in solutions]
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return None
    best = max(counts.values())
    for solution, key in zip(solutions, keys, strict=True):
        if key is not None and counts[key] == best:
            return extract_final_answer(solution) or solution
    return None  # unreachable: some key has the best count


class KSampleFigures(NamedTuple):
    """Figures of k answers per question: ``avg`` (mean correctness), ``pass_`` (any correct) and
    ``cons`` (the majority answer correct), each averaged over the questions."""

    avg: float
    pass_: float
    cons: float


def k_sample_figures(
    answers_QK: Sequence[Sequence[str]], references_Q: Sequence[str | None]
) -> KSampleFigures:
    """``avg@k``, ``pass@k`` and ``cons@k`` of k answers per question against the reference answers
    (NaN when there are no questions).

    Examples:
        >>> k_sample_figures([["4", "5", "4"], ["1", "2", "2"]], ["4", "1"])
        KSampleFigures(avg=0.5, pass_=1.0, cons=0.5)
    """
    if len(answers_QK) != len(references_Q):
        raise ValueError(
            f"answers_QK and references_Q must have one entry per question, got {len(answers_QK)} and "
            f"{len(references_Q)}"
        )
    if not answers_QK:
        return KSampleFigures(float("nan"), float("nan"), float("nan"))
    avg, passed, cons = [], [], []
    for answers, reference in zip(answers_QK, references_Q, strict=True):
        correct = [is_correct(a, reference) for a in answers]
        avg.append(float(np.mean(correct)) if correct else 0.0)
        passed.append(float(any(correct)))
        majority = majority_answer(answers)
        cons.append(float(majority is not None and is_correct(majority, reference)))
    return KSampleFigures(float(np.mean(avg)), float(np.mean(passed)), float(np.mean(cons)))
