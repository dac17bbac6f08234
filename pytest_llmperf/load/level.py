"""The level machine: measuring one level, whichever loop sends its requests.

A level is a plan, typed by how its requests are sent: :class:`ClosedPlan` (C requests in
flight, :mod:`~pytest_llmperf.load.closed_loop`), :class:`OpenPlan` (arrivals on a seeded
schedule at a rate, :mod:`~pytest_llmperf.load.open_loop`) and :class:`TracePlan` (a trace's
arrivals at their own times). :func:`measure_level_async` runs any of them the same way: one
client, a warm-up, then the plan's runs, each prepared (its requests built, the level's own
checks made) before ``before_run`` (no request in flight: the cache flush, the workers' barrier,
an open loop's shared start), so that nothing of unknown cost lies between that start and the
first send, with the collector's old objects frozen, and the level ended early when the server
refused a whole run. The loops are peers over what this module gives
them: :class:`InFlight`, the requests of a run in flight, with the one stall watchdog and the
one cut at a window's close; :class:`Abort`, the flag a stall sets for the rest of the level;
:func:`request_source`, the requests a run sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import httpx

from pytest_llmperf.core.records import ABANDONED, RequestRecord, RunRecords
from pytest_llmperf.core.schedule import Arrivals
from pytest_llmperf.load.transport import make_client, make_transport
from pytest_llmperf.load.workload import Workload

T = TypeVar("T")
perf_counter = time.perf_counter
#: SGLang 0.5.6 aborts a disconnected streaming request 2 s after its client went away (the
#: response's background task, ``TokenizerManager.create_abort_task``; 0.5.19+ at once): by
#: default the next run's window opens no earlier than this after the run began, so requests cut
#: at the last window's close are gone by then.
SETTLE_S = 3.0
WARMUP_OUTPUT_LEN = 16
#: SGLang flushes an idle server's cache at once; a server that does not answer in this long is
#: left unflushed (the run itself will tell whether it still serves).
FLUSH_TIMEOUT_S = 10.0
#: Why a process's run was empty: a request of another load-generator process stalled.
ELSEWHERE = "a request in another load-generator process stalled"
_SSE_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What every level's plan says, besides how its requests are sent."""

    warmup: bool = True
    #: Measure a steady-state window of this many seconds per run (an open loop's window holds
    #: at least its ``min_arrivals`` as well).
    window_s: float | None = None
    #: How long after it began a run that follows a cut one opens its window (see SETTLE_S);
    #: an open loop's lead-in lasts at least this long.
    settle_s: float = SETTLE_S
    #: The number of the first run (more runs of a point continue its count, so their requests
    #: are new to the server's prefix cache).
    first_run: int = 1


@dataclass(frozen=True)
class ClosedPlan(Plan):
    """``runs`` runs with exactly ``concurrency`` requests in flight: N = ``n_requests`` whole
    requests a run, or a steady-state window (``window_s``)."""

    concurrency: int
    n_requests: int
    runs: int = 1
    #: The most requests the server runs at once (SGLang's ``max_running_requests``, llama.cpp's
    #: slots), where it says and that is below ``concurrency``: the others wait in its queue, so
    #: a windowed run staggers the first requests of only this many slots (None: every slot).
    in_service: int | None = None

    @property
    def request_limit(self) -> int:
        """How many requests a run may send: N, or without limit until the window closes."""
        return self.n_requests if self.window_s is None else UNLIMITED


@dataclass(frozen=True)
class OpenPlan(Plan):
    """``runs`` runs of arrivals on a seeded schedule, each window holding at least
    ``min_arrivals``; with ``max_concurrency``, later arrivals wait for a slot."""

    arrivals: Arrivals
    min_arrivals: int = 16
    runs: int = 1
    max_concurrency: int | None = None

    @property
    def concurrency(self) -> int:
        """What a point of this level calls its concurrency: the cap, 0 without one."""
        return self.max_concurrency or 0


@dataclass(frozen=True)
class TracePlan(OpenPlan):
    """A trace's arrivals at their own offsets (seconds, already scaled), all of them measured."""

    offsets: tuple[float, ...] = ()


