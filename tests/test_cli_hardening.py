"""Issue 8 through the command line: inputs that crashed a run, outputs that were lost, JSON that was not
JSON, and options that were accepted although wrong."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kernel
from adapters import _json, pipeline
from adapters._atomic import atomic_write, same_file
from adapters.cli import build_parser, main
from adapters.cli.score import format_summary
from adapters.transcripts import read_transcripts
from tests._marks import EXHAUSTIVE

ROOT = Path(__file__).resolve().parents[1]


def _resp(solution: str, *, comparison: str = "N/A") -> str:
    return (
        f"<solution>{solution}</solution>\n<evaluation>ok</evaluation>\n"
        f"<comparison>\n{comparison}\n</comparison>\n<consensus>NO</consensus>\n"
        "<consensus_reason>because</consensus_reason>"
    )


def _debate(ident: str, n: int = 3, comparison: str = "Agent 0 > Agent 1", **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": ident,
        "question": "What is 2 + 2?",
        "num_agents": n,
        "max_rounds": 1,
        "turns": [
            {"agent": k, "text": _resp("4", comparison=comparison if k == n - 1 else "N/A")} for k in range(n)
        ],
    }
    rec.update(over)
    return rec


def _write(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), "utf-8")
    return path


def _strict_loads(text: str) -> Any:
    """A strict JSON parser: NaN, Infinity and -Infinity are refused, as RFC 8259 parsers do."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# --- crashes (items 1-4) ------------------------------------------------------------------------------


def test_a_309_digit_logprob_is_one_skipped_line(tmp_path: Path, capsys: Any) -> None:
    tokens = _debate("tok", n=1, comparison="N/A")
    tokens["turns"][0].update(observation_tokens=[1], action_tokens=[2], logprobs=[0])
    line = json.dumps(tokens).replace('"logprobs": [0]', '"logprobs": [-' + "9" * 309 + "]")
    path = _write(tmp_path / "in.jsonl", [line, _debate("ok")])
    assert main(["score", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    s = _strict_loads(out)
    assert s["debates_scored"] == 1 and s["skipped_by_reason"] == {"bad_value": 1} and "line 1" in err


def test_a_lone_surrogate_refuses_its_line_and_nothing_crashes(tmp_path: Path, capsys: Any) -> None:
    bad = [_debate("a\ud800"), _debate("q", question="\udfff?"), _debate("t", meta={"k": "\ud83d"})]
    path = _write(tmp_path / "in.jsonl", [*bad, _debate("fine")])  # json.dumps escapes them: valid JSON
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    assert "debates: 1 scored, 3 skipped (bad_encoding 3)" in out and err.count("lone UTF-16 surrogate") == 3
    records = [_strict_loads(line) for line in out_file.read_text("utf-8").splitlines()]
    assert [r["status"] for r in records] == ["scored", "skipped", "skipped", "skipped"]
    page = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(page)]) == 0
    assert "fine" in page.read_text("utf-8")


