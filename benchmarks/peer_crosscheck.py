"""This plugin's figures beside a peer's, against one real server on the CPU: llama-server
(SmolLM2-135M) with NVIDIA AIPerf, or the real SGLang 0.5.23 with SGLang's own
``sglang.bench_serving`` (``--engine sglang``).

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

SGLang: the ``sglang-cpu`` profile's server, pinned to the last core (one OpenMP thread), and
the two clients alternately on the other core, at the same C, output length, request count and
prompt length. ``bench_serving`` is the copy in SGLang's own venv (``--backend sglang``:
streamed ``/generate``, random token ids of the plugin prompts' mean length). The referee is the
server: its ``sglang:generation_tokens_total`` counter (``--enable-metrics``) must grow by exactly
the tokens each client says it received.

    bash scripts/install-sglang-cpu.sh
    python benchmarks/peer_crosscheck.py --engine sglang
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
import httpx
from client_ceiling import run_aiperf

from pytest_llmperf.core import metrics
from pytest_llmperf.load.level import ClosedPlan
from pytest_llmperf.load.prompts import default_prompts
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers.lifecycle import build_command, free_port, wait_for_health

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("llamacpp", "sglang"), default="llamacpp")
    parser.add_argument("--aiperf", help="llamacpp: AIPerf's executable")
    parser.add_argument("--tokenizer", help="llamacpp: a local tokenizer for AIPerf")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="share every core between server and clients (and let AIPerf slow the server)",
    )
    args = parser.parse_args()
    if args.engine == "sglang":
        sglang_crosscheck(args)
        return
    if not (args.aiperf and args.tokenizer):
        parser.error("--engine llamacpp needs --aiperf and --tokenizer")
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
                run = measure(
                    url,
                    Workload(api="openai", output_len=OUTPUT_LEN, model="smollm2"),
                    ClosedPlan(c, n, 1),
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


def generation_tokens(url: str) -> float:
    """The server's own count of generated tokens (Prometheus /metrics): in 0.5.23 the sum of
    its per-request generation-length histogram."""
    total, found = 0.0, False
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("sglang:generation_tokens_histogram_sum"):
            total, found = total + float(line.rsplit(" ", 1)[1]), True
    if not found:
        raise RuntimeError(
            "no sglang:generation_tokens_histogram_sum in /metrics (--enable-metrics?)"
        )
    return total


def run_bench_serving(
    url: str, c: int, n: int, input_len: int, core: int | None, out: Path
) -> dict[str, float]:
    python = REPO / ".sglang" / "bin" / "python"
    command = [
        str(python), "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", url,
        "--model", str(REPO / ".sglang" / "models" / "tiny-llama"),
        "--dataset-name", "random-ids", "--random-input-len", str(input_len),
        "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "1.0",
        "--num-prompts", str(n), "--max-concurrency", str(c), "--disable-tqdm",
        "--warmup-requests", "0", "--output-file", str(out),
    ]  # fmt: skip
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    out.unlink(missing_ok=True)
    subprocess.run(
        command, check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    result = json.loads(out.read_text().splitlines()[-1])
    return {
        "tok_s": result["output_throughput"],
        "ttft_p50": result["median_ttft_ms"] / 1e3,
        "tokens": result["total_output_tokens"],
    }


def sglang_crosscheck(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from pytest_llmperf.servers import lifecycle

    profile = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["sglang-cpu"]
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = cores[-1], cores[0]
    python = str(REPO / ".sglang" / "bin" / "python")
    wrapper = Path(tempfile.mkdtemp(prefix="pinned-")) / "python"
    wrapper.write_text(f'#!/bin/sh\nexec taskset -c {server_core} {python} "$@"\n')
    wrapper.chmod(0o755)
    profile = replace(
        profile,
        python=str(wrapper),
        args=(*profile.args, "--enable-metrics"),
        env={**profile.env, "OMP_NUM_THREADS": "1"},
    )
    os.sched_setaffinity(0, {client_core})
    server = lifecycle.launch(profile, REPO / ".llmperf" / "peer_crosscheck")
    tokenizer_len = _mean_prompt_tokens()
    out = Path(tempfile.mkdtemp(prefix="bench-")) / "bench.jsonl"
    try:
        lifecycle.wait_ready(server)
        url = server.base_url
        print(
            f"# real SGLang 0.5.23 on the CPU (sglang-cpu), {OUTPUT_LEN} tokens/request, prompts of "
            f"{tokenizer_len} tokens, {args.rounds} rounds; server on core {server_core} (1 OpenMP "
            f"thread), clients alternately on core {client_core}"
        )
        print(
            "\n| C | plugin tok/s | bench_serving tok/s | Δ | plugin TTFT p50 | bench_serving TTFT p50 "
            "| server-counted tokens (plugin / bench_serving) |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for c in (1, 2, 4):
            n = max(16, 4 * c)
            ours, theirs, ttft_ours, ttft_theirs, counted = [], [], [], [], []
            for _ in range(args.rounds):
                before = generation_tokens(url)
                run = measure(
                    url,
                    Workload(api="sglang", output_len=OUTPUT_LEN),
                    ClosedPlan(c, n, 1, warmup=False),
                )[0]
                mid = generation_tokens(url)
                m = metrics.summarize_run(run, OUTPUT_LEN)
                ours.append(m.output_tok_s)
                ttft_ours.append(m.ttft_s["p50"])
                r = run_bench_serving(url, c, n, tokenizer_len, client_core, out)
                after = generation_tokens(url)
                theirs.append(r["tok_s"])
                ttft_theirs.append(r["ttft_p50"])
                # bench_serving's warmup requests are counted by the server too.
                counted.append(
                    (mid - before, after - mid - c * OUTPUT_LEN, m.output_tokens, r["tokens"])
                )
            a, b = statistics.fmean(ours), statistics.fmean(theirs)
            server_ours = sum(x[0] for x in counted) / len(counted)
            server_theirs = sum(x[1] for x in counted) / len(counted)
            agree = all(x[0] == x[2] and x[1] == x[3] for x in counted)
            print(
                f"| {c} | {a:,.1f} ± {statistics.stdev(ours):.1f} | {b:,.1f} ± {statistics.stdev(theirs):.1f} | "
                f"{(a / b - 1) * 100:+.1f} % | {statistics.median(ttft_ours) * 1e3:.1f} ms | "
                f"{statistics.median(ttft_theirs) * 1e3:.1f} ms | {server_ours:.0f} / {server_theirs:.0f}"
                f"{' (= the clients)' if agree else ' (differs from a client: ' + repr(counted) + ')'} |",
                flush=True,
            )
    finally:
        lifecycle.stop(server)


def _mean_prompt_tokens() -> int:
    """The plugin prompts' mean length in the tiny model's tokens."""
    python = REPO / ".sglang" / "venv" / "bin" / "python"
    code = (
        "import sys, json; from transformers import AutoTokenizer; "
        f"t = AutoTokenizer.from_pretrained({str(REPO / '.sglang' / 'models' / 'tiny-llama')!r}); "
        "p = json.load(sys.stdin); print(round(sum(len(t(x).input_ids) for x in p) / len(p)))"
    )
    done = subprocess.run(
        [str(python), "-c", code],
        input=json.dumps(list(default_prompts().prompts)),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return int(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