LevelPlan = ClosedPlan | OpenPlan
UNLIMITED = 1 << 62


@dataclass(frozen=True)
class Window:
    """A steady-state measurement window: its length, and how long after a run began it may
    open (slot k's first request asks for (k + 1)/C of its output length)."""

    seconds: float
    settle_s: float = SETTLE_S


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

    @property
    def why(self) -> str | None:
        """Why the level was abandoned (a stall in another process: that), or None."""
        return (self.reason or ELSEWHERE) if self.is_set() else None


class InFlight:
    """The requests of one run that are in flight, by key (a closed loop's slot, an open loop's
    arrival), and what both loops do to them: fail one that stalls and abandon the rest, or cut
    them all when the window closes."""

    def __init__(self, abort: Abort) -> None:
        self.abort = abort
        self.requests: dict[int, tuple[RequestRecord, asyncio.Task]] = {}

    def add(self, key: int, rec: RequestRecord, task: asyncio.Task) -> None:
        self.requests[key] = (rec, task)

    def remove(self, key: int) -> None:
        self.requests.pop(key, None)

    def unfinished(self) -> list[tuple[RequestRecord, asyncio.Task]]:
        return [(r, t) for r, t in self.requests.values() if r.end == 0.0 and r.error is None]

    def backlog(self) -> int:
        """Requests that have arrived and not ended (queued in the client or the server)."""
        return sum(1 for rec, _ in self.requests.values() if rec.end == 0.0)

    def cut(self) -> None:
        """The window closed: what is still in flight is cancelled (disconnected: SGLang aborts
        it), not failed."""
        for rec, task in self.unfinished():
            rec.cancelled = True
            task.cancel()

    async def watch(self, stall_timeout_s: float) -> None:
        """Fail a request that got no token for ``stall_timeout_s`` after it was sent, and
        abandon the run's others (a server that stalls one stalls them all); a stall in another
        process abandons them too."""
        while True:
            await asyncio.sleep(min(1.0, stall_timeout_s / 4))
            now = perf_counter()
            for rec, task in self.unfinished():
                silent = now - rec.last_token
                if rec.start and silent > stall_timeout_s:
                    what = "the first token" if not rec.chunk_times else "the next token"
                    rec.error = (
                        f"stalled: waited {silent:.1f} s for {what} (request_timeout_s = "
                        f"{stall_timeout_s:g}); the server stopped generating, so the rest of this "
                        "point is abandoned"
                    )
                    task.cancel()
                    self.abort.set(rec.error)
            if self.abort.is_set():
                for rec, task in self.unfinished():
                    rec.error = f"{ABANDONED} another request of the run stalled"
                    task.cancel()


#: ``source(i, share)``: request i as sent (its output length scaled by ``share``), the output
#: tokens it asks for, and the prompt tokens the server must report (None: not known).
Source = Callable[[int, float], tuple[httpx.Request, int, int | None]]
#: A run made ready by :meth:`Loop.prepare`: it sends as soon as it is awaited.
ReadyRun = Callable[[httpx.AsyncBaseTransport, Abort], Awaitable[RunRecords]]


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


class Loop(Protocol):
    """How one kind of level sends its requests (closed_loop.py, open_loop.py)."""

    @property
    def plan(self) -> LevelPlan: ...

    @property
    def connections(self) -> int:
        """Connections the transport may hold open (0: as many as requests in flight)."""
        ...

    async def warm_up(
        self, sender: httpx.AsyncBaseTransport, client: httpx.AsyncClient, abort: Abort
    ) -> RunRecords: ...

    def prepare(self, k: int, client: httpx.AsyncClient) -> ReadyRun:
        """Measured run ``k`` (1-based), with everything it costs before its first send (its
        schedule, its requests) paid now, before the start is set."""
        ...

    def finished(self, runs: list[RunRecords], abort: Abort) -> bool:
        """Whether the level ends before its next run."""
        ...


