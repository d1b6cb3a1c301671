"""The figures of a scoring run: :func:`summary` of one batch, and :class:`ScoreAccumulator`, which gathers
them chunk by chunk (exact merges) for a streamed run."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import kernel
from adapters._json import round_or_none
from adapters.pipeline.stages import (
    DATUM_REASONS,
    END_REASONS,
    BatchResult,
    DatumOutput,
    ScoreOptions,
    datum_stats,
    logprob_sums,
)
from adapters.transcripts import TranscriptError
from kernel.checks import check_type

__all__ = ["ChunkFigures", "ScoreAccumulator", "chunk_figures", "summary"]


def summary(result: BatchResult) -> dict[str, Any]:
    """Batch figures: counts of lines, debates scored and skipped (by reason), ends, parse failures (by
    reason), consensus rate, votes, reward and advantage statistics, datum statistics.

    JSON-ready and strict: a figure that is not finite is None (JSON null), never NaN or Infinity.
    The same as :meth:`ScoreAccumulator.summary` after adding ``result`` alone.

    Examples:
      >>> from adapters import data
      >>> from adapters.transcripts import debate_from_record
      >>> debates = [debate_from_record(r) for r in data.read_jsonl(data.SAMPLE_DEBATES)[:4]]
      >>> from adapters.pipeline import score
      >>> s = summary(score(debates))
      >>> s["debates_scored"], s["votes_total"], s["parse_failures"], s["ends"]
      (4, 10, 1, {'consensus': 1, 'max_rounds': 2, 'parse_error': 1, 'open': 0})
    """
    check_type(result, BatchResult, "result")
    acc = ScoreAccumulator(result.options)
    acc.add(result)
    return acc.summary()


def _stats(x: npt.NDArray[Any]) -> dict[str, float | None]:
    if x.size == 0:  # no agent scored: no figure (null in JSON, n/a in text), not a mean of 0
        return {"mean": None, "std": None, "min": None, "max": None}
    return {
        "mean": round_or_none(np.mean(x)),
        "std": round_or_none(np.std(x)),
        "min": round_or_none(np.min(x)),
        "max": round_or_none(np.max(x)),
    }


@dataclass(frozen=True)
class ChunkFigures:
    """What :class:`ScoreAccumulator` keeps of one scored chunk: plain counts, the per-agent figures and
    the datums, without the chunk's debates (small, and picklable, so a chunk scored in another process
    sends back only this)."""

    errors: tuple[TranscriptError, ...]
    counts: Counter[str]
    ends: Counter[str]
    failures: Counter[str]
    values: dict[str, npt.NDArray[Any]]
    datums: DatumOutput | None
    scored: int


def chunk_figures(result: BatchResult) -> ChunkFigures:
    """The :class:`ChunkFigures` of a scored chunk.

    Examples:
      >>> line = '{"id": "%s", "question": "q", "num_agents": 2, "turns": [{"agent": 0, "text": "x"}]}'
      >>> from adapters.pipeline import score_chunks
      >>> (chunk,) = score_chunks([line % "a", line % "b", "{"])
      >>> f = chunk_figures(chunk)
      >>> f.scored, dict(f.ends), [e.reason for e in f.errors], f.values["rewards"].shape
      (2, {'parse_error': 2}, ['bad_json'], (4,))
    """
    check_type(result, BatchResult, "result")
    num = result.numeric
    c: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for r in result.replayed:
        accepted = r.replay.accepted
        c["turns"] += len(accepted)
        c["ignored"] += len(r.ignored_turns)
        ends[r.end] += 1
        for k in accepted:
            pr = r.parsed[k]
            c["self_dropped"] += pr.self_votes_dropped
            c["unreadable"] += len(pr.malformed_votes)
            if not pr.ok:
                failures[pr.reason] += 1
    c["votes_total"] += int(np.sum(num.pairwise.total_votes_P))
    c["votes_malformed"] += int(np.sum(num.pairwise.malformed_P))
    c["votes_round1_dropped"] += int(np.sum(num.round1_dropped_V))
    values = {
        "rewards": np.asarray(num.pairwise.rewards_PG),
        "returns": np.asarray(num.returns_PG),
        "advantages": np.asarray(num.advantages_PG),
    }
    return ChunkFigures(tuple(result.errors), c, ends, failures, values, result.datums, len(result.replayed))


class ScoreAccumulator:
    """What the summary and the datum file of a streamed run need, gathered chunk by chunk.

    Counts and sums are merged exactly. The reward, return and advantage statistics (mean, std, min,
    max) are taken over the concatenated per-agent arrays at the end (one float per agent and figure,
    not a Python object per debate), so they equal a whole-file run's to the last bit. Skipped lines
    (their errors) and the datum arrays are kept whole: the first are few, the second are the output.

    Examples:
      >>> acc = ScoreAccumulator(ScoreOptions())
      >>> from adapters.pipeline import score_chunks
      >>> for chunk in score_chunks([], options=ScoreOptions()):
      ...     acc.add(chunk)
      >>> acc.summary()["debates_scored"], acc.datums() is None
      (0, True)
    """

    def __init__(
        self,
        options: ScoreOptions,
        *,
        datum_sink: Callable[[dict[str, npt.NDArray[Any]]], None] | None = None,
    ) -> None:
        self.options = options
        self._sink = datum_sink
        self._datum_sums: list[Any] = [0, 0, 0.0]
        self.num_lines = 0
        self.num_blank = 0
        self.scored = 0
        self.errors: list[TranscriptError] = []
        self.counts: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self._values: dict[str, list[npt.NDArray[Any]]] = {"rewards": [], "returns": [], "advantages": []}
        self._datums: dict[str, list[npt.NDArray[Any]]] = {}
        self._datum_counts: Counter[str] = Counter()
        self._positions = 0

    def add(self, result: BatchResult) -> None:
        """Adds one chunk (its line counts are the running totals of the stream)."""
        self.num_lines = max(self.num_lines, result.num_lines)
        self.num_blank = max(self.num_blank, result.num_blank)
        self.add_figures(chunk_figures(result))

    def add_figures(self, figures: ChunkFigures) -> None:
        """Adds one chunk's :func:`chunk_figures` (made here or in another process); chunks go in input
        order. Line counts are not touched: set :attr:`num_lines` and :attr:`num_blank` as the stream
        is read."""
        self.errors.extend(figures.errors)
        self.counts.update(figures.counts)
        self.ends.update(figures.ends)
        self.failures.update(figures.failures)
        for name, values in figures.values.items():
            self._values[name].append(values)
        if figures.datums is not None:
            self._add_datums(figures.datums, self.scored)
        self.scored += figures.scored

    def _add_datums(self, datums: DatumOutput, debates_before: int) -> None:
        arrays = dict(datums.arrays)
        first = not self._datums
        trajectories_before = self._datum_counts["trajectories"]
        offsets = np.asarray(arrays["offsets_D1"], dtype=np.int64)
        arrays["offsets_D1"] = offsets + self._positions if first else offsets[1:] + self._positions
        arrays["traj_ids_D"] = np.asarray(arrays["traj_ids_D"]) + trajectories_before
        arrays["debate_D"] = np.asarray(arrays["debate_D"]) + debates_before
        self._positions += int(offsets[-1])
        for name in ("datums", "tokens", "trajectories", *DATUM_REASONS):
            self._datum_counts[name] += int(datums.stats[name])
        self._datum_mode = str(datums.stats["mode"])
        n_action, exact, nonfinite = logprob_sums(arrays)
        self._datum_sums[0] += n_action
        self._datum_sums[1] += exact
        self._datum_sums[2] += nonfinite
        if self._sink is not None:
            self._sink(arrays)
            self._datums.setdefault("offsets_D1", [])  # marks that datums exist
            return
        for name, x in arrays.items():
            self._datums.setdefault(name, []).append(x)

    def datums(self) -> DatumOutput | None:
        """The datums of every chunk as one :class:`DatumOutput`, as a whole-file run builds them
        (with a ``datum_sink``, the arrays went there: ``arrays`` is empty, ``stats`` complete)."""
        if not self._datums:
            return None
        stats = datum_stats(dict(self._datum_counts), self._sums(), self._datum_mode)
        if self._sink is not None:
            return DatumOutput({}, stats)
        return DatumOutput({name: np.concatenate(parts) for name, parts in self._datums.items()}, stats)

    def _sums(self) -> tuple[int, int, float]:
        n_action, exact, nonfinite = self._datum_sums
        return int(n_action), int(exact), float(nonfinite)

    def values(self, name: str) -> npt.NDArray[Any]:
        """Every scored agent's ``"rewards"``, ``"returns"`` or ``"advantages"``, in input order."""
        parts = self._values[name]
        return np.concatenate(parts) if parts else np.zeros(0)

    def sorted_errors(self) -> list[TranscriptError]:
        """Every skipped line's error, by line."""
        return sorted(self.errors, key=lambda e: e.line)

    def summary(self) -> dict[str, Any]:
        """The figures of :func:`summary` for everything added."""
        c = self.counts
        scoring = self.options.scoring
        skipped = Counter(e.reason for e in self.errors)
        failures = sum(self.failures.values())
        values = {k: self.values(k) for k in self._values}
        out: dict[str, Any] = {
            "policy": scoring.parse_policy,
            "reward": scoring.reward_mode,
            "estimator": kernel.estimator_spec(scoring.estimator),
            "estimator_options": {
                f.name: getattr(scoring.estimator, f.name)
                for f in dataclasses.fields(scoring.estimator)
                if _jsonable(getattr(scoring.estimator, f.name))
            },
            "lines": self.num_lines,
            "blank_lines": self.num_blank,
            "debates_scored": self.scored,
            "debates_skipped": len(self.errors),
            "skipped_by_reason": dict(sorted(skipped.items())),
            "turns_scored": c["turns"],
            "turns_ignored_after_end": c["ignored"],
            "ends": {k: self.ends.get(k, 0) for k in END_REASONS},
            "parse_failures": failures,
            "parse_failures_by_reason": dict(sorted(self.failures.items())),
            "parse_failure_rate": round_or_none(failures / max(c["turns"], 1)),
            "consensus_rate": round_or_none(self.ends.get("consensus", 0) / max(self.scored, 1)),
            "votes_total": c["votes_total"],
            "votes_malformed": c["votes_malformed"],
            "votes_round1_dropped": c["votes_round1_dropped"],
            "votes_self_dropped": c["self_dropped"],
            "comparison_lines_unreadable": c["unreadable"],
            "rewards": _stats(values["rewards"]),
            "returns": _stats(values["returns"]),
            "advantages": _stats(values["advantages"]),
        }
        datums = self.datums()
        if datums is not None:
            out["datums"] = dict(datums.stats)
        return out


def _jsonable(v: Any) -> bool:
    return v is None or (
        isinstance(v, bool | int | float | str) and not (isinstance(v, float) and not math.isfinite(v))
    )
