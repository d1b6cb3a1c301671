"""What ``debate-kernel serve`` computes with: the local JAX service, or the in-repo fake.

:class:`adapters.serve.state.ServeCore` asks :func:`engine` for the model it serves and, for each
training run and sampling session, for a fresh service (:attr:`Engine.service`) of the seed and the
run's folder. Both engines have the local service's client surface (:class:`EngineService`,
:class:`EngineTrainer`, :class:`EngineSampler`): futures that are already complete, local files as
paths.

- Any model but ``fake``: :class:`adapters.local.LocalServiceClient` (a size of
  :data:`adapters.local.model.SIZES` or a ``.safetensors`` file), states saved as ``.safetensors``.
- ``fake`` (:data:`FAKE`): the in-repo fake (:class:`adapters.tinker.fake.FakeServiceClient`: a scripted
  debate policy, the byte tokenizer, hashed logprobs, no JAX), states saved as ``.json``. A test and
  demo engine: the training loop's tests run through the SDK against it, fast and deterministic, and a
  run computes exactly what an in-process ``FakeServiceClient`` of the same seed computes. Its model
  learns nothing; its weights are a digest of the batches they were trained on.

Nothing here imports JAX for the fake, so ``serve --model fake`` starts in about a second.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tinker import types

from adapters._atomic import atomic_write
from adapters.futures import AwaitableFuture, CompletedFuture, completed, failed
from adapters.serve import FAKE
from adapters.tinker.fake import FakeServiceClient, FakeTrainingClient, forward_backward, load_state_file
from adapters.tokenizers import ByteTokenizer

__all__ = ["FAKE", "Done", "Engine", "EngineSampler", "EngineService", "EngineTrainer", "engine"]


FAKE_CONTEXT = 1 << 16
"""The context length the fake engine reports (it has no limit of its own)."""


T_co = TypeVar("T_co", covariant=True)


class Done(Protocol[T_co]):
    """A future whose work has run (the engines' :class:`~adapters.futures.CompletedFuture`)."""

    def result(self, timeout: float | None = None) -> T_co: ...


class EngineSampler(Protocol):
    """A sampler on frozen weights."""

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> Done[types.SampleResponse] | AwaitableFuture[types.SampleResponse]:
        """Samples; outside an event loop the work has run when this returns (a done future)."""
        ...

    def compute_logprobs(self, prompt: types.ModelInput) -> Done[list[float | None]]: ...


class EngineTrainer(Protocol):
    """A training run: gradients, optimizer steps, saved states and samplers."""

    @property
    def base_model(self) -> str: ...

    @property
    def lora_rank(self) -> int: ...

    def forward(
        self, data: list[types.Datum], loss_fn: types.LossFnType, loss_fn_config: Any = None
    ) -> Done[types.ForwardBackwardOutput]: ...

    def forward_backward(
        self, data: list[types.Datum], loss_fn: types.LossFnType, loss_fn_config: Any = None
    ) -> Done[types.ForwardBackwardOutput]: ...

    def optim_step(self, optim_params: types.AdamParams) -> Done[types.OptimStepResponse]: ...

    def save_state(self, name: str) -> Done[types.SaveWeightsResponse]: ...

    def load_state(self, path: str) -> Done[None]: ...

    def load_state_with_optimizer(self, path: str) -> Done[None]: ...

    def save_weights_for_sampler(self, name: str) -> Done[types.SaveWeightsForSamplerResponse]: ...

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> Done[EngineSampler]: ...


class EngineService(Protocol):
    """Creates training runs and samplers; saves under its root (``states/``, ``weights/``)."""

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> Done[EngineTrainer]: ...

    def create_full_training_client(self, base_model: str) -> Done[EngineTrainer]: ...

    def create_training_client_from_state_with_optimizer(self, path: str) -> Done[EngineTrainer]: ...

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> Done[EngineSampler]: ...


@dataclass(frozen=True)
class Engine:
    """One served model's engine.

    Attributes:
        max_seq_len: the context length ``get_server_capabilities`` reports.
        vocab_size: how many token ids the model samples from.
        suffix: the file suffix of its saved states and sampler weights.
        service: a fresh service of ``(seed, root)``, one per training run and sampling session.
    """

    max_seq_len: int
    vocab_size: int
    suffix: str
    service: Callable[[int, Path], EngineService]


def engine(model: str, compute_dtype: str = "float32") -> Engine:
    """The engine of ``serve --model MODEL [--dtype COMPUTE_DTYPE]``.

    Raises:
        ValueError: if ``model`` is neither :data:`FAKE`, a local size nor an existing weights file, or
            ``compute_dtype`` is not one of :data:`adapters.local.model.COMPUTE_DTYPES` (the fake engine:
            not ``"float32"``, as it has no matrix products).

    Examples:
        >>> fake = engine("fake")
        >>> fake.suffix, fake.max_seq_len, fake.vocab_size
        ('.json', 65536, 262)
    """
    if model == FAKE:
        if compute_dtype != "float32":
            raise ValueError(
                f"--dtype {compute_dtype} needs a local model: the fake engine has no matrix products"
            )
        return Engine(
            FAKE_CONTEXT, ByteTokenizer.vocab_size, ".json", lambda seed, root: _FakeService(seed, root)
        )
    from adapters.local import hf
    from adapters.local import model as m
    from adapters.local.service import LocalServiceClient, serves

    m.check_compute_dtype(compute_dtype, "--dtype")
    if not serves(model):
        raise ValueError(
            f"unknown model {model!r}: expected one of {sorted(m.SIZES)}, the path of an existing "
            f".safetensors weights file or of a Hugging Face checkpoint directory, or {FAKE!r} (the "
            "in-repo fake, for tests)"
        )
    if hf.is_checkpoint(model):
        cfg = hf.load(model)[0]  # the weights checked (and kept for every run) before serving
    else:
        cfg = m.SIZES[model] if model in m.SIZES else m.load_weights(model)[0]

    def local(seed: int, root: Path) -> EngineService:
        return LocalServiceClient(seed=seed, root=root, compute_dtype=compute_dtype)

    return Engine(cfg.max_seq_len, cfg.vocab_size, ".safetensors", local)


class _FakeTrainer:
    """A :class:`~adapters.tinker.fake.FakeTrainingClient` with the calls the server needs beyond the
    loop's: ``forward`` (the loss at these weights, nothing recorded), loads into the run, and sampler
    weights saved as files."""

    def __init__(self, client: FakeTrainingClient, root: Path) -> None:
        self.client, self.root = client, root

    @property
    def base_model(self) -> str:
        return self.client.state.base_model

    @property
    def lora_rank(self) -> int:
        return self.client.state.rank

    def forward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, Any] | None = None,
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        try:
            return completed(forward_backward(self.client.state, data, loss_fn, loss_fn_config)[1])
        except ValueError as e:
            return failed(e)

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, Any] | None = None,
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        return self.client.forward_backward(data, loss_fn, loss_fn_config)

    def optim_step(self, optim_params: types.AdamParams) -> CompletedFuture[types.OptimStepResponse]:
        return self.client.optim_step(optim_params)

    def save_state(self, name: str) -> CompletedFuture[types.SaveWeightsResponse]:
        return self.client.save_state(name)

    def load_state(self, path: str) -> CompletedFuture[None]:
        """The saved state in place of the run's (the fake's optimizer keeps nothing but the lineage,
        which belongs to the weights: loading with or without the optimizer is the same)."""
        try:
            self.client.state = load_state_file(path)
        except ValueError as e:
            return failed(e)
        return completed(None)

    def load_state_with_optimizer(self, path: str) -> CompletedFuture[None]:
        return self.load_state(path)

    def save_weights_for_sampler(self, name: str) -> CompletedFuture[types.SaveWeightsForSamplerResponse]:
        file = self.root / "weights" / f"{name}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(file) as f:
            f.write(self.client.state.to_json())
        return completed(types.SaveWeightsForSamplerResponse(path=str(file)))

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> CompletedFuture[EngineSampler]:
        return self.client.save_weights_and_get_sampling_client(name)  # type: ignore[return-value]


