"""Grouped advantages: per-row rewards plus group keys in, per-row advantages out.

One estimator, :func:`grouped_advantages`, covers the GRPO / RLOO family used by tinker-cookbook, verl,
DrMAS, legos and TRL. Every choice those anchors disagree on is an explicit keyword (one
:class:`AdvantageOptions` value; :data:`ADVANTAGE_PRESETS` names one per anchor). Group keys, episode
returns and constant-group filtering live in :mod:`kernel._groups`. For a group g whose
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
trajectory_ids_PG     rows of one (group, trajectory) are first averaged into one sample; n
                      counts trajectories and each row gets its trajectory's advantage (DrMAS)
where / NaN rewards   rows with where=False or a non-finite reward are left out of every
                      statistic and get advantage 0; they are counted in the result
arithmetic            "exact" (ours) or the float32 operation order of a reference, below
====================  =====================================================================

Arithmetic. ``"exact"`` (:mod:`kernel._advantages_exact`) computes in float64 (returning the rewards'
float dtype) with two-pass variances, each group's sums taken in row order. A constant group's mean is
its value exactly, so its deviations, σ and advantages are exactly 0. Neither the layout of the rows
nor the fast paths taken change a bit of the result. The reference arithmetics
(:mod:`kernel._advantages_reference`, with torch's summation order in :mod:`kernel._torch_sums`)
reproduce what a reference computed, float32 rounding artefacts included (a float32 mean of nine
copies of 1.5270639 is one ulp off; divided by σ + 1e-6 that gives −0.1058 per row):
``"torch_loop"`` (tinker-cookbook, verl and DrMAS loops, verl RLOO loop), ``"torch_scatter"`` (verl
vectorized GRPO / RLOO), ``"torch_view"`` (TRL) and ``"python"`` (legos). Square roots are correctly
rounded; the vectorised float32 √ that verl's vectorized GRPO and TRL used when the golden vectors were
recorded rounded a few near-halfway roots one ulp low, so those outputs can differ by an ulp or two;
everything else is bit-exact for groups and batches below 32768 samples.

Range. From finite rewards ``"exact"`` returns finite advantages at every magnitude, float64 up to
±1.8e308 and subnormals included: where squares could overflow or underflow, each group is scaled
by a power of two before its statistics are taken (exact, so ordinary inputs are unaffected). An
advantage that does not fit the output dtype (|r − μ_g| beyond its largest finite value, possible
with ``scale="none"``) is returned as ±that value, and one whose nonzero value rounds to 0 at an
extreme magnitude stays 0; both are counted in ``num_out_of_range``. The reference arithmetics keep
their reference's overflow (±inf or NaN, counted the same way).

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

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from kernel._advantages_exact import Blocks, Scatter, Segments, exact_core, rescaled_core, segments
from kernel._advantages_reference import reference_core
from kernel._checks import (
    as_bool_array,
    as_float_array,
    as_int_array,
    check_bool,
    check_group_ids,
    check_same_length,
)
from kernel._groups import check_nonnegative, check_num_groups, dense_group_ids
from kernel._torch_sums import torch_segment_sums

__all__ = [
    "ADVANTAGE_PRESETS",
    "AdvantageOptions",
    "GroupedAdvantages",
    "advantages_from_preset",
    "grouped_advantages",
]

Baseline: TypeAlias = Literal["mean", "leave_one_out"]
Scale: TypeAlias = Literal["none", "group", "batch", "whiten"]
Singleton: TypeAlias = Literal["zero", "raw", "error"]
Arithmetic: TypeAlias = Literal["exact", "torch_loop", "torch_scatter", "torch_view", "python"]

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]


class GroupedAdvantages(NamedTuple):
    """Per-row advantages and the group statistics behind them.

    Attributes:
      advantages: ``[PG]`` float, the rewards' float dtype (float32 for the torch arithmetics); 0 on
        excluded and padding rows.
      group_mean: ``[P]`` μ_g over the group's included samples (0 for an empty group).
      group_std: ``[P]`` σ_g with the requested ddof, after ``var_floor`` (0 where n ≤ ddof; the
        dtype's largest finite value where σ_g is beyond it).
      group_count: ``[P]`` int64, included samples (rows, or trajectories with ``trajectory_ids_PG``).
      group_constant: ``[P]`` bool, the group's included samples are all equal (true for a group of
        one, false for an empty group).
      num_excluded: rows left out by ``where`` or a non-finite reward (padding rows not counted).
      num_nonfinite: of those, rows whose reward was NaN or ±inf (and ``where`` was true).
      num_out_of_range: included rows whose advantage does not fit the output dtype (module
        docstring, "Range"): returned as ±its largest finite value, or as 0 for a nonzero value too
        small to represent.
    """

    advantages: FloatArray
    group_mean: FloatArray
    group_std: FloatArray
    group_count: IntArray
    group_constant: BoolArray
    num_excluded: int
    num_nonfinite: int
    num_out_of_range: int


@dataclass(frozen=True)
class AdvantageOptions:
    """The keyword options of :func:`grouped_advantages`, as one immutable, validated value (a preset).

    ``grouped_advantages(r, ids, P, **asdict(options))`` runs it; see :func:`advantages_from_preset`.
    Every field is checked on construction (see :func:`grouped_advantages` for their meaning).

    Raises:
      TypeError: a field of the wrong type (``eps="x"``, ``ddof=1.5``), naming the field.
      ValueError: a value outside its set or range, naming the field and what it accepts.

    Examples:
      >>> AdvantageOptions(scale="group", eps=1e-4).scale
      'group'
      >>> AdvantageOptions(ddof=1.5)
      Traceback (most recent call last):
      ...
      TypeError: ddof must be an int >= 0, got float 1.5
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

    def __post_init__(self) -> None:
        _check_choice("baseline", self.baseline, Baseline)
        _check_choice("scale", self.scale, Scale)
        _check_choice("singleton", self.singleton, Singleton)
        _check_choice("arithmetic", self.arithmetic, Arithmetic)
        if not isinstance(self.ddof, numbers.Integral) or isinstance(self.ddof, bool):
            raise TypeError(f"ddof must be an int >= 0, got {type(self.ddof).__name__} {self.ddof!r}")
        if self.ddof < 0:
            raise ValueError(f"ddof must be an int >= 0, got {self.ddof!r}")
        check_nonnegative(self.eps, "eps")
        check_nonnegative(self.var_floor, "var_floor")
        if self.min_std is not None:
            check_nonnegative(self.min_std, "min_std", optional=True)
        check_bool(self.positive_only, "positive_only")

    @classmethod
    def from_spec(cls, spec: str) -> AdvantageOptions:
        """The options a spec names: ``NAME``, ``NAME,key=value,...`` or ``key=value,...`` over
        :data:`ADVANTAGE_PRESETS` and these fields (:func:`kernel.read_estimator_spec`, which also reads
        ``rae``). Read once, where a user typed it; inside, the value travels.

        Raises:
          ValueError: an unknown preset or option, a value of the wrong type or refused here, or ``rae``.

        Examples:
          >>> AdvantageOptions.from_spec("verl_grpo.norm,eps=1e-4") == AdvantageOptions(
          ...     scale="group", eps=1e-4, singleton="raw", arithmetic="torch_loop")
          True
          >>> AdvantageOptions.from_spec("eps=-1")
          Traceback (most recent call last):
          ...
          ValueError: eps must be a finite number >= 0, got -1.0
        """
        from kernel._estimator_spec import read_estimator_spec

        name, options = read_estimator_spec(spec)
        if not isinstance(options, cls):
            raise ValueError(
                f"estimator {name!r} is not grouped advantages (read it with read_estimator_spec)"
            )
        return options

    def to_spec(self) -> str:
        """The spec that reads back to these options (:func:`kernel.estimator_spec`): a preset's name, or
        ``default`` with the fields that differ.

        Examples:
          >>> AdvantageOptions().to_spec(), AdvantageOptions(scale="group").to_spec()
          ('default', 'default,scale=group')
        """
        from kernel._estimator_spec import estimator_spec

        return estimator_spec(self)


