"""Golden baselines: ``<baseline dir>/<profile>/<hardware key>.json``.

One file per profile and hardware holds the fingerprint it was recorded under and, per point,
the raw runs (value, server-launch id, requests, output tokens, accept length), a summary, an
immutable anchor (the first recorded mean) and the update history (when, why). Files are
written with sorted keys, indented, with a trailing newline, so diffs review well.

Writes happen only under ``--perf-update``, only at the end of the pytest run, atomically
(temporary file + rename) and under an exclusive lock with a fresh re-read, so two pytest
processes updating different points or profiles at once leave every file intact. A corrupt or
wrong-schema file is an error naming the file and is never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_llmperf.core.format import format_value
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.points import POWER_CAP_SHARE, PendingRun, unit_of, unrecordable
from pytest_llmperf.core.stats import Summary, finite_or_none
from pytest_llmperf.errors import LLMPerfError
from pytest_llmperf.files import confined, write_json_atomic
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.golden.model import (
    SCHEMA_VERSION,
    GoldenFile,
    GoldenPoint,
    GoldenRun,
    HistoryEntry,
)

#: With --perf-pool, keep at most this many runs per point (the newest).
MAX_POOLED_RUNS = 30


class GoldenError(LLMPerfError):
    """A golden file exists but cannot be used."""


def golden_path(baseline_dir: Path, profile: str, hardware_key: str) -> Path:
    """Where a profile's golden for this hardware lives, never outside ``baseline_dir``."""
    return confined(baseline_dir, profile, f"{hardware_key}.json")


def load(path: Path) -> GoldenFile | None:
    """The golden file, None when there is none; GoldenError when it is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GoldenError(
            f"golden file {path} is not valid JSON ({exc}). It was left untouched: restore it "
            f"(e.g. `git checkout -- {path}`) or delete it and re-record with --perf-update."
        ) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if (
        schema != SCHEMA_VERSION
        or not isinstance(data.get("points"), dict)
        or "fingerprint" not in data
    ):
        what = (
            f"has schema {schema!r}, but this version reads schema {SCHEMA_VERSION}"
            if schema != SCHEMA_VERSION
            else "lacks 'fingerprint' or a 'points' table"
        )
        raise GoldenError(
            f"golden file {path} {what}. It was left untouched: delete it and re-record with "
            "--perf-update."
        )
    for key, entry in data["points"].items():
        problem = _point_problem(entry)
        if problem:
            raise GoldenError(
                f"golden file {path}, point {key!r}: {problem}. It was left untouched: restore it "
                f"(e.g. `git checkout -- {path}`) or delete that point and re-record it with --perf-update."
            )
    return GoldenFile.from_json(data)


def _point_problem(entry: Any) -> str | None:
    """What makes one recorded point unusable, or None."""
    if not isinstance(entry, dict):
        return f"is {type(entry).__name__}, not a table"
    runs = entry.get("runs")
    if not isinstance(runs, list) or not runs:
        return "has no 'runs' list"
    for k, run in enumerate(runs, start=1):
        value = run.get("value") if isinstance(run, dict) else None
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value <= 0
        ):
            shown = "missing" if not isinstance(run, dict) or "value" not in run else repr(value)
            return f"run {k} has 'value' {shown}, not a positive number"
    return None


@dataclass
class PendingPoint:
    """A point measured under --perf-update, waiting for the end of the run."""

    key: str
    test: str
    concurrency: int
    metric: str
    runs: list[PendingRun]
    why: str
    pool: bool
    workload: dict[str, Any] = field(default_factory=dict)
    #: A rate level the server could not keep up with when recorded (see core/open_loop_figures.py).
    sustainable: bool = True
    #: More fields of the golden point (a capacity's bracket: ``low``, ``high``).
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PendingFile:
    path: Path
    profile: str
    fingerprint: dict[str, Any]
    points: list[PendingPoint] = field(default_factory=list)


def apply(
    existing: GoldenFile | None, pending: PendingFile, now: str
) -> tuple[GoldenFile, list[str]]:
    """The file after recording ``pending``, and what changed (one line per point)."""
    points = dict(existing.points) if existing else {}
    notes = []
    current = Fingerprint.from_json(pending.fingerprint)
    if existing is not None and fingerprint.hard_changes(existing.hard, current):
        # New hard keys: the other points were measured under a configuration that no longer exists.
        stale = sorted(set(points) - {p.key for p in pending.points})
        for key in stale:
            del points[key]
        if stale:
            notes.append(
                f"{pending.path}: removed {len(stale)} point(s) recorded under the old fingerprint"
            )
    for point in pending.points:
        why_not = unrecordable([r.value for r in point.runs])
        if why_not is not None:
            notes.append(f"{pending.path}: not recorded {point.key}: {why_not}")
            continue
        old = points.get(point.key)
        points[point.key] = _recorded(point, old, now)
        verb = (
            "pooled into" if old is not None and point.pool else ("replaced" if old else "recorded")
        )
        unit = unit_of(point.metric)
        # Times with their unit (latencies in ms, a startup in s); the rest beside their metric.
        mean = format_value(points[point.key].mean, unit, bare=unit not in ("s", "sec"))
        if "items" in point.extra and "correct" in point.extra:  # a share: its exact count
            mean = f"{point.extra['correct']} of {point.extra['items']}"
        notes.append(
            f"{pending.path}: {verb} {point.key}: {mean} ({point.metric}, n={points[point.key].n})"
        )
    hardware = pending.fingerprint["hard"]["hardware"]["key"]
    base = existing or GoldenFile(pending.profile, {}, {})
    return GoldenFile(
        profile=base.profile or pending.profile,
        fingerprint=pending.fingerprint,
        points=points,
        hardware_key=hardware,
        schema=SCHEMA_VERSION,
        extra=base.extra,
    ), notes


def _recorded(point: PendingPoint, old: GoldenPoint | None, now: str) -> GoldenPoint:
    """``point``'s golden after this recording: its runs (pooled with the old ones, the newest
    MAX_POOLED_RUNS, under --perf-pool), their summary, one more history entry, the old anchor."""
    runs = tuple(
        GoldenRun(
            r.value, r.launch_id, r.requests, r.output_tokens, finite_or_none(r.accept_length), now
        )
        for r in point.runs
    )
    if old is not None and point.pool:
        runs = (*old.runs, *runs)[-MAX_POOLED_RUNS:]
    summary = Summary(tuple(r.value for r in runs)).to_json()
    entry = HistoryEntry(
        now,
        point.why,
        summary["mean"],
        int(summary["n"]),
        tuple(sorted({r.launch_id for r in runs if r.launch_id is not None})),
    )
    return GoldenPoint(
        key=point.key,
        test=NodeId(point.test).without_params,
        concurrency=point.concurrency,
        metric=point.metric,
        runs=runs,
        workload=point.workload,
        summary=summary,
        history=(*(old.history if old else ()), entry),
        anchor=old.anchor if old else {"mean": summary["mean"], "recorded": now},
        extra={
            **{
                k: v
                for k, v in (old.extra if old else {}).items()
                if k not in ("sustainable", "saturation", "kernel_summary", POWER_CAP_SHARE)
            },
            **({} if point.sustainable else {"sustainable": False}),
            **point.extra,
        },
    )


def flush(pending: list[PendingFile]) -> list[str]:
    """Write every pending file: lock, re-read, merge, atomic replace. Returns what changed.

    All or nothing for unusable files: when any file to be touched is corrupt, none is written
    (GoldenError). A write that fails (disk full, permissions) is reported and the other files
    are still written (OSError after the rest, naming every file that failed)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for item in pending:
        load(item.path)  # every file is usable before the first is written
    notes: list[str] = []
    failed: list[str] = []
    for item in pending:
        try:
            item.path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(item.path):
                golden, changed = apply(load(item.path), item, now)
                write_json_atomic(item.path, golden.to_json())
        except OSError as exc:
            failed.append(f"{item.path}: {exc.strerror or exc}")
            continue
        notes += changed
    if failed:
        raise GoldenWriteError(notes, failed)
    return notes


