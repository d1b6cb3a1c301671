"""TRL bridge: debate rewards in ``GRPOTrainer``'s reward signature, our advantage estimators in place of
``scale_rewards``, and a ``rollout_func`` that plays whole debates through the kernel's episode.

Tested against TRL 1.16.0 on the CPU (``pip install "debate-kernel[trl]"``).

**Rows and debates.** TRL calls a reward function with one row per completion: ``prompts``,
``completions`` and every dataset column as a keyword list. A row is one agent's turn. Its debate is the
``debate_id`` column when there is one, else the run of consecutive rows with the same prompt (TRL puts
the ``num_generations`` completions of a prompt next to each other, and does not tell the reward function
how many there are: pass ``num_generations`` to :func:`debate_reward` / :func:`advantage_reward` so that
two groups of one prompt that TRL happens to put side by side are cut apart). Its agent is the
``agent_id`` column, else its position in the debate; the agent
count is the ``num_agents`` column, else the debate's row count. Leave-one-out votes need the whole
debate: when TRL splits a group across processes (``per_device_train_batch_size`` not a multiple of
``num_generations``) a debate arrives short, and :class:`GroupSplitError` says so instead of rewarding
agents from half their judges.

**Rewards.** :func:`debate_reward` builds ``peer_vote`` (leave-one-out pairwise reward of the row's
agent), ``format`` (1 when the five tags parse), ``consensus`` and ``correct`` (the ``answer`` column)
functions; :data:`peer_vote_reward`, :data:`format_reward`, :data:`consensus_reward` and
:data:`correct_reward` are the defaults. A row with ``acted`` False (an agent the debate never reached,
see :class:`DebateRollout`) gets ``None``: TRL leaves it out of the group baseline and gives it advantage 0.

**Advantages.** TRL computes A = r − mean_group(r) when ``scale_rewards="none"``. :func:`advantage_reward`
wraps one reward function so that it returns our estimator's advantages instead; since they sum to zero
within each group, TRL's centring leaves them unchanged (up to float32 rounding). Use it as the only
reward function, with ``scale_rewards="none"``; estimators whose advantages do not sum to zero per group
(``positive_only``, ``scale="whiten"``) are refused.

**Multi-round debates.** :class:`DebateRollout` is a ``rollout_func``: each of the trainer's prompts is a
question; the ``num_generations`` completions of that question are the turns of agents 0 … N−1 of one
debate, played round by round with the trainer's model (all debates of the batch advance together, one
batched ``generate`` per turn) through :func:`kernel.submit`. Each agent's last turn is its completion;
``debate_id``, ``agent_id``, ``num_agents`` and ``acted`` go to the reward functions as columns.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

import kernel
from adapters.answers import is_correct
from adapters.bridges._estimators import estimator_options
from adapters.bridges.scoring import RowScores, check_score_options, score_rows, warn_shared_agents
from kernel import PairwiseMode, ParsePolicy
from kernel.checks import check_int

__all__ = [
    "DebateRollout",
    "GroupSplitError",
    "advantage_reward",
    "consensus_reward",
    "correct_reward",
    "debate_reward",
    "format_reward",
    "peer_vote_reward",
]

RewardKind = Literal["peer_vote", "format", "consensus", "correct"]
RewardFunc = Callable[..., list[float | None]]
REWARD_KINDS: tuple[RewardKind, ...] = ("peer_vote", "format", "consensus", "correct")


class GroupSplitError(ValueError):
    """A debate arrived incomplete, e.g. because TRL split its group across processes."""


def _text(completion: Any) -> str:
    """A completion as text: TRL passes a str, or a conversation (list of messages) whose last is ours."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else str(content)
    raise TypeError(f"a completion must be a str or a list of chat messages, got {type(completion).__name__}")


def _key(prompt: Any) -> Hashable:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


def _column(kwargs: Mapping[str, Any], name: str, rows: int) -> list[Any] | None:
    values = kwargs.get(name)
    if values is None:
        return None
    if len(values) != rows:
        raise ValueError(f"column {name!r} has {len(values)} entries for {rows} completions")
    return list(values)


