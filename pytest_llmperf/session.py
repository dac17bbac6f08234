"""The plugin's state for one pytest run, kept in ``config.stash``.

It holds the settings, the selected profiles, the run directory, the servers in use and
every measured point, and writes the results JSON once, atomically, at the end.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf import __version__
from pytest_llmperf.metrics import PointSummary, RunMetrics
from pytest_llmperf.profiles import Profile, ProfileSet
from pytest_llmperf.prompts import default_prompts
from pytest_llmperf.server import ServerHandle
from pytest_llmperf.settings import Settings

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

    @property
    def values(self) -> tuple[float, ...]:
        if self.metric == "request_tok_s":
            return tuple(r.request_tok_s["mean"] for r in self.runs)
        return tuple(getattr(r, self.metric) for r in self.runs)

    @property
    def summary(self) -> PointSummary:
        return PointSummary(self.values)

    @property
    def problems(self) -> list[str]:
        out: list[str] = []
        for k, run in enumerate(self.runs, start=1):
            out += [f"run {k}: {p}" for p in run.problems]
        return out

    @property
    def verdict(self) -> str | None:
        return "INVALID" if self.problems else None

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile, "test": self.test, "concurrency": self.concurrency, "metric": self.metric,
            "values": list(self.values), "runs": [r.to_json() for r in self.runs], "launch_id": self.launch_id,
            "golden": None, "ratio": None, "p_value": None, "verdict": self.verdict, "problems": self.problems,
        }


@dataclass
class LLMPerfSession:
    settings: Settings
    profiles: ProfileSet | None
    selected: list[Profile]
    run_dir: Path
    points: list[PointResult] = field(default_factory=list)
    servers: dict[str, ServerHandle] = field(default_factory=dict)

    def record(self, point: PointResult) -> None:
        self.points.append(point)

    def fingerprint(self) -> dict[str, Any]:
        prompts = default_prompts()
        hard = {"prompt_set": prompts.name, "prompt_set_sha256": prompts.sha256}
        soft = {"pytest_llmperf": __version__, "python": platform.python_version(), "platform": platform.platform()}
        return {"hard": hard, "soft": soft}

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
        }


def write_json_atomic(path: Path, data: Any) -> None:
    """Write through a temporary file in the same directory and rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


SESSION_KEY = pytest.StashKey[LLMPerfSession]()
