"""Power and false alarms of the history's change detection (pytest_llmperf.history), Monte-Carlo.

A night's value is the log of its runs' mean throughput. The noise models are verdict_power's:
a run's mean has the row's CV, a night has ``RUNS`` runs, and in the "+ launch drift" rows
every night (a new server launch) is offset by N(0, 2 %).

- **Detection.** ``BEFORE`` quiet nights, then the engine drops by 3, 5, 8, 15 or 30 % and stays
  there. After each night from the step on, the drift gate's question is asked
  (``Series.drift()``: a confirmed step or slow drift in the latest nights). Detected: it reports
  a worsening whose first bad night is within one night of the step, by ``MAX_DELAY`` nights
  after it. Reported: the rate, and the mean delay in nights (1 = the first bad night itself).
- **False alarms.** 100 quiet nights: the change points ``detect`` finds over the whole series,
  and the nights on which the drift gate would WARN (an open worsening beyond the 5 % warn
  margin), each per 100 nights.

    python benchmarks/changepoint_power.py --trials 300
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from pytest_llmperf.history.changepoints import detect
from pytest_llmperf.history.series import Night, Series

CVS = (0.005, 0.01, 0.03, 0.05)
STEPS = (0.03, 0.05, 0.08, 0.15, 0.30)
LAUNCH_DRIFT = 0.02
RUNS = 2  # a gated night's first stage when the golden is precise
BEFORE = 20
MAX_DELAY = 10
QUIET = 100
WARN_MARGIN = 0.05


def night_logs(rng: np.random.Generator, n: int, cv: float, launch: float) -> np.ndarray:
    runs = rng.normal(0, cv, size=(n, RUNS)).mean(axis=1)
    return runs + (rng.normal(0, launch, size=n) if launch else 0.0)


def series(logs: np.ndarray) -> Series:
    nights = tuple(
        Night(f"n{i}", float(i), (math.exp(v),), commit=None) for i, v in enumerate(logs)
    )
    return Series("p", "t.py::test[C=1]", "output_tok_s", False, nights)


def detection(rng: np.random.Generator, cv: float, launch: float, step: float, trials: int):
    delays = []
    for _ in range(trials):
        logs = night_logs(rng, BEFORE + MAX_DELAY, cv, launch)
        logs[BEFORE:] += math.log(1 - step)
        for k in range(1, MAX_DELAY + 1):
            drift = series(logs[: BEFORE + k]).drift()
            if drift and drift["worse"] and abs(int(drift["first_bad_run"][1:]) - BEFORE) <= 1:
                delays.append(k)
                break
    rate = len(delays) / trials
    return rate, (sum(delays) / len(delays) if delays else math.nan)


def false_alarms(rng: np.random.Generator, cv: float, launch: float, trials: int):
    change_points = warns = 0
    for _ in range(trials):
        logs = night_logs(rng, QUIET, cv, launch)
        change_points += len(detect(logs, min_magnitude=0.01))
        for k in range(10, QUIET + 1):
            drift = series(logs[:k]).drift()
            if drift and drift["worse"] and abs(drift["change"]) >= WARN_MARGIN:
                warns += 1
    per_100 = 100 / QUIET / trials
    return change_points * per_100, warns * 100 / (QUIET - 9) / trials


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    print(
        f"Detection within {MAX_DELAY} nights of a step after {BEFORE} quiet nights "
        f"({args.trials} trials a cell): rate (mean delay in nights)\n"
    )
    print("| noise | " + " | ".join(f"−{s * 100:g} %" for s in STEPS) + " |")
    print("|---|" + "---:|" * len(STEPS))
    rows = [(cv, 0.0) for cv in CVS] + [(cv, LAUNCH_DRIFT) for cv in CVS]
    for cv, launch in rows:
        cells = []
        for step in STEPS:
            rate, delay = detection(rng, cv, launch, step, args.trials)
            cells.append(f"{rate:.0%} ({delay:.1f})" if rate else "0 %")
        name = f"CV {cv * 100:g} %" + (" + launch drift" if launch else "")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    quiet_series = max(20, args.trials // 5)
    print(f"\nFalse alarms per 100 quiet nights ({quiet_series} series of {QUIET} nights each)\n")
    print("| noise | change points | drift-gate WARNs |")
    print("|---|---:|---:|")
    for cv, launch in rows:
        cps, warns = false_alarms(rng, cv, launch, quiet_series)
        name = f"CV {cv * 100:g} %" + (" + launch drift" if launch else "")
        print(f"| {name} | {cps:.2f} | {warns:.2f} |", flush=True)
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
