"""What every request of a run asks for: the API, the prompts, the output length, the sampling."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.load.prompts import PromptSet, default_prompts


@dataclass(frozen=True)
class Workload:
    """What every request asks for: the same prompts, length and sampling for every run."""

    api: str  # "sglang" (native /generate) or "openai" (/v1/completions)
    output_len: int
    prompts: PromptSet = field(default_factory=default_prompts)
    model: str = "default"
    #: Top-level JSON fields merged into every body, e.g. llama.cpp's ``cache_prompt``.
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    #: Fields the plugin adds for what the server must report (not part of the workload's
    #: definition, so not in ``describe``): e.g. SGLang's ``return_spec_tokens_details``.
    report_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return "/generate" if self.api == "sglang" else "/v1/completions"

    def bodies(self, output_len: int) -> list[bytes]:
        """Pre-encoded request bodies, one per prompt, built once per level."""
        return [self._body(prompt, output_len) for prompt in self.prompts.prompts]

    def staggered(self, concurrency: int) -> list[tuple[bytes, int]]:
        """The first request of each of C slots, with its output length: slot k asks for
        (k + 1)/C of ``output_len`` (at least one token), so the C first requests end at evenly
        spread times and the slots' later requests run at evenly spread phases."""
        prompts = self.prompts.prompts
        out = []
        for k in range(concurrency):
            n = max(1, round(self.output_len * (k + 1) / concurrency))
            out.append((self._body(prompts[k % len(prompts)], n), n))
        return out

    def _body(self, prompt: str, length: int) -> bytes:
        if self.api == "sglang":
            body: dict[str, Any] = {
                "text": prompt,
                "stream": True,
                "sampling_params": {
                    "max_new_tokens": length,
                    "temperature": 0.0,
                    "ignore_eos": True,
                },
            }
        else:
            body = {
                "model": self.model,
                "prompt": prompt,
                "max_tokens": length,
                "temperature": 0.0,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            }
        body.update(self.extra_body)
        body.update(self.report_body)
        return json.dumps(body, separators=(",", ":")).encode()

    def describe(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "path": self.path,
            "output_len": self.output_len,
            "prompt_set": self.prompts.name,
            "prompt_set_sha256": self.prompts.sha256,
            "temperature": 0.0,
            "ignore_eos": True,
            **({"extra_body": dict(self.extra_body)} if self.extra_body else {}),
        }
