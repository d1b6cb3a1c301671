"""Grouped advantages: per-row rewards plus group keys in, per-row advantages out.

One estimator, :func:`grouped_advantages`, covers the GRPO / RLOO family used by tinker-cookbook, verl,
DrMAS, legos and TRL. Every choice those anchors disagree on is an explicit keyword. For a group g whose
included samples are r₁ … rₙ, with μ_g = Σr / n and σ_g = √(Σ(r − μ_g)² / (n − ddof)):

====================  =====================================================================
keyword               effect
====================  =====================================================================
baseline="mean"       A = r − μ_g                                   (GRPO, Dr. GRPO, tinker)
baseline="leave_one_out"  A = r − (Σ_g r − r)/(n − 1) = n/(n − 1)·(r − μ_g)          (RLOO)
scale="none"          keep A                                         (Dr. GRPO, tinker)
scale="group"         A ← A / (σ_g + eps), σ_g = √max(var_g, var_floor); no division where
                      σ_g ≤ min_std                                  (GRPO, legos normalize)
scale="batch"         A ← A / (σ_B + eps), σ_B over every included sample, μ_g kept (TRL batch)
scale="whiten"        A ← (A − mean_B A) / (std_B A + eps)           (TRL RLOO normalize; the
                      zeros of constant groups move with the batch mean, as whitening does)
positive_only=True    A ← max(A, 0) after scaling                    (legos)
singleton             a group of one: "zero" → 0, "raw" → μ := 0, σ := 1 (A = r, or r/(1 + eps)
                      when scale="group"), "error" → ValueError
trajectory_ids        rows of one (group, trajectory) are first averaged into one sample; n
                      counts trajectories and each row gets its trajectory's advantage (DrMAS)
where / NaN rewards   rows with where=False or a non-finite reward are left out of every
                      statistic and get advantage 0; they are counted in the result
arithmetic            "exact" (ours) or the float32 operation order of a reference, below
====================  =====================================================================

Arithmetic. ``"exact"`` computes in float64 (returning the rewards' float dtype) with two-pass
variances, each group's sums taken in row order. A constant group's mean is its value exactly (copies
of a float32 value sum exactly in float64; other groups are checked with max = min), so its
deviations, σ and advantages are exactly 0. Neither the layout of the rows (equal contiguous blocks or
any) nor the fast paths taken change a bit of the result. The reference arithmetics reproduce what a
reference computed, float32 rounding artefacts included (a float32 mean of nine copies of 1.5270639
is one ulp off; divided by σ + 1e-6 that gives −0.1058 per row):

* ``"torch_loop"`` (tinker-cookbook, verl and DrMAS loops, verl RLOO loop): float32; a group's sum in
  the order of torch's CPU reduction kernel; σ from the float32 mean with float64 squares;
  RLOO as r·n/(n − 1) − μ·n/(n − 1).
* ``"torch_scatter"`` (verl vectorized GRPO / RLOO): float32 sums accumulated row by row;
  var = (Σr² − (Σr)²/n)/(n − 1) in float32; RLOO as (n·r − Σr)/(n − 1).
* ``"torch_view"`` (TRL): float32; torch reduction order; σ² = Σ(r − μ)²/n · n/(n − 1) in
  float32 (group and batch alike); RLOO as r − (Σr − r)/(n − 1).
* ``"python"`` (legos): float64 with plain left-to-right sums and σ = (Σa²/n) ** 0.5.

Square roots are correctly rounded; the vectorised float32 √ that verl's vectorized GRPO and TRL
used when the golden vectors were recorded rounded a few near-halfway roots (within 0.02 ulp of a
midpoint) one ulp low, so those outputs can differ by an ulp or two; everything else is bit-exact for
groups and batches below 32768 samples (beyond that torch splits a reduction across threads).

Presets (:data:`ADVANTAGE_PRESETS`, called by name with :func:`advantages_from_preset`) reproduce each
anchor. Defaults versus references:

* ``"default"`` centres only (A = r − μ_g, as Dr. GRPO and tinker-cookbook): dividing by σ_g up-weights
  groups whose rewards barely differ (Dr. GRPO's difficulty bias) and amplifies float noise in
  near-constant groups (the eps artefact above).
* A constant group gives exactly 0, not ±1 ulp (tinker) or a visible ±0.1 (verl ``norm``).
* A group of one gives 0: it has no baseline. verl / DrMAS return the raw reward there (an
  uncentred REINFORCE signal mixed into a centred batch), verl's RLOO loop too.
* NaN rewards and masked rows never enter the statistics of the others (a verl bug; TRL uses
  nanmean) and are counted in :class:`GroupedAdvantages`.
* Computation in float64, rounded once to the output dtype (float32 in, float32 out).

Examples:
  >>> grouped_advantages([1.0, 0.0, 0.5, 0.5, 2.0], [0, 0, 1, 1, 2], 3).advantages
  array([ 0.5, -0.5,  0. ,  0. ,  0. ])
  >>> advantages_from_preset("verl_grpo.norm", [1.0, 0.0, 0.7], [0, 0, 1], 2).advantages
  array([ 0.70710576, -0.70710576,  0.69999933], dtype=float32)
  >>> third = [1 / 3] * 7  # a constant group: float32 artefacts in the references, 0 in ours
  >>> advantages_from_preset("verl_grpo.norm", third, [0] * 7, 1).advantages[:2]
  array([0.0288729, 0.0288729], dtype=float32)
  >>> advantages_from_preset("tinker", third, [0] * 7, 1).advantages[:2]
  array([2.9802322e-08, 2.9802322e-08], dtype=float32)
  >>> grouped_advantages(third, [0] * 7, 1, scale="group").advantages[:2]
  array([0., 0.])

References:
  GRPO: Shao et al. 2024, arXiv:2402.03300. Dr. GRPO: Liu et al. 2025, arXiv:2503.20783. RLOO:
  Ahmadian et al. 2024, arXiv:2402.14740. tinker-cookbook ``rl/data_processing.compute_advantages``;
  verl ``trainer/ppo/core_algos.py``; DrMAS (langfengQ/DrMAS) ``compute_grpo_outcome_advantage``;
  legos ``core/credit.py`` ``GRPOCredit``; TRL ``GRPOTrainer`` / ``RLOOTrainer``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._checks import as_bool_array, as_float_array, as_int_array, check_group_ids, check_same_length

__all__ = [
    "ADVANTAGE_PRESETS",
    "AdvantageOptions",
    "GroupedAdvantages",
    "advantages_from_preset",
    "constant_group_keep_mask",
    "dense_group_ids",
    "grouped_advantages",
    "total_returns",
]

Baseline: TypeAlias = Literal["mean", "leave_one_out"]
Scale: TypeAlias = Literal["none", "group", "batch", "whiten"]
Singleton: TypeAlias = Literal["zero", "raw", "error"]
Arithmetic: TypeAlias = Literal["exact", "torch_loop", "torch_scatter", "torch_view", "python"]

_F32 = np.float32
_F64 = np.float64
FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]


class GroupedAdvantages(NamedTuple):
    """Per-row advantages and the group statistics behind them.

    Attributes:
      advantages: ``[N]`` float, the rewards' float dtype (float32 for the torch arithmetics); 0 on
        excluded and padding rows.
      group_mean: ``[P]`` μ_g over the group's included samples (0 for an empty group).
      group_std: ``[P]`` σ_g with the requested ddof, after ``var_floor`` (0 where n ≤ ddof).
      group_count: ``[P]`` int64, included samples (rows, or trajectories with ``trajectory_ids``).
      group_constant: ``[P]`` bool, the group's included samples are all equal (true for a group of
        one, false for an empty group).
      num_excluded: rows left out by ``where`` or a non-finite reward (padding rows not counted).
      num_nonfinite: of those, rows whose reward was NaN or ±inf (and ``where`` was true).
    """

    advantages: FloatArray
    group_mean: FloatArray
    group_std: FloatArray
    group_count: IntArray
    group_constant: BoolArray
    num_excluded: int
    num_nonfinite: int


@dataclass(frozen=True)
class AdvantageOptions:
    """The keyword options of :func:`grouped_advantages`, as one immutable value (a preset).

    ``grouped_advantages(r, ids, P, **asdict(options))`` runs it; see :func:`advantages_from_preset`.
    """

    baseline: Baseline = "mean"
    scale: Scale = "none"
    ddof: int = 1
    eps: float = 1e-6
    var_floor: float = 0.0
    min_std: float | None = None
    singleton: Singleton = "zero"
    positive_only: bool = False
    arithmetic: Arithmetic = "exact"


def _presets() -> Mapping[str, AdvantageOptions]:
    o = AdvantageOptions
    loop: Arithmetic = "torch_loop"
    verl_norm = o(scale="group", eps=1e-6, singleton="raw", arithmetic=loop)
    verl_nonorm = o(singleton="raw", arithmetic=loop)
    legos = o(scale="none", singleton="zero", arithmetic="python")
    legos_norm = o(scale="group", ddof=0, eps=0.0, min_std=1e-8, arithmetic="python")
    table = {
        "default": o(),
        "dr_grpo": o(),
        "tinker": o(arithmetic=loop),
        "verl_grpo.norm": verl_norm,
        "verl_grpo.nonorm": verl_nonorm,
        "verl_grpo_vectorized.norm": o(
            scale="group", eps=1e-6, var_floor=1e-6, singleton="raw", arithmetic="torch_scatter"
        ),
        "verl_grpo_vectorized.nonorm": o(singleton="raw", arithmetic="torch_scatter"),
        "drmas_grpo.norm_agent": verl_norm,
        "drmas_grpo.nonorm_agent": verl_nonorm,
        "drmas_grpo.norm_traj": verl_norm,
        "drmas_grpo.nonorm_traj": verl_nonorm,
        "legos_grpo": legos,
        "legos_grpo.positive_only": o(positive_only=True, arithmetic="python"),
        "legos_grpo.normalize": legos_norm,
        "legos_grpo.normalize.positive_only": o(
            scale="group", ddof=0, eps=0.0, min_std=1e-8, positive_only=True, arithmetic="python"
        ),
        "verl_rloo.loop": o(baseline="leave_one_out", singleton="raw", arithmetic=loop),
        "verl_rloo.vectorized": o(baseline="leave_one_out", arithmetic="torch_scatter"),
        "trl_grpo.group": o(scale="group", eps=1e-4, arithmetic="torch_view"),
        "trl_grpo.batch": o(scale="batch", eps=1e-4, arithmetic="torch_view"),
        "trl_grpo.none": o(arithmetic="torch_view"),
        "trl_rloo.plain": o(baseline="leave_one_out", arithmetic="torch_view"),
        "trl_rloo.normalize": o(baseline="leave_one_out", scale="whiten", eps=1e-4, arithmetic="torch_view"),
    }
    return MappingProxyType(table)


ADVANTAGE_PRESETS: Mapping[str, AdvantageOptions] = _presets()
"""Preset name → :class:`AdvantageOptions` (read-only).

