"""The start-of-run contract check: a few cheap calls that show a service keeps the loop's assumptions.

The training loop assumes what the in-repo services do (:mod:`adapters.tinker.fake`,
:mod:`adapters.local.service`) and what the Tinker SDK documents: a sampler is a frozen snapshot of the
weights it was made from; ``compute_logprobs`` gives one entry per prompt token, ``None`` first; ``sample``
returns the sequences asked for, one finite logprob per token, cut at a stop token, with ids inside the
tokenizer's vocabulary. :func:`check_contract` asks a service for each of these before step 0, on a
throwaway training client of its own (the run's client is never touched), and returns a
:class:`ContractReport`. Given the run's LoRA rank, ``max_tokens`` and first prompt, the check's calls
have the run's shapes, so that a service that compiles per shape (the local JAX service) compiles few
programs for the check alone.

Two parts, as h11 splits a state machine from its socket: ``judge_*`` are pure functions from replies to a
:class:`CheckResult`; :func:`check_contract` is the few awaits that fetch the replies. What a failure
means is decided by :func:`refused_options` and :func:`enforce_contract`: a broken frozen snapshot refuses
only the options that sample an old sampler (:data:`OPTION_DEPENDENCIES`), any other failure ends the run.

The calls made, on a service of ``base_model``: one ``create_lora_training_client`` (with rank 0,
``create_full_training_client``); three
``save_weights_and_get_sampling_client``; four ``compute_logprobs`` of the probe prompt (25 tokens by
default); two ``sample`` requests of ``num_samples`` sequences of at most ``max_tokens`` tokens; one
``forward_backward`` of one datum (cross-entropy on the prompt) and one ``optim_step``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

from adapters.tinker.protocol import SamplingClient, ServiceClient, TrainingClient

if TYPE_CHECKING:
    from adapters.tinker.boundary import Boundary

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_PROMPT",
    "OPTION_DEPENDENCIES",
    "CheckResult",
    "ContractError",
    "ContractReport",
    "Refusal",
    "check_contract",
    "choose_stop_token",
    "enforce_contract",
    "inflight_refusal",
    "judge_inflight",
    "judge_logprobs",
    "judge_sample_count",
    "judge_sample_logprobs",
    "judge_snapshot",
    "judge_stable_reinforce",
    "judge_stop",
    "judge_vocabulary",
    "probe_datum",
    "provenance_probe",
    "refused_options",
]

CHECK_NAMES: Final[tuple[str, ...]] = (
    "compute_logprobs",
    "sample_count",
    "sample_logprobs",
    "stop_sequences",
    "vocabulary",
    "frozen_snapshot",
)
"""The checks of a :class:`ContractReport`, in the order they are reported; ``inflight_sampler``
(:func:`judge_inflight`) follows them when the run asks for inflight samplers."""

OPTION_DEPENDENCIES: Final[Mapping[str, tuple[str, ...]]] = {
    "frozen_snapshot": ("kl_penalty_coef", "max_steps_off_policy", "eval_questions"),
    "inflight_sampler": ("sampler_kind",),
    "stable_reinforce": ("loss_fn",),
}
"""Config keys that need a check, by check: a key is in use when its value is > 0. Each of these samples
a sampler made before later optimizer steps: the KL reference and the evaluation's fixed opponents are
the initial (or warm-started) weights; off-policy sampling uses samplers up to k versions old. A check
not named here is needed by every run; ``sampler_kind`` is in use when it is ``"inflight"``, ``loss_fn``
when it is ``"stable_reinforce"``."""

DEFAULT_PROMPT: Final[tuple[int, ...]] = tuple(b"Question:\nWhat is 2 + 2?\n")
"""The probe prompt when none is given: 25 ASCII byte values (ids < 128, valid in any vocabulary of at
least 128 ids; for the byte tokenizer, the text itself)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome: its name, whether it passed, what was expected and what came back."""

    name: str
    passed: bool
    expected: str
    got: str

    def describe(self) -> str:
        """One line: ``NAME: expected …; got …``."""
        return f"{self.name}: expected {self.expected}; got {self.got}"


@dataclass(frozen=True, slots=True)
class ContractReport:
    """Every check's :class:`CheckResult`, in :data:`CHECK_NAMES` order."""

    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The checks that failed."""
        return tuple(r for r in self.results if not r.passed)

    @property
    def fatal(self) -> tuple[CheckResult, ...]:
        """The failed checks that every run needs (those not in :data:`OPTION_DEPENDENCIES`)."""
        return tuple(r for r in self.failures if r.name not in OPTION_DEPENDENCIES)

    def result(self, name: str) -> CheckResult:
        """The result of the check ``name``.

        Raises:
            KeyError: if the report holds no check of that name.
        """
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no check named {name!r} in the report; checks: {[r.name for r in self.results]}")


@dataclass(frozen=True, slots=True)
class Refusal:
    """A config key in use whose check failed: the run cannot honour it on this service."""

    key: str
    value: Any
    check: CheckResult

    def describe(self) -> str:
        """One line naming the key, its value, the failed check and the way out."""
        return (
            f"config key {self.key} = {self.value!r} needs the {self.check.name} check, which failed "
            f"(expected {self.check.expected}; got {self.check.got}): set {self.key} = 0 on this service"
        )


class ContractError(Exception):
    """The service broke a check the run needs; the message names each check, what was expected and
    what came back, and each refused config key.

    Attributes:
        failures: the failed checks that end any run.
        refused: the config keys refused because a check they need failed.
    """

    def __init__(self, failures: Sequence[CheckResult], refused: Sequence[Refusal] = ()) -> None:
        self.failures = tuple(failures)
        self.refused = tuple(refused)
        lines = [f"contract check {r.describe()}" for r in self.failures]
        lines += [r.describe() for r in self.refused]
        super().__init__("the service failed the start-of-run contract check:\n  " + "\n  ".join(lines))


def _floats(values: Sequence[Any]) -> npt.NDArray[np.float64]:
    """The entries as float64, anything that is not a real number (None included) as NaN."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
            out[i] = float(v)
    return out


