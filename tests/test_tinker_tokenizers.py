"""ByteTokenizer (ids, specials, round trips) and the in-repo futures."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.futures import AwaitableFuture, as_awaitable, completed, failed
from adapters.tokenizers import SPECIAL_TOKENS, ByteTokenizer

TOK = ByteTokenizer()


def test_special_ids_match_the_contract() -> None:
    names = ["<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    assert list(SPECIAL_TOKENS) == names
    assert [TOK.special_id(n) for n in names] == [256, 257, 258, 259, 260, 261]
    assert TOK.vocab_size == 262 and TOK.eos_token_id == 257 and TOK.bos_token_id == 256
    with pytest.raises(ValueError, match="name must be one of"):
        TOK.special_id("<|im_end|>")


def test_encode_is_bytes_only_and_decode_names_specials() -> None:
    assert TOK.encode("A<|end|>") == [65, *b"<|end|>"]
    assert TOK.encode("A", add_special_tokens=True) == [256, 65]
    assert TOK.decode([258, 65, 261, 66]) == "<|system|>A<|end|>B"
    assert TOK.decode([258, 65, 261, 66], skip_special_tokens=True) == "AB"
    assert TOK.decode([0xC3]) == "\ufffd"  # a cut UTF-8 sequence is replaced, never an error
    with pytest.raises(ValueError, match="token_ids must lie in"):
        TOK.decode([262])
    with pytest.raises(TypeError, match="text must be a str"):
        TOK.encode(b"x")  # type: ignore[arg-type]


@given(st.text())
def test_decode_inverts_encode(text: str) -> None:
    assert TOK.decode(TOK.encode(text)) == text
    assert all(0 <= t < 256 for t in TOK.encode(text))


def test_completed_and_failed_futures_can_be_awaited_twice() -> None:
    async def main() -> None:
        fut = completed("x")
        assert await fut == "x" and await fut.result_async() == "x"
        bad = failed(RuntimeError("boom"))
        for _ in range(2):
            with pytest.raises(RuntimeError, match="boom"):
                await bad

    asyncio.run(main())


def test_awaitable_future_shares_one_outcome_and_times_out() -> None:
    calls = []

    async def work() -> int:
        calls.append(1)
        await asyncio.sleep(0)
        return 7

    async def main() -> None:
        fut = AwaitableFuture(work())
        assert await asyncio.gather(fut.result_async(), fut.result_async()) == [7, 7]
        assert await fut == 7 and calls == [1] and fut.done()
        slow = AwaitableFuture(asyncio.Event().wait())  # never completes: the timeout fires at any load
        async with asyncio.timeout(60):  # a bound for a broken timeout only: it would wait forever
            with pytest.raises(TimeoutError):
                await slow.result_async(timeout=0.01)
        assert slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        never = AwaitableFuture(asyncio.Event().wait())
        assert never.cancel() and never.done()
        with pytest.raises(asyncio.CancelledError):
            await never
        assert await as_awaitable(completed(3)) == 3

    asyncio.run(main())


def test_awaitable_future_over_a_thread() -> None:
    async def main() -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert await AwaitableFuture(pool.submit(lambda: 5)) == 5

    asyncio.run(main())
    with pytest.raises(TypeError, match="work must be"):
        AwaitableFuture(5)  # type: ignore[arg-type]


def _decode_slowly(ids: list[int], skip: bool) -> str:
    """The obvious reference: bytes runs decoded between specials, specials by name or dropped."""
    parts, run = [], bytearray()
    for t in ids:
        if t < 256:
            run.append(t)
            continue
        parts.append(run.decode("utf-8", errors="replace"))
        run = bytearray()
        if not skip:
            parts.append(SPECIAL_TOKENS[t - 256])
    parts.append(run.decode("utf-8", errors="replace"))
    return "".join(parts)


@given(st.lists(st.integers(0, 261)), st.booleans())
def test_decode_matches_the_obvious_loop(ids: list[int], skip: bool) -> None:
    import numpy as np

    expected = _decode_slowly(ids, skip)
    assert TOK.decode(ids, skip_special_tokens=skip) == expected
    assert TOK.decode(np.asarray(ids, np.int32), skip_special_tokens=skip) == expected
    assert TOK.decode(iter(ids), skip_special_tokens=skip) == expected


@given(st.lists(st.integers(0, 255)), st.none() | st.integers(256, 261), st.booleans())
def test_decode_of_a_sampled_turn_matches_the_obvious_loop(
    body: list[int], stop: int | None, skip: bool
) -> None:
    """Bytes then at most one special token (a sampled turn and its stop): the list's shortcut, against
    the loop and against the same ids as an array (the general path)."""
    import numpy as np

    ids = body if stop is None else [*body, stop]
    expected = _decode_slowly(ids, skip)
    assert TOK.decode(ids, skip_special_tokens=skip) == expected
    assert TOK.decode(np.asarray(ids, np.int64), skip_special_tokens=skip) == expected


def test_decode_shortcut_leaves_other_lists_to_the_general_path() -> None:
    import numpy as np

    assert TOK.decode([104, 105, np.int64(33)]) == "hi!"  # numpy ints
    assert TOK.decode([104, 262 - 1, 105]) == "h<|end|>i"  # a special inside
    with pytest.raises(ValueError, match="got 262"):
        TOK.decode([104, 262])  # past the vocabulary, last
    with pytest.raises(ValueError, match="got 300"):
        TOK.decode([300, 261])
    with pytest.raises(TypeError, match="flat sequence of ints"):
        TOK.decode([True, False])  # bools are not ids (bytes() would take them)


def test_decode_rejects_non_integer_ids() -> None:
    with pytest.raises(TypeError, match="flat sequence of ints"):
        TOK.decode([[65]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="flat sequence of ints"):
        TOK.decode([65, "B"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="got -1"):
        TOK.decode([65, -1])
    assert (
        TOK.decode([0xC3, 261, 0xA9], skip_special_tokens=True) == "\ufffd\ufffd"
    )  # no join across specials
