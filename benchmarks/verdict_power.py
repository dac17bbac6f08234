"""Operating characteristics of the implemented verdict (pytest_llmperf.core.verdict), two ways.

1. Monte-Carlo (default), with the plugin's own sizing rules: a golden is recorded on one server
   launch with RECORD_MIN_RUNS runs topped up one at a time to RECORD_MAX_RUNS until
   ``golden_is_precise`` (``--perf-update-runs auto``), then pooled with a second launch's
   MIN_STAGE runs, topped up while the pooled golden is not precise (``--perf-pool``); a
   candidate starts with ``first_stage`` runs (2 when the golden says two decide, else 3),
   extended 3 → 6 → 10 while UNCERTAIN, exactly as ``LLMPerf.check`` does.

   The noise model, per run of a steady-state window of W = 15 one-second slices:
   - within a run, the slices' log tok/s follow an AR(1) process with lag-1 correlation 0.9
     (throughput drifts smoothly, so a 15 s window holds about 1.6 effective samples, not 15);
     its stationary sd is set so that one run's mean has the CV of the row;
   - between runs of one launch, the run means are themselves AR(1) with correlation 0.5 (a
     server warms, fills its cache, throttles: consecutive runs are not independent);
   - every launch is offset by N(0, 2 %) (the "+ launch drift" rows), the candidate's included.
   Reports FAIL / WARN / inconclusive rates, mean candidate runs and golden runs, and the
   false-FAIL probability of a 16-point night (1 − (1 − p)^16).

2. ``--launches NIGHTS`` (run by default): launches as replicates. A profile of 4 points is
   recorded as a default recording does: ``record_launches`` launches by the profile's
   launch_cv (2 up to 5 %, 4 up to 8 %, 6 above; ``--record-launches`` to fix it), 5 runs each,
   runs 4 % apart, the file's points sharing each launch's offset N(0, launch sd). The verdict
   gets the golden's launch spread counted once a launch (or, "with a history", the robust
   spread of 20 stored nights), pooled with the profile's launch_cv. Each night is one fresh
   launch, each point's first stage of runs, more while UNCERTAIN, then the points left
   CONFIRMING measured again on fresh launches up to confirm_launches, judged over tonight's
   launches. Per launch spread of 2, 5, 10 and 20 %, launch_cv set right and 3× too low, with
   and without history, with 1 and 3 confirmation launches, a 30 % collapse and an unchanged
   server: FAIL per 1,000 point-nights, nights with a FAIL, WARN and PASS shares, and the
   confirmation launches a night makes (the cost of quiet).

3. ``--e2e K``: the plugin end to end on the simulated engine, in a scratch directory: record
   goldens (2 launches, pooled) for sim-baseline and sim-eagle3 at C = 1, 10, 30 over
   steady-state windows; run the suite K times unchanged (each run is its own pytest process and
   server launch) and count false FAILs; then once with the engine 30 % slower (a hidden fault
   knob) and check that every point FAILs.

    python benchmarks/verdict_power.py --trials 5000
    python benchmarks/verdict_power.py --trials 0 --launches 2000
    python benchmarks/verdict_power.py --trials 0 --launches 0 --e2e 20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.staging import (
    MIN_STAGE,
    RECORD_MAX_RUNS,
    RECORD_MIN_RUNS,
    STAGES,
    first_stage,
    golden_is_precise,
    launches_to_record,
)
from pytest_llmperf.core.verdict import (
    LaunchSpread,
    decide,
    pooled_launch_spread,
    with_prior,
)

CVS = (0.005, 0.01, 0.03, 0.05)
DROPS = (0.0, 0.03, 0.10, 0.15, 0.20, 0.30)
LAUNCH_DRIFT = 0.02
MARGINS = {"fail_margin": 0.15, "warn_margin": 0.05}
PROFILE_RUNS = 3
WINDOW_SLICES = 15  # a 15 s window, in 1 s slices
RHO_SLICES = 0.9  # lag-1 correlation of 1 s slices within a run
RHO_RUNS = 0.5  # lag-1 correlation of consecutive runs' means within a launch


def _ar1(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    """n steps of a stationary AR(1) series with lag-1 correlation rho and marginal sd."""
    from scipy.signal import lfilter

    shocks = rng.normal(0.0, sd * math.sqrt(1 - rho * rho), n)
    shocks[0] = rng.normal(0.0, sd)  # start in the stationary distribution
    return lfilter([1.0], [1.0, -rho], shocks)


def _mean_sd_factor(n: int, rho: float) -> float:
    """sd of the mean of n AR(1) values with unit marginal sd."""
    k = np.arange(1, n)
    var = (n + 2 * np.sum((n - k) * rho**k)) / n**2
    return float(math.sqrt(var))


class Launch:
    """One server launch: its offset, and its runs' log tok/s drawn one at a time."""

    def __init__(self, rng: np.random.Generator, level: float, cv: float, drift: float) -> None:
        self.rng, self.cv = rng, cv
        self.offset = math.log(level) + (rng.normal(0.0, drift) if drift else 0.0)
        # Split the run CV between the slow run-to-run component and the window's own noise.
        self.slow_sd = cv / math.sqrt(2)
        self.slice_sd = cv / math.sqrt(2) / _mean_sd_factor(WINDOW_SLICES, RHO_SLICES)
        self.slow = rng.normal(0.0, self.slow_sd)

    def run(self) -> float:
        self.slow = RHO_RUNS * self.slow + self.rng.normal(
            0.0, self.slow_sd * math.sqrt(1 - RHO_RUNS**2)
        )
        window = _ar1(self.rng, WINDOW_SLICES, RHO_SLICES, self.slice_sd)
        return float(np.mean(np.exp(self.offset + self.slow + window)))


