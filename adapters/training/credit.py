"""Token-level credit: which action tokens of a sampled turn carry its advantage.

An agent's return (the win rate its peers' votes give its solution, plus ``correctness_weight`` × whether
that solution is right) depends on its turn only through the ``<solution>`` block and through whether the
turn parses at all; its evaluation, comparison and consensus blocks move the *other* agents' returns. With
``credit = "turn"`` (the reference's rule) every action token of the turn carries the advantage, so the
tokens that cannot change the agent's own return add only noise to its policy gradient. With
``credit = "solution"`` the tokens of the solution block carry it alone; a turn with no solution block
(one that does not parse) keeps the whole-turn credit, so a malformed turn is still pushed down.

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
from kernel import ParsePolicy, field_spans

__all__ = ["CREDIT_MODES", "Credit", "credit_weights"]

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
    start, end = block.start, block.stop
    first = _tokens_before(renderer, ids, start + 1) - 1  # the token holding character `start`
    last = _tokens_before(renderer, ids, end)  # tokens needed to cover the block's last character
    weights[:] = 0.0
    weights[max(first, 0) : max(last, first + 1)] = 1.0
    return weights


def _tokens_before(renderer: Renderer, ids: list[int], chars: int) -> int:
    """The fewest leading tokens whose decoded text holds at least ``chars`` characters."""
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(renderer.text(ids[:mid])) >= chars:
            hi = mid
        else:
            lo = mid + 1
    return lo
