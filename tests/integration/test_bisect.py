"""``python -m pytest_llmperf bisect`` on a real git repository made here: sixteen commits after
a good one, one of which slows the simulated engine by 15 % (its fault knob, so no fingerprint
key changes), one of which cannot be set up. The bisection measures each step in a checkout of
its own, skips the broken one, and finds the planted commit in at most five steps."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import FAST_SIM_ARGS

PLANTED = 11
BROKEN = 8
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


def profiles(multiplier: float) -> str:
    sim = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
    return textwrap.dedent(f"""
        default = ["sim"]

        [profiles.sim]
        engine = "sim"
        model = "sim/bisect"
        args = [{sim}, "--sim-throughput-multiplier", "{multiplier}"]
        concurrency = [4]
        runs = 3
        min_requests = 8
        output_len = 128
        metrics_interval_s = 0
        ready_timeout_s = 30
        shutdown_timeout_s = 5
    """)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repository(repo: Path) -> list[str]:
    """Commit 0 (good), then 16 more: the planted one slows the engine, the broken one adds a
    file the setup refuses (the next removes it). Returns the commits, oldest first."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "CI")
    (repo / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    (repo / "test_perf.py").write_text(SUITE)
    (repo / "profiles.toml").write_text(profiles(1.0))
    commits = []
    for k in range(17):
        (repo / "CHANGES").write_text(f"change {k}\n")
        if k == PLANTED:
            (repo / "profiles.toml").write_text(profiles(0.85))
        (repo / "BROKEN").unlink(missing_ok=True)
        if k == BROKEN:
            (repo / "BROKEN").write_text("this commit does not build\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {k}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def own_tmpdir(tmp_path: Path) -> dict[str, str]:
    """The environment with TMPDIR in the test's own directory: what bisect leaves is seen."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def scratch_left(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").glob("llmperf-bisect-*"))


def test_bisect_finds_the_planted_commit_in_at_most_five_steps(tmp_path):
    commits = make_repository(tmp_path / "repo")
    out = tmp_path / "bisect.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf", "bisect", "--good", commits[0], "--bad",
         commits[-1], "--repo", str(tmp_path / "repo"), "--setup", "test ! -f BROKEN",
         "--json", str(out), "--", "-k", "throughput"],
        capture_output=True, text=True, timeout=600, env=own_tmpdir(tmp_path),
    )  # fmt: skip
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["first_bad_commit"] == commits[PLANTED]
    steps = data["steps"][2:]  # after the two ends
    # Binary search over commits 1-16: the middle (8) cannot be set up, so its nearest
    # neighbour (7), then 11 (the planted one: bad), 9 and 10 (good): five steps.
    order = [commits.index(s["commit"]) for s in steps]
    assert order == [BROKEN, 7, PLANTED, 9, 10], order
    skipped = [s for s in steps if s["verdict"] == "skip"]
    assert [s["commit"] for s in skipped] == [commits[BROKEN]]
    assert "--setup exited 1" in skipped[0]["note"]
    for step in steps:  # each measured step landed on its own side of the planted commit
        if step["verdict"] != "skip":
            side = "bad" if commits.index(step["commit"]) >= PLANTED else "good"
            assert step["verdict"] == side, step
    assert f"first bad commit: {commits[PLANTED]} 'change {PLANTED}'" in done.stdout
    assert re.search(r"change 11'.*→ [\d,.]+ \(-1[0-9]\.\d %\)", done.stdout), done.stdout
    # Nothing left behind: the worktrees are removed, and the directory that held them.
    assert git(tmp_path / "repo", "worktree", "list").count("\n") == 0
    assert scratch_left(tmp_path) == []


def test_a_revision_that_does_not_exist_is_one_line(tmp_path):
    commits = make_repository(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf", "bisect", "--good", "no-such-rev", "--bad",
         commits[-1], "--repo", str(tmp_path / "repo")],
        capture_output=True, text=True, timeout=60, env=own_tmpdir(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2
    assert scratch_left(tmp_path) == []
    assert done.stderr.strip() == (
        f"pytest-llmperf bisect: --good no-such-rev: no such commit in {tmp_path / 'repo'}"
    )