def record(rng: np.random.Generator, cv: float, drift: float) -> list[float]:
    """A golden as --perf-update records it (launch 1: 5 runs, more until precise), then pooled
    with a second launch (--perf-pool: 2 runs, more until the pooled golden is precise)."""
    gold: list[float] = []
    for first in (RECORD_MIN_RUNS, MIN_STAGE):
        launch = Launch(rng, 100.0, cv, drift)
        runs = [launch.run() for _ in range(first)]
        while len(runs) < RECORD_MAX_RUNS and not golden_is_precise(
            [*gold, *runs], MARGINS["fail_margin"]
        ):
            runs.append(launch.run())
        gold += runs
    return gold


def one_point(
    rng: np.random.Generator, cv: float, drop: float, drift: float
) -> tuple[str, bool, int, int, float]:
    """One point's verdict, candidate runs, golden runs and final log ratio."""
    gold = record(rng, cv, drift)
    launch = Launch(rng, 100.0 * (1.0 - drop), cv, drift)
    new = [launch.run() for _ in range(first_stage(gold, MARGINS["fail_margin"], PROFILE_RUNS))]
    while True:
        last = len(new) >= STAGES[-1]
        v = decide(new, gold, **MARGINS, last_stage=last)
        if v.name != "UNCERTAIN":
            return v.name, v.inconclusive, len(new), len(gold), math.log(v.ratio)
        target = next(n for n in STAGES if n > len(new))
        new += [launch.run() for _ in range(target - len(new))]


