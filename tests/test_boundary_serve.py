"""The client's service boundary under a real ``debate-kernel serve`` that injects faults behind its routes
(``--fault``, :mod:`adapters.serve.faults`), through the unmodified SDK and ``train``'s own entry point
(in this process, with ``TINKER_API_KEY`` and ``TINKER_BASE_URL`` naming the server).

What reaches the boundary is what the SDK 0.38 does not absorb: it retries HTTP 429 and 5xx and dropped
connections itself (waits of about a second), and raises a failed future (``RequestFailedError``) at
once. So transient HTTP faults end as an undisturbed run, failed futures of the ``Server`` category as
the boundary's retries in the step's metrics, and failures that outlast the retries as exit 3 naming the
call, the step and ``--resume``. The servers use the fake engine (no JAX); tests/test_boundary.py drives
the same boundary through the in-repo fault injector, without HTTP.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from adapters.cli import main
from adapters.cli._progress import step_line
from adapters.serve.faults import FaultPlan, call_of, parse_fault
from adapters.serve.process import API_KEY, served
from adapters.serve.tokenizer import write_tokenizer
from adapters.training import checkpoint as ck
from tests.test_boundary import _assert_exactly_once

BATCH = 2
"""Debates per step."""

ARGS = ["--batch-size", str(BATCH), "--num-agents", "2", "--max-rounds", "2", "--max-tokens", "128"]
ARGS += ["--eval-questions", "0", "--eval-every", "0", "--save-every", "1"]


def _server_args(tmp_path: Path, faults: list[str]) -> tuple[Path, Path, list[str]]:
    """A tokenizer folder to name the model by, the server's log, and ``serve`` arguments: that name
    served by the fake engine, with ``faults``."""
    model = write_tokenizer(tmp_path / "model")
    extra = ["--served-name", str(model)] + [arg for fault in faults for arg in ("--fault", fault)]
    return model, tmp_path / "serve.log", extra


def _train(url: str, *argv: str) -> tuple[int, str]:
    """``debate-kernel train ARGV`` in this process (its imports are paid once), on the server at ``url``
    as on any self-hosted Tinker server: its exit status and stderr."""
    with pytest.MonkeyPatch.context() as env:
        for key in [k for k in os.environ if k.startswith("TINKER_")]:
            env.delenv(key)
        env.setenv("TINKER_API_KEY", API_KEY)
        env.setenv("TINKER_BASE_URL", url)
        env.setenv("HF_HUB_OFFLINE", "1")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(["train", *argv])
    return status, err.getvalue()


def _injected(log: Path) -> list[str]:
    return [
        line.removeprefix("injected fault: ") for line in log.read_text().splitlines() if "injected" in line
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("sample:500", "'sample:500' is not CALL:KIND:COUNT[:AFTER]"),
        ("nope:500:1", "unknown call 'nope' in 'nope:500:1'; calls: create_session,"),
        ("sample:418:1", "unknown kind '418' in 'sample:418:1'; kinds: 429, 500, 503, drop,"),
        ("get_info:failed-user:1", "get_info is not answered with a future, so it cannot get failed-user"),
        ("sample:500:0", "needs a COUNT >= 1 and an AFTER >= 0"),
        (
            "optim_step:paused-capacity:1",
            "paused-capacity is an answer to a poll: its call is retrieve_future",
        ),
        ("sample:500:1:-1", "needs a COUNT >= 1 and an AFTER >= 0"),
    ],
)
def test_a_fault_flag_that_cannot_be_read_is_named(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_fault(text)


def test_faults_count_the_requests_of_their_call_only() -> None:
    plan = FaultPlan([parse_fault("compute_logprobs:failed-server:2:1")])
    calls = [call_of("/api/v1/asample", body) for body in (b'{"prompt_logprobs": true}', b"{}", b"not json")]
    assert calls == ["compute_logprobs", "sample", "sample"]
    assert [plan.take(call) is not None for call in ["sample", *["compute_logprobs"] * 4]] == [
        False,
        False,
        True,
        True,
        False,
    ]
    assert call_of("/api/v1/healthz", b"") is None and call_of("/save_weights", b"") is None


def test_transient_faults_are_absorbed_by_the_sdk_or_retried_by_the_boundary(tmp_path: Path) -> None:
    """HTTP 500 / 503 / 429 and a dropped connection never reach the boundary (the SDK retries them);
    failed futures of the Server category on sample, compute_logprobs and save_state each cost one
    retry, counted by call and cause in the metrics; the run finishes."""
    faults = [
        "sample:500:1",
        "sample:failed-server:1:1",
        "compute_logprobs:failed-server:1",
        "save_state:failed-server:1",
        "forward_backward:503:1",
        "optim_step:drop:1",
        "retrieve_future:429:1",
        "retrieve_future:500:1:5",
        "retrieve_future:paused-capacity:1:8",  # a poll of a training client future: a queue pause
    ]
    model, log, extra = _server_args(tmp_path, faults)
    run = tmp_path / "run"
    # the faults are aimed at the run's own calls: the contract check (whose calls go through a boundary
    # of their own, below) is left out so that it does not meet them first
    argv = ["--model", str(model), *ARGS, "--steps", "2", "--kl-penalty-coef", "0.01", "--skip-checks"]
    with served("fake", root=tmp_path / "serve", log=log, extra=extra) as url:
        status, err = _train(url, *argv, "--out", str(run))
    assert status == 0, err[-3000:]
    assert "Traceback" not in err
    assert sorted(f.rsplit(" request ", 1)[0] for f in _injected(log)) == sorted(
        f"{kind} on {call}" for call, kind, *_ in (f.split(":") for f in faults)
    )
    metrics = ck.read_metrics(run)
    assert [m["step"] for m in metrics] == [0, 1]
    retries: Counter[str] = Counter()
    for m in metrics:
        retries.update({k.removeprefix("service/retries/"): int(v) for k, v in m.items() if "retries/" in k})
    assert retries == {
        "sample/request_failed_server": 1,
        "compute_logprobs/request_failed_server": 1,
        "save_state/request_failed_server": 1,
    }
    assert (
        sum(m["service/retries"] for m in metrics) == 3 and sum(m["service/failures"] for m in metrics) == 0
    )
    # the SDK polled again and told the training client's observer, which the boundary watches
    assert sum(m.get("service/pauses/paused_capacity", 0) for m in metrics) >= 1
    # the progress line of a step that had them (drawn on a terminal only: built here from its record)
    lines = [step_line(m["step"], 2, m, warm_start_steps=0) for m in metrics]
    assert any(re.search(r"step \d/2 .* retries [1-3] ", line) for line in lines), lines
    assert "Traceback" not in log.read_text()  # the dropped connection is not logged as an error


def test_the_contract_check_retries_a_transient_failure(tmp_path: Path) -> None:
    """The start-of-run check's calls go through the run's boundary: a Server-category failure of its
    first sample is retried and the run goes on (a persistent one: tests/test_boundary.py)."""
    model, log, extra = _server_args(tmp_path, ["sample:failed-server:1"])
    argv = ["--model", str(model), *ARGS, "--steps", "1", "--retry-attempts", "2"]
    with served("fake", root=tmp_path / "serve", log=log, extra=extra) as url:
        status, err = _train(url, *argv, "--out", str(tmp_path / "run"))
    assert status == 0 and "Traceback" not in err, err[-3000:]
    assert [m["step"] for m in ck.read_metrics(tmp_path / "run")] == [0]
    assert any(f.startswith("failed-server on sample") for f in _injected(log))


def test_a_persistent_fault_exits_3_naming_the_call_and_resume_does_every_step_once(tmp_path: Path) -> None:
    """Every attempt of the run's third save (after the fixed opponents' and step 0's) fails: exit 3, one
    message naming save_state, step 1 and --resume. The faults are then spent: ``--resume`` against the
    same server, clean now, finishes with every step and every debate exactly once."""
    model, log, extra = _server_args(tmp_path, ["save_state:failed-server:2:2"])
    run = tmp_path / "run"
    argv = ["--model", str(model), *ARGS, "--steps", "3", "--retry-attempts", "2"]
    with served("fake", root=tmp_path / "serve", log=log, extra=extra) as url:
        status, err = _train(url, *argv, "--out", str(run))
        assert status == 3, err[-3000:]
        ours = [line for line in err.splitlines() if line.startswith("debate-kernel train:")]
        assert len(ours) == 1, err[-3000:]
        assert "save_state call at step 1 failed after 2 attempts (request_failed_server)" in ours[0]
        assert ours[0].endswith(f"--resume {run} continues the run")
        assert "Traceback" not in err
        assert [m["step"] for m in ck.read_metrics(run)] == [0, 1]
        assert _injected(log) == [
            "failed-server on save_state request 3",
            "failed-server on save_state request 4",
        ]
        status, err = _train(url, "--resume", str(run))
    assert status == 0, err[-3000:]
    assert len(_injected(log)) == 2
    _assert_exactly_once(run, 3, BATCH)
