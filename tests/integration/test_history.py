"""--perf-history end to end, as users run it: pytest subprocesses against the simulated engine
(real processes, real HTTP), a real SQLite file and a real PostgreSQL server.

A run is in the store as it is measured; a killed run keeps its points, is marked incomplete
and leaves no server; an interrupted --perf-update changes no golden; --perf-measure needs no
golden; a store that cannot be used is one line before any server starts; a store that fails
mid-run spools; two sessions at once lose nothing; a step in the engine's speed is named by the
night it began.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.history.store import HistoryStore
from tests.helpers import THROUGHPUT_SUITE, processes_with, write_profiles

METRICS = '"--enable-metrics"'


def project(pytester: pytest.Pytester, **profile) -> str:
    marker = write_profiles(pytester, extra_args=METRICS, **profile)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    return marker


def run(pytester: pytest.Pytester, *args: str, timeout: float = 120) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)


def popen(pytester: pytest.Pytester, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def wait_for_points(store_path: Path, at_least: int, timeout_s: float = 60) -> str:
    """Poll the store (as another process would) until the latest run has ``at_least`` points."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store_path.exists():
            runs = HistoryStore.open(str(store_path)).runs()
            if runs and runs[-1]["points"] >= at_least:
                return runs[-1]["run_id"]
        time.sleep(0.2)
    raise AssertionError(f"no run with {at_least} points in {store_path} after {timeout_s} s")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmperf", "history", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_gated_run_is_stored_point_by_point_and_named_in_the_results(pytester):
    project(pytester)
    assert run(pytester, "--perf-update", "--perf-history", "h.db").ret == 0
    result = run(pytester, "--perf-history", "h.db", "--perf-json", "r.json")
    assert result.ret == 0, result.stdout.str()[-2000:]
    store = HistoryStore.open(str(pytester.path / "h.db"))
    update, gated = store.runs()
    assert update["mode"] == "update" and gated["mode"] == "gate"
    assert gated["complete"] and gated["points"] == 2 and gated["ended_at"] is not None
    assert [e["kind"] for e in store.events()] == ["golden_recorded"]
    results = json.loads((pytester.path / "r.json").read_text())
    assert results["run_id"] == gated["run_id"]
    for point in results["points"]:
        assert point["history"]["runs"] == 1  # the update run is a recording, not a night
        assert point["history"]["change_points"] == []
        counters = point["server_counters"]  # the sim's /metrics, over the point's runs
        assert counters["generated_tokens"] >= 64 * 4 and counters["requests"] >= 4
    stored = store.points_of(gated["run_id"])
    assert {p["verdict"] for p in stored} == {"PASS"}  # written again once judged
    # Each point's own runs (a point whose first stage could not decide has more than another).
    runs = {point["test"]: len(point["values"]) for point in results["points"]}
    assert {p["test"]: len(p["samples"]) for p in stored} == runs
    listing = cli(str(pytester.path / "h.db"))
    assert gated["run_id"] in listing.stdout and "complete" in listing.stdout


def test_perf_measure_needs_no_golden_writes_none_and_two_runs_compare(pytester):
    project(pytester)
    for _ in range(2):
        result = run(pytester, "--perf-measure", "--perf-history", "h.db", "--perf-json", "r.json")
        assert result.ret == 0, result.stdout.str()[-2000:]
    # The second run's plan is what the first really took: its levels, and in all the time
    # its server served every test, its load included.
    result.stdout.fnmatch_lines(
        [
            "  sim-base: C = 1, 4; *; about * s (as its last 1 run(s) took, load * s)",
            "  total: about * s, as the last runs took: every test (open loop, capacity and "
            "prefill too) and the loads (from the history)",
        ]
    )
    assert not (pytester.path / "baselines").exists()
    points = json.loads((pytester.path / "r.json").read_text())["points"]
    assert {p["verdict"] for p in points} == {None}
    compared = cli(str(pytester.path / "h.db"), "--compare", "latest~1", "latest")
    assert compared.returncode == 0, compared.stderr
    assert "test_output_throughput[C=1]" in compared.stdout
    assert "test_output_throughput[C=4]" in compared.stdout
    # Without --perf-measure, the missing golden still fails the run.
    assert run(pytester).ret == pytest.ExitCode.TESTS_FAILED


