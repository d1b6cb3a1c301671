"""Token-level datums: hand-computed examples, golden records as one batch, properties against an oracle."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel import (
    DATUM_STATUS,
    DatumBatch,
    Trajectories,
    build_datums,
    pad_datums,
    trajectories_from_lists,
)
from kernel import _datums as datums_module
from kernel.testing.strategies import token_trajectories
from tests._profile import examples
from tests.golden import VECTORS_DIR, read_records
from tests.golden._datums import ERRORS

Transition = tuple[list[int], list[int], "list[float] | None"]


def unpack(batch: DatumBatch) -> list[dict[str, list[Any]]]:
    """Per-datum Python lists (mask as bools)."""
    out = []
    for d in range(batch.num_datums):
        s = slice(int(batch.offsets_D1[d]), int(batch.offsets_D1[d + 1]))
        out.append(
            {
                "input": batch.input_tokens[s].tolist(),
                "target": batch.target_tokens[s].tolist(),
                "logprobs": batch.logprobs[s].tolist(),
                "advantages": batch.advantages[s].tolist(),
                "mask": batch.mask[s].tolist(),
                "traj": int(batch.traj_ids_D[d]),
            }
        )
    return out


def build(transitions_B: list[list[Transition]], advantages_B: list[float], **kw: Any) -> Any:
    return build_datums(trajectories_from_lists(transitions_B, advantages_B), **kw)


# --- the oracle: the reference's sequential algorithm, one trajectory at a time ----------------------


def oracle(
    transitions_B: list[list[Transition]],
    advantages_B: list[float],
    *,
    mode: str = "reference",
    where: list[bool] | None = None,
    parse_failed_N: list[bool] | None = None,
    ac_weights: list[float] | None = None,
    drop_zero_advantage: bool = False,
) -> tuple[list[dict[str, list[Any]]], list[str]]:
    """Datums and per-trajectory status, by the obvious per-token loop."""
    failed = iter(parse_failed_N or [False] * sum(len(t) for t in transitions_B))
    num_actions = sum(len(ac) for t in transitions_B for _, ac, _ in t)
    weights = iter(ac_weights if ac_weights is not None else [1.0] * num_actions)
    datums: list[dict[str, list[Any]]] = []
    statuses: list[str] = []
    for b, (transitions, adv) in enumerate(zip(transitions_B, advantages_B, strict=True)):
        fails = [next(failed) for _ in transitions]
        shares = [[float(np.float32(next(weights))) for _ in ac] for _, ac, _ in transitions]
        if where is not None and not where[b]:
            statuses.append("not_trainable")
            continue
        a32 = float(np.float32(adv))
        # A segment: [tokens, logprobs, advantages, mask, has_missing, has_mismatch]
        segments: list[list[Any]] = []
        for (ob, ac, lps), fail, share in zip(transitions, fails, shares, strict=True):
            seg = segments[-1] if segments else None
            if seg is None or (seg[0] and not (len(seg[0]) <= len(ob) and ob[: len(seg[0])] == seg[0])):
                seg = [[], [], [], [], False, False]
                segments.append(seg)
            delta = ob[len(seg[0]) :]
            seg[0] = seg[0] + delta + ac
            seg[1] += [0.0] * len(delta) + [float(np.float32(v)) for v in (lps or [])][: len(ac)]
            seg[1] += [0.0] * (len(seg[0]) - len(seg[1]))
            seg[2] += [0.0] * len(delta) + [
                0.0 if fail else float(np.float32(a32) * np.float32(w)) for w in share
            ]
            seg[3] += [False] * len(delta) + [not fail] * len(ac)
            seg[4] |= lps is None
            seg[5] |= lps is not None and len(lps) != len(ac)

        def problem(seg: list[Any]) -> str:
            if seg[4]:
                return "missing_logprobs"
            if len(seg[0]) == 1:
                return "short_segment"
            if seg[5] and seg[0]:
                return "logprob_count_mismatch"
            return "ok"

        status = next((p for p in map(problem, segments) if p != "ok"), "ok")
        statuses.append(status)
        for seg in segments:
            if len(seg[0]) < 2 or problem(seg) != "ok" or (mode == "reference" and status != "ok"):
                continue
            if drop_zero_advantage and not any(v != 0 for v in seg[2][1:]):
                continue
            x = seg[0]
            datums.append(
                {
                    "input": x[:-1],
                    "target": x[1:],
                    "logprobs": seg[1][1:],
                    "advantages": seg[2][1:],
                    "mask": seg[3][1:],
                    "traj": b,
                }
            )
    return datums, statuses


# --- hand-computed examples ---------------------------------------------------------------------------


def test_merge_when_previous_sequence_is_a_prefix() -> None:
    r = build([[([1, 2], [3, 4], [-0.5, -0.25]), ([1, 2, 3, 4, 5], [6], [-2.0])]], [2.0])
    assert unpack(r.datums) == [
        {
            "input": [1, 2, 3, 4, 5],
            "target": [2, 3, 4, 5, 6],
            "logprobs": [0.0, -0.5, -0.25, 0.0, -2.0],
            "advantages": [0.0, 2.0, 2.0, 0.0, 2.0],
            "mask": [False, True, True, False, True],
            "traj": 0,
        }
    ]
    assert r.status_B.tolist() == [0]


def test_no_merge_when_previous_action_is_missing_from_the_observation() -> None:
    # The second observation repeats the first observation but not the action: a new datum.
    r = build([[([1, 2], [3], [-0.5]), ([1, 2, 9], [4], [-1.0])]], [1.0])
    got = unpack(r.datums)
    assert [d["input"] for d in got] == [[1, 2], [1, 2, 9]]
    assert [d["target"] for d in got] == [[2, 3], [2, 9, 4]]
    assert [d["advantages"] for d in got] == [[0.0, 1.0], [0.0, 0.0, 1.0]]
    assert r.datums.offsets_D1.tolist() == [0, 2, 5]


def test_debate_rerender_gives_one_datum_per_turn() -> None:
    system = [7, 7, 8]
    turns = [
        ([*system, 1], [21, 22], [-0.1, -0.2]),
        ([*system, 1, 30, 31, 2], [23], [-0.3]),  # re-rendered: the own answer is summarised, not verbatim
        ([*system, 1, 30, 31, 40, 2], [24, 25], [-0.4, -0.5]),
    ]
    r = build([turns], [-1.0])
    got = unpack(r.datums)
    assert len(got) == 3
    for d, (ob, ac, _) in zip(got, turns, strict=True):
        assert d["input"] == (ob + ac)[:-1]
        assert d["target"] == (ob + ac)[1:]
        assert d["mask"] == [False] * (len(ob) - 1) + [True] * len(ac)
    assert got[2]["logprobs"][-2:] == [np.float32(-0.4), np.float32(-0.5)]


def test_empty_delta_merges_without_observation_tokens_between_actions() -> None:
    r = build([[([5], [6, 7], [-1.0, -1.0]), ([5, 6, 7], [8], [-3.0])]], [0.5])
    (d,) = unpack(r.datums)
    assert d["input"] == [5, 6, 7] and d["target"] == [6, 7, 8]
    assert d["mask"] == [True, True, True]
    assert d["logprobs"] == [-1.0, -1.0, -3.0]


def test_first_token_an_action_loses_its_label() -> None:
    r = build([[([], [4, 5, 6], [-1.0, -2.0, -3.0])]], [1.0])
    (d,) = unpack(r.datums)
    assert d == {
        "input": [4, 5],
        "target": [5, 6],
        "logprobs": [-2.0, -3.0],
        "advantages": [1.0, 1.0],
        "mask": [True, True],
        "traj": 0,
    }


def test_reference_errors_and_robust_mode() -> None:
    good = ([1, 2], [3], [-1.0])
    short = ([9], [], [])
    batch = [
        [good, short],  # second segment has one token
        [good, ([1, 2, 3], [4, 5], [-1.0])],  # one logprob too few
        [good, ([8, 8], [4], None)],  # missing logprobs
        [],  # empty trajectory: no datum, no error
        [good],
    ]
    ref = build(batch, [1.0] * 5)
    assert [DATUM_STATUS[s] for s in ref.status_B] == [
        "short_segment",
        "logprob_count_mismatch",
        "missing_logprobs",
        "ok",
        "ok",
    ]
    assert ref.datums.traj_ids_D.tolist() == [4]
    assert ref.report.segments_dropped == 5  # 2 + 1 (the merged one) + 2
    robust = build(batch, [1.0] * 5, mode="robust")
    assert robust.status_B.tolist() == ref.status_B.tolist()
    # Trajectory 0 keeps its good first segment; 1 is one merged bad segment; 2 keeps its first.
    assert robust.datums.traj_ids_D.tolist() == [0, 2, 4]
    assert robust.report.segments_dropped == 3
    r = robust.report
    assert (r.ok, r.short_segment, r.logprob_count_mismatch, r.missing_logprobs) == (2, 1, 1, 1)


def test_missing_logprobs_wins_over_an_earlier_flush_only_when_reached_first() -> None:
    # Missing logprobs in segment 1 is found before segment 0 is emitted? No: segment 0 (short) is emitted
    # when transition 1 starts a new segment, before transition 1's logprobs are read.
    r = build([[([1], [], []), ([5, 6], [7], None)]], [1.0])
    assert DATUM_STATUS[r.status_B[0]] == "short_segment"
    r = build([[([1], [], None), ([5, 6], [7], [-1.0])]], [1.0])
    assert DATUM_STATUS[r.status_B[0]] == "missing_logprobs"


def test_parse_failed_where_and_drop_zero_advantage() -> None:
    batch = [
        [([1, 2], [3], [-1.0]), ([1, 2, 3, 4], [5], [-2.0])],
        [([6, 7], [8], [-1.0])],
        [([6, 7], [8], [-1.0])],
        [([6, 7], [8], [-1.0])],
    ]
    r = build(
        batch,
        [1.0, 2.0, 0.0, 3.0],
        parse_failed_N=[True, False, False, False, False],
        where=[True, True, True, False],
        drop_zero_advantage=True,
    )
    got = unpack(r.datums)
    assert [d["traj"] for d in got] == [0, 1]
    assert got[0]["mask"] == [False, False, False, True]
    assert got[0]["advantages"] == [0.0, 0.0, 0.0, 1.0]
    assert got[0]["logprobs"] == [0.0, -1.0, 0.0, -2.0]  # the failed turn keeps its sampler logprob
    rep = r.report
    assert (rep.parse_failed, rep.not_trainable, rep.zero_advantage, rep.datums) == (1, 1, 1, 2)
    assert (rep.tokens, rep.action_tokens) == (6, 2)
    assert DATUM_STATUS[r.status_B[3]] == "not_trainable"


def test_tiny_advantage_rounds_to_float32_zero_and_counts_as_zero() -> None:
    r = build([[([1], [2], [-1.0])]], [1e-50], drop_zero_advantage=True)
    assert r.datums.num_datums == 0 and r.report.zero_advantage == 1


def test_logprobs_and_advantages_round_to_float32() -> None:
    lp = 0.1234567890123
    r = build([[([1], [2], [lp])]], [1 / 3])
    assert r.datums.logprobs.tolist() == [float(np.float32(lp))]
    assert r.datums.advantages.dtype == np.float32 and r.datums.advantages[0] == np.float32(1 / 3)


def test_int32_inputs_give_int64_tokens() -> None:
    t = trajectories_from_lists([[([1, 2], [3], [-1.0])]], [1.0])
    t32 = t._replace(ob_tokens=t.ob_tokens.astype(np.int32), ac_tokens=t.ac_tokens.astype(np.int32))
    d = build_datums(t32).datums
    assert d.input_tokens.dtype == np.int64 and d.target_tokens.tolist() == [2, 3]


def test_pad_datums_example_and_errors() -> None:
    r = build([[([1, 2, 3], [4], [-1.0])], [([5], [6], [-2.0])]], [1.0, -1.0])
    p = pad_datums(r.datums, pad_token=-1)
    assert p.input_tokens_D_T.tolist() == [[1, 2, 3], [5, -1, -1]]
    assert p.target_tokens_D_T.tolist() == [[2, 3, 4], [6, -1, -1]]
    assert p.advantages_D_T.tolist() == [[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]
    assert p.lengths_D.tolist() == [3, 1]
    with pytest.raises(ValueError, match="length"):
        pad_datums(r.datums, length=2)
    empty = pad_datums(build([], []).datums)
    assert empty.mask_D_T.shape == (0, 0)


def test_ac_weights_scale_each_action_token_and_zero_credit_counts_as_zero_advantage() -> None:
    batch = [
        [([1, 2], [3, 4], [-1.0, -1.0]), ([1, 2, 3, 4, 5], [6], [-2.0])],  # one merged datum
        [([7, 8], [9], [-1.0])],  # all its credit 0: dropped with drop_zero_advantage
    ]
    r = build(batch, [2.0, 3.0], ac_weights=[0.0, 0.5, 1.0, 0.0], drop_zero_advantage=True)
    got = unpack(r.datums)
    assert [d["traj"] for d in got] == [0]
    assert got[0]["advantages"] == [0.0, 0.0, 1.0, 0.0, 2.0]
    assert got[0]["mask"] == [False, True, True, False, True]  # a zero share keeps its mask
    assert r.report.zero_advantage == 1
    # the first token of a datum that is an action has no label: its weight does not count
    first = build([[([], [5, 6], [-1.0, -1.0])]], [1.0], ac_weights=[1.0, 0.0], drop_zero_advantage=True)
    assert first.datums.num_datums == 0
    t = trajectories_from_lists(batch, [2.0, 3.0])
    for bad in ([0.0, 0.5, 1.5, 0.0], [0.0, -0.1, 1.0, 0.0], [0.0, float("nan"), 1.0, 0.0]):
        with pytest.raises(ValueError, match=r"ac_weights must lie in \[0, 1\]"):
            build_datums(t, ac_weights=bad)
    with pytest.raises(ValueError, match="ac_weights"):
        build_datums(t, ac_weights=[1.0])


def test_bad_arguments_raise_naming_the_argument() -> None:
    t = trajectories_from_lists([[([1, 2], [3], [-1.0])]], [1.0])
    with pytest.raises(ValueError, match="mode"):
        build_datums(t, mode="strict")
    with pytest.raises(ValueError, match="ob_offsets_N1"):
        build_datums(t._replace(ob_offsets_N1=np.array([0, 3])))
    with pytest.raises(ValueError, match="traj_ids_N"):
        build_datums(t._replace(traj_ids_N=np.array([1])))
    with pytest.raises(TypeError, match="ob_tokens"):
        build_datums(t._replace(ob_tokens=np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="where"):
        build_datums(t, where=np.array([True, False]))
    with pytest.raises(ValueError, match="parse_failed_N"):
        build_datums(t, parse_failed_N=np.array([], bool))
    with pytest.raises(ValueError, match="advantages_B"):
        trajectories_from_lists([[]], [1.0, 2.0])
    unsorted = trajectories_from_lists([[([1], [2], [0.0])], [([3], [4], [0.0])]], [1.0, 1.0])
    with pytest.raises(ValueError, match="traj_ids_N"):
        build_datums(unsorted._replace(traj_ids_N=np.array([1, 0])))
    for wrong in (None, [([1, 2], [3], [-1.0])], {"ob_tokens": [1]}):
        with pytest.raises(TypeError, match="trajectories must be a Trajectories"):
            build_datums(wrong)  # type: ignore[arg-type]


@given(token_trajectories(), st.sampled_from([np.int64, np.int32, np.uint8]))
def test_arrays_give_the_same_trajectories_as_lists(case: Any, dtype: Any) -> None:
    """The array path (ids and logprobs joined as arrays) against the list path (a Python number per
    value): equal values; ids keep the arrays' integer dtype (uint64 becomes int64, checked)."""
    as_arrays = [
        [
            (np.asarray(ob, dtype), np.asarray(ac, dtype), None if lp is None else np.asarray(lp))
            for ob, ac, lp in traj
        ]
        for traj in case.transitions_B
    ]
    fast = trajectories_from_lists(as_arrays, case.advantages_B)
    slow = trajectories_from_lists(case.transitions_B, case.advantages_B)
    ids = np.dtype(np.int64) if np.dtype(dtype) == np.uint64 else np.dtype(dtype)
    if not any(case.transitions_B):  # nothing to join: int64, as from lists
        ids = np.dtype(np.int64)
    for name in Trajectories._fields:
        a, b = getattr(fast, name), getattr(slow, name)
        expected = ids if name in ("ob_tokens", "ac_tokens") else b.dtype
        assert a.dtype == expected and np.array_equal(a, b), name


