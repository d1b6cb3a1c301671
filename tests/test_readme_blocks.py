"""The README's invariant-suite examples run as written: each block in a fresh namespace, then every test
it defines (its ``test_*`` functions, and each ``test*`` method of its suite classes), as pytest would."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis")

from hypothesis import settings

from tests._profile import examples

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = [
    b
    for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    if not b.startswith(">>>")  # the doctest example runs in tests/test_public_api.py's doctest run
]


def _tests(namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value):
            out.append((name, value))
        elif name.startswith("Test") and isinstance(value, type):
            out += [(f"{name}.{m}", getattr(value(), m)) for m in dir(value) if m.startswith("test")]
    return out


def test_the_readme_shows_the_three_suites() -> None:
    suites = ("AdvantageInvariants", "RewardInvariants", "DatumInvariants")
    assert [tuple(s in b for s in suites) for b in BLOCKS] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=["advantages", "rewards", "datums"][: len(BLOCKS)])
def test_block_and_its_tests_pass(index: int) -> None:
    # The blocks run as written, with fewer examples per check than the active profile: the suites'
    # own tests (tests/test_testing*.py) run every check at full count; here what counts is that a
    # user's copy of the block runs and passes. The `deep` profile (--exhaustive) multiplies the count.
    active = settings.get_current_profile_name()
    settings.register_profile("readme", settings.get_profile(active), max_examples=examples(20))
    settings.load_profile("readme")
    try:
        namespace: dict[str, Any] = {"__name__": f"readme_block_{index}"}
        exec(compile(BLOCKS[index], f"README.md[{index}]", "exec"), namespace)
        tests = _tests(namespace)
        assert len(tests) >= 5, [name for name, _ in tests]  # the class's checks and the one-call function
        ran = 0
        for _, test in tests:
            try:
                test()
            except pytest.skip.Exception:  # a check the declared estimator does not meet the premise of
                continue
            ran += 1
    finally:
        settings.load_profile(active)
    assert ran >= 5
