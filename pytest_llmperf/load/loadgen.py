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
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import httpx

from pytest_llmperf.core.records import ABANDONED, RequestRecord, RunRecords
from pytest_llmperf.core.schedule import Arrivals
from pytest_llmperf.load.requests import send_one
from pytest_llmperf.load.transport import make_client, make_transport
from pytest_llmperf.load.workload import Workload

__all__ = [
    "Abort",
    "LevelPlan",
    "Window",
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
#: SGLang flushes an idle server's cache at once; a server that does not answer in this long is
#: left unflushed (the run itself will tell whether it still serves).
FLUSH_TIMEOUT_S = 10.0
_SSE_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


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


class Abort:
    """Whether the level was abandoned, and why: set by the first stall, seen by every run after it.

    A server that stalls one request stalls the next, so waiting out ``request_timeout_s`` again for
    every later request (and every later run) only spends GPU time. Worker processes share the flag
    through ``shared`` (a ``multiprocessing.Value``), so a stall in one ends the level in all."""

    def __init__(self, shared: Any = None) -> None:
        self.reason: str | None = None
        self._shared = shared

    def set(self, reason: str) -> None:
        self.reason = self.reason or reason
        if self._shared is not None:
            self._shared.value = 1

    def is_set(self) -> bool:
        return self.reason is not None or (self._shared is not None and bool(self._shared.value))


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
    flight are cancelled (disconnected: SGLang aborts them).
    """
    abort = abort or Abort()
    if abort.is_set():
        return RunRecords(concurrency, [], [], 0.0, 0.0, aborted=abort.reason or _ELSEWHERE)
    if claim is None:
        indices = iter(range(n_requests))

        def claim() -> int | None:
            return next(indices, None)

    loop = _ClosedLoop(transport, api, source, min(concurrency, n_requests), claim, abort, window)
    return await loop.run(concurrency, stall_timeout_s, progress)


class _ClosedLoop:
    """One run's state: its slots (each sends its next request when the last one ends), the
    window keeper that opens and closes a steady-state window, and the watchdog for stalls."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        api: str,
        source: Source,
        slots: int,
        claim: Callable[[], int | None],
        abort: Abort,
        window: Window | None,
    ) -> None:
        self.transport, self.api, self.source = transport, api, source
        self.slots, self.claim, self.abort, self.window = slots, claim, abort, window
        self.records: list[RequestRecord] = []
        self.in_flight: dict[int, tuple[RequestRecord, asyncio.Task]] = {}
        self.first_wave: list[RequestRecord] = []
        self.closed = False
        self.opened_at: float | None = None

    async def run(
        self, concurrency: int, stall_timeout_s: float, progress: Progress | None
    ) -> RunRecords:
        cpu0, wall0 = time.process_time(), perf_counter()
        loop = asyncio.get_running_loop()
        guards = [loop.create_task(self.watchdog(stall_timeout_s))]
        if self.window is not None:
            guards.append(loop.create_task(self.keep_window(self.window, wall0)))
        if progress is not None:
            guards.append(loop.create_task(_report(progress, self.records, wall0)))
        try:
            with _ClientMonitor() as monitor:
                await asyncio.gather(*(self.slot(k) for k in range(self.slots)))
        finally:
            for guard in guards:
                guard.cancel()
        measured = None
        if self.window is not None and self.closed and self.opened_at is not None:
            measured = (self.opened_at, self.opened_at + self.window.seconds)
        abort = self.abort
        return RunRecords(
            concurrency,
            self.records,
            monitor.lags,
            time.process_time() - cpu0,
            perf_counter() - wall0,
            aborted=(abort.reason or _ELSEWHERE) if abort.is_set() else None,
            window=measured,
        )

    async def slot(self, k: int) -> None:
        """Slot ``k``: a request, and the next one the moment it ends, until the run is over.
        With a window, its first request asks for (k + 1)/C of the output length."""
        task = asyncio.current_task()
        assert task is not None
        first = self.window is not None
        while not self.closed and not self.abort.is_set() and (i := self.claim()) is not None:
            rec = RequestRecord(i)
            self.records.append(rec)
            self.in_flight[k] = (rec, task)
            share = 1.0
            if first:
                share = (k + 1) / self.slots
                rec.staggered = share < 1.0
                self.first_wave.append(rec)
                first = False
            request, rec.requested, rec.sent_prompt_tokens = self.source(i, share)
            await send_one(self.transport, request, self.api, rec)
        self.in_flight.pop(k, None)

    async def keep_window(self, w: Window, started: float) -> None:
        """Open the window once every slot's first request is streaming, close it w.seconds
        later, and cancel what is still in flight."""
        first_wave = self.first_wave
        streaming = 0  # first-wave requests known to stream: each is looked at until it does
        while True:
            while streaming < len(first_wave) and (
                first_wave[streaming].chunk_times or first_wave[streaming].end
            ):
                streaming += 1
            if streaming >= self.slots:
                break
            await asyncio.sleep(WINDOW_POLL_S)
        self.opened_at = opened_at = max(
            started + w.settle_s,
            *(r.chunk_times[0] if r.chunk_times else r.end for r in first_wave),
        )
        await asyncio.sleep(max(0.0, opened_at + w.seconds - perf_counter()))
        self.closed = True
        for rec, task in list(self.in_flight.values()):
            if rec.end == 0.0 and rec.error is None:
                rec.cancelled = True
                task.cancel()

    async def watchdog(self, stall_timeout_s: float) -> None:
        """Fail a request that got no token for ``stall_timeout_s``, and abandon the run."""
        while True:
            await asyncio.sleep(min(1.0, stall_timeout_s / 4))
            now = perf_counter()
            for rec, task in list(self.in_flight.values()):
                silent = now - rec.last_token
                if rec.start and rec.end == 0.0 and rec.error is None and silent > stall_timeout_s:
                    what = "the first token" if not rec.chunk_times else "the next token"
                    reason = (
                        f"stalled: waited {silent:.1f} s for {what} (request_timeout_s = "
                        f"{stall_timeout_s:g}); the server stopped generating, so the rest of this "
                        "point is abandoned"
                    )
                    rec.error = reason
                    task.cancel()
                    self.abort.set(reason)
            if self.abort.is_set():
                self.abandon(f"{ABANDONED} another request of the run stalled")

    def abandon(self, reason: str) -> None:
        for rec, task in list(self.in_flight.values()):
            if rec.end == 0.0 and rec.error is None:
                rec.error = reason
                task.cancel()


