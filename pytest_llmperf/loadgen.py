"""Closed-loop load generator: exactly C requests in flight until N are done.

Each of C workers sends its next request the moment its previous one ends, so the server
sees C concurrent streams for the whole run except the ramp-down tail. Every request records
its send time, the arrival time of every chunk that carried tokens, the server's cumulative
token count after that chunk, and the server's final counts (``completion_tokens``,
``spec_verify_ct``). Events that arrive in one socket read share one timestamp and are one
chunk: the client cannot tell them apart in time.

The per-chunk loop is the hot path and stays small: one ``split`` per read and, on SGLang's
native API, no JSON parsing until the stream ends (the cumulative ``completion_tokens`` is
found from the end of the event, where ``meta_info`` sits). Requests are identical per prompt,
so each ``httpx.Request`` is built once by the client and sent straight through its transport:
the client's per-request work (URL merging, header objects) is paid once, not per request.

While a run goes, a monitor samples the event loop's lag and the client's CPU time, so a
run in which the client, not the server, set the pace can be told apart (see
:func:`pytest_llmperf.metrics.client_checks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Iterator, Mapping, TypeVar

import httpx

from pytest_llmperf.prompts import PromptSet, default_prompts
from pytest_llmperf.transport import make_client, make_transport

perf_counter = time.perf_counter
T = TypeVar("T")
LAG_SAMPLE_INTERVAL_S = 0.005
WARMUP_OUTPUT_LEN = 16
_SSE_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


@dataclass(slots=True)
class RequestRecord:
    index: int
    start: float = 0.0
    end: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    #: Server's cumulative completion tokens after each chunk (None where it did not say).
    chunk_cumulative: list[float | None] = field(default_factory=list)
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    last_read: float = 0.0  # for the stall watchdog

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.start if self.chunk_times else None

    def chunk_tokens(self) -> list[float]:
        """Tokens per chunk: exact from the server's running counts, else spread evenly."""
        cum = self.chunk_cumulative
        if cum and all(c is not None for c in cum):
            return [c - p for c, p in zip(cum, [0.0, *cum[:-1]])]
        total = self.completion_tokens or 0
        return [total / len(cum)] * len(cum) if cum else []


@dataclass
class RunRecords:
    """One measured run: N requests at concurrency C, and how the client fared."""

    concurrency: int
    records: list[RequestRecord]
    loop_lag_s: list[float]
    client_cpu_s: float
    wall_s: float


