"""The golden-baseline workflow end to end: record, compare, regress, improve, refuse, re-record."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections import Counter

import pytest

from tests.helpers import THROUGHPUT_SUITE, write_profiles


def golden(pytester, profile="sim-base"):
    path = pytester.path / "baselines" / profile / "sim.json"
    return path, json.loads(path.read_text())


# Requests long enough (64 tokens, about 30 ms) that a millisecond of client scheduling on a busy
# 2-core machine stays far below the client-bound check's threshold.
#: 96 tokens (about 57 ms a request at sim speed 20): at 64, a 2 ms gap between a response and
#: the next request, seen on a busy 2-core runner, read client-bound at C = 1.
OUTPUT_LEN = 96


def with_knob(pytester, marker, knob=None):
    """Rewrite the profiles with a hidden sim fault knob: same fingerprint, different speed."""
    extra = f'"--sim-throughput-multiplier", "{knob}"' if knob else ""
    write_profiles(
        pytester,
        marker=marker,
        concurrency="[1, 4]",
        runs=3,
        extra_args=extra,
        output_len=OUTPUT_LEN,
    )


@pytest.fixture
def project(pytester):
    marker = write_profiles(pytester, concurrency="[1, 4]", runs=3, output_len=OUTPUT_LEN)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    return marker


def test_record_then_gate(pytester, project):
    # No golden: every point fails with the instruction, and nothing is written.
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "sim-base C=1: no golden baseline in *baselines/sim-base/sim.json for "
            "test_perf.py::test_output_throughput?C=1?.",
            "  Record it: pytest test_perf.py --llm-profile sim-base --perf-update",
            "llmperf verdicts: 2 MISSING",
            "Re-run with --perf-update to record missing baselines.",
        ]
    )
    assert not (pytester.path / "baselines").exists()

    # --perf-update: passes, says what it wrote, writes a reviewable file.
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "6")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "llmperf verdicts: 2 RECORDED",
            "golden: *sim.json: recorded test_perf.py::test_output_throughput?C=1?: * (output_tok_s, n=6)",
            "golden: *sim.json: recorded test_perf.py::test_output_throughput?C=4?: * (output_tok_s, n=6)",
        ]
    )
    path, data = golden(pytester)
    text = path.read_text()
    assert text.endswith("}\n") and text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert data["schema"] == 1 and data["hardware_key"] == "sim"
    assert data["fingerprint"]["hard"]["hardware"] == {"key": "sim"}
    assert data["fingerprint"]["hard"]["server_args"]["sim_speed"] == 20.0
    point = data["points"]["test_perf.py::test_output_throughput[C=4]"]
    assert len(point["runs"]) == 6 and len({r["launch_id"] for r in point["runs"]}) == 1
    assert (
        point["runs"][0]["requests"] == 16 and point["runs"][0]["output_tokens"] == 16 * OUTPUT_LEN
    )
    assert point["anchor"]["mean"] == pytest.approx(point["summary"]["mean"])
    assert point["history"][0]["why"] == "--perf-update"
    assert (
        point["workload"]["output_len"] == OUTPUT_LEN
        and len(point["workload"]["prompt_set_sha256"]) == 64
    )

    # The same server passes; so does one 3 % slower.
    for knob in (None, "0.97"):
        with_knob(pytester, project, knob)
        result = pytester.runpytest()
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["llmperf verdicts: *PASS*"])
        assert "FAIL" not in result.stdout.str()

    # 30 % slower: every point fails, in the test, with the figures and with what changed in the
    # environment since the golden (here its Python, as after an image upgrade).
    data["fingerprint"]["soft"]["python"] = "3.10.0"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    with_knob(pytester, project, "0.7")
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    for c in (1, 4):
        result.stdout.fnmatch_lines(
            [
                f"sim-base C={c}: * tok/s vs golden * (\u2212*%, slower, p=*, n=* vs 6) \u2014 FAIL: "
                "significantly slower by more than the 15 %*",
                "  Changed since the golden (not blocking):",
                f'    python: "3.10.0" \u2192 "{platform.python_version()}"',
            ]
        )
    result.stdout.fnmatch_lines(["llmperf verdicts: 2 FAIL"])

    # Faster: passes as IMPROVED and suggests refreshing the golden.
    with_knob(pytester, project, "1.4")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "llmperf verdicts: 2 IMPROVED",
            "IMPROVED output_throughput sim-base C=1: * (+*%, faster, p=*) \u2014 IMPROVED: significantly faster *",
            "2 point(s) improved beyond the margin: refresh their goldens with --perf-update and review the diff.",
        ]
    )

    # Replacing a golden with a worse one needs a reason, which is kept.
    with_knob(pytester, project, "0.7")
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "3")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "sim-base C=1: refusing to replace the golden * with * (\u2212*%, worse than the 5 % warn margin).",
            "*--perf-accept-worse='<reason*",
        ]
    )
    assert golden(pytester)[1] == data  # untouched
    result = pytester.runpytest(
        "--perf-update", "--perf-update-runs", "3", "--perf-accept-worse=throttled host, #42"
    )
    result.assert_outcomes(passed=2)
    point = golden(pytester)[1]["points"]["test_perf.py::test_output_throughput[C=1]"]
    assert [h["why"] for h in point["history"]] == ["--perf-update", "throttled host, #42"]
    assert point["anchor"] == data["points"]["test_perf.py::test_output_throughput[C=1]"]["anchor"]
    assert len(point["runs"]) == 3


def test_pool_runs_from_two_launches(pytester, project):
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    pytester.runpytest("--perf-update", "--perf-update-runs", "3", "--perf-pool").assert_outcomes(
        passed=2
    )
    point = golden(pytester)[1]["points"]["test_perf.py::test_output_throughput[C=1]"]
    assert len(point["runs"]) == 6 and len({r["launch_id"] for r in point["runs"]}) == 2
    assert point["summary"]["n"] == 6 and point["history"][-1]["why"] == "--perf-update --perf-pool"


def test_a_recording_under_another_configuration_replaces_the_golden(pytester, project):
    """A golden recorded under another configuration (here the server's speed flag, as an
    output_len or an engine flag would be) is no baseline for the new one: re-recording
    replaces it, neither refused as a regression nor pooled with."""
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    before = golden(pytester)[1]["points"]["test_perf.py::test_output_throughput[C=1]"]
    slower = write_profiles(
        pytester,
        marker=project,
        concurrency="[1, 4]",
        runs=3,
        extra_args='"--sim-speed", "10"',  # the last --sim-speed wins: half the speed
        output_len=OUTPUT_LEN,
    )
    assert slower == project
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "3", "--perf-pool")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["golden: *sim.json: replaced test_perf.py::test_output_throughput?C=1?: *"]
    )
    _, data = golden(pytester)
    assert data["fingerprint"]["hard"]["server_args"]["sim_speed"] == 10.0
    point = data["points"]["test_perf.py::test_output_throughput[C=1]"]
    assert len(point["runs"]) == 3  # not pooled with the old configuration's 3
    assert point["summary"]["mean"] < 0.7 * before["summary"]["mean"]  # slower, not refused

    # Under the same configuration, a worse recording is refused again.
    write_profiles(
        pytester,
        marker=project,
        concurrency="[1, 4]",
        runs=3,
        extra_args='"--sim-speed", "10", "--sim-throughput-multiplier", "0.5"',
        output_len=OUTPUT_LEN,
    )
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "3")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["sim-base C=1: refusing to replace the golden *"])


def test_corrupt_golden_is_an_error_and_left_untouched(pytester, project):
    path = pytester.path / "baselines" / "sim-base" / "sim.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "points": {')
    before = path.read_bytes()
    for args in ((), ("--perf-update",)):
        result = pytester.runpytest(*args)
        result.assert_outcomes(failed=2)
        result.stdout.fnmatch_lines(
            [f"golden file {path} is not valid JSON (*). It was left untouched: restore it*"]
        )
        assert path.read_bytes() == before
    path.write_text('{"schema": 99, "points": {}, "fingerprint": {}}\n')
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(
        [
            f"golden file {path} has schema 99, but this version reads schema 1. "
            "It was left untouched: delete it and re-record with --perf-update."
        ]
    )


def test_changed_hard_key_is_incomparable_with_the_diff(pytester, project):
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    write_profiles(
        pytester,
        marker=project,
        concurrency="[1, 4]",
        runs=3,
        extra_args='"--max-running-requests", "64"',
        output_len=OUTPUT_LEN,
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "sim-base C=1: INCOMPARABLE with *sim.json: it was recorded under a different configuration:",
            "    server_args.max_running_requests: 4096 \u2192 64",
            "  If the change is intended, re-record (and review the diff): "
            "pytest test_perf.py --llm-profile sim-base --perf-update",
        ]
    )
    # A changed workload is a hard key too.
    # The golden has OUTPUT_LEN
    write_profiles(pytester, marker=project, concurrency="[1, 4]", runs=3, output_len=24)
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"    workload.output_len: {OUTPUT_LEN} \u2192 24"])


def test_margins_per_test_with_a_marker(pytester, project):
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    pytester.makepyfile(
        test_perf="""
        import pytest

        @pytest.mark.llmperf(fail_margin=0.5, warn_margin=0.4)
        def test_output_throughput(llmperf, llm_concurrency):
            llmperf.check(llmperf.measure(concurrency=llm_concurrency))
    """
    )
    with_knob(pytester, project, "0.7")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)  # a 30 % drop is inside a 50 % margin
    result.stdout.fnmatch_lines(["llmperf verdicts: *"])


def test_two_concurrent_updaters_leave_both_goldens_intact(pytester, project):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--perf-update",
                "--perf-update-runs",
                "3",
                "--llm-profile",
                name,
            ],
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for name in ("sim-base", "sim-spec")
    ]
    outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for name in ("sim-base", "sim-spec"):
        _, data = golden(pytester, name)
        assert sorted(data["points"]) == [
            "test_perf.py::test_output_throughput[C=1]",
            "test_perf.py::test_output_throughput[C=4]",
        ]
    assert (
        golden(pytester, "sim-spec")[1]["fingerprint"]["hard"]["server_args"][
            "speculative_algorithm"
        ]
        == "EAGLE3"
    )


def test_goldens_nobody_used_are_reported_only_when_the_whole_suite_ran(pytester, project):
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    # Restricted levels or a selection: nothing to conclude about the rest.
    for restricted in (["--llm-concurrency", "1"], ["-k", "C1"]):
        result = pytester.runpytest(*restricted)
        result.assert_outcomes(passed=1)
        assert "not used by any test" not in result.stdout.str()
    # The profile no longer measures C = 4: counted in one line, listed with -v.
    write_profiles(pytester, marker=project, concurrency="[1]", runs=3, output_len=OUTPUT_LEN)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "1 golden point(s) were not used by any test in this run: a test renamed, moved or "
            "removed? (-v lists them)."
        ]
    )
    assert "test_output_throughput[C=4]" not in result.stdout.str()
    result = pytester.runpytest("-v")
    result.stdout.fnmatch_lines(
        [
            "1 golden point(s) were not used by any test in this run: *:",
            "  *sim.json: test_perf.py::test_output_throughput?C=4?",
        ]
    )


def test_a_moved_test_file_carries_its_goldens_with_perf_rename(pytester, project):
    pytester.runpytest("--perf-update", "--perf-update-runs", "3").assert_outcomes(passed=2)
    before = golden(pytester)[1]
    (pytester.path / "test_perf.py").rename(pytester.path / "test_moved.py")
    # Moved without carrying: MISSING, and the message says how to carry them.
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["  Its test file moved? The golden has test_perf.py::test_output_throughput[[]C=1[]]; "
         "carry them: pytest --perf-rename test_perf.py=test_moved.py"]
    )  # fmt: skip
    result = pytester.runpytest("--perf-rename", "test_perf.py=test_moved.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["llmperf: goldens moved: *sim.json: 2 point(s) moved from *"])
    after = golden(pytester)[1]
    assert sorted(after["points"]) == [
        k.replace("test_perf.py", "test_moved.py") for k in sorted(before["points"])
    ]
    assert [p["runs"] for p in after["points"].values()] == [
        p["runs"] for p in before["points"].values()
    ]
    pytester.runpytest().assert_outcomes(passed=2)
    bad = pytester.runpytest("--perf-rename", "test_perf.py")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_a_recording_launches_the_server_twice_and_the_golden_keeps_each_launch(pytester, project):
    """--perf-update on a launched server: record_launches (2 by default) launches, one after
    the other, whose runs join one golden, each tagged with its launch; the five runs a golden
    needs are shared among them (three a launch, not five each), as the plan says; a gate
    afterwards judges one launch against both."""
    planned = pytester.runpytest(
        "--perf-update", "--perf-update-launches", "profile", "--perf-plan"
    )
    planned.stdout.fnmatch_lines(
        [
            "  sim-base: C = 1, 4; 3 runs per level *",
            "  sim-base@launch2: C = 1, 4; 3 runs per level *",
            "  total: not timed: 4 level(s) with no golden, 2 load(s) with no startup golden*",
        ]
    )
    recorded = pytester.runpytest("--perf-update", "--perf-update-launches", "profile")
    recorded.assert_outcomes(passed=4)
    recorded.stdout.fnmatch_lines(["*recorded test_perf.py::test_output_throughput?C=1?: * n=*)"])
    path, data = golden(pytester)
    counts = {}
    for point in data["points"].values():
        per_launch = Counter(r["launch_id"] for r in point["runs"])
        assert len(per_launch) == 2 and min(per_launch.values()) >= 3, per_launch
        counts[point["concurrency"]] = len(point["runs"])
        assert len(point["history"]) == 1 and len(point["history"][0]["launches"]) == 2
    assert (
        data["profile"] == "sim-base"
        and not (pytester.path / "baselines" / "sim-base@launch2").exists()
    )
    gated = pytester.runpytest("--perf-json", "results.json")
    gated.assert_outcomes(passed=2)
    points = json.loads((pytester.path / "results.json").read_text())["points"]
    assert {p["profile"] for p in points} == {"sim-base"}
    assert all(p["golden"]["n"] == counts[p["concurrency"]] for p in points)


OPEN_LOOP_SUITE = """
def test_rate_latency(llmperf, llm_request_rate):
    point = llmperf.measure(rate=llm_request_rate)
    llmperf.check(point, metric="ttft_p90_s")