_ELSEWHERE = "a request in another load-generator process stalled"
#: How often the window keeper looks whether every slot's first request is streaming.
WINDOW_POLL_S = 0.005
#: SGLang 0.5.6 aborts a disconnected streaming request 2 s after its client went away (the
#: response's background task, ``TokenizerManager.create_abort_task``; 0.5.19+ at once): by
#: default the next run's window opens no earlier than this after the run began, so requests cut
#: at the last window's close are gone by then.
SETTLE_S = 3.0


@dataclass(frozen=True)
class Window:
    """A steady-state measurement window: its length, and how long after a run began it may
    open (slot k's first request asks for (k + 1)/C of its output length)."""

    seconds: float
    settle_s: float = SETTLE_S


#: ``source(i, share)``: request i as sent (its output length scaled by ``share``), the output
#: tokens it asks for, and the prompt tokens the server must report (None: not known).
Source = Callable[[int, float], tuple[httpx.Request, int, int | None]]


def request_source(
    client: httpx.AsyncClient,
    workload: Workload,
    run: int,
    cap: int | None = None,
    prebuild: int = 0,
) -> Source:
    """Run ``run``'s requests (0: the warm-up, whose lengths ``cap`` limits). A workload whose
    requests repeat builds each distinct one once; one whose every request differs (synthetic
    token ids: about 0.3 ms for 2,048 of them) builds the first ``prebuild`` before the run
    starts, so that the client's time goes to the stream while it is measured, and any later
    one when it is sent."""
    period = workload.period
    built: dict[int, tuple[httpx.Request, int, int | None]] = {}

    def source(i: int, share: float = 1.0) -> tuple[httpx.Request, int, int | None]:
        key = i % period if period is not None and share == 1.0 else None
        if key is not None and key in built:
            return built[key]
        item = workload.item(i, run, share, cap)
        request = client.build_request(
            "POST", workload.path, content=item.body, headers=_SSE_HEADERS
        )
        sent = (request, item.output_len, item.prompt_tokens)
        if key is not None:
            built[key] = sent
        return sent

    if period is None:
        ahead = {i: source(i) for i in range(prebuild)}

        def prebuilt(i: int, share: float = 1.0) -> tuple[httpx.Request, int, int | None]:
            sent = ahead.pop(i, None) if share == 1.0 else None
            return sent if sent is not None else source(i, share)

        return prebuilt
    return source


#: Requests built ahead of a windowed run, per unit of C (a run sends an unknown number).
WINDOW_PREBUILD_PER_SLOT = 8


