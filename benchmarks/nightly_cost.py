"""What the shipped GPU nightly costs, old design beside new, on the simulated engine.

The shape of the shipped ``baseline`` and ``eagle3`` profiles (8 levels, ``output_len`` 512, the
same SGLang flags) runs on the simulated engine at 10x the seeds' speeds (``--sim-speed 10``:
baseline 922 → 7,720 tok/s), and every duration is reported x10, so the figures are minutes of
the 8-GPU node. EAGLE-3 runs with the shipped ``eagle3``'s flags (2 steps,
3 draft tokens), which run faster on the simulated engine than the seeds' EAGLE-3 (114 → 467 tok/s
at node scale, against 93 → 348 with ``sim-eagle3``'s 3 steps and 4 draft tokens). A
run's GPU time is the call phase of its tests (the warm-up, the runs, and any extra runs of an
UNCERTAIN point); server loads are excluded.

- **old**: whole waves, as shipped before: N = max(16, 4·C) requests per run, 3 runs per level,
  goldens of 10 runs. Measuring the old design in full takes ~22 minutes here and recording its
  goldens ~72, so its cost is one measured run per level, scaled: measure = warm-up + 3 runs,
  record = warm-up + 10 runs. Its verdicts are measured for real at C = 1, 10 only (goldens
  recorded over two launches, pooled), with the sizing rules of today's code.
- **new**: a 1.5 s steady-state window per run (15 s on the node), 0.3 s settle (3 s), runs
  sized by the golden: recorded for real over two launches (pooled) at all 8 levels, then
  measured on the unchanged engine and on the engine made 30 % slower (a hidden fault knob).

    python benchmarks/nightly_cost.py            # about 30 minutes here
    python benchmarks/nightly_cost.py --new-only # about 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SCALE = 10  # the sim runs 10x the node's speed: its seconds x 10 are the node's
LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
VERDICT_LEVELS_OLD = [1, 10]

SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""

# Times the call phase of every test: the measurement, without the server's load.
CONFTEST = """
import json, os

CALLS = {}

def pytest_runtest_logreport(report):
    if report.when == "call":
        CALLS[report.nodeid] = report.duration

def pytest_sessionfinish(session):
    with open(os.environ["NIGHTLY_COST_CALLS"], "w") as f:
        json.dump(CALLS, f)
