"""Scoring played debates: one pure function from episodes to rewards, returns, advantages and datums.

Every route that learns from debates (``debate-kernel score`` over transcripts, training over rollouts,
the fixed-opponent evaluation, the HTML report) hands its debates to :func:`score_episodes` as
:class:`Episode` values and reads the same :class:`ScoredEpisodes`; what differs between routes is only
how the episodes are made (read and replayed from a file, or played by a sampler). Options are one typed
:class:`ScoringOptions` value, read from text once at the edge.

For P debates, debate p with N_p agents, the packed rows R = Σ N_p are debate-major, agent-minor
(debate p's agent i is row ``offsets_P1[p] + i``), as everywhere in the kernel:

    votes        every vote of every parsed turn (:func:`votes_from_responses`); with
                 ``round1_votes="drop"`` the votes a turn of round 1 casts on agents who have not spoken
                 yet are removed (:func:`round1_vote_check`)
    pairwise     r_i, leave-one-out pairwise reward (:func:`pairwise_rewards`, ``reward_mode``)
    step         s_i = Σ of agent i's step rewards (−1 for a turn that failed to parse)
    returns      G_i = s_i + r_i + correctness_weight · c_i   (c_i: 1 when agent i's answer is right)
    advantages   A_i from G by the estimator: grouped advantages per debate (:func:`grouped_advantages`;
                 silent agents left out with ``silent_agents="exclude"``) or RAE baselines per role
                 (:func:`rae_advantages`); then 0 for debates of constant returns with
                 ``remove_constant_groups`` (their datums dropped) and max(A, 0) with
                 ``negative_advantages="zero"``
    datums       one trajectory per (debate, agent) of its turns with tokens, advantage A_i
                 (:func:`build_datums`, ``datum_mode``; per-token credit weights with ``credit`` other
                 than ``"turn"``)

Turn-level credit (``turn_groups`` other than ``"none"``: MT-GRPO / GiGPO-style per-round advantages):
each turn t of agent i in round r gets the reward-to-go

    G_t = Σ of i's step rewards from round r on + r_i + correctness_weight · c_i

and its advantage by the estimator over groups of turns: the turns of one round of one debate
(``"round"``), or the turns of one (round, agent) across the debates of one question group
(``"round_agent"``, :attr:`Episode.group`); each turn is then its own trajectory with its own advantage.

Judge rewards (``judge=JudgeOptions(...)``, the debate recipe's V2 credit, :mod:`kernel._judge_rewards`):
every turn t (step s of agent i) is scored twice, as an answer (its generator reward g_t, plus the turn's
own step reward: −1 for a failed parse) and as a judge (its judge reward j_t), from the votes of the
round-robin turns (:func:`judge_step_rewards`, ``schedule="sequential"``: a comparison judges the latest
answer of each agent the judge had seen). Each stream is centred per debate over all its turns by the
estimator, A_t = λ_g·(g_t − ḡ) + λ_j·(j_t − j̄), and each turn is its own trajectory. Its tokens carry
A_t (``credit="step"``, the reference) or each stream on its own tokens (``credit="fields"``: solution
and evaluation tokens λ_g·(g_t − ḡ), comparison tokens λ_j·(j_t − j̄), the others A_t; per-token field
codes in :attr:`Episode.fields_T`). The per-agent returns and advantages are still computed (metrics).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._advantages import ADVANTAGE_PRESETS, AdvantageOptions, grouped_advantages
from kernel._checks import check_bool, check_choice, check_int, check_real, check_type
from kernel._datums import DATUM_MODES, DatumMode, DatumResult, build_datums, trajectories_from_lists
from kernel._episode import round1_vote_check
from kernel._estimator_spec import Estimator, RAEOptions
from kernel._groups import constant_group_keep_mask, total_returns
from kernel._judge_rewards import (
    DualAdvantages,
    JudgeOptions,
    JudgeStepRewards,
    dual_step_advantages,
    judge_step_rewards,
)
from kernel._metrics import StepMetrics, TrajectoryMetrics, step_metrics, trajectory_metrics
from kernel._parse_common import PARSE_POLICIES, ParsePolicy
from kernel._rae import rae_advantages
from kernel._rewards import PAIRWISE_MODES, PairwiseMode, PairwiseRewards, pairwise_rewards
from kernel._types import OP_EQ, OP_GT, OP_OTHER, ParsedResponse
from kernel._votes import VoteArrays, VoteValidation, validate_votes, votes_from_responses

__all__ = [
    "CREDIT_MODES",
    "FIELD_BOTH",
    "FIELD_GENERATOR",
    "FIELD_JUDGE",
    "ROUND1_VOTE_POLICIES",
    "SILENT_AGENT_POLICIES",
    "TURN_GROUPINGS",
    "Credit",
    "Episode",
    "Round1Votes",
    "ScoredEpisodes",
    "ScoringOptions",
    "SilentAgents",
    "TurnGroups",
    "TurnTokens",
    "episode_metrics",
    "score_episodes",
]

Round1Votes = Literal["count", "drop"]
"""Round-1 votes naming an agent who had not spoken yet: counted (the reference) or dropped."""
ROUND1_VOTE_POLICIES: Final[tuple[Round1Votes, ...]] = get_args(Round1Votes)

SilentAgents = Literal["include", "exclude"]
"""Agents that never spoke in a debate: in its advantage statistics (the reference) or left out (A = 0)."""
SILENT_AGENT_POLICIES: Final[tuple[SilentAgents, ...]] = get_args(SilentAgents)

Credit = Literal["turn", "solution"]
"""How a turn's advantage is spread over its action tokens: every token gets all of it (``"turn"``), or
the caller's per-token weights do (``"solution"``: the tokens of the answer block, see
:class:`Episode`'s ``weights_T``)."""
CREDIT_MODES: Final[tuple[Credit, ...]] = get_args(Credit)

