"""Rollouts: many debates at once over the kernel's pure episode state machine.

One debate is a loop of the kernel's steps (REFERENCE.md §7)::

    state = initial_state(question)
    while not state.done:
        agent  = current_agent(state)                          # one agent at a time
        prompt = renderer.build_prompt(build_observation(state, agent).messages)
        tokens = await boundary.call("sample", ...)  # deadline, retries, reply check
        state  = submit(state, agent, parse_response(renderer.text(tokens), agent)).state

Debates run concurrently in one ``asyncio.TaskGroup`` under an ``asyncio.Semaphore`` (at most
``max_concurrent`` debates in flight). Every sample goes through the service boundary
(:mod:`adapters.tinker.boundary`: its deadline, retries and reply check). A sample that cannot be had —
retries ran out on an exception from the sampler, a timeout or a future cancelled by the service, or the
reply failed its check — ends that debate only, through
:func:`kernel.abort` with a reason code; a response that fails to parse ends it through
:func:`kernel.submit` (step reward −1, the reference's rule). Other debates go on. Programmer errors
(and :class:`~adapters.tinker.faults.SimulatedCrash`) propagate: the group cancels every debate and the
error is re-raised unwrapped.

Cancelling :func:`run_debates` (Ctrl-C under ``asyncio.run``) cancels every debate and raises
:class:`RolloutsCancelled`, an ``asyncio.CancelledError`` that carries the debates that had finished
and the interrupted ones (aborted with reason ``"cancelled"``). No task outlives the call.

Modes: self-play (one sampler in every role, :func:`self_play`) and fixed opponents (the policy in role
i of debate i, fixed samplers elsewhere, :func:`fixed_opponents`; the reference's evaluation).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, get_args

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

from adapters.tinker.boundary import Boundary, RetryPolicy, ServiceError
from adapters.tinker.convert import Transition
from adapters.tinker.protocol import SamplingClient
from adapters.tinker.renderers import Renderer
from adapters.tinker.tokens import TokenArray, prompt_ids
from adapters.transcripts import Debate, dumps_debate
from adapters.transcripts import Turn as TranscriptTurn
from kernel import (
    PARSE_FAILURE_REWARD,
    DebateState,
    ObservationConfig,
    ParsedResponse,
    abort,
    build_observation,
    current_agent,
    current_round,
    initial_state,
    parse_response,
    submit,
)

__all__ = [
    "END_REASONS",
    "ROLLOUT_PRESETS",
    "DebateResult",
    "DebateSpec",
    "RolloutBatch",
    "RolloutConfig",
    "RolloutTurn",
    "RolloutsCancelled",
    "TurnArrays",
    "default_boundary",
    "fixed_opponents",
    "last_solution",
    "run_debate",
    "run_debates",
    "self_play",
    "transcript_lines",
    "turn_arrays",
]

TurnArrays: TypeAlias = tuple[
    npt.NDArray[np.integer[Any]], npt.NDArray[np.integer[Any]], npt.NDArray[np.floating[Any]]
]
"""A turn's token arrays: observation ids [O], action ids [A] and sampler logprobs [A], each in the dtype
the renderer and the sampler gave (integers and floats; the byte renderer's ids and the fake's are
int32, its logprobs float32): they are widened once, when a step's turns are packed, not per turn."""


