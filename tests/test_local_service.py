"""The local JAX service: gradients, sampling/training agreement, snapshots, determinism, checkpoints, errors.

Everything runs on the ``tiny`` model with a few fixed shapes, so the jit caches are shared across tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")
pytest.importorskip("safetensors")

import jax.numpy as jnp  # noqa: E402
import tinker  # noqa: E402
from tinker import types  # noqa: E402

from adapters.local import (  # noqa: E402
    LocalServiceClient,
    LocalTrainingClient,
    train_step,
)
from adapters.local import model as m  # noqa: E402
from adapters.tokenizers import ByteTokenizer  # noqa: E402

PROMPT = types.ModelInput.from_ints(list(b"What is 2+3? "))
GREEDY = types.SamplingParams(max_tokens=12, temperature=0.0)
ADAM = types.AdamParams(learning_rate=1e-2)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _trainer(seed: int = 0, root: Path | None = None, rank: int = 4) -> LocalTrainingClient:
    return await LocalServiceClient(seed=seed, root=root).create_lora_training_client("tiny", rank=rank)


def ce_datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    w = weights if weights is not None else [1.0] * (len(tokens) - 1)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": w},
    )


def rl_datum(tokens: list[int], logprobs: list[float], advantages: list[float]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "logprobs": logprobs, "advantages": advantages},
    )


TOKENS = list(b"2+3=5. 7*6=42.")


def _leaves_equal(a: Any, b: Any) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(
        x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(la, lb, strict=True)
    )


def test_each_loss_gradient_through_the_model_matches_finite_differences() -> None:
    cfg = m.SIZES["tiny"]
    with jax.enable_x64(True):
        params = jax.tree_util.tree_map(
            lambda x: x.astype(jnp.float64), m.init_params(cfg, jax.random.key(0))
        )
        lora = m.init_lora(cfg, 2, jax.random.key(1))
        lora = jax.tree_util.tree_map(
            lambda x: (x + 0.05).astype(jnp.float64), lora
        )  # B ≠ 0: gradients reach A
        rng = np.random.default_rng(0)
        tokens = jnp.asarray(rng.integers(0, 256, (2, 8)), jnp.int32)
        targets = jnp.asarray(rng.integers(0, 256, (2, 8)), jnp.int32)
        mask = jnp.asarray(np.arange(8)[None, :] < np.array([[8], [5]]))
        sampler_lp = jnp.asarray(-rng.uniform(4.0, 7.0, (2, 8)))
        adv = jnp.asarray(rng.normal(size=(2, 8)))
        direction = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=x.shape), jnp.float64), lora)
        cases = {
            "cross_entropy": (adv, adv, ()),
            "importance_sampling": (sampler_lp, adv, ()),
            "ppo": (sampler_lp, adv, (("clip_high_threshold", 50.0),)),
            "cispo": (sampler_lp, adv, ()),
            "dro": (sampler_lp, adv, (("beta", 0.3),)),
        }

        @jax.jit
        def check(lora: Any, direction: Any) -> dict[str, jax.Array]:
            out = {}
            for name, (a, b, options) in cases.items():

                def f(lo: Any, name: str = name, a: Any = a, b: Any = b, options: Any = options) -> jax.Array:
                    lp = m.token_logprobs(cfg, m.merge_lora(params, lo), tokens, targets)
                    return train_step.token_loss(name, lp, a, b, mask, dict(options)).loss

                g = jax.grad(f)(lora)
                leaves = zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(direction), strict=True)
                analytic = sum(jnp.vdot(x, y) for x, y in leaves)
                value = f
                if name == "cispo":  # a surrogate: its gradient treats the clipped ratio as a constant
                    lp0 = m.token_logprobs(cfg, m.merge_lora(params, lora), tokens, targets)
                    w = jnp.clip(jnp.exp(lp0 - a), 0.0, 4.0) * b

                    def value(lo: Any, w: Any = w) -> jax.Array:
                        lp = m.token_logprobs(cfg, m.merge_lora(params, lo), tokens, targets)
                        return train_step.token_loss("cross_entropy", lp, w, w, mask, {}).loss

                h = 1e-5

                def shifted(s: float, value: Any = value) -> jax.Array:
                    return value(jax.tree_util.tree_map(lambda p, d: p + s * d, lora, direction))

                out[name] = jnp.stack([analytic, (shifted(h) - shifted(-h)) / (2 * h)])
            return out

        for name, pair in check(lora, direction).items():
            analytic, numeric = np.asarray(pair)
            assert analytic == pytest.approx(numeric, rel=1e-4, abs=1e-8), name


def test_sampling_logprobs_equal_a_forward_pass_over_the_same_tokens() -> None:
    async def main() -> None:
        trainer = await _trainer()
        sampler = await trainer.save_weights_and_get_sampling_client()
        response = await sampler.sample(PROMPT, 3, types.SamplingParams(max_tokens=12, temperature=1.0))
        prompt = PROMPT.to_ints()
        for seq in response.sequences:
            assert len(seq.tokens) == len(seq.logprobs) == 12
            full = prompt + seq.tokens
            out = await trainer.forward([ce_datum(full)], "cross_entropy")
            train_lp = out.loss_fn_outputs[0]["logprobs"].to_numpy()[len(prompt) - 1 :]
            np.testing.assert_allclose(train_lp, seq.logprobs, atol=1e-4)
        assert await sampler.compute_logprobs(types.ModelInput.from_ints(full)) == pytest.approx(
            [None, *out.loss_fn_outputs[0]["logprobs"].to_numpy().tolist()], abs=1e-4
        )

    run(main())


def test_stop_sequences_end_rows_and_are_included() -> None:
    async def main() -> None:
        trainer = await _trainer()
        sampler = await trainer.save_weights_and_get_sampling_client()
        free = (await sampler.sample(PROMPT, 1, GREEDY)).sequences[0]
        assert free.stop_reason == "length"
        token = free.tokens[4]
        by_token = (await sampler.sample(PROMPT, 1, GREEDY.model_copy(update={"stop": [token]}))).sequences[0]
        cut = free.tokens.index(token) + 1
        assert (by_token.tokens, by_token.stop_reason) == (free.tokens[:cut], "stop")
        assert by_token.logprobs == free.logprobs[:cut]
        text = ByteTokenizer().decode(free.tokens[2:4])
        if all(t < 256 for t in free.tokens[2:4]) and text.isascii():
            by_text = (await sampler.sample(PROMPT, 1, GREEDY.model_copy(update={"stop": [text]}))).sequences[
                0
            ]
            assert by_text.stop_reason == "stop"
            assert ByteTokenizer().decode(by_text.tokens).endswith(text)

    run(main())


def test_top_k_and_top_p_filters() -> None:
    """top_k keeps the k largest logits, top_p the smallest sorted prefix whose mass reaches p, and a row
    with top_k <= 0 and top_p >= 1 is left exactly as it is, even when its tail's preceding mass rounds to
    1 in float32 (the sampler then skips the sorts for a batch of such rows: the same draw)."""
    probs = np.array([0.4, 0.3, 0.2, 0.1], np.float32)
    tail = np.concatenate([[30.0], np.linspace(-10.0, -20.0, 255)]).astype(np.float32)
    rows = np.stack([np.log(np.pad(probs, (0, 252), constant_values=1e-9)), tail] * 3)
    top_k = jnp.array([2, -1, -1, 0, 0, 1])
    top_p = jnp.array([1.0, 1.0, 0.5, 1.0, 0.95, 1.0])
    out = np.asarray(m._top_k_top_p(jnp.asarray(rows), top_p, top_k))
    finite = np.isfinite(out)
    assert finite.sum(axis=1).tolist() == [2, 256, 2, 256, 4, 1]
    assert finite[0, :2].all() and finite[2, :2].all() and finite[4, :4].all() and finite[5, 0]
    np.testing.assert_array_equal(out[finite], rows[finite])  # kept logits are untouched
    np.testing.assert_array_equal(out[[1, 3]], rows[[1, 3]])
    keys = jax.random.split(jax.random.key(3), 6)
    plain = m._choose(keys, jnp.asarray(rows), jnp.ones(6), jnp.ones(6), jnp.full(6, -1))
    mixed = m._choose(keys, jnp.asarray(rows), jnp.ones(6), top_p, top_k)
    for r in (1, 3):  # unfiltered rows draw the same token whether or not the batch filters
        assert int(plain[0][r]) == int(mixed[0][r]) and float(plain[1][r]) == float(mixed[1][r])
    assert all(finite[r, int(mixed[0][r])] for r in range(6))  # every draw is a kept token


def test_sampler_is_a_snapshot_later_steps_never_change_it() -> None:
    async def main() -> None:
        trainer = await _trainer()
        before = await trainer.save_weights_and_get_sampling_client()
        first = (await before.sample(PROMPT, 2, GREEDY)).sequences
        for _ in range(3):
            await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
            await trainer.optim_step(ADAM)
        again = (await before.sample(PROMPT, 2, GREEDY)).sequences
        after = (
            await (await trainer.save_weights_and_get_sampling_client()).sample(PROMPT, 2, GREEDY)
        ).sequences
        assert [s.tokens for s in again] == [s.tokens for s in first]
        assert [s.logprobs for s in again] == [s.logprobs for s in first]
        assert [s.logprobs for s in after] != [s.logprobs for s in first]

    run(main())


def test_runs_are_deterministic_from_the_seed() -> None:
    async def trace(seed: int) -> tuple[list[list[int]], float]:
        trainer = await _trainer(seed)
        sampler = await trainer.save_weights_and_get_sampling_client()
        sampled = (await sampler.sample(PROMPT, 2, types.SamplingParams(max_tokens=12))).sequences
        await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        await trainer.optim_step(ADAM)
        out = await trainer.forward([ce_datum(TOKENS)], "cross_entropy")
        return [s.tokens for s in sampled], out.metrics["loss:sum"]

    assert run(trace(0)) == run(trace(0))
    assert run(trace(0)) != run(trace(1))


def test_forward_backward_calls_accumulate_until_the_optimizer_step() -> None:
    """Gradients of two forward_backward calls add up: two calls then optim_step give the weights of one
    call on both datums (to float32 rounding; Tinker's semantics, which streamed training relies on)."""
    rng = np.random.default_rng(0)
    data = [
        rl_datum(TOKENS, list(-rng.random(len(TOKENS) - 1)), list(rng.normal(size=len(TOKENS) - 1)))
        for _ in range(4)
    ]
    adam = types.AdamParams(learning_rate=1e-2)

    async def trained(calls: list[list[types.Datum]]) -> Any:
        trainer = await _trainer(seed=3)
        before = trainer._state.trainable
        for chunk in calls:
            await trainer.forward_backward(chunk, "importance_sampling")
        await trainer.optim_step(adam)
        return before, trainer._state.trainable

    before, whole = run(trained([data]))
    _, parts = run(trained([data[:1], data[1:3], data[3:]]))
    _, last = run(trained([data[3:]]))
    moved = [
        float(jnp.max(jnp.abs(w - b)))
        for w, b in zip(jax.tree_util.tree_leaves(whole), jax.tree_util.tree_leaves(before), strict=True)
    ]
    assert max(moved) > 1e-3  # the step moved the adapters
    for w, p in zip(jax.tree_util.tree_leaves(whole), jax.tree_util.tree_leaves(parts), strict=True):
        np.testing.assert_allclose(np.asarray(p), np.asarray(w), rtol=1e-4, atol=1e-6)
    apart = [
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(jax.tree_util.tree_leaves(last), jax.tree_util.tree_leaves(whole), strict=True)
    ]
    assert max(apart) > 1e-3  # the last call alone is another step: the tolerance above tells them apart


def test_requests_run_in_submission_order() -> None:
    async def main() -> None:
        trainer = await _trainer()
        f1 = trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        f2 = trainer.optim_step(ADAM)
        f3 = trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        third, _, first = await f3, await f2, await f1.result_async()
        assert third.metrics["loss:sum"] < first.metrics["loss:sum"]  # the step ran between them

    run(main())


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    async def main() -> None:
        service = LocalServiceClient(seed=0, root=tmp_path)
        trainer = await service.create_lora_training_client("tiny", rank=4)
        for _ in range(2):
            await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
            await trainer.optim_step(ADAM)
        path = (await trainer.save_state("step2")).path
        assert Path(path).parent == tmp_path / "states" and not list(Path(path).parent.glob(".*tmp"))
        resumed = await service.create_training_client_from_state_with_optimizer(path)
        assert resumed.step == 2
        assert _leaves_equal(resumed._state.trainable, trainer._state.trainable)
        assert _leaves_equal(resumed._state.frozen, trainer._state.frozen)
        assert _leaves_equal(resumed._state.opt_state, trainer._state.opt_state)
        for client in (trainer, resumed):
            await client.forward_backward([ce_datum(TOKENS)], "cross_entropy")
            await client.optim_step(ADAM)
        assert _leaves_equal(resumed._state.trainable, trainer._state.trainable)
        assert _leaves_equal(resumed._state.opt_state, trainer._state.opt_state)
        fresh = await service.create_lora_training_client("tiny", rank=4)
        await fresh.load_state_with_optimizer(path)
        assert fresh.step == 2

    run(main())


def test_full_fine_tuning_and_weights_files_as_base_models(tmp_path: Path) -> None:
    async def main() -> None:
        service = LocalServiceClient(seed=0, root=tmp_path)
        trainer = await service.create_full_training_client("tiny")
        await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        await trainer.optim_step(ADAM)
        path = (await trainer.save_weights_for_sampler("w")).path
        sampler = await service.create_sampling_client(model_path=path)
        lora = await service.create_lora_training_client(path, rank=4)
        ours = await (await trainer.save_weights_and_get_sampling_client()).sample(PROMPT, 1, GREEDY)
        theirs = await (await lora.save_weights_and_get_sampling_client()).sample(PROMPT, 1, GREEDY)
        assert (await sampler.sample(PROMPT, 1, GREEDY)).sequences[0].tokens == ours.sequences[0].tokens
        assert theirs.sequences[0].tokens == ours.sequences[0].tokens  # a fresh adapter changes nothing

    run(main())


def test_custom_loss_gives_the_same_gradient_as_the_builtin_loss() -> None:
    async def main() -> None:
        weights = [0.5 * (i % 3) for i in range(len(TOKENS) - 1)]
        data = [ce_datum(TOKENS, weights), ce_datum(TOKENS[:9])]
        builtin, custom = await _trainer(), await _trainer()
        out = await builtin.forward_backward(data, "cross_entropy")

        def loss_fn(data: list[types.Datum], logprobs: list[jax.Array]) -> tuple[jax.Array, dict[str, Any]]:
            total = sum(
                -jnp.sum(lp * jnp.asarray(d.loss_fn_inputs["weights"].to_numpy()))
                for d, lp in zip(data, logprobs, strict=True)
            )
            return jnp.asarray(total), {"tokens": sum(lp.shape[0] for lp in logprobs)}

        got = await custom.forward_backward_custom(data, loss_fn)
        assert got.metrics["loss:sum"] == pytest.approx(out.metrics["loss:sum"], rel=1e-5)
        assert got.metrics["tokens"] == len(TOKENS) - 1 + 8
        for a, b in zip(*(jax.tree_util.tree_leaves(c._state.grads) for c in (builtin, custom)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

    run(main())


def test_rl_losses_run_and_return_per_token_logprobs() -> None:
    async def main() -> None:
        trainer = await _trainer()
        n = len(TOKENS) - 1
        datum = rl_datum(TOKENS, [-5.0] * n, [1.0] * n)
        for loss_fn, config in [
            ("importance_sampling", None),
            ("ppo", None),
            ("cispo", None),
            ("dro", {"beta": 0.1}),
        ]:
            out = await trainer.forward_backward([datum], loss_fn, config)  # type: ignore[arg-type]
            assert out.loss_fn_outputs[0]["logprobs"].to_numpy().shape == (n,)
            assert np.isfinite(out.metrics["loss:sum"])

    run(main())


GSPO_CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}


def _gspo_data(model_lp: list[np.ndarray]) -> list[types.Datum]:
    """Two datums, a prompt (lp_q 0, A 0) then actions: the first off-policy by +0.3 nats a token (s ≈ 1.35:
    its A > 0 tokens clip), with an explicit ``sequence_ratio_mask`` leaving one action out; the second by
    −0.1 (s ≈ 0.9, nothing clips), M by default its tokens with A ≠ 0."""
    out = []
    for k, (tokens, shift, prompt) in enumerate([(TOKENS, 0.3, 4), (TOKENS[:10], -0.1, 3)]):
        n = len(tokens) - 1
        acting = np.arange(n) >= prompt
        lp_q = np.where(acting, model_lp[k] - shift, 0.0).astype(np.float32)
        adv = np.where(acting, np.where(np.arange(n) % 2 == 0, 0.7, -0.4), 0.0).astype(np.float32)
        inputs: dict[str, Any] = {"target_tokens": tokens[1:], "logprobs": lp_q, "advantages": adv}
        if k == 0:
            inputs["sequence_ratio_mask"] = (acting & (np.arange(n) != n - 1)).astype(np.float32)
        out.append(types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs))
    return out


def test_gspo_equals_the_kernel_loss_in_values_and_gradients() -> None:
    import kernel

    async def main() -> None:
        builtin, reference = await _trainer(), await _trainer()
        probe = await builtin.forward([ce_datum(TOKENS), ce_datum(TOKENS[:10])], "cross_entropy")
        data = _gspo_data([o["logprobs"].to_numpy() for o in probe.loss_fn_outputs])
        out = await builtin.forward_backward(data, "gspo", GSPO_CLIP)
        total, clipped, weighted = 0.0, 0.0, []
        for d, o in zip(data, out.loss_fn_outputs, strict=True):
            inputs = {k: v.to_numpy() for k, v in d.loss_fn_inputs.items()}
            lp, lp_q, adv = o["logprobs"].to_numpy(), inputs["logprobs"], inputs["advantages"]
            ratio = inputs.get("sequence_ratio_mask", adv) != 0
            want = kernel.gspo_loss(lp, lp_q, adv, ratio_where=ratio, **GSPO_CLIP)
            got = o["elementwise_loss"].to_numpy()
            np.testing.assert_allclose(got, want.per_token_loss, rtol=1e-5, atol=1e-6)
            total, clipped = total + float(want.loss), clipped + float(want.clip_fraction)
            # ∂ℓ_t/∂lp_t = −s·A_t off the clipped branch: the gradient of cross-entropy weighted by s·A
            s = np.exp(np.mean((lp - lp_q)[ratio]))
            off = ((adv > 0) & (s > 1.2)) | ((adv < 0) & (s < 0.8))
            weights = np.where(off, 0.0, s * adv).astype(np.float32)
            ce = {"target_tokens": inputs["target_tokens"], "weights": weights}
            weighted.append(types.Datum(model_input=d.model_input, loss_fn_inputs=ce))
        assert out.metrics["loss:sum"] == pytest.approx(total, rel=1e-5)
        assert clipped > 0  # the first datum's positive tokens took the clipped branch
        await reference.forward_backward(weighted, "cross_entropy")
        for a, b in zip(
            *(jax.tree_util.tree_leaves(c._state.grads) for c in (builtin, reference)), strict=True
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)

    run(main())


def test_gspo_and_stable_reinforce_refusals_name_what_is_missing() -> None:
    async def main() -> None:
        trainer = await _trainer()
        n = len(TOKENS) - 1
        datum = rl_datum(TOKENS, [-5.0] * n, [1.0] * n)
        with pytest.raises(ValueError, match=r"gspo' needs loss_fn_config \['clip_high_threshold'\]"):
            await trainer.forward_backward([datum], "gspo", {"clip_low_threshold": 0.8})
        short = types.Datum(
            model_input=datum.model_input,
            loss_fn_inputs={**datum.loss_fn_inputs, "sequence_ratio_mask": [1.0] * (n - 1)},
        )
        with pytest.raises(ValueError, match=r"data\[0\].loss_fn_inputs\['sequence_ratio_mask'\] has shape"):
            await trainer.forward_backward([short], "gspo", GSPO_CLIP)
        with pytest.raises(tinker.RequestFailedError, match=r"provenance spans on every datum.*data\[0\]"):
            await trainer.forward_backward([datum], "stable_reinforce")

    run(main())


def test_bad_input_gives_clear_errors_and_loses_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        service = LocalServiceClient(seed=0, root=tmp_path)
        with pytest.raises(ValueError, match="unknown base_model 'huge'"):
            await service.create_lora_training_client("huge", rank=4)
        trainer = await service.create_lora_training_client("tiny", rank=4)
        grads = trainer._state.grads
        bad = types.Datum(
            model_input=types.ModelInput.from_ints([1, 2, 3]),
            loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0]},
        )
        with pytest.raises(ValueError, match=r"data\[1\].loss_fn_inputs\['weights'\] has shape \[2\]"):
            await trainer.forward_backward([ce_datum(TOKENS), bad], "cross_entropy")
        assert trainer._state.grads is grads  # the good datum was not half-applied
        with pytest.raises(ValueError, match="lacks 'logprobs'"):
            await trainer.forward_backward([ce_datum(TOKENS)], "ppo")
        with pytest.raises(ValueError, match="beta"):
            await trainer.forward_backward([rl_datum(TOKENS, [0.0] * 13, [0.0] * 13)], "dro")
        sampler = await trainer.save_weights_and_get_sampling_client()
        too_long = types.ModelInput.from_ints([1] * 4096)
        with pytest.raises(ValueError, match=r"prompt has 4096 tokens; the model's context is 4096"):
            await sampler.sample(too_long, 1, GREEDY)
        assert len((await sampler.sample(PROMPT, 1, GREEDY)).sequences[0].tokens) == 12  # still serves
        path = (await trainer.save_state("ok")).path
        corrupt = tmp_path / "corrupt.safetensors"
        corrupt.write_bytes(Path(path).read_bytes()[:100])
        with pytest.raises(ValueError, match=r"corrupt\.safetensors"):
            await service.create_training_client_from_state_with_optimizer(str(corrupt))
        with pytest.raises(ValueError, match=r"corrupt\.safetensors"):
            await trainer.load_state_with_optimizer(str(corrupt))
        out = await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        assert np.isfinite(out.metrics["loss:sum"])

    run(main())


