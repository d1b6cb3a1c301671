"""Local JAX service vs PyTorch + Hugging Face transformers: sampling and training tokens per second.

Same architecture and size on both sides (a ``LlamaConfig`` with our dims: RMSNorm, rotary positions,
SwiGLU, no bias, untied output layer), randomly initialised, same batch, same run, CPU (or the default JAX /
torch device). Sampling: ``num_samples`` continuations of one prompt with a KV cache, every row forced to
``max_tokens`` (no stop); ours prefills the prompt once for its rows (a group's samples share it), the
peer's ``generate`` once a row, so ours is also timed with a prefill a row. Training: forward + backward of
the summed token log-likelihood over a [batch, seq] block; ours both with full weights and through the
service's LoRA path. The peer runs in a process of its own (:class:`_PeerProcess`: in one process each side
slowed the other), its steps timed in turn with ours; both keep freed memory for reuse
(:func:`adapters.tinker.memory.freed_memory_kept`) and ours has one malloc arena, as ``train`` and ``serve``
run. Each side uses every core it is given (XLA's CPU runtime spreads a step over the cores, torch its
matrix products); run it under ``taskset -c 0`` for a per-core comparison.

On a GPU machine both sides run on the GPU (JAX's default device; torch's ``cuda``), torch synchronised
before each clock read. A GPU is far from full at the CPU workload, so ``--batch``, ``--seq``, ``--new``
and ``--prompt-len`` set a larger one. Both sides multiply matrices in full float32: ours always does
(``adapters.local.model.PRECISION``: TensorFloat-32 breaks sampler/trainer agreement), and torch is set
to ``highest`` (its default).

Part 2, the two paths of the local service: the default ``debate-kernel train`` run
(:data:`adapters.cli.train.LOCAL_PRESET`, shortened to 6 warm-start and 4 RL steps; ``--quick``: 3 and
3 in the small shapes of ``benchmarks learning --quick``) through the ``tinker`` SDK over HTTP to a
``debate-kernel serve`` (what ``train`` does) against the same run on the in-process client
(``--service inprocess``). One server serves every HTTP run; each run is a fresh training run. Each path
first runs once unmeasured on seed 0 (the server's start and the compilation of the run's programs fall
there). The measured runs then come in pairs, one per path, the paths' order swapped from one pair to
the next; pair r runs both paths on seed r + 1. A seed no run has used before makes the comparison fair:
an in-process run of the warm-up's seed would replay it token for token, every program compiled, while
an HTTP run samples other tokens than its warm-up (the server numbers a sampler's requests as they
arrive), so it meets some turn lengths, and then program shapes, the warm-up did not. On a new seed both
paths meet new data; a program that one path compiles first is then in the persistent compilation cache
for the other (the swapped order spreads that evenly). Per run: the mean ``time/total`` of the warm-start
and of the RL steps (the first step of each phase and the steps that evaluate left out) and the mean
``time/eval``; per path and phase the best run (the shared machine's load comes and goes). The default
run's time is projected from them (the preset's warm-start and RL steps and evaluations), and the ratio
HTTP / in-process is printed against the goal of issue 33: within 10 %, with each pair's own ratio of
projections beside it (the pair ran side by side, on one seed). As ``debate-kernel train``,
this process then has one malloc arena (:func:`adapters.tinker.memory.one_malloc_arena`), two CPU
devices and the persistent compilation cache; the server has the same.

Part 1 on a Hugging Face checkpoint (issue 40): ``--model PATH`` loads the checkpoint directory on both
sides (:func:`adapters.local.hf.load`; ``AutoModelForCausalLM.from_pretrained``), ``--hf llama|qwen3``
first writes a random one (:data:`HF_CONFIGS`: GQA, Llama 3 RoPE scaling or Qwen3's q/k norms and tied
embeddings, a vocabulary of 8192). LoRA training is then measured on both sides too: ours with Tinker's
targets (attention, MLP, output layer), the peer with ``peft`` on the same modules, rank 32, the base
frozen on both.

``--dtype bfloat16`` (for a GPU: ``adapters.local.model.COMPUTE_DTYPES``) gives every matrix product of
ours bfloat16 operands accumulated in float32, and runs the peer under ``torch.autocast`` to bfloat16
(its weights float32 too); ours is then also timed in float32, each step alternately with its bfloat16
twin, and the table adds our bfloat16 / float32 ratios. On CPU bfloat16 gains little (2-core machine, two
devices, 8 × 128 tokens, best of 9 alternated, 2026-11-28: ``small`` full training 1.08 ×, LoRA 1.11 ×
float32's tokens/s; ``base`` 1.08 × and 1.09 ×; ``--quick``'s ``tiny`` at 4 × 32, best of 2: 0.87 × and
1.02 ×); the peer under autocast is far slower on CPU (``small``: 2.7 k tokens/s). A GPU's figure is
still to be measured.

``--memory`` instead plans the memory of LoRA training of a Qwen3-0.6B shape at 8 × 1024 tokens
(:func:`_lora_memory`: XLA's buffer plan, compiled from shapes, not run).

``python -m benchmarks local [--quick] [--only peer|paths] [--rounds R] [--size small | --model PATH |
--hf llama|qwen3] [--batch B --seq S --new N --prompt-len P] [--dtype float32|bfloat16] [--memory]``.
The peer runs only if torch and transformers import; otherwise it is reported as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from adapters.training.config import DTYPES
from benchmarks._common import emit_json, print_table, time_call, time_compile

Step = Callable[[], Any]

GOAL = 1.10
"""Issue 33's goal: the HTTP path's step time within 10 % of the in-process path's on the default run."""

