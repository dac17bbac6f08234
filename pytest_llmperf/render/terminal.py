"""The terminal summary: pure functions of the run's results → lines (and their colours)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_llmperf.core.accuracy import AccuracyPoint, by_category
from pytest_llmperf.core.figures import figure_of
from pytest_llmperf.core.format import format_value, ms, signed_percent
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.parity import PairParity
from pytest_llmperf.core.points import MeasuredPoint, Point
from pytest_llmperf.core.results import Results
from pytest_llmperf.core.speculative import Analysis

COLUMNS = (
    "profile",
    "test",
    "C",
    "measured mean ± sd (n)",
    "golden",
    "Δ %",
    "req tok/s",
    "TTFT p50/p99 ms",
    "ITL p50 ms",
    "accept",
    "verdict",
)
SPEEDUP_COLUMNS = (
    "C",
    "speedup",
    "95 % CI",
    "",
    "accept",
    "break-even accept",
    "base drift",
    "gate",
    "engine",
    "acceptance",
    "parity",
    "accuracy",
)
Line = tuple[str, str | None]  # text, colour


def row(point: MeasuredPoint) -> tuple[str, ...]:
    """One point's cells; a figure checked besides throughput (``ttft_p99_s``) is a row of its
    own, named after the figure, in milliseconds."""
    s = point.summary
    accept = point.run_average(lambda r: r.accept_length)
    golden = point.golden_mean
    unit = point.unit
    test = point.node.short_name
    if point.gated_from is not None:
        test += f" {point.metric}" + (" (ms)" if unit == "s" else f" ({unit})")
    return (
        point.profile,
        test,
        str(point.concurrency),
        f"{format_value(s.mean, unit, bare=True)} ± {format_value(s.sd, unit, bare=True)} ({s.n})"
        if math.isfinite(s.mean)
        else f"- ({s.n})",
        "-" if golden is None else format_value(golden, unit, bare=True),
        change_cell(point),
        _number(point.run_average(lambda r: r.request_tok_s["mean"])),
        f"{ms(point.run_average(lambda r: r.ttft_s['p50']))} / {ms(point.run_average(lambda r: r.ttft_s['p99']))}",
        ms(point.run_average(lambda r: r.itl_s["p50"])),
        "-" if not math.isfinite(accept) else f"{accept:.2f}",
        point.verdict.value + (" (not gated)" if point.ungated else "") + drift_cell(point),
    )


def gated_drift(point: Point) -> dict | None:
    """The history's drift that the drift gate judged on this point (WARN or FAIL), if any."""
    drift = (point.history or {}).get("drift")
    return drift if drift and drift.get("gated") else None


def drift_cell(point: Point) -> str:
    """`` (drift −8.1 % since 12-01 abc1234)`` for a point the drift gate judged."""
    drift = gated_drift(point)
    if drift is None:
        return ""
    commit = f" {drift['first_bad_commit'][:7]}" if drift.get("first_bad_commit") else ""
    return f" (drift {signed_percent(drift['change'])} % since {drift['first_bad_date'][5:10]}{commit})"


def change_cell(point: Point) -> str:
    """``−3.1 slower``: the mean against the golden's, and which way that is in the figure's
    words (a latency that rises is slower, an energy per token that rises is more energy per
    token)."""
    if point.ratio is None:
        return "-"
    change = point.ratio - 1
    if abs(change) < 0.0005:
        return signed_percent(change)
    worse = change > 0 if point.lower_is_better else change < 0
    better, worse_words = figure_of(point.metric).words
    return f"{signed_percent(change)} {worse_words if worse else better}"


def _number(value: float) -> str:
    return f"{value:,.1f}" if math.isfinite(value) else "-"


def has_ttfo(point: MeasuredPoint) -> bool:
    """Whether any run of the point told its answer from its thinking (a TTFO to show)."""
    return any(r.ttfo_s.get("n", 0) for r in point.runs)


def ttfo_cell(point: MeasuredPoint) -> str:
    if not has_ttfo(point):
        return "-"
    p50 = point.run_average(lambda r: r.ttfo_s.get("p50", math.nan))
    p99 = point.run_average(lambda r: r.ttfo_s.get("p99", math.nan))
    return f"{ms(p50)} / {ms(p99)}"


