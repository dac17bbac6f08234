"""How often does the client's count of verify steps miss, and why?

``accept_length_observed`` (``core/metrics.py``) counts a speculative request's verify steps
from the client's side: chunks that arrive closer than a tenth of the request's 90th-percentile
gap belong to one step. This script measures that count against the truth on the real
llama-server of the shipped ``llamacpp-smollm2-spec`` profile.

The truth: asked with ``timings_per_token``, llama-server stamps every token's event with its
step's ``predicted_ms`` (the generation clock when the step finished) and ``draft_n``; all
tokens of one step share the stamp. The client's side is read as the plugin's client reads it
(``load/requests.py``): one timestamp per socket read, a read that carries a token is a chunk;
the plugin's own ``bursts`` counts them.

For each server thread count (``-t``) and number of busy-looping processes beside the server
(``--hogs``), one launch, then 24 requests of up to 32 tokens at each concurrency. Printed per cell:
the true steps, reads that held tokens of two steps (no client rule can split those), the
client's count less the truth, and the gaps that decide it: the longest gap inside a step and
the shortest between steps, in milliseconds.

    python benchmarks/burst_count.py              # -t 2 and -t 1, 0 and 1 hogs, C = 1, 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_llmperf.core.metrics import bursts  # noqa: E402
from pytest_llmperf.core.records import RequestRecord  # noqa: E402
from pytest_llmperf.profiles_file import load_profiles  # noqa: E402
from pytest_llmperf.servers.lifecycle import (  # noqa: E402
    build_command,
    free_port,
    wait_for_health,
)

PROMPTS = ["What is 17 + 25?", "Name three colours.", "Write a haiku about rain.",
           "Count the apples: ", "Explain gravity briefly.", "List prime numbers: "]  # fmt: skip


def server_command(threads: int, port: int, run_dir: Path) -> list[str]:
    """The shipped profile's command line, as the plugin builds it, with ``-t threads``."""
    profile = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles[
        "llamacpp-smollm2-spec"
    ]
    command = build_command(profile, "127.0.0.1", port, run_dir)
    command[command.index("-t") + 1] = str(threads)
    return command


async def one(
    client: httpx.AsyncClient, url: str, i: int, max_tokens: int = 32
) -> list[tuple[float, list]]:
    """One streamed request: (read time, the step stamps of the tokens in that read)."""
    body = {"model": "x", "prompt": f"{PROMPTS[i % 6]} ({i})", "max_tokens": max_tokens,
            "stream": True, "temperature": 0, "timings_per_token": True}  # fmt: skip
    reads, buf = [], b""
    async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
        async for data in response.aiter_raw():
            now = time.perf_counter()
            events = (buf + data).split(b"\n\n")
            buf = events.pop()
            stamps = []
            for event in events:
                if event.startswith(b"data: ") and event[6:].strip() != b"[DONE]":
                    payload = json.loads(event[6:])
                    if payload["choices"][0].get("text"):
                        timings = payload.get("timings") or {}
                        stamps.append((timings.get("draft_n"), timings.get("predicted_ms")))
            if stamps:
                reads.append((now, stamps))
    return reads


async def measure(url: str, levels: list[int], requests: int, max_tokens: int) -> dict[int, list]:
    limits = httpx.Limits(max_keepalive_connections=0)  # llama-server closes idle ones
    out: dict[int, list] = {}
    async with httpx.AsyncClient(timeout=120, trust_env=False, limits=limits) as client:
        await one(client, url, 99)  # warm-up
        for c in levels:
            out[c] = []
            for k in range(requests // c):
                out[c] += await asyncio.gather(
                    *(one(client, url, k * c + j, max_tokens) for j in range(c))
                )
    return out


def summarize(reqs: list) -> dict:
    true = joined = counted = 0
    inside, between = [0.0], [float("inf")]
    for reads in reqs:
        true += len({tuple(s) for _, stamps in reads for s in stamps})
        for (t0, a), (t1, b) in zip(reads, reads[1:]):
            same = tuple(a[-1]) == tuple(b[0])
            (inside if same else between).append((t1 - t0) * 1e3)
        joined += sum(len({tuple(s) for s in stamps}) - 1 for _, stamps in reads)
        counted += bursts(RequestRecord(index=0, chunk_times=[t for t, _ in reads]))
    return dict(true=true, joined=joined, error=counted - true,
                inside=max(inside), between=min(between))  # fmt: skip


def measure_beside(
    command: list[str], hogs: int, levels: list[int], requests: int, max_tokens: int = 32
) -> dict:
    """Launch the server with ``hogs`` busy-looping processes beside it, measure, stop all."""
    url = f"http://127.0.0.1:{command[command.index('--port') + 1]}"
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        wait_for_health(url, timeout_s=60.0)
        return asyncio.run(measure(url, levels, requests, max_tokens))
    finally:
        for p in [server, *busy]:
            p.kill()
            p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    a = parser.parse_args()
    print(f"{'-t':>3} {'hogs':>4} {'C':>2} {'steps':>5} {'joined':>6} {'client-true':>11} "
          f"{'max gap inside':>14} {'min gap between':>15}")  # fmt: skip
    for threads in a.threads:
        for hogs in a.hogs:
            with tempfile.TemporaryDirectory(prefix="burst-count-") as run_dir:
                command = server_command(threads, free_port("127.0.0.1"), Path(run_dir))
                got = measure_beside(command, hogs, a.levels, a.requests, a.max_tokens)
            for c, reqs in got.items():
                s = summarize(reqs)
                print(f"{threads:>3} {hogs:>4} {c:>2} {s['true']:>5} {s['joined']:>6} "
                      f"{s['error']:>+11d} {s['inside']:>11.2f} ms {s['between']:>12.2f} ms",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
