"""How precisely the open loop offers its rate, seen from the server's side, and how late it sends.

Starts ``pytest_llmperf.sim.paced`` (2 ms per token, 32 tokens, no slot limit: never the
bottleneck) pinned to core 0, and runs one open-loop run per rate from this process's other core
(the load generator's worker processes are not pinned: at 100 requests/s two of them share the
machine with the server). The server logs every arrival; the
run's lead-in and window are whole parts of the schedule, each holding exactly rate × its length
arrivals, so the mean gap the server saw from the run's start to the window's close should be
1/rate. Also: the gaps' coefficient of variation (1 for Poisson), output tok/s in the window
against rate × tokens, and the client's send lag. The pacer's own precision (a timerfd against
the event loop's timer) is measured first, with no requests.

    python benchmarks/open_loop_accuracy.py
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.core.metrics import summarize_run
from pytest_llmperf.core.schedule import Arrivals
from pytest_llmperf.load.level import OpenPlan, run_in_fresh_loop
from pytest_llmperf.load.pacer import Pacer, make_pacer
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.sim import paced

TOKENS = 32
RATES = ((1.0, 1), (6.0, 1), (10.0, 1), (100.0, 2))


async def wake_lags(best: bool, n: int = 200, gap_s: float = 0.0137) -> list[float]:
    loop = asyncio.get_running_loop()
    deadlines = iter([time.perf_counter() + 0.01 + k * gap_s for k in range(n)])
    current = [next(deadlines)]
    lags: list[float] = []
    done = loop.create_future()

    def wake() -> None:
        now = time.perf_counter()
        if now < current[0]:
            pacer.at(current[0])
            return
        lags.append(now - current[0])
        following = next(deadlines, None)
        if following is None:
            done.set_result(None)
            return
        current[0] = following
        pacer.at(following)

    pacer = make_pacer(loop, wake) if best else Pacer(loop, wake)
    pacer.at(current[0])
    await done
    pacer.close()
    return lags


def main() -> None:
    cores = sorted(os.sched_getaffinity(0))
    print("pacer wake lag, 200 deadlines 13.7 ms apart (µs):")
    for best in (True, False):
        for name, run in (("uvloop", run_in_fresh_loop), ("asyncio", asyncio.run)):
            lags = np.array(run(wake_lags(best))) * 1e6
            kind = "timerfd" if best else "loop timer"
            print(f"  {kind:10} on {name:7}: p50 {np.percentile(lags, 50):7.0f}  "
                  f"p99 {np.percentile(lags, 99):7.0f}  max {lags.max():7.0f}")  # fmt: skip
    port = 18811
    cmd = paced.command(port, 2.0)
    if len(cores) >= 2:  # the server on one core; the client's workers wherever they fit
        cmd = ["taskset", "-c", str(cores[0]), *cmd]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    assert server.stdout is not None
    server.stdout.readline()
    url = f"http://127.0.0.1:{port}"
    print(f"\nopen loop against the paced server ({TOKENS} tokens, 2 ms per token):")
    print("  rate/s  workers  arrivals  mean gap error  gap CV  tok/s vs rate×tokens  "
          "lag p50 / p99 / max (ms)")  # fmt: skip
    try:
        for rate, workers in RATES:
            httpx.get(url + "/stats")
            plan = OpenPlan(Arrivals(rate), 16, 1, window_s=2.0, settle_s=0.3)
            (run,) = measure(url, Workload(api="sglang", output_len=TOKENS, salt=5), plan,
                             workers=workers)  # fmt: skip
            stats = httpx.get(url + "/stats").json()
            start, close = run.open_loop.start, run.window[1]
            seen = sorted(a for a, _, _ in stats if start <= a < close)
            gaps = np.diff(seen)
            m = summarize_run(run, TOKENS)
            lag = m.open_loop["lag_s"]
            print(f"  {rate:6g}  {workers:7d}  {len(seen):8d}  "
                  f"{((close - start) / len(seen) * rate - 1) * 100:+13.2f} %  "
                  f"{np.std(gaps) / np.mean(gaps):6.2f}  "
                  f"{(m.output_tok_s / (rate * TOKENS) - 1) * 100:+19.1f} %  "
                  f"{lag['p50'] * 1e3:.2f} / {lag['p99'] * 1e3:.2f} / {lag['max'] * 1e3:.2f}"
                  + (f"  problems: {m.problems}" if m.problems else ""))  # fmt: skip
    finally:
        server.kill()


if __name__ == "__main__":
    main()