def monte_carlo(trials: int, null_trials: int, seed: int) -> None:
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    print(
        f"# Monte-Carlo, {trials} trials per cell ({null_trials} for drop 0 %); cells: FAIL % · "
        "WARN % · inconclusive % · mean candidate runs"
    )
    print(
        f"# noise: {WINDOW_SLICES} s windows of 1 s slices, AR(1) rho {RHO_SLICES} within a run, "
        f"rho {RHO_RUNS} between runs of a launch; launch drift N(0, {LAUNCH_DRIFT:.0%})"
    )
    print(
        "# false FAIL per 16-point night: counted, and (tail) from a normal fit to the unchanged "
        "server's log ratios, P(ratio <= 1 - fail_margin), which every FAIL needs"
    )
    print(
        "\n| noise | run CV | golden runs | "
        + " | ".join(f"drop {d:.0%}" for d in DROPS)
        + " | false FAIL per 16-point night: counted · tail |"
    )
    print("|---|---|---|" + "---|" * len(DROPS) + "---|")
    floor = math.log(1 - MARGINS["fail_margin"])
    for label, drift in (
        ("autocorrelated", 0.0),
        (f"autocorrelated + {LAUNCH_DRIFT:.0%} launch drift", LAUNCH_DRIFT),
    ):
        for cv in CVS:
            cells, null_fail, gold_runs, tail = [], 0.0, [], 0.0
            for drop in DROPS:
                n_trials = null_trials if drop == 0.0 else trials
                counts = {"FAIL": 0, "WARN": 0, "inconclusive": 0}
                runs = 0
                logs = []
                for _ in range(n_trials):
                    name, inconclusive, n, n0, log_ratio = one_point(rng, cv, drop, drift)
                    runs += n
                    gold_runs.append(n0)
                    logs.append(log_ratio)
                    if inconclusive:
                        counts["inconclusive"] += 1
                    elif name in counts:
                        counts[name] += 1
                rate = {k: 100.0 * v / n_trials for k, v in counts.items()}
                if drop == 0.0:
                    null_fail = counts["FAIL"] / n_trials
                    tail = float(norm.cdf(floor, loc=np.mean(logs), scale=np.std(logs)))
                cells.append(
                    f"{rate['FAIL']:.2f} · {rate['WARN']:.1f} · {rate['inconclusive']:.1f} · "
                    f"{runs / n_trials:.2f}"
                )
            night = 1 - (1 - null_fail) ** 16
            bound = f" (< {1 - (1 - 1 / null_trials) ** 16:.2%})" if null_fail == 0 else ""
            tail_night = 1 - (1 - tail) ** 16
            print(
                f"| {label} | {cv:.1%} | {np.mean(gold_runs):.1f} | "
                + " | ".join(cells)
                + f" | {night:.2%}{bound} · {tail_night:.1e} |",
                flush=True,
            )


LAUNCH_SDS = (0.02, 0.05, 0.10, 0.20)
POINTS = 4  # a profile's levels: they share their launches
RECORD_LAUNCHES: int | None = None  # None: a default recording (by the launch_cv)
RECORD_RUNS = 5
RUN_SD = 0.04  # runs 4 % apart within a launch
HISTORY_NIGHTS = 20
COLLAPSE = 0.30


class Server:
    """A simulated server: one offset a launch, shared by every point it measures, and each
    run of a point 4 % about it."""

    def __init__(self, rng: np.random.Generator, launch_sd: float, drop: float = 0.0) -> None:
        self.rng, self.launch_sd, self.level = rng, launch_sd, math.log(100.0 * (1.0 - drop))
        self.offset = 0.0

    def launch(self) -> None:
        self.offset = float(self.rng.normal(0.0, self.launch_sd))

    def runs(self, n: int) -> list[float]:
        return list(np.exp(self.level + self.offset + self.rng.normal(0.0, RUN_SD, n)))


def recorded(
    rng: np.random.Generator, launch_sd: float, launches: int
) -> tuple[list[list[float]], list[list[str]]]:
    """Each point's golden runs and their launches: ``launches`` launches of RECORD_RUNS."""
    server = Server(rng, launch_sd)
    values: list[list[float]] = [[] for _ in range(POINTS)]
    ids: list[list[str]] = [[] for _ in range(POINTS)]
    for k in range(launches):
        server.launch()
        for p in range(POINTS):
            values[p] += server.runs(RECORD_RUNS)
            ids[p] += [f"g{k}"] * RECORD_RUNS
    return values, ids


def golden_spread(
    values: list[list[float]], ids: list[list[str]], launches: int
) -> LaunchSpread | None:
    """The golden file's launch spread, as GoldenFile.launch_spread pools it: over its points,
    counted once a launch."""
    groups = [
        [[math.log(v) for v, i in zip(vals, lids) if i == f"g{k}"] for k in range(launches)]
        for vals, lids in zip(values, ids)
    ]
    return pooled_launch_spread(groups, "the golden's launches", launches=launches)


def golden_launches(launch_cv: float) -> int:
    """The golden's launches: --record-launches, else a default recording's for the profile's
    launch_cv (core/staging.py launches_to_record)."""
    return RECORD_LAUNCHES if RECORD_LAUNCHES is not None else launches_to_record(launch_cv)


def stored_nights(rng: np.random.Generator, launch_sd: float, n: int) -> list[list[list[float]]]:
    """``n`` earlier nights of the unchanged server: per night, each point's first-stage runs."""
    server = Server(rng, launch_sd)
    nights = []
    for _ in range(n):
        server.launch()
        nights.append([server.runs(MIN_STAGE) for _ in range(POINTS)])
    return nights


