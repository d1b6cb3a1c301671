"""The byte tokenizer (:class:`adapters.tokenizers.ByteTokenizer`) in Hugging Face's format.

The SDK's ``TrainingClient.get_tokenizer()`` calls ``transformers.AutoTokenizer.from_pretrained`` on the
``tokenizer_id`` that ``get_info`` reports, which downloads from the Hugging Face hub for a hub name
but loads a local folder for a path. ``debate-kernel serve`` writes the byte tokenizer to
``ROOT/tokenizer`` and reports that path, so ``get_tokenizer()`` works offline whenever the client
shares the server's file system (``serve`` binds loopback). Ids match the byte tokenizer's: byte b
is id b, the special tokens ``256 … 261``; special names in the text stay bytes, as in
``ByteTokenizer`` (``split_special_tokens``).
"""

from __future__ import annotations

import json
from pathlib import Path

from adapters.tokenizers import SPECIAL_TOKENS

__all__ = ["byte_chars", "write_tokenizer"]


def byte_chars() -> list[str]:
    """The printable character standing for each byte in byte-level BPE vocabularies (GPT-2's map):
    printable Latin-1 bytes stand for themselves, the rest for ``chr(256 + k)`` in byte order.

    Examples:
        >>> chars = byte_chars()
        >>> chars[ord("a")], chars[0], chars[ord(" ")], len(set(chars))
        ('a', 'Ā', 'Ġ', 256)
    """
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)}
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def write_tokenizer(root: Path) -> Path:
    """Writes ``ROOT/tokenizer/{tokenizer.json, tokenizer_config.json}`` and returns the folder.

    Raises:
        OSError: if the folder cannot be written.
    """
    from tokenizers import (  # type: ignore[import-untyped]
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )

    folder = root / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {c: b for b, c in enumerate(byte_chars())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(name, special=True, normalized=False) for name in SPECIAL_TOKENS])
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|bos|>",
        "eos_token": "<|eos|>",
        "split_special_tokens": True,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder
