"""The statistical verdict of one point against its golden.

On log tok/s, with the golden's raw runs and the launches they came from, and tonight's runs
(2 or 3, more on demand), all from one launch of the server. Two levels of noise: runs vary
within a launch, and every launch's mean is offset from the server's level (memory layout,
graph capture, clocks). The golden's mean is the mean of its launches' means, and::

    d      = mean(log new) − mean of the golden's launch means            (r = e^d, about)
    var(d) = σ²_between · (1 + 1/L) + σ²_within · (1/n + mean(1/m)/L)
             (L golden launches of m runs; σ²_between from the golden's launches pooled over
             the profile's points, or the history's nights, see :class:`LaunchSpread`)
    p_drop, p_gain, lcb = Student's t on d / √var(d), Satterthwaite degrees of freedom

    FAIL       r ≤ 1 − fail_margin and p_drop < α: significantly slower by more than the margin,
               against both levels of noise
    UNCERTAIN  lcb ≤ 1 − fail_margin and more runs could tell (the within part still matters),
               or tonight's runs spread far more than the golden's (one run out of line): more
               runs (3 → 6 → 10) before deciding; at the last stage WARN (inconclusive)
    WARN       r ≤ 1 − warn_margin and p_drop < α           (passes, reported)
    IMPROVED   r ≥ 1 + improve_margin and p_gain < α        (passes, suggests --perf-update)
    PASS       otherwise

A FAIL must beat the spread between launches, not only the runs of tonight's; and when
tonight's runs spread far more than the golden's (an F-test at α), their variance is not pooled
with the golden's tight one: tonight's own decides (Welch). With one golden launch and no other
estimate the between part is 0, and the rule is the pooled-variance t-test it was.

How many runs a point gets before its verdict, and a recording before its golden, is
core/staging.py's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_llmperf.core.format import format_value, signed_percent
from pytest_llmperf.core.outcome import Outcome

if TYPE_CHECKING:
    from pytest_llmperf.core.student import TwoSample

ALPHA = 0.01
#: A FAIL's significance: one false FAIL in 1,000 point-nights where the launches' spread,
#: not the margin, is what an unchanged server's nights differ by (benchmarks/verdict_power.py).
FAIL_ALPHA = 0.001
IMPROVE_MARGIN = 0.10


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
    #: Tonight's runs spread far more than the golden's: one run out of line.
    out_of_line: bool = False
    #: The sd of a launch's offset the verdict allowed for (log scale; 0: none).
    launch_sd: float = 0.0
    #: The smallest drop that could FAIL at this precision, however many more runs tonight
    #: (None: more runs would lower it).
    detectable: float | None = None

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


@dataclass(frozen=True)
class LaunchSpread:
    """How far a launch's mean moves about the server's level: the variance of the offset on
    the log scale, the degrees of freedom of its estimate, and where it comes from."""

    variance: float
    dof: float
    source: str

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance)


#: The degrees of freedom the profile's ``launch_cv`` weighs as, beside what was measured (as
#: five launches would): two launches of a golden measure their spread on one degree of
#: freedom a point, and an estimate that happens to come out near 0 would make a night's
#: verdict overconfident, while one that comes out high on 2 degrees of freedom would leave
#: no FAIL possible. Twenty nights of a history outweigh it.
PRIOR_DOF = 4.0


def with_prior(measured: LaunchSpread | None, launch_cv: float) -> LaunchSpread:
    """The launch spread the verdict allows for: the profile's ``launch_cv`` (a prior worth
    PRIOR_DOF degrees of freedom) pooled with what the golden's launches or the history's
    nights measured, on their degrees of freedom."""
    prior = math.log1p(launch_cv) ** 2
    if measured is None:
        return LaunchSpread(prior, PRIOR_DOF, f"the profile's launch_cv {launch_cv:g}")
    dof = PRIOR_DOF + measured.dof
    variance = (PRIOR_DOF * prior + measured.dof * measured.variance) / dof
    return LaunchSpread(variance, dof, f"{measured.source} and the profile's launch_cv")


def pooled_launch_spread(
    points: Iterable[Sequence[Sequence[float]]], source: str
) -> LaunchSpread | None:
    """The launch-to-launch spread of several points recorded over the same launches (a
    golden file's levels), pooled: each point's launches are its log values, one list a launch.
    The variance of the launch means less what the runs within them explain, on the points'
    pooled degrees of freedom (None: no point has two launches)."""
    between = dof = 0.0
    for launches in points:
        groups = [list(g) for g in launches if g]
        if len(groups) < 2:
            continue
        means = [statistics.fmean(g) for g in groups]
        within_dof = sum(len(g) - 1 for g in groups)
        within_ss = sum(sum((x - m) ** 2 for x in g) for g, m in zip(groups, means))
        within = within_ss / within_dof if within_dof else 0.0
        explained = within * statistics.fmean(1 / len(g) for g in groups)
        between += (len(groups) - 1) * (statistics.variance(means) - explained)
        dof += len(groups) - 1
    if not dof:
        return None
    return LaunchSpread(max(0.0, between / dof), dof, source)


def decide(
    new: Sequence[float],
    golden: Sequence[float],
    *,
    fail_margin: float,
    warn_margin: float,
    improve_margin: float = IMPROVE_MARGIN,
    alpha: float = ALPHA,
    fail_alpha: float = FAIL_ALPHA,
    last_stage: bool = False,
    lower_is_better: bool = False,
    launches: Sequence[str | None] | None = None,
    spread: LaunchSpread | None = None,
) -> Verdict:
    """The verdict for candidate runs ``new`` (one launch) against golden runs ``golden``
    (all > 0), whose ``launches`` name the launch each came from, with the launch-to-launch
    ``spread`` (None: none allowed for).

    ``lower_is_better`` (a latency): the same rule on the inverted figure, with the margins
    read as the latency's rise: a fail margin of 15 % fails a point that is significantly more
    than 15 % slower (ratio ≥ 1.15), and a latency at least 10 % down is IMPROVED."""
    from pytest_llmperf.core.student import t_quantile

    sign = -1.0 if lower_is_better else 1.0
    ratio = statistics.fmean(new) / statistics.fmean(golden)
    # On "goodness" (above 1 is better) both directions share one rule.
    good = 1.0 / ratio if lower_is_better else ratio
    logs = [sign * math.log(v) for v in new]
    test, out_of_line, limit = _two_level(logs, _by_launch(golden, launches, sign), spread)
    p_drop, p_gain = test.p_less(), test.p_greater()
    lcb = math.exp(test.lower_bound(1.0 - alpha))
    if lower_is_better:
        floor, warn_floor = 1.0 / (1.0 + fail_margin), 1.0 / (1.0 + warn_margin)
        ceiling = 1.0 / (1.0 - improve_margin)
    else:
        floor, warn_floor, ceiling = 1.0 - fail_margin, 1.0 - warn_margin, 1.0 + improve_margin
    # However many runs tonight adds, the launches' part of the noise stays.
    detectable = None
    if limit is not None and limit.testable:
        detectable = 1.0 - math.exp(-t_quantile(1.0 - alpha, limit.dof) * limit.se)
    runs_can_tell = detectable is None or math.exp(test.diff) * (1 - detectable) > floor

    def verdict(outcome: Outcome, inconclusive: bool = False) -> Verdict:
        return Verdict(
            outcome, ratio, p_drop, p_gain, lcb, len(new), len(golden), inconclusive,
            lower_is_better, out_of_line, spread.sd if spread else 0.0, detectable,
        )  # fmt: skip

    waits = not last_stage and out_of_line  # one run out of line: more runs first
    if good <= floor and p_drop < fail_alpha and not waits:
        return verdict(Outcome.FAIL)
    if (lcb <= floor and runs_can_tell) or (waits and lcb <= warn_floor):
        return verdict(Outcome.UNCERTAIN if not last_stage else Outcome.WARN, last_stage)
    if good <= warn_floor and p_drop < alpha:
        return verdict(Outcome.WARN)
    if good >= ceiling and p_gain < alpha:
        return verdict(Outcome.IMPROVED)
    return verdict(Outcome.PASS)


def _by_launch(
    golden: Sequence[float], launches: Sequence[str | None] | None, sign: float
) -> list[list[float]]:
    """The golden's log values, one list a launch (all one launch when none are named)."""
    groups: dict[str | None, list[float]] = {}
    for k, value in enumerate(golden):
        launch = launches[k] if launches is not None and k < len(launches) else None
        groups.setdefault(launch, []).append(sign * math.log(value))
    return list(groups.values())


def _two_level(
    new: list[float], golden: list[list[float]], spread: LaunchSpread | None
) -> tuple[TwoSample, bool, TwoSample | None]:
    """Tonight's runs against the golden's launches (see the module's docstring): the test,
    whether tonight's runs spread far more than the golden's (one run out of line), and the
    test as it would be with endless runs tonight (None: no launch spread to limit it)."""
    from pytest_llmperf.core.student import TwoSample, f_quantile

    n, lengths = len(new), [len(g) for g in golden]
    launch_count = len(golden)
    new_mean = statistics.fmean(new)
    golden_mean = statistics.fmean(statistics.fmean(g) for g in golden)
    diff = new_mean - golden_mean
    within_dof = sum(m - 1 for m in lengths)
    within_ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in golden)
    new_ss = sum((x - new_mean) ** 2 for x in new)
    within = within_ss / within_dof if within_dof else 0.0
    new_var = new_ss / (n - 1) if n > 1 else 0.0
    out_of_line = (
        n > 1 and within_dof > 0 and new_var > within * f_quantile(1 - ALPHA, n - 1, within_dof)
    )
    if n < 2 or within_dof < 1:
        # A side of one run: decided by the means alone (no spread to test against).
        return TwoSample(diff, 0.0, max(1.0, float(n + sum(lengths) - 2))), False, None
    harmonic = statistics.fmean(1 / m for m in lengths) / launch_count
    parts: list[tuple[float, float]] = []  # (variance of d it adds, its degrees of freedom)
    if out_of_line:  # tonight's own spread, not pooled with the golden's tight one (Welch)
        parts += [(new_var / n, n - 1), (within * harmonic, within_dof)]
    else:
        pooled = (new_ss + within_ss) / (n - 1 + within_dof)
        parts.append((pooled * (1 / n + harmonic), n - 1 + within_dof))
    if spread is None or spread.variance <= 0:
        return _combined(diff, parts), out_of_line, None
    # The launches' part, which no number of runs tonight removes.
    launches = (spread.variance * (1 + 1 / launch_count), spread.dof)
    limit = _combined(diff, [(within * harmonic, within_dof), launches])
    return _combined(diff, [*parts, launches]), out_of_line, limit


