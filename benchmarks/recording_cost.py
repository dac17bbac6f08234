"""What recording the shipped suite costs, against what its plan said: the embedded default
(``sim-baseline`` and ``sim-eagle3``, every test of perf_suites) recorded with
``--perf-update`` in a scratch copy, optionally at another ``output_len`` (the GPU nightly's
512 tokens), twice with one history: the first recording is a first recording (its plan has
no golden or history to time it by), the second's plan is timed by what the first took.
Prints each recording's plan, wall time, outcomes and time per test file, and each plan's
total against its wall time. With ``--goldens`` the scratch copy starts from the shipped goldens
(recorded at 64 tokens), as issue 41's recording did: the first plan is timed by them.

    python benchmarks/recording_cost.py --output-len 512

``--output-len N`` sets the simulated pair's ``output_len`` and nothing else, as issue 41's
recording did. With ``--scale-load`` the open-loop rates and the e2e limit are scaled with it
too, as a user recording at that length might set them: the shipped ones are for 64-token
requests (the pair sustains 20 requests/s of them, sim-eagle3 about 4 of 512 tokens), so the
rates are scaled by 2·64/N (5, 10, 20 -> 1.25, 2.5, 5 at 512) and ``slo.e2e_s`` by N/64 (a
request takes N/64 times as long; at 150 ms no rate meets it and the capacity search says so).
Lower rates make longer open-loop windows: a window holds ``min_requests`` arrivals (16 at
1.25 requests/s: 12.8 s, a run about 20 s with its lead-in and drain).

    python benchmarks/recording_cost.py --output-len 512 --scale-load
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED_LEN = 64


def scaled(text: str, output_len: int, load: bool) -> str:
    """The profiles file with the simulated pair's output_len and, with ``load``, its open-loop
    rates and e2e limit set for ``output_len``."""
    head, rest = text.split("# --- Real servers", 1)
    head = re.sub(r"(?m)^output_len = \d+", f"output_len = {output_len}", head, count=1)
    if not load:
        return head + "# --- Real servers" + rest
    factor = 2 * SHIPPED_LEN / output_len
    head = re.sub(
        r"(?m)^request_rate = \[([^\]]*)\]",
        lambda m: (
            "request_rate = ["
            + ", ".join(f"{float(r) * factor:g}" for r in m.group(1).split(","))
            + "]"
        ),
        head,
        count=1,
    )
    head = re.sub(
        r"e2e_s = ([0-9.]+)",
        lambda m: f"e2e_s = {float(m.group(1)) * output_len / SHIPPED_LEN:g}",
        head,
        count=1,
    )
    return head + "# --- Real servers" + rest


def record(scratch: Path, extra: list[str]) -> tuple[float, list[str], int]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_suites", "--perf-update", "-p", "no:randomly",
         "--perf-history", "history.db", "--durations=0", "-q", *extra],
        cwd=scratch, capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "400"},  # the short summary's reasons whole
    )  # fmt: skip
    return time.monotonic() - started, done.stdout.splitlines(), done.returncode


def report(title: str, wall: float, out: list[str], code: int) -> float | None:
    """Prints one recording; returns its plan's total in seconds (None: not timed)."""
    print(f"## {title}: wall {wall:.0f} s ({wall / 60:.1f} min), exit {code}")
    plan = [line for line in out if line.startswith(("llmperf plan", "  "))][:20]
    print("\n".join(plan))
    per_file: dict[str, float] = defaultdict(float)
    for line in out:
        m = re.match(r"^(\d+\.\d+)s (call|setup|teardown)\s+(\S+?)::", line)
        if m:
            per_file[m.group(3)] += float(m.group(1))
    print("time per file (setup, calls and teardowns; loads are in setups):")
    for name, seconds in sorted(per_file.items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {seconds:.0f} s")
    print(
        "\n".join(
            line
            for line in out
            if line.startswith(("FAILED", "ERROR", "llmperf verdicts")) or "\u2014 FAIL" in line
        )
    )
    print(out[-1] if out else "")
    total = next((line for line in plan if line.startswith("  total: about ")), "")
    m = re.match(r"  total: about ([0-9.]+) (s|min|h)", total)
    if m is None:
        return None
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]


def against(planned: float | None, wall: float, title: str) -> None:
    if planned is not None:
        print(
            f"\n{title}: the plan said about {planned:.0f} s; it took {wall:.0f} s: "
            f"{(planned - wall) / wall:+.0%}\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-len", type=int, default=None)
    parser.add_argument(
        "--scale-load", action="store_true", help="scale the rates and e2e limit with the length"
    )
    parser.add_argument("--once", action="store_true", help="record once (no plan check)")
    parser.add_argument(
        "--goldens",
        action="store_true",
        help="start from the shipped goldens (recorded at 64 tokens), as issue 41's recording did",
    )
    parser.add_argument("--log", type=Path, default=None, help="write each recording's output")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="recording-cost-"))
    try:
        suites = scratch / "perf_suites"
        shutil.copytree(REPO / "perf_suites", suites, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(REPO / "conftest.py", scratch)
        shutil.copy(REPO / "pyproject.toml", scratch)
        if args.goldens:
            shutil.copytree(REPO / "baselines", scratch / "baselines")
        profiles = suites / "profiles.toml"
        text = profiles.read_text().replace('"../.llama/', f'"{REPO}/.llama/')
        text = text.replace('"../.sglang/', f'"{REPO}/.sglang/')
        if args.output_len:
            text = scaled(text, args.output_len, args.scale_load)
        profiles.write_text(text)
        first = record(scratch, args.pytest_args)
        if args.log:
            args.log.write_text("\n".join(first[1]))
        against(report("first recording", *first), first[0], "first recording")
        if args.once:
            return
        second = record(scratch, args.pytest_args)
        planned = report("second recording, its plan from the first's history", *second)
        against(planned, second[0], "second recording")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
