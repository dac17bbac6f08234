"""Open-loop load against servers whose truth is known: the paced server's arrival log says
what rate it saw, its ``--slots`` give an M/D/N queue of known capacity, and the simulated
engine runs the shipped rate suite end to end with its goldens.

What is asserted here is what the server saw and what the plugin concluded, never how long
something took (timings on 2 shared cores are noisy; benchmarks/open_loop_accuracy.py measures
lag and rate precision, with its output quoted in the docs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import numpy as np
import pytest

from pytest_llmperf.core.capacity import search
from pytest_llmperf.core.metrics import summarize_run
from pytest_llmperf.core.schedule import Arrivals
from pytest_llmperf.load.level import OpenPlan
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from tests.helpers import start_paced, write_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]

ITL_MS = 2.0
TOKENS = 32
SERVICE_S = TOKENS * ITL_MS / 1000  # a stream lasts exactly this long once it has a slot


@pytest.fixture
def queue():
    """The paced server with 2 slots: capacity exactly 2 ÷ 64 ms = 31.25 requests/s."""
    server = start_paced(ITL_MS, 1, "--slots", "2")
    yield server
    server.stop()


def run_at(url: str, rate: float, runs: int = 1, workers: int = 1, process: str = "poisson",
           window_s: float = 2.0, salt: int = 7, tokens: int = TOKENS):  # fmt: skip
    workload = Workload(api="sglang", output_len=tokens, salt=salt)
    plan = OpenPlan(Arrivals(rate, process), 16, runs, window_s=window_s, settle_s=0.3)
    return measure(url, workload, plan, workers=workers)


def server_arrivals(url: str, since: float) -> list[float]:
    """When the server says the run's requests arrived (its clock is this machine's monotonic)."""
    return sorted(a for a, _, _ in httpx.get(url + "/stats").json() if a >= since)


def run_not_client_bound(url: str, rate: float, workers: int, tokens: int):
    """One 5 s run, taken again once if the client fell behind its schedule, as the plugin's
    capacity probe re-measures a client-bound probe: a scheduling hiccup on a shared runner (a
    CI run once saw 5 ms at the 99th percentile at 50 requests/s, where 0.5-0.6 ms is usual) is
    the client's, and what this test asks is what the server saw."""
    for _ in range(2):
        (run,) = run_at(url, rate, workers=workers, window_s=5.0, tokens=tokens)
        m = summarize_run(run, tokens)
        if not any(p.startswith("client-bound") for p in m.problems):
            break
    return run, m


# The lag limit is 10 % of the mean gap (1 ms at 100 requests/s, 4 ms at 25). On 2 cores, with
# another process keeping half a core busy (benchmarks are never run so; CI runners are), one
# worker sent at 60 requests/s with a p99 lag of 0.5-0.6 ms, but at 100 up to 1.2 ms, and two
# workers beside the server (three processes on two cores) 3.4-7.4 ms at 30 requests/s: the
# plugin rightly called those runs client-bound. CI's runner once had one worker 5 ms late at
# p99 at 50 requests/s, twice in a row (limit 2 ms). So: 25 requests/s from one worker (8-token
# requests: 200 events a second to parse), and two workers deal out a schedule at 10.
@pytest.mark.parametrize(
    ("rate", "workers", "tokens"), [(6.0, 1, TOKENS), (10.0, 2, TOKENS), (25.0, 1, 8)]
)
def test_the_server_sees_the_rate_asked_for(rate, workers, tokens):
    server = start_paced(ITL_MS, 1)  # no slot limit: never the bottleneck
    try:
        # 5 s windows: the window's tokens (rate × tokens) need tens of arrivals to settle
        # within 5 % (with 16, requests cut at its close moved them by up to 7 %).
        run, m = run_not_client_bound(server.url, rate, workers, tokens)
        # The lead-in and the window [open, close): whole parts of the schedule, each holding
        # exactly rate × its length of arrivals (the drain is cut short).
        seen = [a for a in server_arrivals(server.url, run.open_loop.start) if a < run.window[1]]
    finally:
        server.stop()
    # The mean gap the server saw from the run's start to the window's close is 1/rate.
    assert (run.window[1] - run.open_loop.start) / len(seen) == pytest.approx(1 / rate, rel=0.03)
    gaps = np.diff(seen)
    assert (
        0.6 < float(np.std(gaps) / np.mean(gaps)) < 1.4
    )  # Poisson: a coefficient of variation of 1
    assert not m.problems, m.problems
    assert m.open_loop["sustainable"]
    assert m.open_loop["offered_req_s"] == pytest.approx(rate, rel=0.01)
    assert m.output_tok_s == pytest.approx(rate * tokens, rel=0.05)
    lag = m.open_loop["lag_s"]
    assert math.isfinite(lag["p99"]) and lag["max"] >= lag["p99"] >= lag["p50"] >= 0
    assert m.open_loop["pacer"] == "timerfd"
    assert len(m.schedule) >= len(seen)


