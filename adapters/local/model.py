"""A small decoder-only transformer in JAX: pure functions over a params pytree.

Architecture (Llama-style): token embedding → ``num_layers`` × [RMSNorm → causal multi-head attention
with rotary positions → residual; RMSNorm → SwiGLU MLP → residual] → RMSNorm → output projection.
Layers are stacked along a leading axis and run with ``jax.lax.scan``, so compile time does not grow
with depth. The same function runs the dense Llama 3.x and Qwen3 checkpoints of Hugging Face
(:mod:`adapters.local.hf`): grouped-query attention (``num_kv_heads`` key/value heads, each shared by
``num_heads / num_kv_heads`` query heads), a head size of its own (``head_size``), Qwen3's RMSNorm of
every query and key head before RoPE (``qk_norm``), Llama 3's RoPE frequency scaling
(``rope_scaling``) and an output layer tied to the embedding (``tie_embeddings``).

    RMSNorm(x) = x / √(mean(x²) + ε) · g;   SwiGLU(x) = (silu(x·W_gate) ⊙ x·W_up)·W_down;
    RoPE rotates each (x_i, x_{i+d/2}) pair of a head by angle p·θ_i at position p, θ_i = base^(−2i/d)
    (Llama 3: θ_i / factor for long wavelengths, blended in between; :func:`rope_frequencies`).

LoRA: each projection W ∈ {wq, wk, wv, wo, w_gate, w_up, w_down} (and optionally the output layer
``lm_head``) gets W + (α/r)·A·B with A [d_in, r] (seeded normal, std 1/√d_in) and B [r, d_out] (zeros),
so a fresh adapter leaves the model unchanged. The base weights stay frozen; only A and B are trained.

Every matrix product runs in full float32, or with ``compute_dtype = "bfloat16"`` (:data:`COMPUTE_DTYPES`)
on bfloat16 operands accumulated in float32, for GPUs; weights, norms and softmax stay float32.

Sampling (:func:`generate_rows`, :func:`generate`) runs a batched prefill of many prompts and the
whole decode loop under one ``jax.jit`` with a KV cache, each row at its own position with its own key
and options; prompt length, batch, cache and stop-sequence shapes are bucketed to powers of two, so
repeated calls do not retrace. Rows of one prompt (a group's samples) share its prefill, the prefill
computes the output layer at each prompt's last position only, and each token is drawn by inverse CDF
from one uniform a row (:func:`_inverse_cdf`; Gumbel-max would take a uniform for every id).
Sampled-token logprobs are the model's own (temperature 1, before top-k / top-p), so they equal
:func:`token_logprobs` over the same tokens.

A checkpoint's embedding may have more rows than its tokenizer has ids (Qwen3: 151936 rows, 151669
ids): ``tokenizer_vocab`` then names the ids the tokenizer knows, and the sampler never draws a row past
them (its logit is −∞ for sampling, as top-k drops tokens). Like top-k, the mask is a sampling filter:
the logprob reported for a sampled token stays the model's own, normalised over every row, the same
number :func:`token_logprobs` (training, ``compute_logprobs``) and transformers compute, so the
sampler's and the trainer's logprobs still agree; it is below the log-probability under the masked
distribution by −log(1 − p_extra), p_extra the rows' mass (≈ 0 in a trained checkpoint: its spare rows
are never targets).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adapters._atomic import atomic_write

__all__ = [
    "ALL_LORA_TARGETS",
    "COMPUTE_DTYPES",
    "LORA_TARGETS",
    "SIZES",
    "GenerateResult",
    "ModelConfig",
    "SampleRow",
    "bucket",
    "bucket_fine",
    "check_compute_dtype",
    "check_row",
    "config_from_json",
    "config_json",
    "forward",
    "generate",
    "generate_rows",
    "init_lora",
    "init_params",
    "load_weights",
    "lora_shapes",
    "merge_lora",
    "num_params",
    "rope_frequencies",
    "save_weights",
    "token_logprobs",
    "unembedding",
]

Params = dict[str, Any]

LORA_TARGETS = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
"""The projections that get LoRA adapters by default (attention and MLP of every layer)."""

ALL_LORA_TARGETS = (*LORA_TARGETS, "lm_head")
"""Every weight that can get a LoRA adapter: the layers' projections and the output layer."""

LORA_ALPHA = 32.0
"""LoRA scale numerator: the adapter's update is (α/r)·A·B."""

PRECISION = jax.lax.Precision.HIGHEST
"""Every matrix product in full float32, on every device.

JAX's default on recent NVIDIA GPUs is TensorFloat-32, which rounds the inputs to 10 mantissa bits: the
sampler's one-token decode and the trainer's whole-sequence forward then round differently, and their
logprobs of the same tokens differ by ~1e-3 (measured on an H100), so on-policy KL is not ~0. In full
float32 they agree to ~1e-6 on CPU and GPU alike.
"""


COMPUTE_DTYPES = ("float32", "bfloat16")
"""The values of :attr:`ModelConfig.compute_dtype`: the operands of every matrix product.

``"float32"``: full float32 (:data:`PRECISION`). ``"bfloat16"``: both operands rounded to bfloat16 and
the products accumulated in float32 (``preferred_element_type``), for the tensor cores of a GPU; the
weights, LoRA adapters, optimizer state, norms, softmax and log-softmax stay float32, as do the
products' outputs. The sampler's decode and the trainer's forward then round differently (their
logprobs of the same tokens differ by up to ~1e-2, not ~1e-6), and the logprobs differ from float32's by
up to ~0.1 on random tiny checkpoints (tests/test_local_hf.py). On CPU it gains little: training
1.08-1.11 × float32's tokens/s (the ``small`` and ``base`` models, 8 × 128 tokens, two devices of the
2-core machine, ``python -m benchmarks local --dtype bfloat16``); it is meant for GPUs.
"""


def check_compute_dtype(value: object, name: str) -> str:
    """``value`` when it is one of :data:`COMPUTE_DTYPES`; else a ValueError naming ``name``, the one
    check of the setting wherever it enters (the model's config, the service, ``serve --dtype``).

    Examples:
        >>> check_compute_dtype("bfloat16", "compute_dtype")
        'bfloat16'
        >>> check_compute_dtype("fp8", "--dtype")
        Traceback (most recent call last):
        ValueError: --dtype must be one of 'float32', 'bfloat16', got 'fp8'
    """
    if not isinstance(value, str) or value not in COMPUTE_DTYPES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, COMPUTE_DTYPES))}, got {value!r}")
    return value


def _operands(a: jax.Array, b: jax.Array, dtype: str) -> tuple[jax.Array, jax.Array, dict[str, Any]]:
    """The two operands of a product in ``dtype`` (:data:`COMPUTE_DTYPES`) and the product's options."""
    if dtype == "bfloat16":
        options: dict[str, Any] = {"preferred_element_type": jnp.float32}
        return a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), options
    return a, b, {"precision": PRECISION}


def _mm(x: jax.Array, w: jax.Array, dtype: str = "float32") -> jax.Array:
    """x @ w in full float32 (:data:`PRECISION`), or of bfloat16 operands accumulated in float32
    (``dtype`` ``"bfloat16"``, :data:`COMPUTE_DTYPES`); x [..., d_in] is flattened to the rows of one
    [N, d_in] product.

    Flat, the gradient of w contracts one axis of rows; with x's [B, T] axes kept it contracts two, and
    XLA on CPU then copies the output gradient into a transposed [d_out, B, T] buffer before the
    product (at the output layer, [V, B, T] fused with the log-softmax backward: the slowest op of a
    training step). Measured on one CPU device, the output layer alone (8 × 128 tokens, D 256, V 8192,
    gradient of a rank-32 adapter and of x): 277 → 183 ms CPU time."""
    x, w, options = _operands(x, w, dtype)
    if x.ndim > 2 and w.ndim == 2:
        flat = jnp.matmul(x.reshape(-1, x.shape[-1]), w, **options)
        return flat.reshape(*x.shape[:-1], w.shape[-1])
    return jnp.matmul(x, w, **options)


