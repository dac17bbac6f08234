"""Pure renderers: measured points → lines for pytest's terminal summary."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from pytest_llmperf.session import PointResult

COLUMNS = ("profile", "test", "C", "tok/s mean ± sd (n)", "req tok/s", "TTFT p50/p99 ms", "ITL p50 ms", "accept",
           "status")


def _ms(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 1e3:.1f}"


def _mean(values: Iterable[float | None]) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _test_name(nodeid: str) -> str:
    name = nodeid.split("::")[-1].split("[")[0]
    return name[5:] if name.startswith("test_") else name


def row(point: PointResult) -> tuple[str, ...]:
    s = point.summary
    runs = point.runs
    accept = _mean(r.accept_length for r in runs)
    return (
        point.profile,
        _test_name(point.test),
        str(point.concurrency),
        f"{s.mean:,.1f} ± {s.sd:,.1f} ({len(s.values)})",
        f"{_mean(r.request_tok_s['mean'] for r in runs):,.1f}",
        f"{_ms(_mean(r.ttft_s['p50'] for r in runs))} / {_ms(_mean(r.ttft_s['p99'] for r in runs))}",
        _ms(_mean(r.itl_s["p50"] for r in runs)),
        "-" if not math.isfinite(accept) else f"{accept:.2f}",
        point.verdict or "measured",
    )


def table_lines(points: Sequence[PointResult]) -> list[str]:
    """A fixed-width table, one row per point, ordered by profile, test and concurrency."""
    rows = [COLUMNS] + [row(p) for p in sorted(points, key=lambda p: (p.profile, _test_name(p.test), p.concurrency))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    right = {2, 3, 4, 5, 6, 7}
    lines = []
    for k, r in enumerate(rows):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def problem_lines(points: Sequence[PointResult]) -> list[str]:
    lines = []
    for p in points:
        for problem in p.problems:
            lines.append(f"INVALID {p.profile} C={p.concurrency} ({_test_name(p.test)}): {problem}")
    return lines
