"""The verdict rule on hand-made samples (statistics.md §0)."""

import math

import numpy as np
import pytest

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.judgement import not_gated
from pytest_llmperf.core.metrics import lower_is_better
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.verdict import (
    PRIOR_DOF,
    LaunchSpread,
    Margins,
    Verdict,
    decide,
    describe,
    with_prior,
)

GOLD = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]  # CV ~0.6 %
M = {"fail_margin": 0.15, "warn_margin": 0.05}


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ([100.3, 99.6, 100.1], "PASS"),
        ([97.0, 97.3, 96.8], "PASS"),  # 3 % slower: significant, but inside the warn margin
        ([93.0, 93.4, 92.7], "WARN"),  # 7 % slower: significant and beyond 5 %
        ([70.0, 70.5, 69.6], "FAIL"),  # the 30 % collapse
        ([125.0, 124.0, 126.0], "IMPROVED"),
        ([108.0, 108.5, 107.6], "PASS"),  # faster, but below the 10 % improvement margin
    ],
)
def test_verdicts(new, expected):
    assert decide(new, GOLD, **M).name == expected


def test_a_noisy_point_that_may_have_dropped_beyond_the_margin_is_uncertain_then_decided():
    new = [80.0, 100.0, 90.0]  # mean -10 %, but the spread can't rule out -15 %
    assert decide(new, GOLD, **M).name == "UNCERTAIN"
    last = decide(new, GOLD, **M, last_stage=True)
    assert last.name == "WARN" and last.inconclusive
    # 17 % down at the last stage: a FAIL needs significance, against tonight's own spread
    # here (it is far above the golden's): 10 such runs have it, 3 do not.
    assert decide([82.0, 88.0, 80.0] * 3 + [84.0], GOLD, **M, last_stage=True).name == "FAIL"
    three = decide([82.0, 88.0, 80.0], GOLD, **M, last_stage=True)
    assert three.name == "WARN" and three.inconclusive and three.out_of_line


def test_ratio_and_p_values():
    v = decide([70.0, 70.5, 69.6], GOLD, **M)
    assert v.ratio == pytest.approx(70.033 / 100.0, rel=1e-3)
    assert v.p_drop < 1e-6 and v.p_gain > 0.99
    assert v.lower_bound < v.ratio < 1
    assert (v.n_new, v.n_golden) == (3, 10)


def test_identical_runs_have_no_variance_and_are_decided_by_the_means():
    assert decide([100.0] * 3, [100.0] * 10, **M).name == "PASS"
    assert decide([70.0] * 3, [100.0] * 10, **M).name == "FAIL"


def test_message_says_what_by_how_much_and_the_margin():
    v = decide(
        [241.0, 242.0, 241.0],
        [352.0, 351.0, 353.0, 352.5, 351.5, 352.0, 352.2, 351.8, 352.1, 351.9],
        **M,
    )
    text = describe("eagle3 C=70", 241.3, 352.0, v, 0.15, 0.05)
    assert text.startswith("eagle3 C=70: 241.3 tok/s vs golden 352.0 (\u221231.4 %, slower, p=")
    assert text.endswith(
        ", n=3 vs 10) \u2014 FAIL: significantly slower by more than the 15 % fail margin"
    )
    warn = decide([0.9 * g for g in GOLD], GOLD, **M)
    assert describe("p C=1", 0.9, 1.0, warn, 0.15, 0.05).endswith(
        "WARN: significantly slower by more than the 5 % warn margin, within the 15 % fail margin"
    )
    assert signed_percent(0.052) == "+5.2" and signed_percent(-0.314) == "\u221231.4"
    assert not math.isnan(v.p_drop)


def test_a_precise_golden_lets_two_runs_decide_a_noisy_one_keeps_the_profiles_runs():
    from pytest_llmperf.core.staging import first_stage, half_width

    # 99 % half-width with 2 runs vs 10 at CV 0.6 %: t(0.99, 10) · 0.006 · √(1/2 + 1/10) ≈ 1.3 %.
    assert half_width(GOLD, 2) == pytest.approx(0.013, abs=0.002)
    assert first_stage(GOLD, 0.15, 3) == 2
    noisy = [100.0, 80.0, 120.0, 90.0, 110.0, 100.0]  # CV ~14 %
    assert first_stage(noisy, 0.15, 3) == 3
    assert first_stage(GOLD[:4], 0.15, 3) == 3  # too few golden runs to trust its spread
    assert first_stage(GOLD, 0.15, 5) == 2 and first_stage(GOLD, 0.15, 1) == 1


