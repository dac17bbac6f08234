"""A golden file as typed, frozen values: read once (:meth:`GoldenFile.from_json`), written
once (:meth:`GoldenFile.to_json`), and nothing else looks inside the JSON.

``<baseline dir>/<profile>/<hardware key>.json``::

    GoldenFile     schema, profile, hardware_key, fingerprint, points by key
    └── GoldenPoint   test, concurrency, metric, workload, runs, summary, history, anchor
        ├── GoldenRun     value, launch_id, requests, output_tokens, accept_length, recorded
        └── HistoryEntry  when, why, mean, n, launches

A field this version does not know is kept as it was read (``extra``), so a file written by a
newer plugin loses nothing when an older one pools into it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_llmperf.core.verdict import LaunchSpread, pooled_launch_spread

SCHEMA_VERSION = 1
_RUN_KEYS = ("value", "launch_id", "requests", "output_tokens", "accept_length", "recorded")
_HISTORY_KEYS = ("when", "why", "mean", "n", "launches")
_POINT_KEYS = ("test", "concurrency", "metric", "workload", "runs", "summary", "history", "anchor")
_FILE_KEYS = ("schema", "profile", "hardware_key", "fingerprint", "points")


def _extra(data: Mapping[str, Any], known: tuple[str, ...]) -> Mapping[str, Any]:
    return MappingProxyType({k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class GoldenRun:
    """One recorded run of a point."""

    value: float
    launch_id: str | None = None
    requests: int | None = None
    output_tokens: int | None = None
    accept_length: float | None = None
    recorded: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The fields the file had (an older run may lack ``recorded``): written back as read.
    keys: frozenset[str] = field(default=frozenset(_RUN_KEYS), compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GoldenRun:
        return cls(
            value=data["value"],
            launch_id=data.get("launch_id"),
            requests=data.get("requests"),
            output_tokens=data.get("output_tokens"),
            accept_length=data.get("accept_length"),
            recorded=data.get("recorded"),
            extra=_extra(data, _RUN_KEYS),
            keys=frozenset(k for k in _RUN_KEYS if k in data),
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, **{k: getattr(self, k) for k in _RUN_KEYS if k in self.keys}}


@dataclass(frozen=True)
class HistoryEntry:
    """One recording of a point: when, why, and what its golden became."""

    when: str
    why: str
    mean: float
    n: int
    launches: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryEntry:
        return cls(
            when=data.get("when", ""),
            why=data.get("why", ""),
            mean=data.get("mean", 0.0),
            n=data.get("n", 0),
            launches=tuple(data.get("launches") or ()),
            extra=_extra(data, _HISTORY_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "when": self.when,
            "why": self.why,
            "mean": self.mean,
            "n": self.n,
            "launches": list(self.launches),
        }


@dataclass(frozen=True)
class GoldenPoint:
    """A point's golden: its recorded runs and how it came to be."""

    key: str
    test: str
    concurrency: int
    metric: str
    runs: tuple[GoldenRun, ...]
    workload: Mapping[str, Any] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)
    history: tuple[HistoryEntry, ...] = ()
    anchor: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def values(self) -> list[float]:
        return [run.value for run in self.runs]

    @property
    def mean(self) -> float:
        mean = self.summary.get("mean")
        return float(mean) if mean is not None else sum(self.values) / len(self.values)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def sustainable(self) -> bool:
        """A rate level's: whether the server kept up when it was recorded."""
        return bool(self.extra.get("sustainable", True))

    @classmethod
    def from_json(cls, key: str, data: Mapping[str, Any]) -> GoldenPoint:
        return cls(
            key=key,
            test=data.get("test", ""),
            concurrency=data.get("concurrency", 0),
            metric=data.get("metric", "output_tok_s"),
            runs=tuple(GoldenRun.from_json(r) for r in data["runs"]),
            workload=data.get("workload") or {},
            summary=data.get("summary") or {},
            history=tuple(HistoryEntry.from_json(h) for h in data.get("history") or ()),
            anchor=data.get("anchor") or {},
            extra=_extra(data, _POINT_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "test": self.test,
            "concurrency": self.concurrency,
            "metric": self.metric,
            "workload": dict(self.workload),
            "runs": [run.to_json() for run in self.runs],
            "summary": dict(self.summary),
            "history": [entry.to_json() for entry in self.history],
            "anchor": dict(self.anchor),
        }


@dataclass(frozen=True)
class GoldenFile:
    """One profile's goldens on one hardware."""

    profile: str
    fingerprint: Mapping[str, Any]
    points: Mapping[str, GoldenPoint]
    hardware_key: str | None = None
    schema: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def hard(self) -> Mapping[str, Any]:
        return self.fingerprint.get("hard") or {}

    def point(self, key: str) -> GoldenPoint | None:
        return self.points.get(key)

    def launch_spread(self, metric: str) -> LaunchSpread | None:
        """How far this server's launches differ for ``metric``, pooled over every point of the
        file that has runs of two launches or more: they share their launches, so its degrees
        of freedom are the file's launches less one, however many points there are."""
        points = []
        launches: set[str | None] = set()
        for point in self.points.values():
            if point.metric == metric:
                by_launch: dict[str | None, list[float]] = {}
                for run in point.runs:
                    by_launch.setdefault(run.launch_id, []).append(math.log(run.value))
                points.append(list(by_launch.values()))
                launches |= set(by_launch)
        return pooled_launch_spread(points, "the golden's launches", launches=len(launches))

    def run_variance(self, metric: str) -> float | None:
        """How far runs differ within a launch for ``metric`` (the variance of their logs about
        their launch's mean, pooled over the file's points; None: no launch of two runs)."""
        dof, ss = 0, 0.0
        for point in self.points.values():
            if point.metric == metric:
                by_launch: dict[str | None, list[float]] = {}
                for run in point.runs:
                    by_launch.setdefault(run.launch_id, []).append(math.log(run.value))
                for logs in by_launch.values():
                    mean = math.fsum(logs) / len(logs)
                    dof += len(logs) - 1
                    ss += math.fsum((x - mean) ** 2 for x in logs)
        return ss / dof if dof else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GoldenFile:
        """A file's content, already checked by :func:`pytest_llmperf.golden.store.load`."""
        return cls(
            profile=data.get("profile", ""),
            fingerprint=data["fingerprint"],
            points={key: GoldenPoint.from_json(key, p) for key, p in data["points"].items()},
            hardware_key=data.get("hardware_key"),
            schema=data.get("schema", SCHEMA_VERSION),
            extra=_extra(data, _FILE_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.extra,
            "schema": self.schema,
            "profile": self.profile,
            "fingerprint": self.fingerprint,
            "points": {key: point.to_json() for key, point in self.points.items()},
        }
        if self.hardware_key is not None:
            out["hardware_key"] = self.hardware_key
        return out
