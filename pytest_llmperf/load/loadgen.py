"""Closed-loop load generator: exactly C requests in flight until N are done.

Each of C workers sends its next request the moment its previous one ends, so the server
sees C concurrent streams for the whole run except the ramp-down tail. Every request records
its send time, the arrival time of every chunk that carried tokens, the server's cumulative
token count after that chunk, and the server's final counts (``completion_tokens``,
``spec_verify_ct``). Events that arrive in one socket read share one timestamp and are one
chunk: the client cannot tell them apart in time.

The per-chunk loop is the hot path and stays small: one ``split`` per read, and the stream
parsers of :mod:`pytest_llmperf.load.streams` parse as little JSON as they can. Requests are
identical per prompt, so each ``httpx.Request`` is built once by the client and sent straight
through its transport: the client's per-request work (URL merging, header objects) is paid
once, not per request.

While a run goes, a monitor samples the event loop's lag and the client's CPU time, so a
run in which the client, not the server, set the pace can be told apart (see
:func:`pytest_llmperf.core.metrics.client_checks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from pytest_llmperf.core.records import RequestRecord, RunRecords
from pytest_llmperf.load.streams import NativeStream, OpenAIStream
from pytest_llmperf.load.transport import make_client, make_transport
from pytest_llmperf.load.workload import Workload

__all__ = [
    "LevelPlan",
    "closed_loop",
    "flush_cache",
    "measure_level",
    "measure_level_async",
    "run_in_fresh_loop",
    "send_one",
]

perf_counter = time.perf_counter
T = TypeVar("T")
LAG_SAMPLE_INTERVAL_S = 0.005
WARMUP_OUTPUT_LEN = 16
_SSE_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


async def send_one(
    transport: httpx.AsyncBaseTransport, request: httpx.Request, api: str, rec: RequestRecord
) -> None:
    """Stream one request into ``rec``; errors are recorded, never raised."""
    stream: NativeStream | OpenAIStream = NativeStream() if api == "sglang" else OpenAIStream()
    times, cumulative = rec.chunk_times, rec.chunk_cumulative
    rec.start = perf_counter()
    try:
        response = await transport.handle_async_request(request)
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)
        try:
            if response.status_code != 200:
                text = b"".join([chunk async for chunk in body]).decode("utf-8", "replace")
                rec.error = f"HTTP {response.status_code}: {text[:300]}"
                return
            buf = b""
            async for data in body:
                now = rec.last_read = perf_counter()
                events = (buf + data).split(b"\n\n")
                buf = events.pop()
                grew = False
                for event in events:
                    if event.startswith(b"data:"):
                        payload = event[5:].strip()
                        if payload != b"[DONE]" and stream.event(payload):
                            grew = True
                if grew:
                    times.append(now)
                    cumulative.append(stream.count)
        finally:
            await body.aclose()
    except httpx.HTTPError as exc:
        rec.error = f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        if rec.error is None:  # not the watchdog: the run itself is being cancelled
            raise
        task = asyncio.current_task()
        if task is not None and hasattr(task, "uncancel"):
            task.uncancel()
    finally:
        rec.end = perf_counter()
    if rec.error is None:
        stream.finish(rec)


class _ClientMonitor:
    """Samples the event loop's scheduling lag while a run goes."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def _sample(self) -> None:
        while True:
            before = perf_counter()
            await asyncio.sleep(LAG_SAMPLE_INTERVAL_S)
            self.lags.append(max(0.0, perf_counter() - before - LAG_SAMPLE_INTERVAL_S))

    def __enter__(self) -> _ClientMonitor:
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def closed_loop(
    transport: httpx.AsyncBaseTransport,
    api: str,
    requests: list[httpx.Request],
    concurrency: int,
    n_requests: int,
    stall_timeout_s: float = 600.0,
    claim: Callable[[], int | None] | None = None,
) -> RunRecords:
    """Run N requests with exactly ``concurrency`` in flight until the last ones drain.

    ``claim`` hands out request indices (None when all N are taken); worker processes share
    one, so together they keep C in flight until the very last request. A stream silent for
    ``stall_timeout_s`` (no response, or no bytes since the last read) is failed by the
    watchdog, so a hung server ends the run instead of hanging it.
    """
    if claim is None:
        indices = iter(range(n_requests))

        def claim() -> int | None:
            return next(indices, None)

    records: list[RequestRecord] = []
    in_flight: dict[int, tuple[RequestRecord, asyncio.Task]] = {}

    async def worker(slot: int) -> None:
        task = asyncio.current_task()
        assert task is not None
        while (i := claim()) is not None:
            rec = RequestRecord(i)
            records.append(rec)
            in_flight[slot] = (rec, task)
            await send_one(transport, requests[i % len(requests)], api, rec)
        in_flight.pop(slot, None)

    async def watchdog() -> None:
        while True:
            await asyncio.sleep(min(1.0, stall_timeout_s / 4))
            now = perf_counter()
            for rec, task in list(in_flight.values()):
                silent = now - max(rec.start, rec.last_read)
                if rec.start and rec.end == 0.0 and rec.error is None and silent > stall_timeout_s:
                    rec.error = (
                        f"stalled: no data from the server for {silent:.1f} s "
                        f"(request_timeout_s = {stall_timeout_s:g})"
                    )
                    task.cancel()

    cpu0, wall0 = time.process_time(), perf_counter()
    guard = asyncio.get_running_loop().create_task(watchdog())
    try:
        with _ClientMonitor() as monitor:
            await asyncio.gather(*(worker(k) for k in range(min(concurrency, n_requests))))
    finally:
        guard.cancel()
    return RunRecords(
        concurrency, records, monitor.lags, time.process_time() - cpu0, perf_counter() - wall0
    )


