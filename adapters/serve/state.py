"""The core of ``debate-kernel serve``: Tinker API requests mapped onto the local training service.

No HTTP, no threads and no event loop here: each method takes one decoded SDK request type and returns
an SDK response type, or (for the calls the SDK answers with a future) a :class:`Job` whose ``work``
the shell (:mod:`adapters.serve.app`) runs later, in submission order, and whose result it hands back
when the SDK polls ``retrieve_future``. A request the core cannot take raises :class:`ServeError`,
which the shell sends as a 4xx; an exception raised by ``work`` becomes the future's
``RequestFailedResponse``.

Every training run and every sampling session gets its own service of the served model's engine
(:mod:`adapters.serve.engine`: the local JAX service, or the in-repo fake) with the server's seed, so a
run on the server computes exactly what a fresh in-process service computes for the same calls (LoRA
initialisation, sampling streams), whatever else the server is doing.

Paths: ``tinker://RUN/weights/NAME`` (``save_state``) is ``ROOT/runs/RUN/states/NAME.safetensors`` and
``tinker://RUN/sampler_weights/NAME`` (``save_weights_for_sampler``) is
``ROOT/runs/RUN/weights/NAME.safetensors``, RUN being the model id (``.json`` for the fake engine).
"""

from __future__ import annotations

import inspect
import itertools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from tinker import types
from tinker.types.get_server_capabilities_response import SupportedModel

from adapters.futures import CompletedFuture
from adapters.serve.engine import EngineSampler, EngineService, EngineTrainer, engine
from adapters.tinker.contract import inflight_refusal
from adapters.tinker.provenance import prompt_advantage_refusal, provenance_refusal, unrecorded_refusal

__all__ = ["LOSSES", "Job", "ServeCore", "ServeError", "failure"]

LOSSES = ("cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce")
"""The built-in losses the local service computes (``forward_backward``'s ``loss_fn``); ``stable_reinforce``
is a stand-in (:data:`STAND_INS`)."""
STAND_INS: dict[str, types.LossFnType] = {"stable_reinforce": "importance_sampling"}
"""Losses whose objective Tinker does not publish, and the loss the engine computes in their place, once
every datum's provenance spans name sequences sampled here with ``record_stability_info``; the response
carries ``loss/stand_in:max = 1`` (docs/training.md, "stable_reinforce")."""

_KINDS = {"weights": "states", "sampler_weights": "weights"}
"""tinker:// path segment -> the local service's folder under the run's root."""

Result = Any
"""What a job's work returns: an SDK response type (pydantic model, or the ``SampleResponse`` and
``ForwardBackwardOutput`` dataclasses the shell sends as protobuf)."""


class ServeError(Exception):
    """A request the server refuses before any work: sent as an HTTP error the SDK raises.

    Args:
        message: what is wrong, for the user.
        status: the HTTP status (400 a bad or unsupported request, 404 an unknown id, 410 a finished
            session).
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


class Job(NamedTuple):
    """A request answered with a future: the promise sent at once, the work run later.

    ``batch``: jobs with the same key that wait together may run together, each through ``together``
    (a coroutine doing what ``work`` does), in one event loop: concurrent samples of one sampler then
    share the local service's batched call (:class:`~adapters.local.service.LocalSamplingClient`), which
    numbers and seeds each request as one by one. ``rows``: the rows the job samples. None: the job runs
    alone, through ``work``.
    """

    future: types.UntypedAPIFuture
    work: Callable[[], Result]
    batch: str | None = None
    together: Callable[[], Awaitable[Result]] | None = None
    rows: int = 1


def failure(exc: BaseException) -> types.RequestFailedResponse:
    """The ``RequestFailedResponse`` of a job that raised ``exc``: a user error for bad input
    (ValueError, TypeError, KeyError, :class:`ServeError`, a missing file), a server error otherwise.

    Examples:
        >>> failure(ValueError("rank must be >= 1")).category.value
        'user'
    """
    user = isinstance(exc, ValueError | TypeError | KeyError | ServeError | FileNotFoundError)
    category = types.RequestErrorCategory.User if user else types.RequestErrorCategory.Server
    return types.RequestFailedResponse(error=f"{type(exc).__name__}: {exc}", category=category)


@dataclass
class _Run:
    session_id: str
    service: EngineService
    client: EngineTrainer


@dataclass
class _Sampler:
    client: EngineSampler
    base_model: str
    model_path: str | None


def _sequence_ids(sampler_id: str, seq_id: int | None, n: int) -> list[str]:
    return [f"{sampler_id}:{seq_id}:{j}" for j in range(n)]


def _checked_name(name: str | None) -> str:
    """A checkpoint name: a plain file name (no separators, not starting with '.')."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ServeError(
            f"checkpoint names must be plain file names (no '/', not starting with '.'), got {name!r}"
        )
    return name