def turn_arrays(prompt: tinker.ModelInput, sequence: types.SampledSequence) -> TurnArrays | None:
    """``(observation, action, logprobs)`` of a sampled turn as its transcript keeps them, or None where
    the transcript keeps no tokens (the sampler gave no logprob per token, or one that is not finite, which
    no datum can carry; see ``DebateResult``).

    Examples:
        >>> seq = types.SampledSequence("stop", "s", tokens_np=np.array([5, 6], np.int32),
        ...                             logprobs_np=np.array([-0.5, -1.0], np.float32))
        >>> ob, ac, lp = turn_arrays(tinker.ModelInput.from_ints([1, 2, 3]), seq)
        >>> ob.tolist(), ac.tolist(), lp.tolist()
        ([1, 2, 3], [5, 6], [-0.5, -1.0])
        >>> no_logprobs = types.SampledSequence("stop", "s", tokens_np=np.array([5], np.int32))
        >>> turn_arrays(tinker.ModelInput.from_ints([1]), no_logprobs) is None
        True
    """
    action = sequence.tokens_np if sequence.tokens_np is not None else sequence.tokens
    logprobs = sequence.logprobs_np if sequence.logprobs_np is not None else sequence.logprobs
    if logprobs is None or len(logprobs) != len(action):
        return None
    if not isinstance(logprobs, np.ndarray) and any(x is None for x in logprobs):
        return None
    values = np.asarray(logprobs)
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    if not np.isfinite(values).all():
        return None
    ids = np.asarray(action)
    if ids.dtype.kind not in "iu":
        ids = np.asarray(action, dtype=np.int64)
    return (prompt_ids(prompt, held=True), ids, values)


EndReason = Literal[
    "consensus",
    "max_rounds",
    "parse_failure",
    "sampler_error",
    "sampler_timeout",
    "sampler_cancelled",
    "sampler_bad_reply",
    "cancelled",
]
END_REASONS: Final[tuple[EndReason, ...]] = get_args(EndReason)
"""How a rollout ended: every agent said YES in a round; the round limit; a response failed to parse
(the failing agent's step reward is −1); the sampler raised or returned nothing; the sample took longer
than ``sample_timeout``; the service cancelled the request; the sampler's reply failed its check (an empty
sequence, ids outside the vocabulary, not one finite logprob per token:
:func:`adapters.tinker.boundary.check_sample`); the whole batch was cancelled."""


@dataclass(frozen=True, slots=True)
class RolloutConfig:
    """How debates are rolled out.

    Attributes:
        num_agents: N agents per debate (reference 3).
        max_rounds: round limit (reference 3).
        observation: how prompts are built (``ObservationConfig.DEFAULT`` or ``.REFERENCE``).
        parse_policy: ``"robust"`` (default) or ``"reference"``.
        max_tokens: sampling budget per turn.
        temperature: sampling temperature.
        max_concurrent: debates in flight at once (≥ 1).
        sample_timeout: seconds one sample may take before the debate ends with ``sampler_timeout``;
            None waits forever.
        parse_failure_reward: step reward of a response that fails to parse (reference −1).

    Raises:
        ValueError, TypeError: for a field out of range or of the wrong type, naming it.
    """

    num_agents: int = 3
    max_rounds: int = 3
    observation: ObservationConfig = ObservationConfig.DEFAULT
    parse_policy: Literal["robust", "reference"] = "robust"
    max_tokens: int = 1024
    temperature: float = 1.0
    max_concurrent: int = 64
    sample_timeout: float | None = 300.0
    parse_failure_reward: float = PARSE_FAILURE_REWARD

    def __post_init__(self) -> None:
        for name in ("num_agents", "max_rounds", "max_tokens", "max_concurrent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not isinstance(self.observation, ObservationConfig):
            raise TypeError(
                f"observation must be an ObservationConfig, got {type(self.observation).__name__}"
            )
        if self.parse_policy not in ("robust", "reference"):
            raise ValueError(f"parse_policy must be 'robust' or 'reference', got {self.parse_policy!r}")
        for name in ("temperature", "sample_timeout", "parse_failure_reward"):
            value = getattr(self, name)
            if value is None and name == "sample_timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value!r}")
        if self.sample_timeout is not None and not self.sample_timeout > 0:
            raise ValueError(f"sample_timeout must be > 0 or None, got {self.sample_timeout!r}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")

    def sampling_params(self, stop: list[str] | list[int]) -> types.SamplingParams:
        """The SDK sampling parameters of one turn, with the renderer's stop sequences."""
        return types.SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature, stop=stop)


