"""Arrival schedules for open-loop load: when each request of a run arrives.

A schedule is precomputed, seeded and recorded: a list of offsets in seconds from the run's
start. Three arrival processes, as the peers name them (docs/explanation/open-loop.md):

- ``poisson`` (the default): exponential gaps, what independent users produce;
- ``gamma`` with a ``burstiness`` factor: gaps drawn from Gamma(shape = burstiness,
  mean = 1/rate); below 1 burstier than Poisson, above 1 smoother, 1 is Poisson (vLLM's
  definition);
- ``constant``: every gap exactly 1/rate.

Each run's draw is rescaled so that its arrivals offer exactly the level's rate over the run
(vLLM's fix for a 1-2 % shortfall, vllm#21104), and over each part of it: the lead-in, the
measured window and the drain each hold round(rate × length) arrivals. The seed
comes from the point's key and the run number, never from the profile, so a speculative
profile and its base are offered the identical schedule run by run, and the speedup at a rate
is a paired comparison.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

ARRIVALS = ("poisson", "gamma", "constant")


@dataclass(frozen=True)
class Arrivals:
    """How requests arrive at a rate level."""

    rate: float  # requests per second
    process: str = "poisson"
    #: Gamma shape (``process = "gamma"``): 1 is Poisson, < 1 burstier, > 1 smoother.
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(
                f"an arrival rate must be a positive number of requests/s, not {self.rate!r}"
            )
        if self.process not in ARRIVALS:
            raise ValueError(
                f"unknown arrival process {self.process!r}; choose one of {', '.join(ARRIVALS)}"
            )
        if not self.burstiness > 0:
            raise ValueError(f"burstiness must be > 0, not {self.burstiness!r}")

    def offsets(self, parts: list[float], seed: int) -> list[float]:
        """Arrivals over consecutive parts of a run (durations in seconds: lead-in, window,
        drain), as offsets from the run's start. Part j holds exactly round(rate × its
        length) arrivals (rounded on the running total) drawn from the process and rescaled
        to fit it (its first arrival on its beginning), so every part offers exactly the
        level's rate, the window [open, close) included."""
        rng = random.Random(seed)
        shape = 1.0 if self.process == "poisson" else self.burstiness
        out: list[float] = []
        begin = placed = 0.0
        for length in parts:
            count = round(self.rate * (begin + length)) - round(placed)
            placed += count
            if count > 0:
                # ``count`` gaps span the part, its first arrival on its beginning: the mean gap
                # is exactly 1/rate, and a part [begin, end) holds exactly its count.
                if self.process == "constant":
                    gaps = [1.0] * count
                else:
                    gaps = [rng.gammavariate(shape, 1.0) for _ in range(count)]
                scale = length / sum(gaps)
                at = begin
                for gap in gaps:
                    out.append(at)
                    at += gap * scale
            begin += length
        return out

    def describe(self) -> dict[str, object]:
        shown: dict[str, object] = {"request_rate": self.rate, "arrival": self.process}
        if self.process == "gamma":
            shown["burstiness"] = self.burstiness
        return shown


def schedule_seed(salt: int, run: int, seed: int = 0) -> int:
    """The seed of run ``run`` of a point (``salt``: from its key): the same for every
    profile, so paired profiles get the same arrivals."""
    return (salt * 1_000_003 + run * 7919 + seed) & 0xFFFFFFFF


def interleave(offsets: list[float], parts: int) -> list[list[int]]:
    """The indices of ``offsets`` for each of ``parts`` senders, dealt in turn (arrival k to
    sender k mod parts): each sends a thinned copy of the same process at rate/parts."""
    return [list(range(k, len(offsets), parts)) for k in range(parts)]
