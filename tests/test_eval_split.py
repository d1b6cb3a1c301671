"""Held-out evaluation: the ``case`` set, the deterministic split (``eval_split`` / ``eval_dataset``) and the
baselines beside ``eval/correct`` (``eval/chance``, ``eval/majority_baseline``)."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.answers import answer_key, is_correct
from adapters.data import read_text
from adapters.tinker.fake import FakeServiceClient
from adapters.training import train as train_module
from adapters.training.config import TrainConfig
from adapters.training.dataset import (
    DatasetError,
    Question,
    Split,
    load_questions,
    load_split,
    split_questions,
)
from adapters.training.evaluation import answer_baselines, clustered_se
from adapters.training.train import run_training
from tests._marks import SHORT_SAMPLES
from tools.make_sign import generate_sign_questions, render

texts = st.text(alphabet="abcXYZ 1", min_size=1, max_size=4).filter(str.strip)
question_sets = st.lists(
    st.builds(Question, texts, st.sampled_from(["yes", "no", "4", "4.0", None])), min_size=2, max_size=12
).map(tuple)
shares = st.floats(min_value=0.0, max_value=0.9, allow_nan=False)


def test_shipped_sign_questions_follow_their_rule_and_are_up_to_date() -> None:
    qs = load_questions("sign")
    numbers = [int(q.question.removeprefix("Is ").removesuffix(" positive or negative?")) for q in qs]
    assert len(qs) == 400 and len(set(numbers)) == 400
    for q, n in zip(qs, numbers, strict=True):
        assert 1 <= abs(n) <= 999 and q.question == f"Is {n} positive or negative?"
        right, wrong = ("positive", "negative") if n > 0 else ("negative", "positive")
        assert q.answer == right and is_correct(right, q.answer) and not is_correct(wrong, q.answer)
    assert Counter(q.answer for q in qs) == {"positive": 200, "negative": 200}
    assert read_text("sign.jsonl") == render(generate_sign_questions())  # python -m tools.make_sign


@given(question_sets, shares)
def test_split_is_deterministic_disjoint_and_covers_the_set(qs: tuple[Question, ...], share: float) -> None:
    try:
        split = split_questions(qs, share)
    except ValueError as e:
        assert "leaves none to train on" in str(e)
        assert math.ceil(share * len(qs)) >= len({q.question for q in qs}) or len(set(qs)) == 1
        return
    assert split == split_questions(qs, share)  # deterministic
    if share == 0:
        assert split == Split(qs, qs)  # nothing held out: evaluated on the training set
        return
    assert Counter(split.train + split.eval) == Counter(qs)  # covers the set, each question once
    assert not {q.question for q in split.train} & {q.question for q in split.eval}  # disjoint texts
    assert len(split.eval) >= math.ceil(share * len(qs)) and split.train
    assert list(split.train) == [q for q in qs if q in split.train]  # training questions in file order
    keys = [answer_key(q.answer) if q.answer is not None else None for q in split.eval]
    whole = Counter(keys)
    for k in range(1, len(keys) + 1):  # a prefix holds the answers evenly while each has some left
        prefix = Counter(keys[:k])
        open_ = [a for a in whole if prefix[a] < whole[a]]
        assert max(prefix[a] for a in open_) - min(prefix[a] for a in open_) <= 1 if open_ else True


@given(question_sets, st.floats(min_value=0.05, max_value=0.9), st.randoms(use_true_random=False))
def test_split_does_not_depend_on_the_lines_order(qs: tuple[Question, ...], share: float, rnd: Any) -> None:
    qs = tuple({q.question: q for q in qs}.values())  # distinct texts: which line of a repeat is which
    shuffled = list(qs)
    rnd.shuffle(shuffled)
    try:
        split = split_questions(qs, share)
    except ValueError:
        with pytest.raises(ValueError, match="leaves none to train on"):
            split_questions(tuple(shuffled), share)
        return
    again = split_questions(tuple(shuffled), share)
    assert again.eval == split.eval and set(again.train) == set(split.train)


def test_split_sizes_repeats_and_refusals() -> None:
    qs = tuple(Question(f"q{i}", "a") for i in range(10))
    assert [len(split_questions(qs, s).eval) for s in (0.1, 0.25, 0.5)] == [1, 3, 5]  # ⌈share · n⌉
    repeats = qs + qs  # every text twice: both copies on the same side
    split = split_questions(repeats, 0.25)
    assert len(split.eval) == 6 and Counter(split.eval).most_common()[-1][1] == 2
    with pytest.raises(ValueError, match=r"share must be a number in \[0, 1\), got 1"):
        split_questions(qs, 1)
    with pytest.raises(ValueError, match=r"holding out 0\.5 of 1 questions leaves none to train on"):
        split_questions(qs[:1], 0.5)


def test_shipped_sign_split_is_fixed(tmp_path: Path) -> None:
    split = load_split("sign", eval_split=0.25)
    assert (len(split.train), len(split.eval)) == (300, 100)
    assert split.eval[0] == Question("Is -554 positive or negative?", "negative")  # pinned: it never moves
    assert Counter(q.answer for q in split.eval) == {"positive": 42, "negative": 58}
    assert [[q.answer for q in split.eval[:k]].count("positive") for k in (16, 48, 84)] == [8, 24, 42]
    other = tmp_path / "other.jsonl"
    other.write_text('{"question": "Is 7 positive or negative?", "answer": "positive"}\n')
    assert load_split("sign", eval_dataset=str(other)) == Split(load_questions("sign"), load_questions(other))
    with pytest.raises(DatasetError, match=r"eval_split \(0\.25\) and eval_dataset .* set one of them"):
        load_split("sign", eval_split=0.25, eval_dataset=str(other))
    with pytest.raises(DatasetError, match=r"yesno: config key eval_split: holding out 0\.99 of 8 questions"):
        load_split("yesno", eval_split=0.99)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"eval_split": 1.0}, r"eval_split must be in \[0, 1\), got 1.0"),
        ({"eval_split": -0.1}, r"eval_split must be in \[0, 1\), got -0.1"),
        ({"eval_split": 0.2, "eval_dataset": "parity"}, "both choose the evaluation questions"),
    ],
)
def test_config_refuses_bad_eval_keys(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_mapping(values)


def test_baselines_by_hand() -> None:
    train = [Question("a", "yes"), Question("b", "no"), Question("c", "NO"), Question("d", None)]
    evaluated = [Question("e", "yes"), Question("f", "no"), Question("g", "no"), Question("h", "maybe")]
    # distinct answers {yes, no}: chance (1 + 1 + 1 + 0) / 2 / 4; the majority "no": 2 of 4
    assert answer_baselines(train, evaluated) == {"eval/chance": 0.375, "eval/majority_baseline": 0.5}
    tie = [Question("a", "7"), Question("b", "3"), Question("c", "3.0"), Question("d", "7/1")]
    assert answer_baselines(tie, [Question("e", "7")])["eval/majority_baseline"] == 1.0  # tie: met first
    assert answer_baselines(tie, [Question("e", "3")])["eval/majority_baseline"] == 0.0
    assert answer_baselines(tie, [Question("e", "3")])["eval/chance"] == 0.5  # "3" and "3.0" are one answer
    assert answer_baselines(train, [Question("x", None)]) == {
        "eval/chance": 0.0,
        "eval/majority_baseline": 0.0,
    }
    for empty in (
        answer_baselines([], evaluated),
        answer_baselines(train, []),
        answer_baselines(train[3:], evaluated),
    ):
        assert all(math.isnan(v) for v in empty.values())


@given(question_sets)
def test_baselines_on_the_training_set_match_the_counts(qs: tuple[Question, ...]) -> None:
    """Evaluated on the training questions themselves: chance is 1/|A| of the answered share, the majority
    baseline the top answer's count over n (brute force over the answers' keys)."""
    keys = [answer_key(q.answer) if q.answer is not None else None for q in qs]
    counts = Counter(k for k in keys if k is not None)
    figures = answer_baselines(qs, qs)
    if not counts:
        assert all(math.isnan(v) for v in figures.values())
        return
    answered = sum(k is not None for k in keys) / len(qs)
    assert figures["eval/chance"] == pytest.approx(answered / len(counts))
    assert figures["eval/majority_baseline"] == pytest.approx(max(counts.values()) / len(qs))
    assert figures["eval/majority_baseline"] >= figures["eval/chance"] - 1e-12


@SHORT_SAMPLES
def test_a_run_evaluates_only_held_out_questions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text("".join(f'{{"question": "q{i}", "answer": "{i % 2}"}}\n' for i in range(12)))
    expected = split_questions(load_questions(data), 0.25)
    evaluated: list[str] = []
    plain = train_module.evaluate

    async def recorded(config: TrainConfig, questions: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        evaluated.extend(q.question for q in questions[: config.eval_questions])
        return await plain(config, questions, *args, **kwargs)

    monkeypatch.setattr(train_module, "evaluate", recorded)
    options = {"batch_size": 4, "num_agents": 2, "max_rounds": 1, "max_tokens": 32, "steps": 3}
    keys = {"dataset": str(data), "eval_split": 0.25, "eval_questions": 2, "eval_every": 1}
    config = TrainConfig.from_mapping({**options, **keys, "out": str(tmp_path / "run")})
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    held = {q.question for q in expected.eval}
    assert evaluated and set(evaluated) == {q.question for q in expected.eval[:2]}
    transcripts = sorted((tmp_path / "run" / "transcripts").glob("*.jsonl"))
    trained = {json.loads(line)["question"] for path in transcripts for line in path.read_text().splitlines()}
    assert trained and not trained & held  # no training debate on a held-out question
    evals = [m for m in result.metrics if "eval/correct" in m]
    assert evals and all(m["eval/chance"] == 0.5 for m in evals)
    assert all(m["eval/majority_baseline"] in (0.0, 0.5, 1.0) for m in evals)


def test_report_baselines_are_those_of_the_held_out_questions(tmp_path: Path) -> None:
    from adapters.report.training import read_run_curves
    from adapters.training import checkpoint as ck

    for share, answer in ((0.25, "negative"), (0.0, "positive")):  # sign's held-out order / file order
        run = tmp_path / f"run{share}"
        ck.init_run(run, {"dataset": "sign", "eval_split": share, "eval_questions": 3}, resume=False)
        (run / "metrics.jsonl").write_text('{"step": 0, "phase": "rl", "eval/correct": 0.5}\n')
        curves = read_run_curves(run)
        assert curves.baselines["eval"] is not None and curves.baselines["train"] is not None
        assert (curves.baselines["eval"].answer, curves.baselines["eval"].majority) == (answer, 2 / 3)
        assert curves.baselines["train"].questions == (300 if share else 400)


def test_train_refuses_a_split_that_leaves_nothing_to_train_before_the_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from adapters.cli import main

    toml = tmp_path / "c.toml"
    toml.write_text('dataset = "yesno"\neval_split = 0.95\n')
    assert main(["train", "--service", "fake", "--config", str(toml), "--out", str(tmp_path / "run")]) == 2
    assert "holding out 0.95 of 8 questions leaves none to train on" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_clustered_se_by_hand_and_against_the_spread_of_question_means() -> None:
    assert clustered_se([1, 1, 0, 0, 1, 0], [0, 0, 1, 1, 2, 2]) == pytest.approx(0.5 / math.sqrt(3))
    assert clustered_se([1, 1, 1], [0, 1, 2]) == 0.0  # every question right: no spread across them
    assert math.isnan(clustered_se([1.0, 0.0], [3, 3]))  # one question: no spread to measure
    with pytest.raises(ValueError, match="values_N and clusters_N must match in length, got 2 and 1"):
        clustered_se([1.0, 0.0], [0])


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=2, max_size=12), st.randoms())
def test_clustered_se_is_the_standard_error_of_the_question_means(pairs: list[Any], rnd: Any) -> None:
    clusters, values = [c for c, _ in pairs], [float(v) for _, v in pairs]
    means = [
        sum(v for c2, v in zip(clusters, values, strict=True) if c2 == c) / clusters.count(c)
        for c in set(clusters)
    ]
    se = clustered_se(values, clusters)
    if len(means) < 2:
        assert math.isnan(se)
        return
    mean = sum(means) / len(means)
    expected = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1) / len(means))
    assert se == pytest.approx(expected, abs=1e-12)
    order = list(range(len(pairs)))
    rnd.shuffle(order)  # the order of the debates does not matter
    assert clustered_se([values[i] for i in order], [clusters[i] for i in order]) == pytest.approx(
        se, abs=1e-12
    )
    if all(clusters.count(c) == 1 for c in clusters):  # one debate a question: the plain standard error
        n = len(values)
        assert se == pytest.approx(math.sqrt(sum((v - sum(values) / n) ** 2 for v in values) / (n - 1) / n))


def test_an_evaluation_records_the_standard_error_by_question(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.tinker.renderers import ByteRenderer
    from adapters.training import evaluation

    qs = [Question("a?", "0"), Question("b?", "1"), Question("c?", "1")]
    # the policy is right on every debate of the questions whose answer is "1", on none of the other
    monkeypatch.setattr(evaluation, "is_correct", lambda solution, answer: answer == "1")
    policy = FakeServiceClient(seed=0).create_sampling_client(base_model="fake").result()
    config = TrainConfig.from_mapping(
        {"num_agents": 2, "max_rounds": 1, "eval_questions": 3, "eval_repeats": 2}
    )
    out = asyncio.run(evaluation.evaluate(config, qs, ByteRenderer(), policy, None))
    assert out["eval/debates"] == 12 and out["eval/correct"] == pytest.approx(2 / 3)
    # question means 0, 1, 1: sd 0.577 over 3 questions (by debate it would be sd 0.49 over 12: 0.14)
    assert out["eval/correct_se"] == pytest.approx(clustered_se([0, 1, 1], [0, 1, 2]))
    assert out["eval/correct_se"] == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
