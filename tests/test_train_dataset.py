"""Questions, the deterministic cursor, answer checking; loss / estimator / KL options of the loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.answers import extract_final_answer, is_correct
from adapters.tinker.fake import FakeServiceClient
from adapters.training.config import TrainConfig
from adapters.training.dataset import (
    Cursor,
    DatasetError,
    Question,
    batch_at,
    cursor_at,
    epoch_order,
    epoch_steps,
    load_questions,
    parse_questions,
)
from adapters.training.train import run_training
from adapters.transcripts import read_transcript_file
from tests._marks import SHORT_SAMPLES

SMALL = {"batch_size": 2, "num_agents": 2, "max_rounds": 2, "max_tokens": 128, "eval_questions": 1}


def test_shipped_questions_all_have_checkable_answers() -> None:
    qs = load_questions("sample")
    assert len(qs) == 64
    for q in qs:
        a, op, b = q.question.split()[2:5]
        expected = {"+": int(a) + int(b[:-1]), "-": int(a) - int(b[:-1]), "×": int(a) * int(b[:-1])}[op]
        assert is_correct(f"so the result is {expected}", q.answer)


def test_shipped_parity_questions_are_checked_by_the_last_digit() -> None:
    qs = load_questions("parity")
    assert len(qs) == 400 and len({q.question for q in qs}) == 400
    for q in qs:
        n = int(q.question.split()[1])
        right, wrong = ("even", "odd") if n % 2 == 0 else ("odd", "even")
        assert is_correct(right, q.answer) and is_correct(f"So: \\boxed{{{right}}}", q.answer)
        assert not is_correct(wrong, q.answer)
    assert 150 < sum(q.answer == "even" for q in qs) < 250


def test_shipped_repeat_questions_are_checked_by_their_one_digit() -> None:
    qs = load_questions("repeat")
    assert len(qs) == 160 and len({q.question for q in qs}) == 160
    for q in qs:
        digits = q.question.removeprefix("Which digit is repeated in ").removesuffix("?")
        assert digits.isdigit() and 8 <= len(digits) <= 23 and len(set(digits)) == 1
        assert q.answer == digits[0]
        assert is_correct(digits[0], q.answer) and is_correct(f"So: \\boxed{{{digits[0]}}}", q.answer)
        assert not any(is_correct(d, q.answer) for d in "0123456789" if d != digits[0])
    assert sorted(q.answer for q in qs) == sorted("0123456789" * 16)


def test_shipped_yes_no_lookup_has_four_of_each_answer() -> None:
    qs = load_questions("yesno")
    assert len(qs) == 8 and len({q.question for q in qs}) == 8
    assert sorted(q.answer for q in qs) == ["no"] * 4 + ["yes"] * 4
    for q in qs:
        other = "no" if q.answer == "yes" else "yes"
        assert is_correct(q.answer, q.answer) and not is_correct(other, q.answer)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"question": "a"}\n[1]\n', "<questions>:2: expected an object"),
        ('\n\n{"answer": 3}\n', '<questions>:3: "question" must be a non-empty string'),
        ('{"question": "a", "answer": true}\n', '<questions>:1: "answer" must be a string or a number'),
        ("\n", "<questions>: no questions"),
        ('{"question": "a"}\n{"question": "b"\n', "<questions>:2: not JSON"),
    ],
)
def test_bad_dataset_lines_are_named(text: str, error: str) -> None:
    with pytest.raises(DatasetError, match=error.replace("[", r"\[")):
        parse_questions(text)


def test_missing_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_questions(tmp_path / "none.jsonl")


def test_a_misspelt_key_is_named_with_a_hint() -> None:
    with pytest.raises(
        DatasetError, match=r"<questions>:2: unknown key 'Answer' \(did you mean 'answer'\?\)"
    ):
        parse_questions('{"question": "q0"}\n{"question": "q1", "Answer": "4"}\n')
    with pytest.raises(DatasetError, match="<questions>:1: unknown key 'notes'; a line holds"):
        parse_questions('{"question": "q1", "notes": "x"}')
    with pytest.raises(DatasetError, match='<questions>:1: "kind" must be a string'):
        parse_questions('{"question": "q1", "kind": 3}')
    assert parse_questions('{"question": "q", "answer": 1, "kind": "add"}') == (Question("q", "1"),)


def test_an_answer_too_long_for_int_is_a_dataset_error_naming_the_line() -> None:
    long_number = r"<questions>:2: a number too long to read .*write it as a string"
    with pytest.raises(DatasetError, match=long_number):
        parse_questions('{"question": "a"}\n{"question": "q", "answer": ' + "1" * 5000 + "}\n")
    digits = "1" * 5000  # as a string it is read, and compared as text
    assert parse_questions(f'{{"question": "q", "answer": "{digits}"}}')[0].answer == digits


def test_lines_end_at_newline_only_and_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    text = '{"question": "a\u2028b\u0085c\u2029d", "answer": 1}\r\n{"question": "x"}\r\n'
    assert parse_questions(text) == (Question("a\u2028b\x85c\u2029d", "1"), Question("x"))
    path = tmp_path / "q.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + '{"question": "q\u2028"}\n'.encode())
    assert load_questions(path) == (Question("q\u2028"),)
    path.write_bytes(b'{"question": "q"}\n\xff\n')
    with pytest.raises(DatasetError, match=r"q\.jsonl: not UTF-8 text"):
        load_questions(path)


def test_an_empty_dataset_name_is_named() -> None:
    with pytest.raises(DatasetError, match="the dataset name is empty"):
        load_questions("")
    with pytest.raises(ValueError, match="config key dataset is empty"):
        TrainConfig(dataset="")


@pytest.mark.parametrize(
    ("options", "needs"),
    [
        ({"correctness_weight": 1.0}, "correctness_weight = 1.0"),
        ({"warm_start_steps": 1}, "warm_start_steps = 1"),
    ],
)
def test_a_dataset_without_answers_is_refused_where_answers_are_needed(
    tmp_path: Path, options: dict[str, object], needs: str
) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "q1"}\n{"question": "q2"}\n')
    config = TrainConfig.from_mapping(
        {**SMALL, "out": str(tmp_path / "run"), "dataset": str(data), **options}
    )
    with pytest.raises(DatasetError, match=f'no question has an "answer", and config key {needs}'):
        asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert not (tmp_path / "run").exists()  # refused before the run directory is made


@pytest.mark.parametrize(
    ("solution", "answer", "ok"),
    [
        ("The answer is 408.", "408", True),
        ("17 × 24 = 408, not 398", "408", False),  # the last number is the final answer
        ("\\boxed{7/2} (that is 3.5, or 1,000 halves... no)", "3.5", True),
        ("x = -12", "-12", True),
        ("Paris", "paris.", True),
        ("no number", "5", False),
        ("5", None, False),
    ],
)
def test_correctness_rule(solution: str, answer: str | None, ok: bool) -> None:
    assert is_correct(solution, answer) is ok


def test_extract_final_answer_prefers_boxed() -> None:
    assert extract_final_answer("1 then \\boxed{2} then 3") == "2"
    assert extract_final_answer("none") is None


@given(st.integers(1, 9), st.integers(1, 12), st.integers(0, 5), st.integers(0, 3))
def test_cursor_is_contiguous_and_each_epoch_a_permutation(batch: int, n: int, seed: int, start: int) -> None:
    cursor = cursor_at(start, batch, n)
    seen: list[int] = []
    for b in range(start, start + 6):
        assert cursor == cursor_at(b, batch, n)  # the cursor after batch b−1 is where batch b starts
        idx, cursor = batch_at(cursor, batch, n, seed=seed)
        assert len(idx) == batch and all(0 <= i < n for i in idx)
        seen += idx
    epoch_start = cursor_at(start, batch, n)
    if epoch_start.position == 0 and len(seen) >= n:
        assert sorted(seen[:n]) == list(range(n))
    assert batch_at(Cursor(0, 0), batch, n, seed=seed) == batch_at(Cursor(0, 0), batch, n, seed=seed)


@pytest.mark.parametrize(
    "options",
    [
        {"loss_fn": "kernel:importance_sampling"},
        {"loss_fn": "ppo", "loss_fn_config": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}},
        {"estimator": "rae"},
        {"estimator": "verl_grpo.norm", "remove_constant_reward_groups": True, "correctness_weight": 1.0},
        {"kl_penalty_coef": 0.1, "warm_start_steps": 1},
    ],
)
@SHORT_SAMPLES
def test_loop_options_run_on_the_fake(tmp_path: Path, options: dict[str, object]) -> None:
    config = TrainConfig.from_mapping({**SMALL, "out": str(tmp_path / "run"), "steps": 2, **options})
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert [m["step"] for m in result.metrics] == list(range(config.total_steps))
    rl = [m for m in result.metrics if m["phase"] == "rl"]
    assert all(m["optim/num_datums"] > 0 or m["data/constant_groups_removed"] for m in rl)
    if options.get("kl_penalty_coef"):
        assert all(isinstance(m["optim/kl_penalty"], float) for m in rl)


def _stream(batch: int, n: int, seed: int, start: int, count: int) -> list[list[int]]:
    """Batches ``start`` to ``start + count`` as a run reaches them: from the cursor a checkpoint of
    batch ``start`` stores, each batch's cursor handed to the next."""
    cursor, out = cursor_at(start, batch, n), []
    for _ in range(count):
        idx, cursor = batch_at(cursor, batch, n, seed=seed)
        out.append(idx)
    return out


