"""Pairing, speedup intervals, crossover and cut-off on hand-made samples."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from pytest_llmperf.core.speculative import analyse, paired_ratios, speedup

BASE = {
    1: [92.0, 93.0, 92.8],
    2: [170.0, 171.0, 169.5],
    10: [420.0, 425.0, 418.0],
    70: [760.0, 770.0, 773.0],
}


def test_speedup_interval_is_welch_on_logs():
    spec, base = [104.0, 106.0, 105.0], [100.0, 101.0, 99.0]
    sp = speedup(spec, base, 1)
    assert sp.ratio == pytest.approx(105.0 / 100.0)
    # By hand: difference of log means ± t(0.975, Welch dof) · standard error.
    ls, lb = [math.log(v) for v in spec], [math.log(v) for v in base]
    ms, mb = sum(ls) / 3, sum(lb) / 3
    vs = sum((x - ms) ** 2 for x in ls) / 2 / 3
    vb = sum((x - mb) ** 2 for x in lb) / 2 / 3
    dof = (vs + vb) ** 2 / (vs**2 / 2 + vb**2 / 2)
    half = stats.t.ppf(0.975, dof) * math.sqrt(vs + vb)
    assert sp.low == pytest.approx(math.exp(ms - mb - half))
    assert sp.high == pytest.approx(math.exp(ms - mb + half))
    assert sp.low < sp.ratio < sp.high and sp.status == "faster"


def test_identical_samples_give_a_degenerate_interval():
    sp = speedup([50.0, 50.0], [100.0, 100.0], 4)
    assert (sp.ratio, sp.low, sp.high) == pytest.approx((0.5, 0.5, 0.5)) and sp.status == "slower"


def test_seed_shape_crosses_after_one_stream_and_recommends_the_cutoff():
    # The reference node: speculation ahead at one stream (96.1 vs 92.6), behind under load (354 vs 773).
    spec = {
        1: [96.0, 96.3, 95.9],
        2: [150.0, 152.0, 149.0],
        10: [300.0, 305.0, 298.0],
        70: [352.0, 356.0, 354.0],
    }
    a = analyse(
        "eagle3",
        "baseline",
        "t::test_output_throughput",
        spec,
        BASE,
        accept={1: [2.1, 2.0, 2.2]},
        sglang_version="0.5.23",
    )
    assert [p.concurrency for p in a.points] == [1, 2, 10, 70]
    assert a.points[0].status == "faster" and a.points[-1].status == "slower"
    assert a.crossover.concurrency == 2 and a.crossover.status == "slower"
    assert a.cutoff == 1
    advice = a.advice()
    assert advice.startswith("crossover at C = 2: speedup 0.88")
    assert (
        "keep speculation up to C = 1, disable above: --speculative-adaptive --speculative-adaptive-config "
        "eagle3-adaptive-spec.json (" in advice
    )
    assert advice.endswith("speculation up to batch size 1, none from 2")
    be = a.points[0].break_even_accept
    assert be == pytest.approx(2.1 / a.points[0].ratio)  # accept length over speedup
    data = a.to_json()
    assert data["crossover_concurrency"] == 2 and data["recommended_max_speculative_batch"] == 1
    assert data["speedup"]["70"]["ratio"] == pytest.approx(354.0 / 767.667, rel=1e-3)


def test_never_crosses():
    spec = {c: [v * 1.3 for v in values] for c, values in BASE.items()}
    a = analyse("eagle3", "baseline", "t", spec, BASE)
    assert a.crossover is None and a.cutoff == 70
    assert a.advice() == (
        "speculation is faster at every measured level, up to C = 70; "
        "no cut-off within the measured range"
    )


def test_always_slower():
    spec = {c: [v * 0.8 for v in values] for c, values in BASE.items()}
    a = analyse("eagle3", "baseline", "t", spec, BASE)
    assert a.crossover.concurrency == 1 and a.cutoff is None
    assert a.advice().endswith("speculation is not faster at any measured level: disable it")
    assert a.sglang_setting() == "remove the --speculative-* flags"


def test_a_win_within_noise_is_said_so():
    spec = {1: [99.0, 95.0, 91.0], 10: [300.0, 301.0, 299.0]}
    a = analyse("eagle3", "baseline", "t", spec, BASE)
    assert a.points[0].status == "tie" and a.points[0].ratio > 1
    assert a.cutoff == 1
    assert (
        "keep speculation up to C = 1 (a win within noise at C = 1: 1.026 [0.926, 1.136])"
        in a.advice()
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.23", "--speculative-adaptive --speculative-adaptive-config e-adaptive-spec.json ("),
        (
            "0.5.14.post1",
            "--speculative-adaptive --speculative-adaptive-config e-adaptive-spec.json (",
        ),
        (
            "0.5.13",
            "serve C > 1 from the base configuration (this SGLang has no no-speculation tier)",
        ),
        (
            "sim-0.1.0",
            "serve C > 1 from the base configuration (this SGLang has no no-speculation tier)",
        ),
        (None, "serve C > 1 from the base configuration (this SGLang has no no-speculation tier)"),
    ],
)
def test_cutoff_as_sglang_can_apply_it(version, expected):
    spec = {1: [96.0, 96.3, 95.9], 2: [150.0, 152.0, 149.0]}
    assert (
        analyse("e", "b", "t", spec, BASE, sglang_version=version)
        .sglang_setting()
        .startswith(expected)
    )


def test_only_levels_both_measured_are_compared():
    a = analyse("e", "b", "t", {1: [96.0, 97.0], 5: [200.0, 201.0]}, BASE)
    assert [p.concurrency for p in a.points] == [1]


def test_paired_ratios_pair_by_run_and_drop_extras():
    assert paired_ratios([2.0, 4.0, 6.0, 8.0], [1.0, 2.0, 3.0]) == [2.0, 2.0, 2.0]