def test_constant_arrivals_are_evenly_spaced_at_the_server():
    server = start_paced(ITL_MS, 1)
    try:
        (run,) = run_at(server.url, 10.0, process="constant")
        seen = [a for a in server_arrivals(server.url, run.open_loop.start) if a < run.window[1]]
    finally:
        server.stop()
    gaps = np.diff(seen)
    assert float(np.std(gaps) / np.mean(gaps)) < 0.1  # what the Poisson check above tells apart


def test_every_run_of_a_level_starts_on_time(queue):
    """The workers' shared start is set once each has paid for its next run (its requests, the
    level's checks on the runs so far). Set before, a worker's first check of a run (a 0.2 s
    import of scipy in a fresh worker) sent the first arrivals of run 2 of every open level
    about 200 ms late, a burst the server was never asked for."""
    runs = run_at(queue.url, 0.5 * 2 / SERVICE_S, runs=3, window_s=0.6)
    assert len(runs) == 3
    for k, run in enumerate(runs, 1):
        first = min(run.records, key=lambda rec: rec.arrival)
        # 0.1 s: a busy runner's hiccups were 5-22 ms (see above); the bug sent 0.2-0.3 s late.
        assert first.released - first.arrival < 0.1, (k, first.released - first.arrival)


def test_over_capacity_the_level_is_not_sustainable_and_stops(queue):
    runs = run_at(queue.url, 1.5 * 2 / SERVICE_S, runs=3)
    # Two runs that could not keep up end the level; the third is never made.
    assert len(runs) == 2
    for run in runs:
        m = summarize_run(run, TOKENS)
        assert m.open_loop["sustainable"] is False
        assert "the backlog grew" in m.open_loop["saturation"]
        assert m.open_loop["completed_req_s"] < m.open_loop["offered_req_s"]


def test_below_capacity_the_level_is_sustainable(queue):
    (run,) = run_at(queue.url, 0.5 * 2 / SERVICE_S)
    m = summarize_run(run, TOKENS)
    assert m.open_loop["sustainable"], m.open_loop["saturation"]
    assert not m.problems


def test_a_cap_on_concurrency_waits_for_a_slot_and_says_how_long(queue):
    workload = Workload(api="sglang", output_len=TOKENS, salt=3)
    plan = OpenPlan(Arrivals(10.0), 16, 1, max_concurrency=1, window_s=2.0, settle_s=0.3)
    (run,) = measure(queue.url, workload, plan)
    m = summarize_run(run, TOKENS)
    # One slot for a 64 ms stream at 10 requests/s: some arrivals wait, and TTFT from the
    # arrival counts the wait that TTFT from the send leaves out.
    assert m.open_loop["queue_s"]["p99"] > 0.01
    assert m.ttft_s["p99"] > m.open_loop["ttft_from_send_s"]["p99"]
    starts = sorted(r.start for r in run.records if r.start)
    ends = sorted(r.end for r in run.records if r.start)
    # Never more than one in flight: each request starts after the one before it ended.
    assert all(s >= e - 1e-4 for s, e in zip(starts[1:], ends))


