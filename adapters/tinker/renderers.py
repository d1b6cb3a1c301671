"""Renderers: chat messages → prompt tokens and stop sequences; sampled tokens → text.

A renderer fixes how a model sees a conversation. :class:`ByteRenderer` needs nothing but
:class:`~adapters.tokenizers.ByteTokenizer` and uses its special tokens as the chat format::

    <|bos|><|system|>{system}<|end|><|user|>{user}<|end|><|assistant|>   → the model writes {answer}<|end|>

:class:`ChatTemplateRenderer` uses a Hugging Face tokenizer's own chat template (the ``transformers``
package, an optional dependency, is imported only by the caller that builds the tokenizer).

Stop sequences follow the reference rule through :func:`kernel.stop_sequences`: token ids alone, or
strings plus ``</consensus_reason>``, de-duplicated.

:func:`choose_renderer` picks one for a tokenizer (``--renderer {auto,byte,chat}``), and
:func:`load_tokenizer` reads a Hugging Face tokenizer from a local directory, offline.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import numpy as np
import tinker

from adapters.tinker.tokens import model_input_of
from adapters.tokenizers import SPECIAL_TOKENS, ByteTokenizer
from kernel import Message, stop_sequences

__all__ = [
    "RENDERER_KINDS",
    "ByteRenderer",
    "ChatTemplateRenderer",
    "Renderer",
    "choose_renderer",
    "load_tokenizer",
    "vocab_size_of",
]

_ROLES = ("system", "user", "assistant")


class Renderer(Protocol):
    """What the rollout driver needs from a chat format."""

    def build_prompt(self, messages: Sequence[Message]) -> tinker.ModelInput:
        """The prompt tokens for ``messages``, ending where the assistant's answer begins."""
        ...

    def stop_sequences(self) -> list[str] | list[int]:
        """The sampler's stop sequences for a debate turn (reference rule applied)."""
        ...

    def text(self, tokens: Sequence[int]) -> str:
        """The text of sampled tokens, special tokens (the stop token included) removed."""
        ...


def _check_messages(messages: Sequence[Message]) -> list[Message]:
    out = list(messages)
    for m in out:
        if not isinstance(m, Message):
            raise TypeError(f"messages must hold kernel.Message values, got {type(m).__name__}")
        if m.role not in _ROLES:
            raise ValueError(f"messages: role must be one of {list(_ROLES)}, got {m.role!r}")
    return out


def _stops(renderer_stops: list[int] | list[str]) -> list[str] | list[int]:
    stops = stop_sequences(renderer_stops)
    return [s for s in stops if isinstance(s, str)] or [int(s) for s in stops]


def _ints(tokens: Iterable[int]) -> list[int]:
    """The ids as Python ints; a float or a bool is a TypeError (``int(3.5)`` would truncate it)."""
    out = []
    for t in tokens:
        if isinstance(t, bool | np.bool_) or not isinstance(t, int | np.integer):
            raise TypeError(f"token ids must be integers, got {t!r}")
        out.append(int(t))
    return out


