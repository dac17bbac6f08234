"""The history store: where every run, point and golden recording of a suite is kept.

``--perf-history STORE`` names it: a file path (an SQLite database, created on first use, in WAL
mode with a busy timeout so that several sessions of one host can write at once), or a
``postgresql://`` URL for a store that several GPU runners share. Both through SQLAlchemy Core,
with one schema (:mod:`.schema`).

Every write is a *record* (a dict with a ``kind``) applied in its own short transaction, so that
a run killed at any moment loses at most the record in flight; the same records go to a spool
file when the store fails mid-run, and :meth:`HistoryStore.apply` loads them later.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.errors import LLMPerfError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

#: How long a writer waits for another session's transaction (SQLite), or for a connection
#: (PostgreSQL), before it gives up on the store.
BUSY_TIMEOUT_S = 30
CONNECT_TIMEOUT_S = 5


class HistoryError(LLMPerfError):
    """The history store cannot be opened, read or written."""


def is_url(where: str) -> bool:
    return "://" in where


def describe(where: str) -> str:
    """How messages name a store: its path, or its URL with the password masked."""
    if not is_url(where):
        return where
    from sqlalchemy.engine import make_url

    try:
        return make_url(where).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL: say nothing of what it holds
        return where.split("://", 1)[0] + "://…"


def _engine(where: str) -> Engine:
    """An SQLAlchemy engine for a path or URL (refusing what is neither SQLite nor PostgreSQL)."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    if not is_url(where):
        path = Path(where)
        if path.is_dir():
            raise HistoryError(
                f"--perf-history {where}: is a directory; name a file (e.g. {path / 'history.db'})"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        where = f"sqlite:///{path}"
    url = make_url(where)
    if url.get_backend_name() == "postgresql":
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        try:
            return create_engine(
                url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
            )
        except ModuleNotFoundError as exc:
            raise HistoryError(
                f"--perf-history {describe(where)}: PostgreSQL needs its driver ({exc.name}); "
                "install it with: pip install 'pytest-llmperf[postgresql]'"
            ) from None
    if url.get_backend_name() != "sqlite":
        raise HistoryError(
            f"--perf-history {describe(where)}: only a file path (SQLite) or a postgresql:// URL "
            "can hold the history"
        )
    engine = create_engine(url, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _sqlite_settings(dbapi_connection: Any, record: Any) -> None:
        # The driver's own transaction handling off: BEGIN IMMEDIATE below takes the write lock
        # at once, so two sessions queue on the busy timeout instead of failing on a lock upgrade.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class HistoryStore:
    """An open store: records in, runs and series out."""

    def __init__(self, engine: Engine, where: str) -> None:
        self.engine = engine
        self.where = where

    @classmethod
    def open(cls, where: str) -> HistoryStore:
        """Open (and create, or bring up to date) the store; HistoryError when it cannot be used."""
        store = cls(_engine(where), where)
        with store._guard("open"):
            store._prepare()
        return store

    @property
    def label(self) -> str:
        return describe(self.where)

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """Database errors as one HistoryError line that names the store and what was being done."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except HistoryError:
            raise
        except (SQLAlchemyError, OSError) as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise HistoryError(
                f"--perf-history {self.label}: could not {doing}: "
                f"{reason[0] if reason else type(exc).__name__}"
            ) from None

    def _prepare(self) -> None:
        from pytest_llmperf.history import schema

        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Two runners opening a new store at once: one creates it, the other waits and
                # finds it made (SQLite's BEGIN IMMEDIATE already serialises this).
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(74201171)")
            version = _stored_version(conn)
            if version is None:
                schema.metadata.create_all(conn)
                conn.execute(
                    schema.meta.insert().values(
                        key="schema_version", value=str(schema.SCHEMA_VERSION)
                    )
                )
                return
            if version > schema.SCHEMA_VERSION:
                raise HistoryError(
                    f"--perf-history {self.label}: the store has schema version {version}, newer "
                    f"than this pytest-llmperf's ({schema.SCHEMA_VERSION}): a newer release wrote "
                    "it. Upgrade pytest-llmperf (pip install -U pytest-llmperf), or name another "
                    "store."
                )
        while version < schema.SCHEMA_VERSION:
            with self.engine.begin() as conn:
                schema.UPGRADES[version](conn)
                version += 1
                conn.execute(
                    schema.meta.update()
                    .where(schema.meta.c.key == "schema_version")
                    .values(value=str(version))
                )

    def schema_version(self) -> int | None:
        with self._guard("read its schema version"), self.engine.connect() as conn:
            return _stored_version(conn)

    # Writing

    def apply(self, record: dict[str, Any]) -> None:
        """Write one record in one transaction (HistoryError when the store fails)."""
        with self._guard(f"write a {record.get('kind')} record"), self.engine.begin() as conn:
            _apply(conn, record)

    def apply_all(self, records: Iterable[dict[str, Any]]) -> int:
        """Many records in one transaction (a spool, an import): all or none."""
        n = 0
        with self._guard("load records"), self.engine.begin() as conn:
            for record in records:
                _apply(conn, record)
                n += 1
        return n

    # Reading

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first, with its profiles and number of points."""
        from sqlalchemy import func, select

        from pytest_llmperf.history import schema as s

        with self._guard("list its runs"), self.engine.connect() as conn:
            counts: dict[str, int] = dict(
                conn.execute(
                    select(s.points.c.run_id, func.count()).group_by(s.points.c.run_id)
                ).all()
            )
            profiles: dict[str, list[dict[str, Any]]] = {}
            for row in conn.execute(select(s.run_profiles)).mappings():
                profiles.setdefault(row["run_id"], []).append(dict(row))
            rows = conn.execute(select(s.runs).order_by(s.runs.c.started_at)).mappings().all()
        return [
            {
                **row,
                "points": counts.get(row["run_id"], 0),
                "profiles": profiles.get(row["run_id"], []),
            }
            for row in rows
        ]

    def resolve_run(self, given: str) -> str:
        """A run id from its id or a unique prefix of it, or ``latest`` / ``latest~N``."""
        ids = [r["run_id"] for r in self.runs()]
        if given == "latest" or given.startswith("latest~"):
            back = int(given.partition("~")[2] or 0) if given != "latest" else 0
            if back < len(ids):
                return ids[-1 - back]
            raise HistoryError(f"{self.label}: there is no run {given!r} ({len(ids)} runs)")
        found = [i for i in ids if i.startswith(given)]
        if len(found) == 1:
            return found[0]
        what = "no run" if not found else f"{len(found)} runs"
        raise HistoryError(
            f"{self.label}: {what} with an id starting {given!r}; list them with "
            f"`python -m pytest_llmperf history {self.label}`"
        )

    def points_of(self, run_id: str) -> list[dict[str, Any]]:
        """The run's points, each with ``samples``: one ``{figure: value}`` per run."""
        from sqlalchemy import select

        from pytest_llmperf.history import schema as s

        with self._guard("read a run's points"), self.engine.connect() as conn:
            rows = [
                dict(r)
                for r in conn.execute(
                    select(s.points).where(s.points.c.run_id == run_id).order_by(s.points.c.id)
                ).mappings()
            ]
            by_id = {r["id"]: r for r in rows}
            for r in rows:
                r["samples"] = []
            query = select(s.samples).where(s.samples.c.point_id.in_(list(by_id)))
            for sample in conn.execute(query.order_by(s.samples.c.run_index)).mappings():
                runs = by_id[sample["point_id"]]["samples"]
                while len(runs) <= sample["run_index"]:
                    runs.append({})
                runs[sample["run_index"]][sample["figure"]] = sample["value"]
        return rows

    def series_rows(
        self, profile: str | None = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        """Every stored point (of one profile and key when given) with its own figure's run
        values, its run's time, commit and completeness, and its profile's version, hardware
        key and fingerprint; oldest run first."""
        from sqlalchemy import and_, select

        from pytest_llmperf.history import schema as s

        p, r, rp, sm = s.points, s.runs, s.run_profiles, s.samples
        query = (
            select(
                p.c.id,
                p.c.run_id,
                p.c.profile,
                p.c.key,
                p.c.test,
                p.c.concurrency,
                p.c.metric,
                p.c.lower_is_better,
                p.c.verdict,
                p.c.golden,
                p.c.ratio,
                r.c.started_at,
                r.c.complete,
                r.c.git_commit,
                r.c.ci_url,
                r.c.mode,
                rp.c.engine_version,
                rp.c.hardware_key,
                rp.c.fingerprint,
            )
            .join(r, r.c.run_id == p.c.run_id)
            .outerjoin(rp, and_(rp.c.run_id == p.c.run_id, rp.c.profile == p.c.profile))
            .order_by(r.c.started_at, p.c.id)
        )
        values = (
            select(sm.c.point_id, sm.c.value)
            .join(p, and_(p.c.id == sm.c.point_id, p.c.metric == sm.c.figure))
            .order_by(sm.c.point_id, sm.c.run_index)
        )
        wanted = [
            column == value
            for column, value in ((p.c.profile, profile), (p.c.key, key))
            if value is not None
        ]
        query, values = query.where(*wanted), values.where(*wanted)
        with self._guard("read its series"), self.engine.connect() as conn:
            rows = [dict(row) for row in conn.execute(query).mappings()]
            by_point: dict[int, list[float]] = {}
            for point_id, value in conn.execute(values).all():
                if value is not None:
                    by_point.setdefault(point_id, []).append(value)
        for row in rows:
            row["values"] = by_point.get(row["id"], [])
        return rows

    def point_details(self, point_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """What a point's detail shows, by its id: its server and GPU series, its profiled run
        and its runs' energy figures (``energy_j_per_token``, ``tok_s_per_watt``)."""
        from sqlalchemy import select

        from pytest_llmperf.history import schema as s

        ids = sorted(set(point_ids))
        if not ids:
            return {}
        p, sm = s.points, s.samples
        query = select(p.c.id, p.c.server_series, p.c.gpu_series, p.c.server_profile).where(
            p.c.id.in_(ids)
        )
        energy = select(sm.c.point_id, sm.c.figure, sm.c.value).where(
            sm.c.point_id.in_(ids), sm.c.figure.in_(("energy_j_per_token", "tok_s_per_watt"))
        )
        with self._guard("read its points' details"), self.engine.connect() as conn:
            out = {row["id"]: dict(row) for row in conn.execute(query).mappings()}
            for point_id, figure, value in conn.execute(energy).all():
                if value is not None:
                    out[point_id].setdefault(figure, []).append(value)
        return out

    def wall_times(
        self, profile: str, modes: tuple[str, ...], latest: int
    ) -> tuple[list[str], list[tuple[str, int, str, float]], list[float], list[float]]:
        """For the profile's ``latest`` complete runs of ``modes``, newest first: their ids,
        each point's (run, C, key, server time), each server load's seconds and each
        server's time serving its tests."""
        from sqlalchemy import select

        from pytest_llmperf.history import schema as s

        runs = (
            select(s.runs.c.run_id)
            .where(s.runs.c.mode.in_(modes), s.runs.c.complete.is_(True))
            .where(
                s.runs.c.run_id.in_(select(s.points.c.run_id).where(s.points.c.profile == profile))
            )
            .order_by(s.runs.c.started_at.desc())
            .limit(latest)
        )
        with self._guard("read its stored times"), self.engine.connect() as conn:
            ids = [row[0] for row in conn.execute(runs)]
            if not ids:
                return [], [], [], []
            p = s.points.c
            points = conn.execute(
                select(p.run_id, p.concurrency, p.key, p.wall_s).where(
                    p.profile == profile, p.run_id.in_(ids), p.wall_s.is_not(None)
                )
            ).all()
            t = s.timings.c

            def phase(name: str) -> list[float]:
                return list(
                    conn.execute(
                        select(t.seconds).where(
                            t.profile == profile, t.phase == name, t.run_id.in_(ids)
                        )
                    )
                    .scalars()
                    .all()
                )

            loads, served = phase("load"), phase("tests")
        return ids, [tuple(row) for row in points], loads, served

    def events(self) -> list[dict[str, Any]]:
        from sqlalchemy import select

        from pytest_llmperf.history import schema as s

        with self._guard("read its events"), self.engine.connect() as conn:
            query = select(s.events).order_by(s.events.c.at)
            return [dict(r) for r in conn.execute(query).mappings()]

    def timings(self, profile: str) -> list[dict[str, Any]]:
        """The stored wall times of a profile's loads and levels, with their run's start, newest
        run first."""
        from sqlalchemy import select

        from pytest_llmperf.history import schema as s

        t, r = s.timings, s.runs
        query = (
            select(t, r.c.started_at)
            .join(r, r.c.run_id == t.c.run_id)
            .where(t.c.profile == profile)
            .order_by(r.c.started_at.desc())
        )
        with self._guard("read its timings"), self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]


def _stored_version(conn: Connection) -> int | None:
    from sqlalchemy import inspect, select

    from pytest_llmperf.history import schema

    names = set(inspect(conn).get_table_names())
    if "llmperf_meta" not in names:
        if names & {t.name for t in schema.metadata.sorted_tables}:
            raise HistoryError("it holds llmperf tables but no schema version; it is damaged")
        return None
    value = conn.execute(
        select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
    ).scalar()
    if value is None or not str(value).isdigit():
        raise HistoryError(f"its schema version is unreadable ({value!r}); it is damaged")
    return int(value)


def _apply(conn: Connection, record: dict[str, Any]) -> None:
    from sqlalchemy import delete, select, update

    from pytest_llmperf.history import schema as s

    kind = record["kind"]
    fields = {k: v for k, v in record.items() if k != "kind"}
    if kind == "run":
        exists = select(s.runs.c.run_id).where(s.runs.c.run_id == fields["run_id"])
        if conn.execute(exists).first() is None:  # a spool loaded into the store it failed on
            conn.execute(s.runs.insert().values(**fields, complete=False))
    elif kind == "profile":
        conn.execute(
            delete(s.run_profiles).where(
                (s.run_profiles.c.run_id == fields["run_id"])
                & (s.run_profiles.c.profile == fields["profile"])
            )
        )
        conn.execute(s.run_profiles.insert().values(**fields))
    elif kind == "point":
        runs = fields.pop("samples")
        where = (
            (s.points.c.run_id == fields["run_id"])
            & (s.points.c.profile == fields["profile"])
            & (s.points.c.key == fields["key"])
        )
        # A point is written when measured and again when judged (or topped up): the newest wins.
        old = conn.execute(select(s.points.c.id).where(where)).scalars().all()
        if old:
            conn.execute(delete(s.samples).where(s.samples.c.point_id.in_(old)))
            conn.execute(delete(s.points).where(where))
        inserted = conn.execute(s.points.insert().values(**fields)).inserted_primary_key
        assert inserted is not None
        point_id = inserted[0]
        rows = [
            {"point_id": point_id, "run_index": i, "figure": name, "value": value}
            for i, figures in enumerate(runs)
            for name, value in figures.items()
        ]
        if rows:
            conn.execute(s.samples.insert(), rows)
    elif kind == "event":
        event = fields.pop("event")
        conn.execute(s.events.insert().values(**fields, kind=event))
    elif kind == "timing":
        conn.execute(s.timings.insert().values(**fields))
    elif kind == "finished":
        run_id = fields.pop("run_id")
        conn.execute(update(s.runs).where(s.runs.c.run_id == run_id).values(**fields))
    else:
        raise HistoryError(f"unknown record kind {kind!r}")


def read_spool(path: Path) -> list[dict[str, Any]]:
    """The records of a spool file (one JSON object a line); a torn last line is skipped."""
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(path.read_text(encoding="utf-8").splitlines()):
                break  # killed mid-write: the last record is lost, the others are whole
            raise HistoryError(f"{path}: line {n} is not a spool record") from None
    return records


def append_spool(path: Path, record: dict[str, Any]) -> None:
    """One record, appended and flushed to disk before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