def test_array_ids_keep_their_errors() -> None:
    with pytest.raises(TypeError, match="observation tokens"):
        trajectories_from_lists([[(np.array([1.5]), np.array([2]), [0.0])]], [1.0])
    with pytest.raises(ValueError, match="observation tokens"):
        trajectories_from_lists([[(np.array([[1]]), np.array([2]), [0.0])]], [1.0])


def test_trajectories_is_a_namedtuple_of_arrays() -> None:
    t = trajectories_from_lists([[([1], [2, 3], None)]], [0.5])
    assert isinstance(t, Trajectories)
    assert t.has_logprobs_N.tolist() == [False] and t.logprob_offsets_N1.tolist() == [0, 0]


# --- golden records, all at once -----------------------------------------------------------------------


def test_golden_records_as_one_batch_match_the_reference() -> None:
    records = list(read_records(VECTORS_DIR / "datums.jsonl"))
    transitions_B = [
        [(tr["ob"], tr["ac"], tr["logprobs"]) for tr in r["input"]["transitions"]] for r in records
    ]
    result = build(transitions_B, [r["input"]["advantage"] for r in records])
    got = unpack(result.datums)
    by_traj: dict[int, list[dict[str, Any]]] = {}
    for d in got:
        by_traj.setdefault(d["traj"], []).append(d)
    for b, record in enumerate(records):
        want = record["expected"]
        status = DATUM_STATUS[int(result.status_B[b])]
        if "error" in want:
            assert ERRORS.get(status) == want["error"], record["id"]
            continue
        assert status == "ok", record["id"]
        mine = by_traj.get(b, [])
        assert len(mine) == len(want["datums"]), record["id"]
        for g, w in zip(mine, want["datums"], strict=True):
            assert g["input"] == w["input_tokens"] and g["target"] == w["target_tokens"], record["id"]
            assert g["logprobs"] == w["logprobs"] and g["advantages"] == w["advantages"], record["id"]
            assert [float(m) for m in g["mask"]] == w["mask"], record["id"]
    assert json.dumps(result.report._asdict())  # plain ints


