"""Server-sent event streams, read as they arrive: how many tokens each event carried and the
server's final counts.

On SGLang's native API nothing is parsed until the stream ends: the cumulative
``completion_tokens`` is found from the end of each event, where ``meta_info`` sits. On the
OpenAI API a content event is recognised without parsing it; every other event is parsed.

Nothing the server sends is taken on trust: an event that is not a JSON object, a token count
that is not a number, a final event that does not parse or lacks the counts, and a stream that
ends before ``[DONE]`` each raise :class:`StreamError`, whose message says what the server sent
(its first bytes) and what was expected; the load generator makes it the request's error. A
middle event is checked for its shape (``{…}`` with a numeric count) rather than parsed in full:
SGLang's native events repeat the whole text so far, and parsing each would make the client the
bottleneck. The final event, which carries the counts that are measured, is parsed in full.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_llmperf.core.records import RequestRecord

_TOKENS_KEY = b'"completion_tokens":'
_DIGITS = re.compile(rb"\s*(\d+)")
_CONTENT = re.compile(rb'"(text|content|reasoning_content)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*"')
#: An answer delta (``"content"`` with a non-empty string; ``"reasoning_content"`` is not one).
_ANSWER = re.compile(rb'"content":\s*"(?!")')


#: How much of an offending event an error message shows.
SHOWN_BYTES = 120


class StreamError(ValueError):
    """The server sent something that is not the stream its API promises."""


def shown(data: bytes) -> str:
    """The first bytes of what the server sent, as an error message quotes them."""
    text = data[:SHOWN_BYTES].decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # one line, visible
    return text + ("…" if len(data) > SHOWN_BYTES else "")


def _check_object(data: bytes, what: str) -> None:
    if not (data.startswith(b"{") and data.endswith(b"}")):
        raise StreamError(f"{what} is not a JSON object: {shown(data)}")


def _parse(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise StreamError(f"{what} is not valid JSON ({exc.args[0]}): {shown(data)}") from None
    if not isinstance(obj, dict):
        raise StreamError(f"{what} is not a JSON object: {shown(data)}")
    return obj


class NativeStream:
    """SGLang ``/generate``: cumulative ``meta_info.completion_tokens`` in every event."""

    __slots__ = ("count", "last")
    #: /generate's text does not tell a thinking model's answer from its thinking (no TTFO).
    answered = False

    def __init__(self) -> None:
        self.count: int = 0
        self.last = b""

    def event(self, data: bytes) -> bool:
        """Take one event's payload; True if it carried new tokens."""
        _check_object(data, "an event of /generate's stream")
        at = data.rfind(_TOKENS_KEY)  # meta_info ends the event: searching from the end is short
        self.last = data
        if at < 0:
            return False
        # Inline rather than a helper call: this runs for every event of every stream.
        match = _DIGITS.match(data, at + len(_TOKENS_KEY))
        if match is None:
            raise _not_a_number(data)
        n = int(match.group(1))
        grew = n > self.count
        self.count = n
        return grew

    def error_event(self) -> str | None:
        """The server's own error, when its last event was one."""
        if b'"error"' not in self.last:
            return None
        try:
            obj = json.loads(self.last)
        except ValueError:
            return None
        return _error_text(obj["error"]) if isinstance(obj, dict) and "error" in obj else None

    def finish(self, rec: RequestRecord) -> None:
        if not self.last:
            raise StreamError("the stream had no events with data before [DONE]")
        obj = _parse(self.last, "the final event of /generate's stream")
        if "error" in obj:
            rec.error = f"server error: {_error_text(obj['error'])}"
            return
        meta = obj.get("meta_info")
        if not isinstance(meta, dict):
            raise StreamError(
                "the final event has no meta_info (SGLang's /generate reports the token counts "
                f"there): {shown(self.last)}"
            )
        rec.completion_tokens = _count(meta, "completion_tokens", "meta_info", self.last)
        rec.prompt_tokens = _optional_count(meta.get("prompt_tokens"))
        rec.cached_tokens = _optional_count(meta.get("cached_tokens"))
        rec.spec_verify_ct = _optional_count(meta.get("spec_verify_ct"))
        reason = meta.get("finish_reason")
        rec.finish_reason = reason.get("type") if isinstance(reason, dict) else reason
        if rec.finish_reason == "abort":
            detail = reason.get("message", reason) if isinstance(reason, dict) else reason
            rec.error = f"server aborted the request: {detail}"


