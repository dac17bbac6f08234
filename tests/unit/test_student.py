"""Student's t from scipy.special against scipy.stats, the oracle it stands in for."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from pytest_llmperf.core import student


@pytest.mark.parametrize("dof", [1, 2, 3.7, 8, 30, 500])
@pytest.mark.parametrize("p", [1e-6, 0.01, 0.05, 0.5, 0.975, 0.995])
def test_the_quantile_and_tails_are_scipy_stats_own(dof, p):
    assert student.t_quantile(p, dof) == pytest.approx(stats.t.ppf(p, dof), rel=1e-9)
    x = stats.t.ppf(p, dof)
    assert student.t_cdf(x, dof) == pytest.approx(stats.t.cdf(x, dof), rel=1e-9)
    assert student.t_sf(x, dof) == pytest.approx(stats.t.sf(x, dof), rel=1e-9)


@pytest.mark.parametrize("dof", [1, 2, 5, 19, 200])
@pytest.mark.parametrize("p", [0.5, 0.95, 0.99])
def test_the_variance_quantile_is_chi2_over_its_dof(dof, p):
    assert student.chi2_mean_quantile(p, dof) == pytest.approx(
        stats.chi2.ppf(p, dof) / dof, rel=1e-9
    )


def samples(seed: int) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    a = [math.log(rng.gauss(100, 3)) for _ in range(rng.randint(2, 10))]
    b = [math.log(rng.gauss(100 + rng.choice([-6, 0, 4]), rng.choice([0.5, 3, 9])))
         for _ in range(rng.randint(2, 10))]  # fmt: skip
    return a, b


@pytest.mark.parametrize("seed", range(12))
def test_the_pooled_test_is_ttest_ind_with_equal_variances(seed):
    a, b = samples(seed)
    test = student.pooled(a, b)
    less = stats.ttest_ind(a, b, equal_var=True, alternative="less")
    greater = stats.ttest_ind(a, b, equal_var=True, alternative="greater")
    assert test.p_less() == pytest.approx(less.pvalue, rel=1e-9)
    assert test.p_greater() == pytest.approx(greater.pvalue, rel=1e-9)
    low = greater.confidence_interval(confidence_level=0.99).low
    assert test.lower_bound(0.99) == pytest.approx(low, rel=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_welch_is_ttest_ind_with_unequal_variances(seed):
    a, b = samples(seed)
    test = student.welch(a, b)
    oracle = stats.ttest_ind(a, b, equal_var=False)
    assert test.p_two_sided() == pytest.approx(oracle.pvalue, rel=1e-9)
    assert test.dof == pytest.approx(oracle.df, rel=1e-12)


def test_welch_with_one_constant_side_keeps_the_other_side_s_dof():
    test = student.welch([0.0, 0.0, 0.0], [0.1, 0.2, 0.4, 0.3])
    oracle = stats.ttest_ind([0.0, 0.0, 0.0], [0.1, 0.2, 0.4, 0.3], equal_var=False)
    assert test.dof == pytest.approx(3)
    assert test.p_two_sided() == pytest.approx(oracle.pvalue, rel=1e-9)
