"""``debate-kernel score`` end to end: in process through ``adapters.cli.main`` and as the console script."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kernel
from adapters import cli, pipeline
from adapters.cli import main
from adapters.transcripts import read_transcripts
from tools.samples import sample_text

ROOT = Path(__file__).resolve().parents[1]

SAMPLE_IDS = [json.loads(line)["id"] for line in sample_text().splitlines()]


def _resp(solution: str, *, comparison: str = "N/A", consensus: str = "NO", evaluation: str = "ok") -> str:
    return (
        f"<solution>{solution}</solution>\n<evaluation>{evaluation}</evaluation>\n"
        f"<comparison>\n{comparison}\n</comparison>\n<consensus>{consensus}</consensus>\n"
        "<consensus_reason>because</consensus_reason>"
    )


def _debate(ident: str, texts: list[str], *, n: int = 3, max_rounds: int | None = 2) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": ident,
        "question": "What is 2 + 2?",
        "num_agents": n,
        "turns": [{"agent": k % n, "text": t} for k, t in enumerate(texts)],
    }
    if max_rounds is not None:
        rec["max_rounds"] = max_rounds
    return rec


# One round, three agents; agent 2 votes Agent 0 > Agent 1 (win_rate rewards 1, 0, 0).
SIMPLE = _debate("simple", [_resp("4"), _resp("5"), _resp("4", comparison="Agent 0 > Agent 1")], max_rounds=1)

# The Qwen3 shape: reasoning without the opening tag holds a draft comparison that the final answer
# reverses. reference reads the draft (Agent 1 > Agent 0), robust the answer (Agent 0 > Agent 1).
THINK = _debate(
    "think",
    [
        _resp("4"),
        _resp("5"),
        "Let me compare them.\nDraft:\n<comparison>\nAgent 1 > Agent 0\n</comparison>\n"
        "No, that is backwards.\n</think>\n\n" + _resp("4", comparison="Agent 0 > Agent 1"),
    ],
    max_rounds=1,
)


def _write(tmp_path: Path, lines: list[str], name: str = "in.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return p


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in records if r["status"] == "scored"}


# --- default samples ------------------------------------------------------------------------------


def test_score_samples_prints_a_row_per_debate_and_the_summary(capsys: Any) -> None:
    assert main(["score"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    header = out.splitlines()[0].split()
    assert header == "id agents rounds end fail cons votes bad rewards advantages".split()
    for ident in SAMPLE_IDS:
        assert f"\n{ident} " in out, ident
    assert f"debates: {len(SAMPLE_IDS)} scored, 0 skipped" in out
    assert "policy robust, reward win_rate, estimator default" in out
    assert "datums: " in out  # some samples carry tokens


def test_console_script_runs_on_the_samples(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("debate-kernel")
    exe = str(script) if script.exists() else shutil.which("debate-kernel")
    assert exe, "the debate-kernel console script is not installed (pip install -e .)"
    out_file = tmp_path / "r.jsonl"
    proc = subprocess.run(
        [exe, "score", "--quiet", "--out", str(out_file)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert f"debates: {len(SAMPLE_IDS)} scored, 0 skipped" in proc.stdout
    assert [r["id"] for r in _records(out_file)] == SAMPLE_IDS
    assert out_file.with_name("r.datums.npz").exists()
    bad = subprocess.run(
        [exe, "score", str(tmp_path / "nope.jsonl")], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "cannot read" in bad.stderr


def test_both_policies_score_every_sample_without_errors(capsys: Any) -> None:
    for policy in ("robust", "reference"):
        assert main(["score", "--quiet", "--json", "--policy", policy]) == 0
        out, err = capsys.readouterr()
        s = json.loads(out)
        assert err == "" and s["debates_skipped"] == 0 and s["debates_scored"] == len(SAMPLE_IDS), policy
        assert s["policy"] == policy


# --- bad lines ------------------------------------------------------------------------------------


def test_bad_lines_are_named_and_the_rest_is_scored(tmp_path: Path, capsys: Any) -> None:
    after_consensus = _debate(
        "after-consensus",
        [_resp("4", consensus="YES"), _resp("4", consensus="YES"), _resp("4", consensus="YES"), _resp("4")],
    )
    lines = [
        json.dumps(SIMPLE),  # 1
        '{"id": "broken", "question": "q", "num_agents": 3, "turns": [',  # 2 bad JSON
        json.dumps(_debate("types", [_resp("4")]) | {"num_agents": "3"}),  # 3 wrong type
        json.dumps(
            _debate("range", [_resp("4"), _resp("4"), _resp("4")]) | {"num_agents": 2}
        ),  # 4 agent 2 of 2
        json.dumps(_debate("order", [_resp("4"), _resp("4")]) | {"turns": [{"agent": 1, "text": "x"}]}),  # 5
        json.dumps(_debate("after-limit", [_resp("4")] * 4, max_rounds=1)),  # 6 fourth turn after round 1
        json.dumps(after_consensus),  # 7 consensus in round 1, then one more turn
        "",  # 8 blank
        json.dumps(THINK),  # 9
    ]
    path = _write(tmp_path, lines)
    out_file = tmp_path / "out.jsonl"
    assert main(["score", str(path), "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    expected = {
        2: ("bad_json", None),
        3: ("wrong_type", None),
        4: ("agent_out_of_range", 2),
        5: ("out_of_order", 0),
        6: ("turn_after_end", 3),
        7: ("turn_after_end", 3),
    }
    err_lines = err.strip().splitlines()
    assert len(err_lines) == len(expected), err
    for (line, (reason, turn)), msg in zip(sorted(expected.items()), err_lines, strict=True):
        assert f"in.jsonl: line {line}" in msg and f"[{reason}]" in msg, msg
        if turn is not None:
            assert f"turns[{turn}]" in msg, msg
    assert "every agent said consensus YES in round 0" in err_lines[-1]
    assert "debates: 2 scored, 6 skipped" in out
    assert "(agent_out_of_range 1, bad_json 1, out_of_order 1, turn_after_end 2, wrong_type 1)" in out
    records = _records(out_file)
    assert [r["status"] for r in records] == ["scored"] * 2 + ["skipped"] * 6
    assert [r["id"] for r in records[:2]] == ["simple", "think"]
    skipped = {r["line"]: r["error"] for r in records[2:]}
    assert {k: (v["reason"], v["turn"]) for k, v in skipped.items()} == expected
    assert skipped[4]["id"] == "range" and skipped[2]["id"] is None


def test_after_end_truncate_scores_the_debate_and_counts_the_ignored_turns(
    tmp_path: Path, capsys: Any
) -> None:
    texts = [_resp("4", consensus="YES")] * 3 + [_resp("4"), _resp("4")]
    path = _write(tmp_path, [json.dumps(_debate("late", texts))])
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--after-end", "truncate", "--out", str(out_file), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "2 ignored after the end" in out
    (rec,) = _records(out_file)
    assert rec["ignored_turns"] == [3, 4] and rec["end"] == "consensus" and rec["num_turns"] == 3
    assert [t["ignored"] for t in rec["turns"]] == [False, False, False, True, True]


def test_unusable_input_exits_2(tmp_path: Path, capsys: Any) -> None:
    assert main(["score", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["score", str(tmp_path)]) == 2
    assert main(["score", "--estimator", "no_such_preset"]) == 2
    err = capsys.readouterr().err
    assert "unknown estimator 'no_such_preset'" in err and "verl_grpo.norm" in err
    assert main(["score", "--estimator", "default,scale"]) == 2
    assert main(["score", "--estimator", "scale=sideways", "--quiet"]) == 2
    assert main(["score", "--estimator", "sclae=group", "--quiet"]) == 2
    assert "unknown estimator option 'sclae'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"^2$"):  # argparse refuses the choice with status 2
        main(["score", "--policy", "lenient"])


def test_all_lines_bad_still_exits_0(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, ["nonsense", "[]"])
    assert main(["score", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "debates: 0 scored, 2 skipped" in out and "line 1" in err and "line 2" in err
    # no agent was scored: the reward figures are absent (n/a; null in JSON), not means of 0
    assert "rewards: mean n/a, std n/a, range [n/a, n/a]" in out
    assert main(["score", str(path), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["advantages"] == {"mean": None, "std": None, "min": None, "max": None}


def test_stdin(monkeypatch: Any, capsys: Any) -> None:
    import io

    fake = io.TextIOWrapper(io.BytesIO((json.dumps(SIMPLE) + "\n").encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    assert main(["score", "-", "--quiet"]) == 0
    assert "source: <stdin>" in capsys.readouterr().out


def test_score_refuses_a_file_of_something_else_saying_what_it_looks_like(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Issue 37: the results of `score --out` (and a run's metrics, a question set) are not debates:
    one line says what the file looks like and what to pass, exit 2, nothing written."""
    import io

    results = tmp_path / "results.jsonl"
    assert main(["score", "--out", str(results), "--quiet"]) == 0
    capsys.readouterr()
    again = tmp_path / "again.jsonl"
    assert main(["score", str(results), "--out", str(again)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not again.exists()
    assert (
        f"debate-kernel: {results} looks like the results of debate-kernel score --out (line 1 has id, "
        in err
    )
    assert f"already scored: draw them with debate-kernel report {results}; score reads transcripts" in err
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text('{"step": 0, "phase": "rl", "env/all/reward/total": 0.5}\n')
    assert main(["score", str(metrics)]) == 2
    assert f"pass the run's directory instead: debate-kernel score {metrics.parent} (score its" in (
        capsys.readouterr().err
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(results.read_bytes()), encoding="utf-8"))
    assert main(["score", "-"]) == 2
    err = capsys.readouterr().err
    assert "debate-kernel: standard input looks like the results of" in err
    assert "draw them with debate-kernel report -;" in err


# --- results --------------------------------------------------------------------------------------


def test_out_records_hold_hand_computed_values(tmp_path: Path, capsys: Any) -> None:
    fail = _debate("fail", [_resp("4"), "I think it is 4."])  # agent 1 fails: −1, and the debate ends
    path = _write(tmp_path, [json.dumps(SIMPLE), json.dumps(fail)])
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--out", str(out_file), "--quiet"]) == 0
    recs = _by_id(_records(out_file))
    s = recs["simple"]
    assert s["rewards"] == [1.0, 0.0, 0.0]
    assert s["returns"] == [1.0, 0.0, 0.0]
    assert s["advantages"] == pytest.approx([2 / 3, -1 / 3, -1 / 3], abs=1e-6)
    assert (s["end"], s["consensus"], s["rounds"], s["num_turns"]) == ("max_rounds", False, 1, 3)
    assert s["votes"]["total"] == 1 and s["votes"]["malformed"] == 0
    assert s["votes"]["list"] == [{"author": 2, "a": 0, "op": ">", "b": 1, "valid": True, "reason": "valid"}]
    f = recs["fail"]
    assert f["end"] == "parse_error" and f["num_turns"] == 2
    assert f["parse_failures"] == [{"turn": 1, "agent": 1, "reason": "missing_solution"}]
    assert f["rewards"] == [0.0, 0.0, 0.0]
    assert f["step_rewards"] == [0.0, -1.0, 0.0]
    assert f["returns"] == [0.0, -1.0, 0.0]
    assert f["advantages"] == pytest.approx([1 / 3, -2 / 3, 1 / 3], abs=1e-6)
    assert [t["ok"] for t in f["turns"]] == [True, False]


def test_estimator_presets_and_options(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, [json.dumps(SIMPLE)])

    def advantages(*flags: str) -> list[float]:
        out_file = tmp_path / "o.jsonl"
        assert main(["score", str(path), "--out", str(out_file), "--quiet", *flags]) == 0
        return _records(out_file)[0]["advantages"]

    sigma = np.std([1.0, 0.0, 0.0], ddof=1)
    norm = [(1 - 1 / 3) / (sigma + 1e-6), (0 - 1 / 3) / (sigma + 1e-6), (0 - 1 / 3) / (sigma + 1e-6)]
    assert advantages("--estimator", "verl_grpo.norm") == pytest.approx(norm, abs=1e-5)
    assert advantages("--estimator", "scale=group") == pytest.approx(norm, abs=1e-5)
    assert advantages("--estimator", "verl_grpo.norm,scale=none") == pytest.approx(
        [2 / 3, -1 / 3, -1 / 3], abs=1e-6
    )
    loo = [1 - 0.0, 0 - 0.5, 0 - 0.5]  # r − mean of the others
    assert advantages("--estimator", "baseline=leave_one_out") == pytest.approx(loo, abs=1e-6)
    capsys.readouterr()
    assert main(["score", "--estimator", "list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == sorted([*kernel.ADVANTAGE_PRESETS, "rae"])


def test_reward_mode(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, [json.dumps(SIMPLE)])
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--out", str(out_file), "--quiet", "--reward", "win_minus_loss"]) == 0
    assert _records(out_file)[0]["rewards"] == [1.0, -1.0, 0.0]


def test_policy_reference_and_robust_differ_on_a_think_block(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, [json.dumps(THINK)])
    got = {}
    for policy in ("robust", "reference"):
        out_file = tmp_path / f"{policy}.jsonl"
        assert main(["score", str(path), "--out", str(out_file), "--quiet", "--policy", policy]) == 0
        got[policy] = _records(out_file)[0]
    assert got["robust"]["votes"]["list"][0] | {} == {
        "author": 2, "a": 0, "op": ">", "b": 1, "valid": True, "reason": "valid"
    }  # fmt: skip
    assert got["reference"]["votes"]["list"][0]["a"] == 1
    assert got["robust"]["rewards"] == [1.0, 0.0, 0.0]
    assert got["reference"]["rewards"] == [0.0, 1.0, 0.0]


def test_policy_difference_on_the_shipped_think_samples(tmp_path: Path, capsys: Any) -> None:
    read = read_transcripts(sample_text())
    drafts = [d for d in read.debates if "draft_comparison" in d.meta["features"]]
    assert drafts
    votes = {}
    for policy in ("robust", "reference"):
        res = pipeline.score(
            drafts, options=pipeline.ScoreOptions(kernel.ScoringOptions(parse_policy=policy))
        )
        votes[policy] = [r["votes"]["list"] for r in pipeline.debate_records(res)]
    differ = sum(a != b for a, b in zip(votes["robust"], votes["reference"], strict=True))
    assert differ >= len(drafts) // 2, (differ, len(drafts))


def test_datums_npz_alongside_out(tmp_path: Path, capsys: Any) -> None:
    out_file = tmp_path / "res.jsonl"
    assert main(["score", "--quiet", "--out", str(out_file)]) == 0
    records = _by_id(_records(out_file))
    with np.load(tmp_path / "res.datums.npz") as z:
        arrays = {k: z[k] for k in z.files}
    offsets = arrays["offsets_D1"]
    num_d = offsets.shape[0] - 1
    assert num_d > 0 and offsets[0] == 0 and offsets[-1] == arrays["target_tokens"].shape[0]
    for name in ("input_tokens", "target_tokens", "logprobs", "advantages", "mask"):
        assert arrays[name].shape == (offsets[-1],), name
    assert arrays["target_tokens"].dtype == np.int64 and arrays["advantages"].dtype == np.float32
    mask = arrays["mask"].astype(bool)
    assert np.all(arrays["advantages"][~mask] == 0) and np.all(arrays["logprobs"][~mask] == 0)
    # every datum carries its agent's advantage on the action positions
    scored_ids = list(records)
    for d in range(num_d):
        rec = records[scored_ids[int(arrays["debate_D"][d])]]
        adv = np.float32(rec["advantages"][int(arrays["agent_D"][d])])
        sl = slice(offsets[d], offsets[d + 1])
        m = mask[sl]
        assert m.any() and np.allclose(arrays["advantages"][sl][m], adv, atol=1e-6)
    total = sum(r.get("datums", {}).get("count", 0) for r in records.values())
    assert total == num_d


def test_datums_out_without_tokens_warns(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, [json.dumps(SIMPLE)])
    target = tmp_path / "d.npz"
    assert main(["score", str(path), "--quiet", "--datums-out", str(target)]) == 0
    assert "no turn carries tokens" in capsys.readouterr().err and not target.exists()


def test_round1_votes_drop(tmp_path: Path, capsys: Any) -> None:
    # Agent 1 in round 1 names agent 2, who has not spoken yet.
    texts = [
        _resp("4"),
        _resp("4", comparison="Agent 0 > Agent 2"),
        _resp("4", comparison="Agent 0 = Agent 1"),
    ]
    path = _write(tmp_path, [json.dumps(_debate("early", texts, max_rounds=1))])
    got = {}
    for mode in ("count", "drop"):
        out_file = tmp_path / f"{mode}.jsonl"
        assert main(["score", str(path), "--quiet", "--out", str(out_file), "--round1-votes", mode]) == 0
        got[mode] = _records(out_file)[0]
    assert got["count"]["votes"]["total"] == 2 and got["count"]["votes"]["round1_dropped"] == 0
    assert got["drop"]["votes"]["total"] == 1 and got["drop"]["votes"]["round1_dropped"] == 1
    assert got["drop"]["votes"]["list"][0]["reason"] == "round1_not_yet_spoken"
    assert got["drop"]["rewards"] == [0.5, 0.5, 0.0]
    assert got["count"]["rewards"] == [0.75, 0.5, 0.0]


def test_numeric_stages_make_one_kernel_call_per_batch(monkeypatch: Any) -> None:
    from kernel import _scoring  # the scoring core's own references to the kernel functions

    calls: dict[str, int] = {}
    for name in ("votes_from_responses", "validate_votes", "pairwise_rewards", "total_returns",
                 "grouped_advantages", "build_datums"):  # fmt: skip
        real = getattr(_scoring, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*a, **k)

        monkeypatch.setattr(_scoring, name, counted)
    read = read_transcripts(sample_text())
    res = pipeline.score(read.debates)
    assert len(res.replayed) == len(SAMPLE_IDS) > 100
    assert calls == dict.fromkeys(calls, 1) and len(calls) == 6, calls


def test_json_summary_line(capsys: Any) -> None:
    assert main(["score", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    s = json.loads(out[0])
    assert s["ends"]["consensus"] + s["ends"]["max_rounds"] + s["ends"]["parse_error"] + s["ends"][
        "open"
    ] == len(SAMPLE_IDS)
    assert s["datums"]["datums"] > 0 and s["source"] == "sample_debates.jsonl"


def test_limit_truncates_the_table(capsys: Any) -> None:
    assert main(["score", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{len(SAMPLE_IDS) - 3} more debates" in out
    assert SAMPLE_IDS[2] in out and SAMPLE_IDS[3] not in out


def test_samples_run_from_an_unrelated_directory(tmp_path: Path) -> None:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "score", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"debates: {len(SAMPLE_IDS)} scored" in proc.stdout


class _Terminal:
    """A stderr that says it is a terminal and keeps what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_a_terminal_sees_progress_per_chunk_and_a_clean_line_after(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    lines = [json.dumps({**SIMPLE, "id": f"d{i}"}) for i in range(6)]
    path = _write(tmp_path, lines)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["score", str(path), "--json", "--chunk-size", "2"]) == 0
    assert terminal.text.startswith("\rscore:   0%|")  # a regular file: a bar of the bytes read (tqdm)
    assert terminal.text.split("\r")[-1] == ""  # cleared before the summary
    assert '"debates_scored": 6' in capsys.readouterr().out
    # --quiet on a terminal, and not a terminal: nothing but the summary (tests/test_progress.py: a pty)
    terminal.text = ""
    assert main(["score", str(path), "--quiet", "--chunk-size", "2"]) == 0
    assert terminal.text == ""
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    assert main(["score", str(path), "--json", "--chunk-size", "2"]) == 0
    assert capsys.readouterr().err == ""


def test_help_imports_no_command_and_each_command_registers_its_own_line() -> None:
    """``debate-kernel --help`` is printed from the table in ``adapters.cli`` alone (issue 35: start-up
    time is the interpreter's): no command module, no numpy; every command's own parser registers the
    table's help line."""
    code = (
        "import sys\n"
        "from adapters.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('numpy', 'kernel', 'adapters.cli.score', 'adapters.cli.train', 'jax', 'tinker')"
        " if m in sys.modules]\n"
        "print('IMPORTED', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert "IMPORTED []" in done.stdout, done.stdout + done.stderr
    assert all(name in done.stdout for name in cli.SUBCOMMANDS)
    full = cli.build_parser()
    actions = [a for a in full._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in actions[0]._choices_actions}
    assert helps == cli.SUBCOMMANDS
