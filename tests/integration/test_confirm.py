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


def test_a_slow_launch_is_confirmed_on_fresh_ones_and_cleared(pytester):
    """Launches 1-2 record; tonight's first launch (3) runs 19 % slow, past the 15 % fail margin
    but not surely a FAIL with launches 5 % apart: the point is CONFIRMING. Fresh launches run
    at the golden's speed, but one launch 19 % off is itself a sign that launches differ more
    than the profile says: two launches cannot rule a collapse out, so it takes more, up to the
    profile's confirm_launches, and over tonight's launches it PASSes.

    How many it takes depends on how far apart the fresh launches land: with them 1-2 % apart
    (as the simulated engine's are here), three confirmations clear it about half the time and
    four nearly always (the verdict's own functions on 1,000 such nights each: WARN after 3:
    45-50 %, after 4: 0.5-8 %, after 6: none in 2,000). confirm_launches = 6 leaves the room a
    real profile would need, so what is tested is that fresh launches clear it, not where the
    bound's noise happens to fall."""
    project(pytester, {3: 0.8}, confirm_launches=6)
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=2)  # the test, and its confirmation
    night.stdout.fnmatch_lines(
        ["sim: confirmed on a fresh launch (sim@confirm1, loaded in * s, measured * s): *"]
    )
    (point,) = points(pytester)
    assert point["verdict"] == "PASS", point["message"]
    data = json.loads((pytester.path / "out.json").read_text())
    made = data["confirmations"]
    # One fresh launch at the golden's speed does not rule a collapse out after a launch 19 %
    # off: it takes a second; the profile's confirm_launches (6) bounds them.
    assert len(made) >= 2, made
    assert len(made) <= 6, made
    assert {c["profile"] for c in made} == {"sim"}
    assert made[-1]["points"] == {"sim C=4": "PASS"}
    assert all(c["points"] == {"sim C=4": "CONFIRMING"} for c in made[:-1])
    assert len({run["launch_id"] for run in point["runs"]}) == 1 + len(made)
    assert (pytester.path / "launches.txt").read_text() == str(3 + len(made))
    assert not processes_with(str(pytester.path / "wrapper.py"))  # every launch stopped


def test_one_fresh_launch_that_cannot_clear_a_slow_one_leaves_a_warn(pytester):
    """The same night with one confirmation launch: launches 19 % apart leave a collapse not
    ruled out, and with no launch left that is a WARN that says so, never a PASS."""
    project(pytester, {3: 0.8}, confirm_launches=1)
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=2)
    (point,) = points(pytester)
    assert point["verdict"] == "WARN", point["message"]
    assert "its confirmation launches spent" in point["message"]
    assert (pytester.path / "launches.txt").read_text() == "4"


def test_a_collapse_is_confirmed_on_a_fresh_launch_and_fails(pytester):
    """Tonight's launches both run 30 % slow: the fresh launch confirms it, and the
    confirmation fails, naming the point; its test passed as CONFIRMING."""
    project(pytester, {3: 0.7, 4: 0.7})
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=1, failed=1)
    night.stdout.fnmatch_lines(
        [
            "*llmperf: confirm sim on a fresh launch*",
            "*sim C=4: * tok/s vs golden * (−2*%, slower, *) — FAIL: significantly slower by "
            "more than the 15 % fail margin*",
        ]
    )
    (point,) = points(pytester)
    assert point["verdict"] == "FAIL" and point["ratio"] < 0.75
    assert "not used by any test" not in night.stdout.str()
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
    project(pytester, {3: 0.8}, confirm_launches=0)
    record(pytester)
    night = pytester.runpytest("-p", "no:randomly", "--perf-json", "out.json", *CONFIRM)
    night.assert_outcomes(passed=1)
    (point,) = points(pytester)
    assert point["verdict"] == "WARN"
    assert "no fresh launch could confirm it tonight, so it is not a PASS" in point["message"]
