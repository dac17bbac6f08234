"""Everything one pytest run measured and concluded, as the renderers see it.

The session builds a :class:`Results` at the end of the run; the terminal summary, the
Markdown report, the plots, the results JSON and the pytest-benchmark export are pure
functions of it, so each can be tested on a hand-built one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.parity import PairParity
from pytest_llmperf.core.points import MeasuredPoint, Point, SpeedupPoint
from pytest_llmperf.core.speculative import Analysis

P = TypeVar("P", bound=Point)


@dataclass(frozen=True)
class ProfileFacts:
    """What the renderers need to know of a profile beyond its points."""

    fail_margin: float = 0.15
    min_requests: int | None = None
    warmup: bool | None = None
    #: A speculative profile's base (None: not speculative).
    base_profile: str | None = None


@dataclass
class Results:
    #: Every point of the run, of every kind (measured figures, speedups, capacities,
    #: startups, accuracies, identical shares): :meth:`of` picks a kind.
    points: list[Point] = field(default_factory=list)
    #: Greedy parity of each speculative profile with its base (core/parity.py): not a point
    #: (no figure, no golden); its identical share is among ``points``.
    parities: list[PairParity] = field(default_factory=list)
    analyses: list[Analysis] = field(default_factory=list)
    #: The fresh launches made to confirm points the launches' noise left undecided, each as
    #: the results JSON keeps it (``profile``, ``copy``, ``launch_id``, ``load_s``,
    #: ``measure_s`` and ``points``: each point's outcome after it).
    confirmations: list[dict[str, Any]] = field(default_factory=list)
    #: Per speculative profile: where its engine channel's acceptance was pinned ("acceptance
    #: pinned at 2.88, its golden's"), or why the channel was not measured.
    engine_channel: dict[str, str] = field(default_factory=dict)
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

    def of(self, kind: type[P]) -> list[P]:
        """The points of exactly this kind."""
        return [p for p in self.points if type(p) is kind]

    @property
    def measured(self) -> list[MeasuredPoint]:
        """The points measured in runs (throughput, latency, a rate level, a second figure)."""
        return self.of(MeasuredPoint)

    @property
    def speedups(self) -> list[SpeedupPoint]:
        return self.of(SpeedupPoint)

    def counts(self) -> dict[Outcome, int]:
        """How many points (and parity checks) ended in each outcome, most urgent first."""
        counts: dict[Outcome, int] = {}
        outcomes = [p.verdict for p in self.points] + [p.outcome for p in self.parities]
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
            if p.channel is None
            and p.profile == analysis.profile
            and p.base_profile == analysis.base_profile
            and NodeId(p.of_test).without_params == analysis.test
        ]

    def tests(self) -> list[str]:
        """The measuring tests (node ids without parameters), sorted."""
        return sorted({p.node.without_params for p in self.measured})

    def hardware_key(self, profile: str) -> str | None:
        fp = self.fingerprints.get(profile) or {}
        return ((fp.get("hard") or {}).get("hardware") or {}).get("key")
