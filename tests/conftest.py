"""Fixtures shared by the plugin's tests; the helpers behind them live in tests/helpers.py.

Tests by cost: ``tests/unit`` starts no process and runs in seconds; everything else
(``tests/integration``: real server processes and pytester runs, ``tests/engines``: real
engines) is marked ``slow``, so ``pytest tests -m "not slow"`` is the fast subset.
"""

from __future__ import annotations

import multiprocessing.connection
import multiprocessing.queues
import multiprocessing.synchronize  # noqa: F401
from pathlib import Path

import httpcore  # noqa: F401
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

from tests.helpers import start_sim

pytest_plugins = ["pytester"]
# pytester's in-process runs drop the modules first imported inside them, so a later import
# makes a second copy: httpx (which imports httpcore lazily and caches its exception classes)
# would no longer recognise httpcore's errors, multiprocessing could no longer pickle its own
# connections, and numpy's C extension refuses a second load. Importing them here keeps one.


UNIT_TESTS = Path(__file__).resolve().parent / "unit"


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
