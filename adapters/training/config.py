"""The training configuration: one frozen :class:`TrainConfig`, read from a TOML file and/or flags.

Every key has a default; the reference value (the v1 debate recipe, tinker-cookbook ``rl/train.py``)
is listed in ``docs/training.md``. An unknown key is an error that names it and lists the valid keys;
a value of the wrong type or out of range (every number must be finite; an int is a number) is an error
that names the key.

Examples:
    >>> c = TrainConfig.from_mapping({"steps": 3, "num_agents": 2})
    >>> c.steps, c.num_agents, c.max_rounds
    (3, 2, 3)
    >>> TrainConfig.from_mapping({"stpes": 3})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: unknown config key 'stpes' (did you mean 'steps'?); valid keys: model, ...
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
import types as pytypes
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, get_args, get_origin, get_type_hints

import kernel
from kernel.checks import did_you_mean

if TYPE_CHECKING:
    from adapters.training.rollouts import RolloutConfig

__all__ = [
    "CALL_KINDS",
    "DEFAULT_DEADLINES",
    "DTYPES",
    "KERNEL_LOSSES",
    "REFUSED_LOSSES",
    "SEED_LIMIT",
    "SERVER_LOSSES",
    "TrainConfig",
    "key_help",
    "load_config",
]

SERVER_LOSSES: Final = ("importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce")
"""Losses computed by the service, by name (``forward_backward(data, loss_fn, loss_fn_config)``).
``stable_reinforce`` (tinker 0.38) makes the loop create its samplers with ``record_stability_info=True``
and send every datum with provenance spans naming its sampled sequences (a batch without them is refused
before it is sent)."""
REFUSED_LOSSES: Final[Mapping[str, str]] = MappingProxyType({})
"""Server-side losses Tinker names that a run cannot use yet, with the reason (none at present)."""
KERNEL_LOSSES: Final = ("kernel:importance_sampling", "kernel:ppo", "kernel:cispo", "kernel:dro")
"""Losses computed by the kernel's JAX twins on the client, sent through ``forward_backward_custom``."""
SEED_LIMIT: Final = 2**32
"""Seeds lie in ``[0, SEED_LIMIT)``: every service and numpy's generators take them."""
DTYPES: Final = ("float32", "bfloat16")
"""Values of the key ``dtype``: the local service's ``compute_dtype`` (its ``COMPUTE_DTYPES``)."""

CALL_KINDS: Final = (
    "sample",
    "compute_logprobs",
    "forward_backward",
    "optim_step",
    "save_state",
    "refresh",
    "restore",
    "create",
)
"""The kinds of service call, each with its own deadline: ``refresh`` is
``save_weights_and_get_sampling_client``, ``restore`` is
``create_training_client_from_state_with_optimizer`` (``--resume``), ``create`` a new training client."""

