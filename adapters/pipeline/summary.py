"""The figures of a scoring run: :func:`summary` of one batch, and :class:`ScoreAccumulator`, which gathers
them chunk by chunk (exact merges) for a streamed run."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

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

_FIGURES: Final = ("rewards", "returns", "advantages")
"""The per-agent figures whose statistics the summary gives."""


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
    acc = ScoreAccumulator(result.options, keep_values=False)
    acc.add(result)
    return acc.summary()


class _Moments:
    """Count, exact Σx and Σx², least and greatest of float64 values added part by part: the mean and
    standard deviation of everything added, in memory that does not grow with the values.

    Every finite float64 is an integer times 2⁻¹¹²⁶ (its 53-bit significand times a power of two), so
    the sums are kept as Python integers on that scale and merge exactly: the figures do not depend on
    how the values were split. The mean is Σx / n and the variance (nΣx² − (Σx)²) / n², each rounded
    once (numpy's ``mean`` and ``std`` round at every pairwise step, so they may differ from these in
    the last bit). A NaN makes every figure NaN; with ±inf the mean is that infinity (NaN when both
    occur) and the standard deviation NaN, as numpy gives them.

    Examples:
      >>> m = _Moments()
      >>> m.add(np.array([0.1, 0.2])); m.add(np.array([0.3]))
      >>> m.count, m.mean(), m.std(), m.min, m.max
      (3, 0.2, 0.0816496580927726, 0.1, 0.3)
      >>> big = _Moments()
      >>> big.add(np.array([1e16, 1.0, -1e16]))
      >>> big.mean(), float(np.mean([1e16, 1.0, -1e16]))  # exact, then rounded once
      (0.3333333333333333, 0.0)
    """

    __slots__ = ("_nan", "_neg_inf", "_pos_inf", "_sum", "_sum_sq", "count", "max", "min")
    _SCALE = 1126  # every finite float64 is an integer times 2^-(1074 + 52)

    def __init__(self) -> None:
        self.count = 0
        self._sum = 0
        self._sum_sq = 0
        self._nan = self._pos_inf = self._neg_inf = False
        self.min = math.inf
        self.max = -math.inf

    def add(self, values: npt.ArrayLike) -> None:
        """Adds ``values`` (any shape; as float64)."""
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if x.size == 0:
            return
        self.count += x.size
        finite = np.isfinite(x)
        if not finite.all():
            bad = x[~finite]
            self._nan |= bool(np.isnan(bad).any())
            self._pos_inf |= bool((bad == np.inf).any())
            self._neg_inf |= bool((bad == -np.inf).any())
            x = x[finite]
            if x.size == 0:
                return
        self.min = min(self.min, float(x.min()))
        self.max = max(self.max, float(x.max()))
        total, squares = _exact_sums(x, self._SCALE)
        self._sum += total
        self._sum_sq += squares

    def mean(self) -> float:
        """Σx / n, rounded once (NaN when nothing was added)."""
        if self._nan or self.count == 0 or (self._pos_inf and self._neg_inf):
            return math.nan
        if self._pos_inf or self._neg_inf:
            return math.inf if self._pos_inf else -math.inf
        return self._sum / (self.count << self._SCALE)

    def std(self) -> float:
        """√((nΣx² − (Σx)²) / n²), the variance rounded once (ddof 0; NaN when nothing was added)."""
        if self._nan or self._pos_inf or self._neg_inf or self.count == 0:
            return math.nan
        n = self.count
        spread, scale = n * self._sum_sq - self._sum * self._sum, (n * n) << (2 * self._SCALE)
        half = (spread.bit_length() - scale.bit_length()) // 2  # variance ~ 4^half: beyond float64 at
        if half >= 0:  # the extremes, its root is not, so the root of variance / 4^half is scaled back
            return math.ldexp(math.sqrt(spread / (scale << (2 * half))), half)
        return math.ldexp(math.sqrt((spread << (-2 * half)) / scale), half)

    def figures(self) -> dict[str, float | None]:
        """mean, std, min and max rounded for a JSON record (None when not finite or nothing added)."""
        if self.count == 0:  # no agent scored: no figure (null in JSON, n/a in text), not a mean of 0
            return {"mean": None, "std": None, "min": None, "max": None}
        low, high = (math.nan, math.nan) if self._nan else (self.min, self.max)
        if self._neg_inf:
            low = math.nan if self._nan else -math.inf
        if self._pos_inf:
            high = math.nan if self._nan else math.inf
        return {
            "mean": round_or_none(self.mean()),
            "std": round_or_none(self.std()),
            "min": round_or_none(low),
            "max": round_or_none(high),
        }


def _exact_sums(x: npt.NDArray[np.float64], scale: int) -> tuple[int, int]:
    """(Σx · 2^scale, Σx² · 2^(2 scale)) exactly, for finite float64 ``x``, in blocks of :data:`_BLOCK`."""
    total = squares = 0
    for start in range(0, x.size, _BLOCK):
        t, q = _block_sums(x[start : start + _BLOCK], scale)
        total, squares = total + t, squares + q
    return total, squares


def _block_sums(x: npt.NDArray[np.float64], scale: int) -> tuple[int, int]:
    """:func:`_exact_sums` of at most :data:`_BLOCK` values: x = m · 2^(e − 53) with an integer
    |m| < 2⁵³, split into 18-bit limbs so that every per-exponent sum of limb products fits int64."""
    mant, exp = np.frexp(x)
    m = (mant * 2.0**53).astype(np.int64)
    shift = exp.astype(np.int64) - 53 + scale  # x · 2^scale = m · 2^shift, shift >= 0
    order = np.argsort(shift, kind="stable")
    m, shift = m[order], shift[order]
    starts = np.flatnonzero(np.r_[True, shift[1:] != shift[:-1]])
    a, rest = np.divmod(m, 1 << 36)  # m = a·2^36 + b·2^18 + c, |a| < 2^17, 0 <= b, c < 2^18
    b, c = np.divmod(rest, 1 << 18)
    parts = [a, b, c, a * a, a * b, b * b + 2 * a * c, b * c, c * c]
    sums = [np.add.reduceat(p, starts).tolist() for p in parts]
    total = squares = 0
    for g, k in enumerate(shift[starts].tolist()):
        sa, sb, sc, aa, ab, bb_ac, bc, cc = (col[g] for col in sums)
        total += ((sa << 36) + (sb << 18) + sc) << k
        squares += ((aa << 72) + (ab << 55) + (bb_ac << 36) + (bc << 19) + cc) << (2 * k)
    return total, squares


_BLOCK: Final = 1 << 22
"""Values per :func:`_block_sums` call: a limb product is below 2³⁷, so a sum of 2²² of them fits int64."""


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
    turns = ignored = self_dropped = unreadable = 0  # summed here, added to the Counter once
    for r in result.replayed:
        accepted, parsed = r.replay.accepted, r.parsed
        turns += len(accepted)
        ignored += len(r.ignored_turns)
        ends[r.end] += 1
        for k in accepted:
            pr = parsed[k]
            self_dropped += pr.self_votes_dropped
            unreadable += len(pr.malformed_votes)
            if not pr.ok:
                failures[pr.reason] += 1
    if result.replayed:  # the same keys as a count per debate and per turn would make
        c["turns"] += turns
        c["ignored"] += ignored
    if turns:
        c["self_dropped"] += self_dropped
        c["unreadable"] += unreadable
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
    max) are :class:`_Moments`: exact sums, so they equal a whole-file run's to the last bit, in memory
    that does not grow with the input; the per-agent values themselves are kept for :meth:`values` (the
    report's histograms) unless ``keep_values`` is False, as for ``score``. Skipped lines (their
    errors) and the datum arrays (unless they go to ``datum_sink``) are kept whole: the first are few,
    the second are the output.

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
        keep_values: bool = True,
    ) -> None:
        self.options = options
        self._sink = datum_sink
        self._keep_values = keep_values
        self._moments = {name: _Moments() for name in _FIGURES}
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
            self._moments[name].add(values)
            if self._keep_values:
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
        """Every scored agent's ``"rewards"``, ``"returns"`` or ``"advantages"``, in input order.

        Raises:
          ValueError: the accumulator was made with ``keep_values=False``.
        """
        if not self._keep_values:
            raise ValueError("this ScoreAccumulator was made with keep_values=False: it keeps no values")
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
            **{name: self._moments[name].figures() for name in _FIGURES},
        }
        datums = self.datums()
        if datums is not None:
            out["datums"] = dict(datums.stats)
        return out


def _jsonable(v: Any) -> bool:
    return v is None or (
        isinstance(v, bool | int | float | str) and not (isinstance(v, float) and not math.isfinite(v))
    )
