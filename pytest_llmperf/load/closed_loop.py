"""Closed-loop load: exactly C requests in flight until N are done.

Each of C slots sends its next request the moment its previous one ends, so the server sees C
concurrent streams for the whole run except the ramp-down tail. Every request records its send
time, the arrival time of every chunk that carried tokens, the server's cumulative token count
after that chunk, and the server's final counts (``completion_tokens``, ``spec_verify_ct``);
one streamed request is :func:`pytest_llmperf.load.requests.send_one`, the client's hot path.
Requests are identical per prompt, so each ``httpx.Request`` is built once by the client and
sent straight through its transport: the client's per-request work (URL merging, header
objects) is paid once, not per request.

While a run goes, a monitor samples the event loop's lag and the client's CPU time, so a
run in which the client, not the server, set the pace can be told apart (see
:func:`pytest_llmperf.core.metrics.client_checks`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from pytest_llmperf.core.records import RequestRecord, RunRecords
from pytest_llmperf.load.level import (
    WARMUP_OUTPUT_LEN,
    Abort,
    ClosedPlan,
    InFlight,
    ReadyRun,
    Source,
    Window,
    request_source,
)
from pytest_llmperf.load.requests import send_one
from pytest_llmperf.load.workload import Workload

perf_counter = time.perf_counter
LAG_SAMPLE_INTERVAL_S = 0.005
#: How often the window keeper looks whether every slot's first request is streaming.
WINDOW_POLL_S = 0.005
#: Requests built ahead of a windowed run, per unit of C (a run sends an unknown number).
WINDOW_PREBUILD_PER_SLOT = 8
#: How often a run reports its progress (requests done and in flight, tokens so far).
PROGRESS_INTERVAL_S = 1.0
#: ``progress(done, in_flight, tokens, elapsed_s)``, called about once a second during a run.
Progress = Callable[[int, int, int, float], None]


class ClientMonitor:
    """Samples the event loop's scheduling lag while a run goes."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def _sample(self) -> None:
        while True:
            before = perf_counter()
            await asyncio.sleep(LAG_SAMPLE_INTERVAL_S)
            self.lags.append(max(0.0, perf_counter() - before - LAG_SAMPLE_INTERVAL_S))

    def __enter__(self) -> ClientMonitor:
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def closed_loop(
    transport: httpx.AsyncBaseTransport,
    api: str,
    source: Source,
    concurrency: int,
    n_requests: int,
    stall_timeout_s: float = 600.0,
    claim: Callable[[], int | None] | None = None,
    abort: Abort | None = None,
    progress: Progress | None = None,
    window: Window | None = None,
    in_service: int | None = None,
) -> RunRecords:
    """Run N requests with exactly ``concurrency`` in flight until the last ones drain, or,
    with a ``window``, keep C in flight until its measurement window has closed.

    ``source(i, share)`` gives request i (its output length scaled by ``share``), the output
    tokens it asks for and the prompt tokens the server must report (None: unknown).
    ``claim`` hands out request indices (None when all N are taken); worker processes share
    one, so together they keep C in flight until the very last request. A request that gets no
    token for ``stall_timeout_s`` (no response, or only bytes that carry none, such as SSE
    keep-alive comments) has stalled: the watchdog fails it, abandons the run's other requests
    and sets ``abort``, so no later request or run waits out the timeout again.

    With a window, slot k's first request asks for (k + 1)/C of the output length, so the C
    streams end at evenly spread times and every later request starts at its own phase: the
    server sees the mix of a steady stream of users (some prefilling, most decoding) rather
    than C requests that start and end together. The window opens when every slot's first
    request has its first token (the initial prefills are past) and no earlier than
    ``window.settle_s`` after the run began (after a run whose requests were cut, the server
    may still be aborting them); it closes ``window.seconds`` later, and the requests still in
    flight are cut (disconnected: SGLang aborts them).

    A server that runs at most ``in_service`` requests at once (fewer than C) queues the rest:
    only the first ``in_service`` slots' first requests are staggered (over 1/M … M/M of the
    output length, M = in_service) and the others ask for the whole of it. Those M are what the
    server runs first, so their spread phases are the steady state's, and the window opens once
    M first requests stream; the queue of C − M full requests is the steady state's from the
    start. Staggering all C instead would make the last slot's first request wait behind every
    shorter one (at C = 250 over SGLang's cap of 48 for a speculative server, 512-token
    requests: about 12 s a run before its window could open).
    """
    abort = abort or Abort()
    if abort.is_set():
        return RunRecords(concurrency, [], [], 0.0, 0.0, aborted=abort.why)
    if claim is None:
        indices = iter(range(n_requests))

        def claim() -> int | None:
            return next(indices, None)

    slots = min(concurrency, n_requests)
    staggered = min(slots, in_service) if in_service else slots
    run = _ClosedRun(transport, api, source, slots, staggered, claim, abort, window)
    return await run.run(concurrency, stall_timeout_s, progress)


