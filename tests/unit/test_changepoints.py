"""The change-point detector on series whose answer is known, and against asv's step detection
(a second, independent implementation: L1 Potts, BSD-3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_llmperf.history.changepoints import detect, e_divisive_split
from pytest_llmperf.history.series import Night, Series
from tests.history_data import DAY, START


def logs(values):
    return [math.log(v) for v in values]


def nights(values, runs=3, noise=0.004, seed=0):
    """A Series of nights with the given means, each night ``runs`` runs around its mean."""
    rng = np.random.default_rng(seed)
    out = []
    for i, mean in enumerate(values):
        vals = tuple(mean * math.exp(rng.normal(0, noise)) for _ in range(runs))
        out.append(Night(f"run-{i + 1}", START + i * DAY, vals, commit=f"c{i + 1:04d}"))
    return Series("sim-baseline", "t.py::test[C=1]", "output_tok_s", False, tuple(out))


def test_the_split_is_where_the_step_is():
    x = np.array(logs([100, 101, 99, 100, 100, 92, 91, 92.5, 92, 91.5]))
    tau, q = e_divisive_split(x)
    assert tau == 5 and q > 0


@pytest.mark.parametrize("seed", range(5))
def test_an_8_percent_step_from_night_5_names_night_5_at_night_8(seed):
    rng = np.random.default_rng(seed)
    series = nights(
        [1000 * math.exp(rng.normal(0, 0.005)) * (0.92 if i >= 4 else 1) for i in range(8)],
        seed=seed,
    )
    cps = series.change_points()
    assert [c.index for c in cps] == [4]
    report = series.report(cps[0])
    assert report["first_bad_run"] == "run-5" and report["last_good_run"] == "run-4"
    assert report["change"] == pytest.approx(-0.08, abs=0.02)
    low, high = report["interval"]
    assert low < report["change"] < high and high - low < 0.06  # −8 % ± 3 %
    assert report["worse"] and report["what_changed"] == ["commit c0004 → c0005"]


def test_quiet_series_have_no_change_points():
    rng = np.random.default_rng(7)
    found = sum(len(detect(rng.normal(0, 0.02, 9))) for _ in range(300))
    assert found <= 3  # at most 1 % of quiet 9-night series


def test_a_latency_series_reads_a_rise_as_worse():
    values = [0.050] * 4 + [0.060] * 4
    rng = np.random.default_rng(1)
    series = Series(
        "p", "t.py::test[C=1] ttft_p99_s", "ttft_p99_s", True,
        tuple(Night(f"r{i}", START + i * DAY, (v * math.exp(rng.normal(0, 0.01)),)) for i, v in enumerate(values)),
    )  # fmt: skip
    (cp,) = series.change_points()
    report = series.report(cp)
    assert report["change"] == pytest.approx(0.20, abs=0.03) and report["worse"]


def test_two_steps_are_both_found():
    rng = np.random.default_rng(3)
    means = [100] * 10 + [90] * 10 + [99] * 10
    x = [math.log(m) + rng.normal(0, 0.005) for m in means]
    assert [c.index for c in detect(x)] == [10, 20]


@pytest.mark.parametrize("seed", range(3))
def test_asv_step_detection_agrees_on_where_a_step_is(seed):
    asv = pytest.importorskip("asv.step_detect")
    rng = np.random.default_rng(seed)
    tok_s = [1000 * math.exp(rng.normal(0, 0.01)) * (0.85 if i >= 17 else 1) for i in range(30)]
    ours = [c.index for c in detect(logs(tok_s))]
    # asv flags upward steps only: feed it the time per token.
    regressions = asv.detect_regressions(asv.detect_steps([1 / v for v in tok_s]))
    assert regressions is not None
    _latest, _best, positions = regressions
    assert ours == [17]
    assert [(last_good, first_bad) for last_good, first_bad, *_ in positions] == [(16, 17)]


def test_a_slow_drift_is_one_open_change_from_where_it_began():
    series = nights([1000 * 0.98 ** max(0, i - 7) for i in range(16)], seed=2)
    drift = series.drift()
    assert drift is not None and drift["worse"]
    assert drift["change"] < -0.08
    first_bad = int(drift["first_bad_run"].split("-")[1])
    assert 8 <= first_bad <= 12  # the drift began with night 9


def test_re_recording_the_golden_accepts_the_level_before_it():
    series = nights([1000] * 5 + [900] * 5, seed=4)
    assert series.drift() is not None
    recorded = series.nights[6].started_at
    assert series.drift(since=recorded) is None