ROLLOUT_PRESETS: Final[dict[str, RolloutConfig]] = {
    "reference": RolloutConfig(
        num_agents=3, max_rounds=3, observation=ObservationConfig.REFERENCE, parse_policy="reference"
    ),
    "default": RolloutConfig(),
}
"""Rollout presets: ``"reference"`` (the v1 recipe: 3 agents, 3 rounds, its observations and parser) and
``"default"`` (ours: the robust parser, complete-round history windows)."""


@dataclass(frozen=True, slots=True)
class DebateSpec:
    """One debate to roll out.

    Attributes:
        question: the question.
        samplers: one sampler per role (length N); the same object in every role for self-play.
        policy_roles: the roles played by the policy being trained (their turns are training data).
        answer: the reference answer, if any (carried into the transcript's meta).
        group: the question's index (debates of one question share it: a group for advantages).
        id: the debate's id in transcripts.
    """

    question: str
    samplers: tuple[SamplingClient, ...]
    policy_roles: tuple[int, ...]
    answer: str | None = None
    group: int = 0
    id: str = ""


@dataclass(frozen=True, slots=True)
class RolloutTurn:
    """One turn as sampled: prompt, the sampled sequence (tokens, logprobs), text, parse, step reward, and
    the turn's token arrays (:func:`turn_arrays`), built as the turn is taken: while the loop waits for
    other debates' samples rather than in the step's preparation, on its critical path."""

    agent_id: int
    round: int
    prompt: tinker.ModelInput
    sequence: types.SampledSequence
    text: str
    parsed: ParsedResponse
    reward: float
    by_policy: bool
    arrays: TurnArrays | None
    cache_hits: int = 0  # prompt tokens the service billed as prefix-cache hits (SDK 0.38's reply field)

    @property
    def transition(self) -> Transition:
        """``(prompt, sequence)``: the unit of :func:`~adapters.tinker.convert.trajectories_from_samples`."""
        return (self.prompt, self.sequence)


@dataclass(frozen=True, slots=True, repr=False)
class DebateResult:
    """A finished (or ended) debate.

    Attributes:
        index: position of its spec in the input.
        spec: the :class:`DebateSpec`.
        state: the final :class:`kernel.DebateState` (``done``).
        turns: every sampled turn in speaking order (a turn that failed to parse included, last).
        end_reason: one of :data:`END_REASONS`.
        detail: the parser's reason code or the sampler's error, ``""`` otherwise.
        policy_version: the version of the policy that sampled the policy roles.
    """

    index: int
    spec: DebateSpec
    state: DebateState
    turns: tuple[RolloutTurn, ...]
    end_reason: EndReason
    detail: str
    policy_version: int

    @property
    def step_rewards_G(self) -> tuple[float, ...]:
        """Σ step rewards per agent (N values: −1 for an agent whose response failed to parse)."""
        totals = [0.0] * self.state.num_agents
        for turn in self.turns:
            totals[turn.agent_id] += turn.reward
        return tuple(totals)

    def __repr__(self) -> str:
        return (
            f"DebateResult(index={self.index}, id={self.spec.id!r}, turns={len(self.turns)}, "
            f"end_reason={self.end_reason!r}, policy_version={self.policy_version})"
        )

    def transitions(self, agent_id: int) -> list[Transition]:
        """The agent's ``(prompt, sequence)`` transitions in order: one trajectory for training."""
        return [t.transition for t in self.turns if t.agent_id == agent_id]

    def to_transcript(self) -> Debate:
        """The debate in the ``debate-transcript/1`` format, tokens and logprobs included.

        ``meta`` holds ``policy_version``, ``policy_roles``, ``end_reason``, ``detail``, ``group`` and the
        reference ``answer`` (when known); ``dumps_debate(result.to_transcript())`` gives the line. A
        debate that ended before its first turn (its first sample failed) has no turns: its record still
        says why in ``meta``, and readers report it as ``no_turns`` (nothing to score) with its id.
        """
        turns = tuple(_transcript_turn(t) for t in self.turns)
        return Debate(
            id=self.transcript_id,
            question=self.spec.question,
            num_agents=self.state.num_agents,
            turns=turns,
            max_rounds=self.state.max_rounds,
            meta=self.transcript_meta(),
        )

    @property
    def transcript_id(self) -> str:
        """The debate's id in its transcript."""
        return self.spec.id or f"debate-{self.index}"

    def transcript_meta(self) -> dict[str, Any]:
        """The transcript's ``meta`` (see :meth:`to_transcript`)."""
        meta: dict[str, Any] = {
            "policy_version": self.policy_version,
            "policy_roles": list(self.spec.policy_roles),
            "end_reason": self.end_reason,
            "group": self.spec.group,
        }
        if self.detail:
            meta["detail"] = self.detail
        if self.spec.answer is not None:
            meta["answer"] = self.spec.answer
        return meta


