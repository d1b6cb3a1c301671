"""Composable Hypothesis strategies (one module, one section per topic)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kernel._types import OP_EQ, OP_GT, OP_OTHER
from kernel._votes import VoteArrays, validate_votes

__all__: list[str] = []

# --- text and votes (parsing, rewards) -----------------------------------------------------------


class VoteBatch(NamedTuple):
    """One drawn batch of votes across debates: the inputs of ``pairwise_rewards``.

    Attributes:
      votes: ``VoteArrays`` (int32 [V]); padding rows, if any, have group id ``P``.
      num_agents_P: ``[P]`` int64 agent count of each debate.
    """

    votes: VoteArrays
    num_agents_P: npt.NDArray[np.int64]


_WILD_IDS: tuple[int, ...] = (-1, -2, 99, -(2**31), 2**31 - 1)
_WILD_OPS: tuple[int, ...] = (OP_OTHER, 3, 7, -1)


@st.composite
def debate_votes(
    draw: st.DrawFn, num_agents: int, *, min_votes: int = 0, max_votes: int = 20, invalid: bool = True
) -> list[tuple[int, int, int, int]]:
    """The votes ``(author, a, op_code, b)`` of one debate with ``num_agents`` agents.

    Mostly valid votes with repeats; authors are agents, ``-1`` or out of range (``N``, ``N+1``, 99).
    ``invalid=True`` mixes in ids out of range (``-1``, ``N``, ±2³¹…), ``a == b`` and bad op codes.

    Args:
      num_agents: N, the debate's agent count.
      min_votes: fewest votes drawn.
      max_votes: most votes drawn.
      invalid: mix in malformed votes.

    Returns:
      A strategy of lists of ``(author, a, op_code, b)`` int tuples.

    Examples:
      >>> from hypothesis import find
      >>> find(debate_votes(3, invalid=False), lambda v: len(v) == 2)
      [(0, 0, 0, 1), (0, 0, 0, 1)]
    """
    n = num_agents
    agent = st.integers(0, n - 1) if n > 0 else st.just(0)
    wild = st.sampled_from((n, n + 1, *_WILD_IDS))
    author = st.one_of(agent, st.sampled_from((-1, n, n + 1, 99)))
    pair_id = st.one_of(agent, agent, agent, wild) if invalid else agent
    good_op = st.sampled_from((OP_GT, OP_EQ))
    op = st.one_of(good_op, st.sampled_from(_WILD_OPS)) if invalid else good_op
    if n < 2 and not invalid:
        return []
    base = draw(st.lists(st.tuples(author, pair_id, op, pair_id), min_size=min_votes, max_size=max_votes))
    out = []
    for u, a, o, b in base:
        if not invalid and a == b:
            b = (a + 1) % n
        out.append((u, a, o, b))
    return out


@st.composite
def vote_batches(
    draw: st.DrawFn,
    *,
    min_groups: int = 1,
    max_groups: int = 4,
    min_agents: int = 0,
    max_agents: int = 6,
    min_votes: int = 0,
    max_votes: int = 20,
    invalid: bool = True,
    padding: bool = False,
    shuffled: bool | None = None,
    judges: bool = False,
    repeats: bool = False,
    copied_padding: bool = False,
) -> VoteBatch:
    """Votes of several debates with different agent counts, as one :class:`VoteBatch`.

    Each debate has ``N ∈ [min_agents, max_agents]`` agents (0 and 1 allowed: every vote is then
    malformed) and up to ``max_votes`` votes from :func:`debate_votes`. ``padding=True`` appends 0–3
    rows with group id ``P`` and arbitrary fields. ``shuffled``: votes debate-major (False),
    interleaved (True) or either (None). ``judges=True`` also fills ``judge_V`` (mostly −1, a debater's
    vote; else a judge id in 0–3, or another negative id) and, in most batches, ``weight_V`` (dyadic
    weights in [0, 3], zeros included, so weighted sums stay exact); otherwise both stay None.
    ``repeats=True`` re-appends up to 4 copies of valid votes (every field, judge and weight included),
    so that repeated comparisons change rewards; ``copied_padding=True`` (with ``padding``) appends up to 3
    padding rows that copy a valid vote (often one of the last debate) with group id ``P``. Both are
    off by default, which draws exactly what earlier versions drew.

    Args:
      min_groups: fewest debates P.
      max_groups: most debates P.
      min_agents: fewest agents per debate.
      max_agents: most agents per debate.
      min_votes: fewest votes per debate.
      max_votes: most votes per debate.
      invalid: mix in malformed votes.
      padding: append padding rows (group id P).
      shuffled: interleave the debates' votes (True), keep them debate-major (False), or either (None).
      judges: draw judge ids and weights as well.
      repeats: append copies of valid votes.
      copied_padding: append padding rows copied from valid votes (only with ``padding``).

    Returns:
      A strategy of :class:`VoteBatch`.

    Examples:
      >>> from hypothesis import find
      >>> batch = find(vote_batches(min_groups=2), lambda b: b.votes.a_V.size >= 1)
      >>> len(batch.num_agents_P), batch.votes.a_V.dtype.name
      (2, 'int32')
    """
    num_groups = draw(st.integers(min_groups, max_groups))
    agents = draw(st.lists(st.integers(min_agents, max_agents), min_size=num_groups, max_size=num_groups))
    rows: list[tuple[int, int, int, int, int]] = []
    for p, n in enumerate(agents):
        one = debate_votes(n, min_votes=min_votes, max_votes=max_votes, invalid=invalid)
        rows += [(p, *v) for v in draw(one)]
    if padding:
        junk = st.integers(-3, 9)
        num_pad = draw(st.integers(0, 3))
        rows += [(num_groups, *draw(st.tuples(junk, junk, junk, junk))) for _ in range(num_pad)]
    mixed = draw(st.booleans()) if shuffled is None else shuffled
    if mixed:
        rows = draw(st.permutations(rows))
    g, u, a, op, b = (np.asarray([r[k] for r in rows], dtype=np.int32) for k in range(5))
    num_agents_P = np.asarray(agents, dtype=np.int64)
    votes = VoteArrays(g, u, a, op, b)
    if judges:
        judge_id = st.one_of(st.just(-1), st.just(-1), st.integers(0, 3), st.sampled_from((-2, -7)))
        judge = draw(st.lists(judge_id, min_size=len(rows), max_size=len(rows)))
        weight: npt.NDArray[np.float64] | None = None
        if draw(st.integers(0, 3)) > 0:
            weights = draw(st.lists(st.sampled_from(_WEIGHTS), min_size=len(rows), max_size=len(rows)))
            weight = np.asarray(weights, dtype=np.float64)
        votes = VoteArrays(g, u, a, op, b, np.asarray(judge, dtype=np.int32), weight)
    if repeats or (padding and copied_padding):
        votes = draw(_copied_votes(votes, num_agents_P, repeats, padding and copied_padding, mixed))
    return VoteBatch(votes, num_agents_P)


@st.composite
def _copied_votes(
    draw: st.DrawFn,
    votes: VoteArrays,
    num_agents_P: npt.NDArray[np.int64],
    repeats: bool,
    copied_padding: bool,
    mixed: bool,
) -> VoteArrays:
    """``votes`` with copies of valid rows appended: repeats (same debate) and padding (group id P).

    With judge fields, some repeats are cast by a judge whose author field names one of the compared
    agents (a judge vote is nobody's own vote, whatever its author field says)."""
    g = votes.group_ids_V
    num_groups = int(num_agents_P.size)
    valid_rows = np.flatnonzero(validate_votes(votes, num_agents_P).valid_V).tolist()
    if not valid_rows:
        return votes
    take: list[int] = []
    judged: list[int] = []  # per repeat: 0 an exact copy, 1 a judge's vote by a, 2 by b
    if repeats:
        kind = st.sampled_from((0, 0, 1, 2)) if votes.judge_V is not None else st.just(0)
        for k, how in draw(st.lists(st.tuples(st.sampled_from(valid_rows), kind), max_size=4)):
            take.append(k)
            judged.append(how)
    pad: list[int] = []
    if copied_padding:
        last = [k for k in valid_rows if g[k] == num_groups - 1]
        from_last = bool(last) and draw(st.booleans())  # often a vote valid in debate P - 1
        pad = draw(st.lists(st.sampled_from(last if from_last else valid_rows), max_size=3))
    if not take and not pad:
        return votes
    order = np.asarray(take + pad, dtype=np.int64)
    extra = votes.take(order)
    extra = extra._replace(
        group_ids_V=np.where(np.arange(order.size) < len(take), extra.group_ids_V, num_groups)
    )
    if extra.judge_V is not None and any(judged):
        kinds = np.asarray(judged + [0] * len(pad))
        authors = np.select([kinds == 1, kinds == 2], [extra.a_V, extra.b_V], extra.authors_V)
        extra = extra._replace(
            authors_V=authors.astype(np.int32), judge_V=np.where(kinds > 0, 0, extra.judge_V).astype(np.int32)
        )
    out = _concat_votes(votes, extra)
    if mixed:
        out = out.take(np.asarray(draw(st.permutations(range(out.a_V.size))), dtype=np.int64))
    return out


_WEIGHTS: tuple[float, ...] = (1.0, 1.0, 0.0, 0.25, 0.5, 1.5, 2.0, 3.0)


__all__ += ["VoteBatch", "debate_votes", "vote_batches"]


# Text generation for the parser: agent outputs (well formed, realistic, broken) and near-miss XML.

_TAG_NAMES: tuple[str, ...] = ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
_FIELD_EDGES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u200b\u200c\u200d\u2060\ufeff"
)
_FIELD_PIECES: tuple[str, ...] = (
    "the",
    "answer",
    "is",
    "x = 4",
    "because",
    "a < b",
    "b > a",
    "Agent 2",
    "agent 1 > agent 0",
    "**bold**",
    "`code`",
    "$x^2 + 1$",
    "N/A",
    "YES",
    "no",
    "1.",
    "- ",
    "## Title",
    "(see above)",
    "é",
    "Ελληνικά",
    "العربية",
    "漢字",
    "🙂",
    "\u00a0",
    "\u200b",
    "١٢",
    "０",
    "İ",
    "ſ",
    " ",
    " ",
    "\n",
    "\n\n",
    "\t",
    "```",
    "->",
    ">=",
    "&amp;",
    "<br>",
    "<b>x</b>",
)


