"""A local training service with Tinker's client surface, over the JAX model in :mod:`adapters.local.model`.

:class:`LocalServiceClient` satisfies :class:`adapters.tinker.protocol.ServiceClient`; its training and
sampling clients satisfy ``TrainingClient`` / ``SamplingClient`` and return real ``tinker.types``.

Semantics, as in the SDK:

- Every call returns a future (``await fut`` or ``await fut.result_async()``). The work runs at
  submission, synchronously, so requests on one training client run in submission order; an error is
  raised when the future is awaited, and leaves the client's state as it was (a request is validated in
  full before anything runs, so no datum of a rejected batch is half-applied).
- ``forward_backward`` accumulates gradients; ``optim_step`` applies them with AdamW (optax; the
  ``AdamParams`` learning rate, β₁, β₂, ε, weight decay and global-norm clip) and clears them.
- Losses (``cross_entropy``, ``importance_sampling``, ``ppo``, ``cispo``, ``dro``) are the
  :mod:`kernel.jax` losses with Tinker's ``"sum"`` aggregation over each datum's tokens.
- ``save_weights_and_get_sampling_client`` returns a sampler over a snapshot: later training never
  changes it (JAX arrays are immutable, and the optimizer makes new ones).
- ``save_state`` writes one safetensors file (weights, LoRA, optimizer state, config) atomically;
  ``load_state_with_optimizer`` restores it bit for bit.

Differences from the SDK: paths are local files (under ``root``), not ``tinker://`` URIs. In
``forward_backward_custom`` the loss receives JAX arrays (the SDK passes torch tensors) and the gradient
is taken with ``jax.vjp``, so the loss must be written with ``jax.numpy`` and must not call ``float()``
on them; metrics may be returned as JAX scalars (they are converted to floats afterwards).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import weakref
import zlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import tinker
from tinker import types

from adapters.futures import AwaitableFuture, CompletedFuture, completed, failed
from adapters.local import devices, hf, train_step
from adapters.local import lora as lo
from adapters.local import model as m
from adapters.local import state as st
from adapters.local.devices import CPU_DEVICES, split_cpu
from adapters.local_models import served_locally
from adapters.tinker.provenance import prompt_advantage_refusal, provenance_refusal, unrecorded_refusal
from adapters.tokenizers import ByteTokenizer

__all__ = [
    "CPU_DEVICES",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "serves",
    "split_cpu",
]


def _run(work: Callable[[], Any]) -> CompletedFuture[Any]:
    """Runs ``work`` now; its value or its exception is delivered when the future is awaited."""
    try:
        return completed(work())
    except Exception as exc:
        return failed(exc)


def serves(base_model: str) -> bool:
    """Whether ``base_model`` names a model this service can start from: a size of :data:`SIZES`, an
    existing ``.safetensors`` file (whose contents :func:`~adapters.local.model.load_weights` checks), or
    a Hugging Face checkpoint directory (:mod:`adapters.local.hf`, which checks its architecture).

    Examples:
        >>> serves("tiny"), serves("Qwen/Qwen3-8B")
        (True, False)
    """
    return served_locally(base_model)  # told without JAX: train and serve check --model before importing it


def _resolve_base(base_model: str, seed: int) -> tuple[m.ModelConfig, m.Params]:
    if not isinstance(base_model, str):
        raise TypeError(f"base_model must be a model name or a weights file path (str), got {base_model!r}")
    if base_model in m.SIZES:
        cfg = m.SIZES[base_model]
        return cfg, m.init_params(cfg, jax.random.key(seed))
    if hf.is_checkpoint(base_model):
        return hf.load(base_model)
    if serves(base_model):
        return m.load_weights(base_model)
    raise ValueError(
        f"unknown base_model {base_model!r}: expected one of {sorted(m.SIZES)}, the path of an existing "
        ".safetensors weights file or of a Hugging Face checkpoint directory (Llama 3.x, Qwen3)"
    )


_MAX_ROWS = 64
"""Most rows in one batched sampling call."""
_MIN_ROWS = 4
"""Batched sampling calls are padded to at least this many rows (fewer compiled shapes)."""
_PREFILL_BUDGET = 1 << 26
"""Most attention scores (rows × heads × P²) one sampling call's prefill holds per layer."""


