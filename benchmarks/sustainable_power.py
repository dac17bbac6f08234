"""How often the open loop's "sustainable" rule is right, against a server of known capacity.

The server is a batching one, simulated exactly: every request in it progresses at
min(per-stream speed, total speed ÷ requests in it) tokens a second (770 tok/s shared by all
streams, 90 tok/s per stream, 60-token requests: at most 12.8 requests/s can be served).
Arrivals are Poisson at a multiple of that capacity; each run has a lead-in (half of it is
left out of the trend, as the plugin does) and a window; the rule is the plugin's own
(pytest_llmperf.core.open_loop_figures.saturation: the backlog's least-squares trend with a
Newey-West error, at least GROWTH_SHARE of the rate and significantly above 0). Prints, per
load and window, how often the run read NOT SUSTAINABLE.

    python benchmarks/sustainable_power.py 200
"""

from __future__ import annotations

import argparse
import random

from pytest_llmperf.core.open_loop_figures import saturation
from pytest_llmperf.core.records import OpenLoopRun, RequestRecord, RunRecords

TOTAL_TOK_S = 770.0
STREAM_TOK_S = 90.0
TOKENS = 60
CAPACITY = TOTAL_TOK_S / TOKENS  # 12.8 requests/s


def processor_sharing(arrivals: list[float], until: float) -> list[float]:
    """Each request's end (0.0: still in the server at ``until``), served as described above."""
    ends = [0.0] * len(arrivals)
    left: dict[int, float] = {}  # request → tokens left
    now, k = 0.0, 0
    while True:
        n = len(left)
        speed = min(STREAM_TOK_S, TOTAL_TOK_S / n) if n else 0.0
        next_arrival = arrivals[k] if k < len(arrivals) else float("inf")
        first_done = min(left.values()) / speed + now if n else float("inf")
        t = min(next_arrival, first_done, until)
        for r in left:
            left[r] -= speed * (t - now)
        now = t
        if now >= until:
            return ends
        if first_done <= next_arrival:
            for r in [r for r, tokens in left.items() if tokens <= 1e-9]:
                ends[r] = now
                del left[r]
        else:
            left[k] = float(TOKENS)
            k += 1


def run(rng: random.Random, load: float, lead_s: float, window_s: float) -> bool:
    """One open-loop run at ``load`` × capacity: whether it read NOT SUSTAINABLE."""
    rate = load * CAPACITY
    until = lead_s + window_s
    arrivals, t = [], 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= until:
            break
        arrivals.append(t)
    ends = processor_sharing(arrivals, until)
    records = [RequestRecord(i, start=a, end=e, arrival=a, released=a, chunk_times=[a])
               for i, (a, e) in enumerate(zip(arrivals, ends))]  # fmt: skip
    info = OpenLoopRun(rate, 0.0, arrivals, lead_s=lead_s)
    runs = RunRecords(0, records, [], 0.1, until, window=(lead_s, until), open_loop=info)
    return saturation(runs) is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trials", type=int, nargs="?", default=200)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"# a server of {CAPACITY:.1f} requests/s ({TOTAL_TOK_S:g} tok/s shared, "
          f"{STREAM_TOK_S:g} per stream, {TOKENS}-token requests), {args.trials} runs a cell")  # fmt: skip
    print("\n| load | lead-in s | window s | read NOT SUSTAINABLE |")
    print("|---:|---:|---:|---:|")
    for window_s in (10.0, 20.0, 30.0):
        lead_s = window_s / 2  # as the plugin's open loop (load/open_loop.py run_parts)
        for load in (0.5, 0.9, 1.1, 1.2, 2.0):
            hits = sum(run(rng, load, lead_s, window_s) for _ in range(args.trials))
            print(f"| {load:.1f}× | {lead_s:g} | {window_s:g} | {100 * hits / args.trials:.1f} % |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