def table_lines(points: Sequence[MeasuredPoint]) -> list[str]:
    """A fixed-width table, one row per point, ordered by profile, test and concurrency; a
    TTFO column beside TTFT where any point's stream told its answer from its thinking."""
    ordered = sorted(
        points, key=lambda p: (p.profile, p.node.short_name, p.concurrency, p.gated_from or "")
    )
    if not any(has_ttfo(p) for p in ordered):
        return aligned([COLUMNS, *map(row, ordered)], right={2, 3, 4, 5, 6, 7, 8, 9}, rule=True)
    at = COLUMNS.index("TTFT p50/p99 ms") + 1
    header = (*COLUMNS[:at], "TTFO p50/p99 ms", *COLUMNS[at:])
    rows = [
        (*cells[:at], ttfo_cell(p), *cells[at:]) for p, cells in zip(ordered, map(row, ordered))
    ]
    return aligned([header, *rows], right={2, 3, 4, 5, 6, 7, 8, 9, 10}, rule=True)


def speedup_rows(results: Results, analysis: Analysis) -> list[tuple[str, ...]]:
    """One row of cells per level of an analysis (SPEEDUP_COLUMNS), with the gate's verdict."""
    from pytest_llmperf.core.channels import acceptance, engine

    gates = {p.concurrency: p for p in results.speedups_of(analysis)}
    pinned = engine(results, analysis.profile, analysis.base_profile, analysis.test)
    accept = acceptance(results, analysis.profile)
    parity = results.parity_of(analysis.profile, analysis.base_profile)
    quality = (
        "-" if parity is None else parity_verdict(parity),
        "-" if parity is None or parity.accuracy_outcome is None else parity.accuracy_outcome.value,
    )
    rows: list[tuple[str, ...]] = []
    for sp in analysis.points:
        drift = analysis.drift.get(sp.concurrency)
        gate = gates.get(sp.concurrency)
        rows.append(
            (
                str(sp.concurrency),
                f"{sp.ratio:.3f}\u00d7",
                f"[{sp.low:.3f}, {sp.high:.3f}]",
                sp.status,
                "-" if sp.accept_length is None else f"{sp.accept_length:.2f}",
                "-" if sp.break_even_accept is None else f"{sp.break_even_accept:.2f}",
                "-" if drift is None else f"{signed_percent(drift - 1)} %",
                gate.verdict.value if gate else "-",
                pinned.cell(sp.concurrency),
                accept.cell(sp.concurrency),
                *quality,
            )
        )
    return rows


def parity_verdict(parity: PairParity) -> str:
    """``PASS 8/8``: the parity check's outcome (a FAIL of the pair's accuracy is the
    accuracy column's) and the prompts identical."""
    outcome = parity.outcome
    if outcome is Outcome.FAIL and not parity.faults:
        outcome = Outcome.PASS
    return f"{outcome.value} {parity.identical}/{len(parity.prompts)}"


def accept_category_lines(results: Results) -> list[str]:
    """Per speculative profile whose workload names categories: its accept length per
    category at each level (tokens a verify step, the engine's count over the level's runs)."""
    by_profile: dict[str, list[str]] = {}
    for point in sorted(results.measured, key=lambda p: (p.profile, p.concurrency)):
        if point.gated_from is not None:
            continue
        totals: dict[str, list[float]] = {}
        for run in point.runs:
            for name, value in (run.accept_length_by_category or {}).items():
                totals.setdefault(name, []).append(value)
        if totals:
            cells = ", ".join(f"{name} {sum(v) / len(v):.2f}" for name, v in sorted(totals.items()))
            by_profile.setdefault(point.profile, []).append(f"{point.level}: {cells}")
    return [
        f"{profile} accept length by category (tok/step): " + "; ".join(levels)
        for profile, levels in by_profile.items()
    ]


def counts_line(counts: dict[Outcome, int]) -> str:
    """``24 PASS, 2 WARN``: the most urgent outcome first."""
    return ", ".join(
        f"{n} {outcome.value}" for outcome, n in sorted(counts.items(), key=lambda kv: kv[0].rank)
    )


