"""Speculative decoding against its base, measured in the same pytest run (pure functions).

Per concurrency: speedup = mean speculative ÷ mean base output tok/s, with a confidence interval
from the per-run samples (Welch's t on log tok/s, so the interval is on the ratio). Then:

- the crossover: the first level at which speculation is no longer faster (point estimate
  ≤ 1), and whether that is certain (the interval lies below 1) or a tie;
- the recommended cut-off: the largest level below the crossover (speculation still faster
  there; a win within noise is said so), rendered as something SGLang accepts;
- the break-even accept length at each level: the accept length at which speculation would
  exactly match the base, from the measured step costs. With A tokens per verify step,
  spec tok/s ≈ C·A / t_spec and base ≈ C / t_base, so t_spec / t_base = A / speedup.

Only a base measured in the same run is trustworthy (a base figure from hours earlier may have
drifted by 30 %), so nothing here reads a golden.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.core import adaptive_spec
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.points import MeasuredPoint
from pytest_llmperf.core.versions import parse_version

CONFIDENCE = 0.95
#: SGLang's EAGLE default draft steps, when the server did not say.
DEFAULT_NUM_STEPS = 3


@dataclass(frozen=True)
class Speedup:
    concurrency: int
    ratio: float
    low: float
    high: float
    n_spec: int
    n_base: int
    accept_length: float | None = None

    @property
    def status(self) -> str:
        """faster / slower with confidence, or a tie (the interval holds 1)."""
        return "faster" if self.low > 1.0 else "slower" if self.high < 1.0 else "tie"

    @property
    def break_even_accept(self) -> float | None:
        if self.accept_length is None or not self.ratio > 0:
            return None
        return self.accept_length / self.ratio

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "status": self.status,
            "n": [self.n_spec, self.n_base],
            "accept_length": self.accept_length,
            "break_even_accept_length": self.break_even_accept,
        }


def speedup(
    spec: Sequence[float],
    base: Sequence[float],
    concurrency: int,
    *,
    accept_length: float | None = None,
    confidence: float = CONFIDENCE,
) -> Speedup:
    """The ratio of means with a ``confidence`` interval (Welch on logs; exact when a side has n = 1)."""
    import numpy as np  # lazily, as scipy below: importing the plugin must stay cheap

    from pytest_llmperf.core.student import t_quantile

    ls, lb = np.log(np.asarray(spec, dtype=float)), np.log(np.asarray(base, dtype=float))
    ratio = float(np.mean(spec) / np.mean(base))
    diff = float(ls.mean() - lb.mean())
    vs = ls.var(ddof=1) / len(ls) if len(ls) > 1 else 0.0
    vb = lb.var(ddof=1) / len(lb) if len(lb) > 1 else 0.0
    se = math.sqrt(vs + vb)
    if se == 0.0 or len(ls) < 2 or len(lb) < 2:
        low = high = math.exp(diff)
    else:
        # Welch–Satterthwaite degrees of freedom.
        dof = (vs + vb) ** 2 / (
            (vs**2 / (len(ls) - 1) if len(ls) > 1 else 0)
            + (vb**2 / (len(lb) - 1) if len(lb) > 1 else 0)
        )
        t = t_quantile(0.5 + confidence / 2, dof)
        low, high = math.exp(diff - t * se), math.exp(diff + t * se)
    return Speedup(concurrency, ratio, low, high, len(spec), len(base), accept_length)


@dataclass(frozen=True)
class Analysis:
    """One speculative profile against its base over the levels both measured."""

    profile: str
    base_profile: str
    test: str
    points: tuple[Speedup, ...]
    sglang_version: str | None = None
    drift: Mapping[int, float] = field(default_factory=dict)  # A/B/A: base after ÷ base before
    #: The speculative server's draft steps and CUDA-graph max batch size, as it resolved them.
    num_steps: int | None = None
    cuda_graph_max_bs: int | None = None

    @property
    def crossover(self) -> Speedup | None:
        """The first level at which speculation is no longer faster (point estimate ≤ 1)."""
        return next((p for p in self.points if p.ratio <= 1.0), None)

    @property
    def cutoff(self) -> int | None:
        """The largest level below the crossover: speculation is still faster there."""
        cross = self.crossover
        below = [
            p.concurrency for p in self.points if cross is None or p.concurrency < cross.concurrency
        ]
        return max(below) if below else None

    def advice(self) -> str:
        cross, cutoff = self.crossover, self.cutoff
        levels = [p.concurrency for p in self.points]
        unsure = self._uncertain(below=cross.concurrency if cross else None)
        caveat = f" (a win within noise at {unsure})" if unsure else ""
        if cross is None:
            return (
                f"speculation is faster at every measured level, up to C = {levels[-1]}{caveat}; "
                "no cut-off within the measured range"
            )
        where = (
            f"crossover at C = {cross.concurrency}: speedup {cross.ratio:.2f} "
            f"[{cross.low:.2f}, {cross.high:.2f}], {'slower' if cross.status == 'slower' else 'a tie'}"
        )
        if cutoff is None:
            return f"{where}; speculation is not faster at any measured level: disable it"
        return f"{where}; keep speculation up to C = {cutoff}{caveat}, disable above: {self.sglang_setting()}"

    def _uncertain(self, below: int | None) -> str:
        """Levels where speculation looks faster but its interval still holds 1."""
        return ", ".join(
            f"C = {p.concurrency}: {p.ratio:.3f} [{p.low:.3f}, {p.high:.3f}]"
            for p in self.points
            if p.status == "tie" and p.ratio > 1 and (below is None or p.concurrency < below)
        )

    def adaptive_config(self) -> dict[str, Any] | None:
        """The complete ``--speculative-adaptive-config`` that applies the cut-off, where the
        server's SGLang has a no-speculation tier (0.5.14 and later); None elsewhere."""
        version = parse_version(self.sglang_version)
        if self.cutoff is None or version is None or version < (0, 5, 14):
            return None
        steps = self.num_steps if self.num_steps is not None else DEFAULT_NUM_STEPS
        return adaptive_spec.cutoff_config(
            self.cutoff, steps, self.cuda_graph_max_bs or adaptive_spec.DEFAULT_MAX_BS
        )

    def sglang_setting(self) -> str:
        """The cut-off as SGLang can apply it, with the file's content where it takes one."""
        cutoff = self.cutoff
        if cutoff is None:
            return "remove the --speculative-* flags"
        config = self.adaptive_config()
        if config is None:
            return f"serve C > {cutoff} from the base configuration (this SGLang has no no-speculation tier)"
        off = adaptive_spec.first_batch_without_speculation(
            cutoff, self.cuda_graph_max_bs or adaptive_spec.DEFAULT_MAX_BS
        )
        granularity = (
            f"; SGLang pads a batch to its CUDA-graph size before choosing, so batches {cutoff + 1}-{off - 1} "
            "speculate too"
            if off > cutoff + 1
            else ""
        )
        return (
            f"--speculative-adaptive --speculative-adaptive-config {self.profile}-adaptive-spec.json "
            f"({json.dumps(config, separators=(',', ':'))}): speculation up to batch size {off - 1}, "
            f"none from {off}{granularity}"
        )

    def to_json(self) -> dict[str, Any]:
        cross = self.crossover
        return {
            "profile": self.profile,
            "base_profile": self.base_profile,
            "test": self.test,
            "speedup": {str(p.concurrency): p.to_json() for p in self.points},
            "crossover_concurrency": cross.concurrency if cross else None,
            "crossover_status": cross.status if cross else None,
            "recommended_max_speculative_batch": self.cutoff,
            "advice": self.advice(),
            "adaptive_config": self.adaptive_config(),
            "sglang_version": self.sglang_version,
            "base_drift": {str(c): d for c, d in sorted(self.drift.items())} or None,
        }


