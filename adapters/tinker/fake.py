"""An in-repo fake of the Tinker service: seeded, deterministic, offline, returning real ``tinker.types``.

The core has no I/O: a frozen :class:`ModelState` (weights version, a parameter digest, the lineage of
optimizer steps that produced it, gradients accumulated since the last step) and pure functions that
map a state and a request to the next state and an SDK response (:func:`forward_backward`,
:func:`optim_step`, :func:`sample`, :func:`token_logprobs`). The shell (:class:`FakeServiceClient`,
:class:`FakeTrainingClient`, :class:`FakeSamplingClient`) holds the current state, writes saved states
and an event log under ``root`` (temporary file + ``os.replace``), and wraps every answer in a
:class:`~adapters.futures.CompletedFuture`. Faults (latency, errors, hangs, crashes) are added by
:mod:`adapters.tinker.faults`, never by flags here.

What the fake guarantees, so tests can assert on training:

- Every ``forward_backward`` is recorded by the fingerprint of its datums (:func:`batch_fingerprint`);
  ``optim_step`` folds the gradients accumulated since the previous step into the parameter digest and
  appends a :class:`TrainedStep` to the state's ``lineage``. The lineage of the final weights lists every
  batch those weights were trained on, so "every batch trained exactly once across crashes and resumes"
  is ``Counter(lineage batches)`` with all counts 1. :attr:`FakeServiceClient.events` also records work
  that a crash later threw away.
- ``save_state`` persists the weights and the optimizer (the lineage), not the accumulated gradients;
  ``create_training_client_from_state_with_optimizer(path)`` restores it, also from a new process when
  the service has a ``root`` directory.
- A sampler is a snapshot: it keeps the weights it was made from whatever training follows.
- The policy is a scripted writer of well-formed debate answers (:func:`kernel.render_response`), seeded
  by the weights, the prompt and the sample index, with a small configurable rate of malformed answers;
  arithmetic questions ``a op b`` are answered right more often as the version grows. Token logprobs
  are a hash of (parameters, position, previous token, token), the same in the sampler and in
  ``forward_backward`` for the same weights, so importance ratios are exactly 1 on-policy.
- Sampled sequences get ids as tinker 0.38 gives them: fixed when the request is submitted, distinct
  within the service's :class:`Session` (``"{session}-{n}"``). ``stable_reinforce`` refuses, as Tinker
  does (:mod:`adapters.tinker.provenance`), a batch with a datum that has no provenance spans, and one
  whose spans name a sequence this session did not sample with ``record_stability_info=True`` (a sampler
  of another session, or of a run before a restart: the recorded data is session-scoped), or one with a
  nonzero advantage on a prompt token. Refusals are the SDK's ``RequestFailedError`` in the ``User``
  category, what a request the service rejects raises.
  ``gspo`` is :func:`kernel.gspo_loss` with Tinker's required ``clip_low_threshold`` /
  ``clip_high_threshold``; ``stable_reinforce``'s value is the importance-sampling one (Tinker documents
  its inputs, not its objective).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import tinker
from tinker import types

from adapters._atomic import atomic_write
from adapters.futures import CompletedFuture, DeferredFuture, completed
from adapters.tinker.protocol import CustomLossFn
from adapters.tinker.provenance import SPAN_LOSSES, prompt_advantage_refusal, provenance_refusal, span_ids
from adapters.tinker.tokens import prompt_ids
from adapters.tokenizers import ByteTokenizer
from kernel import Vote, gspo_loss, render_response

__all__ = [
    "FakePolicy",
    "FakeSamplingClient",
    "FakeServiceClient",
    "FakeTrainingClient",
    "ModelState",
    "Session",
    "TrainEvent",
    "TrainedStep",
    "batch_fingerprint",
    "datum_fingerprint",
    "forward_backward",
    "initial_model_state",
    "load_state_file",
    "optim_step",
    "sample",
    "token_logprobs",
]

_URI: Final = "fake://"
_END_ID: Final = ByteTokenizer().special_id("<|end|>")
_MASK64: Final = np.uint64(0xFFFFFFFFFFFFFFFF)


class Session:
    """The sequences one service session sampled: ids fixed at submission, ``"{name}-{n}"``, and which
    were sampled with ``record_stability_info`` (what ``stable_reinforce`` may name).

    Examples:
        >>> s = Session("fake0")
        >>> s.issue(2, stability=True), s.issue(1, stability=False)
        (['fake0-0', 'fake0-1'], ['fake0-2'])
        >>> s.unrecorded(["fake0-1", "fake0-2", "other-0"])
        ['fake0-2', 'other-0']
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}")
        self.name = name
        self.count = 0
        self.recorded: set[str] = set()

    def issue(self, n: int, *, stability: bool) -> list[str]:
        """``n`` new sequence ids; remembered as recorded when ``stability``."""
        ids = [f"{self.name}-{self.count + j}" for j in range(n)]
        self.count += n
        if stability:
            self.recorded.update(ids)
        return ids

    def unrecorded(self, ids: Sequence[str]) -> list[str]:
        """The ids of ``ids`` (in order) this session holds no stability record of."""
        return [i for i in ids if i not in self.recorded]


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]