_PATHS_RUN = {"warm_start_steps": 6, "steps": 4}
"""The default run, shortened: four measured warm-start steps and two RL steps (not the first of a phase,
not one that evaluates); the warm start is most of the default run's steps."""
_PATHS_QUICK = {
    "warm_start_steps": 3,
    "steps": 3,
    "batch_size": 2,
    "eval_questions": 2,
    "eval_repeats": 1,
    "max_tokens": 32,
}
"""``--quick``: the shapes of ``benchmarks learning --quick``."""


HF_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 8192,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 1024,
        },
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
    "qwen3": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": 8192,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
}
"""``--hf``'s random checkpoints (about 7 M parameters, a third of them the output layer's)."""


def _random_checkpoint(arch: str, folder: Path) -> str:
    """Writes a random ``arch`` checkpoint of :data:`HF_CONFIGS` into ``folder`` (transformers' init)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{k: v for k, v in HF_CONFIGS[arch].items() if k != "architectures"})
    config.architectures = HF_CONFIGS[arch]["architectures"]
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return str(folder)


def _ours(
    size: str,
    batch: int,
    prompt_len: int,
    new: int,
    seq: int,
    path: str | None = None,
    dtype: str = "float32",
) -> tuple[dict[str, float], dict[str, Step]]:
    """Our figures that are not timings, and the steps to time: ``sample``, ``train``, ``train_lora``
    (every matrix product of ``dtype`` operands)."""
    import jax
    import jax.numpy as jnp

    from adapters.local import devices, hf, train_step
    from adapters.local import lora as lo
    from adapters.local import model as m

    if path is None:
        cfg = m.SIZES[size]
        params = m.init_params(cfg, jax.random.key(0))
    else:
        cfg, params = hf.load(path)
    cfg = cfg._replace(compute_dtype=dtype)
    prompt = list(np.random.default_rng(0).integers(0, 256, prompt_len))

    def sample() -> Any:
        return m.generate(cfg, params, prompt, num_samples=batch, max_tokens=new, key=jax.random.key(1))

    def sample_each() -> Any:  # every row prefilling the prompt, as the peer's `generate` does
        shared, m._SHARED_PREFILL_AT_MOST = m._SHARED_PREFILL_AT_MOST, 0.0
        try:
            return sample()
        finally:
            m._SHARED_PREFILL_AT_MOST = shared

    out: dict[str, float] = {"params": float(m.num_params(params))}
    out["sample_compile_s"] = time_compile(sample)
    out["sampler_trainer_max_abs_dlogprob"] = _logprob_gap(cfg, params, prompt, sample())

    # training as the service runs it: rows split over the devices (devices.row_mesh), weights replicated
    mesh = devices.row_mesh()
    out["train_devices"] = float(1 if mesh is None else mesh.size)
    host = np.random.default_rng(1).integers(0, 256, (batch, seq)).astype(np.int32)
    rows = (host, host, np.ones((batch, seq), bool), np.ones((batch, seq), np.float32))
    tokens, _, mask, ones = devices.rows_on(mesh, rows)
    weights = devices.replicated(mesh, params)
    grad = jax.jit(jax.grad(lambda p, t: m.token_logprobs(cfg, p, t, t).sum()))

    def train() -> Any:
        return grad(weights, tokens)

    out["train_compile_s"] = time_compile(train)
    targets = m.LORA_TARGETS if path is None else lo.targets()  # a checkpoint: Tinker's default targets
    lora = devices.replicated(mesh, m.init_lora(cfg, 32, jax.random.key(2), targets))
    arrays = (tokens, tokens, mask, ones, jnp.zeros_like(ones))
    grads = jax.tree_util.tree_map(jnp.zeros_like, lora)

    def train_lora() -> Any:
        return train_step.forward_backward(
            lora, weights, grads, arrays, cfg=cfg, loss_fn="cross_entropy", options=(), backward=True
        )

    time_compile(train_lora)
    return out, {"sample": sample, "sample_each": sample_each, "train": train, "train_lora": train_lora}


Timer = Callable[[], float]
"""One timed call of a step: its seconds (the step's result blocked on)."""


def _timer(step: Step) -> Timer:
    """A step of this process as a :data:`Timer`."""
    return lambda: time_call(step, repeat=1, warmup=0)


def _alternately(ours: dict[str, Timer], peer: dict[str, Timer], repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds of each step, ours and the peer's timed in turn (one call each, then
    again), so that a slow spell of the shared machine falls on both sides rather than on one."""
    best: dict[str, float] = {}
    for name in ours:
        sides = {f"ours_{name}": ours[name]}
        if name in peer:
            sides[f"peer_{name}"] = peer[name]
        for key, timed in sides.items():
            timed()  # warm-up
            best[key] = float("inf")
        for _ in range(repeat):
            for key, timed in sides.items():
                best[key] = min(best[key], timed())
    return best


class _PeerProcess:
    """The peer (:func:`_peer`) in a process of its own, its steps timed there on request.

    In one process the two sides slow each other: on the 2-core machine (64 × 512 tokens, the random
    Llama checkpoint, 2026-11-29) our LoRA step took 11.5-11.6 s alone and 13.8-14.4 s right after
    torch's, whose threads and freed memory were still about (the peer's own step 13.3-14.1 alone,
    14.0-14.2 alternated). Apart, each side times its steps in its own process, still in turn."""

    def __init__(self, *args: Any) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_peer_worker, args=(child, args), daemon=True)
        self._process.start()
        child.close()

    def steps(self) -> tuple[dict[str, float], dict[str, Timer]] | None:
        """The peer's figures and a :data:`Timer` per step (None: torch is not importable)."""
        found = self._receive()
        if found is None:
            return None
        figures, names = found
        return figures, {name: self._timer(name) for name in names}

    def _timer(self, name: str) -> Timer:
        def timed() -> float:
            self._conn.send(name)
            return float(self._receive())

        return timed

    def _receive(self) -> Any:
        try:
            kind, value = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"the peer's process ended (exit code {self._process.exitcode})") from None
        if kind == "error":
            raise RuntimeError(f"the peer's process failed: {value}")
        return value

    def close(self) -> None:
        """Stops the process (at once if it is stuck)."""
        if self._process.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._process.join(30)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        self._conn.close()

    def __enter__(self) -> _PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _peer_worker(conn: Any, args: tuple[Any, ...]) -> None:
    """The peer process: builds the steps, then times the one named by each request until None."""
    import traceback

    from adapters.tinker.memory import freed_memory_kept

    try:
        with freed_memory_kept():  # as for ours (_peer_part): the same allocator settings on both sides
            found = _peer(*args)
            conn.send(("ok", None if found is None else (found[0], list(found[1]))))
            steps = {} if found is None else found[1]
            while (name := conn.recv()) is not None:
                conn.send(("ok", time_call(steps[name], repeat=1, warmup=0)))
    except EOFError:
        pass
    except BaseException:
        conn.send(("error", traceback.format_exc(limit=-3)))
    finally:
        conn.close()


