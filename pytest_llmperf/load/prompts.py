"""The fixed prompt set every workload draws from, and its hash.

The set ships with the package (natural language, one prompt a line) so a result recorded
anywhere can be reproduced anywhere; its SHA-256 goes into every result and golden.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_llmperf.load.dataset import Dataset


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


#: The acceptance channel's prompt set (data/acceptance.jsonl): code, math and chat, eight
#: prompts each, interleaved (request i takes entry i mod 24, so any run's requests are spread
#: over the three alike), written for pytest-llmperf and under its licence (Apache-2.0).
ACCEPTANCE_FILE = "acceptance.jsonl"
ACCEPTANCE_SET = f"data/{ACCEPTANCE_FILE}"


def acceptance_prompts() -> Dataset:
    """The shipped prompt set the acceptance channel measures a drafter on, by category."""
    from pytest_llmperf.load.dataset import load_dataset

    with resources.as_file(resources.files("pytest_llmperf").joinpath(ACCEPTANCE_SET)) as path:
        return load_dataset(Path(path))
