"""Does a faster-to-build llama-server serve as fast? Two binaries, alternately, one run here.

scripts/install-llama-server.sh builds the server, its HTTP/JSON layers and the model code at
-O1 with unity builds and keeps ggml's kernels at -O3 (CI time: see issue 6). This measures the
price at run time: each round starts one binary as the ``llamacpp-smollm2`` profile does,
measures output tok/s at C = 1 and 4 with the plugin's load generator, stops it, then the
other; the order alternates (ABBA…) so a drift of the machine falls on both. Only the ratio
within this run means anything.

    python benchmarks/llama_build_flags.py OLD_BINARY NEW_BINARY [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from pytest_llmperf.core import metrics
from pytest_llmperf.load.level import ClosedPlan
from pytest_llmperf.load.workers import measure as measure_level
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers.lifecycle import build_command, free_port, wait_for_health

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LEN = 64
LEVELS = (1, 4)


def measure(binary: str, profile) -> dict[int, float]:
    port = free_port("127.0.0.1")
    command = build_command(profile, "127.0.0.1", port, REPO)
    command[0] = binary
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url)
        workload = Workload(api="openai", output_len=OUTPUT_LEN, model="smollm2")
        measure_level(
            url, workload, ClosedPlan(1, 2, 1)
        )  # warm-up: first requests fault the weights in
        out = {}
        for c in LEVELS:
            run = measure_level(url, workload, ClosedPlan(c, max(8, 4 * c), 1))[0]
            out[c] = metrics.summarize_run(run, OUTPUT_LEN).output_tok_s
        return out
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="reference binary (e.g. a plain -O3 build)")
    parser.add_argument("b", help="binary under test")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    profile = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["llamacpp-smollm2"]
    results: dict[str, dict[int, list[float]]] = {k: {c: [] for c in LEVELS} for k in "ab"}
    for i in range(args.rounds):
        for key in "ab" if i % 2 == 0 else "ba":
            for c, tok_s in measure(getattr(args, key), profile).items():
                results[key][c].append(tok_s)
        print(f"round {i + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"A = {args.a}\nB = {args.b}\n{args.rounds} rounds, {OUTPUT_LEN} tokens/request\n")
    print("| C | A tok/s | B tok/s | B/A |")
    print("|---:|---:|---:|---:|")
    for c in LEVELS:
        a, b = results["a"][c], results["b"][c]
        print(
            f"| {c} | {statistics.fmean(a):.1f} ± {statistics.stdev(a):.1f} | "
            f"{statistics.fmean(b):.1f} ± {statistics.stdev(b):.1f} | {statistics.fmean(b) / statistics.fmean(a):.3f} |"
        )


if __name__ == "__main__":
    main()
