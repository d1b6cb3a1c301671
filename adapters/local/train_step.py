"""One training call's arithmetic: datums checked and packed into ``[B, T]`` rows, the losses of
:mod:`kernel.jax` on the model's token logprobs, a jitted forward / backward that adds its gradients to
the accumulated ones, and AdamW with global-norm clipping (optax)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
from tinker import types

from adapters.local import model as m
from kernel.jax import cispo_loss, cross_entropy_loss, dro_loss, gspo_loss, importance_sampling_loss, ppo_loss

__all__: list[str] = []

LOSS_FNS = ("cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce")
"""The built-in losses this service computes (``stable_reinforce``: a stand-in, see :data:`STAND_INS`)."""
STAND_INS: dict[str, str] = {"stable_reinforce": "importance_sampling"}
"""Losses whose objective Tinker does not publish, and the documented loss computed in their place: Tinker
describes ``stable_reinforce`` as a REINFORCE variant with an off-policy correction from information
recorded at sampling time, and publishes no formula, so this service computes importance sampling
(−Σ ρ·A, ρ = exp(lp − q)) after checking what Tinker checks (provenance spans naming sequences sampled with
``record_stability_info=True``); its response says so with the metric ``loss/stand_in:max = 1``."""
UNSUPPORTED: dict[str, str] = {}
"""Tinker losses the SDK names that this service refuses, with the reason (none at present)."""
RATIO_MASK = "sequence_ratio_mask"
"""gspo's optional input: the tokens whose log-ratios make up each datum's sequence ratio (≠ 0)."""

_RL_INPUTS = ("target_tokens", "logprobs", "advantages")
LOSS_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    "importance_sampling": _RL_INPUTS,
    "ppo": _RL_INPUTS,
    "cispo": _RL_INPUTS,
    "dro": _RL_INPUTS,
    "gspo": _RL_INPUTS,
    "stable_reinforce": _RL_INPUTS,
}
LOSS_OPTIONS: dict[str, tuple[str, ...]] = {
    "cross_entropy": (),
    "importance_sampling": (),
    "ppo": ("clip_low_threshold", "clip_high_threshold"),
    "cispo": ("clip_low_threshold", "clip_high_threshold"),
    "dro": ("beta",),
    "gspo": ("clip_low_threshold", "clip_high_threshold"),
    "stable_reinforce": (),
}
UNPUBLISHED_OPTIONS: dict[str, tuple[str, ...]] = {"stable_reinforce": ("kl_coeff",)}
"""Options Tinker names for a loss without publishing what they weigh (tinker 0.38's
``ForwardBackwardRequest.loss_fn_config_v2``: ``{"kl_coeff": 0.01}`` for ``stable_reinforce``): refused
with that reason, as neither computed nor ignored by the stand-in."""


class Batch(NamedTuple):
    """A training call's datums as right-padded rows (:func:`pack_batch`)."""

    tokens: np.ndarray  # int32 [B, T]
    targets: np.ndarray  # int32 [B, T]
    mask: np.ndarray  # bool [B, T]
    first: np.ndarray  # float32 [B, T]: weights, or sampler logprobs
    second: np.ndarray  # float32 [B, T]: advantages (zeros for cross_entropy)
    lengths: list[int]
    ratio: np.ndarray | None = None  # bool [B, T]: gspo's ratio tokens M (None for the other losses)