# --- properties ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["slices", "fancy"])
@given(case=token_trajectories(), data=st.data())
def test_equals_the_sequential_oracle(path: str, case: Any, data: st.DataObject) -> None:
    n = sum(len(t) for t in case.transitions_B)
    b = len(case.transitions_B)
    kw: dict[str, Any] = {
        "mode": data.draw(st.sampled_from(("reference", "robust"))),
        "drop_zero_advantage": data.draw(st.booleans()),
    }
    if data.draw(st.booleans()):
        kw["where"] = data.draw(st.lists(st.booleans(), min_size=b, max_size=b))
    if data.draw(st.booleans()):
        kw["parse_failed_N"] = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if data.draw(st.booleans()):
        a = sum(len(ac) for t in case.transitions_B for _, ac, _ in t)
        share = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0, 1))
        kw["ac_weights"] = data.draw(st.lists(share, min_size=a, max_size=a))
    dtypes = {"where": bool, "parse_failed_N": bool, "ac_weights": np.float64}
    arrays = {k: np.asarray(v, dtypes[k]) if k in dtypes else v for k, v in kw.items()}
    # ids in any integer dtype, observations and actions apart: narrower ones are read as they are
    ids = st.sampled_from([np.int64, np.int32, np.int8, np.uint16, np.uint64])
    ob_dtype, ac_dtype = data.draw(ids), data.draw(ids)
    t = trajectories_from_lists(case.transitions_B, case.advantages_B)
    t = t._replace(ob_tokens=t.ob_tokens.astype(ob_dtype), ac_tokens=t.ac_tokens.astype(ac_dtype))
    with pytest.MonkeyPatch.context() as mp:
        # Every gather by Python slices, or every gather by fancy indexing.
        mp.setattr(datums_module, "_SLICE_MIN_MEAN_RUN", 0 if path == "slices" else 10**9)
        result = build_datums(t, **arrays)
    assert result.datums.input_tokens.dtype == result.datums.target_tokens.dtype == np.int64
    want, statuses = oracle(case.transitions_B, case.advantages_B, **kw)
    assert unpack(result.datums) == want
    assert [DATUM_STATUS[s] for s in result.status_B] == statuses


