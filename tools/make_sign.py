"""A question set for held-out evaluation of the tiny local model: is an integer positive or negative?

``python -m tools.make_sign`` rewrites ``adapters/data/sign.jsonl`` (``--check`` only verifies that the
file is up to date). Each line is ``{"question": "Is -395 positive or negative?", "answer": "negative"}``:
400 distinct integers of 1 to 3 digits, drawn uniformly from 1 … 999 and negated on every other line,
so the set is balanced (chance 0.5). The rule (a minus sign or not, whatever the digits) is one the
134 k-parameter byte model learns from labelled turns within the local preset's budget, and questions held
out of training (:func:`adapters.training.dataset.split_questions`) test whether it did.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.make_questions import render, write_or_check

__all__ = ["DEFAULT_COUNT", "DEFAULT_SEED", "SIGN_FILE", "generate_sign_questions", "main"]

DEFAULT_SEED = 0
DEFAULT_COUNT = 400
SIGN_FILE = Path(__file__).resolve().parents[1] / "adapters" / "data" / "sign.jsonl"


def generate_sign_questions(count: int = DEFAULT_COUNT, *, seed: int = DEFAULT_SEED) -> list[dict[str, str]]:
    """``count`` questions, answers alternating ``positive`` / ``negative`` from ``positive``, numbers
    distinct, seeded (at most 1,998 distinct questions exist).

    Examples:
        >>> qs = generate_sign_questions(4, seed=0)
        >>> [q["answer"] for q in qs]
        ['positive', 'negative', 'positive', 'negative']
        >>> all(q["question"].split()[1].startswith("-") == (q["answer"] == "negative") for q in qs)
        True
    """
    if not 0 <= count <= 1998:
        raise ValueError(f"count must be in [0, 1998], got {count}")
    r = random.Random(seed)
    seen: set[int] = set()
    out: list[dict[str, str]] = []
    while len(out) < count:
        negative = len(out) % 2 == 1
        value = -r.randint(1, 999) if negative else r.randint(1, 999)
        if value in seen:
            continue
        seen.add(value)
        answer = "negative" if negative else "positive"
        out.append({"question": f"Is {value} positive or negative?", "answer": answer})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.make_sign", description=__doc__)
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=SIGN_FILE)
    parser.add_argument("--check", action="store_true", help="only check that the file is up to date")
    args = parser.parse_args(argv)
    text = render(generate_sign_questions(args.count, seed=args.seed))
    return write_or_check(text, args.out, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
