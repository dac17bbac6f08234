"""The server's own counters around a point: Prometheus ``/metrics``, read before and after.

SGLang serves it with ``--enable-metrics``, llama-server with ``--metrics``. What a point stores
is run-scoped: the change of each counter over the point's runs (tokens generated and prompted,
prefix-cache hits, requests, queue time) and the gauges as they stood at the end (KV-cache use,
the cache hit rate, the accept length), next to the client's own figures. Read outside the
measured windows (before the warm-up, after the last run), so the scrape costs the server
nothing that is measured.
"""

from __future__ import annotations

import math
import re

import httpx

#: Prometheus name → the stored name, for counters (summed over labels: TP ranks, …).
COUNTERS = {
    "sglang:generation_tokens_total": "generated_tokens",
    "sglang:prompt_tokens_total": "prompt_tokens",
    "sglang:cached_tokens_total": "cached_tokens",
    "sglang:num_requests_total": "requests",
    "sglang:num_aborted_requests_total": "aborted_requests",
    "sglang:queue_time_seconds_sum": "queue_time_s_sum",
    "sglang:queue_time_seconds_count": "queue_time_count",
    "llamacpp:tokens_predicted_total": "generated_tokens",
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:n_decode_total": "decode_calls",
}
#: Gauges: their value at the end of the point (the largest over labels).
GAUGES = {
    "sglang:token_usage": "kv_cache_usage",
    "sglang:cache_hit_rate": "cache_hit_rate",
    "sglang:spec_accept_length": "spec_accept_length",
    "sglang:num_queue_reqs": "queued_requests",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:requests_deferred": "queued_requests",
}
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


def scrape(
    base_url: str, headers: dict[str, str], timeout_s: float = 5.0
) -> dict[str, float] | None:
    """The server's counters now; None when it serves no /metrics (or nothing this module knows)."""
    try:
        response = httpx.get(f"{base_url}/metrics", headers=headers, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if response.status_code != 200 or len(response.content) > 8_000_000:
        return None
    return parse(response.text) or None


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The run-scoped change of each counter (a counter that went down means the server
    restarted: left out), the gauges' end values, and the mean queue time it implies."""
    out: dict[str, float] = {}
    counters = set(COUNTERS.values())
    for name, value in after.items():
        if name in counters:
            if name in before and value >= before[name]:
                out[name] = value - before[name]
        else:
            out[name] = value
    count = out.pop("queue_time_count", None)
    total = out.pop("queue_time_s_sum", None)
    if count and total is not None:
        out["queue_time_mean_s"] = total / count
    if out.get("prompt_tokens") and "cached_tokens" in out:
        out["prefix_cache_hit_fraction"] = out["cached_tokens"] / out["prompt_tokens"]
    return out
