"""Ready-made invariant checks for grouped-advantage estimators: point them at your own.

An estimator is any callable ``fn(rewards, group_ids, num_groups, where) -> advantages`` (see
:class:`AdvantageEstimator`); :func:`as_estimator` adapts kernel-style functions that take ``where=``
as a keyword and return a NamedTuple with an ``advantages`` field.

Each ``check_*`` function takes one concrete input and raises ``AssertionError`` with a message naming
the group, rows, rewards and advantages involved. :func:`run_invariant_suite` drives the checks with
Hypothesis and returns what each one gave; :class:`AdvantageInvariants` is the same suite as a pytest
base class, one test per invariant.

One property per check. Every row belongs to one of three kinds, and each kind has its own check:

* ignored rows (``where`` False, or padding id P): only :func:`check_masked_rows_isolated` looks at
  them (they get exactly 0, their values change nothing, the live rows get what they would get if the
  ignored rows were absent). Every other check drops them before calling the estimator;
* live rows of a constant group (a group of one included): only :func:`check_constant_groups_zero`;
* live rows of a varying group: every other check. A non-finite advantage is
  :func:`check_output_contract`'s finding; the comparisons skip rows whose first output is not finite.

Checks that do not apply to the declared kind of estimator (``centered``, ``std_normalized``,
``std_scope``, ``reference``) are skipped with a reason: per-group shifts change a batch-wide σ, so
a ``std_scope="batch"`` estimator skips the shift check.

Tolerances. A varying group g with rewards r_g and advantages A_g is compared row by row with

    |a − b| ≤ atol + rtol · κ_g · max|A_g|,        κ_g = 1 + max|r_g| / (max r_g − min r_g),

the rounding bound of a float estimator: the error of r − μ is a few ulps of max|r|, and the estimator
multiplies it by its gain max|A|/(max r − min r). ``rtol`` is a few hundred machine epsilons by default
(1e-12, float64); pass about 1e-5 for an estimator that computes in float32. The runner ``assume``s
κ_g ≤ ``max_condition`` instead of loosening tolerances for ill-conditioned groups.
:func:`check_scale_invariance` adds the exact effect of an ``eps`` added to σ: with σ ≥ σ_p (ddof 0)
of the std's scope, (r − μ)/(σ + ε) and k(r − μ)/(kσ + ε) differ by at most
|A|·ε·|1 − 1/k| / σ_p.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kernel.testing._suite import SuiteOutcome, _run_class_check, _run_suite
from kernel.testing.strategies import (
    DEFAULT_MAGNITUDES,
    GROUP_REWARD_KINDS,
    GroupedRewards,
    grouped_rewards,
)

__all__ = [
    "ADVANTAGE_CHECKS",
    "REFERENCE_CONFIGS",
    "AdvantageEstimator",
    "AdvantageInvariants",
    "as_estimator",
    "check_constant_groups_zero",
    "check_group_independence",
    "check_group_relabel_invariance",
    "check_group_sums_zero",
    "check_masked_rows_isolated",
    "check_matches_reference",
    "check_monotone_in_reward",
    "check_output_contract",
    "check_row_permutation_equivariance",
    "check_scale_invariance",
    "check_scale_linearity",
    "check_shift_invariance",
    "reference_advantages",
    "run_invariant_suite",
]

FloatArray = npt.NDArray[np.floating[Any]]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.integer[Any]]
StdScope: TypeAlias = Literal["group", "batch"]

DEFAULT_RTOL = 1e-12


class AdvantageEstimator(Protocol):
    """The estimator protocol: ``fn(rewards, group_ids, num_groups, where) -> advantages``.

    Args (positional):
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int group of each row in ``[0, num_groups]``; id ``num_groups`` is padding.
      num_groups: static group count P.
      where: ``[PG]`` bool or None; rows with False are ignored.

    Returns:
      ``[PG]`` float advantages (array-like); ignored and padding rows must be exactly 0.
    """

    def __call__(
        self,
        rewards: FloatArray,
        group_ids: IntArray,
        num_groups: int,
        where: BoolArray | None,
        /,
    ) -> npt.ArrayLike: ...


def as_estimator(fn: Callable[..., Any], **options: Any) -> AdvantageEstimator:
    """Adapts ``fn(rewards, group_ids, num_groups, *, where=None, **options)`` to the protocol.

    Args:
      fn: a kernel-style estimator taking ``where`` as a keyword; it may return an array or a
        NamedTuple with an ``advantages`` field (e.g. ``kernel.grouped_advantages``).
      **options: keywords passed to ``fn`` on every call.

    Returns:
      An :class:`AdvantageEstimator` returning the advantages array.

    Examples:
      >>> import numpy as np
      >>> def centred(r, ids, p, *, where=None):
      ...     return r - (np.bincount(ids, r, minlength=p) / np.bincount(ids, minlength=p))[ids]
      >>> as_estimator(centred)(np.array([1.0, 3.0]), np.array([0, 0]), 1, None)
      array([-1.,  1.])
    """

    def estimator(
        rewards: FloatArray, group_ids: IntArray, num_groups: int, where: BoolArray | None, /
    ) -> npt.ArrayLike:
        out = fn(rewards, group_ids, num_groups, where=where, **options)
        return getattr(out, "advantages", out)  # type: ignore[no-any-return]

    estimator.__name__ = getattr(fn, "__name__", "estimator")
    return estimator


# --- internals -----------------------------------------------------------------------------------


def _inputs(
    rewards: npt.ArrayLike, group_ids: npt.ArrayLike, num_groups: int, where: npt.ArrayLike | None
) -> tuple[FloatArray, IntArray, BoolArray | None]:
    r = np.asarray(rewards)
    if r.dtype.kind != "f":
        r = r.astype(np.float64)
    ids = np.asarray(group_ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"group_ids must be integers, got dtype {ids.dtype}")
    w = None if where is None else np.asarray(where, dtype=bool)
    if r.ndim != 1 or ids.shape != r.shape or (w is not None and w.shape != r.shape):
        raise ValueError(
            f"rewards, group_ids and where must be rank-1 of one length, got {r.shape}, {ids.shape}, "
            f"{None if w is None else w.shape}"
        )
    if ids.size and (ids.min() < 0 or ids.max() > num_groups):
        raise ValueError(f"group_ids must lie in [0, num_groups={num_groups}]")
    return r, ids, w


def _live(ids: IntArray, num_groups: int, where: BoolArray | None) -> BoolArray:
    live = ids < num_groups
    return live if where is None else live & where


def _compact(
    rewards: npt.ArrayLike, group_ids: npt.ArrayLike, num_groups: int, where: npt.ArrayLike | None
) -> tuple[FloatArray, IntArray]:
    """The live rows alone (no mask, no padding): what every check but the masked-row check sees."""
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    live = _live(ids, num_groups, w)
    return r[live], ids[live]


def _call(
    name: str,
    estimator: AdvantageEstimator,
    rewards: FloatArray,
    ids: IntArray,
    num_groups: int,
    where: BoolArray | None = None,
) -> npt.NDArray[np.float64]:
    """Calls the estimator on private copies and checks the result's shape and kind."""
    out = np.asarray(
        estimator(rewards.copy(), ids.copy(), num_groups, None if where is None else where.copy())
    )
    if out.shape != rewards.shape:
        raise AssertionError(f"{name}: advantages have shape {out.shape}, expected {rewards.shape}")
    if out.dtype.kind != "f":
        raise AssertionError(f"{name}: advantages must be a real float array, got dtype {out.dtype}")
    return out.astype(np.float64)


