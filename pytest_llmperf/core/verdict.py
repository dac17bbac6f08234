"""The statistical verdict of one point against its golden.

On log tok/s, with the golden's raw runs (n0 ≥ 10 recommended) and the candidate's (3, more
on demand)::

    r      = mean(new) / mean(golden)
    p_drop = one-sided pooled t-test, new < golden
    p_gain = one-sided pooled t-test, new > golden
    lcb    = 99 % lower confidence bound on the ratio

    FAIL       r ≤ 1 − fail_margin and p_drop < α
    UNCERTAIN  lcb ≤ 1 − fail_margin: a drop beyond the margin can't be ruled out yet → more runs
               (3 → 6 → 10); at the last stage FAIL if r ≤ 1 − fail_margin, else WARN (inconclusive)
    WARN       r ≤ 1 − warn_margin and p_drop < α           (passes, reported)
    IMPROVED   r ≥ 1 + improve_margin and p_gain < α        (passes, suggests --perf-update)
    PASS       otherwise

The practical margin is what keeps ordinary launch-to-launch drift from failing night after
night; the test keeps noise from failing a point that only looks slower.

How many runs (see :func:`first_stage` and :func:`golden_is_precise`): a run costs GPU time, so
the first stage is 2 runs when the golden's own spread says 2 already decide (the 99 % bound on
an unchanged server's ratio lies within a third of the fail margin), else the profile's
``runs``; a golden is recorded (``--perf-update-runs auto``) with RECORD_MIN_RUNS runs and stops
there once it is that precise, else goes on, a run at a time, to RECORD_MAX_RUNS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_llmperf.core.format import format_value, signed_percent
from pytest_llmperf.core.outcome import Outcome

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.01
IMPROVE_MARGIN = 0.10
#: Candidate runs per stage: a point that is UNCERTAIN gets more runs on the same server.
STAGES = (3, 6, 10)
#: The first stage when the golden is precise enough, and a pooled launch's first runs; a
#: recording starts with RECORD_MIN_RUNS and ends by RECORD_MAX_RUNS.
MIN_STAGE = 2
RECORD_MIN_RUNS = 5
RECORD_MAX_RUNS = 10
#: Two runs decide when the 99 % half-width of an unchanged server's ratio is at most this
#: share of the fail margin: a collapse to the margin is then still several half-widths away.
PRECISION_SHARE = 1 / 3


def half_width(golden: Sequence[float], n_new: int, alpha: float = ALPHA) -> float:
    """The expected one-sided (1 − α) half-width, on the log scale, of the pooled t-bound for
    ``n_new`` candidate runs against ``golden``, taking the golden's spread as the runs' spread."""
    import numpy as np

    from pytest_llmperf.core.student import t_quantile

    lg = np.log(np.asarray(golden, dtype=float))
    n0 = len(lg)
    if n0 < 2:
        return math.inf
    sd = float(lg.std(ddof=1))
    return t_quantile(1 - alpha, n0 + n_new - 2) * sd * math.sqrt(1 / n_new + 1 / n0)


def first_stage(golden: Sequence[float], fail_margin: float, runs: int) -> int:
    """Runs to measure before the first verdict: MIN_STAGE when the golden (of at least
    RECORD_MIN_RUNS runs) is precise enough that they decide, else ``runs``."""
    if runs <= MIN_STAGE or len(golden) < RECORD_MIN_RUNS:
        return runs
    precise = half_width(golden, MIN_STAGE) <= PRECISION_SHARE * fail_margin
    return MIN_STAGE if precise else runs


def golden_is_precise(values: Sequence[float], fail_margin: float) -> bool:
    """Whether a golden being recorded has enough runs: RECORD_MIN_RUNS, and precise enough
    that a first stage of MIN_STAGE runs decides against it."""
    return (
        len(values) >= RECORD_MIN_RUNS
        and half_width(values, MIN_STAGE) <= PRECISION_SHARE * fail_margin
    )


@dataclass(frozen=True)
class Margins:
    """A point's verdict margins: it fails beyond ``fail``, warns beyond ``warn``."""

    fail: float
    warn: float


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    ratio: float
    p_drop: float
    p_gain: float
    lower_bound: float
    n_new: int
    n_golden: int
    inconclusive: bool = False
    #: A latency: the ratio's direction is inverted (above 1 is worse), the p-values and the
    #: bound are about being worse or better, as for throughput.
    lower_is_better: bool = False

    @property
    def worse(self) -> bool:
        return self.ratio > 1 if self.lower_is_better else self.ratio < 1

    @property
    def p(self) -> float:
        """The p-value of the direction the point moved in."""
        return self.p_drop if self.worse else self.p_gain

    @property
    def name(self) -> str:
        return self.outcome.value

    @property
    def passed(self) -> bool:
        return self.outcome.passed

    @property
    def change(self) -> float:
        return self.ratio - 1.0