def datum_fingerprint(datum: types.Datum) -> str:
    """A stable hex digest of one datum: its input tokens and every loss input (name, dtype, values).

    Examples:
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> e = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 4])})
        >>> datum_fingerprint(d) == datum_fingerprint(d), datum_fingerprint(d) == datum_fingerprint(e)
        (True, False)
    """
    return _fingerprint(prompt_ids(datum.model_input), datum)


def _fingerprint(inputs: npt.NDArray[np.int64], datum: types.Datum) -> str:
    h = hashlib.sha256()
    h.update(inputs.tobytes())
    for name in sorted(datum.loss_fn_inputs):
        arr = np.ascontiguousarray(datum.loss_fn_inputs[name].to_numpy())
        h.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()[:32]


def batch_fingerprint(data: Sequence[types.Datum]) -> str:
    """The digest of a ``forward_backward`` batch: of its datums' fingerprints, in order.

    Examples:
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> e = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 4])})
        >>> fp = batch_fingerprint([d, e])
        >>> len(fp), fp == batch_fingerprint([d, e]), fp == batch_fingerprint([e, d])
        (32, True, False)
    """
    return _digest("batch", *(datum_fingerprint(d) for d in data))


@dataclass(frozen=True, slots=True)
class TrainedStep:
    """One optimizer step in a lineage: the weights version it produced and the batches it applied."""

    version: int
    batches: tuple[str, ...]
    learning_rate: float