def _groups(ids: IntArray, num_groups: int) -> list[npt.NDArray[np.intp]]:
    return [np.flatnonzero(ids == g) for g in range(num_groups)]


def _varying_groups(r: FloatArray, ids: IntArray, num_groups: int) -> list[tuple[int, npt.NDArray[np.intp]]]:
    """(g, rows) of every group whose rewards are not all equal (the rows most checks are about)."""
    out = []
    for g, rows in enumerate(_groups(ids, num_groups)):
        if rows.size and not (r[rows] == r[rows[0]]).all():
            out.append((g, rows))
    return out


def _condition(r: npt.NDArray[np.float64]) -> float:
    """κ = 1 + max|r| / (max r − min r); inf for a constant (or empty) group."""
    if r.size == 0:
        return math.inf
    spread = float(r.max() - r.min())
    if spread == 0.0:
        return math.inf
    return 1.0 + float(np.abs(r).max()) / spread


def _tolerance(r: npt.NDArray[np.float64], a: npt.NDArray[np.float64], rtol: float, atol: float) -> float:
    finite = a[np.isfinite(a)]
    if r.size == 0 or finite.size == 0:
        return atol
    kappa = _condition(r)
    if not math.isfinite(kappa):  # constant group: rounding of r − μ is a few ulps of |r|
        return atol + rtol * float(np.abs(r).max())
    return atol + rtol * kappa * float(np.abs(finite).max())


def _fmt(x: npt.ArrayLike) -> str:
    return np.array2string(np.asarray(x), precision=17, separator=", ", max_line_width=10_000)


def _compare(
    name: str,
    what: str,
    got: npt.NDArray[np.float64],
    want: npt.NDArray[np.float64],
    rewards: npt.NDArray[np.float64],
    ids: IntArray,
    num_groups: int,
    rtol: float,
    atol: float,
    extra_P: npt.NDArray[np.float64] | None = None,
    *,
    every_group: bool = False,
) -> None:
    """Row-wise comparison of the rows of varying groups (all groups if ``every_group``) where ``want``
    is finite, with the group tolerance (plus ``extra_P[g]·|want|`` when given)."""
    groups = enumerate(_groups(ids, num_groups)) if every_group else _varying_groups(rewards, ids, num_groups)
    for g, rows in groups:
        rows = rows[np.isfinite(want[rows])]
        if rows.size == 0:
            continue
        tol = _tolerance(rewards[rows], want[rows], rtol, atol)
        bound = tol + (0.0 if extra_P is None else float(extra_P[g]) * np.abs(want[rows]))
        err = np.abs(got[rows] - want[rows])
        if not (err <= bound).all():
            worst = int(np.argmax(np.where(err <= bound, -np.inf, err - bound)))
            raise AssertionError(
                f"{name}: {what}; group {g}, rows {_fmt(rows)}: rewards {_fmt(rewards[rows])}, "
                f"got {_fmt(got[rows])}, expected {_fmt(want[rows])} "
                f"(error {err[worst]:.3g} > tolerance {np.broadcast_to(bound, err.shape)[worst]:.3g})"
            )


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# --- checks --------------------------------------------------------------------------------------


def check_output_contract(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
) -> None:
    """Shape ``[PG]``, real float, inputs untouched; on the live rows: finite and the same output on a
    second call.

    Ignored rows are :func:`check_masked_rows_isolated`'s business: finiteness and determinism are
    checked on the live rows alone.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None.

    Returns:
      None.

    Raises:
      AssertionError: naming the first violation.

    Examples:
      >>> import numpy as np
      >>> check_output_contract(lambda r, i, p, w: r * 0.0, np.array([1.0, 2.0]), np.array([0, 0]), 1)
    """
    name = "check_output_contract"
    r0, ids0, w0 = _inputs(rewards, group_ids, num_groups, where)
    r, ids, w = r0.copy(), ids0.copy(), None if w0 is None else w0.copy()  # the caller's arrays stay intact
    with np.errstate(all="ignore"):
        out = np.asarray(estimator(r, ids, num_groups, w))
    same_w = w is None or (w0 is not None and np.array_equal(w, w0))
    if not (np.array_equal(r, r0, equal_nan=True) and np.array_equal(ids, ids0) and same_w):
        raise AssertionError(f"{name}: the estimator modified its inputs in place")
    if out.shape != r0.shape:
        raise AssertionError(f"{name}: advantages have shape {out.shape}, expected {r0.shape}")
    if out.dtype.kind != "f":
        raise AssertionError(f"{name}: advantages must be a real float array, got dtype {out.dtype}")
    rl, idl = _compact(r0, ids0, num_groups, w0)
    a = _call(name, estimator, rl, idl, num_groups)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise AssertionError(
            f"{name}: non-finite advantages {_fmt(a[bad])} on live rows with rewards {_fmt(rl[bad])}"
        )
    again = _call(name, estimator, rl, idl, num_groups)
    if not np.array_equal(again, a):
        raise AssertionError(f"{name}: two calls on the same input gave different advantages")