def _tag_free(text: str) -> bool:
    from kernel._parse_common import _fold  # re.IGNORECASE-exact, same length

    folded = _fold(text)
    return not any(f"<{name}" in folded or f"</{name}" in folded for name in (*_TAG_NAMES, "think"))


@st.composite
def agent_field_texts(draw: st.DrawFn, *, min_size: int = 0, max_size: int = 12) -> str:
    """A field text that round-trips through ``render_response`` → ``parse_response`` (any policy).

    Words, markup, math, Unicode letters and digits, inner whitespace of every kind; never a tag of the
    output format (``<solution``, ``</think>`` …, any case) and no leading or trailing whitespace or
    zero-width characters. ``min_size`` / ``max_size`` count pieces, not characters.

    Args:
      min_size: fewest pieces.
      max_size: most pieces.

    Returns:
      A strategy of ``str``.

    Examples:
      >>> from hypothesis import given, settings
      >>> @settings(max_examples=20)
      ... @given(agent_field_texts())
      ... def check(text):
      ...     assert text == text.strip() and "<solution" not in text.lower()
      >>> check()
    """
    pieces = draw(
        st.lists(
            st.one_of(st.sampled_from(_FIELD_PIECES), st.text(max_size=4)),
            min_size=min_size,
            max_size=max_size,
        )
    )
    text = "".join(pieces).strip(_FIELD_EDGES)
    if not _tag_free(text):
        text = text.replace("<", "‹")
    return text


