"""verl bridge: the kernel's grouped-advantage estimators in verl's registry, and a debate reward.

Tested against verl 0.9.1 on the CPU (``pip install "debate-kernel[verl]"``).

**Estimators.** :func:`register_estimators` adds one entry per preset of :data:`kernel.ADVANTAGE_PRESETS`
to verl's ``ADV_ESTIMATOR_REGISTRY`` under ``"debate_kernel.<preset>"``, so a verl config names it::

    algorithm.adv_estimator=debate_kernel.default      # A = r − μ per uid, exact zeros, masked rows out

verl calls a registered estimator with ``token_level_rewards [B, L]``, ``response_mask [B, L]`` and
``index`` (the ``uid`` column). A row's score is Σ_t reward·mask (verl: Σ_t reward); the group is its
uid. Rows whose response mask is all zero, or whose score is not finite, are left out of every group
statistic and get advantage 0 (verl's own GRPO lets them into the mean and σ). Advantages and returns
come back as ``A[:, None] · response_mask`` in the rewards' dtype, as verl's outcome estimators return
them. The ``verl_grpo.*`` / ``verl_rloo.*`` presets reproduce verl's own estimators on live rows.

**DrMAS grouping.** verl hands an estimator only ``uid``. DrMAS groups by ``uid`` + ``agent_id``
(``group_by_agent_id=True``: each agent its own baseline, every row a sample) or, with the flag off, by
``uid`` after averaging the rows of each trajectory (``traj_uid``) into one sample.
:func:`compute_advantages` reads those columns from a ``DataProto`` and writes ``advantages`` and
``returns``: call it in the advantage step of your trainer, where DrMAS's fork calls its own.

**Reward.** :func:`compute_score` has the form of verl's batch reward manager
(``reward_model.reward_manager=batch``, ``custom_reward_function.path=<this file>``,
``custom_reward_function.name=compute_score``): each response is one agent's turn of a debate, its
``extra_info`` names the debate (``debate_id``), the agent (``agent_id``) and the agent count
(``num_agents``); the score is the leave-one-out pairwise reward plus optional correctness and format
terms (:mod:`adapters.bridges.scoring`).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from typing import Any

import numpy as np
import numpy.typing as npt

import kernel
from adapters.answers import is_correct
from adapters.bridges._estimators import drmas_grouping, estimator_spec
from adapters.bridges.scoring import score_rows, warn_shared_agents
from kernel import PairwiseMode, ParsePolicy
from kernel.checks import check_bool, check_real

__all__ = [
    "ESTIMATOR_PREFIX",
    "compute_advantages",
    "compute_score",
    "estimator_fn",
    "register_estimators",
]

ESTIMATOR_PREFIX = "debate_kernel."
"""Prefix of the names :func:`register_estimators` gives in verl's registry."""


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            f'adapters.bridges.verl needs {module.split(".")[0]!r}: pip install "debate-kernel[verl]" ({err})'
        ) from err


def _scores(token_level_rewards: Any, response_mask: Any) -> tuple[Any, npt.NDArray[np.bool_]]:
    """``(scores [B] tensor, live [B] bool)``: masked reward sums (Σ reward over the mask's positions;
    what lies outside the mask, a NaN included, never enters), and rows that enter group statistics.

    The sums are in the rewards' dtype (as verl computes them), except integer rewards (which would
    truncate) and bfloat16 ones (which numpy cannot read): those are summed in float32.
    """
    torch = _require("torch")
    for name, value in (("token_level_rewards", token_level_rewards), ("response_mask", response_mask)):
        if not isinstance(value, torch.Tensor):
            kind = type(value).__name__
            raise TypeError(f"{name} must be a torch.Tensor [batch, response_length], got {kind}")
    if token_level_rewards.ndim != 2 or tuple(token_level_rewards.shape) != tuple(response_mask.shape):
        raise ValueError(
            "token_level_rewards and response_mask must both be [batch, response_length], got "
            f"{tuple(token_level_rewards.shape)} and {tuple(response_mask.shape)}"
        )
    rewards = token_level_rewards
    if not rewards.is_floating_point() or rewards.dtype == torch.bfloat16:
        rewards = rewards.to(torch.float32)
    inside = response_mask.to(torch.bool)
    weighted = rewards * response_mask.to(rewards.dtype)
    zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
    scores = torch.where(inside, weighted, zero).sum(dim=-1)
    answered = inside.detach().cpu().numpy().any(axis=-1)
    finite = np.isfinite(scores.detach().cpu().numpy())
    if not finite[answered].all():
        rows = np.flatnonzero(answered & ~finite)
        warnings.warn(
            f"{rows.size} rows have a score that is not finite (rows {rows[:10].tolist()}; a float16 sum "
            "beyond 65504 is inf): they are left out of their groups and get advantage 0",
            RuntimeWarning,
            stacklevel=4,
        )
    return scores, answered & finite


