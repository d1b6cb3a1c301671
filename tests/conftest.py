"""Hypothesis profiles, registered once; JAX's CPU split into two devices, as ``debate-kernel train`` does;
the two tiers of the suite.

``HYPOTHESIS_PROFILE`` picks one explicitly; otherwise ``CI=true`` selects ``ci`` and anything else
``dev``. ``deep`` (thousands of examples) is opt-in: ``HYPOTHESIS_PROFILE=deep pytest``.

Tiers: ``pytest`` runs the fast tier, every test module and golden file inside the README's budget.
``pytest --exhaustive`` adds the tests marked ``exhaustive`` (sweeps over many sizes or devices, long
training runs) and loads the ``deep`` profile unless ``HYPOTHESIS_PROFILE`` names another.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests._served import Backend, ServedFake

JAX_CACHE = Path(__file__).resolve().parents[1] / ".jax-cache"
"""JAX's persistent compilation cache for the test run, in the checkout (a fresh clone starts cold): the
suite's worker processes and the `debate-kernel train` processes its tests start compile each program
once between them instead of once each."""

XLA_OPTIMIZATION = "--xla_backend_optimization_level"
"""The suite compiles with XLA's backend optimisation level 0 (also in the `serve` and `train` processes
its tests start, which inherit the environment) unless ``XLA_FLAGS`` already sets the level: its
programs are small and run once or twice, so compiling is most of their time. On a cold compilation
cache (2 workers, 2 cores, 2026-11-29) the whole suite took 437 s at the default level and 365 s at 0
(the model, advantage, loss and local-loop files 93 s and 62 s), every test, golden and bit-exact ones
included, passing at both. ``XLA_FLAGS=--xla_backend_optimization_level=2 pytest`` tests the level
users run."""
if XLA_OPTIMIZATION not in os.environ.get("XLA_FLAGS", ""):  # before JAX starts its backend
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_OPTIMIZATION}=0".strip()

try:  # before any JAX computation: the local service's training calls then run data-parallel, as in
    # `debate-kernel train`, whichever test runs first (tests/test_local_devices.py checks one device)
    from adapters.local import split_cpu
except ImportError:  # the local extra is not installed
    pass
else:
    split_cpu(2)
    from adapters.local.devices import compilation_cache

    # DEBATE_KERNEL_JAX_CACHE names another folder, or "" for none (as for `debate-kernel train`); the
    # train and serve processes the tests start read it too
    os.environ.setdefault("DEBATE_KERNEL_JAX_CACHE", str(JAX_CACHE))
    compilation_cache(0.2)

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("dev", deadline=None, max_examples=25, suppress_health_check=_SUPPRESS)
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=100,
    derandomize=True,
    suppress_health_check=_SUPPRESS,
    print_blob=True,
)
settings.register_profile("deep", deadline=None, max_examples=3000, suppress_health_check=_SUPPRESS)


EXHAUSTIVE = "exhaustive"
"""The marker of the opt-in tier, and its switch ``--exhaustive``."""

DESELECTED = pytest.StashKey[list[pytest.Item]]()
"""Where the session keeps the tests the fast tier left out (read by ``tests/test_suite_tiers.py``)."""


def _profile(exhaustive: bool) -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE")
    if explicit:
        return explicit
    if exhaustive:
        return "deep"
    return "ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="also run the exhaustive tier (tests marked 'exhaustive') under the 'deep' Hypothesis profile",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{EXHAUSTIVE}: the opt-in tier (sweeps, long runs): runs with --exhaustive"
    )
    settings.load_profile(_profile(bool(config.getoption("--exhaustive"))))  # before any test module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left_out = []
    if not config.getoption("--exhaustive"):
        left_out = [item for item in items if item.get_closest_marker(EXHAUSTIVE) is not None]
        if left_out:
            items[:] = [item for item in items if item.get_closest_marker(EXHAUSTIVE) is None]
            config.hook.pytest_deselected(items=left_out)
    config.stash[DESELECTED] = left_out


@pytest.fixture(scope="session")
def served_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedFake]:
    """``debate-kernel serve --model fake`` on a free loopback port, once per test process (each xdist
    worker has its own), stopped at the end of the session (``tests/_served.py``)."""
    from tests import _served

    with _served.served_fake(tmp_path_factory.mktemp("served-fake")) as server:
        yield server


@pytest.fixture(params=["inprocess", "sdk"])
def fake_backend(request: pytest.FixtureRequest) -> Backend:
    """The fake service a training-loop test runs on: in process, or served and reached through the
    unmodified SDK (``tests/_served.py``)."""
    from tests._served import Backend

    if request.param == "sdk":
        return Backend.sdk(request.getfixturevalue("served_fake"))
    return Backend.inprocess()
