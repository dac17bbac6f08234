"""SGLang's real router (sglang-router from PyPI, in the SGLang venv) in front of simulated
workers: launched as one profile, a remote router whose workers are asked for, the server's
counters summed over the workers with the accept length weighted by their tokens, a worker
killed mid-run, and nothing left running afterwards.

(The real SGLang behind the router: tests/engines/test_sglang_cpu.py, profile sglang-cpu-dp2.)"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import psutil
import pytest

from pytest_llmperf.servers import metrics
from tests import sglang_real
from tests.helpers import (
    FAST_SIM_ARGS,
    THROUGHPUT_SUITE,
    processes_with,
    project_with,
    start_sim,
)

FAST = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)


def router_project(pytester: pytest.Pytester, marker: str) -> None:
    project_with(
        pytester,
        f"""
        [profiles.dp2]
        engine = "sim"
        model = "{marker}"
        args = [{FAST}, "--enable-metrics"]
        router = {{ workers = 2, policy = "round_robin", python = "{sglang_real.PYTHON}" }}
        concurrency = [4]
        runs = 2
        output_len = 32
        min_requests = 8
        ready_timeout_s = 60
        shutdown_timeout_s = 5
        """,
    )


def router_processes(marker: str) -> list[psutil.Process]:
    """The workers (their model path carries the marker) and routers (in front of them)."""
    found = processes_with(marker)
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if proc.info["name"] == "sglang::router" or "sglang_router" in " ".join(
                proc.info["cmdline"] or ()
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_a_router_profile_launches_workers_and_router_names_both_and_stops_all(pytester):
    sglang_real.require_router()
    marker = f"marker-router-{os.getpid()}-{time.monotonic_ns()}"
    router_project(pytester, marker)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profile", "dp2", "--perf-update", "--perf-json", "out.json")
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "out.json").read_text())
    described = data["profiles"]["dp2"]
    assert described["topology"] == {
        "router": "sglang-router", "policy": "round_robin", "workers": 2, "dp_size": 2,
        "router_version": "0.3.2",
    }  # fmt: skip
    urls = [w["url"] for w in described["workers"]]
    assert len(set(urls)) == 2 and described["base_url"] not in urls
    assert all(w["version"] and w["server_info"]["tp_size"] == 1 for w in described["workers"])
    hard = data["fingerprint"]["hard"]["dp2"]
    assert hard["topology"] == {"router": "sglang-router", "policy": "round_robin",
                                "workers": 2, "dp_size": 2}  # fmt: skip
    (point,) = data["points"]
    # Both workers generated: the counters are their sum (round robin splits the requests).
    run_dir = next(pytester.path.glob(".llmperf/runs/*"))
    logs = {name: (run_dir / f"dp2-{name}.log").read_text() for name in ("w0", "w1")}
    assert all(log.count("gen throughput") >= 5 for log in logs.values()), logs
    # The cache was flushed before each run, through the router, on both workers.
    assert all("Cache flushed successfully!" in log for log in logs.values())
    assert point["server_counters"]["requests"] >= 2 * 8
    assert not router_processes(marker), "a worker or the router outlived the run"
    # A golden of two workers does not gate four: the topology is a hard key.
    text = (pytester.path / "profiles.toml").read_text().replace("workers = 2", "workers = 3")
    (pytester.path / "profiles.toml").write_text(text)
    again = pytester.runpytest("--llm-profile", "dp2")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*topology*workers*2*3*"])
    assert not router_processes(marker)


@pytest.fixture
def two_workers_that_accept_differently():
    """Two speculative sim workers: one accepts 1.6 tokens per verify, the other 3.2."""
    low = start_sim("--speculative-algorithm", "EAGLE3", "--sim-accept-length", "1.6",
                    "--enable-metrics")  # fmt: skip
    try:
        high = start_sim("--speculative-algorithm", "EAGLE3", "--sim-accept-length", "3.2",
                         "--enable-metrics")  # fmt: skip
    except BaseException:
        low.stop()
        raise
    yield low, high
    low.stop()
    high.stop()


def test_a_remote_router_s_workers_are_asked_for_and_accept_length_is_token_weighted(
    pytester, two_workers_that_accept_differently
):
    sglang_real.require_router()
    low, high = two_workers_that_accept_differently
    port = _free_port()
    proc = psutil.Popen(
        [str(sglang_real.PYTHON), "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
         "--port", str(port), "--worker-urls", low.url, high.url, "--policy", "round_robin",
         "--prometheus-host", "127.0.0.1", "--prometheus-port", str(_free_port())],
        stdout=open(pytester.path / "router.log", "wb"), stderr=-2, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_routed(f"http://127.0.0.1:{port}", 2)
        project_with(
            pytester,
            f"""
            [profiles.remote-dp2]
            engine = "sglang"
            url = "http://127.0.0.1:{port}"
            args = ["--speculative-algorithm", "EAGLE3"]
            router = {{ policy = "round_robin" }}
            concurrency = [4]
            runs = 2
            output_len = 64
            min_requests = 8
            """,
            THROUGHPUT_SUITE,
        )
        result = pytester.runpytest(
            "--llm-profile", "remote-dp2", "--perf-update", "--perf-json", "out.json"
        )
        result.assert_outcomes(passed=1)
        data = json.loads((pytester.path / "out.json").read_text())
        workers = data["profiles"]["remote-dp2"]["workers"]
        assert sorted(w["url"] for w in workers) == sorted([low.url, high.url])
        counters = data["points"][0]["server_counters"]
        # The truth: each worker's own gauge, weighted by the tokens it generated (all of them
        # during this point: the workers served nothing else).
        each = [metrics.scrape(w.url, {}) for w in (low, high)]
        assert each[0] and each[1]
        tokens = [c["generated_tokens"] for c in each]
        accepts = [c["spec_accept_length"] for c in each]
        assert accepts[0] < 2.0 < 2.8 < accepts[1], accepts
        weighted = sum(a * t for a, t in zip(accepts, tokens)) / sum(tokens)
        assert counters["generated_tokens"] == pytest.approx(sum(tokens), rel=0.02)
        assert counters["spec_accept_length"] == pytest.approx(weighted, rel=0.02)
        assert abs(counters["spec_accept_length"] - accepts[0]) > 0.3  # not the first worker's
        assert proc.is_running()  # attached: the router is someone else's
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_a_worker_killed_mid_run_fails_with_its_log_and_the_rest_stops(pytester):
    sglang_real.require_router()
    marker = f"marker-router-kill-{os.getpid()}-{time.monotonic_ns()}"
    router_project(pytester, marker)
    pytester.makepyfile(
        test_perf="""