def test_a_recording_stops_at_five_runs_once_precise_and_not_before():
    from pytest_llmperf.core.staging import golden_is_precise

    assert not golden_is_precise(GOLD[:4], 0.15)  # precise, but fewer than RECORD_MIN_RUNS
    assert golden_is_precise(GOLD[:5], 0.15)
    assert not golden_is_precise([100.0, 90.0, 110.0, 95.0, 105.0], 0.15)  # CV ~8 %: go on
    assert golden_is_precise([100.0, 90.0, 110.0, 95.0, 105.0], 0.70)  # unless the margin is wide


LATENCY = [0.200, 0.202, 0.198, 0.201, 0.199, 0.2004, 0.1996, 0.2002, 0.1998, 0.200]


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ([0.2006, 0.1992, 0.2002], "PASS"),
        ([0.206, 0.2065, 0.2058], "PASS"),  # 3 % slower: inside the warn margin
        ([0.214, 0.2145, 0.2138], "WARN"),  # 7 % slower
        ([0.280, 0.281, 0.279], "FAIL"),  # TTFT +40 %
        ([0.170, 0.171, 0.169], "IMPROVED"),  # 15 % faster
        ([0.140, 0.141, 0.139], "IMPROVED"),  # what a throughput rule would call a collapse
    ],
)
def test_latency_verdicts_invert_the_direction(new, expected):
    v = decide(new, LATENCY, **M, lower_is_better=True)
    assert v.name == expected
    assert v.worse == (v.ratio > 1)
    assert v.p == (v.p_drop if v.ratio > 1 else v.p_gain)


def test_a_latency_fails_at_its_rise_by_the_margin_not_at_the_throughput_floor():
    # +16 % > 15 % fails; a throughput rule mirrored as 1 - 0.15 = 0.85 would need +17.6 %.
    v = decide([0.232, 0.2322, 0.2318], LATENCY, **M, lower_is_better=True)
    assert v.name == "FAIL" and v.ratio == pytest.approx(1.16, abs=0.002)
    assert "(+16.0 %" in describe("p C=1 ttft_p99_s", 0.232, 0.2, v, 0.15, unit="s")


def test_one_run_out_of_line_takes_the_next_stage_instead_of_failing():
    """The issue's night: two runs of 4,950 and 7,100 tok/s against a golden of ten tight runs
    near 7,129. Pooled with the golden's variance, the drop read significant (p = 0.008)."""
    gold = [
        7129.0 * (1 + d)
        for d in (-0.004, 0.003, 0.001, -0.002, 0.0, 0.002, -0.001, 0.004, -0.003, 0.0)
    ]
    two = decide([4950.0, 7100.0], gold, **M)
    assert two.name == "UNCERTAIN" and two.out_of_line
    # The stages (3, 6, 10) show the server as it is: the bad run was one run.
    runs = [4950.0, 7100.0, 7120.0, 7131.0, 7140.0, 7118.0, 7125.0, 7133.0, 7110.0, 7129.0]
    assert [decide(runs[:n], gold, **M).name for n in (3, 6)] == ["UNCERTAIN", "UNCERTAIN"]
    assert decide(runs, gold, **M, last_stage=True).name == "PASS"


def test_runs_out_of_line_wait_only_where_more_runs_could_settle_the_point():
    """Tonight's two runs 4 % apart against a golden of ten tight ones: out of line. Without a
    launch spread more runs narrow the bound, so they wait. With one launch each side and a
    3 % launch spread, the launches alone hold the 99 % bound below the warn margin however
    many runs tonight adds; the mean clears it and a collapse is ruled out: PASS now (the
    README's run took such a point from 2 to 10 runs, the bound fixed at 0.92). Runs 6.5 %
    apart leave a collapse open: they still wait."""
    spread = LaunchSpread(math.log1p(0.03) ** 2, 6, "the profile's launch_cv 0.03")
    on = {"launches": ["g"] * len(GOLD), "new_launches": ["t", "t"]}
    assert decide([98.0, 102.0], GOLD, **M).name == "UNCERTAIN"
    settled = decide([98.0, 102.0], GOLD, **M, **on, spread=spread)
    assert settled.name == "PASS" and settled.out_of_line, settled
    assert decide([97.0, 103.5], GOLD, **M, **on, spread=spread).name == "UNCERTAIN"
    # A mean in the warn zone may still move with more runs: it waits.
    assert decide([93.0, 97.0], GOLD, **M, **on, spread=spread).name == "UNCERTAIN"