@st.composite
def agent_response_fields(draw: st.DrawFn, *, num_agents: int = 4, max_votes: int = 6) -> dict[str, Any]:
    """Keyword arguments of ``render_response``: field texts, votes among ``num_agents``, consensus.

    Votes are ``Vote(a, op, b)`` with ``a, b`` in ``[0, num_agents)`` (``a == b`` included) and ``op`` in
    ``{">", "="}``.

    Args:
      num_agents: agent ids of the votes lie in ``[0, num_agents)``.
      max_votes: most votes.

    Returns:
      A strategy of ``dict`` (keyword arguments of ``render_response``).

    Examples:
      >>> from hypothesis import find
      >>> sorted(find(agent_response_fields(), lambda f: True))
      ['comparisons', 'consensus', 'consensus_reason', 'evaluation', 'solution']
    """
    from kernel._types import Vote

    agent = st.integers(0, max(num_agents - 1, 0))
    votes = draw(st.lists(st.builds(Vote, agent, st.sampled_from((">", "=")), agent), max_size=max_votes))
    return {
        "solution": draw(agent_field_texts()),
        "evaluation": draw(agent_field_texts()),
        "comparisons": votes,
        "consensus": draw(st.booleans()),
        "consensus_reason": draw(agent_field_texts()),
    }


