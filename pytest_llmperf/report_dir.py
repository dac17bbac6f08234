"""``--perf-report DIR``: a Markdown summary and PNG plots, written at the end of the run.

``summary.md`` reads well as a CI step summary: verdict counts, the rows that matter, one table
per test and, for each speculative profile measured with its base, the speedup table with the
advice. When ``$GITHUB_STEP_SUMMARY`` is set the same Markdown (without the images, which a step
summary cannot show from files) is appended to it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

from pytest_llmperf import plots
from pytest_llmperf.report import ORDER, counts_line, finite_mean, ms, speedup_rows, test_name, verdict_counts
from pytest_llmperf.verdict import signed_percent

def write(session: Any, directory: Path) -> list[str]:
    """Write the report; returns one line per file (or per thing that could not be written)."""
    directory.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    images: list[str] = []
    measured = [p for p in session.points if p.metric == "output_tok_s" and p.runs]
    if plots.available():
        margins = {p.name: p.fail_margin for p in session.selected}
        tests = sorted({p.test.split("[")[0] for p in measured})
        for test in tests:
            pts = [p for p in measured if p.test.split("[")[0] == test]
            suffix = "" if len(tests) == 1 else f"-{test_name(test)}"
            images.append(plots.throughput(pts, margins, directory / f"throughput{suffix}.png").name)
            images.append(plots.latency(pts, directory / f"latency{suffix}.png").name)
        analyses = session.analyses()
        if analyses:
            images.append(plots.speedup(analyses, directory / "speedup.png").name)
    else:
        notes.append("plots skipped: matplotlib is not installed (pip install 'pytest-llmperf[report]')")
    text = markdown(session)
    (directory / "summary.md").write_text(text + _images(images), encoding="utf-8")
    notes.append(f"{directory / 'summary.md'}" + (f" and {len(images)} plot(s)" if images else ""))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        notes.append(f"appended to $GITHUB_STEP_SUMMARY ({step_summary})")
    return notes


def _images(names: Sequence[str]) -> str:
    if not names:
        return ""
    return "\n## Plots\n\n" + "\n".join(f"![{Path(n).stem}]({n})" for n in names) + "\n"


def markdown(session: Any) -> str:
    points = [*session.points, *session.speedups]
    lines = ["# LLM serving performance (pytest-llmperf)", "", "**Verdicts:** " + counts_line(verdict_counts(points)), ""]
    matter = [p for p in points if (p.verdict or "measured") not in ("PASS", "RECORDED", "measured")]
    if matter:
        lines += ["| verdict | point | detail |", "|---|---|---|"]
        for p in sorted(matter, key=lambda p: ORDER.index(p.verdict)):
            detail = "; ".join(p.problems) if p.verdict == "INVALID" else (p.message or "")
            lines.append(f"| **{p.verdict}** | {p.label} | {_cell(detail)} |")
        lines.append("")
    for test in sorted({p.test.split("[")[0] for p in session.points}):
        rows = sorted((p for p in session.points if p.test.split("[")[0] == test),
                      key=lambda p: (p.profile, p.concurrency))
        lines += [f"## {test_name(test)}", "",
                  "| profile | C | measured (mean ± sd, n) | golden | Δ % | TTFT p50 / p99 ms | ITL p50 ms | accept | verdict |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for p in rows:
            s = p.summary
            golden = (p.golden or {}).get("mean")
            unit = "tok/s" if p.metric == "output_tok_s" else p.metric
            accept = finite_mean(r.accept_length for r in p.runs)
            lines.append(
                f"| {p.profile} | {p.concurrency} | {s.mean:,.1f} ± {s.sd:,.1f} {unit} ({len(s.values)}) | "
                f"{'-' if golden is None else f'{golden:,.1f}'} | "
                f"{'-' if p.ratio is None else signed_percent(p.ratio - 1)} | "
                f"{ms(finite_mean(r.ttft_s['p50'] for r in p.runs))} / {ms(finite_mean(r.ttft_s['p99'] for r in p.runs))} | "
                f"{ms(finite_mean(r.itl_s['p50'] for r in p.runs))} | "
                f"{'-' if not math.isfinite(accept) else f'{accept:.2f}'} | {p.verdict or 'measured'} |")
        lines.append("")
    for a in session.analyses():
        lines += [f"## Speculative decoding: {a.profile} vs {a.base_profile} (same run)", "",
                  "| C | speedup | 95 % interval | | accept length | break-even accept | base drift | gate |",
                  "|---:|---:|---:|---|---:|---:|---:|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in speedup_rows(session, a)]
        lines += ["", f"**Advice:** {a.advice()}", ""]
    if session.golden_notes:
        lines += ["## Goldens written", ""] + [f"- {_cell(n)}" for n in session.golden_notes] + [""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")