def _transcript_turn(turn: RolloutTurn) -> TranscriptTurn:
    """A transcript turn, with tokens only when the sampler gave one finite logprob per token (all three or
    none: as :func:`turn_arrays`), and the sampled sequence's id when the sampler gave one."""
    tokens = tuple(map(int, turn.sequence.tokens))
    logprobs = turn.sequence.logprobs
    sequence_id = turn.sequence.sequence_id or None  # the SDK's id of the sample, which spans name
    if turn.arrays is None or logprobs is None or len(logprobs) != len(tokens) or None in logprobs:
        return TranscriptTurn(agent=turn.agent_id, text=turn.text, round=turn.round, sequence_id=sequence_id)
    return TranscriptTurn(
        agent=turn.agent_id,
        text=turn.text,
        round=turn.round,
        # The prompt is most of the tokens: a read-only view of its ids, not a tuple of Python ints.
        observation_tokens=TokenArray(prompt_ids(turn.prompt)),
        action_tokens=tokens,
        logprobs=tuple(map(float, logprobs)),
        sequence_id=sequence_id,
    )


@dataclass(frozen=True, slots=True, repr=False)
class RolloutBatch:
    """The results of :func:`run_debates`, in spec order, and counts of how debates ended.

    Its repr is short on purpose: ``asyncio.run`` (CPython 3.11) formats the main task, result included,
    when it restores the SIGINT handler, and a full repr of every prompt would cost more than the rollout.
    """

    results: tuple[DebateResult, ...]
    end_counts: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"RolloutBatch({len(self.results)} debates, end_counts={self.end_counts})"


class RolloutsCancelled(asyncio.CancelledError):
    """:func:`run_debates` was cancelled; ``finished`` debates are kept, ``interrupted`` ones aborted."""

    def __init__(self, finished: tuple[DebateResult, ...], interrupted: tuple[DebateResult, ...]) -> None:
        super().__init__(f"rollouts cancelled: {len(finished)} finished, {len(interrupted)} interrupted")
        self.finished = finished
        self.interrupted = interrupted


def transcript_lines(results: Iterable[DebateResult]) -> list[str]:
    """One ``debate-transcript/1`` JSON line per debate, in the given order.

    A debate whose first sample failed has no turn: its line has ``"turns": []`` and its end reason and
    detail in ``meta`` (readers report it as ``no_turns``, with its id: nothing to score, nothing lost).

    Examples:
        >>> import asyncio
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> from adapters.tinker.renderers import ByteRenderer
        >>> from adapters.transcripts import read_transcripts
        >>> async def main():
        ...     tc = await FakeServiceClient().create_lora_training_client("fake", 4)
        ...     specs = self_play(["2 + 2?"], await tc.save_weights_and_get_sampling_client(), num_agents=2)
        ...     config = RolloutConfig(num_agents=2)
        ...     return await run_debates(specs, ByteRenderer(), config=config, policy_version=3)
        >>> debate = read_transcripts(transcript_lines(asyncio.run(main()).results)).debates[0]
        >>> debate.id, debate.meta["policy_version"], debate.meta["policy_roles"]
        ('q0', 3, [0, 1])
    """
    return [dumps_debate(r.to_transcript()) for r in results]


