"""``python -m pytest_llmperf merge OUT.json LEG.json…``: the legs of a nightly matrix as one.

A matrix nightly runs one job per runner (1 GPU, 8×H200, 8×B200, …), each writing its own
results JSON (``--perf-json``). The merge is one results file with every leg's points, each
point under its leg's hardware key; one Markdown report (``--report DIR``: a section per
hardware); and one history upload (``--history STORE``: each leg a run of its own, its points
and fingerprints as the leg measured them, so change points are found per hardware).

A profile name may appear in several legs (the same profile on two runners): in the merged
``profiles`` and ``fingerprint`` tables it is then ``NAME@HARDWARE``; every point, speedup and
capacity carries ``hardware`` and ``leg`` (the index into ``legs``). Two legs with the same
profile on the same hardware are refused: they would be two measurements of one series in one
night (rerun one leg, or merge them in two runs).
"""

from __future__ import annotations

import hashlib
import json
from calendar import timegm
from collections.abc import Sequence
from pathlib import Path
from time import strptime
from typing import Any

from pytest_llmperf.core.metrics import METRICS, lower_is_better
from pytest_llmperf.errors import LLMPerfError
from pytest_llmperf.files import write_atomic
from pytest_llmperf.render.results_json import SCHEMA_VERSION


class MergeError(LLMPerfError):
    """A leg that cannot be merged: the file and what is wrong with it."""


