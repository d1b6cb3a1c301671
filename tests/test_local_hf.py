"""Hugging Face checkpoints on the local service, against ``transformers`` on the same random weights.

Two tiny checkpoints are built once per module with ``save_pretrained``: a Llama 3 (grouped-query
attention, RoPE theta 500 000 with llama3 scaling whose three regimes all occur, untied output layer,
sharded weights) and a Qwen3 (q/k norms, a head size other than hidden / heads, tied embeddings), each
with a byte-level BPE tokenizer trained here and a chat template. Nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from tinker import types  # noqa: E402

from adapters.local import hf  # noqa: E402
from adapters.local import lora as lo  # noqa: E402
from adapters.local import model as m  # noqa: E402
from adapters.local.service import LocalServiceClient  # noqa: E402
from tests._marks import EXHAUSTIVE  # noqa: E402

VOCAB = 320
"""The models' vocabulary: the tokenizer's ids and some spare rows, as real checkpoints have."""

PROBE = (2, 41)
"""The token blocks scored (40 positions a row): one shape, so each model's forward compiles once."""

TEXTS = [
    "Is 7 a prime number? Yes, 7 is prime.",
    "<solution>NO</solution> <evaluation>fine</evaluation> <consensus>YES</consensus>",
    "Agent 1 > Agent 2. The answer is 42; the sum of 40 and 2.",
    "Debate: every agent answers, evaluates and compares the others.",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-untyped]

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TEXTS, trainer)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>",
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def _randomize(net: Any, seed: int) -> None:
    """Weights far from transformers' tiny init (std 0.02 gives near-uniform logits that hide errors):
    projections std 0.2, norm gains 1 ± 0.3."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.3 * noise if name.endswith("norm.weight") else 0.2 * noise)


class Checkpoint(NamedTuple):
    path: Path
    net: Any  # the transformers model, float32, eval mode
    cfg: m.ModelConfig
    params: m.Params


def _llama(folder: Path) -> Any:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_theta=500000.0,
        # wavelengths of the 4 pairs of a head of 8: 6.3, 169, 4.4e3, 1.2e5; C / high = 64, C / low = 256:
        # the first pair is kept, the second blended, the last two slowed down
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        },
        tie_word_embeddings=False,
        eos_token_id=1,
    )
    net = transformers.LlamaForCausalLM(config)
    _randomize(net, 0)
    net.save_pretrained(folder, max_shard_size="40KB")  # sharded: an index and several files
    return net


def _qwen3(folder: Path) -> Any:
    config = transformers.Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=1,
    )
    net = transformers.Qwen3ForCausalLM(config)
    _randomize(net, 1)
    net.save_pretrained(folder)
    return net


ARCHS = {"llama": _llama, "qwen3": _qwen3}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Checkpoint]:
    out = {}
    for name, build in ARCHS.items():
        folder = tmp_path_factory.mktemp(name)
        net = build(folder).eval()
        _tokenizer(folder)
        cfg, params = hf.load(folder)
        out[name] = Checkpoint(folder, net, cfg, params)
    return out


def _torch_logprobs(net: Any, ids: np.ndarray, weights: dict[str, Any] | None = None) -> Any:
    """log p(ids[:, t+1] | ids[:, ≤t]) from transformers, [B, T-1] (with ``weights`` replacing the
    model's own parameters)."""
    tokens = torch.tensor(ids, dtype=torch.long)
    if weights is None:
        logits = net(tokens).logits
    else:
        logits = torch.func.functional_call(net, weights, (tokens,), tie_weights=False).logits
    return torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, tokens[:, 1:, None])[..., 0]


_LOGPROBS = jax.jit(m.token_logprobs, static_argnums=0)


def _our_logprobs(ck: Checkpoint, ids: np.ndarray, params: m.Params | None = None) -> np.ndarray:
    tokens = jnp.asarray(ids[:, :-1], jnp.int32)
    return np.asarray(
        _LOGPROBS(ck.cfg, ck.params if params is None else params, tokens, jnp.asarray(ids[:, 1:]))
    )