def _einsum(spec: str, a: jax.Array, b: jax.Array, dtype: str = "float32") -> jax.Array:
    """``jnp.einsum`` in full float32 (:data:`PRECISION`), or of bfloat16 operands accumulated in float32
    (``dtype`` ``"bfloat16"``)."""
    a, b, options = _operands(a, b, dtype)
    return jnp.einsum(spec, a, b, **options)


class ModelConfig(NamedTuple):
    """Shape of the transformer (hashable: a static argument under ``jax.jit``)."""

    vocab_size: int = 262
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    d_ff: int = 176
    max_seq_len: int = 4096
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    num_kv_heads: int = 0  # key/value heads (grouped-query attention); 0: num_heads
    head_size: int = 0  # per-head size; 0: d_model // num_heads
    qk_norm: bool = False  # RMSNorm of each query and key head before RoPE (Qwen3)
    tie_embeddings: bool = False  # the output layer is embed.T (no lm_head weight)
    rope_scaling: tuple[float, float, float, int] | None = None  # Llama 3: factor, low, high, original
    tokenizer_vocab: int = 0  # the sampler draws ids below this only (0: every row; see the module doc)
    compute_dtype: str = "float32"  # the matrix products' operands (COMPUTE_DTYPES); not saved with weights

    @property
    def head_dim(self) -> int:
        return self.head_size or self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads


SIZES: dict[str, ModelConfig] = {
    "tiny": ModelConfig(d_model=64, num_layers=2, num_heads=4, d_ff=176),
    "small": ModelConfig(d_model=128, num_layers=6, num_heads=4, d_ff=344),
    "base": ModelConfig(d_model=256, num_layers=6, num_heads=8, d_ff=688),
}
"""Built-in sizes by name (vocabulary: the 262 ids of the byte tokenizer)."""


def bucket(n: int, *, minimum: int = 1) -> int:
    """The smallest power of two ≥ max(n, minimum): the padded size that keeps jit shapes few.

    Examples:
        >>> bucket(5), bucket(0), bucket(3, minimum=16)
        (8, 1, 16)
    """
    return 1 << (max(int(n), int(minimum), 1) - 1).bit_length()


_INT_FIELDS = ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_seq_len")


def _check_config(cfg: ModelConfig) -> None:
    for name in (*_INT_FIELDS, "num_kv_heads", "head_size", "tokenizer_vocab"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"ModelConfig.{name} must be an int, got {value!r}")
    for name in ("rope_base", "norm_eps"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ValueError(f"ModelConfig.{name} must be a finite number > 0, got {value!r}")
    for name in ("qk_norm", "tie_embeddings"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"ModelConfig.{name} must be a bool, got {getattr(cfg, name)!r}")
    for name in _INT_FIELDS:
        if getattr(cfg, name) < 1:
            raise ValueError(f"ModelConfig.{name} must be >= 1, got {getattr(cfg, name)}")
    if cfg.num_kv_heads < 0 or cfg.head_size < 0:
        raise ValueError(
            f"ModelConfig.num_kv_heads and head_size must be >= 0 (0: the default), got "
            f"{cfg.num_kv_heads} and {cfg.head_size}"
        )
    if not 0 <= cfg.tokenizer_vocab <= cfg.vocab_size:
        raise ValueError(
            f"ModelConfig.tokenizer_vocab must be in [0, vocab_size = {cfg.vocab_size}] (0: every row), "
            f"got {cfg.tokenizer_vocab}"
        )
    check_compute_dtype(cfg.compute_dtype, "ModelConfig.compute_dtype")
    if cfg.head_size == 0 and cfg.d_model % cfg.num_heads:
        raise ValueError(
            f"d_model ({cfg.d_model}) must be a multiple of num_heads ({cfg.num_heads}) when head_size is 0"
        )
    if cfg.head_dim % 2:
        raise ValueError(f"the head size must be even (RoPE rotates pairs), got {cfg.head_dim}")
    if cfg.num_heads % cfg.kv_heads:
        raise ValueError(f"num_heads ({cfg.num_heads}) must be a multiple of num_kv_heads ({cfg.kv_heads})")
    if cfg.rope_scaling is not None:
        ok = isinstance(cfg.rope_scaling, tuple) and len(cfg.rope_scaling) == 4
        factor, low, high, original = cfg.rope_scaling if ok else (0, 0, 0, 0)
        if not (ok and factor >= 1 and 0 < low < high and original >= 1):
            raise ValueError(
                "ModelConfig.rope_scaling must be (factor >= 1, low_freq_factor > 0, high_freq_factor > "
                f"low_freq_factor, original_max_position_embeddings >= 1), got {cfg.rope_scaling!r}"
            )


def config_json(cfg: ModelConfig) -> str:
    """The config as a file's metadata holds it: every field but ``compute_dtype``, which is a setting of
    the service that computes with the weights (a file reads back as float32; the service sets its own).

    Examples:
        >>> text = config_json(SIZES["tiny"]._replace(compute_dtype="bfloat16"))
        >>> "compute_dtype" in text, config_from_json(text) == SIZES["tiny"]
        (False, True)
    """
    fields = cfg._asdict()
    del fields["compute_dtype"]
    return json.dumps(fields)


def config_from_json(text: str) -> ModelConfig:
    """The :class:`ModelConfig` that ``json.dumps(cfg._asdict())`` wrote (lists back to tuples), checked.

    Raises:
        ValueError: the text is not such a config (naming what is wrong).

    Examples:
        >>> cfg = SIZES["tiny"]._replace(rope_scaling=(8.0, 1.0, 4.0, 8192))
        >>> config_from_json(json.dumps(cfg._asdict())) == cfg
        True
    """
    try:
        fields = json.loads(text)
        if isinstance(fields.get("rope_scaling"), list):
            fields["rope_scaling"] = tuple(fields["rope_scaling"])
        cfg = ModelConfig(**fields)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not a model config: {exc}") from exc
    _check_config(cfg)
    return cfg


def rope_frequencies(cfg: ModelConfig) -> np.ndarray:
    """The rotary angle per position of each of a head's d/2 pairs: θ_i = base^(−2i/d), float32 [d/2].

    With ``rope_scaling`` = (factor s, low l, high h, original context C) (Llama 3): a pair whose
    wavelength λ_i = 2π/θ_i exceeds C/l turns s times slower (θ_i/s); one shorter than C/h is unchanged;
    in between θ_i·((1 − w)/s + w) with w = (C/λ_i − l)/(h − l).

    Examples:
        >>> rope_frequencies(ModelConfig(d_model=8, num_heads=2))
        array([1.  , 0.01], dtype=float32)
    """
    half = cfg.head_dim // 2
    theta = 1.0 / cfg.rope_base ** (np.arange(half, dtype=np.float64) / half)
    if cfg.rope_scaling is not None:
        factor, low, high, original = cfg.rope_scaling
        wavelength = 2 * math.pi / theta
        w = (original / wavelength - low) / (high - low)
        blended = theta * ((1 - w) / factor + w)
        theta = np.where(
            wavelength > original / low,
            theta / factor,
            np.where(wavelength < original / high, theta, blended),
        )
    return theta.astype(np.float32)


def init_params(cfg: ModelConfig, key: jax.Array) -> Params:
    """Seeded initialisation: normal weights with std 1/√d_in (output layers scaled by 1/√(2L)), unit norms.

    Args:
        cfg: the model shape.
        key: a PRNG key.

    Returns:
        The params pytree: ``embed`` [V, D], ``layers`` (each leaf stacked on a leading [L] axis),
        ``final_norm`` [D], ``lm_head`` [D, V]; float32.

    Examples:
        >>> p = init_params(SIZES["tiny"], jax.random.key(0))
        >>> p["layers"]["wq"].shape, num_params(p) > 100_000
        ((2, 64, 64), True)
    """
    _check_config(cfg)
    d, f, n_l, v = cfg.d_model, cfg.d_ff, cfg.num_layers, cfg.vocab_size
    q, kv = cfg.num_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    keys = iter(jax.random.split(key, 9))
    depth = 1.0 / math.sqrt(2.0 * n_l)

    def normal(shape: tuple[int, ...], std: float) -> jax.Array:
        return std * jax.random.normal(next(keys), shape, jnp.float32)

    layers = {
        "attn_norm": jnp.ones((n_l, d), jnp.float32),
        "wq": normal((n_l, d, q), d**-0.5),
        "wk": normal((n_l, d, kv), d**-0.5),
        "wv": normal((n_l, d, kv), d**-0.5),
        "wo": normal((n_l, q, d), q**-0.5 * depth),
        "mlp_norm": jnp.ones((n_l, d), jnp.float32),
        "w_gate": normal((n_l, d, f), d**-0.5),
        "w_up": normal((n_l, d, f), d**-0.5),
        "w_down": normal((n_l, f, d), f**-0.5 * depth),
    }
    if cfg.qk_norm:
        layers["q_norm"] = jnp.ones((n_l, cfg.head_dim), jnp.float32)
        layers["k_norm"] = jnp.ones((n_l, cfg.head_dim), jnp.float32)
    params = {"embed": normal((v, d), 1.0), "layers": layers, "final_norm": jnp.ones((d,), jnp.float32)}
    lm_head = normal((d, v), d**-0.5)
    if not cfg.tie_embeddings:
        params["lm_head"] = lm_head
    return params


def num_params(tree: Any) -> int:
    """Number of scalars in a pytree."""
    return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(tree))