def night(
    rng: np.random.Generator,
    launch_sd: float,
    drop: float,
    launch_cv: float,
    budget: int,
    history: int = 0,
) -> tuple[list[str], int]:
    """The first night after a default recording (with ``history`` stored nights before it):
    each point's final verdict, and the confirmation launches the night made. As the plugin
    runs it: each point's first stage on tonight's launch, more runs while UNCERTAIN, then the
    points left CONFIRMING measured again on a fresh launch, up to ``budget`` of them."""
    recorded_launches = golden_launches(launch_cv)
    values, ids = recorded(rng, launch_sd, recorded_launches)
    reference = [list(v) for v in values]
    reference_ids = [list(i) for i in ids]
    measured = golden_spread(values, ids, recorded_launches)
    if history:
        nights = stored_nights(rng, launch_sd, history)
        for k, points in enumerate(nights):
            for p in range(POINTS):
                reference[p] += points[p]
                reference_ids[p] += [f"night{k}"] * len(points[p])
        measured = night_spread([[math.log(v) for v in n[0]] for n in nights])
    spread = with_prior(measured, launch_cv)
    server = Server(rng, launch_sd, drop)
    tonight: list[list[float]] = [[] for _ in range(POINTS)]
    tonight_ids: list[list[str]] = [[] for _ in range(POINTS)]
    verdicts: dict[int, str] = {}
    pending, launches = list(range(POINTS)), 0
    while pending:
        server.launch()
        launches += 1
        still = []
        for p in pending:
            first = first_stage(reference[p], MARGINS["fail_margin"], PROFILE_RUNS)
            here = server.runs(first)
            while True:
                v = decide(
                    [*tonight[p], *here], reference[p], **MARGINS,
                    last_stage=len(here) >= STAGES[-1], launches=reference_ids[p],
                    new_launches=[*tonight_ids[p], *[f"t{launches}"] * len(here)],
                    spread=spread, can_confirm=launches <= budget,
                )  # fmt: skip
                if v.outcome is not Outcome.UNCERTAIN:
                    break
                here += server.runs(next(n for n in STAGES if n > len(here)) - len(here))
            tonight[p] += here
            tonight_ids[p] += [f"t{launches}"] * len(here)
            if v.outcome is Outcome.CONFIRMING:
                still.append(p)
            else:
                verdicts[p] = v.outcome.value
        pending = still
    return [verdicts[p] for p in range(POINTS)], launches - 1


def night_spread(night_logs: list[list[float]]) -> LaunchSpread | None:
    """The history's launch spread as the plugin reads it (history/gate.py)."""
    from pytest_llmperf.core.verdict import robust_launch_spread

    return robust_launch_spread([statistics.fmean(n) for n in night_logs], "the history's nights")


def cell(
    rng: np.random.Generator, nights: int, launch_sd: float, drop: float, launch_cv: float,
    budget: int, history: int,
) -> dict[str, float]:  # fmt: skip
    """One cell's rates over ``nights`` simulated nights."""
    per_point: dict[str, int] = {}
    any_fail = any_pass = confirmations = 0
    for _ in range(nights):
        verdicts, used = night(rng, launch_sd, drop, launch_cv, budget, history)
        for v in verdicts:
            per_point[v] = per_point.get(v, 0) + 1
        any_fail += "FAIL" in verdicts
        any_pass += "PASS" in verdicts
        confirmations += used
    points = nights * POINTS
    return {
        "fail_per_1000": 1000 * per_point.get("FAIL", 0) / points,
        "fail_point": 100 * per_point.get("FAIL", 0) / points,
        "warn_point": 100 * per_point.get("WARN", 0) / points,
        "pass_point": 100 * (per_point.get("PASS", 0) + per_point.get("IMPROVED", 0)) / points,
        "nights_fail": 100 * any_fail / nights,
        "nights_pass": 100 * any_pass / nights,
        "confirmations": confirmations / nights,
    }


