"""PNG plots for ``--perf-report`` (matplotlib, an optional extra: ``pytest-llmperf[report]``).

- ``throughput.png``: output tok/s against concurrency per profile, every run as a dot, the mean
  as a line, and the golden's band (from the fail margin below the golden mean to the improve
  margin above it: inside it, a point neither fails nor counts as improved).
- ``speedup.png``: speculative ÷ base per level with its 95 % interval, parity at 1, the
  crossover marked and the levels where speculation should be off shaded.
- ``latency.png``: TTFT and ITL p50 / p99 against concurrency per profile.
- ``latency-by-rate.png``: TTFT p50 and p99 and e2e p99 (from the scheduled arrival) against the
  arrival rate per profile, a level the server could not keep up with as a cross at its rate; the
  SLO's limits as horizontal lines, each profile's capacity under them as a vertical line in its
  colour, its bracket shaded.

Everything here runs after the servers are gone; matplotlib is imported lazily and only here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.metrics import RunMetrics
from pytest_llmperf.core.points import MeasuredPoint
from pytest_llmperf.core.speculative import Analysis
from pytest_llmperf.core.verdict import IMPROVE_MARGIN

#: Colour-blind-safe (Okabe–Ito), one per profile in order of appearance.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    return plt


def _levels_axis(ax: Any, levels: Sequence[int]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(list(levels))
    ax.set_xticklabels([str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency C (requests in flight)")
    ax.grid(True, which="major", alpha=0.3)


def _by_profile(points: Sequence[MeasuredPoint]) -> dict[str, list[MeasuredPoint]]:
    out: dict[str, list[MeasuredPoint]] = {}
    for p in sorted(points, key=lambda p: p.concurrency):
        out.setdefault(p.profile, []).append(p)
    return out


def throughput(points: Sequence[MeasuredPoint], margins: dict[str, float], path: Path) -> Path:
    """``points``: measured output_tok_s points of one test; ``margins``: fail margin per profile."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    levels = sorted({p.concurrency for p in points})
    for k, (profile, pts) in enumerate(_by_profile(points).items()):
        color = PALETTE[k % len(PALETTE)]
        xs = [p.concurrency for p in pts]
        ax.plot(
            xs, [p.summary.mean for p in pts], "-", color=color, lw=1.8, label=f"{profile} (mean)"
        )
        for p in pts:
            # Runs spread a little sideways so that equal values stay visible.
            n = len(p.values)
            offsets = [1 + 0.04 * (i - (n - 1) / 2) / max(n - 1, 1) for i in range(n)]
            ax.plot(
                [p.concurrency * o for o in offsets], p.values, "o", ms=3.5, color=color, alpha=0.55
            )
        golden = [(p.concurrency, p.golden_mean) for p in pts if p.golden_mean]
        if golden:
            gx, gm = zip(*golden)
            fail = margins.get(profile, 0.15)
            ax.fill_between(
                gx,
                [m * (1 - fail) for m in gm],
                [m * (1 + IMPROVE_MARGIN) for m in gm],
                color=color,
                alpha=0.12,
                lw=0,
                label=f"{profile} golden band (−{fail * 100:g} % / +{IMPROVE_MARGIN * 100:g} %)",
            )
            ax.plot(gx, gm, "--", color=color, lw=1, alpha=0.8)
        for p in pts:
            if p.verdict.color == "red":
                ax.annotate(
                    p.verdict.value,
                    (p.concurrency, p.summary.mean),
                    textcoords="offset points",
                    xytext=(0, 8),
                    ha="center",
                    fontsize=8,
                    color="#B00020",
                    fontweight="bold",
                )
    _levels_axis(ax, levels)
    ax.set_ylabel("output tok/s (Σ completion tokens ÷ run duration)")
    ax.set_ylim(bottom=0)
    ax.set_title("Output throughput per concurrency: runs, mean and golden band")
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    return _save(plt, fig, path)


def speedup(analyses: Sequence[Analysis], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=120)
    levels: set[int] = set()
    for k, a in enumerate(analyses):
        color = PALETTE[k % len(PALETTE)]
        xs = [p.concurrency for p in a.points]
        levels.update(xs)
        ys = [p.ratio for p in a.points]
        err = [[p.ratio - p.low for p in a.points], [p.high - p.ratio for p in a.points]]
        ax.errorbar(
            xs,
            ys,
            yerr=err,
            fmt="o-",
            color=color,
            capsize=4,
            lw=1.6,
            label=f"{a.profile} ÷ {a.base_profile} (95 % interval)",
        )
        cross = a.crossover
        if cross is not None:
            ax.axvline(cross.concurrency, color=color, ls=":", lw=1.2)
            ax.annotate(
                f"crossover C = {cross.concurrency}",
                (cross.concurrency, cross.ratio),
                textcoords="offset points",
                xytext=(6, 12),
                fontsize=9,
                color=color,
            )
            ax.axvspan(cross.concurrency, max(xs) * 1.3, color="#B00020", alpha=0.06, lw=0)
    ax.axhline(1.0, color="black", lw=1, alpha=0.7)
    ax.text(max(levels), 1.0, "parity ", va="bottom", ha="right", fontsize=8)
    _levels_axis(ax, sorted(levels))
    ax.set_ylabel("speedup (speculative ÷ base output tok/s)")
    ax.set_title("Speculative decoding speedup, same run (shaded: speculation slower)")
    ax.legend(fontsize=8, frameon=False)
    return _save(plt, fig, path)


#: A latency golden: (profile, run figure such as "ttft_s", percentile, C) → seconds.
LatencyGoldens = dict[tuple[str, str, str, int], float]


