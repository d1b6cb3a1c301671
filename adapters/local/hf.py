"""Hugging Face checkpoints of dense Llama 3.x and Qwen3 models for the local service, read and written.

A checkpoint is a local directory as ``save_pretrained`` writes it: ``config.json``, the weights in
``model.safetensors`` or in shards listed by ``model.safetensors.index.json``, and the tokenizer
(``tokenizer.json``, ``tokenizer_config.json`` with its chat template). :func:`read_config` maps
``config.json`` onto :class:`~adapters.local.model.ModelConfig` and :func:`load` the weights onto the
model's params (float32, every projection transposed to [d_in, d_out], layers stacked on a leading
axis); both refuse what the model does not compute (another architecture, biases, sliding windows, an
unknown RoPE scaling) by name. :func:`export` writes merged weights back as such a directory, which
``transformers`` loads. Nothing here downloads.

Names (Hugging Face → ours): ``model.embed_tokens`` → ``embed``; per layer ``self_attn.{q,k,v,o}_proj``
→ ``w{q,k,v,o}``, ``self_attn.{q,k}_norm`` → ``{q,k}_norm`` (Qwen3), ``mlp.{gate,up,down}_proj`` →
``w_{gate,up,down}``, ``input_layernorm`` → ``attn_norm``, ``post_attention_layernorm`` → ``mlp_norm``;
``model.norm`` → ``final_norm``; ``lm_head`` → ``lm_head`` (absent when the embeddings are tied).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from adapters.local import model as m
from adapters.local_models import is_checkpoint_dir as is_checkpoint

__all__ = [
    "ARCHITECTURES",
    "CheckpointTokenizer",
    "check",
    "config_dict",
    "export",
    "export_file",
    "hf_tokenizer",
    "is_checkpoint",
    "load",
    "load_weights_file",
    "read_config",
    "tokenizer_for",
]

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3"}
"""The ``architectures`` entries of ``config.json`` this module loads, and their ``model_type``."""

_LAYER_NAMES = {
    "self_attn.q_proj.weight": "wq",
    "self_attn.k_proj.weight": "wk",
    "self_attn.v_proj.weight": "wv",
    "self_attn.o_proj.weight": "wo",
    "mlp.gate_proj.weight": "w_gate",
    "mlp.up_proj.weight": "w_up",
    "mlp.down_proj.weight": "w_down",
    "input_layernorm.weight": "attn_norm",
    "post_attention_layernorm.weight": "mlp_norm",
    "self_attn.q_norm.weight": "q_norm",
    "self_attn.k_norm.weight": "k_norm",
}
"""Per-layer tensor names: Hugging Face's (after ``model.layers.N.``) → ours."""

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)
"""Files :func:`export` copies from the source checkpoint when it has them."""


