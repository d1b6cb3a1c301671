"""``pipeline.SeenIds``: the ids read so far, in memory and on disk, against a dict that holds them all."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.pipeline import SeenIds
from adapters.pipeline import seen_ids as module

_IDS = st.text(alphabet="ab\x00é\ud800", max_size=4)  # NULs and a lone surrogate: digests of odd text


@given(
    batches=st.lists(st.lists(_IDS, max_size=6), max_size=8),
    queries=st.lists(_IDS, max_size=12),
    memory_ids=st.sampled_from([0, 1, 3, 2**17]),
    block=st.sampled_from([1, 2, 3, 256]),
)
def test_first_lines_equal_a_dict_of_every_id_at_every_spill_threshold(
    batches: list[list[str]], queries: list[str], memory_ids: int, block: int
) -> None:
    oracle: dict[str, int] = {}
    line = 0
    with SeenIds(memory_ids=memory_ids, block=block) as seen:
        for batch in batches:
            new = list(dict.fromkeys(i for i in batch if i not in oracle))  # add's contract: new ids, once
            lines = list(range(line + 1, line + 1 + len(new)))
            line += len(new)
            assert seen.first_lines(batch).tolist() == [oracle.get(i, 0) for i in batch]
            seen.add(new, lines)
            oracle.update(zip(new, lines, strict=True))
            assert len(seen) == len(oracle)
        probe = queries + list(oracle)
        assert seen.first_lines(probe).tolist() == [oracle.get(i, 0) for i in probe]


def test_ids_the_filter_lets_through_are_answered_by_the_block_read() -> None:
    """A run's Bloom filter admits some ids that were never added: the block read must say 0 for
    them (and find the line of every id that was added)."""
    added = [f"in-{k}" for k in range(1000)]
    absent = [f"out-{k}" for k in range(40_000)]
    with SeenIds(memory_ids=0, block=16) as seen:
        seen.add(added, list(range(1, 1001)))
        (run,) = seen._disk
        admitted = int(module._bloom_admits(run, module._digests(absent)).sum())
        assert 3 <= admitted < 200  # ≈ 6 × 10⁻⁴ of 40,000 ≈ 23: the path under test is taken
        assert not seen.first_lines(absent).any()
        assert seen.first_lines(added).tolist() == list(range(1, 1001))


def test_memory_held_stays_below_the_threshold_and_the_file_goes_on_close() -> None:
    seen = SeenIds(memory_ids=100)
    for k in range(0, 1000, 30):
        seen.add([f"id{j}" for j in range(k, k + 30)], list(range(k + 1, k + 31)))
        assert sum(keys.shape[0] for keys, _ in seen._runs) < 100
    assert seen._file is not None
    fd = seen._file.fileno()
    assert os.fstat(fd).st_size == 990 * 24 and len(seen) == 1020  # 11 runs of 90 ids on disk, 30 held
    assert [run.length for run in seen._disk] == [90] * 11
    assert seen.first_lines(["id0", "id989", "id1019", "id1020"]).tolist() == [1, 990, 1020, 0]
    seen.close()
    seen.close()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
    assert seen.first_lines(["id0"]).tolist() == [0]  # the spilled ids went with the file


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"memory_ids": -1}, "memory_ids must be an integer >= 0, got -1"),
        ({"memory_ids": True}, "memory_ids must be an integer >= 0, got True"),
        ({"block": 0}, "block must be an integer >= 1, got 0"),
        ({"block": 2.0}, "block must be an integer >= 1, got 2.0"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SeenIds(**kwargs)  # type: ignore[arg-type]


def test_ids_and_lines_of_different_lengths_are_refused() -> None:
    with SeenIds() as seen, pytest.raises(ValueError, match="same length, got 2 and 1"):
        seen.add(["a", "b"], [1])


def test_bloom_bits_are_a_power_of_two_of_at_least_16_an_id() -> None:
    for n in (0, 1, 3, 4, 5, 1000, 2**17):
        bits = module._bloom_bits(n)
        assert bits >= max(64, 16 * n) and bits & (bits - 1) == 0
        assert bits < max(128, 32 * n)
    assert np.packbits(np.zeros(module._bloom_bits(5), bool)).shape == (16,)