class OpenAIStream:
    """OpenAI ``/v1/completions`` (and chat): text deltas, ``usage`` per chunk when the server
    honours ``continuous_usage_stats``, else only in the final usage chunk.

    A content event is recognised without parsing it (a ``"text"``/``"content"`` key whose
    string is not empty: JSON escapes quotes inside strings, so the key cannot be faked by
    generated text); every other event (role, finish, usage, error) is parsed in full.

    A thinking model's chat stream (SGLang with ``--reasoning-parser``) sends its thinking as
    ``reasoning_content`` deltas before the answer's ``content`` ones: both carry tokens (TTFT
    is the first of either, ITL covers both), and ``answered`` turns true at the first
    ``content`` delta (TTFO). On ``/v1/completions`` (``text``) nothing tells them apart.
    """

    __slots__ = ("count", "usage", "error", "finish_reason", "sglext", "timings", "answered")

    def __init__(self) -> None:
        #: A ``content`` delta (an answer token, not a thinking one) has arrived.
        self.answered = False
        self.count: int | None = None
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None
        self.finish_reason: str | None = None
        self.sglext: dict[str, Any] | None = None
        #: llama.cpp's ``timings`` of the last event: ``draft_n``, ``draft_n_accepted``.
        self.timings: dict[str, Any] | None = None

    def event(self, data: bytes) -> bool:
        found = _CONTENT.search(data)
        if found is None:
            self._other(_parse(data, "an event of the completion stream"))
            return False
        _check_object(data, "an event of the completion stream")
        if not self.answered and (
            found.group(1) == b"content" or (found.group(1) != b"text" and _ANSWER.search(data))
        ):
            self.answered = True
        at = data.rfind(_TOKENS_KEY)
        if at < 0:
            self.count = None
        else:
            match = _DIGITS.match(data, at + len(_TOKENS_KEY))
            if match is None:
                raise _not_a_number(data)
            self.count = int(match.group(1))
        if _FINISH.search(data) is not None:
            # The last content event: take finish_reason and usage.
            self._other(_parse(data, "the last content event of the completion stream"))
        return True

    def _other(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self.error = _error_text(obj["error"])
            return
        if obj.get("usage"):
            if not isinstance(obj["usage"], dict):
                raise StreamError(f"'usage' is not an object: {shown(json.dumps(obj).encode())}")
            self.usage = obj["usage"]
        if obj.get("sglext"):
            self.sglext = obj["sglext"]
        if isinstance(obj.get("timings"), dict):
            self.timings = obj["timings"]
        for choice in obj.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def error_event(self) -> str | None:
        return self.error

    def finish(self, rec: RequestRecord) -> None:
        if self.error:
            rec.error = f"server error: {self.error}"
            return
        if not self.usage or "completion_tokens" not in self.usage:
            rec.error = (
                "the server reported no usage.completion_tokens; token counts must come from the "
                "server (stream_options.include_usage)"
            )
            return
        rec.completion_tokens = _count(
            self.usage, "completion_tokens", "usage", json.dumps(self.usage).encode()
        )
        rec.prompt_tokens = _optional_count(self.usage.get("prompt_tokens"))
        prompt_details = self.usage.get("prompt_tokens_details")
        if isinstance(prompt_details, dict):
            rec.cached_tokens = _optional_count(prompt_details.get("cached_tokens"))
        rec.finish_reason = self.finish_reason
        rec.reasoning_tokens = _reasoning_tokens(self.usage)
        details = (self.sglext or {}).get("spec_tokens_details") or {}
        rec.spec_verify_ct = _optional_count(details.get("spec_verify_ct"))
        accepted = _optional_count((self.timings or {}).get("draft_n_accepted"))
        if (
            rec.spec_verify_ct is None
            and accepted is not None
            and accepted <= rec.completion_tokens
        ):
            # llama.cpp's draft counts: each verify step emits its accepted drafts and one token
            # of the target's own, so the steps are the tokens less the accepted drafts.
            rec.spec_verify_ct = rec.completion_tokens - accepted


def _reasoning_tokens(usage: dict[str, Any]) -> int | None:
    """The thinking tokens the server counted: SGLang's ``usage.reasoning_tokens`` (0.5.11+),
    or OpenAI's ``usage.completion_tokens_details.reasoning_tokens`` (SGLang 0.5.23 sets it
    where there are some)."""
    details = usage.get("completion_tokens_details")
    nested = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return _optional_count(usage.get("reasoning_tokens", nested))


def _count(obj: dict[str, Any], key: str, where: str, event: bytes) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StreamError(
            f"{where}.{key} is {json.dumps(value) if key in obj else 'missing'}, not a token count: "
            f"{shown(event)}"
        )
    return value


def _optional_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _not_a_number(data: bytes) -> StreamError:
    return StreamError(f"completion_tokens is not a number in the server's event: {shown(data)}")


def _error_text(err: Any) -> str:
    return str(err.get("message", err)) if isinstance(err, dict) else str(err)
