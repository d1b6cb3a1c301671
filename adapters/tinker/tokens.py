"""Token ids for the SDK's ``EncodedTextChunk.tokens``, held as a read-only numpy array.

``ModelInput.from_ints`` holds a Python ``list`` of ``int``; building one costs an object per position,
which dominates converting a large batch of datums. :class:`TokenArray` is an immutable
``Sequence[int]`` over an int64 array instead: the SDK's training encoder reads it through
``np.asarray`` (no Python ints at all), while everything that reads it as a sequence sees Python ints:
iteration, indexing, ``to_ints()``, ``==`` with a list, ``len``, ``in``, pickling and copying.

pydantic serialises a ``Sequence[int]`` field through a table of the sequence types it knows
(``pydantic._internal._serializers.SEQUENCE_ORIGIN_MAP``) and returns unknown types unchanged, which a
JSON dump then cannot encode. :func:`tokens_supported` adds :class:`TokenArray` to that table as a
``list`` and then checks, on a probe, that every SDK operation that takes a model input gives exactly
what it gives for ``ModelInput.from_ints``: ``model_dump`` (Python and JSON modes), ``model_dump_json``,
the sampler's request body (``SampleRequest``, as ``sample`` and ``compute_logprobs`` send it), the
training request's token bytes, ``==``, ``to_ints``, ``append_int``, pickling and deep copies. Where
that does not hold (another pydantic), callers fall back to int lists.

What it saves (``python -m benchmarks train``, interleaved pairs against prompts and transcript turns as
int lists, ``ModelInput.from_ints``): the step with 50 / 200 ms latencies 6.9 % (median of 4 pairs,
0.92-1.14 ×), the zero-latency step 22 % (1.04-1.66 ×), the run's CPU time 17 % (1.13-1.19 ×); and
converting 1,300 datums of 880 tokens takes 24 ms with token arrays against 49 ms with int lists.

Examples:
    >>> import numpy as np
    >>> t = TokenArray(np.array([5, 6, 7]))
    >>> t, len(t), t[1], t[1:].tolist(), t == [5, 6, 7], type(list(t)[0]).__name__
    (TokenArray([5, 6, 7]), 3, 6, [6, 7], True, 'int')
"""

from __future__ import annotations

import copy
import functools
import operator
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
from tinker import types

from kernel.checks import check_type

__all__ = ["TokenArray", "model_input_of", "prompt_ids", "tokens_supported"]


