"""Rubrics as arrays: weighted reward components, with missing components explicit.

A rubric scores each reward row (e.g. one agent of one debate) from C components (correctness, format,
peer votes, length, ...) in ``components_PG_C``; ``where`` marks the components that exist for a row.
The weight of component c for row r is w_rc: ``weights_A_C[actor_ids_PG[r], c]`` (per-actor weights),
else ``weights_C[c]``, else 1. With m_rc = ``where[r, c]``:

  present weight   W_r = Σ_c m_rc·w_rc,   full weight  F_r = Σ_c w_rc,   coverage_r = W_r / F_r
  missing="zero":         r_r = Σ_c m_rc·w_rc·x_rc                          (legos: unscored is 0)
  missing="renormalize":  r_r = F_r · Σ_c m_rc·w_rc·x_rc / W_r   if W_r > 0, else ``empty``
  missing="error":        a row with an absent component of nonzero weight raises (numpy only)

A fully present row gets the weighted sum Σ_c w_rc·x_rc under every mode, which is the legos engine's
Rubric (a weighted sum of reward functions, weights 1 by default, actor → reward maps added up).
``"renormalize"`` (our default) scores a row with missing components by the weighted mean of what it
has, rescaled to the full weight: a component that could not be measured is never read as 0.
Absent entries are ignored whatever they hold (NaN included); a present NaN or ±inf is refused.

One implementation serves numpy and JAX (:mod:`kernel._namespace`); :mod:`kernel.jax` holds the twin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import as_mask, check_choice, check_real
from kernel._namespace import NUMPY, Backend

__all__ = [
    "RUBRIC_MISSING",
    "RUBRIC_PRESETS",
    "RubricMissing",
    "RubricRewards",
    "component_weights",
    "rubric_rewards",
]

RubricMissing = Literal["renormalize", "zero", "error"]
RUBRIC_MISSING: Final[tuple[str, ...]] = ("renormalize", "zero", "error")
"""The ways :func:`rubric_rewards` treats an absent component (see the module docstring)."""

RUBRIC_PRESETS: Final[Mapping[str, Mapping[str, Any]]] = {
    "default": {"missing": "renormalize"},
    "legos": {"missing": "zero"},
}
"""Keyword presets of :func:`rubric_rewards`: ``rubric_rewards(x, **RUBRIC_PRESETS["legos"])``.
``"legos"`` reproduces the legos Rubric (weights 1 by default, an unscored component adds 0);
``"default"`` rescales a row's present components to the full weight instead."""


class RubricRewards(NamedTuple):
    """Result of :func:`rubric_rewards`.

    Attributes:
      rewards_PG: float [R], the reward of each row.
      coverage_PG: float [R], W_r / F_r: the share of the row's weight that was present (1 when F_r = 0).
      component_mean_C: float [C], mean of each component over the rows where it is present (0 where
        it is present nowhere: see ``component_count_C``).
      component_count_C: int [C], rows where each component is present.
      contribution_mean_C: float [C], mean over all rows of each component's term m_rc·w_rc·x_rc in
        the weighted sum (before any rescaling): what each component adds to the reward on average.
    """

    rewards_PG: Any
    coverage_PG: Any
    component_mean_C: Any
    component_count_C: Any
    contribution_mean_C: Any


def component_weights(
    names: Sequence[str], weights: Mapping[str, float] | None = None, *, default: float = 1.0
) -> npt.NDArray[np.float64]:
    """Weights ``weights_C`` in the order of ``names`` from a name → weight mapping (legos style).

    Components the mapping does not name get ``default`` (legos: 1.0).

    Args:
      names: the component names, one per column of ``components_PG_C``, distinct.
      weights: name → weight (finite, ≥ 0), or None for all ``default``.
      default: keyword; weight of a component the mapping does not name.

    Returns:
      float64 [C].

    Raises:
      ValueError: a name the mapping gives that is not a component (the message lists the components),
        repeated names, or a negative or non-finite weight.
      TypeError: a weight that is not a real number, ``names`` that are not a sequence of strings, or
        ``weights`` that is not a mapping.

    Examples:
      >>> component_weights(["correct", "format", "votes"], {"votes": 0.5})
      array([1. , 1. , 0.5])
    """
    if isinstance(names, str | bytes):
        raise TypeError(f"names must be a sequence of component names, got the string {names!r}")
    cols = list(names)
    if not all(isinstance(c, str) for c in cols):
        raise TypeError(f"names must be strings, got {cols}")
    if len(set(cols)) != len(cols):
        raise ValueError(f"names must be distinct, got {cols}")
    if weights is not None and not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping name -> weight, got {type(weights).__name__}")
    given = dict(weights or {})
    unknown = [k for k in given if k not in cols]
    if unknown:
        raise ValueError(f"weights names unknown component(s) {unknown}; the components are {cols}")
    base = check_real(default, "default", finite=True)
    out = np.array([check_real(given.get(c, base), f"weights[{c!r}]", finite=True) for c in cols])
    if (out < 0).any():
        bad = cols[int(np.argmax(out < 0))]
        raise ValueError(f"weights[{bad!r}] must be >= 0, got {out[cols.index(bad)]}")
    return out


