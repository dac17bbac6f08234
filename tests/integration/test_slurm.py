"""Multi-node launches through a real Slurm (launcher = "srun"): the local cluster of
scripts/start-slurm-local.sh (Debian's slurm-wlm and munge; two slurmd on this host), the
simulated engine in its multi-node mode (rank 0 serves, rank 1 blocks until rank 0 exits, as
SGLang's ranks do). After every test Slurm lists no job and no rank process is left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import (
    FAST_SIM_ARGS,
    THROUGHPUT_SUITE,
    ctrl_c_enabled,
    processes_with,
    project_with,
)

REPO = Path(__file__).resolve().parents[2]
FAST = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)


@pytest.fixture(scope="module")
def slurm():
    """The local cluster, started (seconds when it runs); skipped without Slurm installed,
    failed instead under LLMPERF_REQUIRE_SLURM=1 (.ci/run)."""
    if shutil.which("srun") is None or shutil.which("slurmctld") is None:
        message = "Slurm is not installed here: run bash scripts/install-test-services.sh"
        if os.environ.get("LLMPERF_REQUIRE_SLURM") == "1":
            pytest.fail(message + " (LLMPERF_REQUIRE_SLURM=1)")
        pytest.skip(message)
    started = subprocess.run(["bash", str(REPO / "scripts" / "start-slurm-local.sh")],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert started.returncode == 0, started.stderr


def slurm_jobs() -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True,
                          timeout=30).stdout.split("\n")[:-1]  # fmt: skip


def project(pytester: pytest.Pytester, marker: str, *sim_args: str) -> None:
    extra = "".join(f', "{a}"' for a in sim_args)
    project_with(
        pytester,
        f"""
        [profiles.two-node]
        engine = "sim"
        model = "{marker}"
        args = [{FAST}{extra}]
        launcher = "srun"
        nodes = 2
        srun_args = ["--time=10"]
        concurrency = [4]
        runs = 2
        output_len = 64
        min_requests = 8
        ready_timeout_s = 60
        shutdown_timeout_s = 5
        """,
    )


def rank_1_running(marker: str) -> bool:
    return any("--node-rank 1" in " ".join(p.info["cmdline"] or ()) for p in processes_with(marker))


def assert_nothing_left(marker: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (processes_with(marker) or slurm_jobs()):
        time.sleep(0.25)
    assert not slurm_jobs(), slurm_jobs()
    assert not processes_with(marker), [p.info["cmdline"] for p in processes_with(marker)]


@pytest.mark.parametrize("allocation", ["srun requests it", "inside salloc"])
def test_two_nodes_through_srun_measure_rank_0_and_leave_nothing(pytester, slurm, allocation):
    marker = f"marker-srun-{uuid.uuid4().hex[:10]}"
    project(pytester, marker)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    command = ["python", "-m", "pytest", "-p", "no:cacheprovider", "--llm-profile", "two-node",
               "--perf-update", "--perf-json", "out.json"]  # fmt: skip
    if allocation == "inside salloc":
        command = ["salloc", "--nodes=2", "--time=10", *command]
    result = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    data = json.loads((pytester.path / "out.json").read_text())
    assert data["fingerprint"]["hard"]["two-node"]["server_args"]["nnodes"] == 2
    (log,) = pytester.path.glob(".llmperf/runs/*/two-node.log")
    text = log.read_text()
    assert "1: " in text and "rank 1 joined rank 0" in text  # labelled by rank
    assert "0: " in text and "fired up and ready to roll" in text
    # scancel signals every rank at once: rank 1 ends by the signal or as rank 0 goes.
    assert "Terminating StepId=" in text or "rank 1: rank 0 is gone" in text
    assert_nothing_left(marker)


def test_a_rank_killed_mid_run_fails_fast_with_the_log_and_leaves_nothing(pytester, slurm):
    marker = f"marker-srun-kill-{uuid.uuid4().hex[:10]}"
    project(pytester, marker)
    pytester.makepyfile(
        test_perf=f"""
import os, signal, threading, time

import psutil


def kill_rank_1():
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or ())
        if "{marker}" in line and "pytest_llmperf.sim" in line and "--node-rank 1" in line:
            os.kill(proc.pid, signal.SIGKILL)


def test_output_throughput(llmperf):
    threading.Timer(0.6, kill_rank_1).start()
    llmperf.check(llmperf.measure(concurrency=4, runs=30))


def test_after(llmperf):
    llmperf.check(llmperf.measure(concurrency=4))
"""
    )
    started = time.monotonic()
    result = pytester.runpytest_subprocess("--llm-profile", "two-node", "--perf-update", "-rs",
                                           timeout=300)  # fmt: skip
    result.assert_outcomes(failed=1, skipped=1)
    output = result.stdout.str()
    assert "two-node: the server exited with code" in output
    assert "rank 1 lost" in output and "two-node.log" in output
    assert "Traceback" not in output and "During handling" not in output
    assert time.monotonic() - started < 60
    assert_nothing_left(marker)


def test_ctrl_c_while_the_ranks_load_leaves_no_job_step_and_no_rank(pytester, slurm):
    marker = f"marker-srun-int-{uuid.uuid4().hex[:10]}"
    project(pytester, marker, "--sim-load-time", "60")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    proc = subprocess.Popen(
        ["python", "-m", "pytest", "-p", "no:cacheprovider", "--llm-profile", "two-node",
         "--perf-update"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=ctrl_c_enabled,
    )  # fmt: skip
    try:
        # Wait for rank 1 itself, not for a count of processes: srun runs as two processes of
        # the same command line, so three can be there before rank 1 is.
        deadline = time.monotonic() + 60
        while not rank_1_running(marker) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert rank_1_running(marker)
        assert slurm_jobs(), "the job step is running"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in output, output[-3000:]
    assert_nothing_left(marker)
