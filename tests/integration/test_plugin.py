"""The plugin end to end, as users run it: pytester projects with real simulated servers."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.helpers import THROUGHPUT_SUITE, processes_with, start_sim, write_profiles

SINGLE_STREAM_SUITE = """
def test_single_stream(llmperf, llm_profile):
    point = llmperf.measure(concurrency=1, runs=2, metric="request_tok_s")
    llmperf.check(point)
"""


@pytest.fixture
def no_leftovers():
    """Every test names the marker of its servers; none may survive the pytest run."""
    markers = []
    yield markers
    for marker in markers:
        assert processes_with(marker) == [], f"server processes left behind for {marker}"


def test_help_lists_the_options_in_one_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "LLM-serving performance (pytest-llmperf):",
            "*--llm-profile=NAME?,NAME...?*",
            "*--llm-profiles-file=PATH*",
            "*--llm-server-url=URL*",
            "*--llm-concurrency=C?,C...?*",
            "*--perf-json=PATH*",
        ]
    )
    result.stdout.fnmatch_lines(["*llmperf_profiles_file (string):*"])


def test_measures_each_profile_and_level_and_writes_the_results_json(pytester, no_leftovers):
    no_leftovers.append(write_profiles(pytester))
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE + SINGLE_STREAM_SUITE)
    result = pytester.runpytest(
        "-v",
        "--llm-profile",
        "sim-base,sim-spec",
        "--perf-json",
        "out/results.json",
        "--perf-update",
        "--perf-update-runs",
        "2",
    )
    result.assert_outcomes(passed=6)
    # Grouped by profile: every sim-base test before any sim-spec test, so each server starts once.
    order = [
        re.search(r"\[(sim-[a-z]+)", line).group(1)
        for line in result.outlines
        if " PASSED " in line
    ]
    assert order == ["sim-base"] * 3 + ["sim-spec"] * 3, order
    result.stdout.fnmatch_lines(
        [
            "*llmperf: output throughput per concurrency*",
            "profile*test*C*measured mean ± sd (n)*golden*Δ %*req tok/s*TTFT p50/p99 ms*ITL p50 ms*accept*verdict",
            "sim-base*output_throughput*1*(2)*RECORDED",
            "sim-base*output_throughput*4*(2)*RECORDED",
            "sim-base*single_stream*1*(2)*RECORDED",
            "sim-spec*output_throughput*1*(2)*[12].[0-9][0-9]*RECORDED",  # accept length
            "llmperf verdicts: 6 RECORDED",
        ]
    )
    data = json.loads((pytester.path / "out" / "results.json").read_text())
    assert data["schema"] == 1
    assert (
        data["fingerprint"]["hard"]["sim-spec"]["server_args"]["speculative_algorithm"] == "EAGLE3"
    )
    assert data["fingerprint"]["hard"]["sim-base"]["hardware"] == {"key": "sim"}
    assert (
        data["profiles"]["sim-spec"]["server_info"]["/server_info"]["speculative_algorithm"]
        == "EAGLE3"
    )
    points = {
        (p["profile"], p["test"].split("::")[-1].split("[")[0], p["concurrency"]): p
        for p in data["points"]
    }
    assert set(points) == {
        (prof, test, c)
        for prof in ("sim-base", "sim-spec")
        for test, c in (
            ("test_output_throughput", 1),
            ("test_output_throughput", 4),
            ("test_single_stream", 1),
        )
    }
    point = points[("sim-spec", "test_output_throughput", 4)]
    assert (
        point["metric"] == "output_tok_s"
        and point["verdict"] == "RECORDED"
        and point["problems"] == []
    )
    assert (
        len(point["workload"]["prompt_set_sha256"]) == 64
        and point["workload"]["requests_per_run"] == 16
    )
    assert len(point["values"]) == 2 and all(v > 0 for v in point["values"])
    run = point["runs"][0]
    assert run["output_tok_s"] == point["values"][0]
    assert run["requests"] == 16 and run["failed_requests"] == 0 and run["output_tokens"] == 16 * 64
    assert run["ttft_s"]["p50"] > 0 and run["itl_s"]["p50"] > 0 and 1.5 < run["accept_length"] < 3
    assert points[("sim-base", "test_output_throughput", 4)]["runs"][0]["accept_length"] is None
    single = points[("sim-base", "test_single_stream", 1)]
    assert (
        single["metric"] == "request_tok_s"
        and single["values"][0] == single["runs"][0]["request_tok_s"]["mean"]
    )
    # Each server started exactly once, its log and exact command line in the run directory.
    run_dir = pytester.path / ".llmperf" / "runs"
    logs = sorted(p.name for p in run_dir.glob("*/*"))
    assert logs == ["sim-base.cmd", "sim-base.log", "sim-spec.cmd", "sim-spec.log"]
    for log in run_dir.glob("*/*.log"):
        assert log.read_text().count("The server is fired up and ready to roll!") == 1


def test_never_two_servers_at_once(pytester, no_leftovers):
    marker = write_profiles(pytester, concurrency="[1, 2]", runs=1)
    no_leftovers.append(marker)
    pytester.makepyfile(
        test_overlap=f"""
        from tests.helpers import processes_with

        def test_a(llmperf, llm_concurrency):
            assert len(processes_with("{marker}")) == 1

        def test_b(llmperf):
            assert len(processes_with("{marker}")) == 1
    """
    )
    result = pytester.runpytest("--llm-profile", "sim-base,sim-spec")
    result.assert_outcomes(passed=6)


def test_unknown_profile_is_a_usage_error_listing_the_available_ones(pytester, no_leftovers):
    no_leftovers.append(write_profiles(pytester))
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profile", "sim-bsae")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*unknown profile 'sim-bsae' in *profiles.toml. Did you mean 'sim-base'? "
            "Available profiles: sim-base, sim-spec."
        ]
    )


def test_a_bad_profile_file_names_the_file_profile_and_field(pytester):
    write_profiles(pytester, '[profiles.broken]\nextends = "sim-base"\nruns = "three"\n')
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profile", "broken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*profiles.toml: profile 'broken', field 'runs': got 'three'; expected a positive integer."
        ]
    )


def test_a_server_that_dies_while_loading_fails_fast_with_its_log(pytester, no_leftovers):
    no_leftovers.append(write_profiles(pytester, extra_args='"--sim-crash-while-loading"'))
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    started = time.monotonic()
    result = pytester.runpytest()
    elapsed = time.monotonic() - started
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*sim-base: the server exited with code 1 while loading*",
            "*log: *sim-base.log",
            "*Loading safetensors checkpoint shards:*5/11*",
            "*RuntimeError: simulated crash while loading (--sim-crash-while-loading)*",
        ]
    )
    assert elapsed < 15, f"took {elapsed:.1f} s"


def test_a_server_that_dies_mid_run_fails_that_test_and_skips_the_rest(pytester, no_leftovers):
    # C=1 uses 1 warm-up + 2 runs x 4 requests, and up to 8 more where a busy host held the
    # client back (a run measured again): 9-17 requests. C=2 sends 10 more, so the crash after
    # 18 comes during C=2 either way.
    no_leftovers.append(
        write_profiles(
            pytester,
            concurrency="[1, 2, 4]",
            runs=2,
            extra_args='"--sim-crash-after-requests", "18"',
        )
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("-rs", "--perf-update", "--perf-update-runs", "2")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*sim-base: the server exited with code 1 while it was being measured.*",
            "*RuntimeError: simulated crash after 18 requests*",
            "*The remaining tests of profile sim-base are skipped.*",
            "SKIPPED*sim-base: the server exited with code 1 while it was being measured; see *sim-base.log",
        ]
    )
    assert "During handling" not in result.stdout.str()  # said once, not as a chain


def test_failed_requests_make_the_point_invalid(pytester, no_leftovers):
    no_leftovers.append(
        write_profiles(pytester, concurrency="[2]", extra_args='"--sim-fail-every", "5"')
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sim-base C=2: INVALID, output_tok_s * is not a measurement of the server:",
            "*run 1: * of 8 requests failed; first: server error: simulated failure of request *",
            "sim-base*output_throughput*2*INVALID",
        ]
    )


def test_a_client_that_sets_the_pace_is_flagged_not_reported(pytester):
    # A zero-delay server (engine = "command"): the whole stream arrives at once, so the
    # load generator, not the server, is the limit.
    write_profiles(
        pytester,
        """
        [profiles.zero-delay]
        engine = "command"
        command = ["{python}", "-m", "pytest_llmperf.sim.paced", "--port", "{port}", "--itl-ms", "0"]
        api = "sglang"
        concurrency = [64]
        runs = 1
        output_len = 512
        min_requests = 4
        ready_timeout_s = 30
        shutdown_timeout_s = 5
    """,
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profile", "zero-delay")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "zero-delay C=64: INVALID, output_tok_s * is not a measurement of the server:",
            "  run 1: client-bound: *",
        ]
    )
    # Which signal trips first depends on how the OS shares the 2 cores; both mean the same.
    assert (
        "% of a CPU core" in result.stdout.str() or "ms late at the median" in result.stdout.str()
    )


#: The project's first run shares its process with a thread that never sleeps: the client held
#: back for one run, as a busy moment of a shared runner does (the thread's CPU time is the
#: load generator's process's, so the run reads client-bound every time).
HELD_BACK_ONCE = """
import threading

