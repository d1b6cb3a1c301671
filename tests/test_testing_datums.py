"""kernel.testing's datum suite: our build_datums passes (both modes); one broken builder per invariant is
caught by that invariant; the reference's int64-advantage quirk is found; the mutation-testing survivors
(D01, D05, D06, D07, D10: wrappers around build_datums below) are caught."""

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
    check_datum_flagged_by_mode,
    check_datum_flags_justified,
    check_datum_output_contract,
    check_datum_status_counts,
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


def _keep(d: DatumBatch, keep_D: Any) -> DatumBatch:
    """The datums where ``keep_D``."""
    keep_D = np.asarray(keep_D, dtype=bool)
    pos = np.repeat(keep_D, d.lengths_D)
    lengths = d.lengths_D[keep_D]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return DatumBatch(*(x[pos] for x in d[:5]), offsets, d.traj_ids_D[keep_D])


def _with_datums(out: Any, d: DatumBatch, **fields: Any) -> Any:
    """``out`` with datums ``d`` (and a report that counts them), optionally a new ``status_B``."""
    report = out.report._replace(
        datums=d.num_datums, tokens=int(d.offsets_D1[-1]), action_tokens=int(np.count_nonzero(d.mask))
    )
    return out._replace(datums=d, report=report, **fields)


def _repaired(t: Trajectories) -> Trajectories:
    """Every transition given one logprob per action token (missing ones 0, wrong counts cut or padded)."""
    lp_off, ac_len = t.logprob_offsets_N1, np.diff(t.ac_offsets_N1)
    lps = [
        (list(t.logprobs[lp_off[n] : lp_off[n + 1]]) if t.has_logprobs_N[n] else []) + [0.0] * ac_len[n]
        for n in range(ac_len.size)
    ]
    flat = [v for lp, k in zip(lps, ac_len, strict=True) for v in lp[:k]]
    return t._replace(
        logprobs=np.asarray(flat, np.float64),
        logprob_offsets_N1=t.ac_offsets_N1.copy(),
        has_logprobs_N=np.ones_like(t.has_logprobs_N),
    )


def short_off_by_one(t: Trajectories) -> Any:
    """D01: a 2-token sequence taken for a one-token one: its trajectory is flagged short and dropped."""
    out = kernel.build_datums(t)
    d = out.datums
    short_B = np.zeros(t.advantages_B.size, bool)
    short_B[d.traj_ids_D[d.lengths_D == 1]] = True
    short_B &= out.status_B == 0
    status = np.where(short_B, np.int8(1), out.status_B).astype(np.int8)
    return _with_datums(out, _keep(d, ~short_B[d.traj_ids_D]), status_B=status)


def flag_but_keep(t: Trajectories) -> Any:
    """D05/D06: flags as build_datums does but emits every sequence of ≥ 2 tokens, bad ones included (with
    logprobs 0 where missing, cut or padded where the count is wrong)."""
    out = kernel.build_datums(t)
    return _with_datums(out, kernel.build_datums(_repaired(t), mode="robust").datums)


def _sequences(d: DatumBatch) -> dict[int, list[list[int]]]:
    """Per trajectory, its datums' sequences (input plus the last target), in order."""
    out: dict[int, list[list[int]]] = {}
    for i, b in enumerate(d.traj_ids_D.tolist()):
        s = slice(d.offsets_D1[i], d.offsets_D1[i + 1])
        out.setdefault(b, []).append(d.input_tokens[s].tolist() + d.target_tokens[s][-1:].tolist())
    return out


def partial_before_problem(t: Trajectories) -> Any:
    """D10: reference mode that keeps a flagged trajectory's datums built before its first bad segment."""
    out = kernel.build_datums(t)
    good = kernel.build_datums(t, mode="robust").datums  # the problem-free sequences
    every = _sequences(kernel.build_datums(_repaired(t), mode="robust").datums)  # the bad ones too
    keep: list[bool] = []
    for b, seqs in _sequences(good).items():
        before = 0  # good sequences before the first bad one
        while before < len(seqs) and seqs[before] == every[b][before]:
            before += 1
        keep += [out.status_B[b] == 0 or k < before for k in range(len(seqs))]
    return _with_datums(out, _keep(good, keep))


