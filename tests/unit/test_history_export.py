"""The history in other tools' formats, and the CLI's listing, from a synthetic store."""

from __future__ import annotations

import csv
import io
import json

import pytest

from pytest_llmperf.__main__ import main
from pytest_llmperf.history import export, series
from tests.history_data import Nights, build_store, run_id


@pytest.fixture
def store(tmp_path):
    return build_store(
        str(tmp_path / "h.db"), Nights(nights=8, points=2, step_at=4, step=-0.1, seed=2)
    )


def test_otava_csv_has_a_row_per_run_and_a_column_per_series(store):
    text = export.export("otava", series.build(store.series_rows()), store.runs(), "")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:2] == ["time", "commit"] and len(rows[0]) == 4
    assert len(rows) == 9
    assert rows[1][0].startswith("2026-05-28T") and len(rows[1][1]) == 40
    assert 900 < float(rows[1][2]) < 1100 and float(rows[8][2]) < float(rows[1][2]) * 0.95


def test_bmf_and_github_action_benchmark_write_one_run(store):
    all_series = series.build(store.series_rows())
    bmf = json.loads(export.export("bmf", all_series, store.runs(), run_id(7)))
    (bench, measures), *_ = bmf.items()
    assert bench.startswith("sim-baseline perf_suites/") and set(measures) == {"output_tok_s"}
    value = measures["output_tok_s"]
    assert value["lower_value"] <= value["value"] <= value["upper_value"]
    gab = json.loads(export.export("github-action-benchmark", all_series, store.runs(), run_id(7)))
    assert len(gab) == 2 and {e["unit"] for e in gab} == {"tok/s"}
    assert all(e["name"].endswith("output_tok_s") and e["value"] > 0 for e in gab)


def test_the_cli_lists_runs_and_open_change_points_as_json(store, capsys):
    assert main(["history", store.where, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in data["runs"]] == [run_id(i) for i in range(8)]
    assert all(r["complete"] and r["points"] == 2 for r in data["runs"])
    (first, _second) = data["open_change_points"]
    assert first["first_bad_run"] == run_id(4) and first["change"] == pytest.approx(-0.1, abs=0.02)
    # The command that re-measures its commit range, one commit at a time.
    good, bad = first["last_good_commit"][:12], first["first_bad_commit"][:12]
    level = first["point"].split("[C=")[1].split("]")[0]
    assert first["bisect"] == (
        f"python -m pytest_llmperf bisect --good {good} --bad {bad} -- perf_suites "
        f"--llm-profile={first['profile']} -k test_output_throughput --llm-concurrency {level}"
    )


def test_the_cli_compares_two_runs_point_by_point(store, capsys):
    assert main(["history", store.where, "--compare", run_id(0), "latest"]) == 0
    out = capsys.readouterr().out
    assert "−" in out or "-1" in out
    assert out.count("worse") == 2  # both points, 10 % down, significant


def test_the_cli_export_and_errors(store, tmp_path, capsys):
    assert main(["history", store.where, "--export", "otava", str(tmp_path / "o.csv")]) == 0
    assert (tmp_path / "o.csv").read_text().startswith("time,commit,")
    assert main(["history", store.where, "--export", "yaml", str(tmp_path / "x")]) == 2
    assert main(["history", store.where, "--compare", "nope", "latest"]) == 2
    err = capsys.readouterr().err
    assert "choose one of otava, bmf, github-action-benchmark" in err
    assert "no run with an id starting 'nope'" in err


def test_the_cli_does_not_create_a_store_it_was_asked_to_read(tmp_path, capsys):
    assert main(["history", str(tmp_path / "typo.db")]) == 2
    assert not (tmp_path / "typo.db").exists()
    assert "no history store at" in capsys.readouterr().err