import pytest

import pytest_llmperf.load.closed_loop as closed_loop

original = closed_loop.ClosedLevel.prepare
runs = []


def held_back_once(self, k, client):
    ready = original(self, k, client)

    async def run(*args):
        runs.append(len(runs) + 1)
        if len(runs) > 1:
            return await ready(*args)
        stop = threading.Event()

        def busy():
            while not stop.is_set():
                pass

        thread = threading.Thread(target=busy, daemon=True)
        thread.start()
        try:
            return await ready(*args)
        finally:
            stop.set()
            thread.join()

    return run


@pytest.fixture(autouse=True)
def busy_runner(monkeypatch):
    monkeypatch.setattr(closed_loop.ClosedLevel, "prepare", held_back_once)
"""


def test_a_run_the_client_alone_held_back_is_measured_again(pytester, no_leftovers):
    # 256-token requests: the other runs stay far from the client-bound check on 2 cores.
    no_leftovers.append(write_profiles(pytester, concurrency="[1]", output_len=256, runs=3))
    pytester.makeconftest(HELD_BACK_ONCE)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest(
        "--perf-update", "--perf-update-runs", "3", "--perf-json", "out.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "measured again: output_throughput sim-base C=1 run 1: client-bound: the load "
            "generator used *% of a CPU core*",
        ]
    )
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] == "RECORDED" and point["problems"] == []
    assert len(point["remeasured"]) == 1 and point["remeasured"][0].startswith(
        "run 1: client-bound"
    )
    # Three runs, none of them the held-back one; the golden has the same three.
    assert len(point["runs"]) == 3 and not any(r["problems"] for r in point["runs"])
    golden = json.loads((pytester.path / "baselines/sim-base/sim.json").read_text())
    recorded = golden["points"]["test_perf.py::test_output_throughput[C=1]"]["runs"]
    assert [r["value"] for r in recorded] == pytest.approx(point["values"])


def test_attach_to_a_running_server_neither_launches_nor_stops_it(pytester):
    write_profiles(pytester, concurrency="[2]")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    server = start_sim()
    try:
        result = pytester.runpytest(
            "--llm-profile", "sim-base", "--llm-server-url", server.url, "--perf-update"
        )
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"llmperf: profiles sim-base (*); attached to {server.url}"])
        assert server.proc.poll() is None
        assert not (pytester.path / ".llmperf").exists()  # nothing launched, no run directory
        usage = pytester.runpytest(
            "--llm-profile", "sim-base,sim-spec", "--llm-server-url", server.url
        )
        assert usage.ret == pytest.ExitCode.USAGE_ERROR
        usage.stderr.fnmatch_lines(
            ["*--llm-server-url attaches one server to one profile; 2 are selected*"]
        )
    finally:
        server.stop()
    # The server is gone: one usage error, before the plan, instead of a setup error per test.
    dead = pytester.runpytest("--llm-profile", "sim-base", "--llm-server-url", server.url)
    assert dead.ret == pytest.ExitCode.USAGE_ERROR
    dead.stderr.fnmatch_lines(
        [
            f"ERROR: --llm-server-url {server.url} cannot be reached: ConnectError*(profile 'sim-base')*"
        ]
    )
    assert "llmperf plan" not in dead.stdout.str()


def test_ini_keys_select_profiles_and_levels(pytester, no_leftovers):
    # 256-token requests (about 170 ms on the fast sim-spec): two worker processes beside the
    # server on 2 cores can wait a few ms between requests, which the client-bound check rightly
    # flags on 40 ms requests (seen in CI: 3.4 ms, 8 %) but which is noise on these.
    no_leftovers.append(write_profiles(pytester, output_len=256))
    pytester.makeini(
        "[pytest]\nllmperf_profiles_file = profiles.toml\nllmperf_profiles = sim-spec\n"
        "llmperf_concurrency = 2\nllmperf_client_workers = 2\n"
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    # Workers: own processes
    result = pytester.runpytest_subprocess("-v", "--perf-update", "--perf-update-runs", "3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_output_throughput?sim-spec-C2? PASSED*"])


def test_invalid_option_values_are_usage_errors(pytester):
    write_profiles(pytester)
    for args, message in (
        (
            ["--llm-concurrency", "1,x"],
            "*--llm-concurrency: 'x' is not a positive integer. Example: --llm-concurrency 1,2,5*",
        ),
        (
            ["--llm-client-transport", "curl"],
            "*--llm-client-transport: 'curl' is not valid. Valid values: aiohttp, httpx.*",
        ),
        (["--llm-client-workers", "0"], "*--llm-client-workers: '0' is not a positive integer.*"),
    ):
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])


def test_a_new_project_without_a_profiles_file_gets_one_usage_error_with_the_fix(pytester):
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_perf.py::test_output_throughput needs a server profile, but there is no "
            "profiles file at *profiles.toml. Create one (`python -m pytest_llmperf init` writes "
            "a working one)*"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
