"""A byte-level tokenizer with a few chat special tokens and no dependency beyond numpy.

Ids ``0 … 255`` are the UTF-8 bytes of the text; ids ``256 … 261`` are the special tokens below. Text is
encoded byte by byte: a special token's *name* appearing in the text is just bytes, never the special id,
so user text can never forge a turn boundary. Decoding writes specials by name (or drops them) and the
bytes as UTF-8 with invalid sequences replaced by U+FFFD.

It satisfies :class:`adapters.tinker.protocol.Tokenizer`; the fake service and the local service
(:mod:`adapters.local`) hand it out from ``get_tokenizer()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import numpy as np

__all__ = ["SPECIAL_TOKENS", "ByteTokenizer"]

SPECIAL_TOKENS: Final[tuple[str, ...]] = (
    "<|bos|>",
    "<|eos|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
)
"""Special token names in id order: ``SPECIAL_TOKENS[k]`` has id ``256 + k``."""

_NUM_BYTES: Final = 256


def _utf8(ids: np.ndarray[tuple[int], np.dtype[np.integer]]) -> str:
    return bytes(ids.astype(np.uint8)).decode("utf-8", errors="replace")


def _bytes_then_special(ids: list[int], skip: bool, vocab_size: int) -> str | None:
    """``decode`` of a list of Python ints that are bytes, the last one possibly a special token (a sampled
    turn ends with its stop token), without an array; None for any other list (the general path)."""
    if not ids or set(map(type, ids)) != {int}:
        return None
    last = ids[-1]
    special = _NUM_BYTES <= last < vocab_size
    try:
        data = bytes(ids[:-1] if special else ids)  # bytes() refuses an id outside [0, 256)
    except ValueError:
        return None
    text = data.decode("utf-8", errors="replace")
    return text if skip or not special else text + SPECIAL_TOKENS[last - _NUM_BYTES]


class ByteTokenizer:
    """UTF-8 bytes as ids 0 … 255 plus six special tokens 256 … 261; ``vocab_size = 262``.

    Examples:
        >>> tok = ByteTokenizer()
        >>> tok.encode("hé")
        [104, 195, 169]
        >>> tok.decode([tok.special_id("<|user|>"), 104, 105, tok.eos_token_id])
        '<|user|>hi<|eos|>'
        >>> tok.decode([259, 104, 105, 257], skip_special_tokens=True)
        'hi'
        >>> tok.encode("<|eos|>") == list(b"<|eos|>")
        True
    """

    vocab_size: Final[int] = _NUM_BYTES + len(SPECIAL_TOKENS)
    """Number of ids: 256 bytes plus the special tokens."""

    bos_token_id: Final[int] = _NUM_BYTES + SPECIAL_TOKENS.index("<|bos|>")
    """Id of ``<|bos|>`` (256)."""

    eos_token_id: Final[int] = _NUM_BYTES + SPECIAL_TOKENS.index("<|eos|>")
    """Id of ``<|eos|>`` (257)."""

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """The UTF-8 bytes of ``text`` as ids; special names in the text stay bytes.

        Args:
            text: any str.
            add_special_tokens: prepend ``<|bos|>`` (keyword; default False).

        Returns:
            A list of ids in ``[0, 256)``, after the optional ``<|bos|>``.

        Raises:
            TypeError: if ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def encode_array(self, text: str) -> np.ndarray[tuple[int], np.dtype[np.uint8]]:
        """:meth:`encode` as a read-only uint8 array over the text's UTF-8 bytes (no list of ints).

        Raises:
            TypeError: if ``text`` is not a str.

        Examples:
            >>> ByteTokenizer().encode_array("hé").tolist()
            [104, 195, 169]
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids: np.ndarray[tuple[int], np.dtype[np.uint8]] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        return ids

    def decode(self, token_ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """The text of ``token_ids``: bytes as UTF-8 (errors replaced), specials by name or dropped.

        Args:
            token_ids: ids in ``[0, vocab_size)`` (any iterable of ints, numpy ints included).
            skip_special_tokens: drop the special tokens instead of writing their names (keyword).

        Returns:
            The decoded str.

        Raises:
            TypeError: if the ids are not a flat sequence of integers.
            ValueError: if an id lies outside ``[0, vocab_size)``.
        """
        if type(token_ids) is list:
            text = _bytes_then_special(token_ids, skip_special_tokens, self.vocab_size)
            if text is not None:
                return text
        seq = token_ids if isinstance(token_ids, list | tuple | np.ndarray) else list(token_ids)
        arr = np.asarray(seq)
        if arr.size == 0:
            return ""
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            kinds = (
                sorted({type(t).__name__ for t in arr.ravel().tolist()})
                if arr.dtype == object
                else [arr.dtype]
            )
            raise TypeError(f"token_ids must be a flat sequence of ints, got {kinds} with shape {arr.shape}")
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= self.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"token_ids must lie in [0, {self.vocab_size}), got {bad}")
        if high < _NUM_BYTES:
            return _utf8(arr)
        parts: list[str] = []
        begin = 0
        for k in np.flatnonzero(arr >= _NUM_BYTES).tolist():
            if k > begin:
                parts.append(_utf8(arr[begin:k]))
            if not skip_special_tokens:
                parts.append(SPECIAL_TOKENS[int(arr[k]) - _NUM_BYTES])
            begin = k + 1
        if begin < arr.size:
            parts.append(_utf8(arr[begin:]))
        return "".join(parts)

    def special_id(self, name: str) -> int:
        """The id of a special token given its name, e.g. ``special_id("<|end|>") == 261``.

        Raises:
            ValueError: if ``name`` is not one of :data:`SPECIAL_TOKENS`.
        """
        if name not in SPECIAL_TOKENS:
            raise ValueError(f"name must be one of {list(SPECIAL_TOKENS)}, got {name!r}")
        return _NUM_BYTES + SPECIAL_TOKENS.index(name)

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is a special token (``256 ≤ id < vocab_size``)."""
        return _NUM_BYTES <= token_id < self.vocab_size
