"""A training client's state and its file: weights (the frozen base and the trained LoRA adapters, or
every weight), AdamW's state, and the model config, in one safetensors file written atomically and read
back bit for bit, every tensor checked against the model's shapes. A LoRA run on a Hugging Face
checkpoint (:mod:`adapters.local.hf`) does not copy the frozen base into its file: the file names the
checkpoint's directory (``base_model``), which is read again, and must still match, when it is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adapters.local import hf
from adapters.local import model as m
from adapters.local.train_step import adamw

__all__: list[str] = []

STATE_FORMAT = "debate-kernel-local-state/1"


class State(NamedTuple):
    """A training client's state: model, weights, optimizer state, accumulated gradients, step."""

    cfg: m.ModelConfig
    frozen: m.Params | None  # the base weights under LoRA; None for full fine-tuning
    trainable: m.Params  # LoRA adapters, or all weights
    opt_state: Any
    grads: m.Params
    step: int
    rank: int  # 0 for full fine-tuning
    base_model: str


def fresh_state(
    cfg: m.ModelConfig, frozen: m.Params | None, trainable: m.Params, rank: int, base_model: str
) -> State:
    return State(
        cfg,
        frozen,
        trainable,
        adamw().init(trainable),
        jax.tree_util.tree_map(jnp.zeros_like, trainable),
        0,
        rank,
        base_model,
    )


def write_state(path: Path, state: State) -> None:
    """Writes ``state`` to ``path`` atomically: one safetensors file, the config and counters as metadata."""
    from safetensors.numpy import save

    flat: dict[str, np.ndarray] = {}
    if state.frozen is not None and not hf.is_checkpoint(state.base_model):
        flat.update({f"frozen.{k}": np.asarray(v) for k, v in m._flatten(state.frozen).items()})
    flat.update({f"trainable.{k}": np.asarray(v) for k, v in m._flatten(state.trainable).items()})
    for i, leaf in enumerate(jax.tree_util.tree_leaves(state.opt_state)):
        flat[f"opt.{i:04d}"] = np.asarray(leaf)
    meta = {
        "format": STATE_FORMAT,
        "config": m.config_json(state.cfg),
        "rank": str(state.rank),
        "step": str(state.step),
        "base_model": state.base_model,
    }
    m.atomic_write_bytes(path, save(flat, metadata=meta))


def read_state(path: str | Path) -> State:
    """The state :func:`write_state` wrote, bit for bit (gradients zero).

    Raises:
        ValueError: the file cannot be read, is not a local training state, or its metadata or tensors do
            not fit the model it names (each naming the file and what was wrong).
    """
    where = f"checkpoint {str(path)!r}"
    meta, flat = m.read_tensors(path, where)
    if meta.get("format") != STATE_FORMAT:
        raise ValueError(
            f"{where} is not a local training state "
            f"(format {meta.get('format')!r}, expected {STATE_FORMAT!r})"
        )
    try:
        cfg = m.config_from_json(meta["config"])
        rank, step, base_model = int(meta["rank"]), int(meta["step"]), meta["base_model"]
    except Exception as exc:
        raise ValueError(f"{where} has corrupt metadata: {exc}") from exc
    parts: dict[str, dict[str, Any]] = {"frozen": {}, "trainable": {}, "opt": {}}
    for name, value in flat.items():
        head, _, rest = name.partition(".")
        if head not in parts:
            raise ValueError(f"{where} holds an unexpected tensor {name!r}")
        parts[head][rest] = jnp.asarray(value)
    key = jax.random.key(0)
    expected_params = jax.eval_shape(lambda: m.init_params(cfg, key))
    if rank > 0:
        frozen: m.Params | None = m._unflatten(parts["frozen"])
        if not parts["frozen"] and hf.is_checkpoint(base_model):  # the base stays in its checkpoint
            base_cfg, frozen = hf.load(base_model)
            cfg = cfg._replace(tokenizer_vocab=base_cfg.tokenizer_vocab)  # a state saved before the key
            if base_cfg != cfg:
                raise ValueError(f"{where} was trained on {cfg}, but {base_model!r} now holds {base_cfg}")
        m._check_like(expected_params, frozen, f"{where} (base weights)")
        targets = tuple(
            t for t in m.ALL_LORA_TARGETS if any(k.startswith(f"{t}.") for k in parts["trainable"])
        )
        expected_trainable = jax.eval_shape(lambda: m.init_lora(cfg, rank, key, targets or m.LORA_TARGETS))
    else:
        frozen, expected_trainable = None, expected_params
    trainable = m._unflatten(parts["trainable"])
    m._check_like(expected_trainable, trainable, f"{where} (trained weights)")
    template = adamw().init(trainable)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    saved = [parts["opt"].get(f"{i:04d}") for i in range(len(leaves))]
    if len(parts["opt"]) != len(leaves) or any(
        s is None or s.shape != t.shape or s.dtype != t.dtype for s, t in zip(saved, leaves, strict=True)
    ):
        raise ValueError(f"{where}: optimizer state does not match the model ({len(parts['opt'])} tensors)")
    opt_state = jax.tree_util.tree_unflatten(treedef, saved)
    grads = jax.tree_util.tree_map(jnp.zeros_like, trainable)
    return State(cfg, frozen, trainable, opt_state, grads, step, rank, base_model)
