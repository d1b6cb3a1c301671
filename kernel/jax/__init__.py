"""JAX twins of the numeric kernel: same signatures as :mod:`kernel`, jit / vmap friendly.

Static shapes only: group counts (``num_groups``) and sizes are Python ints the caller keeps fixed
(bucket them to avoid retracing). Nothing here calls ``jax.jit`` itself; jit at your boundary.
"""

from kernel.jax import (
    _advantages,
    _bradley_terry,
    _judge_rewards,
    _losses,
    _metrics,
    _rae,
    _rewards,
    _rubrics,
)
from kernel.jax._advantages import *  # noqa: F403
from kernel.jax._bradley_terry import *  # noqa: F403
from kernel.jax._judge_rewards import *  # noqa: F403
from kernel.jax._losses import *  # noqa: F403
from kernel.jax._metrics import *  # noqa: F403
from kernel.jax._rae import *  # noqa: F403
from kernel.jax._rewards import *  # noqa: F403
from kernel.jax._rubrics import *  # noqa: F403

__all__ = sorted(
    {
        *_advantages.__all__,
        *_bradley_terry.__all__,
        *_judge_rewards.__all__,
        *_losses.__all__,
        *_metrics.__all__,
        *_rae.__all__,
        *_rewards.__all__,
        *_rubrics.__all__,
    }
)
