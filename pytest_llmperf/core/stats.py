"""Figures over a handful of samples: the summary of a point's runs, and finite averages."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    """Mean, spread and log figures of a point's per-run values (a golden stores these too)."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def sd(self) -> float:
        if len(self.values) < 2:
            return 0.0
        if not all(math.isfinite(v) for v in self.values):
            return math.nan  # statistics.stdev fails on NaN rather than returning it
        return statistics.stdev(self.values)

    @property
    def cv(self) -> float:
        return self.sd / self.mean if self.mean else math.nan

    def to_json(self) -> dict[str, float]:
        """What a golden file keeps per point (the verdict works on logs, so their figures too)."""
        logs = [math.log(v) for v in self.values]
        return {
            "n": self.n,
            "mean": self.mean,
            "sd": self.sd,
            "cv": self.cv if len(self.values) > 1 else 0.0,
            "log_mean": statistics.fmean(logs),
            "log_sd": statistics.stdev(logs) if len(logs) > 1 else 0.0,
        }


def finite_mean(values: Iterable[float | None]) -> float:
    """The mean of the finite values (NaN when there are none): runs without a figure are left out."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else math.nan


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None, recursively: JSON has no NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def weighted_percentile(
    values: Sequence[float], weights: Sequence[float] | None, q: float
) -> float:
    """The q-th percentile (0–100) of values where each counts ``weight`` times."""
    if not values:
        return math.nan
    if weights is None:
        weights = [1.0] * len(values)
    pairs = sorted(zip(values, weights))
    total = sum(w for _, w in pairs)
    target = q / 100.0 * total
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= target - 1e-12:
            return value
    return pairs[-1][0]


#: A percentile q is estimated from at least this many values: below it, a p99 is nearly the
#: slowest value, and one hiccup moves it by the whole of it.
MIN_SAMPLES = {"p50": 2, "p90": 10, "p99": 100}
#: A percentile is gated (a FAIL on it) only with at least this many values a run behind it:
#: MLPerf LoadGen's early-stopping floors, the fewest queries with which it certifies a p90
#: and a p99 (mlcommons/inference). Below them a tail is reported, saying how many more it needs.
CERTIFIED = {"p50": 2, "p90": 64, "p99": 662}


def distribution(
    values: Sequence[float], weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Mean and p50/p90/p99 (weighted when ``weights`` are given) and the number of values ``n``;
    NaN when there are none."""
    if not values:
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan, "n": 0}
    if weights is None:
        mean = statistics.fmean(values)
    else:
        mean = sum(v * w for v, w in zip(values, weights)) / sum(weights)
    return {
        "mean": mean,
        **{f"p{q}": weighted_percentile(values, weights, q) for q in (50, 90, 99)},
        "n": len(values),
    }