def _debates(
    prompts: Sequence[Any], kwargs: Mapping[str, Any], num_generations: int | None = None
) -> tuple[list[Hashable], list[int], list[int]]:
    """``(debate keys, agent ids, agent counts)`` of each row (see the module docstring); runs of equal
    prompts are cut every ``num_generations`` rows when it is given."""
    rows = len(prompts)
    ids = _column(kwargs, "debate_id", rows)
    if ids is None:  # runs of equal prompts
        keys: list[Hashable] = []
        run, length = -1, 0
        for i, prompt in enumerate(prompts):
            if i == 0 or _key(prompt) != _key(prompts[i - 1]) or length == num_generations:
                _check_run(length, num_generations, i)
                run, length = run + 1, 0
            keys.append(run)
            length += 1
        _check_run(length, num_generations, rows)
    else:
        keys = [k.item() if isinstance(k, np.generic) else k for k in ids]
    sizes: dict[Hashable, int] = {}
    position: list[int] = []
    for key in keys:
        position.append(sizes.get(key, 0))
        sizes[key] = sizes.get(key, 0) + 1
    agents = _column(kwargs, "agent_id", rows) or position
    for r, a in enumerate(agents):
        check_int(a, f"column 'agent_id' at row {r}")
    counts = _column(kwargs, "num_agents", rows)
    for r, n in enumerate(counts or ()):
        check_int(n, f"column 'num_agents' at row {r}", low=1)
    if counts is None:
        if ids is None and len(set(sizes.values())) > 1:
            raise GroupSplitError(
                f"completions come in runs of {sorted(set(sizes.values()))} equal prompts, not one size: "
                "TRL split a group across processes (make per_device_train_batch_size a multiple of "
                "num_generations) or two groups share a prompt (pass num_generations, or add a debate_id "
                "column)"
            )
        counts = [sizes[k] for k in keys]
    else:
        for key, n in zip(keys, counts, strict=True):
            if sizes[key] < n:
                raise GroupSplitError(
                    f"debate {key!r} has {sizes[key]} of its {n} agents in this batch: TRL split the group "
                    "across processes (make per_device_train_batch_size a multiple of num_generations); "
                    "leave-one-out votes need the whole debate"
                )
    return keys, [int(a) for a in agents], [int(n) for n in counts]


def _check_run(length: int, num_generations: int | None, end: int) -> None:
    """GroupSplitError when a run of one prompt ending before row ``end`` is shorter than a group."""
    if num_generations is not None and 0 < length < num_generations:
        raise GroupSplitError(
            f"the prompt of rows {end - length} to {end - 1} has {length} completions, not num_generations "
            f"= {num_generations}: TRL split its group across processes (make per_device_train_batch_size "
            "a multiple of num_generations)"
        )


def _score(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    kwargs: Mapping[str, Any],
    num_generations: int | None,
    **options: Any,
) -> RowScores:
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
    keys, agents, counts = _debates(prompts, kwargs, num_generations)
    scored = score_rows(
        [_text(c) for c in completions], debate_keys=keys, agent_ids=agents, num_agents=counts, **options
    )
    warn_shared_agents(scored.debate_ids_U, agents, stacklevel=4)
    return scored


def _num_generations(value: int | None) -> int | None:
    return None if value is None else check_int(value, "num_generations", low=1)


