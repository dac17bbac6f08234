"""The statistical verdict of one point against its golden.

On log tok/s, with the golden's raw runs and the launches they came from, and tonight's runs
(2 or 3, more on demand) and the launches they came from (one, or more once a night confirms on
a fresh launch). Two levels of noise: runs vary within a launch, and every launch's mean is
offset from the server's level (memory layout, graph capture, clocks), one offset a launch
shared by every point it measures. The golden's level is the mean of its launches' means,
tonight's the mean of tonight's, and::

    d      = mean of tonight's launch means − mean of the golden's launch means   (r = e^d)
    var(d) = σ²_between · (1/K + 1/L) + σ²_within · (mean(1/n)/K + mean(1/m)/L)
             (K launches tonight of n runs, L golden launches of m runs; σ²_between from the
             profile's launch_cv pooled with the golden's launches, counted once a launch, the
             history's nights, and tonight's launches, see :class:`LaunchSpread`)
    p_drop, p_gain, lcb = Student's t on d / √var(d), Satterthwaite degrees of freedom

    FAIL        r ≤ 1 − fail_margin and p_drop < FAIL_ALPHA: significantly slower by more than
                the margin, against both levels of noise (on one launch, only where it would be
                so with launches three times as far apart as estimated, else CONFIRMING)
    UNCERTAIN   lcb ≤ 1 − fail_margin and more runs could tell (the within part still matters),
                or tonight's runs spread far more than the golden's (one run out of line): more
                runs (3 → 6 → 10) before deciding; at the last stage WARN (inconclusive)
    CONFIRMING  runs cannot tell, the launches can: past the fail margin but not surely, or a
                collapse (COLLAPSE × the fail margin) not ruled out at α, or one run alone;
                measured again on a fresh launch, or WARN where none can be made (an attached
                server, no confirmation launch left): past the fail margin is never green
    WARN        r ≤ 1 − warn_margin and p_drop < α           (passes, reported)
    IMPROVED    r ≥ 1 + improve_margin and p_gain < α        (passes, suggests --perf-update)
    PASS        otherwise

A FAIL must beat the spread between launches, not only the runs of tonight's; and when
tonight's runs spread far more than the golden's (an F-test at α), their variance is not pooled
with the golden's tight one: tonight's own decides (Welch). A night of one run never FAILs on
it alone: one run has no spread of its own.

How many runs a point gets before its verdict, and a recording before its golden, is
core/staging.py's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
#: A collapse, as a multiple of the fail margin (a 15 % margin: 30 %): a point is decided
#: without another launch only when a collapse is ruled out at α.
COLLAPSE = 2.0
#: A FAIL on one launch stands without a confirmation launch only when it would still be one
#: with launches this many times as far apart as estimated (a launch_cv three times too low).
ROBUST_LAUNCH_SD = 3.0
#: A collapse is ruled out when the lower bound of the ratio at this one-sided level is above
#: it: a PASS surer that no collapse hides in the launches' noise than a FAIL must be that one
#: does, since a night looks again after each confirmation launch (benchmarks/verdict_power.py,
#: launches 10 % apart, a golden of 6: at 0.001, 0.2 % of collapsed points read PASS; at
#: 0.0003, none in 1,600).
COLLAPSE_ALPHA = 0.0003


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
    #: The launches tonight's runs came from.
    launches: int = 1
    #: Why the launches keep it undecided (CONFIRMING, or a WARN where no launch could be made):
    #: ``"fail"`` (a FAIL one launch's luck could make), ``"past"`` (past the fail margin, not
    #: surely), ``"collapse"`` (a collapse not ruled out), ``"one run"``; None: decided.
    undecided: str | None = None
    #: The ratio's lower bound at the collapse's level (1 − COLLAPSE_ALPHA, one-sided).
    collapse_bound: float | None = None
    #: The smallest drop these runs could FAIL: the fail margin, or more where the noise needs
    #: more for p < FAIL_ALPHA (None: no spread to say it from).
    smallest_fail: float | None = None

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
#: seven launches would): two launches of a golden measure their spread on one degree of
#: freedom, and an estimate that happens to come out near 0 would make a night's verdict
#: overconfident, while one that comes out high would leave no FAIL possible. Twenty nights of
#: a history outweigh it. (benchmarks/verdict_power.py: at 4, a 30 % collapse FAILed on 98 %
#: of nights at a 5 % launch spread with one confirmation launch; at 6, 99 %.)
PRIOR_DOF = 6.0


#: The launches measured overrule the size of the profile's ``launch_cv`` when they weigh at
#: least as much (PRIOR_DOF degrees of freedom: a history's nights, not a golden's few
#: launches) and their spread is wider than it at this level (their variance against χ² on
#: their degrees of freedom); the prior keeps its weight (an approximation: the measured size,
#: the pooled confidence). Let a golden's two launches overrule it and one wide draw costs a
#: 30 % collapse its FAIL on 1 night in 100 at a 5 % launch spread (verdict_power). A
#: ``launch_cv`` three times too low would otherwise keep the verdict overconfident for as
#: long as its PRIOR_DOF outweigh what was measured (benchmarks/verdict_power.py, launches
#: 10 % apart, ``launch_cv`` 0.033, 20 nights of history: 4.0-4.25 false FAILs in 1,000
#: point-nights pooled in, 0.5-3.5 overruled; docs/explanation/statistics.md).
PRIOR_CONFLICT_ALPHA = 0.01


def with_prior(measured: LaunchSpread | None, launch_cv: float) -> LaunchSpread:
    """The launch spread the verdict allows for: the profile's ``launch_cv`` (a prior worth
    PRIOR_DOF degrees of freedom) pooled with what the golden's launches or the history's
    nights measured, on their degrees of freedom; the measured size on the pooled degrees of
    freedom where it weighs as much as the prior and is significantly wider
    (PRIOR_CONFLICT_ALPHA)."""
    from pytest_llmperf.core.student import chi2_mean_quantile

    prior = LaunchSpread(
        math.log1p(launch_cv) ** 2, PRIOR_DOF, f"the profile's launch_cv {launch_cv:g}"
    )
    if measured is None:
        return prior
    level = chi2_mean_quantile(1 - PRIOR_CONFLICT_ALPHA, measured.dof)
    if measured.dof >= prior.dof and measured.variance > prior.variance * level:
        source = f"{measured.source} (wider than {prior.source}, which it overrules)"
        return replace(measured, dof=prior.dof + measured.dof, source=source)
    return replace(_joined(prior, measured), source=f"{measured.source} and {prior.source}")


def pooled_launch_spread(
    points: Iterable[Sequence[Sequence[float]]], source: str, launches: int | None = None
) -> LaunchSpread | None:
    """The launch-to-launch spread of several points recorded over the same launches (a
    golden file's levels), pooled: each point's launches are its log values, one list a launch.
    The variance of the launch means less what the runs within them explain, averaged over the
    points. Its degrees of freedom are the launches' (``launches`` − 1): the points share each
    launch's offset (a launch that runs fast runs fast at every level), so eight points of two
    launches measure it once, not eight times. None: no point has two launches."""
    between = weight = 0.0
    most = 0
    for point in points:
        groups = [list(g) for g in point if g]
        if len(groups) < 2:
            continue
        means = [statistics.fmean(g) for g in groups]
        within_dof = sum(len(g) - 1 for g in groups)
        within_ss = sum(sum((x - m) ** 2 for x in g) for g, m in zip(groups, means))
        within = within_ss / within_dof if within_dof else 0.0
        explained = within * statistics.fmean(1 / len(g) for g in groups)
        between += (len(groups) - 1) * (statistics.variance(means) - explained)
        weight += len(groups) - 1
        most = max(most, len(groups))
    if not weight:
        return None
    dof = (launches if launches is not None else most) - 1
    return LaunchSpread(max(0.0, between / weight), max(dof, 1), source)


#: A night further than this many robust sds from the median night is out of line: it does not
#: set the spread (one −30 % night among twenty quiet ones would make it 7.9 % by a plain sd).
OUT_OF_LINE_SDS = 3.5


def in_line(values: Sequence[float]) -> list[bool]:
    """Which values lie within OUT_OF_LINE_SDS robust sds of their median (MAD × 1.4826;
    where most values are alike and the MAD is 0, the mean deviation × 1.2533)."""
    median = statistics.median(values)
    deviations = [abs(x - median) for x in values]
    scale = statistics.median(deviations) * 1.4826 or statistics.fmean(deviations) * 1.2533
    return [d <= OUT_OF_LINE_SDS * scale for d in deviations]


def robust_launch_spread(night_logs: Sequence[float], source: str) -> LaunchSpread | None:
    """The launch-to-launch spread of a history's nights (each night's log mean, each night a
    launch): the sd of the nights in line (:func:`in_line`), on their degrees of freedom (None:
    fewer than three nights in line)."""
    if len(night_logs) < 3:
        return None
    kept = [x for x, ok in zip(night_logs, in_line(night_logs)) if ok]
    if len(kept) < 3:
        return None
    return LaunchSpread(statistics.variance(kept), len(kept) - 1, f"{source} ({len(kept)} in line)")


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
    new_launches: Sequence[str | None] | None = None,
    spread: LaunchSpread | None = None,
    can_confirm: bool = False,
) -> Verdict:
    """The verdict for tonight's runs ``new`` (from the launches ``new_launches`` names, else
    one) against golden runs ``golden`` (all > 0) from the launches ``launches`` names, with
    the launch-to-launch ``spread`` (None: none allowed for). ``can_confirm``: another launch of
    the server can be made tonight (else an undecided point is a WARN).

    ``lower_is_better`` (a latency): the same rule on the inverted figure, with the margins
    read as the latency's rise: a fail margin of 15 % fails a point that is significantly more
    than 15 % slower (ratio ≥ 1.15), and a latency at least 10 % down is IMPROVED."""
    sign = -1.0 if lower_is_better else 1.0
    ratio = statistics.fmean(new) / statistics.fmean(golden)
    # On "goodness" (above 1 is better) both directions share one rule.
    good = 1.0 / ratio if lower_is_better else ratio
    tonight = _by_launch(new, new_launches, sign)
    past = _by_launch(golden, launches, sign)
    test, out_of_line, limit, used = _two_level(tonight, past, spread)
    p_drop, p_gain = test.p_less(), test.p_greater()
    lcb = math.exp(test.lower_bound(1.0 - alpha))
    collapse_lcb = math.exp(test.lower_bound(1.0 - COLLAPSE_ALPHA))
    floor, warn_floor, ceiling, collapse = _bounds(
        fail_margin, warn_margin, improve_margin, lower_is_better
    )
    # However many runs tonight adds, the launches' part of the noise stays: the smallest drop
    # that could FAIL (at the FAIL's own α) on these launches.
    detectable = _smallest_detectable(limit, fail_alpha)
    runs_can_tell = detectable is None or math.exp(test.diff) * (1 - detectable) > floor

    def verdict(outcome: Outcome, inconclusive: bool = False, why: str | None = None) -> Verdict:
        return Verdict(
            outcome, ratio, p_drop, p_gain, lcb, len(new), len(golden), inconclusive,
            lower_is_better, out_of_line, used.sd if used else 0.0, detectable,
            len(tonight), why, collapse_lcb, _smallest_fail(test, floor, fail_alpha),
        )  # fmt: skip

    def undecided(why: str) -> Verdict:
        return verdict(Outcome.CONFIRMING if can_confirm else Outcome.WARN, why=why)

    # One run out of line: more runs first, unless none could settle anything: the mean already
    # clears the warn margin, a collapse is ruled out, and the launches' part alone holds the
    # bound below the warn margin however many runs tonight adds.
    settled = good > warn_floor and collapse_lcb > collapse
    futile = settled and _launches_hold_below(limit, warn_floor, alpha)
    waits = not last_stage and out_of_line and not futile
    one_run = len(new) == 1
    if good <= floor and p_drop < fail_alpha and not waits:
        if one_run:  # more runs first; one run alone, at the last stage, FAILs nothing
            return verdict(Outcome.UNCERTAIN) if not last_stage else undecided("one run")
        if can_confirm and len(tonight) == 1:
            robust, _, _, _ = _two_level(tonight, past, spread, ROBUST_LAUNCH_SD**2)
            if robust.p_less() >= fail_alpha:  # a launch's luck could do it: confirm it
                return undecided("fail")
        return verdict(Outcome.FAIL)
    if (lcb <= floor and runs_can_tell) or (waits and lcb <= warn_floor):
        return verdict(Outcome.UNCERTAIN if not last_stage else Outcome.WARN, last_stage)
    if good <= floor:
        return undecided("past")  # never green
    if collapse_lcb <= collapse:
        return undecided("collapse")
    if good <= warn_floor and p_drop < alpha:
        return verdict(Outcome.WARN)
    if good >= ceiling and p_gain < alpha:
        return verdict(Outcome.IMPROVED)
    return verdict(Outcome.PASS)


def _bounds(
    fail_margin: float, warn_margin: float, improve_margin: float, lower_is_better: bool
) -> tuple[float, float, float, float]:
    """The FAIL floor, the WARN floor, the IMPROVED ceiling and the collapse on "goodness"
    (above 1 is better): a latency's margins read as its rise."""
    if lower_is_better:
        return (
            1.0 / (1.0 + fail_margin),
            1.0 / (1.0 + warn_margin),
            1.0 / (1.0 - improve_margin),
            1.0 / (1.0 + COLLAPSE * fail_margin),
        )
    collapse = max(1.0 - COLLAPSE * fail_margin, 0.01)
    return 1.0 - fail_margin, 1.0 - warn_margin, 1.0 + improve_margin, collapse


