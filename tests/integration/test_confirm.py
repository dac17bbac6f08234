"""Confirming by relaunching, end to end on the simulated engine: a night whose launches leave a
point undecided measures it again on a fresh launch after the profile's tests and judges it over
tonight's launches. The server is a wrapper that starts the simulated engine slower on the
launches a file names (its speed knob stays out of the fingerprint, as a real regression's
cause would), so which launch is slow is known exactly."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from tests.helpers import FAST_SIM_ARGS, THROUGHPUT_SUITE, processes_with

WRAPPER = """
import os
import pathlib
import sys

here = pathlib.Path(__file__).parent
counter = here / "launches.txt"
launch = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(launch))
speeds = dict(line.split() for line in (here / "speeds.txt").read_text().splitlines() if line)
speed = speeds.get(str(launch), "1")
os.execv(sys.executable, [sys.executable, "-m", "pytest_llmperf.sim", *sys.argv[1:],
                          "--sim-throughput-multiplier", speed])
"""


#: The profile's own confirm_launches (the tests' default is none: tests/conftest.py).
CONFIRM = ("--perf-confirm-launches", "profile")


def project(pytester: pytest.Pytester, speeds: dict[int, float], **fields: object) -> None:
    """A profile served by the wrapper; ``speeds``: launch number → throughput multiplier."""
    pytester.makepyfile(wrapper=WRAPPER)
    (pytester.path / "speeds.txt").write_text("".join(f"{k} {v}\n" for k, v in speeds.items()))
    args = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items())
    pytester.makefile(
        ".toml",
        profiles=textwrap.dedent(f"""
        [profiles.sim]
        engine = "command"
        command = ["{sys.executable}", "wrapper.py", "--model-path", "m", "--host", "{{host}}",
                   "--port", "{{port}}", {args}]
        health_path = "/health"
        concurrency = [4]
        runs = 3
        output_len = 64
        min_requests = 8
        launch_cv = 0.05
        ready_timeout_s = 30
        shutdown_timeout_s = 5
        """)
        + extra,
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\nllmperf_profiles = sim\n")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)


def record(pytester: pytest.Pytester) -> None:
    recorded = pytester.runpytest(
        "-p", "no:randomly", "--perf-update", "--perf-update-launches", "2"
    )
    recorded.assert_outcomes(passed=2)


def points(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out.json").read_text())["points"]


def test_a_slow_launch_is_confirmed_on_a_fresh_one_and_cleared(pytester):
    """Launches 1-2 record; tonight's first launch (3) runs 17 % slow, past the 15 % fail margin
    but not surely a FAIL with launches 5 % apart: the point is CONFIRMING, the fresh launch (4)
    runs at the golden's speed, and over tonight's two launches it PASSes."""
    project(pytester, {3: 0.83})
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=2)  # the test, and its confirmation
    night.stdout.fnmatch_lines(
        ["sim: confirmed on a fresh launch (sim@confirm1, loaded in * s, measured * s): 1 PASS"]
    )
    (point,) = points(pytester)
    assert point["verdict"] == "PASS", point["message"]
    assert len({run["launch_id"] for run in point["runs"]}) == 2
    data = json.loads((pytester.path / "out.json").read_text())
    (confirmation,) = data["confirmations"]
    assert confirmation["profile"] == "sim" and confirmation["points"] == {"sim C=4": "PASS"}
    assert (pytester.path / "launches.txt").read_text() == "4"
    assert not processes_with(str(pytester.path / "wrapper.py"))  # every launch stopped


def test_a_collapse_is_confirmed_on_a_fresh_launch_and_fails(pytester):
    """Tonight's launches both run 30 % slow: the fresh launch confirms it, and the
    confirmation fails, naming the point; its test passed as CONFIRMING."""
    project(pytester, {3: 0.7, 4: 0.7})
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=1, failed=1)
    night.stdout.fnmatch_lines(
        [
            "*llmperf-confirm?sim?*",
            "*sim C=4: * tok/s vs golden * (−3*%, slower, *) — FAIL: significantly slower by "
            "more than the 15 % fail margin*",
        ]
    )
    (point,) = points(pytester)
    assert point["verdict"] == "FAIL" and point["ratio"] < 0.75
    assert len({run["launch_id"] for run in point["runs"]}) == 2


def test_nothing_undecided_launches_nothing_more_and_shows_nothing(pytester):
    """An unchanged night: no confirmation launch, and no line or count for the confirmation."""
    project(pytester, {})
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", "-rs", *CONFIRM)
    night.assert_outcomes(passed=1)
    assert "llmperf-confirm" not in night.stdout.str()
    assert (pytester.path / "launches.txt").read_text() == "3"
    assert json.loads((pytester.path / "out.json").read_text())["confirmations"] == []


def test_without_a_confirmation_launch_an_undecided_point_is_a_warn(pytester):
    """confirm_launches = 0 (as for a server the plugin attaches to): past the fail margin,
    undecided, and no launch to tell: a WARN that says so, never a PASS."""
    project(pytester, {3: 0.83}, confirm_launches=0)
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=1)
    (point,) = points(pytester)
    assert point["verdict"] == "WARN"
    assert "no fresh launch could confirm it tonight, so it is not a PASS" in point["message"]