def test_one_launch_and_no_spread_is_the_pooled_t_test():
    from scipy import stats

    new = [97.0, 98.5, 96.2]
    v = decide(new, GOLD, **M)
    pooled = stats.ttest_ind(np.log(new), np.log(GOLD), equal_var=True, alternative="less")
    assert v.p_drop == pytest.approx(pooled.pvalue, rel=1e-9)


def test_a_fail_must_beat_the_spread_between_launches():
    """With launches 10 % apart (sd), a launch 20 % down is what launches do; 45 % is not."""
    spread = LaunchSpread(0.10**2, 30, "the golden's launches")
    launches = ["a"] * 5 + ["b"] * 5
    gold = [100.0, 100.5, 99.5, 100.2, 99.8, 110.0, 110.4, 109.6, 110.2, 109.8]
    twenty = decide([84.0, 84.3, 83.8], gold, **M, launches=launches, spread=spread)
    assert twenty.name in ("PASS", "WARN") and twenty.detectable is not None
    assert decide([58.0, 58.2, 57.9], gold, **M, launches=launches, spread=spread).name == "FAIL"
    # Without the spread the same 20 % is a FAIL: the runs alone cannot see launches.
    assert decide([84.0, 84.3, 83.8], gold, **M, launches=launches).name == "FAIL"
    # The golden's mean is the mean of its launches' means.
    assert twenty.ratio == pytest.approx(84.03 / 104.9, rel=1e-3)


def test_more_runs_are_not_asked_for_when_only_another_launch_could_tell():
    """3 % down against launches 10 % apart and a golden of one launch: runs cannot tell, and a
    collapse is not ruled out on one launch: another launch is asked for, not more runs."""
    spread = LaunchSpread(0.10**2, 30, "the history's nights")
    v = decide([97.0, 97.2, 96.9], GOLD, **M, spread=spread, can_confirm=True)
    assert v.name == "CONFIRMING" and v.undecided == "collapse"
    assert 0.3 < (v.detectable or 0) < 0.4  # at the FAIL's own α: a drop under ~35 % can't FAIL
    text = describe("p C=1", 97.0, 100.0, v, 0.15, 0.05)
    assert (
        "within the 15 % fail margin, but this server's launches differ by 10.0 % (sd), so on "
        in text
    )
    assert text.endswith("measured again on a fresh launch after the profile's tests")
    # Where no launch can be made (an attached server), it is not a PASS.
    assert decide([97.0, 97.2, 96.9], GOLD, **M, spread=spread).name == "WARN"


def test_a_drop_past_the_fail_margin_is_never_green():
    """20 % down against launches 7 % and 10 % apart: past the margin, not surely a FAIL. It is
    confirmed on a fresh launch where one can be made, else a WARN that says why, never a PASS."""
    launches = ["a"] * 5 + ["b"] * 5
    gold = [100.0, 100.5, 99.5, 100.2, 99.8, 110.0, 110.4, 109.6, 110.2, 109.8]
    for sd in (0.07, 0.10):
        spread = LaunchSpread(sd**2, 30, "the golden's launches")
        new = [84.0, 84.3, 83.8]
        v = decide(new, gold, **M, launches=launches, spread=spread, last_stage=True)
        assert v.name == "WARN" and v.undecided == "past" and v.ratio < 0.85 and v.p_drop > 0.001
        text = describe("p C=1", 84.0, 104.9, v, 0.15, 0.05)
        assert "within the 15 % fail margin" not in text
        assert (
            "WARN: slower by more than the 15 % fail margin, but not surely enough to FAIL" in text
        )
        assert text.endswith("no fresh launch could confirm it tonight, so it is not a PASS")
        confirming = decide(new, gold, **M, launches=launches, spread=spread, can_confirm=True)
        assert confirming.name == "CONFIRMING" and confirming.passed


