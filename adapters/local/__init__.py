"""A local training service in JAX with Tinker's client surface (see :mod:`adapters.local.service`).

Needs the ``local`` extra (optax, safetensors) and JAX. ``LocalServiceClient`` satisfies
:class:`adapters.tinker.protocol.ServiceClient`, so the training loop runs on one machine.

- :mod:`adapters.local.model`: the decoder-only transformer (sizes, forward pass, KV-cache sampling,
  weight files);
- :mod:`adapters.local.hf`: Hugging Face checkpoints (dense Llama 3.x, Qwen3) read and exported;
- :mod:`adapters.local.lora`: LoRA targets (Tinker's flags) and adapter files;
- :mod:`adapters.local.train_step`: one training call's arithmetic (datums checked and packed, the
  losses, jitted forward / backward, AdamW);
- :mod:`adapters.local.state`: a training client's state and its checkpoint file;
- :mod:`adapters.local.devices`: the CPU backend split into devices, rows split among them;
- :mod:`adapters.local.service`: the service, training and sampling clients (futures, ordering,
  snapshots, batched sampling).
"""

from adapters.local import hf as hf
from adapters.local import lora as lora
from adapters.local.devices import CPU_DEVICES, split_cpu
from adapters.local.model import SIZES, ModelConfig
from adapters.local.service import LocalSamplingClient, LocalServiceClient, LocalTrainingClient, serves

__all__ = [
    "CPU_DEVICES",
    "SIZES",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "ModelConfig",
    "serves",
    "split_cpu",
]