_PROSE: tuple[str, ...] = (
    "Let me think about this carefully.",
    "First, compute the derivative.",
    "Agent 1 made an arithmetic error, so Agent 2 > Agent 1 I think.",
    "I need to put my final answer inside <solution> tags.",
    "Then <consensus>YES</consensus> or NO, and a <consensus_reason>.",
    "Draft: <solution>42</solution>",
    "Wait, maybe not.",
    "The answer is 7 since 3 + 4 = 7.",
)
_VOTE_LINES: tuple[str, ...] = (
    "Agent {a} > Agent {b}",
    "Agent {a} = Agent {b}",
    "Agent {a} < Agent {b}",
    "- Agent {a} > Agent {b}: clearer proof",
    "**Agent {a}** > **Agent {b}**",
    "agent {a} > agent {b}",
    "Agent{a} > Agent{b}",
    "Agent {a} > Agent {b} > Agent {c}",
    "Agent {a} > Agent {b} = Agent {c}",
    "Agent {a} >= Agent {b}",
    "Agent {a} is better than Agent {b}",
    "Agent {a} > Agent {b}; Agent {b} = Agent {c}",
    "N/A",
    "None yet.",
    "",
)
_CONSENSUS_VALUES: tuple[str, ...] = (
    "YES",
    "NO",
    "yes",
    "Yes.",
    "**YES**",
    "YES - agreed",
    "No",
    "N/A",
    "ＹＥＳ",
    "'YES'",
    "YES/NO",
    "",
)


@st.composite
def agent_outputs(draw: st.DrawFn, *, num_agents: int = 4) -> str:
    """A realistic agent output: mostly well formed, with the variations and faults models produce.

    Reasoning (a ``<think>`` block, or Qwen3 style with only ``</think>``, mentioning tags), preamble
    prose, code fences, tag case, a draft block before the real one, every comparison syntax (``<``,
    chains, markdown, ``>=``, prose, ``N/A``), consensus spellings, and endings cut by a stripped stop
    string or truncated anywhere.

    Args:
      num_agents: agent ids named in comparisons lie in ``[0, num_agents)``.

    Returns:
      A strategy of ``str``.

    Examples:
      >>> from hypothesis import find
      >>> "</consensus_reason>" in find(agent_outputs(), lambda t: True)
      True
    """
    agent = st.integers(0, max(num_agents - 1, 0))
    prose = st.lists(st.sampled_from(_PROSE), max_size=3).map(" ".join)

    def tag(name: str) -> tuple[str, str]:
        style = draw(st.sampled_from(("lower", "lower", "lower", "upper", "title")))
        word = {"lower": name, "upper": name.upper(), "title": name.title()}[style]
        return f"<{word}>", f"</{word}>"

    def block() -> str:
        lines = []
        for _ in range(draw(st.integers(0, 4))):
            a, b, c = draw(agent), draw(agent), draw(agent)
            lines.append(draw(st.sampled_from(_VOTE_LINES)).format(a=a, b=b, c=c))
        parts = [
            ("solution", draw(agent_field_texts(min_size=1))),
            ("evaluation", draw(st.sampled_from(("N/A", "Agent 0 is right.", "")))),
            ("comparison", "\n".join(lines)),
            ("consensus", draw(st.sampled_from(_CONSENSUS_VALUES))),
            ("consensus_reason", draw(agent_field_texts())),
        ]
        sep = draw(st.sampled_from(("\n", "\n\n", "")))
        return sep.join(f"{o}\n{body}\n{c}" for (o, c), body in ((tag(n), b) for n, b in parts))

    out = block()
    if draw(st.booleans()):
        out = block() + "\n" + out  # a draft answer before the real one
    if draw(st.booleans()):
        out = draw(prose) + "\n\n" + out
    if draw(st.booleans()):
        out = f"```{draw(st.sampled_from(('', 'xml', 'XML')))}\n{out}\n```"
    reasoning = draw(st.sampled_from(("none", "full", "qwen3")))
    if reasoning == "full":
        out = f"<think>\n{draw(prose)}\n</think>\n\n{out}"
    elif reasoning == "qwen3":
        out = f"{draw(prose)}\n</think>\n\n{out}"
    ending = draw(st.sampled_from(("complete", "complete", "stop_string", "truncated")))
    if ending == "stop_string" and out.endswith("</consensus_reason>"):
        out = out[: -len("</consensus_reason>")]
    elif ending == "truncated":
        out = out[: draw(st.integers(0, len(out)))]
    return out


