"""A tinker-cookbook recipe we did not write, run unmodified against ``debate-kernel serve`` (issue 33).

The recipe is tinker-cookbook 0.6.1's ``recipes/sl_basic.py``, started as a user starts it
(``python -m tinker_cookbook.recipes.sl_basic key=value ...``), with nothing of ours in its process: every
choice below goes through its own ``chz`` command line.

- ``model_name=Qwen/Qwen3-8B-Base``: a name the cookbook's ``model_info`` knows (recommended renderer
  ``role_colon``, plain ``User: …`` / ``Assistant: …`` text, no template tokens). The recipe runs in a
  folder holding a *directory* of that relative name, which the cookbook's ``get_tokenizer`` loads with
  ``AutoTokenizer`` before it would ever ask a hub: a Hugging Face tokenizer made here whose ids are the
  byte tokenizer's 262 ids. ``serve`` answers to that name for its ``tiny`` model (``--served-name``).
- ``dataset_builder=…FromConversationFileBuilder``: the cookbook's own JSON Lines conversation builder in
  place of the hub data set the recipe defaults to, on a small file written here.
- No network: the hub is offline, and the one outside request the loop makes (its pricing file, a failure
  it logs and tolerates) goes to a loopback proxy port that refuses connections.

The test checks that ``serve`` answers to that name (and to no other), then reads what the cookbook
wrote: ``metrics.jsonl`` (every step, a finite ``train_mean_nll`` that falls on repeated data) and
``checkpoints.jsonl`` (the final state and sampler paths), and lists those checkpoints through the SDK's
REST client.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tinker

from adapters.serve.process import API_KEY, served
from adapters.serve.tokenizer import byte_chars
from adapters.tokenizers import SPECIAL_TOKENS, ByteTokenizer

COOKBOOK_VERSION = "0.6.1"
"""The release this test runs (the README's test command installs it, the ``test`` extra its requirements)."""

MODEL_NAME = "Qwen/Qwen3-8B-Base"
"""The base-model name the recipe sends; ``serve`` answers to it for ``tiny``."""

STEPS = 3
"""Training steps the recipe runs (``max_steps``)."""


def write_byte_tokenizer_dir(path: Path) -> None:
    """A Hugging Face tokenizer directory whose ids are :class:`ByteTokenizer`'s: byte ``b`` is id ``b``
    (a byte-level BPE with no merges), the special tokens ``256 …`` in :data:`SPECIAL_TOKENS` order.

    Unlike ``serve``'s own (:mod:`adapters.serve.tokenizer`), special names in the text are the special
    ids, as in Hugging Face's default: the cookbook's renderer writes ``<|bos|>`` by encoding its name.
    Written with the ``tokenizers`` library alone (``transformers`` loads it in the recipe's process).

    Raises:
        AssertionError: if the saved tokenizer does not encode like the byte tokenizer.
    """
    import tokenizers

    tok = tokenizers.Tokenizer(
        tokenizers.models.BPE(vocab={char: byte for byte, char in enumerate(byte_chars())}, merges=[])
    )
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens([tokenizers.AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    path.mkdir(parents=True)
    tok.save(str(path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[0],
        "eos_token": SPECIAL_TOKENS[1],
        "clean_up_tokenization_spaces": False,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")

    loaded = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    text = "User: 3 plus 4?\n\nAssistant: é 😀\n\n"
    assert loaded.encode(text, add_special_tokens=False).ids == ByteTokenizer().encode(text)
    assert [loaded.token_to_id(s) for s in SPECIAL_TOKENS] == list(range(256, ByteTokenizer.vocab_size))
    assert loaded.get_vocab_size() == ByteTokenizer.vocab_size


def write_conversations(path: Path, count: int) -> None:
    """``count`` copies of one short exchange, in the cookbook's JSON Lines conversation format: every
    batch trains on the same text, so the loss falls from step to step."""
    messages = [
        {"role": "user", "content": "What is 3 plus 4?"},
        {"role": "assistant", "content": "3 plus 4 is 7."},
    ]
    path.write_text("".join(json.dumps({"messages": messages}) + "\n" for _ in range(count)))


def _jax_cache_env() -> dict[str, str]:
    """JAX's persistent compilation cache in the folder the suite shares (``DEBATE_KERNEL_JAX_CACHE``, see
    tests/conftest.py), for every program: the server's start-up compiles (random initialisers, LoRA, the
    training step) then cost seconds once per checkout, not per run."""
    cache = os.environ.get("DEBATE_KERNEL_JAX_CACHE")
    if not cache:
        return {}
    return {
        "JAX_COMPILATION_CACHE_DIR": cache,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``debate-kernel serve --model tiny`` answering to :data:`MODEL_NAME` too, on a free loopback port
    (:func:`adapters.serve.process.served`: ready line first, SIGTERM and a wait at the end)."""
    root = tmp_path_factory.mktemp("serve-root")
    with pytest.MonkeyPatch.context() as env:
        for key, value in _jax_cache_env().items():
            env.setenv(key, value)
        with served("tiny", root=root, log=root / "serve.log", extra=["--served-name", MODEL_NAME]) as url:
            yield url


def _refusing_port() -> socket.socket:
    """A loopback socket bound but never listening: connecting to its port is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def _recipe_env(base_url: str, proxy_port: int, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("TINKER_", "WANDB_"))}
    proxy = f"http://127.0.0.1:{proxy_port}"
    env.update(
        TINKER_API_KEY=API_KEY,
        TINKER_BASE_URL=base_url,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(home / "hf"),
        https_proxy=proxy,
        HTTPS_PROXY=proxy,
        http_proxy=proxy,
        HTTP_PROXY=proxy,
        no_proxy="127.0.0.1,localhost",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_served_names(base_url: str) -> None:
    """``serve`` lists :data:`MODEL_NAME` beside ``tiny`` and refuses a base model it does not serve."""
    caps = tinker.RestClient(base_url=base_url, api_key=API_KEY).get_server_capabilities().result()
    assert [m.model_name for m in caps.supported_models] == ["tiny", MODEL_NAME]
    service = tinker.ServiceClient(base_url=base_url, api_key=API_KEY)
    try:
        with pytest.raises(tinker.BadRequestError, match="unknown base model 'Qwen/Qwen3-8B'"):
            service.create_lora_training_client("Qwen/Qwen3-8B", rank=4).result()
    finally:
        service.close("success").result()


def test_cookbook_sl_basic_recipe_trains_against_serve(base_url: str, tmp_path: Path) -> None:
    assert importlib.metadata.version("tinker-cookbook") == COOKBOOK_VERSION
    _check_served_names(base_url)
    write_byte_tokenizer_dir(tmp_path / MODEL_NAME)
    write_conversations(tmp_path / "conversations.jsonl", count=2 * STEPS)
    log_path = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tinker_cookbook.recipes.sl_basic",
        f"model_name={MODEL_NAME}",
        f"base_url={base_url}",
        f"log_path={log_path}",
        "dataset_builder=tinker_cookbook.supervised.data:FromConversationFileBuilder",
        f"dataset_builder.file_path={tmp_path / 'conversations.jsonl'}",
        f"dataset_builder.common_config.model_name_for_tokenizer={MODEL_NAME}",
        "dataset_builder.common_config.renderer_name=role_colon",
        "dataset_builder.common_config.max_length=128",
        "dataset_builder.common_config.batch_size=2",
        f"max_steps={STEPS}",
        "lora_rank=4",
        "learning_rate=0.01",
    ]
    with _refusing_port() as proxy:
        env = _recipe_env(base_url, proxy.getsockname()[1], tmp_path)
        done = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    log = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-8000:]}"
    assert done.returncode == 0, log
    assert "Training completed successfully" in done.stdout + done.stderr, log

    metrics = _jsonl(log_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(STEPS)), metrics
    nll = [m["train_mean_nll"] for m in metrics]
    assert all(math.isfinite(x) and x > 0 for x in nll), nll
    assert nll[-1] < nll[0], nll
    assert all(m["num_sequences"] == 2 and m["num_loss_tokens"] > 0 for m in metrics), metrics

    checkpoints = _jsonl(log_path / "checkpoints.jsonl")
    final = checkpoints[-1]
    assert final["name"] == "final", checkpoints
    assert final["state_path"].startswith("tinker://"), final
    assert final["sampler_path"].startswith("tinker://"), final
    listed = (
        tinker.RestClient(base_url=base_url, api_key=API_KEY).list_user_checkpoints().result().checkpoints
    )
    assert {final["state_path"], final["sampler_path"]} <= {c.tinker_path for c in listed}, listed
