"""The fixed prompt set every workload draws from, and its hash.

The set ships with the package (natural language, one prompt a line) so a result recorded
anywhere can be reproduced anywhere; its SHA-256 goes into every result and golden.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class PromptSet:
    name: str
    prompts: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(self.prompts).encode()).hexdigest()

    def __getitem__(self, index: int) -> str:
        """Request i uses prompt i mod len: deterministic for any N."""
        return self.prompts[index % len(self.prompts)]


@functools.cache
def default_prompts() -> PromptSet:
    text = (
        resources.files("pytest_llmperf").joinpath("data/prompts.txt").read_text(encoding="utf-8")
    )
    return PromptSet(
        "builtin-v1", tuple(line.strip() for line in text.splitlines() if line.strip())
    )