@dataclass(frozen=True, slots=True)
class ModelState:
    """The fake model: weights (as a digest), optimizer history, accumulated gradients. Immutable.

    Attributes:
        base_model: the base model name.
        rank: the LoRA rank.
        seed: the service seed.
        version: number of optimizer steps applied (0 for fresh weights).
        params: hex digest standing for the weights; changes with every optimizer step.
        lineage: the optimizer steps that produced these weights, oldest first.
        pending: batch fingerprints of ``forward_backward`` calls since the last optimizer step.
    """

    base_model: str
    rank: int
    seed: int
    version: int = 0
    params: str = ""
    lineage: tuple[TrainedStep, ...] = ()
    pending: tuple[str, ...] = ()

    def trained_batches(self) -> list[str]:
        """Every batch fingerprint these weights were trained on, in order (gradients pending excluded)."""
        return [b for step in self.lineage for b in step.batches]

    def to_json(self) -> str:
        """The saved form: everything but the pending gradients (as ``save_state`` keeps)."""
        data = dataclasses.asdict(dataclasses.replace(self, pending=()))
        return json.dumps({"format": "debate-kernel-fake-state", "version": 1, "state": data}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> ModelState:
        """Reads :meth:`to_json`'s output. Raises ValueError for anything else."""
        try:
            raw = json.loads(text)
            if raw.get("format") != "debate-kernel-fake-state":
                raise ValueError(f"text is not a saved fake model state (format {raw.get('format')!r})")
            s = raw["state"]
            lineage = tuple(
                TrainedStep(int(t["version"]), tuple(t["batches"]), float(t["learning_rate"]))
                for t in s["lineage"]
            )
            return ModelState(
                str(s["base_model"]),
                int(s["rank"]),
                int(s["seed"]),
                int(s["version"]),
                str(s["params"]),
                lineage,
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
            raise ValueError(f"text is not a saved fake model state: {e}") from None


def initial_model_state(base_model: str, rank: int, seed: int) -> ModelState:
    """Fresh weights for ``(base_model, seed)``: version 0, no lineage.

    The rank does not change the weights (a fresh LoRA adapter is zero), so a sampler on the base model
    (``create_sampling_client(base_model=...)``, a KL reference) matches an untrained training client.

    Examples:
        >>> state = initial_model_state("fake-model", 8, seed=0)
        >>> state.version, state.lineage, len(state.params)
        (0, (), 32)
        >>> state.params == initial_model_state("fake-model", 1, seed=0).params  # the rank does not matter
        True
    """
    if not isinstance(base_model, str) or not base_model:
        raise ValueError(f"base_model must be a non-empty str, got {base_model!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be an int >= 1, got {rank!r}")
    return ModelState(base_model, rank, seed, 0, _digest("init", base_model, str(seed)))


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64 finalizer, elementwise (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def token_logprobs(
    params: str, tokens_T: Sequence[int] | npt.ArrayLike, start: int
) -> npt.NDArray[np.float32]:
    """The fake model's logprob of each token ``tokens_T[t]`` for ``t ≥ start`` given the ones before.

    lp_t = −(0.05 + 2.95·u_t), u_t = hash(params, t, token_{t−1}, token_t) ∈ [0, 1): a deterministic
    function of the weights and the local context, identical in sampling and in ``forward_backward``.

    Args:
        params: the weights digest (``ModelState.params``).
        tokens_T: [T] int token ids of the whole sequence.
        start: first position scored, ``1 ≤ start ≤ T`` (position 0 has no context).

    Returns:
        [T − start] float32 logprobs in (−3, −0.05].

    Examples:
        >>> lp = token_logprobs("abc", [5, 6, 7], 1)
        >>> lp.shape, bool((lp < 0).all()), bool((token_logprobs("abc", [5, 6, 7], 2) == lp[1:]).all())
        ((2,), True, True)
    """
    tokens = np.asarray(tokens_T, np.int64)
    pos = np.arange(start, tokens.shape[0], dtype=np.int64)
    return _logprobs_at(params, pos, tokens[start - 1 : -1], tokens[start:])


_BLOCK: Final = 1 << 15  # tokens hashed at once: the temporaries stay in cache and are reused


def _logprobs_at(
    params: str, pos_N: npt.NDArray[np.int64], prev_N: npt.NDArray[np.int64], token_N: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    """:func:`token_logprobs` at ``N`` arbitrary (position, previous token, token) triples, in one pass."""
    out_N = np.empty(np.shape(pos_N)[0], np.float32)
    _hash_into(out_N, params, *(np.asarray(a, np.int64) for a in (pos_N, prev_N, token_N)))
    return out_N


def _hash_into(
    out_N: npt.NDArray[np.float32],
    params: str,
    pos_N: npt.NDArray[np.int64],
    prev_N: npt.NDArray[np.int64],
    token_N: npt.NDArray[np.int64],
) -> None:
    """Writes the logprobs of the triples into ``out_N``, :data:`_BLOCK` tokens at a time."""
    salt = np.uint64(int(params[:16] or "0", 16))
    pos, prev, tok = (a.view(np.uint64) for a in (pos_N, prev_N, token_N))
    # Array arithmetic on unsigned ints wraps silently (only scalar operations warn): no np.errstate, whose
    # entry and exit cost more than the hashing of a sample's tokens.
    for s in range(0, out_N.shape[0], _BLOCK):
        e = s + _BLOCK
        key = pos[s:e] * np.uint64(0x9E3779B97F4A7C15)
        key += prev[s:e] * np.uint64(1000003)
        key ^= salt
        key = _mix_inplace(key)
        key += tok[s:e] * np.uint64(0x632BE59BD9B4E019)
        key = _mix_inplace(key)
        key >>= np.uint64(11)
        u = key.astype(np.float64)
        u *= -2.95 / float(2**53)
        u -= 0.05
        out_N[s:e] = u


def _mix_inplace(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`_mix` overwriting ``x`` (a 1-D temporary of the caller), without the temporaries in between."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@dataclass(frozen=True, slots=True)
class FakePolicy:
    """How the scripted policy writes answers.

    Attributes:
        malformed_rate: probability that an answer misses its ``<solution>`` tag (a parse failure).
        yes_rate: probability of consensus YES in round 1; it grows by the same amount each round.
        base_accuracy: probability of the right answer to an ``a op b`` question at version 0.
        accuracy_gain: added per optimizer step (capped at 0.99), so training "helps".
    """

    malformed_rate: float = 0.0
    yes_rate: float = 0.3
    base_accuracy: float = 0.5
    accuracy_gain: float = 0.05

    def __post_init__(self) -> None:
        for name in ("malformed_rate", "yes_rate", "base_accuracy", "accuracy_gain"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")


_WHO = re.compile(r"You are Agent (\d+), one of (\d+) agents")
_ROUND = re.compile(r"round (\d+) of \d+")
_QUESTION = re.compile(r"Question:\n(.*?)(?:\n\n|$)", re.S)
_ARITH = re.compile(r"(-?\d+)\s*([-+*])\s*(-?\d+)")


def _answer(question: str, rng: random.Random, accuracy: float) -> str:
    m = _ARITH.search(question)
    if m is None:
        return str(rng.randrange(10))
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    right = a + b if op == "+" else a - b if op == "-" else a * b
    return str(right if rng.random() < accuracy else right + rng.choice((-2, -1, 1, 2)))


def _scripted_text(prompt_text: str, rng: random.Random, policy: FakePolicy, version: int) -> str:
    who = _WHO.search(prompt_text)
    agent, n = (int(who.group(1)), int(who.group(2))) if who else (0, 1)
    rounds = [int(r) for r in _ROUND.findall(prompt_text)]
    round_index = max(rounds[-1] - 1, 0) if rounds else 0
    question = _QUESTION.search(prompt_text)
    accuracy = min(policy.base_accuracy + policy.accuracy_gain * version, 0.99)
    solution = _answer(question.group(1) if question else "", rng, accuracy)
    judged = [j for j in range(n) if j != agent and (round_index > 0 or j < agent)]
    votes: list[Vote] = []
    if len(judged) >= 2:
        for _ in range(rng.randrange(3)):
            a, b = rng.sample(judged, 2)
            votes.append(Vote(a, ">" if rng.random() < 0.7 else "=", b))
    evaluation = f"Agent {judged[0]} argues well." if judged else "N/A"
    yes = bool(rng.random() < min(policy.yes_rate * (round_index + 1), 1.0))
    text = render_response(
        solution=solution,
        evaluation=evaluation,
        comparisons=votes,
        consensus=yes,
        consensus_reason="We agree." if yes else "Not yet.",
    )
    if rng.random() < policy.malformed_rate:
        text = text.replace("<solution>", "<answer>", 1)
    return text


def _stop_length(tokens_T: npt.NDArray[np.int64], stop: Any) -> int | None:
    """The length of ``tokens_T`` up to and including its first stop (token id or string), or None.

    A string stop matches its UTF-8 bytes as consecutive byte tokens (ids 0–255); it is searched with
    ``bytes.find`` over the tokens as bytes, where every other id is a placeholder that no match may cover.
    """
    if stop is None:
        return None
    stops = [stop] if isinstance(stop, str) else list(stop)
    best = tokens_T.shape[0] + 1
    data: bytes | None = None
    other: list[int] = []  # positions of ids that are not bytes, ascending
    for s in stops:
        if isinstance(s, str):
            if data is None:
                not_byte = (tokens_T < 0) | (tokens_T > 255)
                other = np.flatnonzero(not_byte).tolist()
                data = np.where(not_byte, 0, tokens_T).astype(np.uint8).tobytes()
            pattern = s.encode()
            i = data.find(pattern)
            while i >= 0 and any(i <= j < i + len(pattern) for j in other):
                i = data.find(pattern, i + 1)
            if i >= 0:
                best = min(best, i + len(pattern))
        else:
            hits = np.flatnonzero(tokens_T == s)
            if hits.shape[0]:
                best = min(best, int(hits[0]) + 1)
    return best if best <= tokens_T.shape[0] else None


def sample(
    state: ModelState,
    prompt: tinker.ModelInput,
    num_samples: int,
    sampling_params: types.SamplingParams,
    *,
    policy: FakePolicy = FakePolicy(),
) -> types.SampleResponse:
    """The scripted policy's samples for ``prompt`` under weights ``state``: a pure function.

    Each sequence is the answer's bytes then ``<|end|>``, cut at the first stop sequence (kept, as the
    SDK keeps it) or at ``max_tokens`` (``stop_reason="length"``). Seeded by the weights, the prompt,
    ``sampling_params.seed`` and the sample index.

    Raises:
        ValueError: if ``num_samples < 1``.

    Examples:
        >>> prompt = tinker.ModelInput.from_ints(list(b"Question:\\nWhat is 2 + 2?"))
        >>> params = types.SamplingParams(max_tokens=64, seed=1, stop=["</solution>"])
        >>> out = sample(initial_model_state("fake", 1, 0), prompt, 2, params)
        >>> [(s.stop_reason, ByteTokenizer().decode(s.tokens).split()) for s in out.sequences]
        [('stop', ['<solution>', '3', '</solution>']), ('stop', ['<solution>', '4', '</solution>'])]
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")
    ids = prompt_ids(prompt)
    prompt_text = ids[(ids >= 0) & (ids < 256)].astype(np.uint8).tobytes().decode("utf-8", errors="replace")
    key = _digest(state.params, hashlib.sha256(ids.tobytes()).hexdigest(), str(sampling_params.seed))
    sequences = []
    for k in range(num_samples):
        rng = random.Random(f"{key}-{k}")  # seeded by a str: sha512 of it, the same on every platform
        text = _scripted_text(prompt_text, rng, policy, state.version)
        body = text.encode()
        tokens_T: npt.NDArray[np.int64] = np.empty(len(body) + 1, np.int64)
        tokens_T[:-1] = np.frombuffer(body, np.uint8)
        tokens_T[-1] = _END_ID
        cut = _stop_length(tokens_T, sampling_params.stop)
        if cut is not None:
            tokens_T = tokens_T[:cut]
        limit = sampling_params.max_tokens
        reason: Literal["length", "stop"] = "stop"  # the answer ends with <|end|>: a natural stop
        if limit is not None and tokens_T.shape[0] > limit:
            tokens_T, reason = tokens_T[:limit], "length"
        # token_logprobs over prompt + tokens from len(prompt), without building that concatenation
        if tokens_T.shape[0] and ids.shape[0]:
            pos = np.arange(ids.shape[0], ids.shape[0] + tokens_T.shape[0], dtype=np.int64)
            prev = np.concatenate([ids[-1:], tokens_T[:-1]])
            lps = _logprobs_at(state.params, pos, prev, tokens_T)
        elif tokens_T.shape[0]:
            lps = token_logprobs(state.params, tokens_T, 0)
        else:
            lps = np.zeros(0, np.float32)
        sequences.append(
            types.SampledSequence(
                stop_reason=reason,
                sequence_id=f"{key[:12]}-{k}",
                tokens_np=tokens_T.astype(np.int32),
                logprobs_np=lps,
            )
        )
    return types.SampleResponse(sequences=sequences)


def _batch_logprobs(
    params: str, data: Sequence[types.Datum]
) -> tuple[list[npt.NDArray[np.float32]], list[npt.NDArray[np.int64]]]:
    """Each datum's target logprobs (one hash pass over the whole batch) and its input tokens."""
    inputs_D, last_D = [], []
    for datum in data:
        inputs = prompt_ids(datum.model_input)
        if "target_tokens" not in datum.loss_fn_inputs:
            raise ValueError("data: every datum needs loss_fn_inputs['target_tokens']")
        targets = np.asarray(datum.loss_fn_inputs["target_tokens"].to_numpy(), np.int64).ravel()
        if targets.shape[0] != inputs.shape[0] or not inputs.shape[0]:
            raise ValueError(
                f"data: target_tokens must have the model input's length {inputs.shape[0]}, "
                f"got {targets.shape[0]}"
            )
        inputs_D.append(inputs)
        last_D.append(int(targets[-1]))
    if not inputs_D:
        return [], []
    lengths_D = np.asarray([x.shape[0] for x in inputs_D], np.int64)
    ends_D = np.cumsum(lengths_D)
    lp_N: np.ndarray = np.empty(int(ends_D[-1]), np.float32)
    # Datums are hashed a group of about _BLOCK tokens at a time: the batch is millions of tokens, and
    # arrays of its full length would be fresh memory on every call. Token t of a datum is its input t + 1,
    # and its last target after the last input.
    first = 0
    while first < len(inputs_D):
        last = int(np.searchsorted(ends_D, ends_D[first] - lengths_D[first] + _BLOCK, side="right"))
        last = max(last, first + 1)
        group = slice(first, last)
        prev_N = np.concatenate(inputs_D[group])
        cur_N = np.empty_like(prev_N)
        cur_N[:-1] = prev_N[1:]
        starts = ends_D[group] - lengths_D[group] - (ends_D[first] - lengths_D[first])
        ends = starts + lengths_D[group]
        cur_N[ends - 1] = last_D[group]
        pos_N = np.arange(prev_N.shape[0], dtype=np.int64) - np.repeat(starts, lengths_D[group]) + 1
        base = int(ends_D[first] - lengths_D[first])
        _hash_into(lp_N[base : base + prev_N.shape[0]], params, pos_N, prev_N, cur_N)
        first = last
    return list(np.split(lp_N, ends_D[:-1])), inputs_D


def _input(datum: types.Datum, name: str, length: int, default: float) -> npt.NDArray[np.float64]:
    if name not in datum.loss_fn_inputs:
        return np.full(length, default)
    arr = np.asarray(datum.loss_fn_inputs[name].to_numpy(), np.float64).ravel()
    if arr.shape[0] != length:
        raise ValueError(f"data: loss_fn_inputs[{name!r}] must have length {length}, got {arr.shape[0]}")
    return arr


def _user_error(message: str) -> tinker.RequestFailedError:
    """The SDK's error for a request the service rejected as the user's fault."""
    return tinker.RequestFailedError(message, "fake-request", types.RequestErrorCategory.User)


def _gspo_thresholds(config: Mapping[str, float | str] | None) -> tuple[float, float]:
    """``(clip_low_threshold, clip_high_threshold)`` of a gspo request (both required)."""
    got = dict(config or {})
    missing = [k for k in ("clip_low_threshold", "clip_high_threshold") if k not in got]
    if missing:
        raise _user_error(f"gspo needs loss_fn_config keys {missing} (Tinker documents no defaults)")
    return float(got["clip_low_threshold"]), float(got["clip_high_threshold"])


def forward_backward(
    state: ModelState,
    data: Sequence[types.Datum],
    loss_fn: str,
    loss_fn_config: Mapping[str, float | str] | None = None,
) -> tuple[ModelState, types.ForwardBackwardOutput]:
    """One gradient computation: per-datum target logprobs, a loss value, and the batch recorded.

    The loss is the built-in's value at these weights: cross_entropy −Σ w·lp; the policy-gradient
    losses −Σ exp(lp − q)·A (q the sampler logprobs, A the advantages). The "gradient" is the batch
    fingerprint appended to ``pending``.

    ``gspo`` is :func:`kernel.gspo_loss` (its ``sequence_ratio_mask`` read where a datum has one, else
    the tokens with a nonzero advantage, as the local service does).

    Raises:
        ValueError: for an empty batch, an unknown loss name, or a datum whose inputs do not line up.
        tinker.RequestFailedError: (category ``User``) a ``stable_reinforce`` datum without provenance
            spans or with a nonzero advantage on a prompt token, a ``stable_reinforce`` request with a
            ``loss_fn_config`` (its stand-in computes none), a ``gspo`` request without its clip
            thresholds.

    Examples:
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2, 3]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3, 4])})
        >>> state, out = forward_backward(initial_model_state("fake", 1, 0), [d], "cross_entropy")
        >>> out.loss_fn_output_type, out.loss_fn_outputs[0]["logprobs"].shape, out.metrics["loss:sum"] > 0
        ('cross_entropy', [3], True)
        >>> state.version, state.pending == (batch_fingerprint([d]),)
        (0, True)
    """
    known = ("cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce")
    if loss_fn not in known:
        raise ValueError(f"loss_fn must be one of {list(known)}, got {loss_fn!r}")
    if not data:
        raise ValueError("data must hold at least one datum")
    refusal = provenance_refusal(data, loss_fn) or prompt_advantage_refusal(data, loss_fn)
    if refusal is not None:
        raise _user_error(refusal)
    if loss_fn in SPAN_LOSSES and loss_fn_config:  # e.g. Tinker's kl_coeff, weighing an unpublished term
        raise _user_error(
            f"{loss_fn} takes no loss_fn_config in the fake (got {sorted(loss_fn_config)}): it computes a "
            "stand-in, importance sampling"
        )
    clip = _gspo_thresholds(loss_fn_config) if loss_fn == "gspo" else None
    outputs: list[dict[str, types.TensorData]] = []
    total = 0.0
    lp_D, inputs_D = _batch_logprobs(state.params, data)
    for datum, lp in zip(data, lp_D, strict=True):
        n = lp.shape[0]
        if loss_fn == "cross_entropy":
            total -= float(np.sum(_input(datum, "weights", n, 1.0) * lp))
        elif clip is not None:
            q, a = _input(datum, "logprobs", n, 0.0), _input(datum, "advantages", n, 0.0)
            ratio_where = _input(datum, "sequence_ratio_mask", n, math.nan)
            mask = a != 0 if np.isnan(ratio_where).all() else ratio_where != 0  # the local service's default
            loss = gspo_loss(
                lp, q, a, clip_low_threshold=clip[0], clip_high_threshold=clip[1], ratio_where=mask
            )
            total += float(loss.loss)
        else:
            q = _input(datum, "logprobs", n, 0.0)
            total -= float(np.sum(np.exp(lp - q) * _input(datum, "advantages", n, 0.0)))
        outputs.append({"logprobs": types.TensorData.from_numpy(lp)})
    batch = _digest("batch", *(_fingerprint(x, d) for x, d in zip(inputs_D, data, strict=True)))
    new = dataclasses.replace(state, pending=(*state.pending, batch))
    metrics = {"loss:sum": total}
    if loss_fn in SPAN_LOSSES:  # its value is importance sampling's, in place of Tinker's unpublished one
        metrics["loss/stand_in:max"] = 1.0
    return new, types.ForwardBackwardOutput(
        loss_fn_output_type=loss_fn, loss_fn_outputs=outputs, metrics=metrics
    )


def optim_step(state: ModelState, adam: types.AdamParams) -> tuple[ModelState, types.OptimStepResponse]:
    """Applies the pending gradients: version + 1, a new parameter digest, a :class:`TrainedStep` appended.

    A step with nothing pending still counts (as Adam does with a zero gradient) and records no batch.

    Examples:
        >>> d = types.Datum(model_input=tinker.ModelInput.from_ints([1, 2]),
        ...                 loss_fn_inputs={"target_tokens": np.array([2, 3])})
        >>> state, _ = forward_backward(initial_model_state("fake", 1, 0), [d], "cross_entropy")
        >>> new, out = optim_step(state, types.AdamParams(learning_rate=1e-4))
        >>> new.version, new.pending, new.trained_batches() == [batch_fingerprint([d])], out.metrics
        (1, (), True, {'fake:batches': 1.0})
    """
    version = state.version + 1
    params = _digest(state.params, "step", str(adam.learning_rate), *state.pending)
    step = TrainedStep(version, state.pending, float(adam.learning_rate))
    new = dataclasses.replace(
        state, version=version, params=params, lineage=(*state.lineage, step), pending=()
    )
    return new, types.OptimStepResponse(metrics={"fake:batches": float(len(step.batches))})


def load_state_file(path: str) -> ModelState:
    """Reads a state saved by :meth:`FakeTrainingClient.save_state` (path ``fake:///…`` or a file path).

    Raises:
        ValueError: if the file does not exist or is not a saved fake state.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as root:
        ...     tc = FakeServiceClient(seed=7, root=root).create_lora_training_client("fake", 4).result()
        ...     _ = tc.optim_step(types.AdamParams(learning_rate=1e-4)).result()
        ...     state = load_state_file(tc.save_state("step-1").result().path)
        >>> state.base_model, state.rank, state.seed, state.version, state.lineage[0].learning_rate
        ('fake', 4, 7, 1, 0.0001)
    """
    file = Path(path[len(_URI) :] if path.startswith(_URI) else path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"path {path!r} is not a readable saved state: {e.strerror}") from None
    return ModelState.from_json(text)


@dataclass(frozen=True, slots=True)
class TrainEvent:
    """One thing the service did to a model: ``kind`` ∈ forward_backward, optim_step, save_state, load.

    ``detail`` is the batch fingerprint (forward_backward), the saved path (save_state, load) or ``""``.
    """

    client: int
    kind: str
    version: int
    detail: str


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        f.write(text)


class FakeServiceClient:
    """The shell of the fake service; satisfies :class:`adapters.tinker.protocol.ServiceClient`.

    Args:
        seed: seeds the initial weights and, through them, every sample.
        root: directory for saved states (``root/states/NAME.json``) and the event log
            (``root/events.jsonl``); None keeps saved states in memory (one process only).
        policy: the scripted policy's settings.
        session: the name of the session's sequence ids (default ``f"fake{seed}"``); a process that
            resumes a run is a new session, whose name should differ.

    Examples:
        >>> import asyncio
        >>> async def main():
        ...     service = FakeServiceClient(seed=1)
        ...     tc = await service.create_lora_training_client("fake-model", rank=4)
        ...     sampler = await tc.save_weights_and_get_sampling_client()
        ...     return tc.state.version, sampler.state.version
        >>> asyncio.run(main())
        (0, 0)
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        root: str | os.PathLike[str] | None = None,
        policy: FakePolicy = FakePolicy(),
        session: str | None = None,
    ) -> None:
        self.seed = seed
        self.root = Path(root).resolve() if root is not None else None
        self.policy = policy
        self.session = Session(session if session is not None else f"fake{seed}")
        self.events: list[TrainEvent] = []
        self._memory: dict[str, str] = {}
        self._clients = 0

    def _record(self, event: TrainEvent) -> None:
        self.events.append(event)
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(self.root / "events.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(dataclasses.asdict(event)) + "\n")

    def _new_client(self, state: ModelState) -> FakeTrainingClient:
        self._clients += 1
        return FakeTrainingClient(self, state, self._clients)

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> CompletedFuture[FakeTrainingClient]:
        """A training client on fresh weights (version 0).

        Raises:
            ValueError: a target flag is False (the fake model has no layers to choose from).
        """
        if not (train_mlp and train_attn and train_unembed):
            raise ValueError(
                "the fake model has no layers to choose: train_mlp, train_attn and train_unembed "
                "must stay True"
            )
        return completed(self._new_client(initial_model_state(base_model, rank, self.seed)))

    def create_training_client_from_state_with_optimizer(
        self, path: str
    ) -> CompletedFuture[FakeTrainingClient]:
        """A training client on a saved state (weights, optimizer history); pending gradients start empty.

        Raises:
            ValueError: if ``path`` names no saved state (raised when the future is awaited).
        """
        try:
            state = (
                ModelState.from_json(self._memory[path]) if path in self._memory else load_state_file(path)
            )
        except ValueError as e:
            return CompletedFuture(error=e)
        client = self._new_client(state)
        self._record(TrainEvent(client.client_id, "load", state.version, path))
        return completed(client)

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        *,
        record_stability_info: bool = False,
    ) -> CompletedFuture[FakeSamplingClient]:
        """A sampler on a saved state (``model_path``) or on fresh weights of ``base_model``; its samples
        are recorded for ``stable_reinforce`` when ``record_stability_info``."""
        if model_path is not None:
            try:
                state = (
                    ModelState.from_json(self._memory[model_path])
                    if model_path in self._memory
                    else load_state_file(model_path)
                )
            except ValueError as e:
                return CompletedFuture(error=e)
        elif base_model is not None:
            state = initial_model_state(base_model, 1, self.seed)
        else:
            return CompletedFuture(error=ValueError("pass model_path or base_model"))
        return completed(self._sampler(state, record_stability_info))

    def _sampler(self, state: ModelState, record_stability_info: bool) -> FakeSamplingClient:
        return FakeSamplingClient(
            state, self.policy, session=self.session, record_stability_info=record_stability_info
        )

    def trained_batches(self) -> list[str]:
        """Fingerprints of every forward_backward this service ran, in order (including discarded work)."""
        return [e.detail for e in self.events if e.kind == "forward_backward"]

    def save_text(self, name: str, text: str) -> str:
        """Stores a saved state; returns its path (a ``fake://`` file URI when ``root`` is set)."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"name must be a plain non-empty file name, got {name!r}")
        if self.root is None:
            path = f"{_URI}memory/{name}"
            self._memory[path] = text
            return path
        file = self.root / "states" / f"{name}.json"
        _write_atomic(file, text)
        return f"{_URI}{file}"


class FakeTrainingClient:
    """A model being trained on the fake service; satisfies :class:`adapters.tinker.protocol.TrainingClient`.

    ``state`` is the current :class:`ModelState`; requests run at submission, in submission order.
    """

    def __init__(self, service: FakeServiceClient, state: ModelState, client_id: int) -> None:
        self.service = service
        self.state = state
        self.client_id = client_id

    def _record(self, kind: str, detail: str) -> None:
        self.service._record(TrainEvent(self.client_id, kind, self.state.version, detail))

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        """See :func:`forward_backward`; errors arrive through the future. A ``stable_reinforce`` batch
        whose spans name a sequence this session holds no stability record of is refused (the SDK's
        ``RequestFailedError``, category ``User``)."""
        try:
            if loss_fn in SPAN_LOSSES and provenance_refusal(data, loss_fn) is None:
                unknown = self.service.session.unrecorded(span_ids(data))
                if unknown:
                    raise _user_error(
                        f"{loss_fn}: no stability record of sequence {unknown[0]!r} in this session "
                        f"({len(unknown)} such): sample with record_stability_info=True, in the session "
                        "that trains"
                    )
            self.state, out = forward_backward(self.state, data, loss_fn, loss_fn_config)
        except (ValueError, tinker.RequestFailedError) as e:
            return CompletedFuture(error=e)
        self._record("forward_backward", self.state.pending[-1])
        return completed(out)

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> CompletedFuture[types.ForwardBackwardOutput]:
        """Calls ``loss_fn(data, logprobs)`` with numpy logprobs (no autograd here) and records the batch."""
        try:
            logprobs = _batch_logprobs(self.state.params, data)[0]
            if not data:
                raise ValueError("data must hold at least one datum")
            loss, metrics = loss_fn(data, logprobs)
        except ValueError as e:
            return CompletedFuture(error=e)
        self.state = dataclasses.replace(self.state, pending=(*self.state.pending, batch_fingerprint(data)))
        self._record("forward_backward", self.state.pending[-1])
        outputs = [{"logprobs": types.TensorData.from_numpy(lp)} for lp in logprobs]
        all_metrics = {
            "loss:sum": float(np.sum(np.asarray(loss))),
            **{k: float(v) for k, v in metrics.items()},
        }
        return completed(types.ForwardBackwardOutput("custom", outputs, all_metrics))

    def optim_step(self, optim_params: types.AdamParams) -> CompletedFuture[types.OptimStepResponse]:
        """See :func:`optim_step`."""
        self.state, out = optim_step(self.state, optim_params)
        self._record("optim_step", "")
        return completed(out)

    def save_state(self, name: str) -> CompletedFuture[types.SaveWeightsResponse]:
        """Saves weights and optimizer history under ``name``; the response's ``path`` restores them."""
        try:
            path = self.service.save_text(name, self.state.to_json())
        except ValueError as e:
            return CompletedFuture(error=e)
        self._record("save_state", path)
        return completed(types.SaveWeightsResponse(path=path))

    def save_weights_and_get_sampling_client(
        self, name: str | None = None, *, record_stability_info: bool = False
    ) -> CompletedFuture[FakeSamplingClient]:
        """A sampler on a snapshot of the current weights (its samples recorded for ``stable_reinforce``
        when ``record_stability_info``)."""
        return completed(self.service._sampler(self.state, record_stability_info))

    def get_tokenizer(self) -> ByteTokenizer:
        """The fake's tokenizer: :class:`ByteTokenizer`."""
        return ByteTokenizer()


class FakeSamplingClient:
    """A sampler on a frozen snapshot of weights; satisfies :class:`~adapters.tinker.protocol.SamplingClient`.

    ``state`` is the snapshot: its ``version`` is the policy version of every sample. Sequence ids come
    from ``session`` (a sampler of its own when None), fixed when a sample is submitted.
    """

    def __init__(
        self,
        state: ModelState,
        policy: FakePolicy = FakePolicy(),
        *,
        session: Session | None = None,
        record_stability_info: bool = False,
    ) -> None:
        self.state = dataclasses.replace(state, pending=())
        self.policy = policy
        self.session = session if session is not None else Session(f"sampler-{state.params[:8]}")
        self.record_stability_info = record_stability_info

    def sample(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> CompletedFuture[types.SampleResponse]:
        """See :func:`sample`; errors arrive through the future. The samples are computed on the first
        ``result()`` (a :class:`DeferredFuture`: a pure function of this snapshot and the arguments), so
        under injected latency the fake computes while the caller waits, as a remote service does. The
        sequence ids are the session's, fixed now (as tinker 0.38 fixes them when a request is submitted)."""
        state, policy = self.state, self.policy
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            return CompletedFuture(error=ValueError(f"num_samples must be an int >= 1, got {num_samples!r}"))
        ids = self.session.issue(num_samples, stability=self.record_stability_info)

        def run() -> types.SampleResponse:
            response = sample(state, prompt, num_samples, sampling_params, policy=policy)
            return dataclasses.replace(
                response,
                sequences=[
                    dataclasses.replace(seq, sequence_id=i)
                    for seq, i in zip(response.sequences, ids, strict=True)
                ],
            )

        return DeferredFuture(run)

    def compute_logprobs(self, prompt: tinker.ModelInput) -> CompletedFuture[list[float | None]]:
        """Logprob of every prompt token given the ones before (None for the first), under this snapshot."""
        ids = prompt.to_ints()
        lps: list[float | None] = [None]
        if len(ids) > 1:
            lps += [float(x) for x in token_logprobs(self.state.params, ids, 1)]
        return completed(lps[: len(ids)])

    def get_tokenizer(self) -> ByteTokenizer:
        """The fake's tokenizer: :class:`ByteTokenizer`."""
        return ByteTokenizer()