def pack_batch(
    data: Sequence[types.Datum], needed: tuple[str, ...], cfg: m.ModelConfig, *, ratio_mask: bool = False
) -> Batch:
    """Validates every datum, then packs them right-padded into bucketed [B, T] arrays.

    ``ratio_mask`` (gspo) also fills ``Batch.ratio``: ``sequence_ratio_mask != 0`` where a datum has that
    input, else ``advantages != 0`` (the tokens the loss trains: Tinker's RL datums carry advantage 0 on
    prompt positions, whose sampler logprob 0 is no log-ratio)."""
    if not isinstance(data, Sequence) or len(data) == 0:
        raise ValueError("data must be a non-empty list of tinker.types.Datum")
    rows: list[tuple[list[int], dict[str, np.ndarray]]] = []
    for i, datum in enumerate(data):
        if not isinstance(datum, types.Datum):
            raise TypeError(f"data[{i}] must be a tinker.types.Datum, got {type(datum).__name__}")
        try:
            tokens = datum.model_input.to_ints()
        except Exception as exc:
            raise ValueError(f"data[{i}].model_input must hold only token chunks: {exc}") from exc
        n = len(tokens)
        if n == 0 or n > cfg.max_seq_len:
            raise ValueError(
                f"data[{i}].model_input has {n} tokens; expected 1 to {cfg.max_seq_len} (the context)"
            )
        arrays: dict[str, np.ndarray] = {}
        optional = (RATIO_MASK,) if ratio_mask and RATIO_MASK in datum.loss_fn_inputs else ()
        for key in (*needed, *optional):
            if key not in datum.loss_fn_inputs:
                raise ValueError(f"data[{i}].loss_fn_inputs lacks {key!r} (needed: {list(needed)})")
            arr = np.asarray(datum.loss_fn_inputs[key].to_numpy())
            if arr.ndim != 1 or arr.shape[0] != n:
                raise ValueError(
                    f"data[{i}].loss_fn_inputs[{key!r}] has shape {list(arr.shape)}, "
                    f"but model_input has {n} tokens (expected shape [{n}])"
                )
            if key == "target_tokens":
                whole = arr.dtype.kind == "f" and np.array_equal(arr, np.round(arr))  # NaN is not
                if arr.dtype.kind not in "iu" and not whole:
                    raise ValueError(
                        f"data[{i}].loss_fn_inputs['target_tokens'] must hold integer token ids, got dtype "
                        f"{arr.dtype} with non-integer values"
                    )
            elif not np.all(np.isfinite(arr)):
                raise ValueError(f"data[{i}].loss_fn_inputs[{key!r}] holds non-finite values")
            arrays[key] = arr
        for name, ids in (
            ("model_input", np.asarray(tokens)),
            ("loss_fn_inputs['target_tokens']", arrays["target_tokens"]),
        ):
            if ids.size and (ids.min() < 0 or ids.max() >= cfg.vocab_size):
                raise ValueError(f"data[{i}].{name} holds token ids outside [0, {cfg.vocab_size})")
        rows.append((tokens, arrays))
    t = m.bucket_fine(max(len(r[0]) for r in rows), minimum=16)
    chunk = chunk_rows(cfg, t)  # rows per call: more rows fill whole chunks (one shape per call)
    b = m.bucket_fine(len(rows)) if len(rows) <= chunk else chunk * -(-len(rows) // chunk)
    out = Batch(
        np.zeros((b, t), np.int32),
        np.zeros((b, t), np.int32),
        np.zeros((b, t), bool),
        np.zeros((b, t), np.float32),
        np.zeros((b, t), np.float32),
        [len(r[0]) for r in rows],
        np.zeros((b, t), bool) if ratio_mask else None,
    )
    for i, (tokens, arrays) in enumerate(rows):
        n = len(tokens)
        out.tokens[i, :n] = tokens
        out.targets[i, :n] = arrays["target_tokens"]
        out.mask[i, :n] = True
        if len(needed) > 1:
            out.first[i, :n] = arrays[needed[1]]
        if len(needed) > 2:
            out.second[i, :n] = arrays[needed[2]]
        if out.ratio is not None:
            out.ratio[i, :n] = arrays.get(RATIO_MASK, arrays["advantages"]) != 0
    return out


def loss_options(loss_fn: str, config: Mapping[str, float | str] | None) -> tuple[tuple[str, float], ...]:
    """``loss_fn``'s options from ``loss_fn_config``, checked and sorted (a static jit argument)."""
    if isinstance(loss_fn, str) and loss_fn in UNSUPPORTED:
        raise ValueError(UNSUPPORTED[loss_fn])
    if not isinstance(loss_fn, str) or loss_fn not in LOSS_INPUTS:
        raise ValueError(f"loss_fn must be one of {list(LOSS_FNS)}, got {loss_fn!r}")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"loss_fn_config must be a mapping option -> number, got {type(config).__name__}")
    config = dict(config or {})
    unpublished = sorted(set(config) & set(UNPUBLISHED_OPTIONS.get(loss_fn, ())))
    if unpublished:
        raise ValueError(
            f"loss_fn_config {unpublished}: Tinker's option of {loss_fn!r} (tinker 0.38) weighs a term it "
            "does not publish; the stand-in computed here can neither compute nor ignore it"
        )
    unknown = sorted(set(config) - set(LOSS_OPTIONS[loss_fn]))
    if unknown:
        raise ValueError(
            f"loss_fn_config keys {unknown} are not options of {loss_fn!r} "
            f"(known: {list(LOSS_OPTIONS[loss_fn])})"
        )
    if loss_fn == "dro" and "beta" not in config:
        raise ValueError("loss_fn 'dro' needs loss_fn_config['beta']")
    missing = [k for k in LOSS_OPTIONS["gspo"] if k not in config] if loss_fn == "gspo" else []
    if missing:
        raise ValueError(
            f"loss_fn 'gspo' needs loss_fn_config {missing} (absolute ratio bounds, e.g. 0.8 and 1.2: "
            "Tinker's defaults for gspo are not documented, so none is assumed)"
        )
    try:
        return tuple(sorted((k, float(v)) for k, v in config.items()))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"loss_fn_config values must be numbers, got {config!r}") from exc


