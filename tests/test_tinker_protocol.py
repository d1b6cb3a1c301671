"""Static check (mypy, no network): the real Tinker SDK clients and the in-repo fake satisfy the protocols."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Heavy third-party packages are skipped (their names become Any) so a cold check takes seconds; the
# kernel and the SDK are followed silently (their own errors are not ours to report here).
_CONFIG = """
[mypy]
strict = True
[mypy-transformers.*,torch.*,httpx.*,anyio.*,pydantic.*,pydantic_core.*,jax.*,jaxlib.*,hypothesis.*,huggingface_hub.*,tokenizers.*,numpy.*]
follow_imports = skip
[mypy-kernel.*,tinker.*,adapters.tinker.convert,adapters.transcripts]
follow_imports = silent
"""

_HEADER = """
import tinker
from tinker import types
from adapters.tinker import protocol
from adapters.tinker.fake import FakeSamplingClient, FakeServiceClient, FakeTrainingClient
from adapters.futures import AwaitableFuture, CompletedFuture
from adapters.tokenizers import ByteTokenizer
"""

_SATISFIED = """
def real_service(x: tinker.ServiceClient) -> protocol.ServiceClient: return x
def real_training(x: tinker.TrainingClient) -> protocol.TrainingClient: return x
def real_sampling(x: tinker.SamplingClient) -> protocol.SamplingClient: return x
def real_future(x: tinker.APIFuture[types.SampleResponse]) -> protocol.Future[types.SampleResponse]: return x
def fake_service(x: FakeServiceClient) -> protocol.ServiceClient: return x
def fake_training(x: FakeTrainingClient) -> protocol.TrainingClient: return x
def fake_sampling(x: FakeSamplingClient) -> protocol.SamplingClient: return x
def byte_tokenizer(x: ByteTokenizer) -> protocol.Tokenizer: return x
def completed_future(x: CompletedFuture[int]) -> protocol.Future[int]: return x
def awaitable_future(x: AwaitableFuture[int]) -> protocol.Future[int]: return x
"""

_BROKEN = """
class NoOptimStep:
    def forward_backward(self, data: list[types.Datum], loss_fn: types.LossFnType,
                         loss_fn_config: None = None) -> CompletedFuture[types.ForwardBackwardOutput]:
        raise NotImplementedError
class WrongSample:
    def sample(self, prompt: types.ModelInput, num_samples: int) -> CompletedFuture[types.SampleResponse]:
        raise NotImplementedError
    def compute_logprobs(self, prompt: types.ModelInput) -> CompletedFuture[list[float | None]]:
        raise NotImplementedError
def no_optim_step(x: NoOptimStep) -> protocol.TrainingClient: return x
def wrong_sample(x: WrongSample) -> protocol.SamplingClient: return x
"""


def _mypy(tmp_path: Path, body: str, name: str) -> tuple[str, int]:
    api = pytest.importorskip("mypy.api")
    pytest.importorskip("tinker")
    (tmp_path / "mypy.ini").write_text(_CONFIG)
    snippet = tmp_path / f"{name}.py"
    snippet.write_text(textwrap.dedent(_HEADER + body))
    cache = ROOT / ".mypy_cache" / "tinker-protocol"
    stdout, stderr, code = api.run(
        ["--config-file", str(tmp_path / "mypy.ini"), "--cache-dir", str(cache), str(snippet)]
    )
    return stdout + stderr, code


def test_real_sdk_fake_and_futures_satisfy_the_protocols(tmp_path: Path) -> None:
    out, code = _mypy(tmp_path, _SATISFIED, "protocol_satisfied")
    assert code == 0, out


def test_a_class_missing_a_method_fails_the_check(tmp_path: Path) -> None:
    out, code = _mypy(tmp_path, _BROKEN, "protocol_broken")
    assert code == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out  # one per broken class, nothing else
    assert 'Incompatible return value type (got "NoOptimStep"' in errors[0]
    assert 'Incompatible return value type (got "WrongSample"' in errors[1]
    assert "sampling_params" in out  # the note names the conflicting member


_MODULES = (
    "tokenizers",
    "futures",
    "tinker/renderers",
    "tinker/fake",
    "tinker/faults",
    "training/rollouts",
    "tinker/protocol",
    "training/credit",
)


def test_training_adapters_are_strict_mypy_clean(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    (tmp_path / "mypy.ini").write_text(_CONFIG)
    files = [str(ROOT / "adapters" / f"{m}.py") for m in _MODULES]
    stdout, stderr, code = api.run(
        [
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "tinker-protocol"),
            *files,
        ]
    )
    assert code == 0, stdout + stderr