@pytest.mark.parametrize("arch", list(ARCHS))
def test_the_config_maps_every_feature(checkpoints: dict[str, Checkpoint], arch: str) -> None:
    cfg = checkpoints[arch].cfg
    shape = (cfg.num_heads, cfg.kv_heads, cfg.head_dim, cfg.qk_norm, cfg.tie_embeddings)
    if arch == "llama":
        assert shape == (6, 2, 8, False, False)
        assert cfg.rope_scaling == (8.0, 1.0, 4.0, 256) and cfg.rope_base == 500000.0
        assert len(list(checkpoints[arch].path.glob("model-*.safetensors"))) > 1  # really sharded
        base = 500000.0 ** -(np.arange(4) / 4)
        freqs = m.rope_frequencies(cfg)
        assert freqs[0] == np.float32(base[0]) and np.allclose(freqs[2:], base[2:] / 8)
        assert base[1] / 8 < freqs[1] < base[1]  # the blended pair
    else:
        assert shape == (4, 2, 16, True, True)
        assert "lm_head" not in checkpoints[arch].params


@pytest.mark.parametrize("arch", list(ARCHS))
def test_next_token_logprobs_match_transformers(checkpoints: dict[str, Checkpoint], arch: str) -> None:
    ck = checkpoints[arch]
    ids = np.random.default_rng(3).integers(0, VOCAB, PROBE)
    with torch.no_grad():
        want = _torch_logprobs(ck.net, ids).numpy()
    got = _our_logprobs(ck, ids)
    assert np.abs(got - want).max() < 1e-4
    assert want.std() > 0.5  # the weights make the test sensitive: logprobs far from uniform


def test_the_sampler_never_draws_an_id_the_tokenizer_lacks(checkpoints: dict[str, Checkpoint]) -> None:
    """The filter on logits that favour the spare rows: never drawn, not even greedily, and the logprob
    reported stays the model's over every row. (Through serve: test_sdk_sampling_from_serve_….)"""
    assert all(ck.cfg.tokenizer_vocab == 300 < ck.cfg.vocab_size for ck in checkpoints.values())
    logits = jnp.where(jnp.arange(VOCAB) >= 300, 5.0, 0.0)[None].repeat(64, 0)
    keys = jax.random.split(jax.random.key(0), 64)
    choose = jax.jit(m._choose, static_argnums=5)
    for temperature in (1.0, 0.0):  # unmasked, the spare rows would hold 91 % of the mass, and the argmax
        token, lp = choose(
            keys, logits, jnp.full(64, temperature), jnp.ones(64), jnp.full(64, -1, jnp.int32), 300
        )
        assert bool((token < 300).all())
        np.testing.assert_allclose(lp, jax.nn.log_softmax(logits)[jnp.arange(64), token], rtol=1e-6)


@EXHAUSTIVE  # the fast tier checks the Llama decode through serve (test_sdk_sampling_from_serve_…)
@pytest.mark.parametrize("arch", list(ARCHS))
def test_kv_cache_decode_equals_the_full_forward(checkpoints: dict[str, Checkpoint], arch: str) -> None:
    ck = checkpoints[arch]
    rows = [
        m.SampleRow([5, 9, 17], jax.random.key(0), 12),
        m.SampleRow(list(range(40, 60)), jax.random.key(1), 12, temperature=0.0),
    ]
    result = m.generate_rows(ck.cfg, ck.params, rows)
    for b, row in enumerate(rows):
        n = int(result.lengths_B[b])
        assert n == 12
        full = np.zeros((1, PROBE[1]), np.int64)  # right padding: the forward is causal
        full[0, : len(row.prompt) + n] = [*row.prompt, *np.asarray(result.tokens_B_M[b, :n])]
        want = _our_logprobs(ck, full)[0, len(row.prompt) - 1 : len(row.prompt) - 1 + n]
        np.testing.assert_allclose(np.asarray(result.logprobs_B_M[b, :n]), want, atol=2e-5)


