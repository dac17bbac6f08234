"""A window's energy from NVML's counter as a GPU has it: the counter moves in 100 ms steps,
the power reading is a moving average over a second. Known traces, so the truth is known."""

from __future__ import annotations

import pytest

from pytest_llmperf.host.gpu_series import GpuSample, held_back_names, window

STEP_S = 0.1  # the counter's update period (91-109 ms on an H200)


def true_power(t: float) -> float:
    """A load step: 100 W idle, 700 W from t = 10.3 s to t = 12.1 s."""
    return 700.0 if 10.3 <= t < 12.1 else 100.0


def true_energy_j(t: float, dt: float = 0.001) -> float:
    return sum(true_power(k * dt) * dt for k in range(int(t / dt)))


def counter_mj(t: float) -> float:
    """What the counter reads at ``t``: the energy at its last update."""
    return 1000 * true_energy_j(int(t / STEP_S) * STEP_S)


def averaged_power(t: float) -> float:
    """NVML's power reading: the mean over the last second."""
    return sum(true_power(t - k * 0.01) for k in range(100)) / 100


def trace(every_s: float, energy_every_s: float, start: float = 9.0, end: float = 13.5):
    """Full samples every ``every_s``, the counter alone every ``energy_every_s`` between."""
    samples, t, next_full = [], start, start
    while t <= end + 1e-9:
        full = t >= next_full - 1e-9
        if full:
            next_full += every_s
        samples.append(GpuSample(t, 0, counter_mj(t), averaged_power(t) if full else None,
                                 None, None, 0, full=full))  # fmt: skip
        t = round(t + energy_every_s, 6)
    return samples


def test_a_windows_energy_is_read_at_its_edges_from_the_counter():
    opened, closed = 10.25, 12.05  # a 1.8 s window across the load step
    truth = true_energy_j(closed) - true_energy_j(opened)
    edges = window(trace(0.5, 0.02), opened, closed)
    # Read every 20 ms and interpolated between the counter's steps: within 2 %.
    assert edges.energy_j == pytest.approx(truth, rel=0.02)
    # Read only with the full samples, 0.5 s apart, the edges blur (what was seen on an H200).
    blurred = window(trace(0.5, 0.5), opened, closed)
    assert abs(blurred.energy_j / truth - 1) > 0.05
    # The averaged power reading says less still: it lags the step by about a second.
    assert edges.mean_power_w * (closed - opened) < 0.8 * truth


def test_a_reading_that_repeats_the_counters_value_does_not_bend_the_line():
    """Reads 20 ms apart see each value five times: only the first of each is when it was
    true. Interpolating between all reads would put a staircase into a constant power."""
    flat = [GpuSample(t / 100, 0, 1000 * 300.0 * (int(t / 10) / 10), None, None, None, 0)
            for t in range(0, 1001, 2)]  # 300 W, counter stepping every 100 ms  # fmt: skip
    for opened in (2.01, 2.03, 2.05, 2.07, 2.09):
        assert window(flat, opened, opened + 1.0).energy_j == pytest.approx(300.0, rel=0.005)


def test_a_window_the_counter_does_not_bracket_has_no_energy_and_says_why():
    samples = trace(0.5, 0.02, start=10.0, end=11.0)
    w = window(samples, 10.5, 11.5)
    assert w.energy_j is None
    assert w.energy_missing == (
        "no energy figure: the energy counter of GPU 0 was not read on both sides of the "
        "window (1.00 s)"
    )


def test_each_event_is_named_once_and_a_power_cap_only_when_capped():
    assert held_back_names(0x8 | 0x40) == ["thermal (hardware)"]  # not "slowdown" as well
    assert held_back_names(0x8 | 0x80) == ["power brake (hardware)"]
    assert held_back_names(0x8) == ["slowdown (hardware)"]
    assert held_back_names(0x4, capped=False) == []
    assert held_back_names(0x4 | 0x20, capped=False) == ["thermal (software)"]


def test_a_reason_in_fewer_than_a_tenth_of_the_samples_is_not_named():
    def samples(held: int) -> list[GpuSample]:
        return [GpuSample(float(k), 0, 1000.0 * k, 300.0, None, None, 0x40 if k < held else 0)
                for k in range(20)]  # fmt: skip

    assert window(samples(1), 0.0, 19.0).held_back == []  # 1 of 20
    assert window(samples(2), 0.0, 19.0).held_back == [
        "GPU 0: thermal (hardware) in 10% of samples"
    ]
