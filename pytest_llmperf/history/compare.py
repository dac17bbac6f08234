"""Two stored runs, point by point: A, B, the change and whether it is more than noise.

As ``pytest-benchmark compare`` and ``asv compare`` give it: a row per point both runs
measured (and those only one did), the change of B against A, and a two-sided Welch t-test on
the log values of their runs (``~`` when p ≥ 0.01, the verdict's α).
"""

from __future__ import annotations

import math
from typing import Any

from pytest_llmperf.core.format import format_value
from pytest_llmperf.core.points import unit_of
from pytest_llmperf.core.verdict import ALPHA


def _values(point: dict[str, Any]) -> list[float]:
    metric = point["metric"]
    return [
        run[metric] for run in point["samples"] if run.get(metric) is not None and run[metric] > 0
    ]


def welch_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided p of a Welch t-test on logs (None with fewer than two runs a side)."""
    from pytest_llmperf.core.student import welch

    if len(a) < 2 or len(b) < 2:
        return None
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    if len(set(la)) == 1 and len(set(lb)) == 1:
        return 0.0 if la[0] != lb[0] else 1.0
    return welch(la, lb).p_two_sided()


def rows(points_a: list[dict[str, Any]], points_b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (profile, key) of either run."""
    a = {(p["profile"], p["key"]): p for p in points_a}
    b = {(p["profile"], p["key"]): p for p in points_b}
    out = []
    for key in sorted(set(a) | set(b)):
        pa, pb = a.get(key), b.get(key)
        va, vb = (_values(pa) if pa else []), (_values(pb) if pb else [])
        mean_a = sum(va) / len(va) if va else None
        mean_b = sum(vb) / len(vb) if vb else None
        metric = (pa or pb or {})["metric"]
        lower = bool((pa or pb or {})["lower_is_better"])
        change = mean_b / mean_a - 1 if mean_a and mean_b else None
        p = welch_p(va, vb)
        if change is None or p is None or p >= ALPHA:
            sense = "~" if change is not None and p is not None else ""
        else:
            sense = "better" if (change < 0) == lower else "worse"
        out.append(
            {
                "profile": key[0],
                "point": key[1],
                "metric": metric,
                "a": mean_a,
                "b": mean_b,
                "runs_a": len(va),
                "runs_b": len(vb),
                "change": change,
                "p_value": p,
                "significance": sense,
            }
        )
    return out


def table(found: list[dict[str, Any]], run_a: str, run_b: str) -> list[str]:
    head = ("profile", "point", "A", "B", "change", "p", "")
    body = []
    for r in found:
        unit = unit_of(r["metric"])
        body.append(
            (
                r["profile"],
                r["point"],
                format_value(r["a"], unit) if r["a"] is not None else "-",
                format_value(r["b"], unit) if r["b"] is not None else "-",
                f"{r['change'] * 100:+.1f} %" if r["change"] is not None else "-",
                f"{r['p_value']:.2g}" if r["p_value"] is not None else "-",
                r["significance"],
            )
        )
    widths = [max(len(str(row[i])) for row in (head, *body)) for i in range(len(head))]
    lines = [f"A = {run_a}, B = {run_b}; change = B ÷ A − 1; p: Welch t-test on log values"]
    for row in (head, *body):
        lines.append(
            "  ".join(
                str(c).rjust(w) if i in (2, 3, 4, 5) else str(c).ljust(w)
                for i, (c, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
    return lines
