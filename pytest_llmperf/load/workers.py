"""Measuring a level: :func:`measure`, from this process or from worker processes when one
core is not enough.

A closed level's C is split across W processes (C₁ + … + C_W = C); each runs its own event loop
and closed loop, and all draw request indices from one shared counter, so together they keep
exactly C requests in flight until the N-th is sent. An open level's schedule is dealt to the
workers, which start it at one shared time. A barrier starts every run in all workers at once,
and the runs are merged into one (``perf_counter`` is CLOCK_MONOTONIC, shared by all
processes of a machine). A closed level with one worker, or C = 1, stays in this process.
"""

from __future__ import annotations

import asyncio
import functools
import math
import multiprocessing
import os
import queue as queue_module
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import replace
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

import httpx

from pytest_llmperf.core.records import RunRecords
from pytest_llmperf.load.closed_loop import ClosedLevel, Progress
from pytest_llmperf.load.level import (
    ELSEWHERE,
    Abort,
    ClosedPlan,
    LevelPlan,
    Loop,
    measure_level_async,
    run_in_fresh_loop,
)
from pytest_llmperf.load.open_loop import OpenLevel
from pytest_llmperf.load.workload import Workload

RESULT_TIMEOUT_S = 5.0
#: How often a worker looks whether the process that started it is still there.
PARENT_CHECK_S = 0.5
#: An open loop's shared schedule starts this long after the leader passes the barrier.
START_AFTER_BARRIER_S = 0.05
perf_counter = time.perf_counter
BetweenRuns = Callable[[httpx.AsyncClient], Awaitable[Any]]


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal positive shares, largest first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def measure(
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    *,
    workers: int = 1,
    between_runs: BetweenRuns | None = None,
    progress: Callable[[int], Progress] | None = None,
    transport: str = "aiohttp",
    timeout_s: float = 600.0,
    headers: dict[str, str] | None = None,
) -> list[RunRecords]:
    """``plan.runs`` runs of the level from ``workers`` processes; ``between_runs`` (e.g.
    SGLang's cache flush) runs once before each run, while no request is in flight.
    ``progress`` is reported from this process only, so not with several workers."""
    if isinstance(plan, ClosedPlan):
        workers = min(workers, plan.concurrency)
    # An open loop always sends from worker processes (one at least), whatever C: a thread of
    # the pytest process (a server's log copier, a user's plugin) holding the GIL for a few
    # milliseconds would delay a send by as much (seen: 8-22 ms at the 99th percentile in
    # pytest, 0.5 ms in a process of its own).
    if workers <= 1 and isinstance(plan, ClosedPlan):
        abort = Abort()

        async def before_run(client: httpx.AsyncClient) -> None:
            if between_runs is not None and not abort.is_set():
                await between_runs(client)

        loop = ClosedLevel(plan, workload, timeout_s, progress=progress)
        return _measure_here(base_url, loop, (transport, headers), before_run, abort)
    ctx = _context()
    barrier = ctx.Barrier(workers)
    counter = ctx.Value("q", 0)
    stalled = ctx.Value("b", 0)
    start = ctx.Value("d", 0.0)
    results = ctx.Queue()
    shares = split(max(plan.concurrency, workers), workers)
    procs = [
        ctx.Process(
            target=_worker_main,
            daemon=True,
            name=f"llmperf-client-{i}",
            args=(
                i,
                base_url,
                workload,
                _share_of(plan, c) if isinstance(plan, ClosedPlan) else plan,
                barrier,
                counter,
                results,
                between_runs if i == 0 else None,
                stalled,
                (i, workers, start),
                (transport, timeout_s, headers),
                _identity(),
            ),
        )
        for i, c in enumerate(shares)
    ]
    for p in procs:
        p.start()
    collected = _collect(procs, results, barrier)
    # A stalled warm-up comes back as a single run (see measure_level_async): merge as many
    # runs as every worker has.
    runs = min(len(part) for part in collected.values())
    return [merge([collected[i][k] for i in range(workers)], plan.concurrency) for k in range(runs)]


def _measure_here(
    base_url: str,
    loop: Loop,
    client: tuple[str, dict[str, str] | None],
    before_run: BetweenRuns,
    abort: Abort,
) -> list[RunRecords]:
    """The level in this process, on a fresh event loop."""
    transport, headers = client
    return run_in_fresh_loop(
        measure_level_async(
            base_url,
            loop,
            transport=transport,
            headers=headers,
            before_run=before_run,
            abort=abort,
        )
    )


def _share_of(plan: ClosedPlan, slots: int) -> ClosedPlan:
    """A worker's part of a closed level: ``slots`` of its C, and as large a part of the
    requests the server runs at once (the first ones it admits come from every worker)."""
    in_service = plan.in_service
    if in_service is not None:
        in_service = max(1, min(slots, math.ceil(in_service * slots / plan.concurrency)))
    return replace(plan, concurrency=slots, in_service=in_service)


def _context() -> Any:
    """Never fork a pytest process with live threads: a fork server (a fresh process that has
    imported the load generator once, then forks a worker in milliseconds instead of the
    half-second a spawned interpreter takes to import it: an open-loop level starts one per
    level, a capacity search one per probe), else spawn."""
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            # scipy.special too: a worker's first check of a level's runs (a t quantile)
            # imported it, 0.2 s of every open level's second run, in every worker.
            _CONTEXT.set_forkserver_preload(["pytest_llmperf.load.workers", "scipy.special"])
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


