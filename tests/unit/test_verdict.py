"""The verdict rule on hand-made samples (statistics.md §0)."""

import math

import pytest

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.verdict import decide, describe

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
    # R <= 0.85 at the last stage
    assert decide([82.0, 88.0, 80.0], GOLD, **M, last_stage=True).name == "FAIL"


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
    from pytest_llmperf.core.verdict import first_stage, half_width

    # 99 % half-width with 2 runs vs 10 at CV 0.6 %: t(0.99, 10) · 0.006 · √(1/2 + 1/10) ≈ 1.3 %.
    assert half_width(GOLD, 2) == pytest.approx(0.013, abs=0.002)
    assert first_stage(GOLD, 0.15, 3) == 2
    noisy = [100.0, 80.0, 120.0, 90.0, 110.0, 100.0]  # CV ~14 %
    assert first_stage(noisy, 0.15, 3) == 3
    assert first_stage(GOLD[:4], 0.15, 3) == 3  # too few golden runs to trust its spread
    assert first_stage(GOLD, 0.15, 5) == 2 and first_stage(GOLD, 0.15, 1) == 1


def test_a_recording_stops_at_five_runs_once_precise_and_not_before():
    from pytest_llmperf.core.verdict import golden_is_precise

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
