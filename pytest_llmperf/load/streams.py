"""Server-sent event streams, read as they arrive: how many tokens each event carried and the
server's final counts.

On SGLang's native API nothing is parsed until the stream ends: the cumulative
``completion_tokens`` is found from the end of each event, where ``meta_info`` sits. On the
OpenAI API a content event is recognised without parsing it; every other event is parsed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_llmperf.core.records import RequestRecord

_TOKENS_KEY = b'"completion_tokens":'
_DIGITS = re.compile(rb"\s*(\d+)")
_CONTENT = re.compile(rb'"(?:text|content)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*"')


class NativeStream:
    """SGLang ``/generate``: cumulative ``meta_info.completion_tokens`` in every event."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count: int = 0
        self.last = b""

    def event(self, data: bytes) -> bool:
        """Take one event's payload; True if it carried new tokens."""
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
            detail = reason.get("message", reason) if isinstance(reason, dict) else reason
            rec.error = f"server aborted the request: {detail}"


class OpenAIStream:
    """OpenAI ``/v1/completions`` (and chat): text deltas, ``usage`` per chunk when the server
    honours ``continuous_usage_stats``, else only in the final usage chunk.

    A content event is recognised without parsing it (a ``"text"``/``"content"`` key whose
    string is not empty: JSON escapes quotes inside strings, so the key cannot be faked by
    generated text); every other event (role, finish, usage, error) is parsed in full.
    """

    __slots__ = ("count", "usage", "error", "finish_reason", "sglext")

    def __init__(self) -> None:
        self.count: int | None = None
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None
        self.finish_reason: str | None = None
        self.sglext: dict[str, Any] | None = None

    def event(self, data: bytes) -> bool:
        if _CONTENT.search(data) is None:
            self._other(json.loads(data))
            return False
        at = data.rfind(_TOKENS_KEY)
        if at < 0:
            self.count = None
        else:
            match = _DIGITS.match(data, at + len(_TOKENS_KEY))
            if match is None:
                raise _not_a_number(data)
            self.count = int(match.group(1))
        if _FINISH.search(data) is not None:
            self._other(json.loads(data))  # the last content event: take finish_reason and usage
        return True

    def _other(self, obj: dict[str, Any]) -> None:
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
            rec.error = (
                "the server reported no usage.completion_tokens; token counts must come from the "
                "server (stream_options.include_usage)"
            )
            return
        rec.completion_tokens = int(self.usage["completion_tokens"])
        rec.prompt_tokens = self.usage.get("prompt_tokens")
        rec.finish_reason = self.finish_reason
        details = (self.sglext or {}).get("spec_tokens_details") or {}
        rec.spec_verify_ct = details.get("spec_verify_ct")


def _not_a_number(data: bytes) -> ValueError:
    return ValueError(f"completion_tokens is not a number in the server's event {data[:200]!r}")


def _error_text(err: Any) -> str:
    return str(err.get("message", err)) if isinstance(err, dict) else str(err)