def _hf_lora_weights(ck: Checkpoint, lora: m.Params) -> dict[str, Any]:
    """transformers' parameters with our LoRA update added: W_hf + (α/r)·(A·B)ᵀ, as differentiable
    functions of torch leaves A and B (returned under ``lora.{target}.{a,b}``)."""
    leaves = {
        f"{t}.{p}": torch.tensor(np.asarray(ab[p]), requires_grad=True)
        for t, ab in lora.items()
        for p in "ab"
    }
    weights: dict[str, Any] = {k: v.detach() for k, v in ck.net.state_dict().items()}
    names = {v: k for k, v in hf._LAYER_NAMES.items()}
    for target in lora:
        a, b = leaves[f"{target}.a"], leaves[f"{target}.b"]
        scale = m.LORA_ALPHA / a.shape[-1]
        if target == "lm_head":
            head = weights.get("lm_head.weight", weights["model.embed_tokens.weight"])
            weights["lm_head.weight"] = head + scale * (a @ b).T
            continue
        for i in range(ck.cfg.num_layers):
            key = f"model.layers.{i}.{names[target]}"
            weights[key] = weights[key] + scale * (a[i] @ b[i]).T
    return {**weights, **{f"lora.{k}": v for k, v in leaves.items()}}


def _datums(ids: np.ndarray, weights: np.ndarray) -> list[types.Datum]:
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(row[:-1].tolist()),
            loss_fn_inputs={"target_tokens": row[1:].astype(np.int64), "weights": w.astype(np.float32)},
        )
        for row, w in zip(ids, weights, strict=True)
    ]


def _check_lora_gradients(ck: Checkpoint, tmp_path: Path) -> Any:
    """A LoRA run of the service on ``ck`` (every target, B random so every gradient is nonzero): the
    gradient of one cross-entropy call with per-token weights against autograd through transformers
    with the same adapter added. Returns the trainer."""
    service = LocalServiceClient(seed=0, root=tmp_path / "service")
    trainer = service.create_lora_training_client(str(ck.path), rank=4).result()
    assert set(trainer._state.trainable) == set(m.ALL_LORA_TARGETS)  # Tinker's default targets
    key = jax.random.key(8)
    lora = {
        t: {"a": ab["a"], "b": 0.05 * jax.random.normal(key, ab["b"].shape)}
        for t, ab in trainer._state.trainable.items()
    }
    trainer._state = trainer._state._replace(trainable=lora)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, VOCAB, PROBE)
    w = rng.uniform(0, 1, (PROBE[0], PROBE[1] - 1))
    loss = trainer.forward_backward(_datums(ids, w), "cross_entropy").result().metrics["loss:sum"]
    grads = trainer._state.grads
    weights = _hf_lora_weights(ck, lora)
    leaves = {k.removeprefix("lora."): v for k, v in weights.items() if k.startswith("lora.")}
    model_weights = {k: v for k, v in weights.items() if not k.startswith("lora.")}
    torch_loss = -(_torch_logprobs(ck.net, ids, model_weights) * torch.tensor(w, dtype=torch.float32)).sum()
    torch_loss.backward()
    assert abs(loss - torch_loss.item()) < 1e-4 * abs(torch_loss.item())
    for name, leaf in leaves.items():
        target, part = name.split(".")
        got, want = np.asarray(grads[target][part]), leaf.grad.numpy()
        assert np.abs(want).max() > 0
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max()), name
    return trainer


def test_a_lora_run_matches_torch_autograd_and_loads_back(
    checkpoints: dict[str, Checkpoint], tmp_path: Path
) -> None:
    # the Llama checkpoint: LoRA gradients against autograd, one optimizer step, then the run's state
    # (the base not copied), its sampler weights (the adapter alone) and a merged Hugging Face export,
    # each loaded back and computing the trained model
    _lora_run(checkpoints["llama"], tmp_path, peft=False)


