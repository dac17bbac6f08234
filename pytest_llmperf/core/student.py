"""Student's t: its quantile, its tails and the two-sample tests on logs the verdicts use.

From ``scipy.special`` (``stdtr``, ``stdtrit``), not ``scipy.stats``: importing ``scipy.stats``
takes about 1.0 s on a 2-core runner against 0.3 s for ``scipy.special``, and every pytest
session that gives a verdict paid it. The tests check every function here against
``scipy.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev, variance


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (``stats.t.ppf``)."""
    from scipy import special

    return float(special.stdtrit(dof, p))


def t_cdf(x: float, dof: float) -> float:
    """P(T ≤ x) (``stats.t.cdf``)."""
    from scipy import special

    return float(special.stdtr(dof, x))


def f_quantile(p: float, dfn: float, dfd: float) -> float:
    """The ``p`` quantile of the F distribution (``stats.f.ppf``)."""
    from scipy import special

    return float(special.fdtri(dfn, dfd, p))


def chi2_mean_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile of χ²/dof with ``dof`` degrees of freedom (``stats.chi2.ppf(p, dof) /
    dof``): how much wider than the truth a variance estimated on ``dof`` reads at that level."""
    from scipy import special

    return float(special.chdtri(dof, 1.0 - p)) / dof


def t_sf(x: float, dof: float) -> float:
    """P(T > x) (``stats.t.sf``), from the lower tail of −x so small p keep their digits."""
    return t_cdf(-x, dof)


@dataclass(frozen=True)
class TwoSample:
    """A two-sample t statistic: ``diff`` = mean(a) − mean(b), its standard error and dof.

    Without spread (``se`` 0) the means decide alone: a difference is certain, none is no
    evidence; without a degree of freedom there is no test (no evidence either way)."""

    diff: float
    se: float
    dof: float

    @property
    def t(self) -> float:
        return self.diff / self.se

    @property
    def testable(self) -> bool:
        return self.dof >= 1 and self.se > 0

    def p_less(self) -> float:
        """One-sided p that mean(a) < mean(b)."""
        if not self.testable:
            return 0.0 if self.dof >= 1 and self.diff < 0 else 1.0
        return t_cdf(self.t, self.dof)

    def p_greater(self) -> float:
        """One-sided p that mean(a) > mean(b)."""
        if not self.testable:
            return 0.0 if self.dof >= 1 and self.diff > 0 else 1.0
        return t_sf(self.t, self.dof)

    def p_two_sided(self) -> float:
        if not self.testable:
            return 0.0 if self.dof >= 1 and self.diff != 0 else 1.0
        return 2 * t_sf(abs(self.t), self.dof)

    def lower_bound(self, confidence: float) -> float:
        """The one-sided ``confidence`` lower bound on the difference of means."""
        if not self.testable:
            return self.diff
        return self.diff - t_quantile(confidence, self.dof) * self.se

    def interval(self, confidence: float) -> tuple[float, float]:
        """The two-sided ``confidence`` interval of the difference of means."""
        if not self.testable:
            return self.diff, self.diff
        half = t_quantile(0.5 + confidence / 2, self.dof) * self.se
        return self.diff - half, self.diff + half


def pooled(a: Sequence[float], b: Sequence[float]) -> TwoSample:
    """Student's test with pooled variance (``ttest_ind(equal_var=True)``) of two samples."""
    sd_a = stdev(a) if len(a) > 1 else 0.0
    sd_b = stdev(b) if len(b) > 1 else 0.0
    return pooled_from(fmean(a), sd_a, len(a), fmean(b), sd_b, len(b))


def pooled_from(
    mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int
) -> TwoSample:
    """:func:`pooled` from each sample's mean, standard deviation and size."""
    dof = n_a + n_b - 2
    if dof < 1:
        return TwoSample(mean_a - mean_b, math.nan, dof)
    var = ((n_a - 1) * sd_a**2 + (n_b - 1) * sd_b**2) / dof
    return TwoSample(mean_a - mean_b, math.sqrt(var * (1 / n_a + 1 / n_b)), dof)


def welch(a: Sequence[float], b: Sequence[float]) -> TwoSample:
    """Welch's test (``ttest_ind(equal_var=False)``), Welch–Satterthwaite dof; two values a
    side at least, and some spread."""
    ma, va, mb, vb = fmean(a), variance(a), fmean(b), variance(b)
    sa, sb = va / len(a), vb / len(b)
    dof = (sa + sb) ** 2 / (sa**2 / (len(a) - 1) + sb**2 / (len(b) - 1))
    return TwoSample(ma - mb, math.sqrt(sa + sb), dof)