TurnGroups = Literal["none", "round", "round_agent"]
"""Turn-level advantages: none (one advantage per agent and debate), grouped per (debate, round), or per
(question group, round, agent)."""
TURN_GROUPINGS: Final[tuple[TurnGroups, ...]] = get_args(TurnGroups)

FIELD_BOTH: Final = 0
"""Field code of an action token outside the fields a reward scores (reasoning, consensus): both streams."""
FIELD_GENERATOR: Final = 1
"""Field code of a solution or evaluation token: the generator advantage."""
FIELD_JUDGE: Final = 2
"""Field code of a comparison token: the judge advantage."""

NegativeAdvantages = Literal["keep", "zero"]
_NEGATIVE: Final[tuple[NegativeAdvantages, ...]] = get_args(NegativeAdvantages)

TurnTokens: TypeAlias = tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike | None]
"""A turn's tokens: (observation ids, action ids, the sampler's logprob of each action id or None)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScoringOptions:
    """Every option of :func:`score_episodes`, typed and checked once.

    Attributes:
      parse_policy: the parse policy the episodes' responses were parsed with (``"robust"`` or
        ``"reference"``; routes that parse use it, and records name it).
      reward_mode: pairwise reward, ``"win_rate"`` or ``"win_minus_loss"``.
      unvoted: the pairwise reward of an agent no valid vote judged.
      estimator: :class:`AdvantageOptions` (grouped advantages) or :class:`RAEOptions`.
      correctness_weight: w in G = s + r + w·c.
      round1_votes: ``"count"`` (the reference) or ``"drop"``.
      silent_agents: ``"include"`` (the reference) or ``"exclude"`` (grouped advantages only).
      remove_constant_groups: a debate whose returns are all equal trains nothing: its datums are
        dropped (one is kept when every debate is constant).
      negative_advantages: ``"keep"`` or ``"zero"`` (A ← max(A, 0)).
      credit: ``"turn"`` or ``"solution"`` (the episodes carry per-token weights).
      datum_mode: :func:`build_datums`'s mode, ``"robust"`` or ``"reference"``.
      turn_groups: ``"none"`` (one advantage per agent and debate), or turn-level advantages grouped per
        ``"round"`` or ``"round_agent"`` (see the module docstring; grouped advantages only).
      judge: None (no judge rewards), or the :class:`JudgeOptions` of per-turn generator and judge
        rewards (the module docstring; grouped advantages, ``credit="turn"``, ``turn_groups="none"`` and
        no correctness weight).

    Raises:
      ValueError / TypeError: a value outside its set or of the wrong type, naming the field.

    Examples:
      >>> ScoringOptions(reward_mode="win_minus_loss").estimator.to_spec()
      'default'
      >>> ScoringOptions(credit="tokens")
      Traceback (most recent call last):
      ...
      ValueError: credit must be one of ('turn', 'solution'), got 'tokens'
    """

    parse_policy: ParsePolicy = "robust"
    reward_mode: PairwiseMode = "win_rate"
    unvoted: float = 0.0
    estimator: Estimator = ADVANTAGE_PRESETS["default"]
    correctness_weight: float = 0.0
    round1_votes: Round1Votes = "count"
    silent_agents: SilentAgents = "include"
    remove_constant_groups: bool = False
    negative_advantages: NegativeAdvantages = "keep"
    credit: Credit = "turn"
    datum_mode: DatumMode = "robust"
    turn_groups: TurnGroups = "none"
    judge: JudgeOptions | None = None

    def __post_init__(self) -> None:
        check_choice(self.parse_policy, "parse_policy", PARSE_POLICIES)
        check_choice(self.reward_mode, "reward_mode", PAIRWISE_MODES)
        check_real(self.unvoted, "unvoted", finite=True)
        check_type(self.estimator, (AdvantageOptions, RAEOptions), "estimator")
        check_real(self.correctness_weight, "correctness_weight", finite=True)
        check_choice(self.round1_votes, "round1_votes", ROUND1_VOTE_POLICIES)
        check_choice(self.silent_agents, "silent_agents", SILENT_AGENT_POLICIES)
        check_bool(self.remove_constant_groups, "remove_constant_groups")
        check_choice(self.negative_advantages, "negative_advantages", _NEGATIVE)
        check_choice(self.credit, "credit", CREDIT_MODES)
        check_choice(self.datum_mode, "datum_mode", DATUM_MODES)
        check_choice(self.turn_groups, "turn_groups", TURN_GROUPINGS)
        if self.turn_groups != "none" and isinstance(self.estimator, RAEOptions):
            raise ValueError("turn_groups needs grouped advantages (an AdvantageOptions estimator), not RAE")
        if self.judge is not None:
            check_type(self.judge, JudgeOptions, "judge")
            if isinstance(self.estimator, RAEOptions):
                raise ValueError(
                    "judge rewards need grouped advantages (an AdvantageOptions estimator), not RAE"
                )
            clash = {
                "turn_groups": (self.turn_groups, "none"),
                "credit": (self.credit, "turn"),
                "correctness_weight": (self.correctness_weight, 0.0),
            }
            for name, (value, wanted) in clash.items():
                if value != wanted:
                    raise ValueError(
                        f"judge rewards set their own per-turn credit: {name} must be {wanted!r}, "
                        f"got {value!r}"
                    )


@dataclasses.dataclass(frozen=True, slots=True)
class Episode:
    """One played debate, as :func:`score_episodes` scores it: its turns (T of them, in speaking order)
    as the state machine accepted them.

    Attributes:
      num_agents: N ≥ 1.
      agents_T: the speaker of each turn, in ``[0, N)``.
      responses_T: each turn parsed (a failed parse gives no votes).
      rewards_T: each turn's step reward (0 for a parsed turn, −1 for a failed parse in the reference).
      consensus: the debate ended because every agent of a round said YES (metrics only).
      tokens_T: per turn its :data:`TurnTokens`, or None for a turn without tokens; ``()``: no tokens.
      weights_T: per turn the weights of its action tokens under ``credit="solution"`` (None: all 1);
        ``()``: none.
      correct_G: per agent 1.0 when its final answer is right, 0.0 otherwise; None when unknown.
      group: the debate's question group (debates of one question share it; None: a group of its own),
        for turn-level advantages grouped per ``"round_agent"``.
      fields_T: per turn, per action token, the stream its tokens carry under judge rewards with
        ``credit="fields"``: :data:`FIELD_GENERATOR` (solution, evaluation), :data:`FIELD_JUDGE`
        (comparison) or :data:`FIELD_BOTH` (the rest); None: all both; ``()``: none.
      sequences_T: per turn the sampled sequence its action came from, an index ≥ 0 into the caller's
        sequence ids (the SDK's ``SampledSequence.sequence_id``), −1 for none; ``()``: none. Given, the
        datums carry provenance spans (``ScoredEpisodes.datums.spans``, :func:`build_datums`'
        ``sequence_ids_N``).

    Raises:
      ValueError / TypeError: lengths that differ, an agent outside ``[0, N)``.

    Examples:
      >>> from kernel import ParsedResponse, Vote
      >>> said = [ParsedResponse.make(0, solution="4", votes=(Vote(1, ">", 2),)),
      ...         ParsedResponse.make(1, solution="4"), ParsedResponse.make(2, solution="5")]
      >>> Episode(3, (0, 1, 2), tuple(said), (0.0, 0.0, 0.0)).num_turns
      3
    """

    num_agents: int
    agents_T: tuple[int, ...]
    responses_T: tuple[ParsedResponse, ...]
    rewards_T: tuple[float, ...]
    consensus: bool = False
    tokens_T: tuple[TurnTokens | None, ...] = ()
    weights_T: tuple[npt.ArrayLike | None, ...] = ()
    correct_G: tuple[float, ...] | None = None
    group: int | None = None
    fields_T: tuple[npt.ArrayLike | None, ...] = ()
    sequences_T: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n = check_int(self.num_agents, "num_agents", low=1)
        t = len(self.agents_T)
        if len(self.responses_T) != t or len(self.rewards_T) != t:
            raise ValueError(
                f"agents_T, responses_T and rewards_T must have one entry per turn, got {t}, "
                f"{len(self.responses_T)} and {len(self.rewards_T)}"
            )
        for name, values in (
            ("tokens_T", self.tokens_T),
            ("weights_T", self.weights_T),
            ("fields_T", self.fields_T),
            ("sequences_T", self.sequences_T),
        ):
            if values and len(values) != t:
                raise ValueError(f"{name} must be empty or have one entry per turn ({t}), got {len(values)}")
        if t and not (0 <= min(self.agents_T) and max(self.agents_T) < n):
            raise ValueError(f"agents_T must lie in [0, {n}), got {list(self.agents_T)}")
        if self.sequences_T and min(self.sequences_T) < -1:
            raise ValueError(f"sequences_T must be >= -1 (-1: no sequence), got {list(self.sequences_T)}")
        if self.correct_G is not None and len(self.correct_G) != n:
            raise ValueError(f"correct_G must have one entry per agent ({n}), got {len(self.correct_G)}")

    @property
    def num_turns(self) -> int:
        """T, the turns played."""
        return len(self.agents_T)


class ScoredEpisodes(NamedTuple):
    """What :func:`score_episodes` computes; rows ``[R]`` packed debate-major, debates ``[P]``, votes
    ``[V]``, datums ``[D]``.

    Attributes:
      num_agents_P: int64 [P].
      offsets_P1: int64 [P+1], the first row of each debate (R at the end).
      votes: every vote of every parsed turn, debates in order (dropped round-1 votes carry the padding
        group id P).
      vote_offsets_P1: int64 [P+1], the first vote of each debate.
      validation: :func:`validate_votes` of ``votes``.
      round1_dropped_V: bool [V], the votes ``round1_votes="drop"`` removed.
      pairwise: :class:`PairwiseRewards` (rewards, group ids, vote counts per debate).
      step_rewards_PG: float64 [R], Σ of each agent's step rewards.
      correct_PG: float64 [R], 1.0 where the agent's answer is right (0 where unknown).
      returns_PG: float64 [R].
      advantages_PG: float64 [R].
      keep_P: bool [P], debates whose datums are kept (all, unless ``remove_constant_groups``).
      baselines_K: float64 [K], RAE's baselines after the batch (the ones given under grouped
        advantages).
      datums: :func:`build_datums`' result, None when no kept turn has tokens.
      debate_D: int64 [D], each datum's debate.
      agent_D: int64 [D], each datum's agent.
      turn_offsets_P1: int64 [P+1], each debate's first turn (T at the end).
      turn_returns_T: float64 [T], each turn's reward-to-go (empty unless ``turn_groups``).
      turn_advantages_T: float64 [T], each turn's advantage (empty unless ``turn_groups``).
      judge: :class:`JudgeStepRewards` of the turns (cell n of agent row r's step s is turn s of that
        agent), None without judge rewards; ``turn_returns_T`` then holds λ_g·g_t + λ_j·j_t and
        ``turn_advantages_T`` A_t.
      dual: :class:`DualAdvantages` of the turns' cells (each stream centred, and A), None without.
    """

    num_agents_P: npt.NDArray[np.int64]
    offsets_P1: npt.NDArray[np.int64]
    votes: VoteArrays
    vote_offsets_P1: npt.NDArray[np.int64]
    validation: VoteValidation
    round1_dropped_V: npt.NDArray[np.bool_]
    pairwise: PairwiseRewards
    step_rewards_PG: npt.NDArray[np.float64]
    correct_PG: npt.NDArray[np.float64]
    returns_PG: npt.NDArray[np.float64]
    advantages_PG: npt.NDArray[np.float64]
    keep_P: npt.NDArray[np.bool_]
    baselines_K: npt.NDArray[np.float64]
    datums: DatumResult | None
    debate_D: npt.NDArray[np.int64]
    agent_D: npt.NDArray[np.int64]
    turn_offsets_P1: npt.NDArray[np.int64]
    turn_returns_T: npt.NDArray[np.float64]
    turn_advantages_T: npt.NDArray[np.float64]
    judge: JudgeStepRewards | None = None
    dual: DualAdvantages | None = None


def _checked_episodes(episodes: object) -> Sequence[Episode]:
    """``episodes`` as a sequence of :class:`Episode` (TypeError naming the first that is not one)."""
    if isinstance(episodes, str | bytes) or not hasattr(episodes, "__iter__"):
        raise TypeError(f"episodes must be a sequence of Episode values, got {type(episodes).__name__}")
    out = episodes if isinstance(episodes, list | tuple) else list(episodes)  # type: ignore[call-overload]
    for p, e in enumerate(out):
        if not isinstance(e, Episode):
            raise TypeError(f"episodes[{p}] must be an Episode, got {type(e).__name__}")
    return out


def _rounds(episode: Episode) -> list[int]:
    """Each turn's round: how many turns its speaker took before (turn k of a debate in speaking order is
    in round k // N)."""
    taken = [0] * episode.num_agents
    out = []
    for agent in episode.agents_T:
        out.append(taken[agent])
        taken[agent] += 1
    return out


