"""The server's own counters around a point: Prometheus ``/metrics``, read before and after.

SGLang serves it with ``--enable-metrics``, llama-server with ``--metrics``. What a point stores
is run-scoped: the change of each counter over the point's runs (tokens generated and prompted,
prefix-cache hits, requests, queue time) and the gauges as they stood at the end (KV-cache use,
the cache hit rate, the accept length), next to the client's own figures. Read outside the
measured windows (before the warm-up, after the last run), so the scrape costs the server
nothing that is measured.

Behind a router, each worker is read (the router generates no tokens): the counters are summed
over the workers, and the accept length is the workers' mean weighted by the tokens each
generated over the point, not the first worker's (bench_serving reads ``[0]``, so a router or
DP ranks show one worker's accept length).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from pytest_llmperf.servers.prometheus import COUNTERS, SERIES_ONLY, parse

if TYPE_CHECKING:
    from pytest_llmperf.servers.lifecycle import ServerHandle


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
        if name in SERIES_ONLY:
            continue
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


def scrape_server(handle: ServerHandle) -> dict[str, dict[str, float]] | None:
    """Every server that generates the tokens now (a router's workers each, else the server),
    by URL; None when none serves a /metrics this module reads."""
    urls = [w.base_url for w in handle.workers] or [handle.base_url]
    found = {url: scrape(url, handle.headers) for url in urls}
    return {url: counters for url, counters in found.items() if counters} or None


def server_delta(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
) -> dict[str, float]:
    """:func:`delta` per server, combined: see :func:`combine`."""
    return combine([delta(before[url], after[url]) for url in after if url in before])


def combine(deltas: list[dict[str, float]]) -> dict[str, float]:
    """Several servers' point deltas as one: counters and the means they imply recomputed from
    the sums; the accept length and the cache hit rate weighted by each server's generated
    tokens over the point (a server that generated none does not count); other gauges: the
    largest (the fullest KV cache, the longest queue)."""
    if len(deltas) == 1:
        return deltas[0]
    out: dict[str, float] = {}
    counters = set(COUNTERS.values()) - {"queue_time_s_sum", "queue_time_count"}
    for name in counters:
        values = [d[name] for d in deltas if name in d]
        if values:
            out[name] = sum(values)
    for name in ("spec_accept_length", "cache_hit_rate"):
        pairs = [(d[name], d.get("generated_tokens", 0.0)) for d in deltas if name in d]
        weight = sum(w for _, w in pairs)
        if pairs and weight > 0:
            out[name] = sum(v * w for v, w in pairs) / weight
    for name in ("kv_cache_usage", "queued_requests"):
        values = [d[name] for d in deltas if name in d]
        if values:
            out[name] = max(values)
    queued = [
        (d["queue_time_mean_s"], d.get("requests", 0.0)) for d in deltas if "queue_time_mean_s" in d
    ]
    if queued and sum(n for _, n in queued) > 0:
        out["queue_time_mean_s"] = sum(m * n for m, n in queued) / sum(n for _, n in queued)
    if out.get("prompt_tokens") and "cached_tokens" in out:
        out["prefix_cache_hit_fraction"] = out["cached_tokens"] / out["prompt_tokens"]
    return out