def _keys(values: Any, name: str = "index") -> list[Hashable]:
    """A key column as a list of Python values: a tensor or array gives its elements' values, and so does
    each element that is a 0-d tensor or a numpy scalar (a 0-d tensor hashes by identity, so every row
    would be a group of its own).

    Raises:
      TypeError: a column of more than one dimension, or an element that is an array, naming ``name``.
    """
    if getattr(values, "ndim", 1) != 1:
        raise TypeError(f"{name} must be one key per row (one-dimensional), got shape {tuple(values.shape)}")
    if isinstance(values, Mapping | Set):  # iterating would give its keys, in no row order
        raise TypeError(f"{name} must be a sequence of one key per row, got {type(values).__name__}")
    out: list[Hashable] = []
    for k, v in enumerate(values.tolist() if hasattr(values, "tolist") else values):
        if hasattr(v, "ndim"):
            if v.ndim != 0:
                raise TypeError(f"{name}[{k}] must be one key, got an array of shape {tuple(v.shape)}")
            v = v.item()
        out.append(_hashable(v, f"{name}[{k}]"))
    return out


def _advantage_tensors(
    token_level_rewards: Any,
    response_mask: Any,
    keys: Sequence[Sequence[Hashable]],
    options: dict[str, Any],
    trajectory_keys: Sequence[Hashable] | None = None,
) -> tuple[Any, Any]:
    torch = _require("torch")
    scores, live = _scores(token_level_rewards, response_mask)
    batch = int(scores.shape[0])
    for name, key in zip(("index", "agent ids"), keys, strict=False):
        if len(key) != batch:
            raise ValueError(f"{name} has {len(key)} entries for a batch of {batch} rows")
    group_ids, num_groups = (
        kernel.dense_group_ids(*[_keys(k, name) for k, name in zip(keys, ("uid", "agent_id"), strict=False)])
        if batch
        else (np.zeros(0, np.int32), 0)
    )
    trajectory_ids = None
    if trajectory_keys is not None:
        if len(trajectory_keys) != batch:
            raise ValueError(f"traj_uid has {len(trajectory_keys)} entries for a batch of {batch} rows")
        trajectory_ids, _ = kernel.dense_group_ids(_keys(trajectory_keys, "traj_uid"))
    values = scores.detach().cpu().numpy()
    result = kernel.grouped_advantages(
        values,
        group_ids,
        num_groups,
        where=live,
        trajectory_ids_PG=trajectory_ids,
        **options,
    )
    # in the rewards' dtype when it is a float (verl's), else float32: integer advantages would truncate
    dtype = token_level_rewards.dtype if token_level_rewards.is_floating_point() else torch.float32
    adv = torch.from_numpy(np.asarray(result.advantages, dtype=values.dtype)).to(token_level_rewards.device)
    out = adv.to(dtype).unsqueeze(-1) * response_mask.to(dtype)
    return out, out.clone()


