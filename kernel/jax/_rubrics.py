"""JAX twin of :mod:`kernel._rubrics`: the same rubric arithmetic on ``jax.numpy`` (jit / vmap friendly)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.typing import ArrayLike

from kernel._checks import check_choice
from kernel._namespace import NUMPY
from kernel._rubrics import RUBRIC_MISSING, RubricMissing, RubricRewards, _check_values, _rubric, _weights
from kernel.jax._checks import JAX

__all__ = ["rubric_rewards"]


def rubric_rewards(
    components_PG_C: ArrayLike,
    *,
    weights_C: ArrayLike | None = None,
    weights_A_C: ArrayLike | None = None,
    actor_ids_PG: ArrayLike | None = None,
    where: ArrayLike | None = None,
    missing: RubricMissing = "renormalize",
    empty: float = 0.0,
) -> RubricRewards:
    """Rewards of R rows from C weighted components; the twin of :func:`kernel.rubric_rewards`.

      r_r = F_r·Σ_c m_rc·w_rc·x_rc / W_r  (``"renormalize"``),   Σ_c m_rc·w_rc·x_rc  (``"zero"``)

    Same arguments and results (JAX arrays; float32 stays float32). When no input is traced (a call
    outside ``jax.jit``, with host or JAX arrays) the values are checked first, as numpy does (a negative
    weight, an actor id out of range, a present NaN); under ``jit`` only shapes and dtypes are checked.
    ``missing="error"`` needs a data-dependent error and is numpy-only.

    Raises:
      ValueError, TypeError: as :func:`kernel.rubric_rewards`; ``missing="error"``.

    Examples:
      >>> import jax.numpy as jnp
      >>> x = jnp.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0]])
      >>> present = jnp.array([[True, True, True], [True, True, False]])
      >>> jax.jit(lambda x, m: rubric_rewards(x, weights_C=jnp.array([1.0, 1.0, 2.0]), where=m))(
      ...     x, present).rewards_PG
      Array([1.5, 2. ], dtype=float32)
    """
    check_choice(missing, "missing", RUBRIC_MISSING)
    if missing == "error":
        raise ValueError(
            'missing="error" raises on data, which jit cannot: use kernel.rubric_rewards (numpy)'
        )
    given = (components_PG_C, weights_C, weights_A_C, actor_ids_PG, where)
    if not any(isinstance(a, jax.core.Tracer) for a in given):  # concrete values (host or JAX): checkable
        _host_checks(*(None if a is None else np.asarray(a) for a in given))
    return _rubric(JAX, components_PG_C, weights_C, weights_A_C, actor_ids_PG, where, missing, empty)


def _host_checks(components: Any, weights_c: Any, weights_ac: Any, actor_ids: Any, where: Any) -> None:
    """numpy's value checks on host inputs (shapes and dtypes are checked again by the JAX path)."""
    x = NUMPY.as_float(components, "components_PG_C")
    if x.ndim != 2:
        return  # the JAX path raises naming the argument
    rows, cols = int(x.shape[0]), int(x.shape[1])
    m = np.ones((rows, cols), dtype=bool) if where is None else np.asarray(where)
    if m.dtype != np.bool_ or m.shape != (rows, cols):
        return
    w = _weights(NUMPY, weights_c, weights_ac, actor_ids, rows, cols, x.dtype)
    _check_values(x, m, w, "renormalize")
