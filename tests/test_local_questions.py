"""The shipped verifiable question set is generated, up to date, and exactly checkable."""

from __future__ import annotations

import json

from tools import make_questions


def test_shipped_question_file_is_up_to_date() -> None:
    assert make_questions.main(["--check"]) == 0


def test_every_answer_is_a_short_integer_and_questions_are_distinct() -> None:
    rows = [json.loads(line) for line in make_questions.QUESTION_FILE.read_text().splitlines()]
    assert len(rows) == make_questions.DEFAULT_COUNT
    assert len({r["question"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"question", "answer", "kind"}
        assert r["answer"].isdigit() and len(r["answer"]) <= 3
        assert len(r["question"]) <= 24


def test_answers_are_correct() -> None:
    for r in make_questions.generate_questions(70, seed=3):
        q = r["question"].removesuffix("=?")
        if r["kind"] in {"add", "sub", "mul"}:
            assert str(eval(q)) == r["answer"]  # arithmetic we generated
        elif r["kind"] == "mod":
            a, b = q.split(" mod ")
            assert str(int(a) % int(b)) == r["answer"]
        elif r["kind"] == "max":
            assert str(max(map(int, q[4:-1].split(",")))) == r["answer"]
        elif r["kind"] == "count":
            _, letter, _, word = q.split(" ")
            assert str(word.count(letter)) == r["answer"]
        else:
            a, b, c, _ = q.split(",")
            assert int(c) - int(b) == int(b) - int(a) and str(int(c) + int(c) - int(b)) == r["answer"]