@given(case=token_trajectories())
def test_datum_invariants(case: Any) -> None:
    result = build(case.transitions_B, case.advantages_B, mode="robust")
    d = result.datums
    assert np.all(d.lengths_D >= 1) and d.offsets_D1[0] == 0
    # Alignment: within a datum the target is the input shifted by one.
    inner = np.ones(d.input_tokens.size, bool)
    inner[d.offsets_D1[1:] - 1] = False
    assert np.array_equal(d.target_tokens[:-1][inner[:-1]], d.input_tokens[1:][inner[:-1]])
    # Advantages and logprobs are exactly 0 off the mask.
    assert not np.any(d.advantages[~d.mask]) and not np.any(d.logprobs[~d.mask])
    assert result.report.tokens == int(d.lengths_D.sum()) == d.input_tokens.size
    assert result.report.action_tokens == int(d.mask.sum())


@st.composite
def marked_trajectories(draw: st.DrawFn) -> list[list[Transition]]:
    """Observations extend the previous turn or are fresh; every action token is a unique id ≥ 1000."""
    next_id = 1000
    batch: list[list[Transition]] = []
    for _ in range(draw(st.integers(0, 3))):
        transitions: list[Transition] = []
        for i in range(draw(st.integers(0, 4))):
            fresh = draw(st.lists(st.integers(0, 5), max_size=4))
            extend = i > 0 and draw(st.booleans())
            ob = transitions[-1][0] + transitions[-1][1] + fresh if extend else fresh
            ac = list(range(next_id, next_id + draw(st.integers(0, 3))))
            next_id += len(ac)
            transitions.append((ob, ac, [-1.0] * len(ac)))
        batch.append(transitions)
    return batch


