"""``history STORE --html DIR``: one self-contained page, ``DIR/index.html``.

It opens from a CI artifact with no network: no CDN, the script and styles inline, the data a
JSON island. One trend chart per point (its night means, each run's range, the golden's band
with its fail margin, verdict colours, change points with their size, markers where the
fingerprint or engine version changed and where a golden was re-recorded, a tooltip with run,
date, commit and version, and for the latest night and each FAIL or WARN its detail: the
server's gauges through the runs as a sparkline, the GPUs', the energy, the profiled run;
history/details.py), and a table of the open change points, newest first.

The charts are drawn on canvases by a small script (dashboard.js, inline): 365 nights × 100
points draw in well under the 2 s budget (benchmarks/dashboard_render.py measures it in
Chromium), where an SVG per point of a plotting library would be megabytes of DOM.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_llmperf.core.points import unit_of
from pytest_llmperf.history.details import detail, wanted
from pytest_llmperf.history.series import Series, build, fingerprint_changes, open_change_points
from pytest_llmperf.history.store import HistoryStore

VERDICT_CODES = {None: 0, "PASS": 1, "IMPROVED": 2, "WARN": 3, "FAIL": 4, "INVALID": 5}


def _series_data(
    series: Series,
    run_index: dict[str, int],
    events: dict[str, list],
    margins: tuple[float | None, float | None],
    stored: dict[int, dict[str, Any]],
) -> dict:
    xs, ys, lo, hi, verdicts, gold = [], [], [], [], [], []
    for night in series.nights:
        xs.append(run_index[night.run_id])
        ys.append(round(night.mean, 6))
        lo.append(round(min(night.values), 6))
        hi.append(round(max(night.values), 6))
        verdicts.append(VERDICT_CODES.get(night.verdict, 0))
        gold.append(None if night.golden_mean is None else round(night.golden_mean, 6))
    marks = []
    for before, after in zip(series.nights, series.nights[1:]):
        changed = fingerprint_changes(before.fingerprint, after.fingerprint)
        if before.engine_version != after.engine_version:
            changed.insert(0, f"engine version {before.engine_version} → {after.engine_version}")
        if changed:
            marks.append([run_index[after.run_id], "; ".join(changed)[:400]])
    cps = []
    for cp in series.change_points():
        report = series.report(cp)
        cps.append(
            [
                run_index[report["first_bad_run"]],
                round(report["change"], 5),
                [round(v, 5) for v in report["interval"]],
                report["worse"],
            ]
        )
    # A recording (a --perf-update run, not a night) is shown at the first night after it.
    recorded = []
    for run_id, keys, why in events.get(series.profile, []):
        if series.key in keys and run_id in run_index:
            later = [x for x in xs if x >= run_index[run_id]]
            if later:
                recorded.append([later[0], why])
    shown = {}
    for k, night in enumerate(series.nights):
        found = detail(stored[night.point_id]) if night.point_id in stored else None
        if found is not None:
            shown[str(k)] = found
    return {
        "profile": series.profile,
        "key": series.key,
        "metric": series.metric,
        "unit": unit_of(series.metric),
        "lower": series.lower_is_better,
        "x": xs,
        "y": ys,
        "lo": lo,
        "hi": hi,
        "v": verdicts,
        "g": gold,
        "fail": margins[0],
        "warn": margins[1],
        "cps": cps,
        "marks": marks,
        "rec": recorded,
        "d": shown,
    }


def data(store: HistoryStore) -> dict[str, Any]:
    """Everything the page shows, as compact JSON (runs referenced by index)."""

    runs = store.runs()
    rows = store.series_rows()
    margins: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for row in rows:  # the margins the latest judged night used (stored with its golden)
        golden = row.get("golden") or {}
        if isinstance(golden, dict) and golden.get("fail_margin") is not None:
            margins[(row["profile"], row["key"])] = (
                golden.get("fail_margin"),
                golden.get("warn_margin"),
            )
    all_series = build(rows)
    stored = store.point_details(i for s in all_series for i in wanted(s.nights))
    run_index = {r["run_id"]: i for i, r in enumerate(runs)}
    events: dict[str, list] = {}
    for e in store.events():
        detail = e.get("detail") or {}
        events.setdefault(e["profile"], []).append(
            (e["run_id"], set(detail.get("keys", [])), detail.get("why", ""))
        )
    return {
        "store": store.label,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": [
            [
                r["run_id"],
                datetime.fromtimestamp(r["started_at"], timezone.utc).strftime("%Y-%m-%d %H:%M"),
                (r["git_commit"] or "")[:10],
                bool(r["complete"]),
                r["ci_url"] or "",
                ", ".join(f"{p['profile']} {p['engine_version'] or '?'}" for p in r["profiles"]),
            ]
            for r in runs
        ],
        "series": [
            _series_data(
                s, run_index, events, margins.get((s.profile, s.key), (None, None)), stored
            )
            for s in all_series
        ],
        "open": open_change_points(all_series),
    }


def render(payload: dict[str, Any]) -> str:
    """The page: the template with the script inline and the data as a JSON island."""
    template = resources.files("pytest_llmperf.history").joinpath("dashboard.html").read_text()
    script = resources.files("pytest_llmperf.history").joinpath("dashboard.js").read_text()
    # "</" inside a <script> element would end it: JSON allows "<\/".
    island = json.dumps(payload, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return template.replace("/*LLMPERF_SCRIPT*/", script).replace("/*LLMPERF_DATA*/", island)


def write(store: HistoryStore, directory: Path) -> Path:
    from pytest_llmperf.files import write_atomic

    path = directory / "index.html"
    write_atomic(path, render(data(store)))
    return path