_CONTEXT: Any = None


def _collect(
    procs: list[Any], results: Queue[tuple[int, list[RunRecords] | str]], barrier: Barrier
) -> dict[int, list[RunRecords]]:
    """Every worker's runs, or the first worker's failure; no worker is left running."""
    collected: dict[int, list[RunRecords]] = {}
    try:
        while len(collected) < len(procs):
            try:
                index, payload = results.get(timeout=RESULT_TIMEOUT_S)
            except queue_module.Empty:
                dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                if dead:
                    raise RuntimeError(
                        f"load-generator worker {dead[0].name} exited with code {dead[0].exitcode}"
                    ) from None
                continue
            if isinstance(payload, str):
                raise RuntimeError(f"load-generator worker {index} failed:\n{payload}")
            collected[index] = payload
    finally:
        barrier.abort()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return collected


def merge(parts: list[RunRecords], concurrency: int) -> RunRecords:
    """One run out of the workers' simultaneous runs."""
    records = sorted((rec for part in parts for rec in part.records), key=lambda rec: rec.index)
    wall = max(p.wall_s for p in parts)
    busiest = max(p.client_cpu_s / p.wall_s if p.wall_s else 0.0 for p in parts)
    lags = [lag for p in parts for lag in p.loop_lag_s]
    aborted = [p.aborted for p in parts if p.aborted]
    # The stalled request's own reason first, not a bystander's.
    aborted.sort(key=lambda reason: reason == ELSEWHERE)
    open_loop = parts[0].open_loop
    if open_loop is not None:
        # One schedule dealt to every worker: saturated if any share was.
        saturated = next(
            (p.open_loop.saturated for p in parts if p.open_loop and p.open_loop.saturated), None
        )
        open_loop = replace(open_loop, saturated=saturated)
    # The CPU check is per core: report the busiest worker's share, scaled to the merged wall time.
    # The window in which every worker's C_i streams were measured: the latest open, the
    # earliest close (they start at one barrier, so the windows nearly coincide).
    windows = [p.window for p in parts]
    window = None
    if windows and all(w is not None for w in windows):
        opened = max(w[0] for w in windows if w is not None)
        closed = min(w[1] for w in windows if w is not None)
        window = (opened, closed) if closed > opened else None
    return RunRecords(
        concurrency,
        records,
        lags,
        busiest * wall,
        wall,
        aborted=aborted[0] if aborted else None,
        window=window,
        open_loop=open_loop,
    )


def _worker_main(
    index: int,
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    barrier: Barrier,
    counter: Any,
    results: Queue[tuple[int, list[RunRecords] | str]],
    between_runs: BetweenRuns | None,
    stalled: Any,
    share: tuple[int, int, Any],
    client: tuple[str, float, dict[str, str] | None],
    parent: tuple[int, float],
) -> None:
    exit_with(parent)
    try:
        abort = Abort(stalled)
        index, parts, start = share
        before_run = functools.partial(
            _synchronized, barrier, counter, index == 0, between_runs, abort, start
        )
        transport, timeout_s, headers = client
        loop: Loop
        if isinstance(plan, ClosedPlan):
            claim = functools.partial(_claim, counter, plan.request_limit)
            loop = ClosedLevel(plan, workload, timeout_s, claim=claim)
        else:
            loop = OpenLevel(plan, workload, timeout_s, (index, parts), lambda: float(start.value))
        results.put((index, _measure_here(base_url, loop, (transport, headers), before_run, abort)))
    except BaseException:
        results.put((index, traceback.format_exc()))


def _identity() -> tuple[int, float]:
    """This process, as a worker can tell it from a later process given its PID."""
    import psutil

    return os.getpid(), psutil.Process().create_time()


def exit_with(parent: tuple[int, float]) -> None:
    """Exit this worker as soon as the process that started it is gone.

    A SIGKILL of pytest (a CI job cancelled hard, a Slurm job past its time) gives it no chance
    to stop its workers, and nothing else would: a worker waits at its barrier for runs that
    will never come, streams from a server a watchdog is still stopping, or its queue's feeder
    thread holds its exit. A daemon thread checks every :data:`PARENT_CHECK_S` and ends the
    process at once (``os._exit``: no feeder to join, no loop to unwind)."""
    import psutil

    pid, created = parent

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                pass
            os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="llmperf-parent-watch", daemon=True).start()


#: A worker's exit code when it ended because the process that started it was gone.
EXIT_PARENT_GONE = 75


def _claim(counter: Any, total: int) -> int | None:
    with counter.get_lock():
        index = counter.value
        if index >= total:
            return None
        counter.value = index + 1
        return index


async def _synchronized(
    barrier: Barrier,
    counter: Any,
    leader: bool,
    between_runs: BetweenRuns | None,
    abort: Abort,
    start: Any,
    client: httpx.AsyncClient,
) -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, barrier.wait)  # every worker idle: safe to flush and reset
    if leader:
        counter.value = 0
        if between_runs is not None and not abort.is_set():
            await between_runs(client)
        # An open loop's schedule starts at one time for all (CLOCK_MONOTONIC is machine-wide).
        start.value = perf_counter() + START_AFTER_BARRIER_S
    await loop.run_in_executor(None, barrier.wait)  # then all start together
