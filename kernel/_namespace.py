"""The array namespace behind the kernel's write-once numerics: numpy here, ``jax.numpy`` in kernel.jax.

numpy ≥ 2 and ``jax.numpy`` share the array API (``where``, ``sum``, ``count_nonzero``, ``result_type``,
``asarray``, ...), so a numeric function written against ``bk.xp`` runs on both. A :class:`Backend`
carries that namespace plus the few operations that are not shared: argument coercion (numpy keeps
float64, JAX defaults to float32), segment sums (``np.bincount`` / ``jax.ops.segment_sum``),
stop-gradient, the integer dtype of counts, and whether values are concrete enough to be range-checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from kernel._checks import as_float_array, as_int_array

__all__: list[str] = []


class Backend(NamedTuple):
    """What differs between numpy and JAX; everything else is the array API both share.

    Attributes:
      xp: the namespace, ``numpy`` or ``jax.numpy``.
      as_float: ``(x, name) -> float array`` of any rank, never downcast; raises naming ``name``.
      as_int: ``(x, name) -> integer array`` of any rank; raises naming ``name``.
      segment_sum: ``(data, ids, n) -> [n]`` sums by id; ids outside ``[0, n)`` (padding) drop out.
      stop_gradient: identity for numpy, ``jax.lax.stop_gradient`` for JAX.
      count_dtype: dtype of token counts (int64 numpy, int32 JAX).
      eager: values are concrete (numpy), so data-dependent checks may raise.
    """

    xp: Any
    as_float: Callable[[Any, str], Any]
    as_int: Callable[[Any, str], Any]
    segment_sum: Callable[[Any, Any, int], Any]
    stop_gradient: Callable[[Any], Any]
    count_dtype: Any
    eager: bool

    def wide(self, x: Any) -> Any:
        """``x`` in a float dtype of at least 32 bits, for sums and divisions by counts: a float16
        or bfloat16 count overflows past 65,504 tokens (float32 and float64 are returned as they are)."""
        return self.xp.asarray(x, dtype=self.xp.result_type(x.dtype, self.xp.float32))


def _segment_sum(data: npt.NDArray[Any], ids: npt.NDArray[np.int64], n: int) -> npt.NDArray[Any]:
    return np.bincount(ids, weights=data, minlength=n + 1)[:n].astype(data.dtype)


NUMPY: Final = Backend(
    xp=np,
    as_float=lambda x, name: as_float_array(x, name, ndim=np.ndim(x)),
    as_int=lambda x, name: as_int_array(x, name, ndim=np.ndim(x)),
    segment_sum=_segment_sum,
    stop_gradient=lambda x: x,
    count_dtype=np.int64,
    eager=True,
)