def _rows_per_call(cfg: m.ModelConfig, prompt_len: int) -> int:
    """Rows per sampling call: a power of two ≤ ``_MAX_ROWS`` whose prefill fits the budget (≥ 1)."""
    p = m.bucket_fine(prompt_len, minimum=16)
    fit = max(1, min(_MAX_ROWS, _PREFILL_BUDGET // (cfg.num_heads * p * p)))
    return 1 << (fit.bit_length() - 1)


class _Queued(NamedTuple):
    call: int
    rows: list[m.SampleRow]
    future: asyncio.Future[types.SampleResponse]


class LocalSamplingClient:
    """Samples from one set of weights (satisfies ``protocol.SamplingClient``): frozen for a snapshot
    sampler; an inflight sampler's move to the weights of each later inflight save of its training
    client (:meth:`LocalTrainingClient.save_weights_and_get_sampling_client`), from its next call on."""

    def __init__(
        self,
        cfg: m.ModelConfig,
        params: m.Params,
        *,
        seed: int = 0,
        name: str = "sampler",
        tokenizer: Any = None,
        recorded: set[str] | None = None,
    ) -> None:
        self._cfg, self._params, self._seed, self._name = cfg, params, seed, name
        self._recorded = recorded  # record_stability_info: its service's record of the sequences sampled
        self._calls = itertools.count()
        self._tokenizer = ByteTokenizer() if tokenizer is None else tokenizer  # encodes stop strings
        self._queue: list[_Queued] = []
        self._flush_pending = False

    def get_tokenizer(self) -> Any:
        """The model's tokenizer: the byte tokenizer of the built-in models, or a checkpoint's own
        (``transformers``, with its chat template)."""
        return hf.hf_tokenizer(self._tokenizer)

    def _stops(self, stop: str | Sequence[str] | Sequence[int] | None) -> list[list[int]]:
        if stop is None:
            return []
        if isinstance(stop, str):
            return [self._tokenizer.encode(stop)]
        out: list[list[int]] = []
        for s in stop:
            if isinstance(s, str):
                out.append(self._tokenizer.encode(s))
            elif isinstance(s, int | np.integer) and not isinstance(s, bool):
                out.append([int(s)])
            else:
                raise TypeError(f"sampling_params.stop entries must be str or int, got {type(s).__name__}")
        return out

    def _rows(
        self, call: int, prompt: types.ModelInput, num_samples: int, params: types.SamplingParams
    ) -> list[m.SampleRow]:
        """The request's rows, validated in full; row j's key is ``fold_in(request key, j)``."""
        if not isinstance(prompt, types.ModelInput):
            raise TypeError(f"prompt must be a tinker.types.ModelInput, got {type(prompt).__name__}")
        if not isinstance(params, types.SamplingParams):
            kind = type(params).__name__
            raise TypeError(f"sampling_params must be a tinker.types.SamplingParams, got {kind}")
        tokens = prompt.to_ints()
        if len(tokens) >= self._cfg.max_seq_len:
            raise ValueError(
                f"prompt has {len(tokens)} tokens; the model's context is {self._cfg.max_seq_len} "
                "(the prompt must be shorter to leave room for one sampled token)"
            )
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples < 1:
            raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")
        if params.seed is not None:
            key = jax.random.key(params.seed)
        else:
            named = jax.random.fold_in(
                jax.random.key(self._seed), zlib.crc32(self._name.encode()) & 0x7FFFFFFF
            )
            key = jax.random.fold_in(named, call)
        max_tokens = params.max_tokens if params.max_tokens is not None else self._cfg.max_seq_len
        stops = tuple(tuple(s) for s in self._stops(params.stop))
        rows = [
            m.SampleRow(
                list(tokens),
                jax.random.fold_in(key, j),
                max_tokens,
                params.temperature,
                params.top_p,
                params.top_k,
                stops,
            )
            for j in range(num_samples)
        ]
        m.check_row(self._cfg, rows[0], where="request")
        return rows

    def _response(
        self, call: int, result: m.GenerateResult, start: int, count: int, first: int = 0
    ) -> types.SampleResponse:
        """The SampleResponse of result rows ``start … start + count − 1``, sample ``first`` onwards of
        request ``call``."""
        toks, lps = np.asarray(result.tokens_B_M), np.asarray(result.logprobs_B_M, dtype=np.float32)
        lengths, stopped = np.asarray(result.lengths_B), np.asarray(result.stopped_B)
        sequences = [
            types.SampledSequence(
                stop_reason="stop" if stopped[b] else "length",
                sequence_id=f"{self._name}-{call}-{first + b - start}",
                tokens_np=toks[b, : lengths[b]].astype(np.int32),
                logprobs_np=lps[b, : lengths[b]].copy(),
            )
            for b in range(start, start + count)
        ]
        if self._recorded is not None:
            self._recorded.update(s.sequence_id for s in sequences if s.sequence_id)
        return types.SampleResponse(sequences=sequences)

    def _flush(self) -> None:
        """Samples every queued request in batched calls; resolves their futures in request order.

        Rows are grouped by prompt length (fewer padded positions) into calls of at most
        :func:`_rows_per_call` rows. When a call fails, each of its requests is sampled again on its
        own (the same tokens: a row never depends on the others), so only a request that fails alone
        fails.
        """
        queue, self._queue, self._flush_pending = self._queue, [], False
        live = [q for q in queue if not q.future.done()]  # a cancelled request is skipped
        flat = [(i, j) for i, q in enumerate(live) for j in range(len(q.rows))]
        flat.sort(key=lambda ij: len(live[ij[0]].rows[ij[1]].prompt))
        outcome: dict[int, list[Any]] = {i: [None] * len(q.rows) for i, q in enumerate(live)}
        errors: dict[int, BaseException] = {}
        start = 0
        while start < len(flat):
            longest = len(live[flat[min(start + _MAX_ROWS, len(flat)) - 1][0]].rows[0].prompt)
            size = min(_rows_per_call(self._cfg, longest), len(flat) - start)
            group = flat[start : start + size]
            start += size
            try:
                result = m.generate_rows(
                    self._cfg, self._params, [live[i].rows[j] for i, j in group], min_batch=_MIN_ROWS
                )
                for b, (i, j) in enumerate(group):
                    outcome[i][j] = self._response(live[i].call, result, b, 1, j).sequences[0]
            except Exception as exc:
                requests = sorted({i for i, _ in group})
                if len(requests) == 1:
                    errors.setdefault(requests[0], exc)
                    continue
                for r in requests:  # a call that fails for one request's sake: each request alone
                    mine = [(i, j) for i, j in group if i == r]
                    try:
                        alone = m.generate_rows(self._cfg, self._params, [live[r].rows[j] for _, j in mine])
                        for b, (_, j) in enumerate(mine):
                            outcome[r][j] = self._response(live[r].call, alone, b, 1, j).sequences[0]
                    except Exception as own:
                        errors.setdefault(r, own)
        for i, q in enumerate(live):
            if i in errors:
                q.future.set_exception(errors[i])
            else:
                q.future.set_result(types.SampleResponse(sequences=outcome[i]))

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> CompletedFuture[types.SampleResponse] | AwaitableFuture[types.SampleResponse]:
        """Samples ``num_samples`` continuations of ``prompt``.

        Stop sequences (strings are encoded with the byte tokenizer) are included in the returned
        tokens. Logprobs are the model's at temperature 1, the same numbers training computes.

        Batching: inside a running event loop the request is queued, and every request submitted on
        this client before the loop's next turn is sampled in one batched call (concurrent debates
        share a prefill and decode loop); futures resolve in submission order. Outside a loop the
        request runs at once. Either way the result is the same: request n of this client (counting
        every call) draws with key ``fold_in(fold_in(key(seed), crc32(name)), n)`` (or
        ``key(sampling_params.seed)``), row j with ``fold_in(that, j)``, token i with
        ``fold_in(row key, i)``, so batching never changes what is sampled. A request that is invalid
        fails on its own, at once.
        """
        call = next(self._calls)
        try:
            rows = self._rows(call, prompt, num_samples, sampling_params)
        except Exception as exc:
            return failed(exc)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return _run(
                lambda: self._response(call, m.generate_rows(self._cfg, self._params, rows), 0, len(rows))
            )
        future: asyncio.Future[types.SampleResponse] = loop.create_future()
        self._queue.append(_Queued(call, rows, future))
        if not self._flush_pending:
            self._flush_pending = True
            loop.call_soon(self._flush)
        return AwaitableFuture(future)

    def compute_logprobs(self, prompt: types.ModelInput) -> CompletedFuture[list[float | None]]:
        """log p(token_t | tokens_<t) for every prompt token (None for the first), as in the SDK."""

        def work() -> list[float | None]:
            if not isinstance(prompt, types.ModelInput):
                raise TypeError(f"prompt must be a tinker.types.ModelInput, got {type(prompt).__name__}")
            ids = prompt.to_ints()
            if not 1 <= len(ids) <= self._cfg.max_seq_len:
                raise ValueError(f"prompt must hold 1 to {self._cfg.max_seq_len} tokens, got {len(ids)}")
            if any(not 0 <= t < self._cfg.vocab_size for t in ids):
                raise ValueError(f"prompt token ids must be in [0, {self._cfg.vocab_size})")
            tokens = np.asarray(ids, np.int32)
            lp = _logprobs(self._cfg, self._params, tokens)
            return [None, *(float(x) for x in lp)]

        return _run(work)


def _logprobs(cfg: m.ModelConfig, params: m.Params, tokens: np.ndarray) -> np.ndarray:
    t = m.bucket(tokens.size, minimum=16)
    padded = np.zeros((1, t), np.int32)
    padded[0, : tokens.size] = tokens
    shifted = np.zeros((1, t), np.int32)
    shifted[0, : tokens.size - 1] = tokens[1:]
    lp = _jit_logprobs(params, jnp.asarray(padded), jnp.asarray(shifted), cfg=cfg)
    return np.asarray(lp)[0, : tokens.size - 1]


@partial(jax.jit, static_argnames=("cfg",))
def _jit_logprobs(
    params: m.Params, tokens: jax.Array, targets: jax.Array, *, cfg: m.ModelConfig
) -> jax.Array:
    return m.token_logprobs(cfg, params, tokens, targets)


CustomLoss = Callable[[list[types.Datum], list[Any]], tuple[Any, Mapping[str, Any]]]


class LocalTrainingClient:
    """A model being trained locally (satisfies ``protocol.TrainingClient``)."""

    def __init__(self, service: LocalServiceClient, state: st.State, *, name: str) -> None:
        self._service, self._state, self._name = service, state, name
        self._made = (state.step, 0)  # (optimizer step, samplers made at it)
        self._inflight: weakref.WeakSet[LocalSamplingClient] = weakref.WeakSet()  # shared-target samplers

    @property
    def step(self) -> int:
        """Optimizer steps taken."""
        return self._state.step

    @property
    def base_model(self) -> str:
        """The base model this run started from (a size name or a weights file path)."""
        return self._state.base_model

    @property
    def lora_rank(self) -> int:
        """The LoRA rank (0 for full fine-tuning)."""
        return self._state.rank

    def get_tokenizer(self) -> Any:
        """The model's tokenizer (see :meth:`LocalSamplingClient.get_tokenizer`)."""
        return hf.hf_tokenizer(hf.tokenizer_for(self._state.base_model))

    def _apply(
        self, batch: train_step.Batch, loss_fn: str, options: tuple[tuple[str, float], ...], *, backward: bool
    ) -> types.ForwardBackwardOutput:
        """Runs the batch in row chunks that bound attention memory; gradients and losses add up.

        With more than one device (:func:`~adapters.local.devices.row_mesh`), each chunk's rows are split
        among the devices and the weights and gradients are replicated on all of them (kept so in the
        state)."""
        s = self._state
        rows, t = batch.tokens.shape
        chunk = min(rows, train_step.chunk_rows(s.cfg, t))
        mesh = devices.row_mesh()
        trainable, frozen, grads = devices.replicated(mesh, (s.trainable, s.frozen, s.grads))
        total = 0.0
        lps, ells = [], []
        rows_arrays = (*batch[:5], *(() if batch.ratio is None else (batch.ratio,)))
        for start in range(0, len(batch.lengths), chunk):
            host = tuple(x[start : start + chunk] for x in rows_arrays)
            count = host[0].shape[0]  # the rows of the chunk before any padding for the devices
            arrays = devices.rows_on(mesh, host)
            loss, lp, ell, grads = train_step.forward_backward(
                trainable,
                frozen,
                grads,
                arrays,
                cfg=s.cfg,
                loss_fn=loss_fn,
                options=options,
                backward=backward,
            )
            total += float(loss)
            lps.append(np.asarray(lp, np.float32)[:count])
            ells.append(np.asarray(ell, np.float32)[:count])
        self._state = s._replace(trainable=trainable, frozen=frozen, grads=grads)
        lp_np, ell_np = np.concatenate(lps), np.concatenate(ells)
        outputs = [
            {
                "logprobs": types.TensorData.from_numpy(lp_np[i, :n].copy()),
                "elementwise_loss": types.TensorData.from_numpy(ell_np[i, :n].copy()),
            }
            for i, n in enumerate(batch.lengths)
        ]
        return types.ForwardBackwardOutput("ArrayRecord", outputs, {"loss:sum": total})

    def _fb(
        self, data: Sequence[types.Datum], loss_fn: str, config: Any, *, backward: bool
    ) -> types.ForwardBackwardOutput:
        options = train_step.loss_options(loss_fn, config)
        needed = train_step.LOSS_INPUTS[loss_fn]
        stand_in = train_step.STAND_INS.get(loss_fn)
        if stand_in is not None:
            refusal = (
                provenance_refusal(data, loss_fn)
                or unrecorded_refusal(data, loss_fn, self._service.recorded)
                or prompt_advantage_refusal(data, loss_fn)
            )
            if refusal is not None:
                raise tinker.RequestFailedError(refusal, "local", types.RequestErrorCategory.User)
        out = self._apply(
            train_step.pack_batch(data, needed, self._state.cfg, ratio_mask=loss_fn == "gspo"),
            stand_in or loss_fn,
            options,
            backward=backward,
        )
        if stand_in is not None:  # the objective computed is not Tinker's: the response says so
            out.metrics["loss/stand_in:max"] = 1.0
        return out

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        """Adds the gradient of Σ_datums loss to the accumulated gradients; returns per-token logprobs.

        ``loss_fn_inputs``: ``target_tokens`` and ``weights`` (cross_entropy) or ``target_tokens``,
        ``logprobs`` (the sampler's) and ``advantages`` (the RL losses), each as long as the datum's
        ``model_input``; gspo also reads ``sequence_ratio_mask`` when a datum has it (its sequence ratio's
        tokens, ≠ 0; default: the tokens with a nonzero advantage). ``loss_fn_config``: ppo / cispo
        ``clip_low_threshold``, ``clip_high_threshold``; gspo the same two (required); dro ``beta``
        (required). ``stable_reinforce`` needs provenance spans on every datum naming sequences that a
        sampler of this service made with ``record_stability_info=True`` (else ``RequestFailedError``,
        category ``User``, naming the datum) and computes a stand-in, importance sampling −Σ ρ·A: Tinker
        does not publish its objective (:data:`~adapters.local.train_step.STAND_INS`; the metric
        ``loss/stand_in:max = 1`` marks it).
        """
        return _run(lambda: self._fb(data, loss_fn, loss_fn_config, backward=True))

    def forward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        """Like :meth:`forward_backward` without touching the gradients."""
        return _run(lambda: self._fb(data, loss_fn, loss_fn_config, backward=False))

    def _custom(self, data: list[types.Datum], loss_fn: CustomLoss) -> types.ForwardBackwardOutput:
        batch = train_step.pack_batch(data, ("target_tokens",), self._state.cfg)
        forward = self._apply(batch, "cross_entropy", (), backward=False)
        lp = [jnp.asarray(o["logprobs"].to_numpy()) for o in forward.loss_fn_outputs]

        def checked(lps: list[jax.Array]) -> Any:
            out = loss_fn(data, lps)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"loss_fn must return a (loss, metrics) pair, got {type(out).__name__}")
            return out

        loss, pullback, metrics = jax.vjp(checked, lp, has_aux=True)
        loss = jnp.asarray(loss)
        (grads,) = pullback(jnp.ones_like(loss))
        weights = np.zeros_like(batch.first)
        for i, (g, n) in enumerate(zip(grads, batch.lengths, strict=True)):
            weights[i, :n] = -np.asarray(g, np.float32)
        if not np.isfinite(weights).all():
            raise ValueError(
                f"loss_fn's gradient with respect to the logprobs is not finite (loss "
                f"{float(jnp.sum(loss))}); nothing was accumulated"
            )
        try:
            pairs = dict(metrics)
        except (TypeError, ValueError):
            raise TypeError(f"loss_fn's metrics must be a mapping name -> number, got {metrics!r}") from None
        metrics_out: dict[str, float] = {}
        for k, v in pairs.items():  # converted before the weighted pass: a bad metric commits nothing
            try:
                metrics_out[str(k)] = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"loss_fn's metrics[{k!r}] must be a number, got {v!r}") from None
        out = self._apply(batch._replace(first=weights), "cross_entropy", (), backward=True)
        metrics_out["surrogate_loss:sum"] = out.metrics["loss:sum"]
        metrics_out["loss:sum"] = float(jnp.sum(loss))
        return types.ForwardBackwardOutput(out.loss_fn_output_type, out.loss_fn_outputs, metrics_out)

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLoss
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        """A custom loss over per-datum target logprobs: ``loss_fn(data, logprobs) -> (loss, metrics)``.

        As in the SDK, the gradient g = ∂loss/∂logprobs is taken on the client side and applied as a
        cross-entropy pass with weights −g. Here ``logprobs`` are JAX arrays [n_i] and the gradient
        comes from ``jax.vjp`` (the SDK: torch tensors and ``backward()``); write the loss with
        ``jax.numpy`` and return metrics as numbers or JAX scalars (no ``float()`` inside).
        ``metrics["loss:sum"]`` is the custom loss; ``"surrogate_loss:sum"`` the weighted pass's.
        """
        return _run(lambda: self._custom(data, loss_fn))

    def _optim(self, p: types.AdamParams) -> types.OptimStepResponse:
        s = self._state
        values = {"learning_rate": p.learning_rate, "b1": p.beta1, "b2": p.beta2, "eps": p.eps}
        values["weight_decay"] = getattr(p, "weight_decay", 0.0)
        clip_norm = getattr(p, "grad_clip_norm", 0.0) or 0.0
        for k, v in {**values, "grad_clip_norm": clip_norm}.items():
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"AdamParams {k} must be a finite number >= 0, got {v}")
        for k in ("b1", "b2"):  # β = 1 never forgets the first gradient; its bias correction divides by 0
            if not values[k] < 1:
                raise ValueError(f"AdamParams beta{k[1]} must be < 1, got {values[k]}")
        if not np.float32(values["eps"]) > 0:  # ε = 0 divides 0 by 0 wherever a gradient entry is 0
            raise ValueError(f"AdamParams eps must be > 0 (in float32), got {values['eps']}")
        hyper = {k: jnp.asarray(v, jnp.float32) for k, v in values.items()}
        clip = jnp.asarray(clip_norm, jnp.float32)
        # the optimizer state on the devices the weights are on (as optim_step returns it): a fresh state
        # placed elsewhere would compile the step a second time
        opt_state = devices.replicated(devices.row_mesh(), s.opt_state)
        trainable, opt_state, grads, norm = train_step.optim_step(
            s.trainable, opt_state, s.grads, hyper, clip
        )
        self._state = s._replace(trainable=trainable, opt_state=opt_state, grads=grads, step=s.step + 1)
        return types.OptimStepResponse(metrics={"grad_norm": float(norm)})

    def optim_step(self, optim_params: types.AdamParams) -> CompletedFuture[types.OptimStepResponse]:
        """One AdamW step on the accumulated gradients (then cleared)."""
        return _run(lambda: self._optim(optim_params))

    def merged_params(self) -> m.Params:
        """The current full weights (LoRA merged in)."""
        return train_step.merged(self._state.frozen, self._state.trainable)

    def _save_state(self, name: str) -> types.SaveWeightsResponse:
        path = self._service._path("states", name)
        st.write_state(path, self._state)
        return types.SaveWeightsResponse(path=str(path))

    def save_state(self, name: str) -> CompletedFuture[types.SaveWeightsResponse]:
        """Writes weights, LoRA, optimizer state and config to ``ROOT/states/NAME.safetensors`` atomically."""
        return _run(lambda: self._save_state(name))

    def _load(self, path: str, *, with_optimizer: bool) -> None:
        s = self._state
        loaded = st.read_state(path)
        loaded = loaded._replace(cfg=self._service._computing(loaded.cfg))
        if loaded.cfg != s.cfg or loaded.rank != s.rank:
            raise ValueError(
                f"checkpoint {path!r} holds a different model (config {loaded.cfg}, rank {loaded.rank}) "
                f"than this client (config {s.cfg}, rank {s.rank})"
            )
        if not with_optimizer:
            loaded = loaded._replace(opt_state=train_step.adamw().init(loaded.trainable), step=0)
        self._state = loaded

    def load_state_with_optimizer(self, path: str) -> CompletedFuture[None]:
        """Replaces weights and optimizer state with a saved state's (bit for bit)."""
        return _run(lambda: self._load(path, with_optimizer=True))

    def load_state(self, path: str) -> CompletedFuture[None]:
        """Replaces the weights with a saved state's; the optimizer starts fresh."""
        return _run(lambda: self._load(path, with_optimizer=False))

    def _snapshot(self, name: str | None, stability: bool = False) -> LocalSamplingClient:
        step = self._state.step
        index = self._made[1] if self._made[0] == step else 0
        params = self.merged_params()
        if devices.row_mesh() is not None:  # sampling runs on one device (rows are not split there)
            params = jax.device_put(params, jax.devices()[0])
        if name is not None:
            self._save_sampler(self._service._path("weights", name), params)
        self._made = (step, index + 1)
        # The sampler's random stream is named by the optimizer step and the samplers made since it, not
        # by a count over the client's life: a run resumed from a saved state samples as the first run did.
        label = f"{self._name}-t{step}-s{index}"
        tokenizer = hf.tokenizer_for(self._state.base_model)
        recorded = self._service.recorded if stability else None
        return LocalSamplingClient(
            self._state.cfg,
            params,
            seed=self._service.seed,
            name=label,
            tokenizer=tokenizer,
            recorded=recorded,
        )

    def _save_sampler(self, path: Path, params: m.Params) -> None:
        """Sampler weights: the adapter alone over a Hugging Face checkpoint (:func:`lora.save_adapter`),
        else the merged weights (:func:`~adapters.local.model.save_weights`)."""
        s = self._state
        if s.rank > 0 and hf.is_checkpoint(s.base_model):
            lo.save_adapter(path, s.cfg, s.trainable, s.base_model)
        else:
            m.save_weights(path, s.cfg, params)

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        *,
        record_stability_info: bool = False,
        kind: Literal["snapshot", "inflight"] = "snapshot",
    ) -> CompletedFuture[LocalSamplingClient]:
        """A sampler over the current weights (also saved under ``name`` if given); with
        ``record_stability_info`` its samples are recorded in the service for ``stable_reinforce``.

        ``kind`` is tinker 0.38's ``SamplingClientKind``: ``"snapshot"`` freezes them; ``"inflight"``
        publishes them to every inflight sampler of this client, the earlier ones included (each adopts
        them at its next call; a call already running finishes on the weights it started with), and
        returns a new one on them.

        Raises:
          ValueError: another ``kind`` (in the future).
        """
        if kind not in ("snapshot", "inflight"):
            return failed(ValueError(f"kind must be 'snapshot' or 'inflight', got {kind!r}"))
        stability = bool(record_stability_info)
        return _run(
            lambda: self._snapshot(name, stability) if kind == "snapshot" else self._publish(name, stability)
        )

    def _publish(self, name: str | None, stability: bool) -> LocalSamplingClient:
        client = self._snapshot(name, stability)
        for earlier in self._inflight:
            earlier._params = client._params
        self._inflight.add(client)
        return client

    def save_weights_for_sampler(self, name: str) -> CompletedFuture[types.SaveWeightsForSamplerResponse]:
        """Saves the merged weights to ``ROOT/weights/NAME.safetensors`` (a base model for later runs); on a
        Hugging Face checkpoint a LoRA run saves the adapter alone (:func:`adapters.local.lora.save_adapter`,
        read back by :func:`adapters.local.hf.load_weights_file`)."""

        def work() -> types.SaveWeightsForSamplerResponse:
            path = self._service._path("weights", name)
            self._save_sampler(path, self.merged_params())
            return types.SaveWeightsForSamplerResponse(path=str(path))

        return _run(work)