def _smallest_detectable(test: TwoSample | None, fail_alpha: float) -> float | None:
    """The smallest drop ``test``'s noise lets reach p < ``fail_alpha`` (None: no test, or one
    without a spread); on the limit test, what endless runs on these launches could FAIL."""
    from pytest_llmperf.core.student import t_quantile

    if test is None or not test.testable:
        return None
    return 1.0 - math.exp(-t_quantile(1.0 - fail_alpha, test.dof) * test.se)


def _launches_hold_below(limit: TwoSample | None, level: float, alpha: float) -> bool:
    """Whether the launches' part of the noise alone (``limit``: the test with endless runs
    on these launches) holds the 1 − ``alpha`` lower bound at or below ``level``."""
    return (
        limit is not None and limit.testable and math.exp(limit.lower_bound(1.0 - alpha)) <= level
    )


def _smallest_fail(test: TwoSample, floor: float, fail_alpha: float) -> float | None:
    """The smallest drop ``test``'s noise lets FAIL (at least the fail margin, 1 − ``floor``)."""
    drop = _smallest_detectable(test, fail_alpha)
    return None if drop is None else max(drop, 1.0 - floor)


def _by_launch(
    values: Sequence[float], launches: Sequence[str | None] | None, sign: float
) -> list[list[float]]:
    """The values' logs, one list a launch (all one launch when none are named)."""
    groups: dict[str | None, list[float]] = {}
    for k, value in enumerate(values):
        launch = launches[k] if launches is not None and k < len(launches) else None
        groups.setdefault(launch, []).append(sign * math.log(value))
    return list(groups.values())


