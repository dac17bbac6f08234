"""The simulated engine's OpenAI API: ``/v1/completions`` and ``/v1/chat/completions``, shaped
as SGLang sends them (a role chunk first on chat, ``usage`` per chunk only with
``continuous_usage_stats``, the speculative counts of 0.5.19+ only when asked for).

A thinking model (the server launched with ``--reasoning-parser``, as SGLang's is): a chat
request thinks for ``--sim-thinking-tokens`` tokens before it answers, unless its
``chat_template_kwargs`` turn thinking off (``thinking`` for kimi_k2, ``enable_thinking`` for
qwen3: both parsers' defaults are on). Its stream sends the thinking as ``reasoning_content``
deltas and the answer as ``content`` ones, in the shape of SGLang 0.5.23's sse_utils
(``reasoning_content`` always serialized, null on an answer delta), and ``usage`` counts the
thinking tokens (``reasoning_tokens``, 0.5.11+; ``completion_tokens_details`` too, 0.5.23+,
where there are some). ``/v1/completions`` and ``/generate`` have no chat template: they do not
think."""

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


def thinks(parser: Any, body: dict[str, Any]) -> bool:
    """Whether a chat request thinks: a reasoning parser is on, and its template's switch is
    not turned off (SGLang's ``reasoning_default`` "thinking" / "enable_thinking": on unless
    the request's ``chat_template_kwargs`` say false)."""
    if not parser:
        return False
    kwargs = body.get("chat_template_kwargs") or {}
    return not (
        isinstance(kwargs, dict)
        and False in (kwargs.get("thinking"), kwargs.get("enable_thinking"))
    )


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
        release_at_least = self.server.release_at_least  # no release named: the newest
        if release_at_least(0, 5, 11):  # UsageInfo.reasoning_tokens, 0 where none
            thinking = min(req.thinking, n)
            out["reasoning_tokens"] = thinking
            if thinking and release_at_least(0, 5, 23):
                out["completion_tokens_details"] = {"reasoning_tokens": thinking}
        if self.server.unmodeled.get("enable_cache_report"):  # as SGLang: only with this flag
            out["prompt_tokens_details"] = {"cached_tokens": req.cached_tokens}
        return out

    def finish(self, n: int) -> str | None:
        reason = self.server.finish_reason(self.req) if n >= self.req.generated else None
        return None if reason is None else reason["type"]

    def whole(self, n: int) -> dict[str, Any]:
        thinking = min(self.req.thinking, n)
        text = "".join(self.words[thinking:n])
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish(n)}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
            if self.req.thinking:
                choice["message"]["reasoning_content"] = "".join(self.words[:thinking])
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
        thinking = self.req.thinking
        async for n in server.tokens(self.req):
            delta = "".join(self.words[max(sent, thinking) : n])
            thought = "".join(self.words[sent : min(n, thinking)])
            sent = n
            if chat and thought:  # as SGLang's reasoning parser splits a step's text
                choice = {
                    "index": 0,
                    "delta": {"reasoning_content": thought},
                    "finish_reason": None,
                }
                yield self.chunk([choice], self.usage(n) if self.continuous else None)
                if not delta:
                    continue
            if chat:
                answer = (
                    {"reasoning_content": None, "content": delta}
                    if thinking
                    else {"content": delta}
                )
                choice = {"index": 0, "delta": answer, "finish_reason": None}
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
