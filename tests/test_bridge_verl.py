"""The verl bridge against the real verl release: its own ``compute_advantage`` on real ``DataProto``s."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kernel
from adapters.bridges import verl as bridge
from adapters.tokenizers import ByteTokenizer
from tests._profile import examples

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.workers.reward_manager.batch import BatchRewardManager

REGISTERED = bridge.register_estimators()

# our preset ↔ verl's own estimator (name, norm flag) and the relative difference allowed (0: bit for bit).
# verl 0.9.1's vectorized GRPO is not the version REFERENCE §3 pins and our preset reproduces (the golden
# vectors check that one bit for bit): it now takes a two-pass float32 variance with no floor, and its
# compute_advantage entry point never passes norm_adv_by_std_in_grpo to it. We call that function
# directly with the flag, on groups of distinct rewards (where the old floor does not act), and allow the
# float32 rounding of the two variance formulas (:func:`_one_pass_rtol`).
ANCHORS = [
    ("verl_grpo.norm", "grpo", True, 0.0),
    ("verl_grpo.nonorm", "grpo", False, 0.0),
    ("verl_grpo_vectorized.norm", "grpo_vectorized", True, 2e-5),
    ("verl_grpo_vectorized.nonorm", "grpo_vectorized", False, 0.0),
    ("verl_rloo.loop", "rloo", True, 0.0),
    ("verl_rloo.vectorized", "rloo_vectorized", True, 0.0),
]


def _batch(
    scores: list[float], lengths: list[int], uids: list[str], length: int = 6, **columns: list
) -> DataProto:
    b = len(scores)
    rewards = torch.zeros(b, length)
    mask = torch.zeros(b, length)
    for i, (s, n) in enumerate(zip(scores, lengths, strict=True)):
        mask[i, :n] = 1
        rewards[i, max(n, 1) - 1] = s
    non_tensors = {"uid": np.array(uids, dtype=object)}
    non_tensors.update({k: np.array(v, dtype=object) for k, v in columns.items()})
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors=non_tensors
    )


def _verl(data: DataProto, name: str, norm: bool = True) -> torch.Tensor:
    config = AlgoConfig(adv_estimator=name, norm_adv_by_std_in_grpo=norm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = compute_advantage(data, adv_estimator=name, norm_adv_by_std_in_grpo=norm, config=config)
    return out.batch["advantages"]


def test_every_preset_is_in_verls_registry() -> None:
    # all but DrMAS's agent / trajectory groupings, which verl's estimator call cannot pass
    grouped = {p for p in kernel.ADVANTAGE_PRESETS if p.startswith("drmas_grpo.")}
    assert len(grouped) == 4
    assert set(REGISTERED) == {bridge.ESTIMATOR_PREFIX + p for p in set(kernel.ADVANTAGE_PRESETS) - grouped}
    assert all(core_algos.get_adv_estimator_fn(name) is not None for name in REGISTERED)
    assert bridge.register_estimators() == REGISTERED  # idempotent: verl refuses a second function per name


def test_hand_values_through_verls_entry_point() -> None:
    data = _batch([1.0, 0.0, 0.5, 0.5, 2.0], [2, 3, 1, 4, 2], ["a", "a", "b", "b", "c"])
    adv = _verl(data, "debate_kernel.default")
    np.testing.assert_array_equal(adv[:, 0].numpy(), [0.5, -0.5, 0.0, 0.0, 0.0])
    # advantages sit on response tokens only, as verl's outcome estimators put them
    np.testing.assert_array_equal(adv[0].numpy(), [0.5, 0.5, 0, 0, 0, 0])
    assert torch.equal(data.batch["returns"], adv)


groups = st.lists(st.integers(1, 5), min_size=1, max_size=6)


def _one_pass_rtol(scores: list[float], uids: list[str], rtol: float) -> np.ndarray:
    """[B] relative tolerance of the one-pass variance (Σr² − (Σr)²/n, float32) against a two-pass one.

    Their float32 roundings of the variance differ by up to about 2(n + 1)·ε·Σr² / (n − 1), so σ by
    (n + 1)·ε·κ relative, κ = Σr² / ((n − 1)·var) (the group's conditioning): negligible for spread-out
    rewards, percents when a group's rewards nearly coincide (3.515 and 3.507: κ = 7.7e5, 2.4 %; found
    by the deep profile, where a flat 2e-5 failed).
    """
    r = np.asarray(scores, np.float64)
    out = np.full(r.shape[0], rtol)
    for uid in set(uids):
        rows = np.array([u == uid for u in uids])
        n = int(rows.sum())
        var = float(np.var(r[rows], ddof=1)) if n > 1 else 0.0
        if var > 0:
            kappa = float(np.sum(r[rows] ** 2)) / ((n - 1) * var)
            out[rows] += (n + 1) * float(np.finfo(np.float32).eps) * kappa
    return out


@settings(max_examples=examples(25))
@given(sizes=groups, seed=st.integers(0, 2**16), anchor=st.sampled_from(ANCHORS))
@example(sizes=[1, 2, 1], seed=26382, anchor=ANCHORS[2])  # rewards 3.515, 3.507 in one group
def test_presets_equal_verls_own_estimators(sizes: list[int], seed: int, anchor: tuple) -> None:
    ours, theirs, norm, rtol = anchor
    rng = np.random.default_rng(seed)
    uids = [f"q{g}" for g, n in enumerate(sizes) for _ in range(n)]
    perm = rng.permutation(len(uids))
    uids = [uids[i] for i in perm]
    scores = (rng.permutation(10_000)[: len(uids)] / 1000 - 5).astype(np.float32).tolist()  # distinct
    lengths = rng.integers(1, 7, len(uids)).tolist()
    data = _batch(scores, lengths, uids)
    a = _verl(data, bridge.ESTIMATOR_PREFIX + ours, norm).numpy()
    if theirs == "grpo_vectorized":
        fresh = _batch(scores, lengths, uids)
        b = core_algos.compute_grpo_vectorized_outcome_advantage(
            fresh.batch["token_level_rewards"],
            fresh.batch["response_mask"],
            fresh.non_tensor_batch["uid"],
            norm_adv_by_std_in_grpo=norm,
        )[0].numpy()
    else:
        b = _verl(_batch(scores, lengths, uids), theirs, norm).numpy()
    if theirs == "grpo_vectorized" and norm:
        tol = _one_pass_rtol(scores, uids, rtol)[:, None]
        assert (np.abs(a - b) <= tol * np.abs(b)).all(), (ours, a, b, tol)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0, err_msg=ours)


def test_masked_rows_stay_out_of_group_statistics() -> None:
    # row 2 is a rejected response (empty mask) carrying a large reward: verl's GRPO lets it into the
    # group mean (a known quirk, REFERENCE §3); ours leaves it out and gives it 0
    clean = _batch([1.0, 0.0], [2, 2], ["a", "a"])
    dirty = _batch([1.0, 0.0, 100.0], [2, 2, 0], ["a", "a", "a"])
    ours = _verl(dirty, "debate_kernel.verl_grpo.norm")
    np.testing.assert_array_equal(ours[:2], _verl(clean, "debate_kernel.verl_grpo.norm"))
    assert ours[2].abs().sum() == 0
    theirs = _verl(_batch([1.0, 0.0, 100.0], [2, 2, 0], ["a", "a", "a"]), "grpo")
    assert not torch.equal(theirs[:2], _verl(_batch([1.0, 0.0], [2, 2], ["a", "a"]), "grpo"))


def test_nan_score_is_left_out_and_zero() -> None:
    data = _batch([1.0, float("nan"), 0.0], [1, 1, 1], ["a", "a", "a"])
    adv = _verl(data, "debate_kernel.default")[:, 0].numpy()
    np.testing.assert_array_equal(adv, [0.5, 0.0, -0.5])


@pytest.mark.parametrize(
    ("group_by_agent_id", "preset"),
    [(None, "default"), (True, "drmas_grpo.norm_agent"), (False, "drmas_grpo.norm_traj")],
)
def test_compute_advantages_equals_the_kernel_called_directly(
    group_by_agent_id: bool | None, preset: str
) -> None:
    rng = np.random.default_rng(7)
    b = 24
    uids = [f"q{i % 3}" for i in range(b)]
    agents = [int(x) for x in rng.integers(0, 2, b)]
    trajs = [f"t{i % 6}" for i in range(b)]
    scores = np.round(rng.normal(size=b), 2).astype(np.float32)
    lengths = [int(x) for x in rng.integers(0, 5, b)]  # some rows fully masked
    data = _batch(scores.tolist(), lengths, uids, agent_id=agents, traj_uid=trajs)
    adv = bridge.compute_advantages(data, preset, group_by_agent_id=group_by_agent_id).batch["advantages"]

    keys = [uids, agents] if group_by_agent_id else [uids]
    ids, p = kernel.dense_group_ids(*keys)
    traj = kernel.dense_group_ids(trajs)[0] if group_by_agent_id is False else None
    live = np.array(lengths) > 0
    expected = kernel.advantages_from_preset(preset, scores, ids, p, where=live, trajectory_ids_PG=traj)
    np.testing.assert_array_equal(
        adv[:, 0].numpy() * live, np.asarray(expected.advantages, np.float32) * live
    )
    np.testing.assert_array_equal(adv[~torch.from_numpy(live)].numpy(), 0)


def test_compute_advantages_names_a_missing_column() -> None:
    data = _batch([1.0, 0.0], [1, 1], ["a", "a"])
    with pytest.raises(KeyError, match="agent_id"):
        bridge.compute_advantages(data, group_by_agent_id=True)
    with pytest.raises(KeyError, match="traj_uid"):
        bridge.compute_advantages(data, group_by_agent_id=False)


def test_bad_estimators_are_named() -> None:
    with pytest.raises(ValueError, match="unknown estimator 'nope'"):
        bridge.register_estimators(["nope"])
    with pytest.raises(TypeError, match="estimator must be"):
        bridge.estimator_fn(3)  # type: ignore[arg-type]
    fn = bridge.estimator_fn("default")
    with pytest.raises(ValueError, match="needs index"):
        fn(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"\[batch, response_length\]"):
        fn(torch.zeros(2, 3), torch.ones(2, 4), index=["a", "a"])


TAGS = (
    "<solution>{}</solution><evaluation>ok</evaluation><comparison>{}</comparison>"
    "<consensus>YES</consensus><consensus_reason>agree</consensus_reason>"
)


class _TorchBytes:
    """verl's reward manager decodes torch id tensors; our byte tokenizer takes ints."""

    def decode(self, ids: torch.Tensor, skip_special_tokens: bool = False) -> str:
        return ByteTokenizer().decode(ids.tolist(), skip_special_tokens=skip_special_tokens)


