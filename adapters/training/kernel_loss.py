"""Any kernel loss through ``forward_backward_custom``: the JAX loss as a surrogate the service can train on.

A custom loss receives the service's per-token logprobs (torch tensors on Tinker) and returns a scalar to
differentiate. :func:`kernel_loss` computes the kernel's JAX loss and its gradient ``g = ∂loss/∂lp`` with
``jax.grad`` and returns ``Σ_t g_t · lp_t``: its gradient with respect to the logprobs is the kernel's,
so the service's autograd carries the kernel's gradient into the weights. ``TrainConfig.loss_fn =
"kernel:NAME"`` selects ``kernel.jax.NAME_loss`` with ``loss_fn_config`` as its options.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tinker

__all__: list[str] = []


def kernel_loss(name: str, options: dict[str, float]) -> Any:
    """A ``forward_backward_custom`` loss: the kernel's JAX loss, as the surrogate ``Σ_t g_t · lp_t`` where
    ``g = ∂loss/∂lp`` is computed by ``jax.grad`` (so the service's autograd sees the kernel's gradient)."""
    import jax
    import jax.numpy as jnp

    import kernel.jax as kj

    fn = getattr(kj, f"{name}_loss")

    def loss_fn(data: list[tinker.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        total: Any = 0.0
        value = 0.0
        for datum, lp in zip(data, logprobs, strict=True):
            inputs = datum.loss_fn_inputs
            sampler = jnp.asarray(inputs["logprobs"].to_numpy())
            adv = jnp.asarray(inputs["advantages"].to_numpy())
            lp_np = np.asarray(lp.detach().cpu().numpy() if hasattr(lp, "detach") else lp, dtype=np.float32)

            def scalar(x: Any, sampler: Any = sampler, adv: Any = adv) -> Any:
                return jnp.sum(fn(x, sampler, adv, **options).loss)

            v, g = jax.value_and_grad(scalar)(jnp.asarray(lp_np))
            value += float(v)
            grad = np.asarray(g)
            if hasattr(lp, "new_tensor"):
                total = total + (lp * lp.new_tensor(grad)).sum()
            else:
                total = total + float(np.sum(np.asarray(lp) * grad))
        return total, {"loss:kernel": value}

    return loss_fn
