"""The reference arithmetics of :func:`kernel.grouped_advantages`: each reference's dtype and order.

``arithmetic="torch_loop" | "torch_scatter" | "torch_view" | "python"`` reproduce, float32 rounding
artefacts included, what tinker-cookbook / verl / DrMAS (torch loops), verl's vectorized GRPO and RLOO
(``scatter_add``), TRL (``view`` + reductions) and legos (plain Python floats) computed. The formulas
are those of the estimator (see :mod:`kernel._advantages`); only the operation order differs:

* ``torch_loop``: float32; a group's sum in torch's CPU reduction order (:mod:`kernel._torch_sums`);
  σ from the float32 mean with float64 squares; RLOO as r·n/(n − 1) − μ·n/(n − 1).
* ``torch_scatter``: float32 sums accumulated row by row; var = (Σr² − (Σr)²/n)/(n − 1) in float32;
  RLOO as (n·r − Σr)/(n − 1).
* ``torch_view``: float32; torch reduction order; σ² = Σ(r − μ)²/n · n/(n − 1) in float32 (group and
  batch alike); RLOO as r − (Σr − r)/(n − 1).
* ``python``: float64 with plain left-to-right sums and σ = (Σa²/n) ** 0.5.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

from kernel._advantages_exact import CoreResult, check_singletons
from kernel._torch_sums import torch_segment_sums, torch_sum_rows

if TYPE_CHECKING:
    from kernel._advantages import AdvantageOptions, Arithmetic

__all__: list[str] = []

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]


def reference_core(
    x: FloatArray, valid: BoolArray | None, h: IntArray, p: int, options: AdvantageOptions
) -> CoreResult:
    """The estimator in a reference's dtype and operation order (``options.arithmetic``).

    Args:
      x: ``[PG]`` samples (excluded ones hold 0).
      valid: ``[PG]`` bool, samples that enter the statistics; None: all.
      h: ``[PG]`` group ids in ``[0, p]`` (``p``: padding).
      p: the number of groups.
      options: the estimator's options.

    Returns:
      a :class:`~kernel._advantages_exact.CoreResult`; rows whose advantage is not finite are flagged.
    """
    if valid is not None:
        h = np.where(valid, h, p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _reference_core_unguarded(x, h, p, options)


def _reference_core_unguarded(x: FloatArray, h: IntArray, p: int, options: AdvantageOptions) -> CoreResult:
    arithmetic, eps, scale, ddof = options.arithmetic, options.eps, options.scale, options.ddof
    dt = np.float64 if arithmetic == "python" else np.float32
    x = x.astype(dt, copy=False)
    n = np.bincount(h, minlength=p + 1)
    included = h < p
    nf: FloatArray = n.astype(dt)
    s: FloatArray
    if arithmetic == "python" or arithmetic == "torch_scatter":
        s = np.zeros(p + 1, dt)
        np.add.at(s, h, x)  # left to right, row by row
    else:
        s = torch_segment_sums(x, h, p + 1)
    mu: FloatArray = s / np.maximum(nf, dt(1))
    mu[p] = 0
    if options.baseline == "leave_one_out":
        a = _loo(x, h, s, mu, nf, arithmetic)
    else:
        a = x - mu[h]
    std = _reference_group_std(x, h, p, mu, s, n, ddof, options.var_floor, arithmetic)
    if scale == "group":
        denom = std + dt(eps)
        if options.min_std is None:
            a = a / denom[h]
        else:
            a = np.where((std > options.min_std)[h], a / denom[h], a)
    single = (n == 1)[h]
    check_singletons(options.singleton, n[:p])
    if options.singleton == "raw":
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
    a = a.astype(dt, copy=False)
    overflow = ~np.isfinite(a)
    overflow &= included
    return CoreResult(a, mean[:p], std[:p], n[:p].astype(np.int64), constant[:p], overflow)


def _loo(
    x: FloatArray, h: IntArray, s: FloatArray, mu: FloatArray, nf: FloatArray, arithmetic: Arithmetic
) -> Any:
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
    arithmetic: Arithmetic,
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
        v = torch_segment_sums(dev * dev, h, p + 1) / np.maximum(nf, dt(1))
        v = v * (nf / np.maximum(dof, 1).astype(dt))
        return np.where(dof > 0, np.sqrt(np.maximum(v, dt(var_floor))), dt(0))
    # Two passes: float64 squares around the (float32, for torch) mean, summed row by row.
    dev64 = x.astype(np.float64) - mu.astype(np.float64)[h]
    m2 = np.zeros(p + 1, np.float64)
    np.add.at(m2, h, dev64 * dev64)
    var64 = np.maximum(m2 / np.maximum(dof, 1), var_floor)
    if arithmetic == "python":
        root = np.array([math.pow(v, 0.5) for v in var64.tolist()], np.float64)
    else:
        root = np.sqrt(var64)
    return np.where(dof > 0, root, 0.0).astype(dt)


def _reference_batch_mean(x: FloatArray, included: BoolArray, arithmetic: Arithmetic) -> Any:
    dt = x.dtype.type
    xs = x[included]
    if xs.size == 0:
        return dt(0)
    if arithmetic == "python":
        total = 0.0
        for v in xs.tolist():
            total += v
        return np.float64(total / xs.size)
    return torch_sum_rows(xs[None, :])[0] / dt(xs.size)


def _reference_batch_std(x: FloatArray, included: BoolArray, ddof: int, arithmetic: Arithmetic) -> Any:
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
        v = torch_sum_rows((dev * dev)[None, :])[0] / dt(k)
        return np.sqrt(v * (dt(k) / dt(k - ddof)))
    dev64 = xs.astype(np.float64) - np.float64(mu)
    m2 = 0.0
    for sq in (dev64 * dev64).tolist():
        m2 += sq
    var = m2 / (k - ddof)
    return dt(math.pow(var, 0.5) if arithmetic == "python" else math.sqrt(var))
