"""The load generator against real servers: the simulated engine and the exactly-paced SSE server."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from pytest_llmperf.core import metrics
from pytest_llmperf.load.level import ClosedPlan, flush_cache
from pytest_llmperf.load.workers import measure, split
from pytest_llmperf.load.workload import Workload
from tests.helpers import start_sim


@pytest.mark.parametrize("api", ["sglang", "openai"])
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_every_request_gets_the_server_counted_tokens(sim_server, api, transport):
    runs = measure(
        sim_server.url, Workload(api=api, output_len=12), ClosedPlan(3, 9, 2), transport=transport
    )
    assert len(runs) == 2
    for run in runs:
        assert [r.error for r in run.records] == [None] * 9
        for rec in run.records:
            assert rec.completion_tokens == 12
            assert rec.prompt_tokens and rec.prompt_tokens > 0
            assert sum(rec.chunk_tokens()) == 12
            assert rec.chunk_cumulative[-1] == 12
            assert rec.ttft is not None and 0 < rec.ttft < rec.e2e
        m = metrics.summarize_run(run, expected_tokens=12)
        assert m.valid, m.problems
        assert m.accept_length is None


def test_closed_loop_keeps_exactly_c_requests_in_flight(sim_server):
    run = measure(
        sim_server.url, Workload(api="sglang", output_len=32), ClosedPlan(4, 24, 1, warmup=False)
    )[0]
    events = sorted([(r.start, 1) for r in run.records] + [(r.end, -1) for r in run.records])
    in_flight = peak = 0
    for _, delta in events:
        in_flight += delta
        peak = max(peak, in_flight)
    assert peak == 4
    assert metrics.in_flight_while_sending(run.records, 4) > 3.9


def test_speculative_accept_length_comes_from_each_request(eagle_server):
    run = measure(eagle_server.url, Workload(api="sglang", output_len=64), ClosedPlan(4, 16, 1))[0]
    assert all(r.spec_verify_ct for r in run.records)
    multi_token_chunks = sum(1 for r in run.records for n in r.chunk_tokens() if n > 1)
    assert multi_token_chunks > 0
    m = metrics.summarize_run(run, expected_tokens=64)
    assert m.valid, m.problems
    assert m.accept_length == pytest.approx(2.1, abs=0.4)  # the sim's mean, plus the prefill token


def test_failed_requests_are_recorded_not_raised():
    server = start_sim("--sim-fail-every", "3")
    try:
        for api in ("sglang", "openai"):
            run = measure(
                server.url, Workload(api=api, output_len=8), ClosedPlan(2, 6, 1, warmup=False)
            )[0]
            errors = [r.error for r in run.records if r.error]
            assert len(errors) == 2 and all("simulated failure" in e for e in errors), errors
            assert not metrics.summarize_run(run, expected_tokens=8).valid
    finally:
        server.stop()


def test_a_stall_ends_the_level_within_one_timeout_instead_of_one_per_request():
    """Six requests in three runs against a server that stalls every stream: the first stall
    abandons the run's other requests, and the later runs send nothing."""
    server = start_sim("--sim-stall-after-tokens", "3")
    try:
        started = time.monotonic()
        runs = measure(
            server.url,
            Workload(api="sglang", output_len=8),
            ClosedPlan(2, 6, 3, warmup=False),
            timeout_s=1.0,
        )
        elapsed = time.monotonic() - started
        first = runs[0]
        assert first.aborted is not None and first.aborted.startswith("stalled: waited")
        assert "for the next token (request_timeout_s = 1)" in first.aborted
        assert len(first.records) == 2  # the two in flight; the other four were never sent
        assert all(
            r.error and r.error.startswith(("stalled: waited", "abandoned:")) for r in first.records
        )
        assert [len(r.records) for r in runs[1:]] == [0, 0]
        assert elapsed < 3.0, elapsed  # one timeout (1 s) plus the watchdog's 0.25 s tick
    finally:
        server.stop()


def test_cache_flush_between_runs_is_accepted(sim_server):
    runs = measure(
        sim_server.url,
        Workload(api="sglang", output_len=4),
        ClosedPlan(1, 2, 2),
        between_runs=flush_cache,
    )
    assert all(r.error is None for run in runs for r in run.records)


def test_split_shares():
    assert split(10, 3) == [4, 3, 3]
    assert split(250, 4) == [63, 63, 62, 62]


def test_worker_processes_share_c_and_start_together(sim_server):
    # 64-token requests: long enough that a few ms of scheduling between a slot's requests on a
    # busy 2-core machine do not count (with 16 tokens, 3 ms was 5 % of a request).
    runs = measure(
        sim_server.url,
        Workload(api="sglang", output_len=64),
        ClosedPlan(4, 16, 2),
        workers=2,
        between_runs=flush_cache,
    )
    assert len(runs) == 2
    for run in runs:
        assert run.concurrency == 4 and len(run.records) == 16
        assert sorted(r.index for r in run.records) == list(range(16))
        assert all(r.error is None and r.completion_tokens == 64 for r in run.records)
        m = metrics.summarize_run(run, expected_tokens=64)
        # Both halves overlapped in time: one worker's 2 slots alone would average 2 in flight.
        assert m.in_flight_while_sending > 3.5, m


def test_extra_body_fields_reach_every_request_and_the_workload_definition():
    import json

    workload = Workload(
        api="openai", output_len=8, model="smollm2", extra_body={"cache_prompt": False}
    )
    bodies = [json.loads(workload.item(i).body) for i in range(len(workload.prompts.prompts))]
    assert workload.period == len(workload.prompts.prompts)
    assert all(
        b["cache_prompt"] is False and b["max_tokens"] == 8 and b["ignore_eos"] for b in bodies
    )
    assert workload.describe()["extra_body"] == {"cache_prompt": False}  # a hard key of every point
    assert "extra_body" not in Workload(api="openai", output_len=8).describe()


def test_a_stopping_simulated_server_fails_the_requests_it_holds_and_exits_at_once():
    """SIGTERM while twenty 512-token requests wait behind two running ones: every request the
    server holds fails with its reason, so no response keeps it waiting, and it exits at once.
    (It waited out aiohttp's 60 s shutdown timeout, and the plugin's stop SIGKILLed it after
    the profile's shutdown_timeout_s: 10 s at the end of the README's run.)"""
    server = start_sim("--max-running-requests", "2", "--enable-metrics")
    body = json.dumps(
        {
            "text": "hi",
            "sampling_params": {"max_new_tokens": 512, "ignore_eos": True},
            "stream": True,
        }
    ).encode()
    head = b"POST /generate HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
    clients = []
    try:
        for _ in range(20):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            client.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            clients.append(client)
        deadline = time.monotonic() + 10
        while "sglang:num_queue_reqs" not in (
            text := queue_metric(server.url)
        ) or not text.endswith(" 18"):
            assert time.monotonic() < deadline, text
            time.sleep(0.05)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=20)
        assert time.monotonic() - started < 5, time.monotonic() - started
        answer = b""
        while chunk := clients[-1].recv(65536):
            answer += chunk
        assert b"the server is shutting down" in answer, answer[-300:]
    finally:
        for client in clients:
            client.close()
        server.stop()


def queue_metric(url: str) -> str:
    """The simulated server's queue gauge line, as its /metrics says it."""
    import httpx

    lines = httpx.get(f"{url}/metrics", timeout=5).text.splitlines()
    return next((line for line in lines if line.startswith("sglang:num_queue_reqs")), "")