def estimator_fn(estimator: str | kernel.AdvantageOptions) -> Callable[..., tuple[Any, Any]]:
    """A function with verl's advantage-estimator signature that runs ``estimator`` grouped by ``index``.

    Args:
      estimator: a preset spec (``NAME`` or ``NAME,key=value,…``, as ``score --estimator``) or
        :class:`kernel.AdvantageOptions`.

    Returns:
      ``fn(token_level_rewards, response_mask, index, config=None, **unused) -> (advantages, returns)``,
      both ``[B, L]`` tensors.

    Raises:
      ValueError: an unknown preset or option, a value the kernel refuses, or a DrMAS preset that groups
        by agent or trajectory (verl passes only ``uid``: use :func:`compute_advantages`). (Called:
        mismatched shapes or index length.)
      TypeError: ``estimator`` of another type.

    Examples:
      Three responses of two tokens, scores summed over the tokens (rows 0 and 1 share a uid; row 2 is
      alone, and the default estimator gives a group of one 0):

      >>> import torch
      >>> fn = estimator_fn("default")
      >>> rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [2.0, 0.0]])
      >>> advantages, returns = fn(rewards, torch.ones(3, 2), index=np.array(["a", "a", "b"], dtype=object))
      >>> advantages.tolist()
      [[0.5, 0.5], [-0.5, -0.5], [0.0, 0.0]]
    """
    preset, options = estimator_spec(estimator)
    if drmas_grouping(preset) is not None:
        raise ValueError(
            f"{preset} groups by agent or trajectory, which verl's estimator call cannot pass (it gives only "
            "uid): call adapters.bridges.verl.compute_advantages in the advantage step instead"
        )

    def debate_kernel_estimator(
        token_level_rewards: Any, response_mask: Any, index: Any = None, config: Any = None, **_unused: Any
    ) -> tuple[Any, Any]:
        if index is None:
            raise ValueError("a debate_kernel estimator needs index (the uid column) to group rows")
        return _advantage_tensors(token_level_rewards, response_mask, [_keys(index)], options)

    debate_kernel_estimator.__doc__ = f"debate-kernel grouped advantages ({estimator!r}), grouped by uid."
    return debate_kernel_estimator


_REGISTERED: dict[str, Callable[..., tuple[Any, Any]]] = {}


def register_estimators(presets: Sequence[str] | None = None) -> tuple[str, ...]:
    """Registers kernel presets in verl's advantage-estimator registry as ``debate_kernel.<preset>``.

    Idempotent: calling it again registers nothing twice (verl refuses a second, different function
    under one name).

    Args:
      presets: preset names (default: every preset that groups by ``uid`` alone: all but the DrMAS
        ``*_agent`` / ``*_traj`` ones, which need :func:`compute_advantages`).

    Returns:
      The registered names.

    Raises:
      ValueError: an unknown preset or option, or a DrMAS preset that groups by agent or trajectory.
      TypeError: ``presets`` is a single string rather than a sequence of names.

    Examples:
      >>> from verl.trainer.ppo import core_algos
      >>> register_estimators(["default", "verl_grpo.norm"])
      ('debate_kernel.default', 'debate_kernel.verl_grpo.norm')
      >>> core_algos.get_adv_estimator_fn("debate_kernel.default").__name__
      'debate_kernel_estimator'
    """
    if isinstance(presets, str):
        raise TypeError(f"presets must be a sequence of preset names, got the string {presets!r}")
    core_algos = _require("verl.trainer.ppo.core_algos")
    names = []
    if presets is None:
        presets = [p for p in kernel.ADVANTAGE_PRESETS if drmas_grouping(p) is None]
    for preset in presets:
        name = ESTIMATOR_PREFIX + preset
        if name not in _REGISTERED:
            _REGISTERED[name] = estimator_fn(preset)
        core_algos.register_adv_est(name)(_REGISTERED[name])
        names.append(name)
    return tuple(names)


