"""Change points of a nightly series: E-Divisive means candidates, confirmed by a t-test.

As Apache Otava (formerly DataStax Hunter; Fleming et al., arXiv:2301.03034) does it, on numpy
and scipy alone (``apache-otava`` pins numpy and scipy exactly and pulls in cloud clients):

1. **Candidates.** Binary segmentation on the E-Divisive means statistic (Matteson & James
   2014, with α = 1): the split τ of a segment that maximises

       Q̂(τ) = |A||B| / (|A| + |B|) · ( 2·mean|a − b| − mean|a − a'| − mean|b − b'| )

   for A = x[:τ], B = x[τ:]. Each side is split again while a relaxed t-test
   (:data:`CANDIDATE_PVALUE`) says the split may be real.
2. **Confirmation.** Each candidate is t-tested (Student's, pooled) between the segments either
   side of it, bounded by its neighbours; the weakest candidate is dropped while its p-value is
   above ``max_pvalue`` or its magnitude below ``min_magnitude``, and the rest re-tested, as
   Otava's ``merge`` does. The p-value is Bonferroni-adjusted for the positions the split was
   chosen among (the t-test of the best of k splits is not a t-test of one): without it, a
   three-night blip inside a year of nights passes p < 0.001 (seen on a synthetic year at 0.5 %
   noise: two such false change points in a hundred series). What remains are the change
   points; index i means the series changed between x[i − 1] and x[i], so x[i] is "the first
   bad run".
3. **Slow drifts** (:func:`drift_onset`), which step detection splits into weak little steps:
   a level, then a straight line from an onset, confirmed by the slope's t-test.

The caller chooses the scale: the plugin passes log values, with latencies negated, so that a
change's sign says better or worse as the verdict's does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Otava's default confirmation level, and the relaxed one that keeps weak candidates in play.
MAX_PVALUE = 0.001
CANDIDATE_PVALUE = 0.05
#: A regime needs this many values either side of a change point (a t-test needs two).
MIN_SIZE = 2


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first value of the new regime
    p_value: float
    mean_before: float  # of the regime before it (from the previous change point)
    mean_after: float  # of the regime after it (to the next change point)
    sd_before: float
    sd_after: float
    n_before: int
    n_after: int

    @classmethod
    def between(
        cls,
        before: Sequence[float] | np.ndarray,
        after: Sequence[float] | np.ndarray,
        index: int,
        positions: int = 1,
    ) -> ChangePoint:
        """The change from the regime ``before`` to ``after`` (starting at ``index``), its
        p-value adjusted for the ``positions`` it was chosen among."""
        b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
        return cls(
            index=index,
            p_value=min(1.0, _t_pvalue(b, a) * positions),
            mean_before=float(b.mean()),
            mean_after=float(a.mean()),
            sd_before=_sd(b),
            sd_after=_sd(a),
            n_before=len(b),
            n_after=len(a),
        )

    @property
    def shift(self) -> float:
        """mean_after − mean_before, on the series' scale (log: the log-ratio)."""
        return self.mean_after - self.mean_before

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The two-sided confidence interval of :attr:`shift` (pooled t)."""
        from pytest_llmperf.core.student import pooled_from

        test = pooled_from(
            self.mean_after,
            self.sd_after,
            self.n_after,
            self.mean_before,
            self.sd_before,
            self.n_before,
        )
        return test.interval(confidence)


def e_divisive_split(x: np.ndarray, min_size: int = MIN_SIZE) -> tuple[int, float] | None:
    """The τ that maximises Q̂ over ``x`` (each side at least ``min_size``), and Q̂ there."""
    n = len(x)
    if n < 2 * min_size:
        return None
    d = np.abs(x[:, None] - x[None, :])
    # prefix[i, j] = sum of d[:i, :j]
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = d.cumsum(0).cumsum(1)
    taus = np.arange(min_size, n - min_size + 1)
    a = taus.astype(float)
    b = n - a
    within_a = prefix[taus, taus]  # ordered pairs: twice the sum over i < k
    total = prefix[n, n]
    cross = prefix[taus, n] - prefix[taus, taus]
    within_b = total - 2 * prefix[taus, n] + prefix[taus, taus]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_within_a = np.where(a > 1, within_a / (a * (a - 1)), 0.0)
        mean_within_b = np.where(b > 1, within_b / (b * (b - 1)), 0.0)
    e_hat = 2 * cross / (a * b) - mean_within_a - mean_within_b
    q_hat = a * b / n * e_hat
    best = int(np.argmax(q_hat))
    return int(taus[best]), float(q_hat[best])


def detect(
    values: Sequence[float],
    *,
    max_pvalue: float = MAX_PVALUE,
    min_magnitude: float = 0.0,
    min_size: int = MIN_SIZE,
) -> list[ChangePoint]:
    """The confirmed change points of ``values``, in order. ``min_magnitude`` is on the series'
    scale (for log values, 0.02 ≈ a 2 % change)."""
    x = np.asarray(values, dtype=float)
    candidates: list[int] = []
    _segment(x, 0, len(x), candidates, min_size)
    cuts = sorted(candidates)
    while cuts:
        tested = [_test(x, cuts, i) for i in range(len(cuts))]
        weakest = max(
            range(len(cuts)),
            key=lambda i: (
                tested[i].p_value > max_pvalue or abs(tested[i].shift) < min_magnitude,
                tested[i].p_value,
                -abs(tested[i].shift),
            ),
        )
        cp = tested[weakest]
        if cp.p_value > max_pvalue or abs(cp.shift) < min_magnitude:
            del cuts[weakest]
            continue
        return tested
    return []


def _segment(x: np.ndarray, lo: int, hi: int, out: list[int], min_size: int) -> None:
    """Binary segmentation of x[lo:hi]: keep splits a relaxed t-test does not rule out."""
    found = e_divisive_split(x[lo:hi], min_size)
    if found is None:
        return
    tau = lo + found[0]
    if _t_pvalue(x[lo:tau], x[tau:hi]) > CANDIDATE_PVALUE:
        return
    out.append(tau)
    _segment(x, lo, tau, out, min_size)
    _segment(x, tau, hi, out, min_size)


def _test(x: np.ndarray, cuts: list[int], i: int) -> ChangePoint:
    lo = cuts[i - 1] if i > 0 else 0
    hi = cuts[i + 1] if i + 1 < len(cuts) else len(x)
    positions = max(1, hi - lo - 2 * MIN_SIZE + 1)
    return ChangePoint.between(x[lo : cuts[i]], x[cuts[i] : hi], cuts[i], positions)


def _sd(x: np.ndarray) -> float:
    return float(x.std(ddof=1)) if len(x) > 1 else 0.0


def _t_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided pooled t-test; two constant segments differ (p = 0) or not (p = 1)."""
    from pytest_llmperf.core.student import pooled

    return pooled(b.tolist(), a.tolist()).p_two_sided()


