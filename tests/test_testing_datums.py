"""kernel.testing's datum suite: our build_datums passes (both modes); one broken builder per invariant is
caught by that invariant; the reference's int64-advantage quirk is found."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import kernel
from kernel import DatumBatch, Trajectories
from kernel.testing import (
    DATUM_CHECKS,
    DatumInvariants,
    check_datum_output_contract,
    reference_segments,
    run_datum_suite,
)

FIND = {"max_examples": 200, "hypothesis_settings": {"derandomize": True, "database": None}}


def _per_datum(d: DatumBatch, f: Any, array: Any) -> Any:
    off = d.offsets_D1
    parts = [f(array[off[i] : off[i + 1]], d.mask[off[i] : off[i + 1]]) for i in range(d.num_datums)]
    return np.concatenate(parts) if parts else array


def int64_advantages(t: Trajectories) -> Any:
    """The reference's quirk: a datum without an action token gets int64 zeros (a tensor of Python ints)."""
    out = kernel.build_datums(t)
    d = out.datums
    parts = [
        d.advantages[d.offsets_D1[i] : d.offsets_D1[i + 1]]
        if d.mask[d.offsets_D1[i] : d.offsets_D1[i + 1]].any()
        else np.zeros(d.lengths_D[i], np.int64)
        for i in range(d.num_datums)
    ]
    return out._replace(datums=d._replace(advantages=np.concatenate(parts) if parts else d.advantages))


def unshifted_targets(t: Trajectories) -> Any:
    out = kernel.build_datums(t)
    return out._replace(datums=out.datums._replace(target_tokens=out.datums.input_tokens.copy()))


def advantage_everywhere(t: Trajectories) -> Any:
    out = kernel.build_datums(t)
    adv = t.advantages_B.astype(np.float32)
    return out._replace(
        datums=out.datums._replace(advantages=adv[out.datums.traj_ids_D].repeat(out.datums.lengths_D))
    )


def logprobs_off_by_one(t: Trajectories) -> Any:
    """Labels sliced [:-1] instead of [1:]: each logprob lands one position late."""
    out = kernel.build_datums(t)
    d = out.datums
    late = _per_datum(
        d, lambda x, m: np.where(m, np.concatenate([[0.0], x[:-1]]), 0.0).astype(np.float32), d.logprobs
    )
    return out._replace(datums=d._replace(logprobs=late))


def never_merges(t: Trajectories) -> Any:
    """One datum per transition, as if every observation were re-rendered."""
    n = t.traj_ids_N.size
    one = t._replace(traj_ids_N=np.arange(n, dtype=np.int64), advantages_B=t.advantages_B[t.traj_ids_N])
    out = kernel.build_datums(one)
    status = np.zeros(t.advantages_B.size, np.int8)
    np.maximum.at(status, t.traj_ids_N, out.status_B)
    d = out.datums._replace(traj_ids_D=t.traj_ids_N[out.datums.traj_ids_D])
    return out._replace(datums=d, status_B=status)


def silent_drops(t: Trajectories) -> Any:
    """Problem trajectories dropped with status 0."""
    out = kernel.build_datums(t)
    return out._replace(status_B=np.zeros_like(out.status_B))


BROKEN = {
    "output_contract": int64_advantages,
    "shift_alignment": unshifted_targets,
    "action_only_labels": advantage_everywhere,
    "token_conservation": logprobs_off_by_one,
    "prefix_merges": never_merges,
    "drops_counted": silent_drops,
}


@pytest.mark.parametrize("check", DATUM_CHECKS)
def test_each_broken_builder_is_caught_by_its_invariant(check: str) -> None:
    outcome = run_datum_suite(BROKEN[check], checks=[check], raise_on_failure=False, **FIND)
    assert outcome[check].startswith(f"failed: check_datum_{check}"), outcome


@pytest.mark.parametrize("mode", ["reference", "robust"])
def test_our_build_datums_passes(mode: str) -> None:
    outcome = run_datum_suite(functools.partial(kernel.build_datums, mode=mode))
    assert set(outcome.values()) == {"passed"}, outcome


def test_int64_advantage_quirk_on_a_hand_made_batch() -> None:
    # the second datum holds observation tokens only: the reference makes its advantages int64 zeros
    t = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5]), ([7, 8], [], [])]], [1.0])
    assert int64_advantages(t).datums.advantages.dtype == np.float64  # float32 and int64 concatenated
    with pytest.raises(AssertionError, match="advantages has dtype float64, expected float32"):
        check_datum_output_contract(int64_advantages, t)
    check_datum_output_contract(kernel.build_datums, t)


def test_reference_segments_hand_values() -> None:
    turns = [([1, 2], [3], [-0.5]), ([1, 2, 3, 4], [5], [-1.0]), ([9], [6], [-2.0]), ([], [], None)]
    ref = reference_segments(kernel.trajectories_from_lists([turns, [([4], [], [])]], [2.0, 1.0]))
    assert ref.ok_B == [False, False]  # missing logprobs; a one-token sequence
    x, lp, adv, mask = ref.segments_B[0][0]
    assert x == [1, 2, 3, 4, 5] and mask == [False, False, True, False, True]
    assert lp == [0.0, 0.0, -0.5, 0.0, -1.0] and adv == [0.0, 0.0, 2.0, 0.0, 2.0]
    assert ref.segments_B[0][1][0] == [9, 6]
    assert ref.segments_B[1] == [([4], [0.0], [0.0], [False])]


def test_runner_rejects_unknown_checks() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        run_datum_suite(kernel.build_datums, checks=["merges"])


class TestOurDatumsThroughTheBaseClass(DatumInvariants):
    builder = staticmethod(kernel.build_datums)


def test_the_output_contract_takes_empty_lists() -> None:
    """An empty batch returned as lists failed with "input_tokens has dtype float64" (numpy's dtype of [])."""
    import kernel
    from kernel import DatumBatch, DatumResult
    from kernel.testing.datums import check_datum_output_contract

    def as_lists(t: Any, **kw: Any) -> DatumResult:
        out = kernel.build_datums(t, **kw)
        d = out.datums
        listed = DatumBatch(*(np.asarray(x).tolist() for x in d[:5]), d.offsets_D1, d.traj_ids_D)
        return out._replace(datums=listed)

    empty = kernel.trajectories_from_lists([], [])
    check_datum_output_contract(as_lists, empty)
