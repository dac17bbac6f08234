"""The figures a point is judged on, each once: its unit, which way is better, the words for
better and worse, how it is had, what it needs, and what a point says when it cannot be had.

A run's figures (``output_tok_s``, ``ttft_p99_s``, ``energy_j_per_token``, …) are read off its
:class:`~pytest_llmperf.core.metrics.RunMetrics` (``read``: the field, and the key of a
distribution) and may be gated with ``llmperf.check(point, metric=…)``; a point's own figures
(a speedup, a startup, a capacity, an accuracy) are one value a point, judged by their kind's
rule. Messages, tables and reports say a figure in its own words (an energy per token rises,
it is not "slower"), and the metrics reference and the results-JSON reference are generated
from this table (scripts/mkdocs_hooks.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: What a figure needs that a host or a server may not give, and what a point says without it.
NVML = (
    "NVML",
    "NVML did not read the server's GPUs here (no nvidia-ml-py, no NVIDIA driver, or a server "
    "not on this host's GPUs), so there is no energy figure to gate: run it on the GPU runner "
    "with the gpu extra (pip install 'pytest-llmperf[gpu]')",
)
DRAFT_COUNTS = (
    "draft counts",
    "the server reported no draft counts (SGLang's spec_verify_ct, llama.cpp's timings.draft_n), "
    "so there is no accept length to gate",
)
ANSWERS = (
    "answer tokens told from thinking",
    "no stream told the answer's tokens from the thinking ones (only the chat API does, where "
    "the server runs a reasoning parser: SGLang's --reasoning-parser), so there is no TTFO to "
    'gate: ask over the chat API (api = "chat")',
)
SLO = (
    "an slo",
    "the profile has no slo, so no request is counted as meeting one: add the limits to its "
    "profile, e.g. slo = { ttft_s = 2.0, itl_s = 0.1 }",
)


@dataclass(frozen=True)
class Figure:
    """One figure: how it is said, which way is better, and how it is had."""

    name: str
    unit: str
    lower_is_better: bool
    #: The words a change is said in: (better, worse), e.g. ("faster", "slower").
    words: tuple[str, str]
    #: How it is computed (the metrics reference says it).
    definition: str
    #: Where a run holds it: ``"output_tok_s"``, ``"ttft_s.p99"`` (a field, and a key of that
    #: field's distribution); None: a point's own figure, one value a point, not a run's.
    read: str | None = None
    #: What it needs and what a point says without it (None: every run has it).
    needs: tuple[str, str] | None = None
    #: Whether the host's speed sets it on an engine whose latencies are the host's (a
    #: simulated server's latencies are milliseconds of this host's Python scheduling).
    host_timed: bool = False

    @property
    def better(self) -> str:
        return self.words[0]

    @property
    def worse(self) -> str:
        return self.words[1]

    @property
    def per_run(self) -> bool:
        return self.read is not None

    def of(self, run: Any) -> float:
        """One run's value (NaN when the run has none: goodput without an SLO, energy without
        NVML)."""
        assert self.read is not None, f"{self.name} is a point's figure, not a run's"
        field, _, key = self.read.partition(".")
        value = getattr(run, field)
        if key:
            value = value.get(key) if isinstance(value, dict) else None
        return math.nan if value is None else float(value)


SPEED = ("faster", "slower")
LEVEL = ("higher", "lower")

_LATENCIES = {
    "ttft": "send → the first chunk that carries a token (a thinking token counts)",
    "ttfo": "send → the first chunk that carries an answer token, after any thinking",
    "itl": "the gap between token-carrying chunks ÷ the tokens of the later one, per token",
    "tpot": "(e2e − ttft) ÷ (completion tokens − 1), per request",
    "e2e": "send → the last token, per request",
}
_PERCENTILES = {"p50": "median", "p90": "90th percentile", "p99": "99th percentile"}

#: Every figure, a run's first (in the order ``check(metric=…)`` lists them), then a point's.
FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        Figure(
            "output_tok_s",
            "tok/s",
            False,
            SPEED,
            "Σ server-reported completion tokens ÷ the run's duration (first request sent to "
            "last response finished; with window_s, the tokens inside the window ÷ its length)",
            read="output_tok_s",
        ),
        Figure(
            "request_tok_s",
            "tok/s",
            False,
            SPEED,
            "per request, completion tokens ÷ end-to-end latency, the mean over the requests",
            read="request_tok_s.mean",
        ),
        Figure(
            "goodput_req_s",
            "req/s",
            False,
            LEVEL,
            "requests per second that finished and met every limit of the profile's slo",
            read="goodput_req_s",
            needs=SLO,
        ),
        Figure(
            "accept_length",
            "tok/step",
            False,
            LEVEL,
            "Σ completion tokens ÷ Σ verify steps of the run's requests (the engine's own "
            "counts: SGLang's spec_verify_ct, llama.cpp's timings)",
            read="accept_length",
            needs=DRAFT_COUNTS,
        ),
        Figure(
            "energy_j_per_token",
            "J/tok",
            True,
            ("less energy per token", "more energy per token"),
            "the energy the server's GPUs took over the run's window (NVML's energy counter) ÷ "
            "the window's output tokens",
            read="energy_j_per_token",
            needs=NVML,
        ),
        Figure(
            "tok_s_per_watt",
            "tok/s/W",
            False,
            ("more tok/s per watt", "fewer tok/s per watt"),
            "the window's output tokens ÷ the joules the GPUs' energy counters rose by (all GPUs summed)",
            read="tok_s_per_watt",
            needs=NVML,
        ),
        *(
            Figure(
                f"{name}_{q}_s",
                "s",
                True,
                SPEED,
                f"the {_PERCENTILES[q]} of {name.upper()} ({how}) over the run",
                read=f"{name}_s.{q}",
                host_timed=True,
                needs=ANSWERS if name == "ttfo" else None,
            )
            for name, how in _LATENCIES.items()
            for q in _PERCENTILES
        ),
        Figure(
            "speedup",
            "x",
            False,
            SPEED,
            "a speculative profile's output_tok_s ÷ its base's, run by run, both measured in "
            "the same pytest run",
        ),
        Figure(
            "startup_s",
            "sec",
            True,
            SPEED,
            "seconds from the server's launch to its first ready answer, one value a launch",
            host_timed=True,
        ),
        Figure(
            "capacity_req_s",
            "req/s",
            False,
            LEVEL,
            "the highest arrival rate (requests/s) at which the profile meets its slo at its "
            "slo_percentile, bracketed by open-loop probes",
            host_timed=True,
        ),
        Figure(
            "accuracy",
            "accuracy",
            False,
            LEVEL,
            "the share of a task set's items answered right at temperature 0 (McNemar on the "
            "golden's own items)",
        ),
        Figure(
            "identical_share",
            "accuracy",
            False,
            LEVEL,
            "the share of prompts a speculative server answers token for token as its base",
        ),
    )
}

#: The figures a run has, in the order ``check(metric=…)`` lists them.
RUN_FIGURES = tuple(name for name, f in FIGURES.items() if f.per_run)


def figure_of(name: str) -> Figure:
    """The figure ``name``; a name not in the table is a throughput-like figure of its unit
    (``…_req_s`` requests/s, else tok/s), higher being better."""
    found = FIGURES.get(name)
    if found is not None:
        return found
    unit = "req/s" if name.endswith("_req_s") else "tok/s"
    return Figure(name, unit, False, SPEED, "")
