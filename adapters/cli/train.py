"""``debate-kernel train``: train debating agents (Tinker, the local service, or the in-repo fake).

Config: ``--config FILE`` (TOML, keys of :class:`adapters.training.config.TrainConfig`), then flags. With
``--resume RUN_DIR`` the run's own config (``run.json``; a key it lacks, added after the run started, takes
its default) is the base, under the file's keys and the flags, which must still agree with the run's
outside the keys a resume may change. Service, always through the ``tinker`` SDK: ``TINKER_API_KEY`` set
and ``--model`` not a local model (a name of :data:`LOCAL_MODELS`, or a Hugging Face checkpoint directory:
``config.json``, safetensors weights, ``tokenizer.json``; dense Llama 3.x or Qwen3) →
``tinker.ServiceClient()`` (``TINKER_BASE_URL`` for a
self-hosted server); otherwise a ``debate-kernel serve`` of the local JAX service (:mod:`adapters.local`)
that the run starts on a loopback port and stops at its end. ``--service inprocess`` (hidden) runs the
local service in this process, ``--service fake`` (hidden, for tests) the in-repo fake, persisted under
``RUN_DIR/service``. ``--steps N`` is the run's N optimizer steps in all, its warm start included (the
config key ``steps`` counts the RL steps after the warm start); ``--steps 0``, or fewer steps than the warm
start, is refused. On a terminal, and without ``--quiet``, progress bars on stderr with their rate and
time left (:class:`adapters.cli._progress.TrainProgress`): the warm start and RL in steps, naming the
step of the run and of its phase (``step 83/110  RL 3/30``), and each evaluation in debates; nothing when
stderr is not a terminal. ``--log wandb``, ``--log tensorboard``: the metrics also go to W&B or
TensorBoard (:mod:`adapters.training.loggers`).

On the local service's built-in models the keys of :data:`LOCAL_PRESET` replace the config defaults (a
config file and flags still override them; a Hugging Face checkpoint keeps the defaults): with no flags
at all, ``train`` runs warm start, evaluation, RL on self-play debates and a final evaluation on
questions of the shipped ``sign`` set it never trains on, sized for about 10 minutes on 2 CPU cores.
JAX's persistent compilation cache (``$XDG_CACHE_HOME/debate-kernel/jax``, or ``~/.cache/…``; set
``DEBATE_KERNEL_JAX_CACHE`` to another folder, or to an empty string to turn it off) lets later runs
skip compilation. JAX's CPU backend is split into two devices (:func:`adapters.local.split_cpu`), over
which training calls split their rows, and every thread allocates from glibc's main arena
(:func:`adapters.tinker.memory.one_malloc_arena`): in the server's process, or in this one with
``--service inprocess``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

from adapters._gc import fewer_gc_passes
from adapters.cli._progress import TrainProgress, evaluation_debates
from adapters.local_models import LOCAL_MODELS, is_checkpoint_dir, served_locally, unserved
from adapters.tinker.memory import one_malloc_arena
from adapters.training.checkpoint import RUN_FILE, CheckpointError, check_new_run_dir, read_run
from adapters.training.config import DTYPES, TrainConfig, key_help, load_config
from adapters.training.dataset import DatasetError

__all__ = ["EXIT_NOTHING_TO_TRAIN", "EXIT_SERVICE", "LOCAL_MODELS", "add_parser", "run"]

RENDERERS = ("auto", "byte", "chat")
"""``--renderer`` choices, the values of the config key ``renderer``
(:func:`adapters.tinker.renderers.choose_renderer`)."""


LOCAL_PRESET: dict[str, Any] = {
    "model": "tiny",
    "lora_rank": 0,
    "dataset": "sign",
    "eval_split": 0.25,
    "observation": "compact",
    "history_rounds": 1,
    "warm_start_steps": 150,
    "warm_start_answers": "reference",
    "warm_start_learning_rate": 1e-2,
    "warm_start_lr_decay": 0.1,
    "steps": 20,
    "batch_size": 8,
    "group_size": 4,
    "num_agents": 3,
    "max_rounds": 1,
    "learning_rate": 2e-4,
    "credit": "solution",
    "negative_advantages": "zero",
    "correctness_weight": 2.0,
    "eval_every": 0,
    "eval_questions": 48,
    "eval_repeats": 1,
    "save_every": 0,
    "max_tokens": 256,
}
"""The defaults of a run on the local service (``train`` with no flags), sized for under 10 minutes on 2 CPU
cores from a cold compilation cache: the tiny model trained in full (its weights start random, and LoRA alone
learns the format slowly); the shipped ``sign`` set ("Is -395 positive or negative?", 400 questions, half of
each answer) with a quarter held out (``eval_split``: 300 train, 100 never trained on, of which evaluations
play the first 48, 24 of each answer: chance and the majority-answer baseline 0.5); the compact observation (a
prompt of a few hundred bytes); a warm start of 150 steps on well-formed turns carrying the reference answers,
which teaches the format and the rule (held-out ``eval/correct`` 0.84 ± 0.04 where RL starts; 110 steps gave
0.66-0.76 ± 0.05, about 30 s sooner); RL with four debates per question, a correctness reward, the advantage
on the ``<solution>`` tokens only and negative advantages set to 0, at 2e-4, for 20 steps; evaluated where
RL starts and at the end only (``eval_every = 0``), 144 debates each (48 held-out questions, the policy in
each of the 3 roles once), with ``eval/correct_se``, the standard error by question (≈ 0.035 here). What RL
adds is not measurable: 0.84 → 0.85 ± 0.03 in this run; from a 110-step warm start 30 RL steps gave 0.74 ±
0.04 → 0.76 ± 0.04 (solution credit, 2e-4), 0.77 → 0.74 ± 0.04 (5e-4), and with whole-turn credit 0.77 → 0.53
± 0.04 (the format decayed, ``eval/parse_ok`` 0.92 → 0.69); from a 150-step warm start 0.92 → 0.93 at 2e-4,
and at 1e-3 the byte format broke (0.92 → 0.48). The held-out rise is the supervised warm start's. Measured
(``python -m benchmarks learning``, JAX's compilation cache empty, the shared 2-core machine): see
docs/training.md, "The local service: the default run".
``max_tokens``: a well-formed short turn of this set is 171 to 187 bytes (agents 0 to 2; the later ones
list comparisons), and a turn cut before its closing tags fails to parse."""

EXIT_SERVICE: Final = 3
"""``train``'s exit status when a service call failed for good (retries ran out, a permanent error, a
reply that failed its check, a save that failed its read-back): the run directory stays resumable."""
EXIT_NOTHING_TO_TRAIN: Final = 4
"""``train``'s exit status when ``max_empty_steps`` consecutive RL steps had no datum."""