class ByteRenderer:
    """The byte-level chat format over :class:`ByteTokenizer`: roles as special tokens, turns end ``<|end|>``.

    Args:
        tokenizer: a :class:`ByteTokenizer` (a new one when omitted).

    Examples:
        >>> from kernel import Message
        >>> r = ByteRenderer()
        >>> prompt = r.build_prompt([Message("system", "S"), Message("user", "Hi")])
        >>> prompt.to_ints()
        [256, 258, 83, 261, 259, 72, 105, 261, 260]
        >>> r.stop_sequences()
        [261]
        >>> r.text(r.answer_tokens("<solution>4</solution>"))
        '<solution>4</solution>'
    """

    def __init__(self, tokenizer: ByteTokenizer | None = None) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        self._end = self.tokenizer.special_id("<|end|>")
        self._role = {role: self.tokenizer.special_id(f"<|{role}|>") for role in _ROLES}

    def build_prompt(self, messages: Sequence[Message]) -> tinker.ModelInput:
        """``<|bos|>`` then each message as ``<|role|>{content}<|end|>``, then ``<|assistant|>``.

        Raises:
            TypeError: if a message is not a :class:`kernel.Message`.
            ValueError: if a role is not system, user or assistant.
        """
        checked = _check_messages(messages)
        contents = [self.tokenizer.encode_array(m.content) for m in checked]
        # int32 (bytes and a few special ids): half the bytes of int64 to write, keep and pack for the datums
        ids: np.ndarray[tuple[int], np.dtype[np.int32]] = np.empty(
            sum(c.shape[0] + 2 for c in contents) + 2, np.int32
        )
        ids[0] = self.tokenizer.bos_token_id
        at = 1
        for m, content in zip(checked, contents, strict=True):
            end = at + 1 + content.shape[0]
            ids[at] = self._role[m.role]
            ids[at + 1 : end] = content
            ids[end] = self._end
            at = end + 1
        ids[at] = self._role["assistant"]
        return model_input_of(ids)

    def stop_sequences(self) -> list[str] | list[int]:
        """``[<|end|>]`` as a token id (token-id stops are used alone)."""
        return _stops([self._end])

    def text(self, tokens: Sequence[int]) -> str:
        """The sampled bytes as text, special tokens dropped."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True)  # it checks the ids itself

    def answer_tokens(self, text: str) -> list[int]:
        """The tokens a model emits to answer ``text``: its bytes, then ``<|end|>`` (warm starts, fakes)."""
        return [*self.tokenizer.encode(text), self._end]


class ChatTemplateRenderer:
    """A Hugging Face tokenizer's chat template: ``apply_chat_template(..., add_generation_prompt=True)``.

    Args:
        tokenizer: a ``transformers`` tokenizer with a ``chat_template`` and an ``eos_token``.
        stops: ``"token_ids"`` (default: the end-of-turn token id, used alone) or ``"strings"`` (its text
            plus ``</consensus_reason>``), keyword.
        end_token: the end-of-turn token text; defaults to ``tokenizer.eos_token``.

    Raises:
        ValueError: if ``stops`` is not one of the two, or the tokenizer has no chat template or end token.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        stops: Literal["token_ids", "strings"] = "token_ids",
        end_token: str | None = None,
    ) -> None:
        if stops not in ("token_ids", "strings"):
            raise ValueError(f"stops must be 'token_ids' or 'strings', got {stops!r}")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("tokenizer must have a chat_template")
        end = end_token if end_token is not None else getattr(tokenizer, "eos_token", None)
        if not isinstance(end, str) or not end:
            raise ValueError("tokenizer must have an eos_token, or pass end_token")
        end_id = tokenizer.convert_tokens_to_ids(end)
        unk = getattr(tokenizer, "unk_token_id", None)
        # an unknown token converts to the UNK id (not None) when the tokenizer has an UNK token
        unknown = unk is not None and end_id == unk and end != getattr(tokenizer, "unk_token", None)
        if not isinstance(end_id, int) or end_id < 0 or unknown:
            raise ValueError(f"end_token {end!r} is not a single token of the tokenizer")
        self.tokenizer = tokenizer
        self.stops = stops
        self.end_token = end
        self.end_token_id = end_id

    def build_prompt(self, messages: Sequence[Message]) -> tinker.ModelInput:
        """The chat template's text with the generation prompt, tokenized without extra specials.

        Raises:
            TypeError: if a message is not a :class:`kernel.Message`.
            ValueError: if a role is not system, user or assistant.
        """
        dicts = [{"role": m.role, "content": m.content} for m in _check_messages(messages)]
        text = self.tokenizer.apply_chat_template(dicts, add_generation_prompt=True, tokenize=False)
        return tinker.ModelInput.from_ints(_ints(self.tokenizer.encode(text, add_special_tokens=False)))

    def stop_sequences(self) -> list[str] | list[int]:
        """The end-of-turn token id alone, or its text plus ``</consensus_reason>``."""
        if self.stops == "token_ids":
            return _stops([self.end_token_id])
        return _stops([self.end_token])

    def text(self, tokens: Sequence[int]) -> str:
        """``tokenizer.decode(tokens, skip_special_tokens=True)``.

        Raises:
            ValueError: a token id outside the tokenizer's vocabulary (it would be dropped silently, or
                crash inside the tokenizer); TypeError: an id that is not an integer.
        """
        ids = _ints(tokens)
        size = len(self.tokenizer)
        bad = [t for t in ids if not 0 <= t < size]
        if bad:
            raise ValueError(f"token ids must lie in [0, {size}) (the tokenizer's vocabulary), got {bad[0]}")
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def answer_tokens(self, text: str) -> list[int]:
        """The tokens of ``text`` followed by the end-of-turn token."""
        return [*_ints(self.tokenizer.encode(text, add_special_tokens=False)), self.end_token_id]


RENDERER_KINDS: Final[tuple[str, ...]] = ("auto", "byte", "chat")
"""The values of ``--renderer``: ``auto`` (by the tokenizer), ``byte`` (:class:`ByteRenderer`) and ``chat``
(:class:`ChatTemplateRenderer`)."""


_BYTE_PROBE: Final = "Hi é\n"
"""Text whose ids show a tokenizer maps bytes as :class:`ByteTokenizer` does (ASCII, a two-byte character,
a space and a newline)."""


