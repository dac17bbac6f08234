"""Output throughput and latency per concurrency level, for every selected profile.

``pytest perf_suites --llm-profile=eagle3`` runs each test once per level of the profile's
``concurrency`` list against one server started for the whole session.
"""

import pytest


def test_output_throughput(llmperf, llm_concurrency):
    """Σ completion tokens ÷ run duration, closed loop with exactly C requests in flight."""
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)


def test_latency(llmperf, llm_concurrency):
    """TTFT p99 and per-token ITL p50 at each level, gated like throughput but lower is better:
    a level fails when it is significantly slower than its golden by more than the margin, even
    while tok/s holds. Judged on the runs test_output_throughput measured (no server time of its
    own; measured here when that test was deselected). A p99 is nearly the slowest of a run's
    requests and moves more from launch to launch than throughput: the profile's latency margins
    (by default it fails at +30 %). A thinking profile (thinking = true) gates its TTFO too:
    the first answer token, after the thinking."""
    point = llmperf.measured_by("test_output_throughput", llm_concurrency)
    llmperf.check(point, metric="ttft_p99_s")
    llmperf.check(point, metric="itl_p50_s")
    if llmperf.profile.thinking:
        llmperf.check(point, metric="ttfo_p50_s")


@pytest.mark.llmperf(speculative=True)
def test_accept_length(llmperf, llm_concurrency):
    """Tokens a verify step yields at each level, from the engine's own counters, against its
    golden (a drafter that stopped guessing right costs speed before the speedup shows it) and
    the profile's accept_length_floor where it sets one. Speculative profiles only; judged on
    the runs test_output_throughput measured."""
    point = llmperf.measured_by("test_output_throughput", llm_concurrency)
    llmperf.check(point, metric="accept_length")


@pytest.mark.llmperf(speculative=True)
def test_acceptance(llmperf):
    """The acceptance channel: the drafter's accept length at one stream on the shipped prompt
    set (code, math and chat), against its golden (kept per thinking mode) and the profile's
    accept_length_floor, by category in the summary; the message says the smallest drop these
    runs could FAIL."""
    point = llmperf.acceptance()
    llmperf.check(point, metric="accept_length")


def test_single_stream(llmperf, llm_profile):
    """The hand-run benchmark script's figure: one stream after a warm-up, several runs,
    tokens ÷ seconds per request."""
    point = llmperf.measure(concurrency=1, runs=max(3, llm_profile.runs), metric="request_tok_s")
    llmperf.check(point)


def test_speculative_speedup(llmperf_speedup):
    """Speculative ÷ base output tok/s at each level, both measured in this run, against the
    golden speedup: a lost speculative benefit fails even when both absolute figures drift together."""
    llmperf_speedup.check(of="test_output_throughput")