def test_a_fail_one_launch_s_luck_could_make_is_confirmed_first():
    """30 % down, launches 8 % apart (known on 30 degrees of freedom, as a history knows them):
    significant against that spread, but not were launches three times as far apart: confirmed
    on a fresh launch where one can be made."""
    spread = LaunchSpread(0.08**2, 30, "the history's nights")
    launches = ["a"] * 5 + ["b"] * 5
    gold = [100.0, 100.5, 99.5, 100.2, 99.8, 101.0, 101.4, 100.6, 101.2, 100.8]
    new = [70.0, 70.3, 69.8]
    assert decide(new, gold, **M, launches=launches, spread=spread).name == "FAIL"
    first = decide(new, gold, **M, launches=launches, spread=spread, can_confirm=True)
    assert first.name == "CONFIRMING" and first.undecided == "fail"
    # The fresh launch reads the same: over tonight's two launches it is a FAIL.
    both = decide(
        [*new, 69.5, 70.1, 69.9], gold, **M, launches=launches, spread=spread,
        new_launches=["t1"] * 3 + ["t2"] * 3, can_confirm=True,
    )  # fmt: skip
    assert both.name == "FAIL" and both.launches == 2
    # A fresh launch back at the golden's level: it was one slow launch, not a collapse.
    cleared = decide(
        [*new, 100.2, 100.6, 99.9], gold, **M, launches=launches, spread=spread,
        new_launches=["t1"] * 3 + ["t2"] * 3, can_confirm=False,
    )  # fmt: skip
    assert cleared.name != "FAIL"


def test_one_run_never_fails_on_it_alone():
    """One run has no spread of its own: a drop past the margin is confirmed, or a WARN."""
    for gold in (GOLD, [100.0, 101.0]):
        assert decide([60.0], gold, **M).name == "UNCERTAIN"  # more runs first
        assert decide([60.0], gold, **M, last_stage=True).name == "WARN"
    # Against a precise golden, one run 40 % down would be significant: it says why it is not
    # a FAIL, and is confirmed on a fresh launch where one can be made.
    v = decide([60.0], GOLD, **M, last_stage=True)
    assert v.undecided == "one run" and "one run alone cannot FAIL a point" in describe(
        "p C=1", 60.0, 100.0, v, 0.15, 0.05
    )
    assert decide([60.0], GOLD, **M, last_stage=True, can_confirm=True).name == "CONFIRMING"


def test_the_blind_zone_is_said_at_the_fail_s_own_alpha():
    """The smallest drop that can FAIL is computed at α = 0.001, as a FAIL needs."""
    from pytest_llmperf.core.student import t_quantile

    spread = LaunchSpread(0.10**2, 30, "the history's nights")
    v = decide([97.0, 97.2, 96.9], GOLD, **M, spread=spread)
    limit_se = math.sqrt(0.10**2 * 2 + np.var(np.log(GOLD), ddof=1) / len(GOLD))
    dof_lo, dof_hi = 25, 40  # Satterthwaite, between the parts' degrees of freedom
    lo = 1 - math.exp(-t_quantile(0.999, dof_hi) * limit_se)
    hi = 1 - math.exp(-t_quantile(0.999, dof_lo) * limit_se)
    assert lo <= (v.detectable or 0) <= hi * 1.01


def test_launches_are_counted_once_however_many_points_share_them():
    """Eight points of two launches measure the launch spread on one degree of freedom."""
    from pytest_llmperf.core.verdict import pooled_launch_spread

    point = [[0.0, 0.01, -0.01], [0.1, 0.11, 0.09]]
    one = pooled_launch_spread([point], "x", launches=2)
    eight = pooled_launch_spread([point] * 8, "x", launches=2)
    assert one is not None and eight is not None
    assert eight.dof == one.dof == 1 and eight.variance == pytest.approx(one.variance)


def test_one_bad_night_does_not_set_the_history_s_spread():
    """Twenty quiet nights 2 % apart and one 30 % down: the spread stays about 2 %."""
    from pytest_llmperf.core.verdict import robust_launch_spread

    rng = np.random.default_rng(7)
    nights = list(rng.normal(0.0, 0.02, 20)) + [math.log(0.7)]
    found = robust_launch_spread(nights, "nights")
    assert found is not None and found.dof == 19 and 0.01 < found.sd < 0.03
    plain = float(np.std(nights, ddof=1))
    assert plain > 0.07  # what a plain sd makes of it


