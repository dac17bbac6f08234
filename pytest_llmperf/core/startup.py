"""Startup as a figure: the seconds from launch to ready, one value a launch, with a golden and
a verdict like any other figure (``vllm bench startup`` measures the same, cold and warm).

A launch is **cold** when nothing was cached (a fresh runner: weights read from disk, kernels
compiled) and **warm** when it was (weights in the page cache, compile caches filled); a
profile's ``startup`` field says which its launches are on its runner, and the kind is part of
the golden's key: a cold launch is never judged against a warm golden.

One launch gives one value, so tonight has no spread of its own. It is judged as one new
observation against the golden's launches: a one-sided t-test of its log against theirs, whose
variance (the launch-to-launch spread) is what the golden's launches measured pooled with the
profile's ``startup_cv`` (a prior worth :data:`~pytest_llmperf.core.verdict.PRIOR_DOF` degrees
of freedom, as for the other figures' launches), widened by the golden mean's own error. With
the default 10 %, a startup twice as slow FAILs and one half as slow again WARNs; a startup
within the margins never does.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import PendingRun, Point, unit_of
from pytest_llmperf.core.verdict import (
    ALPHA,
    FAIL_ALPHA,
    IMPROVE_MARGIN,
    LaunchSpread,
    Margins,
    Verdict,
    with_prior,
)

METRIC = "startup_s"
KINDS = ("cold", "warm")


@dataclass(kw_only=True)
class StartupPoint(Point):
    """One launch's seconds from launch to ready."""

    seconds: float
    kind: str
    launch_id: str | None = None

    @property
    def key(self) -> str:
        return f"{self.node.without_params}[{self.kind}]"

    @property
    def label(self) -> str:
        return f"{self.profile} startup ({self.kind})"

    @property
    def unit(self) -> str:
        return unit_of(METRIC)

    @property
    def values(self) -> tuple[float, ...]:
        return (self.seconds,)

    def pending_runs(self) -> list[PendingRun]:
        return [PendingRun(self.seconds, self.launch_id, None, None, None)]

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "test": self.test,
            "key": self.key,
            "kind": self.kind,
            "seconds": self.seconds,
            "verdict": self.verdict_json,
            "golden": self.golden_json,
            "ratio": self.ratio,
            "p_value": self.p_value,
            "message": self.message,
        }


def judge(seconds: float, golden: list[float], margins: Margins, startup_cv: float) -> Verdict:
    """One launch's startup against the golden's launches (lower is better)."""
    from pytest_llmperf.core.student import t_quantile, t_sf

    logs = [math.log(v) for v in golden]
    k = len(logs)
    measured = (
        LaunchSpread(statistics.variance(logs), k - 1, "the golden's launches") if k > 1 else None
    )
    spread = with_prior(measured, startup_cv)
    diff = math.log(seconds) - statistics.fmean(logs)  # > 0: slower
    se = math.sqrt(spread.variance * (1 + 1 / k))
    t = diff / se if se > 0 else math.copysign(math.inf, diff)
    p_slower, p_faster = t_sf(t, spread.dof), t_sf(-t, spread.dof)
    ratio = seconds / statistics.fmean(golden)
    if ratio >= 1 + margins.fail and p_slower < FAIL_ALPHA:
        outcome = Outcome.FAIL
    elif ratio >= 1 + margins.fail or (ratio >= 1 + margins.warn and p_slower < ALPHA):
        outcome = Outcome.WARN  # past the fail margin, not surely: never green
    elif ratio <= 1 - IMPROVE_MARGIN and p_faster < ALPHA:
        outcome = Outcome.IMPROVED
    else:
        outcome = Outcome.PASS
    # The lower confidence bound of "goodness" (golden ÷ tonight), as for the other figures.
    bound = math.exp(-(diff + t_quantile(1 - ALPHA, spread.dof) * se))
    return Verdict(
        outcome, ratio, p_slower, p_faster, bound, 1, k,
        lower_is_better=True, launch_sd=spread.sd,
    )  # fmt: skip
