"""Startup as a gated figure, end to end on the simulated engine: each launch of a recording
is one value of the golden, keyed by the profile's kind (warm, cold); a later launch of the
same server passes; one that takes far longer to load FAILs; a cold profile records its
session's first launch only."""

from __future__ import annotations

import json

from tests.helpers import project_with

PROFILE = """
default = ["sim"]
[profiles.sim]
engine = "sim"
model = "sim/startup"
args = ["--sim-speed", "20", "--sim-load-time", "{load}"]
concurrency = [1]
startup = "{kind}"
ready_timeout_s = 60
shutdown_timeout_s = 5
"""
SUITE = """
def test_startup(llmperf, llm_profile):
    llmperf.check_startup()
"""


def startup_project(pytester, load: float, kind: str = "warm") -> None:
    project_with(pytester, PROFILE.format(load=load, kind=kind), SUITE)


def test_startup_records_each_launch_then_passes_and_a_slow_load_fails(pytester):
    startup_project(pytester, 1.0)
    # Two launches, one value each.
    pytester.runpytest("--perf-update", "--perf-update-launches", "2").assert_outcomes(passed=2)
    golden = json.loads((pytester.path / "baselines" / "sim" / "sim.json").read_text())
    values = [run["value"] for run in golden["points"]["test_perf.py::test_startup[warm]"]["runs"]]
    assert len(values) == 2 and all(1.0 < v < 10.0 for v in values), values  # load + Python

    same = pytester.runpytest("--perf-json", "out.json", "--perf-report", "report")
    same.assert_outcomes(passed=1)
    same.stdout.fnmatch_lines(["sim startup (warm): * s vs golden * (*, n=1 vs 2) \u2014 *"])
    (startup,) = json.loads((pytester.path / "out.json").read_text())["startup"]
    assert startup["kind"] == "warm" and startup["verdict"] == "PASS", startup
    summary = (pytester.path / "report" / "summary.md").read_text()
    assert f"## Startup (launch to ready)\n\n- {startup['message']}" in summary

    # The same server, loading for 6 s more (its flags and fingerprint unchanged).
    startup_project(pytester, 7.0)
    slow = pytester.runpytest("--perf-json", "out.json")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(
        [
            "*sim startup (warm): * s vs golden * (+*%, slower, p=*, n=1 vs 2) \u2014 FAIL: "
            "significantly slower by more than the 30 % fail margin"
        ]
    )
    (startup,) = json.loads((pytester.path / "out.json").read_text())["startup"]
    assert startup["verdict"] == "FAIL" and startup["seconds"] > 7.0, startup
    # A cold golden is another key: the warm one does not judge it.
    startup_project(pytester, 1.0, kind="cold")
    pytester.runpytest().stdout.fnmatch_lines(
        ["*sim startup (cold): no golden baseline in *for test_perf.py::test_startup?cold?."]
    )


def test_a_cold_profile_records_its_first_launch_only(pytester):
    startup_project(pytester, 0.2, kind="cold")
    result = pytester.runpytest("--perf-update", "--perf-update-launches", "2", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*a recording's later launch is not a cold start*"])
    golden = json.loads((pytester.path / "baselines" / "sim" / "sim.json").read_text())
    assert len(golden["points"]["test_perf.py::test_startup[cold]"]["runs"]) == 1
