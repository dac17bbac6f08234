"""A streaming server whose pacing is known exactly, and that is never the bottleneck.

``python -m pytest_llmperf.sim.paced --port P [--itl-ms 0] [--ttft-ms 0] [--prefill-us-per-token 0]
[--tokens-per-chunk 1] [--slots 0] [--cpu 0]``

For checking clients, not servers: the accuracy tests and ``benchmarks/client_ceiling.py``.
Serves SGLang's native ``POST /generate`` and OpenAI ``POST /v1/completions`` (plus
``/v1/chat/completions``) over HTTP/1.1 keep-alive with chunked SSE, ``--tokens-per-chunk``
tokens per event (several, like EAGLE). Each response body is built once per (endpoint,
length, options) and cached, so a request costs one header parse and one ``write``.

- ``--itl-ms 0`` (zero delay): the whole stream leaves in one write.
- ``--slots N``: at most N streams at once, later requests wait in arrival order (an M/D/N queue
  whose capacity is exactly N ÷ (TTFT + L·X) requests/s for L-token streams).
- ``--itl-ms X``: event j (j = 1, 2, …) is written at arrival + j·X ms on an absolute
  timeline, so a request of L tokens lasts exactly ceil(L / tokens-per-chunk)·X ms.
- ``--ttft-ms T --prefill-us-per-token U``: the first event waits T ms plus U µs per prompt
  token more (a prompt of token ids counts its ids, a text prompt 8), so TTFT is known exactly:
  T + U·n/1000 + X ms. Token ids are reported back as ``prompt_tokens``.

The server notes, per request, when it arrived and when its first and last events were
written (``time.perf_counter``: CLOCK_MONOTONIC, comparable across processes on one
machine); ``GET /stats`` returns and clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

perf_counter = time.perf_counter
_CACHE: dict[tuple, list[bytes]] = {}
#: ``--slots N``: streams served at once, and the requests waiting for one (FIFO).
_SLOTS = {"free": 0, "limited": False}
_WAITING: deque[Callable[[], None]] = deque()
STATS: list[tuple[float, float, float]] = []  # (arrived, first written, last written)


def command(port: int, itl_ms: float, *options: str) -> list[str]:
    """The command line that starts this server on ``port`` (``options``: its other flags)."""
    return [
        sys.executable,
        "-m",
        "pytest_llmperf.sim.paced",
        "--port",
        str(port),
        "--itl-ms",
        str(itl_ms),
        *options,
    ]


def _events(
    path: str, n: int, usage_each: bool, chat: bool, per_chunk: int, prompt: int = 8
) -> list[bytes]:
    key = (path, n, usage_each, chat, per_chunk, prompt)
    if key in _CACHE:
        return _CACHE[key]
    out = []
    text = ""
    done = 0
    for k in [*range(per_chunk, n, per_chunk), n]:
        word = "".join(f" w{j % 97}" for j in range(done + 1, k + 1))
        done = k
        text += word
        if path == "/generate":
            meta: dict[str, Any] = {
                "id": "bench",
                "finish_reason": None,
                "prompt_tokens": prompt,
                "completion_tokens": k,
                "cached_tokens": 0,
            }
            if k == n:
                meta["finish_reason"] = {"type": "length", "length": n}
            obj: dict[str, Any] = {"text": text, "meta_info": meta}
        else:
            usage = (
                {"prompt_tokens": prompt, "completion_tokens": k, "total_tokens": prompt + k}
                if usage_each
                else None
            )
            choice = (
                {
                    "index": 0,
                    "delta": {"content": word},
                    "finish_reason": "length" if k == n else None,
                }
                if chat
                else {
                    "index": 0,
                    "text": word,
                    "logprobs": None,
                    "finish_reason": "length" if k == n else None,
                }
            )
            obj = {
                "id": "cmpl-bench",
                "object": "text_completion",
                "created": 0,
                "model": "bench",
                "choices": [choice],
                "usage": usage,
            }
        out.append(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")
    if path != "/generate":
        final = {
            "id": "cmpl-bench",
            "object": "text_completion",
            "created": 0,
            "model": "bench",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n},
        }
        out.append(b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    framed = [b"%x\r\n%s\r\n" % (len(e), e) for e in out]
    framed[-1] += b"0\r\n\r\n"
    _CACHE[key] = framed
    return framed


def _one_chunk(events: list[bytes]) -> bytes:
    """A whole zero-delay stream as a single HTTP chunk (``--framing stream``)."""
    body = b"".join(e.split(b"\r\n", 1)[1].removesuffix(b"0\r\n\r\n")[:-2] for e in events)
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@dataclass(frozen=True)
class Pacing:
    """How each stream is paced: the command-line options, in their units."""

    itl_ms: float = 0.0
    tokens_per_chunk: int = 1
    framing: str = "event"  # "event" or "stream"
    ttft_ms: float = 0.0
    prefill_us_per_token: float = 0.0
    extra_prompt_tokens: int = 0
    #: Serve at most this many streams at once; the rest wait in arrival order (0: no limit).
    slots: int = 0


class SSEProtocol(asyncio.Protocol):
    def __init__(self, pacing: Pacing) -> None:
        self.itl_s = pacing.itl_ms / 1000.0
        self.per_chunk = pacing.tokens_per_chunk
        self.framing = pacing.framing
        self.ttft_s = pacing.ttft_ms / 1000.0
        self.prefill_s_per_token = pacing.prefill_us_per_token / 1e6
        self.extra_prompt_tokens = pacing.extra_prompt_tokens
        self.buf = b""
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set on connection_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self.handle(head.split(" ", 2), body)

    def handle(self, request_line: list[str], body: bytes) -> None:
        arrived = perf_counter()
        method, path = request_line[0], request_line[1].split("?")[0]
        if method == "GET" and path in ("/stats", "/health", "/server_info", "/get_server_info"):
            payload = json.dumps(STATS if path == "/stats" else {}).encode()
            if path == "/stats":
                STATS.clear()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
            return
        if method == "GET" and path == "/v1/models":
            payload = (
                b'{"object":"list","data":[{"id":"bench","object":"model","owned_by":"bench"}]}'
            )
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
            return
        req = json.loads(body or b"{}")
        chat = path.endswith("/chat/completions")
        if path == "/generate":
            n = int((req.get("sampling_params") or {}).get("max_new_tokens", 16))
        else:
            n = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
        usage_each = bool((req.get("stream_options") or {}).get("continuous_usage_stats"))
        ids = req.get("input_ids") if path == "/generate" else req.get("prompt")
        prompt = len(ids) if isinstance(ids, list) and ids and isinstance(ids[0], int) else 8
        reported = prompt + self.extra_prompt_tokens
        events = _events(path, n, usage_each, chat, self.per_chunk, reported)
        first_s = self.ttft_s + self.prefill_s_per_token * prompt
        if self.itl_s <= 0 and first_s <= 0:
            self.transport.write(
                _HEAD + (_one_chunk(events) if self.framing == "stream" else b"".join(events))
            )
            now = perf_counter()
            STATS.append((arrived, now, now))
            return
        loop = asyncio.get_running_loop()
        # Trailing events (OpenAI's usage chunk, [DONE]) leave with the last token event.
        token_events = events[: (n + self.per_chunk - 1) // self.per_chunk]
        trailer = b"".join(events[len(token_events) :])
        first: list[float] = []
        transport = self.transport

        def cut() -> None:
            # A client that went away mid-stream (a window's close) still arrived: logged with
            # -1 for the writes that never happened.
            STATS.append((arrived, first[0] if first else -1.0, -1.0))
            _release()

        def begin() -> None:
            if transport.is_closing():
                cut()
                return
            transport.write(_HEAD)
            start = loop.time()

            def send(k: int) -> None:
                if transport.is_closing():
                    cut()
                    return
                last = k + 1 == len(token_events)
                transport.write(token_events[k] + (trailer if last else b""))
                if not first:
                    first.append(perf_counter())
                if last:
                    STATS.append((arrived, first[0], perf_counter()))
                    _release()
                else:
                    loop.call_at(start + first_s + (k + 2) * self.itl_s, send, k + 1)

            loop.call_at(start + first_s + self.itl_s, send, 0)

        _admit(begin)


def _admit(begin: Callable[[], None]) -> None:
    """Begin a stream now, or (every ``--slots`` busy) when a slot frees, in arrival order."""
    if not _SLOTS["limited"]:
        begin()
    elif _SLOTS["free"] > 0:
        _SLOTS["free"] -= 1
        begin()
    else:
        _WAITING.append(begin)


def _release() -> None:
    """A stream ended (or its client left): its slot goes to the longest-waiting request."""
    if not _SLOTS["limited"]:
        return
    if _WAITING:
        _WAITING.popleft()()
    else:
        _SLOTS["free"] += 1


async def serve(port: int, pacing: Pacing) -> None:
    loop = asyncio.get_running_loop()
    if pacing.slots:
        _SLOTS.update(free=pacing.slots, limited=True)
    server = await loop.create_server(lambda: SSEProtocol(pacing), "127.0.0.1", port, backlog=4096)
    print(f"ready on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--itl-ms", type=float, default=0.0, help="gap between events; 0 sends each stream at once"
    )
    parser.add_argument(
        "--tokens-per-chunk", type=int, default=1, help="tokens per event (EAGLE-like when > 1)"
    )
    parser.add_argument(
        "--framing",
        choices=("event", "stream"),
        default="event",
        help="HTTP chunk per SSE event (as uvicorn sends), or one per zero-delay stream",
    )
    parser.add_argument(
        "--ttft-ms", type=float, default=0.0, help="fixed wait before the first event"
    )
    parser.add_argument(
        "--prefill-us-per-token",
        type=float,
        default=0.0,
        help="more wait before the first event per prompt token",
    )
    parser.add_argument(
        "--extra-prompt-tokens",
        type=int,
        default=0,
        help="report this many prompt tokens more than were sent (a server that adds a BOS)",
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=0,
        help="serve at most this many streams at once, the rest in arrival order (a known capacity)",
    )
    parser.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU core")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    pacing = Pacing(**{f.name: getattr(args, f.name) for f in fields(Pacing)})
    asyncio.run(serve(args.port, pacing))


if __name__ == "__main__":
    main()