def rubric_rewards(
    components_PG_C: npt.ArrayLike,
    *,
    weights_C: npt.ArrayLike | None = None,
    weights_A_C: npt.ArrayLike | None = None,
    actor_ids_PG: npt.ArrayLike | None = None,
    where: npt.ArrayLike | None = None,
    missing: RubricMissing = "renormalize",
    empty: float = 0.0,
) -> RubricRewards:
    """Rewards of R rows from C weighted components, absent components explicit (module docstring).

      r_r = Σ_c w_rc·x_rc                 (every component present, every mode)
      r_r = F_r·Σ_c m_rc·w_rc·x_rc / W_r  (``missing="renormalize"``), Σ_c m_rc·w_rc·x_rc (``"zero"``)

    Args:
      components_PG_C: float [R, C], component values (absent entries are ignored, NaN allowed there).
      weights_C: keyword; float [C], one weight per component (finite, ≥ 0; default 1).
      weights_A_C: keyword; float [A, C], per-actor weights, row r uses row ``actor_ids_PG[r]``;
        excludes ``weights_C``.
      actor_ids_PG: keyword; int [R] in ``[0, A)``, the actor (role) of each row; required with
        ``weights_A_C`` only.
      where: keyword; bool [R, C], True where the component exists for the row (default all).
      missing: keyword; ``"renormalize"`` (default), ``"zero"`` (legos) or ``"error"``.
      empty: keyword; the reward of a row none of whose weighted components is present under
        ``"renormalize"`` (its coverage is 0).

    Returns:
      :class:`RubricRewards`; float64 for float64 input (numpy never downcasts).

    Raises:
      ValueError: shapes that disagree, a negative or non-finite weight (naming ``weights_C`` or
        ``weights_A_C``), an actor id outside ``[0, A)``, a present NaN or ±inf component, an unknown
        ``missing``, ``weights_C`` and ``weights_A_C`` together, ``weights_A_C`` without
        ``actor_ids_PG``, or (``missing="error"``) an absent component of nonzero weight, naming the
        first such row and column.
      TypeError: non-real components or weights, non-integer actor ids, a non-boolean ``where``.

    References:
      The legos self-play engine's Rubric (REFERENCE.md §10).

    Examples:
      >>> x = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, np.nan]])
      >>> present = np.array([[True, True, True], [True, True, False]])
      >>> rubric_rewards(x, weights_C=[1.0, 1.0, 2.0], where=present).rewards_PG
      array([1.5, 2. ])
      >>> rubric_rewards(x, weights_C=[1.0, 1.0, 2.0], where=present, missing="zero").rewards_PG
      array([1.5, 1. ])
      >>> r = rubric_rewards(x, weights_A_C=[[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], actor_ids_PG=[0, 1],
      ...     where=present)
      >>> r.rewards_PG, r.coverage_PG, r.component_count_C
      (array([1., 2.]), array([1. , 0.5]), array([2, 2, 1]))
    """
    check_choice(missing, "missing", RUBRIC_MISSING)
    return _rubric(NUMPY, components_PG_C, weights_C, weights_A_C, actor_ids_PG, where, missing, empty)


