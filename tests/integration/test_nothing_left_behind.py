"""SIGKILL of pytest (a CI job cancelled hard, a Slurm job past its time) while a level is
being sent from worker processes: nothing of the run may stay alive: not the server, not the
NVML sampler, not the load-generator workers, not their fork server.

A SIGKILL gives pytest no chance to stop anything, so each of them must notice on its own.
The processes looked for are those that descended from the killed pytest, found in the real
process table just before the kill."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.helpers import write_profiles

pytestmark = pytest.mark.slow

CLOSED_SUITE = """
def test_closed(llmperf, llm_concurrency):
    llmperf.measure(concurrency=llm_concurrency)
"""
OPEN_SUITE = """
def test_open(llmperf, llm_request_rate):
    llmperf.measure(rate=llm_request_rate)
"""
#: After the kill, how long the run's processes may take to notice and go.
GONE_WITHIN_S = 20


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(procs: list[psutil.Process]) -> list[str]:
    """The ones still running (a zombie has exited: only its parent's reaping is left)."""
    left = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return left


def kill_while_workers_send(pytester: pytest.Pytester, *args: str) -> list[psutil.Process]:
    """Start pytest, wait until two load-generator workers are sending, SIGKILL it; the
    processes that descended from it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--llm-client-workers", "2",
         *args],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = descendants(proc.pid)
            workers = [p for p in found if _is_worker(p)]
            if len(workers) >= 2:
                time.sleep(1.0)  # well inside the level's runs
                found = descendants(proc.pid)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                return found
            time.sleep(0.1)
        raise AssertionError("no two load-generator workers within 60 s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _is_worker(p: psutil.Process) -> bool:
    try:
        return p.parent() is not None and "forkserver" in " ".join(p.parent().cmdline())
    except psutil.Error:
        return False


def assert_all_gone(found: list[psutil.Process]) -> None:
    assert any(_is_worker(p) or "forkserver" in " ".join(p.cmdline()) for p in found)
    deadline = time.monotonic() + GONE_WITHIN_S
    while alive(found) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        left = alive(found)
        assert left == [], f"still running {GONE_WITHIN_S} s after pytest's SIGKILL: {left}"
    finally:
        for p in found:  # never leave them to the next test
            try:
                p.kill()
            except psutil.Error:
                pass


def test_sigkill_during_a_multi_worker_closed_level_leaves_no_process(pytester):
    write_profiles(pytester, concurrency="[16]", output_len=512, runs=40, min_requests=64,
                   extra_args='"--enable-metrics"')  # fmt: skip
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(profiles.read_text().replace(
        "min_requests = 64\n", "min_requests = 64\nmetrics_interval_s = 0.5\n", 1))  # fmt: skip
    pytester.makepyfile(test_perf=CLOSED_SUITE)
    found = kill_while_workers_send(pytester, "--llm-profile", "sim-base")
    commands = [" ".join(p.cmdline()) for p in found]
    # The server, its watchdog and the gauges' sampler were running too.
    assert any("pytest_llmperf.sim" in c for c in commands), commands
    assert any("servers.series" in c for c in commands), commands
    assert_all_gone(found)


def test_sigkill_during_an_open_loop_level_leaves_no_process(pytester):
    write_profiles(pytester, runs=40, min_requests=400, output_len=256)
    pytester.makepyfile(test_perf=OPEN_SUITE)
    found = kill_while_workers_send(
        pytester, "--llm-profile", "sim-base", "--llm-request-rate", "20"
    )
    assert_all_gone(found)