def test_tokenizer_is_the_byte_tokenizer() -> None:
    trainer = run(_trainer())
    assert isinstance(trainer.get_tokenizer(), ByteTokenizer)


def _dot_precisions(jaxpr: Any) -> list[Any]:
    """The precision of every dot_general in a (closed) jaxpr, sub-jaxprs (scan, while, cond) included."""
    found = []
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                if hasattr(sub, "eqns") or hasattr(sub, "jaxpr"):
                    found.extend(_dot_precisions(sub))
    return found


def test_every_matrix_product_is_full_float32() -> None:
    # TensorFloat-32 (JAX's default on recent NVIDIA GPUs) made sampler and trainer logprobs differ by
    # ~1e-3 on an H100; CPUs ignore the setting, so the traced programs are checked instead
    cfg = m.SIZES["tiny"]
    params = m.init_params(cfg, jax.random.key(0))
    lora = m.init_lora(cfg, 2, jax.random.key(1))
    tokens = jnp.ones((2, 8), jnp.int32)
    arrays = (tokens, tokens, jnp.ones((2, 8), bool), jnp.ones((2, 8)), jnp.zeros((2, 8)))
    grads = jax.tree_util.tree_map(jnp.zeros_like, lora)

    def step(lora: Any) -> Any:
        return train_step.forward_backward(
            lora, params, grads, arrays, cfg=cfg, loss_fn="importance_sampling", options=(), backward=True
        )

    def sample(params: Any) -> Any:
        return m.generate(cfg, params, [1, 2, 3], num_samples=2, max_tokens=4, key=jax.random.key(2))

    full = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    for program in (jax.make_jaxpr(step)(lora), jax.make_jaxpr(sample)(params)):
        precisions = _dot_precisions(program)
        assert len(precisions) >= 8 and all(p == full for p in precisions), precisions