_NEAR_MISS: tuple[str, ...] = (
    *(f"<{n}>" for n in (*_TAG_NAMES, "think")),
    *(f"</{n}>" for n in (*_TAG_NAMES, "think")),
    "<SOLUTION>",
    "<Consensus>",
    "</COMPARISON>",
    "<THINK>",
    "</Think>",
    "<Evaluation>",
    "<solution",
    "</consensus_reason",
    "<consensus_",
    "<consensus ",
    "<solution type='final'>",
    "<solution\n>",
    "</solution >",
    "<solutions>",
    "<conſenſus>",
    "<thİnk>",
    "<\u212aonsensus>",
    "<",
    ">",
    "</",
    "/>",
    "```xml\n",
    "\n```",
    "```",
    "Agent 1 > Agent 2",
    "Agent 0 < Agent 3",
    "Agent",
    "Agent ",
    "agent 1",
    ">",
    "=",
    ">=",
    "==",
    "١",
    "０",
    "0" * 12,
    "\u200b",
    "\ufeff",
    " ",
    "\n",
    "\t",
    "\u00a0",
    "\u3000",
    "YES",
    "yes.",
    "NO",
    "N/A",
    "**",
    "- ",
)


@st.composite
def near_miss_xml(draw: st.DrawFn, *, max_parts: int = 40) -> str:
    """Text built from fragments of the output format: tags in every case, broken, nested, unclosed,
    think markers, fences, vote pieces, Unicode digits and whitespace, and random text in between.

    Args:
      max_parts: most fragments.

    Returns:
      A strategy of ``str``.

    Examples:
      >>> from hypothesis import find
      >>> find(near_miss_xml(), lambda t: "<solution>" in t)
      '<solution>'
    """
    parts = draw(st.lists(st.one_of(st.sampled_from(_NEAR_MISS), st.text(max_size=6)), max_size=max_parts))
    return "".join(parts)


__all__ += ["agent_field_texts", "agent_outputs", "agent_response_fields", "near_miss_xml"]


# --- grouped rewards (advantages) ----------------------------------------------------------------


class GroupedRewards(NamedTuple):
    """One drawn batch of grouped rewards: the inputs of an advantage estimator.

    Attributes:
      rewards: ``[PG]`` float rewards (float64 unless ``dtype=`` asked otherwise).
      group_ids: ``[PG]`` int32 group of each row in ``[0, num_groups]``; ``num_groups`` marks padding.
      num_groups: the static group count P (some groups may be empty when ``min_size=0``).
      where: ``[PG]`` bool (False rows must be ignored) or None.
      sizes_P: ``[P]`` int64 rows per group, masked rows included, padding excluded.
    """

    rewards: npt.NDArray[np.floating[Any]]
    group_ids: npt.NDArray[np.int32]
    num_groups: int
    where: npt.NDArray[np.bool_] | None
    sizes_P: npt.NDArray[np.int64]


GROUP_REWARD_KINDS: tuple[str, ...] = ("binary", "levels", "continuous", "constant", "outlier")
"""Shapes of one group's rewards: 0/1 outcomes, a few tied levels, arbitrary floats, all equal, all
equal but one (one rollout of many solved it: the largest |z| a group of n can hold, √(n − 1))."""

DEFAULT_MAGNITUDES: tuple[float, ...] = (1e-6, 1e-3, 1.0, 1e3, 1e6)
"""Reward scales drawn by default: from tiny to large."""

_NON_FINITE: tuple[float, ...] = (math.nan, math.inf, -math.inf, 1e300, -1e300)


