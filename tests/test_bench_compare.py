"""``python -m benchmarks compare``'s plumbing: its command line, the figures it reads from a benchmark's
output and the paired ratios it prints. Nothing here checks out or installs a revision."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_compare as compare
from benchmarks.__main__ import main as benchmarks_main

KNOWN = ["advantages", "parse", "rewards"]


def test_the_command_line_is_read() -> None:
    options = compare.parse_args(["abc123", "parse", "advantages", "parse", "--rounds", "5"], KNOWN)
    assert options.rev == "abc123" and options.names == ("parse", "advantages") and options.rounds == 5
    assert not options.quick and options.figures is None and options.extra == ()
    assert options.benchmarks_from == "rev"
    assert compare.parse_args(["abc", "--benchmarks-from", "tree"], KNOWN).benchmarks_from == "tree"
    options = compare.parse_args(
        ["HEAD~2", "--quick", "--figures", "per_s$", "--", "--heap", "steady"], KNOWN
    )
    assert options.names == () and options.quick and options.extra == ("--heap", "steady")
    assert options.figures is not None and options.figures.search("jax_rows_per_s")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: rev"),
        (["--rounds", "2"], "the following arguments are required: rev"),
        (["abc", "nope"], "unknown benchmark 'nope'; known: advantages, parse, rewards"),
        (["abc", "suite"], "'suite' cannot be compared"),
        (["abc", "compare"], "'compare' cannot be compared"),
        (["abc", "--rounds", "0"], "--rounds must be at least 1, got 0"),
        (["abc", "--rounds", "x"], "invalid int value"),
        (["abc", "--heap", "steady"], "unknown arguments --heap steady (benchmark arguments go after --)"),
        (["abc", "--figures", "("], "--figures is not a regular expression"),
        (["abc", "--benchmarks-from", "old"], "invalid choice: 'old'"),
    ],
)
def test_a_bad_command_line_is_named(argv: list[str], message: str) -> None:
    with pytest.raises(compare.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compare.parse_args(argv, KNOWN)


def test_a_bad_command_line_exits_2_before_anything_is_made(capsys: pytest.CaptureFixture[str]) -> None:
    assert compare.main(["abc", "nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err
    assert compare.main(["no-such-revision-at-all", "parse"]) == 2  # git rev-parse only
    assert "names no commit" in capsys.readouterr().err
    assert benchmarks_main(["compare"]) == 2  # through the benchmarks command


def test_figures_are_read_from_the_json_lines() -> None:
    out = "table\n{not json}\n" + json.dumps(
        {"a": 1, "b": {"c": 2.5, "d": "x"}, "e": True, "f": float("inf")}
    )
    assert compare.figures_of(out) == {"a": 1.0, "b.c": 2.5}
    two = "\n".join(json.dumps({"heap": h, "t_ms": t}) for h, t in (("steady", 3.0), ("cold", 4.0)))
    assert compare.figures_of(two) == {"0.t_ms": 3.0, "1.t_ms": 4.0}
    assert compare.figures_of("no figures\n[1, 2]\n") == {}


def test_ratios_are_paired_round_by_round() -> None:
    old = [{"x_per_s": 100.0, "t_ms": 10.0, "gone": 1.0}, {"x_per_s": 50.0, "t_ms": 20.0, "zero": 0.0}]
    new = [{"x_per_s": 150.0, "t_ms": 5.0, "added": 1.0}, {"x_per_s": 100.0, "t_ms": 10.0, "zero": 3.0}]
    assert compare.paired_ratios(old, new) == {"t_ms": [0.5, 0.5], "x_per_s": [1.5, 2.0]}
    summary = compare.summarize(old, new)
    assert summary["x_per_s"] == compare.Summary(
        old=75.0, new=125.0, median=1.75, low=1.5, high=2.0, rounds=2
    )
    assert summary["t_ms"].median == 0.5 and summary.keys() == {"t_ms", "x_per_s"}
    with pytest.raises(ValueError, match="shorter"):  # rounds are paired: both sides ran each round
        compare.paired_ratios(old, new[:1])


@pytest.mark.parametrize(
    ("key", "way"),
    [
        ("ragged.jax_jit_rows_per_s", "higher"),
        ("0.blocks.numpy_vs_peer", "higher"),
        ("parsed.columns_x_ref", "higher"),
        ("parsed.x_ref", "higher"),
        ("ragged.jax_compile_s", "lower"),
        ("parse_ms", "lower"),
        ("peak_rss_mb", "lower"),
        ("realistic.mb_per_s.ours robust", "higher"),
        ("640x4.default.mtok_s", "higher"),  # million tokens a second, not seconds
        ("train_lora_tok_s", "higher"),
        ("realistic.ratio_vs_peer_by_size.< 6 KB.ours robust", "higher"),
        ("ragged.preset_vectorized_vs_peer_max_abs_diff", ""),
        ("short.bytes_mean", ""),
        ("rows", ""),
        ("groups_per_second_note", ""),
    ],
)
def test_a_figures_name_says_which_way_is_better(key: str, way: str) -> None:
    assert compare.better(key) == way