async def measure_level_async(
    base_url: str,
    loop: Loop,
    *,
    transport: str = "aiohttp",
    headers: dict[str, str] | None = None,
    before_run: Callable[[httpx.AsyncClient], Awaitable[Any]] | None = None,
    abort: Abort | None = None,
) -> list[RunRecords]:
    """Warm up (opening the connections the level needs), then measure the plan's runs,
    awaiting ``before_run(client)`` before each (no request is in flight then).

    After a stall the closed loop's later runs are empty and instant, but still counted, so
    that worker processes meet at the same barriers; a stalled warm-up is returned as the only
    run, to say why nothing was measured."""
    abort = abort or Abort()
    sender = make_transport(transport, loop.connections)
    measured: list[RunRecords] = []
    async with make_client(base_url, sender, headers) as client:
        warmup = None
        plan = loop.plan
        if plan.warmup:
            warmup = await loop.warm_up(sender, client, abort)
            stop_if_refused(warmup, abort)
        for k in range(1, plan.runs + 1):
            # Whatever the next run costs before its first send (the level's own checks on the
            # runs so far: seen, a 0.2 s import; its requests; a collection) is paid before
            # before_run sets an open loop's start: paid after, it sent run 2 of every level late.
            ended = loop.finished(measured, abort)
            with old_objects_frozen():
                ready = loop.prepare(k, client)
                if before_run is not None:
                    await before_run(client)
                # Decided again after the barrier, where every worker sees the same abort.
                if ended or loop.finished(measured, abort):
                    break
                measured.append(await ready(sender, abort))
            stop_if_refused(measured[-1], abort)
    if warmup is not None and warmup.aborted and warmup.records:
        return [replace(warmup, warmup=True)]
    return measured


def stop_if_refused(run: RunRecords, abort: Abort) -> None:
    """A server that refused every request of a run (HTTP 4xx: a prompt too long for its context,
    a model it does not serve) refuses the next run's too: the level ends now, saying why."""
    errors = [rec.error for rec in run.records]
    if errors and all(e is not None and e.startswith("HTTP 4") for e in errors):
        abort.set(f"the server refused every request of a run ({errors[0]})")


@contextlib.contextmanager
def old_objects_frozen() -> Iterator[None]:
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
    chunk, see benchmarks/client_ceiling.py), else on asyncio's default loop; a level
    :func:`interrupt_measurement` cancels ends in KeyboardInterrupt once it has unwound."""
    try:
        import uvloop
    except ImportError:
        factory = None
    else:
        factory = uvloop.new_event_loop
    interrupted: list[str] = []
    try:
        if not hasattr(asyncio, "Runner"):  # Python 3.10
            if factory is None:
                return asyncio.run(_interruptible(coro, interrupted))
            with _Uvloop310() as runner:
                return runner.run(_interruptible(coro, interrupted))
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(_interruptible(coro, interrupted))
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt(interrupted[0]) from None
        raise


#: The levels being measured in this process now: (their loop, their task, their reasons).
_measuring: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any], list[str]]] = []


async def _interruptible(coro: Coroutine[Any, Any, T], interrupted: list[str]) -> T:
    task = asyncio.current_task()
    assert task is not None
    entry = (asyncio.get_running_loop(), task, interrupted)
    _measuring.append(entry)
    try:
        return await coro
    finally:
        _measuring.remove(entry)


def interrupt_measurement(why: str) -> bool:
    """Cancel every level being measured in this process (from a signal handler: SIGTERM to
    pytest), as asyncio's runner cancels one on Ctrl-C, so that it unwinds its requests and
    then raises KeyboardInterrupt(``why``); False when none is. Raising KeyboardInterrupt in
    the handler instead could land in a transport's callback and be swallowed as a broken
    stream, and the run go on; and asyncio's own Ctrl-C path is not there when SIGINT is
    ignored, as it is in a shell's background job, as CI scripts run pytest."""
    for loop, task, interrupted in list(_measuring):
        interrupted.append(why)
        loop.call_soon_threadsafe(task.cancel)
    return bool(_measuring)


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


async def flush_cache(client: httpx.AsyncClient) -> None:
    """SGLang's ``/flush_cache`` between runs (radix cache, spec counters); idle servers only."""
    try:
        await client.post("/flush_cache", timeout=FLUSH_TIMEOUT_S)
    except httpx.HTTPError:
        pass  # a server without the endpoint measures the same; the run itself will tell if it is down
