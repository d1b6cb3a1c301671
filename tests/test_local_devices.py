"""The local service on several devices: training rows split among them, the same results as on one.

The suite runs with JAX's CPU split in two (tests/conftest.py, as ``debate-kernel train`` does); the
one-device run of the same scenario happens in a subprocess, since the device count is fixed at JAX's
first computation.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

import tinker  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from tinker import types  # noqa: E402

from adapters.local import split_cpu, train_step  # noqa: E402
from tests._marks import EXHAUSTIVE  # noqa: E402
from tests.test_local_service import _trainer, rl_datum  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
_TWO = pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="the two devices are CPU ones (tests/conftest.py); a GPU is the default",
)


def _datum(rng: np.random.Generator, n: int) -> types.Datum:
    """An RL datum of n positions: random tokens and advantages, sampler logprobs −1."""
    return rl_datum(rng.integers(0, 256, n + 1).tolist(), [-1.0] * n, rng.normal(size=n).tolist())


async def _scenario(root: str) -> dict[str, Any]:
    """Two LoRA steps on three datums (an odd row count), then a seeded sample from the snapshot."""
    trainer = await _trainer(root=Path(root))
    rng = np.random.default_rng(0)
    data = [_datum(rng, n) for n in (5, 9, 12)]
    first = await trainer.forward_backward(data, "importance_sampling")
    step = await trainer.optim_step(types.AdamParams(learning_rate=1e-2))
    second = await trainer.forward_backward(data, "importance_sampling")
    sampler = await trainer.save_weights_and_get_sampling_client()
    params = types.SamplingParams(max_tokens=8, seed=1, temperature=1.0)
    sampled = await sampler.sample(tinker.ModelInput.from_ints([1, 2, 3]), 2, params)
    return {
        "devices": len(jax.devices()),
        "loss": [first.metrics["loss:sum"], second.metrics["loss:sum"]],
        "grad_norm": step.metrics["grad_norm"],
        "logprobs": [o["logprobs"].tolist() for o in second.loss_fn_outputs],
        "tokens": [list(s.tokens) for s in sampled.sequences],
    }


def _one_device(root: str) -> dict[str, Any]:
    code = (
        "import asyncio, json, sys, jax\n"
        "jax.config.update('jax_num_cpu_devices', 1)\n"
        "from tests.test_local_devices import _scenario\n"
        "print(json.dumps(asyncio.run(_scenario(sys.argv[1]))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, root],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@_TWO
@EXHAUSTIVE  # a second process on one device; the fast tier checks the split itself (below)
def test_two_devices_train_as_one_does_up_to_rounding(tmp_path: Path) -> None:
    assert len(jax.devices()) == 2  # tests/conftest.py split the CPU before JAX started
    two = asyncio.run(_scenario(str(tmp_path / "two")))
    one = _one_device(str(tmp_path / "one"))
    assert (one["devices"], two["devices"]) == (1, 2)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5, atol=1e-6)
    assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
    for a, b in zip(two["logprobs"], one["logprobs"], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert two["tokens"] == one["tokens"]


@_TWO
def test_training_rows_are_split_and_the_weights_replicated(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = train_step.forward_backward

    def recording(trainable: Any, frozen: Any, grads: Any, batch: Any, **kw: Any) -> Any:
        seen.append((batch[0].shape, batch[0].sharding, jax.tree_util.tree_leaves(trainable)[0].sharding))
        return real(trainable, frozen, grads, batch, **kw)

    monkeypatch.setattr(train_step, "forward_backward", recording)

    async def main() -> tuple[Any, Any]:
        with tempfile.TemporaryDirectory() as root:
            trainer = await _trainer(root=Path(root))
            await trainer.forward_backward([_datum(np.random.default_rng(1), 6)] * 3, "importance_sampling")
            sampler = await trainer.save_weights_and_get_sampling_client()
            return trainer._state, sampler

    state, sampler = asyncio.run(main())
    ((shape, rows, weights),) = seen
    assert shape[0] % 2 == 0 and shape[0] >= 3  # three rows, padded to an even count
    assert isinstance(rows, NamedSharding) and rows.spec[0] == "rows" and rows.mesh.size == 2
    assert weights.is_fully_replicated and len(weights.device_set) == 2
    assert all(len(leaf.sharding.device_set) == 2 for leaf in jax.tree_util.tree_leaves(state.grads))
    # the sampler's snapshot lives on one device: sampling does not run twice
    assert {len(leaf.sharding.device_set) for leaf in jax.tree_util.tree_leaves(sampler._params)} == {1}


def test_split_cpu_after_jax_ran_changes_nothing() -> None:
    jax.numpy.zeros(1).block_until_ready()
    before = jax.devices()
    assert split_cpu(3) is False
    assert jax.devices() == before
    with pytest.raises(ValueError, match="devices must be an int >= 1, got True"):
        split_cpu(True)
