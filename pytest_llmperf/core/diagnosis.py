"""What the server's own series says about a slow point: a known cause in one line, or None.

A FAIL says how much slower a point was. When the server's gauges over the window
(servers/series.py) show a cause the engines' docs name (AIPerf's: requests waiting that grow
mean saturation; a KV cache above 0.9 means memory pressure), the verdict names it, so the
on-call engineer reads "memory-bound" or "over capacity" before opening a profiler:

- **memory-bound**: the KV cache at least :data:`KV_FULL` full with requests queued, in at least
  :data:`MOST` of the samples. The server was out of cache, not slower per token: fewer
  requests ran at once than were sent.
- **a growing queue**: the requests in the server (running and queued: over capacity it first
  runs more at once, then queues what it cannot run) rise through the window, by at least
  :data:`MIN_GROWTH` requests from its first third to its last, with a positive least-squares
  slope whose t-test gives p < :data:`ALPHA` (GuideLLM tests the slope of concurrency the
  same way). Arrivals outpace the server: over capacity. A closed loop holds them at C.

A series of fewer than :data:`MIN_SAMPLES` samples says nothing. :func:`causes` adds what the
GPUs say: a GPU held back by power or heat during the runs (host/gpu_series.py), and a GPU at
its own default power limit for more of the time than when the golden was recorded, by at least
:data:`MIN_HELD_SHARE` of the samples (at full load a GPU sits at its limit as a matter of
course: only more of it than the golden's is a cause).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.core.points import POWER_CAP_SHARE, MeasuredPoint, Point

KV_FULL = 0.95
MOST = 0.5
MIN_GROWTH = 4.0
ALPHA = 0.01
MIN_SAMPLES = 6
#: A reason a GPU was held back in less than this share of a window's samples is not named
#: (host/gpu_series.py); a GPU's time at its default power limit is named only where it
#: exceeds the golden's by at least this share.
MIN_HELD_SHARE = 0.10


def causes(point: Point, golden: Mapping[str, Any] | None = None) -> list[str]:
    """The lines a FAIL or WARN of ``point`` adds from what was sampled through its runs: the
    server's own cause (:func:`explain`), and a GPU held back by power or heat (slower may be
    the clocks', not the server's), the power limit counted against ``golden`` (the golden
    point's fields)."""
    if not isinstance(point, MeasuredPoint):
        return []
    lines = []
    cause = explain(point.server_series)
    if cause:
        lines.append(f"the server's own metrics: {cause}")
    held = sorted({h for run in point.runs for h in run.gpu_held_back})
    more = at_power_limit_more(point.power_cap_share, (golden or {}).get(POWER_CAP_SHARE))
    if more:
        held.append(more)
    if held:
        lines.append(
            f"the GPU was held back during its runs ({'; '.join(held)}): slower may be the "
            "clocks', not the server's; check the node's power and cooling"
        )
    return lines


def at_power_limit_more(tonight: float | None, golden: Any) -> str | None:
    """A GPU at its default power limit for at least MIN_HELD_SHARE more of the samples than
    when the golden was recorded, as a held-back clause; None (also where either is unknown)."""
    if tonight is None or not isinstance(golden, (int, float)) or isinstance(golden, bool):
        return None
    if tonight < MIN_HELD_SHARE or tonight - golden < MIN_HELD_SHARE:
        return None
    return (
        f"at its power limit, power cap (software), in {tonight:.0%} of samples, "
        f"{golden:.0%} when the golden was recorded"
    )


def explain(series: Mapping[str, Any] | None) -> str | None:
    """The first known cause the series shows, as the clause a verdict adds; None."""
    if not series or len(series.get("t") or ()) < MIN_SAMPLES:
        return None
    return memory_bound(series) or queue_growing(series)


def memory_bound(series: Mapping[str, Any]) -> str | None:
    kv, queued = series.get("kv_cache_usage"), series.get("queued_requests")
    if not kv or not queued:
        return None
    both = [(k, q) for k, q in zip(kv, queued) if k is not None and q is not None]
    full = [(k, q) for k, q in both if k >= KV_FULL and q >= 1]
    if len(both) < MIN_SAMPLES or len(full) < MOST * len(both):
        return None
    waiting = sorted(q for _, q in full)[len(full) // 2]
    running = _median(series.get("running_requests"))
    ran = f", {running:.0f} running" if running is not None else ""
    return (
        f"KV cache at {max(k for k, _ in full):.0%} with {waiting:.0f} requests queued{ran} for "
        f"{len(full) / len(both):.0%} of the window: the server was memory-bound (out of KV "
        "cache), not slower per token"
    )


def queue_growing(series: Mapping[str, Any]) -> str | None:
    in_server = _in_server(series)
    pairs = [(t, n) for t, n in zip(series["t"], in_server) if n is not None]
    if len(pairs) < MIN_SAMPLES:
        return None
    third = max(1, len(pairs) // 3)
    first = sum(n for _, n in pairs[:third]) / third
    last = sum(n for _, n in pairs[-third:]) / third
    slope, p = _slope(pairs)
    if last - first < MIN_GROWTH or slope <= 0 or p >= ALPHA:
        return None
    return (
        f"the requests in the server grew through the window (from {first:.0f} to {last:.0f} "
        f"running and queued, {slope:+.1f} a second): arrivals outpaced it, over capacity"
    )


def _in_server(series: Mapping[str, Any]) -> list[float | None]:
    """Running plus queued requests per sample: a server over capacity first runs more at once
    (a closed loop's stays at C), then queues what it cannot run."""
    running, queued = series.get("running_requests"), series.get("queued_requests")
    if running is None and queued is None:
        return []
    n = len(series["t"])
    running, queued = running or [0.0] * n, queued or [0.0] * n
    return [None if r is None or q is None else r + q for r, q in zip(running, queued)]


def _slope(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope of q over t and its one-sided p-value (slope > 0)."""
    from pytest_llmperf.core.student import t_sf

    n = len(pairs)
    mt = sum(t for t, _ in pairs) / n
    mq = sum(q for _, q in pairs) / n
    sxx = sum((t - mt) ** 2 for t, _ in pairs)
    if sxx <= 0:
        return 0.0, 1.0
    slope = sum((t - mt) * (q - mq) for t, q in pairs) / sxx
    residual = sum((q - mq - slope * (t - mt)) ** 2 for t, q in pairs)
    se = math.sqrt(residual / (n - 2) / sxx) if n > 2 else math.inf
    if se == 0:
        return slope, 0.0 if slope > 0 else 1.0
    return slope, t_sf(slope / se, n - 2)


def _median(values: Sequence[float | None] | None) -> float | None:
    found = sorted(v for v in values or () if v is not None)
    return found[len(found) // 2] if found else None
