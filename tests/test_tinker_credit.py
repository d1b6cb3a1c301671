"""Token-level credit (``adapters.training.credit``): the solution block's tokens, for any tokenization."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import tinker
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters.tinker.renderers import ByteRenderer
from adapters.training.credit import credit_weights
from kernel import field_spans, parse_response
from kernel._parse_robust import _strip
from kernel.testing.strategies import agent_outputs
from tests._profile import examples


class _Pieces:
    """A renderer whose token k decodes to ``vocab[k]`` (pieces of any length, the empty one included)."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.vocab = list(vocab)

    def build_prompt(self, messages: object) -> tinker.ModelInput:
        raise NotImplementedError

    def stop_sequences(self) -> list[int]:
        return []

    def text(self, tokens: Sequence[int]) -> str:
        return "".join(self.vocab[t] for t in tokens)


def _oracle(vocab: Sequence[str], ids: Sequence[int]) -> list[float]:
    """Token k is credited when its characters overlap the block the parser read (no block: all).

    The block itself is checked against ``parse_response`` in tests/test_parse_spans.py; this oracle
    checks the mapping from characters to tokens, one token at a time."""
    block = field_spans("".join(vocab[t] for t in ids)).solution
    if block is None:
        return [1.0] * len(ids)
    out, at = [], 0
    for t in ids:
        n = len(vocab[t])
        out.append(1.0 if at < block.stop and at + n > block.start else 0.0)
        at += n
    return out


def test_byte_tokens_of_the_solution_block_and_its_tags() -> None:
    r = ByteRenderer()
    text = "x<Solution>\n42\n</SOLUTION>\n<evaluation>\nok\n</evaluation>"
    ids = r.tokenizer.encode(text)
    w = credit_weights(r, ids, "solution")
    assert r.text([t for t, s in zip(ids, w, strict=True) if s]) == "<Solution>\n42\n</SOLUTION>"
    assert credit_weights(r, ids, "turn").tolist() == [1.0] * len(ids)


def test_a_block_without_its_closing_tag_runs_to_the_end_and_no_block_credits_everything() -> None:
    r = ByteRenderer()
    ids = r.tokenizer.encode("ab<solution>7")
    assert credit_weights(r, ids, "solution").tolist() == [0.0, 0.0] + [1.0] * 11
    assert credit_weights(r, r.tokenizer.encode("<evaluation>"), "solution").tolist() == [1.0] * 12
    assert credit_weights(r, [], "solution").shape == (0,)


def test_tokens_that_straddle_the_edges_are_credited() -> None:
    vocab = ["ok <sol", "ution>", "7", "</solution> <", "evaluation>", ""]
    r = _Pieces(vocab)
    ids = [0, 1, 5, 2, 3, 4]
    assert credit_weights(r, ids, "solution").tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def test_an_unknown_mode_names_the_argument() -> None:
    with pytest.raises(ValueError, match="credit must be one of"):
        credit_weights(ByteRenderer(), [1, 2], "answer")  # type: ignore[arg-type]


_PIECES = st.sampled_from(
    [
        "<solution>",
        "</solution>",
        "<sol",
        "ution>",
        "</sol",
        "<",
        ">",
        "/",
        "a",
        "7\n",
        "",
        " x ",
        "<SOLUTION>",
    ]
)


@given(vocab=st.lists(_PIECES, min_size=1, max_size=8), data=st.data())
def test_equals_the_per_token_overlap_oracle(vocab: list[str], data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, len(vocab) - 1), max_size=30))
    got = credit_weights(_Pieces(vocab), np.asarray(ids, dtype=np.int64), "solution")
    assert got.tolist() == _oracle(vocab, ids)


@settings(max_examples=examples(200))
@given(text=agent_outputs())
# an unclosed block ending in a character of two bytes: the prefix that ends between them decodes to a
# replacement character, as many characters long as the whole text (it was credited one byte short)
@example(text="<think>\nI put the answer in <solution> tags.\n</think>\n\n<solution>\n000\x80")
def test_credited_byte_tokens_are_the_block_the_parser_read(text: str) -> None:
    """On realistic outputs (reasoning that mentions tags, preambles, drafts, fences, unclosed endings):
    the credited tokens decode to the solution block the parser read, tags included, and its content is
    the parsed solution."""
    r = ByteRenderer()
    ids = r.tokenizer.encode(text)
    weights = credit_weights(r, ids, "solution")
    parsed = parse_response(text)
    block = field_spans(text).solution
    if block is None:
        assert weights.tolist() == [1.0] * len(ids)
        return
    at = np.flatnonzero(weights)
    assert at.size and (np.diff(at) == 1).all()  # one run of tokens
    assert r.text([ids[k] for k in at]) == text[block.start : block.stop]
    if parsed.ok:
        assert _strip(text[block.body : block.end]) == parsed.solution


def test_the_solution_in_the_reasoning_and_a_draft_block_are_not_credited() -> None:
    r = ByteRenderer()
    tail = "<evaluation>e</evaluation><consensus>NO</consensus><consensus_reason>r</consensus_reason>"
    for text in (
        "<think>maybe <solution>1</solution></think><solution>2</solution>" + tail,
        "<solution>1</solution>" + tail + "\nactually:\n<solution>2</solution>" + tail,
    ):
        ids = r.tokenizer.encode(text)
        weights = credit_weights(r, ids, "solution")
        assert r.text([t for t, w in zip(ids, weights, strict=True) if w]) == "<solution>2</solution>"