def _combined(diff: float, parts: list[tuple[float, float]]) -> TwoSample:
    """A t statistic whose variance is the sum of ``parts``, each estimated on its own degrees
    of freedom: the Welch-Satterthwaite degrees of freedom."""
    from pytest_llmperf.core.student import TwoSample

    variance = sum(v for v, _ in parts)
    denominator = sum(v * v / dof for v, dof in parts if dof > 0)
    dof = variance * variance / denominator if denominator > 0 else math.inf
    return TwoSample(diff, math.sqrt(variance), dof)


def describe(
    label: str,
    metric_mean: float,
    golden_mean: float,
    v: Verdict,
    fail_margin: float,
    warn_margin: float | None = None,
    unit: str = "tok/s",
    why: str | None = None,
    words: tuple[str, str] = ("faster", "slower"),
) -> str:
    """``eagle3 C=70: 241.3 tok/s vs golden 352.0 (−31.4 %, slower, p=0.0004, n=3 vs 10) —
    FAIL: significantly slower by more than the 15 % fail margin``: what moved, which way (in
    the figure's own ``words``, better and worse: an energy per token is not "slower"), and why
    this verdict."""
    direction = words[1] if v.worse else words[0]
    return (
        f"{label}: {format_value(metric_mean, unit)} vs golden {format_value(golden_mean, unit, bare=True)} "
        f"({signed_percent(v.change)} %, {direction}, p={v.p:.2g}, n={v.n_new} vs {v.n_golden}) — "
        f"{v.name}: {why or _why(v, fail_margin, warn_margin, words)}"
    )


