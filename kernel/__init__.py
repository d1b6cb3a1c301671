"""debate-kernel: a pure-functional kernel for RL of debating LLM agents.

numpy is the canonical path; JAX twins with the same signatures live in :mod:`kernel.jax`
(install the ``jax`` extra). Hypothesis strategies and invariant suites live in :mod:`kernel.testing`.
"""

from kernel import (
    _advantages,
    _bradley_terry,
    _datums,
    _episode,
    _estimator_spec,
    _groups,
    _judge_rewards,
    _losses,
    _metrics,
    _observe,
    _parse,
    _parse_batch,
    _parse_spans,
    _rae,
    _render,
    _rewards,
    _rubrics,
    _scoring,
    _types,
    _votes,
)
from kernel._advantages import *  # noqa: F403
from kernel._bradley_terry import *  # noqa: F403
from kernel._datums import *  # noqa: F403
from kernel._episode import *  # noqa: F403
from kernel._estimator_spec import *  # noqa: F403
from kernel._groups import *  # noqa: F403
from kernel._judge_rewards import *  # noqa: F403
from kernel._losses import *  # noqa: F403
from kernel._metrics import *  # noqa: F403
from kernel._observe import *  # noqa: F403
from kernel._parse import *  # noqa: F403
from kernel._parse_batch import *  # noqa: F403
from kernel._parse_spans import *  # noqa: F403
from kernel._rae import *  # noqa: F403
from kernel._render import *  # noqa: F403
from kernel._rewards import *  # noqa: F403
from kernel._rubrics import *  # noqa: F403
from kernel._scoring import *  # noqa: F403
from kernel._types import *  # noqa: F403
from kernel._votes import *  # noqa: F403

__version__ = "0.1.0"

__all__ = sorted(
    {
        *_advantages.__all__,
        *_bradley_terry.__all__,
        *_datums.__all__,
        *_episode.__all__,
        *_estimator_spec.__all__,
        *_groups.__all__,
        *_judge_rewards.__all__,
        *_losses.__all__,
        *_metrics.__all__,
        *_observe.__all__,
        *_parse.__all__,
        *_parse_batch.__all__,
        *_parse_spans.__all__,
        *_rae.__all__,
        *_render.__all__,
        *_rewards.__all__,
        *_rubrics.__all__,
        *_scoring.__all__,
        *_types.__all__,
        *_votes.__all__,
    }
)
