"""Every renderer, on hand-built results: terminal, Markdown, results JSON, JUnit, pytest-benchmark, plots."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.parity import GreedyOutput, judge
from pytest_llmperf.render import junit, markdown, results_json, terminal
from tests.builders import measured, results, speedup


def strict_json(data: object) -> object:
    """A round trip that refuses NaN and infinities, as strict parsers do."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in JSON")

    return json.loads(json.dumps(data), parse_constant=refuse)


@pytest.fixture
def mixed():
    points = [
        measured(
            "sim-spec", 1, [110.0, 112.0, 114.0], outcome=Outcome.PASS, golden=110.0, accept=2.5
        ),
        measured(
            "sim-base",
            250,
            [60.0, 61.0, 62.0],
            outcome=Outcome.FAIL,
            golden=100.0,
            message="sim-base C=250: 61.0 tok/s vs golden 100.0 (−39.0 %, p=0.001, n=3 vs 10) — FAIL",
        ),
        measured("sim-base", 1, [100.0, 102.0, 104.0], outcome=Outcome.PASS, golden=100.0),
        measured(
            "sim-spec",
            250,
            [30.0, 31.0, 32.0],
            problems=("client-bound: only 3.0 of C=4 in flight",),
        ),
    ]
    return results(
        points,
        [speedup("sim-spec", "sim-base", 1, [1.1, 1.1, 1.1], outcome=Outcome.PASS)],
        golden_notes=["baselines/sim-base/sim.json: recorded x"],
        unused_goldens=["baselines/sim-base/sim.json: t.py::test_gone[C=5]"],
    )


def test_table_rows_are_sorted_and_show_figures_golden_delta_and_verdict(mixed):
    lines = terminal.table_lines(mixed.measured)
    assert lines[0].split()[:3] == ["profile", "test", "C"]
    assert set(lines[1]) == {"-", " "}
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[2]) for r in rows] == [
        ("sim-base", "1"),
        ("sim-base", "250"),
        ("sim-spec", "1"),
        ("sim-spec", "250"),
    ]
    base1 = lines[2]
    assert (
        "102.0 ± 2.0 (3)" in base1
        and "100.0" in base1
        and "+2.0" in base1
        and base1.endswith("PASS")
    )
    assert "\u221239.0" in lines[3] and lines[3].endswith("FAIL")  # typographic minus
    assert lines[4].split()[-2:] == ["2.50", "PASS"]  # accept length, verdict
    assert lines[5].endswith("INVALID") and " - " in lines[5]  # no golden: "-"
    assert len({len(line) for line in lines[:2]}) == 1  # header and rule are the same width


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([Outcome.PASS, Outcome.PASS], "2 PASS"),
        ([Outcome.PASS, Outcome.FAIL, None], "1 FAIL, 1 PASS, 1 measured"),
        (
            [Outcome.RECORDED, Outcome.WARN, Outcome.IMPROVED, Outcome.MISSING],
            "1 MISSING, 1 WARN, 1 IMPROVED, 1 RECORDED",
        ),
    ],
)
def test_counts_line_orders_outcomes_by_urgency(outcomes, expected):
    points = [measured("p", c, [100.0], outcome=o) for c, o in enumerate(outcomes, start=1)]
    assert terminal.counts_line(results(points).counts()) == expected


def test_verdict_lines_say_what_matters_in_colour_and_what_to_do(mixed):
    lines = terminal.verdict_lines(mixed)
    texts = [text for text, _ in lines]
    assert texts[0] == "llmperf verdicts: 1 FAIL, 1 INVALID, 3 PASS"
    assert (f"FAIL output_throughput {mixed.points[1].message}", "red") in lines
    assert (
        "INVALID output_throughput sim-spec C=250: run 1: client-bound: only 3.0 of C=4 in flight",
        "red",
    ) in lines
    assert ("golden: baselines/sim-base/sim.json: recorded x", None) in lines
    unused = (
        "1 golden point(s) were not used by any test in this run: a test renamed, moved or removed?"
    )
    assert (f"{unused} (-v lists them).", "yellow") in lines
    assert (f"{unused}:", "yellow") in terminal.verdict_lines(mixed, verbose=True)
    # Passing points get no line of their own
    assert not any(text.startswith("PASS") for text in texts)


@pytest.mark.parametrize(
    ("outcome", "hint"),
    [
        (Outcome.MISSING, "Re-run with --perf-update to record missing baselines."),
        (
            Outcome.IMPROVED,
            "1 point(s) improved beyond the margin: refresh their goldens with --perf-update and review "
            "the diff.",
        ),
    ],
)
def test_verdict_lines_end_with_the_fix(outcome, hint):
    point = measured("p", 1, [100.0], outcome=outcome, message="p C=1: something")
    assert hint in [text for text, _ in terminal.verdict_lines(results([point]))]


