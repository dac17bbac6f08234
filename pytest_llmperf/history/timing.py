"""What earlier runs of a profile really took, for the plan and the live line's time left.

The golden's throughput times the measured runs only; a session also loads servers, warms up,
settles between runs, tops UNCERTAIN points up and measures one level for several tests. The
history has each load's wall time and each point's server time, so a plan for a profile that
has run before is the median of its latest runs (of the same kind: a recording takes longer
than a gated run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_llmperf.history.store import HistoryStore

#: The latest runs a plan is taken from.
LATEST_RUNS = 5


@dataclass(frozen=True)
class StoredTimes:
    runs: int  # how many earlier runs the times come from
    load_s: float | None
    #: Per level, the server time of all its points in one run (every test that measured it).
    level_s: dict[int, float] = field(default_factory=dict)
    #: The server's time serving all its tests in one run (ready to stop: open-loop levels,
    #: capacity searches and prefill tests too); None: not kept by the runs it comes from.
    tests_s: float | None = None


def stored_times(store: HistoryStore, profile: str, *, recording: bool) -> StoredTimes | None:
    """The median load and level times of the profile's latest runs; None without any."""
    modes = ("update",) if recording else ("gate", "measure")
    latest, points, loads, served = store.wall_times(profile, modes, LATEST_RUNS)
    if not latest:
        return None
    per_run: dict[int, dict[str, float]] = {}
    for run_id, concurrency, key, wall in points:
        if " " in key:  # a second figure checked on the same runs: no time of its own
            continue
        runs = per_run.setdefault(concurrency, {})
        runs[run_id] = runs.get(run_id, 0.0) + wall
    return StoredTimes(
        runs=len(latest),
        load_s=statistics.median(loads) if loads else None,
        level_s={c: statistics.median(runs.values()) for c, runs in per_run.items()},
        tests_s=statistics.median(served) if served else None,
    )