``default`` / ``dr_grpo``: ours (centred, exact zeros, float64). ``tinker``: tinker-cookbook
``compute_advantages``. ``verl_grpo.{norm,nonorm}`` and ``verl_grpo_vectorized.{norm,nonorm}``: verl
GRPO with ``norm_adv_by_std_in_grpo`` on/off. ``drmas_grpo.{norm,nonorm}_{agent,traj}``: DrMAS; for
``agent`` pass group ids of (question, agent) pairs (``dense_group_ids(uid, agent)``), for ``traj``
pass question ids and ``trajectory_ids`` (DrMAS collects an agent group's rows trajectory by
trajectory: order rows that way to reproduce its float32 sums bit for bit). ``legos_grpo[.normalize]
[.positive_only]``: legos ``GRPOCredit``. ``verl_rloo.{loop,vectorized}``. ``trl_grpo.{group,batch,none}``
(TRL ``scale_rewards``) and ``trl_rloo.{plain,normalize}``; TRL's groups are equal contiguous blocks,
ours may be any group ids.
"""


def advantages_from_preset(
    name: str,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    trajectory_ids: npt.ArrayLike | None = None,
) -> GroupedAdvantages:
    """Runs :func:`grouped_advantages` with the options of preset ``name``.

    Args:
      name: a key of :data:`ADVANTAGE_PRESETS`.
      rewards, group_ids, num_groups, where, trajectory_ids: as in :func:`grouped_advantages`.

    Returns:
      The :class:`GroupedAdvantages` of that estimator.

    Raises:
      KeyError: ``name`` is not a preset (the message lists them).

    Examples:
      >>> advantages_from_preset("tinker", [1.0, 2.0, 4.0], [0, 0, 0], 1).advantages
      array([-1.3333333 , -0.33333325,  1.6666667 ], dtype=float32)
    """
    try:
        options = ADVANTAGE_PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown advantage preset {name!r}; known: {', '.join(ADVANTAGE_PRESETS)}") from None
    return grouped_advantages(
        rewards, group_ids, num_groups, where=where, trajectory_ids=trajectory_ids, **asdict(options)
    )


def grouped_advantages(
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    trajectory_ids: npt.ArrayLike | None = None,
    baseline: Baseline = "mean",
    scale: Scale = "none",
    ddof: int = 1,
    eps: float = 1e-6,
    var_floor: float = 0.0,
    min_std: float | None = None,
    singleton: Singleton = "zero",
    positive_only: bool = False,
    arithmetic: Arithmetic = "exact",
) -> GroupedAdvantages:
    """Group-relative advantages: A = (r − b_g) / s, for the GRPO / RLOO family.

    b_g is μ_g (``baseline="mean"``) or the leave-one-out mean (Σ_g r − r)/(n − 1); s is 1,
    σ_g + ε, or σ_B + ε (see the module docstring for every keyword). Defaults give A = r − μ_g with
    exact zeros for constant groups and groups of one.

    Args:
      rewards: ``[N]`` float (ints are read as float64; float32 stays float32).
      group_ids: ``[N]`` int in ``[0, num_groups]``; ``num_groups`` marks padding rows.
      num_groups: P, the static number of groups.
      where: ``[N]`` bool, rows to include (default all).
      trajectory_ids: ``[N]`` int; rows with equal (group id, trajectory id) are averaged into one
        sample first (DrMAS with ``group_by_agent_id=False``).
      baseline: ``"mean"`` or ``"leave_one_out"``.
      scale: ``"none"``, ``"group"``, ``"batch"`` or ``"whiten"``.
      ddof: delta degrees of freedom of σ (1: Bessel, as verl / TRL; 0: population, as legos).
      eps: added to σ in the denominator.
      var_floor: σ_g = √max(var_g, var_floor) (verl vectorized: 1e-6).
      min_std: groups with σ_g ≤ min_std are not divided (legos: 1e-8); None divides always.
      singleton: what a group of one sample gives: ``"zero"``, ``"raw"`` or ``"error"``.
      positive_only: clamp advantages at 0 after scaling.
      arithmetic: ``"exact"`` or a reference's float32 order (module docstring).

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      ValueError / TypeError: bad shapes, dtypes, ids out of range or unknown options; ValueError
        when ``singleton="error"`` and a group has exactly one included sample.

    References:
      Shao et al. 2024 (GRPO), Liu et al. 2025 (Dr. GRPO), Ahmadian et al. 2024 (RLOO).

    Examples:
      >>> out = grouped_advantages([1.0, 3.0, 2.0, 2.0, 9.0], [0, 0, 1, 1, 2], 3, scale="group")
      >>> out.advantages.round(6)
      array([-0.707106,  0.707106,  0.      ,  0.      ,  0.      ])
      >>> out.group_count, out.group_constant
      (array([2, 2, 1]), array([False,  True,  True]))
      >>> grouped_advantages([1.0, float("nan"), 3.0], [0, 0, 0], 1).advantages
      array([-1.,  0.,  1.])
    """
    num_groups = _check_num_groups(num_groups)
    r = as_float_array(rewards, "rewards")
    g = as_int_array(group_ids, "group_ids")
    check_same_length(rewards=r, group_ids=g)
    check_group_ids(g, num_groups)
    _check_options(baseline, scale, ddof, eps, var_floor, min_std, singleton, arithmetic)

    w = None if where is None else as_bool_array(where, "where")
    if w is not None:
        check_same_length(rewards=r, where=w)
    t = None if trajectory_ids is None else as_int_array(trajectory_ids, "trajectory_ids")
    if t is not None:
        check_same_length(rewards=r, trajectory_ids=t)

    # valid: rows that enter the statistics; None when that is every row (the fast path). The exact
    # arithmetic picks its group reductions first: their row counts tell whether padding is present.
    valid: BoolArray | None = None
    num_excluded = num_nonfinite = 0
    seg: _Segments | None = None
    if arithmetic == "exact" and t is None:
        seg = _segments(g, num_groups)
        all_live = seg.padding_rows() == 0
    else:
        all_live = g.size == 0 or int(g.max()) < num_groups
    if w is not None or not all_live or not bool(np.isfinite(r).all()):
        asked = g < num_groups if w is None else (g < num_groups) & w
        valid = asked & np.isfinite(r)
        num_nonfinite = int(np.count_nonzero(asked)) - int(np.count_nonzero(valid))
        num_excluded = int(np.count_nonzero(g < num_groups)) - int(np.count_nonzero(valid))

    if arithmetic == "exact":
        dtype: type[np.floating[Any]] = np.float32 if r.dtype == np.float32 else np.float64
        work: type[np.floating[Any]] = _F64
    else:
        dtype = _F64 if arithmetic == "python" else _F32
        work = dtype
    values: FloatArray = (r if valid is None else np.where(valid, r, 0.0)).astype(work, copy=False)

    h, sample_valid, sample_of_row = g, valid, None
    if t is not None:
        every = np.ones(r.shape[0], bool) if valid is None else valid
        sample_of_row, values, h = _trajectory_samples(values, g, t, every, num_groups, arithmetic)
        sample_valid = h < num_groups

    options = (baseline, scale, ddof, eps, var_floor, min_std, singleton)
    if arithmetic == "exact":
        a, mean, std, count, constant = _exact_core(
            values,
            sample_valid,
            _Scatter(h, num_groups + 1) if seg is None else seg,
            num_groups,
            *options,
            narrow=r.dtype == np.float32 and t is None,  # float32 samples: see _exact_core
            scratch=values is not r,  # ours to overwrite
        )
    else:
        a, mean, std, count, constant = _reference_core(
            values, sample_valid, h, num_groups, *options, arithmetic
        )
    if positive_only:
        a = np.maximum(a, 0.0)
    if sample_of_row is not None:
        a = a[sample_of_row]
    if valid is not None:
        a = np.where(valid, a, 0.0)
    return GroupedAdvantages(
        advantages=a.astype(dtype, copy=False),
        group_mean=mean.astype(dtype, copy=False),
        group_std=std.astype(dtype, copy=False),
        group_count=count,
        group_constant=constant,
        num_excluded=num_excluded,
        num_nonfinite=num_nonfinite,
    )


# ---------------------------------------------------------------------------------------------------
# Checks and shared steps


def _check_num_groups(num_groups: int) -> int:
    try:
        p = operator.index(num_groups)
    except TypeError:
        raise TypeError(f"num_groups must be an int, got {type(num_groups).__name__}") from None
    if p < 0:
        raise ValueError(f"num_groups must be >= 0, got {p}")
    return p


def _check_choice(name: str, value: object, allowed: object) -> None:
    choices = get_args(allowed)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _check_options(
    baseline: str,
    scale: str,
    ddof: int,
    eps: float,
    var_floor: float,
    min_std: float | None,
    singleton: str,
    arithmetic: str,
) -> None:
    _check_choice("baseline", baseline, Baseline)
    _check_choice("scale", scale, Scale)
    _check_choice("singleton", singleton, Singleton)
    _check_choice("arithmetic", arithmetic, Arithmetic)
    if isinstance(ddof, bool) or operator.index(ddof) < 0:
        raise ValueError(f"ddof must be a non-negative int, got {ddof!r}")
    for name, x in (("eps", eps), ("var_floor", var_floor), ("min_std", min_std)):
        if x is not None and not (math.isfinite(x) and x >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")


def _trajectory_samples(
    values: FloatArray,
    h: IntArray,
    t: IntArray,
    valid: BoolArray,
    num_groups: int,
    arithmetic: str,
) -> tuple[IntArray, FloatArray, IntArray]:
    """Averages the rows of each (group, trajectory) into one sample, in order of first appearance.

    Returns (sample index of each row, sample values, sample group ids); excluded rows point at a
    trailing sample of group ``num_groups``.
    """
    rows = np.flatnonzero(valid)
    pair64, num_samples = dense_group_ids(h[rows], t[rows])
    pair = pair64.astype(np.int64)
    sample_of_row = np.full(h.shape[0], num_samples, dtype=np.int64)
    sample_of_row[rows] = pair
    sample_group = np.full(num_samples + 1, num_groups, dtype=np.int64)
    sample_group[pair] = h[rows]
    means: FloatArray
    if arithmetic in ("torch_loop", "torch_view", "torch_scatter"):
        # torch.mean over each trajectory's rows, in row order.
        sums = _torch_segment_sums(values[rows], pair, num_samples)
        counts = np.bincount(pair, minlength=num_samples)
        means = np.asarray(sums / counts.astype(_F32), dtype=_F32)
    elif arithmetic == "python":
        sums64 = np.zeros(num_samples, _F64)
        np.add.at(sums64, pair, values[rows])
        means = sums64 / np.bincount(pair, minlength=num_samples)
    else:
        counts = np.bincount(pair, minlength=num_samples)
        means = np.bincount(pair, values[rows], minlength=num_samples) / np.maximum(counts, 1)
    sample_values = np.zeros(num_samples + 1, values.dtype)
    sample_values[:num_samples] = means
    return sample_of_row, sample_values, sample_group


# ---------------------------------------------------------------------------------------------------
# Exact arithmetic (ours)

_CoreResult: TypeAlias = tuple[FloatArray, FloatArray, FloatArray, IntArray, BoolArray]


def _exact_core(
    x: FloatArray,
    valid: BoolArray | None,
    seg: _Segments,
    p: int,
    baseline: str,
    scale: str,
    ddof: int,
    eps: float,
    var_floor: float,
    min_std: float | None,
    singleton: str,
    *,
    narrow: bool,
    scratch: bool,
) -> _CoreResult:
    """float64 estimator on samples ``x`` grouped by ``seg`` (group ``p``: padding; ``valid`` None:
    every sample is included, and none is padding). ``narrow``: ``x`` is known to hold float32 values;
    ``scratch``: ``x`` may be overwritten.

    Every advantage is (x − centre_g)·factor_g. On a constant group (all included samples equal) and
    on an empty one x − centre_g is exactly 0, so the advantage is exactly 0 with any finite factor_g;
    a group of one is constant, unless ``singleton="raw"`` (centre 0, factor 1 or 1/(1 + eps)).

    Constant groups are found without a max / min pass when every sample is a float32 value (checked
    unless ``narrow``) and there are fewer than 2²⁹ of them: each partial float64 sum of a constant
    group v, v, … is then k·v exactly (24 + 29 bits), so μ_g = n·v/n = v and every deviation is 0;
    and a group with two distinct float32 values has a deviation of at least 2⁻¹⁵¹, whose square does
    not underflow. So Σ(x − μ_g)² = 0 exactly when the group is constant. Other samples (float64
    rewards, trajectory means) compare the group's max and min, and take the max as μ_g.

    Memory: each new buffer costs page faults, so there are two row-sized float64 buffers (x, reused
    for c² and factor_g when it is ours, and c, which becomes A) and a few group-sized ones, each
    reused in place.
    """
    n = seg.count(valid)  # no padding sample is valid, so n[p] = 0
    nf = n.astype(_F64)  # float counts: mixed int/float ufuncs go through a slow casting loop
    scratch_p = np.maximum(nf, 1.0)
    mean = seg.sum(x)  # excluded x are 0; an empty group's mean stays 0
    mean /= scratch_p
    constant: BoolArray | None = None
    if not (x.shape[0] < 2**29 and (narrow or _all_float32(x))):
        hi, lo = seg.extremes(x, valid)
        constant = (hi == lo) & (n > 0)
        _assign(mean, constant, hi)  # a constant group's mean is its value, exactly
        del hi, lo
    _check_singletons(singleton, n[:p])
    ones = np.flatnonzero(n == 1) if singleton == "raw" else None
    if ones is not None:  # verl: μ := 0 for a group of one (the reported mean stays its value)
        kept = mean[ones]
        mean[ones] = 0.0
        c = seg.minus(x, mean)
        mean[ones] = kept
    else:
        c = seg.minus(x, mean)
    if valid is not None:
        np.copyto(c, 0.0, where=~valid)
    work = np.multiply(c, c, out=x if scratch and scale != "batch" else None)
    std = seg.sum(work)  # Σc², σ below
    if constant is None:
        constant = std == 0
        constant &= n > 0
        if ones is not None:
            constant[ones] = True
    if ones is not None:
        std[ones] = 0.0  # the other constant groups have Σc² = 0 exactly already
    few = n <= ddof  # no degree of freedom left: σ = 0
    np.maximum(np.subtract(nf, ddof, out=scratch_p), 1.0, out=scratch_p)
    std /= scratch_p
    if var_floor > 0:
        np.maximum(std, var_floor, out=std)
    np.sqrt(std, out=std)
    if var_floor > 0 or ddof > 1:  # else Σc² = 0 already where n ≤ ddof
        _assign(std, few, 0.0)
    if baseline == "mean" and scale != "group":
        a = c  # factor_g is 1, or 0 where c is exactly 0 already
    else:
        factor = scratch_p
        if baseline == "leave_one_out":  # n/(n − 1)
            np.maximum(np.subtract(nf, 1.0, out=factor), 1.0, out=factor)
            np.divide(nf, factor, out=factor)
        if scale == "group":
            denom = np.add(std, eps, out=nf)
            skip = denom <= 0  # not divided; nor is a constant group, so that its factor stays finite
            skip |= few
            skip |= constant
            if min_std is not None:
                skip |= std <= min_std
            _assign(denom, skip, 1.0)
            if baseline == "leave_one_out":
                factor /= denom
            else:
                np.divide(1.0, denom, out=factor)
        elif baseline != "leave_one_out":
            factor.fill(1.0)
        if ones is not None:
            factor[ones] = 1.0 / (1.0 + eps) if scale == "group" else 1.0
        a = seg.times(c, factor, work)
    if scale == "batch":
        _, sd = _mean_std64(x, valid, ddof)
        a = a / (sd + eps) if sd + eps > 0 else a
    elif scale == "whiten":
        mu, sd = _mean_std64(a, valid, ddof)
        a = (a - mu) / (sd + eps) if sd > 0 else np.zeros_like(a)
    return a, mean[:p], std[:p], n[:p], constant[:p]


def _assign(target: FloatArray, mask: BoolArray, value: float | FloatArray) -> None:
    """``target[mask] = value`` (``value[mask]`` for an array), through the indices: a masked copy
    branches on every element, which is slow for the sparse, random masks of groups."""
    rows = np.flatnonzero(mask)
    target[rows] = value if isinstance(value, float) else value[rows]


def _all_float32(x: FloatArray) -> bool:
    """Whether every value of ``x`` is exactly a float32 (no overflow, underflow or rounding)."""
    if x.dtype == np.float32:
        return True
    with np.errstate(over="ignore", under="ignore"):
        return bool(np.array_equal(x.astype(np.float32), x))


class _Scatter:
    """Group reductions for any layout of the group ids ``h`` (in ``[0, size)``): ``np.bincount``
    sums, which add each group's samples in row order starting from 0.0, and ``np.take`` gathers."""

    def __init__(self, h: IntArray, size: int) -> None:
        self.h, self.size = h, size
        self._counts: IntArray | None = None

    def padding_rows(self) -> int:
        return int(self._all_counts()[-1])

    def _all_counts(self) -> IntArray:
        if self._counts is None:
            self._counts = np.bincount(self.h, minlength=self.size)
        return self._counts

    def count(self, where: BoolArray | None) -> IntArray:
        if where is None:
            return self._all_counts()
        return np.bincount(self.h, weights=where, minlength=self.size).astype(np.int64)

    def sum(self, x: FloatArray) -> FloatArray:
        return np.asarray(np.bincount(self.h, weights=x, minlength=self.size), dtype=_F64)

    def extremes(self, x: FloatArray, where: BoolArray | None) -> tuple[FloatArray, FloatArray]:
        hi = np.full(self.size, -np.inf, _F64)
        lo = np.full(self.size, np.inf, _F64)
        np.maximum.at(hi, self.h, x if where is None else np.where(where, x, -np.inf))
        np.minimum.at(lo, self.h, x if where is None else np.where(where, x, np.inf))
        return hi, lo

    def minus(self, x: FloatArray, per_group: FloatArray) -> FloatArray:
        """x − v_g, a new array."""
        c = np.take(per_group, self.h)
        return np.subtract(x, c, out=c)

    def times(self, c: FloatArray, per_group: FloatArray, buffer: FloatArray) -> FloatArray:
        """c ← c·v_g in place (``buffer``: a row-sized scratch array)."""
        return np.multiply(c, np.take(per_group, self.h, out=buffer, mode="clip"), out=c)


