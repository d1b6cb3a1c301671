"""Every Python block of docs/embedding.md runs as written (each in a fresh namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "embedding.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_doc_has_one_example_per_trainer() -> None:
    assert len(BLOCKS) == 4
    assert [("verl" in b, "trl" in b, "kernel.jax" in b) for b in BLOCKS[:3]] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=["verl", "trl", "jax", "numpy"][: len(BLOCKS)])
def test_block_runs(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[index], f"{DOC.name}[{index}]", "exec"), {"__name__": f"embedding_doc_{index}"})
    assert capsys.readouterr().out.strip()  # every example prints its result
