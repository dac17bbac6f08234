"""Everything one pytest run measured and concluded, as the renderers see it.

The session builds a :class:`Results` at the end of the run; the terminal summary, the
Markdown report, the plots, the results JSON and the pytest-benchmark export are pure
functions of it, so each can be tested on a hand-built one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.core.accuracy import AccuracyPoint
from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.parity import PairParity
from pytest_llmperf.core.points import MeasuredPoint, Point, SpeedupPoint
from pytest_llmperf.core.speculative import Analysis
from pytest_llmperf.core.startup import StartupPoint


@dataclass(frozen=True)
class ProfileFacts:
    """What the renderers need to know of a profile beyond its points."""

    fail_margin: float = 0.15
    min_requests: int | None = None
    warmup: bool | None = None


@dataclass
class Results:
    points: list[MeasuredPoint] = field(default_factory=list)
    speedups: list[SpeedupPoint] = field(default_factory=list)
    #: Capacities under the SLO (core/capacity.py).
    capacities: list[CapacityPoint] = field(default_factory=list)
    #: Each launch's startup, against its golden (core/startup.py).
    startups: list[StartupPoint] = field(default_factory=list)
    #: Greedy parity of each speculative profile with its base (core/parity.py).
    parities: list[PairParity] = field(default_factory=list)
    #: Accuracy on a task set, per profile (core/accuracy.py).
    accuracies: list[AccuracyPoint] = field(default_factory=list)
    analyses: list[Analysis] = field(default_factory=list)
    #: One line per golden file change written under --perf-update.
    golden_notes: list[str] = field(default_factory=list)
    #: Golden points of the measured profiles that no test used (only when the whole suite ran).
    unused_goldens: list[str] = field(default_factory=list)
    profiles: dict[str, ProfileFacts] = field(default_factory=dict)
    #: Per profile: the fingerprint as recorded (``hard``, ``soft``, ``comparability_hash``).
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per profile: how its server was run (engine, model, args, launch id, log, server info).
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_dir: str | None = None
    #: The run's id in the history store (--perf-history), else None.
    run_id: str | None = None
    update: bool = False

    @property
    def all_points(self) -> list[Point]:
        shares = [p.share for p in self.parities if p.share is not None]
        return [
            *self.points,
            *self.speedups,
            *self.capacities,
            *self.startups,
            *self.accuracies,
            *shares,
        ]

    def counts(self) -> dict[Outcome, int]:
        """How many points (and parity checks) ended in each outcome, most urgent first."""
        counts: dict[Outcome, int] = {}
        outcomes = [p.verdict for p in self.all_points] + [p.outcome for p in self.parities]
        for outcome in sorted(outcomes, key=lambda o: o.rank):
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def parity_of(self, profile: str, base_profile: str) -> PairParity | None:
        return next(
            (p for p in self.parities if (p.profile, p.base_profile) == (profile, base_profile)),
            None,
        )

    def speedups_of(self, analysis: Analysis) -> list[SpeedupPoint]:
        """The speedup gate's points for this analysis (same pair, same measuring test)."""
        return [
            p
            for p in self.speedups
            if p.profile == analysis.profile
            and p.base_profile == analysis.base_profile
            and NodeId(p.of_test).without_params == analysis.test
        ]

    def tests(self) -> list[str]:
        """The measuring tests (node ids without parameters), sorted."""
        return sorted({p.node.without_params for p in self.points})

    def hardware_key(self, profile: str) -> str | None:
        fp = self.fingerprints.get(profile) or {}
        return ((fp.get("hard") or {}).get("hardware") or {}).get("key")