def report_ok_counts_all(t: Trajectories) -> Any:
    """D07: ``report.ok`` counts every trajectory."""
    out = kernel.build_datums(t)
    return out._replace(report=out.report._replace(ok=t.advantages_B.size))


BROKEN = {
    "output_contract": int64_advantages,
    "shift_alignment": unshifted_targets,
    "action_only_labels": advantage_everywhere,
    "token_conservation": logprobs_off_by_one,
    "prefix_merges": never_merges,
    "drops_counted": silent_drops,
    "flags_justified": short_off_by_one,
    "flagged_by_mode": flag_but_keep,
    "status_counts": report_ok_counts_all,
}


@pytest.mark.parametrize("check", DATUM_CHECKS)
def test_each_broken_builder_is_caught_by_its_invariant(check: str) -> None:
    outcome = run_datum_suite(BROKEN[check], checks=[check], raise_on_failure=False, **FIND)
    assert outcome[check].startswith(f"failed: check_datum_{check}"), outcome


@pytest.mark.parametrize("mode", ["reference", "robust"])
def test_our_build_datums_passes(mode: Any) -> None:
    """With the mode declared (the README's example runs robust mode undeclared, which accepts either)."""
    outcome = run_datum_suite(functools.partial(kernel.build_datums, mode=mode), mode=mode)
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
    mode = "reference"


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


# --- the mutation-testing survivors (D01, D05, D06, D07, D10), each caught by its check -------------------

TWO_TOKENS = kernel.trajectories_from_lists([[([1], [2], [-0.5])]], [1.0])  # one valid 2-token datum
MISSING = kernel.trajectories_from_lists(  # good, no logprobs, good
    [[([1, 2], [3], [-0.5]), ([9], [4, 5], None), ([7], [8], [-1.0])]], [1.0]
)
MISMATCH = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5]), ([9], [4, 5], [-1.0])]], [1.0])
ROBUST = functools.partial(kernel.build_datums, mode="robust")


def test_d01_a_valid_two_token_trajectory_flagged_short_is_caught() -> None:
    assert short_off_by_one(TWO_TOKENS).status_B.tolist() == [1]
    with pytest.raises(AssertionError, match=r"trajectory 0 has no problem but status 1 \(short_segment\)"):
        check_datum_flags_justified(short_off_by_one, TWO_TOKENS)
    for fn in (kernel.build_datums, ROBUST):
        check_datum_flags_justified(fn, TWO_TOKENS)


@pytest.mark.parametrize("mode", ["reference", "robust", None])
def test_d05_d06_a_flagged_trajectory_that_keeps_its_bad_datum_is_caught(mode: Any) -> None:
    for t, why in ((MISMATCH, r"2 \(logprob_count_mismatch\)"), (MISSING, r"3 \(missing_logprobs\)")):
        with pytest.raises(AssertionError, match=rf"trajectory 0 has status {why} but emits sequences"):
            check_datum_flagged_by_mode(flag_but_keep, t, mode=mode)


def test_d10_reference_mode_that_keeps_the_datums_before_the_problem_is_caught() -> None:
    assert _sequences(partial_before_problem(MISSING).datums) == {0: [[1, 2, 3]]}
    with pytest.raises(AssertionError, match=r"emits sequences \[\[1, 2, 3\]\]; expected none \(reference"):
        check_datum_flagged_by_mode(partial_before_problem, MISSING, mode="reference")
    with pytest.raises(
        AssertionError, match=r"expected none or its problem-free sequences \[\[1, 2, 3\], \[7"
    ):
        check_datum_flagged_by_mode(partial_before_problem, MISSING)  # the mode undeclared