@given(batch=marked_trajectories())
def test_mask_is_exactly_the_action_tokens_and_tokens_are_conserved(batch: list[list[Transition]]) -> None:
    result = build(batch, [1.0] * len(batch), mode="robust")
    d = result.datums
    assert np.array_equal(d.mask, d.target_tokens >= 1000)
    assert np.array_equal(d.advantages != 0, d.mask)
    # Each action token appears once, as a target or as a datum's first input; the only ones missing
    # are one-token segments (an empty observation, one action token, not extended).
    firsts = d.input_tokens[d.offsets_D1[:-1]]
    seen = np.concatenate([d.target_tokens, firsts])
    seen = seen[seen >= 1000]
    assert np.unique(seen).size == seen.size
    missing = {a for t in batch for _, ac, _ in t for a in ac} - set(seen.tolist())
    lone = {ac[0] for t in batch for ob, ac, _ in t if not ob and len(ac) == 1}
    assert missing <= lone


@given(case=token_trajectories())
def test_robust_mode_never_loses_a_trainable_segment(case: Any) -> None:
    ref = build(case.transitions_B, case.advantages_B)
    rob = build(case.transitions_B, case.advantages_B, mode="robust")
    ref_d, rob_d = unpack(ref.datums), unpack(rob.datums)
    # Every reference datum is in the robust output, and robust only drops segments with a problem.
    assert all(d in rob_d for d in ref_d)
    ok = {b for b, s in enumerate(ref.status_B) if s == 0}
    assert [d for d in rob_d if d["traj"] in ok] == ref_d
    assert rob.report.segments_dropped <= ref.report.segments_dropped
    assert np.array_equal(ref.status_B, rob.status_B)