def md2_e2e_p90(rate: float, n: int = 200_000, seed: int = 1) -> float:
    """The e2e p90 of the paced server's queue at ``rate``: Poisson arrivals, 2 slots, 64 ms."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    free = [0.0, 0.0]
    e2e = np.empty(n)
    for k, a in enumerate(arrivals):
        slot = 0 if free[0] <= free[1] else 1
        start = max(a, free[slot])
        free[slot] = start + SERVICE_S
        e2e[k] = free[slot] - a
    return float(np.percentile(e2e[n // 10 :], 90))


def true_capacity(limit: float) -> float:
    low, high = 1.0, 2 / SERVICE_S
    for _ in range(30):
        mid = (low + high) / 2
        low, high = (mid, high) if md2_e2e_p90(mid) <= limit else (low, mid)
    return low


@pytest.mark.slow
def test_the_capacity_under_an_slo_brackets_the_queue_s_truth(queue):
    limit = 0.15
    truth = true_capacity(limit - 0.002)  # the server's own ~1 ms per stream, each way
    made: dict[float, list] = {}
    calls = [0]

    def measure_at(rate: float, runs: int):
        calls[0] += 1  # every call its own schedules (a run number restarts at 1 per call)
        for run in run_at(queue.url, rate, runs=runs, window_s=1.5, salt=calls[0]):
            made.setdefault(rate, []).append(summarize_run(run, TOKENS))
        return made[rate]

    found = search("paced", measure_at, {"e2e_s": limit}, 90, 16.0, resolution=0.2)
    assert found.low is not None and found.high is not None
    print(f"capacity {found.max_rate:.2f} [{found.low:.2f}, {found.high:.2f}], truth {truth:.2f}")
    # Short windows estimate a p90 with noise: the bracket is within 15 % of the truth.
    assert found.high / found.low <= 1.2 + 1e-9
    assert found.low * 0.85 <= truth <= found.high * 1.15


def test_a_capacity_is_never_above_the_rate_the_queue_can_serve(queue):
    """The issue's case on a real queue of known capacity (2 slots of 64 ms: 31.25 requests/s)
    with an SLO so loose (e2e p90 1.5 s) that only the queue's growth can break it: started at
    1.02 × the capacity, where a short window's figures and backlog look fine, the search
    reports a capacity below it, and every probe at or above it says it did not hold."""
    capacity = 2 / SERVICE_S
    made: dict[float, list] = {}
    calls = [0]

    def measure_at(rate: float, runs: int):
        calls[0] += 1
        for run in run_at(queue.url, rate, runs=runs, window_s=1.5, salt=calls[0]):
            made.setdefault(rate, []).append(summarize_run(run, TOKENS))
        return made[rate]

    found = search("paced", measure_at, {"e2e_s": 1.5}, 90, 1.02 * capacity)
    print([(round(p.rate, 2), p.held, p.why) for p in found.probes])
    assert found.max_rate is not None and found.max_rate < capacity
    assert all(not p.held for p in found.probes if p.rate >= capacity)
    assert found.probes[0].rate == pytest.approx(1.02 * capacity) and not found.probes[0].held


RATE_SUITE = """
def test_rate_latency(llmperf, llm_request_rate):
    point = llmperf.measure(rate=llm_request_rate)
    llmperf.check(point, metric="ttft_p90_s")
"""


def quick_lead_in(pytester: pytest.Pytester, metrics_interval_s: float | None = None) -> None:
    """A lead-in of 0.3 s instead of settle_s's 3 s default (the sim needs no more); and the
    server's gauges sampled every ``metrics_interval_s`` where given (runs of a second or two)."""
    profiles = pytester.path / "profiles.toml"
    text = profiles.read_text()
    at = text.index("min_requests = ")
    at = text.index("\n", at) + 1
    more = f"metrics_interval_s = {metrics_interval_s}\n" if metrics_interval_s else ""
    profiles.write_text(text[:at] + "settle_s = 0.3\n" + more + text[at:])


def test_rate_levels_record_then_gate_with_one_schedule_for_both_profiles(pytester):
    # 30 arrivals a window (1.5 s at 20 requests/s): a p90 needs 10 values a run, and a
    # window of 4 expected arrivals had 4 once in CI (a WARN: too few to gate).
    write_profiles(pytester, body="", runs=2, min_requests=30)
    quick_lead_in(pytester)
    pytester.makepyfile(test_rates=RATE_SUITE)
    args = [
        "--llm-profile",
        "sim-base,sim-spec",
        "--llm-request-rate",
        "20",
        "-p",
        "no:cacheprovider",
    ]
    recorded = pytester.runpytest(*args, "--perf-update", "--perf-update-runs", "3")
    recorded.assert_outcomes(passed=2)
    gated = pytester.runpytest(*args, "--perf-json", "out.json")
    gated.assert_outcomes(passed=2)
    out = gated.stdout.str()
    assert "llmperf: latency per request rate (open loop)" in out
    assert "output throughput per concurrency" not in out  # no closed-loop point: no empty table
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    by_profile = {p["profile"]: p for p in points if p["gated_from"] is None}
    base, spec = by_profile["sim-base"], by_profile["sim-spec"]
    assert base["rate"] == 20.0 and base["sustainable"] is True
    # Run by run, both profiles were offered the same arrivals; each run its own.
    for b, s in zip(base["runs"], spec["runs"]):
        assert b["schedule"] == s["schedule"]
    assert base["runs"][0]["schedule"] != base["runs"][1]["schedule"]
    # The same server gated: never a FAIL. A WARN is allowed: a TTFT p90 of 3-4 ms moves by
    # tenths of a millisecond with whatever else runs on 2 cores (in a full run of the suite a
    # whole session read 4.0 against 3.4 ms, +18 % at p = 0.03), and "a drop to the 30 % margin
    # could not be ruled out" is then the honest verdict.
    verdicts = [p["verdict"] for p in points if p["gated_from"]]
    assert verdicts and set(verdicts) <= {"PASS", "WARN"}, [p["message"] for p in points]


