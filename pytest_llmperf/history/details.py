"""A night's detail in the dashboard: what the server and its GPUs did through the point's runs,
the energy it took, and its profiled run, compact enough for a page of a year of nights.

Only the nights a reader opens a detail for carry one: each series' latest night and every
night it FAILed, WARNed or was INVALID. A server series is thinned to :data:`SPARK` samples
(the tooltip's sparkline); the GPUs are summed up in a line each; a profiled run is its trace's
path and the operations that took most of its time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.core.diagnosis import explain
from pytest_llmperf.core.kernels import stored_shares
from pytest_llmperf.history.series import Night
from pytest_llmperf.host.gpu_series import HELD_BACK

#: Samples a night's server series keeps for its sparkline.
SPARK = 48
#: The nights of a series that carry a detail, besides its latest.
NOTEWORTHY = ("FAIL", "WARN", "INVALID")
GAUGES = (("running_requests", "running"), ("queued_requests", "queued"), ("kv_cache_usage", "kv"))


def wanted(nights: Sequence[Night]) -> list[int]:
    """The stored point ids of the nights that carry a detail."""
    chosen = [n for n in nights if n.verdict in NOTEWORTHY]
    if nights:
        chosen.append(nights[-1])
    return [n.point_id for n in chosen if n.point_id is not None]


def detail(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stored point's detail for the page (None: it has nothing to show)."""
    out: dict[str, Any] = {}
    server = row.get("server_series")
    if isinstance(server, dict) and server.get("t"):
        out["srv"] = thin(server)
        cause = explain(server)
        if cause:
            out["cause"] = cause
    gpus = row.get("gpu_series")
    if isinstance(gpus, dict) and gpus:
        out["gpu"] = [gpu_line(index, trace) for index, trace in sorted(gpus.items())]
    energy = [
        f"{label} {_mean(row[figure]):,.{digits}f}"
        for figure, label, digits in (
            ("energy_j_per_token", "J/token", 3),
            ("tok_s_per_watt", "tok/s per W", 2),
        )
        if row.get(figure)
    ]
    if energy:
        out["energy"] = ", ".join(energy)
    profiled = row.get("server_profile")
    if isinstance(profiled, dict):
        out["prof"] = profile_line(profiled)
    return out or None


def thin(series: Mapping[str, Any], keep: int = SPARK) -> dict[str, Any]:
    """Every ``len / keep``-th sample of the gauges the sparkline draws."""
    n = len(series["t"])
    step = max(1, math.ceil(n / keep))
    picked = range(0, n, step)
    out: dict[str, Any] = {"t": [round(series["t"][i], 2) for i in picked]}
    for gauge, short in GAUGES:
        values = series.get(gauge)
        if values:
            out[short] = [None if values[i] is None else round(values[i], 3) for i in picked]
    return out


def gpu_line(index: str, trace: Mapping[str, Any]) -> str:
    """``GPU 0: 612 W mean, SM 1,410-1,980 MHz, 71 °C at most; power cap (software) 40 %``."""
    parts = []
    power = [p for p in trace.get("power_w") or () if p is not None]
    clocks = [c for c in trace.get("sm_clock_mhz") or () if c is not None]
    temps = [c for c in trace.get("temperature_c") or () if c is not None]
    if power:
        parts.append(f"{_mean(power):,.0f} W mean")
    if clocks:
        parts.append(f"SM {min(clocks):,.0f}-{max(clocks):,.0f} MHz")
    if temps:
        parts.append(f"{max(temps):.0f} °C at most")
    reasons = trace.get("reasons") or []
    held = [
        f"{name} {sum(1 for r in reasons if r and r & bit) / len(reasons):.0%}"
        for bit, name in HELD_BACK.items()
        if any(r and r & bit for r in reasons)
    ]
    line = f"GPU {index}: {', '.join(parts) or 'no readings'}"
    return f"{line}; held back: {', '.join(held)}" if held else line


def profile_line(profiled: Mapping[str, Any]) -> str:
    shown = stored_shares(profiled)
    if shown is None:
        return f"no profile: {profiled.get('problem') or 'empty trace'}"
    return f"profiled: {profiled.get('trace')}; {shown[1]}"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
