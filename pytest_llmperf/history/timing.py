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


def stored_times(store: HistoryStore, profile: str, *, recording: bool) -> StoredTimes | None:
    """The median load and level times of the profile's latest runs; None without any."""
    from sqlalchemy import select

    from pytest_llmperf.history import schema as s

    modes = ("update",) if recording else ("gate", "measure")
    with store._guard("read its stored times"), store.engine.connect() as conn:
        latest = [
            row[0]
            for row in conn.execute(
                select(s.runs.c.run_id)
                .where(s.runs.c.mode.in_(modes), s.runs.c.complete.is_(True))
                .where(
                    s.runs.c.run_id.in_(
                        select(s.points.c.run_id).where(s.points.c.profile == profile)
                    )
                )
                .order_by(s.runs.c.started_at.desc())
                .limit(LATEST_RUNS)
            )
        ]
        if not latest:
            return None
        points = conn.execute(
            select(s.points.c.run_id, s.points.c.concurrency, s.points.c.key, s.points.c.wall_s)
            .where(s.points.c.profile == profile, s.points.c.run_id.in_(latest))
            .where(s.points.c.wall_s.is_not(None))
        ).all()
        loads = conn.execute(
            select(s.timings.c.seconds).where(
                s.timings.c.profile == profile,
                s.timings.c.phase == "load",
                s.timings.c.run_id.in_(latest),
            )
        ).all()
    per_run: dict[int, dict[str, float]] = {}
    for run_id, concurrency, key, wall in points:
        if " " in key:  # a second figure checked on the same runs: no time of its own
            continue
        runs = per_run.setdefault(concurrency, {})
        runs[run_id] = runs.get(run_id, 0.0) + wall
    return StoredTimes(
        runs=len(latest),
        load_s=statistics.median(r[0] for r in loads) if loads else None,
        level_s={c: statistics.median(runs.values()) for c, runs in per_run.items()},
    )