@st.composite
def group_reward_values(
    draw: st.DrawFn,
    size: int,
    *,
    kinds: Sequence[str] = GROUP_REWARD_KINDS,
    magnitudes: Sequence[float] = DEFAULT_MAGNITUDES,
) -> list[float]:
    """The rewards of one group of ``size`` rows: ``offset + scale·v`` with v of a drawn kind.

    ``kinds`` picks among :data:`GROUP_REWARD_KINDS`: "binary" v ∈ {0, 1}; "levels" v ∈ {−3/2 … 3/2}
    with many ties; "continuous" v ∈ [−1, 1] (|v| < 1e-6 flushed to 0); "constant" one value
    repeated; "outlier" zeros but one ±1 (one row of ``size``). ``scale`` is one of ``magnitudes``;
    the offset is 0, or a large multiple of the scale (ill-conditioned groups).

    Args:
      size: rows of the group.
      kinds: the value shapes to draw from.
      magnitudes: the scales to draw from.

    Returns:
      A strategy of ``list[float]`` of length ``size``.

    Raises:
      ValueError: an unknown kind (when drawn).

    Examples:
      >>> from hypothesis import find
      >>> find(group_reward_values(3, kinds=("constant",)), lambda v: True)
      [0.0, 0.0, 0.0]
    """
    kind = draw(st.sampled_from(tuple(kinds)))
    scale = draw(st.sampled_from(tuple(magnitudes)))
    offset = scale * draw(st.sampled_from((0.0, 0.0, 0.0, 100.0, -1e4)))
    unit = st.floats(-1.0, 1.0).map(lambda v: v if abs(v) >= 1e-6 else 0.0)  # no underflow games
    if kind == "binary":
        values = draw(st.lists(st.sampled_from((0.0, 1.0)), min_size=size, max_size=size))
    elif kind == "levels":
        values = draw(st.lists(st.integers(-3, 3), min_size=size, max_size=size))
        values = [v / 2 for v in values]
    elif kind == "continuous":
        values = draw(st.lists(unit, min_size=size, max_size=size))
    elif kind == "constant":
        values = [draw(unit)] * size
    elif kind == "outlier":
        values = [0.0] * size
        if size:
            values[draw(st.integers(0, size - 1))] = draw(st.sampled_from((1.0, -1.0)))
    else:
        raise ValueError(f"unknown kind {kind!r}; expected one of {GROUP_REWARD_KINDS}")
    return [offset + scale * v for v in values]


@st.composite
def grouped_rewards(
    draw: st.DrawFn,
    *,
    min_groups: int = 1,
    max_groups: int = 4,
    min_size: int = 1,
    max_size: int = 6,
    large_size: int = 0,
    masks: bool | None = None,
    nan: bool = False,
    padding: bool = False,
    shuffled: bool | None = None,
    dtype: npt.DTypeLike = np.float64,
    kinds: Sequence[str] = GROUP_REWARD_KINDS,
    magnitudes: Sequence[float] = DEFAULT_MAGNITUDES,
) -> GroupedRewards:
    """Ragged groups of rewards as flat rows plus ``group_ids`` (see :class:`GroupedRewards`).

    Group sizes lie in ``[min_size, max_size]`` (0 gives empty groups), except that with ``large_size >
    max_size`` the first group may be drawn from ``(max_size, large_size]``: the sizes used in practice
    (8-64 rollouts a prompt), where behaviour that needs many rows shows (a clip at ±3σ is reachable only
    from about 10 rows). Each group's values come from :func:`group_reward_values`. ``masks``: True
    always draws a ``where`` mask, False never, None either. ``nan=True`` puts NaN, ±inf or ±1e300 on
    masked and padding rows (never on live rows), so an estimator that lets ignored rows leak is caught.
    ``padding=True`` appends 0–2 rows with id ``num_groups``. ``shuffled``: rows group-major (False),
    interleaved (True) or either (None).

    Args:
      min_groups: fewest groups P.
      max_groups: most groups P.
      min_size: fewest rows per group.
      max_size: most rows per group.
      large_size: most rows of the one group that may be large (0 or ≤ ``max_size``: none is).
      masks: draw a ``where`` mask always (True), never (False) or either (None).
      nan: put non-finite and huge values on ignored rows.
      padding: append padding rows (id P).
      shuffled: interleave the groups (True), group-major (False) or either (None).
      dtype: float dtype of the rewards.
      kinds: value shapes (:data:`GROUP_REWARD_KINDS`).
      magnitudes: scales (:data:`DEFAULT_MAGNITUDES`).

    Returns:
      A strategy of :class:`GroupedRewards`.

    Examples:
      >>> from hypothesis import find
      >>> case = find(grouped_rewards(min_groups=2), lambda c: c.rewards.size >= 3)
      >>> case.num_groups, case.group_ids.dtype.name, case.rewards.dtype.name
      (2, 'int32', 'float64')
    """
    num_groups = draw(st.integers(min_groups, max_groups))
    sizes = draw(st.lists(st.integers(min_size, max_size), min_size=num_groups, max_size=num_groups))
    if large_size > max_size and num_groups and draw(st.booleans()):
        sizes[0] = draw(st.integers(max_size + 1, large_size))
    rewards: list[float] = []
    ids: list[int] = []
    for g, size in enumerate(sizes):
        rewards += draw(group_reward_values(size, kinds=kinds, magnitudes=magnitudes))
        ids += [g] * size
    num_pad = draw(st.integers(0, 2)) if padding else 0
    rewards += draw(st.lists(st.floats(-10.0, 10.0), min_size=num_pad, max_size=num_pad))
    ids += [num_groups] * num_pad
    n = len(rewards)
    use_mask = draw(st.booleans()) if masks is None else masks
    where = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if use_mask else None
    if nan:
        for i in range(n):
            ignored = ids[i] == num_groups or (where is not None and not where[i])
            if ignored and draw(st.booleans()):
                rewards[i] = draw(st.sampled_from(_NON_FINITE))
    order = list(range(n))
    if draw(st.booleans()) if shuffled is None else shuffled:
        order = draw(st.permutations(order))
    with np.errstate(over="ignore"):  # ±1e300 on ignored rows overflows float32 to ±inf: intended
        rewards_arr = np.asarray([rewards[i] for i in order], dtype=np.float64).astype(dtype)
    return GroupedRewards(
        rewards=rewards_arr,
        group_ids=np.asarray([ids[i] for i in order], dtype=np.int32),
        num_groups=num_groups,
        where=None if where is None else np.asarray([where[i] for i in order], dtype=bool),
        sizes_P=np.asarray(sizes, dtype=np.int64),
    )