def token_loss(
    loss_fn: str,
    lp: jax.Array,
    a: jax.Array,
    b: jax.Array,
    mask: jax.Array,
    opts: dict[str, float],
    ratio: jax.Array | None = None,
) -> Any:
    """``loss_fn`` of :mod:`kernel.jax` on the logprobs ``lp`` [B, T]: ``a`` is the weights
    (cross-entropy) or the sampler logprobs, ``b`` the advantages; positions where ``mask`` is False
    count for nothing. gspo's sequences are the rows (one datum each), its ratio tokens ``ratio``."""
    if loss_fn == "cross_entropy":
        return cross_entropy_loss(lp, a, where=mask)
    if loss_fn == "importance_sampling":
        return importance_sampling_loss(lp, a, b, where=mask)
    if loss_fn == "ppo":
        lo, hi = opts.get("clip_low_threshold", 0.8), opts.get("clip_high_threshold", 1.2)
        return ppo_loss(lp, a, b, where=mask, clip_low_threshold=lo, clip_high_threshold=hi)
    if loss_fn == "cispo":
        lo, hi = opts.get("clip_low_threshold", 0.0), opts.get("clip_high_threshold", 4.0)
        return cispo_loss(lp, a, b, where=mask, clip_low_threshold=lo, clip_high_threshold=hi)
    if loss_fn == "gspo":
        lo, hi = opts["clip_low_threshold"], opts["clip_high_threshold"]
        return gspo_loss(
            lp, a, b, where=mask, ratio_where=ratio, clip_low_threshold=lo, clip_high_threshold=hi
        )
    return dro_loss(lp, a, b, where=mask, beta=opts["beta"])


_ATTENTION_BUDGET = 1 << 25
"""Most attention scores (rows × heads × T²) one jitted training call holds per layer."""


def chunk_rows(cfg: m.ModelConfig, t: int) -> int:
    """Rows per training call: a power of two with rows·heads·T² ≤ the budget (at least one)."""
    fit = max(1, _ATTENTION_BUDGET // (cfg.num_heads * t * t))
    return 1 << (fit.bit_length() - 1)


def merged(frozen: m.Params | None, trainable: m.Params) -> m.Params:
    """The weights the model runs with: the trained ones, or the frozen base with the LoRA adapters merged."""
    return trainable if frozen is None else m.merge_lora(frozen, trainable)


@partial(jax.jit, static_argnames=("cfg", "loss_fn", "options", "backward"))
def forward_backward(
    trainable: m.Params,
    frozen: m.Params | None,
    grads: m.Params,
    batch: tuple[jax.Array, ...],
    *,
    cfg: m.ModelConfig,
    loss_fn: str,
    options: tuple[tuple[str, float], ...],
    backward: bool,
) -> tuple[jax.Array, jax.Array, jax.Array, m.Params]:
    """(loss, per-token logprobs [B, T], per-token losses [B, T], ``grads`` plus this call's gradient
    of the loss with respect to ``trainable``); ``backward=False`` leaves ``grads`` as they are.
    ``batch`` is :class:`Batch`'s arrays, ``ratio`` last for gspo."""
    tokens, targets, mask, first, second, *rest = batch
    ratio = rest[0] if rest else None

    def objective(trainable: m.Params) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        lp = (
            m.token_logprobs(cfg, trainable, tokens, targets)
            if frozen is None
            else m.token_logprobs(cfg, frozen, tokens, targets, lora=trainable)  # unmerged: cheaper backward
        )
        result = token_loss(loss_fn, lp, first, second, mask, dict(options), ratio)
        return result.loss, (lp, result.per_token_loss)

    if not backward:
        loss, (lp, ell) = objective(trainable)
        return loss, lp, ell, grads
    (loss, (lp, ell)), g = jax.value_and_grad(objective, has_aux=True)(trainable)
    return loss, lp, ell, jax.tree_util.tree_map(jnp.add, grads, g)


def adamw() -> optax.GradientTransformation:
    """AdamW whose hyperparameters are state (set per ``optim_step`` from the SDK's ``AdamParams``)."""
    return optax.inject_hyperparams(optax.adamw)(
        learning_rate=1e-4, b1=0.9, b2=0.95, eps=1e-12, weight_decay=0.0
    )


@jax.jit
def optim_step(
    trainable: m.Params, opt_state: Any, grads: m.Params, hyper: dict[str, jax.Array], clip: jax.Array
) -> tuple[m.Params, Any, m.Params, jax.Array]:
    """One AdamW step on the accumulated ``grads``, clipped to global norm ``clip`` (0: no clipping):
    (new weights, optimizer state, zeroed gradients, the gradients' norm before clipping)."""
    norm = optax.tree.norm(grads)
    scale = jnp.where(clip > 0, jnp.minimum(1.0, clip / jnp.maximum(norm, 1e-30)), 1.0)
    grads = jax.tree_util.tree_map(lambda g: g * scale, grads)
    opt_state = opt_state._replace(hyperparams={**opt_state.hyperparams, **hyper})
    updates, opt_state = adamw().update(grads, opt_state, trainable)
    trainable = optax.apply_updates(trainable, updates)
    return trainable, opt_state, jax.tree_util.tree_map(jnp.zeros_like, grads), norm
