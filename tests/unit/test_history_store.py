"""The history store on SQLite: its schema and versions, records in and out, the spool, and
the errors a user sees (one line naming the store and the fix)."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text

from pytest_llmperf.history import schema
from pytest_llmperf.history.store import HistoryError, HistoryStore, append_spool, read_spool
from tests.history_data import Nights, build_store, records, run_id


def test_a_new_store_is_created_with_the_current_schema_version(tmp_path):
    store = HistoryStore.open(str(tmp_path / "sub" / "history.db"))
    assert store.schema_version() == schema.SCHEMA_VERSION
    journal = sqlite3.connect(tmp_path / "sub" / "history.db").execute("PRAGMA journal_mode")
    assert journal.fetchone()[0] == "wal"  # several sessions of one host at once


def test_a_newer_schema_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "history.db"
    HistoryStore.open(str(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE llmperf_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(HistoryError) as info:
        HistoryStore.open(str(path))
    message = str(info.value)
    assert "schema version 99" in message and "pip install -U pytest-llmperf" in message
    assert str(path) in message and "\n" not in message


def test_an_older_schema_is_upgraded_step_by_step(tmp_path, monkeypatch):
    path = tmp_path / "history.db"
    HistoryStore.open(str(path))

    def add_note_column(conn):
        conn.execute(text("ALTER TABLE llmperf_runs ADD COLUMN note TEXT"))

    current = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(schema.UPGRADES, current, add_note_column)
    store = HistoryStore.open(str(path))
    assert store.schema_version() == current + 1
    columns = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(llmperf_runs)")]
    assert "note" in columns


def test_a_version_1_store_gains_the_series_and_profile_columns_and_keeps_its_points(tmp_path):
    path = tmp_path / "history.db"
    build_store(str(path), Nights(nights=2, points=1))
    with sqlite3.connect(path) as conn:  # as version 1 made it: no server_series column
        conn.execute("ALTER TABLE llmperf_points DROP COLUMN server_series")
        conn.execute("ALTER TABLE llmperf_points DROP COLUMN gpu_series")
        conn.execute("ALTER TABLE llmperf_points DROP COLUMN server_profile")
        conn.execute("UPDATE llmperf_meta SET value = '1' WHERE key = 'schema_version'")
    store = HistoryStore.open(str(path))
    assert store.schema_version() == 3
    points = store.points_of(run_id(1))
    assert len(points) == 1 and points[0]["server_series"] is None and points[0]["samples"]
    series = {"interval_s": 0.5, "t": [0.0, 0.5], "queued_requests": [3.0, None]}
    profiled = {"trace": "/runs/1/profiles/x.trace.json.gz", "steps": 32, "summary": None}
    third = [
        {**r, "server_series": series, "server_profile": profiled} if r["kind"] == "point" else r
        for r in records(Nights(nights=3, points=1))
        if r["run_id"] == run_id(2)
    ]
    store.apply_all(third)
    (point,) = store.points_of(run_id(2))
    assert point["server_series"] == series and point["server_profile"] == profiled
    assert point["gpu_series"] is None


@pytest.mark.parametrize(
    "content, expected",
    [(b"this is not a database at all" * 100, "file is not a database")],
)
def test_a_corrupt_store_is_one_clear_line(tmp_path, content, expected):
    path = tmp_path / "history.db"
    path.write_bytes(content)
    with pytest.raises(HistoryError) as info:
        HistoryStore.open(str(path))
    assert expected in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_a_directory_or_another_database_is_refused(tmp_path):
    with pytest.raises(HistoryError, match="is a directory"):
        HistoryStore.open(str(tmp_path))
    with pytest.raises(HistoryError, match="only a file path"):
        HistoryStore.open("mysql://user:secret@db/x")


def test_a_url_password_never_appears_in_messages():
    with pytest.raises(HistoryError) as info:
        HistoryStore.open("mysql://user:s3cret-pw@db/x")
    assert "s3cret-pw" not in str(info.value)


def test_records_come_back_as_runs_points_and_series(tmp_path):
    store = build_store(str(tmp_path / "h.db"), Nights(nights=3, points=2))
    runs = store.runs()
    assert [r["run_id"] for r in runs] == [run_id(0), run_id(1), run_id(2)]
    assert all(r["complete"] and r["points"] == 2 for r in runs)
    assert runs[0]["profiles"][0]["engine_version"] == "0.5.6"
    points = store.points_of(run_id(1))
    assert len(points) == 2 and len(points[0]["samples"]) == 3
    rows = store.series_rows("sim-baseline", points[0]["key"])
    assert [r["run_id"] for r in rows] == [run_id(0), run_id(1), run_id(2)]
    assert all(len(r["values"]) == 3 for r in rows)


def test_a_point_written_again_replaces_itself(tmp_path):
    store = build_store(str(tmp_path / "h.db"), Nights(nights=1, points=1))
    point = next(r for r in records(Nights(nights=1, points=1)) if r["kind"] == "point")
    store.apply({**point, "verdict": "FAIL", "samples": [{"output_tok_s": 5.0}] * 5})
    (only,) = store.points_of(run_id(0))
    assert only["verdict"] == "FAIL" and len(only["samples"]) == 5


def test_a_run_without_its_end_is_incomplete(tmp_path):
    store = HistoryStore.open(str(tmp_path / "h.db"))
    store.apply_all(r for r in records(Nights(nights=1)) if r["kind"] != "finished")
    (run,) = store.runs()
    assert not run["complete"] and run["ended_at"] is None and run["points"] == 2


def test_runs_are_found_by_prefix_or_as_latest(tmp_path):
    store = build_store(str(tmp_path / "h.db"), Nights(nights=3))
    assert store.resolve_run("latest") == run_id(2)
    assert store.resolve_run("latest~2") == run_id(0)
    assert store.resolve_run(run_id(1)[:-2]) == run_id(1)
    with pytest.raises(HistoryError, match="no run with an id starting"):
        store.resolve_run("1999")


def test_the_spool_survives_a_torn_last_line(tmp_path):
    spool = tmp_path / "spool.jsonl"
    for record in records(Nights(nights=1, points=1)):
        append_spool(spool, record)
    with open(spool, "a") as f:
        f.write('{"kind": "poi')  # killed mid-write
    loaded = read_spool(spool)
    assert [r["kind"] for r in loaded] == ["run", "profile", "point", "finished"]
    store = HistoryStore.open(str(tmp_path / "h.db"))
    assert store.apply_all(loaded) == 4
    assert store.runs()[0]["points"] == 1


def test_a_store_password_on_the_command_line_is_never_stored():
    from pytest_llmperf.history.recorder import mask_credentials

    command = "pytest perf_suites --perf-history postgresql://perf:s3cr@t@db:5432/llm -k x"
    masked = mask_credentials(command)
    assert "s3cr" not in masked and "t@db" not in masked
    assert masked == "pytest perf_suites --perf-history postgresql://perf:***@db:5432/llm -k x"
