"""What a request with a synthetic prompt costs the client, against a built-in text prompt.

A workload of token ids builds every request anew (ids differ per request, so the prefix cache
serves none of them): the seeded ids, the JSON body, the httpx request. This times that per
request, for several input lengths, against the cached text prompts of the default workload,
and says how many requests per second one core could build at most: the load generator builds
a whole-request run's requests (and 8·C of a windowed run's) before the run starts, and any
later one while it streams.

    python benchmarks/token_id_bodies.py
"""

from __future__ import annotations

import time

import httpx

from pytest_llmperf.core.lengths import Lengths
from pytest_llmperf.load.level import request_source
from pytest_llmperf.load.workload import Workload

REQUESTS = 2000


def per_request_us(workload: Workload) -> float:
    client = httpx.AsyncClient(base_url="http://127.0.0.1:1")
    source = request_source(client, workload, run=1)
    source(0, 1.0)  # imports, caches
    best = float("inf")
    for attempt in range(3):
        started = time.perf_counter()
        for i in range(REQUESTS):
            source(attempt * REQUESTS + i, 1.0)
        best = min(best, (time.perf_counter() - started) / REQUESTS)
    return best * 1e6


def main() -> None:
    rows = [("text prompts (default, cached)", Workload(api="sglang", output_len=64))]
    for n in (128, 2048, 8192):
        for api in ("sglang", "openai"):
            rows.append(
                (
                    f"{n:>5} token ids, {api}",
                    Workload(api=api, output_len=64, input=Lengths.fixed(n)),
                )
            )
    print(f"{'workload':<34} {'µs/request':>11} {'requests/s, one core':>22}")
    for name, workload in rows:
        us = per_request_us(workload)
        print(f"{name:<34} {us:>11.1f} {1e6 / us:>22,.0f}")


if __name__ == "__main__":
    main()
