"""The scoring pipeline: transcripts → parsed turns → replayed episodes → the kernel's scoring core
(:func:`kernel.score_episodes`: votes → rewards → returns → advantages → datums), and what a run reports
of them.

- :mod:`adapters.pipeline.stages`: the stages, one function each (benchmarks time them apart), and
  :func:`score` / :func:`score_chunks`, which run them on a batch or a stream of chunks;
- :mod:`adapters.pipeline.records`: the JSON-ready record of each scored debate and skipped line;
- :mod:`adapters.pipeline.results`: those records read back (``score --out``'s lines), by a total reader;
- :mod:`adapters.pipeline.seen_ids`: the ids read so far, so that a stream finds an id an earlier chunk
  used, in memory that grows by about 2 bytes an id (the older ids go to a temporary file);
- :mod:`adapters.pipeline.summary`: the run's figures, of one batch or gathered chunk by chunk.

Every name is importable from here. Nothing in the pipeline prints or writes files: the CLI modules do.
"""

from __future__ import annotations

from adapters.pipeline.records import debate_records, skipped_records
from adapters.pipeline.results import ResultReader, ResultVote, ScoredRecord, SkippedRecord, read_result
from adapters.pipeline.seen_ids import SeenIds
from adapters.pipeline.stages import (
    AFTER_END_POLICIES,
    DEFAULT_CHUNK_SIZE,
    END_REASONS,
    AfterEnd,
    BatchResult,
    DatumOutput,
    ReplayedDebate,
    ScoreOptions,
    batch_wide,
    datum_output,
    end_reason,
    episodes_of,
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
    "AfterEnd",
    "BatchResult",
    "ChunkFigures",
    "DatumOutput",
    "ReplayedDebate",
    "ResultReader",
    "ResultVote",
    "ScoreAccumulator",
    "ScoreOptions",
    "ScoredRecord",
    "SeenIds",
    "SkippedRecord",
    "batch_wide",
    "chunk_figures",
    "datum_output",
    "debate_records",
    "end_reason",
    "episodes_of",
    "parse_turns",
    "read_result",
    "replay_debates",
    "score",
    "score_chunks",
    "skipped_records",
    "summary",
]
