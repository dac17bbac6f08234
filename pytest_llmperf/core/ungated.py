"""Why a point's figure is reported, not gated: it says something of the point, but a FAIL on it
would blame the server for what the host or the sample did. One rule for every kind of point:

- **too few values**: a run had fewer values than the percentile it is judged on needs to be
  certified (MLPerf's early-stopping floors: 662 for a p99, 64 for a p90; a "p99" of 40
  values moves by all of one slow request's);
- **the host set the pace**: a simulated engine fell behind its own schedule for more than
  :data:`BEHIND_SHARE` of the point's measured time, so this host, not the model, made it slow;
- **another host's figure**: a figure this host's speed sets (:attr:`Figure.host_timed
  <pytest_llmperf.core.figures.Figure.host_timed>`: latencies, a startup, a capacity under a
  latency SLO) on an engine whose latencies are the host's, against a golden recorded on
  another host.

What a point reported, not gated, says: a significant fall is a WARN; a rise, or one the runs
cannot tell from noise, passes (:func:`pytest_llmperf.core.judgement.not_gated`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_llmperf.core.figures import figure_of
from pytest_llmperf.core.points import Point
from pytest_llmperf.core.stats import CERTIFIED

#: A simulated engine that fell behind its schedule for more than this share of a point's
#: measured time made a figure of its host's speed.
BEHIND_SHARE = 0.01


@dataclass(frozen=True)
class Host:
    """What the rule knows of where the point was measured."""

    #: Whether the engine's latencies are the host's (a simulated server's).
    latency_is_the_hosts: bool = False
    #: This host, and the host its golden point was recorded on (None: not said).
    here: str | None = None
    recorded_on: str | None = None


def why_not_gated(point: Point, host: Host, *, by_values: bool = True) -> str | None:
    """Why ``point`` is reported, not gated (None: it is gated). ``by_values``: whether its
    judgement reads the percentile's values; one that does not (a rate level judged NOT
    SUSTAINABLE on its backlog's trend) needs no floor of values."""
    few = point.fewest_samples() if by_values else None
    if few is not None:
        q = point.metric.split("_")[1]
        need = CERTIFIED[q]
        return (
            f"reported, not gated (a run had only {few} values, too few for a {q}, which needs "
            f"{need}: {need - few} more a run; lengthen window_s or min_requests to gate it)"
        )
    behind, measured = point.behind_schedule()
    if measured > 0 and behind > BEHIND_SHARE * measured:
        return (
            f"reported, not gated: the simulated engine fell behind its own schedule by "
            f"{behind:.2f} s over the point's runs ({behind / measured:.0%} of them), so "
            "this host, not the model, set their pace"
        )
    if (
        figure_of(point.metric).host_timed
        and host.latency_is_the_hosts
        and host.recorded_on != host.here
    ):
        return (
            f"reported, not gated: recorded on {host.recorded_on or 'another host'}, measured on "
            f"{host.here}; this engine's latencies are the host's, so record this host's goldens "
            "(--perf-update) to gate them"
        )
    return None
