"""Synthetic nightly series, written through the store's own records (the same records a run
writes): for the detector's known answers, the CLI, the exports and the dashboard's size test.

A night's runs are ``base × (1 + step after step_at) × (1 + drift)^night × noise``, the noise
log-normal with sd ``noise`` per run plus ``night_noise`` shared by the night's runs (a session
shift), as verdict_power's noise model has a launch offset.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import numpy as np

from pytest_llmperf.history.store import HistoryStore

DAY = 86_400.0
START = 1_780_000_000.0  # 2026-05-28


@dataclass
class Nights:
    nights: int = 9
    points: int = 2
    runs: int = 3
    base: float = 1000.0
    step_at: int | None = None  # the first night of the new level (0-based)
    step: float = 0.0  # e.g. -0.08
    drift: float = 0.0  # per night, e.g. -0.02
    noise: float = 0.005
    night_noise: float = 0.005
    version_change_at: int | None = None
    seed: int = 0
    profile: str = "sim-baseline"


def run_id(night: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(START + night * DAY))
    return f"{stamp}-{night:06x}"


def factor(spec: Nights, night: int) -> float:
    stepped = spec.step if spec.step_at is not None and night >= spec.step_at else 0.0
    return (1 + stepped) * (1 + spec.drift) ** night


def records(spec: Nights) -> list[dict]:
    rng = np.random.default_rng(spec.seed)
    out: list[dict] = []
    for night in range(spec.nights):
        rid, at = run_id(night), START + night * DAY
        version = (
            "0.5.6" if spec.version_change_at is None or night < spec.version_change_at else "0.5.9"
        )
        out.append(
            {"kind": "run", "run_id": rid, "started_at": at, "mode": "gate", "host": "gpu-1",
             "git_commit": hashlib.sha1(str(night).encode()).hexdigest(), "git_branch": "main", "git_dirty": False,
             "ci_url": None, "plugin_version": "0.1.0", "command": "pytest perf_suites"}
        )  # fmt: skip
        out.append(
            {"kind": "profile", "run_id": rid, "profile": spec.profile, "engine": "sglang",
             "engine_version": version, "hardware_key": "h200x8",
             "fingerprint": {"soft": {"server_version": version}}, "load_s": 600.0}
        )  # fmt: skip
        shared = rng.normal(0, spec.night_noise)
        for p in range(spec.points):
            level = [1, 2, 5, 10, 30, 70, 100, 250][p % 8]
            key = f"perf_suites/test_throughput.py::test_output_throughput[C={level}]"
            if p >= 8:
                key += f" #{p // 8}"
            values = [
                spec.base * factor(spec, night) * math.exp(shared + rng.normal(0, spec.noise))
                for _ in range(spec.runs)
            ]
            out.append(
                {"kind": "point", "run_id": rid, "profile": spec.profile, "key": key,
                 "test": key.split(" ")[0], "concurrency": level, "metric": "output_tok_s",
                 "lower_is_better": False, "measured_at": at + 60 * p, "verdict": "PASS",
                 "ratio": None, "p_value": None,
                 "golden": {"mean": spec.base, "n": 10, "fail_margin": 0.15, "warn_margin": 0.05},
                 "message": None, "problems": [], "counters": None, "wall_s": 30.0,
                 "samples": [{"output_tok_s": v} for v in values]}
            )  # fmt: skip
        out.append(
            {"kind": "finished", "run_id": rid, "ended_at": at + 3600, "complete": True,
             "exit_status": 0}
        )  # fmt: skip
    return out


def build_store(where: str, spec: Nights) -> HistoryStore:
    store = HistoryStore.open(where)
    store.apply_all(records(spec))
    return store


def bulk_store(where: str, spec: Nights) -> HistoryStore:
    """The same records inserted in bulk (a year of a hundred points in seconds, not minutes):
    for the dashboard's size test and benchmark, which read the store, not write it."""
    from sqlalchemy import insert

    from pytest_llmperf.history import schema as s

    store = HistoryStore.open(where)
    by_kind: dict[str, list[dict]] = {}
    samples = []
    point_id = 0
    for record in records(spec):
        fields = {k: v for k, v in record.items() if k != "kind"}
        if record["kind"] == "point":
            point_id += 1
            runs = fields.pop("samples")
            fields["id"] = point_id
            samples += [
                {"point_id": point_id, "run_index": i, "figure": name, "value": value}
                for i, figures in enumerate(runs)
                for name, value in figures.items()
            ]
        by_kind.setdefault(record["kind"], []).append(fields)
    finished = {f["run_id"]: f for f in by_kind.pop("finished", [])}
    runs = [{**r, **finished.get(r["run_id"], {}), "complete": True} for r in by_kind["run"]]
    with store.engine.begin() as conn:
        conn.execute(insert(s.runs), runs)
        conn.execute(insert(s.run_profiles), by_kind["profile"])
        conn.execute(insert(s.points), by_kind["point"])
        conn.execute(insert(s.samples), samples)
        conn.execute(
            insert(s.events),
            [{"run_id": run_id(0), "at": START, "kind": "golden_recorded", "profile": spec.profile,
              "detail": {"keys": [p["key"] for p in by_kind["point"][: spec.points]],
                         "why": "--perf-update", "path": "baselines/x.json"}}],
        )  # fmt: skip
    return store