class TokenArray(Sequence[int]):
    """An immutable sequence of token ids over a one-dimensional integer array (kept read-only).

    Args:
        ids: a 1-D integer array; it is viewed read-only, not copied (copy it first if its owner may
            write to it later). A list or tuple of ints is copied into an int64 array (pydantic rebuilds
            a validated ``Sequence[int]`` as ``type(value)(list_of_items)``: ``EncodedTextChunk(tokens=
            t[:-1])`` must work as it does for a list).

    Raises:
        TypeError: ``ids`` is not a 1-D integer array or a sequence of ints (bools and floats included).
    """

    __slots__ = ("_ids",)
    _ids: npt.NDArray[np.integer[Any]]

    def __init__(self, ids: npt.NDArray[np.integer[Any]] | Sequence[int]) -> None:
        if isinstance(ids, list | tuple):
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise TypeError("ids must be a 1-D integer numpy array or a sequence of ints")
            try:
                ids = np.array(ids, dtype=np.int64)
            except OverflowError:
                raise TypeError("ids must fit int64") from None
        if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise TypeError(f"ids must be a 1-D integer numpy array, got {type(ids).__name__}")
        view = ids.view()
        view.flags.writeable = False
        self._ids = view

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> TokenArray: ...

    def __getitem__(self, index: int | slice) -> int | TokenArray:
        if isinstance(index, slice):
            return TokenArray(self._ids[index])
        # as a list: any object with __index__ (True is 1), a TypeError for others (numpy would read a
        # bool as a mask and a float as an error of its own), an IndexError for any int out of range
        # (numpy raises OverflowError beyond int64)
        i, n = operator.index(index), self._ids.shape[0]
        if not -n <= i < n:
            raise IndexError("TokenArray index out of range")
        return int(self._ids[i])

    def __add__(self, other: object) -> list[int]:
        """``t + [1]``: a list, as for the list of ints ``from_ints`` holds."""
        if not isinstance(other, TokenArray | list | tuple):
            return NotImplemented
        return [*self, *other]

    def __radd__(self, other: object) -> list[int]:
        """``[1] + t``: a list."""
        if not isinstance(other, list | tuple):
            return NotImplemented
        return [*other, *self]

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __contains__(self, value: object) -> bool:
        if isinstance(value, int | np.integer):  # exact in numpy, out-of-range ints included
            return bool((self._ids == value).any())
        return value in self._ids.tolist()  # 6.0 or Fraction(6) is in [6], as Python compares them

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenArray):
            return bool(np.array_equal(self._ids, other._ids))
        if isinstance(other, list):
            return bool(self._ids.tolist() == other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, like the list it stands for

    def __repr__(self) -> str:
        return f"TokenArray({self._ids.tolist()})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        if dtype is None or np.dtype(dtype) == self._ids.dtype:
            return self._ids.copy() if copy else self._ids
        target = np.dtype(dtype)
        if target.kind in "iu" and self._ids.size and not np.can_cast(self._ids.dtype, target):
            # as np.asarray of the list: an id outside the target type raises instead of wrapping
            info = np.iinfo(target)
            for bound in (int(self._ids.min()), int(self._ids.max())):
                if not info.min <= bound <= info.max:
                    raise OverflowError(f"Python integer {bound} out of bounds for {target}")
        return self._ids.astype(target)

    def __reduce__(self) -> tuple[type[TokenArray], tuple[npt.NDArray[np.integer[Any]]]]:
        return TokenArray, (np.array(self._ids),)

    def tolist(self) -> list[int]:
        """The ids as a list of Python ints."""
        return self._ids.tolist()  # type: ignore[no-any-return]


def _probe_equal(make: Any) -> bool:
    """Every SDK operation on a model input built by ``make(tokens)`` equals ``ModelInput.from_ints``."""
    import tinker
    from tinker import types

    ids = [3, 70_000, 3, 2**31 - 1]
    ours, theirs = make(np.array(ids, dtype=np.int64)), tinker.ModelInput.from_ints(list(ids))
    params = types.SamplingParams(max_tokens=4)

    def request(prompt: Any) -> Any:
        return types.SampleRequest(
            num_samples=1, prompt=prompt, sampling_params=params, sampling_session_id="s"
        )

    checks: list[Callable[[Any], Any]] = [
        (lambda m: m.model_dump()),
        (lambda m: m.model_dump(mode="json")),
        (lambda m: m.model_dump_json()),
        (lambda m: request(m).model_dump(exclude_none=True, mode="json")),
        (lambda m: request(m).model_dump(exclude_none=True)),
        (lambda m: request(m).model_dump_json()),
        (lambda m: [type(t) for t in m.to_ints()] + m.to_ints()),
        (lambda m: m.append_int(9).model_dump(mode="json")),
        (lambda m: np.asarray(m.chunks[0].tokens, dtype=np.int32).tobytes()),
        (lambda m: pickle.loads(pickle.dumps(m)).model_dump(mode="json")),
        (lambda m: copy.deepcopy(m).model_dump(mode="json")),
        (lambda m: m.length),
    ]
    try:
        return ours == theirs and theirs == ours and all(check(ours) == check(theirs) for check in checks)
    except Exception:
        return False


@functools.cache
def tokens_supported() -> bool:
    """Registers :class:`TokenArray` with pydantic's sequence serialiser; True if the SDK then treats a
    model input holding one exactly as it treats ``ModelInput.from_ints`` (see the module docstring)."""
    try:
        from pydantic._internal import _serializers
    except ImportError:  # pragma: no cover - another pydantic
        return False
    table = getattr(_serializers, "SEQUENCE_ORIGIN_MAP", None)
    if not isinstance(table, dict):  # pragma: no cover - another pydantic
        return False
    table.setdefault(TokenArray, list)

    return _probe_equal(_array_model_input)


def _array_model_input(ids: npt.NDArray[np.integer[Any]]) -> types.ModelInput:
    """A ``ModelInput`` of one text chunk whose tokens are a :class:`TokenArray` view of ``ids``, built by
    pydantic's ``model_construct`` (not validated: the probe of :func:`tokens_supported` checks that the
    SDK treats it as ``ModelInput.from_ints``)."""
    chunk = types.EncodedTextChunk.model_construct(tokens=TokenArray(ids))
    model_input: types.ModelInput = types.ModelInput.model_construct(chunks=[chunk])
    return model_input


def model_input_of(ids: npt.NDArray[np.integer[Any]]) -> types.ModelInput:
    """A ``ModelInput`` of one text chunk holding ``ids``: a :class:`TokenArray` view where
    :func:`tokens_supported`, else a list of ints (``ModelInput.from_ints``).

    Args:
        ids: a 1-D integer array; it is viewed read-only, not copied.

    Examples:
        >>> import numpy as np
        >>> model_input_of(np.array([3, 4])).to_ints()
        [3, 4]
    """
    if not tokens_supported():  # pragma: no cover - another pydantic
        return types.ModelInput.from_ints(ids.tolist())
    return _array_model_input(ids)


@overload
def prompt_ids(model_input: types.ModelInput, *, held: Literal[False] = False) -> npt.NDArray[np.int64]: ...


@overload
def prompt_ids(model_input: types.ModelInput, *, held: bool) -> npt.NDArray[np.integer[Any]]: ...


def prompt_ids(model_input: types.ModelInput, *, held: bool = False) -> npt.NDArray[np.integer[Any]]:
    """The token ids of a ``ModelInput`` made of text chunks, as one int64 array (no Python ints when
    the chunks hold :class:`TokenArray`; ``to_ints()`` raises its own error for other chunks).

    ``held``: one chunk holding a :class:`TokenArray` gives the array it holds, in its own dtype and not
    copied (the byte renderer's prompts are int32); anything else is int64 as without it.

    Examples:
        >>> import numpy as np
        >>> from tinker import types
        >>> prompt_ids(types.ModelInput.from_ints([1, 2])).tolist()
        [1, 2]
        >>> prompt_ids(model_input_of(np.array([1, 2], np.int32)), held=True).dtype
        dtype('int32')
    """
    check_type(model_input, types.ModelInput, "model_input")
    chunks = [c for c in model_input.chunks if isinstance(c, types.EncodedTextChunk)]
    if len(chunks) != len(model_input.chunks):
        return np.asarray(model_input.to_ints(), np.int64)
    if len(chunks) == 1:
        tokens = chunks[0].tokens
        return np.asarray(tokens) if held and isinstance(tokens, TokenArray) else np.asarray(tokens, np.int64)
    return np.concatenate([np.asarray(c.tokens, np.int64) for c in chunks] or [np.zeros(0, np.int64)])
