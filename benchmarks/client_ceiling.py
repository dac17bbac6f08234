"""How fast can a client consume LLM token streams, with all C requests truly in flight?

Starts ``pytest_llmperf.sim.paced`` (a streaming server that is never the bottleneck: each
response is pre-built and leaves in one write) pinned to core 0, then runs each client pinned
to core 1, one after the other, in the same run:

- zero-delay: the server sends every stream at once, so the client alone sets the pace;
  tok/s is the client's ceiling on one core. Once with one HTTP chunk per SSE event (what
  uvicorn-based servers such as SGLang send), once with one HTTP chunk per stream (less HTTP
  framing to parse, closer to what simple benchmark servers send).
- paced: one token every 20 ms per stream; the server's own timestamps (when each request
  arrived, when its first and last events were written) are the truth the clients' TTFT and
  ITL are compared with.

Clients: this plugin's load generator (httpx API over the aiohttp transport, on uvloop; also
on asyncio's default loop and on httpx's own httpcore/h11 transport, which is why the default
is what it is), a plain aiohttp client that reads a stream as SGLang's bench_serving does
(``plain``: on asyncio's loop, as bench_serving runs; ``plainuv``: on uvloop) and, where
installed, NVIDIA AIPerf. AIPerf needs a tokenizer; offline, give it
a local one (``--tokenizer DIR``; ``--make-tokenizer DIR`` writes a tiny word-level one).

    python -m venv /opt/aiperf-venv && /opt/aiperf-venv/bin/pip install aiperf==0.13.0
    python benchmarks/client_ceiling.py --aiperf /opt/aiperf-venv/bin/aiperf --make-tokenizer /tmp/tok
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import psutil

from pytest_llmperf.core import metrics
from pytest_llmperf.load.closed_loop import ClosedLevel
from pytest_llmperf.load.level import ClosedPlan, measure_level_async
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.servers.lifecycle import free_port
from pytest_llmperf.sim import paced

PACED_ITL_MS = 20.0


# ----- our client, run in a child process pinned to the client core ------------------------


def run_ours(args: argparse.Namespace) -> None:
    workload = Workload(api=args.api, output_len=args.tokens, model="bench")
    plan = ClosedPlan(args.concurrency, args.requests, 1, warmup=True)
    transport = "httpx" if args.variant == "httpx" else "aiohttp"
    if args.variant == "asyncio":
        level = ClosedLevel(plan, workload)
        runs = asyncio.run(measure_level_async(args.url, level, transport=transport))
    else:
        runs = measure(args.url, workload, plan, transport=transport)
    m = metrics.summarize_run(runs[0], args.tokens)
    print(
        json.dumps(
            {
                "tok_s": m.output_tok_s,
                "in_flight": m.in_flight_while_sending,
                "client_cpu": m.client_cpu_fraction,
                "ttft_p50": m.ttft_s["p50"],
                "itl_p50": m.itl_s["p50"],
                "itl_p99": m.itl_s["p99"],
                "failed": m.failed_requests,
                "duration": m.duration_s,
                "problems": list(m.problems),
            }
        )
    )


# ----- a plain aiohttp client, as SGLang's bench_serving reads a stream -----------------------


def run_plain_aiohttp(args: argparse.Namespace) -> None:
    """The baseline the issue measures against: one aiohttp session, ``async for line in
    response.content`` and ``json.loads`` per ``data:`` line (bench_serving's loop), C workers in
    a closed loop, a timestamp per token-carrying line. No checks, no per-chunk bookkeeping."""
    import time as time_module

    import aiohttp
    import uvloop

    path = "/generate" if args.api == "sglang" else "/v1/completions"
    if args.api == "sglang":
        body = {"text": "hello", "stream": True,
                "sampling_params": {"max_new_tokens": args.tokens, "ignore_eos": True}}  # fmt: skip
    else:
        body = {"model": "bench", "prompt": "hello", "stream": True, "max_tokens": args.tokens,
                "ignore_eos": True}  # fmt: skip
    records: list[tuple[float, float, list[float]]] = []

    async def main() -> float:
        timeout = aiohttp.ClientTimeout(total=None)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector,
                                         read_bufsize=10 * 1024**2) as session:  # fmt: skip
            left = [args.requests]

            async def worker() -> None:
                while left[0] > 0:
                    left[0] -= 1
                    start = time_module.perf_counter()
                    times: list[float] = []
                    async with session.post(args.url + path, json=body) as response:
                        async for line in response.content:
                            line = line.strip()
                            if not line.startswith(b"data:"):
                                continue
                            payload = line[5:].strip()
                            if payload == b"[DONE]":
                                break
                            data = json.loads(payload)
                            if data.get("text") or data.get("choices"):
                                times.append(time_module.perf_counter())
                    records.append((start, time_module.perf_counter(), times))

            t0 = time_module.perf_counter()
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            return time_module.perf_counter() - t0

    cpu0 = time_module.process_time()
    # bench_serving runs on asyncio's loop; "plainuv" gives the plain client uvloop as well.
    duration = uvloop.run(main()) if args.variant == "plainuv" else asyncio.run(main())
    cpu = time_module.process_time() - cpu0
    tokens = sum(len(t) for _, _, t in records)
    ttfts = [t[0] - s for s, _, t in records if t]
    gaps = [b - a for _, _, t in records for a, b in zip(t, t[1:])]
    print(json.dumps({
        "tok_s": tokens / duration, "in_flight": float("nan"), "client_cpu": cpu / duration,
        "ttft_p50": statistics.median(ttfts) if ttfts else float("nan"),
        "itl_p50": statistics.median(gaps) if gaps else float("nan"),
        "itl_p99": sorted(gaps)[int(0.99 * (len(gaps) - 1))] if gaps else float("nan"),
        "failed": 0, "duration": duration, "problems": [],
    }))  # fmt: skip


# ----- AIPerf ---------------------------------------------------------------------------------


def run_aiperf(
    aiperf: str,
    tokenizer: str,
    url: str,
    c: int,
    n: int,
    tokens: int,
    core: int | None,
    model: str = "bench",
    prompt_tokens: int = 16,
    prompts_file: Path | None = None,
) -> dict:
    """One AIPerf run; ``prompts_file`` (JSONL of {"text": …}) makes it send exactly those prompts, in order."""
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    cmd = [
        aiperf,
        "profile",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--concurrency",
        str(c),
        "--request-count",
        str(n),
        "--warmup-request-count",
        str(c),
        "--output-tokens-mean",
        str(tokens),
        "--output-tokens-stddev",
        "0",
        "--extra-inputs",
        "ignore_eos:true",
        "--use-server-token-count",
        "--ui",
        "none",
        "--output-artifact-dir",
        str(out),
    ]
    if prompts_file is not None:
        cmd += [
            "--input-file",
            str(prompts_file),
            "--custom-dataset-type",
            "single_turn",
            "--dataset-sampling-strategy",
            "sequential",
        ]
    else:
        cmd += [
            "--prompt-input-tokens-mean",
            str(prompt_tokens),
            "--prompt-input-tokens-stddev",
            "0",
        ]
    if core is not None:
        cmd = ["taskset", "-c", str(core), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    summary_path = out / "profile_export_aiperf.json"
    if proc.returncode != 0 or not summary_path.exists():
        raise RuntimeError(
            f"aiperf failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    summary = json.loads(summary_path.read_text())
    records = []
    for line in (out / "profile_export.jsonl").read_text().splitlines():
        meta = json.loads(line)["metadata"]
        if meta.get("benchmark_phase") == "profiling":
            records.append(
                SimpleNamespace(
                    start=meta["request_start_ns"] / 1e9, end=meta["request_end_ns"] / 1e9
                )
            )
    shutil.rmtree(out, ignore_errors=True)
    return {
        "tok_s": summary["output_token_throughput"]["avg"],
        "in_flight": metrics.in_flight_while_sending(records, c),
        "ttft_p50": summary["time_to_first_token"]["p50"] / 1e3,
        # AIPerf's "ITL" is a per-request mean ((latency - TTFT) / (OSL - 1)); its inter-chunk
        # latency is the per-chunk gap, which is per token here (one token per chunk).
        "itl_p50": summary["inter_chunk_latency"]["p50"] / 1e3,
        "itl_p99": summary["inter_chunk_latency"]["p99"] / 1e3,
        "failed": int((summary.get("error_summary") or [{}])[0].get("count", 0))
        if summary.get("error_summary")
        else 0,
        "duration": summary["benchmark_duration"]["avg"],
    }


# ----- the harness ------------------------------------------------------------------------------


def start_server(itl_ms: float, framing: str, core: int | None) -> tuple[subprocess.Popen, str]:
    port = free_port("127.0.0.1")
    cmd = paced.command(port, itl_ms, "--framing", framing)
    if core is not None:
        cmd += ["--cpu", str(core)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("the paced server did not start")


def server_truth(url: str) -> dict:
    stats = httpx.get(url + "/stats").json()  # (arrived, first written, last written) per request
    ttft = [first - arrived for arrived, first, _ in stats]
    return {"ttft_p50": statistics.median(ttft) if ttft else float("nan"), "requests": len(stats)}


def measure_client(
    name: str,
    url: str,
    server: psutil.Process,
    args: argparse.Namespace,
    itl_ms: float,
    client_core: int | None,
) -> dict:
    httpx.get(url + "/stats")  # clear
    cpu0 = sum(server.cpu_times()[:2])
    if name == "aiperf":
        result = run_aiperf(
            args.aiperf,
            args.tokenizer,
            url,
            args.concurrency,
            args.requests,
            args.tokens,
            client_core,
        )
    else:
        variant, api = name.split("/")
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--variant",
            variant,
            "--api",
            api,
            "--url",
            url,
            "--concurrency",
            str(args.concurrency),
            "--requests",
            str(args.requests),
            "--tokens",
            str(args.tokens),
        ]
        if client_core is not None:
            cmd = ["taskset", "-c", str(client_core), *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    server_cpu = sum(server.cpu_times()[:2]) - cpu0
    truth = server_truth(url)
    result["server_cpu"] = server_cpu / result["duration"] if result["duration"] else float("nan")
    result["ttft_drift_ms"] = (result["ttft_p50"] - truth["ttft_p50"]) * 1e3
    result["itl_drift_ms"] = (result["itl_p50"] - itl_ms / 1e3) * 1e3 if itl_ms else float("nan")
    return result


def _ms(seconds: float) -> str:
    # A zero-delay stream that arrives in one read is one chunk: it has no inter-token gaps.
    return "-" if seconds is None or seconds != seconds else f"{seconds * 1e3:.2f} ms"


def make_tokenizer(path: str) -> None:
    """A tiny word-level HuggingFace tokenizer, so AIPerf runs without network access."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # AIPerf's environment has these
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[EOS]": 1, **{f"w{i}": i + 2 for i in range(200)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]"
    ).save_pretrained(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=250)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--paced-requests", type=int, default=500)
    parser.add_argument(
        "--aiperf", help="path to the aiperf executable (its own virtual environment)"
    )
    parser.add_argument("--tokenizer", help="local HuggingFace tokenizer directory for AIPerf")
    parser.add_argument(
        "--make-tokenizer",
        metavar="DIR",
        help="write a tiny tokenizer for AIPerf to DIR and use it",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="uvloop", help=argparse.SUPPRESS)
    parser.add_argument("--api", default="openai", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        plain = args.variant in ("plain", "plainuv")
        return run_plain_aiohttp(args) if plain else run_ours(args)
    if args.make_tokenizer:
        subprocess.run(
            [
                str(Path(args.aiperf).parent / "python"),
                "-c",
                f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import client_ceiling; client_ceiling.make_tokenizer({args.make_tokenizer!r})",
            ],
            check=True,
        )
        args.tokenizer = args.make_tokenizer

    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = (cores[0], cores[1]) if len(cores) >= 2 else (None, None)
    clients = ["uvloop/openai", "plain/openai", "plainuv/openai", "uvloop/sglang", "plain/sglang",
               "plainuv/sglang", "asyncio/openai", "httpx/openai"]  # fmt: skip
    if args.aiperf:
        clients.append("aiperf")
    print(
        f"# client ceiling: C={args.concurrency}, {args.tokens} tokens/request, one token per SSE event; "
        f"server on core {server_core}, client on core {client_core}; {os.cpu_count()} cores, {sys.version.split()[0]}"
    )
    scenarios = (
        (
            "zero-delay, one HTTP chunk per SSE event (as uvicorn sends)",
            0.0,
            args.requests,
            "event",
        ),
        ("zero-delay, one HTTP chunk per stream", 0.0, args.requests, "stream"),
        (f"paced {PACED_ITL_MS:g} ms per token", PACED_ITL_MS, args.paced_requests, "event"),
    )
    for scenario, itl_ms, n, framing in scenarios:
        requests = args.requests
        args.requests = n
        proc, url = start_server(itl_ms, framing, server_core)
        server = psutil.Process(proc.pid)
        print(f"\n## {scenario}: N={n}\n")
        print(
            "| client | tok/s | in flight (of C) | client CPU | server CPU | TTFT p50 drift "
            "| ITL p50 (drift) | ITL p99 | failed |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        try:
            for name in clients:
                try:
                    r = measure_client(name, url, server, args, itl_ms, client_core)
                except Exception as exc:  # a peer that fails is reported, not fatal
                    print(f"| {name} | failed: {str(exc).splitlines()[0][:80]} |")
                    continue
                cpu = f"{r['client_cpu']:.0%}" if "client_cpu" in r else "n/a"
                itl = _ms(r["itl_p50"]) + (f" ({r['itl_drift_ms']:+.2f})" if itl_ms else "")
                print(
                    f"| {name} | {r['tok_s']:,.0f} | {r['in_flight']:.1f} | {cpu} | {r['server_cpu']:.0%} | "
                    f"{r['ttft_drift_ms']:+.1f} ms | {itl} | {_ms(r['itl_p99'])} | {r['failed']} |",
                    flush=True,
                )
        finally:
            proc.kill()
            proc.wait()
        args.requests = requests


if __name__ == "__main__":
    main()
