"""Output throughput per concurrency level, for every selected profile.

``pytest perf_suites --llm-profile=eagle3`` runs each test once per level of the profile's
``concurrency`` list against one server started for the whole session.
"""


def test_output_throughput(llmperf, llm_concurrency):
    """Σ completion tokens ÷ run duration, closed loop with exactly C requests in flight."""
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)


def test_single_stream(llmperf, llm_profile):
    """The hand-run benchmark script's figure: one stream after a warm-up, several runs,
    tokens ÷ seconds per request."""
    point = llmperf.measure(concurrency=1, runs=max(3, llm_profile.runs), metric="request_tok_s")
    llmperf.check(point)


def test_speculative_speedup(llmperf_speedup):
    """Speculative ÷ base output tok/s at each level, both measured in this run, against the
    golden speedup: a lost speculative benefit fails even when both absolute figures drift together."""
    llmperf_speedup.check(of="test_output_throughput")