@dataclass(frozen=True)
class LevelPlan:
    concurrency: int
    n_requests: int
    runs: int
    warmup: bool = True


async def measure_level_async(
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    *,
    transport: str = "aiohttp",
    timeout_s: float = 600.0,
    headers: dict[str, str] | None = None,
    before_run: Callable[[httpx.AsyncClient], Awaitable[Any]] | None = None,
    claim: Callable[[], int | None] | None = None,
) -> list[RunRecords]:
    """Warm up at C (opening the C pooled connections), then measure ``plan.runs`` runs,
    awaiting ``before_run(client)`` before each (no request is in flight then)."""
    sender = make_transport(transport, plan.concurrency)
    async with make_client(base_url, sender, headers) as client:

        def requests(output_len: int) -> list[httpx.Request]:
            return [
                client.build_request("POST", workload.path, content=body, headers=_SSE_HEADERS)
                for body in workload.bodies(output_len)
            ]

        if plan.warmup:
            short = requests(min(workload.output_len, WARMUP_OUTPUT_LEN))
            await closed_loop(
                sender, workload.api, short, plan.concurrency, plan.concurrency, timeout_s
            )
        measured = requests(workload.output_len)
        runs = []
        for _ in range(plan.runs):
            if before_run is not None:
                await before_run(client)
            with _old_objects_frozen():
                runs.append(
                    await closed_loop(
                        sender,
                        workload.api,
                        measured,
                        plan.concurrency,
                        plan.n_requests,
                        timeout_s,
                        claim,
                    )
                )
        return runs


@contextlib.contextmanager
def _old_objects_frozen() -> Iterator[None]:
    """Collect, then keep every existing object out of the collector for the run: in a pytest
    process with a large heap a full collection pauses the client for 10+ ms, which delays the
    next request as surely as a slow server would (and is flagged client-bound). Objects the
    run creates are still collected as usual."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_in_fresh_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop where it is installed (its C read path halves the client's cost per
    chunk, see benchmarks/client_ceiling.py), else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with (
        asyncio.Runner(loop_factory=uvloop.new_event_loop)
        if hasattr(asyncio, "Runner")
        else _Uvloop310() as runner
    ):
        return runner.run(coro)


class _Uvloop310:
    """``asyncio.Runner`` stand-in for Python 3.10."""

    def __enter__(self) -> _Uvloop310:
        import uvloop

        self.loop = uvloop.new_event_loop()
        return self

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def __exit__(self, *exc: object) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


def measure_level(
    base_url: str, workload: Workload, plan: LevelPlan, **kwargs: Any
) -> list[RunRecords]:
    """Synchronous entry point for tests and fixtures: a fresh event loop per level."""
    return run_in_fresh_loop(measure_level_async(base_url, workload, plan, **kwargs))


async def flush_cache(client: httpx.AsyncClient) -> None:
    """SGLang's ``/flush_cache`` between runs (radix cache, spec counters); idle servers only."""
    try:
        await client.post("/flush_cache")
    except httpx.HTTPError:
        pass  # a server without the endpoint measures the same; the run itself will tell if it is down
