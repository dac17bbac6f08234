"""What a series adds to a verdict: the drift gate (a change the golden alone passes) and the
night-to-night noise (a session shift the series has seen before is no FAIL on its own)."""

from __future__ import annotations

import math

import numpy as np

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.verdict import Margins, decide
from pytest_llmperf.history import gate
from pytest_llmperf.history.series import Night, Series
from tests.history_data import DAY, START

MARGINS = Margins(fail=0.15, warn=0.05)


def series_of(night_means, runs=3, noise=0.003, seed=0, lower=False):
    rng = np.random.default_rng(seed)
    nights = tuple(
        Night(
            f"r{i + 1}",
            START + i * DAY,
            tuple(m * math.exp(rng.normal(0, noise)) for _ in range(runs)),
            commit=f"c{i + 1}",
        )
        for i, m in enumerate(night_means)
    )
    return Series("p", "t.py::test[C=10]", "ttft_p99_s" if lower else "output_tok_s", lower, nights)


def verdict_of(series, golden, spread=None):
    return decide(
        series.nights[-1].values, golden, fail_margin=MARGINS.fail, warn_margin=MARGINS.warn,
        last_stage=True, lower_is_better=series.lower_is_better, spread=spread,
    )  # fmt: skip


def test_an_8_percent_step_passes_the_golden_but_warns_by_the_drift_gate():
    golden = [1000 * (1 + d) for d in (-0.003, 0.0, 0.002, -0.001, 0.001)]
    series = series_of([1000] * 4 + [920] * 4)
    first = verdict_of(series, golden)
    assert first.outcome is Outcome.WARN  # the golden alone: −8 %, a WARN at most, every night
    result, lines, history = gate.judge(series, first, MARGINS, since=None)
    assert result.outcome is Outcome.WARN
    assert history["drift"]["first_bad_run"] == "r5" and "since run r5" in lines[0]
    assert history["runs"] == 8 and len(history["change_points"]) == 1


def test_a_drift_beyond_the_fail_margin_fails_though_tonight_passes_its_golden():
    means = [1000] * 6 + [1000 * 0.97**k for k in range(1, 8)]
    series = series_of(means, seed=1)
    golden = [series.nights[-1].mean * 1.1] * 5  # a golden re-recorded mid-way, say
    golden = [g * (1 + 0.001 * k) for k, g in enumerate(golden)]
    first = verdict_of(series, golden)
    assert first.outcome.passed
    result, lines, _ = gate.judge(series, first, MARGINS, since=None)
    assert result.outcome is Outcome.FAIL
    assert "beyond the 15 % fail margin" in lines[0]


def test_a_session_shift_within_the_nights_spread_is_not_a_fail():
    rng = np.random.default_rng(5)
    # Nights that move ±12 % from session to session (a shared, busy machine), tonight −17 %.
    means = [1000 * math.exp(rng.normal(0, 0.12)) for _ in range(12)] + [830]
    series = series_of(means, noise=0.002)
    golden = [1000 * (1 + 0.001 * k) for k in range(5)]
    first = verdict_of(series, golden)
    assert first.outcome is Outcome.FAIL  # the golden alone: far beyond its own tight runs
    spread = gate.night_spread(series)  # with a history, the nights are the launches
    assert spread is not None and 0.08 < spread.sd < 0.18 and spread.dof == 11
    with_nights = verdict_of(series, golden, spread)
    assert with_nights.outcome is not Outcome.FAIL and with_nights.launch_sd == spread.sd


def test_a_fall_beyond_anything_the_series_has_seen_still_fails():
    means = [1000 * (1 + d) for d in (0.01, -0.01, 0.0, 0.005, -0.005, 0.01, 0.0, -0.01)] + [700]
    series = series_of(means)
    golden = [1000 * (1 + 0.001 * k) for k in range(5)]
    with_nights = verdict_of(series, golden, gate.night_spread(series))
    result, _, _ = gate.judge(series, with_nights, MARGINS, since=None)
    assert result.outcome is Outcome.FAIL


def test_without_a_history_the_golden_decides_alone():
    series = series_of([830])
    golden = [1000 * (1 + 0.001 * k) for k in range(5)]
    assert gate.night_spread(series) is None  # one night: no spread to speak of
    first = verdict_of(series, golden)
    result, lines, history = gate.judge(series, first, MARGINS, since=None)
    assert result == first and lines == [] and history["change_points"] == []


def test_latency_drift_is_judged_on_its_rise():
    series = series_of([0.050] * 5 + [0.060] * 4, lower=True)
    golden = [0.056, 0.0561, 0.0559, 0.056, 0.0562]
    first = verdict_of(series, golden)
    result, lines, history = gate.judge(series, first, MARGINS, since=None)
    assert history["drift"]["change"] > 0.15 and result.outcome is Outcome.FAIL
