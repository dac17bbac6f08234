"""The Markdown summary of ``--perf-report``, which also reads well as a CI step summary.

Verdict counts, the rows that matter, one table per test and, for each speculative profile
measured with its base, the speedup table with the advice; each launch's startup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.core.format import format_value, ms, signed_percent
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.results import Results
from pytest_llmperf.core.startup import StartupPoint
from pytest_llmperf.render.terminal import counts_line, speedup_rows


def render(results: Results) -> str:
    points = results.points
    lines = [
        "# LLM serving performance (pytest-llmperf)",
        "",
        "**Verdicts:** " + counts_line(results.counts()),
        "",
    ]
    matter = sorted((p for p in points if p.verdict.noteworthy), key=lambda p: p.verdict.rank)
    if matter:
        lines += ["| verdict | point | detail |", "|---|---|---|"]
        for p in matter:
            detail = "; ".join(p.problems) if p.problems else (p.message or "")
            lines.append(f"| **{p.verdict.value}** | {p.label} | {_cell(detail)} |")
        lines.append("")
    for test in results.tests():
        rows = sorted(
            (p for p in results.measured if p.node.without_params == test),
            key=lambda p: (p.profile, p.concurrency, p.gated_from or ""),
        )
        lines += [
            f"## {NodeId(test).short_name}",
            "",
            "| profile | C | figure | measured (mean ± sd, n) | golden | Δ % | TTFT p50 / p99 ms | "
            "ITL p50 ms | accept | verdict |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for p in rows:
            s = p.summary
            golden = p.golden_mean
            unit = p.unit
            accept = p.run_average(lambda r: r.accept_length)
            shown = "ms" if unit == "s" else unit
            lines.append(
                f"| {p.profile} | {p.concurrency} | {p.metric} | "
                f"{format_value(s.mean, unit, bare=True)} ± {format_value(s.sd, unit, bare=True)} "
                f"{shown} ({s.n}) | "
                f"{'-' if golden is None else format_value(golden, unit, bare=True)} | "
                f"{'-' if p.ratio is None else signed_percent(p.ratio - 1)} | "
                f"{ms(p.run_average(lambda r: r.ttft_s['p50']))} / {ms(p.run_average(lambda r: r.ttft_s['p99']))} | "
                f"{ms(p.run_average(lambda r: r.itl_s['p50']))} | "
                f"{'-' if not math.isfinite(accept) else f'{accept:.2f}'} | {p.verdict.value} |"
            )
        lines.append("")
    for a in results.analyses:
        lines += [
            f"## Speculative decoding: {a.profile} vs {a.base_profile} (same run)",
            "",
            "| C | speedup | 95 % interval | | accept length | break-even accept | base drift | gate |",
            "|---:|---:|---:|---|---:|---:|---:|---|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in speedup_rows(results, a)]
        lines += ["", f"**Advice:** {a.advice()}", ""]
    if results.of(StartupPoint):
        lines += ["## Startup (launch to ready)", ""]
        lines += [f"- {_cell(p.message or p.label)}" for p in results.of(StartupPoint)] + [""]
    if results.golden_notes:
        lines += ["## Goldens written", ""] + [f"- {_cell(n)}" for n in results.golden_notes] + [""]
    return "\n".join(lines)


def images_section(names: Sequence[str]) -> str:
    """The plots, linked from the summary beside them (a step summary cannot show files)."""
    if not names:
        return ""
    return "\n## Plots\n\n" + "\n".join(f"![{Path(n).stem}]({n})" for n in names) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")
