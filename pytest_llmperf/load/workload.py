"""What every request of a run asks for: the API, the prompt, the output length, the sampling.

Prompts come from one of three sources:

- the built-in prompt set (48 short natural-language prompts; request *i* uses prompt
  *i* mod 48): the default;
- synthetic token ids of an exact length (``input_len``), sent as ids so no tokenizer is
  needed: SGLang's ``/generate`` takes ``input_ids``, OpenAI ``/v1/completions`` a list of ids
  as ``prompt``. The ids are drawn (seeded) from ``TOKEN_ID_RANGE``, which every modern
  vocabulary covers with ordinary tokens, and differ per request and per run, so the radix
  cache never quietly turns a prefill benchmark into a cache benchmark; the first
  ``shared_prefix_len`` ids are the same for every request, to measure prefix caching on
  purpose;
- a dataset file (:mod:`pytest_llmperf.load.dataset`): request *i* uses entry *i* mod its size.

Lengths (:mod:`pytest_llmperf.core.lengths`) are fixed or drawn per request from a seeded
distribution: request *i* of run *k* gets the same draws for the same seed, wherever it runs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pytest_llmperf.core.lengths import Lengths
from pytest_llmperf.load.dataset import Dataset
from pytest_llmperf.load.prompts import PromptSet, default_prompts

#: Synthetic prompt ids lie in [low, high): above the special and byte tokens at the start of
#: byte-level BPE vocabularies, below the 32,000 of Llama 2's, the smallest modern one.
TOKEN_ID_RANGE = (1000, 30000)
PATHS = {"sglang": "/generate", "openai": "/v1/completions", "chat": "/v1/chat/completions"}


class Item(NamedTuple):
    """One request as sent: its body, the output tokens it asks for, and the prompt tokens the
    server must report (None when the prompt is text: without a tokenizer its count is unknown)."""

    body: bytes
    output_len: int
    prompt_tokens: int | None


@dataclass(frozen=True)
class Workload:
    """What every request asks for: the same prompts, lengths and sampling for every run."""

    api: str  # "sglang" (native /generate), "openai" (/v1/completions), "chat"
    #: The output length: the fixed one, or the distribution's mean (``output_lengths``).
    output_len: int
    prompts: PromptSet = field(default_factory=default_prompts)
    model: str = "default"
    #: Top-level JSON fields merged into every body, e.g. llama.cpp's ``cache_prompt``.
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    #: Fields the plugin adds for what the server must report (not part of the workload's
    #: definition, so not in ``describe``): e.g. SGLang's ``return_spec_tokens_details``.
    report_body: Mapping[str, Any] = field(default_factory=dict)
    #: A thinking model's mode on the chat API (None: the model's default, nothing sent): the
    #: chat template's switch, by both names templates use (Kimi-K2's ``thinking``, Qwen3's
    #: ``enable_thinking``; a template ignores the other).
    thinking: bool | None = None
    #: Synthetic prompts of these exact lengths in tokens (None: text or dataset prompts).
    input: Lengths | None = None
    shared_prefix_len: int = 0
    seed: int = 0
    #: [low, high) of the synthetic ids (None: TOKEN_ID_RANGE).
    token_id_range: tuple[int, int] | None = None
    dataset: Dataset | None = None
    #: Output lengths drawn per request (None: ``output_len`` for every request).
    output_lengths: Lengths | None = None
    #: Tells one point's requests from another's (the plugin derives it from the point's
    #: golden key): with run and index in the seed, no two requests of a session share ids by
    #: accident, across runs, top-up runs, levels and tests, yet every session draws the same.
    salt: int = 0

    @property
    def output(self) -> Lengths:
        return self.output_lengths or Lengths.fixed(self.output_len)

    @property
    def path(self) -> str:
        return PATHS[self.api]

    @property
    def period(self) -> int | None:
        """After how many requests the items repeat (the same in every run), or None when each
        request is its own: synthetic ids, or lengths drawn per request."""
        if self.input is not None or not self.output.is_fixed:
            return None
        if self.dataset is not None:
            return len(self.dataset.entries)
        return len(self.prompts.prompts)

    def category(self, index: int) -> str | None:
        """Request ``index``'s category, where its dataset names one."""
        if self.dataset is None:
            return None
        return self.dataset.entries[index % len(self.dataset.entries)].category

    def item(self, index: int, run: int = 1, share: float = 1.0, cap: int | None = None) -> Item:
        """Request ``index`` of run ``run`` (0: the warm-up); ``share`` scales its output length
        (a staggered first request asks for a share of it, at least one token), ``cap`` limits
        it (the warm-up's short requests)."""
        rng = (
            None
            if self.period is not None
            else random.Random(f"{self.seed}:{self.salt}:{run}:{index}")
        )
        entry = self.dataset.entries[index % len(self.dataset.entries)] if self.dataset else None
        length = entry.output_len if entry is not None and entry.output_len else None
        if length is None:
            length = self.output.draw(rng) if rng is not None else self.output.values[0]
        length = max(1, round(length * share))
        if cap is not None:
            length = min(length, cap)
        prompt: str | list[int]
        if self.input is not None:
            assert rng is not None
            prompt = self._ids(self.input.draw(rng), run, index)
        elif entry is not None:
            prompt = list(entry.input_ids) if entry.input_ids is not None else entry.prompt or ""
        else:
            prompt = self.prompts[index]
        counted = len(prompt) if isinstance(prompt, list) else None
        return Item(self._body(prompt, length), length, counted)

    def _ids(self, n: int, run: int, index: int) -> list[int]:
        import numpy as np  # lazily: importing the plugin must stay cheap

        low, high = self.token_id_range or TOKEN_ID_RANGE
        shared = min(self.shared_prefix_len, n)
        prefix = np.random.default_rng([self.seed, 0, 0, 1]).integers(low, high, shared)
        own = np.random.default_rng([self.seed, self.salt, run, index, 2]).integers(
            low, high, n - shared
        )
        return prefix.tolist() + own.tolist()

    def _body(self, prompt: str | list[int], length: int) -> bytes:
        if self.api == "sglang":
            body: dict[str, Any] = {
                ("input_ids" if isinstance(prompt, list) else "text"): prompt,
                "stream": True,
                "sampling_params": {
                    "max_new_tokens": length,
                    "temperature": 0.0,
                    "ignore_eos": True,
                },
            }
        else:
            body = {"model": self.model}
            if self.api == "chat":
                body["messages"] = [{"role": "user", "content": prompt}]
                if self.thinking is not None:
                    switch = {"thinking": self.thinking, "enable_thinking": self.thinking}
                    body["chat_template_kwargs"] = switch
            else:
                body["prompt"] = prompt
            body.update(
                {
                    "max_tokens": length,
                    "temperature": 0.0,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                }
            )
        body.update(self.extra_body)
        body.update(self.report_body)
        return json.dumps(body, separators=(",", ":")).encode()

    def describe(self) -> dict[str, Any]:
        """The workload's definition, a hard key of every golden point (the default workload's
        keys are as they always were, so its goldens stay comparable)."""
        out: dict[str, Any] = {
            "api": self.api,
            "path": self.path,
            "output_len": self.output.describe(),
        }
        if self.input is not None:
            out["input_len"] = self.input.describe()
            low, high = self.token_id_range or TOKEN_ID_RANGE
            out["input"] = f"token ids in [{low}, {high})"
            out["shared_prefix_len"] = self.shared_prefix_len
        elif self.dataset is not None:
            out["dataset"] = self.dataset.describe()
        else:
            out["prompt_set"] = self.prompts.name
            out["prompt_set_sha256"] = self.prompts.sha256
        if self.period is None:
            out["seed"] = self.seed
        out["temperature"] = 0.0
        out["ignore_eos"] = True
        if self.extra_body:
            out["extra_body"] = dict(self.extra_body)
        if self.thinking is not None:
            out["thinking"] = self.thinking
        return out