def test_the_modes_are_told_apart() -> None:
    """Reference mode emits nothing for a flagged trajectory, robust mode its problem-free segments."""
    assert _sequences(ROBUST(MISSING).datums) == {0: [[1, 2, 3], [7, 8]]}
    for fn, mode in ((kernel.build_datums, "reference"), (ROBUST, "robust")):
        check_datum_flagged_by_mode(fn, MISSING, mode=mode)
        check_datum_flagged_by_mode(fn, MISSING)
    with pytest.raises(AssertionError, match=r"expected none \(reference mode\)"):
        check_datum_flagged_by_mode(ROBUST, MISSING, mode="reference")
    with pytest.raises(AssertionError, match=r"emits sequences \[\]; expected its problem-free sequences"):
        check_datum_flagged_by_mode(kernel.build_datums, MISSING, mode="robust")
    with pytest.raises(ValueError, match="mode must be one of"):
        run_datum_suite(kernel.build_datums, mode="lenient")  # type: ignore[arg-type]


def test_d07_a_report_that_counts_every_trajectory_ok_is_caught() -> None:
    with pytest.raises(AssertionError, match=r"report\.ok is 1, status_B holds 0"):
        check_datum_status_counts(report_ok_counts_all, MISSING)
    check_datum_status_counts(kernel.build_datums, MISSING)


def test_the_suite_catches_d10_with_the_mode_undeclared() -> None:
    """Either mode is accepted, trajectory by trajectory: a good datum after the problem gives D10 away."""
    outcome = run_datum_suite(
        partial_before_problem,
        checks=["flagged_by_mode"],
        raise_on_failure=False,
        **{**FIND, "max_examples": 100},
    )
    assert outcome["flagged_by_mode"].startswith("failed: check_datum_flagged_by_mode: trajectory"), outcome


def test_leaving_out_trajectories_on_purpose_passes() -> None:
    """D08's behaviour through ``where=``: trajectories of advantage 0 left out as ``not_trainable``; and a
    logprob beyond float32 (``value_out_of_range``), which the reference does not see, in robust mode."""

    def skip_zero(t: Trajectories, mode: Any = "reference") -> Any:
        return kernel.build_datums(t, mode=mode, where=t.advantages_B.astype(np.float32) != 0)

    outcome = run_datum_suite(functools.partial(skip_zero, mode="robust"), mode="robust", max_examples=50)
    assert set(outcome.values()) == {"passed"}, outcome
    huge = kernel.trajectories_from_lists([[([1, 2], [3], [-0.5]), ([9], [4], [-1e39])]], [1.0])
    assert ROBUST(huge).status_B.tolist() == [5]
    for check in (check_datum_flags_justified, check_datum_status_counts):
        check(ROBUST, huge)
    check_datum_flagged_by_mode(ROBUST, huge, mode="robust")


def test_a_builder_that_drops_zero_advantage_datums_passes_once_it_says_so() -> None:
    """``build_datums(drop_zero_advantage=True)`` drops by design what conservation, merges and the drop
    count expect: undeclared it fails them; declared, every check passes (flags and modes included), and a
    builder that drops more than the option does is still caught."""
    dropping = functools.partial(kernel.build_datums, drop_zero_advantage=True)
    checks = ["token_conservation", "prefix_merges", "drops_counted"]
    undeclared = run_datum_suite(dropping, checks=checks, raise_on_failure=False, **FIND)
    assert all(result.startswith("failed") for result in undeclared.values()), undeclared
    outcome = run_datum_suite(dropping, drop_zero_advantage=True)
    assert set(outcome.values()) == {"passed"}, outcome

    def drops_small_advantages(t: kernel.Trajectories) -> Any:  # |A| < 0.5 counted as zero
        small = np.abs(np.asarray(t.advantages_B)) < 0.5
        return dropping(t._replace(advantages_B=np.where(small, 0.0, t.advantages_B)))

    caught = run_datum_suite(
        drops_small_advantages, checks=checks, drop_zero_advantage=True, raise_on_failure=False, **FIND
    )
    assert any(result.startswith("failed") for result in caught.values()), caught