def decide(
    new: Sequence[float],
    golden: Sequence[float],
    *,
    fail_margin: float,
    warn_margin: float,
    improve_margin: float = IMPROVE_MARGIN,
    alpha: float = ALPHA,
    last_stage: bool = False,
    lower_is_better: bool = False,
) -> Verdict:
    """The verdict for candidate runs ``new`` against golden runs ``golden`` (all > 0).

    ``lower_is_better`` (a latency): the same rule on the inverted figure, with the margins
    read as the latency's rise: a fail margin of 15 % fails a point that is significantly more
    than 15 % slower (ratio ≥ 1.15), and a latency at least 10 % down is IMPROVED."""
    import numpy as np  # lazily: importing the plugin must stay cheap

    sign = -1.0 if lower_is_better else 1.0
    ln = sign * np.log(np.asarray(new, dtype=float))
    lg = sign * np.log(np.asarray(golden, dtype=float))
    ratio = float(np.mean(new) / np.mean(golden))
    # On "goodness" (above 1 is better) both directions share one rule.
    good = 1.0 / ratio if lower_is_better else ratio
    p_drop, p_gain, lcb = _one_sided(ln, lg, alpha)
    if lower_is_better:
        floor, warn_floor = 1.0 / (1.0 + fail_margin), 1.0 / (1.0 + warn_margin)
        ceiling = 1.0 / (1.0 - improve_margin)
    else:
        floor, warn_floor, ceiling = 1.0 - fail_margin, 1.0 - warn_margin, 1.0 + improve_margin

    def verdict(outcome: Outcome, inconclusive: bool = False) -> Verdict:
        return Verdict(
            outcome,
            ratio,
            p_drop,
            p_gain,
            lcb,
            len(new),
            len(golden),
            inconclusive,
            lower_is_better,
        )

    if good <= floor and p_drop < alpha:
        return verdict(Outcome.FAIL)
    if lcb <= floor:
        if not last_stage:
            return verdict(Outcome.UNCERTAIN)
        return verdict(Outcome.FAIL) if good <= floor else verdict(Outcome.WARN, inconclusive=True)
    if good <= warn_floor and p_drop < alpha:
        return verdict(Outcome.WARN)
    if good >= ceiling and p_gain < alpha:
        return verdict(Outcome.IMPROVED)
    return verdict(Outcome.PASS)


def _one_sided(ln: np.ndarray, lg: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """p(new < golden), p(new > golden) and the (1 − α) lower bound on the ratio of means,
    from a pooled-variance t-test on logs. A side of one run, or identical runs on both sides
    (no spread), are decided by the means alone."""
    from pytest_llmperf.core import student

    if len(ln) < 2 or len(lg) < 2:
        test = student.TwoSample(float(ln.mean() - lg.mean()), 0.0, len(ln) + len(lg) - 2)
    else:
        test = student.pooled(ln.tolist(), lg.tolist())
    return test.p_less(), test.p_greater(), math.exp(test.lower_bound(1.0 - alpha))


def describe(
    label: str,
    metric_mean: float,
    golden_mean: float,
    v: Verdict,
    fail_margin: float,
    warn_margin: float | None = None,
    unit: str = "tok/s",
    why: str | None = None,
) -> str:
    """``eagle3 C=70: 241.3 tok/s vs golden 352.0 (−31.4 %, slower, p=0.0004, n=3 vs 10) —
    FAIL: slower than the 15 % fail margin``: what moved, which way, and why this verdict."""
    direction = "slower" if v.worse else "faster"
    return (
        f"{label}: {format_value(metric_mean, unit)} vs golden {format_value(golden_mean, unit, bare=True)} "
        f"({signed_percent(v.change)} %, {direction}, p={v.p:.2g}, n={v.n_new} vs {v.n_golden}) — "
        f"{v.name}: {why or _why(v, fail_margin, warn_margin)}"
    )


def _why(v: Verdict, fail_margin: float, warn_margin: float | None) -> str:
    fail = f"{fail_margin * 100:g} %"
    if v.outcome is Outcome.FAIL:
        return f"significantly slower by more than the {fail} fail margin"
    if v.outcome is Outcome.WARN and v.inconclusive:
        return f"a drop beyond the {fail} fail margin could not be ruled out after the last stage of runs"
    if v.outcome is Outcome.WARN:
        warn = f"the {warn_margin * 100:g} % warn margin" if warn_margin else "the warn margin"
        return f"significantly slower by more than {warn}, within the {fail} fail margin"
    if v.outcome is Outcome.IMPROVED:
        return f"significantly faster by more than {IMPROVE_MARGIN * 100:g} %: refresh the golden"
    return f"within the margins (fails at {fail})"