def test_an_accept_length_below_the_floor_fails_and_one_at_it_holds():
    from pytest_llmperf.core.judgement import below_floor

    low = below_floor("eagle3 C=70 accept_length", 2.41, 2.8, 3)
    assert low is not None and low.outcome.name == "FAIL"
    assert low.message.startswith(
        "eagle3 C=70 accept_length: 2.41 tok/step (mean of 3 runs) is below the profile's "
        "accept_length_floor 2.8 by 0.39 — FAIL"
    )
    assert below_floor("eagle3 C=70 accept_length", 2.8, 2.8, 3) is None


def said(metric: str, new: list[float], golden: list[float]) -> str:
    """A verdict on ``metric`` said as a failing check says it (its unit and words from the
    table of figures)."""
    from pytest_llmperf.core.judgement import GoldenRef, against_golden

    v = decide(
        new,
        golden,
        fail_margin=0.15,
        warn_margin=0.05,
        last_stage=True,
        lower_is_better=lower_is_better(metric),
    )
    ref = GoldenRef(mean=sum(golden) / len(golden))
    return against_golden(
        f"spec C=1 {metric}", sum(new) / len(new), metric, v, ref, Margins(0.15, 0.05)
    ).message


def test_an_accept_length_moves_lower_or_higher_not_slower():
    text = said("accept_length", [2.0, 2.01, 2.0], [3.0, 3.01, 2.99])
    assert "2.00 tok/step vs golden 3.00" in text and ", lower," in text
    assert "slower" not in text and "significantly lower by more than" in text


def test_energy_per_token_rises_as_more_energy_per_token_not_slower():
    """The H200's 30 % slowdown: 3.78 J/token recorded, 5.45 tonight (+44 %)."""
    text = said("energy_j_per_token", [5.44, 5.45, 5.45], [3.77, 3.78, 3.79])
    assert "J/tok vs golden 3.780" in text and "+44." in text
    assert ", more energy per token," in text and "significantly more energy per token" in text
    assert "slower" not in text and "faster" not in text
    better = said("energy_j_per_token", [3.0, 3.01, 3.0], [3.77, 3.78, 3.79])
    assert ", less energy per token," in better and "IMPROVED" in better


def test_runs_per_launch_weigh_a_launch_s_cost_against_how_far_launches_differ():
    """Kalibera and Jones's optimum: a 12-minute load beside 1-minute runs, runs as noisy as
    launches, wants √12 ≈ 3.5 runs a launch; a load as cheap as a run with launches four times
    as far apart as runs wants a quarter of a run (more launches instead); launches that never
    differ leave it to the runs."""
    from pytest_llmperf.core.staging import runs_per_launch

    assert runs_per_launch(720, 60, 0.01, 0.01) == pytest.approx(math.sqrt(12))
    assert runs_per_launch(2.0, 2.0, 0.0004, 0.0064) == pytest.approx(0.25)
    assert runs_per_launch(720, 60, 0.01, 0.0) is None


def test_a_recording_shares_its_runs_among_its_launches():
    """Five runs are what a golden needs; a recording of two launches takes three on each, of
    four or six launches two on each (the launches measure the launch spread, not the runs on
    one); --perf-update-runs is per launch, as asked."""
    from pytest_llmperf.core.staging import recording_runs

    assert recording_runs(3, None) == 5
    assert [recording_runs(3, None, n) for n in (2, 4, 6)] == [3, 2, 2]
    assert recording_runs(8, None, 2) == 4
    assert recording_runs(3, 7, 4) == 7