def test_bucket_shapes_do_not_retrace() -> None:
    async def main() -> None:
        trainer = await _trainer()
        sampler = await trainer.save_weights_and_get_sampling_client()
        await sampler.sample(PROMPT, 3, GREEDY)
        before = m._generate._cache_size()
        for n, k in [(5, 3), (9, 4), (14, 4)]:
            await sampler.sample(types.ModelInput.from_ints(list(range(1, n + 1))), k, GREEDY)
        assert m._generate._cache_size() == before

    run(main())


def test_row_chunks_give_the_same_gradients_and_logprobs(monkeypatch: pytest.MonkeyPatch) -> None:
    async def grads_and_logprobs() -> tuple[Any, list[Any]]:
        trainer = await _trainer()
        out = await trainer.forward_backward([ce_datum(TOKENS), ce_datum(TOKENS[:7])], "cross_entropy")
        return trainer._state.grads, [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]

    whole = run(grads_and_logprobs())
    monkeypatch.setattr(train_step, "_ATTENTION_BUDGET", 1)  # one row per call
    assert train_step.chunk_rows(m.SIZES["tiny"], 16) == 1
    chunked = run(grads_and_logprobs())
    for a, b in zip(*(jax.tree_util.tree_leaves(g[0]) for g in (whole, chunked)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    for a, b in zip(whole[1], chunked[1], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_concurrent_samples_are_batched_and_equal_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = m.generate_rows

    def counting(cfg: Any, params: Any, rows: list[Any], **kw: Any) -> Any:
        calls.append(len(rows))
        return real(cfg, params, rows, **kw)

    monkeypatch.setattr(m, "generate_rows", counting)
    hot = types.SamplingParams(max_tokens=12, temperature=1.0)
    requests = [
        (PROMPT, 2, hot),
        (types.ModelInput.from_ints(list(b"7*6=")), 1, hot.model_copy(update={"max_tokens": 5})),
        (types.ModelInput.from_ints(list(b"A much longer prompt, 1+1=")), 3, GREEDY),
        (PROMPT, 1, hot.model_copy(update={"stop": ["e"], "top_k": 5})),
        (PROMPT, 1, hot.model_copy(update={"seed": 7})),
    ]

    async def sampled(concurrently: bool) -> list[list[tuple[list[int], list[float], str]]]:
        sampler = await (await _trainer()).save_weights_and_get_sampling_client()
        if concurrently:
            responses = await asyncio.gather(*(sampler.sample(*r) for r in requests))
        else:
            responses = [await sampler.sample(*r) for r in requests]
        return [
            [(s.tokens, list(s.logprobs or []), s.stop_reason) for s in resp.sequences] for resp in responses
        ]

    one_by_one = run(sampled(False))
    assert calls == [2, 1, 3, 1, 1]
    calls.clear()
    batched = run(sampled(True))
    assert calls == [8]  # one batched call for all five requests
    assert [len(r) for r in batched] == [2, 1, 3, 1, 1]
    for mine, theirs in zip(batched, one_by_one, strict=True):
        for (tok_a, lp_a, why_a), (tok_b, lp_b, why_b) in zip(mine, theirs, strict=True):
            assert tok_a == tok_b and why_a == why_b
            np.testing.assert_allclose(lp_a, lp_b, atol=1e-5)
    assert batched[0][0][0] != batched[0][1][0]  # the two samples of one request differ
    assert len(batched[1][0][0]) == 5 and batched[3][0][2] in ("stop", "length")


def test_a_bad_request_in_a_batch_fails_alone() -> None:
    async def main() -> None:
        sampler = await (await _trainer()).save_weights_and_get_sampling_client()
        too_long = types.ModelInput.from_ints([1] * m.SIZES["tiny"].max_seq_len)
        good, bad = sampler.sample(PROMPT, 1, GREEDY), sampler.sample(too_long, 1, GREEDY)
        other = sampler.sample(PROMPT, 1, GREEDY.model_copy(update={"top_p": 0.0}))
        assert len((await good).sequences[0].tokens) == 12
        with pytest.raises(ValueError, match="context"):
            await bad
        with pytest.raises(ValueError, match="top_p"):
            await other

    run(main())


def test_sampling_options_that_overflowed_inside_a_batch_fail_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A top_k or stop id of 2**31 passed the checks and overflowed int32 inside the batched call, which
    failed every request queued with it; top_p = 1e-46 (0 in float32) always sampled token 0. A stop id
    outside the vocabulary and such a top_p are refused on their own now; a top_k beyond the vocabulary
    keeps every token (as -1 does); and when a batched
    call fails anyway, its requests are sampled again one by one, so only a request failing alone fails."""

    async def main() -> None:
        sampler = await (await _trainer()).save_weights_and_get_sampling_client()
        bad_params = {
            "stop": GREEDY.model_copy(update={"stop": [2**31]}),
            "top_p": GREEDY.model_copy(update={"top_p": 1e-46}),
        }
        for name, params in bad_params.items():
            futures = [sampler.sample(PROMPT, 1, GREEDY) for _ in range(2)]
            futures.append(sampler.sample(PROMPT, 1, params))
            futures += [sampler.sample(PROMPT, 2, GREEDY) for _ in range(2)]
            out = await asyncio.gather(*futures, return_exceptions=True)
            assert isinstance(out[2], ValueError) and name in str(out[2]), (name, out[2])
            assert all(isinstance(r, types.SampleResponse) for k, r in enumerate(out) if k != 2)
        for k in (10**6, 2**31, 2**70):
            wide = await sampler.sample(PROMPT, 1, GREEDY.model_copy(update={"top_k": k}))
            assert wide.sequences[0].tokens == (await sampler.sample(PROMPT, 1, GREEDY)).sequences[0].tokens
        # a failure inside the batched call (not a validation error): the others still return
        calls: list[int] = []
        generate = m.generate_rows

        def flaky(cfg: Any, params: Any, rows: list[Any], **kw: Any) -> Any:
            calls.append(len(rows))
            if any(r.max_tokens == 7 for r in rows):
                raise RuntimeError("boom")
            return generate(cfg, params, rows, **kw)

        monkeypatch.setattr(m, "generate_rows", flaky)
        seven = GREEDY.model_copy(update={"max_tokens": 7})
        futures = [
            sampler.sample(PROMPT, 2, GREEDY),
            sampler.sample(PROMPT, 1, seven),
            sampler.sample(PROMPT, 1, GREEDY),
        ]
        out = await asyncio.gather(*futures, return_exceptions=True)
        assert isinstance(out[1], RuntimeError) and calls[0] == 4
        assert [len(r.sequences) for r in (out[0], out[2])] == [2, 1]
        monkeypatch.setattr(m, "generate_rows", generate)
        alone = await sampler.sample(PROMPT, 2, GREEDY)
        assert [s.tokens for s in out[0].sequences] == [s.tokens for s in alone.sequences]

    run(main())


def test_batched_samples_of_one_request_have_distinct_sequence_ids() -> None:
    async def main() -> None:
        sampler = await (await _trainer()).save_weights_and_get_sampling_client()
        batched = await sampler.sample(PROMPT, 3, GREEDY)  # inside a loop: queued and batched
        ids = [s.sequence_id for s in batched.sequences]
        assert len(set(ids)) == 3 and [i.rsplit("-", 1)[1] for i in ids] == ["0", "1", "2"]

    run(main())
    sampler = run(_trainer()).save_weights_and_get_sampling_client().result()
    direct = sampler.sample(PROMPT, 3, GREEDY).result()  # outside a loop: at once
    assert [s.sequence_id.rsplit("-", 1)[1] for s in direct.sequences] == ["0", "1", "2"]


def test_adam_parameters_that_break_the_weights_are_refused() -> None:
    """beta1 = 1, beta2 = 1 and eps = 0 passed and turned the weights into NaN; a negative or NaN
    grad_clip_norm meant no clipping. Each is an error now, and the state is unchanged."""

    async def main() -> None:
        trainer = await _trainer()
        await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")
        before = trainer._state
        bad = {"beta1": 1.0, "beta2": 1.5, "eps": 0.0, "grad_clip_norm": -1.0}
        for key, value in bad.items():
            with pytest.raises(ValueError, match=key):
                await trainer.optim_step(ADAM.model_copy(update={key: value}))
            assert trainer._state is before
        with pytest.raises(ValueError, match="grad_clip_norm"):
            await trainer.optim_step(ADAM.model_copy(update={"grad_clip_norm": float("nan")}))
        await trainer.optim_step(ADAM)
        assert all(bool(jnp.isfinite(x).all()) for x in jax.tree_util.tree_leaves(trainer.merged_params()))

    run(main())


def test_a_custom_loss_that_fails_commits_nothing() -> None:
    """A metric that is not a number raised after the weighted pass had added its gradients (the next
    step's gradient norm doubled); a NaN gradient was accumulated. Both are refused before any change."""

    async def main() -> None:
        trainer = await _trainer()
        grads = trainer._state.grads
        data = [ce_datum(TOKENS)]
        with pytest.raises(ValueError, match=r"metrics\['note'\] must be a number"):
            await trainer.forward_backward_custom(
                data, lambda d, lps: (-sum(jnp.sum(x) for x in lps), {"note": "hi"})
            )
        with pytest.raises(ValueError, match="gradient with respect to the logprobs is not finite"):
            await trainer.forward_backward_custom(
                data, lambda d, lps: (jnp.nan * sum(jnp.sum(x) for x in lps), {})
            )
        with pytest.raises(TypeError, match=r"loss_fn must return a \(loss, metrics\) pair"):
            await trainer.forward_backward_custom(data, lambda d, lps: sum(jnp.sum(x) for x in lps))
        assert _leaves_equal(trainer._state.grads, grads)  # still all zero

    run(main())


def test_training_and_scoring_inputs_are_checked() -> None:
    async def main() -> None:
        trainer = await _trainer()
        grads = trainer._state.grads
        for targets in (np.full(13, np.nan, np.float32), np.array(TOKENS[1:], np.float32) + 0.7):
            datum = types.Datum(
                model_input=types.ModelInput.from_ints(TOKENS[:-1]),
                loss_fn_inputs={"target_tokens": types.TensorData.from_numpy(targets), "weights": [1.0] * 13},
            )
            with pytest.raises(
                ValueError, match=r"data\[0\]\.loss_fn_inputs\['target_tokens'\] must hold integer"
            ):
                await trainer.forward_backward([datum], "cross_entropy")
        assert trainer._state.grads is grads
        whole = types.TensorData.from_numpy(np.array(TOKENS[1:], np.float32))
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(TOKENS[:-1]),
            loss_fn_inputs={"target_tokens": whole, "weights": [1.0] * 13},
        )
        same = (
            await trainer.forward([datum], "cross_entropy"),
            await trainer.forward([ce_datum(TOKENS)], "cross_entropy"),
        )
        assert same[0].metrics == same[1].metrics
        sampler = await trainer.save_weights_and_get_sampling_client()
        for ids in ([72, 5000, 33], [72, -1, 33], [72, 262, 33]):
            with pytest.raises(ValueError, match=r"prompt token ids must be in \[0, 262\)"):
                await sampler.compute_logprobs(types.ModelInput.from_ints(ids))
        with pytest.raises(ValueError, match=r"rank must be at most the model's d_model \(64\)"):
            await LocalServiceClient(seed=0).create_lora_training_client("tiny", rank=65)

    run(main())


def test_weights_and_checkpoints_with_wrong_dtypes_or_config_types_are_refused(tmp_path: Path) -> None:
    """An int32 tensor loaded and broke the client at its next call; a float config field crashed deep
    in JAX; a negative norm_eps or a NaN weight trained to NaN. Each is refused at load, naming the file."""
    from safetensors.numpy import load, save

    cfg = m.SIZES["tiny"]
    params = m.init_params(cfg, jax.random.key(0))
    good = tmp_path / "good.safetensors"
    m.save_weights(good, cfg, params)
    meta = {"config": __import__("json").dumps(cfg._asdict())}
    flat = load(good.read_bytes())
    variants: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "dtype int32": ({"embed": flat["embed"].astype(np.int32)}, {}),
        "dtype float16": ({"lm_head": flat["lm_head"].astype(np.float16)}, {}),
        "non-finite": ({"lm_head": np.full_like(flat["lm_head"], np.nan)}, {}),
        "d_model must be an int": ({}, {"d_model": 64.0}),
        "num_heads must be an int": ({}, {"num_heads": 4.0}),
        "rope_base must be a finite number": ({}, {"rope_base": "x"}),
        "norm_eps must be a finite number": ({}, {"norm_eps": -1}),
    }
    for name, (tensors, config) in variants.items():
        path = tmp_path / f"bad-{len(config)}-{len(tensors)}-{abs(hash(name))}.safetensors"
        metadata = {"config": __import__("json").dumps({**cfg._asdict(), **config})} if config else meta
        path.write_bytes(save({**flat, **tensors}, metadata=metadata))
        with pytest.raises(ValueError, match=name.split()[0]) as info:
            LocalServiceClient(seed=0).create_lora_training_client(str(path), rank=4).result()
        assert path.name in str(info.value), name

    async def checkpoint() -> None:
        trainer = await LocalServiceClient(seed=0, root=tmp_path).create_lora_training_client("tiny", rank=4)
        state = Path((await trainer.save_state("good")).path)
        saved = load(state.read_bytes())
        from safetensors import safe_open

        with safe_open(str(state), framework="numpy") as f:
            state_meta = f.metadata()
        saved["frozen.embed"] = saved["frozen.embed"].astype(np.int32)
        bad = tmp_path / "bad-state.safetensors"
        bad.write_bytes(save(saved, metadata=state_meta))
        before = trainer._state
        with pytest.raises(ValueError, match=r"bad-state\.safetensors.*dtype int32"):
            await trainer.load_state_with_optimizer(str(bad))
        assert trainer._state is before
        await trainer.forward_backward([ce_datum(TOKENS)], "cross_entropy")  # still works

    run(checkpoint())


def test_arguments_of_the_wrong_type_are_named() -> None:
    service = LocalServiceClient(seed=0)
    for base in (None, 123):
        with pytest.raises(TypeError, match="base_model must be a model name or a weights file path"):
            service.create_lora_training_client(base, rank=4).result()  # type: ignore[arg-type]
    trainer = service.create_lora_training_client("tiny", rank=4).result()
    with pytest.raises(ValueError, match="loss_fn must be one of"):
        trainer.forward_backward([ce_datum(TOKENS)], ["ppo"]).result()  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="loss_fn_config must be a mapping"):
        trainer.forward_backward([ce_datum(TOKENS)], "ppo", [1, 2]).result()  # type: ignore[arg-type]
    sampler = trainer.save_weights_and_get_sampling_client().result()
    with pytest.raises(
        TypeError, match=r"sampling_params must be a tinker\.types\.SamplingParams, got NoneType"
    ):
        sampler.sample(PROMPT, 1, None).result()  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"prompt must be a tinker\.types\.ModelInput, got list"):
        sampler.sample([72, 105], 1, GREEDY).result()  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"prompt must be a tinker\.types\.ModelInput"):
        sampler.compute_logprobs([72, 105]).result()  # type: ignore[arg-type]
    assert len(sampler.sample(PROMPT, 1, GREEDY).result().sequences[0].tokens) == 12