def check_monotone_in_reward(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Within a varying group, more reward never means less advantage, equal rewards get equal
    advantages, and the best row gets more than the worst:

        r_i > r_j ⇒ A_i ≥ A_j − tol,    r_i = r_j ⇒ |A_i − A_j| ≤ tol,    A_max − A_min > tol,

    with ``A_max`` / ``A_min`` the advantages of the group's highest and lowest reward and ``tol`` the
    group tolerance of the module docstring. Every estimator (r_i − b)·f + c with f > 0 per group meets
    it (leave-one-out baselines, σ-scaling, clipping and positive-only variants included); it catches a
    flipped sign and an estimator that gives a varying group nothing, which the other reference-free
    checks pass.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: naming the group, the two rows and their rewards and advantages.

    Examples:
      >>> import numpy as np
      >>> flipped = lambda r, i, p, w: r.mean() - r
      >>> check_monotone_in_reward(flipped, np.array([0.0, 1.0]), np.zeros(2, int), 1)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      AssertionError: check_monotone_in_reward: group 0: reward 1.0 (row 1) > 0.0 (row 0) but advantage ...
      >>> check_monotone_in_reward(lambda r, i, p, w: r - r.mean(), np.array([0.0, 1.0]), np.zeros(2, int), 1)
    """
    name = "check_monotone_in_reward"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups)
    for g, rows in _varying_groups(r, ids, num_groups):
        rows = rows[np.isfinite(a[rows])]
        if rows.size < 2:
            continue
        tol = _tolerance(r[rows].astype(np.float64), a[rows], rtol, atol)
        order = rows[np.argsort(r[rows], kind="stable")]  # increasing reward
        rv, av = r[order], a[order]
        for k in range(order.size - 1):  # neighbours in reward order, so every pair is implied
            lo, hi = order[k], order[k + 1]
            if rv[k + 1] > rv[k] and av[k + 1] < av[k] - tol:
                raise AssertionError(
                    f"{name}: group {g}: reward {float(rv[k + 1])!r} (row {hi}) > {float(rv[k])!r} "
                    f"(row {lo}) but advantage {float(av[k + 1])!r} < {float(av[k])!r} (tolerance {tol:.3g})"
                )
            if rv[k + 1] == rv[k] and abs(av[k + 1] - av[k]) > tol:
                raise AssertionError(
                    f"{name}: group {g}: rows {lo} and {hi} have the same reward {float(rv[k])!r} but "
                    f"advantages {float(av[k])!r} and {float(av[k + 1])!r} (tolerance {tol:.3g})"
                )
        low = a[order[rv == rv[0]]].max()
        high = a[order[rv == rv[-1]]].min()
        if not high - low > tol:
            raise AssertionError(
                f"{name}: group {g} (rows {_fmt(rows)}, rewards {_fmt(r[rows])}): its highest reward gets "
                f"advantage {float(high)!r}, not more than its lowest's {float(low)!r} (tolerance {tol:.3g})"
            )


def check_group_independence(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """A group's advantages depend on its own rows alone: computed in the batch or as a batch of that one
    group, they agree, A(r, ids)[rows_g] = A(r[rows_g], 0, P = 1), on every varying group. (Not for a
    batch-wide σ: :func:`run_invariant_suite` skips it for ``std_scope="batch"``.) It catches an
    estimator that reads the batch where it should read the group (a group size taken as the batch's
    rows ÷ P, a batch mean), which relabelling and permuting rows cannot show.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row whose advantage changed when its group was computed alone.

    Examples:
      >>> import numpy as np
      >>> batch_mean = lambda r, i, p, w: r - r.mean()
      >>> check_group_independence(  # doctest: +ELLIPSIS
      ...     batch_mean, np.array([0.0, 1.0, 5.0, 7.0]), np.array([0, 0, 1, 1]), 2)
      Traceback (most recent call last):
      AssertionError: check_group_independence: computed alone, its group got other advantages; ...
    """
    name = "check_group_independence"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups)
    alone = a.copy()
    for _, rows in _varying_groups(r, ids, num_groups):
        alone[rows] = _call(name, estimator, r[rows], np.zeros(rows.size, ids.dtype), 1)
    _compare(
        name,
        "computed alone, its group got other advantages",
        a,
        alone,
        r.astype(np.float64),
        ids,
        num_groups,
        rtol,
        atol,
    )


def check_group_sums_zero(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Centred estimators: Σ_{i ∈ g} A_i = 0 in every varying group (|Σ| ≤ n_g·tolerance).

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a group whose advantages do not sum to 0.

    Examples:
      >>> import numpy as np
      >>> check_group_sums_zero(lambda r, i, p, w: r - r.mean(), np.array([1.0, 3.0]), np.array([0, 0]), 1)
    """
    name = "check_group_sums_zero"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups)
    r64 = r.astype(np.float64)
    for g, rows in _varying_groups(r64, ids, num_groups):
        if not np.isfinite(a[rows]).all():
            continue  # check_output_contract's finding
        total = math.fsum(a[rows].tolist())
        tol = rows.size * _tolerance(r64[rows], a[rows], rtol, atol)
        if not abs(total) <= tol:
            raise AssertionError(
                f"{name}: group {g} advantages sum to {total:.17g}, not 0 (tolerance {tol:.3g}); "
                f"rows {_fmt(rows)}, rewards {_fmt(r64[rows])}, advantages {_fmt(a[rows])}"
            )


def check_constant_groups_zero(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    atol: float = 0.0,
) -> None:
    """A group whose live rewards are all equal (a group of one included) gets |A| ≤ atol (default:
    exactly 0, not eps noise).

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      atol: largest |A| accepted on a constant group.

    Returns:
      None.

    Raises:
      AssertionError: a constant group with a finite advantage beyond ``atol``.

    Examples:
      >>> import numpy as np
      >>> naive = lambda r, i, p, w: r - r.mean()  # mean of 3 × 0.1 is not 0.1 in floats
      >>> check_constant_groups_zero(naive, np.full(3, 0.1), np.zeros(3, int), 1)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      AssertionError: check_constant_groups_zero: constant group 0 ... expected exactly 0
      >>> exact = lambda r, i, p, w: np.where(r == r[0], 0.0, r - r.mean())
      >>> check_constant_groups_zero(exact, np.full(3, 0.1), np.zeros(3, int), 1)
    """
    name = "check_constant_groups_zero"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups)
    for g, rows in enumerate(_groups(ids, num_groups)):
        if not rows.size or not (r[rows] == r[rows[0]]).all():
            continue
        shown = a[rows]
        if not (~np.isfinite(shown) | (np.abs(shown) <= atol)).all():
            raise AssertionError(
                f"{name}: constant group {g} (rows {_fmt(rows)}, reward {float(r[rows[0]])!r}) got "
                f"advantages {_fmt(shown)}, expected {'exactly 0' if atol == 0 else f'|A| <= {atol:g}'}"
            )


