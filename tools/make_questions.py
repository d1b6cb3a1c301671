"""A verifiable question set sized for tiny models: short questions with short integer answers.

``python -m tools.make_questions`` rewrites ``adapters/data/arithmetic.jsonl`` (``--check`` only verifies
that the file is up to date). Each line is ``{"question", "answer", "kind"}``; every answer is an
integer written in decimal, so correctness is an exact string comparison after stripping spaces.

Kinds (small operands, so a byte-level model with a few million parameters can learn them):
``add`` (a + b, a, b < 50), ``sub`` (a − b ≥ 0, a < 50), ``mul`` (a × b, a, b ≤ 9), ``mod``
(a mod b, a < 50, 2 ≤ b ≤ 9), ``max`` (the largest of three numbers < 100), ``count`` (how many times a
letter occurs in a short word of a's and b's), ``next`` (the next term of an arithmetic sequence).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["DEFAULT_COUNT", "DEFAULT_SEED", "QUESTION_FILE", "generate_questions", "main"]

DEFAULT_SEED = 0
DEFAULT_COUNT = 700
QUESTION_FILE = Path(__file__).resolve().parents[1] / "adapters" / "data" / "arithmetic.jsonl"


def _add(r: random.Random) -> tuple[str, int]:
    a, b = r.randrange(50), r.randrange(50)
    return f"{a}+{b}=?", a + b


def _sub(r: random.Random) -> tuple[str, int]:
    a = r.randrange(50)
    b = r.randrange(a + 1)
    return f"{a}-{b}=?", a - b


def _mul(r: random.Random) -> tuple[str, int]:
    a, b = r.randrange(10), r.randrange(10)
    return f"{a}*{b}=?", a * b


def _mod(r: random.Random) -> tuple[str, int]:
    a, b = r.randrange(50), r.randrange(2, 10)
    return f"{a} mod {b}=?", a % b


def _max(r: random.Random) -> tuple[str, int]:
    xs = [r.randrange(100) for _ in range(3)]
    return f"max({xs[0]},{xs[1]},{xs[2]})=?", max(xs)


def _count(r: random.Random) -> tuple[str, int]:
    word = "".join(r.choice("ab") for _ in range(r.randrange(3, 8)))
    letter = r.choice("ab")
    return f"count {letter} in {word}=?", word.count(letter)


def _next(r: random.Random) -> tuple[str, int]:
    start, step = r.randrange(20), r.randrange(1, 6)
    terms = [start + i * step for i in range(3)]
    return f"{terms[0]},{terms[1]},{terms[2]},?", start + 3 * step


KINDS: dict[str, Callable[[random.Random], tuple[str, int]]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "mod": _mod,
    "max": _max,
    "count": _count,
    "next": _next,
}


def generate_questions(count: int = DEFAULT_COUNT, *, seed: int = DEFAULT_SEED) -> list[dict[str, str]]:
    """``count`` distinct questions, kinds in rotation, seeded.

    Examples:
        >>> qs = generate_questions(7, seed=0)
        >>> [q["kind"] for q in qs] == list(KINDS)
        True
        >>> all(q["answer"].lstrip("-").isdigit() for q in qs)
        True
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    r = random.Random(seed)
    kinds = list(KINDS)
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    attempts = 0
    while len(out) < count:
        kind = kinds[len(out) % len(kinds)]
        question, answer = KINDS[kind](r)
        attempts += 1
        if question in seen and attempts < 100 * (count + 1):
            continue
        seen.add(question)
        out.append({"question": question, "answer": str(answer), "kind": kind})
    return out


def render(questions: Sequence[dict[str, str]]) -> str:
    """One JSON object per line."""
    return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.make_questions", description=__doc__)
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=QUESTION_FILE)
    parser.add_argument("--check", action="store_true", help="only check that the file is up to date")
    args = parser.parse_args(argv)
    return write_or_check(render(generate_questions(args.count, seed=args.seed)), args.out, check=args.check)


def write_or_check(text: str, out: Path, *, check: bool) -> int:
    """Writes ``text`` to ``out`` (exit status 0), or with ``check`` only says whether ``out`` holds it
    (0 up to date, 1 out of date)."""
    if check:
        ok = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if ok else 'out of date'}")
        return 0 if ok else 1
    out.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} questions to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