def _rope(config: Mapping[str, Any], where: str) -> tuple[float, tuple[float, float, float, int] | None]:
    """(theta, llama3 scaling or None) from ``rope_parameters`` (transformers 5) or ``rope_theta`` and
    ``rope_scaling`` (earlier files)."""
    params = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    if not isinstance(params, Mapping) or not isinstance(scaling, Mapping):
        raise ValueError(f"{where}: rope_parameters / rope_scaling must be objects")
    merged = {**scaling, **params}
    theta = merged.get("rope_theta", config.get("rope_theta", 10000.0))
    kind = merged.get("rope_type", merged.get("type", "default"))
    if kind == "default":
        return float(theta), None
    if kind == "llama3":
        try:
            scale = (
                float(merged["factor"]),
                float(merged["low_freq_factor"]),
                float(merged["high_freq_factor"]),
                int(merged["original_max_position_embeddings"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: llama3 rope scaling lacks or mistypes {exc}") from None
        return float(theta), scale
    raise ValueError(f"{where}: rope type {kind!r} is not supported (default and llama3 are)")


def read_config(path: str | Path) -> m.ModelConfig:
    """The model shape of the checkpoint in ``path`` (its ``config.json``).

    Raises:
        ValueError: no ``config.json``, an architecture other than :data:`ARCHITECTURES`, or a feature the
            model does not compute (each naming the file and what was found).
    """
    file = Path(path) / "config.json"
    where = f"checkpoint config {str(file)!r}"
    if not file.is_file():
        raise ValueError(f"{where} does not exist (a Hugging Face checkpoint directory holds config.json)")
    try:
        config = json.loads(file.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {where}: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{where} is not a JSON object")
    archs = config.get("architectures") or []
    supported = [a for a in archs if a in ARCHITECTURES]
    if not supported and config.get("model_type") not in ARCHITECTURES.values():
        raise ValueError(
            f"{where}: architecture {archs or config.get('model_type')!r} is not supported "
            f"(supported: {', '.join(ARCHITECTURES)})"
        )
    qwen3 = (supported[0] if supported else "") == "Qwen3ForCausalLM" or config.get("model_type") == "qwen3"
    refused = {
        "hidden_act": config.get("hidden_act", "silu") != "silu",
        "attention_bias": bool(config.get("attention_bias", False)),
        "mlp_bias": bool(config.get("mlp_bias", False)),
        "use_sliding_window": bool(config.get("use_sliding_window", False)),
        "pretraining_tp": config.get("pretraining_tp", 1) not in (1, None),
    }
    named = [f"{k}={config.get(k)!r}" for k, bad in refused.items() if bad]
    if named:
        raise ValueError(f"{where}: {', '.join(named)} is not supported by the local model")
    theta, scaling = _rope(config, where)
    try:
        heads = int(config["num_attention_heads"])
        cfg = m.ModelConfig(
            vocab_size=int(config["vocab_size"]),
            d_model=int(config["hidden_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            d_ff=int(config["intermediate_size"]),
            max_seq_len=int(config.get("max_position_embeddings", 4096)),
            rope_base=theta,
            norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_size=int(config.get("head_dim") or int(config["hidden_size"]) // heads),
            qk_norm=qwen3,
            tie_embeddings=bool(config.get("tie_word_embeddings", False)),
            rope_scaling=scaling,
            tokenizer_vocab=_tokenizer_ids(Path(path), int(config["vocab_size"])),
        )
    except KeyError as exc:
        raise ValueError(f"{where} lacks {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    m._check_config(cfg)
    return cfg


def _tokenizer_ids(folder: Path, rows: int) -> int:
    """How many ids the sampler may draw (:attr:`ModelConfig.tokenizer_vocab`): the tokenizer's, its
    largest id + 1, when that is fewer than the embedding's ``rows``; else 0 (every row). 0 too without a
    ``tokenizer.json`` (:func:`check` refuses a checkpoint without one)."""
    if not (folder / "tokenizer.json").is_file():
        return 0
    ids = CheckpointTokenizer(folder).id_count
    return ids if ids < rows else 0


def check(path: str | Path) -> m.ModelConfig:
    """:func:`read_config`, and that the weight files and ``tokenizer.json`` are there (the weights are
    not read: :func:`load` checks them).

    Raises:
        ValueError: naming the missing or unsupported piece.
    """
    cfg = read_config(path)
    _weight_files(Path(path))
    CheckpointTokenizer(path)
    return cfg


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a checkpoint: ``model.safetensors``, else the shards its index names
    (transformers' order: an unsharded save over a sharded one leaves the old index behind)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file() and not (folder / "model.safetensors").is_file():
        try:
            weight_map = json.loads(index.read_text("utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"cannot read the shard index {str(index)!r}: {exc}") from exc
        shards = [folder / name for name in dict.fromkeys(weight_map.values())]
        missing = [str(s) for s in shards if not s.is_file()]
        if missing:
            raise ValueError(
                f"checkpoint {str(folder)!r}: shard file {missing[0]!r} (named by its index) is missing"
            )
        return shards
    single = folder / "model.safetensors"
    if not single.is_file():
        raise ValueError(
            f"checkpoint {str(folder)!r} holds no weights: neither model.safetensors nor "
            "model.safetensors.index.json exists"
        )
    return [single]


def _read(files: list[Path]) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    out: dict[str, np.ndarray] = {}
    for file in files:
        try:
            with safe_open(str(file), framework="numpy") as f:
                for name in f.keys():
                    out[name] = f.get_tensor(name)
        except Exception as exc:
            raise ValueError(f"cannot read weights file {str(file)!r}: {exc}") from exc
    return out


def load(path: str | Path) -> tuple[m.ModelConfig, m.Params]:
    """The model shape and float32 params of the checkpoint in ``path``.

    Loaded once per process and directory while its files are unchanged (the arrays are immutable, so
    every training run and sampler of the base model shares them).

    Raises:
        ValueError: :func:`read_config`'s errors; no weights file, a missing shard, a tensor missing or of
            the wrong shape, or non-finite values (each naming the file or tensor).
    """
    folder = Path(path).resolve()
    files = _weight_files(folder)
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in [folder / "config.json", *files])
    return _load(folder, stamp)


@functools.lru_cache(maxsize=2)
def _load(folder: Path, stamp: tuple[tuple[str, int, int], ...]) -> tuple[m.ModelConfig, m.Params]:
    cfg = read_config(folder)
    tensors = _read(_weight_files(folder))
    where = f"checkpoint {str(folder)!r}"

    def take(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in tensors:
            raise ValueError(f"{where} lacks the tensor {name!r}")
        value = np.asarray(tensors[name], np.float32)
        if value.shape != shape:
            raise ValueError(f"{where}: tensor {name!r} has shape {value.shape}, expected {shape}")
        if not np.isfinite(value).all():
            raise ValueError(f"{where}: tensor {name!r} holds non-finite values")
        return value

    d, hd = cfg.d_model, cfg.head_dim
    q, kv = cfg.num_heads * hd, cfg.kv_heads * hd
    shapes = {  # Hugging Face's [d_out, d_in] of each layer weight (norms: [n])
        "wq": (q, d),
        "wk": (kv, d),
        "wv": (kv, d),
        "wo": (d, q),
        "w_gate": (cfg.d_ff, d),
        "w_up": (cfg.d_ff, d),
        "w_down": (d, cfg.d_ff),
        "attn_norm": (d,),
        "mlp_norm": (d,),
        "q_norm": (hd,),
        "k_norm": (hd,),
    }
    layers: dict[str, Any] = {}
    for hf_name, ours in _LAYER_NAMES.items():
        if ours in ("q_norm", "k_norm") and not cfg.qk_norm:
            continue
        stacked = [take(f"model.layers.{i}.{hf_name}", shapes[ours]) for i in range(cfg.num_layers)]
        value = np.stack(stacked)
        layers[ours] = jnp.asarray(value if value.ndim == 2 else value.transpose(0, 2, 1))
    params: m.Params = {
        "embed": jnp.asarray(take("model.embed_tokens.weight", (cfg.vocab_size, d))),
        "layers": layers,
        "final_norm": jnp.asarray(take("model.norm.weight", (d,))),
    }
    if not cfg.tie_embeddings:
        params["lm_head"] = jnp.asarray(take("lm_head.weight", (cfg.vocab_size, d)).T)
    return cfg, params


def config_dict(source: str | Path, cfg: m.ModelConfig) -> dict[str, Any]:
    """``source``'s ``config.json`` as written for weights of shape ``cfg`` in float32 (the embeddings
    untied when ``cfg`` says so)."""
    config: dict[str, Any] = json.loads((Path(source) / "config.json").read_text("utf-8"))
    config["tie_word_embeddings"] = cfg.tie_embeddings
    config["torch_dtype"] = "float32"
    config["dtype"] = "float32"
    return config


def export(out_dir: str | Path, cfg: m.ModelConfig, params: m.Params, *, source: str | Path) -> Path:
    """Writes ``params`` (merged weights of the checkpoint in ``source``) as a Hugging Face directory.

    ``out_dir`` gets ``config.json`` (``source``'s, float32, untied if an adapter gave the output layer
    weights of its own), ``model.safetensors`` in Hugging Face's names and layout, and ``source``'s
    tokenizer files, so ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
    ``AutoTokenizer.from_pretrained(out_dir)`` load it.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: ``source`` is not a supported checkpoint, ``params`` do not fit ``cfg``, or ``out_dir``
          is ``source`` (its weights would be overwritten).
    """
    from safetensors.numpy import save

    read_config(source)
    if cfg.tie_embeddings and "lm_head" in params:
        cfg = cfg._replace(tie_embeddings=False)
    out = Path(out_dir)
    if out.resolve() == Path(source).resolve():  # the export would overwrite the weights it merges
        raise ValueError(f"out_dir {str(out_dir)!r} is the source checkpoint: export to another directory")
    out.mkdir(parents=True, exist_ok=True)
    flat: dict[str, np.ndarray] = {"model.embed_tokens.weight": np.asarray(params["embed"], np.float32)}
    flat["model.norm.weight"] = np.asarray(params["final_norm"], np.float32)
    if not cfg.tie_embeddings:
        flat["lm_head.weight"] = np.ascontiguousarray(np.asarray(m.unembedding(params), np.float32).T)
    for hf_name, ours in _LAYER_NAMES.items():
        if ours not in params["layers"]:
            continue
        stacked = np.asarray(params["layers"][ours], np.float32)
        if stacked.shape[0] != cfg.num_layers:
            raise ValueError(f"params layers.{ours} has {stacked.shape[0]} layers, expected {cfg.num_layers}")
        for i in range(cfg.num_layers):
            value = stacked[i] if stacked.ndim == 2 else stacked[i].T
            flat[f"model.layers.{i}.{hf_name}"] = np.ascontiguousarray(value)
    m.atomic_write_bytes(out / "model.safetensors", save(flat, metadata={"format": "pt"}))
    m.atomic_write_bytes(
        out / "config.json", (json.dumps(config_dict(source, cfg), indent=2) + "\n").encode()
    )
    for name in _TOKENIZER_FILES:
        if (Path(source) / name).is_file():
            m.atomic_write_bytes(out / name, (Path(source) / name).read_bytes())
    return out


class CheckpointTokenizer:
    """The tokenizer of a checkpoint directory (its ``tokenizer.json``, with the ``tokenizers`` library):
    what the local sampler encodes stop strings with.

    Raises:
        ValueError: the directory has no ``tokenizer.json``, or it does not load (naming the file).
    """

    def __init__(self, folder: str | Path) -> None:
        from tokenizers import Tokenizer  # type: ignore[import-untyped]

        self.folder = Path(folder)
        file = self.folder / "tokenizer.json"
        if not file.is_file():
            raise ValueError(
                f"checkpoint {str(self.folder)!r} has no tokenizer.json (the local service reads the fast "
                "tokenizer's file)"
            )
        try:
            self._tok = Tokenizer.from_file(str(file))
        except Exception as exc:
            raise ValueError(f"cannot read the tokenizer {str(file)!r}: {exc}") from exc

    @property
    def vocab_size(self) -> int:
        """Ids the tokenizer knows, added tokens included."""
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    @property
    def id_count(self) -> int:
        """The largest id the tokenizer knows + 1 (added tokens included)."""
        return 1 + max(int(i) for i in self._tok.get_vocab(with_added_tokens=True).values())

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """The ids of ``text`` (special tokens written in it are read as such, as transformers does)."""
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, token_ids: Any, *, skip_special_tokens: bool = False) -> str:
        """The text of ``token_ids``."""
        return str(self._tok.decode([int(t) for t in token_ids], skip_special_tokens=skip_special_tokens))

    def transformers(self) -> Any:
        """The same tokenizer as ``transformers`` loads it (with the chat template), offline."""
        from adapters.tinker.renderers import load_tokenizer

        return load_tokenizer(self.folder)


@functools.lru_cache(maxsize=8)
def tokenizer_for(base_model: str) -> Any:
    """The tokenizer the local service encodes stop strings with for ``base_model``: a checkpoint's
    :class:`CheckpointTokenizer`, else the byte tokenizer of the built-in models (one per process and
    name: every sampler of a run shares it)."""
    if is_checkpoint(base_model):
        return CheckpointTokenizer(base_model)
    from adapters.tokenizers import ByteTokenizer

    return ByteTokenizer()


def hf_tokenizer(tokenizer: Any) -> Any:
    """What ``get_tokenizer()`` hands out for :func:`tokenizer_for`'s ``tokenizer``: a checkpoint's
    tokenizer as ``transformers`` loads it (with its chat template), else ``tokenizer`` itself."""
    return tokenizer.transformers() if isinstance(tokenizer, CheckpointTokenizer) else tokenizer


def load_weights_file(path: str | Path) -> tuple[m.ModelConfig, m.Params, str]:
    """(config, merged weights, base model) of sampler weights the local service saved: a LoRA adapter
    over a Hugging Face checkpoint (:func:`adapters.local.lora.save_adapter`: the base is loaded and the
    adapter merged), or merged weights (:func:`adapters.local.model.load_weights`; their base model is
    the file itself).

    Raises:
        ValueError: the file cannot be read, or an adapter's base checkpoint does not match it.
    """
    from adapters.local import lora

    if not lora.is_adapter(path):
        cfg, params = m.load_weights(path)
        return cfg, params, str(path)
    cfg, adapter, base_model = lora.read_adapter(path)
    base_cfg, base = load(base_model)
    if base_cfg != cfg:
        raise ValueError(
            f"adapter file {str(path)!r} was trained on a model of config {cfg}, but its base "
            f"{base_model!r} now has {base_cfg}"
        )
    return cfg, m.merge_lora(base, adapter), base_model


def export_file(path: str | Path, out_dir: str | Path) -> Path:
    """The merged weights of a run on a Hugging Face checkpoint, from its saved state (``save_state``) or
    its sampler weights (``save_weights_for_sampler``), written as a Hugging Face directory (:func:`export`).

    Examples:
        >>> export_file("/no/such.safetensors", "/tmp/out")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: cannot read weights file '/no/such.safetensors': ...

    Raises:
        ValueError: the file cannot be read, or its run did not start from a Hugging Face checkpoint.
    """
    from adapters.local import state as st
    from adapters.local.train_step import merged

    meta, _ = m.read_tensors(path, f"weights file {str(path)!r}")
    if meta.get("format") == st.STATE_FORMAT:
        state = st.read_state(path)
        cfg, params, base = state.cfg, merged(state.frozen, state.trainable), state.base_model
    else:
        cfg, params, base = load_weights_file(path)
    if not is_checkpoint(base):
        raise ValueError(
            f"{str(path)!r} was not trained from a Hugging Face checkpoint (its base is {base!r}): "
            "there is no config.json or tokenizer to export it with"
        )
    return export(out_dir, cfg, params, source=base)
