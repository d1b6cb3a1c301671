"""Ready-made invariant checks for grouped-advantage estimators: point them at your own.

An estimator is any callable ``fn(rewards, group_ids, num_groups, where) -> advantages`` (see
:class:`AdvantageEstimator`); :func:`as_estimator` adapts kernel-style functions that take ``where=``
as a keyword and return a NamedTuple with an ``advantages`` field.

Each ``check_*`` function takes one concrete input and raises ``AssertionError`` with a message naming
the group, rows, rewards and advantages involved. :func:`run_invariant_suite` drives all checks that
apply with Hypothesis; :class:`AdvantageInvariants` is the same suite as a pytest base class, one test
per invariant.

Tolerances. A group g with live rewards r_g and advantages A_g is compared row by row with

    |a − b| ≤ atol + rtol · κ_g · max|A_g|,        κ_g = 1 + max|r_g| / (max r_g − min r_g),

the rounding bound of a float estimator: the error of r − μ is a few ulps of max|r|, and the estimator
multiplies it by its gain max|A|/(max r − min r). ``rtol`` is a few hundred machine epsilons by default
(1e-12, float64); pass about 1e-5 for an estimator that computes in float32. Constant groups (κ = ∞)
compare with ``atol + rtol·max|r_g|`` in these checks; :func:`check_constant_groups_zero` alone
demands exact zeros (its ``atol`` defaults to 0). The runner ``assume``s κ_g ≤ ``max_condition``
instead of loosening tolerances for ill-conditioned groups.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel.testing.strategies import (
    DEFAULT_MAGNITUDES,
    GROUP_REWARD_KINDS,
    GroupedRewards,
    grouped_rewards,
)

__all__ = [
    "REFERENCE_CONFIGS",
    "AdvantageEstimator",
    "AdvantageInvariants",
    "as_estimator",
    "check_constant_groups_zero",
    "check_group_relabel_invariance",
    "check_group_sums_zero",
    "check_masked_rows_isolated",
    "check_matches_reference",
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

    The result may be an array or a NamedTuple with an ``advantages`` field (e.g.
    ``kernel.grouped_advantages``); ``options`` are passed as keywords on every call.

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


def _call(
    name: str,
    estimator: AdvantageEstimator,
    rewards: FloatArray,
    ids: IntArray,
    num_groups: int,
    where: BoolArray | None,
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


def _groups(ids: IntArray, live: BoolArray, num_groups: int) -> list[npt.NDArray[np.intp]]:
    return [np.flatnonzero(live & (ids == g)) for g in range(num_groups)]


def _condition(r: npt.NDArray[np.float64]) -> float:
    """κ = 1 + max|r| / (max r − min r); inf for a constant (or empty) group."""
    if r.size == 0:
        return math.inf
    spread = float(r.max() - r.min())
    if spread == 0.0:
        return math.inf
    return 1.0 + float(np.abs(r).max()) / spread


def _tolerance(r: npt.NDArray[np.float64], a: npt.NDArray[np.float64], rtol: float, atol: float) -> float:
    if r.size == 0:
        return atol
    kappa = _condition(r)
    if not math.isfinite(kappa):  # constant group: rounding of r − μ is a few ulps of |r|
        return atol + rtol * float(np.abs(r).max())
    return atol + rtol * kappa * float(np.abs(a).max())


def _fmt(x: npt.ArrayLike) -> str:
    return np.array2string(np.asarray(x), precision=17, separator=", ", max_line_width=10_000)


def _compare_groups(
    name: str,
    what: str,
    got: npt.NDArray[np.float64],
    want: npt.NDArray[np.float64],
    rewards: npt.NDArray[np.float64],
    ids: IntArray,
    live: BoolArray,
    num_groups: int,
    rtol: float,
    atol: float,
) -> None:
    """Row-wise comparison of live rows, group by group, with the group tolerance; dead rows exactly."""
    for g, rows in enumerate(_groups(ids, live, num_groups)):
        if rows.size == 0:
            continue
        tol = _tolerance(rewards[rows], want[rows], rtol, atol)
        err = np.abs(got[rows] - want[rows])
        if not (err <= tol).all():
            raise AssertionError(
                f"{name}: {what}; group {g}, rows {_fmt(rows)}: rewards {_fmt(rewards[rows])}, "
                f"got {_fmt(got[rows])}, expected {_fmt(want[rows])} "
                f"(max error {err.max():.3g} > tolerance {tol:.3g})"
            )
    dead = ~live
    if not np.array_equal(got[dead], want[dead]):
        raise AssertionError(f"{name}: {what}; ignored rows {_fmt(np.flatnonzero(dead))} differ")


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
    """Shape ``[PG]``, real float, finite on live rows, exactly 0 on ignored rows, inputs untouched,
    same output on a second call.

    Raises:
      AssertionError: naming the first violation.

    Examples:
      >>> import numpy as np
      >>> check_output_contract(lambda r, i, p, w: r * 0.0, np.array([1.0, 2.0]), np.array([0, 0]), 1)
    """
    name = "check_output_contract"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    r0, ids0, w0 = r.copy(), ids.copy(), None if w is None else w.copy()
    out = np.asarray(estimator(r, ids, num_groups, w))
    same_w = w is None or (w0 is not None and np.array_equal(w, w0))
    if not (np.array_equal(r, r0, equal_nan=True) and np.array_equal(ids, ids0) and same_w):
        raise AssertionError(f"{name}: the estimator modified its inputs in place")
    r, ids, w = r0, ids0, w0
    if out.shape != r.shape:
        raise AssertionError(f"{name}: advantages have shape {out.shape}, expected {r.shape}")
    if out.dtype.kind != "f":
        raise AssertionError(f"{name}: advantages must be a real float array, got dtype {out.dtype}")
    live = _live(ids, num_groups, w)
    bad = np.flatnonzero(live & ~np.isfinite(out))
    if bad.size:
        raise AssertionError(f"{name}: non-finite advantages {_fmt(out[bad])} on live rows {_fmt(bad)}")
    leaked = np.flatnonzero(~live & (out != 0))
    if leaked.size:
        raise AssertionError(
            f"{name}: ignored (masked or padding) rows {_fmt(leaked)} got {_fmt(out[leaked])}, expected 0"
        )
    again = _call(name, estimator, r, ids, num_groups, w)
    if not np.array_equal(again, out.astype(np.float64), equal_nan=True):
        raise AssertionError(f"{name}: two calls on the same input gave different advantages")


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
    """Centred estimators: Σ_{live i ∈ g} A_i = 0 in every group (|Σ| ≤ n_g·tolerance).

    Examples:
      >>> import numpy as np
      >>> check_group_sums_zero(lambda r, i, p, w: r - r.mean(), np.array([1.0, 3.0]), np.array([0, 0]), 1)
    """
    name = "check_group_sums_zero"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups, w)
    r64 = r.astype(np.float64)
    for g, rows in enumerate(_groups(ids, _live(ids, num_groups, w), num_groups)):
        if rows.size == 0:
            continue
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
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    a = _call(name, estimator, r, ids, num_groups, w)
    for g, rows in enumerate(_groups(ids, _live(ids, num_groups, w), num_groups)):
        if rows.size and (r[rows] == r[rows[0]]).all() and not (np.abs(a[rows]) <= atol).all():
            raise AssertionError(
                f"{name}: constant group {g} (rows {_fmt(rows)}, reward {float(r[rows[0]])!r}) got "
                f"advantages {_fmt(a[rows])}, expected {'exactly 0' if atol == 0 else f'|A| <= {atol:g}'}"
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
    A(π·r, π·ids) = π·A(r, ids). The permutation π is drawn from ``seed``.

    Examples:
      >>> import numpy as np
      >>> check_row_permutation_equivariance(
      ...     lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0, 6.0]), np.zeros(3, int), 1)
    """
    name = "check_row_permutation_equivariance"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    perm = _rng(seed).permutation(r.size)
    a = _call(name, estimator, r, ids, num_groups, w)
    b = _call(name, estimator, r[perm], ids[perm], num_groups, None if w is None else w[perm])
    live = _live(ids, num_groups, w)[perm]
    what = f"rows permuted by {_fmt(perm)}"
    _compare_groups(
        name, what, b, a[perm], r[perm].astype(np.float64), ids[perm], live, num_groups, rtol, atol
    )


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
    """Renaming the groups (a permutation σ of ``[0, P)``; padding stays ``P``) changes nothing:
    A(r, σ(ids)) = A(r, ids).

    Examples:
      >>> import numpy as np
      >>> check_group_relabel_invariance(lambda r, i, p, w: r * 0.0, np.ones(2), np.array([0, 1]), 2)
    """
    name = "check_group_relabel_invariance"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    sigma = _rng(seed).permutation(num_groups)
    new_ids = np.where(ids < num_groups, np.append(sigma, num_groups)[np.minimum(ids, num_groups)], ids)
    new_ids = new_ids.astype(ids.dtype)
    a = _call(name, estimator, r, ids, num_groups, w)
    b = _call(name, estimator, r, new_ids, num_groups, w)
    live = _live(ids, num_groups, w)
    _compare_groups(
        name,
        f"groups renamed by {_fmt(sigma)}",
        b,
        a,
        r.astype(np.float64),
        ids,
        live,
        num_groups,
        rtol,
        atol,
    )


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
    """Adding a constant c_g to every reward of group g changes no advantage: A(r + c_ids) = A(r).

    ``shifts_P`` (``[P]``) defaults to integers in [−4, 4] (drawn from ``seed``) times each group's
    own largest |r| (1 for an all-zero group). The tolerance uses the larger of the two groups' κ.

    Examples:
      >>> import numpy as np
      >>> check_shift_invariance(lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0]), np.zeros(2, int), 1)
    """
    name = "check_shift_invariance"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    live = _live(ids, num_groups, w)
    if shifts_P is None:
        r64 = np.where(live, r, 0.0).astype(np.float64)
        big = np.zeros(num_groups + 1)
        np.maximum.at(big, np.where(live, ids, num_groups), np.abs(r64))
        unit = np.where(big[:num_groups] > 0, big[:num_groups], 1.0)
        shifts = _rng(seed).integers(-4, 5, size=num_groups) * unit
    else:
        shifts = np.asarray(shifts_P, dtype=np.float64)
        if shifts.shape != (num_groups,):
            raise ValueError(f"shifts_P must have shape ({num_groups},), got {shifts.shape}")
    c = np.append(shifts, 0.0)[np.minimum(ids, num_groups)]
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = (r + np.where(ids < num_groups, c, 0.0)).astype(r.dtype)
    a = _call(name, estimator, r, ids, num_groups, w)
    b = _call(name, estimator, shifted, ids, num_groups, w)
    r64, s64 = r.astype(np.float64), shifted.astype(np.float64)
    for g, rows in enumerate(_groups(ids, live, num_groups)):
        if rows.size == 0:
            continue
        tol = max(_tolerance(r64[rows], a[rows], rtol, atol), _tolerance(s64[rows], a[rows], rtol, atol))
        if not (np.abs(b[rows] - a[rows]) <= tol).all():
            raise AssertionError(
                f"{name}: adding {float(shifts[g])!r} to group {g} changed its advantages: rewards "
                f"{_fmt(r64[rows])} -> {_fmt(a[rows])}, shifted {_fmt(s64[rows])} -> {_fmt(b[rows])} "
                f"(tolerance {tol:.3g})"
            )


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
) -> None:
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be finite and > 0, got {factor}")
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    live = _live(ids, num_groups, w)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.where(live, r * factor, r).astype(r.dtype)
    a = _call(name, estimator, r, ids, num_groups, w)
    b = _call(name, estimator, scaled, ids, num_groups, w)
    want = a * factor if linear else a
    what = f"rewards scaled by {factor!r}, expected {'A·k' if linear else 'A unchanged'}"
    _compare_groups(name, what, b, want, scaled.astype(np.float64), ids, live, num_groups, rtol, atol)