def latency(
    points: Sequence[MeasuredPoint], path: Path, goldens: LatencyGoldens | None = None
) -> Path:
    """TTFT and per-token ITL, p50 and p99, per level and profile; a latency that has a golden
    (a gated figure, e.g. ``ttft_p99_s``) shows it as a hollow diamond at its level."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), dpi=120)
    levels = sorted({p.concurrency for p in points})
    goldens = goldens or {}
    for metric, ax, title in (("ttft_s", axes[0], "TTFT"), ("itl_s", axes[1], "ITL per token")):
        for k, (profile, pts) in enumerate(_by_profile(points).items()):
            color = PALETTE[k % len(PALETTE)]
            xs = [p.concurrency for p in pts]
            for q, style in (("p50", "o-"), ("p99", "s--")):
                ys = [p.run_average(_percentile(metric, q)) * 1e3 for p in pts]
                ax.plot(xs, ys, style, color=color, ms=4, lw=1.4, label=f"{profile} {q}")
                gold = [
                    (c, goldens[(profile, metric, q, c)] * 1e3)
                    for c in xs
                    if (profile, metric, q, c) in goldens
                ]
                if gold:
                    ax.plot(
                        *zip(*gold),
                        "D",
                        mfc="none",
                        mec=color,
                        ms=8,
                        mew=1.2,
                        label=f"{profile} {q} golden",
                    )
        _levels_axis(ax, levels)
        _milliseconds_axis(ax)
        ax.set_ylabel(f"{title} (ms, log scale)")
        ax.set_title(f"{title} p50 / p99 per concurrency")
        ax.legend(fontsize=8, frameon=False)
    return _save(plt, fig, path)


#: (figure, style, name); the tail is the SLO's percentile (p99 without a capacity search).
RATE_FIGURES = (("ttft_s", "o-", "TTFT"), ("ttft_s", "s--", "TTFT"), ("e2e_s", "^:", "e2e"))


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
        for k_figure, (metric, style, name) in enumerate(RATE_FIGURES):
            q = "p50" if k_figure == 0 else tail
            ys = [p.run_average(_percentile(metric, q)) * 1e3 for p in pts]
            top = max([top, *ys])
            ax.plot(
                [p.rate for p in pts],
                ys,
                style,
                color=color,
                ms=4,
                lw=1.3,
                label=f"{profile} {name} {q}",
            )
        stuck = [p.rate for p in pts if not p.sustainable]
        if stuck:
            ax.plot(
                stuck,
                [top] * len(stuck),
                "x",
                color=color,
                ms=10,
                mew=2,
                label=f"{profile}: not sustainable",
            )
    limits: dict[str, float] = {}
    for cap in capacities:
        limits.update(cap.capacity.slo)
        color = PALETTE[profiles.index(cap.profile) % len(PALETTE)]
        c = cap.capacity
        if c.max_rate is None:
            continue
        ax.axvline(
            c.max_rate,
            color=color,
            lw=1.6,
            alpha=0.9,
            label=f"{cap.profile} capacity {c.max_rate:,.1f} /s (p{c.percentile:g})",
        )
        if c.low is not None and c.high is not None:
            ax.axvspan(c.low, c.high, color=color, alpha=0.12, lw=0)
    for name, limit in limits.items():
        if name in ("ttft_s", "e2e_s"):
            ax.axhline(limit * 1e3, color="#555555", lw=1, ls="-.")
            shown = "TTFT" if name == "ttft_s" else "e2e"
            ax.annotate(
                f"SLO: {shown} {tail} ≤ {limit * 1e3:g} ms",
                (0.01, limit * 1e3),
                xycoords=("axes fraction", "data"),
                fontsize=8,
                color="#555555",
                va="bottom",
            )
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


def server_series(point: MeasuredPoint, path: Path) -> Path:
    """A point's server gauges through its runs (servers/series.py): running and queued
    requests on the left, KV-cache use on the right, with the verdict in the title."""
    from pytest_llmperf.core.diagnosis import explain

    series = point.server_series or {}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=120)
    t = series.get("t", [])
    for k, (name, label) in enumerate(
        (("running_requests", "running requests"), ("queued_requests", "queued requests"))
    ):
        if name in series:
            ax.plot(t, series[name], "-", color=PALETTE[k], lw=1.4, label=label)
    ax.set_xlabel("seconds into the point's runs")
    ax.set_ylabel("requests")
    ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    if "kv_cache_usage" in series:
        kv = ax.twinx()
        values = [None if v is None else v * 100 for v in series["kv_cache_usage"]]
        kv.plot(t, values, ":", color=PALETTE[2], lw=1.6, label="KV cache used (%)")
        kv.set_ylim(0, 105)
        kv.set_ylabel("KV cache used (%)")
        more = kv.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    # Below the axes: the curves fill the top where a cache is full and a queue long.
    ax.legend(handles, labels, fontsize=8, frameon=False, loc="upper center",
              bbox_to_anchor=(0.5, -0.16), ncol=3)  # fmt: skip
    cause = explain(series)
    title = f"{point.label}: {point.verdict.value}"
    ax.set_title(title + (f"\n{cause}" if cause else ""), fontsize=9)
    return _save(plt, fig, path)


def _milliseconds_axis(ax: Any) -> None:
    """A log axis labelled in plain milliseconds at 1-2-5 steps (no "6×10⁰"), so a median below
    the lowest decade still sits between labelled ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", axis="y", alpha=0.3)


def _percentile(metric: str, q: str) -> Callable[[RunMetrics], float]:
    """A run's ``metric`` percentile ``q`` (e.g. ttft_s p99)."""

    def figure(run: RunMetrics) -> float:
        return float(getattr(run, metric)[q])

    return figure


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
