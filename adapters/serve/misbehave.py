"""Deliberately broken services for tests: ``debate-kernel serve --misbehave KIND[=NAME]``.

:class:`MisbehavingCore` is a :class:`~adapters.serve.state.ServeCore` that breaks one promise the
training loop relies on (those :mod:`adapters.tinker.contract` checks before step 0) for the runs and
samplers of one served base-model name, or of every name. One server can then hold a well-behaved name
and one broken name per kind (``--served-name`` aliases of the same model), and a test meets each broken
contract through the unmodified SDK. The SDK receives what a broken server would send: requests are
rewritten on their way into the core and replies on their way out; the core is unchanged.

Kinds (:data:`MISBEHAVIOURS`):

- ``unfrozen``: a sampler made by ``save_weights_and_get_sampling_client`` follows its training client:
  every request to it reads the trainer's current weights, not the snapshot's.
- ``reloads``: using such a sampler loads the state it was made from (weights and optimizer) back into
  its training client, undoing the optimizer steps taken since (the state is written under the run's
  folder, as ``save_state`` writes one).
- ``short-logprobs``: ``compute_logprobs`` (a sample request with prompt logprobs) answers one entry fewer
  than the prompt (the last one is dropped).
- ``ignore-stops``: ``sample`` ignores the request's stop sequences.
- ``few-samples``: ``sample`` returns one sequence fewer than ``num_samples`` (its promise lists as many
  sequence ids, so the SDK accepts the reply).
- ``out-of-vocab``: the first token of every sampled sequence is moved past the vocabulary (id + the
  model's vocabulary size).

Which clients: a run made by ``create_model`` (``create_lora_training_client``) under a misbehaving name,
the samplers it makes, and samplers made by ``create_sampling_session`` of that name or of that run's
saved weights (``unfrozen`` and ``reloads`` concern snapshot samplers only). Runs loaded from a saved
state (``--resume``) behave.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from tinker import types

from adapters.serve.state import Job, ServeCore, ServeError

__all__ = ["MISBEHAVIOURS", "MisbehavingCore", "Misbehaviour", "misbehave_reply", "parse_misbehaviour"]

MISBEHAVIOURS: Final[tuple[str, ...]] = (
    "unfrozen",
    "reloads",
    "short-logprobs",
    "ignore-stops",
    "few-samples",
    "out-of-vocab",
)
"""The kinds of misbehaviour (see the module docstring)."""

_SNAPSHOT_ONLY = frozenset({"unfrozen", "reloads"})


@dataclasses.dataclass(frozen=True, slots=True)
class Misbehaviour:
    """One ``--misbehave``: the kind, and the served base-model name it applies to (None: every name)."""

    kind: str
    base_model: str | None = None


def parse_misbehaviour(text: str) -> Misbehaviour:
    """``KIND`` or ``KIND=NAME`` (the ``--misbehave`` flag) as a :class:`Misbehaviour`.

    Raises:
        ValueError: an unknown kind (naming the kinds) or an empty name.

    Examples:
        >>> parse_misbehaviour("short-logprobs=tiny-short")
        Misbehaviour(kind='short-logprobs', base_model='tiny-short')
        >>> parse_misbehaviour("unfrozen")
        Misbehaviour(kind='unfrozen', base_model=None)
    """
    kind, sep, name = text.partition("=")
    kind = kind.strip()
    if kind not in MISBEHAVIOURS:
        raise ValueError(f"--misbehave: unknown kind {kind!r} in {text!r}; kinds: {', '.join(MISBEHAVIOURS)}")
    if sep and not name:
        raise ValueError(f"--misbehave: {text!r} names no base model after '='")
    return Misbehaviour(kind, name if sep else None)


def misbehave_reply(
    response: types.SampleResponse, kinds: frozenset[str], *, scoring: bool, vocab_size: int
) -> types.SampleResponse:
    """A sample reply as the misbehaviours ``kinds`` change it: ``short-logprobs`` drops the last prompt
    logprob of a scoring request (``compute_logprobs``); on the others, ``few-samples`` drops the last
    sequence and ``out-of-vocab`` adds ``vocab_size`` to each sequence's first token.

    Examples:
        >>> seq = types.SampledSequence("length", "s", np.array([5, 6], np.int32), np.array([-1.0, -2.0]))
        >>> out = misbehave_reply(types.SampleResponse(sequences=[seq, seq]), frozenset({"few-samples",
        ...                       "out-of-vocab"}), scoring=False, vocab_size=262)
        >>> [s.tokens for s in out.sequences]
        [[267, 6]]
        >>> scored = types.SampleResponse(sequences=[seq], prompt_logprobs_np=np.array([np.nan, -1.0, -2.0]))
        >>> short = misbehave_reply(scored, frozenset({"short-logprobs"}), scoring=True, vocab_size=262)
        >>> short.prompt_logprobs
        [None, -1.0]
    """
    if scoring:
        lps = response.prompt_logprobs_np
        if "short-logprobs" in kinds and lps is not None:
            return dataclasses.replace(response, prompt_logprobs_np=lps[:-1])
        return response
    seqs = list(response.sequences)
    if "few-samples" in kinds:
        seqs = seqs[:-1]
    if "out-of-vocab" in kinds:
        seqs = [_past_vocabulary(s, vocab_size) for s in seqs]
    return dataclasses.replace(response, sequences=seqs)


def _past_vocabulary(seq: types.SampledSequence, vocab_size: int) -> types.SampledSequence:
    tokens = np.asarray(seq.tokens, np.int64)
    if tokens.size:
        tokens[0] += vocab_size
    return dataclasses.replace(seq, tokens_np=tokens.astype(np.int32), _tokens_list=None)


class MisbehavingCore(ServeCore):
    """A :class:`~adapters.serve.state.ServeCore` with the misbehaviours of the module docstring.

    Args:
        misbehaviours: what breaks, and for which served name (keyword).
        **kwargs: :class:`~adapters.serve.state.ServeCore`'s arguments.

    Raises:
        ValueError: a misbehaviour names a base model the server does not serve, or ServeCore's own.
    """

    def __init__(self, *, misbehaviours: Sequence[Misbehaviour] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        names = (self.model, *self.served_names)
        unknown = [b.base_model for b in misbehaviours if b.base_model not in (None, *names)]
        if unknown:
            raise ValueError(
                f"--misbehave names {unknown[0]!r}, which this server does not serve (served: "
                f"{', '.join(names)}; add it with --served-name)"
            )
        self.misbehaviours = tuple(misbehaviours)
        self._run_kinds: dict[str, frozenset[str]] = {}  # model id -> kinds
        self._sampler_kinds: dict[str, frozenset[str]] = {}  # sampling session id -> kinds
        self._snapshots: dict[str, tuple[str, str | None]] = {}  # sampler id -> (model id, state to reload)
        self._reloads = itertools.count()

    def kinds_for(self, base_model: str | None) -> frozenset[str]:
        """The misbehaviours of clients of ``base_model`` (as the request names it)."""
        return frozenset(b.kind for b in self.misbehaviours if b.base_model in (None, base_model))

    def create_model(self, req: types.CreateModelRequest) -> Job:
        """:meth:`ServeCore.create_model`; the run misbehaves as its base-model name says."""
        job = super().create_model(req)
        kinds = self.kinds_for(req.base_model)
        if kinds and job.future.model_id is not None:
            self._run_kinds[job.future.model_id] = kinds
        return job

    def save_weights_for_sampler(self, req: types.SaveWeightsForSamplerRequest) -> Job:
        """:meth:`ServeCore.save_weights_for_sampler`; a misbehaving run's snapshot sampler misbehaves."""
        job = super().save_weights_for_sampler(req)
        kinds = self._run_kinds.get(req.model_id, frozenset())
        if not kinds or req.path is not None:
            return job

        def work() -> Any:
            out = job.work()
            sampler_id = out.sampling_session_id
            state = None
            if "reloads" in kinds:
                trainer = self._runs[req.model_id].client  # the run the snapshot was just made of
                state = trainer.save_state(f"misbehave-reloads-{next(self._reloads)}").result().path
            self._snapshots[sampler_id] = (req.model_id, state)
            self._sampler_kinds[sampler_id] = kinds
            return out

        return job._replace(work=work)

    def create_sampling_session(
        self, req: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """:meth:`ServeCore.create_sampling_session`; a sampler of a misbehaving name or run misbehaves."""
        out = super().create_sampling_session(req)
        if req.model_path is not None:
            kinds = self._run_kinds.get(self.resolve(req.model_path)[1], frozenset())
        else:
            kinds = self.kinds_for(req.base_model)
        if kinds - _SNAPSHOT_ONLY:
            self._sampler_kinds[out.sampling_session_id] = kinds - _SNAPSHOT_ONLY
        return out

    def asample(self, req: types.SampleRequest) -> Job:
        """:meth:`ServeCore.asample`, the request and its reply changed as the sampler misbehaves."""
        sampler_id = req.sampling_session_id or ""
        kinds = self._sampler_kinds.get(sampler_id, frozenset())
        if not kinds:
            return super().asample(req)
        scoring = bool(req.prompt_logprobs)
        if "ignore-stops" in kinds and req.sampling_params.stop is not None:
            params = req.sampling_params.model_copy(update={"stop": None})
            req = req.model_copy(update={"sampling_params": params})
        job = super().asample(req)
        future = job.future
        if "few-samples" in kinds and not scoring and future.sample_sequence_ids:
            future = future.model_copy(update={"sample_sequence_ids": future.sample_sequence_ids[:-1]})

        def work() -> types.SampleResponse:
            self._before_use(sampler_id, kinds)
            out = job.work()
            if not isinstance(out, types.SampleResponse):
                raise ServeError(f"sampling session {sampler_id!r} answered {type(out).__name__}")
            return misbehave_reply(out, kinds, scoring=scoring, vocab_size=self.engine.vocab_size)

        return Job(future, work)

    def _before_use(self, sampler_id: str, kinds: frozenset[str]) -> None:
        """``reloads``: the snapshot's state back into its trainer; ``unfrozen``: the sampler replaced by
        one of the trainer's current weights."""
        model_id, state = self._snapshots.get(sampler_id, ("", None))
        run = self._runs.get(model_id)
        if run is None:  # not a snapshot, or its session has finished
            return
        trainer = run.client
        if "reloads" in kinds and state is not None:
            trainer.load_state_with_optimizer(state).result()
        if "unfrozen" in kinds:
            self._samplers[sampler_id].client = trainer.save_weights_and_get_sampling_client().result()
