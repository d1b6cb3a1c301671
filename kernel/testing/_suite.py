"""What the invariant suites share: outcomes, skipping with a reason, one Hypothesis run for many checks."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from hypothesis import assume, given, settings
from hypothesis import strategies as st

PASSED = "passed"

SuiteOutcome: TypeAlias = dict[str, str]
"""Check name → ``"passed"``, ``"skipped: <reason>"`` or ``"failed: <first line of the message>"``."""

T = TypeVar("T")


def _run_suite(
    checks: Sequence[str],
    skip_reason: Callable[[str], str | None],
    strategy: st.SearchStrategy[T],
    run_check: Callable[[str, T], None],
    *,
    accept: Callable[[T], bool] = lambda _: True,
    raise_on_failure: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> SuiteOutcome:
    """Runs every applicable check on each drawn example (one Hypothesis run for all of them).

    ``raise_on_failure``: the first failure propagates (Hypothesis shrinks it); otherwise each check's
    first failure is recorded, the check is not run again, and the others go on.
    """
    outcome: SuiteOutcome = {}
    active = []
    for check in checks:
        reason = skip_reason(check)
        if reason is None:
            active.append(check)
        else:
            outcome[check] = f"skipped: {reason}"
    failures: dict[str, str] = {}

    @settings(**{"deadline": None, "report_multiple_bugs": False, **(overrides or {})})
    @given(case=strategy)
    def suite(case: T) -> None:
        assume(accept(case))
        for check in active:
            if check in failures:
                continue
            if raise_on_failure:
                run_check(check, case)
                continue
            try:
                run_check(check, case)
            except AssertionError as error:
                failures[check] = "failed: " + (str(error).strip().splitlines() or [""])[0]

    if active:
        suite()
    for check in active:
        outcome[check] = failures.get(check, PASSED)
    return {check: outcome[check] for check in checks}


def _skip_or_run(reason: str | None, run: Callable[[], object]) -> None:
    """The class form of one check: ``pytest.skip`` with the reason, or run it."""
    if reason is not None:
        import pytest

        pytest.skip(reason)
    run()


def _run_class_check(test: Any, attribute: str, check: str) -> None:
    """One check of a suite's pytest base class: the function under test is ``test``'s class attribute
    ``attribute`` (a staticmethod, a classmethod's function or a plain callable), run through the class's
    ``_suite`` with its ``hypothesis_settings``, or skipped with the reason its ``_skip_reason`` gives.

    Raises:
      TypeError: the attribute is not set.
    """
    owner = type(test)
    raw = inspect.getattr_static(owner, attribute)
    fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    if fn is None:
        raise TypeError(f"{owner.__name__}.{attribute} is not set")
    _skip_or_run(test._skip_reason(check), lambda: test._suite([check], fn, True, test.hypothesis_settings))
