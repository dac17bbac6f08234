"""Operating characteristics of the implemented verdict (pytest_llmperf.core.verdict), two ways.

1. Monte-Carlo (default): golden = 10 runs from 2 server launches × 5; candidate = 3 runs from
   one launch, extended 3 → 6 → 10 while UNCERTAIN, exactly as ``LLMPerf.check`` does. Runs are
   log-normal with run-to-run CV 1/3/5 %; each launch is offset by a further N(0, 2 %) in the
   drift scenario. Reports FAIL / WARN / inconclusive rates, mean runs used, and the false-FAIL
   probability of a 16-point night (1 − (1 − p)^16).

2. ``--e2e K``: the plugin end to end on the simulated engine, in a scratch directory: record
   goldens (2 launches × 5 runs, pooled) for sim-baseline and sim-eagle3 at C = 1, 10, 30; run
   the suite K times unchanged (each run is its own pytest process and server launch) and count
   false FAILs; then once with the engine 30 % slower (a hidden fault knob) and check that
   every point FAILs.

    python benchmarks/verdict_power.py --trials 5000
    python benchmarks/verdict_power.py --trials 0 --e2e 20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from pytest_llmperf.core.verdict import STAGES, decide

CVS = (0.01, 0.03, 0.05)
DROPS = (0.0, 0.10, 0.20, 0.30)
LAUNCH_DRIFT = 0.02
MARGINS = {"fail_margin": 0.15, "warn_margin": 0.05}


def one_point(
    rng: np.random.Generator, cv: float, drop: float, drift: float
) -> tuple[str, bool, int]:
    def launch(level: float, n: int) -> np.ndarray:
        offset = rng.normal(0.0, drift) if drift else 0.0
        return level * np.exp(offset + rng.normal(0.0, cv, n))

    gold = np.concatenate([launch(100.0, 5), launch(100.0, 5)])
    candidate_level = 100.0 * (1.0 - drop) * (math.exp(rng.normal(0.0, drift)) if drift else 1.0)
    new = candidate_level * np.exp(rng.normal(0.0, cv, STAGES[-1]))
    for n in STAGES:
        v = decide(new[:n], gold, **MARGINS, last_stage=n == STAGES[-1])
        if v.name != "UNCERTAIN":
            return v.name, v.inconclusive, n
    raise AssertionError("the last stage always decides")


def monte_carlo(trials: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(
        f"# Monte-Carlo, {trials} trials per cell; cells: FAIL % · WARN % · inconclusive % · mean runs"
    )
    print(
        "\n| noise | CV | "
        + " | ".join(f"drop {d:.0%}" for d in DROPS)
        + " | false FAIL per 16-point night |"
    )
    print("|---|---|" + "---|" * len(DROPS) + "---|")
    for label, drift in (("iid", 0.0), (f"±{LAUNCH_DRIFT:.0%} launch drift", LAUNCH_DRIFT)):
        for cv in CVS:
            cells, null_fail = [], 0.0
            for drop in DROPS:
                counts = {"FAIL": 0, "WARN": 0, "inconclusive": 0}
                runs = 0
                for _ in range(trials):
                    name, inconclusive, n = one_point(rng, cv, drop, drift)
                    runs += n
                    if inconclusive:
                        counts["inconclusive"] += 1
                    elif name in counts:
                        counts[name] += 1
                rate = {k: 100.0 * v / trials for k, v in counts.items()}
                if drop == 0.0:
                    null_fail = counts["FAIL"] / trials
                cells.append(
                    f"{rate['FAIL']:.2f} · {rate['WARN']:.1f} · {rate['inconclusive']:.1f} · "
                    f"{runs / trials:.2f}"
                )
            night = 1 - (1 - null_fail) ** 16
            bound = f" (< {1 - (1 - 1 / trials) ** 16:.2%})" if null_fail == 0 else ""
            print(
                f"| {label} | {cv:.0%} | " + " | ".join(cells) + f" | {night:.2%}{bound} |",
                flush=True,
            )


SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


def profiles(knob: str = "") -> str:
    extra = f', "--sim-throughput-multiplier", "{knob}"' if knob else ""
    return textwrap.dedent(f"""
        default = ["sim-baseline", "sim-eagle3"]
        [profiles.sim-baseline]
        engine = "sim"
        model = "sim/kimi-k2.5-int4"
        args = ["--tp-size", "8", "--sim-speed", "10", "--sim-load-time", "0.2"{extra}]
        concurrency = [1, 10, 30]
        output_len = 64
        ready_timeout_s = 60
        shutdown_timeout_s = 10
        [profiles.sim-eagle3]
        extends = "sim-baseline"
        extra_args = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
    """)


def pytest_run(project: Path, *args: str) -> dict:
    out = project / "result.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--perf-json",
            str(out),
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    if not out.exists():
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return json.loads(out.read_text())


def end_to_end(k: int) -> None:
    project = Path(tempfile.mkdtemp(prefix="verdict-e2e-"))
    try:
        (project / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")
        (project / "profiles.toml").write_text(profiles())
        (project / "test_perf.py").write_text(SUITE)
        started = time.monotonic()
        pytest_run(project, "--perf-update", "--perf-update-runs", "5")
        pytest_run(project, "--perf-update", "--perf-update-runs", "5", "--perf-pool")
        print(
            f"\n# End to end on the simulated engine: goldens recorded (2 launches x 5 runs) in "
            f"{time.monotonic() - started:.0f} s"
        )
        print(
            "\n| run | verdicts (6 points: 2 profiles x C = 1, 10, 30) | worst ratio | runs used |"
        )
        print("|---|---|---:|---:|")
        false_fails = 0
        for i in range(1, k + 1):
            data = pytest_run(project)
            verdicts = [p["verdict"] for p in data["points"]]
            false_fails += sum(v == "FAIL" for v in verdicts)
            counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
            worst = min(p["ratio"] for p in data["points"] if p["ratio"] is not None)
            used = sum(len(p["values"]) for p in data["points"])
            print(f"| {i} | {counts} | {worst:.3f} | {used} |", flush=True)
        print(f"\nFalse FAILs over {k} unchanged runs ({6 * k} points): {false_fails}")
        (project / "profiles.toml").write_text(profiles("0.7"))
        data = pytest_run(project)
        verdicts = {
            f"{p['profile']} C={p['concurrency']}": (p["verdict"], round(p["ratio"], 3))
            for p in data["points"]
        }
        failed = sum(v == "FAIL" for v, _ in verdicts.values())
        print(f"\nEngine 30 % slower: {failed} of {len(verdicts)} points FAIL: {verdicts}")
    finally:
        shutil.rmtree(project, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trials", type=int, default=5000, help="Monte-Carlo trials per cell (0 to skip)"
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--e2e", type=int, default=0, metavar="K", help="unchanged end-to-end suite runs"
    )
    args = parser.parse_args()
    if args.trials:
        monte_carlo(args.trials, args.seed)
    if args.e2e:
        end_to_end(args.e2e)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