def _prompt_logprobs(values: list[float | None], last_n: int | None) -> np.ndarray:
    """Prompt logprobs as float32 with NaN where there is none (the first token, and before the last
    ``last_n`` when given)."""
    out = np.asarray([np.nan if v is None else v for v in values], np.float32)
    if last_n is not None:
        out[: out.size - last_n] = np.nan
    return out


def _check_sample_request(req: types.SampleRequest) -> None:
    """Refuses the sampling options the local sampler does not have."""
    unsupported = {
        "topk_prompt_logprobs": req.topk_prompt_logprobs > 0,
        "topk_sample_logprobs": req.topk_sample_logprobs > 0,
        "target_prompt_logprobs": req.target_prompt_logprobs is not None,
        "prompt_alt_tokens_k": req.prompt_alt_tokens_k > 0,
    }
    named = [k for k, v in unsupported.items() if v]
    if named:
        raise ServeError(f"debate-kernel serve does not support sampling with {', '.join(named)}")
    if req.sampling_session_id is None:
        raise ServeError("sample requests must name a sampling_session_id (create a sampling client first)")


class ServeCore:
    """Sessions, training runs, samplers and checkpoints of one ``debate-kernel serve``.

    Args:
        model: the model served: a size of :data:`adapters.local.model.SIZES`, a ``.safetensors``
            weights file, or ``fake`` (:func:`adapters.serve.engine.engine`).
        root: the folder runs, checkpoints and sampler weights are written under.
        seed: the seed of every run's and sampler's service.
        tokenizer_id: what ``get_info`` reports as the tokenizer (see :mod:`adapters.serve.tokenizer`).
        served_names: other base-model names that mean ``model`` (keyword; default none), e.g. the hub
            name a third-party recipe sends: accepted wherever a base model is named, and listed by
            ``get_server_capabilities``.
        compute_dtype: the local service's matrix products, ``"float32"`` or ``"bfloat16"`` (for GPUs;
            :data:`adapters.local.model.COMPUTE_DTYPES`).

    Raises:
        ValueError: if ``model`` names no engine's model, or a served name is empty.
    """

    def __init__(
        self,
        *,
        model: str,
        root: Path,
        seed: int = 0,
        tokenizer_id: str | None = None,
        served_names: Sequence[str] = (),
        compute_dtype: str = "float32",
    ) -> None:
        self.engine = engine(model, compute_dtype)
        if not all(isinstance(name, str) and name for name in served_names):
            raise ValueError(f"served_names must be non-empty strings, got {list(served_names)!r}")
        self.model, self.root, self.seed, self.tokenizer_id = model, root, seed, tokenizer_id
        self.served_names = tuple(dict.fromkeys(name for name in served_names if name != model))
        self._sessions: dict[str, bool] = {}  # session id -> still live
        self._runs: dict[str, _Run] = {}
        self._samplers: dict[str, _Sampler] = {}
        self._recorded: set[str] = set()  # sequence ids sampled with record_stability_info
        self._requests = itertools.count()

    # --- answered at once -------------------------------------------------------------------------

    def client_config(self) -> types.ClientConfigResponse:
        """The SDK's feature flags for this server: API-key auth, the SDK's default pyqwest transport
        (through httpx's own transport and pool the client spent 4.8-5.0 CPU s on a shortened default run
        of ``benchmarks local --only paths``, through pyqwest 2.6-2.9 s), uncompressed protobuf,
        per-request ``retrieve_future`` polling and client-side custom losses."""
        return types.ClientConfigResponse(
            pjwt_auth_enabled=False,
            use_pyqwest_transport=True,
            proto_compress_fwdbwd=False,
            sample_use_retrieve_futures=False,
            custom_loss_server_side=False,
            sample_join_sampling_session=False,
        )

    def capabilities(self) -> types.GetServerCapabilitiesResponse:
        """The one model served, trainable and sampleable, under its name and each served name."""
        models = [
            SupportedModel(
                model_name=name, max_context_length=self.engine.max_seq_len, trainable=True, sampleable=True
            )
            for name in (self.model, *self.served_names)
        ]
        return types.GetServerCapabilitiesResponse(supported_models=models)

    def create_session(self, req: types.CreateSessionRequest) -> types.CreateSessionResponse:
        """A new session id (unique across restarts over the same root)."""
        session_id = f"session-{uuid.uuid4().hex[:12]}"
        self._sessions[session_id] = True
        return types.CreateSessionResponse(session_id=session_id)

    def _live_session(self, session_id: str) -> None:
        if session_id not in self._sessions:
            raise ServeError(f"unknown session {session_id!r}", status=404)
        if not self._sessions[session_id]:
            raise ServeError(f"session {session_id!r} has finished", status=410)

    def heartbeat(self, req: types.SessionHeartbeatRequest) -> types.SessionHeartbeatResponse:
        """Acknowledges a live session's heartbeat (410 once the session has finished)."""
        self._live_session(req.session_id)
        return types.SessionHeartbeatResponse()

    def finish_session(self, session_id: str) -> None:
        """Marks a session finished (``ServiceClient.close``) and frees its training runs and samplers
        (their adapter slots: weights and optimizer state; the SDK 0.38 has no call that frees one
        training client); their saved checkpoints stay readable."""
        self._live_session(session_id)
        self._sessions[session_id] = False
        for model_id in [k for k, run in list(self._runs.items()) if run.session_id == session_id]:
            self._runs.pop(model_id, None)
        for sampler_id in [k for k in list(self._samplers) if k.startswith(f"{session_id}:")]:
            self._samplers.pop(sampler_id, None)

    def _run(self, model_id: str) -> _Run:
        run = self._runs.get(model_id)
        if run is None:
            raise ServeError(f"unknown model_id {model_id!r}", status=404)
        return run

    def get_info(self, req: types.GetInfoRequest) -> types.GetInfoResponse:
        """A run's base model, LoRA rank and tokenizer."""
        run = self._run(req.model_id)
        base = run.client.base_model
        return types.GetInfoResponse(
            type="get_info",
            model_id=req.model_id,
            model_data=types.ModelData(
                arch="debate-kernel-local", model_name=base, tokenizer_id=self.tokenizer_id
            ),
            is_lora=run.client.lora_rank > 0,
            lora_rank=run.client.lora_rank or None,
            model_name=base,
        )

    def get_sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        """A sampling session's base model and weights path."""
        sampler = self._samplers.get(sampler_id)
        if sampler is None:
            raise ServeError(f"unknown sampler {sampler_id!r}", status=404)
        return types.GetSamplerResponse(
            sampler_id=sampler_id, base_model=sampler.base_model, model_path=sampler.model_path
        )

    def _checkpoints(self, run_dir: Path) -> list[types.Checkpoint]:
        out = []
        for segment, folder in _KINDS.items():
            for file in sorted((run_dir / folder).glob(f"*{self.engine.suffix}")):
                stat = file.stat()
                out.append(
                    types.Checkpoint(
                        checkpoint_id=f"{segment}/{file.stem}",
                        checkpoint_type="training" if segment == "weights" else "sampler",
                        time=datetime.fromtimestamp(stat.st_mtime, UTC),
                        tinker_path=f"tinker://{run_dir.name}/{segment}/{file.stem}",
                        size_bytes=stat.st_size,
                    )
                )
        return out

    def list_checkpoints(self, model_id: str) -> types.CheckpointsListResponse:
        """A run's saved states (``training``) and sampler weights (``sampler``), oldest name first."""
        run_dir = self._run_dir(model_id)
        if model_id not in self._runs and not run_dir.is_dir():
            raise ServeError(f"unknown training run {model_id!r}", status=404)
        return types.CheckpointsListResponse(checkpoints=self._checkpoints(run_dir))

    def list_user_checkpoints(self, limit: int, offset: int) -> types.CheckpointsListResponse:
        """Every run's checkpoints under the root (``RestClient.list_user_checkpoints``)."""
        runs = sorted(p for p in (self.root / "runs").glob("*") if p.is_dir())
        every = [c for run_dir in runs for c in self._checkpoints(run_dir)]
        return types.CheckpointsListResponse(checkpoints=every[offset : offset + limit])

    def create_sampling_session(
        self, req: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """A sampler over saved sampler weights (``model_path``) or the served model (``base_model``).

        Does the loading work itself: the shell runs it after every job submitted before it.
        """
        self._live_session(req.session_id)
        service = self.engine.service(self.seed, self.root)
        if req.model_path is not None:
            path, run_id = self.resolve(req.model_path, kind="sampler_weights")
            client = service.create_sampling_client(model_path=str(path)).result()
            run = self._runs.get(run_id)
            base = run.client.base_model if run is not None else self.model
        else:
            base = self._check_model(req.base_model)
            client = service.create_sampling_client(base_model=base).result()
        sampler_id = f"{req.session_id}:sample:{req.sampling_session_seq_id}"
        self._samplers[sampler_id] = _Sampler(client, base, req.model_path)
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    # --- answered with a future -------------------------------------------------------------------

    def _job(self, work: Callable[[], Result], *, model_id: str | None = None, **extra: Any) -> Job:
        request_id = f"req-{next(self._requests)}"
        return Job(types.UntypedAPIFuture(request_id=request_id, model_id=model_id, **extra), work)

    def _check_model(self, base_model: str | None) -> str:
        """The served model for ``base_model``: its own name or one of its served names."""
        if base_model != self.model and base_model not in self.served_names:
            names = ", ".join(repr(n) for n in (self.model, *self.served_names))
            raise ServeError(f"unknown base model {base_model!r}: this server serves {names}")
        return self.model

    def _run_dir(self, model_id: str) -> Path:
        if not model_id or "/" in model_id or "\\" in model_id or model_id.startswith("."):
            raise ServeError(f"invalid model_id {model_id!r}")
        return self.root / "runs" / model_id

    def _new_run(self, session_id: str, model_seq_id: int) -> tuple[str, EngineService]:
        self._live_session(session_id)
        model_id = f"{session_id}:train:{model_seq_id}"
        if model_id in self._runs:
            raise ServeError(f"model {model_id!r} exists already")
        return model_id, self.engine.service(self.seed, self._run_dir(model_id))

    def resolve(self, uri: str, *, kind: str | None = None) -> tuple[Path, str]:
        """The local file of a ``tinker://RUN/weights/NAME`` or ``tinker://RUN/sampler_weights/NAME``.

        Args:
            uri: the SDK's checkpoint path.
            kind: the path segment the caller needs (``"weights"`` for a training state,
                ``"sampler_weights"`` for sampler weights), or None for either.

        Returns:
            The file and the run id.

        Raises:
            ServeError: if the path is malformed, of the wrong kind, or names no saved file.
        """
        try:
            parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(uri)
        except ValueError:
            raise ServeError(
                f"invalid checkpoint path {uri!r}: expected tinker://RUN/weights/NAME or "
                "tinker://RUN/sampler_weights/NAME"
            ) from None
        segment, name = parsed.checkpoint_id.split("/", 1)
        if kind is not None and segment != kind:
            want = "a training state (tinker://RUN/weights/NAME, from save_state)"
            if kind == "sampler_weights":
                want = "sampler weights (tinker://RUN/sampler_weights/NAME, from save_weights_for_sampler)"
            raise ServeError(f"checkpoint path {uri!r} is not {want}")
        if not name or name.startswith("."):
            raise ServeError(f"invalid checkpoint name in {uri!r}")
        path = self._run_dir(parsed.training_run_id) / _KINDS[segment] / f"{name}{self.engine.suffix}"
        if not path.is_file():
            raise ServeError(f"no checkpoint at {uri!r}", status=404)
        return path, parsed.training_run_id

    def create_model(self, req: types.CreateModelRequest) -> Job:
        """A fresh LoRA run of the served model (``create_lora_training_client``)."""
        base = self._check_model(req.base_model)
        lora = req.lora_config
        if lora is None:
            raise ServeError("create_model needs a lora_config (full fine-tuning is not served)")
        flags = {
            "train_mlp": lora.train_mlp,
            "train_attn": lora.train_attn,
            "train_unembed": lora.train_unembed,
        }
        if lora.rank == 0 and not all(flags.values()):
            raise ServeError(
                "full fine-tuning (rank 0) trains every weight: train_mlp, train_attn and "
                "train_unembed must stay True"
            )
        if not isinstance(req.optimizer_config, types.AdamOptimizerConfig):
            raise ServeError("debate-kernel serve only has the Adam optimizer")
        model_id, service = self._new_run(req.session_id, req.model_seq_id)

        def work() -> types.CreateModelResponse:
            if lora.rank == 0:  # full fine-tuning: the local models start from random weights
                client = service.create_full_training_client(base).result()
            else:
                client = service.create_lora_training_client(base, rank=lora.rank, **flags).result()
            self._runs[model_id] = _Run(req.session_id, service, client)
            return types.CreateModelResponse(model_id=model_id)

        return self._job(work, model_id=model_id)

    def load_weights(self, req: types.LoadWeightsRequest) -> Job:
        """Loads a saved state: into a new run (``create_training_client_from_state[_with_optimizer]``,
        addressed by session id and model sequence id) or into an existing one (``load_state``)."""
        path, _ = self.resolve(req.path, kind="weights")
        if req.session_id is not None:
            if req.model_seq_id is None:
                raise ServeError("load_weights with a session_id needs a model_seq_id")
            model_id, service = self._new_run(req.session_id, req.model_seq_id)
            session_id = req.session_id

            def create() -> types.LoadWeightsResponse:
                client = service.create_training_client_from_state_with_optimizer(str(path)).result()
                if not req.optimizer:
                    client.load_state(str(path)).result()  # the same weights, a fresh optimizer
                self._runs[model_id] = _Run(session_id, service, client)
                return types.LoadWeightsResponse(path=req.path, model_id=model_id)

            return self._job(create, model_id=model_id)
        if req.model_id is None:
            raise ServeError("load_weights needs a model_id or a session_id")
        run = self._run(req.model_id)

        def load() -> types.LoadWeightsResponse:
            loader = run.client.load_state_with_optimizer if req.optimizer else run.client.load_state
            loader(str(path)).result()
            return types.LoadWeightsResponse(path=req.path, model_id=req.model_id)

        return self._job(load, model_id=req.model_id)

    def forward_backward(self, req: types.ForwardBackwardRequest, *, forward_only: bool) -> Job:
        """A forward (``forward_only``) or forward/backward pass with one of :data:`LOSSES`."""
        run = self._run(req.model_id)
        spec = req.forward_backward_input
        if spec.loss_fn not in LOSSES:
            raise ServeError(
                f"unsupported loss_fn {spec.loss_fn!r}: debate-kernel serve computes {', '.join(LOSSES)} "
                "(custom losses run on the client: forward_backward_custom with a callable)"
            )
        call = run.client.forward if forward_only else run.client.forward_backward
        stand_in = STAND_INS.get(spec.loss_fn)
        if stand_in is None:
            return self._job(
                lambda: call(list(spec.data), spec.loss_fn, spec.loss_fn_config).result(),
                model_id=req.model_id,
            )

        def work() -> types.ForwardBackwardOutput:  # refused through the future, as Tinker does
            self._check_provenance(spec.data, spec.loss_fn)
            if spec.loss_fn_config:  # e.g. Tinker's kl_coeff, which weighs a term it does not publish
                raise ServeError(
                    f"{spec.loss_fn} takes no loss_fn_config here (got {sorted(spec.loss_fn_config)}): "
                    f"debate-kernel serve computes a stand-in, {stand_in}"
                )
            out: types.ForwardBackwardOutput = call(list(spec.data), stand_in, spec.loss_fn_config).result()
            out.metrics["loss/stand_in:max"] = 1.0
            return out

        return self._job(work, model_id=req.model_id)

    def _check_provenance(self, data: Sequence[types.Datum], loss_fn: str) -> None:
        """Refuses (a user error, as Tinker does) a datum without provenance spans, one naming a sequence
        that no sampler here recorded with ``record_stability_info``, or one with a nonzero advantage on a
        prompt token."""
        refusal = (
            provenance_refusal(data, loss_fn)
            or unrecorded_refusal(data, loss_fn, self._recorded, "this server")
            or prompt_advantage_refusal(data, loss_fn)
        )
        if refusal is not None:
            raise ServeError(refusal)

    def optim_step(self, req: types.OptimStepRequest) -> Job:
        """One AdamW step on the accumulated gradients."""
        run = self._run(req.model_id)
        if not isinstance(req.optim_params, types.AdamParams):
            raise ServeError(
                f"debate-kernel serve only steps with AdamParams, got {type(req.optim_params).__name__}"
            )
        params = req.optim_params
        return self._job(lambda: run.client.optim_step(params).result(), model_id=req.model_id)

    def save_weights(self, req: types.SaveWeightsRequest) -> Job:
        """``save_state``: weights, LoRA and optimizer state to ``tinker://RUN/weights/NAME``."""
        run = self._run(req.model_id)
        name = _checked_name(req.path)
        uri = f"tinker://{req.model_id}/weights/{name}"
        target = self._run_dir(req.model_id) / "states" / f"{name}{self.engine.suffix}"

        def work() -> types.SaveWeightsResponse:
            if target.exists() and not req.overwrite:
                raise ValueError(f"checkpoint {uri!r} exists already (pass overwrite=True to replace it)")
            run.client.save_state(name).result()
            return types.SaveWeightsResponse(path=uri)

        return self._job(work, model_id=req.model_id)

    def save_weights_for_sampler(self, req: types.SaveWeightsForSamplerRequest) -> Job:
        """Sampler weights under a name (``save_weights_for_sampler``), or a snapshot or inflight sampler
        (``kind``, where the trainer makes them: the local service's) with a new sampling session
        (``save_weights_and_get_sampling_client``)."""
        run = self._run(req.model_id)
        if req.path is not None:
            name = _checked_name(req.path)

            def save() -> types.SaveWeightsForSamplerResponseInternal:
                run.client.save_weights_for_sampler(name).result()
                uri = f"tinker://{req.model_id}/sampler_weights/{name}"
                return types.SaveWeightsForSamplerResponseInternal(path=uri)

            return self._job(save, model_id=req.model_id)
        kind = req.kind
        if kind not in ("snapshot", "inflight"):
            raise ServeError(f"debate-kernel serve makes snapshot and inflight samplers, not {kind!r}")
        if kind == "inflight" and inflight_refusal(run.client) is not None:
            raise ServeError(
                f"this model's trainer makes snapshot samplers only: {inflight_refusal(run.client)}"
            )
        sampler_id = f"{run.session_id}:sample:{req.sampling_session_seq_id}"

        def snapshot() -> types.SaveWeightsForSamplerResponseInternal:
            save: Any = run.client.save_weights_and_get_sampling_client  # ``kind``: checked above
            client = (save(kind="inflight") if kind == "inflight" else save()).result()
            self._samplers[sampler_id] = _Sampler(client, run.client.base_model, None)
            return types.SaveWeightsForSamplerResponseInternal(sampling_session_id=sampler_id)

        return self._job(snapshot, model_id=req.model_id)

    def asample(self, req: types.SampleRequest) -> Job:
        """Samples from a sampling session; ``prompt_logprobs`` also scores the prompt
        (``compute_logprobs`` is a one-token sample with them)."""
        _check_sample_request(req)
        sampler_id = req.sampling_session_id or ""

        def work() -> types.SampleResponse:
            sampler = self._samplers.get(sampler_id)
            if sampler is None:
                raise ValueError(f"unknown sampling session {sampler_id!r}")
            pending = sampler.client.sample(req.prompt, req.num_samples, req.sampling_params)
            assert isinstance(pending, CompletedFuture), "outside an event loop the sampler runs at once"
            out: types.SampleResponse = pending.result()
            if not req.prompt_logprobs:
                return out
            lps = sampler.client.compute_logprobs(req.prompt).result()
            return types.SampleResponse(
                sequences=out.sequences, prompt_logprobs_np=_prompt_logprobs(lps, req.prompt_logprobs_last_n)
            )

        ids = _sequence_ids(sampler_id, req.seq_id, req.num_samples)
        if req.record_stability_info:  # ids fixed at submission, as the SDK reads them from the future
            self._recorded.update(ids)
        job = self._job(work, sample_sequence_ids=ids)
        if req.prompt_logprobs:  # scored on its own (compute_logprobs has no batched call)
            return job

        async def together() -> types.SampleResponse:
            sampler = self._samplers.get(sampler_id)
            if sampler is None:
                raise ValueError(f"unknown sampling session {sampler_id!r}")
            pending: Any = sampler.client.sample(req.prompt, req.num_samples, req.sampling_params)
            out: types.SampleResponse = await pending if inspect.isawaitable(pending) else pending.result()
            return out

        return job._replace(batch=f"sample:{sampler_id}", together=together, rows=req.num_samples)