def _check_choice(name: str, value: object, allowed: object) -> None:
    choices = get_args(allowed)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _presets() -> Mapping[str, AdvantageOptions]:
    o = AdvantageOptions
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
pass question ids and ``trajectory_ids_PG`` (DrMAS collects an agent group's rows trajectory by
trajectory: order rows that way to reproduce its float32 sums bit for bit). ``legos_grpo[.normalize]
[.positive_only]``: legos ``GRPOCredit``. ``verl_rloo.{loop,vectorized}``. ``trl_grpo.{group,batch,none}``
(TRL ``scale_rewards``) and ``trl_rloo.{plain,normalize}``; TRL's groups are equal contiguous blocks,
ours may be any group ids.
"""


def preset_options(name: str) -> AdvantageOptions:
    """The options of preset ``name``; KeyError listing the presets otherwise."""
    try:
        return ADVANTAGE_PRESETS[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown advantage preset {name!r}; known: {', '.join(ADVANTAGE_PRESETS)}") from None


def advantages_from_preset(
    name: str,
    rewards_PG: npt.ArrayLike,
    group_ids_PG: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    trajectory_ids_PG: npt.ArrayLike | None = None,
) -> GroupedAdvantages:
    """Runs :func:`grouped_advantages` with the options of preset ``name``.

    Args:
      name: a key of :data:`ADVANTAGE_PRESETS`.
      rewards_PG: ``[PG]`` float, as in :func:`grouped_advantages`.
      group_ids_PG: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool, rows to include (default all).
      trajectory_ids_PG: ``[PG]`` int, as in :func:`grouped_advantages`.

    Returns:
      The :class:`GroupedAdvantages` of that estimator.

    Raises:
      KeyError: ``name`` is not a preset (the message lists them).
      ValueError / TypeError: as :func:`grouped_advantages`.

    Examples:
      >>> advantages_from_preset("tinker", [1.0, 2.0, 4.0], [0, 0, 0], 1).advantages
      array([-1.3333333 , -0.33333325,  1.6666667 ], dtype=float32)
    """
    return _estimate(rewards_PG, group_ids_PG, num_groups, where, trajectory_ids_PG, preset_options(name))


def grouped_advantages(
    rewards_PG: npt.ArrayLike,
    group_ids_PG: npt.ArrayLike,
    num_groups: int,
    *,
    where: npt.ArrayLike | None = None,
    trajectory_ids_PG: npt.ArrayLike | None = None,
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
      rewards_PG: ``[PG]`` float, one per row (ints are read as float64; float32 stays float32).
      group_ids_PG: ``[PG]`` int in ``[0, num_groups]``; ``num_groups`` marks padding rows. Rows may
        come in any order.
      num_groups: P, the static number of groups.
      where: ``[PG]`` bool, rows to include (default all).
      trajectory_ids_PG: ``[PG]`` int; rows with equal (group id, trajectory id) are averaged into one
        sample first (DrMAS with ``group_by_agent_id=False``).
      baseline: ``"mean"`` or ``"leave_one_out"``.
      scale: ``"none"``, ``"group"``, ``"batch"`` or ``"whiten"``.
      ddof: int >= 0, delta degrees of freedom of σ (1: Bessel, as verl / TRL; 0: population, as legos).
      eps: finite number >= 0 added to σ in the denominator.
      var_floor: finite number >= 0; σ_g = √max(var_g, var_floor) (verl vectorized: 1e-6).
      min_std: finite number >= 0 or None; groups with σ_g ≤ min_std are not divided (legos: 1e-8);
        None divides always.
      singleton: what a group of one sample gives: ``"zero"``, ``"raw"`` or ``"error"``.
      positive_only: clamp advantages at 0 after scaling.
      arithmetic: ``"exact"`` or a reference's float32 order (module docstring).

    Returns:
      :class:`GroupedAdvantages`.

    Raises:
      ValueError / TypeError: bad shapes, dtypes, ids out of range, or an option of the wrong type or
        value (the message names it and what it accepts); ValueError when ``singleton="error"`` and a
        group has exactly one included sample.

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
      >>> out = grouped_advantages([1.7e308, -1.7e308, -1.7e308], [0, 0, 0], 1)  # r − μ beyond float64
      >>> out.advantages, out.num_out_of_range
      (array([ 1.79769313e+308, -1.13333333e+308, -1.13333333e+308]), 1)
    """
    options = AdvantageOptions(
        baseline=baseline,
        scale=scale,
        ddof=ddof,
        eps=eps,
        var_floor=var_floor,
        min_std=min_std,
        singleton=singleton,
        positive_only=positive_only,
        arithmetic=arithmetic,
    )
    return _estimate(rewards_PG, group_ids_PG, num_groups, where, trajectory_ids_PG, options)