def test_a_level_sustainable_in_its_golden_fails_when_it_no_longer_is(pytester):
    # 40 arrivals a window (1 s at 40 requests/s): enough to tell a growing queue from noise.
    marker = write_profiles(pytester, runs=2, min_requests=40)
    quick_lead_in(pytester)
    pytester.makepyfile(test_rates=RATE_SUITE)
    args = ["--llm-request-rate", "40", "-p", "no:cacheprovider"]
    pytester.runpytest(*args, "--perf-update", "--perf-update-runs", "2").assert_outcomes(passed=1)
    # The same server (same fingerprint), a twentieth as fast: 40 requests/s is now beyond it.
    write_profiles(
        pytester, marker=marker, runs=2, min_requests=40,
        extra_args='"--sim-throughput-multiplier", "0.05"',
    )  # fmt: skip
    quick_lead_in(pytester)
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*sim-base 40 req/s ttft_p90_s: FAIL — NOT SUSTAINABLE: the backlog grew*It was "
         "sustainable in its golden*: the server no longer keeps up with 40 requests/s*"]
    )  # fmt: skip


CAPACITY_SUITE = """
def test_capacity(llmperf, llm_profile):
    point = llmperf.capacity()
    llmperf.check_capacity(point)
"""


def test_capacity_records_then_gates_and_is_reported(pytester):
    # A server a fifth as fast, running four requests at a time: its capacity, and so every
    # probe's rate, stays small, and the client-lag limit (10 % of the mean gap) large. With
    # no cap on running requests, probes at 32 requests/s (limit 3.1 ms) had the client
    # 3.3-3.8 ms late at p90 in full runs of the suite on 2 cores (INVALID, rightly).
    write_profiles(pytester, runs=2, min_requests=8,
                   extra_args='"--sim-throughput-multiplier", "0.2", "--max-running-requests", "4"')  # fmt: skip
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(
        profiles.read_text().replace(
            "min_requests = 8\n",
            "min_requests = 8\nrequest_rate = [8]\nslo = { e2e_s = 0.3 }\nslo_percentile = 90\nsettle_s = 0.3\n",
            1,
        )
    )
    pytester.makepyfile(test_cap=CAPACITY_SUITE)
    args = ["-p", "no:cacheprovider", "--perf-json", "out.json"]
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    gold = json.loads((pytester.path / "baselines" / "sim-base" / "sim.json").read_text())
    entry = gold["points"]["test_cap.py::test_capacity[capacity]"]
    assert (
        entry["metric"] == "capacity_req_s"
        and entry["low"] <= entry["summary"]["mean"] <= entry["high"]
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["capacity under the SLO (e2e_s ≤ 300.0 ms at p90; TTFT and e2e from the arrival):",
         "  sim-base *"]
    )  # fmt: skip
    (cap,) = json.loads((pytester.path / "out.json").read_text())["capacity"]
    assert cap["profile"] == "sim-base" and cap["verdict"] in ("PASS", "WARN", "IMPROVED")
    assert cap["low"] == cap["max_rate"] < cap["high"] <= cap["low"] * 1.1 + 1e-9
    held = [p["rate"] for p in cap["probes"] if p["held"]]
    broke = [p["rate"] for p in cap["probes"] if not p["held"]]
    assert max(held) == cap["low"] and min(broke) == cap["high"]
    # The gate started from the golden's bracket: its low, then (once that held) its high.
    first, *later = cap["probes"]
    assert first["rate"] == entry["low"]
    assert not first["held"] or later[0]["rate"] == entry["high"], cap["probes"]