def test_compute_score_through_verls_batch_reward_manager() -> None:
    tok = ByteTokenizer()
    outputs = [
        TAGS.format(12, "Agent 1 > Agent 2"),
        TAGS.format(12, "Agent 0 > Agent 2"),
        "no tags at all",
        TAGS.format(5, "Agent 1 = Agent 0"),
        TAGS.format(7, "N/A"),
    ]
    debates, agents = ["d1", "d1", "d1", "d2", "d2"], [0, 1, 2, 0, 1]
    length = max(len(tok.encode(o)) for o in outputs)
    responses = torch.zeros(len(outputs), length, dtype=torch.long)
    attention = torch.zeros(len(outputs), 2 + length, dtype=torch.long)
    attention[:, :2] = 1
    for i, o in enumerate(outputs):
        ids = tok.encode(o)
        responses[i, : len(ids)] = torch.tensor(ids)
        attention[i, 2 : 2 + len(ids)] = 1
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.ones(len(outputs), 2, dtype=torch.long),
            "responses": responses,
            "attention_mask": attention,
        },
        non_tensors={
            "data_source": np.array(["debate"] * 5, dtype=object),
            "reward_model": np.array(
                [{"ground_truth": "12"}] * 3 + [{"ground_truth": "5"}] * 2, dtype=object
            ),
            "extra_info": np.array(
                [
                    {"debate_id": d, "agent_id": a, "num_agents": 3 if d == "d1" else 2}
                    for d, a in zip(debates, agents, strict=True)
                ],
                dtype=object,
            ),
        },
    )
    manager = BatchRewardManager(_TorchBytes(), 0, bridge.compute_score, correctness_weight=1.0)
    out = manager(data, return_dict=True)
    last = attention[:, 2:].sum(-1) - 1
    got = out["reward_tensor"][torch.arange(5), last].tolist()
    # d1: agent 0 wins its two votes (1.0) and is correct (+1); agent 1 has one loss and one win... its
    # only judge is agent 0 (1 > 2 is about 1 and 2: author 0) → agent 1: 1.0; agent 2 loses both → 0.0
    # d2: two agents → every vote is a self-comparison, so pairwise is 0 (REFERENCE §2); agent 0 is correct
    assert got == pytest.approx([2.0, 2.0, 0.0, 1.0, 0.0])
    assert out["reward_extra_info"]["parse_ok"] == [1.0, 1.0, 0.0, 1.0, 1.0]
    assert out["reward_extra_info"]["pairwise"] == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_compute_score_refuses_a_non_finite_weight() -> None:
    """correctness_weight = NaN gave every score NaN without a word."""
    infos = [{"debate_id": 1, "agent_id": 0}, {"debate_id": 1, "agent_id": 1}]
    for name in ("correctness_weight", "format_weight"):
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            bridge.compute_score(["x", "x"], ["a", "b"], [None, None], infos, **{name: float("nan")})


