"""The default run on a busy machine: false FAILs with and without the history's noise model.

One core is kept busy by another process (a Python spin loop) for the whole experiment, as a
shared CI runner's neighbour would. ``pytest perf_suites`` (the default suite on the simulated
engine, against the committed goldens) then runs ``--history`` times to build a history of
sessions, and ``--runs`` times more; every run writes the history and its results JSON. For each
of the last ``--runs`` runs the script counts the points that FAIL:

- by the golden alone (``history.golden_verdict``, what the verdict was before the history's
  word: the gate a user without a history has), and
- as judged (the history's night-to-night noise model and drift gate applied),

and says how many runs had a false FAIL either way (nothing about the engine changed: every
FAIL is false).

    python benchmarks/busy_machine.py --history 10 --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def spin() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def one_run(project: Path, store: Path, out: Path) -> tuple[list[dict], float, int]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_suites", "-q", "-p", "no:cacheprovider",
         "--perf-history", str(store), "--perf-json", str(out)],
        cwd=project, capture_output=True, text=True,
    )  # fmt: skip
    points = json.loads(out.read_text())["points"] if out.exists() else []
    return points, time.monotonic() - started, done.returncode


def golden_fail(point: dict) -> bool:
    history = point.get("history") or {}
    return (history.get("golden_verdict") or point["verdict"]) == "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=10, help="sessions run first")
    parser.add_argument("--runs", type=int, default=10, help="sessions counted")
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="llmperf-busy-"))
    shutil.copytree(ROOT / "perf_suites", project / "perf_suites")
    shutil.copytree(ROOT / "baselines", project / "baselines")
    store = project / "history.db"
    busy = spin()
    print(f"one core kept busy by pid {busy.pid}; {os.cpu_count()} cores; project {project}")
    print(
        "| run | phase | s | exit | FAIL by the golden alone | FAIL as judged (history) | worst golden-only FAIL |"
    )
    print("|---:|---|---:|---:|---:|---:|---|")
    counted = {"golden": 0, "history": 0}
    try:
        for i in range(1, args.history + args.runs + 1):
            phase = "history" if i <= args.history else "counted"
            points, seconds, code = one_run(project, store, project / f"r{i}.json")
            by_golden = [p for p in points if golden_fail(p)]
            judged = [p for p in points if p["verdict"] == "FAIL"]
            worst = max(by_golden, key=lambda p: abs((p["ratio"] or 1) - 1), default=None)
            shown = (
                f"{worst['profile']} C={worst['concurrency']} {worst['metric']} "
                f"{(worst['ratio'] - 1) * 100:+.0f} %"
                if worst
                else "-"
            )
            print(
                f"| {i} | {phase} | {seconds:.0f} | {code} | {len(by_golden)} | {len(judged)} | "
                f"{shown} |",
                flush=True,
            )
            if phase == "counted":
                counted["golden"] += bool(by_golden)
                counted["history"] += bool(judged)
    finally:
        busy.kill()
    print(
        f"\nOf {args.runs} runs after {args.history} sessions of history: "
        f"{counted['golden']} with a false FAIL by the golden alone, "
        f"{counted['history']} with the history's noise model and drift gate."
    )
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