def _two_level(
    new: list[list[float]],
    golden: list[list[float]],
    spread: LaunchSpread | None,
    launch_factor: float = 1.0,
) -> tuple[TwoSample, bool, TwoSample | None, LaunchSpread | None]:
    """Tonight's launches against the golden's (see the module's docstring): the test, whether
    tonight's runs spread far more than the golden's (one run out of line), and the test as it
    would be with endless runs on these launches (None: no launch spread to limit it), and
    the launch spread it allowed for, tonight's launches pooled in.
    ``launch_factor`` scales the launches' variance (a robustness check)."""
    from pytest_llmperf.core.student import f_quantile

    k_new, k_old = len(new), len(golden)
    new_means = [statistics.fmean(g) for g in new]
    diff = statistics.fmean(new_means) - statistics.fmean(statistics.fmean(g) for g in golden)
    new_dof, new_ss = _within(new)
    old_dof, old_ss = _within(golden)
    old_within = old_ss / old_dof if old_dof else 0.0
    new_var = new_ss / new_dof if new_dof else 0.0
    out_of_line = (
        new_dof > 0
        and old_dof > 0
        and new_var > old_within * f_quantile(1 - ALPHA, new_dof, old_dof)
    )
    w_new = statistics.fmean(1 / len(g) for g in new) / k_new
    w_old = statistics.fmean(1 / len(g) for g in golden) / k_old
    parts: list[tuple[float, float]] = []  # (variance of d it adds, its degrees of freedom)
    within = (new_ss + old_ss) / (new_dof + old_dof) if new_dof + old_dof else 0.0
    if out_of_line:  # tonight's own spread, not pooled with the golden's tight one (Welch)
        parts += [(new_var * w_new, new_dof), (old_within * w_old, old_dof)]
    elif new_dof + old_dof:
        parts.append((within * (w_new + w_old), new_dof + old_dof))
    between = _tonight_joins(spread, new_means, within * statistics.fmean(1 / len(g) for g in new))
    if between is None or between.variance <= 0:
        return _combined(diff, parts), out_of_line, None, between
    # The launches' part, which no number of runs on these launches removes.
    launches = (launch_factor * between.variance * (1 / k_new + 1 / k_old), between.dof)
    limit = _combined(diff, [(within * w_old, old_dof + new_dof), launches])
    return _combined(diff, [*parts, launches]), out_of_line, limit, between


