"""This plugin's figures beside a peer's, against one real llama-server (SmolLM2-135M, CPU).

Starts llama-server as the ``llamacpp-smollm2`` profile does, then at C = 1, 2, 4 measures
output tok/s and TTFT with the plugin's load generator and with NVIDIA AIPerf, alternately,
three rounds each. Both send 64-token completions with ``ignore_eos`` and count the server's
``usage``. AIPerf needs a tokenizer; offline, a local one (see client_ceiling.py --make-tokenizer).

    bash scripts/install-llama-server.sh
    python benchmarks/peer_crosscheck.py --aiperf /opt/aiperf-venv/bin/aiperf --tokenizer /tmp/tok
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from client_ceiling import run_aiperf  # noqa: E402

from pytest_llmperf import metrics  # noqa: E402
from pytest_llmperf.loadgen import LevelPlan, Workload, measure_level  # noqa: E402
from pytest_llmperf.profiles import load_profiles  # noqa: E402
from pytest_llmperf.prompts import default_prompts  # noqa: E402
from pytest_llmperf.server import build_command, free_port, wait_for_health  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aiperf", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    profile = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["llamacpp-smollm2"]
    port = free_port("127.0.0.1")
    server = subprocess.Popen(build_command(profile, "127.0.0.1", port, REPO), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    prompt_tokens = round(statistics.fmean(len(p.split()) for p in default_prompts().prompts) * 1.3)
    try:
        wait_for_health(url)
        print(f"# llama-server SmolLM2-135M Q4_1, -np 4 -t 2, {OUTPUT_LEN} tokens/request, {args.rounds} rounds, "
              f"{os.cpu_count()} cores shared by server and client")
        print("\n| C | plugin tok/s | AIPerf tok/s | Δ | plugin TTFT p50 | AIPerf TTFT p50 | plugin in flight |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for c in (1, 2, 4):
            n = max(8, 4 * c)
            ours, theirs, ttft_ours, ttft_theirs, in_flight = [], [], [], [], []
            for _ in range(args.rounds):
                run = measure_level(url, Workload(api="openai", output_len=OUTPUT_LEN, model="smollm2"),
                                    LevelPlan(c, n, 1))[0]
                m = metrics.summarize_run(run, OUTPUT_LEN)
                ours.append(m.output_tok_s)
                ttft_ours.append(m.ttft_s["p50"])
                in_flight.append(m.in_flight_while_sending)
                r = run_aiperf(args.aiperf, args.tokenizer, url, c, n, OUTPUT_LEN, None, model="smollm2",
                               prompt_tokens=prompt_tokens)
                theirs.append(r["tok_s"])
                ttft_theirs.append(r["ttft_p50"])
            a, b = statistics.fmean(ours), statistics.fmean(theirs)
            print(f"| {c} | {a:,.1f} ± {statistics.stdev(ours):.1f} | {b:,.1f} ± {statistics.stdev(theirs):.1f} | "
                  f"{(a / b - 1) * 100:+.1f} % | {statistics.median(ttft_ours) * 1e3:.1f} ms | "
                  f"{statistics.median(ttft_theirs) * 1e3:.1f} ms | {statistics.fmean(in_flight):.2f} |", flush=True)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


if __name__ == "__main__":
    main()
