"""The TRL bridge: reward functions and grouping by hand, then real ``GRPOTrainer`` steps (TRL 1.16, CPU)
with a tiny randomly initialised Llama and a tokenizer trained offline in the test."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

import kernel
from adapters.bridges import trl as bridge

TAGS = (
    "<solution>{}</solution><evaluation>fine</evaluation><comparison>{}</comparison>"
    "<consensus>{}</consensus><consensus_reason>because</consensus_reason>"
)


def _turn(solution: object, comparison: str = "N/A", consensus: str = "NO") -> str:
    return TAGS.format(solution, comparison, consensus)


# --- reward functions and grouping, by hand -------------------------------------------------------------


def test_peer_vote_groups_runs_of_equal_prompts() -> None:
    completions = [
        _turn(4, "Agent 1 > Agent 2"), _turn(4, "Agent 0 > Agent 2"), _turn(5, "Agent 0 = Agent 1"),
        _turn(1, "Agent 1 > Agent 0"), _turn(2, "N/A"),
    ]  # fmt: skip
    prompts = ["q1"] * 3 + ["q2"] * 2
    with pytest.raises(bridge.GroupSplitError, match="runs of \\[2, 3\\]"):
        bridge.peer_vote_reward(prompts, completions)
    # with the agent counts given, the two debates are scored apart. q1 by hand: agent 0 is judged by
    # 1 (0 > 2: win) and 2 (0 = 1: tie) → 1.5/2; agent 1 by 0 (1 > 2: win) and 2 (tie) → 0.75; agent 2
    # by 0 and 1 (two losses) → 0. q2 has two agents: every vote is a self-comparison → 0.
    got = bridge.peer_vote_reward(prompts, completions, num_agents=[3, 3, 3, 2, 2])
    assert got == [0.75, 0.75, 0.0, 0.0, 0.0]


def test_debate_and_agent_columns_override_positions() -> None:
    completions = [_turn(4, "Agent 0 > Agent 1"), _turn(4, "Agent 1 > Agent 2"), _turn(4, "N/A")]
    # row order 2, 0, 1: the columns say who wrote what
    got = bridge.peer_vote_reward(["p"] * 3, completions, debate_id=[7, 7, 7], agent_id=[2, 0, 1])
    # author 2 says 0 > 1; author 0 says 1 > 2; author 1 has no votes. agent 0: 1 win (by 2) → 1.0;
    # agent 1: loss (by 2) and win (by 0) → 0.5; agent 2: loss (by 0) → 0.0
    assert got == [0.0, 1.0, 0.5]


def test_a_debate_short_of_agents_is_a_split_group() -> None:
    with pytest.raises(bridge.GroupSplitError, match="has 2 of its 3 agents"):
        bridge.peer_vote_reward(["p", "p"], [_turn(1), _turn(2)], num_agents=[3, 3])


def test_num_generations_cuts_runs_of_one_prompt() -> None:
    """Two groups of one prompt side by side read as one debate of six agents."""
    completions = [_turn(4, "Agent 1 > Agent 2"), _turn(4, "Agent 0 > Agent 2"), _turn(4, "N/A")] * 2
    # read as agents 0-5 of one debate, the second group's agents are never judged
    assert bridge.peer_vote_reward(["q"] * 6, completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    fn = bridge.debate_reward("peer_vote", num_generations=3)
    assert fn(["q"] * 6, completions) == [1.0, 1.0, 0.0] * 2
    adv = bridge.advantage_reward(lambda p, c, **kw: [1.0, 0.0, 2.0, 0.0, 0.0, 3.0], num_generations=3)
    assert adv(["q"] * 6, [""] * 6) == [0.0, -1.0, 1.0, -1.0, -1.0, 2.0]
    with pytest.raises(
        bridge.GroupSplitError, match="rows 3 to 4 has 2 completions, not num_generations = 3"
    ):
        fn(["q"] * 5, completions[:5])
    with pytest.raises(ValueError, match="num_generations must be >= 1"):
        bridge.debate_reward("format", num_generations=0)


def test_bad_columns_and_options_are_named() -> None:
    completions = [_turn(1), _turn(2)]
    for bad in (1.7, "1", True, float("nan")):
        with pytest.raises(TypeError, match="column 'agent_id' at row 1 must be an integer"):
            bridge.peer_vote_reward(["p", "p"], completions, agent_id=[0, bad])
    for count in (None, 3.5):
        with pytest.raises(TypeError, match="column 'num_agents' at row 0 must be an integer"):
            bridge.peer_vote_reward(["p", "p"], completions, num_agents=[count, 2])
    with pytest.raises(ValueError, match="policy must be one of"):
        bridge.debate_reward("peer_vote", policy="strict")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be one of"):
        bridge.debate_reward("peer_vote", mode="winrate")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unvoted must be finite"):
        bridge.debate_reward("peer_vote", unvoted=float("inf"))


def test_other_kinds_and_unacted_rows() -> None:
    completions = [_turn(4, consensus="YES"), "not an answer", [{"role": "assistant", "content": _turn(6)}]]
    kw: dict[str, Any] = {"answer": ["4", "4", 6], "acted": [True, True, False]}
    assert bridge.format_reward(["p"] * 3, completions, **kw) == [1.0, 0.0, None]
    assert bridge.consensus_reward(["p"] * 3, completions, **kw) == [1.0, 0.0, None]
    assert bridge.correct_reward(["p"] * 3, completions, **kw) == [1.0, 0.0, None]
    with pytest.raises(ValueError, match="needs an 'answer' column"):
        bridge.correct_reward(["p"], [_turn(4)])
    with pytest.raises(ValueError, match="kind must be one of"):
        bridge.debate_reward("length")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="column 'agent_id' has 1 entries for 2"):
        bridge.format_reward(["p", "p"], [_turn(1), _turn(2)], agent_id=[0])
    with pytest.raises(TypeError, match="a completion must be"):
        bridge.format_reward(["p"], [3])
    with pytest.raises(TypeError, match=r"column 'acted' must hold bools, got 'False' at row 0"):
        bridge.format_reward(["p", "p"], [_turn(1), _turn(2)], acted=["False", "True"])  # was read as True


def test_advantage_reward_equals_the_kernel_per_group() -> None:
    rng = np.random.default_rng(3)
    raw = rng.normal(size=12).round(3).tolist()
    raw[5] = None
    prompts = [f"q{i // 4}" for i in range(12)]
    fn = bridge.advantage_reward(lambda prompts, completions, **kw: raw, "verl_grpo.norm")
    logged: list[tuple[str, float]] = []
    got = fn(prompts, [""] * 12, log_metric=lambda k, v: logged.append((k, v)))
    ids, p = kernel.dense_group_ids(prompts)
    live = np.array([r is not None for r in raw])
    values = np.array([0.0 if r is None else r for r in raw])
    expected = kernel.advantages_from_preset("verl_grpo.norm", values, ids, p, where=live).advantages
    assert got[5] is None
    np.testing.assert_array_equal(np.array([g for g in got if g is not None]), expected[live])
    assert fn.__name__ == "<lambda>_advantage"
    assert logged == [("debate_kernel/raw_reward", pytest.approx(values[live].mean()))]
    with pytest.raises(ValueError, match="do not sum to zero"):
        bridge.advantage_reward(bridge.peer_vote_reward, "legos_grpo.positive_only")
    with pytest.raises(ValueError, match="do not sum to zero"):  # a spec with options, as score takes it
        bridge.advantage_reward(bridge.peer_vote_reward, "default,scale=whiten")
    with pytest.raises(ValueError, match="unknown estimator 'nope'"):
        bridge.advantage_reward(bridge.peer_vote_reward, "nope")


def test_rollout_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_rounds must be"):
        bridge.DebateRollout(max_rounds=0)
    with pytest.raises(ValueError, match="temperature must be"):
        bridge.DebateRollout(temperature=0.0)


# --- real GRPOTrainer steps -----------------------------------------------------------------------------

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch
    from datasets import Dataset
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

AGENTS = 3
SCRIPT = [  # what agents 0, 1, 2 answer in every debate of the scripted rollout
    _turn(4, "N/A"),
    _turn(4, "Agent 0 > Agent 2", "YES"),
    _turn(5, "Agent 1 > Agent 0\nAgent 0 = Agent 1", "NO"),
]


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    corpus = [*SCRIPT, "Question: what is 2 + 2? Agent system user assistant", "0123456789 <>/=:\n"] * 4
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=320, min_frequency=1, special_tokens=["<pad>", "<eos>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, pad_token="<pad>", eos_token="<eos>")


def _model(tok: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=4096, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def _args(tmp_path: Any, **kw: Any) -> GRPOConfig:
    base = dict(
        output_dir=str(tmp_path), per_device_train_batch_size=AGENTS, num_generations=AGENTS, max_steps=2,
        max_completion_length=12, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no",
        learning_rate=1e-3, bf16=False, disable_tqdm=True, seed=0,
    )  # fmt: skip
    base.update(kw)
    return GRPOConfig(**base)


DATA = Dataset.from_list([{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(2, 8)])


def _scripted(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
    """A rollout_func returning fixed debate turns, so the rewards that reach TRL are known and non-zero."""
    tok = trainer.processing_class
    rows = [tok(SCRIPT[i % AGENTS], add_special_tokens=False)["input_ids"] for i in range(len(prompts))]
    return {
        "prompt_ids": [tok(p, add_special_tokens=False)["input_ids"] for p in prompts],
        "completion_ids": rows,
        "logprobs": [[0.0] * len(r) for r in rows],
    }


class _Recording(GRPOTrainer):  # type: ignore[misc]
    """Keeps the advantages TRL computed, to compare with the kernel's."""

    advantages: list[torch.Tensor]

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        out = super()._generate_and_score_completions(inputs)
        self.advantages = [*getattr(self, "advantages", []), out["advantages"].detach().clone()]
        return out