def test_a_directory_without_transcripts_says_what_score_reads(tmp_path: Path, capsys: Any) -> None:
    plain = tmp_path / "plain"
    (plain / "transcripts").mkdir(parents=True)
    (plain / "transcripts" / "notes.jsonl").write_text("{}\n")  # not a step file
    assert main(["score", str(plain)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "FILE must be a transcript file (debate-transcript/1 JSON Lines) or the directory of a " in err


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_run_directory_is_scored_as_its_transcripts_in_step_order(
    tmp_path: Path, capsys: Any, jobs: str
) -> None:
    # what `cat RUN/transcripts/step-*.jsonl | debate-kernel score -` gives, with the steps in numeric
    # order (step-1000000 after step-999999) and a last line without its newline kept apart
    run = tmp_path / "run"
    (run / "transcripts").mkdir(parents=True)
    steps = {999_999: [_debate("a"), "not json"], 2: [_debate("b", n=2)], 1_000_000: [_debate("c")]}
    for step, lines in steps.items():
        _write(run / "transcripts" / f"step-{step:06d}.jsonl", lines)
    last = run / "transcripts" / "step-1000000.jsonl"
    last.write_text(last.read_text("utf-8").rstrip("\n"), "utf-8")
    whole = _write(tmp_path / "whole.jsonl", [line for step in sorted(steps) for line in steps[step]])
    results = []
    for source in (run, whole):
        out_file = tmp_path / f"{source.name}.out.jsonl"
        assert main(["score", str(source), "--json", "--out", str(out_file), "--jobs", jobs]) == 0
        out, err = capsys.readouterr()
        summary = _strict_loads(out)
        named = summary.pop("source")
        results.append((named, summary, out_file.read_text("utf-8"), err.replace(named, "SOURCE")))
    (run_source, *run_rest), (_, *whole_rest) = results
    assert run_source == str(run / "transcripts" / "step-*.jsonl")
    assert run_rest == whole_rest
    assert [json.loads(line)["id"] for line in results[0][2].splitlines()] == ["b", "a", "c", None]
    refused = run / "transcripts" / "step-000002.jsonl"
    assert main(["score", str(run), "--out", str(refused)]) == 2
    assert "is an input file (a transcript of the run); refusing to overwrite it" in capsys.readouterr().err
    unreadable = run / "transcripts" / "step-000005.jsonl"
    unreadable.mkdir()  # read after step 2's file: the run stops there, naming it, and writes nothing
    out_file = tmp_path / "partial.jsonl"
    assert main(["score", str(run), "--out", str(out_file), "--jobs", jobs]) == 2
    assert f"cannot read {unreadable}: Is a directory" in capsys.readouterr().err
    assert not out_file.exists()


def test_report_title_with_undecodable_bytes_is_written_escaped(tmp_path: Path, capsys: Any) -> None:
    page = tmp_path / "r.html"
    assert main(["report", "-o", str(page), "--title", "runs \udcff"]) == 0  # argv of b"runs \xff"
    assert "runs \\udcff" in page.read_text("utf-8")


def test_singleton_error_skips_one_agent_debates_with_a_reason(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("solo", n=1, comparison="N/A"), _debate("trio")])
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--estimator", "singleton=error", "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    assert "1 scored, 1 skipped (singleton_group 1)" in out and "singleton='error'" in err
    records = {r["id"]: r for r in map(json.loads, out_file.read_text("utf-8").splitlines())}
    assert records["solo"]["error"]["reason"] == "singleton_group" and records["trio"]["status"] == "scored"
    # Without singleton=error the one-agent debate is scored (advantage 0 under the default preset).
    assert main(["score", str(path), "--out", str(out_file)]) == 0
    assert json.loads(out_file.read_text("utf-8").splitlines()[0])["advantages"] == [0.0]


@pytest.mark.parametrize("policy", kernel.PARSE_POLICIES)
@pytest.mark.parametrize("vote_id", [2**63, 2**64 + 5, 10**40])
def test_vote_ids_beyond_int64_with_round1_drop(
    tmp_path: Path, capsys: Any, policy: str, vote_id: int
) -> None:
    rec = _debate("big", n=2, comparison=f"Agent 0 > Agent {vote_id}", max_rounds=2)
    path = _write(tmp_path / "in.jsonl", [rec])
    assert main(["score", str(path), "--policy", policy, "--round1-votes", "drop", "--json"]) == 0
    s = _strict_loads(capsys.readouterr().out)
    assert s["debates_scored"] == 1 and s["votes_total"] == 0


# --- outputs (item 5) ---------------------------------------------------------------------------------


def test_an_output_equal_to_the_input_or_to_another_output_is_refused(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("a")])
    before = path.read_bytes()
    alias = tmp_path / "sub" / ".." / "in.jsonl"
    (tmp_path / "sub").mkdir()
    for argv, needle in [
        (["score", str(path), "--out", str(path)], "--out"),
        (["score", str(path), "--out", str(alias)], "--out"),
        (["score", str(path), "--datums-out", str(path)], "--datums-out"),
        (
            [
                "score",
                str(path),
                "--out",
                str(tmp_path / "o.jsonl"),
                "--datums-out",
                str(tmp_path / "o.jsonl"),
            ],
            "both",
        ),
        (["report", str(path), "-o", str(path)], "--output"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and ("input file" in err or "both name" in err), err
        assert path.read_bytes() == before
    assert not (tmp_path / "o.jsonl").exists()
    (tmp_path / "link.jsonl").symlink_to(path)
    assert main(["score", str(tmp_path / "link.jsonl"), "--out", str(path)]) == 2
    assert path.read_bytes() == before
    # The shipped samples are the input when FILE is omitted.
    from adapters import data

    assert main(["score", "--out", str(data.path(data.SAMPLE_DEBATES))]) == 2


def test_a_crash_while_writing_keeps_the_previous_file(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("a"), _debate("b")])
    out_file = tmp_path / "o.jsonl"
    out_file.write_text("previous results\n", "utf-8")

    for crash in (KeyboardInterrupt, OSError, RuntimeError):

        def boom(result: Any, crash: type[BaseException] = crash) -> list[dict[str, Any]]:
            raise crash("the disk went away")

        monkeypatch.setattr(pipeline, "debate_records", boom)
        if crash is KeyboardInterrupt:  # Ctrl-C: exit status 130 and a message
            assert main(["score", str(path), "--out", str(out_file), "--quiet"]) == 130
            assert "interrupted; nothing was written" in capsys.readouterr().err
        elif crash is OSError:  # a failed write: exit status 2, and the partial file is not committed
            assert main(["score", str(path), "--out", str(out_file), "--quiet"]) == 2
            assert f"cannot write {out_file}: the disk went away" in capsys.readouterr().err
        else:
            with pytest.raises(RuntimeError, match="disk went away"):
                main(["score", str(path), "--out", str(out_file), "--quiet"])
        assert out_file.read_text("utf-8") == "previous results\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "o.jsonl"]  # no temporary file left


def test_ctrl_c_during_a_report_keeps_the_previous_page(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from adapters.report import html as report_html

    path = _write(tmp_path / "in.jsonl", [_debate("a"), _debate("b")])
    page = tmp_path / "r.html"
    page.write_text("previous page\n", "utf-8")

    def interrupted(*args: Any, **kwargs: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(report_html, "_debate_section", interrupted)
    assert main(["report", str(path), "-o", str(page)]) == 130
    assert "interrupted; nothing was written" in capsys.readouterr().err
    assert page.read_text("utf-8") == "previous page\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "r.html"]


def test_atomic_write_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    with atomic_write(target, "wb") as f:
        f.write(b"one")
    with pytest.raises(RuntimeError, match="interrupted"), atomic_write(target, "wb") as f:
        f.write(b"two, half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"one" and [p.name for p in tmp_path.iterdir()] == ["x.bin"]
    mode = os.stat(target).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # as open() would create it, not mkstemp's 0o600
    with atomic_write(os.devnull) as f:  # a device is written in place
        f.write("x")
    with pytest.raises(OSError, match="missing-dir"):
        with atomic_write(tmp_path / "missing-dir" / "x.txt") as f:
            f.write("x")
    assert same_file(tmp_path / "a" / ".." / "x.bin", target) and not same_file(target, tmp_path / "y")


@EXHAUSTIVE
def test_sigint_during_out_leaves_the_previous_file_intact(tmp_path: Path) -> None:
    many = [_debate(f"d{k:05d}", comparison="Agent 0 > Agent 1\nAgent 1 = Agent 0") for k in range(6000)]
    path = _write(tmp_path / "in.jsonl", many)
    out_file = tmp_path / "o.jsonl"
    previous = "".join(json.dumps({"id": f"old{k}", "status": "scored"}) + "\n" for k in range(100))
    out_file.write_text(previous, "utf-8")
    stat_before = out_file.stat()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "adapters.cli", "score", str(path), "--out", str(out_file), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    started = False
    while proc.poll() is None and time.monotonic() < deadline:
        temps = [p for p in tmp_path.iterdir() if p.name.startswith(".o.jsonl.")]
        st = out_file.stat() if out_file.exists() else None
        if (
            temps
            or st is None
            or (st.st_size, st.st_mtime_ns) != (stat_before.st_size, stat_before.st_mtime_ns)
        ):
            proc.send_signal(signal.SIGINT)  # the write has begun
            started = True
            break
        time.sleep(0.001)
    proc.communicate(timeout=300)
    assert started, "the run ended before its output was written"
    text = out_file.read_text("utf-8")
    if proc.returncode == 0:  # the signal came after the rename (a very slow machine): the new file, whole
        assert len(text.splitlines()) == len(many) and text.endswith("\n")
    else:  # interrupted while writing: the previous file, untouched
        assert text == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "o.jsonl"]


# --- strict JSON (item 6) -----------------------------------------------------------------------------


def test_json_outputs_parse_strictly_even_with_non_finite_figures(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("a"), _debate("b")])
    result = pipeline.score(read_transcripts(path.read_text("utf-8")).debates)
    adv = np.asarray(result.numeric.advantages_PG, dtype=np.float64).copy()
    adv[0], adv[1] = np.inf, np.nan
    broken = dataclasses.replace(result, numeric=result.numeric._replace(advantages_PG=adv))
    s = pipeline.summary(broken)
    assert s["advantages"] == {"mean": None, "std": None, "min": None, "max": None}
    text = _json.dumps(s)
    assert _strict_loads(text)["advantages"]["max"] is None
    for rec in pipeline.debate_records(broken):
        _strict_loads(_json.dumps(rec))
    assert pipeline.debate_records(broken)[0]["advantages"][:2] == [None, None]
    assert "advantages: mean n/a, std n/a, range [n/a, n/a]" in format_summary(s)
    with pytest.raises(ValueError, match="JSON compliant"):
        json.dumps({"x": float("inf")}, allow_nan=False)  # what _json.dumps guards against


def test_score_json_and_out_are_strict_json(tmp_path: Path, capsys: Any) -> None:
    tokens = _debate("tok", n=1, comparison="N/A")
    tokens["turns"][0].update(observation_tokens=[1, 2], action_tokens=[3], logprobs=[-1e39])
    path = _write(tmp_path / "in.jsonl", [tokens, _debate("ok")])
    out_file = tmp_path / "o.jsonl"
    assert main(["score", str(path), "--json", "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    s = _strict_loads(out)
    assert s["skipped_by_reason"] == {"bad_value": 1} and "float32" in err  # refused upstream, not inf
    for line in out_file.read_text("utf-8").splitlines():
        _strict_loads(line)
    assert main(["score", "--json"]) == 0
    _strict_loads(capsys.readouterr().out)


# --- options (items 7 and 8) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["score", "--limit", "-3"], ["score", "--limit", "x"], ["report", "--max-debates", "-1"]],
)
def test_negative_counts_are_usage_errors(argv: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "non-negative integer" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("eps=x", "estimator option eps: expected a number, got 'x'"),
        ("ddof=1.5", "estimator option ddof: expected an integer, got '1.5'"),
        ("eps=inf", "estimator option eps: expected a finite number"),
        ("min_std=x", "estimator option min_std: expected a number or none"),
        ("positive_only=maybe", "estimator option positive_only: expected true or false"),
        ("scale=sideways", "estimator option scale: expected one of none, group, batch, whiten"),
        ("default,baseline=3", "estimator option baseline: expected one of mean, leave_one_out"),
        ("verl_grpo.nrom", "unknown estimator 'verl_grpo.nrom' (did you mean 'verl_grpo.norm'?); known"),
        ("default,scal=group", "unknown estimator option 'scal' (did you mean 'scale'?); options:"),
        ("zzz", "unknown estimator 'zzz'; known:"),
    ],
)
def test_wrong_estimator_values_name_the_option(spec: str, needle: str, capsys: Any) -> None:
    assert main(["score", "--estimator", spec, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("debate-kernel: --estimator: ") and needle in err, err


def test_estimator_values_of_every_type_are_read() -> None:
    opts = kernel.AdvantageOptions.from_spec("ddof=0,eps=1e-4,min_std=none,positive_only=yes,singleton=raw")
    assert (opts.ddof, opts.eps, opts.min_std, opts.positive_only, opts.singleton) == (
        0,
        1e-4,
        None,
        True,
        "raw",
    )
    assert type(opts.ddof) is int and kernel.AdvantageOptions.from_spec("min_std=0.5").min_std == 0.5


def test_cli_choices_are_the_kernels_constants() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[union-attr]
    for command in ("score", "report"):
        actions = {a.dest: a.choices for a in sub[command]._actions}
        assert tuple(actions["policy"]) == kernel.PARSE_POLICIES
        assert tuple(actions["reward"]) == kernel.PAIRWISE_MODES
        assert tuple(actions["datum_mode"]) == kernel.DATUM_MODES
        assert tuple(actions["round1_votes"]) == kernel.ROUND1_VOTE_POLICIES
        assert tuple(actions["after_end"]) == pipeline.AFTER_END_POLICIES


def test_format_summary_takes_only_the_summary() -> None:
    import inspect

    assert list(inspect.signature(format_summary).parameters) == ["s"]


def test_pipeline_keeps_no_dead_fallbacks() -> None:
    source = "".join(p.read_text("utf-8") for p in sorted((ROOT / "adapters" / "pipeline").glob("*.py")))
    assert "def score(" in source
    for dead in ("_preset_names", "getattr(kernel", "_preset_options", '"advantages", result'):
        assert dead not in source, dead


def test_train_without_the_training_extras_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "adapters.training.train", None)  # as if tinker were not installed
    assert main(["train", "--steps", "1", "--out", str(tmp_path / "run")]) == 2
    assert "pip install -e '.[local]'" in capsys.readouterr().err


# --- review of the outputs: a run's own files, stdin, the records/datums pair, messages ---------------


def _token_debate(ident: str) -> dict[str, Any]:
    """A two-agent debate whose turns carry tokens (so it gives datums)."""
    rec = _debate(ident, n=2)
    for turn in rec["turns"]:
        turn.update(observation_tokens=[1, 2], action_tokens=[3, 4], logprobs=[-0.5, -0.25])
    return rec


def _run_dir(tmp_path: Path, metrics: list[str] | None = None) -> Path:
    """A training run directory as ``train`` leaves it (the files ``report RUN_DIR`` and ``score``
    read), without running a service."""
    run = tmp_path / "run"
    (run / "transcripts").mkdir(parents=True)
    lines = metrics or [json.dumps({"step": s, "env/all/reward/total": 0.1 * s}) for s in range(3)]
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines), "utf-8")
    (run / "run.json").write_text('{"run_id": "r", "config": {}}\n', "utf-8")
    _write(run / "transcripts" / "step-000000.jsonl", [_token_debate("a")])
    return run


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_of_a_run_directory_refuses_to_overwrite_the_runs_files(tmp_path: Path, capsys: Any) -> None:
    run = _run_dir(tmp_path)
    before = _snapshot(run)
    for target, needle in [
        (run / "metrics.jsonl", "is an input of the run"),
        (run / "run.json", "is an input of the run"),
        (run / "transcripts" / "step-000000.jsonl", "is an input of the run"),
        (tmp_path / "x" / ".." / "run" / "metrics.jsonl", "is an input of the run"),
        (run / "notes.txt", "a report there must be an .html file"),
        (run, "is a directory"),
    ]:
        assert main(["report", str(run), "-o", str(target)]) == 2, target
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and needle in err, err
        assert _snapshot(run) == before
    (tmp_path / "link.jsonl").hardlink_to(run / "metrics.jsonl")
    assert main(["report", str(run), "-o", str(tmp_path / "link.jsonl")]) == 2
    assert "is an input of the run" in capsys.readouterr().err and _snapshot(run) == before
    assert main(["report", str(run), "-o", str(run / "curves.html")]) == 0  # a page in the run: fine
    assert main(["report", str(run), "-o", str(run / "curves.html")]) == 0  # and again, over itself
    # the FILE branch refuses its input as before
    step = run / "transcripts" / "step-000000.jsonl"
    assert main(["report", str(step), "-o", str(step)]) == 2
    assert "is the input file; refusing to overwrite it" in capsys.readouterr().err


@pytest.fixture
def stdin_from(monkeypatch: Any) -> Any:
    """Puts a file on standard input (file descriptor 0 and ``sys.stdin``) for the test, then the
    previous one back."""
    saved = os.dup(0)
    opened: list[Any] = []

    def put(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        opened.append(open(0, encoding="utf-8", closefd=False))
        monkeypatch.setattr(sys, "stdin", opened[-1])

    yield put
    monkeypatch.undo()
    for f in opened:
        f.close()
    os.dup2(saved, 0)
    os.close(saved)


def test_an_output_that_is_the_file_on_stdin_is_refused(tmp_path: Path, capsys: Any, stdin_from: Any) -> None:
    path = _write(tmp_path / "s.jsonl", [_token_debate("a")])
    before = path.read_bytes()
    alias = tmp_path / "alias.jsonl"
    alias.hardlink_to(path)
    stdin_from(path)
    for argv, needle in [
        (["score", "-", "--quiet", "--out", str(path)], "--out"),
        (["score", "-", "--quiet", "--out", str(alias)], "--out"),
        (["score", "-", "--quiet", "--datums-out", str(path)], "--datums-out"),
        (["report", "-", "-o", str(path)], "--output"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"{needle} " in err and "is the input file (standard input); refusing to overwrite it" in err
        assert path.read_bytes() == before


def test_a_run_without_tokens_removes_the_stale_datums_of_its_out(tmp_path: Path, capsys: Any) -> None:
    tokens = _write(tmp_path / "tok.jsonl", [_token_debate("a"), _token_debate("b")])
    plain = _write(tmp_path / "plain.jsonl", [_debate("c")])
    out_file, datums = tmp_path / "r.jsonl", tmp_path / "r.datums.npz"
    for quiet in (False, True):
        assert main(["score", str(tokens), "--quiet", "--out", str(out_file)]) == 0
        assert datums.exists()
        capsys.readouterr()
        assert main(["score", str(plain), "--out", str(out_file), *(["--quiet"] if quiet else [])]) == 0
        err = capsys.readouterr().err
        assert not datums.exists() and [r["id"] for r in map(json.loads, out_file.open())] == ["c"]
        said = f"removed {datums}: it held the datums of an earlier {out_file}, and no turn of this input"
        assert (said not in err) if quiet else (said in err), err
    # a --datums-out the user named is theirs: left as it was, with the warning
    named = tmp_path / "named.npz"
    named.write_bytes(b"earlier datums")
    assert main(["score", str(plain), "--quiet", "--out", str(out_file), "--datums-out", str(named)]) == 0
    assert "no turn carries tokens" in capsys.readouterr().err and named.read_bytes() == b"earlier datums"


def _previous_pair(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    """``r.jsonl`` and ``r.datums.npz`` of an earlier run, and the folder's files."""
    out_file = tmp_path / "r.jsonl"
    out_file.write_text("previous records\n", "utf-8")
    (tmp_path / "r.datums.npz").write_bytes(b"previous datums")
    return out_file, tmp_path / "r.datums.npz", _snapshot(tmp_path)


def test_a_datums_out_that_cannot_be_written_leaves_the_previous_pair(tmp_path: Path, capsys: Any) -> None:
    tokens = _write(tmp_path / "tok.jsonl", [_token_debate("a")])
    (tmp_path / "somedir").mkdir()
    out_file, _, before = _previous_pair(tmp_path)
    for datums_out, needle in [
        (tmp_path / "somedir", f"--datums-out {tmp_path / 'somedir'} is a directory, not a file"),
        (tmp_path / "nodir" / "d.npz", f"cannot write {tmp_path / 'nodir' / 'd.npz'}: No such file"),
    ]:
        assert (
            main(["score", str(tokens), "--quiet", "--out", str(out_file), "--datums-out", str(datums_out)])
            == 2
        )
        out, err = capsys.readouterr()
        assert needle in err and err.count("\n") == 1 and out == "", err
        assert _snapshot(tmp_path) == before  # neither file replaced, no temporary file left


def _failing_rename(monkeypatch: Any, suffix: str, error: BaseException) -> None:
    """``os.replace`` raises ``error`` for a target ending in ``suffix`` (the others are renamed)."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(suffix):
            raise error
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_a_failed_rename_of_the_datums_leaves_no_mismatched_pair(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    tokens = _write(tmp_path / "tok.jsonl", [_token_debate("a")])
    out_file, datums, before = _previous_pair(tmp_path)
    # --out's rename fails: nothing is replaced (the datums, renamed after it, are discarded)
    _failing_rename(monkeypatch, ".jsonl", OSError(5, "Input/output error"))
    assert main(["score", str(tokens), "--quiet", "--out", str(out_file)]) == 2
    assert capsys.readouterr().err == f"debate-kernel: cannot write {out_file}: Input/output error\n"
    assert _snapshot(tmp_path) == before
    monkeypatch.undo()
    # the datums' rename fails after --out's: the earlier datums, which no longer match, are removed
    _failing_rename(monkeypatch, ".npz", OSError(5, "Input/output error"))
    assert main(["score", str(tokens), "--quiet", "--out", str(out_file)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {datums}: Input/output error; {out_file} was written without its datums" in err
    assert f"(the earlier {datums}, of the records it replaced, was removed)" in err
    assert json.loads(out_file.read_text("utf-8"))["id"] == "a" and not datums.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "tok.jsonl"]
    # a named --datums-out is not removed: the message says it is an earlier run's
    named = tmp_path / "named.npz"
    named.write_bytes(b"earlier datums")
    assert main(["score", str(tokens), "--quiet", "--out", str(out_file), "--datums-out", str(named)]) == 2
    err = capsys.readouterr().err
    assert f"{out_file} was written without its datums; {named} still holds an earlier run's datums" in err
    assert named.read_bytes() == b"earlier datums"


def test_ctrl_c_after_the_records_are_written_says_so(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    from adapters.cli import score as cli_score

    tokens = _write(tmp_path / "tok.jsonl", [_token_debate("a")])
    out_file, datums, _ = _previous_pair(tmp_path)

    def interrupted(s: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_score, "format_summary", interrupted)  # after the commit, while printing
    assert main(["score", str(tokens), "--quiet", "--out", str(out_file)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted after writing {out_file} and {datums} (complete)" in err and "nothing" not in err
    assert json.loads(out_file.read_text("utf-8"))["id"] == "a"
    with np.load(datums) as z:
        assert z["offsets_D1"].shape == (3,)  # the new datums: two, of debate "a"
    monkeypatch.undo()
    # Ctrl-C between the two renames: the records are new, the earlier datums are removed, and it is said
    out_file, datums, _ = _previous_pair(tmp_path)
    _failing_rename(monkeypatch, ".npz", KeyboardInterrupt())
    assert main(["score", str(tokens), "--quiet", "--out", str(out_file)]) == 130
    err = capsys.readouterr().err
    assert (
        f"interrupted after writing {out_file} (complete); {out_file} was written without its datums" in err
    )
    assert json.loads(out_file.read_text("utf-8"))["id"] == "a" and not datums.exists()


def test_an_output_directory_that_is_missing_is_named_as_the_output(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("a")])
    run = _run_dir(tmp_path)
    missing = tmp_path / "nodir"
    for argv, target in [
        (["score", str(path), "--quiet", "--out", str(missing / "x.jsonl")], missing / "x.jsonl"),
        (["report", str(run), "-o", str(missing / "r.html")], missing / "r.html"),
        (["report", str(path), "-o", str(missing / "r.html")], missing / "r.html"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err == f"debate-kernel: cannot write {target}: No such file or directory\n", err


def test_report_of_a_run_with_undecodable_metrics_names_the_file(tmp_path: Path, capsys: Any) -> None:
    run = _run_dir(tmp_path)
    (run / "metrics.jsonl").write_bytes(b'{"step": 0, "note": "\xff"}\n')
    page = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(page)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "metrics.jsonl" in err and not page.exists(), err


def test_report_of_a_run_skips_a_metric_beyond_float_range(tmp_path: Path, capsys: Any) -> None:
    huge = '{"step": 0, "env/all/reward/total": 1' + "0" * 400 + "}"
    run = _run_dir(tmp_path, [huge, json.dumps({"step": 1, "env/all/reward/total": 0.5})])
    page = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(page)]) == 0
    text = page.read_text("utf-8")
    assert "env/all/reward/total" in text and "<circle" in text  # step 1's point alone: step 0's skipped


def test_report_of_a_run_directory_takes_the_title(tmp_path: Path, capsys: Any) -> None:
    run = _run_dir(tmp_path)
    page = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(page), "--title", "Curves <of> run"]) == 0
    assert "<title>Curves &lt;of&gt; run</title>" in page.read_text("utf-8")
    assert main(["report", str(run), "-o", str(page)]) == 0
    assert "<title>Training run run</title>" in page.read_text("utf-8")
    assert main(["report", "-o", str(page)]) == 0  # scored debates keep their default title
    assert "<title>Debate report</title>" in page.read_text("utf-8")


@pytest.mark.parametrize("command", ["score", "report"])
def test_sigterm_while_writing_discards_the_temporary_file(
    tmp_path: Path, capsys: Any, monkeypatch: Any, command: str
) -> None:
    path = _write(tmp_path / "in.jsonl", [_debate("a"), _debate("b")])
    target = tmp_path / "o.out"
    target.write_text("previous\n", "utf-8")

    def fallback(signum: int, frame: Any) -> None:
        raise AssertionError("SIGTERM reached the test's handler: the command set none of its own")

    handler = signal.signal(signal.SIGTERM, fallback)

    def terminated(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here, while the temporary file is open
        time.sleep(5)
        raise AssertionError("SIGTERM was not turned into an exception")

    if command == "score":
        monkeypatch.setattr(pipeline, "debate_records", terminated)
        argv = ["score", str(path), "--quiet", "--out", str(target)]
    else:
        monkeypatch.setattr("adapters.cli.report.atomic_write", _writing_then(terminated))
        argv = ["report", str(path), "-o", str(target)]
    try:
        assert main(argv) == 143
        assert signal.getsignal(signal.SIGTERM) == fallback  # put back after the run
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert "terminated; nothing was written" in capsys.readouterr().err
    assert target.read_text("utf-8") == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "o.out"]


def _writing_then(action: Any) -> Any:
    """An ``atomic_write`` that calls ``action`` once its temporary file is open."""

    def write(path: Any, mode: Any = "w") -> Any:
        import contextlib

        @contextlib.contextmanager
        def opened() -> Any:
            with atomic_write(path, mode) as f:
                action()
                yield f

        return opened()

    return write


def test_report_of_a_run_says_which_metrics_lines_it_left_out(tmp_path: Path, capsys: Any) -> None:
    """A damaged line in the middle of metrics.jsonl was left out of the curves without a word."""
    good = [json.dumps({"step": s, "env/all/reward/total": 0.5}) for s in range(3)]
    run = _run_dir(tmp_path, [good[0], '{"step": 1, "env/all/rew', good[2]])
    page = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(page)]) == 0
    err = capsys.readouterr().err
    assert "warning: left out" in err and "metrics.jsonl:2: not JSON" in err, err
    text = page.read_text("utf-8")
    assert "1 metrics line(s) could not be read" in text and "metrics.jsonl:2: not JSON" in text
    assert "2 steps" in text
