"""Data files shipped with debate-kernel (JSON Lines), read through :mod:`importlib.resources`.

- ``sample_debates.jsonl``: 120 sample debate transcripts (``debate-transcript/1``), what
  ``debate-kernel score`` scores when no file is given; written by ``python -m tools.samples``.
- ``questions.jsonl``: 64 arithmetic questions with exact answers, the default training set of
  ``debate-kernel train`` (:mod:`adapters.training.dataset`).
- ``arithmetic.jsonl``: 700 short checked questions of seven kinds, the local model's default.
- ``parity.jsonl``: 400 questions "Is N even or odd?" (N from 10 to 999): a one-digit rule with a 50 %
  chance baseline, for measuring what RL adds to a format-only warm start.
- ``repeat.jsonl``: 160 questions "Which digit is repeated in 555…5?" (each digit 0-9 written 8 to 23
  times, shuffled): the answer is the question's only digit, a 10 % chance baseline.
- ``sign.jsonl``: 400 questions "Is N positive or negative?" (N from -999 to 999, not 0, half of each
  sign; written by ``python -m tools.make_sign``): a one-byte rule the tiny local model learns from
  labelled turns, the local preset's set, a quarter held out for evaluation.
- ``sample_bank.jsonl``: the questions behind them, each with its answer, a derivation and wrong answers
  with their flawed derivations and rebuttals (the generator's raw material).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["SAMPLE_BANK", "SAMPLE_DEBATES", "path", "read_jsonl", "read_text"]

SAMPLE_DEBATES = "sample_debates.jsonl"
"""File name of the shipped sample debates."""
SAMPLE_BANK = "sample_bank.jsonl"
"""File name of the question bank behind the sample debates."""


def read_text(name: str) -> str:
    """The text of the shipped data file ``name`` (UTF-8)."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def read_jsonl(name: str) -> list[dict[str, Any]]:
    """The records of the shipped JSON Lines file ``name``, one dict per non-blank line."""
    return [json.loads(line) for line in read_text(name).splitlines() if line.strip()]


def path(name: str) -> Path:
    """Path of ``name`` in the source tree (where ``python -m tools.samples`` writes it)."""
    return Path(__file__).resolve().parent / name
