"""Checker for ``credit_v2.jsonl``: the fork's ``prepare_minibatch`` at 2a0b18e2 (dual, token-wise,
step-wise and trajectory-level credit, then its datums and trajectory metrics) against the kernel,
compared exactly.

The dual path is :func:`kernel.dual_step_advantages` (each group's steps of every trajectory, flattened
in order), every action token of a step carrying the combined advantage (``JUDGE_PRESETS
["reference_v2"].credit == "step"``); token-wise and step-wise credit centre each group's tokens or
steps with :func:`kernel.grouped_advantages`; the trajectory level is the ``tinker`` preset. Datums are
:func:`kernel.build_datums` with per-token advantages (``ac_advantages``). The one documented difference
is the one of ``datums.jsonl``: int64 zeros as the advantages of a datum with no action token (ours are
float32 zeros; the checker confirms such a datum trains nothing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel import (
    JUDGE_PRESETS,
    advantages_from_preset,
    build_datums,
    dual_step_advantages,
    grouped_advantages,
    trajectories_from_lists,
    trajectory_metrics,
)

Group = dict[str, Any]


def _path(inp: dict[str, Any]) -> str:
    trajs = [t for g in inp["groups"] for t in g["trajectories"]]
    if any("gen_rewards" in t and "judge_rewards" in t for t in trajs):
        return "dual"
    if any(tr.get("token_rewards") is not None for t in trajs for tr in t["transitions"]):
        return "tokenwise"
    return "stepwise" if inp["use_stepwise_advantages"] else "trajectory"


def _centred(values: list[list[list[float]]]) -> list[list[list[float]]]:
    """Per group, every value minus the group's mean (nested [trajectory][item] lists kept)."""
    out = []
    for group in values:
        flat = [x for traj in group for x in traj]
        adv = grouped_advantages(np.asarray(flat, np.float64), np.zeros(len(flat), np.int64), 1).advantages
        it = iter(adv.tolist())
        out.append([[next(it) for _ in traj] for traj in group])
    return out


def _dual(inp: dict[str, Any]) -> tuple[dict[str, Any], list[list[list[float]]]] | dict[str, Any]:
    gen, judge = [], []
    for g in inp["groups"]:
        gen.append([t.get("gen_rewards", []) for t in g["trajectories"]])
        judge.append([t.get("judge_rewards", []) for t in g["trajectories"]])
    for g in inp["groups"]:
        for t in g["trajectories"]:
            for name in ("gen", "judge"):
                have, want = len(t.get(f"{name}_rewards", [])), len(t["transitions"])
                if have != want:
                    message = (
                        f"{name}_step_advantages length ({have}) must match number of transitions ({want})"
                    )
                    error = {"type": "AssertionError", "message": message, "in_printout": False}
                    return {"error": error, "path": None}
    lg, lj = float(inp["lambda_gen"]), float(inp["lambda_judge"])
    out: dict[str, Any] = {"gen_advantages": [], "judge_advantages": [], "combined_step_advantages": []}
    for gg, jj in zip(gen, judge, strict=True):
        g_flat = [x for traj in gg for x in traj]
        j_flat = [x for traj in jj for x in traj]
        d = dual_step_advantages(
            np.asarray(g_flat, np.float64),
            np.asarray(j_flat, np.float64),
            np.zeros(len(g_flat), np.int64),
            1,
            lambda_gen=lg,
            lambda_judge=lj,
        )
        for key, arr in (
            ("gen_advantages", d.generator_N),
            ("judge_advantages", d.judge_N),
            ("combined_step_advantages", d.advantages),
        ):
            it = iter(arr.tolist())
            out[key].append([[next(it) for _ in traj] for traj in gg])
    assert JUDGE_PRESETS["reference_v2"].credit == "step"  # every action token of a step: its advantage
    return out, out["combined_step_advantages"]


