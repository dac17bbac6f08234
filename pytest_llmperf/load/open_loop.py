"""Open-loop load: requests arrive on a precomputed schedule, whatever the server does.

A run is one schedule (:mod:`pytest_llmperf.core.schedule`): arrival k is sent at
``start + offset[k]``, an absolute deadline on the monotonic clock, woken by the best timer the
platform has (:mod:`pytest_llmperf.load.pacer`), so lateness never adds up. Its parts:

- the **lead-in** (``lead_s``): arrivals that bring the server to its steady state, not measured;
- the **window** (``window_s``): what is measured. Output tok/s is the tokens that arrive inside
  it ÷ its length; TTFT and e2e are those of the requests that *arrived* inside it, counted from
  the scheduled arrival (what a user waits, client lag and client queue included) and from the
  send;
- the **drain** (up to ``drain_s``): the schedule goes on, so the load does not drop, until every
  request that arrived in the window has its first token; then everything in flight is cut.

With ``max_concurrency`` a request waits for its arrival, then for a free slot (its wait is
reported as queue time, and it is part of its TTFT from the arrival); slots are handed out in
arrival order, one per finished request, so a freed slot never releases a burst.

Saturation: while the window runs, a monitor compares the requests in flight with those at the
window's opening. A backlog that grows beyond what a stable queue's fluctuation explains stops
the run at once (``saturated``): the server completes fewer requests than arrive, and waiting
out the window would only queue more (see
:func:`pytest_llmperf.core.open_loop_figures.saturation`).
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from pytest_llmperf.core.open_loop_figures import saturation
from pytest_llmperf.core.records import OpenLoopRun, RequestRecord, RunRecords
from pytest_llmperf.core.schedule import interleave, schedule_seed
from pytest_llmperf.load.closed_loop import closed_loop
from pytest_llmperf.load.level import (
    WARMUP_OUTPUT_LEN,
    Abort,
    InFlight,
    OpenPlan,
    ReadyRun,
    Source,
    TracePlan,
    request_source,
)
from pytest_llmperf.load.pacer import make_pacer
from pytest_llmperf.load.requests import send_one
from pytest_llmperf.load.workload import Workload

perf_counter = time.perf_counter
#: How often the window's monitor looks at the backlog.
MONITOR_S = 0.05
#: A backlog this much above the window's opening, and growing at this fraction of the
#: arrival rate, is a server that cannot keep up (checked while the run goes).
#: Not before this fraction of the window: a stable queue's backlog moves most at the start.
EARLY_STOP_MIN_GROWTH = 8
EARLY_STOP_SIGMAS = 6.0
EARLY_STOP_GROWTH_FRACTION = 0.2
EARLY_STOP_AFTER = 0.25
#: A level stops after this many runs the server could not keep up with (one alone may be a
#: hiccup of a sustainable server: the next run tells).
SATURATED_RUNS = 2
#: How far ahead of its first arrival a run's schedule starts (the client is idle by then).
START_LEAD_S = 0.02


@dataclass(frozen=True)
class Schedule:
    """One open-loop run: the whole schedule, the arrivals this process sends, and its parts."""

    rate: float
    offsets: list[float]
    #: Indices into ``offsets`` that this process sends (all of them with one worker).
    mine: list[int]
    #: Seconds from the schedule's zero: the window opens at ``lead_s`` and closes
    #: ``window_s`` later; the drain lasts at most ``drain_s`` after that.
    lead_s: float
    window_s: float
    drain_s: float
    max_concurrency: int | None = None


Built = dict[int, tuple[httpx.Request, int, int | None]]


def build_requests(source: Source, schedule: Schedule) -> Built:
    """Every request this process sends in ``schedule``, built before the run (and before its
    start is set): none costs the client time while it sends."""
    return {i: source(i, 1.0) for i in schedule.mine}


async def open_loop(
    transport: httpx.AsyncBaseTransport,
    api: str,
    built: Built,
    schedule: Schedule,
    start: float,
    stall_timeout_s: float = 600.0,
    abort: Abort | None = None,
) -> RunRecords:
    """Send ``schedule``'s arrivals (``built`` by :func:`build_requests`) from ``start`` (a
    ``perf_counter`` time) and record them."""
    run = _OpenRun(transport, api, built, schedule, start, abort or Abort())
    return await run.run(stall_timeout_s)


class _OpenRun:
    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        api: str,
        built: Built,
        schedule: Schedule,
        start: float,
        abort: Abort,
    ) -> None:
        self.transport, self.api, self.schedule, self.start = transport, api, schedule, start
        self.abort = abort
        self.built = built  # its own: _send pops each request as it goes
        self.records: list[RequestRecord] = []
        self.in_flight = InFlight(abort)
        self.slots = (
            asyncio.Semaphore(schedule.max_concurrency) if schedule.max_concurrency else None
        )
        self.next = 0
        self.stopped = False
        self.saturated: str | None = None
        self.window: tuple[float, float] | None = None

    async def run(self, stall_timeout_s: float) -> RunRecords:
        loop = asyncio.get_running_loop()
        cpu0, wall0 = time.process_time(), perf_counter()
        self.deadlines = [self.start + self.schedule.offsets[i] for i in self.schedule.mine]
        self.pacer = make_pacer(loop, self._wake)
        if self.deadlines:
            self.pacer.at(self.deadlines[0])
        watchdog = loop.create_task(self.in_flight.watch(stall_timeout_s))
        try:
            await self._keep_window()
        finally:
            self.stopped = True
            self.pacer.close()
            watchdog.cancel()
            self.in_flight.cut()
            tasks = [task for _, task in self.in_flight.requests.values()]
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        s = self.schedule
        return RunRecords(
            s.max_concurrency or 0,
            sorted(self.records, key=lambda r: r.index),
            [],
            time.process_time() - cpu0,
            perf_counter() - wall0,
            aborted=self.abort.why,
            window=self.window,
            open_loop=OpenLoopRun(
                rate=s.rate,
                start=self.start,
                offsets=s.offsets,
                pacer=self.pacer.kind,
                max_concurrency=s.max_concurrency,
                lead_s=s.lead_s,
                saturated=self.saturated,
            ),
        )

    def _wake(self) -> None:
        """The pacer fired: send every arrival that is due, and arm the next deadline."""
        if self.stopped:
            return
        now = perf_counter()
        deadlines, mine = self.deadlines, self.schedule.mine
        loop = asyncio.get_running_loop()
        while self.next < len(deadlines) and deadlines[self.next] <= now:
            i = mine[self.next]
            task = loop.create_task(self._send(i, deadlines[self.next]))
            self.next += 1
            self.in_flight.add(i, RequestRecord(i), task)  # replaced by the task's own record
        if self.next < len(deadlines):
            self.pacer.at(deadlines[self.next])

    async def _send(self, i: int, arrival: float) -> None:
        rec = RequestRecord(i, arrival=arrival, released=perf_counter())
        task = asyncio.current_task()
        assert task is not None
        self.in_flight.add(i, rec, task)
        self.records.append(rec)
        request, rec.requested, rec.sent_prompt_tokens = self.built.pop(i)
        try:
            if self.slots is None:
                await send_one(self.transport, request, self.api, rec)
                return
            try:
                await self.slots.acquire()
            except asyncio.CancelledError:
                rec.start = rec.end = perf_counter()  # cut while it waited for a slot
                return
            try:
                await send_one(self.transport, request, self.api, rec)
            finally:
                self.slots.release()
        finally:
            self.in_flight.remove(i)

    async def _keep_window(self) -> None:
        """Open the window, watch the backlog, close it, then drain the window's arrivals."""
        s = self.schedule
        opened = self.start + s.lead_s
        close = opened + s.window_s
        await asyncio.sleep(max(0.0, opened - perf_counter()))
        at_open = self.in_flight.backlog()
        while (now := perf_counter()) < close and not self.abort.is_set():
            await asyncio.sleep(min(MONITOR_S, max(0.0, close - now)))
            growth = self.in_flight.backlog() - at_open
            elapsed = perf_counter() - opened
            if elapsed >= EARLY_STOP_AFTER * s.window_s and growth > max(
                EARLY_STOP_MIN_GROWTH,
                EARLY_STOP_SIGMAS * math.sqrt(at_open + 1.0),
                EARLY_STOP_GROWTH_FRACTION * s.rate * elapsed,
            ):
                self.saturated = (
                    f"the backlog grew from {at_open} to {at_open + growth} requests in "
                    f"{elapsed:.2f} s of the window, at {s.rate:g} requests/s offered: the "
                    "server completes fewer requests than arrive; the run stopped early"
                )
                self.window = (opened, perf_counter())
                return
        self.window = (opened, min(perf_counter(), close))
        drained = close + s.drain_s
        while perf_counter() < drained and not self.abort.is_set():
            waiting = [
                rec
                for rec, _ in self.in_flight.requests.values()
                if opened <= rec.arrival < close and not rec.chunk_times and rec.end == 0.0
            ]
            if not waiting and self.next > 0:
                return
            await asyncio.sleep(MONITOR_S / 5)


