"""The Prometheus ``/metrics`` names this plugin reads, and the parser: standard library only,
so the window sampler (servers/series.py), a process of its own, starts in milliseconds."""

from __future__ import annotations

import math
import re

#: Prometheus name → the stored name, for counters (summed over labels: TP ranks, …).
COUNTERS = {
    "sglang:generation_tokens_total": "generated_tokens",
    "sglang:prompt_tokens_total": "prompt_tokens",
    "sglang:cached_tokens_total": "cached_tokens",
    "sglang:num_requests_total": "requests",
    "sglang:num_aborted_requests_total": "aborted_requests",
    "sglang:queue_time_seconds_sum": "queue_time_s_sum",
    "sglang:queue_time_seconds_count": "queue_time_count",
    # The simulated engine's self-check (pytest_llmperf/sim/engine.py): its timeline's slip.
    "sglang:sim_behind_schedule_seconds_total": "behind_schedule_s",
    "llamacpp:tokens_predicted_total": "generated_tokens",
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:n_decode_total": "decode_calls",
}
#: Gauges: their value at the end of the point (the largest over labels).
GAUGES = {
    "sglang:token_usage": "kv_cache_usage",
    "sglang:num_running_reqs": "running_requests",
    "sglang:gen_throughput": "gen_throughput",
    "llamacpp:requests_processing": "running_requests",
    "sglang:cache_hit_rate": "cache_hit_rate",
    "sglang:spec_accept_length": "spec_accept_length",
    "sglang:num_queue_reqs": "queued_requests",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:requests_deferred": "queued_requests",
}
#: Gauges only a series over the window means something of: their value after the runs (an
#: idle server's) is left out of a point's before-and-after counters.
SERIES_ONLY = frozenset({"running_requests", "gen_throughput"})
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse(text: str) -> dict[str, float]:
    """The counters and gauges of a /metrics page that this module knows, by stored name."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None:
            continue
        name, raw = found.group(1), found.group(3)
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        if name in COUNTERS:
            out[COUNTERS[name]] = out.get(COUNTERS[name], 0.0) + value
        elif name in GAUGES:
            out[GAUGES[name]] = max(out.get(GAUGES[name], -math.inf), value)
    return out
