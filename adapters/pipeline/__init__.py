"""The scoring pipeline: transcripts → parsed turns → replayed episodes → votes → rewards → returns →
advantages → datums, and what a run reports of them.

- :mod:`adapters.pipeline.stages`: the stages, one function each (benchmarks time them apart), and
  :func:`score` / :func:`score_chunks`, which run them on a batch or a stream of chunks;
- :mod:`adapters.pipeline.estimator_spec`: the ``--estimator`` spec language (:func:`resolve_estimator`);
- :mod:`adapters.pipeline.records`: the JSON-ready record of each scored debate and skipped line;
- :mod:`adapters.pipeline.summary`: the run's figures, of one batch or gathered chunk by chunk.

Every name is importable from here. Nothing in the pipeline prints or writes files: the CLI modules do.
"""

from __future__ import annotations

from adapters.pipeline.estimator_spec import check_estimator, resolve_estimator
from adapters.pipeline.records import debate_records, skipped_records
from adapters.pipeline.stages import (
    AFTER_END_POLICIES,
    DEFAULT_CHUNK_SIZE,
    END_REASONS,
    ROUND1_VOTE_POLICIES,
    AfterEnd,
    BatchResult,
    DatumOutput,
    NumericResult,
    ReplayedDebate,
    Round1Votes,
    ScoreOptions,
    batch_wide,
    build_datums,
    compute_numeric,
    end_reason,
    parse_turns,
    replay_debates,
    score,
    score_chunks,
)
from adapters.pipeline.summary import ChunkFigures, ScoreAccumulator, chunk_figures, summary

__all__ = [
    "AFTER_END_POLICIES",
    "DEFAULT_CHUNK_SIZE",
    "END_REASONS",
    "ROUND1_VOTE_POLICIES",
    "AfterEnd",
    "BatchResult",
    "ChunkFigures",
    "DatumOutput",
    "NumericResult",
    "ReplayedDebate",
    "Round1Votes",
    "ScoreAccumulator",
    "ScoreOptions",
    "batch_wide",
    "build_datums",
    "check_estimator",
    "chunk_figures",
    "compute_numeric",
    "debate_records",
    "end_reason",
    "parse_turns",
    "replay_debates",
    "resolve_estimator",
    "score",
    "score_chunks",
    "skipped_records",
    "summary",
]