def speculative_lines(results: Results) -> list[str]:
    """Per speculative profile and base measured in this run: speedup per level, crossover, advice."""
    lines: list[str] = []
    for analysis in results.analyses:
        lines.append(
            f"{analysis.profile} vs {analysis.base_profile} "
            f"({NodeId(analysis.test).short_name}), same run:"
        )
        table = aligned([SPEEDUP_COLUMNS, *speedup_rows(results, analysis)], right={0, 1, 4, 5, 6})
        lines += ["  " + line for line in table]
        lines.append(f"  {analysis.advice()}")
        engine_note = results.engine_channel.get(analysis.profile)
        if engine_note:
            lines.append(f"  engine channel: {engine_note}")
    for parity in results.parities:
        lines += parity_lines(results, parity)
    lines += accept_category_lines(results)
    if results.analyses:
        lines.append(
            "  (speedup: speculative ÷ base output tok/s, paired run by run; break-even accept: the "
            "accept length at which speculation would tie; gate: the speedup test's verdict "
            "against its golden, '-' where none checked it; by channel: engine, the speedup with "
            "acceptance pinned at the golden accept length; acceptance, the accept length against "
            "its golden; lossless, parity (greedy parity with the base and the prompts identical) "
            "and accuracy (the pair's items against the base's), a FAIL of either FAILs the "
            "pair's speedup)"
        )
    return lines


def parity_lines(results: Results, parity: PairParity) -> list[str]:
    """The pair's greedy parity, per prompt, and what it does to the speedup's verdict."""
    if not parity.prompts:  # nothing could be compared (INVALID): the reason is the line
        return [f"{parity.label}, greedy parity ({NodeId(parity.test).short_name}): "
                f"{parity.message.removeprefix(parity.label + ': ')}"]  # fmt: skip
    lines = [f"{parity.label}, greedy parity ({NodeId(parity.test).short_name}): "
             f"{parity.identical} of {len(parity.prompts)} prompts identical "
             f"({parity.compared:,} tokens compared) — {parity.outcome.value}"]  # fmt: skip
    lines += [f"  {p.describe()}" for p in parity.prompts if not p.identical]
    if parity.accuracy:
        lines.append(f"  accuracy on the same items: {parity.accuracy}")
    if parity.share is not None and parity.share.message:
        lines.append(f"  against its golden: {parity.share.message}")
    gated = [
        p
        for a in results.analyses
        if (a.profile, a.base_profile) == (parity.profile, parity.base_profile)
        for p in results.speedups_of(a)
    ]
    if parity.outcome is Outcome.FAIL and gated:
        lines.append(
            "  the pair FAILs: its speedup counts only if it answers as its base does, and it "
            "does not"
        )
    return lines


def accuracy_lines(results: Results) -> list[str]:
    """Per profile: its accuracy, by category where the task set names categories."""
    lines = []
    for point in results.of(AccuracyPoint):
        cats = by_category(point.tasks, point.outcomes)
        shown = ", ".join(f"{name} {c['correct']}/{c['items']}" for name, c in cats.items() if name)
        lines.append(
            f"{point.profile}: accuracy {point.correct}/{len(point.outcomes)} "
            f"({point.accuracy:.1%}) on {point.source}{'; ' + shown if shown else ''} — "
            f"{point.verdict.value}"
        )
    return lines


def profile_lines(results: Results) -> list[str]:
    """The points profiled once more (--perf-profile-on): each trace and its shares of time
    beside the golden's; a profile whose engine has no profiler, once."""
    from pytest_llmperf.core.kernels import KernelSummary, side_by_side

    lines: list[str] = []
    said: set[tuple[str, str]] = set()
    for p in results.measured:
        found = p.server_profile
        if not found:
            continue
        if found.get("problem") or not found.get("summary"):
            why = (p.profile, str(found.get("problem")))
            if why not in said:
                said.add(why)
                lines.append(f"{p.label}: no profile: {why[1]}")
            continue
        golden = found.get("golden_summary")
        lines.append(f"{p.label} {p.verdict.value}: {found['trace']} ({found['steps']} steps)")
        now = KernelSummary.from_json(found["summary"])
        lines.append(f"  {now.source}, {now.total_us / 1e3:,.1f} ms in all:")
        lines += side_by_side(now, KernelSummary.from_json(golden) if golden else None)
    return ["llmperf: server profiles (--perf-profile-on)", *lines] if lines else []


