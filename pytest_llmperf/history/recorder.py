"""What one pytest run writes to the history, the moment it happens.

The run's row when the session starts (``complete`` false until it ends, so a killed run stays
readable and marked incomplete), each profile's engine version and fingerprint when its server is
up, each point when it is measured and again when it is judged, each golden recording, each
load's and level's wall time, and the run's end.

A store that fails mid-run does not stop the measurement: that record and every later one go to
a spool file in the run directory (one JSON object a line, synced), and the run says how to load
it: ``python -m pytest_llmperf history STORE --load-spool FILE``.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf import __version__
from pytest_llmperf.core.metrics import METRICS, figure
from pytest_llmperf.core.points import MeasuredPoint, Point, SpeedupPoint
from pytest_llmperf.core.stats import finite_or_none
from pytest_llmperf.history.store import HistoryError, HistoryStore, append_spool

if TYPE_CHECKING:
    from pytest_llmperf.golden.fingerprint import Fingerprint
    from pytest_llmperf.history.series import Series

#: Every figure a run has, stored per run of a point (its accept length too).
RUN_FIGURES = (*METRICS, "accept_length")
#: Where CI services say which run this is (the first one set wins).
CI_URL_VARIABLES = ("CI_JOB_URL", "BUILDKITE_BUILD_URL", "BUILD_URL", "CIRCLE_BUILD_URL")


def new_run_id(now: float | None = None) -> str:
    """Sortable and readable: ``20261201T051702-3fa9c1`` (UTC start, then 6 random hex digits)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def ci_url(environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """This CI run's page, from the environment of GitHub Actions, GitLab, Buildkite, Jenkins or
    CircleCI (None outside CI)."""
    if environ.get("GITHUB_RUN_ID") and environ.get("GITHUB_REPOSITORY"):
        server = environ.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{environ['GITHUB_REPOSITORY']}/actions/runs/{environ['GITHUB_RUN_ID']}"
    return next((environ[v] for v in CI_URL_VARIABLES if environ.get(v)), None)


def git_state(directory: Path) -> dict[str, Any]:
    """The tested code's commit, branch and whether it has uncommitted changes, when
    ``directory`` is in a git checkout; else the commit CI names in the environment."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        env_commit = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA")
        return {"git_commit": env_commit, "git_branch": None, "git_dirty": None}
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "git_commit": commit,
        "git_branch": None if branch in (None, "HEAD") else branch,
        "git_dirty": None if status is None else bool(status),
    }


_CREDENTIALS = re.compile(r"(\w[\w+.-]*://[^/\s:@]*:)\S*@")


def mask_credentials(text: str) -> str:
    """``postgresql://perf:secret@db/x`` → ``postgresql://perf:***@db/x``: the command line is
    stored, and a store's URL given on it may carry a password."""
    return _CREDENTIALS.sub(r"\1***@", text)


def run_figures(point: Point) -> list[dict[str, float | None]]:
    """Per run of the point, every figure it has (None where it has none)."""
    if isinstance(point, SpeedupPoint):
        return [{"speedup": finite_or_none(v)} for v in point.values]
    assert isinstance(point, MeasuredPoint)
    out = []
    for run in point.runs:
        values: dict[str, float | None] = {}
        for name in RUN_FIGURES:
            value = run.accept_length if name == "accept_length" else figure(run, name)
            values[name] = float(value) if value is not None and math.isfinite(value) else None
        out.append(values)
    return out


@dataclass
class HistoryRecorder:
    """The run's writer: to the store, or to the spool once the store has failed."""

    store: HistoryStore
    run_id: str
    spool: Path
    #: Why the store stopped taking records, and how many went to the spool since.
    failure: str | None = None
    spooled: int = 0
    started_at: float = field(default_factory=time.time)
    #: The run's and its profiles' records: spooled first when the store fails.
    context: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(
        cls, where: str, *, mode: str, run_dir: Path, code_dir: Path, command: Sequence[str]
    ) -> HistoryRecorder:
        """Open the store (HistoryError, before any server starts, when it cannot be used) and
        write the run's row."""
        store = HistoryStore.open(where)
        run_id = new_run_id()
        recorder = cls(store, run_id, run_dir / "history-spool.jsonl")
        recorder.write(
            {
                "kind": "run",
                "run_id": run_id,
                "started_at": recorder.started_at,
                "mode": mode,
                "host": socket.gethostname(),
                **git_state(code_dir),
                "ci_url": ci_url(),
                "plugin_version": __version__,
                "command": mask_credentials(" ".join(command))[:2000],
            }
        )
        if recorder.failure:
            raise HistoryError(recorder.failure)
        return recorder

    def write(self, record: dict[str, Any]) -> None:
        if record["kind"] in ("run", "profile"):
            self.context.append(record)
        if self.failure is None:
            try:
                self.store.apply(record)
                return
            except HistoryError as exc:
                self.failure = str(exc)
                # The run's own records first, so the spool loads into any store (a fresh one
                # too); loading them twice is harmless.
                for earlier in self.context:
                    if earlier is not record:
                        self._spool(earlier)
        self._spool(record)

    def _spool(self, record: dict[str, Any]) -> None:
        append_spool(self.spool, record)
        self.spooled += 1

    def profile(
        self, name: str, fingerprint: Fingerprint, engine: str, load_s: float | None
    ) -> None:
        self.write(
            {
                "kind": "profile",
                "run_id": self.run_id,
                "profile": name,
                "engine": engine,
                "engine_version": fingerprint.soft.get("server_version"),
                "hardware_key": fingerprint.hardware_key,
                "fingerprint": finite_or_none(fingerprint.to_json()),
                "load_s": load_s,
            }
        )
        if load_s is not None:
            self.timing(name, "load", name, load_s)

    def point(self, point: Point) -> None:
        """The point as it stands (its runs so far, its verdict once judged)."""
        counters = point.counters if isinstance(point, MeasuredPoint) else None
        wall_s = point.wall_s if isinstance(point, MeasuredPoint) else None
        measured = point if isinstance(point, MeasuredPoint) else None
        series = measured.server_series if measured else None
        gpus = measured.gpu_series if measured else None
        profiled = measured.server_profile if measured else None
        self.write(
            {
                "kind": "point",
                "run_id": self.run_id,
                "profile": point.profile,
                "key": point.key,
                "test": point.test,
                "concurrency": point.concurrency,
                "metric": point.metric,
                "lower_is_better": point.lower_is_better,
                "measured_at": time.time(),
                "verdict": point.verdict_json,
                "ratio": finite_or_none(point.ratio),
                "p_value": finite_or_none(point.p_value),
                "golden": finite_or_none(point.golden_json),
                "message": point.message,
                "problems": point.problems,
                "counters": finite_or_none(counters) if counters else None,
                "server_series": finite_or_none(series) if series else None,
                "gpu_series": finite_or_none(gpus) if gpus else None,
                "server_profile": finite_or_none(profiled) if profiled else None,
                "wall_s": wall_s,
                "samples": run_figures(point),
            }
        )

    def series_of(self, point: Point, hardware_key: str | None) -> Series | None:
        """The point's stored nights on this hardware with tonight's appended; None when there
        is nothing to read, or the store has failed (noted once; the run goes on without)."""
        from pytest_llmperf.history import gate

        if self.failure is not None:
            return None
        try:
            stored = gate.stored_series(self.store, point, self.run_id, hardware_key)
        except HistoryError as exc:
            self.failure = str(exc)
            return None
        series = gate.with_tonight(stored, point, self.run_id, self.started_at)
        return series if series.nights else None

    def golden_recorded(self, profile: str, path: Path, keys: Sequence[str], why: str) -> None:
        self.write(
            {
                "kind": "event",
                "event": "golden_recorded",
                "run_id": self.run_id,
                "at": time.time(),
                "profile": profile,
                "detail": {"path": str(path), "keys": list(keys), "why": why},
            }
        )

    def timing(self, profile: str, phase: str, name: str, seconds: float) -> None:
        self.write(
            {
                "kind": "timing",
                "run_id": self.run_id,
                "profile": profile,
                "phase": phase,
                "name": name,
                "seconds": seconds,
            }
        )

    def finished(self, exit_status: int, *, complete: bool) -> None:
        self.write(
            {
                "kind": "finished",
                "run_id": self.run_id,
                "ended_at": time.time(),
                "complete": complete,
                "exit_status": exit_status,
            }
        )

    def notes(self) -> list[str]:
        """What the terminal says at the end: nothing when every record reached the store."""
        if self.failure is None:
            return []
        return [
            f"the history store failed during the run ({self.failure}); {self.spooled} records "
            f"went to {self.spool}. Load them when the store is back: python -m pytest_llmperf "
            f"history {self.store.label} --load-spool {self.spool}"
        ]
