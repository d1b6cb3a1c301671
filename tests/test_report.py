"""``debate-kernel report``: the page renders in headless Chromium without console errors, and its
content matches the scored results (every debate id, every reward, every vote count); text is escaped."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import pipeline
from adapters.cli import main
from adapters.report import render_html, render_report, svg_histogram
from adapters.report.html import _nice_ticks
from adapters.transcripts import read_transcripts
from tests._profile import examples
from tests.test_pipeline_stream import LINES as STREAM_LINES
from tests.test_pipeline_stream import OPTIONS as STREAM_OPTIONS
from tests.test_pipeline_stream import whole_result
from tools.samples import sample_text

CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# Records every uncaught error and console.error call into an attribute of <html> that --dump-dom shows.
CAPTURE = """<script>
(function(){
  var seen=[];
  function note(msg){
    seen.push(String(msg));
    document.documentElement.setAttribute('data-errors',JSON.stringify(seen));
  }
  window.addEventListener('error',function(e){note('error: '+(e.message||e.type));},true);
  window.addEventListener('unhandledrejection',function(e){note('rejection: '+e.reason);});
  var orig=console.error;
  console.error=function(){note(Array.prototype.join.call(arguments,' '));orig.apply(console,arguments);};
})();
</script>"""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _render_in_chromium(page: Path, tmp_path: Path) -> tuple[str, str]:
    exe = _chromium()
    if exe is None:
        if CI:
            pytest.fail("chromium is not installed; under CI the report test must run (install chromium)")
        pytest.skip("chromium is not installed (the test runs when it is, and always under CI=true)")
    probe = tmp_path / ("probe-" + page.name)
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("<head>", "<head>" + CAPTURE, 1), encoding="utf-8")
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probe.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _console_problems(dom: str, stderr: str) -> list[str]:
    problems = []
    m = re.search(r'data-errors="([^"]*)"', dom)
    if m:
        problems.append("page errors: " + m.group(1))
    problems += [line for line in stderr.splitlines() if "Uncaught" in line or ":CONSOLE(" in line]
    return problems


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", "-o", str(out)]) == 0
    return out


def test_report_renders_in_chromium_without_console_errors(sample_report: Path, tmp_path: Path) -> None:
    dom, stderr = _render_in_chromium(sample_report, tmp_path)
    assert 'data-ready="1"' in dom, "the report's script did not run to completion"
    assert _console_problems(dom, stderr) == []
    assert dom.count('class="debate"') == len(read_transcripts(sample_text()).debates)


def test_the_chromium_check_catches_a_broken_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><head><title>x</title></head><body><p>hi</p>"
        "<script>console.error('boom'); notAFunction();</script></body></html>",
        encoding="utf-8",
    )
    dom, stderr = _render_in_chromium(broken, tmp_path)
    problems = _console_problems(dom, stderr)
    assert any("boom" in p for p in problems) and any("notAFunction" in p for p in problems), problems


# --- content ----------------------------------------------------------------------------------------


class _Collector(HTMLParser):
    """Collects a report's debate sections, agent rows and skipped-line rows by their data-* attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.debates: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        self.skipped: list[int] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "details" and a.get("class") == "debate":
            self.current = a["data-id"] or ""
            self.debates[self.current] = {
                "votes": int(a["data-votes"] or 0),
                "malformed": int(a["data-malformed"] or 0),
                "end": a["data-end"],
                "rewards": {},
                "advantages": {},
            }
        elif tag == "tr" and "data-agent" in a and self.current is not None:
            i = int(a["data-agent"] or 0)
            self.debates[self.current]["rewards"][i] = float(a["data-reward"] or "nan")
            self.debates[self.current]["advantages"][i] = float(a["data-advantage"] or "nan")
        elif tag == "tr" and a.get("class") == "skipped":
            self.skipped.append(int(a["data-line"] or 0))


def _collect(page: str) -> _Collector:
    c = _Collector()
    c.feed(page)
    c.close()
    return c


