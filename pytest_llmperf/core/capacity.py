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
``low``. A gate starts from its golden's bracket (``then``: its ``high``, probed once its
``low`` held): when the server is as it was, two probes end the search. A rate at or above
what the server served while it could not keep up (the service ceiling,
:func:`service_ceiling`: its output tokens a second ÷ a request's) never holds, whatever its
window showed. TTFT and e2e count from the scheduled arrival (core/open_loop_figures.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.judgement import GoldenRef, Judgement
from pytest_llmperf.core.metrics import RunMetrics
from pytest_llmperf.core.nodeid import NodeId
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
#: Halving stops sooner when half the arrivals left a broken limit's figure at least this share
#: of what it was: the figure is what one request takes here, not queueing, and no lower rate
#: can meet the limit (a 512-token request against a 150 ms e2e limit).
FLOOR_SHARE = 0.9
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
            # Said, and the probe gets its next stage of runs: never counted as a miss unsaid.
            missing = sum(1 for v in values if not (math.isfinite(v) and v > 0))
            return ProbeResult(None, f"{key} {q} not measured in {missing} of {len(runs)} run(s)")
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


def lag_cannot_explain(
    runs: Sequence[RunMetrics], slo: Mapping[str, float], percentile: float
) -> bool:
    """Whether runs whose client sent late still decide their probe: one that held met the SLO
    with the lag counted in (TTFT and e2e count from the scheduled arrival, so a late send only
    adds to them), and one whose every run broke a limit by more than its client's latest send
    broke it whatever the client did (a FIFO server's departures move by at most the lag)."""
    if judge(runs, slo, percentile).held:
        return True
    q = PERCENTILES[percentile]
    for key, limit in slo.items():
        over = [
            getattr(r, key).get(q, math.nan)
            - limit
            - ((r.open_loop or {}).get("lag_s") or {}).get("max", math.inf)
            for r in runs
        ]
        if over and all(math.isfinite(x) and x > 0 for x in over):
            return True
    return False


class ClientCannotPace(Exception):
    """A probe's rate this host's client could not send on time, measured twice: not a failure
    of the server, and no figure of it; the search takes it as a rate that did not hold."""

    def __init__(self, why: str, runs: int) -> None:
        super().__init__(why)
        self.runs = runs


@dataclass
class Probe:
    rate: float
    held: bool
    runs: int
    why: str
    #: Each slo limit's figure at the slo percentile, the mean of the runs' (seconds), when
    #: every run kept up (a backlog's figures are its wait, not what a request takes).
    figures: dict[str, float] = field(default_factory=dict)

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
    #: A probe's rate was beyond what this host's client can pace: the capacity is at least
    #: ``low``, and it is reported, not gated.
    client_limited: bool = False
    #: Why no rate can meet the SLO, when halving the rate stopped lowering a broken limit's
    #: figure (None: not seen).
    unreachable: str | None = None

    @property
    def max_rate(self) -> float | None:
        """The capacity reported: the highest rate that held (never the bracket's middle, which
        may lie above the rate at which the server's queue starts to grow)."""
        return self.low

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "max_rate": self.max_rate,
            "low": self.low,
            "high": self.high,
            "slo": dict(self.slo),
            "slo_percentile": self.percentile,
            "client_limited": self.client_limited,
            "unreachable": self.unreachable,
            "probes": [p.to_json() for p in self.probes],
        }


#: ``measure(rate, runs)``: runs more runs at ``rate`` (appending to that rate's earlier ones).
Measure = Callable[[float, int], Sequence[RunMetrics]]
#: A saturated run counts for the service ceiling when its client sent this share of what was
#: offered in the window.
SENT_SHARE = 0.95
#: The service ceiling is a one-sided lower bound at this confidence.
CEILING_CONFIDENCE = 0.99


def service_ceiling(
    runs: Sequence[RunMetrics], request_tokens: float | None = None
) -> float | None:
    """The request rate the server served while it could not keep up (runs whose backlog
    grew), as a one-sided 99 % upper bound (Student's t over those runs): no arrival rate at or
    above it can be sustained, whatever a short window's SLO says, and a rate it sustains is
    never above it (a lower bound would withdraw rates the server serves) (a queue 2 % over capacity
    grows by a few requests a second, which neither a window's percentiles nor its backlog
    rule see). What it served is its output tokens a second ÷ ``request_tokens`` (a request's
    output): a server that batches serves every request at once, so in a short overloaded
    window few requests *complete* although it serves at full speed, and completions would read
    far below what it can serve. Without ``request_tokens``, the requests it completed. Only
    runs whose client sent what was offered count: a backlog of requests the client never sent
    is its own. At least one request over all their time is the bound's error (a window's
    edges). None: no run saturated it."""
    from pytest_llmperf.core.student import t_quantile

    rates, seconds = [], 0.0
    for run in runs:
        info = run.open_loop or {}
        offered, sent = info.get("offered_req_s"), info.get("sent_req_s")
        client_kept_up = not offered or not sent or sent >= SENT_SHARE * offered
        served = (
            run.output_tok_s / request_tokens
            if request_tokens and run.output_tok_s > 0
            else info.get("completed_req_s")
        )
        if not run.sustainable and served and run.duration_s > 0 and client_kept_up:
            rates.append(float(served))
            seconds += run.duration_s
    if not rates:
        return None
    n = len(rates)
    mean = sum(rates) / n
    sd = math.sqrt(sum((r - mean) ** 2 for r in rates) / (n - 1)) if n > 1 else 0.0
    q = t_quantile(CEILING_CONFIDENCE, n - 1) if n > 1 else 2.326
    return mean + q * max(sd / math.sqrt(n), 1.0 / seconds)


def search(
    profile: str,
    measure: Measure,
    slo: Mapping[str, float],
    percentile: float,
    start: float,
    *,
    resolution: float = RESOLUTION,
    max_probes: int = MAX_PROBES,
    request_tokens: float | None = None,
    then: float | None = None,
) -> Capacity:
    """Bracket, then bisect on log-rate, deciding each probe with :func:`judge`;
    ``request_tokens``: a request's output tokens, for the service ceiling; ``then``: the rate
    probed second when ``start`` held (a golden's bracket is ``start`` and ``then``), before the
    bracket doubles or bisects as usual."""
    result = Capacity(profile, None, None, slo=dict(slo), percentile=percentile)
    measured: list[RunMetrics] = []  # every probe's runs, for the service ceiling

    def holds(rate: float) -> bool:
        runs: Sequence[RunMetrics] = ()
        judgement = ProbeResult(None, "")
        try:
            for stage in STAGES:
                runs = measure(rate, stage - len(runs))
                judgement = judge(runs, slo, percentile)
                if judgement.held is not None:
                    break
        except ClientCannotPace as exc:
            result.client_limited = True
            result.probes.append(Probe(rate, False, exc.runs, str(exc)))
            return False
        measured.extend(runs)
        held, why = bool(judgement.held), judgement.why
        ceiling = service_ceiling(measured, request_tokens)
        if held and ceiling is not None and rate >= ceiling:
            held, why = False, _above(ceiling)
        kept_up = all(r.sustainable for r in runs)
        figures = _figures(runs, slo, percentile) if kept_up else {}
        result.probes.append(Probe(rate, held, len(runs), why, figures))
        return held

    if holds(start) and then is not None and then > start:
        holds(then)
    while True:
        _rebracket(result, service_ceiling(measured, request_tokens))
        low, high = result.low, result.high
        if len(result.probes) >= max_probes:
            return result
        if low is None:  # halve until a rate holds (a bounded number of times)
            result.unreachable = _unreachable(result.probes, slo, percentile)
            if high is None or high <= start / 2**MAX_HALVINGS or result.unreachable:
                return result
            holds(high / 2)
        elif high is None:  # double until one does not
            holds(low * 2)
        elif high / low <= 1 + resolution:
            return result
        else:
            holds(math.sqrt(low * high))


def _figures(
    runs: Sequence[RunMetrics], slo: Mapping[str, float], percentile: float
) -> dict[str, float]:
    """Each limit's figure at ``percentile``, the mean of the runs' that measured it."""
    q = PERCENTILES[percentile]
    out = {}
    for key in slo:
        values = [v for r in runs if math.isfinite(v := getattr(r, key).get(q, math.nan))]
        if values:
            out[key] = sum(values) / len(values)
    return out


def _unreachable(
    probes: Sequence[Probe], slo: Mapping[str, float], percentile: float
) -> str | None:
    """Why no rate can meet the SLO, when the last two probes broke it and the second, at half
    the first's rate, left a broken limit's figure at FLOOR_SHARE or more of what it was: that
    figure is what a request takes here, not its wait (None: lower rates may still help)."""
    if len(probes) < 2:
        return None
    before, last = probes[-2], probes[-1]
    if before.held or last.held or last.rate > before.rate * 0.51:
        return None
    q = PERCENTILES[percentile]
    for key, limit in slo.items():
        was, now = before.figures.get(key), last.figures.get(key)
        if was and now and now > limit and now >= FLOOR_SHARE * was:
            return (
                f"{key} {q} {now * 1e3:,.0f} ms at {last.rate:g} requests/s and "
                f"{was * 1e3:,.0f} ms at {before.rate:g}: half the arrivals no longer lower it, "
                f"so it is what a request takes here and no rate meets the {limit * 1e3:,.0f} ms "
                f"limit; raise slo.{key} (or shorten output_len) in the profile"
            )
    return None


def _above(ceiling: float) -> str:
    return (
        f"at or above the {ceiling:.2f} requests/s the server served while it could not keep "
        "up (its output tokens a second ÷ a request's, 99 % upper bound): its queue grows"
    )


def _rebracket(result: Capacity, ceiling: float | None) -> None:
    """The bracket from every probe so far: ``low`` the highest rate that held below the service
    ceiling (a probe held before a later one showed the ceiling is withdrawn, and says so),
    ``high`` the lowest rate above it that did not."""
    if ceiling is not None:
        for k, probe in enumerate(result.probes):
            if probe.held and probe.rate >= ceiling:
                result.probes[k] = replace(probe, held=False, why=_above(ceiling))
    held = [p.rate for p in result.probes if p.held]
    result.low = max(held) if held else None
    above = [
        p.rate for p in result.probes if not p.held and (result.low is None or p.rate > result.low)
    ]
    result.high = min(above) if above else None


def capacity_key(test: str) -> str:
    """The golden key of test ``test``'s capacity (one per test, whatever its parameters)."""
    return f"{NodeId(test).without_params}[capacity]"


@dataclass(kw_only=True)
class CapacityPoint(Point):
    """A profile's capacity under its SLO, as a point its golden gates (lower is worse)."""

    capacity: Capacity
    launch_id: str | None = None

    @property
    def key(self) -> str:
        return capacity_key(self.test)

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
    point: CapacityPoint,
    golden: GoldenRef,
    margins: Margins,
    update_command: str,
) -> Judgement:
    """A capacity judged by its bracket against the golden's rate (lower is worse): FAIL when
    even the lowest rate that broke the SLO (``high``) is below the golden by more than the fail
    margin, WARN beyond the warn margin, IMPROVED when the highest rate that held (``low``) is
    above it by more than the warn margin, else PASS. No rate that met the SLO: FAIL. (A
    capacity under a latency SLO on an engine whose latencies are the host's is the host's
    figure: core/ungated.py, as for every figure.)"""
    cap = point.capacity
    if cap.low is None:
        lowest = cap.probes[-1]
        why = cap.unreachable or f"the lowest probed, {lowest.rate:g} requests/s: {lowest.why}"
        return Judgement(Outcome.FAIL, f"{point.label}: FAIL — no rate met the SLO; {why}")
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
    if cap.client_limited and outcome in (Outcome.FAIL, Outcome.WARN):
        outcome = Outcome.WARN
        why += (
            "; not gated: this host's client could not pace a probe above it, so the "
            "capacity here is at least its low, not its measure"
        )
    return Judgement.said(
        outcome,
        f"{point.label}: {shown} vs golden {gold:,.2f} requests/s ({signed_percent(ratio - 1)} %)",
        why,
        advice=f"\n  Re-record if intended: {update_command}",
        ratio=ratio,
        golden=replace(golden, n=None, fail_margin=fail, warn_margin=warn),
    )


def shown_capacity(cap: Capacity) -> str:
    """``52.1 requests/s [49.6, 54.7]``."""
    rate, low, high = cap.max_rate, cap.low, cap.high
    if rate is None:
        return "-"
    top = f"{high:,.2f}" if high is not None else "above every rate probed"
    return f"{rate:,.2f} requests/s [{low:,.2f}, {top}]"
