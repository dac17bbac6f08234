"""The bisection's search with launches as replicates (pytest_llmperf/bisect.py), its sessions
drawn instead of measured: every session a launch offset from its commit's level (one offset
a launch), the planted commit 15 % slower. The command itself, on a real repository and the
simulated engine, is tests/integration/test_bisect.py."""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from pathlib import Path

import numpy as np

from pytest_llmperf.bisect import Bisection, Step

PLANTED = 11


class Drawn(Bisection):
    def __init__(self, rng: np.random.Generator, launch_sd: float, throughput: bool = True):
        super().__init__(Path("."), None, [], rounds=6)
        self.rng, self.launch_sd, self.throughput = rng, launch_sd, throughput

    def _session(self, commit: str) -> dict[str, tuple[list[float], bool]]:
        slower = int(commit) >= PLANTED
        level = math.log(100.0) + (math.log(0.85) if slower else 0.0)
        runs = np.exp(level + self.rng.normal(0.0, self.launch_sd) + self.rng.normal(0, 0.02, 3))
        found = {"p t.py::test[C=1]": ([float(v) for v in runs], False)}
        # A latency that falls (by as much, with no noise at all) where throughput falls: an
        # improvement, which over its noise moved most; it is not the one followed.
        found["p t.py::test[C=1] ttft"] = ([0.01 * (0.85 if slower else 1.0)] * 3, True)
        return found


def search(rng: np.random.Generator, launch_sd: float) -> tuple[Step | None, Drawn]:
    bisection = Drawn(rng, launch_sd)
    with contextlib.redirect_stdout(io.StringIO()):
        found = bisection.search([Step(str(k), f"change {k}") for k in range(17)])
    return found, bisection


def test_launches_4_percent_apart_name_the_planted_commit():
    rng = np.random.default_rng(20261204)
    named = sum((search(rng, 0.04)[0] or Step("", "")).commit == str(PLANTED) for _ in range(20))
    assert named >= 19


def test_the_point_followed_is_the_one_that_got_worse_not_the_one_that_moved_most():
    """Throughput fell 15 % and a latency fell as much (an improvement, with no spread at all):
    by |change| over its noise the latency moved most; the bisection follows what got worse."""
    found, bisection = search(np.random.default_rng(1), 0.0)
    assert bisection.key == "p t.py::test[C=1]" and found is not None
    assert found.commit == str(PLANTED)


def test_the_final_pair_is_measured_again_before_it_is_named():
    found, bisection = search(np.random.default_rng(2), 0.02)
    assert found is not None
    last_good, first_bad = str(PLANTED - 1), str(PLANTED)
    sessions = [s.commit for s in bisection.steps]
    assert sessions.count(last_good) >= 2 and sessions.count(first_bad) >= 2


def test_a_search_leaves_no_directory_behind(tmp_path, monkeypatch):
    """Only a search that checks out worktrees needs a scratch directory: ``main`` makes one and
    removes it. A Bisection that measures otherwise (drawn here, simulated by
    benchmarks/bisect_power.py) makes none."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    search(np.random.default_rng(0), 0.02)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
