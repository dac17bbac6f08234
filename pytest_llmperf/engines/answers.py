"""A server of no known kind, read by what it answers: as SGLang where it answers SGLang's
``/server_info``, as llama.cpp where it answers ``/props``, else by its command line.

The engines that front any server (``command``, ``remote``) read its fingerprint, version,
context and request extras this way: a wrapper script that starts SGLang, or a llama.cpp
server someone else runs, is read as well as a profile of its own engine would read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_llmperf.engines.base import Engine
from pytest_llmperf.engines.llamacpp import LlamaCppEngine
from pytest_llmperf.engines.sglang import SGLangEngine, server_info

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class ReadByAnswers(Engine):
    """An engine whose servers are read as the engine their answers match."""

    def reading(self, info: Mapping[str, Any]) -> Engine:
        if server_info(info):
            return SGLangEngine()
        props = info.get("/props")
        if isinstance(props, dict) and props:
            return LlamaCppEngine()
        return self

    def fingerprint_args(
        self, info: Mapping[str, Any], profile: Profile
    ) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
        reader = self.reading(info)
        if reader is self:
            return super().fingerprint_args(info, profile)
        return reader.fingerprint_args(info, profile)

    def server_version(self, info: Mapping[str, Any]) -> str | None:
        return self.reading(info).server_version(info) if self.reading(info) is not self else None

    def summary(self, info: Mapping[str, Any]) -> dict[str, Any]:
        return self.reading(info).summary(info) if self.reading(info) is not self else {}

    def request_extras(self, profile: Profile, info: Mapping[str, Any]) -> dict[str, Any]:
        reader = self.reading(info)
        return reader.request_extras(profile, info) if reader is not self else {}

    def accept_length_note(self, profile: Profile, info: Mapping[str, Any]) -> str | None:
        reader = self.reading(info)
        return reader.accept_length_note(profile, info) if reader is not self else None

    def running_at_once(self, info: Mapping[str, Any]) -> int | None:
        reader = self.reading(info)
        return reader.running_at_once(info) if reader is not self else None

    def context_per_request(self, info: Mapping[str, Any]) -> int | None:
        reader = self.reading(info)
        return reader.context_per_request(info) if reader is not self else None