def _round1_dropped(episodes: Sequence[Episode]) -> npt.NDArray[np.bool_]:
    """bool [V]: the votes of round 1 on agents who had not spoken yet, in :func:`votes_from_responses`
    order (debate by debate, turn by turn, vote by vote; failed parses cast none)."""
    authors: list[int] = []
    a: list[int] = []
    b: list[int] = []
    rounds: list[int] = []
    big = 2**63 - 1
    for e in episodes:
        for agent, response, r in zip(e.agents_T, e.responses_T, _rounds(e), strict=True):
            if not response.ok:
                continue
            for vote in response.votes:
                authors.append(agent)
                a.append(max(min(int(vote.a), big), -big - 1))
                b.append(max(min(int(vote.b), big), -big - 1))
                rounds.append(r)
    check = round1_vote_check(
        np.asarray(authors, np.int64),
        np.asarray(a, np.int64),
        np.asarray(b, np.int64),
        np.asarray(rounds, np.int64),
    )
    return ~np.asarray(check.valid_V, dtype=bool)


def score_episodes(
    episodes: Sequence[Episode],
    options: ScoringOptions = ScoringOptions(),
    *,
    baselines_K: npt.ArrayLike | None = None,
) -> ScoredEpisodes:
    """Votes, rewards, returns, advantages and datums of P debates (see the module docstring).

    Args:
      episodes: P :class:`Episode` values.
      options: the :class:`ScoringOptions`.
      baselines_K: RAE's baselines, one per role (default zeros for the largest N); ignored under
        grouped advantages except to be returned.

    Returns:
      :class:`ScoredEpisodes`.

    Raises:
      ValueError / TypeError: a bad episode or option, or what the kernel functions refuse (e.g. a
        debate of one agent under ``singleton="error"``).

    Examples:
      Agent 0 votes 1 > 2; agent 1 fails to parse (−1, the debate ends):

      >>> from kernel import ParsedResponse, Vote
      >>> ok = ParsedResponse.make(0, solution="4", votes=(Vote(1, ">", 2),))
      >>> bad = ParsedResponse.make(1, ok=False)
      >>> s = score_episodes([Episode(3, (0, 1), (ok, bad), (0.0, -1.0), correct_G=(1.0, 0.0, 0.0))],
      ...                    ScoringOptions(correctness_weight=0.5))
      >>> s.pairwise.rewards_PG.tolist(), s.returns_PG.tolist(), s.advantages_PG.tolist()
      ([0.0, 1.0, 0.0], [0.5, 0.0, 0.0], [0.3333333333333333, -0.16666666666666666, -0.16666666666666666])
    """
    check_type(options, ScoringOptions, "options")
    episodes = _checked_episodes(episodes)
    num_debates = len(episodes)
    num_agents = np.fromiter((e.num_agents for e in episodes), dtype=np.int64, count=num_debates)
    offsets = np.zeros(num_debates + 1, dtype=np.int64)
    np.cumsum(num_agents, out=offsets[1:])
    num_rows = int(offsets[-1])

    votes = votes_from_responses([e.responses_T for e in episodes])
    vote_counts = np.bincount(votes.group_ids_V, minlength=num_debates)[:num_debates]
    vote_offsets = np.zeros(num_debates + 1, dtype=np.int64)
    np.cumsum(vote_counts, out=vote_offsets[1:])
    dropped = np.zeros(votes.group_ids_V.shape[0], dtype=bool)
    if options.round1_votes == "drop":
        dropped = _round1_dropped(episodes)
        # a padding row (group id P) takes no part in validation or rewards
        votes = votes._replace(group_ids_V=np.where(dropped, num_debates, votes.group_ids_V).astype(np.int32))
    validation = validate_votes(votes, num_agents)
    pairwise = pairwise_rewards(votes, num_agents, mode=options.reward_mode, unvoted=options.unvoted)

    rows: list[int] = []
    step: list[float] = []
    for p, e in enumerate(episodes):
        base = int(offsets[p])
        rows.extend(base + agent for agent in e.agents_T)
        step.extend(e.rewards_T)
    rows_T = np.asarray(rows, dtype=np.int64)
    step_T = np.asarray(step, dtype=np.float64)
    step_rewards = np.bincount(rows_T, weights=step_T, minlength=num_rows).astype(np.float64)
    returns = np.asarray(total_returns(step_T, rows_T, num_rows, pairwise.rewards_PG), dtype=np.float64)
    correct = np.zeros(num_rows, dtype=np.float64)
    for p, e in enumerate(episodes):
        if e.correct_G is not None:
            correct[offsets[p] : offsets[p + 1]] = e.correct_G
    if options.correctness_weight:
        returns = returns + options.correctness_weight * correct

    group_ids = pairwise.group_ids_PG
    estimator = options.estimator
    baselines = np.zeros(int(num_agents.max(initial=1)), dtype=np.float64)
    if baselines_K is not None:
        baselines = np.asarray(baselines_K, dtype=np.float64)
    opts: dict[str, Any] = {}
    if isinstance(estimator, RAEOptions):
        roles = (np.arange(num_rows, dtype=np.int64) - np.repeat(offsets[:-1], num_agents)).astype(np.int64)
        rae = rae_advantages(returns, roles, baselines, decay=estimator.decay)
        advantages = np.asarray(rae.advantages, dtype=np.float64)
        baselines = np.asarray(rae.baselines_K, dtype=np.float64)
    else:
        where = _spoke(episodes, offsets) if options.silent_agents == "exclude" else None
        opts = {f.name: getattr(estimator, f.name) for f in dataclasses.fields(estimator)}
        advantages = np.asarray(
            grouped_advantages(returns, group_ids, num_debates, where=where, **opts).advantages,
            dtype=np.float64,
        )
    keep = np.ones(num_debates, dtype=bool)
    if options.remove_constant_groups:
        kept_rows = np.asarray(
            constant_group_keep_mask(returns, group_ids, num_debates, keep_one_if_all_constant=True)
        )
        keep = np.bincount(group_ids[kept_rows], minlength=num_debates)[:num_debates] > 0
    if options.negative_advantages == "zero":
        advantages = np.maximum(advantages, 0.0)
    turn_offsets = np.zeros(num_debates + 1, dtype=np.int64)
    np.cumsum([e.num_turns for e in episodes], out=turn_offsets[1:])
    turn_returns = turn_advantages = np.zeros(0, dtype=np.float64)
    if options.turn_groups != "none":
        final = np.asarray(pairwise.rewards_PG, dtype=np.float64)
        if options.correctness_weight:
            final = final + options.correctness_weight * correct
        turn_returns = _rewards_to_go(episodes, offsets, final)
        group_ids_T, num_turn_groups = _turn_groups(episodes, options.turn_groups)
        turn_advantages = np.asarray(
            grouped_advantages(turn_returns, group_ids_T, num_turn_groups, **opts).advantages,
            dtype=np.float64,
        )
        if options.negative_advantages == "zero":
            turn_advantages = np.maximum(turn_advantages, 0.0)

    judge = dual = None
    if options.judge is not None:
        judge, dual, cell_T = _judge_scores(episodes, offsets, turn_offsets, opts, options.judge)
        lam = options.judge
        turn_returns = lam.lambda_gen * (judge.generator_N + _step_cells(episodes, judge, cell_T))[cell_T]
        turn_returns = turn_returns + lam.lambda_judge * judge.judge_N[cell_T]
        turn_advantages = np.asarray(dual.advantages, dtype=np.float64)[cell_T]
        if options.remove_constant_groups:
            debate_T = np.repeat(np.arange(num_debates), np.diff(turn_offsets))
            kept_turns = np.asarray(
                constant_group_keep_mask(turn_returns, debate_T, num_debates, keep_one_if_all_constant=True)
            )
            keep = np.bincount(debate_T[kept_turns], minlength=num_debates)[:num_debates] > 0
        if options.negative_advantages == "zero":
            turn_advantages = np.maximum(turn_advantages, 0.0)
        datums, debate_D, agent_D = _judge_datums(episodes, turn_offsets, cell_T, dual, keep, options)
    else:
        datums, debate_D, agent_D = _datums(
            episodes, offsets, advantages, keep, options, turn_offsets, turn_advantages
        )
    return ScoredEpisodes(
        num_agents,
        offsets,
        votes,
        vote_offsets,
        validation,
        dropped,
        pairwise,
        step_rewards,
        correct,
        returns,
        advantages,
        keep,
        baselines,
        datums,
        debate_D,
        agent_D,
        turn_offsets,
        turn_returns,
        turn_advantages,
        judge,
        dual,
    )


