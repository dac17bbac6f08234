"""A server that answers health checks like a good one, then breaks its streams on purpose.

``python hostile_server.py --port P --behaviour NAME``; every behaviour applies to both SGLang's
``/generate`` and OpenAI's ``/v1/completions``. The events are shaped like SGLang's own (the
cumulative ``meta_info`` of /generate, OpenAI's content events and final usage chunk), so only the
one thing named by the behaviour is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

BEHAVIOURS = {
    "ok": "a correct stream",
    "http-500": "HTTP 500 with a text body",
    "http-400": "HTTP 400 for every request, as SGLang refuses a prompt longer than its context",
    "json-body": "200 with a plain JSON body instead of an event stream",
    "empty-body": "200 text/event-stream with no body at all",
    "not-sse": "200 with text that holds no data: events",
    "error-event": "an error event from the server, then [DONE]",
    "bad-json-middle": "a middle event cut short (not a JSON object)",
    "bad-json-final": "a final event that is not valid JSON",
    "null-tokens": "completion_tokens: null",
    "no-counts": "no meta_info (native) / no usage (OpenAI)",
    "cut": "some tokens, then the connection closes without [DONE]",
    "stall": "two tokens, then nothing while the connection stays open",
    "keepalive": "only SSE keep-alive comments, never a token",
    "no-headers": "accepts the request and never answers",
}
TOKEN_GAP_S = 0.002


def native_event(n: int, final: bool) -> dict:
    return {
        "text": "tok " * n,
        "output_ids": list(range(n)),
        "meta_info": {
            "id": "r",
            "prompt_tokens": 5,
            "completion_tokens": n,
            "finish_reason": {"type": "length", "length": n} if final else None,
        },
    }


def openai_events(n: int) -> list[dict]:
    events = [
        {"id": "c", "object": "text_completion", "choices": [
            {"index": 0, "text": "tok ", "finish_reason": "length" if k == n else None}
        ]}
        for k in range(1, n + 1)
    ]  # fmt: skip
    events.append({"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}})
    return events


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


class Hostile:
    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def stream(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        native = request.path == "/generate"
        n = (
            (body.get("sampling_params") or {}).get("max_new_tokens")
            if native
            else body.get("max_tokens")
        )
        n = int(n or 16)
        b = self.behaviour
        if b == "http-400":
            return web.json_response(
                {"error": {"message": "The input (2048 tokens) is longer than the model's context "
                           "length (2048 tokens).", "code": 400}},
                status=400,
            )  # fmt: skip
        if b == "http-500":
            return web.Response(status=500, text="Internal Server Error: the engine is gone")
        if b == "json-body":
            obj = native_event(n, True) if native else openai_events(n)[-1]
            return web.json_response(obj)
        if b == "no-headers":
            await asyncio.sleep(3600)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if b == "empty-body":
            return resp
        if b == "not-sse":
            await resp.write(b"<html><body>Welcome to nginx!</body></html>\n")
            return resp
        if b == "error-event":
            await resp.write(sse({"error": {"message": "CUDA out of memory", "code": 500}}))
            await resp.write(sse(b"[DONE]"))
            return resp
        if b == "keepalive":
            while True:
                await resp.write(b": keepalive\n\n")
                await asyncio.sleep(0.2)
        events = [native_event(k, k == n) for k in range(1, n + 1)] if native else openai_events(n)
        payloads = [json.dumps(e).encode() for e in events]
        if b == "bad-json-middle":
            payloads[len(payloads) // 2] = payloads[len(payloads) // 2][:-7]
        if b == "bad-json-final":
            last = -1 if native else -2  # OpenAI: the last content event, which the client parses
            payloads[last] = payloads[last][:-1] + b", oops}"
        if b == "null-tokens":
            payloads = [
                p.replace(b'"completion_tokens": ', b'"completion_tokens": null, "was": ')
                for p in payloads
            ]
        if b == "no-counts":
            payloads = (
                [json.dumps({"text": "tok " * (k + 1)}).encode() for k in range(n)]
                if native
                else payloads[:-1]
            )
        for k, payload in enumerate(payloads):
            if b == "cut" and k == len(payloads) // 2:
                request.transport.close()  # type: ignore[union-attr]
                return resp
            if b == "stall" and k == 2:
                await asyncio.sleep(3600)
            await resp.write(sse(payload))
            await asyncio.sleep(TOKEN_GAP_S)
        await resp.write(sse(b"[DONE]"))
        return resp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--behaviour", choices=sorted(BEHAVIOURS), required=True)
    args = parser.parse_args()
    hostile = Hostile(args.behaviour)
    app = web.Application()
    for path in ("/health", "/health_generate"):
        app.router.add_get(path, hostile.health)
    for path in ("/generate", "/v1/completions"):
        app.router.add_post(path, hostile.stream)
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