@given(case=token_trajectories())
def test_batch_equals_concatenated_singletons(case: Any) -> None:
    whole = unpack(build(case.transitions_B, case.advantages_B, mode="robust").datums)
    parts = []
    for b, (t, a) in enumerate(zip(case.transitions_B, case.advantages_B, strict=True)):
        parts += [{**d, "traj": b} for d in unpack(build([t], [a], mode="robust").datums)]
    assert whole == parts


@given(case=token_trajectories(), extra=st.integers(0, 3))
def test_padded_view_equals_packed(case: Any, extra: int) -> None:
    d = build(case.transitions_B, case.advantages_B, mode="robust").datums
    width = (int(d.lengths_D.max()) if d.num_datums else 0) + extra
    p = pad_datums(d, length=width, pad_token=-7)
    assert p.mask_D_T.shape == (d.num_datums, width)
    for k, got in enumerate(unpack(d)):
        n = len(got["input"])
        assert p.input_tokens_D_T[k, :n].tolist() == got["input"]
        assert p.target_tokens_D_T[k, :n].tolist() == got["target"]
        assert p.logprobs_D_T[k, :n].tolist() == got["logprobs"]
        assert p.advantages_D_T[k, :n].tolist() == got["advantages"]
        assert p.mask_D_T[k, :n].tolist() == got["mask"]
        assert np.all(p.input_tokens_D_T[k, n:] == -7) and not np.any(p.mask_D_T[k, n:])
        assert not np.any(p.advantages_D_T[k, n:]) and not np.any(p.logprobs_D_T[k, n:])


# --- values float32 cannot hold, and wrongly typed ids (issue 8, items 10, 13, 14) ----------------


@pytest.mark.parametrize("mode", ["reference", "robust"])
def test_finite_values_beyond_float32_are_refused_per_trajectory_never_inf(mode: str) -> None:
    turn = ([1, 2], [3, 4], [-0.5, -1.0])
    huge_lp = ([5, 6], [7], [-1e39])  # finite in float64, -inf in float32
    result = build([[turn], [turn, huge_lp], [turn], [turn]], [1.0, 1.0, -1e39, 1e-50], mode=mode)
    assert [DATUM_STATUS[s] for s in result.status_B] == [
        "ok",
        "value_out_of_range",
        "value_out_of_range",
        "ok",  # a tiny advantage rounds to 0 in float32: representable, not refused
    ]
    d = result.datums
    assert np.all(np.isfinite(d.logprobs)) and np.all(np.isfinite(d.advantages))
    # robust mode keeps the first turn of trajectory 1 (its own segment is fine)
    assert d.traj_ids_D.tolist() == ([0, 3] if mode == "reference" else [0, 1, 3])
    assert result.report.value_out_of_range == 2
    assert result.report.segments_dropped == (3 if mode == "reference" else 2)


def test_out_of_range_logprobs_of_a_transition_without_logprobs_do_not_count() -> None:
    t = trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])
    assert build_datums(t).status_B.tolist() == [0]
    flagged = t._replace(has_logprobs_N=np.array([False]), logprobs=np.array([-1e300]))
    assert [DATUM_STATUS[s] for s in build_datums(flagged).status_B] == ["missing_logprobs"]


