"""Capacity under an SLO: the highest arrival rate at which a server still meets it.

A rate *holds* when every run was sustainable and, for every limit of the profile's ``slo``
(``ttft_s``, ``itl_s``, ``tpot_s``, ``e2e_s``), the runs' ``slo_percentile`` of that figure is
significantly below the limit: a one-sided t-test on the logs of the per-run values against the
log of the limit at p < ``ALPHA``, the verdict's own test (core/verdict.py) against a fixed
golden. A probe whose runs cannot tell gets more runs (2 → 4 → 6); one still undecided does not
hold, so the capacity is the highest rate that holds *with significance*.

The search is on log-rate: bracket first (double or halve from the start until one rate holds
and one does not), then bisect the bracket's logs until its ends are within ``resolution`` of
each other. The result is that bracket: ``low`` held, ``high`` did not, and ``max_rate`` is
their geometric mean. TTFT and e2e count from the scheduled arrival (core/open_loop_figures.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.judgement import GoldenRef, Judgement
from pytest_llmperf.core.metrics import RunMetrics
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import PendingRun, Point
from pytest_llmperf.core.verdict import Margins

ALPHA = 0.05
#: Runs per probe: the first stage, and the most a probe near the boundary gets.
STAGES = (2, 4, 6)
#: Stop bisecting when high ÷ low is at most 1 + this.
RESOLUTION = 0.10
MAX_PROBES = 12
#: Halving stops this far below the start: a probe's window holds min_requests arrivals, so at
#: a very low rate one probe would take minutes.
MAX_HALVINGS = 5
PERCENTILES = {50.0: "p50", 90.0: "p90", 99.0: "p99"}


@dataclass(frozen=True)
class ProbeResult:
    """What a probe's runs say: ``held`` (True, False, or None while they cannot tell) and why."""

    held: bool | None
    why: str


def judge(runs: Sequence[RunMetrics], slo: Mapping[str, float], percentile: float) -> ProbeResult:
    """Whether the runs at one rate meet every limit of ``slo`` at ``percentile``."""
    from pytest_llmperf.core.student import t_cdf

    q = PERCENTILES[percentile]
    if any(not r.sustainable for r in runs):
        return ProbeResult(False, "not sustainable")
    undecided = []
    for key, limit in slo.items():
        values = [getattr(r, key).get(q, math.nan) for r in runs]
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            return ProbeResult(False, f"{key} {q} not measured")
        logs = [math.log(v / limit) for v in values]
        mean = sum(logs) / len(logs)
        shown = f"{key} {q} {sum(values) / len(values) * 1e3:,.1f} ms vs {limit * 1e3:,.1f} ms"
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0
        if sd == 0:
            p_below = 0.0 if mean < 0 else 1.0
            p_above = 0.0 if mean > 0 else 1.0
        else:
            t = mean / (sd / math.sqrt(len(logs)))
            p_below = t_cdf(t, len(logs) - 1)
            p_above = 1.0 - p_below
        if p_above < ALPHA:
            return ProbeResult(False, f"{shown}: above the limit (p={p_above:.2g})")
        if p_below >= ALPHA:
            undecided.append(f"{shown} (p={p_below:.2g})")
    if undecided:
        return ProbeResult(None, "cannot tell: " + "; ".join(undecided))
    return ProbeResult(True, "every limit met")


@dataclass
class Probe:
    rate: float
    held: bool
    runs: int
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "held": self.held, "runs": self.runs, "why": self.why}


@dataclass
class Capacity:
    """The search's result: the bracket around the highest rate that holds."""

    profile: str
    low: float | None  # the highest rate that held (None: none did)
    high: float | None  # the lowest rate that did not (None: every rate probed held)
    probes: list[Probe] = field(default_factory=list)
    slo: Mapping[str, float] = field(default_factory=dict)
    percentile: float = 99.0

    @property
    def max_rate(self) -> float | None:
        if self.low is None or self.high is None:
            return self.low
        return math.sqrt(self.low * self.high)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "max_rate": self.max_rate,
            "low": self.low,
            "high": self.high,
            "slo": dict(self.slo),
            "slo_percentile": self.percentile,
            "probes": [p.to_json() for p in self.probes],
        }


#: ``measure(rate, runs)``: runs more runs at ``rate`` (appending to that rate's earlier ones).
Measure = Callable[[float, int], Sequence[RunMetrics]]