def _logprob_gap(cfg: Any, params: Any, prompt: list[int], result: Any) -> float:
    """max |sampler logprob − trainer logprob| over the sampled tokens (on-policy KL is ~0 iff this is)."""
    import jax.numpy as jnp

    from adapters.local import model as m

    sampled_B_M = np.asarray(result.tokens_B_M)
    full = np.concatenate([np.tile(np.asarray(prompt), (sampled_B_M.shape[0], 1)), sampled_B_M], 1)
    tokens = jnp.asarray(full[:, :-1], jnp.int32)
    trained = np.asarray(m.token_logprobs(cfg, params, tokens, jnp.asarray(full[:, 1:], jnp.int32)))
    valid = np.arange(sampled_B_M.shape[1])[None, :] < np.asarray(result.lengths_B)[:, None]
    sampled = np.asarray(result.logprobs_B_M)
    return float(np.abs(trained[:, len(prompt) - 1 :] - sampled)[valid].max())


def _peer(
    size: str,
    batch: int,
    prompt_len: int,
    new: int,
    seq: int,
    path: str | None = None,
    dtype: str = "float32",
) -> tuple[dict[str, float], dict[str, Step]] | None:
    """The peer's figures that are not timings and its ``sample`` and ``train`` steps, and
    ``train_lora`` on a checkpoint when ``peft`` imports (None: no torch); under ``torch.autocast`` to
    bfloat16 when ``dtype`` is ``"bfloat16"``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    from adapters.local import model as m

    cfg = m.SIZES.get(size, m.SIZES["tiny"])
    hf = LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_seq_len,
        rms_norm_eps=cfg.norm_eps,
        rope_theta=cfg.rope_base,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
    )
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("highest")  # full float32, as ours
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if path is None:
        model = LlamaForCausalLM(hf).to(device).eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    prompt = torch.tensor(np.random.default_rng(0).integers(0, 256, (1, prompt_len)), device=device)
    prompt = prompt.repeat(batch, 1)
    bf16 = dtype == "bfloat16"

    def sample() -> Any:
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=True,
                max_new_tokens=new,
                min_new_tokens=new,
                use_cache=True,
                pad_token_id=0,
                eos_token_id=None,
            )
        sync()
        return out

    out: dict[str, float] = {"params": float(sum(p.numel() for p in model.parameters()))}
    model.train()
    tokens = torch.tensor(np.random.default_rng(1).integers(0, 256, (batch, seq)), device=device)

    step = _torch_step(model, tokens, device, sync, bf16)
    out["torch_threads"] = float(torch.get_num_threads())
    out["on_gpu"] = float(device == "cuda")
    steps: dict[str, Step] = {"sample": sample, "train": step}
    if path is not None:
        lora_step = _peer_lora(path, tokens, device, sync, bf16)
        if lora_step is not None:
            steps["train_lora"] = lora_step
    return out, steps


def _peer_lora(path: str, tokens: Any, device: str, sync: Callable[[], Any], bf16: bool) -> Step | None:
    """The peer's LoRA training step (``peft``, rank 32, α 32, Tinker's targets; None without peft)."""
    try:
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]
    config = LoraConfig(r=32, lora_alpha=32, lora_dropout=0.0, target_modules=modules)
    return _torch_step(get_peft_model(base, config).train(), tokens, device, sync, bf16)


def _torch_step(model: Any, tokens: Any, device: str, sync: Callable[[], Any], bf16: bool) -> Step:
    """The peer's training step on ``model`` (full or LoRA): the gradient of Σ log p(tokens), under
    ``torch.autocast`` to bfloat16 when ``bf16``, the log-softmax in float32."""
    import torch

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            logits = model(tokens).logits
        torch.log_softmax(logits.float(), -1).gather(-1, tokens[..., None]).sum().backward()
        sync()

    return step


def evaluations(warm_start_steps: int, steps: int, eval_every: int) -> int:
    """How many evaluations a run makes: where RL starts (after a warm start), every ``eval_every``
    steps after it and after the last step (the planner's rule).

    Examples:
        >>> evaluations(80, 30, 10), evaluations(0, 5, 0), evaluations(2, 3, 2)
        (4, 1, 3)
    """
    total = warm_start_steps + steps
    due = 0
    for s in range(total):
        if s + 1 == warm_start_steps:
            due += 1
        elif s + 1 > warm_start_steps and (s + 1 == total or (eval_every > 0 and (s + 1) % eval_every == 0)):
            due += 1
    return due


def phase_times(metrics: list[dict[str, Any]]) -> dict[str, float]:
    """A run's mean step time per phase (``time/total``; the first step of each phase and the steps that
    evaluate left out, while others remain) and its mean evaluation time (``time/eval``); NaN for what
    the run did not have.

    Examples:
        >>> steps = ((9, 0), (3, 0), (4, 0), (6, 2))  # time/total, time/eval
        >>> phase_times([{"phase": "rl", "time/total": t, "time/eval": e} for t, e in steps])
        {'warm_start_s': nan, 'rl_s': 3.5, 'eval_s': 2.0}
    """
    out: dict[str, float] = {}
    for phase in ("warm_start", "rl"):
        rows = [r for r in metrics if r["phase"] == phase]
        plain = [r for r in rows[1:] if not _evaluated(r)] or rows[1:] or rows
        out[f"{phase}_s"] = float(np.mean([float(r["time/total"]) for r in plain])) if plain else float("nan")
    evals = [float(r["time/eval"]) for r in metrics if _evaluated(r)]
    out["eval_s"] = float(np.mean(evals)) if evals else float("nan")
    return out


def _evaluated(record: dict[str, Any]) -> bool:
    """Whether a metrics line's step evaluated (its ``time/eval`` is more than the bookkeeping's)."""
    return float(record.get("time/eval") or 0.0) > 1e-3


def projected(times: dict[str, float], warm_start_steps: int, steps: int, evals: int) -> float:
    """Seconds of a run of that many steps and evaluations at ``times``' (:func:`phase_times`) rates.

    Examples:
        >>> projected({"warm_start_s": 1.0, "rl_s": 4.0, "eval_s": 20.0}, 80, 30, 4)
        280.0
    """
    parts = (times["warm_start_s"] * warm_start_steps, times["rl_s"] * steps, times["eval_s"] * evals)
    return float(sum(p for p in parts if p == p))  # a phase the run does not have (NaN × 0) adds nothing


def _paths(quick: bool, rounds: int) -> dict[str, Any]:
    """The default run's step times through the SDK over HTTP to ``debate-kernel serve`` and on the
    in-process client, alternately (see the module docstring)."""
    import tempfile

    from adapters.cli.train import LOCAL_PRESET

    shortened = {**LOCAL_PRESET, **_PATHS_RUN, **(_PATHS_QUICK if quick else {})}
    with tempfile.TemporaryDirectory(prefix="bench-paths-") as name:
        return _alternated_paths(shortened, Path(name), rounds)


def _alternated_paths(shortened: dict[str, Any], tmp: Path, rounds: int) -> dict[str, Any]:
    """:func:`_paths`' measurement, its runs under ``tmp``."""
    import tinker

    from adapters._gc import fewer_gc_passes
    from adapters.cli.train import LOCAL_PRESET
    from adapters.local import LocalServiceClient
    from adapters.serve.process import API_KEY, ServedClient, served
    from adapters.tinker.renderers import ByteRenderer
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    runs = itertools.count()

    def train(service: Any, seed: int) -> list[dict[str, Any]]:
        config = TrainConfig.from_mapping({**shortened, "seed": seed, "out": str(tmp / f"run-{next(runs)}")})
        with fewer_gc_passes():  # as `debate-kernel train` runs the loop
            result = asyncio.run(run_training(config, service, renderer=ByteRenderer()))
        return list(result.metrics)

    def http(url: str, seed: int) -> list[dict[str, Any]]:
        sdk = tinker.ServiceClient(base_url=url, api_key=API_KEY)  # a session per run, as train's
        try:
            return train(ServedClient(sdk), seed)
        finally:
            sdk.close("success").result(timeout=30)

    def inprocess(seed: int) -> list[dict[str, Any]]:
        return train(LocalServiceClient(seed=0, root=tmp / f"inprocess-{next(runs)}"), seed)

    preset = (int(LOCAL_PRESET["warm_start_steps"]), int(LOCAL_PRESET["steps"]))
    evals = evaluations(*preset, int(LOCAL_PRESET["eval_every"]))
    measured: dict[str, list[dict[str, float]]] = {"http": [], "inprocess": []}
    warmup_s: dict[str, float] = {}
    t0 = time.perf_counter()
    with served(str(LOCAL_PRESET["model"]), root=tmp / "service", log=tmp / "serve.log") as url:
        start_s = time.perf_counter() - t0
        sides: dict[str, Callable[[int], list[dict[str, Any]]]] = {
            "http": lambda seed: http(url, seed),
            "inprocess": inprocess,
        }
        for name, run in sides.items():  # unmeasured: every program of the run compiles on each side
            t0 = time.perf_counter()
            run(0)
            warmup_s[name] = time.perf_counter() - t0
        for r in range(max(rounds, 1)):  # pair r: both paths on seed r + 1, the order swapped each pair
            for name in sorted(sides, reverse=r % 2 == 1):
                measured[name].append(phase_times(sides[name](r + 1)))
    out: dict[str, Any] = {"server_start_s": start_s, "rounds": max(rounds, 1), "evaluations": evals}
    out["preset_steps"] = list(preset)
    for name, runs_of in measured.items():
        for key in runs_of[0]:  # each phase's best run: the quietest spell of the shared machine
            out[f"{name}_{key}"] = float(np.nanmin([r[key] for r in runs_of]))
            out[f"{name}_{key}_every_round"] = [r[key] for r in runs_of]
        best = {key: out[f"{name}_{key}"] for key in runs_of[0]}
        out[f"{name}_default_run_s"] = projected(best, *preset, evals)
        out[f"{name}_warmup_run_s"] = warmup_s[name]
    for key in ("warm_start_s", "rl_s", "eval_s", "default_run_s"):
        out[f"ratio_{key}"] = out[f"http_{key}"] / out[f"inprocess_{key}"]
    out["ratio_default_run_s_every_round"] = [
        projected(h, *preset, evals) / projected(i, *preset, evals)
        for h, i in zip(measured["http"], measured["inprocess"], strict=True)
    ]
    return out


