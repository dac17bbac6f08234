"""The README's first command, N times in a row, and what it said each time.

Each run is ``pytest perf_suites`` in a fresh process (a fresh launch of every simulated
server), as a new user runs it, with ``--perf-json`` to count the verdicts. Prints one line a
run (exit code, time, verdict counts) and the totals, with the CPU it ran on: the numbers behind
"the README's first command ends green on this machine" in docs/explanation/statistics.md.

    python benchmarks/readme_runs.py 10
    python benchmarks/readme_runs.py 3 -- -k throughput   # extra pytest arguments after --
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def verdicts(results: Path) -> collections.Counter[str]:
    """Every verdict of a results JSON: its points, speedups, capacities, accuracies and
    greedy parities."""
    data = json.loads(results.read_text())
    found: collections.Counter[str] = collections.Counter()
    items = [
        *(item for key in ("points", "capacity", "startup", "accuracy", "parity") for item in data.get(key) or []),
        *(gate for pair in data.get("speculative") or [] for gate in (pair.get("gate") or {}).values()),
    ]  # fmt: skip
    for item in items:
        verdict = item.get("verdict")
        name = verdict.get("outcome") if isinstance(verdict, dict) else verdict
        if name:
            found[str(name)] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=10)
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args()
    from pytest_llmperf.host.hardware import cpu_facts, cpu_model

    print(f"# pytest perf_suites x {args.runs} on {cpu_model()} ({cpu_facts()['key']})")
    print("| run | exit | seconds | verdicts |\n|---:|---:|---:|---|")
    exits: collections.Counter[int] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as scratch:
        for k in range(1, args.runs + 1):
            results = Path(scratch) / f"run-{k}.json"
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "perf_suites", "-p", "no:randomly",
                 "--perf-json", str(results), *args.pytest_args],
                cwd=REPO, capture_output=True, text=True,
            )  # fmt: skip
            seconds = time.monotonic() - started
            found = verdicts(results) if results.exists() else collections.Counter()
            exits[done.returncode] += 1
            total += found
            shown = ", ".join(f"{n} {name}" for name, n in sorted(found.items())) or "-"
            print(f"| {k} | {done.returncode} | {seconds:.0f} | {shown} |", flush=True)
            if done.returncode != 0:
                failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
                for line in failed + done.stdout.splitlines()[-3:]:
                    print(f"|  |  |  | `{line[:200]}` |")
    print(
        f"\nexit codes: {dict(exits)}; verdicts over all runs: "
        + ", ".join(f"{n} {name}" for name, n in sorted(total.items()))
    )


if __name__ == "__main__":
    main()