@given(st.integers(1, 7), st.integers(1, 11), st.integers(0, 2**32 - 1), st.integers(0, 12))
def test_a_resumed_run_sees_the_order_the_original_would_have(
    batch: int, n: int, seed: int, resume_at: int
) -> None:
    original = _stream(batch, n, seed, 0, resume_at + 4)
    assert _stream(batch, n, seed, resume_at, 4) == original[resume_at:]
    # the order is the stream of epoch orders, each computed alone from (size, seed, epoch)
    flat = [i for b in original for i in b]
    epochs = -(-len(flat) // n)
    assert flat == [int(i) for e in range(epochs) for i in epoch_order(n, seed, e)][: len(flat)]


@given(st.integers(1, 7), st.integers(1, 11), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_num_epochs_plays_every_question_once_per_epoch(batch: int, n: int, seed: int, k: int) -> None:
    steps = epoch_steps(k, n, batch)
    assert (steps - 1) * batch < k * n <= steps * batch  # the fewest batches that hold k epochs
    flat = [i for b in _stream(batch, n, seed, 0, steps) for i in b]
    for e in range(k):
        assert sorted(flat[e * n : (e + 1) * n]) == list(range(n))  # each question once in epoch e
    rest = [int(i) for e in range(k, k + batch) for i in epoch_order(n, seed, e)]  # the completion:
    assert flat[k * n :] == rest[: len(flat) - k * n]  # the next epochs' first questions


def test_epoch_helpers_name_bad_arguments() -> None:
    with pytest.raises(ValueError, match="num_epochs must be an int >= 1"):
        epoch_steps(0, 4, 2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        epoch_steps(1, 4, True)
    with pytest.raises(ValueError, match="num_questions must be >= 1"):
        epoch_order(0, 0, 0)
    with pytest.raises(ValueError, match="config key num_epochs must be >= 0"):
        TrainConfig(num_epochs=-1)


@SHORT_SAMPLES
def test_a_run_of_num_epochs_plays_each_question_that_many_times_in_epoch_order(tmp_path: Path) -> None:
    data = tmp_path / "three.jsonl"
    texts = [f"What is {a} + 1?" for a in (3, 5, 7)]
    data.write_text("".join(f'{{"question": "{q}", "answer": "x"}}\n' for q in texts))
    options = {**SMALL, "max_rounds": 1, "steps": 99, "num_epochs": 2, "eval_every": 0, "save_every": 0}
    config = TrainConfig.from_mapping({**options, "dataset": str(data), "out": str(tmp_path / "run")})
    result = asyncio.run(run_training(config, FakeServiceClient(seed=0)))
    assert [m["step"] for m in result.metrics] == [0, 1, 2]  # ⌈2 × 3 / 2⌉ steps, not 99
    played = []
    for step in range(3):
        debates = read_transcript_file(tmp_path / "run" / "transcripts" / f"step-{step:06d}.jsonl").debates
        played += [texts.index(d.question) for d in sorted(debates, key=lambda d: d.id)]
    orders = [int(i) for e in range(2) for i in epoch_order(3, config.seed, e)]
    assert played == orders and sorted(played) == [0, 0, 1, 1, 2, 2]