def test_speculative_lines_show_speedup_per_level_gate_and_advice(mixed):
    lines = terminal.speculative_lines(mixed)
    assert lines[0] == "sim-spec vs sim-base (output_throughput), same run:"
    level1 = next(line for line in lines if line.split()[:1] == ["1"])
    # 112 / 102, gated PASS
    assert "1.098×" in level1 and "faster" in level1
    # The gate; no engine channel, no accept length checked, no parity, no accuracy asked.
    assert level1.split()[-5:] == ["PASS", "-", "-", "-", "-"]
    level250 = next(line for line in lines if line.split()[:1] == ["250"])
    assert "slower" in level250 and level250.split()[-5:] == ["-"] * 5  # no gate at 250
    assert "crossover at C = 250" in lines[-2] and "keep speculation up to C = 1" in lines[-2]
    assert lines[-1].startswith("  (speedup: speculative ÷ base") and "gate: " in lines[-1]


def test_markdown_has_counts_noteworthy_rows_one_table_per_test_and_the_speculative_section(mixed):
    text = markdown.render(mixed)
    assert "**Verdicts:** 1 FAIL, 1 INVALID, 3 PASS" in text
    assert "| **FAIL** | sim-base C=250 |" in text
    assert "| **INVALID** | sim-spec C=250 | run 1: client-bound" in text
    assert "## output_throughput" in text
    assert "| sim-base | 1 | output_tok_s | 102.0 ± 2.0 tok/s (3) | 100.0 | +2.0 |" in text
    assert (
        "## Speculative decoding: sim-spec vs sim-base (same run)" in text
        and "**Advice:** crossover" in text
    )
    assert "## Goldens written" in text


def test_markdown_escapes_pipes_and_newlines_in_cells():
    point = measured("p", 1, [100.0], outcome=Outcome.WARN, message="a | b\nc")
    assert "| **WARN** | p C=1 | a \\| b<br>c |" in markdown.render(results([point]))


def test_results_json_is_strict_json_with_points_speculative_gate_and_fingerprints(mixed):
    point = measured("p", 1, [100.0])
    point.runs[0].ttft_s["p50"] = math.nan  # a figure no request had
    data = strict_json(
        results_json.render(results([*mixed.measured, point], mixed.speedups), created="now")
    )
    assert data["schema"] == 1 and data["created"] == "now" and data["run_dir"] == "/tmp/run"
    assert data["fingerprint"]["hard"]["sim-base"] == {"hardware": {"key": "sim"}}
    by_key = {(p["profile"], p["concurrency"]): p for p in data["points"]}
    assert by_key[("sim-base", 250)]["verdict"] == "FAIL" and by_key[("sim-base", 250)][
        "values"
    ] == [60.0, 61.0, 62.0]
    assert (
        by_key[("sim-spec", 250)]["verdict"] == "INVALID" and by_key[("sim-spec", 250)]["problems"]
    )
    assert by_key[("p", 1)]["verdict"] is None  # measured, never checked
    assert by_key[("p", 1)]["runs"][0]["ttft_s"]["p50"] is None
    (spec,) = data["speculative"]
    assert spec["crossover_concurrency"] == 250 and spec["recommended_max_speculative_batch"] == 1
    assert spec["gate"]["1"]["verdict"] == "PASS" and spec["gate"]["1"]["values"] == [1.1, 1.1, 1.1]


def test_junit_properties_per_point():
    point = measured("p", 4, [100.0, 110.0], outcome=Outcome.WARN, golden=120.0)
    props = dict(junit.properties(point))
    assert props == {
        "llmperf_point": "p C=4",
        "llmperf_metric": "output_tok_s",
        "llmperf_measured": "105",
        "llmperf_golden": "120",
        "llmperf_ratio": "0.875",
        "llmperf_verdict": "WARN",
        "llmperf_p_value": "0.5",
    }
    assert dict(junit.properties(measured("p", 1, [100.0])))["llmperf_golden"] == ""


def test_benchmark_json_rounds_are_seconds_per_output_token():
    pytest.importorskip("pytest_benchmark")
    from pytest_llmperf.render import benchmark_json

    data = strict_json(
        benchmark_json.render(results([measured("p", 2, [100.0, 200.0], outcome=Outcome.PASS)]))
    )
    (bench,) = data["benchmarks"]
    assert bench["name"] == "test_output_throughput[p-C2]" and bench["group"] == "p"
    assert bench["stats"]["data"] == pytest.approx([0.01, 0.005])
    assert bench["stats"]["ops"] == pytest.approx(1 / 0.0075)  # the runs' harmonic-mean tok/s
    assert bench["extra_info"]["verdict"] == "PASS" and bench["options"]["min_requests"] == 16
    assert data["machine_info"]["llmperf"] == {"p": "sim"}