def check_scale_invariance(
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
    """Std-normalised estimators: A(k·r) = A(r) for k > 0 (live rows scaled).

    An eps added to the std breaks this by about eps/σ relative; raise ``rtol`` accordingly.

    Examples:
      >>> import numpy as np
      >>> z = lambda r, i, p, w: (r - r.mean()) / r.std()
      >>> check_scale_invariance(z, np.array([1.0, 2.0, 4.0]), np.zeros(3, int), 1)
    """
    _check_scaling(
        "check_scale_invariance", False, estimator, rewards, group_ids, num_groups, where, factor, rtol, atol
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
    """Centred-only estimators: A(k·r) = k·A(r) for k > 0 (live rows scaled).

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
    atol: float = 0.0,
) -> None:
    """Ignored rows (``where`` False, or padding id P) never influence other rows and get exactly 0.

    Their rewards are replaced, in turn, by NaN, +inf, −inf, ±1e300, finite values and a mix (drawn
    from ``seed``); every advantage must stay the same (|Δ| ≤ atol, exactly by default: an ignored
    row adds nothing to any statistic).
    Inputs without ignored rows pass trivially.

    Examples:
      >>> import numpy as np
      >>> def centred(r, i, p, w):
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
    a = _call(name, estimator, r, ids, num_groups, w)
    for values in rounds:
        changed = r.copy()
        with np.errstate(over="ignore"):
            changed[dead] = values.astype(r.dtype)
        b = _call(name, estimator, changed, ids, num_groups, w)
        for label, out in (("original", a), ("changed", b)):
            leaked = dead[out[dead] != 0]
            if leaked.size:
                raise AssertionError(
                    f"{name}: ignored rows {_fmt(leaked)} got advantages {_fmt(out[leaked])} "
                    f"({label} rewards), expected exactly 0"
                )
        moved = np.flatnonzero(~(np.abs(b - a) <= atol))
        if moved.size:
            raise AssertionError(
                f"{name}: changing ignored rows {_fmt(dead)} from {_fmt(r[dead])} to {_fmt(changed[dead])} "
                f"changed advantages of rows {_fmt(moved)}: {_fmt(a[moved])} -> {_fmt(b[moved])}"
            )


# --- the slow reference ------------------------------------------------------------------------------

REFERENCE_CONFIGS: dict[str, str] = {
    "center": "A = r − μ",
    "rloo": "A = r − (Σr − r)/(n − 1) = n/(n − 1)·(r − μ)",
    "zscore_unbiased": "A = (r − μ)/(σ_u + eps), σ_u with ddof 1",
    "zscore_population": "A = (r − μ)/(σ_p + eps), σ_p with ddof 0",
}
"""Named configurations of :func:`reference_advantages`. In every one, a constant group (a group of
one included) gives exactly 0 and ignored rows give 0."""

ReferenceConfig = Literal["center", "rloo", "zscore_unbiased", "zscore_population"]


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

    Configs (:data:`REFERENCE_CONFIGS`), with μ, σ_u, σ_p over the live rows of the group:
    ``center`` r − μ; ``rloo`` r − (Σr − r)/(n − 1); ``zscore_unbiased`` (r − μ)/(σ_u + eps);
    ``zscore_population`` (r − μ)/(σ_p + eps). Constant groups and groups of one give 0.

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
    """The estimator agrees with :func:`reference_advantages` (``config``, ``eps``) row by row, with the
    group tolerance computed from the reference's advantages.

    Examples:
      >>> import numpy as np
      >>> check_matches_reference(lambda r, i, p, w: r - r.mean(), np.array([1.0, 2.0]), np.zeros(2, int), 1)
    """
    name = "check_matches_reference"
    r, ids, w = _inputs(rewards, group_ids, num_groups, where)
    got = _call(name, estimator, r, ids, num_groups, w)
    want = reference_advantages(r, ids, num_groups, w, config=config, eps=eps)
    live = _live(ids, num_groups, w)
    what = f"disagrees with the reference config {config!r} (eps={eps:g})"
    _compare_groups(name, what, got, want, r.astype(np.float64), ids, live, num_groups, rtol, atol)


# --- the Hypothesis-driven suite -----------------------------------------------------------------------


def _well_conditioned(case: GroupedRewards, max_condition: float) -> bool:
    r = case.rewards.astype(np.float64)
    live = _live(case.group_ids, case.num_groups, case.where)
    for rows in _groups(case.group_ids, live, case.num_groups):
        kappa = _condition(r[rows])
        if math.isfinite(kappa) and kappa > max_condition:
            return False
    return True


_FACTORS = (0.5, 2.0, 3.0, 0.1, 1e3)


class _SuiteConfig:
    """The options shared by :func:`run_invariant_suite` and :class:`AdvantageInvariants`."""

    centered: bool = True
    std_normalized: bool = False
    reference: ReferenceConfig | None = None
    reference_eps: float = 0.0
    masks: bool | None = None
    nan: bool = True
    padding: bool = True
    min_size: int = 1
    max_size: int = 6
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
            masks=self.masks,
            nan=self.nan,
            padding=self.padding,
            dtype=self.dtype,
            kinds=self.kinds,
            magnitudes=self.magnitudes,
        )

    def _run_check(
        self, check: str, estimator: AdvantageEstimator, case: GroupedRewards, seed: int, factor: float
    ) -> None:
        args = (estimator, case.rewards, case.group_ids, case.num_groups, case.where)
        rtol, atol = self.rtol, self.atol
        if check == "output_contract":
            check_output_contract(*args)
        elif check == "masked_rows_isolated":
            check_masked_rows_isolated(*args, seed=seed)
        elif check == "row_permutation_equivariance":
            check_row_permutation_equivariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "group_relabel_invariance":
            check_group_relabel_invariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "group_sums_zero":
            check_group_sums_zero(*args, rtol=rtol, atol=atol)
        elif check == "constant_groups_zero":
            check_constant_groups_zero(*args, atol=self.constant_atol)
        elif check == "shift_invariance":
            check_shift_invariance(*args, seed=seed, rtol=rtol, atol=atol)
        elif check == "scale_invariance":
            check_scale_invariance(*args, factor=factor, rtol=rtol, atol=atol)
        elif check == "scale_linearity":
            check_scale_linearity(*args, factor=factor, rtol=rtol, atol=atol)
        elif check == "matches_reference":
            assert self.reference is not None
            check_matches_reference(
                *args, config=self.reference, eps=self.reference_eps, rtol=rtol, atol=atol
            )
        else:  # pragma: no cover - internal
            raise ValueError(check)

    def _checks(self) -> list[str]:
        checks = [
            "output_contract",
            "masked_rows_isolated",
            "row_permutation_equivariance",
            "group_relabel_invariance",
        ]
        if self.centered:
            checks += ["group_sums_zero", "constant_groups_zero", "shift_invariance"]
        if self.std_normalized:
            checks.append("scale_invariance")
        elif self.centered:
            checks.append("scale_linearity")
        if self.reference is not None:
            checks.append("matches_reference")
        return checks


def run_invariant_suite(
    estimator: AdvantageEstimator,
    *,
    centered: bool = True,
    std_normalized: bool = False,
    reference: ReferenceConfig | None = None,
    reference_eps: float = 0.0,
    checks: Sequence[str] | None = None,
    masks: bool | None = None,
    nan: bool = True,
    padding: bool = True,
    min_size: int = 1,
    max_size: int = 6,
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
) -> None:
    """Runs every applicable invariant on Hypothesis-drawn grouped rewards; raises on the first failure.

    Always: output contract, ignored rows isolated, row permutation equivariance, group relabelling
    invariance. ``centered``: group sums zero, constant groups exactly 0, per-group shift invariance,
    and (unless ``std_normalized``) A(k·r) = k·A(r). ``std_normalized``: A(k·r) = A(r).
    ``reference``: agreement with :func:`reference_advantages` (``config=reference``, ``eps=reference_eps``).
    ``checks`` restricts the list (names without the ``check_`` prefix).

    Inputs come from :func:`~kernel.testing.strategies.grouped_rewards` (``masks``, ``nan``,
    ``padding``, sizes, ``dtype``, ``kinds``, ``magnitudes``); examples with a group of condition
    κ > ``max_condition`` are discarded with ``assume``. ``max_examples`` None keeps the active
    Hypothesis profile's count; ``hypothesis_settings`` passes further ``hypothesis.settings``
    options (e.g. ``phases``).

    Raises:
      AssertionError: a check failed (Hypothesis reports the shrunk falsifying example).

    Examples:
      >>> import numpy as np
      >>> def centred(r, ids, p, where):  # float sums: constant groups may get ±1 ulp, so skip that check
      ...     live = (ids < p) if where is None else (ids < p) & where
      ...     idx, x = np.where(live, ids, p), np.where(live, r, 0.0)
      ...     mean = np.bincount(idx, x, p + 1) / np.maximum(np.bincount(idx, None, p + 1), 1)
      ...     return np.where(live, x - mean[idx], 0.0)
      >>> run_invariant_suite(centred, checks=["group_sums_zero", "masked_rows_isolated"], max_examples=20)
    """
    config = _SuiteConfig()
    for key, value in {
        "centered": centered,
        "std_normalized": std_normalized,
        "reference": reference,
        "reference_eps": reference_eps,
        "masks": masks,
        "nan": nan,
        "padding": padding,
        "min_size": min_size,
        "max_size": max_size,
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
    chosen = config._checks() if checks is None else [c.removeprefix("check_") for c in checks]
    if reference is None and "matches_reference" in chosen:
        raise ValueError("checks includes 'matches_reference' but reference is None")
    unknown = set(chosen) - set(_ALL_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; known: {_ALL_CHECKS}")

    overrides: dict[str, Any] = {"deadline": None, "report_multiple_bugs": False}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    overrides.update(hypothesis_settings or {})

    @settings(**overrides)
    @given(case=config._strategy(), seed=st.integers(0, 2**32 - 1), factor=st.sampled_from(_FACTORS))
    def suite(case: GroupedRewards, seed: int, factor: float) -> None:
        assume(_well_conditioned(case, config.max_condition))
        for check in chosen:
            config._run_check(check, estimator, case, seed, factor)

    suite()


_ALL_CHECKS: tuple[str, ...] = (
    "output_contract",
    "masked_rows_isolated",
    "row_permutation_equivariance",
    "group_relabel_invariance",
    "group_sums_zero",
    "constant_groups_zero",
    "shift_invariance",
    "scale_invariance",
    "scale_linearity",
    "matches_reference",
)


class AdvantageInvariants(_SuiteConfig):
    """The invariant suite as a pytest base class: subclass it as ``Test...`` and set ``estimator``.

    One test per invariant; those that do not apply to the configured estimator (see
    :func:`run_invariant_suite`) pass without drawing. Class attributes mirror the runner's keywords:
    ``centered``, ``std_normalized``, ``reference``, ``reference_eps``, ``masks``, ``nan``,
    ``padding``, ``min_size``, ``max_size``, ``max_groups``, ``dtype``, ``kinds``, ``magnitudes``,
    ``rtol``, ``atol``,
    ``constant_atol``, ``max_condition``, ``hypothesis_settings``. Example counts follow the active
    Hypothesis profile.

    Examples:
      >>> import numpy as np
      >>> class TestZero(AdvantageInvariants):
      ...     estimator = staticmethod(lambda r, ids, p, where: np.zeros_like(r))
      >>> TestZero().test_output_contract()
    """

    estimator: Any = None

    def _estimator(self) -> AdvantageEstimator:
        raw = inspect.getattr_static(type(self), "estimator")
        fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        if fn is None:
            raise TypeError(f"{type(self).__name__}.estimator is not set")
        return cast(AdvantageEstimator, fn)

    def _draw_and_check(self, check: str) -> None:
        if check not in self._checks():
            return
        estimator = self._estimator()

        @settings(deadline=None, report_multiple_bugs=False, **self.hypothesis_settings)
        @given(case=self._strategy(), seed=st.integers(0, 2**32 - 1), factor=st.sampled_from(_FACTORS))
        def inner(case: GroupedRewards, seed: int, factor: float) -> None:
            assume(_well_conditioned(case, self.max_condition))
            self._run_check(check, estimator, case, seed, factor)

        inner()

    def test_output_contract(self) -> None:
        """Shape, dtype, finite live rows, zero ignored rows, inputs untouched, deterministic."""
        self._draw_and_check("output_contract")

    def test_masked_rows_isolated(self) -> None:
        """Changing an ignored row's reward (even to NaN) changes nothing."""
        self._draw_and_check("masked_rows_isolated")

    def test_row_permutation_equivariance(self) -> None:
        """Shuffling rows shuffles advantages."""
        self._draw_and_check("row_permutation_equivariance")

    def test_group_relabel_invariance(self) -> None:
        """Renaming groups changes nothing."""
        self._draw_and_check("group_relabel_invariance")

    def test_group_sums_zero(self) -> None:
        """Centred: advantages sum to zero per group."""
        self._draw_and_check("group_sums_zero")

    def test_constant_groups_zero(self) -> None:
        """Centred: a constant group gives exactly 0."""
        self._draw_and_check("constant_groups_zero")

    def test_shift_invariance(self) -> None:
        """Centred: adding a constant per group changes nothing."""
        self._draw_and_check("shift_invariance")

    def test_scale_invariance(self) -> None:
        """Std-normalised: positive scaling changes nothing."""
        self._draw_and_check("scale_invariance")

    def test_scale_linearity(self) -> None:
        """Centred only: positive scaling scales the advantages."""
        self._draw_and_check("scale_linearity")

    def test_matches_reference(self) -> None:
        """Agreement with the slow reference config, when one is set."""
        self._draw_and_check("matches_reference")
