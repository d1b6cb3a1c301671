"""Answer checking shared by training, evaluation and the bridges (:mod:`adapters.answers`): the canonical
answer key agrees with ``is_correct``, the majority answer is a most frequent one, and the k-sample figures
equal their definitions computed by brute force."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.answers import answer_key, is_correct, k_sample_figures, majority_answer
from tests._profile import examples

SOLUTIONS = st.sampled_from(
    ["4", "\\boxed{4}", "it is 4.0", "8/2", "5", "x = 7/2", "3.5", "Paris", "paris.", "  PARIS ", "", "none"]
)


@settings(max_examples=examples(200))
@given(a=SOLUTIONS, b=SOLUTIONS)
def test_two_solutions_share_a_key_when_one_is_correct_against_the_others_answer(a: str, b: str) -> None:
    key = answer_key(b)
    if key is not None and answer_key(a) is not None:
        from adapters.answers import extract_final_answer

        reference = extract_final_answer(b) or b
        assert (answer_key(a) == key) == is_correct(a, reference)


@settings(max_examples=examples(200))
@given(solutions=st.lists(SOLUTIONS, max_size=7))
def test_the_majority_answer_is_a_most_frequent_one(solutions: list[str]) -> None:
    keys = [k for k in map(answer_key, solutions) if k is not None]
    got = majority_answer(solutions)
    if not keys:
        assert got is None
        return
    assert got is not None
    counts = Counter(keys)
    assert counts[answer_key(got)] == max(counts.values())


@settings(max_examples=examples(100))
@given(
    table=st.lists(
        st.tuples(st.lists(SOLUTIONS, min_size=1, max_size=4), st.sampled_from(["4", "3.5", "paris"])),
        max_size=5,
    )
)
def test_k_sample_figures_by_brute_force(table: list[tuple[list[str], str]]) -> None:
    answers = [a for a, _ in table]
    references = [r for _, r in table]
    got = k_sample_figures(answers, references)
    if not table:
        assert all(v != v for v in got)  # NaN
        return
    per_q = [[is_correct(a, r) for a in answers_q] for answers_q, r in table]
    assert got.avg == sum(sum(c) / len(c) for c in per_q) / len(table)
    assert got.pass_ == sum(any(c) for c in per_q) / len(table)
    cons = [majority_answer(a) for a in answers]
    assert got.cons == sum(
        m is not None and is_correct(m, r) for m, r in zip(cons, references, strict=True)
    ) / len(table)
