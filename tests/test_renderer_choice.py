"""Choosing a renderer for a tokenizer (``--renderer {auto,byte,chat}``), on a real Hugging Face tokenizer
with a chat template made here: a tiny byte-level BPE trained on generated text, saved to a directory and
loaded back with ``AutoTokenizer`` (offline: nothing is downloaded)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.tinker.renderers import (
    ByteRenderer,
    ChatTemplateRenderer,
    choose_renderer,
    load_tokenizer,
    vocab_size_of,
)
from adapters.tokenizers import ByteTokenizer
from kernel import Message

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MESSAGES = [Message("system", "You are Agent 0."), Message("user", "Question:\nWhat is 12 + 30?")]


def _texts(n: int) -> list[str]:
    rng = random.Random(0)
    words = ["agent", "question", "answer", "solution", "what", "is", "the", "debate", "round", "yes", "no"]
    return [
        " ".join(rng.choice(words) for _ in range(8)) + f" {rng.randrange(100)} + {rng.randrange(100)}?"
        for _ in range(n)
    ]


def _save(folder: Path, *, template: str | None) -> Path:
    """A byte-level BPE of ~300 ids trained on generated text, saved as a Hugging Face tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(_texts(200), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    if template is not None:
        fast.chat_template = template
    fast.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module", autouse=True)
def _offline() -> Iterator[None]:
    """No hub: Hugging Face's offline switches, for this module's tests only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {
        "chat": _save(root / "chat", template=TEMPLATE),
        "plain": _save(root / "plain", template=None),
    }


@pytest.fixture(scope="module")
def chat_tokenizer(folders: dict[str, Path]) -> Any:
    return load_tokenizer(folders["chat"])


def test_auto_picks_the_chat_template_and_the_prompt_round_trips(chat_tokenizer: Any) -> None:
    renderer = choose_renderer("auto", chat_tokenizer, model="local-bpe")
    assert isinstance(renderer, ChatTemplateRenderer)
    ids = renderer.build_prompt(MESSAGES).to_ints()
    expected = (
        "<|im_start|>system\nYou are Agent 0.<|im_end|>\n"
        "<|im_start|>user\nQuestion:\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert chat_tokenizer.decode(ids) == expected
    assert ids.count(chat_tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # each special is one token
    assert len(ids) < len(expected.encode())  # the BPE merged something: not a byte tokenizer in disguise
    end = chat_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert renderer.stop_sequences() == [end]
    assert renderer.text(renderer.answer_tokens("<solution>42</solution>")) == "<solution>42</solution>"
    assert choose_renderer("chat", chat_tokenizer, model="local-bpe").stop_sequences() == [end]
    assert vocab_size_of(chat_tokenizer) == len(chat_tokenizer) <= 300


def test_auto_on_the_byte_tokenizer_picks_the_byte_renderer() -> None:
    tokenizer = ByteTokenizer()
    for kind in ("auto", "byte"):
        renderer = choose_renderer(kind, tokenizer, model="tiny")
        assert isinstance(renderer, ByteRenderer)
        assert renderer.tokenizer is tokenizer
    assert vocab_size_of(tokenizer) == 262


def test_a_tokenizer_without_template_is_named_with_the_model(folders: dict[str, Path]) -> None:
    plain = load_tokenizer(folders["plain"])
    assert not getattr(plain, "chat_template", None)
    for kind in ("auto", "chat"):
        with pytest.raises(ValueError, match=r"model 'org/plain-bpe': --renderer .* without a chat template"):
            choose_renderer(kind, plain, model="org/plain-bpe")
    with pytest.raises(ValueError, match=r"model 'org/plain-bpe': --renderer byte needs the byte tokenizer"):
        choose_renderer("byte", plain, model="org/plain-bpe")


def test_chat_on_the_byte_tokenizer_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"model 'tiny': --renderer chat needs .* found the byte tokenizer"):
        choose_renderer("chat", ByteTokenizer(), model="tiny")


def test_byte_on_a_chat_tokenizer_is_an_error(chat_tokenizer: Any) -> None:
    with pytest.raises(
        ValueError, match=r"needs the byte tokenizer .* with a chat template \(use --renderer chat"
    ):
        choose_renderer("byte", chat_tokenizer, model="local-bpe")


def test_an_unknown_kind_and_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"renderer must be one of \['auto', 'byte', 'chat'\], got 'bytes'"):
        choose_renderer("bytes", ByteTokenizer(), model="tiny")
    with pytest.raises(ValueError, match="does not exist or is not a directory"):
        load_tokenizer(tmp_path / "missing")
    with pytest.raises(ValueError, match="holds no tokenizer that loads"):
        load_tokenizer(tmp_path)


def test_a_template_without_an_end_token_names_the_model() -> None:
    class NoEos:
        chat_template = TEMPLATE
        eos_token = None

    with pytest.raises(
        ValueError, match=r"model 'm': its tokenizer's chat template cannot be used: .*eos_token"
    ):
        choose_renderer("auto", NoEos(), model="m")


@pytest.fixture(scope="module")
def served_byte_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the SDK's ``get_tokenizer()`` loads from ``debate-kernel serve``: the byte tokenizer in
    Hugging Face's format."""
    from adapters.serve.tokenizer import write_tokenizer

    return load_tokenizer(write_tokenizer(tmp_path_factory.mktemp("served")))


def test_the_served_copy_of_the_byte_tokenizer_gets_the_byte_renderer(served_byte_tokenizer: Any) -> None:
    for kind in ("auto", "byte"):
        renderer = choose_renderer(kind, served_byte_tokenizer, model="tiny")
        assert isinstance(renderer, ByteRenderer)
    ids = renderer.build_prompt(MESSAGES).to_ints()
    assert ids == ByteRenderer().build_prompt(MESSAGES).to_ints()
    assert served_byte_tokenizer.decode(ids).startswith("<|bos|><|system|>You are Agent 0.<|end|><|user|>")
    assert vocab_size_of(served_byte_tokenizer) == 262
    name = type(served_byte_tokenizer).__name__
    found = rf"found the byte tokenizer \({name}\), without a chat template \(use --renderer byte or auto\)"
    with pytest.raises(ValueError, match=found):
        choose_renderer("chat", served_byte_tokenizer, model="tiny")


def test_a_byte_tokenizer_with_a_template_prefers_the_template_under_auto(served_byte_tokenizer: Any) -> None:
    served_byte_tokenizer.chat_template = TEMPLATE
    try:
        assert isinstance(choose_renderer("auto", served_byte_tokenizer, model="tiny"), ChatTemplateRenderer)
        assert isinstance(choose_renderer("byte", served_byte_tokenizer, model="tiny"), ByteRenderer)
    finally:
        served_byte_tokenizer.chat_template = None


def test_a_bpe_of_another_size_is_not_the_byte_tokenizer(folders: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"--renderer byte needs the byte tokenizer .* found a \w+ with a"):
        choose_renderer("byte", load_tokenizer(folders["chat"]), model="local-bpe")


def test_the_config_key_names_the_same_choices_as_the_flag() -> None:
    from typing import get_args, get_type_hints

    from adapters.cli.train import RENDERERS
    from adapters.tinker.renderers import RENDERER_KINDS
    from adapters.training.config import TrainConfig

    assert get_args(get_type_hints(TrainConfig)["renderer"]) == RENDERERS == RENDERER_KINDS
    assert TrainConfig().renderer == "auto"
    with pytest.raises(ValueError, match=r"config key renderer must be one of 'auto', 'byte', 'chat'"):
        TrainConfig.from_mapping({"renderer": "bytes"})


def test_run_training_without_a_renderer_takes_the_config_keys(tmp_path: Path) -> None:
    """The library path honours the key too: ``chat`` on the fake's byte tokenizer is refused naming the
    model; ``byte`` trains with the byte renderer."""
    import asyncio

    from adapters.tinker.fake import FakeServiceClient
    from adapters.training.config import TrainConfig
    from adapters.training.train import run_training

    def config(renderer: str, name: str) -> TrainConfig:
        keys = {"steps": 1, "batch_size": 1, "num_agents": 2, "max_rounds": 1, "max_tokens": 64}
        keys.update(eval_every=0, eval_questions=0, renderer=renderer, out=str(tmp_path / name))
        return TrainConfig.from_mapping(keys)

    with pytest.raises(ValueError, match=r"model 'tiny': --renderer chat needs .* the byte tokenizer"):
        asyncio.run(run_training(config("chat", "chat"), FakeServiceClient(seed=0)))
    result = asyncio.run(run_training(config("byte", "byte"), FakeServiceClient(seed=0)))
    assert [m["step"] for m in result.metrics] == [0]