def self_play(
    questions: Sequence[str],
    sampler: SamplingClient,
    *,
    num_agents: int,
    answers: Sequence[str | None] | None = None,
    id_prefix: str = "q",
) -> list[DebateSpec]:
    """One debate per question, ``sampler`` in every role (all roles are policy roles).

    Raises:
        ValueError: if ``answers`` is given with another length than ``questions``.

    Examples:
        >>> from adapters.tinker.fake import FakeSamplingClient, initial_model_state
        >>> sampler = FakeSamplingClient(initial_model_state("fake", 1, 0))
        >>> [(s.id, s.policy_roles, s.group) for s in self_play(["a?", "b?"], sampler, num_agents=2)]
        [('q0', (0, 1), 0), ('q1', (0, 1), 1)]
    """
    questions = _questions(questions)
    answers = _answers(questions, answers)
    roles = tuple(range(num_agents))
    return [
        DebateSpec(q, (sampler,) * num_agents, roles, a, group=g, id=f"{id_prefix}{g}")
        for g, (q, a) in enumerate(zip(questions, answers, strict=True))
    ]


def fixed_opponents(
    questions: Sequence[str],
    policy: SamplingClient,
    opponents: SamplingClient | Sequence[SamplingClient],
    *,
    num_agents: int,
    answers: Sequence[str | None] | None = None,
    id_prefix: str = "q",
) -> list[DebateSpec]:
    """N debates per question: in debate i the policy plays role i, the opponents play the others in order.

    Args:
        questions: P questions.
        policy: the learned policy's sampler.
        opponents: one fixed sampler for every other role, or N − 1 samplers (filled in role order).
        num_agents: N.
        answers: optional reference answers (P).
        id_prefix: debate ids are ``{prefix}{question}-r{role}``.

    Returns:
        P·N specs, question-major; debate ``p·N + i`` has ``policy_roles == (i,)`` and group p.

    Raises:
        ValueError: if the number of opponents is not 1 or N − 1, or ``answers`` has the wrong length.

    Examples:
        >>> from adapters.tinker.fake import FakeSamplingClient, initial_model_state
        >>> policy = FakeSamplingClient(initial_model_state("fake", 1, 0))
        >>> fixed = FakeSamplingClient(initial_model_state("base", 1, 0))
        >>> specs = fixed_opponents(["a?"], policy, fixed, num_agents=3)
        >>> for s in specs:
        ...     print(s.id, s.policy_roles, [x is policy for x in s.samplers])
        q0-r0 (0,) [True, False, False]
        q0-r1 (1,) [False, True, False]
        q0-r2 (2,) [False, False, True]
    """
    pool = [opponents] if not isinstance(opponents, Sequence) else list(opponents)
    if len(pool) == 1:
        pool = pool * (num_agents - 1)
    if len(pool) != num_agents - 1:
        raise ValueError(f"opponents must be one sampler or N - 1 = {num_agents - 1}, got {len(pool)}")
    questions = _questions(questions)
    answers = _answers(questions, answers)
    specs = []
    for g, (q, a) in enumerate(zip(questions, answers, strict=True)):
        for role in range(num_agents):
            others = iter(pool)
            samplers = tuple(policy if r == role else next(others) for r in range(num_agents))
            specs.append(DebateSpec(q, samplers, (role,), a, group=g, id=f"{id_prefix}{g}-r{role}"))
    return specs


def _questions(questions: Sequence[str]) -> list[str]:
    """``questions`` as a list of strings (one string alone would be read as its characters)."""
    if isinstance(questions, str | bytes) or not all(isinstance(q, str) for q in questions):
        raise TypeError(f"questions must be a sequence of question strings, got {questions!r:.80}")
    return list(questions)


def _answers(questions: Sequence[str], answers: Sequence[str | None] | None) -> list[str | None]:
    if answers is None:
        return [None] * len(questions)
    if isinstance(answers, str | bytes):
        raise TypeError(f"answers must be a sequence, one per question, got the string {answers!r:.80}")
    if len(answers) != len(questions):
        raise ValueError(f"answers must have one entry per question ({len(questions)}), got {len(answers)}")
    return list(answers)