def judge_logprobs(reply: Sequence[Any], *, prompt_length: int) -> CheckResult:
    """Whether a ``compute_logprobs`` reply has one entry per prompt token, ``None`` first, the others
    finite floats ≤ 0 (a logprob; 1e-3 of slack for rounding).

    Args:
        reply: the reply, as returned.
        prompt_length: tokens in the prompt.

    Returns:
        The ``compute_logprobs`` :class:`CheckResult`.

    Examples:
        >>> judge_logprobs([None, -1.5, -0.2], prompt_length=3).passed
        True
        >>> judge_logprobs([-1.5, -0.2], prompt_length=3).got
        '2 entries'
        >>> judge_logprobs([None, float("nan"), -0.2], prompt_length=3).got
        'entry 1 is nan'
    """
    expected = f"{prompt_length} entries (one per prompt token), None first, the others finite floats <= 0"
    got = ""
    if len(reply) != prompt_length:
        got = f"{len(reply)} entries"
    elif prompt_length and reply[0] is not None:
        got = f"entry 0 is {reply[0]!r}, not None"
    else:
        for i, v in enumerate(reply[1:], start=1):
            if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
                got = f"entry {i} is {v!r} ({type(v).__name__}), not a float"
            elif not math.isfinite(float(v)):
                got = f"entry {i} is {float(v)}"
            elif float(v) > 1e-3:
                got = f"entry {i} is {float(v)}, above 0"
            if got:
                break
    return CheckResult("compute_logprobs", not got, expected, got or f"{prompt_length} valid entries")


def _tokens(seq: types.SampledSequence) -> list[int]:
    return [int(t) for t in seq.tokens]


def judge_sample_count(response: types.SampleResponse, *, num_samples: int) -> CheckResult:
    """Whether ``sample`` returned the ``num_samples`` sequences asked for, none of them empty.

    Examples:
        >>> seq = types.SampledSequence("length", "s", np.array([5, 6]), np.array([-1.0, -2.0]))
        >>> judge_sample_count(types.SampleResponse(sequences=[seq, seq]), num_samples=2).passed
        True
        >>> judge_sample_count(types.SampleResponse(sequences=[seq]), num_samples=2).got
        '1 sequences'
    """
    expected = f"{num_samples} sequences (num_samples), none empty"
    seqs = response.sequences
    empty = [k for k, s in enumerate(seqs) if not s.tokens]
    if len(seqs) != num_samples:
        got = f"{len(seqs)} sequences"
    elif empty:
        got = f"sequence {empty[0]} is empty"
    else:
        got = ""
    return CheckResult("sample_count", not got, expected, got or f"{len(seqs)} sequences")