@dataclass(frozen=True)
class Onset:
    """A linear drift that began at ``index``: level before it, a straight line after."""

    index: int  # the first night off the level
    slope: float  # per night, on the series' scale
    slope_se: float
    dof: int
    p_value: float  # one-sided, in the slope's direction, Bonferroni-adjusted over the onsets tried
    nights: int  # from the onset to the latest night, both included

    @property
    def shift(self) -> float:
        """The fitted change at the latest night against the level before the onset."""
        return self.slope * self.nights

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        from pytest_llmperf.core.student import t_quantile

        half = t_quantile(0.5 + confidence / 2, self.dof) * self.slope_se * self.nights
        return self.shift - half, self.shift + half


def drift_onset(
    values: Sequence[float], *, max_pvalue: float = MAX_PVALUE, min_level: int = 3
) -> Onset | None:
    """A slow drift, which step detection splits into weak little steps: the broken-stick fit
    ``x = a`` before the onset τ and ``a + b·(i − τ + 1)`` from it, τ chosen by least squares
    over the onsets that leave ``min_level`` nights of level and two of drift; confirmed when
    the slope's t-test, Bonferroni-adjusted for the onsets tried, is below ``max_pvalue``."""
    from pytest_llmperf.core.student import t_sf

    x = np.asarray(values, dtype=float)
    n = len(x)
    onsets = range(min_level, n - 1)
    if n < min_level + 2 or len(onsets) == 0:
        return None
    best: tuple[float, int, float, float] | None = None
    for tau in onsets:
        ramp = np.maximum(0.0, np.arange(n) - tau + 1)
        design = np.column_stack([np.ones(n), ramp])
        coef, *_ = np.linalg.lstsq(design, x, rcond=None)
        rss = float(np.sum((x - design @ coef) ** 2))
        if best is None or rss < best[0]:
            cov = np.linalg.inv(design.T @ design)
            best = (rss, tau, float(coef[1]), float(cov[1, 1]))
    assert best is not None
    rss, tau, slope, var_factor = best
    dof = n - 2
    se = math.sqrt(rss / dof * var_factor) if dof > 0 else math.inf
    if not se > 0:
        p = 0.0 if slope != 0 else 1.0
    else:
        p = t_sf(abs(slope) / se, dof)
    p = min(1.0, p * len(onsets))
    if p > max_pvalue:
        return None
    return Onset(tau, slope, se, dof, p, n - tau)
