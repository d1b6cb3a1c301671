"""The kernel's one scoring core (:func:`kernel.score_episodes`): turn-level advantages against a
brute-force reference, their datums, and the options it refuses. (Agent-level scoring is pinned by the
routes that call it: tests/test_pipeline_*.py, tests/test_train_prepare.py, the golden vectors.)"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from kernel import AdvantageOptions, Episode, ParsedResponse, ScoringOptions, Vote
from tests._profile import examples


@st.composite
def episodes(draw: st.DrawFn) -> list[Episode]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(2, 3))
        turns = draw(st.integers(1, 3 * n))
        failed = draw(st.booleans())  # the last turn failed to parse (−1, the debate ended)
        agents, responses, rewards, tokens = [], [], [], []
        for k in range(turns):
            agent = k % n
            votes = tuple(
                Vote(a, draw(st.sampled_from([">", "="])), b)
                for a in range(n)
                for b in range(n)
                if a < b and a != agent and b != agent and draw(st.booleans())
            )
            ok = not (failed and k == turns - 1)
            responses.append(ParsedResponse.make(agent, solution=str(k), votes=votes if ok else (), ok=ok))
            rewards.append(0.0 if ok else -1.0)
            agents.append(agent)
            tokens.append(([1, 2 + k], [3 + k, 4], [-0.5, -0.25]))
        correct = tuple(float(draw(st.booleans())) for _ in range(n))
        group = draw(st.sampled_from([None, 0, 1]))
        out.append(Episode(n, tuple(agents), tuple(responses), tuple(rewards), tokens_T=tuple(tokens),
                           correct_G=correct, group=group))  # fmt: skip
    return out


def _brute(eps: list[Episode], scored: Any, grouping: str, w: float, loo: bool) -> list[float]:
    """G_t = Σ later step rewards of the speaker + r_i + w·c_i; A = G − mean of its group (leave one out:
    n/(n−1)·(G − mean)); a group of one gets 0."""
    returns: list[float] = []
    keys: list[Any] = []
    for p, e in enumerate(eps):
        seen = [0] * e.num_agents
        for k, agent in enumerate(e.agents_T):
            later = sum(e.rewards_T[j] for j in range(k, e.num_turns) if e.agents_T[j] == agent)
            row = int(scored.offsets_P1[p]) + agent
            final = float(scored.pairwise.rewards_PG[row]) + w * e.correct_G[agent]
            returns.append(later + final)
            question = ("debate", p) if e.group is None else ("group", e.group)
            keys.append((p, seen[agent]) if grouping == "round" else (question, seen[agent], agent))
            seen[agent] += 1
    members: dict[Any, list[int]] = defaultdict(list)
    for t, key in enumerate(keys):
        members[key].append(t)
    out = [0.0] * len(returns)
    for rows in members.values():
        if len(rows) < 2:
            continue
        mean = sum(returns[t] for t in rows) / len(rows)
        for t in rows:
            out[t] = (returns[t] - mean) * (len(rows) / (len(rows) - 1) if loo else 1.0)
    return out


@settings(max_examples=examples(100), deadline=None)
@given(
    eps=episodes(),
    grouping=st.sampled_from(["round", "round_agent"]),
    w=st.sampled_from([0.0, 0.5]),
    loo=st.booleans(),
)
def test_turn_level_advantages_against_brute_force(
    eps: list[Episode], grouping: str, w: float, loo: bool
) -> None:
    estimator = AdvantageOptions(baseline="leave_one_out" if loo else "mean")
    options = ScoringOptions(estimator=estimator, correctness_weight=w, turn_groups=grouping)  # type: ignore[arg-type]
    scored = kernel.score_episodes(eps, options)
    want = _brute(eps, scored, grouping, w, loo)
    assert scored.turn_offsets_P1.tolist() == np.cumsum([0] + [e.num_turns for e in eps]).tolist()
    np.testing.assert_allclose(scored.turn_advantages_T, want, rtol=1e-12, atol=1e-12)
    # each turn is its own datum, with its own advantage on its action tokens
    d = scored.datums.datums
    per_datum = [
        float(d.advantages[s:e][np.asarray(d.mask[s:e], bool)][0])
        for s, e in zip(d.offsets_D1[:-1], d.offsets_D1[1:], strict=True)
    ]
    assert sorted(per_datum) == pytest.approx(sorted(want), abs=1e-6)  # datums hold float32


def test_agent_level_scoring_is_unchanged_by_the_turn_option() -> None:
    said = [
        ParsedResponse.make(i, solution="4", votes=(Vote((i + 1) % 3, ">", (i + 2) % 3),)) for i in range(3)
    ]
    e = Episode(3, (0, 1, 2), tuple(said), (0.0, 0.0, 0.0))
    plain = kernel.score_episodes([e])
    turned = kernel.score_episodes([e], ScoringOptions(turn_groups="round"))
    assert plain.advantages_PG.tolist() == turned.advantages_PG.tolist()
    assert plain.turn_advantages_T.size == 0 and turned.turn_advantages_T.size == 3
    assert math.isclose(float(turned.turn_advantages_T.sum()), 0.0, abs_tol=1e-12)  # centred per round


def test_options_that_do_not_go_together_are_refused() -> None:
    with pytest.raises(ValueError, match="turn_groups needs grouped advantages"):
        ScoringOptions(estimator=kernel.RAEOptions(), turn_groups="round")
    with pytest.raises(ValueError, match="turn_groups must be one of"):
        ScoringOptions(turn_groups="turn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agents_T must lie in"):
        Episode(2, (0, 2), (ParsedResponse.make(0), ParsedResponse.make(2)), (0.0, 0.0))


def test_a_run_trains_on_turn_level_advantages(tmp_path: Any) -> None:
    """turn_groups reaches the kernel from the config: each datum carries its own turn's advantage."""
    import asyncio

    from adapters.tinker.fake import FakeServiceClient
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    base = {"out": str(tmp_path / "run"), "steps": 1, "batch_size": 2, "group_size": 2, "num_agents": 2,
            "max_rounds": 2, "max_tokens": 512, "eval_every": 0, "estimator": "default"}  # fmt: skip
    for grouping in ("round", "round_agent"):
        config = TrainConfig.from_mapping({**base, "out": str(tmp_path / grouping), "turn_groups": grouping})
        assert config.scoring_options.turn_groups == grouping
        result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
        assert result.metrics[-1]["optim/num_datums"] > 0
    with pytest.raises(ValueError, match="config keys estimator and turn_groups: turn_groups needs grouped"):
        _ = TrainConfig.from_mapping({**base, "estimator": "rae", "turn_groups": "round"}).scoring_options
