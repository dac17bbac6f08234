"""Points: what one (profile, test, concurrency) measured, and what its check concluded.

A :class:`MeasuredPoint` holds the runs a test measured against one server; a
:class:`SpeedupPoint` holds per-run speedup samples derived from two measured points (a
speculative profile and its base). Both are checked by the same rule against a golden and carry
the outcome, the golden they were compared with and the message that explains it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from pytest_llmperf.core.figures import figure_of
from pytest_llmperf.core.judgement import GoldenRef
from pytest_llmperf.core.metrics import RunMetrics, figure, lower_is_better, too_few_samples
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.stats import Summary, finite_mean, finite_or_none


def unrecordable(values: Sequence[float]) -> str | None:
    """Why ``values`` cannot be a golden's or a series' (the verdict works on their logs): the
    first that is not a finite number above 0, or None."""
    for k, value in enumerate(values, start=1):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            return f"run {k}'s value is {value!r}, not a finite number above 0"
    return None


@dataclass
class PendingRun:
    """A run as its golden file records it (golden/store.py), once the run is written."""

    value: float
    launch_id: str | None
    requests: int | None
    output_tokens: int | None
    accept_length: float | None


def unit_of(metric: str) -> str:
    return figure_of(metric).unit


#: The golden point's field that keeps the share of samples its GPUs were at their default
#: power limit (:attr:`MeasuredPoint.power_cap_share`).
POWER_CAP_SHARE = "gpu_power_cap_share"


@dataclass(kw_only=True)
class Point:
    """What every kind of point shares: where it comes from and how its check ended."""

    #: Whether points of this kind are kept in the history store, night after night.
    in_history: ClassVar[bool] = False

    profile: str
    test: str  # the pytest node id of the test that made the point
    concurrency: int
    metric: str
    #: An open-loop rate level's requests/s (``concurrency`` is then its ``max_concurrency``
    #: cap, 0 without one); None in a closed loop.
    rate: float | None = None
    #: The workload definition, a hard fingerprint key of the point's golden.
    workload: dict[str, Any] = field(default_factory=dict)
    #: Set by the check; None while the point is only measured.
    outcome: Outcome | None = None
    golden: GoldenRef | None = None
    ratio: float | None = None
    p_value: float | None = None
    message: str | None = None
    # Problems that are not a run's (e.g. A/B/A drift)
    notes: list[str] = field(default_factory=list)
    #: Soft fingerprint keys that differ from the golden's (versions, the server binary): never
    #: blocking, but the first thing to look at when a point fails.
    environment_changes: list[str] = field(default_factory=list)
    #: For a second figure checked on the same runs (``check(point, metric=…)``): the metric
    #: the point was measured for. Its golden entry is then its own.
    gated_from: str | None = None
    #: Why the point is reported but not gated (a percentile its runs cannot estimate).
    ungated: str | None = None
    #: With --perf-history: the stored runs of its series and their change points.
    history: dict[str, Any] | None = None

    @property
    def node(self) -> NodeId:
        return NodeId(self.test)

    @property
    def key(self) -> str:
        """The point's key in its golden file: ``…[C=70]``, and ``…[C=70] ttft_p99_s`` for a
        gated figure other than throughput."""
        key = self.node.point_key(self.concurrency, self.rate)
        return key if self.gated_from is None else f"{key} {self.metric}"

    @property
    def lower_is_better(self) -> bool:
        return lower_is_better(self.metric)

    def extra_golden_fields(self) -> dict[str, Any]:
        """Fields its golden point keeps besides the runs (a capacity's bracket)."""
        return {}

    def fewest_samples(self) -> int | None:
        """The fewest values a run had for the percentile the point is judged on, when too few
        to estimate it (None: enough, or not a percentile)."""
        return None

    def behind_schedule(self) -> tuple[float, float]:
        """How far a simulated server fell behind its own schedule over the point's runs, and
        the runs' measured seconds ((0, 0): not such a server, or not measured in runs)."""
        return 0.0, 0.0

    def pending_runs(self) -> list[PendingRun]:
        """The point's runs as its golden records them."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """How messages name the point: ``eagle3 C=70`` (``eagle3 C=70 ttft_p99_s`` for a
        second figure checked on the same runs)."""
        extra = f" {self.metric}" if self.gated_from is not None else ""
        return f"{self.profile} {self.level}{extra}"

    @property
    def level(self) -> str:
        """``C=70``, or ``5 req/s`` at an open-loop rate level."""
        return f"{self.rate:g} req/s" if self.rate is not None else f"C={self.concurrency}"

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    @property
    def values(self) -> tuple[float, ...]:
        raise NotImplementedError

    @property
    def summary(self) -> Summary:
        return Summary(self.values)

    @property
    def problems(self) -> list[str]:
        return list(self.notes)

    @property
    def verdict(self) -> Outcome:
        """INVALID when anything is wrong with the measurement, else the check's outcome."""
        if self.problems:
            return Outcome.INVALID
        return self.outcome or Outcome.MEASURED

    @property
    def verdict_json(self) -> str | None:
        """The verdict as the results JSON writes it: null for a point that was only measured."""
        return None if self.verdict is Outcome.MEASURED else self.verdict.value

    @property
    def golden_mean(self) -> float | None:
        return self.golden.mean if self.golden is not None else None

    @property
    def golden_json(self) -> dict[str, Any] | None:
        return self.golden.to_json() if self.golden is not None else None


@dataclass(kw_only=True)
class MeasuredPoint(Point):
    """The runs one test measured at one concurrency against one server launch."""

    in_history: ClassVar[bool] = True

    runs: list[RunMetrics] = field(default_factory=list)
    launch_id: str
    output_len: int
    api: str
    #: The server time its runs took (warm-ups and settles included), and the server's own
    #: counters over them (``/metrics``; None when it serves none).
    wall_s: float = 0.0
    counters: dict[str, float] | None = None
    #: Each server's /metrics counters (by URL: a router's workers each) before the point.
    counters_at_start: dict[str, dict[str, float]] | None = field(default=None, repr=False)
    #: The server's gauges sampled through the point's runs (servers/series.py), as stored:
    #: ``interval_s``, ``t`` and one list per gauge; None without a series.
    server_series: dict[str, Any] | None = None
    #: NVML's readings of the server's GPUs through the point's runs, per GPU (None: no NVML).
    gpu_series: dict[str, Any] | None = None
    #: One more run with the server's profiler on (--perf-profile-on; servers/profiler.py):
    #: ``trace``, ``steps``, ``summary`` (core/kernels.py), ``golden_summary`` and ``problem``.
    server_profile: dict[str, Any] | None = None
    #: The monotonic clock's reading at the series' t = 0 (more runs add to the same series).
    series_origin: float | None = field(default=None, repr=False)
    #: Runs measured again because the client, not the server, set their pace: each one's
    #: number and why (its figures are not among the runs).
    remeasured: list[str] = field(default_factory=list)
    #: Every run the point sent, those measured again and the profiled one included: the
    #: next run's number comes after them, so its requests are new to the prefix cache.
    runs_sent: int = field(default=0, repr=False)

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(figure(r, self.metric) for r in self.runs)

    @property
    def problems(self) -> list[str]:
        out: list[str] = list(self.notes)
        # A figure the host or the server gives in no run (energy without NVML, an accept
        # length without draft counts) is not had, not mismeasured: the check says which.
        not_had = figure_of(self.metric).needs is not None and not any(
            math.isfinite(figure(r, self.metric)) for r in self.runs
        )
        for k, run in enumerate(self.runs, start=1):
            out += [f"run {k}: {p}" for p in run.problems]
            value = figure(run, self.metric)
            # A run the server could not keep up with is judged on that, not on its figures.
            if not_had:
                continue
            if not run.problems and run.sustainable and not (math.isfinite(value) and value > 0):
                out.append(
                    f"run {k}: {self.metric} is {value:g}, which cannot be compared on the log "
                    "scale (no request met the SLO, or none had this figure)"
                )
        return out

    def fewest_samples(self) -> int | None:
        counts = [n for n in (too_few_samples(r, self.metric) for r in self.runs) if n is not None]
        return min(counts) if counts else None

    def behind_schedule(self) -> tuple[float, float]:
        behind = (self.counters or {}).get("behind_schedule_s", 0.0)
        return behind, sum(run.duration_s for run in self.runs)

    def for_metric(self, metric: str) -> MeasuredPoint:
        """The same runs, judged on another figure (they share the run list: runs added for one
        check count for every check of the point)."""
        twin = replace(self, metric=metric, notes=self.notes, gated_from=self.metric)
        twin.outcome = twin.golden = twin.ratio = twin.p_value = twin.message = None
        twin.runs = self.runs
        return twin

    def runs_with_the_figure(self) -> MeasuredPoint:
        """This point over the runs that measured its figure: a run the server fell behind in is
        stopped at once, possibly before any request of its window ended (no e2e to take a
        percentile of), and a rate level it could not keep up with is judged on that alone."""
        kept = [r for r in self.runs if unrecordable([figure(r, self.metric)]) is None]
        if len(kept) == len(self.runs):
            return self
        twin = replace(self, notes=self.notes)
        twin.runs = kept
        return twin

    @property
    def sustainable(self) -> bool:
        """Whether the server kept up with a rate level's arrivals in most of its runs (one
        saturated run among sustainable ones is a hiccup; a level stops after two)."""
        saturated = sum(not r.sustainable for r in self.runs)
        return saturated == 0 or 2 * saturated < len(self.runs)

    @property
    def saturation(self) -> str | None:
        """Why a rate level was not sustainable (the first run that said so)."""
        return next(
            (r.open_loop.get("saturation") for r in self.runs if r.open_loop and not r.sustainable),
            None,
        )

    @property
    def run_launches(self) -> list[str]:
        """The launch each run came from (a point confirmed on a fresh launch has several)."""
        return [r.launch_id or self.launch_id for r in self.runs]

    def pending_runs(self) -> list[PendingRun]:
        return [
            PendingRun(value, launch, r.requests, r.output_tokens, r.accept_length)
            for value, launch, r in zip(self.values, self.run_launches, self.runs)
        ]

    @property
    def power_cap_share(self) -> float | None:
        """The runs' mean share of samples with a GPU at its default power limit (None: no
        GPU sampled at its default limit)."""
        shares = [r.gpu_power_cap_share for r in self.runs if r.gpu_power_cap_share is not None]
        return sum(shares) / len(shares) if shares else None

    def extra_golden_fields(self) -> dict[str, Any]:
        """A rate level the server could not keep up with keeps why (for the next reader); a
        point recorded with a profiled run keeps its kernel-time summary; one whose GPUs were
        sampled keeps how much of the time they were at their power limit (core/diagnosis.py
        compares tonight's with it)."""
        extra: dict[str, Any] = {}
        if self.rate is not None and not self.sustainable:
            extra["saturation"] = self.saturation
        summary = (self.server_profile or {}).get("summary")
        if summary:
            extra["kernel_summary"] = summary
        if self.power_cap_share is not None:
            extra[POWER_CAP_SHARE] = round(self.power_cap_share, 4)
        return extra

    def run_average(self, figure: Callable[[RunMetrics], float | None]) -> float:
        """The finite mean over the runs of one per-run figure, e.g. ``lambda r: r.ttft_s["p50"]``."""
        return run_average(self.runs, figure)

    def to_json(self) -> dict[str, Any]:
        return finite_or_none(
            {
                "profile": self.profile,
                "test": self.test,
                "key": self.key,
                "concurrency": self.concurrency,
                "rate": self.rate,
                "sustainable": self.sustainable if self.rate is not None else None,
                "metric": self.metric,
                "gated_from": self.gated_from,
                "values": list(self.values),
                "runs": [r.to_json() for r in self.runs],
                "launch_id": self.launch_id,
                "workload": self.workload,
                "golden": self.golden_json,
                "ratio": self.ratio,
                "p_value": self.p_value,
                "verdict": self.verdict_json,
                "message": self.message,
                "problems": self.problems,
                "environment_changes": self.environment_changes,
                "remeasured": self.remeasured,
                "wall_s": self.wall_s,
                "server_counters": self.counters,
                "server_series": self.server_series,
                "gpu_series": self.gpu_series,
                "server_profile": self.server_profile,
                "history": self.history,
            }
        )


@dataclass(kw_only=True)
class SpeedupPoint(Point):
    """A speculative profile's speedup over its base at one level: per-run ratio samples."""

    in_history: ClassVar[bool] = True

    base_profile: str
    samples: tuple[float, ...]
    #: The golden key of the test whose ``output_tok_s`` points the samples come from.
    of_test: str
    launch_id: str
    accept_lengths: tuple[float | None, ...] = ()
    #: The speculative verdict's channel it speaks for (core/channels.py): None, the speedup
    #: as served (the drafter's own acceptance); ``"engine"``, acceptance pinned at
    #: ``pinned_at`` (a launch of its own): the engine's speed alone. Its golden entry is its own.
    channel: str | None = None
    pinned_at: float | None = None

    @property
    def key(self) -> str:
        key = super().key
        return key if self.channel is None else f"{key} {self.channel}"

    @property
    def label(self) -> str:
        label = f"{self.profile} vs {self.base_profile} C={self.concurrency}"
        if self.channel == "engine":
            pinned = "" if self.pinned_at is None else f" at {self.pinned_at:g}"
            label += f" engine (acceptance pinned{pinned})"
        return label

    @property
    def unit(self) -> str:
        return "x"

    @property
    def values(self) -> tuple[float, ...]:
        return self.samples

    def pending_runs(self) -> list[PendingRun]:
        accept = self.accept_lengths
        return [
            PendingRun(v, self.launch_id, 0, 0, accept[k] if k < len(accept) else None)
            for k, v in enumerate(self.values)
        ]

    def to_json(self) -> dict[str, Any]:
        return finite_or_none(
            {
                "verdict": self.verdict_json,
                "ratio": self.ratio,
                "p_value": self.p_value,
                "golden": self.golden_json,
                "values": list(self.values),
                "message": self.message,
                "history": self.history,
                "channel": self.channel,
                "pinned_at": self.pinned_at,
            }
        )


def run_average(runs: Sequence[RunMetrics], figure: Callable[[RunMetrics], float | None]) -> float:
    """The finite mean of ``figure(run)`` over ``runs`` (NaN when no run has one)."""
    return finite_mean(figure(r) for r in runs)