def _estimate(
    rewards_PG: npt.ArrayLike,
    group_ids_PG: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None,
    trajectory_ids_PG: npt.ArrayLike | None,
    options: AdvantageOptions,
) -> GroupedAdvantages:
    """:func:`grouped_advantages` with its options as one validated value."""
    num_groups = check_num_groups(num_groups)
    r = as_float_array(rewards_PG, "rewards_PG")
    g = group_ids_PG
    if not (isinstance(g, np.ndarray) and g.dtype == np.int32 and g.ndim == 1):  # int32: kept, below
        g = as_int_array(group_ids_PG, "group_ids_PG")
    check_same_length(rewards_PG=r, group_ids_PG=g)
    w = None if where is None else as_bool_array(where, "where")
    if w is not None:
        check_same_length(rewards_PG=r, where=w)
    t = None if trajectory_ids_PG is None else as_int_array(trajectory_ids_PG, "trajectory_ids_PG")
    if t is not None:
        check_same_length(rewards_PG=r, trajectory_ids_PG=t)
    exact = options.arithmetic == "exact"

    # valid: rows that enter the statistics; None when that is every row (the fast path). The exact
    # arithmetic picks its group reductions first: their row counts tell whether padding is present.
    valid: BoolArray | None = None
    num_excluded = num_nonfinite = 0
    seg: Segments | None = segments(g, num_groups) if exact and t is None else None
    if not isinstance(seg, Blocks):  # blocks hold every id in [0, num_groups) by construction
        check_group_ids(g, num_groups, "group_ids_PG")
        if g.dtype != np.int64:  # one cast, not one per np.bincount / np.take
            g = g.astype(np.int64)
            seg = None if seg is None else Scatter(g, num_groups + 1)
    if seg is not None:
        all_live = seg.padding_rows() == 0
    else:
        all_live = g.size == 0 or int(g.max()) < num_groups
    if w is not None or not all_live or not bool(np.isfinite(r).all()):
        asked = g < num_groups if w is None else (g < num_groups) & w
        valid = asked & np.isfinite(r)
        num_nonfinite = int(np.count_nonzero(asked)) - int(np.count_nonzero(valid))
        num_excluded = int(np.count_nonzero(g < num_groups)) - int(np.count_nonzero(valid))

    dtype: type[np.floating[Any]]
    if exact:
        dtype = np.float32 if r.dtype == np.float32 else np.float64
    else:
        dtype = np.float64 if options.arithmetic == "python" else np.float32
    work = np.float64 if exact else dtype

    def samples(
        convert: bool = True,
    ) -> tuple[FloatArray, IntArray, BoolArray | None, IntArray | None]:
        values: FloatArray = r if valid is None else np.where(valid, r, 0.0)
        if convert or t is not None:  # else exact_core converts (or transposes) them itself
            values = values.astype(work, copy=False)
        if t is None:
            return values, g, valid, None
        every = np.ones(r.shape[0], bool) if valid is None else valid
        sample_of_row, values, h = _trajectory_samples(values, g, t, every, num_groups, options.arithmetic)
        return values, h, h < num_groups, sample_of_row

    values, h, sample_valid, sample_of_row = samples(convert=not exact)
    if not exact:
        core = reference_core(values, sample_valid, h, num_groups, options)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow makes it decline, below
            fast = exact_core(
                values,
                sample_valid,
                Scatter(h, num_groups + 1) if seg is None else seg,
                num_groups,
                options,
                narrow=r.dtype == np.float32 and t is None,  # float32 samples: see exact_core
                scratch=values is not r,  # ours to overwrite
                dtype=dtype,
            )
        if fast is None:  # extreme magnitudes: the fast path may have overwritten the samples
            values, h, sample_valid, sample_of_row = samples()
            fast = rescaled_core(values, sample_valid, h, num_groups, options, dtype)
        core = fast
    a = core.advantages_PG
    if options.positive_only:
        a = np.maximum(a, 0.0)
    out_of_range = core.out_of_range_PG
    if sample_of_row is not None:
        a = a[sample_of_row]
        out_of_range = None if out_of_range is None else out_of_range[sample_of_row]
    if valid is not None:
        a = np.where(valid, a, 0.0)
        out_of_range = None if out_of_range is None else out_of_range & valid
    return GroupedAdvantages(
        advantages=a.astype(dtype, copy=False),
        group_mean=core.mean_P.astype(dtype, copy=False),
        group_std=core.std_P.astype(dtype, copy=False),
        group_count=core.count_P.astype(np.int64, copy=False),
        group_constant=core.constant_P,
        num_excluded=num_excluded,
        num_nonfinite=num_nonfinite,
        num_out_of_range=0 if out_of_range is None else int(np.count_nonzero(out_of_range)),
    )


def _trajectory_samples(
    values: FloatArray,
    h: IntArray,
    t: IntArray,
    valid: BoolArray,
    num_groups: int,
    arithmetic: Arithmetic,
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
        sums = torch_segment_sums(values[rows], pair, num_samples)
        counts = np.bincount(pair, minlength=num_samples)
        means = np.asarray(sums / counts.astype(np.float32), dtype=np.float32)
    elif arithmetic == "python":
        sums64 = np.zeros(num_samples, np.float64)
        np.add.at(sums64, pair, values[rows])
        means = sums64 / np.bincount(pair, minlength=num_samples)
    else:
        sizes = np.maximum(np.bincount(pair, minlength=num_samples), 1)
        top = float(np.abs(values[rows]).max(initial=0.0))
        shift = 0 if top < 2.0**1000 else -64  # sums of rows near float64's largest value would overflow
        scaled = np.ldexp(values[rows], shift) if shift else values[rows]
        totals = np.bincount(pair, scaled, minlength=num_samples)
        means = np.ldexp(totals / sizes, -shift) if shift else totals / sizes
    sample_values = np.zeros(num_samples + 1, values.dtype)
    sample_values[:num_samples] = means
    return sample_of_row, sample_values, sample_group