class _Blocks:
    """The same reductions when group g is rows g·k … g·k + k − 1 for every g < p (equal contiguous
    blocks, the usual GRPO layout): sums added column by column (the same row order, from 0.0, so
    bit for bit those of :class:`_Scatter`), and broadcasting instead of gathers."""

    def __init__(self, p: int, k: int) -> None:
        self.p, self.k = p, k

    def _rows(self, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return x.reshape(self.p, self.k)

    def padding_rows(self) -> int:
        return 0

    def count(self, where: BoolArray | None) -> IntArray:
        n = np.zeros(self.p + 1, np.int64)
        n[: self.p] = self.k if where is None else np.count_nonzero(self._rows(where), axis=1)
        return n

    def sum(self, x: FloatArray) -> FloatArray:
        out = np.zeros(self.p + 1, _F64)
        total = out[: self.p]
        for column in self._rows(x).T:
            total += column
        return out

    def extremes(self, x: FloatArray, where: BoolArray | None) -> tuple[FloatArray, FloatArray]:
        rows, mask = self._rows(x), None if where is None else self._rows(where)
        hi = np.full(self.p + 1, -np.inf, _F64)
        lo = np.full(self.p + 1, np.inf, _F64)
        np.max(rows, axis=1, initial=-np.inf, where=True if mask is None else mask, out=hi[: self.p])
        np.min(rows, axis=1, initial=np.inf, where=True if mask is None else mask, out=lo[: self.p])
        return hi, lo

    def minus(self, x: FloatArray, per_group: FloatArray) -> FloatArray:
        c = np.repeat(per_group[: self.p], self.k)  # faster than broadcasting over rows of k
        return np.subtract(x, c, out=c)

    def times(self, c: FloatArray, per_group: FloatArray, buffer: FloatArray) -> FloatArray:
        del buffer
        return np.multiply(c, np.repeat(per_group[: self.p], self.k), out=c)


_Segments: TypeAlias = _Scatter | _Blocks
_MAX_BLOCK = 64  # longer blocks: a Python loop over columns would cost more than np.bincount


def _segments(h: IntArray, p: int) -> _Segments:
    """:class:`_Blocks` when the ids ``h`` are 0 … 0, 1 … 1, …, p − 1 … p − 1 in runs of an equal
    length k ≤ 64, else :class:`_Scatter`. (Non-decreasing ids whose block i starts and ends with i
    are i throughout block i.)"""
    n = h.shape[0]
    k = n // p if p else 0
    if 1 <= k <= _MAX_BLOCK and n == k * p and h[k * (p // 2)] == p // 2 and h[-1] == p - 1:
        ids = np.arange(p)
        if (
            np.array_equal(h[::k], ids)
            and np.array_equal(h[k - 1 :: k], ids)
            and bool(np.all(h[1:] >= h[:-1]))
        ):
            return _Blocks(p, k)
    return _Scatter(h, p + 1)


def _mean_std64(x: FloatArray, included: BoolArray | None, ddof: int) -> tuple[float, float]:
    """Two-pass mean and σ (ddof) of the included samples (None: all); σ = 0 when they are all equal."""
    xs = x if included is None else x[included]
    k = xs.shape[0]
    if k == 0:
        return 0.0, 0.0
    first = float(xs[0])
    d = xs - first
    if not d.any():
        return first, 0.0
    mu = first + float(d.sum()) / k
    c = xs - mu
    return mu, math.sqrt(float(np.dot(c, c)) / (k - ddof)) if k > ddof else 0.0


def _check_singletons(singleton: str, n: IntArray) -> None:
    if singleton == "error" and np.any(n == 1):
        groups = np.flatnonzero(n == 1)
        raise ValueError(f"singleton='error': groups {groups[:10].tolist()} have exactly one sample")


# ---------------------------------------------------------------------------------------------------
# Reference arithmetics (float32 operation orders of torch-based references, and legos' Python)


def _reference_core(
    x: FloatArray,
    valid: BoolArray | None,
    h: IntArray,
    p: int,
    baseline: str,
    scale: str,
    ddof: int,
    eps: float,
    var_floor: float,
    min_std: float | None,
    singleton: str,
    arithmetic: str,
) -> _CoreResult:
    """The estimator in a reference's dtype and operation order (see the module docstring)."""
    if valid is not None:
        h = np.where(valid, h, p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _reference_core_unguarded(
            x, h, p, baseline, scale, ddof, eps, var_floor, min_std, singleton, arithmetic
        )


def _reference_core_unguarded(
    x: FloatArray,
    h: IntArray,
    p: int,
    baseline: str,
    scale: str,
    ddof: int,
    eps: float,
    var_floor: float,
    min_std: float | None,
    singleton: str,
    arithmetic: str,
) -> _CoreResult:
    dt = _F64 if arithmetic == "python" else _F32
    x = x.astype(dt, copy=False)
    n = np.bincount(h, minlength=p + 1)
    included = h < p
    nf: FloatArray = n.astype(dt)
    s: FloatArray
    if arithmetic == "python" or arithmetic == "torch_scatter":
        s = np.zeros(p + 1, dt)
        np.add.at(s, h, x)  # left to right, row by row
    else:
        s = _torch_segment_sums(x, h, p + 1)
    mu: FloatArray = s / np.maximum(nf, dt(1))
    mu[p] = 0
    if baseline == "leave_one_out":
        a = _loo(x, h, s, mu, nf, arithmetic)
    else:
        a = x - mu[h]
    std = _reference_group_std(x, h, p, mu, s, n, ddof, var_floor, arithmetic)
    if scale == "group":
        denom = std + dt(eps)
        if min_std is None:
            a = a / denom[h]
        else:
            a = np.where((std > min_std)[h], a / denom[h], a)
    single = (n == 1)[h]
    _check_singletons(singleton, n[:p])
    if singleton == "raw":
        # verl: μ := 0, σ := 1 for a group of one.
        raw = x / (dt(1) + dt(eps)) if scale == "group" else x
        a = np.where(single, raw, a)
    else:
        a = np.where(single, dt(0), a)
    a = a.astype(dt, copy=False)
    if scale == "batch":
        a = a / (_reference_batch_std(x, included, ddof, arithmetic) + dt(eps))
    elif scale == "whiten":
        mu_a = _reference_batch_mean(a, included, arithmetic)
        sd_a = _reference_batch_std(a, included, ddof, arithmetic)
        a = (a - mu_a) / (sd_a + dt(eps))
    xi = x[included]
    constant = np.zeros(p + 1, bool)
    if xi.size:
        hi = h[included]
        lo_v = np.full(p + 1, np.inf, dt)
        hi_v = np.full(p + 1, -np.inf, dt)
        np.minimum.at(lo_v, hi, xi)
        np.maximum.at(hi_v, hi, xi)
        constant = (lo_v == hi_v) & (n > 0)
    mean = np.where(n > 0, mu, dt(0))
    return a.astype(dt, copy=False), mean[:p], std[:p], n[:p].astype(np.int64), constant[:p]


def _loo(x: FloatArray, h: IntArray, s: FloatArray, mu: FloatArray, nf: FloatArray, arithmetic: str) -> Any:
    """Leave-one-out advantage in each reference's own formula (equal in exact arithmetic)."""
    dt = x.dtype.type
    n_row = nf[h]
    m1 = np.maximum(n_row - dt(1), dt(1))
    if arithmetic == "torch_loop":  # r·n/(n − 1) − μ·n/(n − 1)
        return (x * n_row) / m1 - (mu[h] * n_row) / m1
    if arithmetic == "torch_scatter":  # (n·r − Σr)/(n − 1)
        return (n_row * x - s[h]) / m1
    return x - (s[h] - x) / m1  # r − (Σr − r)/(n − 1)


def _reference_group_std(
    x: FloatArray,
    h: IntArray,
    p: int,
    mu: FloatArray,
    s: FloatArray,
    n: IntArray,
    ddof: int,
    var_floor: float,
    arithmetic: str,
) -> Any:
    dt = x.dtype.type
    dof = n - ddof
    if arithmetic == "torch_scatter":
        # var = (Σr² − (Σr)²/n)/max(n − ddof, 1), all in float32, then floored.
        s2 = np.zeros(p + 1, dt)
        np.add.at(s2, h, x * x)
        nf = np.maximum(n.astype(dt), dt(1))
        var = (s2 - (s * s) / nf) / np.maximum(dof, 1).astype(dt)
        return np.where(n > 1, np.sqrt(np.maximum(var, dt(var_floor))), dt(0))
    if arithmetic == "torch_view":
        # TRL: v = Σ(r − μ)²/n in float32 (torch order), v ← v·(n/(n − ddof)), σ = √v in float32.
        dev = x - mu[h]
        nf = n.astype(dt)
        v = _torch_segment_sums(dev * dev, h, p + 1) / np.maximum(nf, dt(1))
        v = v * (nf / np.maximum(dof, 1).astype(dt))
        return np.where(dof > 0, np.sqrt(np.maximum(v, dt(var_floor))), dt(0))
    # Two passes: float64 squares around the (float32, for torch) mean, summed row by row.
    dev64 = x.astype(_F64) - mu.astype(_F64)[h]
    m2 = np.zeros(p + 1, _F64)
    np.add.at(m2, h, dev64 * dev64)
    var64 = np.maximum(m2 / np.maximum(dof, 1), var_floor)
    if arithmetic == "python":
        root = np.array([math.pow(v, 0.5) for v in var64.tolist()], _F64)
    else:
        root = np.sqrt(var64)
    return np.where(dof > 0, root, 0.0).astype(dt)


def _reference_batch_mean(x: FloatArray, included: BoolArray, arithmetic: str) -> Any:
    dt = x.dtype.type
    xs = x[included]
    if xs.size == 0:
        return dt(0)
    if arithmetic == "python":
        total = 0.0
        for v in xs.tolist():
            total += v
        return _F64(total / xs.size)
    return _torch_sum_rows(xs[None, :])[0] / dt(xs.size)


def _reference_batch_std(x: FloatArray, included: BoolArray, ddof: int, arithmetic: str) -> Any:
    """σ of every included sample as the reference takes it (0 below ddof + 1 samples).

    TRL (``torch_view``): the float32 two-pass of its group σ. torch ``Tensor.std()``: float32 mean,
    float64 squares summed in order, √ in float64. ``python``: float64 throughout.
    """
    dt = x.dtype.type
    xs = x[included]
    k = xs.shape[0]
    if k <= ddof:
        return dt(0)
    mu = _reference_batch_mean(x, included, arithmetic)
    if arithmetic == "torch_view":
        dev = xs - mu
        v = _torch_sum_rows((dev * dev)[None, :])[0] / dt(k)
        return np.sqrt(v * (dt(k) / dt(k - ddof)))
    dev64 = xs.astype(_F64) - _F64(mu)
    m2 = 0.0
    for sq in (dev64 * dev64).tolist():
        m2 += sq
    var = m2 / (k - ddof)
    return dt(math.pow(var, 0.5) if arithmetic == "python" else math.sqrt(var))


def _torch_segment_sums(x: FloatArray, h: IntArray, size: int) -> FloatArray:
    """float32 sum of each group's samples (in sample order) as torch's CPU ``sum`` orders it."""
    out = np.zeros(size, _F32)
    order = np.argsort(h, kind="stable")
    counts = np.bincount(h, minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    for k in np.unique(counts[counts > 0]):
        groups = np.flatnonzero(counts == k)
        rows = order[starts[groups][:, None] + np.arange(k)]
        out[groups] = _torch_sum_rows(x[rows].astype(_F32))
    return out


_TORCH_LANES = 8  # float32 lanes of torch's vectorised CPU sum (256-bit kernel)
_TORCH_ILP = 4  # independent accumulators of torch's ``row_sum``


def _torch_sum_rows(x_mk: FloatArray) -> Any:
    """float32 sum of each row of ``x_mk`` in the order of torch's CPU reduction kernel.

    Rows shorter than the vector width are summed as 4 interleaved accumulators (the remainder added
    to the first), then combined; longer rows run the same scheme over 8-lane vectors, then add the
    scalar tail and the 8 lanes left to right. Accumulators of long rows are flushed in a cascade of
    levels every 16 steps.
    """
    m, k = x_mk.shape
    x_mk = x_mk.astype(_F32, copy=False)
    if k < _TORCH_LANES:
        return _ilp_sum([x_mk[:, j] for j in range(k)], (m,))
    num_vec = k // _TORCH_LANES
    vectors = [x_mk[:, _TORCH_LANES * i : _TORCH_LANES * (i + 1)] for i in range(num_vec)]
    lanes = _ilp_sum(vectors, (m, _TORCH_LANES))
    total: FloatArray = np.zeros(m, _F32)
    for j in range(num_vec * _TORCH_LANES, k):
        total = total + x_mk[:, j]
    for lane in range(_TORCH_LANES):
        total = total + lanes[:, lane]
    return total


def _ilp_sum(items: Sequence[FloatArray], shape: tuple[int, ...]) -> FloatArray:
    """torch ``row_sum``: items read as rows of 4, summed per column by a cascade, then folded."""
    full = len(items) // _TORCH_ILP
    acc: list[FloatArray] = [np.zeros(shape, _F32) for _ in range(_TORCH_ILP)]
    if full:
        acc = _cascade_sum([items[_TORCH_ILP * i : _TORCH_ILP * (i + 1)] for i in range(full)], shape)
    for j in range(full * _TORCH_ILP, len(items)):
        acc[0] = acc[0] + items[j]
    total = acc[0]
    for j in range(1, _TORCH_ILP):
        total = total + acc[j]
    return total


def _cascade_sum(steps: Sequence[Sequence[FloatArray]], shape: tuple[int, ...]) -> list[FloatArray]:
    """torch ``multi_row_sum``: 4 levels of accumulators; level 0 is pushed up every 2^power steps."""
    levels = 4
    size = len(steps)
    power = max(4, (math.ceil(math.log2(size)) if size > 1 else 0) // levels)
    step, mask = 1 << power, (1 << power) - 1
    acc: list[list[FloatArray]] = [[np.zeros(shape, _F32) for _ in range(_TORCH_ILP)] for _ in range(levels)]
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = [a + b for a, b in zip(acc[0], steps[i], strict=True)]
            i += 1
        for lvl in range(1, levels):
            acc[lvl] = [a + b for a, b in zip(acc[lvl], acc[lvl - 1], strict=True)]
            acc[lvl - 1] = [np.zeros(shape, _F32) for _ in range(_TORCH_ILP)]
            if i & (mask << (lvl * power)):
                break
    while i < size:
        acc[0] = [a + b for a, b in zip(acc[0], steps[i], strict=True)]
        i += 1
    for lvl in range(1, levels):
        acc[0] = [a + b for a, b in zip(acc[0], acc[lvl], strict=True)]
    return acc[0]


# ---------------------------------------------------------------------------------------------------
# Keys, returns, filtering


def dense_group_ids(*keys: npt.ArrayLike | Sequence[Hashable]) -> tuple[npt.NDArray[np.int32], int]:
    """Dense int32 group ids of the distinct key tuples, numbered in order of first appearance.

    id_i = rank of (k¹_i, k²_i, …) among the distinct tuples, by first row where it occurs.

    Args:
      *keys: one or more ``[N]`` arrays or sequences of hashables (str, int, …): question id, agent
        id, episode type, hierarchy level… A row's group is the tuple of its keys.

    Returns:
      ``(group_ids [N] int32, num_groups)``.

    Raises:
      ValueError: no keys, a key that is not one-dimensional, or keys of different lengths.

    Examples:
      >>> dense_group_ids(["q7", "q7", "q2", "q7"], ["a", "b", "a", "a"])
      (array([0, 1, 2, 0], dtype=int32), 3)
    """
    if not keys:
        raise ValueError("dense_group_ids needs at least one key array")
    codes = [_dense_codes(k, f"keys[{i}]") for i, k in enumerate(keys)]
    check_same_length(**{f"keys[{i}]": c for i, c in enumerate(codes)})
    combined = codes[0]
    for c in codes[1:]:
        width = int(c.max()) + 1 if c.size else 1
        combined, _ = _first_appearance(combined * width + c)
    ids, count = _first_appearance(combined)
    return ids.astype(np.int32), count


def _dense_codes(key: Any, name: str) -> IntArray:
    """Codes of one key array in first-appearance order (numpy fast path, else a dict over values)."""
    if isinstance(key, (list, tuple)):
        arr = np.empty(len(key), dtype=object)
        arr[:] = list(key)
    else:
        arr = np.asarray(key)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "biufUS":
        return _first_appearance(arr)[0]
    lookup: dict[Hashable, int] = {}
    return np.fromiter((lookup.setdefault(v, len(lookup)) for v in arr), np.int64, arr.shape[0])


def _first_appearance(arr: npt.NDArray[Any]) -> tuple[IntArray, int]:
    if arr.size == 0:
        return np.zeros(0, np.int64), 0
    _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)], int(first.shape[0])


def total_returns(
    step_rewards: npt.ArrayLike,
    step_episode_ids: npt.ArrayLike,
    num_episodes: int,
    final_rewards: npt.ArrayLike,
    *,
    where: npt.ArrayLike | None = None,
) -> FloatArray:
    """Episode returns: the sum of an episode's per-step rewards plus its final reward.

    R_e = Σ_{t : episode(t) = e} r_t + R_final,e (e.g. −1 parse penalties plus the pairwise reward).

    Args:
      step_rewards: ``[T]`` float, one per step.
      step_episode_ids: ``[T]`` int in ``[0, num_episodes]``; ``num_episodes`` marks padding steps.
      num_episodes: E.
      final_rewards: ``[E]`` float.
      where: ``[T]`` bool, steps to count (default all).

    Returns:
      ``[E]`` float in the wider of the two input dtypes. A NaN step or final reward makes that
      episode's return NaN (which :func:`grouped_advantages` then excludes).

    Raises:
      ValueError / TypeError: bad shapes, dtypes or ids.

    Examples:
      >>> total_returns([-1.0, 0.0, -1.0], [0, 0, 1], 2, [0.5, 1.0])
      array([-0.5,  0. ])
    """
    e = _check_num_groups(num_episodes)
    r = as_float_array(step_rewards, "step_rewards")
    ids = as_int_array(step_episode_ids, "step_episode_ids")
    final = as_float_array(final_rewards, "final_rewards")
    check_same_length(step_rewards=r, step_episode_ids=ids)
    check_group_ids(ids, e, "step_episode_ids")
    if final.shape[0] != e:
        raise ValueError(f"final_rewards must have length num_episodes={e}, got {final.shape[0]}")
    if where is not None:
        w = as_bool_array(where, "where")
        check_same_length(step_rewards=r, where=w)
        ids = np.where(w, ids, e)
    steps = np.zeros(e + 1, _F64)
    np.add.at(steps, ids, r.astype(_F64))
    out = steps[:e] + final
    return out.astype(np.result_type(r.dtype, final.dtype), copy=False)


def constant_group_keep_mask(
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    atol: float = 0.0,
    keep_one_if_all_constant: bool = False,
) -> BoolArray:
    """Rows to keep after dropping constant-reward groups (they carry no GRPO gradient).

    keep_i = where_i ∧ finite(r_i) ∧ (max_g r − min_g r > atol), g = group of row i.

    Args:
      rewards: ``[N]`` float.
      group_ids: ``[N]`` int in ``[0, num_groups]`` (``num_groups`` = padding, never kept).
      num_groups: P.
      where: ``[N]`` bool, rows to consider (default all); others are never kept.
      atol: groups whose included rewards span at most ``atol`` count as constant.
      keep_one_if_all_constant: when every group is constant, keep the lowest-id non-empty group
        rather than nothing (tinker-cookbook ``remove_constant_reward_groups``).

    Returns:
      ``[N]`` bool. A group of one is constant.

    Raises:
      ValueError / TypeError: bad shapes, dtypes or ids.

    Examples:
      >>> constant_group_keep_mask([1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1], 2)
      array([False, False,  True,  True])
      >>> constant_group_keep_mask([1.0, 1.0, 2.0], [0, 0, 1], 2, keep_one_if_all_constant=True)
      array([ True,  True, False])
    """
    p = _check_num_groups(num_groups)
    r = as_float_array(rewards, "rewards")
    g = as_int_array(group_ids, "group_ids")
    check_same_length(rewards=r, group_ids=g)
    check_group_ids(g, p)
    if not (math.isfinite(atol) and atol >= 0):
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    valid = (g < p) & np.isfinite(r)
    if where is not None:
        w = as_bool_array(where, "where")
        check_same_length(rewards=r, where=w)
        valid &= w
    h = np.where(valid, g, p)
    lo = np.full(p + 1, np.inf)
    hi = np.full(p + 1, -np.inf)
    np.minimum.at(lo, h, np.where(valid, r, np.inf))
    np.maximum.at(hi, h, np.where(valid, r, -np.inf))
    varying = (hi - lo) > atol  # inf - inf is nan for empty groups: not varying
    keep: BoolArray = valid & varying[h]
    if keep_one_if_all_constant and not keep.any() and valid.any():
        keep = valid & (h == h[valid].min())
    return keep