def compute_advantages(
    data: Any,
    estimator: str | kernel.AdvantageOptions = "default",
    *,
    group_by_agent_id: bool | None = None,
    uid_key: str = "uid",
    agent_key: str = "agent_id",
    trajectory_key: str = "traj_uid",
) -> Any:
    """Writes ``advantages`` and ``returns`` into a verl ``DataProto``, with DrMAS's grouping.

    ``group_by_agent_id=None``: groups are ``uid`` (plain verl). ``True``: groups are (``uid``,
    ``agent_id``), each row one sample (DrMAS default). ``False``: groups are ``uid`` and the rows of one
    ``traj_uid`` are averaged into one sample, each row getting its trajectory's advantage (DrMAS with
    the flag off). A DrMAS preset brings its own grouping (``drmas_grpo.*_agent``: True, ``*_traj``:
    False); a flag that contradicts it is an error. Masked rows and non-finite scores stay out of the
    statistics, as in the registry path (non-finite scores with a warning).

    Args:
      data: a ``verl.DataProto`` with ``token_level_rewards`` (and ``response_mask``, or what verl
        derives it from) in ``batch`` and the key columns in ``non_tensor_batch``.
      estimator: a preset spec (``NAME[,key=value…]``) or :class:`kernel.AdvantageOptions`.
      group_by_agent_id: as above: a bool or None (default: the preset's grouping, else ``uid``).
      uid_key, agent_key, trajectory_key: column names.

    Returns:
      ``data``, with ``batch["advantages"]`` and ``batch["returns"]`` set ([B, L]).

    Raises:
      KeyError: a column the chosen grouping needs is missing (the message names it).
      ValueError: an unknown preset; shapes that disagree; ``group_by_agent_id`` contradicting a DrMAS
        preset.
      TypeError: ``group_by_agent_id`` neither a bool nor None; ``data`` not a DataProto with tensors.

    Examples:
      One question, two agents, two responses each; grouped by (``uid``, ``agent_id``), agent 0's
      scores 1 and 2 centre to −0.5 and 0.5, agent 1's equal scores to 0:

      >>> import torch
      >>> from verl import DataProto
      >>> data = DataProto.from_dict(
      ...     tensors={"token_level_rewards": torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 2.0], [0.0, 0.0]]),
      ...              "response_mask": torch.ones(4, 2)},
      ...     non_tensors={"uid": np.array(["q1"] * 4, dtype=object),
      ...                  "agent_id": np.array([0, 1, 0, 1], dtype=object)})
      >>> compute_advantages(data, "default", group_by_agent_id=True).batch["advantages"].tolist()
      [[-0.5, -0.5], [0.0, 0.0], [0.5, 0.5], [0.0, 0.0]]
    """
    preset, options = estimator_spec(estimator)
    if group_by_agent_id is not None:
        group_by_agent_id = check_bool(group_by_agent_id, "group_by_agent_id")
    implied = drmas_grouping(preset)
    if implied is not None:
        if group_by_agent_id not in (None, implied):
            raise ValueError(
                f"{preset} groups by {'uid and agent_id' if implied else 'uid over traj_uid means'}: "
                f"group_by_agent_id must be {implied} or None, got {group_by_agent_id}"
            )
        group_by_agent_id = implied
    if not (hasattr(data, "batch") and hasattr(data, "non_tensor_batch")):
        raise TypeError(
            f"data must be a verl DataProto (with batch and non_tensor_batch), got {type(data).__name__}"
        )
    if data.batch is None:
        raise TypeError("data.batch is None: the DataProto holds no tensors (token_level_rewards is needed)")
    if "response_mask" not in data.batch.keys():
        data.batch["response_mask"] = _require("verl.trainer.ppo.ray_trainer").compute_response_mask(data)
    columns = data.non_tensor_batch

    def column(name: str) -> list[Hashable]:
        if name not in columns:
            raise KeyError(f"DataProto.non_tensor_batch has no {name!r} column (needed for this grouping)")
        return list(columns[name])

    keys = [column(uid_key)] + ([column(agent_key)] if group_by_agent_id else [])
    trajectories = column(trajectory_key) if group_by_agent_id is False else None
    adv, ret = _advantage_tensors(
        data.batch["token_level_rewards"], data.batch["response_mask"], keys, options, trajectories
    )
    data.batch["advantages"] = adv
    data.batch["returns"] = ret
    return data


