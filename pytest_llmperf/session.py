"""The plugin's state for one pytest run, kept in ``config.stash``.

It holds the settings, the selected profiles, the run directory, the servers in use and
every measured point, and writes the results JSON once, atomically, at the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf import speculative
from pytest_llmperf.baseline import PendingFile, PendingPoint, golden_path, point_key
from pytest_llmperf.baseline import load as load_golden
from pytest_llmperf.fingerprint import Fingerprint
from pytest_llmperf.metrics import PointSummary, RunMetrics
from pytest_llmperf.profiles import Profile, ProfileSet
from pytest_llmperf.server import ServerHandle
from pytest_llmperf.settings import Settings
from pytest_llmperf.speculative import Analysis

JSON_SCHEMA_VERSION = 1


@dataclass
class PointResult:
    """One (profile, test, concurrency) point: its runs and what they add up to."""

    profile: str
    test: str
    concurrency: int
    metric: str
    runs: list[RunMetrics]
    launch_id: str
    output_len: int
    api: str
    workload: dict[str, Any] = field(default_factory=dict)
    #: Set by the check: PASS, WARN, IMPROVED, FAIL, MISSING, INCOMPARABLE or RECORDED.
    outcome: str | None = None
    golden: dict[str, Any] | None = None
    ratio: float | None = None
    p_value: float | None = None
    message: str | None = None
    #: A derived point (a speculative speedup) carries its samples here instead of runs.
    samples: tuple[float, ...] | None = None
    base_profile: str | None = None
    notes: list[str] = field(default_factory=list)  # problems that are not a run's (e.g. A/B/A drift)
    #: Soft fingerprint keys that differ from the golden's (versions, the server binary): never
    #: blocking, but the first thing to look at when a point fails.
    environment_changes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """How messages name the point: ``eagle3 C=70``, ``eagle3 vs baseline C=70``."""
        vs = f" vs {self.base_profile}" if self.base_profile else ""
        return f"{self.profile}{vs} C={self.concurrency}"

    @property
    def unit(self) -> str:
        return "x" if self.metric == "speedup" else "tok/s"

    @property
    def values(self) -> tuple[float, ...]:
        if self.samples is not None:
            return self.samples
        if self.metric == "request_tok_s":
            return tuple(r.request_tok_s["mean"] for r in self.runs)
        return tuple(getattr(r, self.metric) for r in self.runs)

    @property
    def summary(self) -> PointSummary:
        return PointSummary(self.values)

    @property
    def problems(self) -> list[str]:
        out: list[str] = list(self.notes)
        for k, run in enumerate(self.runs, start=1):
            out += [f"run {k}: {p}" for p in run.problems]
        return out

    @property
    def verdict(self) -> str | None:
        return "INVALID" if self.problems else self.outcome

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile, "test": self.test, "concurrency": self.concurrency, "metric": self.metric,
            "values": list(self.values), "runs": [r.to_json() for r in self.runs], "launch_id": self.launch_id,
            "workload": self.workload, "golden": self.golden, "ratio": self.ratio, "p_value": self.p_value,
            "verdict": self.verdict, "message": self.message, "problems": self.problems,
            "environment_changes": self.environment_changes,
        }


@dataclass
class LLMPerfSession:
    settings: Settings
    profiles: ProfileSet | None
    selected: list[Profile]
    run_dir: Path
    points: list[PointResult] = field(default_factory=list)
    speedups: list[PointResult] = field(default_factory=list)  # the speculative speedup gate's points
    servers: dict[str, ServerHandle] = field(default_factory=dict)
    fingerprints: dict[str, Fingerprint] = field(default_factory=dict)
    goldens: dict[Path, dict[str, Any] | None] = field(default_factory=dict)
    pending: dict[Path, PendingFile] = field(default_factory=dict)
    golden_notes: list[str] = field(default_factory=list)
    report_notes: list[str] = field(default_factory=list)  # what --perf-report / --perf-benchmark-json wrote
    whole_suite: bool = True  # nothing deselected: goldens nobody used can be reported

    def record(self, point: PointResult) -> None:
        self.points.append(point)

    def golden_file(self, profile: str) -> Path:
        return golden_path(self.settings.baseline_dir, profile, self.fingerprints[profile].hardware_key)

    def golden(self, profile: str) -> dict[str, Any] | None:
        """The profile's golden file, read once per session (GoldenError if unusable)."""
        path = self.golden_file(profile)
        if path not in self.goldens:
            self.goldens[path] = load_golden(path)
        return self.goldens[path]

    def queue_golden(self, point: PendingPoint, profile: str) -> Path:
        path = self.golden_file(profile)
        entry = self.pending.setdefault(path, PendingFile(path, profile, self.fingerprints[profile].to_json()))
        entry.points = [p for p in entry.points if p.key != point.key] + [point]
        return path

    def unused_goldens(self) -> list[str]:
        """Recorded points of the selected profiles that no test measured in this run."""
        measured = {(p.profile, point_key(p.test, p.concurrency)) for p in [*self.points, *self.speedups]}
        unused = []
        for profile in self.servers:
            path = self.golden_file(profile)
            data = self.goldens.get(path)
            for key in sorted((data or {}).get("points", {})):
                if (profile, key) not in measured:
                    unused.append(f"{path}: {key}")
        return unused

    def fingerprint(self) -> dict[str, Any]:
        """Per profile: hard keys (must match a golden), soft keys (recorded), their hash."""
        fps = self.fingerprints
        return {"hard": {name: fp.hard for name, fp in fps.items()}, "soft": {name: fp.soft for name, fp in fps.items()},
                "comparability_hash": {name: fp.comparability_hash for name, fp in fps.items()}}

    def profile_json(self) -> dict[str, Any]:
        out = {}
        for name, handle in self.servers.items():
            profile = handle.profile
            out[name] = {
                "engine": profile.engine, "model": profile.model, "api": profile.api, "args": list(profile.args),
                "env": dict(profile.env), "launch_id": handle.launch_id, "attached": handle.attached,
                "base_url": handle.base_url, "log": str(handle.log_path) if handle.log_path else None,
                "server_info": handle.info,
            }
        return out

    def results_json(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "run_dir": str(self.run_dir),
            "fingerprint": self.fingerprint(),
            "profiles": self.profile_json(),
            "points": [p.to_json() for p in self.points],
            "speculative": [self._speculative_json(a) for a in self.analyses()],
        }

    def analyses(self) -> list[Analysis]:
        """Each selected speculative profile against its base, when both were measured in this run."""
        out = []
        for profile in self.selected:
            if profile.speculative and profile.base_profile and not profile.rebaseline_of:
                out += speculative.analyse_points(profile.name, profile.base_profile, self.points,
                                                  sglang_version=self._server_version(profile.name))
        return out

    def _server_version(self, profile: str) -> str | None:
        fp = self.fingerprints.get(profile)
        return fp.soft.get("server_version") if fp else None

    def speedups_of(self, analysis: Analysis) -> list[PointResult]:
        """The speedup gate's points for this analysis (same pair, same measuring test)."""
        return [p for p in self.speedups if p.profile == analysis.profile and p.base_profile == analysis.base_profile
                and p.workload.get("of", "").split("[")[0] == analysis.test.split("[")[0]]

    def _speculative_json(self, analysis: Analysis) -> dict[str, Any]:
        gate = {str(p.concurrency): {"verdict": p.verdict, "ratio": p.ratio, "p_value": p.p_value,
                                     "golden": p.golden, "values": list(p.values), "message": p.message}
                for p in self.speedups_of(analysis)}
        return {**analysis.to_json(), "gate": gate}


SESSION_KEY = pytest.StashKey[LLMPerfSession]()
