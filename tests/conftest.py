"""Fixtures shared by the plugin's tests; the helpers behind them live in tests/helpers.py.

Tests by cost: ``tests/unit`` starts no process and runs in seconds; everything else
(``tests/integration``: real server processes and pytester runs, ``tests/engines``: real
engines) is marked ``slow``, so ``pytest tests -m "not slow"`` is the fast subset.
"""

from __future__ import annotations

import importlib
import multiprocessing.connection
import multiprocessing.queues
import multiprocessing.synchronize  # noqa: F401
import os
import pkgutil
import sys
from pathlib import Path

import httpcore  # noqa: F401
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite
import sqlalchemy.pool  # noqa: F401

import pytest_llmperf
from tests.helpers import start_sim

# Bytecode caches for the processes this session starts (pytest runs, servers): with
# PYTHONDONTWRITEBYTECODE set, as on this project's CI image, every pytest a test starts compiled
# the plugin from source and ran pytest's assertion rewriting again over every installed plugin's
# modules (210 here, about 2 s a run): tests/integration/test_plugin.py took 39 s, 25 s cached.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

pytest_plugins = ["pytester"]
# pytester's in-process runs drop the modules first imported inside them, so a later import
# makes a second copy: httpx (which imports httpcore lazily and caches its exception classes)
# would no longer recognise httpcore's errors, multiprocessing could no longer pickle its own
# connections, numpy's C extension refuses a second load, and SQLAlchemy would no longer know
# the history store's own tables ("Column expression expected, got Column"). Importing them
# here keeps one. The plugin imports its own modules when a hook first needs them, so the same
# holds for them: a package kept from an earlier run would hand out its first copy of a module
# (`from pytest_llmperf.golden import check`) while a fresh import made a second, and an
# isinstance across the two fails. Every module of the plugin is imported here.
for _module in pkgutil.walk_packages(pytest_llmperf.__path__, "pytest_llmperf."):
    if not _module.name.endswith("__main__") and ".perf_suites" not in _module.name:
        importlib.import_module(_module.name)


UNIT_TESTS = Path(__file__).resolve().parent / "unit"
#: The pytest runs the tests start record one launch a golden (the plugin's default is two for a
#: launched server): each launch is a server start, and only the tests about launches need two;
#: they pass ``--perf-update-launches profile`` (or a count), which the command line overrides.
ONE_LAUNCH = "-o llmperf_update_launches=1"
#: ...and judge one launch a night: a point its launch's noise leaves undecided WARNs (a clear
#: FAIL stands) instead of launching the server again; the tests about confirmation
#: (tests/integration/test_confirm.py) pass ``--perf-confirm-launches profile`` (or a count).
NO_CONFIRMATION = "-o llmperf_confirm_launches=0"
#: Plugins of this environment that the pytest runs the tests start never use: anyio's (which
#: imports trio) and Hypothesis's take 0.4 of the 0.9 s a pytest run needs to start on 2 cores,
#: paid by every pytest a test starts in a subprocess.
UNUSED_PLUGINS = "-p no:anyio -p no:hypothesispytest"


@pytest.fixture(autouse=True)
def one_launch_a_recording(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # it clears PYTEST_ADDOPTS when it starts
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv(
        "PYTEST_ADDOPTS", f"{addopts} {ONE_LAUNCH} {NO_CONFIRMATION} {UNUSED_PLUGINS}".strip()
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if UNIT_TESTS not in item.path.parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def sim_server():
    server = start_sim()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def eagle_server():
    server = start_sim("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    yield server
    server.stop()


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (Debian's package, started by
    scripts/postgresql.sh); skipped where it is not installed, failed under
    LLMPERF_REQUIRE_POSTGRES=1 (.ci/run sets it)."""
    import glob
    import os
    import subprocess

    from tests.helpers import free_port

    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        message = "PostgreSQL is not installed here: bash scripts/install-test-services.sh"
        if os.environ.get("LLMPERF_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    import shutil
    import tempfile

    script = Path(__file__).resolve().parents[1] / "scripts" / "postgresql.sh"
    # Not under pytest's basetemp: its parents are private to this user, and the server runs as
    # the postgres user when the tests run as root.
    directory = Path(tempfile.mkdtemp(prefix="llmperf-postgresql-"))
    started = subprocess.run(
        ["bash", str(script), "start", str(directory), str(free_port("127.0.0.1"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, f"PostgreSQL did not start:\n{started.stderr}"
    yield started.stdout.strip()
    subprocess.run(["bash", str(script), "stop", str(directory)], timeout=60)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server, request):
    """A new, empty database on the session's PostgreSQL server, as a store URL."""
    import re

    import psycopg

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + "/" + name


#: The whole suite's budget on the faster CPU of this project's machines (.ci/run gives 90
#: minutes; the slower CPU may take half as long again), and one test's share of it past which
#: the summary names the test.
SUITE_BUDGET_S = 40 * 60
TEST_BUDGET_S = 90.0
#: How many of the slowest tests the summary lists.
SLOWEST_SHOWN = 12
_durations: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The slowest tests against the budget: where the suite's time goes, and which test grew
    past its share (a timing is not asserted: the machines differ, 3x for SGLang)."""
    if len(_durations) < 50:  # a few tests picked by hand: nothing to budget
        return
    total = sum(_durations.values())
    write = terminalreporter.write_line
    terminalreporter.section("test time against the budget")
    write(
        f"{total:,.0f} s in tests, of the suite's {SUITE_BUDGET_S:,} s budget ({total / SUITE_BUDGET_S:.0%})"
    )
    slowest = sorted(_durations.items(), key=lambda kv: -kv[1])[:SLOWEST_SHOWN]
    for nodeid, seconds in slowest:
        over = f"  OVER its {TEST_BUDGET_S:.0f} s budget" if seconds > TEST_BUDGET_S else ""
        write(f"{seconds:7.1f} s  {seconds / total:5.1%}  {nodeid}{over}")