def _lora_run(ck: Checkpoint, tmp_path: Path, *, peft: bool) -> None:
    trainer = _check_lora_gradients(ck, tmp_path)
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    merged = trainer.merged_params()
    probe = np.random.default_rng(5).integers(0, VOCAB, PROBE)
    want = _our_logprobs(ck, probe, merged)
    assert np.abs(want - _our_logprobs(ck, probe)).max() > 1e-3  # the step changed the model

    state = trainer.save_state("s1").result().path
    from safetensors import safe_open

    with safe_open(state, framework="numpy") as f:
        assert not any(k.startswith("frozen.") for k in f.keys())  # the checkpoint's weights not copied
    service = trainer._service
    resumed = service.create_training_client_from_state_with_optimizer(state).result()
    np.testing.assert_array_equal(_our_logprobs(ck, probe, resumed.merged_params()), want)

    sampler_file = trainer.save_weights_for_sampler("w1").result().path
    assert lo.is_adapter(sampler_file)
    cfg, params, base = hf.load_weights_file(sampler_file)
    assert base == str(ck.path) and cfg == ck.cfg
    np.testing.assert_allclose(_our_logprobs(ck, probe, params), want, atol=1e-6)

    out = hf.export_file(state, tmp_path / "merged")  # the state's merged weights, as a HF directory
    again = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    with torch.no_grad():
        assert np.abs(_torch_logprobs(again, probe).numpy() - want).max() < 1e-4
    assert transformers.AutoTokenizer.from_pretrained(str(out)).chat_template == CHAT_TEMPLATE
    from_sampler = hf.load(hf.export_file(sampler_file, tmp_path / "merged2"))  # the adapter file's too
    np.testing.assert_allclose(_our_logprobs(ck, probe, from_sampler[1]), want, atol=1e-6)
    before = {f.name: f.read_bytes() for f in ck.path.iterdir() if f.is_file()}
    with pytest.raises(ValueError, match="is the source checkpoint"):  # it would overwrite its base
        hf.export_file(state, ck.path)
    assert {f.name: f.read_bytes() for f in ck.path.iterdir() if f.is_file()} == before
    if peft:  # a PEFT adapter over a fresh copy of the base (PEFT changes the model it wraps)
        from peft import PeftModel

        adapter_dir = lo.export_peft(tmp_path / "peft", trainer._state.trainable, ck.path)
        fresh = transformers.AutoModelForCausalLM.from_pretrained(str(ck.path))
        peft_model = PeftModel.from_pretrained(fresh, str(adapter_dir)).eval()
        with torch.no_grad():
            assert np.abs(_torch_logprobs(peft_model, probe).numpy() - want).max() < 1e-4


@EXHAUSTIVE
def test_qwen3_lora_gradients_equal_torch_autograd(
    checkpoints: dict[str, Checkpoint], tmp_path: Path
) -> None:
    # tied embeddings: the output layer's adapter unties it (embed.T + ΔW), as in the merged export
    _check_lora_gradients(checkpoints["qwen3"], tmp_path)


@EXHAUSTIVE
def test_a_peft_export_computes_the_trained_model(checkpoints: dict[str, Checkpoint], tmp_path: Path) -> None:
    pytest.importorskip("peft")
    _lora_run(checkpoints["llama"], tmp_path, peft=True)


def _write(folder: Path, **changes: Any) -> Path:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_unsupported_and_missing_files_are_named(checkpoints: dict[str, Checkpoint], tmp_path: Path) -> None:
    import shutil

    from adapters.serve.engine import engine

    def copy(name: str) -> Path:
        return Path(shutil.copytree(checkpoints["qwen3"].path, tmp_path / name))

    mistral = _write(copy("mistral"), architectures=["MistralForCausalLM"], model_type="mistral")
    with pytest.raises(ValueError, match=r"architecture \['MistralForCausalLM'\] is not supported"):
        hf.load(mistral)
    with pytest.raises(ValueError, match="MistralForCausalLM"):
        engine(str(mistral))  # serve --model exits 2 with this message
    windowed = _write(copy("window"), use_sliding_window=True)
    with pytest.raises(ValueError, match="use_sliding_window=True is not supported"):
        hf.read_config(windowed)
    yarn = _write(copy("yarn"), rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4})
    with pytest.raises(ValueError, match="rope type 'yarn' is not supported"):
        hf.read_config(yarn)
    no_weights = copy("no_weights")
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"holds no weights: neither model\.safetensors"):
        hf.check(no_weights)
    shard = Path(shutil.copytree(checkpoints["llama"].path, tmp_path / "shard"))
    first = sorted(shard.glob("model-*.safetensors"))[0]
    first.unlink()
    with pytest.raises(ValueError, match=f"shard file .*{first.name}.* is missing"):
        hf.load(shard)
    stale = copy("stale_index")  # an unsharded save over a sharded one: model.safetensors wins
    (stale / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "gone.safetensors"}}))
    assert hf.load(stale)[0] == checkpoints["qwen3"].cfg
    no_tokenizer = copy("no_tokenizer")
    (no_tokenizer / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match=r"has no tokenizer\.json"):
        hf.check(no_tokenizer)
    assert not hf.is_checkpoint(tmp_path / "nothing")