class LocalServiceClient:
    """Creates local training and sampling clients (satisfies ``protocol.ServiceClient``).

    Args:
        seed: seeds the built-in base models, LoRA initialisation and sampling (runs are deterministic).
        root: folder for saved states and weights (default: a fresh temporary folder, made on first save).
        compute_dtype: the operands of every matrix product of its trainers and samplers,
            ``"float32"`` or ``"bfloat16"`` (:data:`adapters.local.model.COMPUTE_DTYPES`: for GPUs; the
            weights and optimizer state stay float32, and saved files do not depend on it).

    Examples:
        >>> import asyncio
        >>> async def main():
        ...     service = LocalServiceClient(seed=0)
        ...     trainer = await service.create_lora_training_client("tiny", rank=4)
        ...     sampler = await trainer.save_weights_and_get_sampling_client()
        ...     prompt = types.ModelInput.from_ints([72, 105])
        ...     params = types.SamplingParams(max_tokens=4, temperature=0.0)
        ...     response = await sampler.sample(prompt, 2, params)
        ...     return [len(s.tokens) for s in response.sequences]
        >>> asyncio.run(main())
        [4, 4]
    """

    def __init__(
        self, *, seed: int = 0, root: str | Path | None = None, compute_dtype: str = "float32"
    ) -> None:
        if not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed, self.compute_dtype = seed, m.check_compute_dtype(compute_dtype, "compute_dtype")
        self.recorded: set[str] = set()  # sequences sampled with record_stability_info (stable_reinforce)
        self._root = Path(root) if root is not None else None
        self._clients = itertools.count()

    @property
    def root(self) -> Path:
        """The folder saved states and weights go to."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="debate-kernel-local-"))
        return self._root

    def _path(self, kind: Literal["states", "weights"], name: str) -> Path:
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(
                f"name must be a plain file name (no separators, not starting with '.'), got {name!r}"
            )
        return self.root / kind / f"{name}.safetensors"

    def _computing(self, cfg: m.ModelConfig) -> m.ModelConfig:
        """``cfg`` with this service's ``compute_dtype`` (a file's config reads back as float32)."""
        return cfg._replace(compute_dtype=self.compute_dtype)

    def _new(
        self, base_model: str, rank: int, targets: tuple[str, ...] = m.LORA_TARGETS
    ) -> LocalTrainingClient:
        cfg, base = _resolve_base(base_model, self.seed)
        cfg = self._computing(cfg)
        if rank > cfg.d_model:  # every adapted matrix has d_model rows or columns: no longer low-rank
            raise ValueError(f"rank must be at most the model's d_model ({cfg.d_model}), got {rank}")
        index = next(self._clients)
        if rank > 0:
            key = jax.random.fold_in(jax.random.key(self.seed), 1 + index)
            lora = m.init_lora(cfg, rank, key, targets)
            state = st.fresh_state(cfg, base, lora, rank, base_model)
        else:
            state = st.fresh_state(cfg, None, base, 0, base_model)
        return LocalTrainingClient(self, state, name=f"run{index}")

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> CompletedFuture[LocalTrainingClient]:
        """A fresh LoRA run: base weights frozen, rank-``rank`` adapters trained.

        ``base_model``: a built-in size (``"tiny"``, ``"small"``, ``"base"``), a ``.safetensors``
        weights file written by :func:`adapters.local.model.save_weights`, or a Hugging Face checkpoint
        directory (:mod:`adapters.local.hf`). Adapters on the MLP and attention projections of every
        layer (``train_mlp``, ``train_attn``) and on the output layer (``train_unembed``), as the SDK's
        flags of the same names (:func:`adapters.local.lora.targets`).
        """

        def work() -> LocalTrainingClient:
            if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
                raise ValueError(f"rank must be an int >= 1, got {rank!r}")
            chosen = lo.targets(train_attn=train_attn, train_mlp=train_mlp, train_unembed=train_unembed)
            return self._new(base_model, rank, chosen)

        return _run(work)

    def create_full_training_client(self, base_model: str) -> CompletedFuture[LocalTrainingClient]:
        """A fresh full fine-tuning run (every weight trained). Not in the SDK."""
        return _run(lambda: self._new(base_model, 0))

    def create_training_client_from_state_with_optimizer(
        self, path: str
    ) -> CompletedFuture[LocalTrainingClient]:
        """Resumes a run saved by ``save_state``: weights, LoRA and optimizer state, bit for bit."""

        def work() -> LocalTrainingClient:
            state = st.read_state(path)
            state = state._replace(cfg=self._computing(state.cfg))
            return LocalTrainingClient(self, state, name=f"run{next(self._clients)}")

        return _run(work)

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        *,
        record_stability_info: bool = False,
    ) -> CompletedFuture[LocalSamplingClient]:
        """A sampler over saved weights (``model_path``) or a base model's initial weights (its samples
        recorded for ``stable_reinforce`` with ``record_stability_info``)."""

        def work() -> LocalSamplingClient:
            if (model_path is None) == (base_model is None):
                raise ValueError("give exactly one of model_path and base_model")
            if model_path is not None:
                cfg, params, base = hf.load_weights_file(model_path)
            else:
                assert base_model is not None
                (cfg, params), base = _resolve_base(base_model, self.seed), base_model
            name = f"sampler{next(self._clients)}"
            tokenizer = hf.tokenizer_for(base)
            recorded = self.recorded if record_stability_info else None
            return LocalSamplingClient(
                self._computing(cfg),
                params,
                seed=self.seed,
                name=name,
                tokenizer=tokenizer,
                recorded=recorded,
            )

        return _run(work)