_BIG: Final = 2**62


def _code(op: str) -> int:
    return OP_GT if op == ">" else OP_EQ if op == "=" else OP_OTHER


def _judge_scores(
    episodes: Sequence[Episode],
    offsets_P1: npt.NDArray[np.int64],
    turn_offsets_P1: npt.NDArray[np.int64],
    estimator: dict[str, Any],
    options: JudgeOptions,
) -> tuple[JudgeStepRewards, DualAdvantages, npt.NDArray[np.int64]]:
    """The judge rewards of the episodes' round-robin turns, their dual advantages (each stream centred
    per debate by the estimator) and each turn's cell."""
    debate_U: list[int] = []
    author_U: list[int] = []
    index_U: list[int] = []
    turn_V: list[int] = []
    a_V: list[int] = []
    op_V: list[int] = []
    b_V: list[int] = []
    for p, e in enumerate(episodes):
        n = e.num_agents
        if any(agent != t % n for t, agent in enumerate(e.agents_T)):
            raise ValueError(
                f"judge rewards need round-robin turns (agent t mod N speaks turn t): episodes[{p}].agents_T "
                f"is {list(e.agents_T)}"
            )
        base = int(turn_offsets_P1[p])
        for t, (agent, response) in enumerate(zip(e.agents_T, e.responses_T, strict=True)):
            debate_U.append(p)
            author_U.append(agent)
            index_U.append(t)
            if not response.ok:
                continue
            for vote in response.votes:
                a, op, b = (vote.b, ">", vote.a) if vote.op == "<" else (vote.a, vote.op, vote.b)
                turn_V.append(base + t)
                a_V.append(max(min(int(a), _BIG), -_BIG))  # an id beyond int64 names no agent either
                op_V.append(_code(op))
                b_V.append(max(min(int(b), _BIG), -_BIG))
    steps_PG = np.zeros(int(offsets_P1[-1]), dtype=np.int64)
    for p, e in enumerate(episodes):
        np.add.at(steps_PG, int(offsets_P1[p]) + np.asarray(e.agents_T, dtype=np.int64), 1)
    num_agents = [e.num_agents for e in episodes]
    judge = judge_step_rewards(
        debate_U,
        index_U,
        author_U,
        turn_V,
        np.asarray(a_V, dtype=np.int64),
        op_V,
        np.asarray(b_V, dtype=np.int64),
        num_agents,
        steps_PG,
        schedule="sequential",
        options=options,
    )
    row_T = np.repeat(offsets_P1[:-1], np.diff(turn_offsets_P1)) + np.asarray(author_U, dtype=np.int64)
    index = np.asarray(index_U, dtype=np.int64)
    agents_T = np.repeat(np.asarray(num_agents, dtype=np.int64), np.diff(turn_offsets_P1))
    cell_T = judge.step_offsets_PG1[row_T] + index // np.maximum(agents_T, 1)
    cells_debate = np.repeat(np.repeat(np.arange(len(episodes)), num_agents), steps_PG)
    generator = judge.generator_N + _step_cells(episodes, judge, cell_T)
    dual = dual_step_advantages(
        generator,
        judge.judge_N,
        cells_debate,
        len(episodes),
        lambda_gen=options.lambda_gen,
        lambda_judge=options.lambda_judge,
        estimator=AdvantageOptions(**estimator),
    )
    return judge, dual, cell_T


