"""What the server's series says of a slow point (core/diagnosis.py), on series whose shape is
known, and how a sampler's workers combine (servers/series.py)."""

from __future__ import annotations

import random

import pytest

from pytest_llmperf.core.diagnosis import explain
from pytest_llmperf.servers.series import ServerSeries, combined


def series(**gauges: list[float]) -> dict:
    n = len(next(iter(gauges.values())))
    return {"interval_s": 0.5, "t": [0.5 * k for k in range(n)], **gauges}


def test_a_full_kv_cache_with_a_queue_is_named_memory_bound():
    cause = explain(
        series(
            kv_cache_usage=[1.0] * 9 + [0.6],
            queued_requests=[37.0] * 10,
            running_requests=[8.0] * 10,
        )  # fmt: skip
    )
    assert cause == (
        "KV cache at 100% with 37 requests queued, 8 running for 90% of the window: the server "
        "was memory-bound (out of KV cache), not slower per token"
    )


def test_a_full_cache_without_a_queue_or_for_a_moment_is_not_memory_bound():
    assert explain(series(kv_cache_usage=[1.0] * 10, queued_requests=[0.0] * 10)) is None
    moment = series(kv_cache_usage=[1.0] * 3 + [0.5] * 7, queued_requests=[5.0] * 10)
    assert explain(moment) is None


def test_a_queue_that_grows_through_the_window_is_over_capacity():
    rng = random.Random(1)
    growing = [max(0.0, 0.8 * k + rng.gauss(0, 1.5)) for k in range(20)]
    cause = explain(series(queued_requests=growing))
    assert cause is not None and cause.startswith("the requests in the server grew through the ")
    assert cause.endswith("arrivals outpaced it, over capacity")
    # Over capacity a server first runs more at once: running and queued count together.
    running = [min(10.0, k) for k in range(20)]
    queued = [max(0.0, k - 10.0) for k in range(20)]
    assert explain(series(running_requests=running, queued_requests=queued)) is not None
    # A closed loop at C = 16: running and queued trade places, their sum stays at C.
    assert explain(series(running_requests=[16.0 - q for q in queued[:16]],
                          queued_requests=queued[:16])) is None  # fmt: skip


def test_a_queue_that_only_wanders_or_grows_by_a_request_or_two_says_nothing():
    rng = random.Random(2)
    wandering = [max(0.0, 5 + rng.gauss(0, 2)) for _ in range(20)]
    assert explain(series(queued_requests=wandering)) is None
    assert explain(series(queued_requests=[0.1 * k for k in range(20)])) is None  # +2 in all
    assert explain(series(queued_requests=[float(k) for k in range(4)])) is None  # too short


def test_workers_combine_per_sample_and_a_series_keeps_gaps_aligned():
    one = {"running_requests": 3.0, "kv_cache_usage": 0.4, "spec_accept_length": 2.0}
    two = {"running_requests": 5.0, "kv_cache_usage": 0.9, "spec_accept_length": 3.0}
    assert combined([one, two]) == {
        "running_requests": 8.0,
        "kv_cache_usage": 0.9,
        "spec_accept_length": 2.5,
    }
    kept = ServerSeries(0.5)
    kept.add([{"t": 10.0, "running_requests": 1.0}, {"t": 10.5, "queued_requests": 2.0}], 10.0)
    assert kept.to_json() == {
        "interval_s": 0.5,
        "t": [0.0, 0.5],
        "running_requests": [1.0, None],
        "queued_requests": [None, 2.0],
    }


def gpu_trace(gpu: int, watts: float, seconds: int, reasons: int = 0) -> list:
    from pytest_llmperf.host.gpu_series import GpuSample

    # One sample a second; the energy counter (mJ) rises by `watts` joules each second.
    return [GpuSample(100.0 + k, gpu, 5e6 + watts * 1000 * k, watts, 1980.0, 61.0, reasons)
            for k in range(seconds + 1)]  # fmt: skip


def test_a_windows_energy_is_the_counters_rise_summed_over_the_gpus():
    from pytest_llmperf.host.gpu_series import window

    samples = gpu_trace(0, 300.0, 20) + gpu_trace(1, 500.0, 20)
    w = window(samples, 102.5, 112.5)  # 10 s, between samples: interpolated
    assert w.energy_j == 8000.0 and w.mean_power_w == 800.0 and w.held_back == []
    # A window the samples do not bracket has no energy: never extrapolated.
    assert window(samples, 95.0, 105.0).energy_j is None
    assert window(samples, 110.0, 125.0).energy_j is None


def test_a_gpu_held_back_by_its_power_cap_is_named_with_its_share():
    from dataclasses import replace

    from pytest_llmperf.host.gpu_series import window

    capped = [replace(s, capped=True) if s.t < 106 else
              replace(s, sm_clock_mhz=1400.0, temperature_c=84.0, reasons=0x4, capped=True)
              for s in gpu_trace(3, 300.0, 10)]  # fmt: skip
    w = window(gpu_trace(0, 300.0, 10) + capped, 100.0, 110.0)
    assert w.held_back == ["GPU 3: power cap (software) in 45% of samples"]
    # The same reason on a GPU at its own default limit is how it runs at full load: unnamed.
    at_limit = [replace(s, capped=False) for s in capped]
    assert window(at_limit, 100.0, 110.0).held_back == []
    idle = gpu_trace(0, 80.0, 10, reasons=0x1)  # idle: a reason, but not holding it back
    assert window(idle, 100.0, 110.0).held_back == []


def test_the_share_at_the_default_power_limit_is_kept_and_named_only_above_the_goldens():
    from dataclasses import replace

    from pytest_llmperf.core.diagnosis import at_power_limit_more, causes
    from pytest_llmperf.host.gpu_series import window
    from tests.builders import measured

    at_limit = [s if s.t < 106 else replace(s, reasons=0x4) for s in gpu_trace(1, 700.0, 10)]
    w = window(gpu_trace(0, 300.0, 10) + at_limit, 100.0, 110.0)
    assert w.power_cap_share == pytest.approx(5 / 11) and w.held_back == []  # the higher GPU
    capped = [replace(s, capped=True) for s in at_limit]  # a capped GPU is named, not shared
    assert window(capped, 100.0, 110.0).power_cap_share is None
    assert at_power_limit_more(0.95, 0.40) == (
        "at its power limit, power cap (software), in 95% of samples, 40% when the golden was "
        "recorded"
    )
    assert at_power_limit_more(0.45, 0.40) is None  # within MIN_HELD_SHARE of the golden's
    assert at_power_limit_more(0.08, 0.0) is None  # under MIN_HELD_SHARE
    assert at_power_limit_more(0.95, None) is None  # a golden recorded without NVML
    assert at_power_limit_more(None, 0.0) is None  # tonight not sampled
    point = measured("p", 1, [100.0, 101.0])
    point.runs = [replace(r, gpu_power_cap_share=v) for r, v in zip(point.runs, (0.9, 1.0))]
    assert point.power_cap_share == pytest.approx(0.95)
    assert point.extra_golden_fields() == {"gpu_power_cap_share": 0.95}
    assert causes(point, {"gpu_power_cap_share": 0.9}) == []
    (line,) = causes(point, {"gpu_power_cap_share": 0.5})
    assert line.startswith("the GPU was held back during its runs (at its power limit, power cap")