def judge_sample_logprobs(responses: Sequence[types.SampleResponse]) -> CheckResult:
    """Whether every sampled sequence has one finite logprob ≤ 0 (1e-3 of slack) per token.

    Examples:
        >>> ok = types.SampledSequence("length", "s", np.array([5, 6]), np.array([-1.0, -2.0]))
        >>> short = types.SampledSequence("length", "s", np.array([5, 6]), np.array([-1.0]))
        >>> judge_sample_logprobs([types.SampleResponse(sequences=[ok, short])]).got
        'response 0, sequence 1: 1 logprobs for 2 tokens'
    """
    expected = "one finite logprob <= 0 per sampled token"
    got = ""
    for r, response in enumerate(responses):
        for k, seq in enumerate(response.sequences):
            where = f"response {r}, sequence {k}"
            lps = seq.logprobs
            if lps is None:
                got = f"{where}: no logprobs"
            elif len(lps) != len(seq.tokens):
                got = f"{where}: {len(lps)} logprobs for {len(seq.tokens)} tokens"
            else:
                values = _floats(list(lps))
                bad = np.flatnonzero(~np.isfinite(values) | (values > 1e-3))
                if bad.size:
                    got = f"{where}: logprob {int(bad[0])} is {lps[int(bad[0])]!r}"
            if got:
                return CheckResult("sample_logprobs", False, expected, got)
    count = sum(len(s.tokens) for response in responses for s in response.sequences)
    return CheckResult("sample_logprobs", True, expected, f"{count} tokens with valid logprobs")


def judge_vocabulary(responses: Sequence[types.SampleResponse], *, vocab_size: int) -> CheckResult:
    """Whether every sampled id lies in ``[0, vocab_size)``, the tokenizer's vocabulary.

    Examples:
        >>> seq = types.SampledSequence("length", "s", np.array([5, 300]), np.array([-1.0, -2.0]))
        >>> judge_vocabulary([types.SampleResponse(sequences=[seq])], vocab_size=262).got
        'response 0, sequence 0: id 300 at position 1'
    """
    expected = f"sampled ids in [0, {vocab_size}) (the tokenizer's vocabulary)"
    for r, response in enumerate(responses):
        for k, seq in enumerate(response.sequences):
            for i, t in enumerate(_tokens(seq)):
                if not 0 <= t < vocab_size:
                    return CheckResult(
                        "vocabulary", False, expected, f"response {r}, sequence {k}: id {t} at position {i}"
                    )
    return CheckResult("vocabulary", True, expected, "every id inside")


def choose_stop_token(response: types.SampleResponse, *, vocab_size: int) -> int | None:
    """A stop token for the stop check: one that the same seeded request has just sampled, in as many
    sequences as can be (so that a service that does not reproduce its seeds still meets it).

    Each id in the vocabulary is ranked by: the sequences whose first occurrence of it lies in
    ``[1, len − 2]`` (a stop there must cut the sequence short, after a token), then the sequences that
    hold it, then the earliest first occurrence; the first id wins. None when no sequence holds an id in
    the vocabulary.

    Examples:
        >>> seq = types.SampledSequence("length", "s", np.array([7, 7, 9, 4]), np.array([-1.0] * 4))
        >>> choose_stop_token(types.SampleResponse(sequences=[seq]), vocab_size=262)
        9
    """
    rank: dict[int, tuple[int, int, int]] = {}
    for seq in response.sequences:
        tokens = _tokens(seq)
        first: dict[int, int] = {}
        for i, t in enumerate(tokens):
            if 0 <= t < vocab_size:
                first.setdefault(t, i)
        for t, i in first.items():
            inside, held, earliest = rank.get(t, (0, 0, 0))
            earliest = min(-earliest, i) if held else i
            rank[t] = (inside + (1 <= i <= len(tokens) - 2), held + 1, -earliest)
    return max(rank, key=lambda t: rank[t]) if rank else None