def _deadlines(text: str) -> dict[str, float]:
    """``--deadlines KIND=SECONDS,...`` (:func:`adapters.tinker.boundary.parse_deadlines`)."""
    from adapters.tinker.boundary import parse_deadlines

    try:
        return parse_deadlines(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _on_off(text: str) -> bool:
    """A boolean flag's value: true / false (also yes / no, on / off, 1 / 0)."""
    value = dict.fromkeys(("true", "yes", "on", "1"), True) | dict.fromkeys(
        ("false", "no", "off", "0"), False
    )
    try:
        return value[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def _dtype(text: str) -> str:
    """``--dtype``'s value: one of :data:`adapters.training.config.DTYPES`."""
    if text not in DTYPES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(DTYPES)}, got {text!r}")
    return text


_FLAGS: dict[str, Any] = {
    "steps": int,
    "save_every": int,
    "eval_every": int,
    "model": str,
    "dtype": _dtype,
    "train_attn": _on_off,
    "train_mlp": _on_off,
    "train_unembed": _on_off,
    "seed": int,
    "batch_size": int,
    "group_size": int,
    "num_agents": int,
    "max_rounds": int,
    "learning_rate": float,
    "num_substeps": int,
    "warm_start_steps": int,
    "warm_start_learning_rate": float,
    "warm_start_lr_decay": float,
    "dataset": str,
    "estimator": str,
    "loss_fn": str,
    "max_steps_off_policy": int,
    "stream_minibatches": int,
    "stream_order": str,
    "max_tokens": int,
    "correctness_weight": float,
    "kl_penalty_coef": float,
    "eval_questions": int,
    "eval_repeats": int,
    "credit": str,
    "negative_advantages": str,
    "sample_timeout_s": float,
    "deadlines": _deadlines,
    "retry_attempts": int,
    "retry_max_s": float,
    "max_empty_steps": int,
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``train``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "train",
        help="train debating agents with RL (Tinker or the local service)",
        description="Train debating agents: rollouts, pairwise rewards, advantages, pipelined optim steps.",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML file of config keys")
    p.add_argument(
        "--out", metavar="RUN_DIR", help="the run directory (metrics.jsonl, transcripts, checkpoints)"
    )
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    docs, defaults = key_help(), TrainConfig()
    docs["steps"] = STEPS_HELP
    for key, kind in _FLAGS.items():
        default, local = getattr(defaults, key), LOCAL_PRESET.get(key)
        if key == "steps":  # the flag counts the warm start too
            default, local = defaults.total_steps, TrainConfig.from_mapping(LOCAL_PRESET).total_steps
        p.add_argument(
            "--" + key.replace("_", "-"),
            type=kind,
            dest=key,
            default=None,
            metavar=key.upper(),
            help=_flag_help(docs[key], default, local),
        )
    p.add_argument(
        "--renderer",
        choices=RENDERERS,
        default=None,
        help="the chat format: auto (the tokenizer's chat template when it has one, the byte renderer for "
        "the byte tokenizer), byte or chat; overrides the config key renderer (default 'auto')",
    )
    p.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="LOGGER",
        help="also log the metrics, the config and the evaluation tables to wandb (Weights & Biases; "
        "WANDB_MODE=offline for local files) or tensorboard (RUN_DIR/tensorboard); several: --log "
        "wandb,tensorboard or --log twice. A resumed run continues the same W&B run and TensorBoard steps. "
        "Needs the extra of the same name",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bars (they are drawn on a terminal only: a warm-start bar, an RL bar with the "
        "step's figures, and a bar of each evaluation's debates)",
    )
    p.add_argument(
        "--skip-checks",
        action="store_true",
        help="skip the service's contract check before step 0 (frozen sampler snapshots, logprob lengths, "
        "sample counts, stop sequences, vocabulary)",
    )
    # auto: Tinker with TINKER_API_KEY, else `debate-kernel serve` through the SDK; inprocess: the local
    # service in this process (no HTTP); fake: the in-repo fake (tests)
    p.add_argument(
        "--service",
        choices=("auto", "tinker", "local", "inprocess", "fake"),
        default="auto",
        help=argparse.SUPPRESS,
    )
    p.set_defaults(func=run)
    return p


def _flag_help(doc: str, default: Any, local: Any) -> str:
    """A flag's help: the key's description and its defaults (the local service's where they differ)."""
    text = doc.replace("``", "").replace("%", "%%")
    if local is None or local == default:
        return f"{text} (default {default!r})"
    return f"{text} (default {local!r} on the local service, {default!r} on Tinker)"


STEPS_HELP: Final = (
    "the run's optimizer steps in all, warm start included: RL takes the steps after the warm_start_steps "
    "(the config key steps counts the RL steps alone)."
)
"""``--steps``'s help: unlike the config key ``steps`` (RL steps), the flag counts every step of the run."""


def _config(args: argparse.Namespace) -> TrainConfig:
    config = _plain_config(args)
    if not args.resume and _is_local(args.service, config) and not is_checkpoint_dir(config.model):
        # the local preset (sized for the built-in models) sits under the config file and the flags
        config = _plain_config(args, base=TrainConfig.from_mapping(LOCAL_PRESET))
    if args.steps is not None:
        config = TrainConfig.from_mapping(
            {"steps": _rl_steps(args.steps, config.warm_start_steps)}, base=config
        )
    if not args.resume and config.total_steps == 0:
        raise ValueError(
            "config key steps = 0 and warm_start_steps = 0: the run would train nothing; "
            "pass --steps N, its optimizer steps in all"
        )
    return config


def _rl_steps(total: int, warm_start_steps: int) -> int:
    """The RL steps (the config key ``steps``) of a run of ``total`` optimizer steps (``--steps``) whose
    warm start takes ``warm_start_steps`` of them.

    Raises:
      ValueError: ``total`` is 0 (nothing to train) or below the warm start, saying what to pass.

    Examples:
        >>> _rl_steps(110, 80), _rl_steps(2, 0), _rl_steps(80, 80)
        (30, 2, 0)
        >>> _rl_steps(2, 80)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --steps 2 counts every optimizer step of the run, warm start included, and ...
    """
    warm = f" (its warm start takes {warm_start_steps} of them)" if warm_start_steps else ""
    if total < 1:
        raise ValueError(
            f"--steps {total} trains nothing: pass --steps N >= 1, the run's optimizer steps{warm}"
        )
    if total < warm_start_steps:
        plural = "s" if total > 1 else ""
        raise ValueError(
            f"--steps {total} counts every optimizer step of the run, warm start included, and the warm "
            f"start alone takes {warm_start_steps} (warm_start_steps): pass --steps "
            f"{warm_start_steps + total} for {total} RL step{plural} after it, or --warm-start-steps K "
            f"with K <= {total}"
        )
    return total - warm_start_steps


def _is_local(kind: str, config: TrainConfig) -> bool:
    if kind in ("fake", "tinker"):
        return False
    local_model = config.model in LOCAL_MODELS or is_checkpoint_dir(config.model)
    return kind == "local" or not os.environ.get("TINKER_API_KEY") or local_model


def _check_local_model(local: Any, model: str) -> None:
    """A weights file or checkpoint the local service cannot use is a clear error here, not deep in the
    run (a checkpoint's config, weight files and tokenizer are checked without reading the weights)."""
    if model in LOCAL_MODELS:
        return
    if local.hf.is_checkpoint(model):
        local.hf.check(model)
    else:
        local.model.load_weights(model)


def _plain_config(args: argparse.Namespace, *, base: TrainConfig | None = None) -> TrainConfig:
    """The config of the flags over the ``--config`` file over ``base`` (with ``--resume``: the run's)."""
    # --steps counts the warm start too: _config sets the RL steps once the warm start is known
    flags = (k for k in _FLAGS if k != "steps")
    overrides: dict[str, Any] = {k: getattr(args, k) for k in flags if getattr(args, k) is not None}
    if args.renderer is not None:
        overrides["renderer"] = args.renderer
    if args.resume:
        if args.out and Path(args.out) != Path(args.resume):
            raise ValueError("--out and --resume name different directories")
        overrides["out"] = args.resume
        base = _run_config(Path(args.resume))
    elif args.out:
        overrides["out"] = args.out
    if args.config is not None:
        return load_config(args.config, overrides=overrides, base=base)
    return TrainConfig.from_mapping(overrides, base=base)


def _run_config(run_dir: Path) -> TrainConfig:
    """The config a run was started with (its ``run.json``); a key the file lacks takes its default.

    Raises:
      CheckpointError: not a run directory, or a ``run.json`` that is unreadable or holds a key or value
        this version does not accept (naming the file).
    """
    _, saved = read_run(run_dir)
    try:
        return TrainConfig.from_mapping(saved)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{run_dir / RUN_FILE}: {e}") from None


Session = Callable[[], contextlib.AbstractAsyncContextManager[Any]]
"""Opens a client of the run's service for the contract check (``async with session() as client``)."""


def _service(kind: str, config: TrainConfig, stack: contextlib.ExitStack) -> tuple[Any, Session]:
    """The service client of the run: the in-repo fake; Tinker (``TINKER_API_KEY``, and
    ``TINKER_BASE_URL`` for a self-hosted Tinker-API server, read by the SDK); a ``debate-kernel serve``
    started for the run (stopped at the end of ``stack``; its runs and checkpoints in ``RUN_DIR/service``,
    its log in ``RUN_DIR/serve.log``) through the same SDK; or, with ``--service inprocess``, the local
    service in this process. The SDK's clients are closed at the end of ``stack``.

    Also the session the contract check runs in: through the SDK a session of its own, closed after the
    check (:func:`_own_session`); the in-process services the run's client itself."""
    local_model = config.model in LOCAL_MODELS or is_checkpoint_dir(config.model)
    tinker_run = kind == "tinker" or (kind == "auto" and os.environ.get("TINKER_API_KEY") and not local_model)
    if config.dtype != "float32" and (kind == "fake" or tinker_run):
        raise ValueError(
            f"config key dtype = {config.dtype} sets the local service's matrix products; the "
            f"{'fake' if kind == 'fake' else 'Tinker'} service chooses its own: leave dtype at float32"
        )
    if kind == "fake":
        from adapters.tinker.fake import FakeServiceClient

        fake = FakeServiceClient(seed=config.seed, root=Path(config.out) / "service")
        return fake, _same_client(fake)
    if tinker_run:
        import tinker

        return _closed_at_exit(tinker.ServiceClient(), stack), _own_session(tinker.ServiceClient)
    if not served_locally(config.model):  # before JAX's import: a typo is refused at once
        key = os.environ.get("TINKER_API_KEY")
        raise ValueError(
            unserved(config.model) + ("" if key else " (a Tinker base model needs TINKER_API_KEY set)")
        )
    try:
        local = importlib.import_module("adapters.local")
    except ImportError:
        raise RuntimeError(
            "the local service (adapters.local) is not available in this build; set TINKER_API_KEY and "
            "pass --model NAME of a Tinker base model to train on Tinker"
        ) from None
    model = config.model
    if kind != "inprocess":
        _check_local_model(local, model)  # a file the server cannot use is a clear error here, exit 2
        import tinker

        from adapters.serve.process import API_KEY, ServedClient, ServerError, served

        out = Path(config.out)
        extra = ["--dtype", config.dtype] if config.dtype != "float32" else []  # older servers lack it
        try:
            url = stack.enter_context(
                served(model, root=out / "service", log=out / SERVE_LOG, seed=config.seed, extra=extra)
            )
        except ServerError as e:
            raise RuntimeError(str(e)) from None

        def client() -> Any:
            return ServedClient(tinker.ServiceClient(base_url=url, api_key=API_KEY))

        return _closed_at_exit(client(), stack), _own_session(client)
    local.devices.compilation_cache(0.5)
    one_malloc_arena()  # XLA's threads allocate from glibc's main arena (adapters.tinker.memory)
    local.split_cpu()  # training calls run data-parallel over the cores (before JAX's first computation)
    _check_local_model(local, model)
    inprocess = local.LocalServiceClient(
        seed=config.seed, root=Path(config.out) / "service", compute_dtype=config.dtype
    )
    return inprocess, _same_client(inprocess)


SERVE_LOG = "serve.log"
"""The log of the ``debate-kernel serve`` that a run on the local models trains through, in its directory."""


def _closed_at_exit(client: Any, stack: contextlib.ExitStack) -> Any:
    """``client`` (an SDK ``ServiceClient``), closed at the end of ``stack``: its session ends, whatever
    ended the run (the server frees the run's adapter slots with it)."""
    stack.callback(_close, client, "success")
    return client


def _close(client: Any, status: str) -> None:
    """Closes an SDK ``ServiceClient``'s session (30 s at most; a server already gone has nothing left
    to free)."""
    with contextlib.suppress(Exception):
        client.close(status).result(timeout=30)


def _own_session(make: Callable[[], Any]) -> Session:
    """Opens a client of a session of its own (``make()``) and closes the session when the block ends.

    The tinker SDK 0.38 cannot release one training client (``types.UnloadModelRequest`` exists, but no
    client method or route sends it); closing a session ends everything the session holds. The contract
    check's throwaway training client thus lives in a session of its own, and does not keep an adapter
    slot (``debate-kernel serve``: its weights and optimizer state) for the rest of the run.
    """

    @contextlib.asynccontextmanager
    async def session() -> AsyncIterator[Any]:
        client = await asyncio.to_thread(make)
        status = "errored"
        try:
            yield client
            status = "success"
        finally:
            await asyncio.to_thread(_close, client, status)

    return session


def _same_client(client: Any) -> Session:
    """Opens ``client`` itself (a service in this process: nothing of it outlives its last reference)."""

    @contextlib.asynccontextmanager
    async def session() -> AsyncIterator[Any]:
        yield client

    return session


def _renderer(kind: str, service: Any, config: TrainConfig) -> Any:
    """The run's renderer, chosen before the run directory is made: the local models use the byte
    tokenizer; a Tinker model's tokenizer is the Hugging Face one of its name (what the SDK loads)."""
    import tinker

    from adapters.tinker.renderers import choose_renderer, load_tokenizer
    from adapters.tokenizers import ByteTokenizer

    if is_checkpoint_dir(config.model) and not isinstance(service, tinker.ServiceClient):
        tokenizer: Any = load_tokenizer(config.model)  # a checkpoint on the local service: its own
    elif not isinstance(service, tinker.ServiceClient):  # the local models, the fake: the byte tokenizer
        tokenizer = ByteTokenizer()
    else:
        local = Path(config.model).is_dir()
        try:
            tokenizer = load_tokenizer(config.model) if local else _hub_tokenizer(config.model)
        except (OSError, ValueError) as e:
            raise ValueError(f"model {config.model!r}: cannot load its tokenizer ({e})") from None
    return choose_renderer(kind, tokenizer, model=config.model)


def _hub_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


async def _checked_training(
    config: TrainConfig,
    service: Any,
    renderer: Any,
    *,
    resume: bool,
    check: Session | None,
    question: str,
    progress: Any = None,
) -> Any:
    """The service's contract check in the session ``check`` opens (None: no check; also on resume, so
    that in process the run's client is the service's second either way), then
    :func:`~adapters.training.train.run_training` on ``service``, with ``progress`` as its progress hook
    (the display and the loggers).

    The check asks for what the run will: a training client of the run's ``lora_rank`` (0: full
    fine-tuning), samples of up to ``max_tokens`` tokens, and a probe prompt that is the run's first turn
    (agent 0's observation of ``question``), so that a local service compiles few programs for the check
    alone (the optimizer step is the run's; in process, the sampling program too).
    """
    from adapters.tinker.contract import check_contract, enforce_contract
    from adapters.tinker.renderers import vocab_size_of
    from adapters.training.train import config_boundary, run_training

    if check is not None:
        async with check() as client:
            report = await check_contract(
                client,
                base_model=config.model,
                vocab_size=vocab_size_of(renderer.tokenizer),
                prompt=_first_turn(config, renderer, question),
                rank=config.lora_rank,
                max_tokens=max(config.max_tokens, 2),
                boundary=config_boundary(config),  # its calls retried and named as the run's are
                sampler_kind=config.sampler_kind,  # inflight: checks the service can make such samplers
                loss_fn=config.loss_fn,  # stable_reinforce: checks it is trained, and says if by a stand-in
            )
        enforce_contract(report, config.to_dict())
        if config.loss_fn == "stable_reinforce":  # the in-repo services compute a stand-in: say so
            print(
                f"debate-kernel train: loss_fn stable_reinforce: {report.result('stable_reinforce').got}",
                file=sys.stderr,
            )
    return await run_training(
        config,
        service,
        resume=resume,
        renderer=renderer,
        progress=progress,
    )


def _first_turn(config: TrainConfig, renderer: Any, question: str) -> list[int]:
    """The prompt of a debate's first turn on ``question``: agent 0's observation, rendered."""
    import kernel

    state = kernel.initial_state(question, num_agents=config.num_agents, max_rounds=config.max_rounds)
    observation = kernel.build_observation(state, 0, config=config.observation_config)
    ids: list[int] = renderer.build_prompt(observation.messages).to_ints()
    return ids


def run(args: argparse.Namespace) -> int:
    """Runs ``train``; returns the exit status: 0 done, 2 bad config / data / run directory, 1 a service
    that cannot start, :data:`EXIT_SERVICE` (3) a service call that failed for good (the message names the
    call, the step and the cause, and ``--resume RUN_DIR`` continues the run), :data:`EXIT_NOTHING_TO_TRAIN`
    (4) ``max_empty_steps`` RL steps in a row without a datum, 130 interrupted."""
    try:
        from adapters.tinker.boundary import ServiceError
        from adapters.tinker.contract import ContractError
        from adapters.training.dataset import load_split
        from adapters.training.loggers import LoggerError, RunLoggers, Sinks, check_loggers, parse_loggers
        from adapters.training.train import NothingToTrain, check_answers, check_service
    except ImportError as e:
        print(
            f"debate-kernel train: needs the training extras ({e.name or e} is not installed); "
            "install them with: pip install -e '.[local]'",
            file=sys.stderr,
        )
        return 2

    try:
        config = _config(args)
        loggers = parse_loggers(args.log)
        check_loggers(loggers)
    except (ValueError, TypeError, OSError, LoggerError) as e:
        print(f"debate-kernel train: {e}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        try:  # what can be checked before a service starts (and writes its folder in the run directory)
            if not args.resume:
                check_new_run_dir(config.out)
            split = load_split(config.dataset, eval_split=config.eval_split, eval_dataset=config.eval_dataset)
            check_answers(config, split.train)
        except (CheckpointError, DatasetError) as e:
            print(f"debate-kernel train: {e}", file=sys.stderr)
            return 2
        try:
            service, session = _service(args.service, config, stack)
            if not args.resume:
                check_service(config, service)
            renderer = _renderer(config.renderer, service, config)
        except ValueError as e:
            print(f"debate-kernel train: {e}", file=sys.stderr)
            return 2
        except RuntimeError as e:
            print(f"debate-kernel train: {e}", file=sys.stderr)
            return 1
        sizes = {k: getattr(config, k) for k in ("eval_questions", "eval_repeats", "num_agents")}
        display = TrainProgress(
            sys.stderr,
            warm_start_steps=config.warm_start_steps,
            evaluation_size=evaluation_debates(len(split.eval), **sizes),
            quiet=args.quiet,
        )
        sink = Sinks(display, RunLoggers(loggers, config.out, config.to_dict())) if loggers else display
        main = _checked_training(
            config,
            service,
            renderer,
            resume=bool(args.resume),
            check=None if args.skip_checks else session,
            question=split.train[0].question,
            progress=sink,
        )
        try:  # the bars are cleared, and the loggers closed, before any message below
            with sink, fewer_gc_passes():  # the loop's objects are freed by reference counting (adapters._gc)
                result = asyncio.run(main)
        except (CheckpointError, DatasetError, ContractError) as e:
            print(f"debate-kernel train: {e}", file=sys.stderr)
            return 2
        except ServiceError as e:
            started = (Path(config.out) / "run.json").exists()  # a failure in the contract check: not yet
            hint = f"--resume {config.out} continues the run" if started else "nothing was written; try again"
            print(f"debate-kernel train: {e}; {hint}", file=sys.stderr)
            return EXIT_SERVICE
        except NothingToTrain as e:
            print(f"debate-kernel train: {e}", file=sys.stderr)
            return EXIT_NOTHING_TO_TRAIN
        except KeyboardInterrupt:
            print("debate-kernel train: interrupted; resume with --resume " + config.out, file=sys.stderr)
            return 130
        print(f"wrote {result.run_dir} ({len(result.metrics)} steps in metrics.jsonl)")
        return 0
