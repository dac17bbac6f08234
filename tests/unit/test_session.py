"""The run's state on hand-built points: golden paths and queue, unused goldens, analyses, results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.golden.store import PendingPoint, PendingRun
from pytest_llmperf.profiles import Profile
from pytest_llmperf.session import LLMPerfSession
from pytest_llmperf.settings import Mode, Settings
from tests.builders import golden_file, measured, speedup

SPEC_ARGS = ("--speculative-algorithm", "EAGLE3")


def settings(tmp_path: Path, **kwargs: object) -> Settings:
    # Type: ignore[arg-type]
    return Settings(
        profiles_file=tmp_path / "profiles.toml",
        run_dir_root=tmp_path / "runs",
        baseline_dir=tmp_path / "baselines",
        **kwargs,
    )


@pytest.fixture
def session(tmp_path):
    base = Profile("sim-base", tmp_path / "profiles.toml")
    spec = Profile(
        "sim-spec",
        tmp_path / "profiles.toml",
        args=SPEC_ARGS,
        speculative=True,
        base_profile="sim-base",
    )
    state = LLMPerfSession(settings(tmp_path), None, [base, spec], tmp_path / "runs" / "1")
    for name in ("sim-base", "sim-spec"):
        state.fingerprints[name] = Fingerprint(
            {"hardware": {"key": "sim"}}, {"server_version": "0.5.23"}
        )
    return state


def test_golden_files_live_under_profile_and_hardware(session, tmp_path):
    assert session.golden_file("sim-base") == tmp_path / "baselines" / "sim-base" / "sim.json"
    assert session.golden("sim-base") is None  # no file yet: MISSING, not an error


def test_queueing_a_point_twice_keeps_the_newest(session):
    first = PendingPoint("k", "t", 1, "output_tok_s", [], "--perf-update", False)
    second = PendingPoint("k", "t", 1, "output_tok_s", [], "again", False)
    path = session.queue_golden(first, "sim-base")
    assert session.queue_golden(second, "sim-base") == path
    assert session.pending[path].points == [second]
    assert session.pending[path].fingerprint["hard"] == {"hardware": {"key": "sim"}}


def test_unused_goldens_are_the_recorded_points_no_test_measured(session):
    point = measured("sim-base", 1, [100.0])
    session.points.append(point)
    session.servers["sim-base"] = object()  # type: ignore[assignment]
    session.goldens[session.golden_file("sim-base")] = golden_file(
        {point.key: [1.0], "t.py::test_gone[C=5]": [1.0]}
    )
    assert session.unused_goldens() == [f"{session.golden_file('sim-base')}: t.py::test_gone[C=5]"]


def test_analyses_pair_each_speculative_profile_with_its_base(session):
    session.points += [measured("sim-base", c, [100.0, 101.0]) for c in (1, 250)]
    session.points += [
        measured("sim-spec", 1, [110.0, 111.0]),
        measured("sim-spec", 250, [50.0, 51.0]),
    ]
    (analysis,) = session.analyses()
    assert (analysis.profile, analysis.base_profile, analysis.sglang_version) == (
        "sim-spec",
        "sim-base",
        "0.5.23",
    )
    assert [p.concurrency for p in analysis.points] == [1, 250]
    assert analysis.crossover is not None and analysis.crossover.concurrency == 250


@pytest.mark.parametrize(
    ("whole_suite", "update", "unused_shown"),
    [(True, False, True), (False, False, False), (True, True, False)],
)
def test_results_report_unused_goldens_only_for_a_whole_suite_that_gates(
    session, whole_suite, update, unused_shown
):
    mode = Mode.RECORD if update else Mode.GATE
    session.settings = settings(Path(session.run_dir).parents[1], mode=mode)
    point = measured("sim-base", 1, [100.0], outcome=Outcome.PASS)
    gate = speedup("sim-spec", "sim-base", 1, [1.1])
    session.points += [point, gate]
    session.servers["sim-base"] = type("Handle", (), {"describe": lambda self: {"engine": "sim"}})()
    session.goldens[session.golden_file("sim-base")] = golden_file({"t.py::test_gone[C=5]": [1.0]})
    results = session.results(whole_suite=whole_suite)
    assert bool(results.unused_goldens) is unused_shown
    assert results.points == [point, gate] and results.measured == [point]
    assert results.speedups == [gate]
    assert results.servers == {"sim-base": {"engine": "sim"}}
    assert (
        results.profiles["sim-spec"].fail_margin == 0.15
        and results.hardware_key("sim-base") == "sim"
    )


def test_finish_writes_queued_goldens_and_the_results_json(session, tmp_path):
    session.settings = settings(tmp_path, json_path=tmp_path / "out" / "results.json")
    point = measured("sim-base", 1, [100.0, 102.0])
    session.points.append(point)
    runs = [PendingRun(100.0, "l", 10, 640, None)]
    session.queue_golden(
        PendingPoint(point.key, point.test, 1, "output_tok_s", runs, "--perf-update", False),
        "sim-base",
    )
    session.finish()
    assert session.golden_notes and "recorded" in session.golden_notes[0]
    assert (
        json.loads(session.golden_file("sim-base").read_text())["points"][point.key]["summary"][
            "mean"
        ]
        == 100.0
    )
    assert json.loads((tmp_path / "out" / "results.json").read_text())["points"][0]["values"] == [
        100.0,
        102.0,
    ]


def test_the_time_left_counts_the_open_loop_and_capacity_until_each_starts(session):
    from pytest_llmperf.plan import PlannedLevel

    session.plan = [
        PlannedLevel("sim-base", 1, 2, 32, 2048, 3.0),
        PlannedLevel("sim-base", 4, 2, 32, 2048, None),
    ]
    session.plan_beside = {("rate", "sim-base", 5.0): 10.0, ("capacity", "sim-base", 0.0): 20.0}
    assert session.planned_seconds() == (33.0, 1)
    session.beside_started("rate", "sim-base", 5)  # the rate as the test passes it
    assert session.planned_seconds() == (23.0, 1)
    session.beside_started("capacity", "sim-base")
    session.level_started("sim-base", 1)
    assert session.planned_seconds() == (0.0, 1)