def read_leg(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MergeError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise MergeError(f"{path}: not JSON ({exc}); pass the file --perf-json wrote") from None
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise MergeError(f"{path}: not a pytest-llmperf results file (no 'points' list)")
    if data.get("schema") != SCHEMA_VERSION:
        raise MergeError(
            f"{path}: results schema {data.get('schema')!r}, this pytest-llmperf reads "
            f"{SCHEMA_VERSION}; merge with the version that wrote the legs"
        )
    return data


def hardware_of(leg: dict[str, Any], profile: str) -> str:
    hard = (leg.get("fingerprint") or {}).get("hard") or {}
    return str(((hard.get(profile) or {}).get("hardware") or {}).get("key") or "unknown")


def merge(legs: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The merged results (see the module's docstring); MergeError on a repeated series."""
    seen: dict[tuple[str, str], Path] = {}
    names: dict[str, set[str]] = {}
    for path, leg in legs:
        for profile in _profiles_of(leg):
            hardware = hardware_of(leg, profile)
            if (profile, hardware) in seen:
                raise MergeError(
                    f"{path}: profile {profile!r} on hardware {hardware!r} is also in "
                    f"{seen[profile, hardware]}; a night holds one measurement of a series: "
                    "merge one of the two legs"
                )
            seen[profile, hardware] = path
            names.setdefault(profile, set()).add(hardware)
    merged: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "run_id": None,
        "created": max((str(leg.get("created") or "") for _, leg in legs), default=None),
        "legs": [],
        "fingerprint": {"hard": {}, "soft": {}, "comparability_hash": {}},
        "profiles": {},
        "points": [],
        "speculative": [],
        "capacity": [],
    }
    for index, (path, leg) in enumerate(legs):
        keys = {p: hardware_of(leg, p) for p in _profiles_of(leg)}
        merged["legs"].append(
            {
                "file": path.name,
                "run_id": leg.get("run_id"),
                "created": leg.get("created"),
                "hardware": keys,
            }
        )
        for profile, key in keys.items():
            shown = profile if len(names[profile]) == 1 else f"{profile}@{key}"
            for part in ("hard", "soft", "comparability_hash"):
                table = (leg.get("fingerprint") or {}).get(part) or {}
                if profile in table:
                    merged["fingerprint"][part][shown] = table[profile]
            if profile in (leg.get("profiles") or {}):
                merged["profiles"][shown] = leg["profiles"][profile]
        for section in ("points", "speculative", "capacity"):
            for item in leg.get(section) or []:
                key = keys.get(str(item.get("profile")), "unknown")
                merged[section].append({**item, "hardware": key, "leg": index})
    return merged


def _profiles_of(leg: dict[str, Any]) -> list[str]:
    hard = (leg.get("fingerprint") or {}).get("hard") or {}
    found = dict.fromkeys([*hard, *(str(p.get("profile")) for p in leg["points"])])
    return list(found)


def report(merged: dict[str, Any]) -> str:
    """One Markdown report: per hardware, each point's figure, its golden and its verdict."""
    lines = ["# pytest-llmperf: merged nightly", ""]
    lines.append(
        f"{len(merged['legs'])} leg(s): "
        + ", ".join(
            f"`{leg['file']}` ({', '.join(sorted(set(leg['hardware'].values()))) or 'no points'})"
            for leg in merged["legs"]
        )
    )
    counts: dict[str, int] = {}
    for point in merged["points"]:
        counts[str(point.get("verdict"))] = counts.get(str(point.get("verdict")), 0) + 1
    lines += ["", "Verdicts: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())), ""]
    for hardware in sorted({str(p["hardware"]) for p in merged["points"]}):
        lines += [
            f"## {hardware}",
            "",
            "| profile | test | metric | mean | golden | Δ % | verdict |",
            "|---|---|---|---:|---:|---:|---|",
        ]
        for point in merged["points"]:
            if point["hardware"] != hardware:
                continue
            values = [v for v in point.get("values") or [] if isinstance(v, (int, float))]
            mean = sum(values) / len(values) if values else None
            golden = (point.get("golden") or {}).get("mean")
            delta = f"{(mean / golden - 1) * 100:+.1f}" if mean and golden else "-"
            lines.append(
                f"| {point['profile']} | `{point.get('key') or point['test']}` | {point['metric']} | "
                f"{_fmt(mean)} | {_fmt(golden)} | {delta} | {point.get('verdict')} |"
            )
        lines.append("")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.4g}"


def history_records(path: Path, leg: dict[str, Any]) -> list[dict[str, Any]]:
    """A leg as history records (history/store.py): its run, its profiles, its points."""
    from pytest_llmperf import __version__

    created = str(leg.get("created") or "")
    try:
        started = float(timegm(strptime(created, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        started = path.stat().st_mtime
    run_id = leg.get("run_id") or (
        f"{created.replace('-', '').replace(':', '')[:15]}-"
        f"{hashlib.sha256(path.read_bytes()).hexdigest()[:6]}"
    )
    records: list[dict[str, Any]] = [
        {
            "kind": "run",
            "run_id": run_id,
            "started_at": started,
            "mode": "gate",
            "host": f"merged from {path.name}",
            "plugin_version": __version__,
            "command": f"python -m pytest_llmperf merge … {path.name}",
        },
    ]
    fingerprints = leg.get("fingerprint") or {}
    for profile in _profiles_of(leg):
        hard = (fingerprints.get("hard") or {}).get(profile) or {}
        soft = (fingerprints.get("soft") or {}).get(profile) or {}
        records.append(
            {
                "kind": "profile",
                "run_id": run_id,
                "profile": profile,
                "engine": hard.get("engine"),
                "engine_version": soft.get("server_version"),
                "hardware_key": hardware_of(leg, profile),
                "fingerprint": {"hard": hard, "soft": soft},
                "load_s": None,
            }
        )
    for point in leg["points"]:
        records.append(_point_record(run_id, started, point))
    records.append(
        {
            "kind": "finished",
            "run_id": run_id,
            "ended_at": started,
            "complete": True,
            "exit_status": None,
        }
    )
    return records


def _point_record(run_id: str, at: float, point: dict[str, Any]) -> dict[str, Any]:
    metric = str(point["metric"])
    samples = []
    for run in point.get("runs") or []:
        figures = {name: _run_figure(run, name) for name in METRICS}
        figures["accept_length"] = run.get("accept_length")
        samples.append(figures)
    if not samples:
        samples = [{metric: v} for v in point.get("values") or []]
    return {
        "kind": "point",
        "run_id": run_id,
        "profile": point["profile"],
        "key": point.get("key") or point["test"],
        "test": point["test"],
        "concurrency": point.get("concurrency") or 0,
        "metric": metric,
        "lower_is_better": lower_is_better(metric),
        "measured_at": at,
        "verdict": point.get("verdict"),
        "ratio": point.get("ratio"),
        "p_value": point.get("p_value"),
        "golden": point.get("golden"),
        "message": point.get("message"),
        "problems": point.get("problems"),
        "counters": point.get("server_counters"),
        "wall_s": point.get("wall_s"),
        "samples": samples,
    }


def _run_figure(run: dict[str, Any], name: str) -> float | None:
    if name == "request_tok_s":
        value = (run.get("request_tok_s") or {}).get("mean")
    elif name.endswith(("_p50_s", "_p90_s", "_p99_s")):
        figure, q, _ = name.split("_")
        value = (run.get(f"{figure}_s") or {}).get(q)
    else:
        value = run.get(name)
    return float(value) if isinstance(value, (int, float)) else None


def main(out: Path, legs: Sequence[Path], report_dir: Path | None, store: str | None) -> list[str]:
    """Merge ``legs`` into ``out`` (and the report and the history); the lines to print."""
    read = [(path, read_leg(path)) for path in legs]
    merged = merge(read)
    write_atomic(out, json.dumps(merged, indent=2, sort_keys=True) + "\n")
    lines = [f"merged {len(read)} leg(s), {len(merged['points'])} point(s): {out}"]
    if report_dir is not None:
        report_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(report_dir / "summary.md", report(merged) + "\n")
        lines.append(f"report: {report_dir / 'summary.md'}")
    if store is not None:
        from pytest_llmperf.history.store import HistoryStore

        history = HistoryStore.open(store)
        total = sum(history.apply_all(history_records(path, leg)) for path, leg in read)
        lines.append(f"history: {total} record(s) of {len(read)} run(s) into {store}")
    return lines