def test_at_a_fixed_rate(llmperf, llm_profile):
    point = llmperf.measure(rate=10)
    llmperf.check(point, metric="e2e_p90_s")
"""


def test_a_recordings_later_launch_measures_no_open_loop(pytester, project):
    """A recording over two launches re-measures the closed-loop levels on the second; the
    open-loop points are measured on the first alone, with the five runs a golden needs on it:
    the rate levels are not collected for ``@launch2``, and a test that asks for a rate of its
    own is skipped there with the reason."""
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(
        profiles.read_text().replace(
            "min_requests = 4\n", "min_requests = 12\nrequest_rate = [20]\nsettle_s = 0.3\n", 1
        )
    )
    pytester.makepyfile(test_rates=OPEN_LOOP_SUITE)
    args = ["--perf-update", "--perf-update-launches", "2", "-rs"]
    planned = pytester.runpytest(*args, "--perf-plan")
    planned.stdout.fnmatch_lines(["  sim-base: 20 requests/s; 5 runs per level; *"])
    planned.stdout.no_fnmatch_line("  sim-base@launch2: 20 requests/s*")
    recorded = pytester.runpytest(*args)
    recorded.assert_outcomes(passed=6, skipped=1)
    recorded.stdout.fnmatch_lines(
        ["SKIPPED *sim-base@launch2: a recording's later launch re-measures the closed-loop "
         "levels only; open-loop points (rate levels, capacity, trace replays) are recorded on "
         "sim-base's first launch and judged with the launch spread its launch_cv allows"]
    )  # fmt: skip
    _, data = golden(pytester)
    launches = {
        point["test"]: Counter(r["launch_id"] for r in point["runs"])
        for point in data["points"].values()
    }
    for test, per_launch in launches.items():
        if "rate" in test:
            assert len(per_launch) == 1 and sum(per_launch.values()) == 5, (test, per_launch)
        else:
            assert len(per_launch) == 2, (test, per_launch)
    assert sum("rate" in test for test in launches) == 2


TTFT_SUITE = """
def test_ttft(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency), metric="ttft_p50_s")
"""


def test_a_latency_recorded_on_another_host_is_reported_and_gets_no_more_runs(pytester):
    """The simulated engine's latencies are its host's: against a golden recorded on another
    host they are reported, not gated, so the runs that would decide them are not spent. The
    control: the same golden on this host is gated, and its runs set alike (no spread) and 30 %
    faster than tonight's leave tonight's two out of line and past the warn margin, which the
    stages must settle with more runs."""
    write_profiles(pytester, concurrency="[1]", runs=2)
    pytester.makepyfile(test_perf=TTFT_SUITE)
    recorded = pytester.runpytest_subprocess("--perf-update", "--perf-update-runs", "5")
    recorded.assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines" / "sim-base").glob("*.json")
    golden = json.loads(path.read_text())
    (ttft,) = [e for e in golden["points"].values() if e["metric"] == "ttft_p50_s"]
    for run in ttft["runs"]:
        run["value"] = ttft["summary"]["mean"] / 1.3
    path.write_text(json.dumps(golden))

    def runs_used() -> tuple[int, str]:
        pytester.runpytest_subprocess("--perf-json", "out.json")
        points = json.loads((pytester.path / "out.json").read_text())["points"]
        (point,) = [p for p in points if p["metric"] == "ttft_p50_s"]
        return len(point["runs"]), point["message"]

    here, message = runs_used()
    assert here > 2, message
    del ttft["host"]  # as a golden recorded before goldens named their host, or elsewhere
    path.write_text(json.dumps(golden))
    elsewhere, message = runs_used()
    assert elsewhere == 2, message
    assert "reported, not gated: recorded on another host" in message, message
