"""Scores a flat batch of debate turns, as trainers hand them over: one row per agent output.

Trainers see rows (one completion each), not debates. A row names its debate (any hashable key), the
agent that wrote it (``0 ≤ agent < N``) and the debate's agent count N. :func:`score_rows` parses every
row with the kernel's parser, collects the votes of each debate's parsed rows (all rounds, as the
reference's final reward does), computes the leave-one-out pairwise reward of every agent
(:func:`kernel.pairwise_rewards`) and gives each row its agent's reward. An agent's reward never
depends on its own votes, so a row's reward is what the other rows of its debate said about its agent.

Examples:
  >>> tags = "<solution>{}</solution><evaluation>x</evaluation><comparison>{}</comparison>" \\
  ...        "<consensus>YES</consensus><consensus_reason>x</consensus_reason>"
  >>> rows = score_rows(
  ...     [tags.format(4, "Agent 1 > Agent 2"), tags.format(4, "Agent 0 > Agent 2"), "no tags"],
  ...     debate_keys=["q1", "q1", "q1"], agent_ids=[0, 1, 2], num_agents=[3, 3, 3])
  >>> rows.pairwise_U, rows.parse_ok_U
  (array([1., 1., 0.]), array([ True,  True, False]))
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

import kernel
from kernel import PAIRWISE_MODES, PARSE_POLICIES, PairwiseMode, ParsedResponse, ParsePolicy
from kernel.checks import check_real

__all__ = ["RowScores", "check_score_options", "score_rows"]


class RowScores(NamedTuple):
    """Per-row results of :func:`score_rows`: U rows (agent turns, `_U` in the README), in input order.

    Attributes:
      pairwise_U: float64 [U], the leave-one-out pairwise reward of the row's agent in its debate.
      parse_ok_U: bool [U], the row parsed (every required tag present).
      consensus_U: bool [U], the row declared consensus (False when it did not parse).
      debate_ids_U: int32 [U], dense debate ids, numbered by first appearance.
      total_votes_P: int32 [P], valid votes counted in each debate.
      malformed_P: int32 [P], invalid votes in each debate.
      parsed_U: the parse result of every row.
    """

    pairwise_U: npt.NDArray[np.float64]
    parse_ok_U: npt.NDArray[np.bool_]
    consensus_U: npt.NDArray[np.bool_]
    debate_ids_U: npt.NDArray[np.int32]
    total_votes_P: npt.NDArray[np.int32]
    malformed_P: npt.NDArray[np.int32]
    parsed_U: tuple[ParsedResponse, ...]


def _agent_table(
    debate_ids: npt.NDArray[np.int32], agent_ids: Sequence[int], num_agents: Sequence[int], num_debates: int
) -> npt.NDArray[np.int64]:
    """Agent count of each debate; every row of a debate must give the same count and an agent below it."""
    n_P = np.full(num_debates, -1, dtype=np.int64)
    for r, (p, agent, n) in enumerate(zip(debate_ids.tolist(), agent_ids, num_agents, strict=True)):
        if isinstance(agent, bool) or not isinstance(agent, (int, np.integer)):
            raise TypeError(f"agent_ids[{r}] must be an int, got {type(agent).__name__}")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"num_agents[{r}] must be an int ≥ 1, got {n!r}")
        if n_P[p] not in (-1, n):
            raise ValueError(
                f"num_agents[{r}] = {n} differs from {n_P[p]} given by another row of its debate"
            )
        n_P[p] = int(n)
        if not 0 <= agent < n:
            raise ValueError(f"agent_ids[{r}] = {agent} is outside [0, {n}) for its debate")
    return n_P


def check_score_options(policy: object, mode: object, unvoted: object) -> float:
    """Checks :func:`score_rows`'s options (so that a reward function built with a misspelt one fails when
    it is built, not at a trainer's first step); returns ``unvoted`` as a float.

    Raises:
      ValueError: an unknown ``policy`` or ``mode``, a non-finite ``unvoted``.
      TypeError: ``unvoted`` not a real number.

    Examples:
      >>> check_score_options("robust", "win_minus_loss", 0)
      0.0
      >>> check_score_options("strict", "win_rate", 0.0)
      Traceback (most recent call last):
        ...
      ValueError: policy must be one of ('robust', 'reference'), got 'strict'
    """
    if policy not in PARSE_POLICIES:
        raise ValueError(f"policy must be one of {PARSE_POLICIES}, got {policy!r}")
    if mode not in PAIRWISE_MODES:
        raise ValueError(f"mode must be one of {PAIRWISE_MODES}, got {mode!r}")
    return check_real(unvoted, "unvoted", finite=True)


def score_rows(
    texts: Sequence[str],
    *,
    debate_keys: Sequence[Hashable],
    agent_ids: Sequence[int],
    num_agents: Sequence[int],
    policy: ParsePolicy = "robust",
    mode: PairwiseMode = "win_rate",
    unvoted: float = 0.0,
) -> RowScores:
    """Parse results and leave-one-out pairwise rewards of a flat batch of agent outputs.

    Row r of debate p, written by agent i: ``pairwise_U[r] = r_i`` of :func:`kernel.pairwise_rewards`
    over the votes of every parsed row of p (REFERENCE §2; votes in rows that did not parse do not count,
    as in the reference).

    Args:
      texts: U agent outputs (turns).
      debate_keys: U hashable debate keys (question id, ``uid`` …); rows with equal keys form a debate.
      agent_ids: U ints, the author of each row, in ``[0, N)`` of its debate.
      num_agents: U ints ≥ 1, the debate's agent count N (equal on every row of a debate).
      policy: parse policy, ``"robust"`` (default) or ``"reference"``.
      mode: ``"win_rate"`` or ``"win_minus_loss"``.
      unvoted: reward of an agent no valid vote judged (a finite number: a NaN would make the row's
        score NaN, and a trainer would then drop it).

    Returns:
      :class:`RowScores`.

    Raises:
      ValueError: lengths differ, an agent id outside ``[0, N)``, a debate given two agent counts, a
        non-finite ``unvoted``.
      TypeError: a text that is not a str, an agent id that is not an int.

    Examples:
      Two debates of three agents; in ``q2`` agent 1 wrote nothing and agent 2's output does not parse,
      so agent 0, whom no valid vote judged, gets ``unvoted``:

      >>> tags = ("<solution>{}</solution><evaluation>e</evaluation><comparison>{}</comparison>"
      ...         "<consensus>NO</consensus><consensus_reason>r</consensus_reason>")
      >>> rows = score_rows(
      ...     [tags.format(4, "Agent 1 > Agent 2"), tags.format(4, "Agent 0 = Agent 2"),
      ...      tags.format(5, "Agent 0 > Agent 1"), tags.format(3, "Agent 1 > Agent 2"), "no tags"],
      ...     debate_keys=["q1", "q1", "q1", "q2", "q2"], agent_ids=[0, 1, 2, 0, 2], num_agents=[3] * 5,
      ...     mode="win_minus_loss")
      >>> rows.pairwise_U, rows.debate_ids_U, rows.total_votes_P
      (array([ 0.5,  0. , -0.5,  0. , -1. ]), array([0, 0, 0, 1, 1], dtype=int32), array([3, 1], dtype=int32))
    """
    unvoted = check_score_options(policy, mode, unvoted)
    lengths = {len(texts), len(debate_keys), len(agent_ids), len(num_agents)}
    if len(lengths) != 1:
        raise ValueError(
            "texts, debate_keys, agent_ids and num_agents must have one entry per row, got lengths "
            f"{len(texts)}, {len(debate_keys)}, {len(agent_ids)}, {len(num_agents)}"
        )
    for r, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{r}] must be a str, got {type(text).__name__}")
    debate_ids, num_debates = (
        kernel.dense_group_ids(list(debate_keys)) if texts else (np.zeros(0, np.int32), 0)
    )
    n_P = _agent_table(debate_ids, agent_ids, num_agents, num_debates)
    parsed = tuple(
        kernel.parse_response(text, int(agent), policy=policy)
        for text, agent in zip(texts, agent_ids, strict=True)
    )
    by_debate: list[list[ParsedResponse]] = [[] for _ in range(num_debates)]
    for p, response in zip(debate_ids.tolist(), parsed, strict=True):
        by_debate[p].append(response)
    rewards = kernel.pairwise_rewards(kernel.votes_from_responses(by_debate), n_P, mode=mode, unvoted=unvoted)
    offsets = np.concatenate([[0], np.cumsum(n_P)[:-1]]).astype(np.int64)
    rows = offsets[debate_ids] + np.asarray(agent_ids, dtype=np.int64) if texts else np.zeros(0, np.int64)
    return RowScores(
        pairwise_U=rewards.rewards_PG[rows],
        parse_ok_U=np.array([r.ok for r in parsed], dtype=bool),
        consensus_U=np.array([r.ok and r.consensus for r in parsed], dtype=bool),
        debate_ids_U=debate_ids,
        total_votes_P=rewards.total_votes_P,
        malformed_P=rewards.malformed_P,
        parsed_U=parsed,
    )


def warn_shared_agents(
    debate_ids_U: npt.NDArray[np.int32], agent_ids: Sequence[int], *, stacklevel: int = 2
) -> None:
    """Warns (RuntimeWarning) when rows of one debate name the same agent: they get the same pairwise
    reward, so that reward cannot rank them against each other (a trainer's group of ``n`` samples of one
    agent's turn, e.g. verl's ``rollout.n > 1``, then learns nothing from it)."""
    seen: set[tuple[int, int]] = set()
    for r, (p, agent) in enumerate(zip(debate_ids_U.tolist(), agent_ids, strict=True)):
        if (p, int(agent)) in seen:
            warnings.warn(
                f"row {r} is agent {int(agent)} of a debate that already has a row for that agent: rows of "
                "one agent in one debate get the same pairwise reward, so it cannot rank them (give each "
                "sample its own debate, or rank them with the correctness and format terms)",
                RuntimeWarning,
                stacklevel=stacklevel + 1,
            )
            return
        seen.add((p, int(agent)))