def lora_shapes(cfg: ModelConfig) -> dict[str, tuple[int, int]]:
    """(d_in, d_out) of every weight in :data:`ALL_LORA_TARGETS` (``lm_head``: [D, V])."""
    d, f = cfg.d_model, cfg.d_ff
    q, kv = cfg.num_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return {
        "wq": (d, q),
        "wk": (d, kv),
        "wv": (d, kv),
        "wo": (q, d),
        "w_gate": (d, f),
        "w_up": (d, f),
        "w_down": (f, d),
        "lm_head": (d, cfg.vocab_size),
    }


def init_lora(cfg: ModelConfig, rank: int, key: jax.Array, targets: tuple[str, ...] = LORA_TARGETS) -> Params:
    """LoRA adapters for every weight in ``targets``: A ~ N(0, 1/d_in), B = 0.

    Args:
        cfg: the model shape.
        rank: r ≥ 1.
        key: a PRNG key.
        targets: names from :data:`ALL_LORA_TARGETS` (default: :data:`LORA_TARGETS`). Each target's
            A is drawn from its own key, the same whichever others are chosen.

    Returns:
        ``{target: {"a": [L, d_in, r], "b": [L, r, d_out]}}``, float32 (``lm_head``: no [L] axis).

    Raises:
        ValueError: rank < 1, or a target that is not in :data:`ALL_LORA_TARGETS` (or none).

    Examples:
        >>> lora = init_lora(SIZES["tiny"], 4, jax.random.key(0))
        >>> lora["w_down"]["a"].shape, float(jnp.abs(lora["wq"]["b"]).max())
        ((2, 176, 4), 0.0)
    """
    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be an int >= 1, got {rank!r}")
    unknown = [t for t in targets if t not in ALL_LORA_TARGETS]
    if unknown or not targets or len(set(targets)) != len(targets):
        raise ValueError(
            f"targets must be distinct names from {list(ALL_LORA_TARGETS)} (at least one), "
            f"got {list(targets)}"
        )
    dims = lora_shapes(cfg)
    keys = dict(zip(LORA_TARGETS, jax.random.split(key, len(LORA_TARGETS)), strict=True))
    keys["lm_head"] = jax.random.fold_in(key, len(LORA_TARGETS))
    out: Params = {}
    for name in ALL_LORA_TARGETS:  # in a fixed order, whatever the order of ``targets``
        if name not in targets:
            continue
        layers = () if name == "lm_head" else (cfg.num_layers,)
        d_in, d_out = dims[name]
        out[name] = {
            "a": jax.random.normal(keys[name], (*layers, d_in, rank), jnp.float32) * d_in**-0.5,
            "b": jnp.zeros((*layers, rank, d_out), jnp.float32),
        }
    return out


def merge_lora(params: Params, lora: Params | None) -> Params:
    """W + (α/r)·A·B for every adapted projection (the identity when ``lora`` is None), in full float32
    whatever the config's ``compute_dtype``: the merged weight is a weight, and weights stay float32.

    Examples:
        >>> cfg = SIZES["tiny"]
        >>> p = init_params(cfg, jax.random.key(0))
        >>> merged = merge_lora(p, init_lora(cfg, 2, jax.random.key(1)))
        >>> bool(jnp.all(merged["layers"]["wq"] == p["layers"]["wq"]))
        True
    """
    if lora is None:
        return params
    layers = dict(params["layers"])
    out = {**params}
    for name, ab in lora.items():
        rank = ab["a"].shape[-1]
        if name == "lm_head":  # a tied output layer becomes a weight of its own: embed.T + ΔW
            delta = _mm(ab["a"], ab["b"]) * (LORA_ALPHA / rank)
            head = unembedding(params)
            out["lm_head"] = head + delta.astype(head.dtype)
            continue
        delta = _einsum("lir,lro->lio", ab["a"], ab["b"]) * (LORA_ALPHA / rank)
        layers[name] = layers[name] + delta.astype(layers[name].dtype)
    out["layers"] = layers
    return out


def unembedding(params: Params) -> jax.Array:
    """The output layer [D, V]: ``lm_head``, or the transposed embedding when the two are tied."""
    head: jax.Array = params["lm_head"] if "lm_head" in params else params["embed"].T
    return head


def _rms_norm(x: jax.Array, gain: jax.Array, eps: float) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def _rope(x: jax.Array, positions: jax.Array, freqs: np.ndarray) -> jax.Array:
    """Rotates x [B, T, H, dh] at positions [T] by ``freqs`` [dh/2] (half-split pairs, as in Llama)."""
    half = x.shape[-1] // 2
    angles = positions.astype(x.dtype)[:, None] * jnp.asarray(freqs, x.dtype)[None, :]  # [T, half]
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _lin(x: jax.Array, lp: Params, name: str, dtype: str) -> jax.Array:
    """x·W for the weight ``name`` of ``lp``, plus (α/r)·(x·A)·B when ``lp["lora"]`` holds its adapter.

    Unmerged, the backward pass of a frozen W is only the product that carries the gradient to x: no
    [d_in, d_out] gradient of W + (α/r)·A·B is formed, and the adapter's gradients cost rank-r
    products. Every product's operands are in ``dtype`` (:data:`COMPUTE_DTYPES`)."""
    y = _mm(x, lp[name], dtype)
    ab = lp.get("lora", {}).get(name)
    if ab is None:
        return y
    update: jax.Array = _mm(_mm(x, ab["a"], dtype), ab["b"], dtype) * (LORA_ALPHA / ab["a"].shape[-1])
    return y + update


