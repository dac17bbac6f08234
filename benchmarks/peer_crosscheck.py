"""This plugin's figures beside a peer's, against one real llama-server (SmolLM2-135M, CPU).

Starts llama-server as the ``llamacpp-smollm2`` profile does, then at C = 1, 2, 4 measures
output tok/s and TTFT with the plugin's load generator and with NVIDIA AIPerf, alternately,
three rounds each. Both send 64-token completions with ``ignore_eos`` and count the server's
``usage``. AIPerf needs a tokenizer; offline, a local one (see client_ceiling.py --make-tokenizer).

Isolation: on a 2-core machine AIPerf's half-dozen service processes take CPU from llama.cpp's
spin-waiting threads and slow the server itself (measured: 40-58 ms per token in the server's
own log during an AIPerf run, against 12-14 ms otherwise), so each client would measure a
different server. By default the server therefore runs with one thread pinned to the last core
and both clients are pinned to the others (``--no-isolate`` shares every core).

    bash scripts/install-llama-server.sh
    python benchmarks/peer_crosscheck.py --aiperf /opt/aiperf-venv/bin/aiperf --tokenizer /tmp/tok
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from client_ceiling import run_aiperf

from pytest_llmperf.core import metrics
from pytest_llmperf.engines.lifecycle import build_command, free_port, wait_for_health
from pytest_llmperf.load.loadgen import LevelPlan, measure_level
from pytest_llmperf.load.prompts import default_prompts
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.profiles import load_profiles

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aiperf", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="share every core between server and clients (and let AIPerf slow the server)",
    )
    args = parser.parse_args()
    profile = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["llamacpp-smollm2"]
    port = free_port("127.0.0.1")
    command = build_command(profile, "127.0.0.1", port, REPO)
    client_core = None
    if args.isolate:
        cores = sorted(os.sched_getaffinity(0))
        server_core, client_cores = cores[-1], set(cores[:-1]) or {cores[-1]}
        command[command.index("-t") + 1] = "1"
        command = ["taskset", "-c", str(server_core), *command]
        os.sched_setaffinity(0, client_cores)
        client_core = min(client_cores)
    log = (
        open(REPO / ".llmperf" / "peer_crosscheck_server.log", "w")
        if (REPO / ".llmperf").is_dir()
        else subprocess.DEVNULL
    )
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    # Both clients send the plugin's prompt set, in the same order: same prefill work, same
    # (llama.cpp prompt-cache) hits; AIPerf's synthetic prompts would differ in both.
    prompts_file = Path(tempfile.mkdtemp(prefix="peer-")) / "prompts.jsonl"
    prompts_file.write_text(
        "".join(json.dumps({"text": p}) + "\n" for p in default_prompts().prompts)
    )
    try:
        wait_for_health(url)
        where = (
            f"server: 1 thread on core {server_core}; clients on core(s) {sorted(client_cores)}"
            if args.isolate
            else f"{os.cpu_count()} cores shared by server (-t 2) and clients"
        )
        print(
            f"# llama-server SmolLM2-135M Q4_1, -np 4, {OUTPUT_LEN} tokens/request, {args.rounds} rounds; {where}"
        )
        print(
            "\n| C | plugin tok/s | AIPerf tok/s | Δ | plugin TTFT p50 | AIPerf TTFT p50 | plugin in flight |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for c in (1, 2, 4):
            n = max(8, 4 * c)
            ours, theirs, ttft_ours, ttft_theirs, in_flight = [], [], [], [], []
            for _ in range(args.rounds):
                run = measure_level(
                    url,
                    Workload(api="openai", output_len=OUTPUT_LEN, model="smollm2"),
                    LevelPlan(c, n, 1),
                )[0]
                m = metrics.summarize_run(run, OUTPUT_LEN)
                ours.append(m.output_tok_s)
                ttft_ours.append(m.ttft_s["p50"])
                in_flight.append(m.in_flight_while_sending)
                r = run_aiperf(
                    args.aiperf,
                    args.tokenizer,
                    url,
                    c,
                    n,
                    OUTPUT_LEN,
                    client_core,
                    model="smollm2",
                    prompts_file=prompts_file,
                )
                theirs.append(r["tok_s"])
                ttft_theirs.append(r["ttft_p50"])
            a, b = statistics.fmean(ours), statistics.fmean(theirs)
            print(
                f"| {c} | {a:,.1f} ± {statistics.stdev(ours):.1f} | {b:,.1f} ± {statistics.stdev(theirs):.1f} | "
                f"{(a / b - 1) * 100:+.1f} % | {statistics.median(ttft_ours) * 1e3:.1f} ms | "
                f"{statistics.median(ttft_theirs) * 1e3:.1f} ms | {statistics.fmean(in_flight):.2f} |",
                flush=True,
            )
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


if __name__ == "__main__":
    main()
