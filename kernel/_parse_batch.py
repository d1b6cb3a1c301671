"""Parsing many responses at once, with their votes as columns: the parser's output for the reward stage.

:func:`votes_from_responses` gathers the votes of ``ParsedResponse`` objects after the fact: a few passes
over every object, which cost more than the rewards themselves. :func:`parse_responses` parses a batch
and keeps each response's packed votes as it goes, so the batch's vote columns come out of one join, and
:meth:`ParsedBatch.votes` turns them into :class:`VoteArrays` for any grouping of the responses with
array operations only (no Python step per response or vote).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import as_int32_saturated, check_bool
from kernel._parse import parse_response
from kernel._parse_common import PARSE_POLICIES, ParsePolicy
from kernel._parse_robust import _parse_robust
from kernel._types import ParsedResponse, pack_votes
from kernel._votes import _GET_CODES, _GET_OK, _VOTE_BYTES, VoteArrays, _code_columns, _id_column

__all__ = ["ParsedBatch", "parse_responses"]


class ParsedBatch(NamedTuple):
    """R parsed responses and their V votes as columns (response r's votes are rows
    ``vote_offsets_R1[r]:vote_offsets_R1[r + 1]``, in the order of ``responses_R[r].votes``).

    Attributes:
      responses_R: the ``ParsedResponse`` of each text, as :func:`parse_response` returns it.
      ok_R: bool [R], whether each response parsed.
      author_ids_R: int32 [R], each response's author (saturated at the int32 bounds).
      vote_offsets_R1: int64 [R + 1].
      a_V, op_V, b_V: int32 [V], the votes' fields as :func:`vote_arrays` encodes them.
    """

    responses_R: tuple[ParsedResponse, ...]
    ok_R: npt.NDArray[np.bool_]
    author_ids_R: npt.NDArray[np.int32]
    vote_offsets_R1: npt.NDArray[np.int64]
    a_V: npt.NDArray[np.int32]
    op_V: npt.NDArray[np.int32]
    b_V: npt.NDArray[np.int32]

    def votes(self, group_ids_R: npt.ArrayLike, *, include_failed: bool = False) -> VoteArrays:
        """The votes of the batch as :class:`VoteArrays`, response r's votes in group ``group_ids_R[r]``.

        Rows follow the responses' order (sort the responses by group for debate-major rows); a response
        that did not parse contributes nothing unless ``include_failed`` (the parsers give it no votes).
        The same votes as :func:`votes_from_responses` of the responses grouped so.

        Args:
          group_ids_R: int [R], the debate (group) of each response; ids beyond int32 are clamped.
          include_failed: keyword-only; also take the votes of responses with ``ok`` False.

        Raises:
          ValueError: ``group_ids_R`` is not one integer per response.

        Examples:
          >>> ok = "<solution>1</solution><evaluation>e</evaluation><comparison>{}</comparison>" \\
          ...      "<consensus>NO</consensus><consensus_reason>r</consensus_reason>"
          >>> batch = parse_responses([ok.format("Agent 1 > Agent 2"), "no tags"], [0, 1])
          >>> v = batch.votes([7, 7])
          >>> v.group_ids_V.tolist(), v.authors_V.tolist(), v.a_V.tolist(), v.b_V.tolist()
          ([7], [0], [1], [2])
        """
        include_failed = check_bool(include_failed, "include_failed")
        num = len(self.responses_R)
        groups = np.asarray(group_ids_R)
        if groups.shape != (num,) or not (groups.dtype.kind in "iu" or num == 0):
            raise ValueError(
                f"group_ids_R must be {num} integers (one per response), got shape {groups.shape}"
            )
        g = as_int32_saturated(groups.astype(np.int64, copy=False), "group_ids_R")
        counts = np.diff(self.vote_offsets_R1)
        if include_failed or bool(self.ok_R.all()):
            keep_V = None
        else:
            keep_V = np.repeat(self.ok_R, counts)
            counts = np.where(self.ok_R, counts, 0)
        columns = (self.a_V, self.op_V, self.b_V)
        if keep_V is not None:
            columns = tuple(c[keep_V] for c in columns)  # type: ignore[assignment]
        return VoteArrays(np.repeat(g, counts), np.repeat(self.author_ids_R, counts), *columns)


def parse_responses(
    texts_R: Sequence[str],
    author_ids_R: Sequence[int] | npt.NDArray[np.integer[Any]],
    *,
    policy: ParsePolicy = "robust",
) -> ParsedBatch:
    """Parses R responses (:func:`parse_response` of each) and collects their votes as columns.

    V = Σ_r |votes(r)|; response r's votes fill rows ``vote_offsets_R1[r]`` … ``vote_offsets_R1[r+1] − 1``.

    Args:
      texts_R: R agent outputs; anything that is not a ``str`` parses as ``not_text``.
      author_ids_R: R integer author ids (the writer of each text; ``-1`` drops no self-comparison).
      policy: ``"robust"`` (default) or ``"reference"``.

    Returns:
      A :class:`ParsedBatch`.

    Raises:
      ValueError: ``policy`` is unknown, or the lengths differ.
      TypeError: an author id is not an integer.

    Examples:
      >>> tags = "<solution>4</solution><evaluation>e</evaluation><comparison>{}</comparison>" \\
      ...        "<consensus>YES</consensus><consensus_reason>r</consensus_reason>"
      >>> texts = [tags.format("Agent 1 > Agent 2\\nAgent 0 = Agent 2"), tags.format("N/A")]
      >>> b = parse_responses(texts, [0, 1])
      >>> b.ok_R.tolist(), b.vote_offsets_R1.tolist(), b.a_V.tolist(), b.b_V.tolist()
      ([True, True], [0, 1, 1], [1], [2])
    """
    if policy not in PARSE_POLICIES:
        raise ValueError(f"policy must be one of {PARSE_POLICIES}, got {policy!r}")
    authors = list(author_ids_R.tolist() if isinstance(author_ids_R, np.ndarray) else author_ids_R)
    if len(authors) != len(texts_R):
        raise ValueError(
            f"author_ids_R must hold one id per text: {len(authors)} ids for {len(texts_R)} texts"
        )
    checked = set(map(type, authors)) <= {int}  # exactly int: what parse_response's check passes
    if checked and policy == "robust" and set(map(type, texts_R)) <= {str}:
        responses = tuple(map(_parse_robust, texts_R, authors))
    else:
        responses = tuple(map(functools.partial(parse_response, policy=policy), texts_R, authors))
    codes = list(map(_GET_CODES, responses))
    if None in codes:  # every parser result carries its codes; kept total for any other
        codes = [pack_votes(r.votes) if c is None else c for r, c in zip(responses, codes, strict=True)]
    offsets = np.zeros(len(responses) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, codes), np.int64, len(codes)), out=offsets[1:])
    offsets //= _VOTE_BYTES
    a_V, op_V, b_V = _code_columns(b"".join(codes))
    ok = np.fromiter(map(_GET_OK, responses), bool, len(responses))
    author_ids = _id_column(authors if checked else [operator.index(a) for a in authors])  # checked
    return ParsedBatch(responses, ok, author_ids, offsets, a_V, op_V, b_V)