def test_compute_score_needs_debate_and_agent() -> None:
    with pytest.raises(KeyError, match=r"extra_infos\[1\] has no 'agent_id'"):
        bridge.compute_score(
            ["x", "x"], ["a", "b"], [None, None], [{"debate_id": 1, "agent_id": 0}, {"debate_id": 1}]
        )
    with pytest.raises(ValueError, match=r"agent_ids\[1\] = 5 is outside"):
        bridge.compute_score(
            ["x", "x"],
            ["a", "b"],
            [None, None],
            [{"debate_id": 1, "agent_id": 0}, {"debate_id": 1, "agent_id": 5}],
        )


def test_estimator_fn_reads_tensor_keys_integer_and_bf16_rewards_and_ignores_what_the_mask_hides() -> None:
    """Found by review, each silently wrong before: an index given as a tensor made every row its own group
    (0-d tensors hash by identity: every advantage 0); integer rewards gave integer (truncated)
    advantages; a NaN reward outside the mask made its row, and so its group, drop out (NaN·0 is NaN);
    bfloat16 rewards crashed in the conversion to numpy; numpy arrays instead of tensors were an
    AttributeError."""
    fn = bridge.estimator_fn("default")
    rewards, mask = torch.tensor([[1.0], [3.0], [5.0], [7.0]]), torch.ones(4, 1)
    expected = fn(rewards, mask, index=[0, 0, 1, 1])[0]
    assert expected[:, 0].tolist() == [-1.0, 1.0, -1.0, 1.0]
    for index in (torch.tensor([0, 0, 1, 1]), np.array([0, 0, 1, 1]), ["a", "a", "b", "b"]):
        assert torch.equal(fn(rewards, mask, index=index)[0], expected)
    ints = fn(torch.tensor([[1, 0], [2, 0]]), torch.ones(2, 2), index=["a", "a"])[0]
    assert ints.dtype == torch.float32 and ints[:, 0].tolist() == [-0.5, 0.5]
    hidden = torch.tensor([[1.0, float("nan")], [3.0, 0.0], [5.0, 0.0], [7.0, 0.0]])
    hidden_mask = torch.ones(4, 2)
    hidden_mask[0, 1] = 0
    assert fn(hidden, hidden_mask, index=[0, 0, 1, 1])[0][:, 0].tolist() == [-1.0, 1.0, -1.0, 1.0]
    bf16 = fn(rewards.to(torch.bfloat16), mask, index=[0, 0, 1, 1])[0]
    assert bf16.dtype == torch.bfloat16 and bf16[:, 0].tolist() == [-1.0, 1.0, -1.0, 1.0]
    with pytest.raises(TypeError, match=r"token_level_rewards must be a torch\.Tensor"):
        fn(np.ones((2, 1)), mask[:2], index=[0, 0])