def _is_byte_tokenizer(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` gives :class:`ByteTokenizer`'s ids: it is one, or a copy in another format
    (``debate-kernel serve`` hands the SDK's ``get_tokenizer()`` a Hugging Face copy) with its number of ids,
    its special tokens at their ids and a probe text's bytes as ids."""
    if isinstance(tokenizer, ByteTokenizer):
        return True
    byte = ByteTokenizer()
    try:
        if len(tokenizer) != byte.vocab_size:
            return False
        specials = [tokenizer.convert_tokens_to_ids(name) for name in SPECIAL_TOKENS]
        probe = list(tokenizer.encode(_BYTE_PROBE, add_special_tokens=False))
    except Exception:  # any tokenizer-like object: one that cannot answer is not the byte tokenizer
        return False
    return specials == [byte.special_id(name) for name in SPECIAL_TOKENS] and probe == byte.encode(
        _BYTE_PROBE
    )


def _found(tokenizer: Any) -> str:
    """What the tokenizer is, for an error message: its class and whether it has a chat template."""
    name = type(tokenizer).__name__
    template = (
        "with a chat template" if getattr(tokenizer, "chat_template", None) else "without a chat template"
    )
    if _is_byte_tokenizer(tokenizer):
        return f"the byte tokenizer ({name}), {template}"
    return f"a {name} {template}"


def choose_renderer(
    kind: str,
    tokenizer: Any,
    *,
    model: str,
    stops: Literal["token_ids", "strings"] = "token_ids",
) -> Renderer:
    """The renderer ``--renderer kind`` asks for, for the model's tokenizer; raises before anything runs.

    ``auto`` takes :class:`ChatTemplateRenderer` for a tokenizer with a ``chat_template`` (a Hugging Face
    tokenizer: the SDK's ``get_tokenizer()``, or :func:`load_tokenizer` of a local directory) and
    :class:`ByteRenderer` for the byte tokenizer; ``byte`` requires the byte tokenizer, ``chat`` a template.
    The byte tokenizer is a :class:`ByteTokenizer` or a copy giving the same ids, such as the Hugging Face
    one the SDK's ``get_tokenizer()`` loads from ``debate-kernel serve``; the renderer then holds a
    :class:`ByteTokenizer` of its own.

    Args:
        kind: one of :data:`RENDERER_KINDS`.
        tokenizer: the model's tokenizer (``training_client.get_tokenizer()``).
        model: the model's name, for the error message (keyword).
        stops: the chat renderer's stop sequences, ``"token_ids"`` or ``"strings"`` (keyword).

    Returns:
        The renderer.

    Raises:
        ValueError: an unknown ``kind``, or a tokenizer that does not fit it (naming the model, the kind
            and the tokenizer found), or a chat template without an end-of-turn token.

    Examples:
        >>> type(choose_renderer("auto", ByteTokenizer(), model="tiny")).__name__
        'ByteRenderer'
        >>> choose_renderer("chat", ByteTokenizer(), model="tiny")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: model 'tiny': --renderer chat needs a tokenizer with a chat template; found the byte ...
    """
    if kind not in RENDERER_KINDS:
        raise ValueError(f"renderer must be one of {list(RENDERER_KINDS)}, got {kind!r}")
    is_byte = _is_byte_tokenizer(tokenizer)
    has_template = bool(getattr(tokenizer, "chat_template", None))  # ByteTokenizer has none
    if kind == "byte" and not is_byte:
        raise ValueError(
            f"model {model!r}: --renderer byte needs the byte tokenizer (ByteTokenizer); found "
            f"{_found(tokenizer)}" + (" (use --renderer chat or auto)" if has_template else "")
        )
    if kind == "chat" and not has_template:
        hint = " (use --renderer byte or auto)" if is_byte else ""
        raise ValueError(
            f"model {model!r}: --renderer chat needs a tokenizer with a chat template; found "
            f"{_found(tokenizer)}{hint}"
        )
    if kind == "byte" or (kind == "auto" and is_byte and not has_template):
        return ByteRenderer(tokenizer if isinstance(tokenizer, ByteTokenizer) else ByteTokenizer())
    if not has_template:
        raise ValueError(
            f"model {model!r}: --renderer auto found no chat format: its tokenizer is {_found(tokenizer)} "
            "and is not the byte tokenizer; use a model whose tokenizer has a chat_template (or give its "
            "tokenizer directory one)"
        )
    try:
        return ChatTemplateRenderer(tokenizer, stops=stops)
    except ValueError as e:
        raise ValueError(f"model {model!r}: its tokenizer's chat template cannot be used: {e}") from None


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """A Hugging Face tokenizer from a local directory (``transformers.AutoTokenizer``), offline.

    Nothing is downloaded: the files must be in ``path`` (``tokenizer.json`` or the model's own files,
    ``tokenizer_config.json`` with the ``chat_template``).

    Args:
        path: the tokenizer's directory.

    Returns:
        The tokenizer (``transformers`` is imported here, on first use).

    Raises:
        ValueError: ``path`` is not a directory, or holds no tokenizer that loads (naming it and why).

    Examples:
        >>> load_tokenizer("/no/such/dir")
        Traceback (most recent call last):
        ...
        ValueError: tokenizer directory '/no/such/dir' does not exist or is not a directory
    """
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"tokenizer directory {str(path)!r} does not exist or is not a directory")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"tokenizer directory {str(path)!r} holds no tokenizer that loads: {e}") from None


def vocab_size_of(tokenizer: Any) -> int:
    """The number of ids of a tokenizer: ``vocab_size`` of :class:`ByteTokenizer`, else ``len(tokenizer)``
    (a Hugging Face tokenizer's length counts its added tokens). The contract check's ``vocab_size``.

    Examples:
        >>> vocab_size_of(ByteTokenizer())
        262
    """
    if isinstance(tokenizer, ByteTokenizer):
        return tokenizer.vocab_size
    return len(tokenizer)
