"""An httpx transport that sends requests through aiohttp.

The load generator keeps httpx's API (``AsyncClient.stream``, ``Response.aiter_raw``) but
reads bytes through aiohttp, whose C-accelerated HTTP parser streams several times faster
than httpcore's pure-Python h11 (``benchmarks/client_ceiling.py`` measures both). Errors are
translated into httpx's exception classes, so callers handle one family.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx

# aiohttp's 64 KiB default read buffer can fill under many fast streams (vLLM #39963);
# SGLang's bench_serving uses 10 MB. 4 MiB per connection is ample for SSE.
READ_BUFSIZE = 4 * 1024 * 1024
# asyncio's selector transport allocates a 256 KiB bytes object for every recv(); for the
# small SSE reads of a paced stream that allocation costs more than the read itself
# (benchmarks/client_ceiling.py). 64 KiB keeps it on the heap. uvloop has its own buffer.
SOCKET_READ_SIZE = 64 * 1024
STALE_CONNECTION_RETRIES = 3
_SKIP_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


class AiohttpTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncClient(transport=AiohttpTransport())``: one pooled aiohttp session."""

    def __init__(self, *, max_connections: int = 0) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=None)
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                read_bufsize=READ_BUFSIZE,
                timeout=aiohttp.ClientTimeout(total=None),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeout.get("connect"), sock_read=timeout.get("read")
        )
        headers = [
            (k, v) for k, v in request.headers.multi_items() if k.lower() not in _SKIP_HEADERS
        ]
        body = await request.aread()
        try:
            for attempt in range(STALE_CONNECTION_RETRIES + 1):
                try:
                    response = await self._send(request, headers, body, client_timeout)
                    break
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    # A pooled connection the server had closed (llama.cpp's server closes after
                    # each stream although it offers keep-alive): a closed loop sends the next
                    # request before the close arrives. Nothing reached the server; the failed
                    # connection is dropped and the request goes out on another.
                    if attempt == STALE_CONNECTION_RETRIES:
                        raise
        except asyncio.TimeoutError as exc:
            raise httpx.ReadTimeout(
                f"no response headers within {timeout.get('read')} s", request=request
            ) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.RemoteProtocolError(
                f"{type(exc).__name__}: {exc}", request=request
            ) from exc
        _shrink_socket_reads(response)
        return httpx.Response(
            status_code=response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_AiohttpStream(response, request),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def _send(
        self, request: httpx.Request, headers: list, body: bytes, timeout: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        return await self._get_session().request(
            request.method,
            str(request.url),
            headers=headers,
            data=body or None,
            timeout=timeout,
            allow_redirects=False,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _shrink_socket_reads(response: aiohttp.ClientResponse) -> None:
    connection = response.connection
    transport = connection.transport if connection is not None else None
    if transport is not None and getattr(transport, "max_size", 0) > SOCKET_READ_SIZE:
        transport.max_size = SOCKET_READ_SIZE  # type: ignore[attr-defined]  # asyncio's selector transport


class _AiohttpStream(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.content.iter_any():
                yield data
        except asyncio.TimeoutError as exc:
            raise httpx.ReadTimeout(
                "the stream stalled: no data within the read timeout", request=self._request
            ) from exc
        except aiohttp.ClientError as exc:
            raise httpx.RemoteProtocolError(
                f"{type(exc).__name__}: {exc}", request=self._request
            ) from exc

    async def aclose(self) -> None:
        self._response.release()


def make_transport(kind: str, concurrency: int) -> httpx.AsyncBaseTransport:
    """The measured-fastest transport (``aiohttp``), or httpx's own httpcore/h11 (``httpx``)."""
    if kind == "aiohttp":
        return AiohttpTransport()
    if kind == "httpx":
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrency)
        return httpx.AsyncHTTPTransport(limits=limits)
    raise ValueError(f"unknown transport {kind!r}; choose 'aiohttp' or 'httpx'")


def make_client(
    base_url: str, transport: httpx.AsyncBaseTransport, headers: dict[str, str] | None = None
) -> httpx.AsyncClient:
    """An AsyncClient over ``transport`` with a connect timeout and no per-read timeouts.

    A timeout per read arms and cancels a timer for every chunk; the load generator instead
    watches all streams with one watchdog (``level.InFlight.watch``).
    """
    return httpx.AsyncClient(
        base_url=base_url,
        transport=transport,
        timeout=httpx.Timeout(None, connect=30.0),
        headers=headers,
    )