def verdict_lines(results: Results, *, verbose: bool = False) -> list[Line]:
    """Counts per verdict, the rows that matter, what was written, and what to do next;
    golden points no test used are counted, and listed when ``verbose``."""
    points = results.points
    counts = results.counts()
    lines: list[Line] = [("llmperf verdicts: " + counts_line(counts) + drift_summary(points), None)]
    for p in sorted(points, key=lambda p: p.verdict.rank):
        lines += _point_lines(p)
    lines += [(p.message, p.outcome.color) for p in results.parities if p.outcome.noteworthy]
    if Outcome.MISSING in counts:
        lines.append(("Re-run with --perf-update to record missing baselines.", None))
    if Outcome.IMPROVED in counts:
        lines.append(
            (
                f"{counts[Outcome.IMPROVED]} point(s) improved beyond the margin: refresh their goldens with "
                "--perf-update and review the diff.",
                "green",
            )
        )
    changes = environment_changes(results)
    if changes:
        lines.append(("Changed since the goldens (not blocking):", None))
        lines += [(f"  {profile}: {change}", None) for profile, change in changes]
    lines += [(f"golden: {note}", None) for note in results.golden_notes]
    lines += remeasured_lines(points)
    if results.unused_goldens:
        how = ":" if verbose else " (-v lists them)."
        lines.append(
            (
                f"{len(results.unused_goldens)} golden point(s) were not used by any test in this "
                f"run: a test renamed, moved or removed?{how}",
                "yellow",
            )
        )
        if verbose:
            lines += [(f"  {item}", None) for item in results.unused_goldens]
    return lines


def drift_summary(points: Sequence[Point]) -> str:
    """``; drift gate: 2 points, since 2026-12-01 05:42 UTC (commit abc1234)`` (the earliest
    first bad run of the points it judged)."""
    drifts = [d for d in map(gated_drift, points) if d is not None]
    if not drifts:
        return ""
    first = min(drifts, key=lambda d: d["first_bad_date"])
    commit = f", commit {first['first_bad_commit'][:7]}" if first.get("first_bad_commit") else ""
    return (
        f"; drift gate: {len(drifts)} point(s) moved beyond their margins over the nights, "
        f"since {first['first_bad_date']} UTC{commit} (run {first['first_bad_run']})"
    )


def remeasured_lines(points: Sequence[Point]) -> list[Line]:
    """One line per run measured again because the client held it back: a runner that was
    busy now and then, worth knowing before it is busy all the time."""
    return [
        (f"measured again: {p.node.short_name} {p.label} {why}", None)
        for p in points
        if isinstance(p, MeasuredPoint)
        for why in p.remeasured
    ]


def environment_changes(results: Results) -> list[tuple[str, str]]:
    """(profile, change) for what differs from the goldens without blocking: new server
    versions, binaries, server fields added or removed. Each change once per profile."""
    seen: dict[tuple[str, str], None] = {}
    for point in results.points:
        for change in point.environment_changes:
            seen.setdefault((point.profile, change), None)
    return list(seen)


def _point_lines(p: Point) -> list[Line]:
    verdict = p.verdict
    if verdict is Outcome.INVALID:
        return [
            (f"INVALID {p.node.short_name} {p.label}: {problem}", verdict.color)
            for problem in p.problems or [p.message or ""]
        ]
    if verdict.noteworthy and p.message:
        return [(f"{verdict.value} {p.node.short_name} {p.message}", verdict.color)]
    return []


def aligned(rows: Sequence[Sequence[str]], right: set[int], rule: bool = False) -> list[str]:
    """Columns padded to their widest cell; ``right`` holds the right-aligned column indices."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, cells in enumerate(rows):
        lines.append(
            "  ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()
        )
        if rule and k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines
