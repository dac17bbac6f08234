"""pytest imports the plugin in every run of an environment that has it installed: importing it
must not pull in the heavy libraries, and must cost little on top of pytest itself."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "scipy",
    "numpy",
    "matplotlib",
    "aiohttp",
    "psutil",
    "httpx",
    "uvloop",
    "sqlalchemy",
    "psycopg",
)


def run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_importing_the_entry_point_imports_no_heavy_library():
    loaded = run(
        "import pytest_llmperf.plugin, sys; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert loaded == "[]"


def test_importing_the_entry_point_costs_little_beyond_pytest():
    # Best of five in fresh interpreters, measured in-process so interpreter start-up is not counted.
    code = (
        "import time; t = time.perf_counter(); import pytest; t1 = time.perf_counter(); "
        "import pytest_llmperf.plugin; t2 = time.perf_counter(); print(t1 - t, t2 - t1)"
    )
    extra = min(float(run(code).split()[1]) for _ in range(5))
    assert extra < 0.1, f"importing pytest_llmperf.plugin after pytest took {extra * 1e3:.0f} ms"