def debate_reward(
    kind: RewardKind,
    *,
    policy: ParsePolicy = "robust",
    mode: PairwiseMode = "win_rate",
    unvoted: float = 0.0,
    num_generations: int | None = None,
) -> RewardFunc:
    """A reward function in ``GRPOTrainer``'s signature, ``fn(prompts, completions, **columns)``.

    ``peer_vote``: r = the leave-one-out pairwise reward of the row's agent from the other rows of its
    debate (REFERENCE §2). ``format``: 1 if the row parses, else 0. ``consensus``: 1 if it parses and says
    YES. ``correct``: 1 if its ``<solution>`` equals the ``answer`` column (exact rational or text).
    Rows whose ``acted`` column is False get ``None``.

    Args:
      kind: one of ``"peer_vote"``, ``"format"``, ``"consensus"``, ``"correct"``.
      policy: parse policy (``"robust"`` or ``"reference"``).
      mode: pairwise mode (``"win_rate"`` or ``"win_minus_loss"``).
      unvoted: reward of an agent no valid vote judged.
      num_generations: the trainer's ``num_generations`` (rows per prompt group), used when there is no
        ``debate_id`` column: runs of one prompt are cut into debates of that many rows (without it, two
        groups of the same prompt side by side would read as one debate).

    Returns:
      The reward function, named ``debate_<kind>`` (TRL logs ``rewards/debate_<kind>/mean``).

    Raises:
      ValueError: an unknown ``kind``, ``policy`` or ``mode``; a non-finite ``unvoted``. (Called:
        :class:`GroupSplitError` for a short debate; ValueError for columns of the wrong length or, for
        ``correct``, no ``answer`` column.)

    Examples:
      >>> ok = ("<solution>4</solution><evaluation>e</evaluation><comparison>{}</comparison>"
      ...       "<consensus>NO</consensus><consensus_reason>r</consensus_reason>")
      >>> fn = debate_reward("peer_vote")
      >>> fn(["q"] * 3, [ok.format("Agent 1 > Agent 2"), ok.format("Agent 0 > Agent 2"), "x"])
      [1.0, 1.0, 0.0]
    """
    if kind not in REWARD_KINDS:
        raise ValueError(f"kind must be one of {', '.join(REWARD_KINDS)}, got {kind!r}")
    num_generations = _num_generations(num_generations)
    unvoted = check_score_options(policy, mode, unvoted)

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        scored = _score(
            prompts, completions, kwargs, num_generations, policy=policy, mode=mode, unvoted=unvoted
        )
        if kind == "peer_vote":
            values = scored.pairwise_U.tolist()
        elif kind == "format":
            values = scored.parse_ok_U.astype(float).tolist()
        elif kind == "consensus":
            values = scored.consensus_U.astype(float).tolist()
        else:
            answers = _column(kwargs, "answer", len(completions))
            if answers is None:
                raise ValueError("the correct reward needs an 'answer' column in the dataset")
            values = [
                float(a is not None and is_correct(p.solution, str(a)))
                for p, a in zip(scored.parsed_U, answers, strict=True)
            ]
        acted = _column(kwargs, "acted", len(completions)) or [True] * len(completions)
        for r, a in enumerate(acted):
            if not isinstance(a, bool | np.bool_):  # the string "False" would count as acting
                raise TypeError(f"column 'acted' must hold bools, got {a!r} at row {r}")
        return [v if a else None for v, a in zip(values, acted, strict=True)]

    reward.__name__ = reward.__qualname__ = f"debate_{kind}"
    reward.__doc__ = (
        f"TRL reward ``debate_{kind}``: {_DESCRIPTIONS[kind]} (policy={policy!r}, mode={mode!r}).\n\n"
        "Args: ``prompts``, ``completions`` and the dataset columns, as ``GRPOTrainer`` passes them.\n"
        "Returns: one float per completion, ``None`` where ``acted`` is False."
    )
    return reward


_DESCRIPTIONS: dict[str, str] = {
    "peer_vote": "the leave-one-out pairwise reward of the completion's agent from the rest of its debate",
    "format": "1 when the completion's five tags parse, else 0",
    "consensus": "1 when the completion parses and declares consensus, else 0",
    "correct": "1 when the completion's solution equals the answer column, else 0",
}


peer_vote_reward = debate_reward("peer_vote")
"""Leave-one-out pairwise reward of each completion's agent (robust parser, win_rate)."""
format_reward = debate_reward("format")
"""1 for a completion whose five tags parse, else 0."""
consensus_reward = debate_reward("consensus")
"""1 for a completion that parses and declares consensus, else 0."""
correct_reward = debate_reward("correct")
"""1 for a completion whose solution equals the ``answer`` column, else 0."""


def _centred_options(estimator: str | kernel.AdvantageOptions) -> dict[str, Any]:
    options = estimator_options(estimator)
    if options["positive_only"] or options["scale"] == "whiten":
        raise ValueError(
            "estimator's advantages do not sum to zero per group (positive_only or scale='whiten'), so TRL's "
            "group centring would change them; pick another estimator"
        )
    return options