def search(
    profile: str,
    measure: Measure,
    slo: Mapping[str, float],
    percentile: float,
    start: float,
    *,
    resolution: float = RESOLUTION,
    max_probes: int = MAX_PROBES,
) -> Capacity:
    """Bracket, then bisect on log-rate, deciding each probe with :func:`judge`."""
    result = Capacity(profile, None, None, slo=dict(slo), percentile=percentile)

    def holds(rate: float) -> bool:
        runs: Sequence[RunMetrics] = ()
        judgement = ProbeResult(None, "")
        for stage in STAGES:
            runs = measure(rate, stage - len(runs))
            judgement = judge(runs, slo, percentile)
            if judgement.held is not None:
                break
        held = bool(judgement.held)
        result.probes.append(Probe(rate, held, len(runs), judgement.why))
        return held

    rate = start
    if holds(rate):
        result.low = rate
        while len(result.probes) < max_probes:
            rate *= 2
            if not holds(rate):
                result.high = rate
                break
            result.low = rate
    else:
        result.high = rate
        while len(result.probes) < max_probes and rate > start / 2**MAX_HALVINGS:
            rate /= 2
            if holds(rate):
                result.low = rate
                break
            result.high = rate
    while (
        result.low is not None
        and result.high is not None
        and result.high / result.low > 1 + resolution
        and len(result.probes) < max_probes
    ):
        mid = math.sqrt(result.low * result.high)
        if holds(mid):
            result.low = mid
        else:
            result.high = mid
    return result


@dataclass(kw_only=True)
class CapacityPoint(Point):
    """A profile's capacity under its SLO, as a point its golden gates (lower is worse)."""

    capacity: Capacity
    launch_id: str | None = None

    @property
    def key(self) -> str:
        return f"{self.node.without_params}[capacity]"

    @property
    def label(self) -> str:
        return f"{self.profile} capacity"

    @property
    def values(self) -> tuple[float, ...]:
        rate = self.capacity.max_rate
        return (rate,) if rate is not None else ()

    def extra_golden_fields(self) -> dict[str, Any]:
        return {"low": self.capacity.low, "high": self.capacity.high}

    def pending_runs(self) -> list[PendingRun]:
        return [PendingRun(value, self.launch_id, None, None, None) for value in self.values]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.capacity.to_json(),
            "test": self.test,
            "verdict": self.verdict_json,
            "golden": self.golden_json,
            "message": self.message,
        }


def judge_capacity(
    point: CapacityPoint, golden: GoldenRef, margins: Margins, update_command: str
) -> Judgement:
    """A capacity judged by its bracket against the golden's rate (lower is worse): FAIL when
    even the lowest rate that broke the SLO (``high``) is below the golden by more than the fail
    margin, WARN beyond the warn margin, IMPROVED when the highest rate that held (``low``) is
    above it by more than the warn margin, else PASS. No rate that met the SLO: FAIL."""
    cap = point.capacity
    if cap.low is None:
        lowest = cap.probes[-1]
        return Judgement(
            Outcome.FAIL,
            f"{point.label}: FAIL — no rate met the SLO; the lowest probed, {lowest.rate:g} "
            f"requests/s: {lowest.why}",
        )
    assert golden.mean is not None
    gold, shown = golden.mean, shown_capacity(cap)
    ratio = (cap.max_rate or cap.low) / gold
    high = cap.high if cap.high is not None else math.inf
    fail, warn = margins.fail, margins.warn
    if high < gold * (1 - fail):
        outcome = Outcome.FAIL
        why = f"even its lowest failing rate is below the golden by more than the {fail:.0%} fail margin"
    elif high < gold * (1 - warn):
        outcome, why = Outcome.WARN, f"lower than the golden beyond the {warn:.0%} warn margin"
    elif cap.low > gold * (1 + warn):
        outcome = Outcome.IMPROVED
        why = (
            f"its highest passing rate is above the golden by more than the {warn:.0%} warn margin"
        )
    else:
        outcome, why = Outcome.PASS, "the golden's rate is within its bracket's margins"
    message = (
        f"{point.label}: {shown} vs golden {gold:,.2f} requests/s "
        f"({signed_percent(ratio - 1)} %) — {outcome.value}: {why}"
    )
    return Judgement(
        outcome,
        message,
        ratio=ratio,
        golden=replace(golden, n=None, fail_margin=fail, warn_margin=warn),
        failure=f"{message}\n  Re-record if intended: {update_command}",
    )


def shown_capacity(cap: Capacity) -> str:
    """``52.1 requests/s [49.6, 54.7]``."""
    rate, low, high = cap.max_rate, cap.low, cap.high
    if rate is None:
        return "-"
    top = f"{high:,.2f}" if high is not None else "above every rate probed"
    return f"{rate:,.2f} requests/s [{low:,.2f}, {top}]"