def analyse(
    profile: str,
    base_profile: str,
    test: str,
    spec: Mapping[int, Sequence[float]],
    base: Mapping[int, Sequence[float]],
    accept: Mapping[int, Sequence[float | None]] | None = None,
    sglang_version: str | None = None,
    drift: Mapping[int, float] | None = None,
) -> Analysis:
    """Speedups over the levels both sides measured, in ascending order."""
    accept = accept or {}
    points = []
    for c in sorted(set(spec) & set(base)):
        accepts = [a for a in accept.get(c, ()) if a is not None]
        points.append(
            speedup(
                spec[c], base[c], c, accept_length=statistics.fmean(accepts) if accepts else None
            )
        )
    return Analysis(profile, base_profile, test, tuple(points), sglang_version, dict(drift or {}))


def analyse_points(
    profile: str,
    base_profile: str,
    points: Sequence[MeasuredPoint],
    *,
    sglang_version: str | None = None,
) -> list[Analysis]:
    """Analyses from measured points, one per test that measured ``output_tok_s`` for both
    profiles. Invalid points are left out. With A/B/A re-measurement the base's second
    measurement (``<base>@after``) joins the base samples and gives the drift."""

    def by_test(name: str) -> dict[str, dict[int, MeasuredPoint]]:
        out: dict[str, dict[int, MeasuredPoint]] = {}
        for p in points:
            # Rate levels are compared by their latency, not paired by concurrency.
            if (
                p.profile == name
                and p.metric == "output_tok_s"
                and not p.problems
                and p.rate is None
            ):
                out.setdefault(NodeId(p.test).without_params, {})[p.concurrency] = p
        return out

    spec_tests, base_tests, after_tests = (
        by_test(profile),
        by_test(base_profile),
        by_test(f"{base_profile}@after"),
    )
    analyses = []
    for test in sorted(set(spec_tests) & set(base_tests)):
        spec, base, after = spec_tests[test], base_tests[test], after_tests.get(test, {})
        base_values = {
            c: [*p.values, *(after[c].values if c in after else ())] for c, p in base.items()
        }
        drift = {c: after[c].summary.mean / base[c].summary.mean for c in after if c in base}
        analyses.append(
            analyse(
                profile,
                base_profile,
                test,
                {c: p.values for c, p in spec.items()},
                base_values,
                accept={c: [r.accept_length for r in p.runs] for c, p in spec.items()},
                sglang_version=sglang_version,
                drift=drift,
            )
        )
    return analyses


def paired_ratios(spec: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per-run speedup samples for the gate: run k of one side over run k of the other.

    Runs are independent draws on each side, so pairing by index gives independent ratio samples
    whose log mean estimates the log speedup. Extra runs of the longer side are left out rather
    than reused, which would make samples dependent.
    """
    return [s / b for s, b in zip(spec, base)]