def check_row_permutation_equivariance(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Shuffling the rows (within and across groups) shuffles the advantages the same way:
    A(π·r, π·ids) = π·A(r, ids), on the rows of varying groups.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      seed: draws the permutation π.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row whose advantage did not move with it.

    Examples:
      >>> import numpy as np
      >>> check_row_permutation_equivariance(
      ...     lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0, 6.0]), np.zeros(3, int), 1)
    """
    name = "check_row_permutation_equivariance"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    perm = _rng(seed).permutation(r.size)
    a = _call(name, estimator, r, ids, num_groups)
    b = _call(name, estimator, r[perm], ids[perm], num_groups)
    what = f"rows permuted by {_fmt(perm)}"
    _compare(name, what, b, a[perm], r[perm].astype(np.float64), ids[perm], num_groups, rtol, atol)


def check_group_relabel_invariance(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Renaming the groups (a permutation σ of ``[0, P)``) changes nothing: A(r, σ(ids)) = A(r, ids),
    on the rows of varying groups.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      seed: draws the renaming σ.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row whose advantage changed.

    Examples:
      >>> import numpy as np
      >>> check_group_relabel_invariance(lambda r, i, p, w: r * 0.0, np.ones(2), np.array([0, 1]), 2)
    """
    name = "check_group_relabel_invariance"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    sigma = _rng(seed).permutation(num_groups)
    new_ids = sigma[ids].astype(ids.dtype) if ids.size else ids
    a = _call(name, estimator, r, ids, num_groups)
    b = _call(name, estimator, r, new_ids, num_groups)
    what = f"groups renamed by {_fmt(sigma)}"
    _compare(name, what, b, a, r.astype(np.float64), ids, num_groups, rtol, atol)


def check_shift_invariance(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    shifts_P: npt.ArrayLike | None = None,
    seed: int | np.random.Generator = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Adding a constant c_g to every reward of group g changes no advantage: A(r + c_ids) = A(r),
    on the rows of varying groups. Holds for group-scoped estimators only (a batch-wide σ moves).

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      shifts_P: ``[P]`` float shifts; default integers in [−4, 4] (drawn from ``seed``) times each
        group's own largest |r| (1 for an all-zero group).
      seed: draws the default shifts.
      rtol: relative tolerance; the larger of the two groups' κ is used.
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a group whose advantages changed.
      ValueError: ``shifts_P`` of the wrong shape.

    Examples:
      >>> import numpy as np
      >>> check_shift_invariance(lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0]), np.zeros(2, int), 1)
    """
    name = "check_shift_invariance"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    if shifts_P is None:
        big = np.zeros(num_groups + 1)
        np.maximum.at(big, ids, np.abs(r.astype(np.float64)))
        unit = np.where(big[:num_groups] > 0, big[:num_groups], 1.0)
        shifts = _rng(seed).integers(-4, 5, size=num_groups) * unit
    else:
        shifts = np.asarray(shifts_P, dtype=np.float64)
        if shifts.shape != (num_groups,):
            raise ValueError(f"shifts_P must have shape ({num_groups},), got {shifts.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = (r + shifts[ids]).astype(r.dtype) if ids.size else r.copy()
    a = _call(name, estimator, r, ids, num_groups)
    b = _call(name, estimator, shifted, ids, num_groups)
    r64, s64 = r.astype(np.float64), shifted.astype(np.float64)
    for g, rows in _varying_groups(r64, ids, num_groups):
        rows = rows[np.isfinite(a[rows])]
        if rows.size == 0:
            continue
        tol = max(_tolerance(r64[rows], a[rows], rtol, atol), _tolerance(s64[rows], a[rows], rtol, atol))
        if not (np.abs(b[rows] - a[rows]) <= tol).all():
            raise AssertionError(
                f"{name}: adding {float(shifts[g])!r} to group {g} changed its advantages: rewards "
                f"{_fmt(r64[rows])} -> {_fmt(a[rows])}, shifted {_fmt(s64[rows])} -> {_fmt(b[rows])} "
                f"(tolerance {tol:.3g})"
            )


def _population_std_P(r: npt.NDArray[np.float64], ids: IntArray, num_groups: int, scope: StdScope) -> Any:
    """σ_p (ddof 0) of each group's rewards, or of the whole batch (``scope="batch"``), as ``[P]``."""
    if scope == "batch":
        std = float(np.std(r)) if r.size else 0.0
        return np.full(num_groups, std)
    n = np.bincount(ids, minlength=num_groups).astype(np.float64)
    mean = np.bincount(ids, r, num_groups) / np.maximum(n, 1)
    dev = r - mean[ids] if ids.size else r
    return np.sqrt(np.bincount(ids, dev * dev, num_groups) / np.maximum(n, 1))


def _check_scaling(
    name: str,
    linear: bool,
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None,
    factor: float,
    rtol: float,
    atol: float,
    eps: float = 0.0,
    std_scope: StdScope = "group",
) -> None:
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be finite and > 0, got {factor}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    if std_scope not in ("group", "batch"):
        raise ValueError(f"std_scope must be 'group' or 'batch', got {std_scope!r}")
    r, ids = _compact(rewards, group_ids, num_groups, where)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        scaled = (r * factor).astype(r.dtype)
    a = _call(name, estimator, r, ids, num_groups)
    b = _call(name, estimator, scaled, ids, num_groups)
    want = a * factor if linear else a
    extra = None
    if eps > 0:  # |A(kr) − A(r)| ≤ |A|·ε·|1 − 1/k| / σ_p
        sigma = _population_std_P(r.astype(np.float64), ids, num_groups, std_scope)
        with np.errstate(divide="ignore"):
            extra = np.where(sigma > 0, eps * abs(1.0 - 1.0 / factor) / sigma, np.inf)
    what = f"rewards scaled by {factor!r}, expected {'A·k' if linear else 'A unchanged'}"
    if eps > 0:
        what += f" up to the eps={eps:g} bound"
    _compare(name, what, b, want, scaled.astype(np.float64), ids, num_groups, rtol, atol, extra)