def test_report_content_matches_the_scored_results(sample_report: Path) -> None:
    page = sample_report.read_text(encoding="utf-8")
    read = read_transcripts(sample_text())
    result = pipeline.score(read.debates, read_errors=read.errors)
    records = [r for r in pipeline.debate_records(result) if r["status"] == "scored"]
    got = _collect(page)
    assert list(got.debates) == [r["id"] for r in records]
    for r in records:
        d = got.debates[r["id"]]
        assert d["votes"] == r["votes"]["total"] and d["malformed"] == r["votes"]["malformed"], r["id"]
        assert d["end"] == r["end"]
        assert [d["rewards"][i] for i in range(r["num_agents"])] == pytest.approx(r["rewards"], abs=1e-6)
        assert [d["advantages"][i] for i in range(r["num_agents"])] == pytest.approx(
            r["advantages"], abs=1e-6
        )
    s = pipeline.summary(result)
    assert f"<b>{s['debates_scored']}</b><span>debates scored</span>" in page
    assert f"<b>{s['votes_total']}</b><span>valid votes</span>" in page


def test_report_lists_skipped_lines_and_escapes_everything(tmp_path: Path, capsys: Any) -> None:
    nasty = "<script>alert('x')</script> & </pre></details>\"'"
    rec = {
        "id": "id-<b>bold</b>",
        "question": nasty,
        "num_agents": 2,
        "max_rounds": 1,
        "turns": [
            {
                "agent": 0,
                "text": f"<solution>{nasty}</solution><evaluation>{nasty}</evaluation><comparison>N/A"
                f"</comparison><consensus>NO</consensus><consensus_reason>{nasty}</consensus_reason>",
            },
            {"agent": 1, "text": nasty},
        ],
    }
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(rec) + "\n{not json\n", encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "line 2" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert "<script>alert" not in page and "<b>bold</b>" not in page and "</pre></details>\"'" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;/pre&gt;" in page
    got = _collect(page)
    assert list(got.debates) == ["id-<b>bold</b>"]
    assert got.skipped == [2]
    assert got.tags.count("script") == 1  # only the report's own script
    dom, stderr = _render_in_chromium(out, tmp_path)
    assert 'data-ready="1"' in dom and _console_problems(dom, stderr) == []


def test_report_is_self_contained_and_its_svgs_are_well_formed(sample_report: Path) -> None:
    page = sample_report.read_text(encoding="utf-8")
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page)
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "url(" not in page and "@import" not in page
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    assert len(svgs) > 2 * len(read_transcripts(sample_text()).debates)
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_max_debates_limits_detail_sections(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "-o", str(out), "--max-debates", "5", "--policy", "reference"]) == 0
    page = out.read_text(encoding="utf-8")
    assert len(_collect(page).debates) == 5
    assert "policy <b>reference</b>" in page and "(5 of 120 shown)" in page


def test_histogram_of_nothing_or_constants() -> None:
    for values in ([], [0.5, 0.5, 0.5], [float("nan")]):
        ET.fromstring(svg_histogram(values, title="t"))


def test_report_of_an_empty_batch_is_valid() -> None:
    result = pipeline.score([])
    page = render_html(result, source="empty")
    assert "Debates (0 of 0 shown)" in page
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)


# --- issue 8: ticks, histograms at any magnitude, long ids ---------------------------------------------