QWEN3_06B: dict[str, Any] = {
    "vocab_size": 151936,
    "d_model": 1024,
    "num_layers": 28,
    "num_heads": 16,
    "num_kv_heads": 8,
    "head_size": 128,
    "d_ff": 3072,
    "max_seq_len": 40960,
    "rope_base": 1e6,
    "norm_eps": 1e-6,
    "qk_norm": True,
    "tie_embeddings": True,
}
"""Qwen3-0.6B's shape (its config.json), as a :class:`adapters.local.model.ModelConfig`: 596 M parameters."""


def _lora_memory(rows: int = 8, seq: int = 1024, rank: int = 32) -> dict[str, Any]:
    """``--memory``: the memory a LoRA training call (Tinker's targets, rank ``rank``, cross-entropy) of
    :data:`QWEN3_06B` on ``rows`` × ``seq`` tokens plans on JAX's default device: XLA's buffer assignment
    of the compiled program (arguments, i.e. the float32 base weights and adapters, plus temporaries),
    compiled from shapes alone, nothing run (a step on two CPU cores would take minutes). Two plans: the
    service's, which splits the rows into calls of :func:`adapters.local.train_step.chunk_rows` rows
    (gradients accumulated), and one call of every row."""
    import jax
    import jax.numpy as jnp

    from adapters.local import lora as lo
    from adapters.local import model as m
    from adapters.local import train_step

    cfg = m.ModelConfig(**QWEN3_06B)
    params = jax.eval_shape(lambda: m.init_params(cfg, jax.random.key(0)))
    lora = jax.eval_shape(lambda: m.init_lora(cfg, rank, jax.random.key(1), lo.targets()))
    out: dict[str, Any] = {"params": float(m.num_params(params)), "rows": rows, "seq": seq}
    chunk = min(rows, train_step.chunk_rows(cfg, seq))
    for name, n in (("service", chunk), ("one_call", rows)):
        ids, floats = (jax.ShapeDtypeStruct((n, seq), t) for t in (jnp.int32, jnp.float32))
        batch = (ids, ids, jax.ShapeDtypeStruct((n, seq), bool), floats, floats)
        compiled = train_step.forward_backward.lower(
            lora, params, lora, batch, cfg=cfg, loss_fn="cross_entropy", options=(), backward=True
        ).compile()
        plan = compiled.memory_analysis()
        out[f"{name}_rows_per_call"] = n
        out[f"{name}_peak_gib"] = (plan.argument_size_in_bytes + plan.temp_size_in_bytes) / 2**30
        out[f"{name}_weights_gib"] = plan.argument_size_in_bytes / 2**30
    print_table(
        f"LoRA r={rank} training of a Qwen3-0.6B shape ({out['params'] / 1e6:.0f} M params, float32, random "
        f"weights) on {rows} x {seq} tokens: XLA's planned peak on {_platform()} (compiled, not run)",
        ["plan", "rows per call", "arguments GiB", "peak GiB"],
        [
            [name, out[f"{name}_rows_per_call"], out[f"{name}_weights_gib"], out[f"{name}_peak_gib"]]
            for name in ("service", "one_call")
        ],
    )
    return out