class _Live:
    """The mutable progress of one debate inside the driver (read when the batch is cancelled)."""

    __slots__ = ("state", "turns")

    def __init__(self, state: DebateState) -> None:
        self.state = state
        self.turns: list[RolloutTurn] = []


def _result(
    index: int, spec: DebateSpec, live: _Live, reason: EndReason, detail: str, version: int
) -> DebateResult:
    return DebateResult(index, spec, live.state, tuple(live.turns), reason, detail, version)


async def _sample(
    sampler: SamplingClient, prompt: tinker.ModelInput, params: types.SamplingParams, boundary: Boundary
) -> tuple[types.SampledSequence | None, EndReason | None, str, int]:
    """One sample through ``boundary`` (its deadline, retries and reply check), with the prompt tokens the
    service billed as cache hits; a sample that cannot be had comes back as ``(None, reason, detail, 0)``:
    the one translation point. A pause the service reports for ``sampler`` is waited out
    (:meth:`Boundary.watch`)."""
    boundary.watch(sampler)
    try:
        response = await boundary.call(
            "sample", lambda: sampler.sample(prompt, 1, params), boundary.check_sample(1)
        )
    except ServiceError as e:
        return None, _END_OF_CAUSE.get(e.cause, "sampler_error"), f"{e.cause}: {e.detail}", 0
    hits = getattr(response, "prompt_cache_hit_tokens", 0)
    return response.sequences[0], None, "", hits if isinstance(hits, int) else 0


_END_OF_CAUSE: Final[dict[str, EndReason]] = {
    "deadline": "sampler_timeout",
    "cancelled": "sampler_cancelled",
    "bad_reply": "sampler_bad_reply",
}
"""The end reason of a debate whose sample failed with a :class:`ServiceError` of this cause (any other
cause: ``sampler_error``)."""


def default_boundary(config: RolloutConfig) -> Boundary:
    """The boundary of rollouts run without one: one attempt, ``config.sample_timeout`` as the sample
    deadline, only the sequence count checked (the training loop passes its own, with retries and every
    check).

    Examples:
        >>> b = default_boundary(RolloutConfig(sample_timeout=5.0))
        >>> b.deadlines["sample"], b.policy.max_attempts, b.strict
        (5.0, 1, False)
    """
    return Boundary({"sample": config.sample_timeout}, RetryPolicy(max_attempts=1), strict=False)


def last_solution(state: DebateState, agent: int) -> str:
    """Agent ``agent``'s most recent solution in ``state`` (\"\" when it never answered).

    Examples:
        >>> from kernel import render_response
        >>> state = initial_state("What is 2 + 2?", num_agents=2, max_rounds=2)
        >>> text = render_response(solution="4", evaluation="N/A", consensus=False, consensus_reason="No.")
        >>> state = submit(state, 0, parse_response(text, author_id=0)).state
        >>> last_solution(state, 0), last_solution(state, 1)
        ('4', '')
    """
    for round_ in reversed(state.rounds):
        for resp in round_:
            if resp.author_id == agent:
                return resp.solution
    return ""