def _rubric(
    bk: Backend,
    components: Any,
    weights_c: Any,
    weights_ac: Any,
    actor_ids: Any,
    where: Any,
    missing: str,
    empty: float,
) -> RubricRewards:
    """The rubric on backend ``bk``; every shape check is static, value checks run when ``bk.eager``."""
    xp = bk.xp
    x = bk.as_float(components, "components_PG_C")
    if x.ndim != 2:
        raise ValueError(f"components_PG_C must have rank 2 [R, C], got shape {tuple(x.shape)}")
    rows, cols = int(x.shape[0]), int(x.shape[1])
    fill = check_real(empty, "empty")
    m = (
        xp.ones((rows, cols), dtype=bool)
        if where is None
        else as_mask(where, "where", shape=(rows, cols), xp=xp)
    )
    w = _weights(bk, weights_c, weights_ac, actor_ids, rows, cols, x.dtype)
    if bk.eager:
        _check_values(x, m, w, missing)
    values = xp.where(m, x, xp.zeros_like(x))  # absent entries (NaN allowed there) never enter
    mw = xp.where(m, w, xp.zeros_like(w))
    terms = mw * values
    present = xp.sum(mw, axis=1)
    full = xp.sum(w, axis=1)
    total = xp.sum(terms, axis=1)
    if missing == "zero":
        rewards = total
    else:
        scale = xp.where(present > 0, full / xp.where(present > 0, present, xp.ones_like(present)), 0.0)
        rewards = xp.where(present > 0, total * scale, xp.where(full > 0, xp.asarray(fill, x.dtype), total))
        rewards = rewards.astype(x.dtype)
    coverage = xp.where(full > 0, present / xp.where(full > 0, full, xp.ones_like(full)), 1.0).astype(x.dtype)
    count = xp.sum(m.astype(bk.count_dtype), axis=0)
    mean = xp.sum(values, axis=0) / xp.maximum(count, 1).astype(x.dtype)
    contribution = xp.sum(terms, axis=0) / max(rows, 1)
    return RubricRewards(rewards, coverage, mean, count, contribution)


def _weights(
    bk: Backend, weights_c: Any, weights_ac: Any, actor_ids: Any, rows: int, cols: int, dtype: Any
) -> Any:
    """w_rc as an [R, C] array of ``dtype``."""
    xp = bk.xp
    if weights_c is not None and weights_ac is not None:
        raise ValueError("pass weights_C or weights_A_C, not both")
    if weights_ac is None:
        if actor_ids is not None:
            raise ValueError("actor_ids_PG is read only with weights_A_C")
        if weights_c is None:
            return xp.ones((rows, cols), dtype=dtype)
        wc = bk.as_float(weights_c, "weights_C")
        if tuple(wc.shape) != (cols,):
            raise ValueError(f"weights_C must have shape ({cols},), one per component, got {tuple(wc.shape)}")
        if bk.eager:
            _check_weights(wc, "weights_C", dtype)
        return xp.broadcast_to(wc.astype(dtype), (rows, cols))
    wac = bk.as_float(weights_ac, "weights_A_C")
    if wac.ndim != 2 or int(wac.shape[1]) != cols:
        raise ValueError(f"weights_A_C must have shape [A, {cols}], got {tuple(wac.shape)}")
    if actor_ids is None:
        raise ValueError("weights_A_C needs actor_ids_PG, the actor of each row")
    ids = bk.as_int(actor_ids, "actor_ids_PG")
    if tuple(ids.shape) != (rows,):
        raise ValueError(f"actor_ids_PG must have shape ({rows},), one per row, got {tuple(ids.shape)}")
    if bk.eager:
        _check_weights(wac, "weights_A_C", dtype)
        actors = int(wac.shape[0])
        bad = (ids < 0) | (ids >= actors)
        if bool(bad.any()):
            raise ValueError(f"actor_ids_PG must lie in [0, {actors}), got {int(ids[np.argmax(bad)])}")
    return wac.astype(dtype)[ids]


def _check_weights(w: npt.NDArray[Any], name: str, dtype: Any) -> None:
    """Finite, ≥ 0, and the same in ``dtype`` (the components'): neither ±inf nor 0 after the cast."""
    if not bool(np.isfinite(w).all()) or bool((w < 0).any()):
        bad = w[~(np.isfinite(w) & (w >= 0))].ravel()[0]
        raise ValueError(f"{name} must be finite and >= 0, got {bad}")
    with np.errstate(over="ignore", under="ignore"):
        cast = w.astype(dtype)
    lost = ~np.isfinite(cast) | ((cast == 0) & (w != 0))
    if bool(lost.any()):
        raise ValueError(
            f"{name} must be representable in the components' dtype {np.dtype(dtype).name}, "
            f"got {w[lost].ravel()[0]}"
        )


def _check_values(x: npt.NDArray[Any], m: npt.NDArray[Any], w: npt.NDArray[Any], missing: str) -> None:
    bad = m & ~np.isfinite(x)
    if bool(bad.any()):
        r, c = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(
            f"components_PG_C[{r}, {c}] is present but not finite ({x[r, c]}): mark it absent in where"
        )
    if missing == "error":
        gap = ~m & (w != 0)
        if bool(gap.any()):
            r, c = (int(i[0]) for i in np.nonzero(gap))
            raise ValueError(
                f"where[{r}, {c}] is False: component {c} of row {r} is missing and has weight {w[r, c]} "
                '(missing="error"); use "renormalize" or "zero", or give it weight 0'
            )