def _platform() -> str:
    """The platform of JAX's default device (``cpu``, ``gpu``, ``tpu``)."""
    import jax

    return str(jax.devices()[0].platform)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks local")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", choices=("peer", "paths"), help="one part: the torch peer, or the service's two paths"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="part 1: timed calls of each step a side (default 9; 2 with --quick); "
        "part 2: measured runs per path (default 3; 1 with --quick)",
    )
    parser.add_argument("--size", default=None, help="tiny, small or base (default small; tiny with --quick)")
    parser.add_argument("--model", default=None, metavar="PATH", help="a Hugging Face checkpoint directory")
    parser.add_argument("--hf", choices=sorted(HF_CONFIGS), help="a random checkpoint of this architecture")
    parser.add_argument("--batch", type=int, default=None, help="rows sampled / trained at once")
    parser.add_argument("--seq", type=int, default=None, help="training sequence length")
    parser.add_argument("--new", type=int, default=None, help="tokens sampled per row")
    parser.add_argument("--prompt-len", type=int, default=None, help="prompt tokens before sampling")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="the matrix products' operands in part 1 (bfloat16: for a GPU; ours also timed in float32)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="only the planned memory of LoRA training of a Qwen3-0.6B shape at 8 x 1024 (compiled, not run)",
    )
    args = parser.parse_args(argv)
    from adapters.local import split_cpu
    from adapters.tinker.memory import one_malloc_arena

    one_malloc_arena()  # as `train` and `serve` do, before JAX starts (the peer has its own process)
    if args.only != "peer":  # as `debate-kernel train --service inprocess` does
        from adapters.local.devices import compilation_cache

        compilation_cache(0.5)
    split_cpu()  # as `debate-kernel train` does (no effect where JAX already ran in this process)
    start = time.perf_counter()
    figures: dict[str, Any] = {"jax_platform": _platform()}
    if args.memory:
        figures.update({f"memory_{k}": v for k, v in _lora_memory().items()})
    elif args.only != "paths":
        figures.update(_peer_part(args))
    if args.only != "peer" and not args.memory:
        paths = _paths(args.quick, args.rounds or (1 if args.quick else 3))
        _print_paths(paths, quick=args.quick)
        figures.update({f"paths_{k}": v for k, v in paths.items()})
    figures["wall_s"] = time.perf_counter() - start
    emit_json({"benchmark": "local", **figures})
    return 0