async def run_debate(
    spec: DebateSpec,
    renderer: Renderer,
    *,
    config: RolloutConfig = RolloutConfig(),
    policy_version: int = 0,
    index: int = 0,
    boundary: Boundary | None = None,
) -> DebateResult:
    """Rolls out one debate to its end (see the module docstring for how each failure ends it).

    Args:
        spec: the debate.
        renderer: the chat format.
        config: a :class:`RolloutConfig` (keyword).
        policy_version: stamped on the result (keyword).
        index: stored as the result's ``index`` (keyword).
        boundary: where the samples go through (keyword; default :func:`default_boundary`).

    Returns:
        A :class:`DebateResult` whose ``state`` is done.

    Raises:
        ValueError: if the spec's samplers are not one per role or a policy role is out of range.

    Examples:
        >>> import asyncio
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> from adapters.tinker.renderers import ByteRenderer
        >>> async def main():
        ...     tc = await FakeServiceClient(seed=0).create_lora_training_client("fake", 4)
        ...     sampler = await tc.save_weights_and_get_sampling_client()
        ...     spec = DebateSpec("What is 2 + 2?", (sampler, sampler), (0, 1), answer="4", id="q0")
        ...     config = RolloutConfig(num_agents=2, max_rounds=2)
        ...     return await run_debate(spec, ByteRenderer(), config=config, policy_version=1, index=5)
        >>> result = asyncio.run(main())
        >>> result
        DebateResult(index=5, id='q0', turns=4, end_reason='max_rounds', policy_version=1)
        >>> result.state.done, [(t.agent_id, t.round, t.parsed.solution) for t in result.turns]
        (True, [(0, 0, '4'), (1, 0, '4'), (0, 1, '6'), (1, 1, '2')])
    """
    _check_spec(spec, config, "spec")
    live = _Live(initial_state(spec.question, num_agents=config.num_agents, max_rounds=config.max_rounds))
    return await _drive(
        spec, renderer, live, config, policy_version, index, boundary or default_boundary(config)
    )


def _check_spec(spec: DebateSpec, config: RolloutConfig, name: str) -> None:
    n = config.num_agents
    if len(spec.samplers) != n:
        raise ValueError(f"{name}.samplers must hold N = {n} samplers, got {len(spec.samplers)}")
    if any(not 0 <= r < n for r in spec.policy_roles):
        raise ValueError(f"{name}.policy_roles must lie in [0, {n}), got {spec.policy_roles}")


async def _drive(
    spec: DebateSpec,
    renderer: Renderer,
    live: _Live,
    config: RolloutConfig,
    version: int,
    index: int,
    boundary: Boundary,
) -> DebateResult:
    """The debate loop; ``live`` always holds the latest state and turns (read if we are cancelled)."""
    params = config.sampling_params(renderer.stop_sequences())
    while True:
        agent = current_agent(live.state)
        if agent is None:
            reason: EndReason = "consensus" if live.state.consensus else "max_rounds"
            if live.state.parse_failed:
                reason = "parse_failure"
            detail = live.state.abort_reason if live.state.parse_failed else ""
            return _result(index, spec, live, reason, detail, version)
        observation = build_observation(live.state, agent, config=config.observation)
        prompt = renderer.build_prompt(observation.messages)
        sequence, failure, detail, hits = await _sample(spec.samplers[agent], prompt, params, boundary)
        if sequence is None or failure is not None:
            failure = failure or "sampler_error"
            live.state = abort(live.state, failure)
            return _result(index, spec, live, failure, detail, version)
        try:
            text = renderer.text(sequence.tokens)
        except (ValueError, TypeError, OverflowError) as e:  # token ids the renderer cannot decode
            live.state = abort(live.state, "sampler_error")
            detail = f"the sampled tokens do not decode: {e}"
            return _result(index, spec, live, "sampler_error", detail, version)
        parsed = parse_response(text, author_id=agent, policy=config.parse_policy)
        round_index = current_round(live.state)
        step = submit(live.state, agent, parsed, parse_failure_reward=config.parse_failure_reward)
        if not step.ok:  # unreachable: the driver submits only for the agent whose turn it is
            raise RuntimeError(f"submit rejected agent {agent}'s turn: {step.reason}")
        by_policy = agent in spec.policy_roles
        arrays = turn_arrays(prompt, sequence)
        live.turns.append(
            RolloutTurn(
                agent, round_index, prompt, sequence, text, parsed, step.reward, by_policy, arrays, hits
            )
        )
        live.state = step.state