def advantage_reward(
    reward_fn: RewardFunc,
    estimator: str | kernel.AdvantageOptions = "default",
    *,
    num_generations: int | None = None,
) -> RewardFunc:
    """Wraps a reward function so that TRL trains on our estimator's advantages.

    Returns A = grouped_advantages(r) per debate (rows grouped as the module docstring says; ``None``
    rewards are left out and stay ``None``). With ``scale_rewards="none"`` TRL computes A − mean_group(A)
    = A, since A sums to zero in every group; except a group of one under a ``singleton="raw"`` preset
    (``verl_grpo.*``, ``verl_rloo.loop``), whose raw reward TRL's centring turns into 0. The raw
    reward's mean is logged as ``debate_kernel/raw_reward`` through TRL's ``log_metric``.

    Args:
      reward_fn: a reward function in TRL's signature (e.g. :data:`peer_vote_reward`).
      estimator: a preset spec (``NAME[,key=value…]``) or :class:`kernel.AdvantageOptions`.
      num_generations: as :func:`debate_reward` (how the rows are grouped when there is no ``debate_id``).

    Returns:
      The wrapped function, named ``<reward_fn>_advantage``.

    Raises:
      ValueError: an unknown preset or option, or an estimator whose advantages do not sum to zero per group.
      TypeError: ``estimator`` of another type.

    Examples:
      >>> fn = advantage_reward(lambda prompts, completions, **kw: [1.0, 0.0, 0.5, 3.0], "default")
      >>> fn(["a", "a", "b", "b"], ["", "", "", ""])
      [0.5, -0.5, -1.25, 1.25]
    """
    options = _centred_options(estimator)
    num_generations = _num_generations(num_generations)
    name = getattr(reward_fn, "__name__", "reward")

    def advantage(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        raw = reward_fn(prompts, completions, **kwargs)
        keys, _, _ = _debates(prompts, kwargs, num_generations)
        group_ids, num_groups = kernel.dense_group_ids(keys) if keys else (np.zeros(0, np.int32), 0)
        values = np.array([math.nan if r is None else float(r) for r in raw], dtype=np.float64)
        live = np.isfinite(values)
        adv = kernel.grouped_advantages(
            np.where(live, values, 0.0), group_ids, num_groups, where=live, **options
        ).advantages
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and live.any():
            log_metric("debate_kernel/raw_reward", float(values[live].mean()))
        return [float(a) if ok else None for a, ok in zip(adv.tolist(), live.tolist(), strict=True)]

    advantage.__name__ = advantage.__qualname__ = f"{name}_advantage"
    return advantage


class _Turn(NamedTuple):
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    acted: bool


def _speaker(state: kernel.DebateState) -> int:
    agent = kernel.current_agent(state)
    if agent is None:  # only asked of debates that are not done
        raise RuntimeError("a finished debate has no speaker")
    return agent


@dataclasses.dataclass(frozen=True)
class DebateRollout:
    """A TRL ``rollout_func`` that plays each prompt as a debate of ``num_generations`` agents.

    Every agent speaks in turn through :func:`kernel.build_observation` → the trainer's tokenizer (its
    chat template when it has one) → the trainer's model (``generate``, sampling at ``temperature``,
    at most ``max_new_tokens``) → :func:`kernel.parse_response` → :func:`kernel.submit`, until every
    agent of a round says YES, ``max_rounds`` rounds are over, or a turn fails to parse (the reference's
    abort). Each agent's completion is its last turn; an agent the debate never reached gets one turn
    generated on the final state, returned with ``acted`` False (its rewards are ``None``).

    Attributes:
      max_rounds: rounds per debate.
      policy: parse policy.
      observation: the :class:`kernel.ObservationConfig` of the prompts.
      max_new_tokens: tokens per turn (default: the trainer's ``max_completion_length``).
      temperature: sampling temperature (default: the trainer's).
    """

    max_rounds: int = 2
    policy: ParsePolicy = "robust"
    observation: kernel.ObservationConfig = kernel.ObservationConfig.DEFAULT
    max_new_tokens: int | None = None
    temperature: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_rounds, bool) or not isinstance(self.max_rounds, int) or self.max_rounds < 1:
            raise ValueError(f"max_rounds must be an int ≥ 1, got {self.max_rounds!r}")
        if self.max_new_tokens is not None and (
            not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1
        ):
            raise ValueError(f"max_new_tokens must be an int ≥ 1 or None, got {self.max_new_tokens!r}")
        if self.temperature is not None and not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 or None, got {self.temperature!r}")

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Plays the debates of ``prompts`` with ``trainer``'s model; returns TRL's rollout dict."""
        agents = int(trainer.num_generations if trainer.model.training else trainer.num_generations_eval)
        turns = self._play([_question_text(q) for q in _questions(prompts, agents)], agents, trainer)
        out: dict[str, list[Any]] = {
            k: []
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "debate_id",
                "agent_id",
                "num_agents",
                "acted",
            )
        }
        for d, debate in enumerate(turns):
            for agent, (prompt_ids, completion_ids, logprobs, acted) in enumerate(debate):
                out["prompt_ids"].append(prompt_ids)
                out["completion_ids"].append(completion_ids)
                out["logprobs"].append(logprobs)
                out["debate_id"].append(d)
                out["agent_id"].append(agent)
                out["num_agents"].append(agents)
                out["acted"].append(acted)
        return out

    def _play(self, questions: list[str], agents: int, trainer: Any) -> list[list[_Turn]]:
        states = [kernel.initial_state(q, num_agents=agents, max_rounds=self.max_rounds) for q in questions]
        before_end = list(states)  # the last state with a turn to observe, for agents never reached
        last: list[dict[int, _Turn]] = [{} for _ in questions]
        while live := [d for d, s in enumerate(states) if not s.done]:
            by_agent: dict[int, list[int]] = {}
            for d in live:
                by_agent.setdefault(_speaker(states[d]), []).append(d)
            for agent, debates in by_agent.items():
                turns = self._generate([states[d] for d in debates], agent, trainer)
                for d, turn in zip(debates, turns, strict=True):
                    text = trainer.processing_class.decode(turn.completion_ids, skip_special_tokens=True)
                    parsed = kernel.parse_response(text, agent, policy=self.policy)
                    before_end[d], states[d] = states[d], kernel.submit(states[d], agent, parsed).state
                    last[d][agent] = turn
        for d in range(len(questions)):
            for agent in (a for a in range(agents) if a not in last[d]):
                (turn,) = self._generate([before_end[d]], agent, trainer)
                last[d][agent] = turn._replace(acted=False)
        return [[last[d][a] for a in range(agents)] for d in range(len(questions))]

    def _generate(self, states: list[kernel.DebateState], agent: int, trainer: Any) -> list[_Turn]:
        torch = importlib.import_module("torch")
        tok = trainer.processing_class
        prompts = [_render(tok, kernel.build_observation(s, agent, config=self.observation)) for s in states]
        encoded = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        width = max(len(e) for e in encoded)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
        model = trainer.accelerator.unwrap_model(trainer.model)
        temperature = self.temperature if self.temperature is not None else float(trainer.temperature)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                max_new_tokens=self.max_new_tokens or int(trainer.max_completion_length),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                pad_token_id=pad,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[:, width:].cpu()
        logp = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1).cpu()
        picked = logp.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        turns = []
        for row, e in enumerate(encoded):
            tokens = new[row].tolist()
            end = next((i + 1 for i, t in enumerate(tokens) if t == tok.eos_token_id), len(tokens))
            turns.append(_Turn(list(e), tokens[:end], picked[row, :end].tolist(), True))
        return turns


def _questions(prompts: Sequence[Any], agents: int) -> list[Any]:
    """One question per debate. TRL's sampler repeats each prompt ``num_generations`` times in a row (one
    completion per repeat: here, one per agent); a prompt list without repeats gets ``agents`` completions
    per prompt. Either way each debate returns one completion per agent, in agent order."""
    runs = [len(list(g)) for _, g in itertools.groupby(prompts, key=_key)]
    if agents > 1 and all(n % agents == 0 for n in runs):
        return [prompts[i] for i in range(0, len(prompts), agents)]
    return list(prompts)


def _question_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    if not users:
        raise ValueError("a conversational prompt needs a user message holding the question")
    return str(users[-1].get("content", ""))


def _render(tok: Any, observation: kernel.Observation) -> str:
    messages = observation.as_dicts()
    if getattr(tok, "chat_template", None):
        return str(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
