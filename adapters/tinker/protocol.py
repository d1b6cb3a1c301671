"""The client surface the training loop uses, as ``typing.Protocol``s.

These name exactly the Tinker SDK (0.38) calls that :mod:`adapters.tinker` makes, nothing more. The real
``tinker.ServiceClient`` satisfies :class:`ServiceClient` (checked statically by mypy in the tests, with
no network), and so do the in-repo fake service and the local JAX service (:mod:`adapters.local`). Code
above this module depends on these protocols, never on a concrete client class.

Every call returns a :class:`Future`: await it, or ``await fut.result_async()``. Requests submitted on one
training client run in submission order.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Protocol, TypeVar

from tinker import types

__all__ = [
    "CustomLossFn",
    "Future",
    "SamplingClient",
    "ServiceClient",
    "Tokenizer",
    "TrainingClient",
]

T_co = TypeVar("T_co", covariant=True)


class Future(Protocol[T_co]):
    """An SDK future: ``await fut`` or ``await fut.result_async()`` gives the result."""

    def __await__(self) -> Generator[Any, None, T_co]: ...

    async def result_async(self, timeout: float | None = None) -> T_co: ...


class Tokenizer(Protocol):
    """The two tokenizer calls the renderers use (a Hugging Face tokenizer has both)."""

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, token_ids: list[int], *, skip_special_tokens: bool = False) -> str: ...


CustomLossFn = Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, float]]]
"""``forward_backward_custom``'s loss: ``(data, logprobs_per_datum) -> (loss, metrics)``, where each
logprobs entry is a differentiable tensor of the datum's target logprobs (torch in the SDK)."""


class SamplingClient(Protocol):
    """A sampler bound to one frozen set of weights (a snapshot: later training never changes it)."""

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> Future[types.SampleResponse]: ...

    def compute_logprobs(self, prompt: types.ModelInput) -> Future[list[float | None]]:
        """Logprob of each prompt token given the ones before (None for the first): a KL reference."""
        ...


class TrainingClient(Protocol):
    """A model being trained: gradients, optimizer steps, checkpoints, fresh samplers."""

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> Future[types.ForwardBackwardOutput]: ...

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> Future[types.ForwardBackwardOutput]: ...

    def optim_step(self, optim_params: types.AdamParams) -> Future[types.OptimStepResponse]: ...

    def save_state(self, name: str) -> Future[types.SaveWeightsResponse]: ...

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> Future[SamplingClient]: ...

    def get_tokenizer(self) -> Any: ...


class ServiceClient(Protocol):
    """Creates training clients: a fresh LoRA run, or one resumed from a saved state with its optimizer."""

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Future[TrainingClient]: ...

    def create_training_client_from_state_with_optimizer(self, path: str) -> Future[TrainingClient]: ...

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> Future[SamplingClient]:
        """A sampler on saved weights (``model_path``) or on a base model (e.g. a KL reference)."""
        ...
