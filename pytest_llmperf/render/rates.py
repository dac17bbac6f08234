"""The terminal's open-loop tables: latency per request rate, and capacity under the SLO."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.format import format_value, ms
from pytest_llmperf.core.points import MeasuredPoint

RATE_COLUMNS = (
    "profile",
    "test",
    "rate /s",
    "measured mean ± sd (n)",
    "golden",
    "Δ %",
    "seen /s",
    "lag p99 ms",
    "TTFT p50/p99 ms",
    "e2e p99 ms",
    "verdict",
)


def _average(point: MeasuredPoint, key: str, q: str | None = None) -> float:
    def value(run: object) -> float | None:
        figures = getattr(run, "open_loop", None) or {}
        got = figures.get(key)
        return got.get(q) if q is not None and isinstance(got, dict) else got

    return point.run_average(value)


def rate_row(point: MeasuredPoint) -> tuple[str, ...]:
    """One rate level's cells: what was offered and seen, how late the client sent, latency
    from the arrival, and NOT SUSTAINABLE where the server could not keep up."""
    from pytest_llmperf.render.terminal import change_cell, drift_cell

    s = point.summary
    unit = point.unit
    test = point.node.short_name
    if point.gated_from is not None:
        test += f" {point.metric}" + (" (ms)" if unit == "s" else f" ({unit})")
    verdict = point.verdict.value + (" (not gated)" if point.ungated else "") + drift_cell(point)
    if not point.sustainable:
        verdict += ", NOT SUSTAINABLE"
    seen = _average(point, "sent_req_s")
    return (
        point.profile,
        test,
        f"{point.rate:g}" + (f" (≤{point.concurrency})" if point.concurrency else ""),
        f"{format_value(s.mean, unit, bare=True)} ± {format_value(s.sd, unit, bare=True)} ({s.n})"
        if math.isfinite(s.mean)
        else f"- ({s.n})",
        "-" if point.golden_mean is None else format_value(point.golden_mean, unit, bare=True),
        change_cell(point),
        f"{seen:,.2f}" if math.isfinite(seen) else "-",
        ms(_average(point, "lag_s", "p99")),
        f"{ms(point.run_average(lambda r: r.ttft_s['p50']))} / "
        f"{ms(point.run_average(lambda r: r.ttft_s['p99']))}",
        ms(point.run_average(lambda r: r.e2e_s["p99"])),
        verdict,
    )


def rate_table_lines(points: Sequence[MeasuredPoint]) -> list[str]:
    """A fixed-width table of the rate levels, by profile, test and rate."""
    from pytest_llmperf.render.terminal import aligned

    ordered = sorted(
        points, key=lambda p: (p.profile, p.node.short_name, p.rate or 0.0, p.gated_from or "")
    )
    lines = aligned(
        [RATE_COLUMNS, *map(rate_row, ordered)], right={2, 3, 4, 5, 6, 7, 8, 9}, rule=True
    )
    lines.append(
        "(rate: requests/s offered, ≤N with a max_concurrency cap; seen: requests/s the server "
        "received in the window; lag: send − scheduled arrival; TTFT and e2e count from the "
        "scheduled arrival)"
    )
    return lines


def capacity_lines(capacities: Sequence[CapacityPoint], bases: dict[str, str | None]) -> list[str]:
    """Each profile's capacity with its bracket and verdict, and a speculative profile's as a
    ratio of its base's (``bases``: profile → its base, where it has one)."""
    if not capacities:
        return []
    rows = [("profile", "capacity /s", "bracket /s", "probes", "golden /s", "verdict")]
    by_profile: dict[str, float] = {}
    for point in capacities:
        cap = point.capacity
        if cap.max_rate is not None:
            by_profile[point.profile] = cap.max_rate
        golden = point.golden_mean
        rows.append(
            (
                point.profile,
                "-" if cap.max_rate is None else f"{cap.max_rate:,.2f}",
                f"[{_rate(cap.low)}, {_rate(cap.high)}]",
                str(len(cap.probes)),
                "-" if golden is None else f"{golden:,.2f}",
                point.verdict.value,
            )
        )
    from pytest_llmperf.render.terminal import aligned

    first = capacities[0].capacity
    limits = ", ".join(f"{k} ≤ {ms(v)} ms" for k, v in first.slo.items())
    lines = [
        f"capacity under the SLO ({limits} at p{first.percentile:g}; TTFT and e2e from the arrival):"
    ]
    lines += ["  " + line for line in aligned(rows, right={1, 3, 4})]
    for spec, base in bases.items():
        if base and by_profile.get(spec) and by_profile.get(base):
            ratio = by_profile[spec] / by_profile[base]
            lines.append(
                f"  {spec} ÷ {base}: {ratio:.2f}× the capacity"
                + (" (speculation serves fewer requests/s within the SLO)" if ratio < 1 else "")
            )
    return lines


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"
