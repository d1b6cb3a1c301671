"""tinker 0.38's sampler kinds: inflight samplers on the local service and ``serve``, and the contract
check that refuses them where a service makes none (the loop's side is in ``tests/test_train_loop.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tinker import types

from adapters.local.service import LocalServiceClient, LocalTrainingClient
from adapters.serve.state import ServeCore
from adapters.tinker.contract import (
    CHECK_NAMES,
    ContractError,
    check_contract,
    enforce_contract,
    inflight_refusal,
)
from adapters.tinker.fake import FakeServiceClient
from adapters.tinker.faults import Fault, FaultPlan, with_faults


def test_local_inflight_samplers_adopt_each_inflight_save_and_snapshots_stay(tmp_path: Path) -> None:
    """The sampler's weights are read at each call, so an inflight sampler holding the newest save's
    arrays samples them (the same arrays, not equal ones: no sampling program is compiled here)."""
    trainer: LocalTrainingClient = (
        LocalServiceClient(seed=0, root=tmp_path).create_lora_training_client("tiny", rank=4).result()
    )
    live = trainer.save_weights_and_get_sampling_client(kind="inflight").result()
    frozen = trainer.save_weights_and_get_sampling_client().result()
    held = live._params
    newer = trainer.save_weights_and_get_sampling_client(kind="inflight").result()
    assert newer._params is not held and live._params is newer._params  # published to the earlier one
    assert frozen._params is not newer._params  # a snapshot keeps its own
    newest = trainer.save_weights_and_get_sampling_client(kind="inflight").result()
    assert live._params is newer._params is newest._params
    with pytest.raises(ValueError, match="kind must be 'snapshot' or 'inflight'"):
        trainer.save_weights_and_get_sampling_client(kind="live").result()  # type: ignore[arg-type]


def test_the_fault_injector_passes_kind_on_where_the_service_takes_it(tmp_path: Path) -> None:
    """Under injection the local service still makes inflight samplers (each save goes through the plan:
    a delayed one still publishes); over the fake, which takes no ``kind``, the wrapper takes none either,
    so a run asking for inflight samplers is refused before it starts, as without injection."""
    plan = FaultPlan(at={("save_weights_and_get_sampling_client", 1): Fault("delay", delay=0.01)})
    service, faults = with_faults(LocalServiceClient(seed=0, root=tmp_path), plan)
    fake, _ = with_faults(FakeServiceClient(seed=0), FaultPlan())

    async def run() -> None:
        trainer: Any = await service.create_lora_training_client("tiny", rank=4)
        assert inflight_refusal(trainer) is None
        live = await trainer.save_weights_and_get_sampling_client(kind="inflight")
        newer = await trainer.save_weights_and_get_sampling_client(kind="inflight")
        frozen = await trainer.save_weights_and_get_sampling_client(record_stability_info=True)
        assert live._params is newer._params and frozen._params is not newer._params
        assert faults.calls["save_weights_and_get_sampling_client"] == 3 and len(faults.injected) == 1
        snapshots: Any = await fake.create_lora_training_client("fake", rank=1)
        assert "takes no 'kind'" in str(inflight_refusal(snapshots))
        assert (await snapshots.save_weights_and_get_sampling_client()).state.version == 0

    asyncio.run(run())


def test_serve_makes_inflight_samplers(tmp_path: Path) -> None:
    core = ServeCore(model="tiny", root=tmp_path)
    session = core.create_session(
        types.CreateSessionRequest(tags=[], user_metadata=None, sdk_version="0.38.0")
    ).session_id
    lora = types.LoraConfig(rank=4)
    created = core.create_model(
        types.CreateModelRequest(session_id=session, model_seq_id=0, base_model="tiny", lora_config=lora)
    )
    model = str(created.work().model_id)

    def save(seq: int, kind: Any) -> Any:
        req = types.SaveWeightsForSamplerRequest(model_id=model, sampling_session_seq_id=seq, kind=kind)
        return core._samplers[core.save_weights_for_sampler(req).work().sampling_session_id].client

    live, frozen, newer = save(0, "inflight"), save(1, "snapshot"), save(2, "inflight")
    assert live._params is newer._params and frozen._params is not newer._params


def test_the_contract_check_refuses_inflight_samplers_where_a_service_makes_none() -> None:
    report = asyncio.run(
        check_contract(FakeServiceClient(seed=0), base_model="fake", vocab_size=262, sampler_kind="inflight")
    )
    (inflight,) = (r for r in report.results if r.name == "inflight_sampler")
    assert not inflight.passed and "takes no 'kind'" in inflight.got
    enforce_contract(report, {"sampler_kind": "snapshot"})  # a run that does not ask goes on
    with pytest.raises(ContractError) as refused:
        enforce_contract(report, {"sampler_kind": "inflight"})
    assert [r.key for r in refused.value.refused] == ["sampler_kind"]
    plain = asyncio.run(check_contract(FakeServiceClient(seed=0), base_model="fake", vocab_size=262))
    assert [r.name for r in plain.results] == list(CHECK_NAMES)  # not asked: not checked