__all__ += [
    "DEFAULT_MAGNITUDES",
    "GROUP_REWARD_KINDS",
    "GroupedRewards",
    "group_reward_values",
    "grouped_rewards",
]


# --- token trajectories (datums) -----------------------------------------------------------------


class TokenTrajectories(NamedTuple):
    """One drawn batch of token trajectories, as Python lists (pack with ``trajectories_from_lists``).

    Attributes:
      transitions_B: per trajectory, its transitions ``(ob_tokens, ac_tokens, logprobs | None)``.
      advantages_B: one advantage per trajectory.
    """

    transitions_B: list[list[tuple[list[int], list[int], list[float] | None]]]
    advantages_B: list[float]


TRANSITION_KINDS: tuple[str, ...] = ("extend", "equal", "rerender", "shorter", "fresh")
"""How a drawn observation relates to the previous transition's observation obₚ and action acₚ:
"extend" obₚ ++ acₚ ++ new tokens (possibly none: an empty delta), "equal" obₚ again, "rerender" a prefix
of obₚ then new tokens (as a debate re-render), "shorter" a strict prefix of obₚ ++ acₚ, "fresh" new
tokens."""

_ADVANTAGES: tuple[float, ...] = (0.0, 1.0, -1.0, 0.5, -0.25, 1e-50, 123456.789, 1 / 3)


