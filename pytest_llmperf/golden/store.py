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
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.core.format import format_value
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.stats import Summary
from pytest_llmperf.errors import LLMPerfError
from pytest_llmperf.files import write_json_atomic
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.golden.fingerprint import Fingerprint

SCHEMA_VERSION = 1
#: With --perf-pool, keep at most this many runs per point (the newest).
MAX_POOLED_RUNS = 30


class GoldenError(LLMPerfError):
    """A golden file exists but cannot be used."""


def golden_path(baseline_dir: Path, profile: str, hardware_key: str) -> Path:
    return baseline_dir / profile / f"{hardware_key}.json"


def load(path: Path) -> dict[str, Any] | None:
    """The golden file's content, None when there is none; GoldenError when it is unusable."""
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
        raise GoldenError(
            f"golden file {path} has schema {schema!r}, expected {SCHEMA_VERSION} with 'fingerprint' and "
            f"'points'. It was left untouched: delete it and re-record with --perf-update."
        )
    return data


@dataclass
class PendingRun:
    value: float
    launch_id: str
    requests: int
    output_tokens: int
    accept_length: float | None


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


@dataclass
class PendingFile:
    path: Path
    profile: str
    fingerprint: dict[str, Any]
    points: list[PendingPoint] = field(default_factory=list)


def apply(
    existing: dict[str, Any] | None, pending: PendingFile, now: str
) -> tuple[dict[str, Any], list[str]]:
    """The file content after recording ``pending``, and what changed (one line per point)."""
    data = existing or {"schema": SCHEMA_VERSION, "profile": pending.profile, "points": {}}
    notes = []
    current = Fingerprint.from_json(pending.fingerprint)
    if existing is not None and fingerprint.hard_changes(existing["fingerprint"]["hard"], current):
        # New hard keys: the other points were measured under a configuration that no longer exists.
        stale = sorted(set(existing["points"]) - {p.key for p in pending.points})
        for key in stale:
            del data["points"][key]
        if stale:
            notes.append(
                f"{pending.path}: removed {len(stale)} point(s) recorded under the old fingerprint"
            )
    data["fingerprint"] = pending.fingerprint
    data["hardware_key"] = pending.fingerprint["hard"]["hardware"]["key"]
    for point in pending.points:
        entry = data["points"].get(point.key)
        runs: list[dict[str, Any]] = [
            {
                "value": r.value,
                "launch_id": r.launch_id,
                "requests": r.requests,
                "output_tokens": r.output_tokens,
                "accept_length": r.accept_length,
                "recorded": now,
            }
            for r in point.runs
        ]
        if entry is not None and point.pool:
            runs = (entry["runs"] + runs)[-MAX_POOLED_RUNS:]
        summary = Summary(tuple(r["value"] for r in runs)).to_json()
        history = list(entry["history"]) if entry else []
        history.append(
            {
                "when": now,
                "why": point.why,
                "mean": summary["mean"],
                "n": summary["n"],
                "launches": sorted({r["launch_id"] for r in runs}),
            }
        )
        data["points"][point.key] = {
            "test": NodeId(point.test).without_params,
            "concurrency": point.concurrency,
            "metric": point.metric,
            "workload": point.workload,
            "runs": runs,
            "summary": summary,
            "history": history,
            "anchor": entry["anchor"] if entry else {"mean": summary["mean"], "recorded": now},
        }
        verb = (
            "pooled into"
            if entry is not None and point.pool
            else ("replaced" if entry else "recorded")
        )
        mean = format_value(
            summary["mean"], "x" if point.metric == "speedup" else "tok/s", bare=True
        )
        notes.append(
            f"{pending.path}: {verb} {point.key}: {mean} ({point.metric}, n={summary['n']})"
        )
    return data, notes


def flush(pending: list[PendingFile]) -> list[str]:
    """Write every pending file: lock, re-read, merge, atomic replace. Returns what changed."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    notes: list[str] = []
    for item in pending:
        item.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(item.path):
            data, changed = apply(load(item.path), item, now)
            write_json_atomic(item.path, data)
        notes += changed
    return notes


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