async def run_debates(
    specs: Sequence[DebateSpec],
    renderer: Renderer,
    *,
    config: RolloutConfig = RolloutConfig(),
    policy_version: int = 0,
    on_result: Callable[[DebateResult], None] | None = None,
    boundary: Boundary | None = None,
) -> RolloutBatch:
    """Rolls out every debate concurrently (at most ``config.max_concurrent`` at once).

    Args:
        specs: the debates (see :func:`self_play`, :func:`fixed_opponents`).
        renderer: the chat format (prompts, stop sequences, text).
        config: a :class:`RolloutConfig` (keyword).
        policy_version: the policy's version, stamped on every result (keyword).
        on_result: called with each result as its debate ends, in completion order (keyword); e.g. to
            append its transcript line. An exception it raises propagates like a programmer error.
        boundary: where every sample goes through: its deadline, retries and reply check (keyword;
            default :func:`default_boundary`, one attempt under ``config.sample_timeout``).

    Returns:
        A :class:`RolloutBatch` with one result per spec, in spec order.

    Raises:
        RolloutsCancelled: if cancelled; it carries the finished and the interrupted debates (a task
            cancelled before this coroutine first ran raises a plain ``CancelledError``: nothing ran).
        ValueError: for a malformed spec (before anything runs).
        BaseException: a programmer error or a simulated crash in any debate, unwrapped from the group
            after every other debate was cancelled.

    Examples:
        >>> import asyncio
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> from adapters.tinker.renderers import ByteRenderer
        >>> async def main():
        ...     tc = await FakeServiceClient(seed=0).create_lora_training_client("fake", 4)
        ...     sampler = await tc.save_weights_and_get_sampling_client()
        ...     specs = self_play(["What is 2 + 2?", "What is 3 * 3?"], sampler, num_agents=2)
        ...     config = RolloutConfig(num_agents=2, max_rounds=2)
        ...     batch = await run_debates(specs, ByteRenderer(), config=config, policy_version=1)
        ...     return [(r.state.done, r.end_reason in END_REASONS, r.policy_version) for r in batch.results]
        >>> asyncio.run(main())
        [(True, True, 1), (True, True, 1)]
    """
    seen: dict[str, int] = {}
    for k, spec in enumerate(specs):
        _check_spec(spec, config, f"specs[{k}]")
        if spec.id in seen:  # a transcript reader keeps the first and drops the other as duplicate_id
            raise ValueError(
                f"specs[{k}].id {spec.id!r} is also specs[{seen[spec.id]}]'s: debate ids must be unique "
                "(give each self_play / fixed_opponents call its own id_prefix)"
            )
        seen[spec.id] = k
    gate = asyncio.Semaphore(config.max_concurrent)
    through = boundary or default_boundary(config)
    finished: dict[int, DebateResult] = {}
    lives: dict[int, _Live] = {}

    def start(spec: DebateSpec) -> _Live:
        return _Live(initial_state(spec.question, num_agents=config.num_agents, max_rounds=config.max_rounds))

    async def one(index: int, spec: DebateSpec) -> None:
        live = lives[index] = start(spec)
        async with gate:
            result = await _drive(spec, renderer, live, config, policy_version, index, through)
            finished[index] = result
            if on_result is not None:
                on_result(result)

    try:
        async with asyncio.TaskGroup() as group:
            for index, spec in enumerate(specs):
                group.create_task(one(index, spec))
    except asyncio.CancelledError:
        interrupted = tuple(  # debates cancelled before their task first ran have an initial state
            _result(i, specs[i], _aborted(lives.get(i) or start(specs[i])), "cancelled", "", policy_version)
            for i in range(len(specs))
            if i not in finished
        )
        raise RolloutsCancelled(tuple(finished[i] for i in sorted(finished)), interrupted) from None
    except BaseExceptionGroup as group_error:
        errors = [e for e in group_error.exceptions if not isinstance(e, asyncio.CancelledError)]
        if len(errors) == 1:
            raise errors[0] from None
        raise
    results = tuple(finished[i] for i in range(len(specs)))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.end_reason] = counts.get(r.end_reason, 0) + 1
    return RolloutBatch(results, counts)


def _aborted(live: _Live) -> _Live:
    live.state = abort(live.state, "cancelled")
    return live