@st.composite
def token_transitions(
    draw: st.DrawFn,
    *,
    max_transitions: int = 4,
    max_tokens: int = 5,
    vocab: int = 6,
    kinds: Sequence[str] = TRANSITION_KINDS,
    errors: bool = True,
) -> list[tuple[list[int], list[int], list[float] | None]]:
    """The transitions of one trajectory, built so that merges, re-renders and edge cases are common.

    Tokens are in ``[0, vocab)`` (a small vocabulary makes accidental prefixes likely); new token runs and
    actions have 0 to ``max_tokens`` tokens. Logprobs are one float32-representable value ≤ 0 per action
    token; ``errors=True`` sometimes makes them None or one too many / too few.

    Args:
      max_transitions: most transitions.
      max_tokens: most tokens per new run and per action.
      vocab: tokens lie in ``[0, vocab)``.
      kinds: relations between consecutive observations (:data:`TRANSITION_KINDS`).
      errors: sometimes give no logprobs or a wrong count.

    Returns:
      A strategy of lists of ``(ob_tokens, ac_tokens, logprobs | None)``.

    Raises:
      ValueError: an unknown kind (when drawn).

    Examples:
      >>> from hypothesis import find
      >>> find(token_transitions(errors=False), lambda ts: len(ts) == 2 and ts[1][0] == ts[0][0] + ts[0][1])
      [([], [], []), ([], [], [])]
    """
    tokens = st.lists(st.integers(0, vocab - 1), max_size=max_tokens)
    logprob = st.floats(-30.0, 0.0, width=32)
    out: list[tuple[list[int], list[int], list[float] | None]] = []
    for i in range(draw(st.integers(0, max_transitions))):
        if i == 0:
            ob = draw(tokens)
        else:
            prev_ob, prev_ac = out[-1][0], out[-1][1]
            kind = draw(st.sampled_from(tuple(kinds)))
            if kind == "extend":
                ob = prev_ob + prev_ac + draw(tokens)
            elif kind == "equal":
                ob = list(prev_ob)
            elif kind == "rerender":
                ob = prev_ob[: draw(st.integers(0, len(prev_ob)))] + draw(tokens)
            elif kind == "shorter":
                full = prev_ob + prev_ac
                ob = full[: draw(st.integers(0, max(len(full) - 1, 0)))]
            elif kind == "fresh":
                ob = draw(tokens)
            else:
                raise ValueError(f"unknown kind {kind!r}; expected one of {TRANSITION_KINDS}")
        ac = draw(tokens)
        drawn = draw(st.lists(logprob, min_size=len(ac), max_size=len(ac)))
        lps: list[float] | None = drawn
        if errors and draw(st.integers(0, 9)) == 0:
            lps = draw(st.sampled_from((None, [*drawn, -1.0], drawn[:-1] if drawn else [-1.0])))
        out.append((ob, ac, lps))
    return out


@st.composite
def token_trajectories(
    draw: st.DrawFn,
    *,
    max_trajectories: int = 4,
    max_transitions: int = 4,
    max_tokens: int = 5,
    vocab: int = 6,
    kinds: Sequence[str] = TRANSITION_KINDS,
    errors: bool = True,
) -> TokenTrajectories:
    """A batch of 0 to ``max_trajectories`` trajectories from :func:`token_transitions`.

    Advantages are drawn from a few telling values: 0, ±1, fractions, 1e-50 (0 in float32), 123456.789.

    Args:
      max_trajectories: most trajectories B.
      max_transitions: most transitions per trajectory.
      max_tokens: most tokens per new run and per action.
      vocab: tokens lie in ``[0, vocab)``.
      kinds: relations between consecutive observations (:data:`TRANSITION_KINDS`).
      errors: sometimes give no logprobs or a wrong count.

    Returns:
      A strategy of :class:`TokenTrajectories`.

    Examples:
      >>> from hypothesis import find
      >>> find(token_trajectories(), lambda b: len(b.transitions_B) == 1)
      TokenTrajectories(transitions_B=[[]], advantages_B=[0.0])
    """
    num = draw(st.integers(0, max_trajectories))
    one = token_transitions(
        max_transitions=max_transitions, max_tokens=max_tokens, vocab=vocab, kinds=kinds, errors=errors
    )
    transitions_B = [draw(one) for _ in range(num)]
    advantages_B = draw(st.lists(st.sampled_from(_ADVANTAGES), min_size=num, max_size=num))
    return TokenTrajectories(transitions_B, advantages_B)


__all__ += ["TRANSITION_KINDS", "TokenTrajectories", "token_trajectories", "token_transitions"]


def _concat_votes(v: VoteArrays, extra: VoteArrays) -> VoteArrays:
    """The rows of ``v`` then those of ``extra``; an optional field (``judge_V``, ``weight_V``) is kept
    when both have it, else dropped."""
    g, u, a, op, b = (np.concatenate([x, y]) for x, y in zip(v[:5], extra[:5], strict=True))
    judge = None if v.judge_V is None or extra.judge_V is None else np.concatenate([v.judge_V, extra.judge_V])
    weight = (
        None if v.weight_V is None or extra.weight_V is None else np.concatenate([v.weight_V, extra.weight_V])
    )
    return VoteArrays(g, u, a, op, b, judge, weight)