def _print_paths(paths: dict[str, Any], *, quick: bool) -> None:
    """Part 2's table: each phase's seconds on both paths, their ratio, and the goal's verdict."""
    warm, rl = paths["preset_steps"]
    rows = [
        [label, paths[f"http_{key}"], paths[f"inprocess_{key}"], paths[f"ratio_{key}"]]
        for label, key in (
            ("warm-start step s", "warm_start_s"),
            ("RL step s", "rl_s"),
            ("evaluation s", "eval_s"),
            (f"default run s ({warm} + {rl} steps, {paths['evaluations']} evaluations)", "default_run_s"),
        )
    ]
    shapes = "the quick shapes" if quick else "the default run's shapes"
    print_table(
        f"the default run ({shapes}) through the SDK over HTTP to debate-kernel serve vs the in-process "
        f"client, each phase's best of {paths['rounds']} paired runs on new seeds, compiled beforehand",
        ["measure", "HTTP", "in-process", "HTTP / in-process"],
        rows,
    )
    verdict = "meets" if paths["ratio_default_run_s"] <= GOAL else "misses"
    ratio = paths["ratio_default_run_s"]
    pairs = " ".join(f"{x:.3f}" for x in paths["ratio_default_run_s_every_round"])
    print(f"HTTP / in-process on the default run: {ratio:.3f} ({verdict} the goal <= {GOAL})")
    print(f"each pair's HTTP / in-process (one seed, side by side): {pairs}")