class _FakeService:
    """A :class:`~adapters.tinker.fake.FakeServiceClient` of ``seed`` saving under ``root``
    (``states/NAME.json``, ``weights/NAME.json``, ``events.jsonl``); LoRA only."""

    def __init__(self, seed: int, root: Path) -> None:
        self.fake, self.root = FakeServiceClient(seed=seed, root=root), root

    def _trainer(self, made: CompletedFuture[FakeTrainingClient]) -> CompletedFuture[EngineTrainer]:
        try:
            return completed(_FakeTrainer(made.result(), self.root))
        except ValueError as e:
            return failed(e)

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> CompletedFuture[EngineTrainer]:
        if not (train_mlp and train_attn and train_unembed):
            return failed(
                ValueError(
                    "the fake engine has no layers to choose: train_mlp, train_attn and "
                    "train_unembed must stay True"
                )
            )
        try:
            return self._trainer(self.fake.create_lora_training_client(base_model, rank))
        except ValueError as e:
            return failed(e)

    def create_full_training_client(self, base_model: str) -> CompletedFuture[EngineTrainer]:
        return failed(ValueError("the fake engine trains LoRA adapters only (a rank >= 1)"))

    def create_training_client_from_state_with_optimizer(self, path: str) -> CompletedFuture[EngineTrainer]:
        return self._trainer(self.fake.create_training_client_from_state_with_optimizer(path))

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> CompletedFuture[EngineSampler]:
        return self.fake.create_sampling_client(model_path, base_model)  # type: ignore[return-value]
