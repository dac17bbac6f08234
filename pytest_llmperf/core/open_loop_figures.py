"""The figures only an open-loop run has: latency from the arrival, the client's lag, its
backlog and whether the server kept up (core/metrics.py summarizes the run with them).

Definitions, over the run's window (see :mod:`pytest_llmperf.load.open_loop`):

- ``output_tok_s``: server-reported tokens of the chunks that arrived inside the window ÷ its
  length (for a sustainable rate, close to rate × output length);
- ``ttft_s`` and ``e2e_s``: from the **scheduled arrival** of the requests that arrived inside the
  window: what a user waits, the client's lag and any client queue included (a request cut
  before its first token counts with what it had waited, a lower bound). The same from the send
  are ``open_loop.ttft_from_send_s`` and ``open_loop.e2e_from_send_s``;
- ``open_loop.lag_s``: release − scheduled arrival of every request sent, p50/p99/max: how late
  the client sent. A run whose lag p99 exceeds max(1 ms, 5 % of its TTFT p50 from the send) is
  INVALID: its arrivals were not the ones asked for; unless the server fell behind anyway and
  no send was a whole mean gap late (the lag cannot have made the backlog grow);
- ``open_loop.queue_s``: with ``max_concurrency``, the time a request waited for a slot;
- ``open_loop.offered_req_s``: arrivals scheduled inside the window ÷ its length;
  ``sent_req_s``: requests sent inside it; ``completed_req_s``: requests that finished inside it;
- ``open_loop.sustainable``: False when the backlog (requests arrived and not ended) grew through
  the steady part of the run, as a trend (:func:`backlog_trend`), or the run stopped early for it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from pytest_llmperf.core.records import RequestRecord, RunRecords
from pytest_llmperf.core.stats import MIN_SAMPLES, distribution

#: A run's lag p99 may not exceed the largest of these: an absolute floor, a fraction of the
#: run's TTFT p50 from the send (a 1 ms lag is noise against a 2 s TTFT, not against 2 ms), and a
#: fraction of the mean gap between arrivals (a send that late keeps the arrivals' order and
#: the process's shape). A p99 needs 100 sends (MIN_SAMPLES); a run with fewer is held to its p90.
MAX_LAG_S = 0.001
MAX_LAG_TTFT_FRACTION = 0.05
MAX_LAG_GAP_FRACTION = 0.1
#: A backlog that grows at less than this share of the arrival rate is a stable queue's
#: wander, whatever its significance (a queue at 90 % load fills for tens of seconds after
#: its lead-in): benchmarks/sustainable_power.py, at windows of 20 s or more, reads 10 % under
#: capacity sustainable and 20 % over it not, each in 98-99 % of runs.
GROWTH_SHARE = 0.1
#: The backlog's growth must be positive at this one-sided significance.
GROWTH_ALPHA = 0.01
#: The backlog is read this many times over the steady part of a run (a grid, not the arrivals:
#: its autocorrelation is the queue's, not the arrival process's).
BACKLOG_SAMPLES = 60
#: The Newey-West bandwidth, as a share of the readings.
BACKLOG_BANDWIDTH = 0.13


def backlog_at(records: Sequence[RequestRecord], t: float) -> int:
    """Requests that had arrived by ``t`` and not ended (cut requests end at the cut)."""
    return sum(1 for r in records if r.arrival <= t and (r.end == 0.0 or r.end > t))


def mean_in_flight(
    records: Sequence[RequestRecord], window: tuple[float, float], *, from_arrival: bool = False
) -> float:
    """Mean requests in flight inside the window (Little's law over it): from each one's send,
    or (an open loop's backlog) from its scheduled arrival."""
    opened, closed = window
    if closed <= opened:
        return 0.0
    busy = sum(
        max(0.0, min(r.end or closed, closed) - max(r.arrival if from_arrival else r.start, opened))
        for r in records
    )
    return busy / (closed - opened)


def saturation(run: RunRecords) -> str | None:
    """Why the run was not sustainable, or None: stopped early by its monitor, or its backlog
    grew through the steady part of the run (from the middle of the lead-in, when a sustainable
    queue is steady, to the window's close) as a trend (:func:`backlog_trend`): at a rate above
    GROWTH_SHARE of the arrivals', and significantly."""
    info = run.open_loop
    if info is None or run.window is None:
        return None
    if info.saturated:
        return info.saturated
    records, (opened, closed) = run.records, run.window
    since = info.start + info.lead_s / 2 if info.lead_s else opened
    trend = backlog_trend(records, since, closed)
    if trend is None:
        return None
    slope, low = trend
    if not (low > 0 and slope > GROWTH_SHARE * info.rate):
        return None
    arrivals = sum(1 for r in records if since <= r.arrival < closed)
    completed = sum(1 for r in records if since <= r.end < closed and not r.cancelled)
    return (
        f"the backlog grew by {slope:.2f} requests a second through the steady part of the run "
        f"(at least {low:.2f}, 99 %; {completed} completed of {arrivals} arrived)"
        f"{_ttft_trend(records, run.window)}: the server cannot keep up with {info.rate:g} "
        "requests/s"
    )


def backlog_trend(
    records: Sequence[RequestRecord], since: float, until: float
) -> tuple[float, float] | None:
    """The backlog's growth through [since, until], in requests a second: its least-squares slope
    on BACKLOG_SAMPLES readings, and the slope's one-sided (1 − GROWTH_ALPHA) lower bound with a
    Newey-West standard error (a queue's backlog is autocorrelated: consecutive readings are not
    independent, and a plain standard error would call a stable queue's wander a trend). The
    tolerance is a rate, not a count: it does not grow with a longer window's arrivals. None:
    too short a span to read."""
    from pytest_llmperf.core.student import t_quantile

    span = until - since
    n = BACKLOG_SAMPLES
    if span <= 0 or n < 8:
        return None
    times = [since + span * (k + 0.5) / n for k in range(n)]
    backlog = [float(backlog_at(records, t)) for t in times]
    t_mean, b_mean = statistics.fmean(times), statistics.fmean(backlog)
    x = [t - t_mean for t in times]
    sxx = sum(v * v for v in x)
    slope = sum(xi * (b - b_mean) for xi, b in zip(x, backlog)) / sxx
    u = [xi * (b - b_mean - slope * xi) for xi, b in zip(x, backlog)]
    lags = max(1, int(n * BACKLOG_BANDWIDTH))  # a wide window: a loaded queue's memory is long
    hac = sum(v * v for v in u)
    for lag in range(1, lags + 1):
        weight = 1 - lag / (lags + 1)
        hac += 2 * weight * sum(u[k] * u[k - lag] for k in range(lag, n))
    se = math.sqrt(max(hac, 0.0)) / sxx
    return slope, slope - t_quantile(1 - GROWTH_ALPHA, lags) * se


def _ttft_trend(records: Sequence[RequestRecord], window: tuple[float, float]) -> str:
    """``; TTFT rose from 12 ms to 310 ms with arrival order`` (first and last third)."""
    waits = [
        (r.arrival, (r.chunk_times[0] if r.chunk_times else r.end) - r.arrival)
        for r in sorted(records, key=lambda r: r.arrival)
        if window[0] <= r.arrival < window[1] and (r.chunk_times or r.cancelled)
    ]
    if len(waits) < 6:
        return ""
    third = len(waits) // 3
    first = statistics.median(w for _, w in waits[:third])
    last = statistics.median(w for _, w in waits[-third:])
    return f"; TTFT rose from {first * 1e3:,.0f} ms to {last * 1e3:,.0f} ms with arrival order"


def open_loop_figures(run: RunRecords, ttft_send_p50: float) -> tuple[dict[str, Any], list[str]]:
    """The run's ``open_loop`` figures, and its problems (a client that sent late)."""
    info = run.open_loop
    assert info is not None and run.window is not None
    opened, closed = run.window
    seconds = max(closed - opened, 1e-9)
    records = run.records
    sent = [r for r in records if r.released]
    in_window = [r for r in records if opened <= r.arrival < closed]
    ok = [r for r in in_window if r.error is None]
    lags = [r.released - r.arrival for r in sent]
    lag = distribution(lags)
    lag["max"] = max(lags, default=math.nan)
    queue = [r.start - r.released for r in ok if r.start]
    reason = saturation(run)
    figures: dict[str, Any] = {
        "rate": info.rate,
        "offered_req_s": sum(1 for off in info.offsets if opened <= info.start + off < closed)
        / seconds,
        "sent_req_s": sum(1 for r in sent if opened <= r.start < closed) / seconds,
        "completed_req_s": sum(1 for r in records if opened <= r.end < closed and not r.cancelled)
        / seconds,
        "arrivals": len(in_window),
        "lag_s": lag,
        "queue_s": distribution(queue) if info.max_concurrency else None,
        "max_concurrency": info.max_concurrency,
        "ttft_from_send_s": distribution([r.chunk_times[0] - r.start for r in ok if r.chunk_times]),
        "e2e_from_send_s": distribution([r.e2e for r in ok if not r.cancelled and not r.staggered]),
        "mean_backlog": mean_in_flight(records, run.window, from_arrival=True),
        "sustainable": reason is None,
        "saturation": reason,
        "pacer": info.pacer,
    }
    problems = []
    limit = max(
        MAX_LAG_S,
        MAX_LAG_TTFT_FRACTION * ttft_send_p50 if math.isfinite(ttft_send_p50) else 0.0,
        MAX_LAG_GAP_FRACTION / info.rate,
    )
    q = "p99" if len(lags) >= MIN_SAMPLES["p99"] else "p90"
    figures["lag_limit_s"] = limit
    if lags and lag[q] > limit and not _lag_cannot_explain(reason, lag["max"], info.rate):
        problems.append(
            f"client-bound: the client sent {lag[q] * 1e3:.2f} ms late at the {q[1:]}th "
            f"percentile of {len(lags)} sends (max {lag['max'] * 1e3:.1f} ms; limit "
            f"{limit * 1e3:.2f} ms), so the server did not see the arrivals asked for: give the "
            "client more cores (--llm-client-workers) or keep CPU-heavy work off this machine"
        )
    return figures, problems


def _lag_cannot_explain(saturation: str | None, max_lag: float, rate: float) -> bool:
    """A server that fell behind arrivals the client sent late, but never a whole gap late,
    fell behind a load no heavier than asked: the requests the client held back at any moment
    average under one, and the growth that marks a run not sustainable is 4 or more. Such a run
    keeps its verdict (its lag stays in ``lag_s``); a run the server kept up with is the one
    late arrivals can flatter."""
    return saturation is not None and max_lag * rate < 1.0


def arrival_latencies(
    records: Sequence[RequestRecord], window: tuple[float, float]
) -> tuple[list[float], list[float]]:
    """TTFT and e2e from the scheduled arrival, of the requests that arrived in the window."""
    opened, closed = window
    ttfts, e2es = [], []
    for r in records:
        if r.error is not None or not opened <= r.arrival < closed:
            continue
        if r.chunk_times:
            ttfts.append(r.chunk_times[0] - r.arrival)
        elif r.cancelled:
            ttfts.append(r.end - r.arrival)
        if not r.cancelled and r.end:
            e2es.append(r.end - r.arrival)
    return ttfts, e2es


def schedule_of(run: RunRecords) -> list[float] | None:
    """The run's arrival offsets (seconds from its start, to the microsecond)."""
    if run.open_loop is None:
        return None
    return [round(off, 6) for off in run.open_loop.offsets]
