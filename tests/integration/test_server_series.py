"""The server over the window, end to end on the simulated engine: its /metrics gauges sampled
through each point's runs by a process of its own, stored with the point, and a slow point's
verdict naming the cause they show: a KV cache too small for the level (memory-bound), and a
rate level whose queue grows (over capacity)."""

from __future__ import annotations

import json

from tests.helpers import FAST_SIM_ARGS, project_with

SIM = ", ".join(f'"{a}"' for a in [*FAST_SIM_ARGS, "--enable-metrics"])
#: 100-token prompts and 128 tokens out: 228 tokens of KV cache a request.
PROFILE = f"""
[profiles.sim]
engine = "sim"
model = "sim/series"
args = [{SIM}]
concurrency = [16]
runs = 2
min_requests = 48
input_len = 100
output_len = 128
metrics_interval_s = 0.1
ready_timeout_s = 30
shutdown_timeout_s = 5
request_timeout_s = 30

"""
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


def test_a_memory_starved_server_fails_with_the_cause_its_own_metrics_show(pytester):
    project_with(pytester, PROFILE, SUITE)
    pytester.runpytest("--llm-profile", "sim", "--perf-update").assert_outcomes(passed=1)
    # The same server with room for two requests' KV cache (another process held the GPU's
    # memory when it sized its cache): the other fourteen of C = 16 wait.
    project_with(
        pytester,
        PROFILE.replace(f"args = [{SIM}]", f'args = [{SIM}, "--sim-kv-tokens", "456"]'),
        SUITE,
    )
    result = pytester.runpytest(
        "--llm-profile", "sim", "--perf-json", "out.json", "--perf-report", "report",
        "--perf-profile-on=fail",
    )  # fmt: skip
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    series = point["server_series"]
    assert series["interval_s"] == 0.1 and len(series["t"]) >= 10, series["t"]
    running = sorted(series["running_requests"])
    # Two at a time (the warm-up's short requests fit three).
    assert max(series["kv_cache_usage"]) == 1.0 and running[len(running) // 2] == 2
    assert point["verdict"] == "FAIL", point["message"]
    result.stdout.fnmatch_lines(
        ["*the server's own metrics: KV cache at 100% with 14 requests queued, 2 running for "
         "*% of the window: the server was memory-bound (out of KV cache), not slower per token"]
    )  # fmt: skip
    # An engine without a profiler says so, in one line.
    assert point["server_profile"] == {"problem": "engine 'sim' has no profiler to ask"}
    result.stdout.fnmatch_lines(
        [
            "*no profile of this point: engine 'sim' has no profiler to ask",
            "llmperf: server profiles (--perf-profile-on)",
            "sim C=16: no profile: engine 'sim' has no profiler to ask",
        ]
    )
    assert result.ret == 1
    # The failing point's series, drawn for the report.
    (plot,) = (pytester.path / "report").glob("series-*.png")
    assert plot.name == "series-sim-output_throughput-C_16.png"
    assert plot.read_bytes().startswith(b"\x89PNG") and plot.stat().st_size > 20_000
    assert plot.name in (pytester.path / "report" / "summary.md").read_text()


#: A slow server of four slots: 32-token requests at the sim's own speed (about 0.35 s each),
#: so it serves about 11 requests/s, and its queue is SGLang's (queued_requests).
OVER = f"""
[profiles.sim]
engine = "sim"
model = "sim/over"
args = [{SIM}, "--sim-speed", "1", "--max-running-requests", "4"{{fault}}]
concurrency = [4]
runs = 2
min_requests = 30
output_len = 32
request_rate = [7]
settle_s = 0.6
metrics_interval_s = 0.25
ready_timeout_s = 30
shutdown_timeout_s = 5
request_timeout_s = 60
"""
RATE_SUITE = """
def test_rate_latency(llmperf, llm_request_rate):
    llmperf.check(llmperf.measure(rate=llm_request_rate), metric="ttft_p90_s")
"""


def test_an_over_capacity_level_fails_with_the_queue_its_own_metrics_show(pytester):
    # 7 requests/s: sustainable at full speed; at half speed (the fault knob, no setting
    # changed) the server serves about 5.5 a second, and its queue grows through the window.
    project_with(pytester, OVER.format(fault=""), RATE_SUITE)
    recorded = pytester.runpytest(
        "--llm-profile", "sim", "--perf-update", "--perf-update-runs", "2"
    )
    recorded.assert_outcomes(passed=1)
    project_with(pytester, OVER.format(fault=', "--sim-throughput-multiplier", "0.5"'), RATE_SUITE)
    result = pytester.runpytest("--llm-profile", "sim", "--perf-json", "out.json")
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    (point,) = [p for p in points if p["metric"] == "ttft_p90_s"]
    assert point["verdict"] == "FAIL" and point["sustainable"] is False, point["message"]
    queued = point["server_series"]["queued_requests"]
    assert max(queued) >= 4 and queued[-1] > queued[0], queued
    result.stdout.fnmatch_lines(
        ["*sim 7 req/s ttft_p90_s: FAIL — NOT SUSTAINABLE: *; the server's own metrics: the "
         "requests in the server grew through the window (from * to * running and queued, "
         "+* a second): arrivals outpaced it, over capacity*"]
    )  # fmt: skip
    assert result.ret == 1
