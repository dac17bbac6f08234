"""The one writer: puts the run's output files on disk at the end of the run.

``--perf-json`` (atomically), ``--perf-report`` (Markdown, plots, and an append to
``$GITHUB_STEP_SUMMARY`` when it is set) and ``--perf-benchmark-json``. Each renderer it calls
is a pure function of the results.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.results import Results
from pytest_llmperf.core.stats import finite_or_none
from pytest_llmperf.files import confined, write_json_atomic
from pytest_llmperf.render import markdown, plots, results_json


@dataclass(frozen=True)
class Outputs:
    """Where the run's files go (None: not asked for)."""

    json_path: Path | None = None
    report_dir: Path | None = None
    benchmark_json: Path | None = None


def outputs(results: Results, settings: Outputs, *, created: str) -> tuple[list[str], list[str]]:
    """Write every output the settings ask for: one note per file written (or skipped), and one
    line per output that could not be written. One failure never stops the others."""
    notes: list[str] = []
    failures: list[str] = []

    def attempt(what: str, write: Callable[[], list[str]]) -> None:
        try:
            notes.extend(write())
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            failures.append(f"{what}{where}: {exc.strerror or exc}")

    attempt("adaptive-config files", lambda: adaptive_configs(results))
    if settings.json_path:
        path = Path(settings.json_path)
        attempt(
            "--perf-json",
            lambda: _written(path, results_json.render(results, created=created), None),
        )
    if settings.report_dir:
        directory = settings.report_dir
        attempt("--perf-report", lambda: report_dir(results, directory))
    if settings.benchmark_json:
        from pytest_llmperf.render import benchmark_json

        path_b = settings.benchmark_json
        attempt(
            "--perf-benchmark-json",
            lambda: _written(
                path_b, benchmark_json.render(results), f"pytest-benchmark JSON: {path_b}"
            ),
        )
    return notes, failures


def _written(path: Path, data: object, note: str | None) -> list[str]:
    # A figure that does not exist is null in every file written, whichever renderer made it.
    write_json_atomic(path, finite_or_none(data))
    return [note] if note else []


def adaptive_configs(results: Results) -> list[str]:
    """Each speculative cut-off as the ``--speculative-adaptive-config`` file its advice names,
    in the run directory."""
    notes = []
    for analysis in results.analyses:
        config = analysis.adaptive_config()
        if config is not None and results.run_dir:
            path = Path(results.run_dir) / f"{analysis.profile}-adaptive-spec.json"
            write_json_atomic(path, config)
            notes.append(f"{analysis.profile}: --speculative-adaptive-config file: {path}")
    return notes


def latency_goldens(results: Results, test: str) -> plots.LatencyGoldens:
    """The goldens of the latency figures gated on ``test``'s runs (``ttft_p99_s`` → ttft_s
    p99), by profile and C."""
    found: plots.LatencyGoldens = {}
    for point in results.measured:
        parts = point.metric.split("_")  # ttft_p99_s
        if point.node.without_params != test or not (point.gated_from and point.golden_mean):
            continue
        if len(parts) == 3 and parts[0] in ("ttft", "itl"):
            found[(point.profile, f"{parts[0]}_s", parts[1], point.concurrency)] = point.golden_mean
    return found


def report_dir(results: Results, directory: Path) -> list[str]:
    """``summary.md`` and the plots in ``directory``; returns one line per file (or per thing
    that could not be written)."""
    directory.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    images: list[str] = []
    # An INVALID point is not a measurement of the server: it is in the table, not on a plot.
    measured = [
        p
        for p in results.measured
        if p.metric == "output_tok_s" and p.runs and not p.problems and p.rate is None
    ]
    by_rate = [
        p
        for p in results.measured
        if p.rate is not None and p.gated_from is None and p.runs and not p.problems
    ]
    if plots.available():
        margins = {name: facts.fail_margin for name, facts in results.profiles.items()}
        tests = sorted({p.node.without_params for p in measured})
        for test in tests:
            pts = [p for p in measured if p.node.without_params == test]
            suffix = "" if len(tests) == 1 else f"-{pts[0].node.short_name}"
            images.append(
                plots.throughput(pts, margins, directory / f"throughput{suffix}.png").name
            )
            images.append(
                plots.latency(
                    pts, directory / f"latency{suffix}.png", latency_goldens(results, test)
                ).name
            )
        if results.analyses:
            images.append(plots.speedup(results.analyses, directory / "speedup.png").name)
        images += series_plots(results, directory)
        capacities = results.of(CapacityPoint)
        if by_rate or capacities:
            path = directory / "latency-by-rate.png"
            images.append(plots.latency_by_rate(by_rate, capacities, path).name)
    else:
        notes.append(
            "plots skipped: matplotlib is not installed (pip install 'pytest-llmperf[report]')"
        )
    text = markdown.render(results)
    (directory / "summary.md").write_text(text + markdown.images_section(images), encoding="utf-8")
    notes.append(f"{directory / 'summary.md'}" + (f" and {len(images)} plot(s)" if images else ""))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        notes.append(f"appended to $GITHUB_STEP_SUMMARY ({step_summary})")
    return notes


def series_plots(results: Results, directory: Path) -> list[str]:
    """A plot of the server's gauges for every FAIL or WARN point that has a series (one a
    measured point: its gated figures share its runs and its series)."""
    from pytest_llmperf.core.outcome import Outcome

    names: list[str] = []
    drawn: set[tuple[str, str, int, float | None]] = set()
    for point in results.measured:
        where = (point.profile, point.test, point.concurrency, point.rate)
        if point.verdict not in (Outcome.FAIL, Outcome.WARN) or not point.server_series:
            continue
        if where in drawn:
            continue
        drawn.add(where)
        slug = re.sub(
            r"[^A-Za-z0-9_.-]+", "_", f"{point.profile}-{point.node.short_name}-{point.level}"
        )
        names.append(plots.server_series(point, confined(directory, f"series-{slug}.png")).name)
    return names
