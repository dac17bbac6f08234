"""Pure renderers: measured points → lines for pytest's terminal summary."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from pytest_llmperf.session import PointResult
from pytest_llmperf.verdict import signed_percent

COLUMNS = ("profile", "test", "C", "measured mean ± sd (n)", "golden", "Δ %", "req tok/s", "TTFT p50/p99 ms",
           "ITL p50 ms", "accept", "verdict")
COLORS = {"FAIL": "red", "INVALID": "red", "MISSING": "red", "INCOMPARABLE": "red", "WARN": "yellow",
          "IMPROVED": "green"}
ORDER = ("FAIL", "INVALID", "INCOMPARABLE", "MISSING", "WARN", "IMPROVED", "PASS", "RECORDED", "measured")


def ms(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 1e3:.1f}"


def finite_mean(values: Iterable[float | None]) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else math.nan


def test_name(nodeid: str) -> str:
    name = nodeid.split("::")[-1].split("[")[0]
    return name[5:] if name.startswith("test_") else name


def row(point: PointResult) -> tuple[str, ...]:
    s = point.summary
    runs = point.runs
    accept = finite_mean(r.accept_length for r in runs)
    golden = (point.golden or {}).get("mean")
    return (
        point.profile,
        test_name(point.test),
        str(point.concurrency),
        f"{s.mean:,.1f} ± {s.sd:,.1f} ({len(s.values)})",
        "-" if golden is None else f"{golden:,.1f}",
        "-" if point.ratio is None else signed_percent(point.ratio - 1),
        f"{finite_mean(r.request_tok_s['mean'] for r in runs):,.1f}",
        f"{ms(finite_mean(r.ttft_s['p50'] for r in runs))} / {ms(finite_mean(r.ttft_s['p99'] for r in runs))}",
        ms(finite_mean(r.itl_s["p50"] for r in runs)),
        "-" if not math.isfinite(accept) else f"{accept:.2f}",
        point.verdict or "measured",
    )


def table_lines(points: Sequence[PointResult]) -> list[str]:
    """A fixed-width table, one row per point, ordered by profile, test and concurrency."""
    rows = [COLUMNS] + [row(p) for p in sorted(points, key=lambda p: (p.profile, test_name(p.test), p.concurrency))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    right = {2, 3, 4, 5, 6, 7, 8, 9}
    lines = []
    for k, r in enumerate(rows):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


SPEEDUP_COLUMNS = ("C", "speedup", "95 % CI", "", "accept", "break-even accept", "base drift", "gate")


def speedup_rows(session, analysis) -> list[tuple[str, ...]]:
    """One row of cells per level of an analysis (SPEEDUP_COLUMNS), with the gate's verdict."""
    gates = {p.concurrency: p for p in session.speedups_of(analysis)}
    rows = []
    for sp in analysis.points:
        drift = analysis.drift.get(sp.concurrency)
        gate = gates.get(sp.concurrency)
        rows.append((
            str(sp.concurrency), f"{sp.ratio:.3f}\u00d7", f"[{sp.low:.3f}, {sp.high:.3f}]", sp.status,
            "-" if sp.accept_length is None else f"{sp.accept_length:.2f}",
            "-" if sp.break_even_accept is None else f"{sp.break_even_accept:.2f}",
            "-" if drift is None else f"{signed_percent(drift - 1)} %",
            (gate.verdict or "-") if gate else "-",
        ))
    return rows


def verdict_counts(points) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in points:
        counts[p.verdict or "measured"] = counts.get(p.verdict or "measured", 0) + 1
    return counts


def counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[v]} {v}" for v in ORDER if v in counts)


def speculative_lines(session) -> list[str]:
    """Per speculative profile and base measured in this run: speedup per level, crossover, advice."""
    lines: list[str] = []
    for analysis in session.analyses():
        rows = [SPEEDUP_COLUMNS, *speedup_rows(session, analysis)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.append(f"{analysis.profile} vs {analysis.base_profile} ({test_name(analysis.test)}), same run:")
        lines += ["  " + "  ".join(c.rjust(w) if i in (0, 1, 4, 5, 6) else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
        lines.append(f"  {analysis.advice()}")
    return lines


def verdict_lines(session, whole_suite: bool) -> list[tuple[str, str | None]]:
    """Counts per verdict, the rows that matter, what was written, and what to do next."""
    points = [*session.points, *session.speedups]
    counts = verdict_counts(points)
    lines: list[tuple[str, str | None]] = [("llmperf verdicts: " + counts_line(counts), None)]
    for p in sorted(points, key=lambda p: ORDER.index(p.verdict or "measured")):
        verdict = p.verdict or "measured"
        if verdict == "INVALID":
            lines += [(f"INVALID {p.label} ({test_name(p.test)}): {problem}", "red")
                      for problem in p.problems or [p.message or ""]]
        elif verdict not in ("PASS", "RECORDED", "measured") and p.message:
            lines.append((f"{verdict} {p.message}", COLORS.get(verdict)))
    if "MISSING" in counts:
        lines.append(("Re-run with --perf-update to record missing baselines.", None))
    if "IMPROVED" in counts:
        lines.append((f"{counts['IMPROVED']} point(s) improved beyond the margin: refresh their goldens with "
                      "--perf-update and review the diff.", "green"))
    lines += [(f"golden: {note}", None) for note in session.golden_notes]
    if whole_suite and not session.settings.update:
        unused = session.unused_goldens()
        if unused:
            lines.append((f"{len(unused)} golden point(s) were not used by any test in this run:", "yellow"))
            lines += [(f"  {item}", None) for item in unused]
    return lines