def judge_stop(response: types.SampleResponse | None, *, stop_token: int | None) -> CheckResult:
    """Whether a ``sample`` request with ``stop=[stop_token]`` honoured it: no sequence goes on past its
    first stop token, and at least one sequence ends with it (the request repeats the seed of a sample
    that produced the token, so a service that reproduces its seeds cuts that sequence there).

    Args:
        response: the stopped request's reply (None: it could not be made, for want of a stop token).
        stop_token: the stop token id asked for.

    Examples:
        >>> seq = types.SampledSequence("stop", "s", np.array([7, 9]), np.array([-1.0, -1.0]))
        >>> judge_stop(types.SampleResponse(sequences=[seq]), stop_token=9).passed
        True
        >>> seq = types.SampledSequence("length", "s", np.array([7, 9, 4]), np.array([-1.0] * 3))
        >>> judge_stop(types.SampleResponse(sequences=[seq]), stop_token=9).got
        'sequence 0 goes on 1 tokens past stop token 9 at position 1'
    """
    if response is None or stop_token is None:
        expected = "a sampled token to use as a stop token"
        return CheckResult("stop_sequences", False, expected, "no sampled token in the vocabulary")
    expected = f"sequences cut at stop token {stop_token} (nothing after it), at least one ending with it"
    ended = 0
    for k, seq in enumerate(response.sequences):
        tokens = _tokens(seq)
        if stop_token in tokens:
            at = tokens.index(stop_token)
            if at != len(tokens) - 1:
                after = len(tokens) - 1 - at
                got = f"sequence {k} goes on {after} tokens past stop token {stop_token} at position {at}"
                return CheckResult("stop_sequences", False, expected, got)
            ended += 1
    if not ended:
        got = f"no sequence of {len(response.sequences)} ends with stop token {stop_token}"
        return CheckResult("stop_sequences", False, expected, got)
    return CheckResult("stop_sequences", True, expected, f"{ended} of {len(response.sequences)} cut there")


def _mean_gap(a: Sequence[Any], b: Sequence[Any]) -> float:
    """mean |a − b| over the positions where both are finite numbers (entry 0 skipped); NaN if none."""
    n = min(len(a), len(b))
    x, y = _floats(list(a[1:n])), _floats(list(b[1:n]))
    both = np.isfinite(x) & np.isfinite(y)
    return float(np.mean(np.abs(x - y), where=both)) if both.any() else math.nan


def inflight_refusal(training: object) -> str | None:
    """Why ``training`` cannot make inflight samplers, or None when it can: its
    ``save_weights_and_get_sampling_client`` must take tinker 0.38's ``kind`` keyword (the SDK's, the
    local service's; the fake's and an engine's do not).

    Examples:
        >>> class Snapshots:
        ...     def save_weights_and_get_sampling_client(self, name=None): ...
        >>> inflight_refusal(Snapshots())
        "Snapshots.save_weights_and_get_sampling_client takes no 'kind' (tinker 0.38's inflight samplers)"
        >>> from adapters.local.service import LocalTrainingClient
        >>> inflight_refusal(LocalTrainingClient.__new__(LocalTrainingClient)) is None
        True
    """
    save = getattr(training, "save_weights_and_get_sampling_client", None)
    name = f"{type(training).__name__}.save_weights_and_get_sampling_client"
    if save is None:
        return f"{type(training).__name__} has no save_weights_and_get_sampling_client"
    try:
        params = inspect.signature(save).parameters
    except (TypeError, ValueError):
        return f"{name} has no signature to read"
    if "kind" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return f"{name} takes no 'kind' (tinker 0.38's inflight samplers)"


def judge_inflight(
    refusal: str | None,
    before: Sequence[Any] = (),
    live_after: Sequence[Any] = (),
    new_after: Sequence[Any] = (),
    *,
    tolerance: float = 1e-2,
) -> CheckResult:
    """Whether the service makes inflight samplers (``kind="inflight"``) that sample saved weights.

    ``refusal``: :func:`inflight_refusal` of the training client (None: it takes ``kind``). Then three
    ``compute_logprobs`` replies of one prompt: ``before`` from an inflight sampler made before an
    ``optim_step``; ``live_after`` from the same sampler after a second inflight save; ``new_after`` from a
    snapshot made after the step. Tinker guarantees weights saved when the sampler was made *or newer*
    (the update propagates asynchronously), so the check passes when ``live_after`` is within tol of
    either ``before`` or ``new_after``.

    Examples:
        >>> a, b = [None, -1.0, -2.0], [None, -0.5, -1.0]
        >>> judge_inflight(None, a, b, b).passed, judge_inflight(None, a, a, b).passed
        (True, True)
        >>> judge_inflight(None, a, [None, 0.0, 0.0], b).got
        'the inflight sampler differs from the old weights by 1.5 and from the new by 0.75 (mean |Δ|)'
        >>> judge_inflight("no kind").passed
        False
    """
    expected = "inflight samplers (kind='inflight') on the weights saved when made, or newer"
    if refusal is not None:
        return CheckResult("inflight_sampler", False, expected, refusal)
    old, new = _mean_gap(before, live_after), _mean_gap(new_after, live_after)
    if math.isnan(old) or math.isnan(new):
        got = "no prompt position with finite logprobs in every reply, so nothing to compare"
    elif old <= tolerance or new <= tolerance:
        return CheckResult("inflight_sampler", True, expected, "the saved or newer weights")
    else:
        got = (
            f"the inflight sampler differs from the old weights by {old:.3g} and from the new by {new:.3g} "
            "(mean |Δ|)"
        )
    return CheckResult("inflight_sampler", False, expected, got)


