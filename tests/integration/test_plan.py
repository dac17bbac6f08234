"""The plan before the run, end to end: timed from the goldens, printed before the first server
starts, and with --perf-plan (or the ini) printed alone, with nothing started."""

from __future__ import annotations

import pytest

from tests.helpers import SPEEDUP_SUITE, processes_with, write_profiles


def test_the_plan_is_timed_by_the_goldens_and_perf_plan_starts_nothing(pytester):
    marker = write_profiles(pytester, concurrency="[1, 4]", runs=2, output_len=64, min_requests=8)
    pytester.makepyfile(test_perf=SPEEDUP_SUITE)

    # No golden yet: counted, not timed.
    result = pytester.runpytest("--perf-plan", "--llm-profile", "sim-base,sim-spec")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "llmperf plan:",
            "  sim-base: C = 1, 4; 2 runs per level; 48 requests, 3,072 tokens; not timed (no golden)",
            # In run order: pytest 9.2 runs the second profile's levels as 4, 1 (it keeps the
            # session-scoped C = 4 from the first profile's last test), 9.0 as 1, 4.
            "  sim-spec: C = [14], [14]; 2 runs per level; 48 requests, 3,072 tokens; not timed*",
            "  total: not timed: 4 level(s) with no golden, 2 load(s) with no startup golden "
            "(no history yet)",
        ]
    )
    assert any(line.startswith("  sim-spec: C = 1, 4;") or line.startswith("  sim-spec: C = 4, 1;")
               for line in result.outlines)  # fmt: skip

    # Recording: the plan says so and counts the recording's first 5 runs (10 at most).
    result = pytester.runpytest("--perf-update", "--llm-profile", "sim-base")
    result.stdout.fnmatch_lines(
        [
            "llmperf plan (recording goldens):",
            "  sim-base: C = 1, 4; 5 runs per level (up to 10 where the golden is not yet precise); 120 *",
        ]
    )
    result.assert_outcomes(passed=2, skipped=1)

    # With the golden, the estimate is the golden's throughput: N x 64 tokens per run.
    runs = pytester.path / ".llmperf" / "runs"
    logs_before = sorted(runs.glob("*/*.log"))
    result = pytester.runpytest("--perf-plan", "--llm-profile", "sim-base")
    result.stdout.fnmatch_lines(
        ["  sim-base: C = 1, 4; 2 runs per level; 48 requests, 3,072 tokens; about * s"]
    )
    result.stdout.no_fnmatch_line("*no golden*")
    # Nothing started (it was timed once: 2.1 s on a busy CI machine against a bound of 2).
    assert sorted(runs.glob("*/*.log")) == logs_before

    # A capacity search is planned from the golden: where its single stream and its saturated
    # throughput put the server, and, for an e2e limit no request can meet, the warning.
    pytester.makepyfile(
        test_cap="def test_capacity(llmperf):\n    llmperf.check_capacity(llmperf.capacity())\n"
    )
    profiles = pytester.path / "profiles.toml"
    text = profiles.read_text()
    for e2e, expected in (
        ("10.0", ["  sim-base: from 8 requests/s, about * probes (8, 16, *; about * s"]),
        (
            "0.001",
            [
                "  sim-base: from 8 requests/s, about 2 probes (8, 4), ending where the "
                "golden's single stream puts it; about * s",
                "    sim-base: one 64-token request takes about * ms at the golden's single "
                "stream, over the slo's e2e_s of 1 ms: no rate will meet it",
            ],
        ),
    ):
        profiles.write_text(
            text.replace(
                "min_requests = ",
                f"slo = {{ e2e_s = {e2e} }}\nrequest_rate = [2, 8]\nmin_requests = ",
                1,
            )
        )
        result = pytester.runpytest("--perf-plan", "--llm-profile", "sim-base")
        result.stdout.fnmatch_lines(
            [
                "  total: about *: closed loop *, capacity *; not timed: 1 load(s) with no startup "
                "golden (no history yet; *)",
                "llmperf plan, capacity searches:",
                *expected,
            ]
        )
    profiles.write_text(text)

    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\nllmperf_plan = true\n")
    result = pytester.runpytest("--llm-profile", "sim-base")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["llmperf plan:"])
    result.assert_outcomes()  # nothing passed, failed, skipped or errored: nothing ran
    assert sorted(runs.glob("*/*.log")) == logs_before  # no server started
    assert processes_with(marker) == []


def test_a_windowed_profile_with_no_golden_plans_its_windows_not_zero_requests(pytester):
    """A windowed run serves as many requests as the server does in its window: with no golden
    to say how fast that is, the plan names the windows (it said "0 requests, 0 tokens")."""
    write_profiles(pytester, concurrency="[1, 4]", runs=3)
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(
        profiles.read_text().replace("min_requests = ", "window_s = 1.5\nmin_requests = ", 1)
    )
    pytester.makepyfile(test_perf=SPEEDUP_SUITE)
    result = pytester.runpytest("--perf-plan", "--llm-profile", "sim-base")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "  sim-base: C = 1, 4; 3 runs per level; windows of 1.5 s (as many requests as the "
            "server serves in them); about * s"
        ]
    )
    result.stdout.no_fnmatch_line("*0 requests, 0 tokens*")
