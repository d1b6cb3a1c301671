"""Which models the local service runs, told without importing JAX (:mod:`adapters.local` imports it on
first use), so that ``train`` and ``serve`` refuse a mistyped ``--model`` in the interpreter's start-up
time rather than after JAX's (about 3 s). :func:`adapters.local.serves` and
:func:`adapters.local.hf.is_checkpoint` are this module's rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from kernel.checks import did_you_mean

__all__ = ["LOCAL_MODELS", "is_checkpoint_dir", "served_locally", "unserved"]

LOCAL_MODELS: Final[tuple[str, ...]] = ("tiny", "small", "base")
"""The sizes the local service builds (``adapters.local.model.SIZES``)."""


def is_checkpoint_dir(path: str | Path) -> bool:
    """Whether ``path`` is a directory with a ``config.json`` (a Hugging Face checkpoint, maybe unsupported).

    Examples:
        >>> is_checkpoint_dir("tiny"), is_checkpoint_dir("/no/such/dir")
        (False, False)
    """
    return isinstance(path, str | Path) and (Path(path) / "config.json").is_file()


def served_locally(model: str) -> bool:
    """Whether the local service can start from ``model``: a name of :data:`LOCAL_MODELS`, an existing
    ``.safetensors`` file, or a Hugging Face checkpoint directory (whose contents are checked later).

    Examples:
        >>> served_locally("tiny"), served_locally("tinyy"), served_locally("Qwen/Qwen3-8B")
        (True, False, False)
    """
    return (
        model in LOCAL_MODELS
        or (model.endswith(".safetensors") and Path(model).is_file())
        or is_checkpoint_dir(model)
    )


def unserved(model: str) -> str:
    """What to say of a ``model`` the local service does not run: the nearest name and what it runs.

    Examples:
        >>> unserved("tinyy")  # doctest: +ELLIPSIS
        "model 'tinyy' (did you mean 'tiny'?) is not served by the local service, which runs tiny, small, ..."
    """
    return (
        f"model {model!r}{did_you_mean(model, LOCAL_MODELS)} is not served by the local service, which runs "
        f"{', '.join(LOCAL_MODELS)}, the path of an existing .safetensors file or of a Hugging Face "
        "checkpoint directory"
    )
