"""The SGLang lifecycle fault matrix, end to end with a stand-in ``sglang`` package.

The stand-in logs like SGLang (``\\r`` progress bars), starts two child processes, and can crash
while loading, ignore SIGTERM or crash after N requests. After every case no process of the
stand-in may remain: checked against the process table, not assumed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ctrl_c_enabled, processes_with, write_sglang_profile


def project(
    pytester, *knobs: str, shutdown_timeout_s: float = 5, concurrency: str = "[1, 4]"
) -> str:
    """The stand-in SGLang 0.5.23 with two children and \\r progress bars, plus ``knobs``."""
    return write_sglang_profile(
        pytester,
        [
            "--tp-size",
            "1",
            "--sim-children",
            "2",
            "--sim-progress-cr",
            "--sim-load-time",
            "0.5",
            "--sim-speed",
            "20",
            *knobs,
        ],
        concurrency=concurrency,
        shutdown_timeout_s=shutdown_timeout_s,
    )


def test_clean_run_with_children_leaves_nothing(pytester):
    marker = project(pytester)
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "2")
    result.assert_outcomes(passed=2)
    (log,) = (pytester.path / ".llmperf" / "runs").glob("*/gpu.log")
    assert "started 2 child processes" in log.read_text()
    assert processes_with(marker) == []


def test_crash_while_loading_fails_within_seconds_with_the_log_tail(pytester):
    marker = project(pytester, "--sim-crash-while-loading")
    started = time.monotonic()
    result = pytester.runpytest()
    assert time.monotonic() - started < 20
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*gpu: the server exited with code 1 while loading*",
            "*Multi-thread loading shards:*",  # the stand-in is SGLang 0.5.23: its loader's bar
        ]
    )
    assert processes_with(marker) == []  # its orphaned children too (same process group)


def test_sigterm_ignored_the_group_is_gone_after_the_grace(pytester):
    marker = project(pytester, "--sim-ignore-sigterm", shutdown_timeout_s=2, concurrency="[1]")
    started = time.monotonic()
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "2")
    result.assert_outcomes(passed=1)
    assert time.monotonic() - started < 25
    assert processes_with(marker) == []


def test_crash_mid_run_fails_the_test_with_the_tail_and_skips_the_rest(pytester):
    marker = project(pytester, "--sim-crash-after-requests", "6", concurrency="[1, 4, 8]")
    result = pytester.runpytest("--perf-update", "--perf-update-runs", "2", "-rs")
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(
        ["*The remaining tests of profile gpu are skipped.*", "SKIPPED*gpu: the server *"]
    )
    assert processes_with(marker) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_interrupting_pytest_stops_the_server_and_its_children(pytester, sig):
    marker = project(pytester, concurrency="[1]")
    pytester.makepyfile(
        test_perf="""
        import time

        def test_waits(llm_server):
            time.sleep(120)
    """
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_perf.py"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ctrl_c_enabled,
    )
    try:
        deadline = time.monotonic() + 30
        while (
            len(processes_with(marker)) < 3 and time.monotonic() < deadline
        ):  # server + 2 children
            time.sleep(0.2)
        assert len(processes_with(marker)) >= 3, "the stand-in never came up"
        time.sleep(1.0)  # inside the test now
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in out or "SIGTERM" in out, out[-2000:]
    assert processes_with(marker) == []


def test_loading_progress_is_shown_while_the_server_loads(pytester):
    marker = project(
        pytester, "--sim-load-time", "4", "--speculative-algorithm", "EAGLE3", concurrency="[1]"
    )
    # Not a TTY: a line per stage
    result = pytester.runpytest_subprocess("--perf-update", "--perf-update-runs", "2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["gpu: loading weights * % (*/11 shards), * s", "gpu: capturing * CUDA graphs*, * s"]
    )
    assert processes_with(marker) == []


@pytest.mark.parametrize(
    "sigint", [signal.SIG_IGN, signal.SIG_DFL], ids=["sigint-ignored", "sigint-default"]
)
def test_sigterm_mid_measurement_interrupts_the_run_every_time(pytester, sigint):
    """SIGTERM while streams are being read: raised as KeyboardInterrupt inside the event loop it
    could land in a transport callback and be swallowed as a broken stream (the run then went
    on); the level is cancelled instead, and pytest stops, every time. Also with SIGINT
    ignored, as a shell's background job has it (a CI script's pytest, and this suite's own in
    CI: the test hung in 2 full runs of 3 there, and never from a terminal)."""
    pytester.makefile(
        ".toml",
        profiles=f"""
        [profiles.paced]  # a token every 0.5 ms: the client reads all the time
        engine = "command"
        command = ["{sys.executable}", "-m", "pytest_llmperf.sim.paced", "--port", "{{port}}",
                   "--itl-ms", "0.5"]
        api = "sglang"
        shutdown_timeout_s = 5
        concurrency = [8]
        runs = 50
        output_len = 2000
        min_requests = 64
        """,
    )
    # A session still running 12 s after it began has hung (it is interrupted by 3.1 s):
    # faulthandler then prints every thread's stack into the output this test fails with.
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\nfaulthandler_timeout = 12\n")
    pytester.makepyfile(
        test_perf="""
def test_long(llmperf, llm_concurrency):
    llmperf.measure(concurrency=llm_concurrency)
"""
    )
    for attempt in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_perf.py",
             "--llm-profile", "paced"],
            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
        )  # fmt: skip
        try:
            time.sleep(2.5 + 0.3 * attempt)  # measuring by now (runs of about 8 s)
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                pytest.fail(f"attempt {attempt}: still running 20 s after SIGTERM:\n{out[-6000:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, (attempt, out[-1500:])
        assert "KeyboardInterrupt" in out, out[-1500:]
        assert processes_with("pytest_llmperf.sim.paced") == []