@dataclass(frozen=True)
class Workload:
    """What every request asks for: the same prompts, length and sampling for every run."""

    api: str  # "sglang" (native /generate) or "openai" (/v1/completions)
    output_len: int
    prompts: PromptSet = field(default_factory=default_prompts)
    model: str = "default"
    #: Top-level JSON fields merged into every body, e.g. llama.cpp's ``cache_prompt``.
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return "/generate" if self.api == "sglang" else "/v1/completions"

    def bodies(self, output_len: int) -> list[bytes]:
        """Pre-encoded request bodies, one per prompt, built once per level."""
        length = output_len
        out = []
        for prompt in self.prompts.prompts:
            if self.api == "sglang":
                body: dict[str, Any] = {"text": prompt, "stream": True, "sampling_params": {
                    "max_new_tokens": length, "temperature": 0.0, "ignore_eos": True}}
            else:
                body = {"model": self.model, "prompt": prompt, "max_tokens": length, "temperature": 0.0,
                        "ignore_eos": True, "stream": True,
                        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
            body.update(self.extra_body)
            out.append(json.dumps(body, separators=(",", ":")).encode())
        return out

    def describe(self) -> dict[str, Any]:
        return {"api": self.api, "path": self.path, "output_len": self.output_len, "prompt_set": self.prompts.name,
                "prompt_set_sha256": self.prompts.sha256, "temperature": 0.0, "ignore_eos": True,
                **({"extra_body": dict(self.extra_body)} if self.extra_body else {})}


# ----- stream parsing ----------------------------------------------------------------------

_TOKENS_KEY = b'"completion_tokens":'
_DIGITS = re.compile(rb"\s*(\d+)")
_CONTENT = re.compile(rb'"(?:text|content)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*"')


class _NativeStream:
    """SGLang ``/generate``: cumulative ``meta_info.completion_tokens`` in every event."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count: float | None = 0
        self.last = b""

    def event(self, data: bytes) -> bool:
        """Take one event's payload; True if it carried new tokens."""
        at = data.rfind(_TOKENS_KEY)  # meta_info ends the event: searching from the end is short
        self.last = data
        if at < 0:
            return False
        n = int(_DIGITS.match(data, at + len(_TOKENS_KEY)).group(1))
        grew = n > self.count
        self.count = n
        return grew

    def finish(self, rec: RequestRecord) -> None:
        if not self.last:
            rec.error = rec.error or "empty stream: no events before [DONE]"
            return
        obj = json.loads(self.last)
        if "error" in obj:
            rec.error = f"server error: {_error_text(obj['error'])}"
            return
        meta = obj.get("meta_info") or {}
        rec.completion_tokens = meta.get("completion_tokens")
        rec.prompt_tokens = meta.get("prompt_tokens")
        rec.spec_verify_ct = meta.get("spec_verify_ct")
        reason = meta.get("finish_reason")
        rec.finish_reason = reason.get("type") if isinstance(reason, dict) else reason
        if rec.finish_reason == "abort":
            rec.error = f"server aborted the request: {reason.get('message', reason)}"


class _OpenAIStream:
    """OpenAI ``/v1/completions`` (and chat): text deltas, ``usage`` per chunk when the server
    honours ``continuous_usage_stats``, else only in the final usage chunk.

    A content event is recognised without parsing it (a ``"text"``/``"content"`` key whose
    string is not empty: JSON escapes quotes inside strings, so the key cannot be faked by
    generated text); every other event (role, finish, usage, error) is parsed in full.
    """

    __slots__ = ("count", "usage", "error", "finish_reason", "sglext")

    def __init__(self) -> None:
        self.count: float | None = None
        self.usage: dict | None = None
        self.error: str | None = None
        self.finish_reason: str | None = None
        self.sglext: dict | None = None

    def event(self, data: bytes) -> bool:
        if _CONTENT.search(data) is None:
            self._other(json.loads(data))
            return False
        at = data.rfind(_TOKENS_KEY)
        self.count = int(_DIGITS.match(data, at + len(_TOKENS_KEY)).group(1)) if at >= 0 else None
        if _FINISH.search(data) is not None:
            self._other(json.loads(data))  # the last content event: take finish_reason and usage
        return True

    def _other(self, obj: dict) -> None:
        if "error" in obj:
            self.error = _error_text(obj["error"])
            return
        if obj.get("usage"):
            self.usage = obj["usage"]
        if obj.get("sglext"):
            self.sglext = obj["sglext"]
        for choice in obj.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def finish(self, rec: RequestRecord) -> None:
        if self.error:
            rec.error = f"server error: {self.error}"
            return
        if not self.usage or self.usage.get("completion_tokens") is None:
            rec.error = ("the server reported no usage.completion_tokens; token counts must come from the "
                         "server (stream_options.include_usage)")
            return
        rec.completion_tokens = int(self.usage["completion_tokens"])
        rec.prompt_tokens = self.usage.get("prompt_tokens")
        rec.finish_reason = self.finish_reason
        details = (self.sglext or {}).get("spec_tokens_details") or {}
        rec.spec_verify_ct = details.get("spec_verify_ct")


def _error_text(err: Any) -> str:
    return str(err.get("message", err)) if isinstance(err, dict) else str(err)


async def send_one(transport: httpx.AsyncBaseTransport, request: httpx.Request, api: str,
                   rec: RequestRecord) -> None:
    """Stream one request into ``rec``; errors are recorded, never raised."""
    stream = _NativeStream() if api == "sglang" else _OpenAIStream()
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

    def __enter__(self) -> "_ClientMonitor":
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def closed_loop(transport: httpx.AsyncBaseTransport, api: str, requests: list[httpx.Request],
                      concurrency: int, n_requests: int, stall_timeout_s: float = 600.0,
                      claim: Callable[[], int | None] | None = None) -> RunRecords:
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
                    rec.error = (f"stalled: no data from the server for {silent:.1f} s "
                                 f"(request_timeout_s = {stall_timeout_s:g})")
                    task.cancel()

    cpu0, wall0 = time.process_time(), perf_counter()
    guard = asyncio.get_running_loop().create_task(watchdog())
    try:
        with _ClientMonitor() as monitor:
            await asyncio.gather(*(worker(k) for k in range(min(concurrency, n_requests))))
    finally:
        guard.cancel()
    return RunRecords(concurrency, records, monitor.lags, time.process_time() - cpu0, perf_counter() - wall0)


@dataclass(frozen=True)
class LevelPlan:
    concurrency: int
    n_requests: int
    runs: int
    warmup: bool = True


async def measure_level_async(
    base_url: str, workload: Workload, plan: LevelPlan, *, transport: str = "aiohttp",
    timeout_s: float = 600.0, headers: dict[str, str] | None = None,
    before_run: Callable[[httpx.AsyncClient], Awaitable[Any]] | None = None,
    claim: Callable[[], int | None] | None = None,
) -> list[RunRecords]:
    """Warm up at C (opening the C pooled connections), then measure ``plan.runs`` runs,
    awaiting ``before_run(client)`` before each (no request is in flight then)."""
    sender = make_transport(transport, plan.concurrency)
    async with make_client(base_url, sender, headers) as client:

        def requests(output_len: int) -> list[httpx.Request]:
            return [client.build_request("POST", workload.path, content=body, headers=_SSE_HEADERS)
                    for body in workload.bodies(output_len)]

        if plan.warmup:
            short = requests(min(workload.output_len, WARMUP_OUTPUT_LEN))
            await closed_loop(sender, workload.api, short, plan.concurrency, plan.concurrency, timeout_s)
        measured = requests(workload.output_len)
        runs = []
        for _ in range(plan.runs):
            if before_run is not None:
                await before_run(client)
            with _old_objects_frozen():
                runs.append(await closed_loop(sender, workload.api, measured, plan.concurrency, plan.n_requests,
                                              timeout_s, claim))
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
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) if hasattr(asyncio, "Runner") else _Uvloop310() as runner:
        return runner.run(coro)


class _Uvloop310:
    """``asyncio.Runner`` stand-in for Python 3.10."""

    def __enter__(self) -> "_Uvloop310":
        import uvloop

        self.loop = uvloop.new_event_loop()
        return self

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def __exit__(self, *exc: object) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


def measure_level(base_url: str, workload: Workload, plan: LevelPlan, **kwargs: Any) -> list[RunRecords]:
    """Synchronous entry point for tests and fixtures: a fresh event loop per level."""
    return run_in_fresh_loop(measure_level_async(base_url, workload, plan, **kwargs))


async def flush_cache(client: httpx.AsyncClient) -> None:
    """SGLang's ``/flush_cache`` between runs (radix cache, spec counters); idle servers only."""
    try:
        await client.post("/flush_cache")
    except httpx.HTTPError:
        pass  # a server without the endpoint measures the same; the run itself will tell if it is down