@pytest.fixture(scope="module")
def served_llama(
    checkpoints: dict[str, Checkpoint], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    from adapters.serve.process import served

    root = tmp_path_factory.mktemp("serve_hf")
    with served(str(checkpoints["llama"].path), root=root, log=root / "serve.log") as url:
        yield url


def test_sdk_sampling_from_serve_gives_transformers_logprobs(
    checkpoints: dict[str, Checkpoint], served_llama: str
) -> None:
    import tinker

    from adapters.serve.process import API_KEY

    ck = checkpoints["llama"]
    service = tinker.ServiceClient(base_url=served_llama, api_key=API_KEY)
    try:
        trainer = service.create_lora_training_client(str(ck.path), rank=4).result()
        theirs = transformers.AutoTokenizer.from_pretrained(str(ck.path))
        tokenizer = trainer.get_tokenizer()  # the checkpoint's own, from the path the server reports
        for text in TEXTS:
            assert tokenizer.encode(text, add_special_tokens=False) == theirs.encode(
                text, add_special_tokens=False
            )
        sampler = trainer.save_weights_and_get_sampling_client().result()
        prompt = theirs.encode(TEXTS[0], add_special_tokens=False)
        params = types.SamplingParams(max_tokens=10, temperature=1.0, seed=3)
        response = sampler.sample(types.ModelInput.from_ints(prompt), 2, params).result()
        full = np.zeros(PROBE, np.int64)  # right padding: the forward is causal
        for b, seq in enumerate(response.sequences):
            assert len(seq.tokens) == 10
            assert max(seq.tokens) < ck.cfg.tokenizer_vocab  # no spare row (~6 % of a random model's mass)
            full[b, : len(prompt) + 10] = [*prompt, *seq.tokens]
        sampled = slice(len(prompt) - 1, len(prompt) + 9)
        got = np.asarray([seq.logprobs for seq in response.sequences])
        with torch.no_grad():
            np.testing.assert_allclose(got, _torch_logprobs(ck.net, full).numpy()[:, sampled], atol=1e-4)
        # the server's KV-cache decode against our own full forward of the same tokens
        np.testing.assert_allclose(got, _our_logprobs(ck, full)[:, sampled], atol=2e-5)
    finally:
        service.close("success").result(timeout=30)


# --- bfloat16 compute (ModelConfig.compute_dtype; serve / train --dtype) ------------------------------


@pytest.mark.parametrize("arch", ["llama", pytest.param("qwen3", marks=EXHAUSTIVE)])
def test_bfloat16_logprobs_stay_near_float32(checkpoints: dict[str, Checkpoint], arch: str) -> None:
    """bf16 operands, f32 accumulation: max |Δ| 0.037-0.089 and mean 0.009-0.017 measured over three
    probes of each checkpoint (logprob std 1.2-1.4), so the bounds leave a margin of 2×; and Δ is no
    float32 rounding (≥ 1e-3): the products really take bfloat16 operands."""
    ck = checkpoints[arch]
    ids = np.random.default_rng(3).integers(0, VOCAB, PROBE)
    f32 = _our_logprobs(ck, ids)
    bf16 = _our_logprobs(ck._replace(cfg=ck.cfg._replace(compute_dtype="bfloat16")), ids)
    assert bf16.dtype == np.float32
    delta = np.abs(bf16 - f32)
    assert 1e-3 < delta.max() < 0.2 and delta.mean() < 0.035


def test_a_bfloat16_service_computes_every_client_in_bfloat16(
    checkpoints: dict[str, Checkpoint], tmp_path: Path
) -> None:
    """The service's setting reaches its trainers, their samplers, resumed runs and samplers of saved
    weights; the files it writes do not record it (a file reads back as float32)."""
    ck = checkpoints["llama"]
    service = LocalServiceClient(seed=0, root=tmp_path / "service", compute_dtype="bfloat16")
    trainer = service.create_lora_training_client(str(ck.path), rank=4).result()
    sampler = trainer.save_weights_and_get_sampling_client("w").result()
    state = trainer.save_state("s").result().path
    resumed = service.create_training_client_from_state_with_optimizer(state).result()
    trainer.load_state(state).result()  # the file's float32 config takes the client's dtype
    from_file = service.create_sampling_client(model_path=str(tmp_path / "service/weights/w.safetensors"))
    clients = [trainer._state.cfg, sampler._cfg, resumed._state.cfg, from_file.result()._cfg]
    assert all(cfg == ck.cfg._replace(compute_dtype="bfloat16") for cfg in clients)
    assert m.read_tensors(state, "state")[0]["config"] == m.config_json(ck.cfg)


@EXHAUSTIVE  # ~18 s cold on the loaded 2-core machine: the bf16 sampler and training step compile anew
def test_bfloat16_sampler_and_trainer_agree_and_a_step_learns(
    checkpoints: dict[str, Checkpoint], tmp_path: Path
) -> None:
    """A bf16 service: the sampler's logprobs of its tokens equal the trainer's forward of them to 2e-2
    (measured: 5e-3 at most on this Qwen3 and 2e-7 on the Llama, in a decode of m.generate_rows; float32:
    ~1e-6); one cross-entropy step on those sequences is finite and lowers their loss (measured
    122.6 → 113.2 at learning rate 1e-3; 1e-2 overshoots, 123.3), weights and Adam state staying float32."""
    ck = checkpoints["qwen3"]
    service = LocalServiceClient(seed=0, root=tmp_path / "service", compute_dtype="bfloat16")
    trainer = service.create_lora_training_client(str(ck.path), rank=4).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = [5, 9, 17, 40, 41]
    params = types.SamplingParams(max_tokens=12, temperature=1.0, seed=3)
    response = sampler.sample(types.ModelInput.from_ints(prompt), 2, params).result()
    ids = np.asarray([[*prompt, *seq.tokens] for seq in response.sequences])
    weights = np.zeros((2, ids.shape[1] - 1))
    weights[:, len(prompt) - 1 :] = 1.0  # the sampled tokens
    data = _datums(ids, weights)
    first = trainer.forward_backward(data, "cross_entropy").result()
    trained = np.asarray([out["logprobs"].to_numpy()[len(prompt) - 1 :] for out in first.loss_fn_outputs])
    sampled = np.asarray([seq.logprobs for seq in response.sequences])
    assert np.abs(trained - sampled).max() < 2e-2
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    after = trainer.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]  # same program
    before = first.metrics["loss:sum"]
    assert np.isfinite(before) and np.isfinite(after) and after < before - 1.0
    leaves = jax.tree_util.tree_leaves((trainer._state.trainable, trainer._state.frozen))
    leaves += [x for x in jax.tree_util.tree_leaves(trainer._state.opt_state) if x.ndim > 0]
    assert {x.dtype for x in leaves} == {np.dtype(np.float32)}


def test_compute_dtype_is_checked_by_name() -> None:
    with pytest.raises(ValueError, match=r"ModelConfig\.compute_dtype must be one of 'float32', 'bfloat16'"):
        m.init_params(m.SIZES["tiny"]._replace(compute_dtype="float16"), jax.random.key(0))
    with pytest.raises(ValueError, match=r"compute_dtype must be one of 'float32', 'bfloat16', got 'fp8'"):
        LocalServiceClient(compute_dtype="fp8")