def check_scale_invariance(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    factor: float = 3.0,
    eps: float = 0.0,
    std_scope: StdScope = "group",
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Std-normalised estimators: A(k·r) = A(r) for k > 0, on the rows of varying groups.

    An estimator computing (r − μ)/(σ + ε) is scale invariant only up to ε: with σ ≥ σ_p (the
    population std of the std's scope) the two sides differ by at most |A|·ε·|1 − 1/k|/σ_p, which is
    added to the rounding tolerance. Declare the estimator's ``eps`` and ``std_scope`` to get it.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      factor: k, finite and > 0.
      eps: the estimator's ε added to σ (0: none).
      std_scope: ``"group"`` (σ per group) or ``"batch"`` (one σ over every live row).
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row whose advantage changed beyond the bound.
      ValueError: ``factor`` not finite and > 0, ``eps`` negative, an unknown ``std_scope``.

    Examples:
      >>> import numpy as np
      >>> z = lambda r, i, p, w: (r - r.mean()) / (r.std() + 1e-4)
      >>> r, ids = np.array([0.0, 1e-3, 2e-3]), np.zeros(3, int)
      >>> check_scale_invariance(z, r, ids, 1, eps=1e-4)  # within the eps bound
      >>> check_scale_invariance(z, r, ids, 1)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      AssertionError: check_scale_invariance: rewards scaled by 3.0, expected A unchanged; ...
    """
    _check_scaling(
        "check_scale_invariance",
        False,
        estimator,
        rewards,
        group_ids,
        num_groups,
        where,
        factor,
        rtol,
        atol,
        eps,
        std_scope,
    )


def check_scale_linearity(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    factor: float = 3.0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Centred-only estimators: A(k·r) = k·A(r) for k > 0, on the rows of varying groups.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      factor: k, finite and > 0.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row whose advantage did not scale.
      ValueError: ``factor`` not finite and > 0.

    Examples:
      >>> import numpy as np
      >>> check_scale_linearity(lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0]), np.zeros(2, int), 1)
    """
    _check_scaling(
        "check_scale_linearity", True, estimator, rewards, group_ids, num_groups, where, factor, rtol, atol
    )


def check_masked_rows_isolated(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    seed: int | np.random.Generator = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """Ignored rows (``where`` False, or padding id P) are as if absent: they get exactly 0 and the
    live rows get what the estimator gives on the live rows alone.

    Their rewards are then replaced, in turn, by NaN, +inf, −inf, ±1e300, finite values and a mix (drawn
    from ``seed``); they must still get exactly 0 and every live advantage must stay the same (|Δ| ≤
    atol, exactly by default: an ignored row adds nothing to any statistic). The comparison with the
    live rows alone uses the group tolerance (``rtol``). Inputs without ignored rows pass trivially.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None.
      seed: draws the replacement values.
      rtol: relative tolerance of the comparison with the live rows alone.
      atol: absolute tolerance of both comparisons.

    Returns:
      None.

    Raises:
      AssertionError: an ignored row with a nonzero (or NaN) advantage, or a live row that moved.

    Examples:
      >>> import numpy as np
      >>> def centred(r, i, p, w):
      ...     w = np.ones(r.size, bool) if w is None else w
      ...     m = r[w].mean()
      ...     return np.where(w, r - m, 0.0)
      >>> check_masked_rows_isolated(centred, np.array([1.0, 5.0, 3.0]), np.zeros(3, int), 1,
      ...                            np.array([True, False, True]))
    """
    name = "check_masked_rows_isolated"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    live = _live(ids, num_groups, w)
    dead = np.flatnonzero(~live)
    if dead.size == 0:
        return
    rng = _rng(seed)
    mixed = np.array([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, 1.0])[rng.integers(0, 7, dead.size)]
    rounds = [np.full(dead.size, v) for v in (math.nan, math.inf, -math.inf)]
    rounds += [rng.choice([-1e300, 1e300], dead.size), rng.normal(size=dead.size) * 1e3, mixed]
    with np.errstate(all="ignore"):
        a = _call(name, estimator, r, ids, num_groups, w)
        alone = _call(name, estimator, r[live], ids[live], num_groups)
    for label, out, values in (("original", a, r[dead]), *((f"set to {_fmt(v)}", None, v) for v in rounds)):
        if out is None:
            changed = r.copy()
            with np.errstate(over="ignore"):
                changed[dead] = values.astype(r.dtype)
            with np.errstate(all="ignore"):
                out = _call(name, estimator, changed, ids, num_groups, w)
        leaked = dead[out[dead] != 0]
        if leaked.size:
            raise AssertionError(
                f"{name}: ignored rows {_fmt(leaked)} with rewards {_fmt(values[np.isin(dead, leaked)])} "
                f"({label}) got advantages {_fmt(out[leaked])}, expected exactly 0"
            )
        if label == "original":
            what = "live rows differ from the estimator's result on the live rows alone"
            r_live = r.astype(np.float64)[live]
            _compare(name, what, a[live], alone, r_live, ids[live], num_groups, rtol, atol, every_group=True)
            continue
        moved = np.flatnonzero(~(np.abs(out - a) <= atol) & live)
        if moved.size:
            raise AssertionError(
                f"{name}: changing ignored rows {_fmt(dead)} from {_fmt(r[dead])} to {_fmt(values)} "
                f"changed advantages of live rows {_fmt(moved)}: {_fmt(a[moved])} -> {_fmt(out[moved])}"
            )


# --- the slow reference ------------------------------------------------------------------------------

REFERENCE_CONFIGS: dict[str, str] = {
    "center": "A = r − μ",
    "rloo": "A = r − (Σr − r)/(n − 1) = n/(n − 1)·(r − μ)",
    "zscore_unbiased": "A = (r − μ)/(σ_u + eps), σ_u with ddof 1",
    "zscore_population": "A = (r − μ)/(σ_p + eps), σ_p with ddof 0",
    "zscore_batch": "A = (r − μ)/(σ_B + eps), σ_B with ddof 1 over every live row of the batch (TRL batch)",
}
"""Named configurations of :func:`reference_advantages`. In every one, a constant group (a group of
one included) gives exactly 0 and ignored rows give 0."""

ReferenceConfig: TypeAlias = Literal["center", "rloo", "zscore_unbiased", "zscore_population", "zscore_batch"]


def reference_advantages(
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    config: ReferenceConfig = "center",
    eps: float = 0.0,
) -> npt.NDArray[np.float64]:
    """A slow, obvious per-group loop in float64 (``math.fsum``) implementing a named config.

    Configs (:data:`REFERENCE_CONFIGS`), with μ, σ_u, σ_p over the live rows of the group and σ_B
    (ddof 1) over every live row: ``center`` r − μ; ``rloo`` r − (Σr − r)/(n − 1);
    ``zscore_unbiased`` (r − μ)/(σ_u + eps); ``zscore_population`` (r − μ)/(σ_p + eps);
    ``zscore_batch`` (r − μ)/(σ_B + eps). Constant groups and groups of one give 0; a zero
    denominator gives 0.

    Args:
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; rows with False are ignored (advantage 0).
      config: one of :data:`REFERENCE_CONFIGS`.
      eps: added to σ in the z-score configs.

    Returns:
      ``[PG]`` float64 advantages.

    Raises:
      ValueError: an unknown ``config``; inputs of mismatched shapes or ids out of range.

    Examples:
      >>> reference_advantages([1.0, 3.0, 5.0, 7.0], [0, 0, 1, 1], 2, config="rloo")
      array([-2.,  2., -2.,  2.])
      >>> reference_advantages([1.0, 3.0, 9.0], [0, 0, 0], 1, [True, True, False], config="zscore_population")
      array([-1.,  1.,  0.])
    """
    if config not in REFERENCE_CONFIGS:
        raise ValueError(f"config must be one of {tuple(REFERENCE_CONFIGS)}, got {config!r}")
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    values = r.astype(np.float64).tolist()
    live = _live(ids, num_groups, w).tolist()
    out = [0.0] * len(values)
    everything = [x for x, keep in zip(values, live, strict=True) if keep]
    batch_std = 0.0
    if len(everything) > 1:
        batch_mean = math.fsum(everything) / len(everything)
        batch_std = math.sqrt(math.fsum((y - batch_mean) ** 2 for y in everything) / (len(everything) - 1))
    for g in range(num_groups):
        rows = [i for i in range(len(values)) if live[i] and ids[i] == g]
        xs = [values[i] for i in rows]
        n = len(xs)
        if n == 0 or all(x == xs[0] for x in xs):
            continue
        mean = math.fsum(xs) / n
        for i, x in zip(rows, xs, strict=True):
            if config == "center":
                out[i] = x - mean
            elif config == "rloo":
                out[i] = x - math.fsum([*xs, -x]) / (n - 1)
            else:
                if config == "zscore_batch":
                    std = batch_std
                else:
                    ddof = 1 if config == "zscore_unbiased" else 0
                    std = math.sqrt(math.fsum((y - mean) ** 2 for y in xs) / (n - ddof))
                out[i] = (x - mean) / (std + eps) if std + eps > 0 else 0.0
    return np.asarray(out, dtype=np.float64)


def check_matches_reference(
    estimator: AdvantageEstimator,
    rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    num_groups: int,
    where: npt.ArrayLike | None = None,
    *,
    config: ReferenceConfig = "center",
    eps: float = 0.0,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
) -> None:
    """The estimator agrees with :func:`reference_advantages` (``config``, ``eps``) on the rows of
    varying groups, with the group tolerance computed from the reference's advantages.

    Args:
      estimator: the estimator under test.
      rewards: ``[PG]`` float rewards.
      group_ids: ``[PG]`` int in ``[0, num_groups]``.
      num_groups: P.
      where: ``[PG]`` bool or None; ignored rows are dropped before the call.
      config: the reference configuration (:data:`REFERENCE_CONFIGS`).
      eps: the reference's eps.
      rtol: relative tolerance (module docstring).
      atol: absolute tolerance.

    Returns:
      None.

    Raises:
      AssertionError: a row that disagrees.

    Examples:
      >>> import numpy as np
      >>> check_matches_reference(lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0]), np.zeros(2, int), 1)
    """
    name = "check_matches_reference"
    r, ids = _compact(rewards, group_ids, num_groups, where)
    got = _call(name, estimator, r, ids, num_groups)
    want = reference_advantages(r, ids, num_groups, config=config, eps=eps)
    what = f"disagrees with the reference config {config!r} (eps={eps:g})"
    _compare(name, what, got, want, r.astype(np.float64), ids, num_groups, rtol, atol)


# --- the Hypothesis-driven suite -----------------------------------------------------------------------


def _well_conditioned(case: GroupedRewards, max_condition: float) -> bool:
    r = case.rewards.astype(np.float64)
    live = _live(case.group_ids, case.num_groups, case.where)
    for rows in _groups(np.where(live, case.group_ids, case.num_groups), case.num_groups):
        kappa = _condition(r[rows])
        if math.isfinite(kappa) and kappa > max_condition:
            return False
    return True


_FACTORS = (0.5, 2.0, 3.0, 0.1, 1e3)

ADVANTAGE_CHECKS: tuple[str, ...] = (
    "output_contract",
    "masked_rows_isolated",
    "row_permutation_equivariance",
    "group_relabel_invariance",
    "monotone_in_reward",
    "group_independence",
    "group_sums_zero",
    "constant_groups_zero",
    "shift_invariance",
    "scale_invariance",
    "scale_linearity",
    "matches_reference",
)
"""Names of the advantage checks (``check_`` + name), in the order the suite runs them."""


class _SuiteConfig:
    """The options shared by :func:`run_invariant_suite` and :class:`AdvantageInvariants`."""

    centered: bool = True
    std_normalized: bool = False
    std_scope: StdScope = "group"
    eps: float = 0.0
    reference: ReferenceConfig | None = None
    reference_eps: float | None = None
    masks: bool | None = None
    nan: bool = True
    padding: bool = True
    min_size: int = 1
    max_size: int = 6
    large_size: int = 64
    max_groups: int = 4
    dtype: npt.DTypeLike = np.float64
    kinds: Sequence[str] = GROUP_REWARD_KINDS
    magnitudes: Sequence[float] = DEFAULT_MAGNITUDES
    rtol: float = DEFAULT_RTOL
    atol: float = 0.0
    constant_atol: float = 0.0
    max_condition: float = 1e6
    hypothesis_settings: Mapping[str, Any] = MappingProxyType({})

    def _strategy(self) -> st.SearchStrategy[GroupedRewards]:
        return grouped_rewards(
            max_groups=self.max_groups,
            min_size=self.min_size,
            max_size=self.max_size,
            large_size=self.large_size,
            masks=self.masks,
            nan=self.nan,
            padding=self.padding,
            dtype=self.dtype,
            kinds=self.kinds,
            magnitudes=self.magnitudes,
        )

    def _skip_reason(self, check: str) -> str | None:
        """Why ``check`` does not apply to the declared estimator, or None when it does."""
        if check in ("group_sums_zero", "constant_groups_zero", "shift_invariance", "scale_linearity"):
            if not self.centered:
                return f"{check} holds for centred estimators; declared centered=False"
        if check == "group_independence" and self.std_scope == "batch":
            return "a batch-wide σ depends on every group; declared std_scope='batch'"
        if check == "shift_invariance" and self.std_normalized and self.std_scope == "batch":
            return "a per-group shift changes the batch-wide σ and so every group; declared std_scope='batch'"
        if check == "scale_invariance" and not self.std_normalized:
            return "A(k·r) = A(r) holds for std-normalised estimators; declared std_normalized=False"
        if check == "scale_linearity" and self.std_normalized:
            return "A(k·r) = k·A(r) holds for centred-only estimators; declared std_normalized=True"
        if check == "matches_reference" and self.reference is None:
            return "no reference declared (reference=None)"
        return None

    def _run_check(
        self, check: str, estimator: AdvantageEstimator, case: GroupedRewards, seed: int, factor: float
    ) -> None:
        args = (estimator, case.rewards, case.group_ids, case.num_groups, case.where)
        rtol, atol = self.rtol, self.atol
        if check == "output_contract":
            check_output_contract(*args)
        elif check == "masked_rows_isolated":
            check_masked_rows_isolated(*args, seed=seed, rtol=rtol)
        elif check == "row_permutation_equivariance":
            check_row_permutation_equivariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "group_relabel_invariance":
            check_group_relabel_invariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "monotone_in_reward":
            check_monotone_in_reward(*args, rtol=rtol, atol=atol)
        elif check == "group_independence":
            check_group_independence(*args, rtol=rtol, atol=atol)
        elif check == "group_sums_zero":
            check_group_sums_zero(*args, rtol=rtol, atol=atol)
        elif check == "constant_groups_zero":
            check_constant_groups_zero(*args, atol=self.constant_atol)
        elif check == "shift_invariance":
            check_shift_invariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "scale_invariance":
            check_scale_invariance(
                *args, factor=factor, eps=self.eps, std_scope=self.std_scope, rtol=rtol, atol=atol
            )
        elif check == "scale_linearity":
            check_scale_linearity(*args, factor=factor, rtol=rtol, atol=atol)
        elif check == "matches_reference":
            assert self.reference is not None
            ref_eps = self.eps if self.reference_eps is None else self.reference_eps
            check_matches_reference(*args, config=self.reference, eps=ref_eps, rtol=rtol, atol=atol)
        else:  # pragma: no cover - internal
            raise ValueError(check)

    def _suite(
        self,
        checks: Sequence[str],
        estimator: AdvantageEstimator,
        raise_on_failure: bool,
        overrides: Mapping[str, Any],
    ) -> SuiteOutcome:
        strategy = st.tuples(self._strategy(), st.integers(0, 2**32 - 1), st.sampled_from(_FACTORS))

        def run(check: str, drawn: tuple[GroupedRewards, int, float]) -> None:
            self._run_check(check, estimator, *drawn)

        return _run_suite(
            checks,
            self._skip_reason,
            strategy,
            run,
            accept=lambda drawn: _well_conditioned(drawn[0], self.max_condition),
            raise_on_failure=raise_on_failure,
            overrides=overrides,
        )


def run_invariant_suite(
    estimator: AdvantageEstimator,
    *,
    centered: bool = True,
    std_normalized: bool = False,
    std_scope: StdScope = "group",
    eps: float = 0.0,
    reference: ReferenceConfig | None = None,
    reference_eps: float | None = None,
    checks: Sequence[str] | None = None,
    raise_on_failure: bool = True,
    masks: bool | None = None,
    nan: bool = True,
    padding: bool = True,
    min_size: int = 1,
    max_size: int = 6,
    large_size: int = 64,
    max_groups: int = 4,
    dtype: npt.DTypeLike = np.float64,
    kinds: Sequence[str] = GROUP_REWARD_KINDS,
    magnitudes: Sequence[float] = DEFAULT_MAGNITUDES,
    rtol: float = DEFAULT_RTOL,
    atol: float = 0.0,
    constant_atol: float = 0.0,
    max_condition: float = 1e6,
    max_examples: int | None = None,
    hypothesis_settings: Mapping[str, Any] | None = None,
) -> SuiteOutcome:
    """Runs every invariant on Hypothesis-drawn grouped rewards (each example goes through every check).

    Always: output contract, ignored rows isolated, row permutation equivariance, group relabelling
    invariance, advantages monotone in the reward within a group (and not all equal on a varying
    group), each group independent of the others (skipped for ``std_scope="batch"``). ``centered``: group sums zero, constant groups exactly 0, per-group shift invariance
    (skipped for ``std_scope="batch"``), and (unless ``std_normalized``) A(k·r) = k·A(r).
    ``std_normalized``: A(k·r) = A(r) up to the ``eps`` bound. ``reference``: agreement with
    :func:`reference_advantages`. A check that does not apply to the declared kind is skipped with a
    reason, also when named in ``checks``.

    Args:
      estimator: the estimator under test (:class:`AdvantageEstimator`).
      centered: the estimator subtracts a group baseline.
      std_normalized: the estimator divides by a std (σ + eps).
      std_scope: ``"group"`` (σ per group) or ``"batch"`` (one σ over the batch, TRL ``batch``).
      eps: the estimator's eps added to σ (used by the scale bound).
      reference: a :data:`REFERENCE_CONFIGS` name to agree with, or None.
      reference_eps: the reference's eps; None uses ``eps``.
      checks: names (with or without ``check_``) to run; None runs :data:`ADVANTAGE_CHECKS`.
      raise_on_failure: raise the first failure (True) or record it and go on (False).
      masks, nan, padding, min_size, max_size, large_size, max_groups, dtype, kinds, magnitudes: passed
        to :func:`~kernel.testing.strategies.grouped_rewards` (``large_size``: one group of up to that
        many rows in about half the examples, the sizes used in practice; 0 turns it off).
      rtol: relative tolerance (module docstring); about 1e-5 for float32 estimators.
      atol: absolute tolerance.
      constant_atol: largest |A| accepted on a constant group.
      max_condition: examples with a group of condition κ above it are discarded with ``assume``.
      max_examples: examples per check; None keeps the active Hypothesis profile's count.
      hypothesis_settings: further ``hypothesis.settings`` options (e.g. ``phases``).

    Returns:
      Check name → ``"passed"``, ``"skipped: <reason>"`` or (``raise_on_failure=False``)
      ``"failed: <first line of the message>"``.

    Raises:
      AssertionError: a check failed and ``raise_on_failure`` (Hypothesis reports the shrunk example).
      ValueError: unknown check names or options.

    Examples:
      >>> import numpy as np
      >>> def centred(r, ids, p, where):  # float sums: constant groups may get ±1 ulp
      ...     live = (ids < p) if where is None else (ids < p) & where
      ...     idx, x = np.where(live, ids, p), np.where(live, r, 0.0)
      ...     mean = np.bincount(idx, x, p + 1) / np.maximum(np.bincount(idx, None, p + 1), 1)
      ...     return np.where(live, x - mean[idx], 0.0)
      >>> run_invariant_suite(centred, checks=["group_sums_zero", "scale_invariance"], max_examples=20)
      {'group_sums_zero': 'passed', 'scale_invariance': 'skipped: A(k·r) = A(r) holds for std-normalised estimators; declared std_normalized=False'}
    """  # noqa: E501
    if std_scope not in ("group", "batch"):
        raise ValueError(f"std_scope must be 'group' or 'batch', got {std_scope!r}")
    if reference is not None and reference not in REFERENCE_CONFIGS:
        raise ValueError(f"reference must be one of {tuple(REFERENCE_CONFIGS)} or None, got {reference!r}")
    config = _SuiteConfig()
    for key, value in {
        "centered": centered,
        "std_normalized": std_normalized,
        "std_scope": std_scope,
        "eps": eps,
        "reference": reference,
        "reference_eps": reference_eps,
        "masks": masks,
        "nan": nan,
        "padding": padding,
        "min_size": min_size,
        "max_size": max_size,
        "large_size": large_size,
        "max_groups": max_groups,
        "dtype": dtype,
        "kinds": kinds,
        "magnitudes": magnitudes,
        "rtol": rtol,
        "atol": atol,
        "constant_atol": constant_atol,
        "max_condition": max_condition,
    }.items():
        setattr(config, key, value)
    chosen = list(ADVANTAGE_CHECKS) if checks is None else [c.removeprefix("check_") for c in checks]
    unknown = set(chosen) - set(ADVANTAGE_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; known: {ADVANTAGE_CHECKS}")
    overrides: dict[str, Any] = {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    overrides.update(hypothesis_settings or {})
    return config._suite(chosen, estimator, raise_on_failure, overrides)


class AdvantageInvariants(_SuiteConfig):
    """The invariant suite as a pytest base class: subclass it as ``Test...`` and set ``estimator``.

    One test per invariant; those that do not apply to the declared estimator (see
    :func:`run_invariant_suite`) are skipped with the reason. Class attributes mirror the runner's
    keywords: ``centered``, ``std_normalized``, ``std_scope``, ``eps``, ``reference``,
    ``reference_eps``, ``masks``, ``nan``, ``padding``, ``min_size``, ``max_size``, ``large_size``,
    ``max_groups``, ``dtype``, ``kinds``, ``magnitudes``, ``rtol``, ``atol``, ``constant_atol``,
    ``max_condition``, ``hypothesis_settings``. Example counts follow the active Hypothesis profile.

    Examples:
      >>> import numpy as np
      >>> class TestZero(AdvantageInvariants):
      ...     estimator = staticmethod(lambda r, ids, p, where: np.zeros_like(r))
      >>> TestZero().test_output_contract()
    """

    estimator: Any = None

    def _draw_and_check(self, check: str) -> None:
        _run_class_check(self, "estimator", check)

    def test_output_contract(self) -> None:
        """Shape, dtype, inputs untouched; finite and deterministic on the live rows."""
        self._draw_and_check("output_contract")

    def test_masked_rows_isolated(self) -> None:
        """Ignored rows get 0 and are as if absent, whatever their rewards (even NaN)."""
        self._draw_and_check("masked_rows_isolated")

    def test_row_permutation_equivariance(self) -> None:
        """Shuffling rows shuffles advantages."""
        self._draw_and_check("row_permutation_equivariance")

    def test_group_relabel_invariance(self) -> None:
        """Renaming groups changes nothing."""
        self._draw_and_check("group_relabel_invariance")

    def test_monotone_in_reward(self) -> None:
        """More reward never gets less advantage; a varying group's best row gets more than its worst."""
        self._draw_and_check("monotone_in_reward")

    def test_group_independence(self) -> None:
        """A group's advantages do not depend on the other groups (group-scoped σ)."""
        self._draw_and_check("group_independence")

    def test_group_sums_zero(self) -> None:
        """Centred: advantages sum to zero per varying group."""
        self._draw_and_check("group_sums_zero")

    def test_constant_groups_zero(self) -> None:
        """Centred: a constant group gives exactly 0."""
        self._draw_and_check("constant_groups_zero")

    def test_shift_invariance(self) -> None:
        """Centred, group-scoped: adding a constant per group changes nothing."""
        self._draw_and_check("shift_invariance")

    def test_scale_invariance(self) -> None:
        """Std-normalised: positive scaling changes nothing (up to the eps bound)."""
        self._draw_and_check("scale_invariance")

    def test_scale_linearity(self) -> None:
        """Centred only: positive scaling scales the advantages."""
        self._draw_and_check("scale_linearity")

    def test_matches_reference(self) -> None:
        """Agreement with the slow reference config, when one is declared."""
        self._draw_and_check("matches_reference")