class _ClosedRun:
    """One run's state: its slots (each sends its next request when the last one ends), the
    window keeper that opens and closes a steady-state window, and its requests in flight."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        api: str,
        source: Source,
        slots: int,
        staggered: int,
        claim: Callable[[], int | None],
        abort: Abort,
        window: Window | None,
    ) -> None:
        self.transport, self.api, self.source = transport, api, source
        self.slots, self.staggered = slots, staggered
        self.claim, self.abort, self.window = claim, abort, window
        self.records: list[RequestRecord] = []
        self.in_flight = InFlight(abort)
        self.first_wave: list[RequestRecord] = []
        self.closed = False
        self.opened_at: float | None = None

    async def run(
        self, concurrency: int, stall_timeout_s: float, progress: Progress | None
    ) -> RunRecords:
        cpu0, wall0 = time.process_time(), perf_counter()
        loop = asyncio.get_running_loop()
        guards = [loop.create_task(self.in_flight.watch(stall_timeout_s))]
        if self.window is not None:
            guards.append(loop.create_task(self.keep_window(self.window, wall0)))
        if progress is not None:
            guards.append(loop.create_task(_report(progress, self.records, wall0)))
        try:
            with ClientMonitor() as monitor:
                await asyncio.gather(*(self.slot(k) for k in range(self.slots)))
        finally:
            for guard in guards:
                guard.cancel()
        measured = None
        if self.window is not None and self.closed and self.opened_at is not None:
            measured = (self.opened_at, self.opened_at + self.window.seconds)
        return RunRecords(
            concurrency,
            self.records,
            monitor.lags,
            time.process_time() - cpu0,
            perf_counter() - wall0,
            aborted=self.abort.why,
            window=measured,
        )

    async def slot(self, k: int) -> None:
        """Slot ``k``: a request, and the next one the moment it ends, until the run is over.
        With a window, the first request of each of the first M slots (M: ``staggered``) asks
        for (k + 1)/M of the output length."""
        task = asyncio.current_task()
        assert task is not None
        first = self.window is not None
        while not self.closed and not self.abort.is_set() and (i := self.claim()) is not None:
            rec = RequestRecord(i)
            self.records.append(rec)
            self.in_flight.add(k, rec, task)
            share = 1.0
            if first:
                share = (k + 1) / self.staggered if k < self.staggered else 1.0
                rec.staggered = share < 1.0
                self.first_wave.append(rec)
                first = False
            request, rec.requested, rec.sent_prompt_tokens = self.source(i, share)
            await send_one(self.transport, request, self.api, rec)
        self.in_flight.remove(k)

    async def keep_window(self, w: Window, started: float) -> None:
        """Open the window once as many first requests stream as the server runs at once (every
        slot's, on a server without a smaller cap), close it w.seconds later, and cut what is
        still in flight."""
        first_wave = self.first_wave
        while True:
            begun = [r.chunk_times[0] if r.chunk_times else r.end for r in first_wave]
            begun = [t for t in begun if t]
            if len(begun) >= self.staggered:
                break
            await asyncio.sleep(WINDOW_POLL_S)
        self.opened_at = opened_at = max(started + w.settle_s, *begun)
        await asyncio.sleep(max(0.0, opened_at + w.seconds - perf_counter()))
        self.closed = True
        self.in_flight.cut()


async def _report(progress: Progress, records: list[RequestRecord], started: float) -> None:
    """Count what the run has so far, once a second: a few microseconds per request, on the
    loop the run uses (so it never runs while a chunk is being handled)."""
    while True:
        await asyncio.sleep(PROGRESS_INTERVAL_S)
        done = in_flight = tokens = 0
        for rec in records:
            if rec.end:
                done += 1
                tokens += rec.completion_tokens or 0
            else:
                in_flight += 1
                last = rec.chunk_cumulative[-1] if rec.chunk_cumulative else None
                tokens += int(last) if last is not None else len(rec.chunk_times)
        progress(done, in_flight, tokens, perf_counter() - started)


@dataclass
class ClosedLevel:
    """A closed-loop level (see :class:`~pytest_llmperf.load.level.Loop`): warmed up at C with
    C short requests, which opens the C pooled connections; ``claim`` shares request indices
    with other worker processes; ``progress(k)`` is measured run k's progress callback."""

    plan: ClosedPlan
    workload: Workload
    timeout_s: float = 600.0
    claim: Callable[[], int | None] | None = None
    progress: Callable[[int], Progress] | None = None

    @property
    def connections(self) -> int:
        return self.plan.concurrency

    async def warm_up(
        self, sender: httpx.AsyncBaseTransport, client: httpx.AsyncClient, abort: Abort
    ) -> RunRecords:
        c = self.plan.concurrency
        source = request_source(client, self.workload, 0, WARMUP_OUTPUT_LEN, prebuild=c)
        return await closed_loop(
            sender, self.workload.api, source, c, c, self.timeout_s, abort=abort
        )

    def prepare(self, k: int, client: httpx.AsyncClient) -> ReadyRun:
        plan = self.plan
        window, prebuild = None, plan.n_requests
        if plan.window_s is not None:
            # The warm-up's requests all finished: the first run has nothing to wait out.
            settle = 0.0 if k == 1 and plan.warmup else plan.settle_s
            window = Window(plan.window_s, settle_s=settle)
            prebuild = WINDOW_PREBUILD_PER_SLOT * plan.concurrency
        source = request_source(client, self.workload, plan.first_run + k - 1, prebuild=prebuild)
        return functools.partial(self._run, k, source, window)

    async def _run(
        self,
        k: int,
        source: Source,
        window: Window | None,
        sender: httpx.AsyncBaseTransport,
        abort: Abort,
    ) -> RunRecords:
        plan = self.plan
        return await closed_loop(
            sender,
            self.workload.api,
            source,
            plan.concurrency,
            plan.request_limit,
            self.timeout_s,
            self.claim,
            abort,
            self.progress(k) if self.progress else None,
            window,
            plan.in_service,
        )

    def finished(self, runs: list[RunRecords], abort: Abort) -> bool:
        return False  # after a stall, the runs are empty: every worker still meets each barrier