STAND_IN_METRIC: Final = "loss/stand_in:max"
"""The metric with which the in-repo services mark a loss computed in place of one whose objective Tinker
does not publish (``stable_reinforce``: importance sampling)."""


def provenance_probe(prompt: Sequence[int], sequence: types.SampledSequence) -> types.Datum:
    """The ``stable_reinforce`` datum of one sample of ``prompt``: advantage 1 on its sampled tokens, with
    the provenance spans the cookbook gives it (the prompt's positions, then the sampled ones, under the
    sample's ``sequence_id``).

    Examples:
        >>> seq = types.SampledSequence(stop_reason="length", tokens_np=np.array([7, 8], np.int32),
        ...                             logprobs_np=np.array([-1.0, -2.0], np.float32), sequence_id="s-0")
        >>> d = provenance_probe([1, 2, 3], seq)
        >>> d.model_input.to_ints(), [(x.sequence_id, x.length) for x in d.loss_fn_input_spans]
        ([1, 2, 3, 7], [('s-0', 2), ('s-0', 2)])
    """
    ids, sampled = [int(t) for t in prompt], [int(t) for t in sequence.tokens]
    n, k, sid = len(ids), len(sampled), sequence.sequence_id or ""
    tokens = ids + sampled
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(tokens[1:], np.int64)),
            "logprobs": types.TensorData.from_numpy(
                np.asarray([0.0] * (n - 1) + list(sequence.logprobs or [0.0] * k), np.float32)
            ),
            "advantages": types.TensorData.from_numpy(np.asarray([0.0] * (n - 1) + [1.0] * k, np.float32)),
        },
    )
    return datum.with_provenance(
        model_input=[
            types.PromptProvenanceSpan(sequence_id=sid, length=n),
            *([types.SampledProvenanceSpan(sequence_id=sid, length=k - 1)] if k > 1 else []),
        ],
        loss_fn_inputs=[
            types.PromptProvenanceSpan(sequence_id=sid, offset=1, length=n - 1),
            types.SampledProvenanceSpan(sequence_id=sid, length=k),
        ],
    )


def judge_stable_reinforce(metrics: Mapping[str, float] | None, error: str | None = None) -> CheckResult:
    """Whether the service trains ``stable_reinforce`` on a datum with spans naming a sequence sampled with
    ``record_stability_info=True`` (``metrics``: its ``forward_backward`` reply's; ``error``: why the call
    failed). It passes either way the service computes it, and says which: its own objective, or a
    stand-in (:data:`STAND_IN_METRIC`, the in-repo services' importance sampling).

    Examples:
        >>> judge_stable_reinforce({"loss:sum": 1.0, "loss/stand_in:max": 1.0}).got
        "a stand-in (importance sampling: Tinker's objective is unpublished)"
        >>> judge_stable_reinforce(None, "no spans").passed
        False
    """
    expected = "stable_reinforce trained on a datum whose spans name a record_stability_info sample"
    if error is not None or metrics is None:
        return CheckResult("stable_reinforce", False, expected, f"a refusal: {error}")
    if metrics.get(STAND_IN_METRIC):
        got = "a stand-in (importance sampling: Tinker's objective is unpublished)"
    else:
        got = "the service's own objective"
    return CheckResult("stable_reinforce", True, expected, got)