def compute_score(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None],
    *,
    policy: ParsePolicy = "robust",
    mode: PairwiseMode = "win_rate",
    unvoted: float = 0.0,
    correctness_weight: float = 0.0,
    format_weight: float = 0.0,
) -> list[dict[str, float]]:
    """verl batch-reward function: each response is one agent's turn; the score is its debate reward.

    score = pairwise + correctness_weight·correct + format_weight·(parse_ok − 1), where ``pairwise`` is
    the agent's leave-one-out reward from the other rows of its debate (REFERENCE §2) and ``correct``
    compares the ``<solution>`` with ``ground_truth`` (exact rational or normalised text; a list of
    answers: any of them). verl passes ``custom_reward_function.reward_kwargs`` as keywords: a name this
    function does not take is a TypeError, so a misspelt weight does not silently turn its term off.

    Rows of one debate that name the same agent (verl's ``rollout.n > 1`` repeats a prompt, and with it
    its ``extra_info``) get the same pairwise reward, so that term cannot tell them apart within a uid
    group: a RuntimeWarning says so; only the correctness and format terms then rank them.

    Args:
      data_sources: U data-source names (unused; verl passes them).
      solution_strs: U decoded responses.
      ground_truths: U reference answers (None or "" for none; a list, tuple or array: any of them).
      extra_infos: U mappings with ``debate_id`` (any hashable), ``agent_id`` (int) and ``num_agents``
        (int; default: the number of rows of the debate).
      policy, mode, unvoted: as :func:`adapters.bridges.scoring.score_rows`.
      correctness_weight, format_weight: weights of the extra terms (default 0: pairwise only).

    Returns:
      U dicts with ``score`` and its parts (``pairwise``, ``parse_ok``, ``consensus``, ``correct``); verl
      puts ``score`` on the last response token and logs the rest.

    Raises:
      KeyError: an ``extra_info`` without ``debate_id`` or ``agent_id`` (naming the row).
      ValueError / TypeError: as :func:`adapters.bridges.scoring.score_rows`; a weight that is not a
        finite number.

    Examples:
      One debate of three agents; the answer is 4. Agent 0 wins its one judged comparison and is right
      (1 + 1); agent 1 wins but answers 5; agent 2's output does not parse:

      >>> tags = ("<solution>{}</solution><evaluation>e</evaluation><comparison>{}</comparison>"
      ...         "<consensus>NO</consensus><consensus_reason>r</consensus_reason>")
      >>> out = compute_score(
      ...     ["math"] * 3,
      ...     [tags.format(4, "Agent 1 > Agent 2"), tags.format(5, "Agent 0 > Agent 2"), "no tags"],
      ...     ["4", "4", "4"],
      ...     [{"debate_id": "d1", "agent_id": i} for i in range(3)],
      ...     correctness_weight=1.0)
      >>> [row["score"] for row in out], out[1]["correct"], out[2]["parse_ok"]
      ([2.0, 1.0, 0.0], 0.0, 0.0)
    """
    correctness_weight = check_real(correctness_weight, "correctness_weight", finite=True)
    format_weight = check_real(format_weight, "format_weight", finite=True)
    n = len(solution_strs)
    if len(extra_infos) != n or len(ground_truths) != n:
        raise ValueError(
            f"solution_strs, ground_truths and extra_infos differ in length: {n}, "
            f"{len(ground_truths)}, {len(extra_infos)}"
        )
    keys: list[Hashable] = []
    agents: list[int] = []
    for r, info in enumerate(extra_infos):
        missing = [f for f in ("debate_id", "agent_id") if info is None or f not in info]
        if info is None or missing:
            raise KeyError(
                f"extra_infos[{r}] has no {missing[0]!r}: each response must name its debate and agent"
            )
        keys.append(_hashable(info["debate_id"], f"extra_infos[{r}]['debate_id']"))
        agents.append(info["agent_id"])
    sizes: dict[Hashable, int] = {}
    for key in keys:
        sizes[key] = sizes.get(key, 0) + 1
    counts = [info.get("num_agents", sizes[key]) for info, key in zip(extra_infos, keys, strict=True)]  # type: ignore[union-attr]
    scored = score_rows(
        list(solution_strs),
        debate_keys=keys,
        agent_ids=agents,
        num_agents=counts,
        policy=policy,
        mode=mode,
        unvoted=unvoted,
    )
    warn_shared_agents(scored.debate_ids_U, agents, stacklevel=3)
    out = []
    for r in range(n):
        correct = _correct(scored.parsed_U[r].solution, ground_truths[r])
        ok = bool(scored.parse_ok_U[r])
        pairwise = float(scored.pairwise_U[r])
        score = pairwise + correctness_weight * correct + format_weight * (float(ok) - 1.0)
        out.append(
            {
                "score": score,
                "pairwise": pairwise,
                "parse_ok": float(ok),
                "consensus": float(scored.consensus_U[r]),
                "correct": float(correct),
            }
        )
    return out


def _correct(solution: str, answer: Any) -> bool:
    """Whether ``solution`` matches ``answer``, or any answer of a list, tuple or array of them."""
    answers = answer.tolist() if isinstance(answer, np.ndarray) else answer
    if not isinstance(answers, list | tuple):
        answers = [answers]
    return any(a not in (None, "") and is_correct(solution, str(a)) for a in answers)


def _hashable(key: Any, name: str) -> Hashable:
    out: Hashable = key.item() if isinstance(key, np.generic) else key
    try:
        hash(out)
    except TypeError:
        raise TypeError(f"{name} must be a hashable key, got {type(key).__name__} {key!r}") from None
    return out