def _mlp(cfg: ModelConfig, x: jax.Array, lp: Params) -> jax.Array:
    h = _rms_norm(x, lp["mlp_norm"], cfg.norm_eps)
    dt = cfg.compute_dtype
    out: jax.Array = x + _lin(
        jax.nn.silu(_lin(h, lp, "w_gate", dt)) * _lin(h, lp, "w_up", dt), lp, "w_down", dt
    )
    return out


def _project(cfg: ModelConfig, x: jax.Array, lp: Params) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The heads of x [B, T, D] before RoPE: q [B, T, H, dh]; k, v [B, T, KV, dh] (q and k normed per
    head under ``qk_norm``)."""
    b, t, _ = x.shape
    h = _rms_norm(x, lp["attn_norm"], cfg.norm_eps)
    q = _lin(h, lp, "wq", cfg.compute_dtype).reshape(b, t, cfg.num_heads, cfg.head_dim)
    k = _lin(h, lp, "wk", cfg.compute_dtype).reshape(b, t, cfg.kv_heads, cfg.head_dim)
    v = _lin(h, lp, "wv", cfg.compute_dtype).reshape(b, t, cfg.kv_heads, cfg.head_dim)
    if cfg.qk_norm:
        q = _rms_norm(q, lp["q_norm"], cfg.norm_eps)
        k = _rms_norm(k, lp["k_norm"], cfg.norm_eps)
    return q, k, v


def _qkv(cfg: ModelConfig, x: jax.Array, lp: Params, positions: jax.Array) -> tuple[jax.Array, ...]:
    q, k, v = _project(cfg, x, lp)
    freqs = rope_frequencies(cfg)
    return _rope(q, positions, freqs), _rope(k, positions, freqs), v


def _attend(
    q: jax.Array, k: jax.Array, v: jax.Array, allowed: jax.Array, dtype: str = "float32"
) -> jax.Array:
    """q [B, T, H, dh], k and v [B, S, KV, dh], allowed bool [T, S] → [B, T, H·dh]; query head j reads
    key/value head j // (H / KV) (grouped-query attention). Products of ``dtype`` operands, the softmax
    in float32."""
    b, t, n_h, dh = q.shape
    n_kv = k.shape[2]
    if n_kv == n_h:
        scores = _einsum("bthd,bshd->bhts", q, k, dtype) * (dh**-0.5)
        scores = jnp.where(allowed[None, None], scores, -1e30)
        out = _einsum("bhts,bshd->bthd", jax.nn.softmax(scores, axis=-1), v, dtype)
        return out.reshape(b, t, -1)
    grouped = q.reshape(b, t, n_kv, n_h // n_kv, dh)
    scores = _einsum("btkgd,bskd->bkgts", grouped, k, dtype) * (dh**-0.5)
    scores = jnp.where(allowed[None, None, None], scores, -1e30)
    out = _einsum("bkgts,bskd->btkgd", jax.nn.softmax(scores, axis=-1), v, dtype)
    return out.reshape(b, t, -1)


def _causal_attend(q: jax.Array, k: jax.Array, v: jax.Array, block: int, dtype: str = "float32") -> jax.Array:
    """Causal self-attention (q, k, v [B, T, H, dh] → [B, T, H·dh]) in blocks of ``block`` queries.

    Queries s … e − 1 attend only the keys 0 … e − 1: the blocks skip the masked upper triangle of the
    [T, T] scores (about half of them) and never hold all of them at once. Each row's result is the
    one-block result up to float rounding (its masked scores contribute exp(−1e30) = 0 either way).
    """
    t = q.shape[1]
    outs = []
    for s in range(0, t, block):
        e = min(s + block, t)
        allowed = jnp.arange(e)[None, :] <= jnp.arange(s, e)[:, None]
        outs.append(_attend(q[:, s:e], k[:, :e], v[:, :e], allowed, dtype))
    return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)


def _run_layers(
    cfg: ModelConfig,
    params: Params,
    tokens_B_T: jax.Array,
    lora: Params | None = None,
    last_B: jax.Array | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """(logits [B, T, V], or [B, 1, V] at position ``last_B[b]`` of each row when given; every layer's
    keys and values [L, B, T, H_kv, dh])."""
    b, t = tokens_B_T.shape
    positions = jnp.arange(t)
    keep, block = _layout(b, t)

    def layer(x: jax.Array, lp: Params) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        q, k, v = _qkv(cfg, x, lp, positions)
        x = x + _lin(_causal_attend(q, k, v, block, cfg.compute_dtype), lp, "wo", cfg.compute_dtype)
        return _mlp(cfg, x, lp), (k, v)

    lora = lora or {}
    layers = params["layers"]
    if any(name != "lm_head" for name in lora):  # each layer's slice of its adapters rides the scan
        layers = {**layers, "lora": {name: ab for name, ab in lora.items() if name != "lm_head"}}
    x = params["embed"][tokens_B_T]
    x, (k, v) = jax.lax.scan(_with_kept(layer, keep), x, layers)
    if last_B is not None:  # the output layer, a third of a small model's weights, at one position a row
        x = x[jnp.arange(b), last_B][:, None]
    top = {"w": unembedding(params), "lora": {"w": lora["lm_head"]} if "lm_head" in lora else {}}
    logits: jax.Array = _lin(_rms_norm(x, params["final_norm"], cfg.norm_eps), top, "w", cfg.compute_dtype)
    return logits, (k, v)


_MIN_QUERY_BLOCK = {"cpu": 64, "other": 128}  # queries per attention block at least (fewer are slower)
_MAX_QUERY_BLOCKS = 16  # blocks per attention at most: each is its own ops, and compiling them costs


def _query_block(t: int, minimum: int) -> int:
    """Queries per block of a length-``t`` attention: at least ``minimum``, and few enough blocks
    (``_MAX_QUERY_BLOCKS``) to keep compilation short."""
    return max(minimum, -(-t // _MAX_QUERY_BLOCKS))


Kept = Literal["all", "projections", "inputs"]
"""What a layer keeps for the backward pass: every activation; the outputs of its weight products
(the rest is recomputed from the layer's input); or only its input (the whole layer is recomputed)."""

_SMALL_CALL_TOKENS = 512  # tokens per device up to which a CPU layer keeps its products' outputs


def _layout(b: int, t: int) -> tuple[Kept, int]:
    """(what each layer keeps for the backward pass, queries per attention block) for a [b, t] call.

    Attention runs in causal blocks (:func:`_causal_attend`), which skips the masked half of the
    [T, T] scores: on CPU blocks of at least 64 queries (the ``tiny`` model on 16 × 640 tokens,
    800 → 460 ms a training step), elsewhere at least 128 (one H100, the ``base`` model on 64 × 512
    tokens: 475 k → 544 k tokens/s; with 64-query blocks 516 k, and 8 × 128 tokens 13 % slower than one
    block). Off CPU a layer keeps all its activations. On CPU it keeps only its input and is recomputed
    in the backward pass, as reading stored activations, whose stacked [L, B, T, ·] buffers the layer
    scan zero-fills, copies and slices, costs more than the recomputation (the ``small`` model on
    8 × 128 tokens on the 2-core machine: 155 → 133 ms; on the H100 it changed nothing at 64 × 512:
    513 k against 516 k); except in small calls, up to :data:`_SMALL_CALL_TOKENS` tokens per device
    (``jax.device_count()``: training calls split their rows over every device), where it also keeps
    the outputs of its weight products and recomputes only the cheap rest. Best of 7-21, two CPU
    devices, whole recompute → products kept: ``tiny`` 8 × 128 tokens 12.5 → 11.1 ms, ``small``
    4 × 128 40.8 → 38.1, 8 × 128 81-86 → 76-77, ``base`` 8 × 128 274 → 260; above the threshold it
    loses (``tiny`` 32 × 128 45.5 → 49.3 ms, ``small`` 16 × 128 169 → 174, 8 × 256 189 → 202).
    """
    if jax.default_backend() != "cpu":
        return "all", _query_block(t, _MIN_QUERY_BLOCK["other"])
    small = b * t <= _SMALL_CALL_TOKENS * jax.device_count()
    return ("projections" if small else "inputs"), _query_block(t, _MIN_QUERY_BLOCK["cpu"])


def _with_kept(layer: Callable[..., Any], keep: Kept) -> Callable[..., Any]:
    """``layer`` as the backward pass sees it, keeping ``keep`` (:data:`Kept`).

    The layer runs inside ``jax.lax.scan``, which already keeps XLA from merging the recomputation
    with the forward pass, so ``jax.checkpoint``'s own guard against that (``prevent_cse``, which
    also blocks other fusions) is off, as JAX's documentation advises for a scan body: 5-8 % off a
    CPU training step at every shape measured (two devices, best of 5-15: ``small`` 8 × 128 tokens
    75.4 → 69.3 ms, 16 × 128 162.3 → 154.5, ``tiny`` 16 × 640 340.6 → 323.4, ``base`` 8 × 128
    268.0 → 255.6).
    """
    if keep == "all":
        return layer
    if keep == "inputs":
        return jax.checkpoint(layer, prevent_cse=False)
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(layer, prevent_cse=False, policy=policy)


def forward(cfg: ModelConfig, params: Params, tokens_B_T: jax.Array, lora: Params | None = None) -> jax.Array:
    """Next-token logits for every position.

    Args:
        cfg: the model shape.
        params: a params pytree (LoRA merged, or the base of ``lora``).
        tokens_B_T: int32 [B, T] token ids (right padding is harmless: attention is causal).
        lora: adapters (:func:`init_lora`) applied unmerged, x·W + (α/r)·(x·A)·B: the same function as
            ``forward(cfg, merge_lora(params, lora), …)`` up to float rounding, and cheaper to
            differentiate with respect to the adapters.

    Returns:
        float [B, T, V]: logits for the token after each position.

    Examples:
        >>> cfg = SIZES["tiny"]
        >>> forward(cfg, init_params(cfg, jax.random.key(0)), jnp.zeros((2, 3), jnp.int32)).shape
        (2, 3, 262)
    """
    return _run_layers(cfg, params, tokens_B_T, lora)[0]


def token_logprobs(
    cfg: ModelConfig,
    params: Params,
    tokens_B_T: jax.Array,
    targets_B_T: jax.Array,
    lora: Params | None = None,
) -> jax.Array:
    """log p(target_t | tokens_≤t) for every position.

    Args:
        cfg: the model shape.
        params: a params pytree (LoRA merged, or the base of ``lora``).
        tokens_B_T: int32 [B, T] inputs.
        targets_B_T: int32 [B, T] the token to score at each position.
        lora: adapters applied unmerged (see :func:`forward`).

    Returns:
        float [B, T].

    Examples:
        >>> cfg = SIZES["tiny"]
        >>> lp = token_logprobs(cfg, init_params(cfg, jax.random.key(0)), jnp.zeros((1, 4), jnp.int32),
        ...                     jnp.ones((1, 4), jnp.int32))
        >>> lp.shape, bool(jnp.all(lp < 0))
        ((1, 4), True)
    """
    logits = forward(cfg, params, tokens_B_T, lora)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return _pick(logp, targets_B_T)


def _pick(values_B_T_V: jax.Array, index_B_T: jax.Array) -> jax.Array:
    """values[b, t, index[b, t]], as Σ_v values·[v = index]: the same value bit for bit as a gather (the
    other terms are exact zeros of finite values), and for XLA on CPU faster in a training step than a
    gather and its backward scatter (the ``small`` model on 8 × 128 tokens, two devices: 84-88 → 78-79
    ms a step). An index outside ``[0, V)`` picks 0."""
    one_hot = jax.nn.one_hot(index_B_T, values_B_T_V.shape[-1], dtype=values_B_T_V.dtype)
    return jnp.sum(values_B_T_V * one_hot, axis=-1)


class GenerateResult(NamedTuple):
    """Sampled continuations, padded: row b is valid for its first ``lengths[b]`` tokens."""

    tokens_B_M: jax.Array
    logprobs_B_M: jax.Array
    lengths_B: jax.Array
    stopped_B: jax.Array


def bucket_fine(n: int, *, minimum: int = 1) -> int:
    """The smallest of 2ᵏ, 1.25·2ᵏ, 1.5·2ᵏ, 1.75·2ᵏ ≥ max(n, minimum): padding under a fifth of the size.

    Sequence lengths and batch rows are bucketed with it (attention costs T², so padding matters);
    four times as many shapes as :func:`bucket`, still few.

    Examples:
        >>> [bucket_fine(n) for n in (1, 3, 5, 7, 13, 24, 520, 1300)]
        [1, 3, 5, 7, 14, 24, 640, 1536]
    """
    n = max(int(n), int(minimum), 1)
    step = max(bucket(n) // 8, 1)  # n lies in (2ᵏ⁻¹, 2ᵏ]: round up to a multiple of 2ᵏ⁻³
    return -(-n // step) * step


class SampleRow(NamedTuple):
    """One row of a batched sampling call: a prompt, its own PRNG key and its own sampling options.

    A row's tokens depend only on its own fields (and the weights): the key drawing token ``i`` is
    ``fold_in(key, i)``, whatever other rows share the batch.
    """

    prompt: list[int]
    key: jax.Array
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_sequences: tuple[tuple[int, ...], ...] = ()


def _rope_rows(x: jax.Array, positions_B: jax.Array, freqs: np.ndarray) -> jax.Array:
    """:func:`_rope` for one new token per row, x [B, 1, H, dh], each row at its own position."""
    half = x.shape[-1] // 2
    angles = positions_B.astype(x.dtype)[:, None] * jnp.asarray(freqs, x.dtype)[None, :]  # [B, half]
    cos, sin = jnp.cos(angles)[:, None, None, :], jnp.sin(angles)[:, None, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _choose(
    keys_B: jax.Array,
    logits_B_V: jax.Array,
    temperature_B: jax.Array,
    top_p_B: jax.Array,
    top_k_B: jax.Array,
    limit: int = 0,
) -> tuple[jax.Array, jax.Array]:
    """One token per row (each row its own key and options) and its logprob at temperature 1 over every
    row; with ``0 < limit < V`` only ids below ``limit`` are drawn (the tokenizer's: module doc)."""
    logp = jax.nn.log_softmax(logits_B_V, axis=-1)
    if 0 < limit < logits_B_V.shape[-1]:
        logits_B_V = jnp.where(jnp.arange(logits_B_V.shape[-1]) < limit, logits_B_V, -jnp.inf)
    scaled = logits_B_V / jnp.maximum(temperature_B, 1e-6)[:, None]
    # The two sorts of the filters cost more than the rest of a tiny model's decode step: skipped when
    # no row asks for top-k or top-p (a row with top_k <= 0 and top_p >= 1 is never filtered).
    filtering = jnp.any(top_k_B > 0) | jnp.any(top_p_B < 1)
    scaled = jax.lax.cond(filtering, _top_k_top_p, lambda s, p, k: s, scaled, top_p_B, top_k_B)
    sampled = _inverse_cdf(1.0 - jax.vmap(jax.random.uniform)(keys_B), scaled)  # u in (0, 1]
    greedy = temperature_B <= 0  # the argmax, a pass over [B, V], only in a batch that has such a row
    best = jax.lax.cond(
        jnp.any(greedy),
        lambda x: jnp.argmax(x, axis=-1),
        lambda x: jnp.zeros(x.shape[0], jnp.int32),
        logits_B_V,
    )
    token = jnp.where(greedy, best, sampled).astype(jnp.int32)
    return token, jnp.take_along_axis(logp, token[:, None], axis=-1)[:, 0]


_DRAW_BLOCK = 128  # ids a block of the two-level inverse CDF holds


def _inverse_cdf(u_B: jax.Array, logits_B_V: jax.Array) -> jax.Array:
    """int32 [B]: row b's id at quantile ``u_B[b]`` ∈ (0, 1] of softmax(``logits_B_V[b]``).

    With e_j = exp(l_j − max l) (an id at −∞ has e_j = 0), the first j with Σ_{i≤j} e_i ≥ u · Σ_i e_i,
    found in two levels: the block of ``_DRAW_BLOCK`` ids by the running sum of block sums, then the id
    by the running sum inside that block, so no float32 running sum holds more than
    max(⌈V / ``_DRAW_BLOCK``⌉, ``_DRAW_BLOCK``) terms. An id with e_j = 0 is never returned. With u
    uniform on (0, 1] this draws from the softmax: one uniform a row, where Gumbel-max
    (``jax.random.categorical``) takes V (at V = 8192 and 64 rows, a quarter of a CPU decode step).
    """
    b, v = logits_B_V.shape
    blocks = -(-v // _DRAW_BLOCK)
    x = logits_B_V.astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    e_B_K_W = jnp.pad(e, ((0, 0), (0, blocks * _DRAW_BLOCK - v))).reshape(b, blocks, _DRAW_BLOCK)
    upto_B_K = jnp.cumsum(e_B_K_W.sum(-1), axis=-1)  # the mass of blocks 0 … k
    # u ≤ 1, so the target is at most the total: some block reaches it. It is kept at least the smallest
    # normal float32, so that no running sum at 0 (ids without mass) reaches it where XLA flushes
    # subnormals to 0 (as it does on CPU).
    floor = float(np.finfo(np.float32).tiny)
    target_B = jnp.maximum(u_B * upto_B_K[:, -1], floor)
    block_B = jnp.sum(upto_B_K < target_B[:, None], axis=-1)
    before_B = jnp.take_along_axis(jnp.pad(upto_B_K, ((0, 0), (1, 0))), block_B[:, None], -1)[:, 0]
    inside_B_W = jnp.take_along_axis(e_B_K_W, block_B[:, None, None], 1)[:, 0]
    rest_B = jnp.maximum(target_B - before_B, floor)
    within_B = jnp.sum(jnp.cumsum(inside_B_W, axis=-1) < rest_B[:, None], axis=-1)
    # rounding can leave the block's own running sum short of what remains: then its last id with mass
    last_B = jnp.max(jnp.where(inside_B_W > 0, jnp.arange(_DRAW_BLOCK), 0), axis=-1)
    return (block_B * _DRAW_BLOCK + jnp.minimum(within_B, last_B)).astype(jnp.int32)


def _top_k_top_p(scaled_B_V: jax.Array, top_p_B: jax.Array, top_k_B: jax.Array) -> jax.Array:
    """Logits outside each row's top-k (k > 0) and top-p nucleus (p < 1) set to -inf."""
    v = scaled_B_V.shape[-1]
    desc = -jnp.sort(-scaled_B_V, axis=-1)
    kth = jnp.take_along_axis(desc, jnp.clip(top_k_B - 1, 0, v - 1)[:, None], -1)
    scaled = jnp.where((top_k_B[:, None] > 0) & (scaled_B_V < kth), -jnp.inf, scaled_B_V)
    # top-p: keep the smallest prefix of the sorted distribution whose mass reaches top_p; a row with
    # top_p >= 1 keeps everything (its tail's preceding mass may round to 1).
    desc = -jnp.sort(-scaled, axis=-1)
    probs = jax.nn.softmax(desc, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs
    keep = (before < top_p_B[:, None]) | (top_p_B[:, None] >= 1)
    cutoff = jnp.min(jnp.where(keep, desc, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(scaled < cutoff, -jnp.inf, scaled)


_SHARED_PREFILL_AT_MOST = 0.5
"""Rows of one prompt share its prefill when the distinct prompts (bucketed) are at most this share of the
rows: a shared prefill is its own compiled program, which should at least halve the prefill's work. Tests
set 0 (never shared) and 1 (shared whenever it fits) to compare the two."""


class _RowArrays(NamedTuple):
    prompts_U_P: jax.Array  # int32, right-padded: the prompts prefilled (one a row, or each distinct one)
    prompt_lengths_U: jax.Array  # int32 their lengths
    source_B: jax.Array  # int32: the prompt row each row continues
    lengths_B: jax.Array  # int32 prompt lengths
    keys_B: jax.Array  # PRNG keys
    max_tokens_B: jax.Array  # int32; 0 for padding rows
    temperature_B: jax.Array
    top_p_B: jax.Array
    top_k_B: jax.Array
    stops_B_S_L: jax.Array  # int32, right-aligned, -1 padded
    stop_valid_B_S_L: jax.Array
    stop_len_B_S: jax.Array


@partial(jax.jit, static_argnames=("cfg", "max_new"))
def _generate(params: Params, rows: _RowArrays, *, cfg: ModelConfig, max_new: int) -> GenerateResult:
    """Prefill of the prompts, then a decode loop with a per-row KV cache position."""
    batch = rows.lengths_B.shape[0]
    n_prompts, p_b = rows.prompts_U_P.shape
    cache_len = p_b + max_new
    # k_pre [L, U, P, H, dh]; the logits of each prompt's last position only
    logits, (k_pre, v_pre) = _run_layers(cfg, params, rows.prompts_U_P, last_B=rows.prompt_lengths_U - 1)
    if n_prompts != batch:  # rows that share a prompt share its prefill
        logits, k_pre, v_pre = logits[rows.source_B], k_pre[:, rows.source_B], v_pre[:, rows.source_B]
    # heads before positions: each step's attention reads the cache as it lies (no transpose of it)
    # under bfloat16 the cache holds what every product reads: keys and values rounded to bfloat16
    dt = cfg.compute_dtype
    cache_dtype = jnp.bfloat16 if dt == "bfloat16" else k_pre.dtype

    def cache(pre: jax.Array) -> tuple[jax.Array, ...]:
        """One [B, H_kv, S, dh] cache a layer: slicing a stacked [L, …] one copied it every step."""
        empty = jnp.zeros((batch, cfg.kv_heads, cache_len, cfg.head_dim), cache_dtype)
        heads_first = pre.transpose(0, 1, 3, 2, 4).astype(cache_dtype)
        return tuple(empty.at[:, :, :p_b].set(heads_first[layer]) for layer in range(cfg.num_layers))

    k_cache, v_cache = cache(k_pre), cache(v_pre)
    row = jnp.arange(batch)
    first = logits[:, 0]
    n_stop_tokens = rows.stops_B_S_L.shape[-1]
    # each layer's weights sliced once, before the loop (a slice inside it is copied every step)
    per_layer = [{name: w[layer] for name, w in params["layers"].items()} for layer in range(cfg.num_layers)]
    freqs = rope_frequencies(cfg)
    group = cfg.num_heads // cfg.kv_heads

    def decode(
        token_B: jax.Array, pos_B: jax.Array, kc: tuple[jax.Array, ...], vc: tuple[jax.Array, ...]
    ) -> tuple[Any, ...]:
        allowed = jnp.arange(cache_len)[None, :] <= pos_B[:, None]  # [B, S]
        x = params["embed"][token_B][:, None]
        new_k, new_v = [], []
        for lp, k_c, v_c in zip(per_layer, kc, vc, strict=True):  # unrolled: caches updated in place
            q, k, v = _project(cfg, x, lp)
            q, k = _rope_rows(q, pos_B, freqs), _rope_rows(k, pos_B, freqs)
            k_c = k_c.at[row, :, pos_B].set(k[:, 0].astype(cache_dtype))
            v_c = v_c.at[row, :, pos_B].set(v[:, 0].astype(cache_dtype))
            new_k.append(k_c)
            new_v.append(v_c)
            if group == 1:
                scores = _einsum("bhd,bhsd->bhs", q[:, 0], k_c, dt) * (cfg.head_dim**-0.5)
                scores = jnp.where(allowed[:, None, :], scores, -1e30)
                out = _einsum("bhs,bhsd->bhd", jax.nn.softmax(scores, axis=-1), v_c, dt)
            else:  # query head j reads key/value head j // group
                grouped = q[:, 0].reshape(batch, cfg.kv_heads, group, cfg.head_dim)
                scores = _einsum("bkgd,bksd->bkgs", grouped, k_c, dt) * (cfg.head_dim**-0.5)
                scores = jnp.where(allowed[:, None, None, :], scores, -1e30)
                out = _einsum("bkgs,bksd->bkgd", jax.nn.softmax(scores, axis=-1), v_c, dt)
            x = x + _mm(out.reshape(batch, 1, -1), lp["wo"], dt)
            x = _mlp(cfg, x, lp)
        logits = _mm(_rms_norm(x, params["final_norm"], cfg.norm_eps), unembedding(params), dt)
        return logits[:, 0], tuple(new_k), tuple(new_v)

    def cond(state: tuple[Any, ...]) -> jax.Array:
        i, done = state[0], state[5]
        going: jax.Array = (i < max_new) & ~jnp.all(done)
        return going

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        i, logits, kc, vc, out, done, lengths, stopped, recent, out_lp = state
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(rows.keys_B, i)
        token, lp = _choose(keys, logits, rows.temperature_B, rows.top_p_B, rows.top_k_B, cfg.tokenizer_vocab)
        out = out.at[:, i].set(token)
        out_lp = out_lp.at[:, i].set(lp)
        recent = jnp.concatenate([recent[:, 1:], token[:, None]], axis=1)
        match = (recent[:, None, :] == rows.stops_B_S_L) | ~rows.stop_valid_B_S_L
        hit = jnp.any(jnp.all(match, axis=-1) & (rows.stop_len_B_S > 0) & (rows.stop_len_B_S <= i + 1), -1)
        lengths = jnp.where(done, lengths, i + 1)
        stopped = stopped | (~done & hit)
        done = done | hit | (i + 1 >= rows.max_tokens_B)
        pos = jnp.minimum(rows.lengths_B + i, cache_len - 1)  # finished rows write harmlessly
        logits, kc, vc = decode(token, pos, kc, vc)
        return i + 1, logits, kc, vc, out, done, lengths, stopped, recent, out_lp

    state = (
        jnp.int32(0),
        first,
        k_cache,
        v_cache,
        jnp.zeros((batch, max_new), jnp.int32),
        rows.max_tokens_B <= 0,
        jnp.zeros((batch,), jnp.int32),
        jnp.zeros((batch,), bool),
        jnp.full((batch, n_stop_tokens), -1, jnp.int32),
        jnp.zeros((batch, max_new), logits.dtype),
    )
    final = jax.lax.while_loop(cond, body, state)
    return GenerateResult(final[4], final[9], final[6], final[7])


def check_row(cfg: ModelConfig, row: SampleRow, *, where: str = "row") -> None:
    """Raises ValueError naming ``where`` if ``row`` cannot be sampled by a model of shape ``cfg``.

    Examples:
        >>> check_row(SIZES["tiny"], SampleRow([], jax.random.key(0), 4))
        Traceback (most recent call last):
        ValueError: row.prompt must hold at least one token
    """
    n = len(row.prompt)
    if n < 1:
        raise ValueError(f"{where}.prompt must hold at least one token")
    if n >= cfg.max_seq_len:
        raise ValueError(
            f"{where}.prompt has {n} tokens; the model's context is {cfg.max_seq_len} "
            "(prompt must be shorter)"
        )
    if row.max_tokens < 1:
        raise ValueError(f"{where}.max_tokens must be >= 1, got {row.max_tokens}")
    if not 0.0 < np.float32(row.top_p) <= 1.0:  # as the sampler reads it: 1e-46 is 0 in float32
        raise ValueError(f"{where}.top_p must be in (0, 1] (in float32), got {row.top_p}")
    if isinstance(row.top_k, bool) or not isinstance(row.top_k, int | np.integer):
        raise ValueError(f"{where}.top_k must be an int (-1 or 0: no top-k), got {row.top_k!r}")
    for s in row.stop_sequences:
        ints = all(isinstance(t, int | np.integer) and not isinstance(t, bool) for t in s)
        if not ints or any(not 0 <= t < cfg.vocab_size for t in s):
            raise ValueError(f"{where}.stop token ids must be ints in [0, {cfg.vocab_size}), got {list(s)}")
    if not math.isfinite(row.temperature):
        raise ValueError(f"{where}.temperature must be finite, got {row.temperature}")
    if any(not 0 <= t < cfg.vocab_size for t in row.prompt):
        raise ValueError(f"{where}.prompt token ids must be in [0, {cfg.vocab_size})")


def generate_rows(
    cfg: ModelConfig, params: Params, rows: list[SampleRow], *, min_batch: int = 1
) -> GenerateResult:
    """Samples every row of ``rows`` in one batched prefill and decode loop (one ``jax.jit`` call).

    Rows may differ in prompt, key, length and options. Rows with the same prompt share one prefill
    when the distinct prompts, bucketed to a power of two, are at most half the rows (group sampling:
    ``num_samples`` rows of one prompt prefill it once). Shapes are bucketed (rows ≥ ``min_batch`` and
    the prompt ≥ 16 by :func:`bucket_fine`; new tokens ≥ 8, stop sequences and shared prompts to powers
    of two), so calls do not retrace. Row b is the same as sampling it alone: token i is drawn with
    ``fold_in(rows[b].key, i)``, and no value of another row enters its computation (up to float
    rounding of differently shaped matmuls).

    Args:
        cfg: the model shape.
        params: a params pytree (LoRA merged).
        rows: ≥ 1 rows (see :class:`SampleRow`); ``max_tokens`` is clipped to the context left.
        min_batch: pad the batch to at least this many rows (fewer distinct shapes).

    Returns:
        :class:`GenerateResult` with ``len(rows)`` rows.

    Raises:
        ValueError: no rows, or a row :func:`check_row` rejects.

    Examples:
        >>> cfg = SIZES["tiny"]
        >>> params = init_params(cfg, jax.random.key(0))
        >>> rows = [SampleRow([1, 2, 3], jax.random.key(1), 5), SampleRow([7], jax.random.key(2), 2)]
        >>> generate_rows(cfg, params, rows).lengths_B.tolist()
        [5, 2]
    """
    if not rows:
        raise ValueError("rows must hold at least one SampleRow")
    for i, r in enumerate(rows):
        check_row(cfg, r, where=f"rows[{i}]")
    stops = [[list(s) for s in r.stop_sequences if len(s) > 0] for r in rows]
    width = bucket(max((len(s) for ss in stops for s in ss), default=1))
    n_stops = bucket(max((len(ss) for ss in stops), default=1))
    batch = bucket_fine(len(rows), minimum=min_batch)
    p_b = bucket_fine(max(len(r.prompt) for r in rows), minimum=16)
    max_tokens = [min(r.max_tokens, cfg.max_seq_len - len(r.prompt)) for r in rows]
    firsts: dict[tuple[int, ...], int] = {}  # each distinct prompt, numbered as first met
    source = [firsts.setdefault(tuple(r.prompt), len(firsts)) for r in rows]
    if bucket(len(firsts)) <= batch * _SHARED_PREFILL_AT_MOST:  # shared prefills
        distinct: list[Sequence[int]] = list(firsts)
        source += [0] * (batch - len(rows))
        prompts = np.zeros((bucket(len(firsts)), p_b), np.int32)
    else:
        distinct, source = [r.prompt for r in rows], list(range(batch))
        prompts = np.zeros((batch, p_b), np.int32)
    prompt_lengths = np.ones((len(prompts),), np.int32)
    for u, prompt in enumerate(distinct):
        prompts[u, : len(prompt)] = prompt
        prompt_lengths[u] = len(prompt)
    lengths = np.ones((batch,), np.int32)
    budget = np.zeros((batch,), np.int32)
    temperature = np.ones((batch,), np.float32)
    top_p = np.ones((batch,), np.float32)
    top_k = np.full((batch,), -1, np.int32)
    stop_arr = np.full((batch, n_stops, width), -1, np.int32)
    valid = np.zeros((batch, n_stops, width), bool)
    lens = np.zeros((batch, n_stops), np.int32)
    for b, r in enumerate(rows):
        lengths[b], budget[b] = len(r.prompt), max_tokens[b]
        # top_k beyond the vocabulary keeps every token, as -1 does (and fits int32)
        temperature[b], top_p[b] = r.temperature, r.top_p
        top_k[b] = max(-1, min(int(r.top_k), cfg.vocab_size))
        for j, s in enumerate(stops[b]):
            stop_arr[b, j, width - len(s) :] = s
            valid[b, j, width - len(s) :] = True
            lens[b, j] = len(s)
    keys = jnp.stack([r.key for r in rows] + [rows[0].key] * (batch - len(rows)))
    arrays = _RowArrays(
        jnp.asarray(prompts),
        jnp.asarray(prompt_lengths),
        jnp.asarray(np.asarray(source, np.int32)),
        jnp.asarray(lengths),
        keys,
        jnp.asarray(budget),
        jnp.asarray(temperature),
        jnp.asarray(top_p),
        jnp.asarray(top_k),
        jnp.asarray(stop_arr),
        jnp.asarray(valid),
        jnp.asarray(lens),
    )
    result = _generate(params, arrays, cfg=cfg, max_new=bucket(max(max_tokens), minimum=8))
    return GenerateResult(*(x[: len(rows)] for x in result))


def generate(
    cfg: ModelConfig,
    params: Params,
    prompt: list[int],
    *,
    num_samples: int,
    max_tokens: int,
    key: jax.Array,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = -1,
    stop_sequences: list[list[int]] | None = None,
) -> GenerateResult:
    """Samples ``num_samples`` continuations of one prompt with a KV cache, under one jit.

    A row stops after a stop sequence (its tokens are included) or after ``max_tokens`` tokens.
    ``temperature ≤ 0`` is greedy. Logprobs are the model's (temperature 1, before top-k / top-p).
    Sample j is row j of :func:`generate_rows` with key ``fold_in(key, j)``.

    Args:
        cfg: the model shape.
        params: a params pytree (LoRA merged).
        prompt: token ids, 1 ≤ len ≤ cfg.max_seq_len − 1.
        num_samples: rows to sample (≥ 1).
        max_tokens: ≥ 1; clipped to the context left after the prompt.
        key: a PRNG key.
        temperature: softmax temperature.
        top_p: nucleus mass in (0, 1].
        top_k: keep the k most likely tokens (−1: all).
        stop_sequences: token sequences that end a row.

    Returns:
        :class:`GenerateResult` with ``num_samples`` rows.

    Raises:
        ValueError: an empty prompt, one that leaves no room in the context, or bad options.

    Examples:
        >>> cfg = SIZES["tiny"]
        >>> r = generate(cfg, init_params(cfg, jax.random.key(0)), [1, 2, 3], num_samples=2, max_tokens=5,
        ...              key=jax.random.key(1))
        >>> r.tokens_B_M.shape, r.lengths_B.tolist()
        ((2, 8), [5, 5])
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    stops = tuple(tuple(s) for s in stop_sequences or ())
    rows = [
        SampleRow(list(prompt), jax.random.fold_in(key, j), max_tokens, temperature, top_p, top_k, stops)
        for j in range(num_samples)
    ]
    return generate_rows(cfg, params, rows)


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def _unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        node = tree
        *parents, leaf = name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return tree


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        f.write(data)


def save_weights(path: str | Path, cfg: ModelConfig, params: Params) -> None:
    """Saves merged weights and the config as one safetensors file (atomically).

    Tensor names are the params' paths joined by dots (``layers.wq`` is [L, D, D]); the config is
    JSON in the file's metadata under ``"config"``.
    """
    from safetensors.numpy import save

    if cfg.tie_embeddings and "lm_head" in params:  # an adapter on the tied output layer untied it
        cfg = cfg._replace(tie_embeddings=False)
    flat = {k: np.asarray(v) for k, v in _flatten(params).items()}
    atomic_write_bytes(Path(path), save(flat, metadata={"config": config_json(cfg)}))


def read_tensors(path: str | Path, where: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """A safetensors file's metadata and tensors (numpy), whole.

    Raises:
        ValueError: ``cannot read {where}: …`` when the file is missing, unreadable or not safetensors.
    """
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:
        raise ValueError(f"cannot read {where}: {exc}") from exc


def load_weights(path: str | Path) -> tuple[ModelConfig, Params]:
    """Loads weights written by :func:`save_weights` (or any file with the same names and shapes).

    Raises:
        ValueError: the file is missing, unreadable, lacks the config, or its tensors do not match the
            architecture (each message names the file and what was wrong).
    """
    path = Path(path)
    meta, flat = read_tensors(path, f"weights file {str(path)!r}")
    try:
        cfg = config_from_json(meta["config"])
    except Exception as exc:
        raise ValueError(f"weights file {str(path)!r} has no valid 'config' metadata: {exc}") from exc
    expected = jax.eval_shape(lambda: init_params(cfg, jax.random.key(0)))
    params = _unflatten({k: jnp.asarray(v) for k, v in flat.items()})
    _check_like(expected, params, f"weights file {str(path)!r}")
    return cfg, params


def _check_like(expected: Any, actual: Any, where: str) -> None:
    exp, act = _flatten(expected), _flatten(actual)
    if set(exp) != set(act):
        missing, extra = sorted(set(exp) - set(act)), sorted(set(act) - set(exp))
        raise ValueError(
            f"{where}: tensor names differ from the architecture (missing {missing}, unexpected {extra})"
        )
    for name, e in exp.items():
        if tuple(act[name].shape) != tuple(e.shape):
            raise ValueError(
                f"{where}: tensor {name!r} has shape {tuple(act[name].shape)}, expected {tuple(e.shape)}"
            )
        if act[name].dtype != e.dtype:
            raise ValueError(f"{where}: tensor {name!r} has dtype {act[name].dtype}, expected {e.dtype}")
        if not bool(jnp.isfinite(act[name]).all()):
            raise ValueError(f"{where}: tensor {name!r} holds non-finite values")