def test_key_columns_of_tensor_elements_group_by_value() -> None:
    """Found by review: an object column of 0-d tensors (uid or agent_id) made every row its own group
    (tensors hash by identity): all advantages 0. A 2-D key column is named."""
    rewards, mask = torch.tensor([[1.0], [0.0], [0.5], [0.5]]), torch.ones(4, 1)
    uid = np.empty(4, dtype=object)
    uid[:] = [torch.tensor(1), torch.tensor(1), torch.tensor(2), torch.tensor(2)]
    fn = bridge.estimator_fn("default")
    want = fn(rewards, mask, index=[1, 1, 2, 2])[0]
    assert want[:2, 0].abs().sum() > 0
    assert torch.equal(fn(rewards, mask, index=uid)[0], want)
    np_scalars = np.array([np.int64(1), np.int64(1), np.int64(2), np.int64(2)], dtype=object)
    assert torch.equal(fn(rewards, mask, index=np_scalars)[0], want)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": uid}
    )
    assert torch.equal(bridge.compute_advantages(data).batch["advantages"], want)
    with pytest.raises(TypeError, match=r"index must be one key per row"):
        fn(rewards, mask, index=np.zeros((4, 1)))


def test_drmas_presets_bring_their_grouping() -> None:
    """drmas_grpo.*_traj / *_agent were computed grouped by uid alone unless the flag was also given."""
    data = _batch(
        [1.0, 0.0, 0.0, 0.0],
        [1, 1, 1, 1],
        ["q"] * 4,
        agent_id=[0, 1, 0, 1],
        traj_uid=["t1", "t1", "t2", "t2"],
    )
    for preset, flag in (("drmas_grpo.nonorm_traj", False), ("drmas_grpo.norm_agent", True)):
        implied = bridge.compute_advantages(data, preset).batch["advantages"].clone()
        given = bridge.compute_advantages(data, preset, group_by_agent_id=flag).batch["advantages"]
        assert torch.equal(implied, given)
        with pytest.raises(ValueError, match=f"group_by_agent_id must be {flag} or None"):
            bridge.compute_advantages(data, preset, group_by_agent_id=not flag)
        with pytest.raises(ValueError, match="compute_advantages"):
            bridge.estimator_fn(preset)
        with pytest.raises(ValueError, match="compute_advantages"):
            bridge.register_estimators([preset])
    traj = bridge.compute_advantages(data, "drmas_grpo.nonorm_traj").batch["advantages"][:, 0]
    np.testing.assert_allclose(traj.numpy(), [0.25, 0.25, -0.25, -0.25])  # trajectory means 0.5 and 0