def _step_cells(
    episodes: Sequence[Episode], judge: JudgeStepRewards, cell_T: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """float64 [N]: each turn's own step reward (−1 for a failed parse in the reference) at its cell."""
    out = np.zeros(judge.generator_N.shape[0], dtype=np.float64)
    out[cell_T] = [r for e in episodes for r in e.rewards_T]
    return out


def _judge_datums(
    episodes: Sequence[Episode],
    turn_offsets_P1: npt.NDArray[np.int64],
    cell_T: npt.NDArray[np.int64],
    dual: DualAdvantages,
    keep_P: npt.NDArray[np.bool_],
    options: ScoringOptions,
) -> tuple[DatumResult | None, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One trajectory per turn with tokens of a kept debate; each action token's advantage by its field
    (``credit="fields"``) or the turn's A_t (``"step"``)."""
    judge = options.judge
    assert judge is not None
    gen = judge.lambda_gen * np.asarray(dual.generator_N, dtype=np.float64)
    jud = judge.lambda_judge * np.asarray(dual.judge_N, dtype=np.float64)
    both = np.asarray(dual.advantages, dtype=np.float64)
    transitions: list[list[TurnTokens]] = []
    per_token: list[npt.NDArray[np.float64]] = []
    origin: list[tuple[int, int]] = []
    sequences: list[int] = []  # each transition's sampled sequence (-1: none)
    for p, e in enumerate(episodes):
        if not e.tokens_T or not keep_P[p]:
            continue
        for k, (agent, tokens) in enumerate(zip(e.agents_T, e.tokens_T, strict=True)):
            if tokens is None:
                continue
            cell = int(cell_T[int(turn_offsets_P1[p]) + k])
            size = len(tokens[1])  # type: ignore[arg-type]
            fields = e.fields_T[k] if e.fields_T and judge.credit == "fields" else None
            if fields is None:
                values = np.full(size, both[cell])
            else:
                code = np.asarray(fields, dtype=np.int64)
                if code.shape != (size,):
                    raise ValueError(
                        f"episodes[{p}].fields_T[{k}] must have one code per action token ({size}), got "
                        f"shape {code.shape}"
                    )
                values = np.select(
                    [code == FIELD_GENERATOR, code == FIELD_JUDGE], [gen[cell], jud[cell]], both[cell]
                )
            if options.negative_advantages == "zero":
                values = np.maximum(values, 0.0)
            transitions.append([tokens])
            per_token.append(values)
            origin.append((p, agent))
            sequences.append(e.sequences_T[k] if e.sequences_T else -1)
    if not transitions:
        return None, _NO_IDS, _NO_IDS
    trajectories = trajectories_from_lists(transitions, np.zeros(len(transitions)))  # type: ignore[arg-type]
    built = build_datums(
        trajectories,
        mode=options.datum_mode,
        ac_advantages=np.concatenate(per_token),
        sequence_ids_N=_sequence_ids(episodes, sequences),
    )
    where = np.asarray(origin, dtype=np.int64).reshape(-1, 2)
    traj = np.asarray(built.datums.traj_ids_D, dtype=np.int64)
    return built, where[traj, 0], where[traj, 1]


def _rewards_to_go(
    episodes: Sequence[Episode], offsets_P1: npt.NDArray[np.int64], final_PG: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """float64 [T]: each turn's speaker's step rewards from that turn on, plus the speaker's final reward
    (``final_PG``: its pairwise reward, plus the weighted correctness)."""
    out: list[float] = []
    for p, e in enumerate(episodes):
        later = [0.0] * e.num_agents  # Σ of each agent's step rewards after the turn, walking backwards
        togo = [0.0] * e.num_turns
        for k in range(e.num_turns - 1, -1, -1):
            agent = e.agents_T[k]
            later[agent] += e.rewards_T[k]
            togo[k] = later[agent] + float(final_PG[int(offsets_P1[p]) + agent])
        out.extend(togo)
    return np.asarray(out, dtype=np.float64)


def _turn_groups(episodes: Sequence[Episode], grouping: str) -> tuple[npt.NDArray[np.int32], int]:
    """Dense group ids [T] of the turns: (debate, round) or (question group, round, agent), numbered by
    first appearance."""
    ids: dict[tuple[Any, ...], int] = {}
    out: list[int] = []
    for p, e in enumerate(episodes):
        question = ("debate", p) if e.group is None else ("group", e.group)
        for agent, r in zip(e.agents_T, _rounds(e), strict=True):
            key = (p, r) if grouping == "round" else (question, r, agent)
            out.append(ids.setdefault(key, len(ids)))
    return np.asarray(out, dtype=np.int32), len(ids)


def _spoke(episodes: Sequence[Episode], offsets_P1: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """bool [R]: whether each agent row took at least one turn in its debate."""
    spoke = np.zeros(int(offsets_P1[-1]), dtype=bool)
    for p, e in enumerate(episodes):
        for agent in e.agents_T:
            spoke[int(offsets_P1[p]) + agent] = True
    return spoke


_NO_IDS: Final = np.zeros(0, dtype=np.int64)


def _datums(
    episodes: Sequence[Episode],
    offsets_P1: npt.NDArray[np.int64],
    advantages_PG: npt.NDArray[np.float64],
    keep_P: npt.NDArray[np.bool_],
    options: ScoringOptions,
    turn_offsets_P1: npt.NDArray[np.int64],
    turn_advantages_T: npt.NDArray[np.float64],
) -> tuple[DatumResult | None, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One trajectory per (kept debate, agent) of its turns with tokens, with the agent's advantage (with
    turn-level advantages: one per turn, with the turn's); one :func:`build_datums`."""
    transitions: list[list[TurnTokens]] = []
    weights: list[npt.ArrayLike] = []
    advantages: list[float] = []
    origin: list[tuple[int, int]] = []
    sequences: list[int] = []  # each transition's sampled sequence (-1: none), in transition order
    credit = options.credit != "turn"
    by_turn = options.turn_groups != "none"
    for p, e in enumerate(episodes):
        if not e.tokens_T or not keep_P[p]:
            continue
        per_agent: list[list[int]] = [[] for _ in range(e.num_agents)]
        for k, (agent, tokens) in enumerate(zip(e.agents_T, e.tokens_T, strict=True)):
            if tokens is not None:
                per_agent[agent].append(k)
        base, first = int(offsets_P1[p]), int(turn_offsets_P1[p])
        for i, turns in enumerate(per_agent):
            units = [[k] for k in turns] if by_turn else [turns] if turns else []
            for unit in units:
                transitions.append([e.tokens_T[k] for k in unit])  # type: ignore[misc]
                sequences.extend(e.sequences_T[k] if e.sequences_T else -1 for k in unit)
                advantages.append(
                    float(turn_advantages_T[first + unit[0]]) if by_turn else float(advantages_PG[base + i])
                )
                origin.append((p, i))
            if credit:
                for k in turns:
                    w = e.weights_T[k] if e.weights_T else None
                    ac = e.tokens_T[k][1]  # type: ignore[index]
                    weights.append(np.ones(len(ac)) if w is None else w)  # type: ignore[arg-type]
    if not transitions:
        return None, _NO_IDS, _NO_IDS
    trajectories = trajectories_from_lists(transitions, np.asarray(advantages, dtype=np.float64))  # type: ignore[arg-type]
    ac_weights = np.concatenate([np.asarray(w, dtype=np.float64) for w in weights]) if credit else None
    built = build_datums(
        trajectories,
        mode=options.datum_mode,
        ac_weights=ac_weights,
        sequence_ids_N=_sequence_ids(episodes, sequences),
    )
    where = np.asarray(origin, dtype=np.int64).reshape(-1, 2)
    traj = np.asarray(built.datums.traj_ids_D, dtype=np.int64)
    return built, where[traj, 0], where[traj, 1]


def _sequence_ids(episodes: Sequence[Episode], sequences_N: list[int]) -> npt.NDArray[np.int64] | None:
    """``build_datums``' ``sequence_ids_N``: None (no provenance) unless an episode names its sequences."""
    if not any(e.sequences_T for e in episodes):
        return None
    return np.asarray(sequences_N, dtype=np.int64)


def episode_metrics(
    episodes: Sequence[Episode], scored: ScoredEpisodes
) -> tuple[StepMetrics, TrajectoryMetrics]:
    """The per-step and per-trajectory metrics of scored episodes (:func:`step_metrics` over every turn:
    parse errors, consensus, rounds; :func:`trajectory_metrics`: tokens per turn, turns per episode,
    the returns and the share of debates with mixed returns).

    Examples:
      >>> from kernel import ParsedResponse
      >>> e = Episode(2, (0, 1), (ParsedResponse.make(0, solution="4"), ParsedResponse.make(1, ok=False)),
      ...             (0.0, -1.0), tokens_T=(([1, 2], [3], [-0.5]), None))
      >>> steps, trajs = episode_metrics([e], score_episodes([e]))
      >>> float(steps.parse_error), float(trajs.ac_tokens_per_turn), float(trajs.turns_per_episode)
      (0.5, 0.5, 1.0)
    """
    check_type(scored, ScoredEpisodes, "scored")
    episodes = _checked_episodes(episodes)
    parse_error: list[bool] = []
    consensus: list[bool] = []
    rounds: list[int] = []
    ob: list[int] = []
    ac: list[int] = []
    turn_episode: list[int] = []
    for p, e in enumerate(episodes):
        tokens = e.tokens_T or (None,) * e.num_turns
        for response, r, turn in zip(e.responses_T, _rounds(e), tokens, strict=True):
            parse_error.append(not response.ok)
            consensus.append(e.consensus)
            rounds.append(r)
            ob.append(0 if turn is None else len(turn[0]))  # type: ignore[arg-type]
            ac.append(0 if turn is None else len(turn[1]))  # type: ignore[arg-type]
            turn_episode.append(p)
    steps = step_metrics(parse_error, consensus, rounds)
    trajectories = trajectory_metrics(
        np.asarray(ob, dtype=np.int64),
        np.asarray(ac, dtype=np.int64),
        np.asarray(turn_episode, dtype=np.int64),
        scored.returns_PG,
        scored.pairwise.group_ids_PG,
        len(episodes),
    )
    return steps, trajectories