def test_float_token_ids_are_a_type_error_not_truncated() -> None:
    with pytest.raises(TypeError, match="observation tokens"):
        trajectories_from_lists([[([1, 1.9], [3], [-0.5])]], [1.0])
    with pytest.raises(TypeError, match="action tokens"):
        trajectories_from_lists([[([1, 2], [3.0], [-0.5])]], [1.0])
    with pytest.raises(TypeError, match="action tokens"):
        trajectories_from_lists([[([1, 2], [True], [-0.5])]], [1.0])
    with pytest.raises(TypeError, match="logprobs"):
        trajectories_from_lists([[([1, 2], [3], ["x"])]], [1.0])


def test_token_ids_and_pad_token_beyond_int64_name_the_argument() -> None:
    with pytest.raises(ValueError, match="observation tokens must fit int64"):
        trajectories_from_lists([[([1, 2**63], [3], [-0.5])]], [1.0])
    with pytest.raises(ValueError, match="action tokens must fit int64"):
        trajectories_from_lists([[([1, 2], [2**64], [-0.5])]], [1.0])
    with pytest.raises(ValueError, match="ob_tokens must fit int64"):
        build_datums(
            trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])._replace(
                ob_tokens=np.array([1, 2**63], np.uint64)
            )
        )
    batch = build([[([1, 2], [3], [-0.5])]], [1.0]).datums
    with pytest.raises(ValueError, match="pad_token"):
        pad_datums(batch, pad_token=2**70)
    with pytest.raises(TypeError, match="pad_token"):
        pad_datums(batch, pad_token=1.5)
    with pytest.raises(TypeError, match="length"):
        pad_datums(batch, length="4")
    assert pad_datums(batch, length=4, pad_token=-(2**63)).input_tokens_D_T.tolist() == [
        [1, 2, -(2**63), -(2**63)]
    ]


@pytest.mark.parametrize("mode", ["robust", "reference"])
def test_non_finite_advantages_and_logprobs_are_out_of_range(mode: str) -> None:
    """NaN and ±inf went into the datum with status ok, while a finite 1e39 (inf in float32) was refused;
    every value that is not a finite float32 is ``value_out_of_range`` now, in float64 and float32 input."""
    from kernel import DATUM_STATUS, build_datums, trajectories_from_lists

    out_of_range = DATUM_STATUS.index("value_out_of_range")
    for adv, lp in [(np.nan, -0.5), (np.inf, -0.5), (1e39, -0.5), (1.0, np.nan), (1.0, -np.inf)]:
        for dtype in (np.float64, np.float32):
            t = trajectories_from_lists([[([1, 2], [3], [lp])], [([4, 5], [6], [-0.1])]], [adv, 1.0])
            if dtype == np.float32:
                with np.errstate(over="ignore"):
                    t = t._replace(
                        advantages_B=t.advantages_B.astype(dtype), logprobs=t.logprobs.astype(dtype)
                    )
            r = build_datums(t, mode=mode)
            assert r.status_B.tolist() == [out_of_range, 0], (adv, lp, dtype)
            assert r.report.value_out_of_range == 1 and r.datums.num_datums == 1  # the good one stays
            assert np.isfinite(r.datums.advantages).all() and np.isfinite(r.datums.logprobs).all()


def test_bad_flags_and_hand_built_batches_get_clear_errors() -> None:
    from kernel import DatumBatch, build_datums, pad_datums, trajectories_from_lists

    t = trajectories_from_lists([[([1, 2], [3], [-0.5])]], [0.0])
    with pytest.raises(TypeError, match="drop_zero_advantage must be a bool, got str 'no'"):
        build_datums(t, drop_zero_advantage="no")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"transitions_B\[0\]\[1\] must be an \(ob_tokens, ac_tokens, logprobs\)"
    ):
        trajectories_from_lists([[([1, 2], [3], [-0.5]), ([1, 2], [3])]], [1.0])
    by_hand = DatumBatch([1, 2], [2, 3], [0.0, 0.0], [0.0, 0.0], [False, True], [0, 2], [0])  # type: ignore[arg-type]
    assert pad_datums(by_hand).input_tokens_D_T.tolist() == [[1, 2]]
    d = build_datums(trajectories_from_lists([[([1, 2], [3], [-0.5])]], [1.0])).datums
    with pytest.raises(
        ValueError, match=r"batch\.offsets_D1 must be integers rising from 0 to the token count 2"
    ):
        pad_datums(d._replace(offsets_D1=np.array([0, 5])))
    with pytest.raises(ValueError, match=r"batch\.mask must have one value per input token \(2\), got 1"):
        pad_datums(d._replace(mask=d.mask[:1]))
    with pytest.raises(ValueError, match=r"batch\.traj_ids_D must have one id per datum \(1\), got 0"):
        pad_datums(d._replace(traj_ids_D=d.traj_ids_D[:0]))


# --- provenance spans (REFERENCE §11) -----------------------------------------------------------------