def test_sigkill_keeps_the_measured_points_marks_the_run_incomplete_and_leaves_no_server(pytester):
    marker = project(pytester, runs=4, output_len=256)
    proc = popen(pytester, "--perf-measure", "--perf-history", "h.db")
    try:
        run_id = wait_for_points(pytester.path / "h.db", 1)
        assert processes_with(marker), "the server should be running now"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30  # the watchdog: SIGTERM, the profile's 5 s grace, SIGKILL
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []
    (killed,) = HistoryStore.open(str(pytester.path / "h.db")).runs()
    assert killed["run_id"] == run_id and not killed["complete"] and killed["ended_at"] is None
    assert killed["points"] >= 1
    again = run(pytester, "--perf-measure", "--perf-history", "h.db")
    assert again.ret == 0, again.stdout.str()[-2000:]
    again.stdout.no_fnmatch_line("*still running*")
    assert "incomplete" in cli(str(pytester.path / "h.db")).stdout


def test_sigterm_during_perf_update_changes_no_golden_and_keeps_the_points(pytester):
    project(pytester, output_len=128)
    assert run(pytester, "--perf-update").ret == 0
    goldens = {p: p.read_bytes() for p in (pytester.path / "baselines").rglob("*.json")}
    assert goldens
    proc = popen(pytester, "--perf-update", "--perf-history", "h.db", "--perf-json", "r.json")
    try:
        wait_for_points(pytester.path / "h.db", 1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-2000:]
    assert "interrupted: no golden was changed" in out
    assert {p: p.read_bytes() for p in (pytester.path / "baselines").rglob("*.json")} == goldens
    # Every requested output is still written, for the points that were done.
    results = json.loads((pytester.path / "r.json").read_text())
    assert results["points"] and all(p["values"] for p in results["points"])
    (interrupted,) = HistoryStore.open(str(pytester.path / "h.db")).runs()
    assert interrupted["points"] >= 1 and not interrupted["complete"]
    assert interrupted["ended_at"] is not None  # it ended, but did not finish


@pytest.mark.parametrize("store", ["postgresql://llmperf@127.0.0.1:1/none", "corrupt.db"])
def test_an_unusable_store_is_one_line_before_any_server_starts(pytester, store):
    marker = project(pytester)
    (pytester.path / "corrupt.db").write_bytes(b"not a database " * 200)
    result = run(pytester, "--perf-measure", "--perf-history", store)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-history *: could not open: *"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not list(pytester.path.rglob("sim-base.log")), "no server may start"
    assert processes_with(marker) == []


def test_a_store_that_fails_mid_run_spools_and_the_spool_loads_later(pytester):
    project(pytester, concurrency="[1]")
    pytester.makepyfile(
        test_zz_break_store="""
import os
from pathlib import Path

def test_the_store_breaks(llm_profile):  # a profile's test: ordered after test_perf's point
    for suffix in ("-wal", "-shm"):
        Path("h.db" + suffix).unlink(missing_ok=True)
    Path("h.db").write_bytes(b"broken " * 1000)
""",
        test_zzz_after="""
def test_measured_after(llmperf):
    llmperf.measure(concurrency=2)
""",
    )
    result = run(pytester, "--perf-measure", "--perf-history", "h.db")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*the history store failed during the run*--load-spool*"])
    (spool,) = pytester.path.rglob("history-spool.jsonl")
    loaded = cli(str(pytester.path / "fresh.db"), "--load-spool", str(spool))
    assert loaded.returncode == 0, loaded.stderr
    (stored,) = HistoryStore.open(str(pytester.path / "fresh.db")).runs()
    # The run and its profile are re-spooled with what failed: the spool loads anywhere.
    assert stored["complete"] and stored["points"] == 1  # the point measured after the break


def test_two_sessions_at_once_share_one_sqlite_file(pytester):
    # Two sessions and their two servers on 2 cores: one run of 256-token requests each, where
    # 64-token ones read client-bound in a full run (a few ms between requests of 30 ms).
    project(pytester, runs=1, output_len=256)
    procs = [popen(pytester, "--perf-measure", "--perf-history", "h.db") for _ in range(2)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[-1500:] for o in outs]
    runs = HistoryStore.open(str(pytester.path / "h.db")).runs()
    assert len(runs) == 2 and all(r["complete"] and r["points"] == 2 for r in runs)