def _why(v: Verdict, fail_margin: float, warn_margin: float | None, words: tuple[str, str]) -> str:
    better, worse = words
    fail = f"{fail_margin * 100:g} %"
    launches = (
        f"; this server's launches differ by {v.launch_sd * 100:.1f} % (sd), so a drop under "
        f"{v.detectable * 100:.0f} % cannot FAIL it"
        if v.detectable is not None and v.detectable > fail_margin
        else ""
    )
    if v.outcome is Outcome.FAIL:
        return f"significantly {worse} by more than the {fail} fail margin"
    if v.outcome is Outcome.WARN and v.inconclusive:
        spread = ", tonight's runs spreading far more than the golden's" if v.out_of_line else ""
        return (
            f"a drop beyond the {fail} fail margin could not be ruled out after the last stage "
            f"of runs{spread}"
        )
    if v.outcome is Outcome.WARN and _beyond(v, fail_margin):
        # Past the margin, but not as surely as a FAIL must be: one launch's luck could do it.
        return (
            f"{worse} by more than the {fail} fail margin, but not surely enough to FAIL (a FAIL "
            f"needs p < {FAIL_ALPHA:g}){launches}; the next night will tell"
        )
    if v.outcome is Outcome.WARN:
        warn = f"the {warn_margin * 100:g} % warn margin" if warn_margin else "the warn margin"
        return f"significantly {worse} by more than {warn}, within the {fail} fail margin{launches}"
    if v.outcome is Outcome.IMPROVED:
        return f"significantly {better} by more than {IMPROVE_MARGIN * 100:g} %: refresh the golden"
    if _beyond(v, warn_margin or fail_margin):
        past = f"the {fail} fail margin" if _beyond(v, fail_margin) else "the warn margin"
        return f"{worse} by more than {past}, but not significantly (p \u2265 {ALPHA:g}){launches}"
    return f"within the margins (fails at {fail}){launches}"


def _beyond(v: Verdict, fail_margin: float) -> bool:
    """Whether the point moved past its fail margin (the worse way)."""
    if v.lower_is_better:
        return v.ratio >= 1.0 + fail_margin
    return v.ratio <= 1.0 - fail_margin
