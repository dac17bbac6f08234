"""Open-loop clients side by side: the rate each was asked for, the rate the server saw, how
late the sends were, and the TTFT each reported, against one pinned server whose truth is known.

Starts ``pytest_llmperf.sim.paced`` (2 ms per token, 32 tokens, no slot limit: never the
bottleneck) pinned to core 0, then runs each client pinned to core 1, one after the other, each
at the same Poisson rate for the same number of requests. The server logs when each request
arrived and when its first event was written (``GET /stats``): the rate it saw is
(arrivals − 1) ÷ (last − first), and its TTFT is first write − arrival.

Clients: this plugin (``pytest_llmperf.load``: one open-loop run, schedule precomputed, sends on
a timerfd), SGLang's ``bench_serving`` (``--backend sglang``, from the SGLang venv that
``scripts/install-sglang-cpu.sh`` makes) and, where installed, NVIDIA AIPerf. ``vllm bench
serve`` needs vLLM, whose wheels pull a CUDA torch: not installed on these machines.

    python benchmarks/open_loop_peers.py --rate 20 --requests 400 \\
        --sglang-python .sglang/bin/python --aiperf /tmp/aiperf-venv/bin/aiperf
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_llmperf.core.metrics import summarize_run  # noqa: E402
from pytest_llmperf.core.schedule import Arrivals  # noqa: E402
from pytest_llmperf.load.level import OpenPlan  # noqa: E402
from pytest_llmperf.load.workers import measure  # noqa: E402
from pytest_llmperf.load.workload import Workload  # noqa: E402
from pytest_llmperf.sim import paced  # noqa: E402

ITL_MS = 2.0
TOKENS = 32


def pinned(cmd: list[str], core: int | None) -> list[str]:
    return ["taskset", "-c", str(core), *cmd] if core is not None else cmd


def start_server(port: int, core: int | None) -> subprocess.Popen:
    proc = subprocess.Popen(pinned(paced.command(port, ITL_MS), core), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready on …"
    return proc


def server_side(url: str) -> dict:
    stats = sorted(httpx.get(url + "/stats").json())
    arrivals = [a for a, _, _ in stats]
    ttfts = [first - a for a, first, _ in stats]
    span = arrivals[-1] - arrivals[0]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return {
        "requests": len(arrivals),
        "seen_rate": (len(arrivals) - 1) / span if span > 0 else math.nan,
        "gap_cv": statistics.pstdev(gaps) / statistics.mean(gaps) if gaps else math.nan,
        "ttft_p50": statistics.median(ttfts),
    }


def run_ours(url: str, rate: float, n: int, core: int | None) -> dict:
    if core is not None:
        os.sched_setaffinity(0, {core})
    # One run whose lead-in, window and drain hold about n arrivals; the whole run is compared.
    window = n / rate / 2
    plan = OpenPlan(Arrivals(rate), 1, 1, warmup=False, window_s=window, settle_s=0.0)
    (run,) = measure(url, Workload(api="sglang", output_len=TOKENS, salt=1), plan)
    m = summarize_run(run, TOKENS)
    return {
        "lag_p50": m.open_loop["lag_s"]["p50"],
        "lag_p99": m.open_loop["lag_s"]["p99"],
        "ttft_p50": m.open_loop["ttft_from_send_s"]["p50"],
        "problems": list(m.problems),
    }


def run_bench_serving(
    python: str, url: str, rate: float, n: int, core: int | None, tok: str
) -> dict:
    out = Path(tempfile.mkdtemp()) / "out.jsonl"
    cmd = [
        python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", url,
        "--dataset-name", "random-ids", "--random-input-len", "16", "--random-output-len", str(TOKENS),
        "--random-range-ratio", "1", "--num-prompts", str(n), "--request-rate", str(rate),
        "--tokenizer", tok, "--model", tok, "--disable-tqdm", "--output-file", str(out),
        "--warmup-requests", "0", "--seed", "1",
    ]  # fmt: skip
    proc = subprocess.run(pinned(cmd, core), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"bench_serving failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    result = json.loads(out.read_text().splitlines()[-1])
    return {
        "lag_p50": None,
        "lag_p99": None,
        "ttft_p50": result["median_ttft_ms"] / 1e3,
        "problems": [],
    }


def run_aiperf(aiperf: str, url: str, rate: float, n: int, core: int | None, tok: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    cmd = [
        aiperf, "profile", "--model", "bench", "--tokenizer", tok, "--url", url,
        "--endpoint-type", "completions", "--streaming", "--request-rate", str(rate),
        "--request-count", str(n), "--output-tokens-mean", str(TOKENS),
        "--output-tokens-stddev", "0", "--prompt-input-tokens-mean", "16",
        "--prompt-input-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
        "--ui", "none", "--output-artifact-dir", str(out),
    ]  # fmt: skip
    proc = subprocess.run(pinned(cmd, core), capture_output=True, text=True, timeout=600)
    summary = out / "profile_export_aiperf.json"
    if proc.returncode != 0 or not summary.exists():
        raise RuntimeError(f"aiperf failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    data = json.loads(summary.read_text())
    return {
        "lag_p50": None,
        "lag_p99": None,
        "ttft_p50": data["time_to_first_token"]["p50"] / 1e3,
        "problems": [],
    }


def ms(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value * 1e3:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--sglang-python", help="a Python with sglang (its bench_serving)")
    parser.add_argument("--aiperf", help="the aiperf executable (its own virtual environment)")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    server_core, client_core = (None, None) if args.no_pin else (0, 1)
    port = 18777
    url = f"http://127.0.0.1:{port}"
    tok = tempfile.mkdtemp(prefix="tok-")
    clients = ["pytest-llmperf"]
    if args.sglang_python:
        clients.append("sglang bench_serving")
    if args.aiperf:
        clients.append("aiperf")
        subprocess.run([str(Path(args.aiperf).parent / "python"), "-c",
                        f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                        f"from benchmarks.client_ceiling import make_tokenizer; make_tokenizer({tok!r})"],
                       check=True)  # fmt: skip
    elif args.sglang_python:
        tok = str(REPO / ".sglang" / "models" / "tiny-llama")
    server = start_server(port, server_core)
    rows = []
    try:
        for name in clients:
            httpx.get(url + "/stats")  # clear
            started = time.monotonic()
            try:
                if name == "pytest-llmperf":
                    mine = run_ours(url, args.rate, args.requests, client_core)
                elif name == "aiperf":
                    mine = run_aiperf(args.aiperf, url, args.rate, args.requests, client_core, tok)
                else:
                    tokenizer = str(REPO / ".sglang" / "models" / "tiny-llama")
                    mine = run_bench_serving(
                        args.sglang_python, url, args.rate, args.requests, client_core, tokenizer
                    )
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"{name}: {str(exc)[-1200:]}")
                continue
            seen = server_side(url)
            rows.append((name, mine, seen, time.monotonic() - started))
    finally:
        server.kill()
    print(f"Poisson arrivals at {args.rate:g} requests/s, {args.requests} requests of {TOKENS} tokens;"
          f" server: {ITL_MS:g} ms per token (its TTFT is {ITL_MS:g} ms + the write)")  # fmt: skip
    print(f"{'client':22} {'asked /s':>8} {'server saw /s':>13} {'Δ %':>6} {'gap CV':>6} "
          f"{'lag p50/p99 ms':>15} {'TTFT p50 ms (client)':>20} {'TTFT p50 ms (server)':>20}")  # fmt: skip
    for name, mine, seen, _ in rows:
        lag = "-" if mine["lag_p50"] is None else f"{ms(mine['lag_p50'])} / {ms(mine['lag_p99'])}"
        print(f"{name:22} {args.rate:8.2f} {seen['seen_rate']:13.2f} "
              f"{(seen['seen_rate'] / args.rate - 1) * 100:+6.1f} {seen['gap_cv']:6.2f} {lag:>15} "
              f"{ms(mine['ttft_p50']):>20} {ms(seen['ttft_p50']):>20}")  # fmt: skip
        if mine["problems"]:
            print("   problems:", mine["problems"])


if __name__ == "__main__":
    main()