DEFAULT_DEADLINES: Final[Mapping[str, float]] = MappingProxyType(
    {
        "sample": 600.0,
        "compute_logprobs": 300.0,
        "forward_backward": 1800.0,
        "optim_step": 600.0,
        "save_state": 900.0,
        "refresh": 900.0,
        "restore": 1800.0,
        "create": 1800.0,
    }
)
"""Seconds one attempt of each kind of call may take. Hosted Tinker queues requests behind other users'
(a training call waits seconds to minutes at busy times, a sample of 512 tokens takes seconds); the local
service on 2 CPU cores takes seconds for a step and up to a minute for its first, compiling, call. The
defaults leave an order of magnitude over both: a hang ends in minutes, a slow service is not cut off."""


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of ``debate-kernel train`` / :func:`adapters.training.run_training`.

    Attributes:
      model: base model: a Tinker base model name, or a local model name / safetensors path.
      lora_rank: LoRA rank of the trained adapter; 0 trains every weight (full fine-tuning), which only
        the local service offers (``create_full_training_client``; Tinker trains LoRA adapters).
      train_attn, train_mlp, train_unembed: the LoRA adapters' targets, as the flags of the SDK's
        ``create_lora_training_client``: the attention projections, the MLP projections, the output layer
        (Tinker's default: all three); at least one with ``lora_rank`` ≥ 1, all three with 0.
      dtype: the local service's matrix products: ``"float32"``, or ``"bfloat16"`` operands accumulated in
        float32 (for GPUs; little gain on CPU; weights and optimizer state stay float32). Tinker chooses
        its own: any other value than the default is refused there.
      steps: RL steps (optimizer steps on debate batches), after the warm-start steps.
      num_epochs: 0: the run is ``steps`` long; k ≥ 1: ``steps`` is replaced by the batches that play every
        question of the dataset k times (``adapters.training.dataset.epoch_steps``: ⌈k·Q / batch_size⌉,
        the last batch completed from the next epoch's order), each epoch in its own seeded order.
      warm_start_steps: cross-entropy steps on well-formed turns written with ``kernel.render_response``
        before RL (0: none).
      warm_start_learning_rate: the warm start's learning rate (None: ``learning_rate``).
      warm_start_lr_decay: the warm start's learning rate falls linearly from its first step to
        ``× warm_start_lr_decay`` at its last (1.0: constant); RL steps use ``learning_rate``.
      warm_start_answers: the solutions of the warm-start turns: ``"reference"`` (each question's own
        reference answer) or ``"shuffled"`` (agent i's turn on question k of the batch carries the
        reference answer of question k + 1 + i: the turns teach the format and the answer's form, not
        which answer is right, and agents do not learn to repeat each other's answers; so whatever
        correctness rises above chance after the warm start is RL's doing).
      out: the run directory (metrics.jsonl, transcripts/, checkpoints/).
      dataset: a JSON Lines file of ``{"question", "answer"?}``, or a shipped set: ``"sample"``,
        ``"arithmetic"``, ``"parity"``, ``"repeat"``, ``"yesno"``.
      batch_size: questions per step.
      group_size: debates per question in an RL step (each question played ``group_size`` times, as
        tinker-cookbook's ``group_size`` plays an environment group; advantages stay centred per debate):
        ``batch_size × group_size`` debates a step. The warm start and evaluations use each question once.
        (On the in-repo fake, whose samples are a pure function of the prompt, they are identical.)
      num_agents: agents in a debate.
      max_rounds: rounds in a debate at most (a round is one turn of every agent; a debate ends
        earlier when every agent says YES in a round).
      history_rounds: earlier rounds shown in an observation (−1 all, 0 none, K the last K).
      observation: ``"default"``, ``"reference"`` or ``"compact"`` (``kernel.OBSERVATION_PRESETS``).
      parse_policy: ``"robust"`` or ``"reference"``.
      renderer: the chat format of the model's prompts (:func:`adapters.tinker.renderers.choose_renderer`):
        ``"auto"`` the tokenizer's chat template when it has one, else the byte renderer for the byte
        tokenizer; ``"byte"`` the byte renderer; ``"chat"`` the chat template. ``debate-kernel train``
        refuses a tokenizer that does not fit before it makes the run directory; ``--renderer`` overrides
        the key.
      reward_mode: ``"win_rate"`` or ``"win_minus_loss"``.
      correctness_weight: reward = pairwise + correctness_weight × (solution correct); needs answers.
      estimator: an advantage spec of ``debate-kernel score --estimator`` (a preset of
        ``kernel.ADVANTAGE_PRESETS`` with ``,key=value`` overrides), or ``"rae"`` (EMA baseline per role).
      silent_agents: agents with no turn in a debate (it ended, e.g. on a parse failure, before they
        spoke) have a return but no datum: ``"exclude"`` (ours) leaves them out of their debate's
        advantage statistics; ``"include"`` (the reference) averages their returns in, which shifts the
        advantages of the agents that did speak (a parse failure then pushes every sampled token down).
        Applies to the grouped estimators; RAE baselines see every return.
      credit: which tokens of a turn carry its advantage (:mod:`adapters.training.credit`): ``"turn"``
        (the reference) every action token; ``"solution"`` only those of the ``<solution>`` block, the
        only part of a turn its agent's own return depends on (a turn with no solution block keeps the
        whole-turn credit).
      negative_advantages: ``"keep"`` (the reference) trains on every advantage; ``"zero"`` sets the
        negative ones to 0, so only turns better than their debate's baseline are reinforced and no
        sampled token is pushed down (pushing down one token spreads its probability over all the
        others; on a small model that breaks the output format, see docs/training.md).
      turn_groups: ``"none"`` (one advantage per agent and debate, the reference); ``"round"`` or
        ``"round_agent"``: turn-level advantages (each turn's reward-to-go, grouped per debate and round,
        or per question group, round and agent: :func:`kernel.score_episodes`).
      judge_rewards: ``"off"`` (the v1 rewards); ``"default"`` or ``"reference_v2"``: every turn scored
        as an answer and as a judge (:data:`kernel.JUDGE_PRESETS`, the debate recipe's V2 credit), each
        stream centred per debate by the estimator, a per-turn advantage (needs ``credit = "turn"``,
        ``turn_groups = "none"`` and ``correctness_weight = 0``).
      rae_decay: the RAE baseline decay d (``b ← d·b + (1 − d)·x``).
      remove_constant_reward_groups: drop debates whose total returns are all equal (keep one if all are).
      loss_fn: a server-side loss name (:data:`SERVER_LOSSES`) or a kernel loss (:data:`KERNEL_LOSSES`).
        ``gspo`` needs both clip thresholds in ``loss_fn_config``; ``stable_reinforce`` samples with
        ``record_stability_info=True`` and needs provenance spans on every datum (the SDK's sequence ids).
      loss_fn_config: the loss's options (e.g. ``clip_low_threshold``), sent as ``loss_fn_config``.
      learning_rate: the RL steps' Adam learning rate.
      beta1, beta2, eps: Adam's other parameters.
      num_substeps: optimizer steps per batch (the batch split in that many pieces, pipelined).
      stream_minibatches: m > 0 streams each RL batch (tinker-cookbook's ``StreamMinibatchConfig``): its
        debates are cut into ``num_substeps × m`` parts (see ``stream_order``), and a part's datums go to
        ``forward_backward`` as soon as it is complete, while later debates are still sampled; one
        ``optim_step`` per substep after its m parts. 0 (the reference) prepares the whole batch once
        sampled. On-policy only, with an estimator whose statistics stay within a debate (not ``rae``, nor
        a batch-scaled preset); a KL penalty's mean is then per part.
      stream_order: which debates a streamed part holds: ``"completion"`` (the cookbook's) the next ones
        to end, so only the last part waits for the slowest debate; ``"dataset"`` consecutive debates of
        the batch, a part complete once they and every earlier part's have ended (reproducible to the bit
        where the service is; slower with stragglers).
      kl_penalty_coef: KL penalty against the reference sampler (the initial or warm-started weights);
        0 turns it off.
      save_every: checkpoint every K steps (and at the end); 0: only at the end.
      eval_every: evaluate every K steps (and at the end); 0: only at the end.
      eval_questions: questions per evaluation (each gives N debates, one per role of the policy).
      eval_repeats: how many times an evaluation plays each of those debates (fresh samples each time):
        ``eval_questions × N × eval_repeats`` debates, a standard error √R smaller than one pass.
      eval_split: the share of ``dataset`` held out from training and evaluated instead, in [0, 1): the
        ⌈share · n⌉ questions whose BLAKE2b-64 digests of their text are the smallest (deterministic:
        not the seed, nor the lines' order; :func:`adapters.training.dataset.split_questions`); 0
        evaluates on the training questions themselves.
      eval_dataset: a question set (file or shipped name) evaluated instead of ``dataset``, which then
        trains in full; "" (the default): ``dataset`` by ``eval_split``. Not both.
      max_steps_off_policy: k, tinker-cookbook 0.6.1's ``steps_ahead``: at most ``batch_size × (k + 1)``
        groups (a question's ``group_size`` debates) started and not yet trained; a step trains the
        ``batch_size`` finished groups sampled from the oldest weights, the rest carry over, and nothing
        sampled is discarded (``async/staleness_*`` in the metrics). 0 trains on-policy (sample, then
        train).
      sampler_kind: ``"snapshot"``: each step's sampler is a frozen copy of the weights after it;
        ``"inflight"`` (tinker 0.38's ``save_weights_and_get_sampling_client(kind="inflight")``, where the
        service supports it): one mutable sampler that running rollouts keep using as later steps publish
        newer weights, so an async debate may mix versions (its stamped version is the oldest it may have
        used). The KL reference, the fixed opponents and every evaluation sample a snapshot.
      max_tokens: the most tokens sampled for one turn.
      temperature: the sampling temperature.
      max_concurrent_debates: debates sampled at once.
      sample_timeout_s: the deadline of one sample (an attempt slower than this is retried, and a sample
        that cannot be had ends its debate, reason ``sampler_timeout``); 0: ``deadlines``' ``sample``
        (default 600 s). It overrides ``deadlines.sample``.
      deadlines: seconds one attempt of a kind of service call may take, by kind (``sample``,
        ``compute_logprobs``, ``forward_backward``, ``optim_step``, ``save_state``, ``refresh``,
        ``restore``, ``create``); a kind left out takes its default
        (``adapters.tinker.boundary.DEFAULT_DEADLINES``: minutes), 0 waits forever. A call past its
        deadline is a transient failure.
      retry_attempts: attempts at most per service call whose failure is transient (1: no retry);
        ``forward_backward`` and ``optim_step`` are never retried (the run stops; ``--resume``).
      retry_max_s: no retry of a call starts once it has taken this long, backoff waits included.
      max_empty_steps: this many consecutive RL steps without a datum stop the run, naming the dominant
        reason (0: never).
      seed: seeds the dataset order and sampling.
    """

    model: str = "tiny"
    lora_rank: int = 32
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = True
    dtype: str = "float32"
    steps: int = 10
    num_epochs: int = 0
    warm_start_steps: int = 0
    warm_start_learning_rate: float | None = None
    warm_start_lr_decay: float = 1.0
    warm_start_answers: Literal["reference", "shuffled"] = "reference"
    out: str = "runs/debate"
    dataset: str = "sample"
    batch_size: int = 16
    group_size: int = 1
    num_agents: int = 3
    max_rounds: int = 3
    history_rounds: int = 2
    observation: Literal["default", "reference", "compact"] = "default"
    parse_policy: Literal["robust", "reference"] = "robust"
    renderer: Literal["auto", "byte", "chat"] = "auto"
    reward_mode: Literal["win_rate", "win_minus_loss"] = "win_rate"
    correctness_weight: float = 0.0
    estimator: str = "tinker"
    silent_agents: Literal["exclude", "include"] = "exclude"
    credit: Literal["turn", "solution"] = "turn"
    negative_advantages: Literal["keep", "zero"] = "keep"
    turn_groups: Literal["none", "round", "round_agent"] = "none"
    judge_rewards: Literal["off", "default", "reference_v2"] = "off"
    rae_decay: float = 0.95
    remove_constant_reward_groups: bool = False
    loss_fn: str = "importance_sampling"
    loss_fn_config: dict[str, float] = field(default_factory=dict)
    learning_rate: float = 4e-5
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    num_substeps: int = 1
    stream_minibatches: int = 0
    stream_order: Literal["completion", "dataset"] = "completion"
    kl_penalty_coef: float = 0.0
    save_every: int = 20
    eval_every: int = 20
    eval_questions: int = 8
    eval_repeats: int = 1
    eval_split: float = 0.0
    eval_dataset: str = ""
    max_steps_off_policy: int = 0
    sampler_kind: Literal["snapshot", "inflight"] = "snapshot"
    max_tokens: int = 512
    temperature: float = 1.0
    max_concurrent_debates: int = 64
    sample_timeout_s: float = 0.0
    deadlines: dict[str, float] = field(default_factory=dict)
    retry_attempts: int = 5
    retry_max_s: float = 1800.0
    max_empty_steps: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        hints = get_type_hints(type(self))
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), hints[f.name])
            if float in _kinds(hints[f.name]) and getattr(self, f.name) is not None:
                object.__setattr__(self, f.name, _finite(f.name, getattr(self, f.name)))
        self._check_counts()
        self._check_numbers()
        self._check_names()
        self._check_combinations()

    def _check_counts(self) -> None:
        """The int keys' ranges."""
        positive = (
            "batch_size",
            "group_size",
            "num_agents",
            "max_rounds",
            "num_substeps",
            "max_tokens",
            "eval_repeats",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"config key {name} must be >= 1, got {getattr(self, name)}")
        non_negative = (
            "lora_rank",
            "steps",
            "num_epochs",
            "warm_start_steps",
            "save_every",
            "eval_every",
            "eval_questions",
            "max_steps_off_policy",
            "max_concurrent_debates",
            "stream_minibatches",
            "max_empty_steps",
        )
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"config key {name} must be >= 0, got {getattr(self, name)}")
        if self.retry_attempts < 1:
            raise ValueError(f"config key retry_attempts must be >= 1, got {self.retry_attempts}")
        if self.max_concurrent_debates == 0:
            raise ValueError("config key max_concurrent_debates must be >= 1, got 0")
        if self.history_rounds < -1:
            raise ValueError(f"config key history_rounds must be -1, 0 or K > 0, got {self.history_rounds}")
        if not 0 <= self.seed < SEED_LIMIT:
            raise ValueError(f"config key seed must be an int in [0, 2**32), got {self.seed}")

    def _check_numbers(self) -> None:
        """The number keys' ranges (each is a finite float by now)."""
        for name in ("sample_timeout_s", "kl_penalty_coef", "temperature", "retry_max_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"config key {name} must be >= 0, got {getattr(self, name)}")
        for kind, seconds in self.deadlines.items():
            if kind not in CALL_KINDS:
                raise ValueError(
                    f"config key deadlines: unknown kind of call {kind!r}{did_you_mean(kind, CALL_KINDS)}; "
                    f"kinds: {', '.join(CALL_KINDS)}"
                )
            if not (math.isfinite(seconds) and seconds >= 0):
                raise ValueError(f"config key deadlines: {kind} must be a finite number >= 0, got {seconds}")
        if not 0 < self.warm_start_lr_decay <= 1:
            raise ValueError(
                f"config key warm_start_lr_decay must lie in (0, 1], got {self.warm_start_lr_decay}"
            )
        warm_lr = self.warm_start_learning_rate
        if warm_lr is not None and not warm_lr > 0:
            raise ValueError(
                f"config key warm_start_learning_rate must be a finite number > 0, got {warm_lr}"
            )
        for name in ("learning_rate", "eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"config key {name} must be a finite number > 0, got {getattr(self, name)}")
        if not 0.0 <= self.eval_split < 1.0:
            raise ValueError(f"config key eval_split must be in [0, 1), got {self.eval_split}")
        if self.eval_split and self.eval_dataset:
            raise ValueError(
                f"config keys eval_split ({self.eval_split}) and eval_dataset ({self.eval_dataset!r}) both "
                "choose the evaluation questions: set one of them"
            )
        for name in ("beta1", "beta2", "rae_decay"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"config key {name} must be in [0, 1), got {getattr(self, name)}")
        for option, value in self.loss_fn_config.items():
            if not math.isfinite(value):
                raise ValueError(f"config key loss_fn_config: {option} must be a finite number, got {value}")

    def _check_names(self) -> None:
        """The string keys that name something: a dataset, a loss, a dtype."""
        if self.dtype not in DTYPES:
            raise ValueError(f"config key dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not self.dataset:
            raise ValueError(
                "config key dataset is empty: name a JSON Lines file or a shipped set "
                f"({', '.join(_shipped_names())})"
            )
        if self.loss_fn in REFUSED_LOSSES:
            raise ValueError(REFUSED_LOSSES[self.loss_fn])
        if self.loss_fn not in SERVER_LOSSES + KERNEL_LOSSES:
            raise ValueError(
                f"config key loss_fn must be one of {', '.join(SERVER_LOSSES + KERNEL_LOSSES)}, "
                f"got {self.loss_fn!r}"
            )
        missing = [k for k in ("clip_low_threshold", "clip_high_threshold") if k not in self.loss_fn_config]
        if self.loss_fn == "gspo" and missing:
            raise ValueError(
                f"config key loss_fn_config must set {' and '.join(missing)} for loss_fn 'gspo' (absolute "
                "bounds on the sequence ratio, e.g. 0.8 and 1.2): Tinker does not document gspo's defaults"
            )

    def _check_combinations(self) -> None:
        """Keys that are valid alone but not together (found now, before a run directory is made)."""
        targets = {
            "train_attn": self.train_attn,
            "train_mlp": self.train_mlp,
            "train_unembed": self.train_unembed,
        }
        if self.lora_rank > 0 and not any(targets.values()):
            raise ValueError(
                "config keys train_attn, train_mlp and train_unembed are all false: LoRA would train nothing"
            )
        if self.lora_rank == 0 and not all(targets.values()):
            off = ", ".join(k for k, v in targets.items() if not v)
            raise ValueError(
                f"config key {off} = false chooses LoRA targets, but lora_rank = 0 trains every weight "
                "(full fine-tuning): set lora_rank >= 1 or leave the targets on"
            )
        estimator = self.scoring_options.estimator
        if getattr(estimator, "singleton", None) == "error" and self.num_agents == 1:
            raise ValueError(
                f"config key estimator {self.estimator!r} refuses groups of one sample "
                "(singleton=error), and with num_agents = 1 every debate is one: "
                "use num_agents >= 2 or another singleton option"
            )
        self._check_streaming(estimator)

    @functools.cached_property
    def scoring_options(self) -> kernel.ScoringOptions:
        """The run's scoring options, read once: the ``estimator`` spec (``rae`` alone takes ``rae_decay``)
        and the keys the kernel's scoring core takes (:func:`kernel.score_episodes`).

        Raises:
          ValueError: a bad ``estimator`` spec, naming the key.
        """
        try:
            _, estimator = kernel.read_estimator_spec(self.estimator)
        except (ValueError, TypeError) as e:
            raise ValueError(f"config key estimator: {e}") from None
        if isinstance(estimator, kernel.RAEOptions) and self.estimator.strip() == kernel.RAE_SPEC_NAME:
            estimator = kernel.RAEOptions(decay=self.rae_decay)
        try:
            return self._scoring_options(estimator)
        except ValueError as e:
            keys = (
                "estimator and turn_groups" if self.judge_rewards == "off" else "estimator and judge_rewards"
            )
            raise ValueError(f"config keys {keys}: {e}") from None

    def _scoring_options(self, estimator: kernel.Estimator) -> kernel.ScoringOptions:
        return kernel.ScoringOptions(
            parse_policy=self.parse_policy,
            reward_mode=self.reward_mode,
            estimator=estimator,
            correctness_weight=self.correctness_weight,
            silent_agents=self.silent_agents,
            remove_constant_groups=self.remove_constant_reward_groups,
            negative_advantages=self.negative_advantages,
            turn_groups=self.turn_groups,
            credit=self.credit,
            judge=None if self.judge_rewards == "off" else kernel.JUDGE_PRESETS[self.judge_rewards],
        )

    def _check_streaming(self, estimator: kernel.Estimator) -> None:
        """``stream_minibatches`` needs on-policy training, debate-local advantages (not RAE's baselines
        nor a batch-wide scale) and a debate a part."""
        m = self.stream_minibatches
        if not m:
            return
        if self.max_steps_off_policy:
            raise ValueError(
                "config key stream_minibatches streams on-policy batches only: "
                f"set max_steps_off_policy = 0 (got {self.max_steps_off_policy}) or stream_minibatches = 0"
            )
        if self.turn_groups == "round_agent" and self.group_size > 1:
            raise ValueError(
                "config key stream_minibatches needs advantages computed within each debate; turn_groups = "
                "'round_agent' compares the turns of a question's group_size debates, which a part may split"
            )
        if isinstance(estimator, kernel.RAEOptions) or estimator.scale in ("batch", "whiten"):
            raise ValueError(
                f"config key stream_minibatches needs advantages computed within each debate; estimator "
                f"{self.estimator!r} uses statistics of the whole batch (RAE baselines or a batch scale), "
                "which a part of the batch does not have"
            )
        parts, debates = self.num_substeps * m, self.batch_size * self.group_size
        if debates < parts:
            raise ValueError(
                f"config key stream_minibatches = {m} with num_substeps = {self.num_substeps} cuts a batch "
                f"into {parts} parts, more than its {debates} debates (batch_size × group_size)"
            )

    def learning_rate_at(self, step: int) -> float:
        """The learning rate of step ``step``: a warm-start step takes ``warm_start_learning_rate`` (or
        ``learning_rate``), decaying linearly to ``warm_start_lr_decay`` times it at the last warm-start
        step; RL steps take ``learning_rate``.

        Examples:
            >>> c = TrainConfig(warm_start_steps=3, warm_start_learning_rate=1e-3, warm_start_lr_decay=0.5)
            >>> [c.learning_rate_at(s) for s in range(4)] == [1e-3, 7.5e-4, 5e-4, c.learning_rate]
            True
        """
        if step >= self.warm_start_steps:
            return self.learning_rate
        lr = self.warm_start_learning_rate or self.learning_rate
        if self.warm_start_steps > 1:
            lr *= 1.0 - (1.0 - self.warm_start_lr_decay) * step / (self.warm_start_steps - 1)
        return lr

    def for_dataset(self, num_questions: int) -> TrainConfig:
        """This config for a dataset of ``num_questions``: with ``num_epochs`` set, ``steps`` becomes the
        batches of that many epochs (itself otherwise).

        Examples:
            >>> TrainConfig(num_epochs=2, batch_size=16).for_dataset(64).steps
            8
            >>> TrainConfig(steps=3).for_dataset(64).steps
            3
        """
        if self.num_epochs == 0:
            return self
        from adapters.training.dataset import epoch_steps

        return dataclasses.replace(self, steps=epoch_steps(self.num_epochs, num_questions, self.batch_size))

    @property
    def total_steps(self) -> int:
        """Warm-start steps plus RL steps: the length of the step counter (and of metrics.jsonl)."""
        return self.warm_start_steps + self.steps

    @property
    def rollout_config(self) -> RolloutConfig:
        """The rollout settings of a run (its training debates and its evaluations alike)."""
        from adapters.training.rollouts import RolloutConfig  # the Tinker SDK: only where a run needs it

        return RolloutConfig(
            num_agents=self.num_agents,
            max_rounds=self.max_rounds,
            observation=self.observation_config,
            parse_policy=self.parse_policy,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            max_concurrent=self.max_concurrent_debates,
            sample_timeout=self.call_deadlines["sample"],
        )

    @property
    def call_deadlines(self) -> dict[str, float | None]:
        """Seconds per attempt of every kind of service call (None: no deadline): the defaults under
        ``deadlines`` under a nonzero ``sample_timeout_s``."""
        merged: dict[str, float] = {**DEFAULT_DEADLINES, **self.deadlines}
        if self.sample_timeout_s:
            merged["sample"] = self.sample_timeout_s
        return {kind: seconds or None for kind, seconds in merged.items()}

    @property
    def observation_config(self) -> kernel.ObservationConfig:
        """The kernel observation config: the named preset with ``history_rounds`` applied."""
        base = kernel.OBSERVATION_PRESETS[self.observation]
        return dataclasses.replace(base, history_rounds=self.history_rounds)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Every valid key, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, base: TrainConfig | None = None) -> TrainConfig:
        """A config from ``values`` over ``base`` (default: the defaults); ``-`` in keys reads as ``_``.

        Raises:
          ValueError: an unknown key (naming it and listing the valid ones) or a bad value.
          TypeError: a value of the wrong type, naming the key.
        """
        valid = cls.keys()
        clean: dict[str, Any] = {}
        for raw, value in values.items():
            key = str(raw).replace("-", "_")
            if key not in valid:
                hint = did_you_mean(key, valid)
                raise ValueError(f"unknown config key {raw!r}{hint}; valid keys: {', '.join(valid)}")
            clean[key] = value
        return dataclasses.replace(base or cls(), **clean)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (every key)."""
        return {
            f.name: (dict(v) if isinstance(v := getattr(self, f.name), dict) else v) for f in fields(self)
        }


def load_config(
    path: str | Path, *, overrides: Mapping[str, Any] | None = None, base: TrainConfig | None = None
) -> TrainConfig:
    """Reads a TOML file of config keys (top level or a ``[train]`` table) over ``base`` (default: the
    defaults), then applies ``overrides``.

    A UTF-8 byte order mark at the file's start is skipped. Errors about the file's keys start with its
    path.

    Raises:
      ValueError: the file is not UTF-8 or not valid TOML (with its message), holds keys beside a
        ``[train]`` table, or a key is unknown or a value is bad.
      TypeError: a value of the wrong type.
      OSError: the file cannot be read.

    Examples:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = Path(tmp.name, "train.toml")
        >>> _ = path.write_text('[train]\\nsteps = 20\\nnum-agents = 3\\ndataset = "arithmetic"\\n')
        >>> c = load_config(path, overrides={"steps": 5})
        >>> c.steps, c.num_agents, c.dataset, c.max_rounds
        (5, 3, 'arithmetic', 3)
        >>> _ = path.write_text("stpes = 20\\n")
        >>> load_config(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: ...train.toml: unknown config key 'stpes' (did you mean 'steps'?); valid keys: model, ...
        >>> tmp.cleanup()
    """
    keys = _config_table(_read_toml(Path(path)), path)
    try:
        config = TrainConfig.from_mapping(keys, base=base)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{path}: {e}") from None
    return TrainConfig.from_mapping(overrides or {}, base=config)


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables (a UTF-8 byte order mark at its start is skipped).

    Raises:
      ValueError: the file is not UTF-8 text or not valid TOML, naming it.
      OSError: the file cannot be read (the message names it and why).
    """
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise type(e)(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None


def _config_table(data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The config keys of a TOML file: its top level, or its ``[train]`` table when it has one (then
    nothing may lie outside it).

    Raises:
      ValueError: keys or tables beside ``[train]``, named.
    """
    if not isinstance(data.get("train"), dict):
        return data
    others = [k for k in data if k != "train"]
    if not others:
        table: dict[str, Any] = data["train"]
        return table
    valid = TrainConfig.keys()
    unknown = [k for k in others if k.replace("-", "_") not in valid]
    if unknown:
        raise ValueError(
            f"{path}: unknown config key or table {unknown[0]!r}{did_you_mean(unknown[0], valid)} beside "
            "[train]; a config file holds config keys at its top level or in one [train] table"
        )
    verb = "lies" if len(others) == 1 else "lie"
    raise ValueError(
        f"{path}: {', '.join(others)} {verb} outside the [train] table: put every config key under [train] "
        "(a table as [train.NAME]), or drop the [train] header and keep every key at the top level"
    )


def key_help() -> dict[str, str]:
    """Every config key's description, from the ``Attributes`` section of :class:`TrainConfig`'s
    docstring (an entry naming several keys, ``a, b: …``, describes each), whitespace joined.

    Examples:
        >>> key_help()["steps"]
        'RL steps (optimizer steps on debate batches), after the warm-start steps.'
        >>> key_help()["beta1"]
        "Adam's other parameters."
    """
    doc = TrainConfig.__doc__ or ""
    section = doc.split("Attributes:", 1)[1]
    out: dict[str, str] = {}
    names: list[str] = []
    for line in section.splitlines():
        entry = line[6:] if line.startswith("      ") and not line.startswith("       ") else None
        if entry is not None and ": " in entry:
            head, text = entry.split(": ", 1)
            names = [n.strip() for n in head.split(",")]
            for name in names:
                out[name] = text.strip()
        elif line.strip() and names:
            for name in names:
                out[name] += " " + line.strip()
    return out


def _check_type(name: str, value: Any, hint: Any) -> None:
    """Checks a key's value against its annotation (an int is a number; a bool is neither).

    Raises:
      ValueError: a value outside a ``Literal``'s options.
      TypeError: a value of another type, naming the key and the type it must have.
    """
    origin = get_origin(hint)
    if origin is Literal:
        if value not in get_args(hint):
            options = ", ".join(repr(a) for a in get_args(hint))
            raise ValueError(f"config key {name} must be one of {options}, got {value!r}")
        return
    if origin is dict:
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and _is_kind(v, float) for k, v in value.items()
        ):
            raise TypeError(f"config key {name} must be a table of names to numbers, got {value!r}")
        return
    kinds = _kinds(hint)
    if not any(_is_kind(value, kind) for kind in kinds):
        raise TypeError(
            f"config key {name} must be {_type_name(kinds)}, got {type(value).__name__} {value!r}"
        )


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The types a plain or union annotation admits (``float | None`` → ``(float, NoneType)``)."""
    return get_args(hint) if get_origin(hint) is pytypes.UnionType else (hint,)


def _is_kind(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of ``kind``: ints count as floats; bools count only as bools."""
    if kind is type(None):
        return value is None
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _type_name(kinds: tuple[Any, ...]) -> str:
    """What a key must be, in words: ``a number``, ``a number (or left out)``."""
    names = {int: "an int", float: "a number", bool: "true or false", str: "a string"}
    text = " or ".join(names.get(k, getattr(k, "__name__", str(k))) for k in kinds if k is not type(None))
    return f"{text} (or left out)" if type(None) in kinds else text


def _finite(name: str, value: float) -> float:
    """A number key's value as a float.

    Raises:
      ValueError: NaN, an infinity, or an int too large for a float, naming the key.
    """
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"config key {name} must be a finite number, got {value}")
    return number


def _shipped_names() -> tuple[str, ...]:
    """The dataset names that read a shipped question set."""
    from adapters.training.dataset import SHIPPED

    return tuple(SHIPPED)