def launches_table(
    nights: int,
    seed: int,
    robust: float | None = None,
    spreads: tuple[float, ...] = LAUNCH_SDS,
    budgets: tuple[int, ...] = (1, 3),
    histories: tuple[int, ...] = (0, HISTORY_NIGHTS),
) -> None:
    """Every cell of the verdict's power with launches as replicates: a collapse of 30 % and an
    unchanged server, for launch spreads of 2, 5, 10 and 20 % with the profile's launch_cv set
    to the spread and three times too low, on the first night after a default recording and
    with 20 stored nights, with one and with three confirmation launches."""
    rng = np.random.default_rng(seed)
    if robust is not None:  # what a FAIL on one launch must survive before it stands
        import pytest_llmperf.core.verdict as verdict

        verdict.ROBUST_LAUNCH_SD = robust
    print(
        f"\n# Launches as replicates: {POINTS} points sharing each launch's offset, recorded over "
        f"{RECORD_LAUNCHES or 'the default number of'} launches (core/staging.py: by the "
        f"launch_cv, the golden column) x {RECORD_RUNS} runs (runs {RUN_SD:.0%} apart), then one "
        f"night: each point's first stage on a fresh launch, more runs while UNCERTAIN, the "
        f"points left CONFIRMING measured again on a fresh launch up to confirm_launches; "
        f"{nights} nights per cell ({nights * POINTS} point-nights)"
    )
    print(
        "\n| launch sd | launch_cv | golden launches | history | confirm_launches | drop | FAIL % of points "
        "| FAIL per 1,000 point-nights | nights with a FAIL % | WARN % | PASS % of points "
        "| nights with a PASS % | confirmation launches a night |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for launch_sd in spreads:
        for launch_cv in (launch_sd, launch_sd / 3):
            for history in histories:
                for budget in budgets:
                    for drop in (0.0, COLLAPSE):
                        c = cell(rng, nights, launch_sd, drop, launch_cv, budget, history)
                        print(
                            f"| {launch_sd:.0%} | {launch_cv:.3g} | {golden_launches(launch_cv)} | "
                            f"{f'{history} nights' if history else 'none'} | {budget} | "
                            f"{drop:.0%} | {c['fail_point']:.1f} | {c['fail_per_1000']:.2f} | "
                            f"{c['nights_fail']:.2f} | {c['warn_point']:.1f} | "
                            f"{c['pass_point']:.2f} | {c['nights_pass']:.2f} | "
                            f"{c['confirmations']:.2f} |",
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
        window_s = 1.0
        settle_s = 0.3
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
        pytest_run(project, "--perf-update")
        pytest_run(project, "--perf-update", "--perf-pool")
        print(
            f"\n# End to end on the simulated engine: goldens recorded (2 launches, pooled) in "
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
    global RECORD_LAUNCHES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trials", type=int, default=5000, help="Monte-Carlo trials per cell (0 to skip)"
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--null-trials", type=int, default=0, help="trials of the unchanged server (4x --trials)"
    )
    parser.add_argument(
        "--launches", type=int, default=1000, metavar="NIGHTS", help="nights per launch cell"
    )
    parser.add_argument(
        "--robust",
        type=float,
        default=None,
        help="a FAIL on one launch stands only were launches this many times as far apart "
        "(default: the plugin's ROBUST_LAUNCH_SD)",
    )
    parser.add_argument(
        "--e2e", type=int, default=0, metavar="K", help="unchanged end-to-end suite runs"
    )
    parser.add_argument(
        "--record-launches",
        type=int,
        default=None,
        help="the golden's launches (default: a default recording's, by the launch_cv)",
    )
    parser.add_argument("--spreads", type=float, nargs="+", default=LAUNCH_SDS)
    parser.add_argument("--confirm", type=int, nargs="+", default=(1, 3), metavar="LAUNCHES")
    parser.add_argument("--history", type=int, nargs="+", default=(0, HISTORY_NIGHTS))
    args = parser.parse_args()
    RECORD_LAUNCHES = args.record_launches
    if args.trials:
        monte_carlo(args.trials, args.null_trials or 4 * args.trials, args.seed)
    if args.launches:
        launches_table(
            args.launches, args.seed, args.robust, tuple(args.spreads), tuple(args.confirm),
            tuple(args.history),
        )  # fmt: skip
    if args.e2e:
        end_to_end(args.e2e)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
