"""The start-of-run contract check against a real ``debate-kernel serve`` that misbehaves (issue 33).

One server (the fake engine: no JAX, a second to start) holds a well-behaved name and one broken name
per kind of ``--misbehave`` (``--served-name`` aliases of one model). Each name is a folder holding the
server's byte tokenizer, so that ``debate-kernel train --model NAME`` with ``TINKER_API_KEY`` and
``TINKER_BASE_URL`` trains on it as on any self-hosted Tinker server (its tokenizer loaded from the
folder). The check goes through the unmodified SDK; tests/test_contract.py tests the same judges against
wrappers of the in-repo fake, without HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
import tinker

from adapters.serve.misbehave import MISBEHAVIOURS, MisbehavingCore, Misbehaviour, parse_misbehaviour
from adapters.serve.process import API_KEY, served
from adapters.serve.tokenizer import write_tokenizer
from adapters.tinker.contract import OPTION_DEPENDENCIES, ContractError, check_contract, enforce_contract

VOCAB = 262

BROKEN_CHECK = {
    "unfrozen": "frozen_snapshot",
    "reloads": "frozen_snapshot",
    "short-logprobs": "compute_logprobs",
    "ignore-stops": "stop_sequences",
    "few-samples": "sample_count",
    "out-of-vocab": "vocabulary",
}
"""The check each misbehaviour fails, and no other."""


class Server(NamedTuple):
    url: str
    names: dict[str, str]  # misbehaviour (or "good") -> served name, a tokenizer folder
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("contract-serve")
    names = {kind: str(write_tokenizer(root / "names" / kind)) for kind in ("good", *MISBEHAVIOURS)}
    extra = [arg for name in names.values() for arg in ("--served-name", name)]
    extra += [arg for kind in MISBEHAVIOURS for arg in ("--misbehave", f"{kind}={names[kind]}")]
    log = root / "serve.log"
    with served("fake", root=root / "serve", log=log, extra=extra) as url:
        yield Server(url, names, log)


def test_every_kind_of_misbehaviour_is_covered() -> None:
    assert sorted(BROKEN_CHECK) == sorted(MISBEHAVIOURS)


def test_a_misbehaviour_names_a_known_kind_and_a_served_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown kind 'frozen' in 'frozen=x'; kinds: unfrozen, reloads"):
        parse_misbehaviour("frozen=x")
    with pytest.raises(ValueError, match="'unfrozen=' names no base model"):
        parse_misbehaviour("unfrozen=")
    with pytest.raises(ValueError, match="names 'other', which this server does not serve"):
        MisbehavingCore(misbehaviours=[Misbehaviour("unfrozen", "other")], model="fake", root=tmp_path)
    core = MisbehavingCore(
        misbehaviours=[parse_misbehaviour("few-samples"), parse_misbehaviour("unfrozen=alias")],
        model="fake",
        root=tmp_path,
        served_names=["alias"],
    )
    assert core.kinds_for("fake") == {"few-samples"}
    assert core.kinds_for("alias") == {"few-samples", "unfrozen"}


def test_each_misbehaviour_fails_its_own_check_and_a_well_behaved_name_passes(server: Server) -> None:
    client = tinker.ServiceClient(base_url=server.url, api_key=API_KEY)
    try:
        failed = {}
        for kind, name in server.names.items():
            report = asyncio.run(check_contract(client, base_model=name, vocab_size=VOCAB))
            failed[kind] = [r.name for r in report.failures]
            if kind == "good":
                enforce_contract(report, {"kl_penalty_coef": 0.1, "max_steps_off_policy": 2})
                continue
            check = BROKEN_CHECK[kind]
            config = {"kl_penalty_coef": 0.1} if check in OPTION_DEPENDENCIES else {}
            with pytest.raises(ContractError, match=rf"{check}[: ].*expected .*; got \S"):
                enforce_contract(report, config)
    finally:
        client.close("success").result()
    assert failed == {"good": [], **{kind: [check] for kind, check in BROKEN_CHECK.items()}}
    assert "Traceback" not in server.log.read_text()


def test_train_on_a_misbehaving_server_exits_2_naming_the_check_before_step_0(
    server: Server, tmp_path: Path
) -> None:
    """`train` against a self-hosted server (TINKER_BASE_URL) whose compute_logprobs is one entry short:
    the contract check ends the run before step 0, exit 2, the check named; no step is written."""
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env.update(TINKER_API_KEY=API_KEY, TINKER_BASE_URL=server.url, HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "adapters.cli", "train", "--model", server.names["short-logprobs"]]
    cmd += ["--steps", "1", "--batch-size", "1", "--num-agents", "2", "--max-tokens", "16"]
    cmd += ["--eval-questions", "0", "--out", str(run)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    named = re.search(
        r"contract check compute_logprobs: expected (\d+) entries .*; got (\d+) entries", done.stderr
    )
    assert named is not None, done.stderr[-3000:]
    assert int(named[2]) == int(named[1]) - 1
    assert "Traceback" not in done.stderr
    metrics = run / "metrics.jsonl"
    assert not metrics.exists() or not [json.loads(x) for x in metrics.read_text().splitlines() if x]
