"""The history store's tables, one schema for SQLite and PostgreSQL (SQLAlchemy Core).

Versioned from the first day: ``llmperf_meta.schema_version`` says which version a store holds.
A store of an older version is brought up to date by :data:`UPGRADES` (each step one
transaction), a newer one is refused: an older plugin must not write rows it does not
understand into a store a newer one shares.

One row per run, per profile of a run (its engine version and fingerprint), per point (the
figure it was judged on, its verdict and the golden it was judged against), per run of a point
and figure (every measured figure of every run), per event (a golden recorded) and per timed
phase (a server's load, a test's wall time, for the plan).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 3

metadata = MetaData()

meta = Table(
    "llmperf_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "llmperf_runs",
    metadata,
    Column("run_id", String(32), primary_key=True),
    Column("started_at", Float, nullable=False),  # seconds since the epoch, UTC
    Column("ended_at", Float),  # None: the run never finished (killed), or is running
    Column("complete", Boolean, nullable=False, default=False),
    Column("exit_status", Integer),
    Column("mode", String(16), nullable=False),  # gate | update | measure
    Column("host", String(255), nullable=False),
    Column("git_commit", String(64)),
    Column("git_branch", String(255)),
    Column("git_dirty", Boolean),
    Column("ci_url", Text),
    Column("plugin_version", String(32), nullable=False),
    Column("command", Text),
)

run_profiles = Table(
    "llmperf_run_profiles",
    metadata,
    Column("run_id", String(32), ForeignKey("llmperf_runs.run_id"), nullable=False),
    Column("profile", String(255), nullable=False),
    Column("engine", String(255)),
    Column("engine_version", String(64)),
    Column("hardware_key", String(255)),
    Column("fingerprint", JSON),
    Column("load_s", Float),  # launch to ready; None when attached
    PrimaryKeyConstraint("run_id", "profile"),
)

points = Table(
    "llmperf_points",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("llmperf_runs.run_id"), nullable=False),
    Column("profile", String(255), nullable=False),
    Column("key", String(1024), nullable=False),  # the golden key: "<file>::<test>[C=70]"
    Column("test", Text, nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("metric", String(64), nullable=False),
    Column("lower_is_better", Boolean, nullable=False),
    Column("measured_at", Float, nullable=False),
    Column("verdict", String(16)),  # None: measured, not judged (yet, or --perf-measure)
    Column("ratio", Float),
    Column("p_value", Float),
    Column("golden", JSON),  # what the point was judged against: mean, runs, recorded_at, path
    Column("message", Text),
    Column("problems", JSON),
    Column("counters", JSON),  # the server's own /metrics, run-scoped deltas
    Column("server_series", JSON),  # its gauges through the runs (servers/series.py); v2
    Column("gpu_series", JSON),  # NVML through the runs (host/gpu_series.py); v3
    Column("server_profile", JSON),  # a profiled run: trace path, summary (fixtures/profiling); v3
    Column("wall_s", Float),  # the point's server time, all its runs
    UniqueConstraint("run_id", "profile", "key", name="uq_llmperf_point"),
)
Index("ix_llmperf_points_series", points.c.profile, points.c.key)

samples = Table(
    "llmperf_samples",
    metadata,
    Column("point_id", Integer, ForeignKey("llmperf_points.id"), nullable=False),
    Column("run_index", Integer, nullable=False),
    Column("figure", String(64), nullable=False),
    Column("value", Float),  # None: the run has no such figure (accept length of a base)
    PrimaryKeyConstraint("point_id", "run_index", "figure"),
)

events = Table(
    "llmperf_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("llmperf_runs.run_id"), nullable=False),
    Column("at", Float, nullable=False),
    Column("kind", String(32), nullable=False),  # golden_recorded
    Column("profile", String(255)),
    Column("detail", JSON),
)

timings = Table(
    "llmperf_timings",
    metadata,
    Column("run_id", String(32), ForeignKey("llmperf_runs.run_id"), nullable=False),
    Column("profile", String(255), nullable=False),
    Column("phase", String(16), nullable=False),  # load | level | tests
    Column("name", Text, nullable=False),  # the profile for a load, "C=<n>" for a level
    Column("seconds", Float, nullable=False),
)


#: ``UPGRADES[n]`` brings a store of version n to n + 1, inside one transaction. Version 1 is
#: the first; a change of the tables above adds a step here and raises SCHEMA_VERSION.
def _add_server_series(conn: Connection) -> None:
    """Version 2: each point keeps the server's gauges through its runs."""
    kind = "JSON" if conn.dialect.name == "postgresql" else "TEXT"
    conn.exec_driver_sql(f"ALTER TABLE llmperf_points ADD COLUMN server_series {kind}")


def _add_gpu_series_and_profile(conn: Connection) -> None:
    """Version 3: each point keeps NVML's readings through its runs and its profiled run."""
    kind = "JSON" if conn.dialect.name == "postgresql" else "TEXT"
    for column in ("gpu_series", "server_profile"):
        conn.exec_driver_sql(f"ALTER TABLE llmperf_points ADD COLUMN {column} {kind}")


UPGRADES: dict[int, Callable[[Connection], None]] = {
    1: _add_server_series,
    2: _add_gpu_series_and_profile,
}