def test_plots_are_png_files(tmp_path, mixed):
    from pytest_llmperf.render import plots

    if not plots.available():
        pytest.skip("matplotlib is not installed")
    valid = [p for p in mixed.measured if not p.problems]
    paths = [
        plots.throughput(valid, {"sim-base": 0.15}, tmp_path / "t.png"),
        plots.latency(valid, tmp_path / "l.png"),
        plots.speedup(mixed.analyses, tmp_path / "s.png"),
    ]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_points_without_a_valid_run_render_everywhere_and_the_json_is_strict(tmp_path):
    """A point whose every request failed (NaN figures) and one never measured (no runs) are
    INVALID in the table, null in the JSON, absent from the plots, and break nothing."""
    from pytest_llmperf.render import benchmark_json
    from pytest_llmperf.render.write import report_dir

    dead = measured("sim-base", 4, [math.nan, math.nan], problems=("4 of 4 requests failed",))
    never = measured("sim-base", 8, [])
    never.notes.append("C=8 needs about 264 open files")
    fine = measured("sim-base", 1, [100.0, 101.0])
    out = results([dead, never, fine])

    lines = terminal.table_lines(out.points)
    assert sum("INVALID" in line for line in lines) == 2
    assert not any("nan" in line for line in lines)

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in strict JSON")

    for data in (results_json.render(out, created="now"), benchmark_json.render(out)):
        json.loads(json.dumps(data, allow_nan=False), parse_constant=refuse)
    assert "INVALID" in markdown.render(out)
    notes = report_dir(out, tmp_path / "report")
    assert (tmp_path / "report" / "summary.md").exists(), notes


def test_every_results_json_field_is_documented(mixed):
    from pytest_llmperf.render import results_json

    data = results_json.render(mixed, created="now")
    assert set(data) == set(results_json.TOP_FIELDS)
    for point in data["points"]:
        assert set(point) <= set(results_json.POINT_FIELDS), set(point) - set(
            results_json.POINT_FIELDS
        )
        for run in point["runs"]:
            assert set(run) <= set(results_json.RUN_FIELDS), set(run) - set(results_json.RUN_FIELDS)


def test_every_profile_field_and_option_has_its_reference_text():
    from pytest_llmperf import profile_fields, profiles, settings

    entries = [s for _, s in profiles.SETTINGS.values()]
    assert entries and all(s.help and s.group in profile_fields.GROUPS for s in entries)
    assert all(o.help for o in settings.OPTIONS) and all(f.help for f in settings.FLAGS)


def pair_parity(identical: list[bool], accuracy: Outcome | None = None):
    base = [GreedyOutput("p", (1, 2), (" a", " b"), (2.0, 2.0)) for _ in identical]
    spec = [GreedyOutput("p", (1, 2) if same else (1, 9), (" a", " b"), (2.0, 2.0))
            for same in identical]  # fmt: skip
    parity = judge("sim-spec", "sim-base", "t.py::test_greedy_parity", base, spec, tie_gap=0.1)
    if accuracy is not None:
        parity.accuracy, parity.accuracy_outcome = f"accuracy line — {accuracy.value}", accuracy
        if accuracy is Outcome.FAIL:
            parity.outcome = Outcome.FAIL
    return parity


@pytest.mark.parametrize(
    ("identical", "accuracy", "cells"),
    [
        ([True] * 8, Outcome.PASS, ["PASS", "8/8", "PASS"]),
        ([True] * 6 + [False] * 2, None, ["FAIL", "6/8", "-"]),
        ([True] * 8, Outcome.FAIL, ["PASS", "8/8", "FAIL"]),  # the accuracy column's FAIL
    ],
)
def test_the_speculative_table_carries_the_pairs_parity_and_accuracy(
    mixed, identical, accuracy, cells
):
    mixed.parities.append(pair_parity(identical, accuracy))
    lines = terminal.speculative_lines(mixed)
    assert lines[1].split()[-2:] == ["parity", "accuracy"]
    level1 = next(line for line in lines if line.split()[:1] == ["1"])
    assert level1.split()[-3:] == cells


def test_accept_length_is_shown_per_category_where_the_workload_names_them():
    point = measured("sim-spec", 10, [100.0, 110.0], accept=2.5)
    point.runs = [
        dataclasses.replace(point.runs[0], accept_length_by_category={"code": 3.5, "chat": 2.0}),
        dataclasses.replace(point.runs[1], accept_length_by_category={"code": 3.0, "chat": 2.0}),
    ]
    plain = measured("sim-spec", 1, [100.0], accept=2.5)  # no categories: no line
    lines = terminal.accept_category_lines(results([plain, point]))
    assert lines == ["sim-spec accept length by category (tok/step): C=10: chat 2.00, code 3.25"]
