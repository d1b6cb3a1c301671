"""The training step's prepare from rollouts equals the transcript path: the rollouts' turns written as
transcripts and replayed by ``adapters.pipeline`` give the same episodes, so the kernel's one scoring core
gives the same datums (bit for bit), metrics record and RAE baselines. No network, no clock."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinker import types

import kernel
from adapters import pipeline
from adapters.answers import is_correct
from adapters.tinker.convert import datums_to_tinker
from adapters.tinker.fake import FakePolicy, FakeSamplingClient, initial_model_state
from adapters.tinker.faults import FaultPlan, FaultyService, wrap_sampler
from adapters.tinker.renderers import ByteRenderer
from adapters.training.config import TrainConfig
from adapters.training.dataset import Question
from adapters.training.prepare import (
    Prepared,
    batch_metrics,
    dominant_reason,
    empty_reasons,
    kl_penalized,
    prepare_rl,
    split_substeps,
    token_counts,
    train_metrics,
)
from adapters.training.rollouts import DebateResult, last_solution, run_debates, self_play
from adapters.training.train import _Shell
from adapters.transcripts import Debate
from tests._profile import examples

_QUESTIONS = [Question(f"What is {a} + {b}?", str(a + b)) for a, b in [(2, 3), (7, 5), (1, 1), (4, 9)]]


class _Stripped:
    """A sampler whose every ``every``-th response loses its logprobs (None, or a None inside a list)."""

    def __init__(self, inner: Any, every: int) -> None:
        self.inner, self.every, self.calls = inner, every, 0

    def sample(self, prompt: tinker.ModelInput, num_samples: int, params: types.SamplingParams) -> Any:
        self.calls += 1
        future = self.inner.sample(prompt, num_samples, params)
        if self.every == 0 or self.calls % self.every:
            return future
        mode = (self.calls // self.every) % 3

        async def stripped() -> types.SampleResponse:
            response = await future
            seqs = []
            for s in response.sequences:
                if mode == 0:
                    seqs.append(dataclasses.replace(s, logprobs_np=None))
                elif mode == 1:  # lists, with a missing value
                    lps = [*[float(x) for x in s.logprobs_np][:-1], None] if len(s.tokens_np) else []
                    seqs.append(
                        types.SampledSequence(
                            s.stop_reason, s.sequence_id, _tokens_list=s.tokens, _logprobs_list=lps
                        )
                    )  # type: ignore[arg-type]
                else:  # one logprob short
                    seqs.append(dataclasses.replace(s, logprobs_np=s.logprobs_np[:-1]))
            return types.SampleResponse(sequences=seqs)

        return stripped()


def _rollouts(
    num_agents: int, max_rounds: int, policy: FakePolicy, error_rate: float, strip: int, seed: int
) -> list[DebateResult]:
    sampler: Any = FakeSamplingClient(initial_model_state("fake", 1, seed), policy)
    if error_rate:
        faults = FaultyService(None, FaultPlan(seed=seed, rates={"error": error_rate}))  # type: ignore[arg-type]
        sampler = wrap_sampler(sampler, faults)
    sampler = _Stripped(sampler, strip)
    specs = self_play(
        [q.question for q in _QUESTIONS],
        sampler,
        num_agents=num_agents,
        answers=[q.answer for q in _QUESTIONS],
    )
    from adapters.training.rollouts import RolloutConfig

    config = RolloutConfig(num_agents=num_agents, max_rounds=max_rounds, max_tokens=256)
    return list(asyncio.run(run_debates(specs, ByteRenderer(), config=config)).results)


def _reference(
    c: TrainConfig, rae: Any, results: Sequence[DebateResult], played: Sequence[DebateResult]
) -> tuple[Prepared, Any]:
    """The transcript path as the oracle: the rollouts written as transcripts, replayed by the scoring
    pipeline into episodes (each agent's correctness added), scored by the same kernel core, and
    ``credit = "solution"`` by the obvious per-token loop (:func:`_credit_solutions`). What it checks:
    that a rollout's own run of the state machine gives the episode a replay of its transcript gives,
    and the credit weights."""
    debates: list[Debate] = [r.to_transcript() for r in played]
    parsed = [tuple(t.parsed for t in r.turns) for r in played]
    replayed, errors = pipeline.replay_debates(
        debates, parsed, options=pipeline.ScoreOptions(c.scoring_options)
    )
    assert not errors
    record: dict[str, Any] = {"env/all/total_episodes": len(results), **token_counts(results)}
    if not replayed:
        return Prepared([], [], record, [], []), rae
    episodes = [
        dataclasses.replace(
            e,
            correct_G=tuple(
                float(is_correct(last_solution(r.state, i), r.spec.answer)) for i in range(e.num_agents)
            ),
        )
        for e, r in zip(pipeline.episodes_of(replayed), played, strict=True)
    ]
    scored = kernel.score_episodes(
        episodes, dataclasses.replace(c.scoring_options, credit="turn"), baselines_K=rae
    )
    out = pipeline.datum_output(scored, "robust")
    if out is not None and c.credit == "solution":
        _credit_solutions(out.arrays)
    data: list[tinker.Datum] = []
    lps: list[Any] = []
    masks: list[Any] = []
    if out is not None:
        a = out.arrays
        data = datums_to_tinker(kernel.DatumBatch(*(a[name] for name in kernel.DatumBatch._fields)))
        bounds = np.asarray(a["offsets_D1"]).tolist()
        for s, e in itertools.pairwise(bounds):
            lps.append(np.asarray(a["logprobs"][s:e], dtype=np.float32))
            masks.append(np.asarray(a["mask"][s:e], dtype=bool))
    record["tokens/trained"] = sum(len(lp) for lp in lps)
    record.update(batch_metrics(episodes, scored))
    record["data/constant_groups_removed"] = int(np.sum(~scored.keep_P))
    after = scored.baselines_K if c.estimator == "rae" else rae
    return Prepared(data, split_substeps(data, c.num_substeps), record, lps, masks), after


def _credit_solutions(a: dict[str, Any]) -> None:
    """``credit = "solution"`` by the obvious per-token loop: in each run of trained positions (one turn's
    action tokens), the tokens whose characters overlap ``<solution>…</solution>`` keep their advantage;
    a run with no ``<solution>`` keeps it all."""
    renderer = ByteRenderer()
    bounds = np.asarray(a["offsets_D1"]).tolist()
    for d in range(len(bounds) - 1):
        positions = [t for t in range(bounds[d], bounds[d + 1]) if a["mask"][t]]
        runs: list[list[int]] = []
        for t in positions:
            if runs and runs[-1][-1] == t - 1:
                runs[-1].append(t)
            else:
                runs.append([t])
        for run in runs:
            pieces = [renderer.text([int(a["target_tokens"][t])]) for t in run]
            text = "".join(pieces).lower()
            start = text.find("<solution>")
            if start < 0:
                continue
            close = text.find("</solution>", start + len("<solution>"))
            end = len(text) if close < 0 else close + len("</solution>")
            at = 0
            for t, piece in zip(run, pieces, strict=True):
                if not (at < end and at + len(piece) > start):
                    a["advantages"][t] = 0.0
                at += len(piece)


def _shell(config: TrainConfig) -> _Shell:
    rae = np.linspace(-0.5, 0.5, config.num_agents)
    return _Shell(
        config, None, None, tuple(_QUESTIONS), ByteRenderer(), None, None, None, None, rae, None, lambda: 0.0
    )  # type: ignore[arg-type]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _datum_parts(d: tinker.Datum) -> tuple[list[int], dict[str, tuple[str, list[Any]]]]:
    inputs = {k: (str(v.to_numpy().dtype), v.to_numpy().tolist()) for k, v in d.loss_fn_inputs.items()}
    return d.model_input.to_ints(), inputs


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    num_agents=st.integers(2, 4),
    max_rounds=st.integers(1, 3),
    malformed=st.sampled_from([0.0, 0.1, 0.4]),
    yes=st.sampled_from([0.0, 0.5, 0.9]),
    error_rate=st.sampled_from([0.0, 0.1, 0.3]),
    strip=st.sampled_from([0, 3, 7]),
    seed=st.integers(0, 50),
    estimator=st.sampled_from(["tinker", "rae", "dr_grpo", "trl_rloo.plain"]),
    silent=st.sampled_from(["exclude", "include"]),
    remove_constant=st.booleans(),
    correctness_weight=st.sampled_from([0.0, 0.5]),
    reward_mode=st.sampled_from(["win_rate", "win_minus_loss"]),
    substeps=st.integers(1, 3),
    credit=st.sampled_from(["turn", "solution"]),
    negative=st.sampled_from(["keep", "zero"]),
)
def test_prepare_from_rollouts_equals_the_transcript_path(
    num_agents: int,
    max_rounds: int,
    malformed: float,
    yes: float,
    error_rate: float,
    strip: int,
    seed: int,
    estimator: str,
    silent: str,
    remove_constant: bool,
    correctness_weight: float,
    reward_mode: str,
    substeps: int,
    credit: str,
    negative: str,
) -> None:
    policy = FakePolicy(malformed_rate=malformed, yes_rate=yes)
    results = _rollouts(num_agents, max_rounds, policy, error_rate, strip, seed)
    played = [r for r in results if r.turns]
    config = TrainConfig(
        out=str(Path("unused")),
        num_agents=num_agents,
        max_rounds=max_rounds,
        estimator=estimator,
        silent_agents=silent,  # type: ignore[arg-type]
        remove_constant_reward_groups=remove_constant,
        correctness_weight=correctness_weight,
        reward_mode=reward_mode,  # type: ignore[arg-type]
        num_substeps=substeps,
        credit=credit,  # type: ignore[arg-type]
        negative_advantages=negative,  # type: ignore[arg-type]
    )
    rae = np.linspace(-0.5, 0.5, num_agents)
    given = rae.copy()
    want, want_rae = _reference(config, rae, results, played)
    got, got_rae = prepare_rl(config, ByteRenderer(), results, played, rae)
    assert np.array_equal(rae, given)  # the baselines given are not changed in place
    assert [_datum_parts(d) for d in got.data] == [_datum_parts(d) for d in want.data]
    assert [len(c) for c in got.chunks] == [len(c) for c in want.chunks]
    got.finish()
    assert got.record.keys() == want.record.keys()
    assert all(_same(got.record[k], want.record[k]) for k in want.record), (got.record, want.record)
    assert len(got.sampler_logprobs) == len(want.sampler_logprobs)
    for a, b in zip(got.sampler_logprobs + got.masks, want.sampler_logprobs + want.masks, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert got_rae.dtype == np.float64 and np.array_equal(got_rae, want_rae)
    if estimator != "rae":
        assert got_rae is rae


@settings(max_examples=examples(10), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    num_agents=st.integers(2, 4),
    seed=st.integers(0, 50),
    substeps=st.integers(1, 3),
    scale=st.sampled_from([0.0, 1e-3, 0.5]),
)
def test_the_steps_kl_metric_is_the_kernels_over_the_whole_datums(
    num_agents: int, seed: int, substeps: int, scale: float
) -> None:
    """``train_metrics`` gathers the action tokens of each datum before the kernel; the figures equal
    ``kernel.kl_sample_train`` over the datums' whole concatenated arrays (float32: to rounding)."""
    results = _rollouts(num_agents, 2, FakePolicy(malformed_rate=0.1), 0.0, 0, seed)
    played = [r for r in results if r.turns]
    config = TrainConfig(out="unused", num_agents=num_agents, max_rounds=2, num_substeps=substeps)
    shell = _shell(config)
    shell.prepared = prepared = prepare_rl(config, shell.renderer, results, played, shell.rae)[0]
    prepared.finish()
    rng = np.random.default_rng(seed)
    noisy = [lp + scale * rng.standard_normal(lp.shape) for lp in prepared.sampler_logprobs]
    train = [lp.astype(np.float32) for lp in noisy]
    shell.outputs = [
        types.ForwardBackwardOutput(
            "importance_sampling",
            [{"logprobs": types.TensorData.from_numpy(t)} for t in train[i : i + len(chunk)]],
            {"loss:sum": 1.0},
        )
        for i, chunk in zip(np.cumsum([0] + [len(c) for c in prepared.chunks]), prepared.chunks, strict=False)
    ]
    got = train_metrics(shell.outputs, prepared.data, prepared.sampler_logprobs, prepared.masks)
    want = kernel.kl_sample_train(
        np.concatenate(prepared.sampler_logprobs), np.concatenate(train), np.concatenate(prepared.masks)
    )
    v1, v2 = float(want.kl_sample_train_v1), float(want.kl_sample_train_v2)
    assert got["optim/kl_sample_train_v1"] == pytest.approx(v1, rel=1e-4, abs=1e-7)
    assert got["optim/kl_sample_train_v2"] == pytest.approx(v2, rel=1e-4, abs=1e-9)
    assert got["optim/entropy"] == pytest.approx(float(want.entropy), rel=1e-5)
    short = shell.outputs[-1].loss_fn_outputs[-1]
    short["logprobs"] = types.TensorData.from_numpy(short["logprobs"].to_numpy()[:-1])
    with pytest.raises(ValueError, match=f"datum {len(train) - 1},"):
        train_metrics(shell.outputs, prepared.data, prepared.sampler_logprobs, prepared.masks)


@settings(max_examples=examples(50), deadline=None)
@given(
    data=st.lists(
        st.lists(st.tuples(st.floats(-5, 0), st.floats(-5, 0), st.booleans(), st.floats(-2, 2)), max_size=6),
        max_size=4,
    ),
    beta=st.floats(0, 2),
)
def test_the_kl_penalty_against_a_per_token_loop(
    data: list[list[tuple[float, float, bool, float]]], beta: float
) -> None:
    """A_t + β·(mean KL − KL_t) on action tokens, the mean over every action token given, by the obvious
    loops (float64, then float32 as the datums hold advantages)."""
    sampler = [np.array([t[0] for t in d]) for d in data]
    reference = [np.array([t[1] for t in d]) for d in data]
    masks = [np.array([t[2] for t in d], dtype=bool) for d in data]
    advantages = [np.array([t[3] for t in d], dtype=np.float32) for d in data]
    kl = [t[0] - t[1] for d in data for t in d if t[2]]
    mean = sum(kl) / max(len(kl), 1)
    got, total, count = kl_penalized(advantages, sampler, reference, masks, beta)
    assert count == len(kl) and total == pytest.approx(sum(kl), abs=1e-9)
    for d, out in zip(data, got, strict=True):
        want = [
            np.float32(a) + (np.float32(beta * (mean - (s - r))) if m else np.float32(0.0))
            for s, r, m, a in d
        ]
        assert out.dtype == np.float32 and out.tolist() == pytest.approx(want, abs=1e-5)


def test_empty_steps_name_their_dominant_reason() -> None:
    steps = [
        empty_reasons({"env/all/end/sampler_timeout": 2, "data/constant_groups_removed": 1}),
        empty_reasons({"env/all/end/sampler_timeout": 1, "env/all/end/parse_failure": 2}),
    ]
    assert dominant_reason(steps) == ("sampler_timeout", 3)
    assert dominant_reason([empty_reasons({})]) == ("no_action_tokens", 0)


def test_the_learning_rate_schedule() -> None:
    config = TrainConfig(warm_start_steps=5, warm_start_learning_rate=2e-3, warm_start_lr_decay=0.1)
    rates = [config.learning_rate_at(s) for s in range(7)]
    assert rates[0] == 2e-3 and rates[4] == pytest.approx(2e-4) and rates[5:] == [config.learning_rate] * 2
    assert all(a > b for a, b in itertools.pairwise(rates[:5]))  # linear decay over the warm start
    assert TrainConfig(warm_start_steps=1).learning_rate_at(0) == TrainConfig().learning_rate
