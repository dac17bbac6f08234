"""``latency-by-rate.png``: latency against the arrival rate, with the SLO and the capacity.

Per profile: TTFT p50 and p99 and e2e p99 (from the scheduled arrival) at each rate level,
the mean over its runs; a level the server could not keep up with is a cross at its rate. The
SLO's limits are horizontal lines; each profile's capacity under them is a vertical line in its
colour, its bracket shaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.points import MeasuredPoint
from pytest_llmperf.render.plots import PALETTE, _milliseconds_axis, _percentile, _pyplot, _save

#: (figure, style, name); the tail is the SLO's percentile (p99 without a capacity search).
FIGURES = (("ttft_s", "o-", "TTFT"), ("ttft_s", "s--", "TTFT"), ("e2e_s", "^:", "e2e"))


def latency_by_rate(
    points: Sequence[MeasuredPoint], capacities: Sequence[CapacityPoint], path: Path
) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=120)
    profiles = list(dict.fromkeys([*(p.profile for p in points), *(c.profile for c in capacities)]))
    rates = sorted({p.rate for p in points if p.rate is not None})
    tail = f"p{capacities[0].capacity.percentile:g}" if capacities else "p99"
    top = 0.0
    for k, profile in enumerate(profiles):
        color = PALETTE[k % len(PALETTE)]
        pts = sorted((p for p in points if p.profile == profile), key=lambda p: p.rate or 0.0)
        for k_figure, (metric, style, name) in enumerate(FIGURES):
            q = "p50" if k_figure == 0 else tail
            ys = [p.run_average(_percentile(metric, q)) * 1e3 for p in pts]
            top = max([top, *ys])
            ax.plot([p.rate for p in pts], ys, style, color=color, ms=4, lw=1.3,
                    label=f"{profile} {name} {q}")  # fmt: skip
        stuck = [p.rate for p in pts if not p.sustainable]
        if stuck:
            ax.plot(stuck, [top] * len(stuck), "x", color=color, ms=10, mew=2,
                    label=f"{profile}: not sustainable")  # fmt: skip
    limits: dict[str, float] = {}
    for cap in capacities:
        limits.update(cap.capacity.slo)
        color = PALETTE[profiles.index(cap.profile) % len(PALETTE)]
        c = cap.capacity
        if c.max_rate is None:
            continue
        ax.axvline(c.max_rate, color=color, lw=1.6, alpha=0.9,
                   label=f"{cap.profile} capacity {c.max_rate:,.1f} /s (p{c.percentile:g})")  # fmt: skip
        if c.low is not None and c.high is not None:
            ax.axvspan(c.low, c.high, color=color, alpha=0.12, lw=0)
    for name, limit in limits.items():
        if name in ("ttft_s", "e2e_s"):
            ax.axhline(limit * 1e3, color="#555555", lw=1, ls="-.")
            shown = "TTFT" if name == "ttft_s" else "e2e"
            ax.annotate(f"SLO: {shown} {tail} ≤ {limit * 1e3:g} ms", (0.01, limit * 1e3),
                        xycoords=("axes fraction", "data"), fontsize=8, color="#555555",
                        va="bottom")  # fmt: skip
    ax.set_xscale("log")
    if rates:
        ax.set_xticks(sorted(set(rates)))
        ax.set_xticklabels([f"{r:g}" for r in sorted(set(rates))])
        ax.minorticks_off()
    ax.set_xlabel("arrival rate (requests/s, Poisson unless the profile says otherwise)")
    _milliseconds_axis(ax)
    ax.set_ylabel("latency from the scheduled arrival (ms, log scale)")
    ax.set_title("Latency per arrival rate, the SLO and the capacity under it")
    ax.legend(fontsize=7, frameon=False, loc="upper left", ncol=2)
    return _save(plt, fig, path)