def rename(baseline_dir: Path, old: str, new: str) -> list[str]:
    """Carry the goldens of test file ``old`` (a path as node ids write it) to ``new``, in every
    golden file under ``baseline_dir``: after ``git mv``, the moved tests keep their goldens.
    All or nothing: every file is read (and must be usable) before the first is written."""
    paths = sorted(baseline_dir.glob("*/*.json"))
    goldens = {path: load(path) for path in paths}
    notes = []
    for path, golden in goldens.items():
        if golden is None:
            continue
        moved = {key: _moved(key, old, new) for key in golden.points}
        if all(key == after for key, after in moved.items()):
            continue
        with _locked(path):
            points = {
                moved[key]: replace(
                    point,
                    key=moved[key],
                    test=_moved(point.test, old, new),
                    workload=_moved_workload(point.workload, old, new),
                )
                for key, point in golden.points.items()
            }
            write_json_atomic(path, replace(golden, points=points).to_json())
        count = sum(key != after for key, after in moved.items())
        notes.append(f"{path}: {count} point(s) moved from {old} to {new}")
    return notes


def _moved(key: str, old: str, new: str) -> str:
    return new + key[len(old) :] if key == old or key.startswith(f"{old}::") else key


def _moved_workload(workload: Any, old: str, new: str) -> Any:
    """A speedup's workload names the test it was measured by (``of``)."""
    if isinstance(workload, dict) and isinstance(workload.get("of"), str):
        return {**workload, "of": _moved(workload["of"], old, new)}
    return workload


class GoldenWriteError(OSError):
    """Some golden files could not be written; ``notes`` says what the others recorded."""

    def __init__(self, notes: list[str], failed: list[str]) -> None:
        super().__init__("; ".join(failed))
        self.notes = notes
        self.failed = failed


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