def test_grpo_trainer_logs_our_rewards(tokenizer: PreTrainedTokenizerFast, tmp_path: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(
            model=_model(tokenizer), processing_class=tokenizer, train_dataset=DATA, args=_args(tmp_path),
            reward_funcs=[bridge.peer_vote_reward, bridge.format_reward, bridge.correct_reward],
            rollout_func=_scripted,
        )  # fmt: skip
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "rewards/debate_peer_vote/mean" in entry]
    assert len(logs) == 2
    # by hand, per debate: agent 0 is judged by 1 (0 > 2: win) and 2 (1 > 0: loss, 0 = 1: tie) → 1.5/3;
    # agent 1 by 2 (1 > 0: win, 0 = 1: tie) → 0.75; agent 2 by 1 (0 > 2: loss) → 0
    expected = bridge.peer_vote_reward(["q"] * 3, SCRIPT)
    assert expected == [0.5, 0.75, 0.0]
    for entry in logs:
        assert entry["rewards/debate_peer_vote/mean"] == pytest.approx(np.mean(expected))
        assert entry["rewards/debate_format/mean"] == pytest.approx(1.0)
        assert 0.0 <= entry["rewards/debate_correct/mean"] <= 1.0


def test_grpo_trainer_trains_on_our_advantages(tokenizer: PreTrainedTokenizerFast, tmp_path: Any) -> None:
    fn = bridge.advantage_reward(bridge.peer_vote_reward, "verl_grpo.norm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = _Recording(
            model=_model(tokenizer), processing_class=tokenizer, train_dataset=DATA,
            args=_args(tmp_path, scale_rewards="none"), reward_funcs=[fn], rollout_func=_scripted,
        )  # fmt: skip
        trainer.train()
    ours = kernel.advantages_from_preset("verl_grpo.norm", [0.5, 0.75, 0.0], [0, 0, 0], 1).advantages
    assert len(trainer.advantages) == 2
    for adv in trainer.advantages:
        np.testing.assert_allclose(adv.numpy(), ours, rtol=0, atol=1e-6)
    assert any("debate_kernel/raw_reward" in entry for entry in trainer.state.log_history)