def _slow_spans(transitions: list[Any], sequences: list[int]) -> list[tuple[list[Any], list[Any]] | None]:
    """Per would-be datum of one trajectory, (input spans, target spans) or None: REFERENCE §11 step by
    step, a Python list per datum (problems ignored: the caller compares kept datums only)."""
    out: list[tuple[list[Any], list[Any]] | None] = []
    x: list[int] = []
    spans: list[Any] | None = []

    def flush() -> None:
        if len(x) < 2:
            return
        if not spans:
            out.append(None)
            return
        loss = list(spans)
        s, p, off, n = loss[0]
        loss = loss[1:] if n == 1 else [(s, p, off + 1, n - 1), *loss[1:]]
        if not any(p for _, p, _, _ in loss):
            out.append(None)
            return
        inputs = list(spans)
        s, p, off, n = inputs[-1]
        inputs = inputs[:-1] if n == 1 else [*inputs[:-1], (s, p, off, n - 1)]
        out.append((inputs, loss))

    for (ob, ac, _), seq in zip(transitions, sequences, strict=True):
        if x and ob[: len(x)] == x and len(ob) >= len(x):
            delta = ob[len(x) :]
        else:
            if x:
                flush()
            x, spans, delta = [], [], ob
        if seq < 0 and delta + ac:
            spans = None
        if spans is not None and seq >= 0:
            if delta:
                spans.append((seq, False, len(x), len(delta)))
            if ac:
                spans.append((seq, True, 0, len(ac)))
        x = x + delta + ac
    flush()
    return out


def _table_spans(table: Any, d: int) -> list[Any]:
    lo, hi = int(table.offsets_D1[d]), int(table.offsets_D1[d + 1])
    columns = (table.sequence_Q, table.sampled_Q, table.offset_Q, table.length_Q)
    return [tuple(c[q].item() for c in columns) for q in range(lo, hi)]


@settings(max_examples=examples(200))
@given(case=token_trajectories(), data=st.data())
def test_provenance_spans_equal_the_step_by_step_reference_and_tile_every_datum(
    case: Any, data: st.DataObject
) -> None:
    n = sum(len(t) for t in case.transitions_B)
    sequences = data.draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))
    # good logprobs everywhere, so that every segment of two tokens or more is a datum
    transitions_B = [[(ob, ac, [-0.5] * len(ac)) for ob, ac, _ in t] for t in case.transitions_B]
    t = trajectories_from_lists(transitions_B, case.advantages_B)
    result = build_datums(t, mode="robust", sequence_ids_N=sequences)
    spans = result.spans
    assert spans is not None
    want: list[Any] = []
    k = 0
    for traj in transitions_B:
        want += _slow_spans(traj, sequences[k : k + len(traj)])
        k += len(traj)
    assert len(want) == result.datums.num_datums
    lengths = result.datums.lengths_D
    for d, expected in enumerate(want):
        got_in, got_loss = _table_spans(spans.model_input, d), _table_spans(spans.loss_fn_inputs, d)
        assert bool(spans.has_provenance_D[d]) == (expected is not None)
        assert (got_in, got_loss) == (expected or ([], []))
        if expected is not None:  # both sides tile the datum's positions
            assert sum(s[3] for s in got_in) == sum(s[3] for s in got_loss) == lengths[d]
            assert all(s[3] >= 1 for s in got_in + got_loss)


def test_provenance_hand_example_and_what_strips_it() -> None:
    # turn 2 extends turn 1; the empty first observation makes the target side start at offset 1
    turns = [([], [7, 8], [-0.1, -0.2]), ([7, 8, 9], [10], [-0.3])]
    t = trajectories_from_lists([turns], [1.0])
    spans = build_datums(t, sequence_ids_N=[0, 1]).spans
    assert spans is not None
    assert _table_spans(spans.loss_fn_inputs, 0) == [(0, True, 1, 1), (1, False, 2, 1), (1, True, 0, 1)]
    assert _table_spans(spans.model_input, 0) == [(0, True, 0, 2), (1, False, 2, 1)]
    # an id-less turn that adds tokens strips its datum; one that adds none does not
    assert not build_datums(t, sequence_ids_N=[0, -1]).spans.has_provenance_D.any()  # type: ignore[union-attr]
    empty = trajectories_from_lists([[([], [], []), *turns]], [1.0])
    assert build_datums(empty, sequence_ids_N=[-1, 0, 1]).spans.has_provenance_D.all()  # type: ignore[union-attr]
    assert build_datums(t).spans is None
    with pytest.raises(ValueError, match="sequence_ids_N must be >= -1"):
        build_datums(t, sequence_ids_N=[0, -2])
    with pytest.raises(ValueError, match="sequence_ids_N"):
        build_datums(t, sequence_ids_N=[0])