def test_a_profile_without_an_slo_has_no_capacity_to_find(pytester):
    write_profiles(pytester)
    pytester.makepyfile(test_cap=CAPACITY_SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*sim-base has no slo, so no capacity under one: add the limits*"])


REPLAY_SUITE = """
def test_replay(llmperf, llm_profile):
    point = llmperf.replay()
    llmperf.check(point, metric="ttft_p90_s")
"""
SAMPLE_TRACE = REPO_ROOT / "examples" / "traces" / "mooncake-sample.jsonl"


def test_a_trace_is_replayed_at_its_own_times_with_its_shared_prefixes(pytester):
    write_profiles(pytester, runs=2, min_requests=8)
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(
        profiles.read_text().replace(
            "min_requests = 8\n",
            'min_requests = 8\ntrace = "trace.jsonl"\ntime_scale = 0.25\nsettle_s = 0.3\n',
            1,
        )
    )
    (pytester.path / "trace.jsonl").write_bytes(SAMPLE_TRACE.read_bytes())
    pytester.makepyfile(test_replay=REPLAY_SUITE)
    args = ["-p", "no:cacheprovider", "--perf-json", "out.json"]
    result = pytester.runpytest(*args, "--perf-update", "--perf-update-runs", "2")
    result.assert_outcomes(passed=1)
    (point, *_) = json.loads((pytester.path / "out.json").read_text())["points"]
    lines = [json.loads(line) for line in SAMPLE_TRACE.read_text().splitlines()]
    first = lines[0]["timestamp"]
    expected = [round((entry["timestamp"] - first) / 1000 * 0.25, 6) for entry in lines]
    for run in point["runs"]:
        assert run["schedule"] == expected  # the trace's own times, at a quarter of them
        assert run["problems"] == []
    # Every prompt went out at its exact length (the server reported each one's count back: a
    # differing count would be a problem above), and later turns found their history's blocks
    # in the server's prefix cache.
    run = point["runs"][0]
    assert 0.5 * sum(e["input_length"] for e in lines) < run["prompt_tokens"]
    assert run["cached_tokens"] > 0.3 * run["prompt_tokens"]
    assert point["workload"]["trace"]["format"] == "mooncake-trace"


def test_a_broken_trace_names_its_line_and_field(pytester):
    write_profiles(pytester)
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(
        profiles.read_text().replace("runs = 2\n", 'runs = 2\ntrace = "t.jsonl"\n', 1)
    )
    (pytester.path / "t.jsonl").write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 4}\n'
        '{"timestamp": 5, "input_length": "ten", "output_length": 4}\n'
    )
    pytester.makepyfile(test_replay=REPLAY_SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*sim-base: trace *t.jsonl, line 2: field 'input_length' is 'ten'; expected a number >= 0"]
    )


RATE_AND_E2E_SUITE = """
def test_rate_latency(llmperf, llm_request_rate):
    point = llmperf.measure(rate=llm_request_rate)
    llmperf.check(point, metric="ttft_p90_s")
    llmperf.check(point, metric="e2e_p90_s")
"""


def test_a_level_too_slow_for_any_request_to_end_records_and_gates_without_its_e2e(pytester):
    """Overloaded so far that each run is stopped before any request of its window ends: the
    e2e percentile has no value in any run. The level is recorded NOT SUSTAINABLE by its TTFT
    (always measured: a request cut before its first token counts with what it waited), its
    e2e is skipped with the reason, and the next night is judged the same way: no INVALID, no
    MISSING golden (issue 41's recording at 512 tokens failed here)."""
    write_profiles(
        pytester, runs=2, min_requests=40, output_len=512,
        extra_args='"--sim-throughput-multiplier", "0.05"',
    )  # fmt: skip
    quick_lead_in(pytester)
    pytester.makepyfile(test_rates=RATE_AND_E2E_SUITE)
    args = ["--llm-request-rate", "40", "-p", "no:cacheprovider", "-rs"]
    for extra in (["--perf-update"], []):
        result = pytester.runpytest(*args, *extra)
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(
            ["SKIPPED * sim-base 40 req/s e2e_p90_s: NOT SUSTAINABLE, and no run has e2e_p90_s: "
             "the server fell behind (the backlog grew*) before a request of the window ended; "
             "the level is recorded and judged by its other figures"]
        )  # fmt: skip
        verdict = "RECORDED" if extra else "PASS"
        result.stdout.fnmatch_lines([f"*ttft_p90_s (ms)*{verdict}*NOT SUSTAINABLE"])