import os, signal, threading

import psutil


def test_output_throughput(llmperf, llm_server):
    worker = llm_server.workers[1]
    threading.Timer(0.6, lambda: os.kill(worker.process.pid, signal.SIGKILL)).start()
    point = llmperf.measure(concurrency=4, runs=20)
    llmperf.check(point)


def test_after(llmperf):
    llmperf.check(llmperf.measure(concurrency=4))
"""
    )
    result = pytester.runpytest("--llm-profile", "dp2", "--perf-update", "-rs")
    result.assert_outcomes(failed=1, skipped=1)
    output = result.stdout.str()
    assert "dp2-w1: the server exited with code -9 while it was being measured" in output
    assert "dp2-w1.log" in output and "last lines:" in output
    assert "Traceback" not in output and "During handling" not in output
    assert not router_processes(marker)


def _free_port() -> int:
    from pytest_llmperf.servers.lifecycle import free_port

    return free_port("127.0.0.1")


def _wait_routed(url: str, workers: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(url + "/readiness", timeout=2)
            if answer.status_code == 200 and answer.json().get("healthy_workers") == workers:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"the router at {url} did not count {workers} healthy workers in 30 s")


def test_combine_weights_the_accept_length_by_tokens_and_sums_counters():
    low = {
        "generated_tokens": 300.0,
        "requests": 3.0,
        "spec_accept_length": 1.5,
        "kv_cache_usage": 0.2,
        "prompt_tokens": 100.0,
        "cached_tokens": 50.0,
    }
    high = {"generated_tokens": 100.0, "requests": 1.0, "spec_accept_length": 3.5,
            "kv_cache_usage": 0.4, "prompt_tokens": 100.0, "cached_tokens": 0.0}  # fmt: skip
    both = metrics.combine([low, high])
    assert both["generated_tokens"] == 400 and both["requests"] == 4
    assert both["spec_accept_length"] == pytest.approx((1.5 * 300 + 3.5 * 100) / 400)
    assert both["kv_cache_usage"] == 0.4
    assert both["prefix_cache_hit_fraction"] == pytest.approx(0.25)