def judge_snapshot(
    before: Sequence[Any],
    old_after: Sequence[Any],
    new_after: Sequence[Any],
    new_later: Sequence[Any],
    *,
    tolerance: float,
) -> CheckResult:
    """Whether a sampler stays a frozen snapshot of its weights while its training client trains on.

    Four ``compute_logprobs`` replies of one prompt: ``before`` from a sampler ``old`` made before an
    ``optim_step``; then ``new_after`` from a sampler made after it; ``old_after`` from ``old`` again;
    ``new_later`` from a third sampler made after ``old`` was used. With gap(a, b) = mean |a_t − b_t| over
    the prompt tokens, the snapshot holds when

        gap(before, old_after) ≤ tol  (the old sampler did not follow the training),
        gap(before, new_after) > tol  (the step changed the weights: else nothing was shown), and
        gap(new_after, new_later) ≤ tol  (using the old sampler did not load its weights into the trainer).

    Args:
        before, old_after, new_after, new_later: the replies, in that order of the calls.
        tolerance: tol, the largest gap that counts as the same weights (keyword).

    Examples:
        >>> a, b = [None, -1.0, -2.0], [None, -0.5, -1.0]
        >>> judge_snapshot(a, a, b, b, tolerance=1e-3).passed
        True
        >>> judge_snapshot(a, b, b, b, tolerance=1e-3).got
        "the old sampler's logprobs moved by 0.75 (mean |Δ|) after the optim_step"
    """
    expected = (
        f"an old sampler's logprobs unchanged by an optim_step (mean |Δ| <= {tolerance:g}), a new "
        "sampler's changed, and the trainer's weights unchanged by using the old sampler"
    )
    stayed = _mean_gap(before, old_after)
    moved = _mean_gap(before, new_after)
    kept = _mean_gap(new_after, new_later)
    if math.isnan(stayed) or math.isnan(moved) or math.isnan(kept):
        got = "no prompt position with finite logprobs in every reply, so nothing to compare"
    elif not moved > tolerance:
        got = (
            f"a sampler made after the optim_step differs by {moved:.3g} (mean |Δ|): training showed nothing"
        )
    elif stayed > tolerance:
        got = f"the old sampler's logprobs moved by {stayed:.3g} (mean |Δ|) after the optim_step"
    elif kept > tolerance:
        got = (
            f"a sampler made after the old one was used differs by {kept:.3g} (mean |Δ|) from one made "
            "before: using the old sampler changed the trainer's weights"
        )
    else:
        got = ""
    summary = f"old sampler moved {stayed:.3g}, new sampler {moved:.3g}, trainer kept to {kept:.3g}"
    return CheckResult("frozen_snapshot", not got, expected, got or summary)


def probe_datum(prompt: Sequence[int]) -> types.Datum:
    """The check's training datum: cross-entropy on the prompt (input ``prompt[:-1]``, targets
    ``prompt[1:]``, weight 1 on every token), so the optimizer step raises the prompt's logprobs.

    Raises:
        ValueError: a prompt of fewer than 2 tokens.

    Examples:
        >>> d = probe_datum([1, 2, 3])
        >>> d.model_input.to_ints(), d.loss_fn_inputs["target_tokens"].tolist()
        ([1, 2], [2, 3])
    """
    ids = [int(t) for t in prompt]
    if len(ids) < 2:
        raise ValueError(f"prompt must hold at least 2 tokens, got {len(ids)}")
    return types.Datum(
        model_input=tinker.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(ids[1:], np.int64)),
            "weights": types.TensorData.from_numpy(np.ones(len(ids) - 1, np.float32)),
        },
    )


def refused_options(report: ContractReport, config_values: Mapping[str, Any]) -> list[Refusal]:
    """The config keys in use (value > 0) whose check failed (:data:`OPTION_DEPENDENCIES`).

    Args:
        report: the contract check's report.
        config_values: the run's config as a mapping (e.g. ``TrainConfig.to_dict()``); a missing key is
            not in use.

    Examples:
        >>> bad = CheckResult("frozen_snapshot", False, "a frozen sampler", "one that follows training")
        >>> refusals = refused_options(ContractReport((bad,)), {"kl_penalty_coef": 0.1, "eval_questions": 0})
        >>> [(r.key, r.value) for r in refusals]
        [('kl_penalty_coef', 0.1)]
    """
    out: list[Refusal] = []
    for check in report.failures:
        for key in OPTION_DEPENDENCIES.get(check.name, ()):
            value = config_values.get(key)
            number = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
            named = (key, value) in (("sampler_kind", "inflight"), ("loss_fn", "stable_reinforce"))
            if number or named:
                out.append(Refusal(key, value, check))
    return out


def enforce_contract(report: ContractReport, config_values: Mapping[str, Any]) -> None:
    """Ends the run before step 0 if the service broke a check it needs; returns when it may go on.

    Raises:
        ContractError: a check every run needs failed (:attr:`ContractReport.fatal`), or a config key in
            use needs a check that failed (:func:`refused_options`); the message names them all.

    Examples:
        >>> bad = CheckResult("frozen_snapshot", False, "a frozen sampler", "one that follows training")
        >>> enforce_contract(ContractReport((bad,)), {"kl_penalty_coef": 0.0})  # nothing needs it
        >>> try:
        ...     enforce_contract(ContractReport((bad,)), {"kl_penalty_coef": 0.1})
        ... except ContractError as e:
        ...     print([r.key for r in e.refused], e.failures, str(e).splitlines()[1][:44])
        ['kl_penalty_coef'] ()   config key kl_penalty_coef = 0.1 needs the
    """
    refused = refused_options(report, config_values)
    if report.fatal or refused:
        raise ContractError(report.fatal, refused)


