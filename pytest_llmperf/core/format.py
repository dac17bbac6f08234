"""How figures are written in messages, tables and reports."""

from __future__ import annotations

import math


def format_value(value: float, unit: str, bare: bool = False) -> str:
    """1234.5 tok/s → '1,234.5 tok/s'; a speedup 1.0312 → '1.031×'; 0.4123 s → '412.3 ms'
    (``bare``: without the unit)."""
    if unit == "x":
        return f"{value:.3f}×"
    if unit == "s":  # latencies read best in milliseconds
        return f"{value * 1e3:,.1f}" + ("" if bare else " ms")
    if unit == "sec":  # a server's startup: seconds to minutes, not milliseconds
        return f"{value:,.1f}" + ("" if bare else " s")
    if unit == "accuracy":  # a share of the items
        return f"{value:.3f}"
    if unit == "tok/step":  # an accept length: 2.83 tokens a verify step
        return f"{value:.2f}" if bare else f"{value:.2f} tok/step"
    if unit in ("J/tok", "tok/s/W"):  # fractions of a joule; a few tokens a watt
        return f"{value:,.3f}" if bare else f"{value:,.3f} {unit}"
    if unit == "req/s":
        return f"{value:,.2f}" + ("" if bare else " req/s")
    return f"{value:,.1f}" if bare else f"{value:,.1f} {unit}"


def signed_percent(change: float) -> str:
    """-0.314 → '−31.4' (a typographic minus, as in the reports)."""
    return f"{change * 100:+.1f}".replace("-", "\u2212")


def ms(value: float | None) -> str:
    """Seconds as milliseconds with one decimal; '-' when there is no finite figure."""
    return "-" if value is None or not math.isfinite(value) else f"{value * 1e3:.1f}"
