"""Local JAX service vs PyTorch + Hugging Face transformers: sampling and training tokens per second.

Same architecture and size on both sides (a ``LlamaConfig`` with our dims: RMSNorm, rotary positions,
SwiGLU, no bias, untied output layer), randomly initialised, same batch, same run, CPU (or the default
JAX / torch device). Sampling: ``num_samples`` continuations of one prompt with a KV cache, every row
forced to ``max_tokens`` (no stop). Training: forward + backward of the summed token log-likelihood over
a [batch, seq] block; ours both with full weights and through the service's LoRA path. Each side uses
every core it is given (XLA's CPU runtime spreads a step over the cores, torch its matrix products); run
it under ``taskset -c 0`` for a per-core comparison.

On a GPU machine both sides run on the GPU (JAX's default device; torch's ``cuda``), torch synchronised
before each clock read. A GPU is far from full at the CPU workload, so ``--batch``, ``--seq``, ``--new``
and ``--prompt-len`` set a larger one. Both sides multiply matrices in full float32: ours always does
(``adapters.local.model.PRECISION``: TensorFloat-32 breaks sampler/trainer agreement), and torch is set
to ``highest`` (its default).

``python -m benchmarks local [--quick] [--size small] [--batch B --seq S --new N --prompt-len P]``. The
peer runs only if torch and transformers import; otherwise it is reported as skipped.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._common import block, emit_json, print_table, time_call, time_compile

Step = Callable[[], Any]


def _ours(
    size: str, batch: int, prompt_len: int, new: int, seq: int
) -> tuple[dict[str, float], dict[str, Step]]:
    """Our figures that are not timings, and the steps to time: ``sample``, ``train``, ``train_lora``."""
    import jax
    import jax.numpy as jnp

    from adapters.local import devices, train_step
    from adapters.local import model as m

    cfg = m.SIZES[size]
    params = m.init_params(cfg, jax.random.key(0))
    prompt = list(np.random.default_rng(0).integers(0, 256, prompt_len))

    def sample() -> Any:
        return m.generate(cfg, params, prompt, num_samples=batch, max_tokens=new, key=jax.random.key(1))

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
    lora = devices.replicated(mesh, m.init_lora(cfg, 32, jax.random.key(2)))
    arrays = (tokens, tokens, mask, ones, jnp.zeros_like(ones))
    grads = jax.tree_util.tree_map(jnp.zeros_like, lora)

    def train_lora() -> Any:
        return train_step.forward_backward(
            lora, weights, grads, arrays, cfg=cfg, loss_fn="cross_entropy", options=(), backward=True
        )

    time_compile(train_lora)
    return out, {"sample": sample, "train": train, "train_lora": train_lora}


def _alternately(ours: dict[str, Step], peer: dict[str, Step], repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds of each step, ours and the peer's timed in turn (one call each, then
    again), so that a slow spell of the shared machine falls on both sides rather than on one."""
    best: dict[str, float] = {}
    for name in ours:
        sides = {f"ours_{name}": ours[name]}
        if name in peer:
            sides[f"peer_{name}"] = peer[name]
        for key, fn in sides.items():
            block(fn())  # warm-up
            best[key] = float("inf")
        for _ in range(repeat):
            for key, fn in sides.items():
                best[key] = min(best[key], time_call(fn, repeat=1, warmup=0))
    return best


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
    size: str, batch: int, prompt_len: int, new: int, seq: int
) -> tuple[dict[str, float], dict[str, Step]] | None:
    """The peer's figures that are not timings and its ``sample`` and ``train`` steps (None: no torch)."""
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    from adapters.local import model as m

    cfg = m.SIZES[size]
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
    model = LlamaForCausalLM(hf).to(device).eval()
    prompt = torch.tensor(np.random.default_rng(0).integers(0, 256, (1, prompt_len)), device=device)
    prompt = prompt.repeat(batch, 1)

    def sample() -> Any:
        with torch.no_grad():
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

    def step() -> None:
        model.zero_grad(set_to_none=True)
        logits = model(tokens).logits
        torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).sum().backward()
        sync()

    out["torch_threads"] = float(torch.get_num_threads())
    out["on_gpu"] = float(device == "cuda")
    return out, {"sample": sample, "train": step}


def _platform() -> str:
    """The platform of JAX's default device (``cpu``, ``gpu``, ``tpu``)."""
    import jax

    return str(jax.devices()[0].platform)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks local")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--size", default=None, help="tiny, small or base (default small; tiny with --quick)")
    parser.add_argument("--batch", type=int, default=None, help="rows sampled / trained at once")
    parser.add_argument("--seq", type=int, default=None, help="training sequence length")
    parser.add_argument("--new", type=int, default=None, help="tokens sampled per row")
    parser.add_argument("--prompt-len", type=int, default=None, help="prompt tokens before sampling")
    args = parser.parse_args(argv)
    size = args.size or ("tiny" if args.quick else "small")
    batch, prompt_len, new, seq = (4, 16, 16, 32) if args.quick else (8, 64, 64, 128)
    batch = args.batch or batch
    prompt_len = args.prompt_len or prompt_len
    new = args.new or new
    seq = args.seq or seq
    repeat = 2 if args.quick else 9
    from adapters.local import split_cpu

    split_cpu()  # as `debate-kernel train` does (no effect where JAX already ran in this process)
    start = time.perf_counter()
    ours, ours_steps = _ours(size, batch, prompt_len, new, seq)
    found = _peer(size, batch, prompt_len, new, seq)
    peer, peer_steps = found if found is not None else (None, {})
    best = _alternately(ours_steps, peer_steps, repeat)
    ours["sample_tok_s"] = batch * new / best["ours_sample"]
    ours["train_tok_s"] = batch * seq / best["ours_train"]
    ours["train_lora_tok_s"] = batch * seq / best["ours_train_lora"]
    if peer is not None:
        peer["sample_tok_s"] = batch * new / best["peer_sample"]
        peer["train_tok_s"] = batch * seq / best["peer_train"]
    threads = int(peer["torch_threads"]) if peer else 0
    platform = _platform()
    on_gpu = bool(peer and peer.get("on_gpu"))
    torch_where = "torch on the GPU" if on_gpu else f"torch {threads} threads"
    rows: list[list[Any]] = [
        ["sampling tok/s", ours["sample_tok_s"], peer["sample_tok_s"] if peer else "-"],
        [f"training tok/s (full; {torch_where})", ours["train_tok_s"], peer["train_tok_s"] if peer else "-"],
    ]
    if peer:
        for row in rows:
            row.append(row[1] / row[2])
    rows.append(["training tok/s (LoRA r=32)", ours["train_lora_tok_s"], "-", "-"])
    rows.append(["sampler vs trainer max |Δ logprob|", ours["sampler_trainer_max_abs_dlogprob"], "-", "-"])
    title = (
        f"local JAX ({platform}, training on {ours['train_devices']:.0f} device(s)) vs torch+transformers, "
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
    figures["jax_platform"] = platform
    if peer:
        figures.update({f"peer_{k}": v for k, v in peer.items()})
        figures["sample_ratio"] = ours["sample_tok_s"] / peer["sample_tok_s"]
        figures["train_ratio"] = ours["train_tok_s"] / peer["train_tok_s"]
    figures["size"] = size
    figures["wall_s"] = time.perf_counter() - start
    emit_json({"benchmark": "local", **figures})
    return 0
