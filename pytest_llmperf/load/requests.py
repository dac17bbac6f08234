"""One streamed request, read into its record as its chunks arrive.

This is the client's hot path: one ``split`` per read, and the stream parsers of
:mod:`pytest_llmperf.load.streams` parse as little JSON as they can. Events that arrive in one
socket read share one timestamp and are one chunk: the client cannot tell them apart in time.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from pytest_llmperf.core.records import RequestRecord
from pytest_llmperf.load.streams import SHOWN_BYTES, NativeStream, OpenAIStream, StreamError, shown

perf_counter = time.perf_counter


async def send_one(
    transport: httpx.AsyncBaseTransport, request: httpx.Request, api: str, rec: RequestRecord
) -> None:
    """Stream one request into ``rec``; errors are recorded, never raised.

    Every way a server can break the stream becomes the request's error in plain words (see
    :mod:`pytest_llmperf.load.streams`): an HTTP error status, a JSON body where an event stream
    belongs, bytes that hold no ``data:`` event, an event that does not parse, a stream cut
    before ``[DONE]``. Only cancellation of the run itself propagates.
    """
    stream: NativeStream | OpenAIStream = NativeStream() if api == "sglang" else OpenAIStream()
    times, cumulative = rec.chunk_times, rec.chunk_cumulative
    rec.start = rec.last_token = perf_counter()
    done = False
    head = b""  # the first bytes, to quote when the body is not what the API promises
    try:
        response = await transport.handle_async_request(request)
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)
        try:
            if response.status_code != 200:
                text = b"".join([chunk async for chunk in body]).decode("utf-8", "replace")
                rec.error = f"HTTP {response.status_code}: {' '.join(text[:300].split())}"
                return
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("application/json"):
                data = b"".join([chunk async for chunk in body])
                rec.error = (
                    f"the server answered with a plain JSON body (Content-Type {content_type}), "
                    f"not an event stream (text/event-stream): {shown(data)}"
                )
                return
            buf = b""
            async for data in body:
                now = perf_counter()
                if not head:
                    head = data[:SHOWN_BYTES]
                if b"\r" in data:
                    data = data.replace(b"\r\n", b"\n")
                events = (buf + data).split(b"\n\n")
                buf = events.pop()
                grew = False
                for event in events:
                    if event.startswith(b"data:"):
                        payload = event[5:].strip()
                        if payload == b"[DONE]":
                            done = True
                        elif stream.event(payload):
                            grew = True
                if grew:
                    rec.last_token = now
                    times.append(now)
                    cumulative.append(stream.count)
                    if rec.first_answer is None and stream.answered:
                        rec.first_answer = now
        finally:
            await body.aclose()
        if not done:
            rec.error = _unfinished(stream, head, buf)
    except httpx.HTTPError as exc:
        rec.error = _broken(exc, stream, head)
    except StreamError as exc:
        rec.error = str(exc)
    except asyncio.CancelledError:
        if rec.error is None and not rec.cancelled:  # the run itself is being cancelled
            raise
        task = asyncio.current_task()
        if task is not None and hasattr(task, "uncancel"):
            task.uncancel()
    finally:
        rec.end = perf_counter()
    if rec.error is None and not rec.cancelled:
        try:
            stream.finish(rec)
        except StreamError as exc:
            rec.error = str(exc)


def _unfinished(stream: NativeStream | OpenAIStream, head: bytes, rest: bytes) -> str:
    """Why a stream that ended without ``[DONE]`` is not a complete response."""
    error = stream.error_event()
    if error is not None:
        return f"server error: {error}"
    if not head:
        return "the server closed the stream without sending anything (empty body)"
    if not stream.count and not head.lstrip().startswith((b"data:", b":")):
        return f"the response is not an event stream (no 'data:' events); it began: {shown(head)}"
    if rest.strip():
        return f"the stream ended inside an event, before [DONE]: {shown(rest.strip())}"
    return (
        f"the stream ended before [DONE], after {stream.count or 0} tokens: the server closed the "
        "connection mid-response"
    )


def _broken(exc: httpx.HTTPError, stream: NativeStream | OpenAIStream, head: bytes) -> str:
    """A transport error, said as where in the response it happened."""
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    if not head:
        return detail
    after = f" (after {stream.count} tokens)" if stream.count else ""
    return f"the stream broke off before [DONE]{after}: {detail}"