def test_debate_rollout_plays_debates_in_the_trainer(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Any
) -> None:
    rollout = bridge.DebateRollout(max_rounds=2, max_new_tokens=8)
    seen: list[dict[str, Any]] = []

    def recording(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        out = rollout(prompts, trainer)
        seen.append({"prompts": len(prompts), **{k: v for k, v in out.items() if k not in ("logprobs",)}})
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(
            model=_model(tokenizer), processing_class=tokenizer, train_dataset=DATA, args=_args(tmp_path),
            reward_funcs=[bridge.format_reward, bridge.peer_vote_reward], rollout_func=recording,
        )  # fmt: skip
        trainer.train()
    assert len(seen) == 2
    for out in seen:
        assert len(out["completion_ids"]) == out["prompts"] == AGENTS  # one debate of three agents
        assert out["agent_id"] == [0, 1, 2]
        assert out["num_agents"] == [AGENTS] * AGENTS
        assert out["acted"][0] is True  # agent 0 always speaks; a random model's turn fails to parse, so
        # the reference abort ends the debate and the others get a turn on the final state, not rewarded
        assert all(1 <= len(c) <= 8 for c in out["completion_ids"])
        prompt0 = tokenizer.decode(out["prompt_ids"][0])
        assert "What is" in prompt0 and "Agent 0" in prompt0
    assert any("rewards/debate_format/mean" in entry for entry in trainer.state.log_history)