def test_a_recording_launch_takes_more_runs_where_they_are_cheap_beside_its_load():
    """A launch takes runs, a run at a time, while runs_by_cost asks for more (a 12-minute load
    beside 15-second runs, runs as noisy as launches: about 7 runs), and its last launch while
    the golden is not yet precise; an earlier launch of a cheap load stops at its share."""
    from pytest_llmperf.core.staging import records_more, runs_by_cost

    quiet, noisy = [100.0, 101.0, 99.0], [100.0, 120.0, 85.0]
    costly = runs_by_cost([quiet], 720.0, 15.0, launch_cv=0.01)
    assert costly is not None and 5 < costly < 9
    assert records_more(quiet, [], 0.15, estimable=True, first=3, by_cost=costly, last_launch=False)
    cheap = runs_by_cost([quiet], 1.0, 15.0, launch_cv=0.05)
    assert cheap is not None and cheap < 1
    assert not records_more(
        quiet, [], 0.15, estimable=True, first=3, by_cost=cheap, last_launch=False
    )
    assert records_more(noisy, quiet, 0.15, estimable=True, first=3, by_cost=cheap)
    assert not records_more(
        [*quiet, 100.0, 100.5], quiet, 0.15, estimable=True, first=3, by_cost=cheap
    )
    # Launches measured far apart pull the between-launch spread above the prior's.
    apart = runs_by_cost([[100.0, 101.0], [70.0, 71.0]], 720.0, 15.0, launch_cv=0.01)
    assert apart is not None and apart < costly / 2
    assert runs_by_cost([[100.0]], 720.0, 15.0, launch_cv=0.01) is None  # no within spread yet
    assert runs_by_cost([quiet], None, 15.0, launch_cv=0.01) is None  # attached: no load


def test_launches_measured_far_wider_than_the_launch_cv_overrule_it():
    """A profile's launch_cv of 3 % where twenty nights measured 10 %: pooled in on its six
    degrees of freedom it would hold the spread near 8.8 %; the nights overrule its size (it
    keeps its weight). Nights that agree with it, and a golden's few launches, are pooled with
    it."""
    nights = LaunchSpread(0.10**2, 19, "the history's nights")
    wide = with_prior(nights, 0.03)
    assert wide.variance == nights.variance and wide.dof == 19 + PRIOR_DOF
    assert "overrules" in wide.source
    near = with_prior(LaunchSpread(0.035**2, 19, "the history's nights"), 0.03)
    assert near.dof == 19 + PRIOR_DOF and 0.03 < near.sd < 0.035
    assert "overrules" not in near.source
    # A golden's few launches weigh less than it: however wide, they are pooled with it.
    few = with_prior(LaunchSpread(0.30**2, 5, "the golden's launches"), 0.03)
    assert few.dof == 5 + PRIOR_DOF and "overrules" not in few.source and few.sd < 0.3
    # Tonight's launches are pooled in, never overrule it (a slow launch would widen the spread
    # that judges it): two launches 29 % apart, beside a golden that agreed with the prior, FAIL
    # a 31 % drop, and the verdict says the spread it allowed for, tonight's included (7.7 %).
    golden = with_prior(LaunchSpread(0.03**2, 1, "the golden's launches"), 0.03)
    launches = ["a"] * 5 + ["b"] * 5
    gold = [100.0, 100.5, 99.5, 100.2, 99.8, 103.0, 103.4, 102.6, 103.2, 102.8]
    tonight = {"new": [60.0, 60.3, 59.8, 80.0, 80.2, 79.9], "new_launches": ["t"] * 3 + ["u"] * 3}
    v = decide(**tonight, golden=gold, **M, launches=launches, spread=golden)
    assert v.name == "FAIL" and v.ratio < 0.7
    assert v.launch_sd == pytest.approx(0.077, abs=0.001) and golden.sd < 0.03


@pytest.mark.parametrize(
    ("outcome", "undecided", "reported"),
    [
        (Outcome.CONFIRMING, "collapse", Outcome.PASS),
        (Outcome.WARN, "collapse", Outcome.PASS),  # no launch was left to confirm it
        (Outcome.CONFIRMING, "past", Outcome.WARN),
        (Outcome.WARN, "past", Outcome.WARN),
        (Outcome.FAIL, None, Outcome.WARN),
        (Outcome.IMPROVED, None, Outcome.PASS),
    ],
)
def test_a_figure_reported_not_gated_warns_only_past_its_margin(outcome, undecided, reported):
    """A figure that cannot fail its point: a collapse its runs could not rule out passes,
    whether or not a launch was left to confirm it; past the margin or a FAIL is a WARN."""
    v = Verdict(outcome, 1.1, 0.2, 0.8, 0.5, 2, 5, lower_is_better=True, undecided=undecided)
    assert not_gated(v, "why")[0].outcome is reported