@settings(max_examples=examples(300))
@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_ticks_are_total_bounded_sorted_and_in_range(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    for n in (0, 1, 4, 5):
        ticks = _nice_ticks(lo, hi, n)
        assert 1 <= len(ticks) <= max(n, 1) + 1
        assert ticks == sorted(set(ticks)) and all(lo <= t <= hi for t in ticks)


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (1e20, 1e20 + 16384),
        (1e16, 1e16 + 2),
        (-1.7e308, 1.7e308),
        (5e-324, 1e-323),
        (3.0, 3.0),
        (0.0, 5e-324),
    ],
)
def test_ticks_end_on_narrow_ranges_at_large_magnitude(lo: float, hi: float) -> None:
    # Repeated addition of a step below the spacing of floats at lo never reached hi: a hang.
    for n in (1, 4, 5):  # n = 1 reached a step of 10^-324 = 0 on (0, 5e-324): a division by zero
        assert 1 <= len(_nice_ticks(lo, hi, n)) <= max(n, 1) + 1
    assert _nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert _nice_ticks(float("nan"), 1.0) == [] and _nice_ticks(2.0, 1.0) == [2.0]


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6))
def test_histogram_of_any_finite_values_is_a_well_formed_svg(values: list[float]) -> None:
    root = ET.fromstring(svg_histogram(values, title="t"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_histogram_mean_of_values_near_the_float_maximum_does_not_overflow() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = svg_histogram([1.7e308, 1.7e308, 1.6e308], title="t")
    assert "mean=1.67e+308" in svg


def test_very_long_ids_wrap_instead_of_scrolling_sideways(tmp_path: Path, capsys: Any) -> None:
    long_id = "run-" + "x" * 3000
    rec = {
        "id": long_id,
        "question": "Q" * 3000,
        "num_agents": 2,
        "max_rounds": 1,
        "turns": [{"agent": 0, "text": "y" * 3000}, {"agent": 1, "text": "z"}],
    }
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": long_id + "2", "num_agents": 0}) + "\n")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "overflow-wrap:anywhere" in page
    probe = page.replace(
        "document.body.setAttribute('data-ready','1');",
        "items.forEach(function(d){d.open=true;});"
        "var el=document.documentElement;"
        "document.body.setAttribute('data-overflow',String(el.scrollWidth-el.clientWidth));"
        "document.body.setAttribute('data-ready','1');",
    )
    assert probe != page
    out.write_text(probe, encoding="utf-8")
    dom, _ = _render_in_chromium(out, tmp_path)
    m = re.search(r'data-overflow="(-?\d+)"', dom)
    assert m is not None and int(m.group(1)) <= 0, "the page is wider than the window"


def test_the_reports_figures_are_strict_json(sample_report: Path) -> None:
    import html as html_lib

    page = sample_report.read_text(encoding="utf-8")
    m = re.search(r"all figures \(JSON\)</summary><pre>(.*?)</pre>", page, flags=re.S)
    assert m is not None

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    figures = json.loads(html_lib.unescape(m.group(1)), parse_constant=refuse)
    assert figures["debates_scored"] == len(read_transcripts(sample_text()).debates)


@settings(max_examples=examples(15), deadline=None)
@given(
    chunk_size=st.integers(1, 12),
    max_debates=st.integers(0, 20),
    which=st.integers(0, len(STREAM_OPTIONS) - 1),
)
def test_a_streamed_report_is_the_whole_file_report(chunk_size: int, max_debates: int, which: int) -> None:
    # render_report over chunks (what `debate-kernel report` runs) against render_html of the whole file
    # scored at once: the same page whatever the chunking, detail sections crossing chunk edges included
    options = STREAM_OPTIONS[which]
    whole = whole_result(STREAM_LINES, options)
    want = render_html(whole, source="s", max_debates=max_debates)
    chunks = pipeline.score_chunks(iter(STREAM_LINES), options=options, chunk_size=chunk_size)
    got = render_report(chunks, options, source="s", max_debates=max_debates)
    assert got.page == want
    assert (got.shown, got.debates) == (min(max_debates, len(whole.replayed)), len(whole.replayed))
    assert got.errors == sorted(whole.errors, key=lambda e: e.line)


def test_training_page_keeps_a_whole_last_line_and_scales_huge_values(tmp_path: Path) -> None:
    """Found by review: a whole last metrics line without its newline was dropped silently (1 step drawn
    of 2), and values near ±1.8e308 made the chart's scale inf (a nan point, the others misplaced)."""
    from adapters.report.training import render_training_html

    run = tmp_path / "r1"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step":0,"optim/loss":1.0}\n{"step":1,"optim/loss":0.5}')
    skipped: list[str] = []
    page = render_training_html(run, skipped=skipped)
    assert "2 steps (steps 0–1)" in page and not skipped
    (run / "metrics.jsonl").write_text('{"step":0,"optim/loss":1.0}\n{"step":1,"optim/lo')
    page = render_training_html(run, skipped=skipped)
    assert "1 steps" in page and len(skipped) == 1 and "torn last line" in skipped[0]
    (run / "metrics.jsonl").write_text(
        '{"step":0,"optim/loss":1.7e308}\n{"step":1,"optim/loss":-1.7e308}\n{"step":2,"optim/loss":0.0}\n'
    )
    page = render_training_html(run)
    assert "nan" not in page.split("<h2>Last step</h2>")[0]


def test_a_long_text_is_shown_in_part_and_the_rest_counted() -> None:
    """Issue 36: a report's size follows the debates shown, not the length of their turns."""
    from adapters.report.html import SHOWN_CHARS

    body = "<solution>" + "y" * (3 * SHOWN_CHARS) + "</solution><evaluation>e</evaluation><comparison>N/A"
    body += "</comparison><consensus>NO</consensus><consensus_reason>r</consensus_reason>"
    line = json.dumps({"id": "long", "question": "q" * (2 * SHOWN_CHARS), "num_agents": 2,
                       "turns": [{"agent": 0, "text": body}]})  # fmt: skip
    page = render_html(pipeline.score(read_transcripts([line]).debates), source="long")
    assert page.count(f"{2 * SHOWN_CHARS:,} more characters not shown") == 1  # the solution
    assert f"{len(body) - SHOWN_CHARS:,} more characters not shown" in page  # the raw text
    assert f"{SHOWN_CHARS:,} more characters not shown" in page  # the question
    assert len(page) < 8 * SHOWN_CHARS + 60_000


# --- what FILE is: score results drawn as written, other JSON Lines refused -------------------------


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: Any) -> Path:
    """``score --out`` of the samples with two lines it skips."""
    folder = tmp_path_factory.mktemp("results")
    (folder / "in.jsonl").write_text(sample_text() + "{oops\n[1]\n", encoding="utf-8")
    out = folder / "results.jsonl"
    assert main(["score", str(folder / "in.jsonl"), "--out", str(out), "--quiet"]) == 0
    return out


def _cards(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<div class="card"><b>(.*?)</b><span>(.*?)</span>', page)


def test_report_of_score_results_draws_the_records_as_written(
    results_file: Path, sample_report: Path, tmp_path: Path, capsys: Any
) -> None:
    """Issue 37: `report results.jsonl` draws the rewards, advantages and votes `score` computed: every
    debate's figures are its record's, the summary cards are those of the transcripts' own report, the
    lines `score` skipped are listed, and the page renders in Chromium."""
    out = tmp_path / "results.html"
    assert main(["report", str(results_file), "-o", str(out)]) == 0
    io = capsys.readouterr()
    assert io.err == "" and "score results: 120 of 120 debates" in io.out
    page = out.read_text(encoding="utf-8")
    records = [json.loads(line) for line in results_file.read_text(encoding="utf-8").splitlines()]
    scored = [r for r in records if r["status"] == "scored"]
    got = _collect(page)
    assert list(got.debates) == [r["id"] for r in scored]
    for r in scored:
        d = got.debates[r["id"]]
        assert (d["votes"], d["malformed"], d["end"]) == (
            r["votes"]["total"],
            r["votes"]["malformed"],
            r["end"],
        )
        assert [d["rewards"][i] for i in range(r["num_agents"])] == r["rewards"]
        assert [d["advantages"][i] for i in range(r["num_agents"])] == r["advantages"]
    assert got.skipped == [121, 122]
    transcripts = _cards(sample_report.read_text(encoding="utf-8"))
    assert _cards(page) == [("2", "lines skipped") if c[1] == "lines skipped" else c for c in transcripts]
    assert "the records of <b>score --out</b>, drawn as written" in page
    assert page.count("<svg") == 7 + 2 * len(scored)  # the summary's plots, a matrix and bars a debate
    dom, stderr = _render_in_chromium(out, tmp_path)
    assert 'data-ready="1"' in dom and _console_problems(dom, stderr) == []


def test_report_of_results_on_stdin_and_their_unreadable_lines(
    results_file: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    import io
    import sys

    text = results_file.read_text(encoding="utf-8") + '{"status": "scored", "id": "x"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))
    out = tmp_path / "stdin.html"
    assert main(["report", "-", "-o", str(out), "--max-debates", "3"]) == 0
    io_ = capsys.readouterr()
    assert "<stdin>: line 123 (id 'x'): missing required field 'num_agents' [missing_field]" in io_.err
    assert "score results: 3 of 120 debates" in io_.out
    assert "<b>1</b><span>unreadable lines of this file</span>" in out.read_text(encoding="utf-8")


def test_report_refuses_scoring_options_on_results(results_file: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "r.html"
    argv = ["report", str(results_file), "-o", str(out), "--estimator", "tinker", "--policy", "reference"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "already scored: --policy reference, --estimator tinker would not apply" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (
            ['{"step": 0, "phase": "warm_start", "optim/loss": 1.5}'],
            "looks like a training run's metrics.jsonl (line 1 has step, phase, optim/loss); pass the run's "
            "directory instead: debate-kernel report {dir}",
        ),
        (
            ["", '{"question": "Is 7 prime?", "answer": "yes"}'],
            "looks like a question set, what train --dataset reads (line 2 has question, answer): it holds "
            "no debates; report reads transcripts (debate-transcript/1 JSON Lines: id, question, num_agents, "
            "turns), the results of score --out or a training run's directory",
        ),
        (
            ['{"prompt": "hi", "completion": "there"}'],
            "is not a file report reads (line 1 has prompt, completion)",
        ),
        (["[1, 2, 3]"], "is not a file report reads (line 1 is an array, not an object)"),
    ],
)
def test_report_refuses_other_json_lines_saying_what_they_look_like(
    lines: list[str], words: str, tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"debate-kernel: {path} {words.format(dir=tmp_path)}" in err, err
    assert not out.exists()


# --- issue 37: training curves worth opening, runs overlaid --------------------------------------------


def _synthetic_run(root: Path, name: str, *, steps: int, warm: int, shift: float) -> Path:
    """A run directory as ``train`` writes it (``run.json``, ``metrics.jsonl``): a warm start, then RL
    with an evaluation every 10 steps; the figures wave around (float noise in them, as a run has)."""
    import math

    from adapters.training import checkpoint as ck

    run = root / name
    config = {"model": "tiny", "dataset": "yesno", "warm_start_steps": warm, "steps": steps - warm}
    config |= {"num_agents": 3, "eval_repeats": 6, "eval_questions": 8, "eval_every": 10}
    ck.init_run(run, config, resume=False)
    for step in range(steps):
        rl = step >= warm
        wave = 0.5 + 0.3 * math.sin(step / 3 + shift)
        record: dict[str, Any] = {"step": step, "phase": "rl" if rl else "warm_start"}
        record |= {"optim/loss": 1.5 / (step + 1) + 0.01 * shift, "time/total": 0.2 + wave / 7}
        record |= {"tokens/prompt": 4000 + 100 * step, "tokens/sampled": 900, "async/staleness_mean": 0.5}
        if rl:
            record |= {"env/all/reward/total": wave / 3, "env/all/correct": wave, "optim/entropy": 1 + wave}
            record |= {"advantage/std": wave / 2, "advantage/min": -wave, "advantage/max": wave}
            record |= {"optim/kl_sample_train_v1": wave / 100, "env/all/parse_error": 1 - wave}
            record |= {"env/all/consensus_reached": wave / 2, "time/sample": 0.1, "time/train": 0.05}
        if step == warm - 1 or (rl and (step - warm + 1) % 10 == 0):
            p = round(0.4 + step / (3 * steps) + shift / 10, 2) + 1 / 7 / 1000  # 0.40277780530353385-like
            record |= {
                "eval/correct": p,
                "eval/parse_ok": 0.9,
                "eval/pairwise_reward": 0.4,
                "eval/debates": 144.0,
            }
            for key in ("first_round_majority", "final_majority", "avg@k", "pass@k", "cons@k"):
                record[f"eval/debate/{key}"] = min(p + 0.05, 1.0)
            record |= {"eval/direct/avg@k": p - 0.05, "eval/direct/pass@k": 0.75, "eval/direct/cons@k": 0.5}
        ck.append_metrics(run, record)
    return run


PROBE = """<script>
document.addEventListener('DOMContentLoaded', function(){
  function boxes(svg, sel){return Array.prototype.map.call(svg.querySelectorAll(sel), function(t){
    var b=t.getBBox(); return [b.x, b.y, b.width, b.height, t.textContent];});}
  var out=[];
  document.querySelectorAll('figure[data-chart]').forEach(function(f){
    var svg=f.querySelector('svg'), vb=svg.viewBox.baseVal;
    out.push({chart: f.getAttribute('data-chart'), w: vb.width, h: vb.height,
      x: boxes(svg, '.tick-label.x'), y: boxes(svg, '.tick-label.y'),
      legend: Array.prototype.map.call(svg.querySelectorAll('.legend-entry'), function(g){
        var b=g.getBBox();
        return [g.getAttribute('data-run'), g.getAttribute('data-kind'), b.x+b.width, b.y+b.height];}),
      smoothed: svg.querySelectorAll('polyline.smoothed').length,
      raw: svg.querySelectorAll('polyline.raw').length,
      errorbars: svg.querySelectorAll('line.errorbar').length, marks: svg.querySelectorAll('g.mark').length,
      baselines: Array.prototype.map.call(svg.querySelectorAll('line.baseline'), function(l){
        return l.getAttribute('data-kind');})});
  });
  document.body.setAttribute('data-probe', JSON.stringify(out));
});
</script>"""


def _most_digits(text: str) -> int:
    """The most significant digits of a decimal number in ``text`` (0.40277780530353385: 17).

    >>> _most_digits("0.4028 ± 0.0415, 2,345.7 and 0.007188")
    5
    """
    numbers = re.findall(r"\d[\d,]*\.\d+", text)
    return max((len(n.replace(",", "").replace(".", "").lstrip("0")) for n in numbers), default=0)


def _probe(page: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """Each chart of a training page as Chromium lays it out: tick labels and legend entries with their
    boxes, and counts of its lines, error bars and baselines."""
    import html as html_lib

    probed = tmp_path / ("probed-" + page.name)
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    dom, stderr = _render_in_chromium(probed, tmp_path)
    assert _console_problems(dom, stderr) == []
    m = re.search(r'data-probe="([^"]*)"', dom)
    assert m is not None, "the probe did not run"
    charts: list[dict[str, Any]] = json.loads(html_lib.unescape(m.group(1)))
    return charts


def test_overlaid_training_runs_have_readable_axes_legends_baselines_and_errors(
    tmp_path: Path, capsys: Any
) -> None:
    from adapters.report.training import CURVES

    a = _synthetic_run(tmp_path / "runs", "a", steps=60, warm=10, shift=0.0)
    b = _synthetic_run(tmp_path / "other", "b", steps=45, warm=5, shift=1.0)
    out = tmp_path / "compare.html"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    assert f"training curves of {a}, {b}" in capsys.readouterr().out
    charts = _probe(out, tmp_path)
    assert [c["chart"] for c in charts] == [title for title, _ in CURVES]
    correctness = {"Correct (training debates)", "Evaluation vs fixed opponents: correct, parse-success"}
    correctness |= {title for title, _ in CURVES if title.startswith(("Did debate", "Debates over"))}
    drawn = [c for c in charts if c["x"]]  # the staleness chart is 0.5 throughout: still drawn
    assert len(drawn) == len(CURVES)
    for c in drawn:
        name = c["chart"]
        assert len(c["x"]) >= 4 and len(c["y"]) >= 3, name
        for axis in ("x", "y"):  # labels inside the chart, none over another
            boxes = sorted(c[axis], key=lambda t: t[0] if axis == "x" else t[1])
            assert all(0 <= t[0] and t[0] + t[2] <= c["w"] and 0 <= t[1] <= c["h"] for t in boxes), name
            for p, q in itertools.pairwise(boxes):
                assert (p[0] + p[2] <= q[0]) if axis == "x" else (p[1] + p[3] <= q[1]), (name, p, q)
        assert all(_most_digits(t[4]) <= 3 for t in c["x"] + c["y"]), name
        runs = [entry[0] for entry in c["legend"] if entry[1] is None]
        assert {"a", "b"} <= set(runs) and all(e[2] <= c["w"] and e[3] <= c["h"] for e in c["legend"]), name
        assert sorted(c["baselines"]) == (["chance", "majority"] if name in correctness else []), name
        assert c["marks"] == 2, name  # where RL starts, in each run
        if name.startswith(("Evaluation", "Did debate", "Debates over")):  # points, not smoothed
            assert (c["errorbars"] > 0) == (name in correctness) and c["smoothed"] == 0, name
        elif name.startswith(("Reward", "Entropy", "Correct")):
            assert c["smoothed"] >= 2 and c["raw"] >= 2, name  # each run raw, and smoothed over it
    page = out.read_text(encoding="utf-8")
    tables = page.split("<h2>Evaluations</h2>")[1]
    assert "0.4501 ± 0.0415" in tables and "n 144" in tables  # √(p(1 − p)/144), p = 0.45014285…
    assert _most_digits(re.sub(r"<[^>]*>", " ", tables)) <= 5  # formatted, no raw floats
    assert "majority answer &#x27;yes&#x27; 0.5" in page and "chance 0.5 (1 of 2 answers)" in page


def test_overlay_takes_run_directories_only(tmp_path: Path, capsys: Any) -> None:
    run = _synthetic_run(tmp_path, "a", steps=3, warm=1, shift=0.0)
    other = tmp_path / "debates.jsonl"
    other.write_text(sample_text(), encoding="utf-8")
    assert main(["report", str(run), str(other), "-o", str(tmp_path / "r.html")]) == 2
    assert f"{other}: not a directory; report overlays training runs" in capsys.readouterr().err
    page = tmp_path / "one.html"
    assert main(["report", str(run), "-o", str(page)]) == 0
    assert "<h1>Training run a</h1>" in page.read_text(encoding="utf-8")


def test_a_long_run_draws_a_few_points_a_pixel_column_and_keeps_its_extremes() -> None:
    from adapters.report.training import ChartLine, svg_line_chart

    n = 20_000
    values: list[float | None] = [0.0] * n
    values[12_345], values[777] = 1.0, -1.0  # one step each: kept however many share their pixel
    svg = svg_line_chart("t", [ChartLine("x", "#000", range(n), values)])
    (points,) = re.findall(r'<polyline class="raw" [^>]*points="([^"]*)"', svg)
    ys = sorted({float(p.split(",")[1]) for p in points.split()})
    assert len(points.split()) <= 4 * 480 and len(ys) == 3  # the top, the zero line and the bottom
    ET.fromstring(svg)
