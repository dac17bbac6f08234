"""HTTP pieces both APIs of the simulated engine share: request bodies, events, errors."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

_JSON: dict[str, Any] = {"separators": (",", ":")}


class RequestFailed(Exception):
    """The engine failed the request (a fault knob): its error is the stream's last event."""


def is_ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    )


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"invalid JSON: {exc}"}), content_type="application/json"
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps({"error": "the body must be a JSON object"}),
            content_type="application/json",
        )
    return body


def event(data: dict[str, Any]) -> bytes:
    """One server-sent event, compact as SGLang's."""
    return b"data: " + json.dumps(data, **_JSON).encode() + b"\n\n"


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


async def start_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    return resp


def as_uvicorn_says_it(record: logging.LogRecord) -> bool:
    """A request that is not HTTP/1 (SGLang's router probes each worker with an HTTP/2 preface,
    ``PRI * HTTP/2.0``): uvicorn logs one warning line, aiohttp a traceback; say it as SGLang's
    uvicorn does."""
    error = record.exc_info[1] if record.exc_info else None
    if error is not None and type(error).__name__ == "BadHttpMessage":
        record.msg, record.args, record.exc_info, record.exc_text = (
            "WARNING:  Invalid HTTP request received.",
            (),
            None,
            None,
        )
    return True