def run_parts(
    rate: float, window_s: float, min_arrivals: int, settle_s: float
) -> tuple[float, float, float]:
    """A run's lead-in, window and drain (seconds) at ``rate``: the window holds at least
    ``min_arrivals`` arrivals; the lead-in is half the window (at least ``settle_s``), the
    drain at most half of it."""
    window = max(window_s, min_arrivals / rate)
    return max(settle_s, window / 2), window, window / 2


@dataclass
class OpenLevel:
    """An open-loop level (see :class:`~pytest_llmperf.load.level.Loop`), after a one-request
    warm-up. Run k's schedule is seeded from the workload's salt (the point's key) and k, so every
    profile measured at this point is offered the same arrivals. With several worker processes
    this one sends arrivals ``share[0]``, ``share[0] + share[1]``, … from the shared
    ``start_at()``. A second run found not sustainable ends the level: more would only queue."""

    plan: OpenPlan
    workload: Workload
    timeout_s: float = 600.0
    share: tuple[int, int] = (0, 1)
    start_at: Callable[[], float] | None = None
    connections: int = field(default=0, init=False)

    async def warm_up(
        self, sender: httpx.AsyncBaseTransport, client: httpx.AsyncClient, abort: Abort
    ) -> RunRecords:
        source = request_source(client, self.workload, 0, WARMUP_OUTPUT_LEN, prebuild=1)
        return await closed_loop(
            sender, self.workload.api, source, 1, 1, self.timeout_s, abort=abort
        )

    def prepare(self, k: int, client: httpx.AsyncClient) -> ReadyRun:
        plan, workload = self.plan, self.workload
        number = plan.first_run + k - 1
        rate = plan.arrivals.rate
        if isinstance(plan, TracePlan):  # its own times, all of them measured
            offsets = list(plan.offsets)
            lead, window, drain = 0.0, offsets[-1] + 1e-6, max(1.0, offsets[-1] / 2)
        else:
            lead, window, drain = run_parts(
                rate, plan.window_s or 0.0, plan.min_arrivals, plan.settle_s
            )
            seed = schedule_seed(workload.salt, number, workload.seed)
            offsets = plan.arrivals.offsets([lead, window, drain], seed)
        index, parts = self.share
        cap = plan.max_concurrency
        if cap is not None and parts > 1:
            cap = max(1, round(cap / parts))
        schedule = Schedule(
            rate, offsets, interleave(offsets, parts)[index], lead, window, drain, cap
        )
        built = build_requests(request_source(client, workload, number), schedule)
        return functools.partial(self._run, schedule, built)

    async def _run(
        self, schedule: Schedule, built: Built, sender: httpx.AsyncBaseTransport, abort: Abort
    ) -> RunRecords:
        start = self.start_at() if self.start_at is not None else perf_counter() + START_LEAD_S
        api = self.workload.api
        return await open_loop(sender, api, built, schedule, start, self.timeout_s, abort)

    def finished(self, runs: list[RunRecords], abort: Abort) -> bool:
        saturated = sum(saturation(run) is not None for run in runs)
        return abort.is_set() or (self.share[1] == 1 and saturated >= SATURATED_RUNS)