async def _probe_stable_reinforce(
    training: TrainingClient,
    call: Callable[[str, Callable[[], Any]], Awaitable[Any]],
    model_input: types.ModelInput,
    ids: Sequence[int],
    num_samples: int,
    params: types.SamplingParams,
) -> CheckResult:
    """:func:`judge_stable_reinforce` of one datum sampled with ``record_stability_info=True``; a refusal
    (the service's ``RequestFailedError`` or ``ValueError``, or a boundary's :class:`ServiceError` that is
    not transient) is the check's failure; anything else propagates."""
    from adapters.tinker.boundary import ServiceError

    save: Any = training.save_weights_and_get_sampling_client
    try:
        sampler = await call("refresh", lambda: save(record_stability_info=True))
        reply = await call("sample", lambda: sampler.sample(model_input, num_samples, params))
        datum = provenance_probe(ids, reply.sequences[0])
        out = await call("forward_backward", lambda: training.forward_backward([datum], "stable_reinforce"))
    except (tinker.RequestFailedError, ValueError, ServiceError) as e:  # a refusal: reported
        if isinstance(e, ServiceError) and e.transient:
            raise
        return judge_stable_reinforce(None, f"{type(e).__name__}: {e}")
    return judge_stable_reinforce(dict(out.metrics))


async def _close(client: object) -> None:
    """Closes a client that can be closed (a ``close()`` method, awaited if it returns an awaitable)."""
    close = getattr(client, "close", None)
    if callable(close):
        done = close()
        if inspect.isawaitable(done):
            await done


