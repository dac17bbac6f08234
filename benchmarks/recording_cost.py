"""What recording the shipped suite costs, against what its plan said: the embedded default
(``sim-baseline`` and ``sim-eagle3``, every test of perf_suites) recorded with
``--perf-update`` in a scratch copy, optionally at another ``output_len`` (the GPU nightly's
512 tokens). Prints the plan's lines, the wall time, each test's duration and the outcomes.

    python benchmarks/recording_cost.py --output-len 512
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-len", type=int, default=None)
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="recording-cost-"))
    try:
        suites = scratch / "perf_suites"
        shutil.copytree(REPO / "perf_suites", suites, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(REPO / "conftest.py", scratch)
        shutil.copy(REPO / "pyproject.toml", scratch)
        profiles = suites / "profiles.toml"
        text = profiles.read_text().replace('"../.llama/', f'"{REPO}/.llama/')
        text = text.replace('"../.sglang/', f'"{REPO}/.sglang/')
        if args.output_len:
            head, rest = text.split("[profiles.sim-eagle3]", 1)
            head = re.sub(
                r"(?m)^output_len = \d+", f"output_len = {args.output_len}", head, count=1
            )
            text = head + "[profiles.sim-eagle3]" + rest
        profiles.write_text(text)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "perf_suites", "--perf-update", "-p", "no:randomly",
             "--durations=0", "-q", *args.pytest_args],
            cwd=scratch, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.monotonic() - started
        out = done.stdout.splitlines()
        plan = [line for line in out if line.startswith(("llmperf plan", "  "))][:12]
        print("\n".join(plan))
        print(f"\nwall: {wall:.0f} s ({wall / 60:.1f} min), exit {done.returncode}")
        durations = [line for line in out if re.match(r"^\d+\.\d+s (call|setup|teardown)", line)]
        print("\n".join(durations[:25]))
        print("\n".join(line for line in out if line.startswith(("FAILED", "ERROR", "=")))[-3000:])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