WRITER = """
import sys, time
from pytest_llmperf.history.recorder import HistoryRecorder
from pathlib import Path
from tests.history_data import Nights, records

where, n = sys.argv[1], int(sys.argv[2])
rec = HistoryRecorder.start(where, mode="measure", run_dir=Path("spool-" + str(time.time())),
                            code_dir=Path("."), command=["writer"])
point = next(r for r in records(Nights(nights=1, points=1)) if r["kind"] == "point")
for i in range(n):
    rec.write({**point, "run_id": rec.run_id, "key": f"t.py::test[C={i}]", "concurrency": i})
rec.finished(0, complete=True)
assert rec.failure is None, rec.failure
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_concurrent_writers_lose_no_run_and_no_point(request, tmp_path, backend):
    where = (
        request.getfixturevalue("postgres_url")
        if backend == "postgresql"
        else str(tmp_path / "h.db")
    )
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, where, "150"], cwd=root) for _ in range(3)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0, 0, 0]
    runs = HistoryStore.open(where).runs()
    assert len(runs) == 3 and all(r["complete"] and r["points"] == 150 for r in runs)


def test_two_pytest_sessions_at_once_share_one_postgresql_store(pytester, postgres_url):
    # Two sessions and their two servers on 2 cores: one run of 256-token requests each, where
    # 64-token ones read client-bound in a full run (a few ms between requests of 30 ms).
    project(pytester, runs=1, output_len=256)
    procs = [popen(pytester, "--perf-measure", "--perf-history", postgres_url) for _ in range(2)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[-1500:] for o in outs]
    runs = HistoryStore.open(postgres_url).runs()
    assert len(runs) == 2 and all(r["complete"] and r["points"] == 2 for r in runs)
    assert "llmperf@" not in "".join(outs) or "***" in "".join(outs)  # no password to leak here


def test_a_step_in_the_engine_is_named_by_the_night_it_began(pytester):
    """Nights 1-4 at full speed, 5-8 at 88 %: each night within the golden's fail margin, 25 %
    here (a WARN at most); night 8's results name night 5 as the first bad run, −12 % ± 3 %, at
    every level. A step of 8 % was lost at C = 4 in a full run: one night there read 11 % down
    and another 2 %, host noise of the simulated engine on 2 cores."""

    def speed(multiplier: str) -> None:
        write_profiles(
            pytester,
            marker=marker,
            extra_args=f'"--sim-throughput-multiplier", "{multiplier}"',
            runs=3,
            output_len=128,  # 64-token requests: a 4 ms hiccup of this process is client-bound
        )
        profiles = pytester.path / "profiles.toml"
        profiles.write_text(
            profiles.read_text().replace(
                "ready_timeout_s", "fail_margin = 0.25\nready_timeout_s", 1
            )
        )

    marker = f"step-{pytester.path.name}"

    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    speed("1.0")
    assert run(pytester, "--perf-update").ret == 0
    run_ids = []
    for night in range(1, 9):
        speed("1.0" if night < 5 else "0.88")
        result = run(pytester, "--perf-history", "h.db", "--perf-json", "r.json")
        assert result.ret == 0, result.stdout.str()[-2000:]
        run_ids.append(json.loads((pytester.path / "r.json").read_text())["run_id"])
    points = json.loads((pytester.path / "r.json").read_text())["points"]
    assert {p["concurrency"] for p in points} == {1, 4}
    for point in points:
        history = point["history"]
        assert history["runs"] == 8
        (cp,) = history["change_points"]
        assert cp["first_bad_run"] == run_ids[4] and cp["last_good_run"] == run_ids[3]
        assert cp["change"] == pytest.approx(-0.12, abs=0.03)
        low, high = cp["interval"]
        assert low < cp["change"] < high and high - low < 0.06
        assert history["drift"]["first_bad_run"] == run_ids[4]
        assert point["verdict"] == "WARN" and "drift:" in point["message"]
    result.stdout.fnmatch_lines(
        [
            f"llmperf verdicts: 2 WARN; drift gate: 2 point(s) moved*(run {run_ids[4]})",
            f"*drift*since run {run_ids[4]}*",
        ]
    )


def test_a_version_1_postgresql_store_gains_the_server_series(postgres_url):
    from sqlalchemy import text

    from tests.history_data import Nights, build_store, records, run_id

    build_store(postgres_url, Nights(nights=1, points=1))
    store = HistoryStore.open(postgres_url)
    with store.engine.begin() as conn:  # as version 1 made it
        conn.execute(text("ALTER TABLE llmperf_points DROP COLUMN server_series"))
        conn.execute(text("ALTER TABLE llmperf_points DROP COLUMN gpu_series"))
        conn.execute(text("ALTER TABLE llmperf_points DROP COLUMN server_profile"))
        conn.execute(text("UPDATE llmperf_meta SET value = '1' WHERE key = 'schema_version'"))
    store.engine.dispose()
    upgraded = HistoryStore.open(postgres_url)
    assert upgraded.schema_version() == 3
    series = {"interval_s": 0.5, "t": [0.0, 0.5], "kv_cache_usage": [1.0, 0.99]}
    upgraded.apply_all(
        [
            {**r, "server_series": series} if r["kind"] == "point" else r
            for r in records(Nights(nights=2, points=1))
            if r["run_id"] == run_id(1)
        ]
    )
    assert upgraded.points_of(run_id(1))[0]["server_series"] == series
