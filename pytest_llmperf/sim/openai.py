"""The simulated engine's OpenAI API: ``/v1/completions`` and ``/v1/chat/completions``, shaped
as SGLang sends them (a role chunk first on chat, ``usage`` per chunk only with
``continuous_usage_stats``, the speculative counts of 0.5.19+ only when asked for)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from pytest_llmperf.sim.engine import SimRequest
from pytest_llmperf.sim.http import error, event, is_ids

if TYPE_CHECKING:
    from pytest_llmperf.sim.server import SimServer

_NO_SPEC = {
    "spec_verify_ct": 0,
    "spec_accept_length": 0.0,
    "spec_accept_rate": 0.0,
    "spec_num_correct_drafts": 0,
    "spec_num_proposed_drafts": 0,
}


def parse(body: dict[str, Any], chat: bool) -> tuple[str | list[int], int] | web.Response:
    """The prompt (text or token ids) and the tokens asked for, or the 400 response."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return error(400, "'messages' (a non-empty list) is required")
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        return prompt, body.get("max_completion_tokens") or body.get("max_tokens") or 128
    given = body.get("prompt")
    if isinstance(given, list) and len(given) == 1 and not is_ids(given):
        given = given[0]
    if not (isinstance(given, str) or is_ids(given)):
        return error(400, "'prompt' (a string or a list of token ids) is required")
    return cast("str | list[int]", given), body.get("max_tokens") or 16


class Completion:
    """One request's responses: whole (``whole``) or as a stream of events (``events``)."""

    def __init__(
        self, server: SimServer, req: SimRequest, words: tuple, chat: bool, body: dict[str, Any]
    ) -> None:
        self.server, self.req, self.words, self.chat, self.body = server, req, words, chat, body
        self.created = int(time.time())
        self.id = ("chatcmpl-" if chat else "cmpl-") + req.rid
        options = body.get("stream_options") or {}
        self.include_usage = bool(options.get("include_usage"))
        self.continuous = bool(options.get("continuous_usage_stats"))

    def usage(self, n: int) -> dict[str, Any]:
        req = self.req
        out: dict[str, Any] = {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": n,
            "total_tokens": req.prompt_tokens + n,
        }
        if self.server.unmodeled.get("enable_cache_report"):  # as SGLang: only with this flag
            out["prompt_tokens_details"] = {"cached_tokens": req.cached_tokens}
        return out

    def finish(self, n: int) -> str | None:
        reason = self.server.finish_reason(self.req) if n >= self.req.generated else None
        return None if reason is None else reason["type"]

    def whole(self, n: int) -> dict[str, Any]:
        text = "".join(self.words[:n])
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish(n)}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice.update(text=text, logprobs=None)
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.server.served_model_name,
            "choices": [choice],
            "usage": self.usage(n),
        }

    def chunk(self, choices: list, usage: dict[str, Any] | None) -> bytes:
        return event(
            {
                "id": self.id,
                "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created,
                "model": self.server.served_model_name,
                "choices": choices,
                "usage": usage,
            }
        )

    async def events(self) -> AsyncIterator[bytes]:
        server, chat = self.server, self.chat
        sent = 0
        if chat:
            role = {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
            }
            yield self.chunk([role], None)
        async for n in server.tokens(self.req):
            delta = "".join(self.words[sent:n])
            sent = n
            if chat:
                choice = {"index": 0, "delta": {"content": delta}, "finish_reason": None}
            else:
                choice = {
                    "index": 0,
                    "text": delta,
                    "logprobs": None,
                    "finish_reason": self.finish(n),
                    "matched_stop": None,
                }
            yield self.chunk([choice], self.usage(n) if self.continuous else None)
        if chat:
            last = {"index": 0, "delta": {}, "finish_reason": self.finish(sent)}
            yield self.chunk([last], self.usage(sent) if self.continuous else None)
        if (
            self.body.get("return_spec_tokens_details")
            and server.speculation
            and server.reports_at_least(0, 5, 19)
        ):
            yield self.spec_details()
        if self.include_usage:
            yield self.chunk([], self.usage(sent))

    def spec_details(self) -> bytes:
        """SGLang 0.5.19+: a response-level chunk, only when the request asks for it."""
        details = {**_NO_SPEC, **self.server.spec_meta(self.req)}
        sglext = {
            "routed_experts": None,
            "cached_tokens_details": None,
            "spec_tokens_details": {k: details[k] for k in _NO_SPEC},
        }
        return event(
            {
                "id": self.id,
                "created": self.created,
                "object": "chat.completion.chunk" if self.chat else "text_completion",
                "choices": [],
                "model": self.server.served_model_name,
                "sglext": sglext,
            }
        )