async def check_contract(
    service: ServiceClient,
    *,
    base_model: str,
    vocab_size: int,
    prompt: Sequence[int] | None = None,
    rank: int = 8,
    learning_rate: float = 1e-2,
    tolerance: float = 1e-2,
    num_samples: int = 3,
    max_tokens: int = 16,
    seed: int = 0,
    boundary: Boundary | None = None,
    sampler_kind: str = "snapshot",
    loss_fn: str | None = None,
) -> ContractReport:
    """Runs every check of :data:`CHECK_NAMES` against ``service`` on a throwaway LoRA training client.

    The calls, in order (see the module docstring for their cost): a LoRA client of ``base_model``; a
    sampler ``old``; ``old.compute_logprobs(prompt)``; ``old.sample`` of ``num_samples`` sequences
    (temperature 1, ``seed``), then the same request with a token they hold as the stop
    (:func:`choose_stop_token`); ``forward_backward`` of :func:`probe_datum` (cross-entropy) and an
    ``optim_step`` at ``learning_rate``; a new sampler's logprobs, ``old``'s again, a third sampler's. The
    throwaway client is closed at the end when it has a ``close()``. The SDK 0.38 clients have none, nor
    any call that releases one training client: a caller that must not leave it holding an adapter slot
    runs the check on a ``ServiceClient`` of its own and closes that session (``debate-kernel train``
    does).

    Args:
        service: any :class:`~adapters.tinker.protocol.ServiceClient`.
        base_model: the model the run trains.
        vocab_size: the number of ids of the run's tokenizer (``len(tokenizer)``).
        prompt: the probe prompt's token ids (default :data:`DEFAULT_PROMPT`); ≥ 2 ids in the vocabulary.
        rank: the throwaway client's LoRA rank (the run's, so its programs are the run's); 0 a full
            fine-tuning client, from ``create_full_training_client`` (which the local services have).
        learning_rate: its one Adam step's learning rate (large, so the step shows in the logprobs).
        tolerance: the largest mean |Δ| of two logprob replies that counts as the same weights.
        num_samples: sequences per sample request (≥ 2: the count is checked).
        max_tokens: the most tokens per sampled sequence.
        seed: the sample requests' seed.
        boundary: where every call goes through (its deadlines, retries of transient failures, and
            :class:`~adapters.tinker.boundary.ServiceError` for a call that fails for good), as the run's
            own calls do; None: called directly (their exceptions propagate).
        sampler_kind: the run's; ``"inflight"`` adds the ``inflight_sampler`` check
            (:func:`judge_inflight`: two inflight saves, one before the step and one after, and one more
            ``compute_logprobs``).
        loss_fn: the run's; ``"stable_reinforce"`` adds the ``stable_reinforce`` check
            (:func:`judge_stable_reinforce`: one more sampler, made with ``record_stability_info=True``,
            one more ``sample`` request, and a ``forward_backward`` of :func:`provenance_probe` after the
            others, on the throwaway client), which reports whether the loss is a stand-in.

    Returns:
        The :class:`ContractReport`; :func:`enforce_contract` turns it into a decision.

    Raises:
        ValueError: an argument out of range, or a prompt id outside ``[0, vocab_size)``.
        ServiceError: with ``boundary``, a call that failed for good (naming it); without, whatever the
            service raises. No exception is raised for a reply that breaks the contract, which is
            reported instead.

    Examples:
        >>> import asyncio
        >>> from adapters.tinker.fake import FakeServiceClient
        >>> report = asyncio.run(check_contract(FakeServiceClient(seed=0), base_model="fake",
        ...                                     vocab_size=262))
        >>> report.passed, [r.name for r in report.results] == list(CHECK_NAMES)
        (True, True)
    """
    ids = [int(t) for t in (DEFAULT_PROMPT if prompt is None else prompt)]
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
    if len(ids) < 2 or any(not 0 <= t < vocab_size for t in ids):
        raise ValueError(f"prompt must hold >= 2 ids in [0, {vocab_size}), got {ids}")
    if num_samples < 2 or max_tokens < 2:
        raise ValueError(f"num_samples and max_tokens must be >= 2, got {num_samples} and {max_tokens}")
    if not (learning_rate > 0 and tolerance > 0):
        raise ValueError(f"learning_rate and tolerance must be > 0, got {learning_rate} and {tolerance}")
    full = getattr(service, "create_full_training_client", None)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0 or (rank == 0 and full is None):
        raise ValueError(
            f"rank must be an int >= 1, or 0 on a service with create_full_training_client; got {rank!r} "
            f"({type(service).__name__})"
        )
    model_input = tinker.ModelInput.from_ints(ids)

    async def call(kind: str, make: Callable[[], Any]) -> Any:
        return await (make() if boundary is None else boundary.call(kind, make))

    def create() -> Any:
        if rank == 0 and full is not None:
            return full(base_model)
        return service.create_lora_training_client(base_model, rank)

    async def logprobs(sampler: SamplingClient) -> list[Any]:
        return list(await call("compute_logprobs", lambda: sampler.compute_logprobs(model_input)))

    training: TrainingClient = await call("create", create)
    inflight: CheckResult | None = None
    stable: CheckResult | None = None
    try:
        old = await call("refresh", training.save_weights_and_get_sampling_client)
        before = await logprobs(old)
        refusal = inflight_refusal(training) if sampler_kind == "inflight" else None
        live: SamplingClient | None = None
        if sampler_kind == "inflight" and refusal is None:
            save: Any = training.save_weights_and_get_sampling_client
            live = await call("refresh", lambda: save(kind="inflight"))
            live_before = await logprobs(live)
        params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed)
        free = await call("sample", lambda: old.sample(model_input, num_samples, params))
        stop = choose_stop_token(free, vocab_size=vocab_size)
        stopped: types.SampleResponse | None = None
        if stop is not None:
            with_stop = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed, stop=[stop])
            stopped = await call("sample", lambda: old.sample(model_input, num_samples, with_stop))
        await call("forward_backward", lambda: training.forward_backward([probe_datum(ids)], "cross_entropy"))
        await call("optim_step", lambda: training.optim_step(types.AdamParams(learning_rate=learning_rate)))
        new_after = await logprobs(await call("refresh", training.save_weights_and_get_sampling_client))
        old_after = await logprobs(old)
        new_later = await logprobs(await call("refresh", training.save_weights_and_get_sampling_client))
        if live is not None:
            await call("refresh", lambda: save(kind="inflight"))  # publishes the new weights to ``live``
            inflight = judge_inflight(None, live_before, await logprobs(live), new_after, tolerance=tolerance)
        elif sampler_kind == "inflight":
            inflight = judge_inflight(refusal)
        if loss_fn == "stable_reinforce":
            stable = await _probe_stable_reinforce(training, call, model_input, ids, num_samples, params)
    finally:
        await _close(training)
    responses = [free] if stopped is None else [free, stopped]
    return ContractReport(
        (
            judge_logprobs(before, prompt_length=len(ids)),
            judge_sample_count(free, num_samples=num_samples),
            judge_sample_logprobs(responses),
            judge_stop(stopped, stop_token=stop),
            judge_vocabulary(responses, vocab_size=vocab_size),
            judge_snapshot(before, old_after, new_after, new_later, tolerance=tolerance),
            *(() if inflight is None else (inflight,)),
            *(() if stable is None else (stable,)),
        )
    )