def _within(groups: list[list[float]]) -> tuple[int, float]:
    """The degrees of freedom and the sum of squares of the runs about their launch's mean."""
    dof = sum(len(g) - 1 for g in groups)
    ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in groups)
    return dof, ss


def _tonight_joins(
    spread: LaunchSpread | None, means: list[float], explained: float
) -> LaunchSpread | None:
    """The launch spread with tonight's launches pooled in (two or more: their means' spread
    less what their runs explain, on K − 1 degrees of freedom)."""
    if len(means) < 2:
        return spread
    tonight = LaunchSpread(
        max(0.0, statistics.variance(means) - explained), len(means) - 1, "tonight's launches"
    )
    # Tonight's launches are pooled in, never overrule the prior: a launch being judged (one
    # slow launch among fresh ones) would otherwise widen the spread that judges it.
    return tonight if spread is None else _joined(spread, tonight)


def _joined(a: LaunchSpread, b: LaunchSpread) -> LaunchSpread:
    """Two launch spreads pooled on their degrees of freedom."""
    dof = a.dof + b.dof
    variance = (a.dof * a.variance + b.dof * b.variance) / dof
    return LaunchSpread(variance, dof, f"{a.source} and {b.source}")


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
    on = f"on {v.launches} launch{'es' if v.launches > 1 else ''}"
    launches = (
        f"; this server's launches differ by {v.launch_sd * 100:.1f} % (sd), so {on} a drop "
        f"under {v.detectable * 100:.0f} % cannot FAIL it"
        if v.detectable is not None and v.detectable > fail_margin
        else ""
    )
    if v.undecided is not None:
        return _undecided(v, fail, worse, launches, on)
    if v.outcome is Outcome.FAIL:
        return f"significantly {worse} by more than the {fail} fail margin"
    if v.outcome is Outcome.WARN and v.inconclusive:
        spread = ", tonight's runs spreading far more than the golden's" if v.out_of_line else ""
        return (
            f"a drop beyond the {fail} fail margin could not be ruled out after the last stage "
            f"of runs{spread}"
        )
    if v.outcome is Outcome.WARN:
        warn = f"the {warn_margin * 100:g} % warn margin" if warn_margin else "the warn margin"
        return f"significantly {worse} by more than {warn}, within the {fail} fail margin{launches}"
    if v.outcome is Outcome.IMPROVED:
        return f"significantly {better} by more than {IMPROVE_MARGIN * 100:g} %: refresh the golden"
    if _beyond(v, warn_margin or fail_margin):
        return (
            f"{worse} by more than the warn margin, but not significantly (p ≥ {ALPHA:g}){launches}"
        )
    return f"within the margins (fails at {fail}){launches}"


