"""LoRA adapters on the local service: which weights get one (Tinker's flags), and their files.

Tinker's ``create_lora_training_client(base_model, rank=32, train_mlp=True, train_attn=True,
train_unembed=True)`` adapts the MLP, the attention projections and the output layer by default;
:func:`targets` maps the three flags onto :data:`~adapters.local.model.ALL_LORA_TARGETS`. The update is
(α/r)·A·B with α = :data:`~adapters.local.model.LORA_ALPHA` (:func:`adapters.local.model.merge_lora`).

Files:

- :func:`save_adapter` / :func:`read_adapter`: the adapter alone (A and B of every target) with the
  model config, the rank and the base model it belongs to, one safetensors file written atomically. A
  run on a Hugging Face checkpoint saves its sampler weights so (the base weights are not copied).
- :func:`export_peft`: the adapter as a PEFT directory (``adapter_config.json``,
  ``adapter_model.safetensors``) over the base checkpoint, which ``peft.PeftModel.from_pretrained``
  loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adapters.local import model as m

__all__ = ["ADAPTER_FORMAT", "export_peft", "is_adapter", "read_adapter", "save_adapter", "targets"]

ADAPTER_FORMAT = "debate-kernel-local-lora/1"
"""The ``format`` metadata of an adapter file."""

_ATTENTION = ("wq", "wk", "wv", "wo")
_MLP = ("w_gate", "w_up", "w_down")


def targets(
    *, train_attn: bool = True, train_mlp: bool = True, train_unembed: bool = True
) -> tuple[str, ...]:
    """The LoRA targets Tinker's flags select (its defaults: all three).

    Raises:
        ValueError: every flag is False (nothing would be trained).

    Examples:
        >>> targets()
        ('wq', 'wk', 'wv', 'wo', 'w_gate', 'w_up', 'w_down', 'lm_head')
        >>> targets(train_mlp=False, train_unembed=False)
        ('wq', 'wk', 'wv', 'wo')
    """
    chosen = (*(_ATTENTION if train_attn else ()), *(_MLP if train_mlp else ()))
    chosen = (*chosen, *(("lm_head",) if train_unembed else ()))
    if not chosen:
        raise ValueError("train_attn, train_mlp and train_unembed are all False: LoRA would train nothing")
    return chosen


def save_adapter(path: str | Path, cfg: m.ModelConfig, lora: m.Params, base_model: str) -> None:
    """Writes the adapter ``lora`` of a model of shape ``cfg`` over ``base_model`` to ``path`` atomically.

    Tensors ``TARGET.a`` and ``TARGET.b``; metadata ``format``, ``config``, ``rank``, ``base_model``.
    """
    from safetensors.numpy import save

    flat = {f"{name}.{part}": np.asarray(ab[part]) for name, ab in lora.items() for part in ("a", "b")}
    rank = next(iter(lora.values()))["a"].shape[-1]
    meta = {
        "format": ADAPTER_FORMAT,
        "config": m.config_json(cfg),
        "rank": str(rank),
        "base_model": str(base_model),
    }
    m.atomic_write_bytes(Path(path), save(flat, metadata=meta))


def is_adapter(path: str | Path) -> bool:
    """Whether ``path`` is a file :func:`save_adapter` wrote (its metadata says so)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return (f.metadata() or {}).get("format") == ADAPTER_FORMAT
    except Exception:
        return False


def read_adapter(path: str | Path) -> tuple[m.ModelConfig, m.Params, str]:
    """(config, adapter, base model) of a file :func:`save_adapter` wrote, every tensor checked.

    Raises:
        ValueError: the file is missing, not an adapter file, or its tensors do not fit its config
            (naming the file and what was wrong).
    """
    where = f"adapter file {str(path)!r}"
    meta, flat = m.read_tensors(path, where)
    if meta.get("format") != ADAPTER_FORMAT:
        raise ValueError(f"{where} is not a LoRA adapter (format {meta.get('format')!r})")
    try:
        cfg = m.config_from_json(meta["config"])
        rank, base_model = int(meta["rank"]), meta["base_model"]
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{where} has corrupt metadata: {exc}") from exc
    lora = m._unflatten({k: jnp.asarray(v) for k, v in flat.items()})
    names = tuple(t for t in m.ALL_LORA_TARGETS if t in lora)
    if not names or set(lora) != set(names):
        raise ValueError(f"{where}: tensors {sorted(lora)} are not LoRA targets {list(m.ALL_LORA_TARGETS)}")
    expected = jax.eval_shape(lambda: m.init_lora(cfg, rank, jax.random.key(0), names))
    m._check_like(expected, lora, where)
    return cfg, lora, base_model


_PEFT_MODULES = {
    "wq": "self_attn.q_proj",
    "wk": "self_attn.k_proj",
    "wv": "self_attn.v_proj",
    "wo": "self_attn.o_proj",
    "w_gate": "mlp.gate_proj",
    "w_up": "mlp.up_proj",
    "w_down": "mlp.down_proj",
}


def export_peft(out_dir: str | Path, lora: m.Params, base_model: str | Path) -> Path:
    """Writes ``lora`` as a PEFT LoRA adapter of the Hugging Face checkpoint ``base_model``.

    PEFT computes W·x + (α/r)·B_peft·A_peft·x with A_peft = Aᵀ [r, d_in] and B_peft = Bᵀ [d_out, r]:
    the same update as ours. ``lora_alpha`` is :data:`~adapters.local.model.LORA_ALPHA`.

    Returns:
        ``out_dir``.
    """
    from safetensors.numpy import save

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    flat: dict[str, np.ndarray] = {}
    modules: list[str] = []
    rank = 0
    for name, ab in lora.items():
        a, b = np.asarray(ab["a"], np.float32), np.asarray(ab["b"], np.float32)
        rank = a.shape[-1]
        if name == "lm_head":
            modules.append("lm_head")
            flat["base_model.model.lm_head.lora_A.weight"] = np.ascontiguousarray(a.T)
            flat["base_model.model.lm_head.lora_B.weight"] = np.ascontiguousarray(b.T)
            continue
        module = _PEFT_MODULES[name]
        modules.append(module.split(".")[-1])
        for i in range(a.shape[0]):
            prefix = f"base_model.model.model.layers.{i}.{module}"
            flat[f"{prefix}.lora_A.weight"] = np.ascontiguousarray(a[i].T)
            flat[f"{prefix}.lora_B.weight"] = np.ascontiguousarray(b[i].T)
    config: dict[str, Any] = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(base_model),
        "r": int(rank),
        "lora_alpha": m.LORA_ALPHA,
        "lora_dropout": 0.0,
        "target_modules": modules,
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
    m.atomic_write_bytes(out / "adapter_model.safetensors", save(flat, metadata={"format": "pt"}))
    m.atomic_write_bytes(out / "adapter_config.json", (json.dumps(config, indent=2) + "\n").encode())
    return out