#: How often a run reports its progress (requests done and in flight, tokens so far).
PROGRESS_INTERVAL_S = 1.0
#: ``progress(done, in_flight, tokens, elapsed_s)``, called about once a second during a run.
Progress = Callable[[int, int, int, float], None]


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


@dataclass(frozen=True)
class LevelPlan:
    concurrency: int
    n_requests: int
    runs: int
    warmup: bool = True
    #: Measure a steady-state window of this many seconds per run instead of N whole requests.
    window_s: float | None = None
    #: How long after it began a run that follows a cut one opens its window (see SETTLE_S).
    settle_s: float = SETTLE_S
    #: The number of the first run (more runs of a point continue its count, so their requests
    #: are new to the server's prefix cache).
    first_run: int = 1
    #: Open loop: requests arrive at this rate (see :mod:`pytest_llmperf.load.openloop`);
    #: ``n_requests`` is then the fewest arrivals a run's window holds. None: closed loop at C.
    arrivals: Arrivals | None = None
    #: Open loop: at most this many requests in flight; later arrivals wait for a slot.
    max_concurrency: int | None = None
    #: Trace replay: the arrivals' offsets (seconds, scaled), replayed as they are.
    trace_offsets: tuple[float, ...] | None = None

    @property
    def request_limit(self) -> int:
        """How many requests a run may send: N, or without limit until the window closes."""
        return self.n_requests if self.window_s is None else UNLIMITED


UNLIMITED = 1 << 62


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
    abort: Abort | None = None,
    progress: Callable[[int], Progress] | None = None,
) -> list[RunRecords]:
    """Warm up at C (opening the C pooled connections), then measure ``plan.runs`` runs,
    awaiting ``before_run(client)`` before each (no request is in flight then).

    After a stall (``abort`` set) every later run is empty and instant, but still counted, so
    that worker processes meet at the same barriers; the stalled warm-up is returned as the
    only run. ``progress(k)`` gives the progress callback of measured run k (1-based)."""
    if plan.arrivals is not None:
        from pytest_llmperf.load.openloop import measure_open_level

        return await measure_open_level(
            base_url, workload, plan, transport=transport, timeout_s=timeout_s, headers=headers,
            before_run=before_run, abort=abort,
        )  # fmt: skip
    abort = abort or Abort()
    sender = make_transport(transport, plan.concurrency)
    async with make_client(base_url, sender, headers) as client:
        warmup = None
        if plan.warmup:
            warmup_source = request_source(
                client, workload, 0, WARMUP_OUTPUT_LEN, prebuild=plan.concurrency
            )
            warmup = await closed_loop(
                sender, workload.api, warmup_source, plan.concurrency, plan.concurrency, timeout_s,
                abort=abort,
            )  # fmt: skip
            _stop_if_refused(warmup, abort)
        window = None
        prebuild = plan.n_requests
        if plan.window_s is not None:
            window = Window(plan.window_s, settle_s=plan.settle_s)
            prebuild = WINDOW_PREBUILD_PER_SLOT * plan.concurrency
        runs = []
        for k in range(1, plan.runs + 1):
            if before_run is not None:
                await before_run(client)
            run_window = window
            if window is not None and k == 1 and plan.warmup:
                # The warm-up's requests all finished: there is nothing to wait out.
                run_window = replace(window, settle_s=0.0)
            with _old_objects_frozen():
                runs.append(
                    await closed_loop(
                        sender,
                        workload.api,
                        request_source(client, workload, plan.first_run + k - 1, prebuild=prebuild),
                        plan.concurrency,
                        plan.request_limit,
                        timeout_s,
                        claim,
                        abort,
                        progress(k) if progress is not None else None,
                        run_window,
                    )
                )
            _stop_if_refused(runs[-1], abort)
        if warmup is not None and warmup.aborted and warmup.records:
            return [replace(warmup, warmup=True)]  # it stalled: nothing was measured, this says why
        return runs


def _stop_if_refused(run: RunRecords, abort: Abort) -> None:
    """A server that refused every request of a run (HTTP 4xx: a prompt too long for its context,
    a model it does not serve) refuses the next run's too: the level ends now, saying why."""
    errors = [rec.error for rec in run.records]
    if errors and all(e is not None and e.startswith("HTTP 4") for e in errors):
        abort.set(f"the server refused every request of a run ({errors[0]})")


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
        await client.post("/flush_cache", timeout=FLUSH_TIMEOUT_S)
    except httpx.HTTPError:
        pass  # a server without the endpoint measures the same; the run itself will tell if it is down
