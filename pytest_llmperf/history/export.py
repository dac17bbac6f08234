"""The history in other tools' formats, for teams that already run them.

- ``otava``: Apache Otava's CSV (``otava analyze`` in its own environment): one row per run,
  ``time`` and ``commit`` then one column per series (its night mean);
- ``bmf``: Bencher Metric Format of one run (``bencher run --adapter json``):
  ``{benchmark: {measure: {value, lower_value, upper_value}}}``;
- ``github-action-benchmark``: its ``customBiggerIsBetter`` JSON of one run,
  ``[{name, unit, value, range, extra}]``: the figures where bigger is better (throughput,
  speedup); latencies would need ``customSmallerIsBetter``, a second file.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.core.points import unit_of
from pytest_llmperf.history.series import Series


def series_name(series: Series) -> str:
    return f"{series.profile} {series.key}" + (
        "" if series.key.endswith(series.metric) else f" {series.metric}"
    )


def otava_csv(all_series: list[Series], runs: list[dict[str, Any]]) -> str:
    columns = {series_name(s): s for s in all_series}
    by_run: dict[str, dict[str, float]] = {}
    for name, series in columns.items():
        for night in series.nights:
            by_run.setdefault(night.run_id, {})[name] = night.mean
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "commit", *columns])
    for run in runs:
        values = by_run.get(run["run_id"])
        if not values:
            continue
        when = datetime.fromtimestamp(run["started_at"], timezone.utc).isoformat()
        writer.writerow(
            [when, run.get("git_commit") or ""] + [_number(values.get(name)) for name in columns]
        )
    return out.getvalue()


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def run_points(all_series: list[Series], run_id: str) -> list[tuple[Series, list[float]]]:
    """The series that have a night of ``run_id``, with that night's values."""
    out = []
    for series in all_series:
        night = next((n for n in series.nights if n.run_id == run_id), None)
        if night is not None:
            out.append((series, list(night.values)))
    return out


def bmf(all_series: list[Series], run_id: str) -> str:
    report: dict[str, dict[str, dict[str, float]]] = {}
    for series, values in run_points(all_series, run_id):
        bench = f"{series.profile} {series.key.rsplit(' ', 1)[0] if series.key.endswith(series.metric) else series.key}"
        report.setdefault(bench, {})[series.metric] = {
            "value": sum(values) / len(values),
            "lower_value": min(values),
            "upper_value": max(values),
        }
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def github_action_benchmark(all_series: list[Series], run_id: str) -> str:
    entries = []
    for series, values in run_points(all_series, run_id):
        if series.lower_is_better:
            continue
        mean = sum(values) / len(values)
        spread = (max(values) - min(values)) / 2
        entries.append(
            {
                "name": series_name(series),
                "unit": unit_of(series.metric),
                "value": round(mean, 4),
                "range": f"± {spread:.4g}",
                "extra": f"{len(values)} runs; run {run_id}",
            }
        )
    return json.dumps(entries, indent=2) + "\n"


def export(fmt: str, all_series: list[Series], runs: list[dict[str, Any]], run_id: str) -> str:
    if fmt == "otava":
        return otava_csv(all_series, runs)
    if fmt == "bmf":
        return bmf(all_series, run_id)
    return github_action_benchmark(all_series, run_id)