def _peer_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 1: ours against torch + transformers; prints its table and returns its figures."""
    size = args.size or ("tiny" if args.quick else "small")
    path = args.model
    if args.hf is not None:
        import tempfile

        path = _random_checkpoint(args.hf, Path(tempfile.mkdtemp(prefix=f"bench-{args.hf}-")))
    if path is not None:
        size = args.hf or Path(path).name
    batch, prompt_len, new, seq = (4, 16, 16, 32) if args.quick else (8, 64, 64, 128)
    batch = args.batch or batch
    prompt_len = args.prompt_len or prompt_len
    new = args.new or new
    seq = args.seq or seq
    repeat = args.rounds or (2 if args.quick else 9)
    from adapters.tinker.memory import freed_memory_kept

    # freed memory kept for reuse on both sides, as `train` and `serve` run (torch's full step at 64 × 512
    # on the random Llama checkpoint, in its own process: 17.7 s without it, 12.6-14.8 s with it)
    with freed_memory_kept():
        with _PeerProcess(size, batch, prompt_len, new, seq, path, args.dtype) as peer_process:
            ours, ours_steps = _ours(size, batch, prompt_len, new, seq, path, args.dtype)
            found = peer_process.steps()
            peer, peer_timers = found if found is not None else (None, {})
            best = _alternately({k: _timer(v) for k, v in ours_steps.items()}, peer_timers, repeat)
        vs_f32: dict[str, float] = {}
        if args.dtype != "float32":  # our float32 twins, each timed alternately with the same step in bf16
            twins = _ours(size, batch, prompt_len, new, seq, path)[1]
            training = ("train", "train_lora")
            ours_timers = {k: _timer(ours_steps[k]) for k in training}
            timed = _alternately(ours_timers, {k: _timer(twins[k]) for k in training}, repeat)
            vs_f32 = {k: timed[f"peer_{k}"] / timed[f"ours_{k}"] for k in training}  # tok/s ratio
    ours["sample_tok_s"] = batch * new / best["ours_sample"]
    ours["sample_each_tok_s"] = batch * new / best["ours_sample_each"]
    ours["train_tok_s"] = batch * seq / best["ours_train"]
    ours["train_lora_tok_s"] = batch * seq / best["ours_train_lora"]
    if peer is not None:
        peer["sample_tok_s"] = batch * new / best["peer_sample"]
        peer["train_tok_s"] = batch * seq / best["peer_train"]
        if "peer_train_lora" in best:
            peer["train_lora_tok_s"] = batch * seq / best["peer_train_lora"]
    threads = int(peer["torch_threads"]) if peer else 0
    platform = _platform()
    on_gpu = bool(peer and peer.get("on_gpu"))
    torch_where = "torch on the GPU" if on_gpu else f"torch {threads} threads"
    rows: list[list[Any]] = [
        ["sampling tok/s", ours["sample_tok_s"], peer["sample_tok_s"] if peer else "-"],
        ["sampling tok/s, a prefill a row", ours["sample_each_tok_s"], peer["sample_tok_s"] if peer else "-"],
        [f"training tok/s (full; {torch_where})", ours["train_tok_s"], peer["train_tok_s"] if peer else "-"],
    ]
    if peer:
        for row in rows:
            row.append(row[1] / row[2])
    if peer and "train_lora_tok_s" in peer:
        lora_peer = peer["train_lora_tok_s"]
        rows.append(
            [
                "training tok/s (LoRA r=32; peer: peft)",
                ours["train_lora_tok_s"],
                lora_peer,
                ours["train_lora_tok_s"] / lora_peer,
            ]
        )
    else:
        rows.append(["training tok/s (LoRA r=32)", ours["train_lora_tok_s"], "-", "-"])
    for key, label in (("train", "full"), ("train_lora", "LoRA r=32")):
        if key in vs_f32:
            rows.append([f"our {args.dtype} / float32 training tok/s ({label})", vs_f32[key], "-", "-"])
    rows.append(["sampler vs trainer max |Δ logprob|", ours["sampler_trainer_max_abs_dlogprob"], "-", "-"])
    title = (
        f"local JAX ({platform}, {args.dtype}, training on {ours['train_devices']:.0f} device(s)) vs "
        "torch+transformers, "
        f"size {size} ({ours['params']:,.0f} params), "
        f"batch {batch}, prompt {prompt_len}, new {new}, train seq {seq}; compile: sample "
        f"{ours['sample_compile_s']:.1f}s, train {ours['train_compile_s']:.1f}s"
    )
    if peer is None:
        rows = [row[:3] for row in rows]
    print_table(title, ["measure", "ours", "peer", "ratio"][: len(rows[0])], rows)
    if peer is None:
        print("peer skipped: torch and transformers are not importable")
    figures: dict[str, Any] = {f"ours_{k}": v for k, v in ours.items()}
    figures["dtype"] = args.dtype
    figures.update({f"{k}_{args.dtype}_over_float32": v for k, v in vs_f32.items()})
    if peer:
        figures.update({f"peer_{k}": v for k, v in peer.items()})
        figures["sample_ratio"] = ours["sample_tok_s"] / peer["sample_tok_s"]
        figures["sample_each_ratio"] = ours["sample_each_tok_s"] / peer["sample_tok_s"]
        figures["train_ratio"] = ours["train_tok_s"] / peer["train_tok_s"]
        if "train_lora_tok_s" in peer:
            figures["train_lora_ratio"] = ours["train_lora_tok_s"] / peer["train_lora_tok_s"]
    figures["size"] = size
    return figures