def test_bridge_arguments_of_the_wrong_kind_are_named() -> None:
    data = _batch([1.0, 0.0], [1, 1], ["a", "a"], agent_id=[0, 1], traj_uid=["t", "u"])
    for flag in (0, "False", 1):
        with pytest.raises(TypeError, match="group_by_agent_id must be a bool"):
            bridge.compute_advantages(data, group_by_agent_id=flag)  # type: ignore[arg-type]
    bridge.compute_advantages(data, group_by_agent_id=np.False_)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of preset names"):
        bridge.register_estimators("default")
    with pytest.raises(ValueError, match="eps"):  # at build, not at the trainer's first step
        bridge.estimator_fn("default,eps=-1")
    fn = bridge.estimator_fn("default")
    with pytest.raises(TypeError, match=r"index\[1\] must be a hashable key"):
        fn(torch.zeros(2, 3), torch.ones(2, 3), index=["a", ["b"]])
    with pytest.raises(TypeError, match="index must be a sequence"):
        fn(torch.zeros(2, 3), torch.ones(2, 3), index={"a": 0, "b": 1})
    empty = DataProto.from_dict(non_tensors={"uid": np.array(["a"], dtype=object)})
    with pytest.raises(TypeError, match=r"data\.batch is None"):
        bridge.compute_advantages(empty)


def test_a_float16_score_beyond_its_range_is_reported() -> None:
    rewards = torch.full((3, 2), 40000.0, dtype=torch.float16)  # each row sums to inf in float16
    rewards[2] = 1.0
    with pytest.warns(RuntimeWarning, match=r"2 rows have a score that is not finite \(rows \[0, 1\]"):
        adv, _ = bridge.estimator_fn("default")(rewards, torch.ones(3, 2), index=["a", "a", "a"])
    assert adv.dtype == torch.float16 and not adv.any()


def test_compute_score_reads_answer_lists_and_refuses_what_it_does_not_take() -> None:
    ok = "<solution>{}</solution><evaluation>e</evaluation><comparison>N/A</comparison>"
    ok += "<consensus>NO</consensus><consensus_reason>r</consensus_reason>"
    infos = [{"debate_id": 1, "agent_id": 0}, {"debate_id": 1, "agent_id": 1}]
    texts = [ok.format("four"), ok.format(4)]
    got = bridge.compute_score(
        ["d", "d"], texts, [["4", "four"], np.array(["5"])], infos, correctness_weight=1
    )
    assert [g["correct"] for g in got] == [1.0, 0.0]
    got = bridge.compute_score(["d", "d"], texts, ["four", "4"], infos, correctness_weight=np.float32(2.0))
    assert [g["score"] for g in got] == [2.0, 2.0]
    with pytest.raises(TypeError, match="correctness_wieght"):
        bridge.compute_score(["d", "d"], texts, [None, None], infos, correctness_wieght=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="unvoted must be finite"):
        bridge.compute_score(["d", "d"], texts, [None, None], infos, unvoted=float("nan"))
    with pytest.raises(TypeError, match=r"extra_infos\[0\]\['debate_id'\] must be a hashable key"):
        bridge.compute_score(["d"], texts[:1], [None], [{"debate_id": [1], "agent_id": 0}])


def test_compute_score_warns_when_rows_share_an_agent() -> None:
    """verl's rollout.n > 1 repeats a prompt's extra_info: its samples get one pairwise reward."""
    infos = [{"debate_id": 1, "agent_id": 0}] * 2 + [{"debate_id": 1, "agent_id": 1}]
    with pytest.warns(RuntimeWarning, match="row 1 is agent 0 of a debate that already has a row"):
        bridge.compute_score(["d"] * 3, ["x"] * 3, [None] * 3, infos)
