"""Token-level credit: which action tokens of a sampled turn carry its advantage.

An agent's return (the win rate its peers' votes give its solution, plus ``correctness_weight`` × whether
that solution is right) depends on its turn only through the ``<solution>`` block and through whether the
turn parses at all; its evaluation, comparison and consensus blocks move the *other* agents' returns. With
``credit = "turn"`` (the reference's rule) every action token of the turn carries the advantage, so the
tokens that cannot change the agent's own return add only noise to its policy gradient. With
``credit = "solution"`` the tokens of the solution block carry it alone; a turn with no solution block
(one that does not parse) keeps the whole-turn credit, so a malformed turn is still pushed down.

Under judge rewards (``ScoringOptions.judge``, :mod:`kernel._judge_rewards`) a turn carries two
advantages; :func:`credit_fields` says which tokens carry which: the solution and evaluation blocks the
generator's (:data:`kernel.FIELD_GENERATOR`), the comparison block the judge's (:data:`kernel.FIELD_JUDGE`),
the rest of the turn both (:data:`kernel.FIELD_BOTH`).

The block is the one the parser read (:func:`kernel.field_spans` under the run's parse policy: the robust
parser's last complete answer block after the reasoning, never a ``<solution>`` mentioned inside
``<think>`` or a draft before the answer; an unclosed last block runs to the end of the text), found in the
decoded text and mapped to tokens through the lengths of decoded prefixes, so it works for any renderer: a
byte-level one, or a tokenizer whose tokens span several characters (a token that straddles the block's
edge is credited).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from adapters.tinker.renderers import Renderer
from kernel import FIELD_BOTH, FIELD_GENERATOR, FIELD_JUDGE, FieldSpan, ParsePolicy, field_spans

__all__ = ["CREDIT_MODES", "Credit", "credit_fields", "credit_weights"]

Credit: TypeAlias = Literal["turn", "solution"]
CREDIT_MODES: Final[tuple[str, ...]] = ("turn", "solution")


def credit_weights(
    renderer: Renderer,
    action: Sequence[int] | npt.NDArray[np.integer],
    mode: Credit,
    *,
    policy: ParsePolicy = "robust",
) -> npt.NDArray[np.float64]:
    """float64 [A]: each action token's share (0 or 1) of its turn's advantage under ``mode``.

    Token k is credited under ``"solution"`` when its characters overlap the solution block the parser
    read under ``policy`` (``field_spans(text, policy=policy).solution``, tags included) in
    ``text = renderer.text(action)``; token k spans the characters
    ``[len(text(action[:k])), len(text(action[:k+1])))``, found by bisection (O(log A) decodes per edge).

    Examples:
        >>> from adapters.tinker.renderers import ByteRenderer
        >>> r = ByteRenderer()
        >>> ids = r.tokenizer.encode("ok <solution>\\n7\\n</solution> <evaluation>fine</evaluation>")
        >>> w = credit_weights(r, ids, "solution")
        >>> r.text([t for t, s in zip(ids, w) if s]), int(w.sum()), len(ids)
        ('<solution>\\n7\\n</solution>', 24, 57)
        >>> credit_weights(r, r.tokenizer.encode("no tags"), "solution").tolist() == [1.0] * 7
        True

        A ``<solution>`` mentioned in the reasoning is not the block the parser reads:

        >>> ids = r.tokenizer.encode("<think>a <solution> tag</think><solution>7</solution>")
        >>> r.text([t for t, s in zip(ids, credit_weights(r, ids, "solution")) if s])
        '<solution>7</solution>'
    """
    if mode not in CREDIT_MODES:
        raise ValueError(f"credit must be one of {CREDIT_MODES}, got {mode!r}")
    ids: list[int] = np.asarray(action, dtype=np.int64).tolist()
    weights: npt.NDArray[np.float64] = np.ones(len(ids), dtype=np.float64)
    if mode == "turn" or not ids:
        return weights
    text = renderer.text(ids)
    block = field_spans(text, policy=policy).solution
    if block is None:
        return weights
    first, last = _token_range(renderer, ids, text, block)
    weights[:] = 0.0
    weights[first:last] = 1.0
    return weights


def credit_fields(
    renderer: Renderer, action: Sequence[int] | npt.NDArray[np.integer], *, policy: ParsePolicy = "robust"
) -> npt.NDArray[np.int8]:
    """int8 [A]: each action token's field code under judge rewards with ``credit="fields"``.

    A token whose characters overlap the solution or evaluation block the parser read (tags included) is
    :data:`kernel.FIELD_GENERATOR`; one overlapping the comparison block :data:`kernel.FIELD_JUDGE`; any
    other token, or one overlapping both kinds of block, :data:`kernel.FIELD_BOTH` (a turn with no block
    found carries both advantages everywhere). Tokens map to characters as in :func:`credit_weights`.

    Examples:
        >>> from adapters.tinker.renderers import ByteRenderer
        >>> r = ByteRenderer()
        >>> text = "<think>x</think><solution>7</solution><comparison>Agent 1 > Agent 2</comparison>ok"
        >>> ids = r.tokenizer.encode(text)
        >>> codes = credit_fields(r, ids)
        >>> [r.text([t for t, c in zip(ids, codes) if c == k]) for k in (1, 2, 0)]
        ['<solution>7</solution>', '<comparison>Agent 1 > Agent 2</comparison>', '<think>x</think>ok']
    """
    ids: list[int] = np.asarray(action, dtype=np.int64).tolist()
    codes: npt.NDArray[np.int8] = np.full(len(ids), FIELD_BOTH, dtype=np.int8)
    if not ids:
        return codes
    text = renderer.text(ids)
    spans = field_spans(text, policy=policy)
    generator: npt.NDArray[np.bool_] = np.zeros(len(ids), dtype=bool)
    judge: npt.NDArray[np.bool_] = np.zeros(len(ids), dtype=bool)
    for block, mask in (
        (spans.solution, generator),
        (spans.evaluation, generator),
        (spans.comparison, judge),
    ):
        if block is not None:
            first, last = _token_range(renderer, ids, text, block)
            mask[first:last] = True
    codes[generator & ~judge] = FIELD_GENERATOR
    codes[judge & ~generator] = FIELD_JUDGE
    return codes


def _token_range(renderer: Renderer, ids: list[int], text: str, block: FieldSpan) -> tuple[int, int]:
    """The tokens ``[first, last)`` whose characters overlap ``block`` (its tags included) in ``text``
    (``renderer.text(ids)``)."""
    first = _tokens_before(renderer, ids, text, block.start + 1) - 1  # the token holding character `start`
    last = _tokens_before(renderer, ids, text, block.stop)  # tokens covering the block's last character
    return max(first, 0), max(last, first + 1)


def _tokens_before(renderer: Renderer, ids: list[int], text: str, chars: int) -> int:
    """The fewest leading tokens whose decoded text starts with ``text[:chars]``.

    Comparing the characters, not only counting them: a prefix that ends inside a character of several
    bytes decodes to a replacement character, as long as the whole one but not equal to it."""
    want = text[:chars]
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if renderer.text(ids[:mid]).startswith(want):
            hi = mid
        else:
            lo = mid + 1
    return lo
