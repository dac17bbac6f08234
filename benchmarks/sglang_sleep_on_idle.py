"""--sleep-on-idle or not, for the sglang-cpu profile: which leaves the client its core?

An idle SGLang scheduler polls and takes a whole core (about 100 % of one here); with
``--sleep-on-idle`` it sleeps (about 2 %). On a 2-core machine the client shares the cores with
the scheduler and the detokenizer, so the setting could change what the plugin measures. Each
variant is launched ``--launches`` times, alternately, and measured at C = 1 and 4 (3 runs of
16 requests, 128 tokens); the idle scheduler's CPU share is read from /proc between runs.

    bash scripts/install-sglang-cpu.sh
    python benchmarks/sglang_sleep_on_idle.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

import psutil

from pytest_llmperf.core import metrics
from pytest_llmperf.load.level import ClosedPlan
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers import lifecycle

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LEN = 128


def idle_scheduler_cpu(handle: lifecycle.ServerHandle, seconds: float = 3.0) -> float:
    """The scheduler's CPU use while no request is in flight, as a share of one core."""
    assert handle.process is not None
    (scheduler,) = [
        p
        for p in psutil.Process(handle.process.pid).children(recursive=True)
        if p.name().startswith("sglang::schedul")
    ]
    before = sum(scheduler.cpu_times()[:2])
    time.sleep(seconds)
    return (sum(scheduler.cpu_times()[:2]) - before) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=2)
    args = parser.parse_args()
    base = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["sglang-cpu"]
    plain = tuple(a for a in base.args if a != "--sleep-on-idle")
    variants = {"--sleep-on-idle": (*plain, "--sleep-on-idle"), "polling (default)": plain}
    results: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for launch in range(args.launches):
        for name, flags in variants.items():
            handle = lifecycle.launch(
                replace(base, args=flags), REPO / ".llmperf" / "sleep-on-idle"
            )
            try:
                lifecycle.wait_ready(handle)
                time.sleep(2)
                results[name].setdefault("idle CPU", []).append(idle_scheduler_cpu(handle))
                for c in (1, 4):
                    runs = measure(
                        handle.base_url,
                        Workload(api="sglang", output_len=OUTPUT_LEN),
                        ClosedPlan(c, 16, 3),
                    )
                    for run in runs:
                        m = metrics.summarize_run(run, OUTPUT_LEN)
                        results[name].setdefault(f"C={c} tok/s", []).append(m.output_tok_s)
                        results[name].setdefault(f"C={c} TTFT p50 ms", []).append(
                            m.ttft_s["p50"] * 1e3
                        )
            finally:
                lifecycle.stop(handle)
            print(f"launch {launch + 1} {name}: done", flush=True)
    keys = list(next(iter(results.values())))
    print(f"\n| setting | {' | '.join(keys)} |")
    print("|---|" + "---:|" * len(keys))
    for name, values in results.items():
        cells = []
        for k in keys:
            v = values[k]
            spread = f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else ""
            cells.append(
                f"{statistics.fmean(v) * 100:.0f} %"
                if k == "idle CPU"
                else f"{statistics.fmean(v):.1f}{spread}"
            )
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