"""


def profiles(design: str, levels: list[int], multiplier: float | None = None, runs: int = 3) -> str:
    fault = f', "--sim-throughput-multiplier", "{multiplier}"' if multiplier else ""
    measure = "window_s = 1.5\nsettle_s = 0.3" if design == "new" else "min_requests = 16"
    return (
        textwrap.dedent(f"""
        [profiles.baseline]
        engine = "sim"
        model = "sim/kimi-k2.5-int4"
        args = [
            "--tp-size", "8", "--trust-remote-code",
            "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce",
            "--attention-backend", "flashinfer", "--enable-flashinfer-allreduce-fusion",
            "--sim-speed", "10", "--sim-load-time", "0.2"{fault},
        ]
        api = "sglang"
        concurrency = {levels}
        runs = {runs}
        output_len = 512
        ready_timeout_s = 120
        shutdown_timeout_s = 10
        request_timeout_s = 120
    """)
        + measure
        + "\n"
        + textwrap.dedent("""
        [profiles.eagle3]
        extends = "baseline"
        extra_args = [
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "sim/eagle3-drafter",
            "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "3", "--mem-fraction-static", "0.88",
        ]
    """)
    )


def session(project: Path, *args: str) -> tuple[dict, float]:
    """One pytest session in ``project``: its results JSON and the call time of its tests."""
    out, calls = project / "result.json", project / "calls.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "NIGHTLY_COST_CALLS": str(calls)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--perf-json", str(out),
         "--llm-profile", "baseline,eagle3", *args],
        cwd=project, capture_output=True, text=True, env=env,
    )  # fmt: skip
    if not out.exists():
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return json.loads(out.read_text()), sum(json.loads(calls.read_text()).values())


def project_for(design: str, levels: list[int], runs: int = 3) -> Path:
    project = Path(tempfile.mkdtemp(prefix=f"nightly-{design}-"))
    (project / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    (project / "profiles.toml").write_text(profiles(design, levels, runs=runs))
    (project / "test_perf.py").write_text(SUITE)
    (project / "conftest.py").write_text(CONFTEST)
    return project


def verdicts(data: dict) -> str:
    names = [p["verdict"] for p in data["points"]]
    return ", ".join(f"{names.count(v)} {v}" for v in sorted(set(names)))


def worst(data: dict) -> str:
    ratios = [p["ratio"] for p in data["points"] if p.get("ratio") is not None]
    return f"{min(ratios) - 1:+.1%} … {max(ratios) - 1:+.1%}" if ratios else "-"


def gpu_min(seconds: float) -> float:
    return seconds * SCALE / 60


def old_min(seconds: float) -> str:
    return f"{gpu_min(seconds):.0f}" if seconds else "- (--new-only)"


def old_design(
    projects: list[Path], started: float
) -> tuple[float, float, dict[tuple[str, int], float], dict, dict]:
    """The old design's cost (one whole-wave run per level, scaled) and its verdicts."""
    # Old design, cost: one whole-wave run per level, scaled to 3 (measure) and 10 (record).
    old = project_for("old", LEVELS, runs=1)
    projects.append(old)
    data, _ = session(old, "--perf-update", "--perf-update-runs", "1")
    calls = json.loads((old / "calls.json").read_text())
    old_measure = old_record = 0.0
    whole_wave: dict[tuple[str, int], float] = {}
    for point in data["points"]:
        durations = [run["duration_s"] for run in point["runs"]]
        call = next(
            v
            for k, v in calls.items()
            if k.endswith(f"[{point['profile']}-C{point['concurrency']}]")
        )
        warmup = max(0.0, call - sum(durations))
        run_s = sum(durations) / len(durations)
        old_measure += warmup + 3 * run_s
        old_record += warmup + 10 * run_s
        whole_wave[(point["profile"], point["concurrency"])] = point["values"][0]
    print(f"old design, one run per level: {time.monotonic() - started:.0f} s here", flush=True)

    # Old design, verdicts at C = 1, 10.
    old_v = project_for("old", VERDICT_LEVELS_OLD)
    projects.append(old_v)
    session(old_v, "--perf-update")
    session(old_v, "--perf-update", "--perf-pool")
    old_same, _ = session(old_v)
    (old_v / "profiles.toml").write_text(profiles("old", VERDICT_LEVELS_OLD, 0.7))
    old_slow, _ = session(old_v)
    print(f"old design, verdicts: {time.monotonic() - started:.0f} s here", flush=True)

    return old_measure, old_record, whole_wave, old_same, old_slow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch projects")
    parser.add_argument(
        "--new-only", action="store_true", help="skip the old design (about 13 minutes here)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    projects: list[Path] = []
    old_measure = old_record = 0.0
    whole_wave: dict[tuple[str, int], float] = {}
    old_same: dict = {"points": []}
    old_slow: dict = {"points": []}
    try:
        if not args.new_only:
            old_measure, old_record, whole_wave, old_same, old_slow = old_design(projects, started)

        # New design, in full.
        new = project_for("new", LEVELS)
        projects.append(new)
        _, record_a = session(new, "--perf-update")
        _, record_b = session(new, "--perf-update", "--perf-pool")
        new_same, new_measure = session(new)
        (new / "profiles.toml").write_text(profiles("new", LEVELS, 0.7))
        new_slow, new_slow_s = session(new)
        print(f"new design: {time.monotonic() - started:.0f} s here\n", flush=True)

        rows = [
            ("", "old: whole waves, 3 runs, goldens of 10",
             "new: steady-state windows, runs sized by the golden"),
            ("---", "---", "---"),
            ("GPU-minutes to measure (loads excluded)",
             f"{old_min(old_measure)} (1 run per level measured, x3)",
             f"{gpu_min(new_measure):.1f}"),
            ("GPU-minutes to record goldens",
             f"{old_min(old_record)} (x10; one launch)",
             f"{gpu_min(record_a):.1f} + {gpu_min(record_b):.1f} (two launches, pooled)"),
            ("verdict, unchanged server",
             f"{verdicts(old_same)} (C = 1, 10); Δ {worst(old_same)}",
             f"{verdicts(new_same)}; Δ {worst(new_same)}"),
            ("verdict, 30 % collapse",
             f"{verdicts(old_slow)} (C = 1, 10); Δ {worst(old_slow)}",
             f"{verdicts(new_slow)}; Δ {worst(new_slow)}; {gpu_min(new_slow_s):.1f} GPU-min"),
        ]  # fmt: skip
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print(
            "\n| profile | C | whole-wave tok/s (old, /10) | steady-state tok/s (new, /10) "
            "| steady ÷ whole | new runs used |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for point in new_same["points"]:
            key = (point["profile"], point["concurrency"])
            steady = sum(point["values"]) / len(point["values"])
            wave = whole_wave.get(key)
            print(
                f"| {key[0]} | {key[1]} | {wave / SCALE:,.1f} | {steady / SCALE:,.1f} | "
                f"{steady / wave:.3f} | {len(point['values'])} |"
                if wave
                else f"| {key[0]} | {key[1]} | - | {steady / SCALE:,.1f} | - | {len(point['values'])} |"
            )
        print(f"\n(all of it took {time.monotonic() - started:.0f} s here)")
    finally:
        if not args.keep:
            for project in projects:
                shutil.rmtree(project, ignore_errors=True)
        else:
            print("kept:", *projects)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