def compute(record: dict[str, Any]) -> dict[str, Any]:
    """Our result for one record, in the reference's layout."""
    inp = record["input"]
    groups: list[Group] = inp["groups"]
    path = _path(inp)
    out: dict[str, Any] = {"path": path}
    # per (group, trajectory, step, token): the advantage of every action token
    per_token: list[list[list[list[float]]]]
    if path == "dual":
        dual = _dual(inp)
        if isinstance(dual, dict):
            return dual
        fields, steps = dual
        out.update(fields)
        per_token = [
            [
                [[a] * len(tr["ac"]) for a, tr in zip(s_t, t["transitions"], strict=True)]
                for s_t, t in zip(s_g, g["trajectories"], strict=True)
            ]
            for s_g, g in zip(steps, groups, strict=True)
        ]
    elif path == "tokenwise":
        rewards = [
            [
                [
                    x
                    for tr in t["transitions"]
                    for x in (
                        tr["token_rewards"]
                        if tr.get("token_rewards") is not None
                        else [tr["reward"]] * len(tr["ac"])
                    )
                ]
                for t in g["trajectories"]
            ]
            for g in groups
        ]
        flat_adv = _centred(rewards)
        per_token = []
        for g, adv_g in zip(groups, flat_adv, strict=True):
            per_g = []
            for t, adv_t in zip(g["trajectories"], adv_g, strict=True):
                it = iter(adv_t)
                per_g.append([[next(it) for _ in tr["ac"]] for tr in t["transitions"]])
            per_token.append(per_g)
        out["token_advantages"] = per_token
    elif path == "stepwise":
        step_adv = _centred(
            [[[tr["reward"] for tr in t["transitions"]] for t in g["trajectories"]] for g in groups]
        )
        out["step_advantages"] = step_adv
        per_token = [
            [
                [[a] * len(tr["ac"]) for a, tr in zip(s_t, t["transitions"], strict=True)]
                for s_t, t in zip(s_g, g["trajectories"], strict=True)
            ]
            for s_g, g in zip(step_adv, groups, strict=True)
        ]
    else:
        totals = [sum(tr["reward"] for tr in t["transitions"]) for g in groups for t in g["trajectories"]]
        ids = [k for k, g in enumerate(groups) for _ in g["trajectories"]]
        adv = advantages_from_preset("tinker", np.asarray(totals, np.float64), ids, len(groups)).advantages
        it = iter(adv.tolist())
        traj_adv = [[next(it) for _ in g["trajectories"]] for g in groups]
        out["trajectory_advantages"] = traj_adv
        out["dtypes"] = {"trajectory_advantages": str(adv.dtype)}
        per_token = [
            [
                [[a] * len(tr["ac"]) for tr in t["transitions"]]
                for a, t in zip(a_g, g["trajectories"], strict=True)
            ]
            for a_g, g in zip(traj_adv, groups, strict=True)
        ]
    out["datums"] = _datums(groups, per_token)
    out["trajectory_metrics"] = _metrics(groups)
    return out


def _datums(groups: list[Group], per_token: list[list[list[list[float]]]]) -> list[dict[str, Any]]:
    trajs = [t for g in groups for t in g["trajectories"]]
    where = [(k, i) for k, g in enumerate(groups) for i in range(len(g["trajectories"]))]
    tokens = [x for per_g in per_token for per_t in per_g for per_s in per_t for x in per_s]
    built = build_datums(
        trajectories_from_lists(
            [[(tr["ob"], tr["ac"], tr["logprobs"]) for tr in t["transitions"]] for t in trajs],
            np.zeros(len(trajs)),
        ),
        ac_advantages=np.asarray(tokens, np.float64),
    )
    d = built.datums
    out = []
    for k in range(d.num_datums):
        s = slice(int(d.offsets_D1[k]), int(d.offsets_D1[k + 1]))
        n = s.stop - s.start
        group_idx, traj_idx = where[int(d.traj_ids_D[k])]
        inputs = [
            ("target_tokens", "int64", d.target_tokens[s].tolist()),
            ("logprobs", "float32", d.logprobs[s].tolist()),
            ("advantages", "float32", d.advantages[s].tolist()),
            ("mask", "float32", d.mask[s].astype(np.float32).tolist()),
        ]
        out.append(
            {
                "group_idx": group_idx,
                "traj_idx": traj_idx,
                "input_tokens": d.input_tokens[s].tolist(),
                "num_input_chunks": 1,
                "loss_fn_inputs": [{"name": a, "dtype": b, "shape": [n], "values": c} for a, b, c in inputs],
            }
        )
    return out


def _metrics(groups: list[Group]) -> dict[str, float]:
    trajs = [t for g in groups for t in g["trajectories"]]
    m = trajectory_metrics(
        ob_tokens=[len(tr["ob"]) for t in trajs for tr in t["transitions"]],
        ac_tokens=[len(tr["ac"]) for t in trajs for tr in t["transitions"]],
        turn_episode_ids=[e for e, t in enumerate(trajs) for _ in t["transitions"]],
        returns_PG=[sum(tr["reward"] for tr in t["transitions"]) for t in trajs],
        group_ids_PG=[k for k, g in enumerate(groups) for _ in g["trajectories"]],
        num_groups=len(groups),
    )
    return m.as_dict()


def _same_datum(got: dict[str, Any], want: dict[str, Any]) -> bool:
    if got == want:
        return True
    inputs = {x["name"]: x for x in want["loss_fn_inputs"]}
    if inputs["advantages"]["dtype"] != "int64" or any(x for x in inputs["mask"]["values"]):
        return False
    # the reference's int64 zeros of a datum with no action token; ours are float32 zeros
    fixed = [{**x, "dtype": "int64"} if x["name"] == "advantages" else x for x in got["loss_fn_inputs"]]
    return {**got, "loss_fn_inputs": fixed} == want


def check(record: dict[str, Any]) -> str | None:
    """None when everything equals the reference's exactly, else the first field that differs."""
    got = compute(record)
    want = record["expected"]
    for key, value in want.items():
        if key == "datums":
            if len(got["datums"]) != len(value):
                return f"expected {len(value)} datums, got {len(got['datums'])}"
            for k, (g, w) in enumerate(zip(got["datums"], value, strict=True)):
                if not _same_datum(g, w):
                    return f"datum {k}: got {g}, expected {w}"
        elif got.get(key) != value:
            return f"{key}: got {got.get(key)}, expected {value}"
    extra = sorted(set(got) - set(want))
    return f"fields the reference has not: {extra}" if extra else None