def _undecided(v: Verdict, fail: str, worse: str, launches: str, on: str) -> str:
    """What the launches' noise kept undecided, and what happens next: a fresh launch
    (CONFIRMING), or none could be made tonight (WARN: never PASS)."""
    spread = f"this server's launches differ by {v.launch_sd * 100:.1f} % (sd)"
    what = {
        "fail": f"significantly {worse} by more than the {fail} fail margin, but {spread}: one "
        "launch's luck could do it",
        "past": f"{worse} by more than the {fail} fail margin, but not surely enough to FAIL (a "
        f"FAIL needs p < {FAIL_ALPHA:g}){launches or '; ' + spread}",
        "collapse": f"within the {fail} fail margin, but {spread}, so {on} a collapse "
        f"({signed_percent((v.collapse_bound or v.lower_bound) - 1)} % at the "
        f"{(1 - COLLAPSE_ALPHA) * 100:g} % bound) is not ruled out",
        "one run": "one run alone cannot FAIL a point: it has no spread of its own",
    }[v.undecided or "past"]
    if v.outcome is Outcome.CONFIRMING:
        return f"{what}; measured again on a fresh launch after the profile's tests"
    if v.launches > 1:
        return (
            f"{what}; still so {on} tonight, its confirmation launches spent (confirm_launches "
            "in the profile allows more), so it is not a PASS"
        )
    return f"{what}; no fresh launch could confirm it tonight, so it is not a PASS"


def _beyond(v: Verdict, fail_margin: float) -> bool:
    """Whether the point moved past its fail margin (the worse way)."""
    if v.lower_is_better:
        return v.ratio >= 1.0 + fail_margin
    return v.ratio <= 1.0 - fail_margin
