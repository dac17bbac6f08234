"""The GPUs over a point's runs: NVML sampled at a fixed interval, and what a run's window
says of them: the energy it took per output token, tok/s per watt, and whether a GPU was held
back (its clocks throttled for power or heat).

NVML's energy counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver
loaded) is monotonic, so a window's energy is the counter's rise between its opening and its
close, read off the samples by linear interpolation and summed over the server's GPUs
(ML.ENERGY and TensorRT-LLM's benchmarks report energy over a steady window the same way).
A window the samples do not bracket has no energy figure: it is never extrapolated.

The sampler is a thread of the pytest process: each sample is a handful of NVML calls that
return in microseconds, so it never holds the interpreter's lock long enough to delay a
request. Where nvidia-ml-py or a driver is missing it does nothing.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: NVML's clock event reasons (``nvmlClocksEventReason*``) that mean the GPU was held back by
#: power or heat, not idle or asked to: their bit and how a verdict names them.
HELD_BACK = {
    0x4: "power cap (software)",
    0x8: "slowdown (hardware)",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake (hardware)",
}


@dataclass(frozen=True)
class GpuSample:
    t: float  # CLOCK_MONOTONIC seconds
    gpu: int
    energy_mj: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    temperature_c: float | None
    reasons: int


@dataclass
class GpuWindow:
    """What the GPUs did over one run's window."""

    energy_j: float | None
    mean_power_w: float | None
    #: How each GPU was held back, e.g. "GPU 3: power cap (software) in 40 % of samples".
    held_back: list[str] = field(default_factory=list)


def window(samples: Sequence[GpuSample], start: float, end: float) -> GpuWindow:
    """The GPUs between ``start`` and ``end`` (monotonic seconds)."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        by_gpu.setdefault(s.gpu, []).append(s)
    energy: float | None = 0.0
    powers: list[float] = []
    held: list[str] = []
    for gpu, trace in sorted(by_gpu.items()):
        used = _rise(trace, start, end)
        energy = None if used is None or energy is None else energy + used
        inside = [s for s in trace if start <= s.t <= end]
        powers += [s.power_w for s in inside if s.power_w is not None]
        for bit, name in HELD_BACK.items():
            share = sum(bool(s.reasons & bit) for s in inside) / len(inside) if inside else 0.0
            if share > 0:
                held.append(f"GPU {gpu}: {name} in {share:.0%} of samples")
    mean_power = sum(powers) / len(powers) * len(by_gpu) if powers else None
    return GpuWindow(energy / 1000 if energy is not None and by_gpu else None, mean_power, held)


def _rise(trace: list[GpuSample], start: float, end: float) -> float | None:
    """The energy counter's rise (mJ) from ``start`` to ``end``, interpolated between samples
    that bracket both; None when they do not."""
    points = [(s.t, s.energy_mj) for s in trace if s.energy_mj is not None]
    if len(points) < 2 or points[0][0] > start or points[-1][0] < end:
        return None
    times = [t for t, _ in points]

    def at(t: float) -> float:
        k = min(max(bisect.bisect_right(times, t), 1), len(points) - 1)
        (t0, e0), (t1, e1) = points[k - 1], points[k]
        return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)

    return max(0.0, at(end) - at(start))


class GpuSampler:
    """NVML on the server's GPUs, sampled in a thread while a point's runs go on."""

    def __init__(self, pynvml: Any, indices: Sequence[int], interval_s: float) -> None:
        self.pynvml, self.indices, self.interval_s = pynvml, list(indices), interval_s
        self.samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="llmperf-nvml", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))
        self.sample()  # one after the last window closed, so that it is bracketed

    def sample(self) -> None:
        nv = self.pynvml
        for index in self.indices:
            t = time.monotonic()
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
            except Exception:  # pynvml.NVMLError: a GPU that fell off the bus reads as a gap
                continue
            self.samples.append(
                GpuSample(
                    t,
                    index,
                    _read(nv.nvmlDeviceGetTotalEnergyConsumption, handle),
                    _watts(_read(nv.nvmlDeviceGetPowerUsage, handle)),
                    _read(nv.nvmlDeviceGetClockInfo, handle, getattr(nv, "NVML_CLOCK_SM", 1)),
                    _read(
                        nv.nvmlDeviceGetTemperature, handle, getattr(nv, "NVML_TEMPERATURE_GPU", 0)
                    ),
                    int(_read(reasons_call(nv), handle) or 0),
                )
            )

    def stop(self) -> list[GpuSample]:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.pynvml.nvmlShutdown()
        except Exception:  # pynvml.NVMLError: already gone
            pass
        return self.samples


def start_sampler(env: Mapping[str, str], interval_s: float) -> GpuSampler | None:
    """A sampler on the GPUs a server with ``env`` uses (its CUDA_VISIBLE_DEVICES, else the
    environment's, else all); None where NVML is not to be had (no nvidia-ml-py, no driver)."""
    import os

    from pytest_llmperf.host.gpu import visible_indices

    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        indices = visible_indices(pynvml.nvmlDeviceGetCount(), {**os.environ, **env})
    except Exception:  # pynvml.NVMLError: no driver, no device
        return None
    return GpuSampler(pynvml, indices, interval_s) if indices else None


def reasons_call(nv: Any) -> Any:
    # Renamed in NVML 12.x ("clocks event reasons"); older bindings have the throttle name.
    return getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )


def _read(call: Any, *args: Any) -> float | None:
    if call is None:
        return None
    try:
        return float(call(*args))
    except Exception:  # pynvml.NVMLError_NotSupported and kin: this GPU has no such reading
        return None


def _watts(milliwatts: float | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def series_json(samples: Sequence[GpuSample], origin: float) -> dict[str, Any]:
    """The samples as the results JSON keeps them: per GPU, ``t`` from ``origin`` and each
    reading."""
    out: dict[str, Any] = {}
    for s in samples:
        gpu = out.setdefault(str(s.gpu), {"t": [], "power_w": [], "sm_clock_mhz": [],
                                          "temperature_c": [], "reasons": []})  # fmt: skip
        gpu["t"].append(round(s.t - origin, 3))
        gpu["power_w"].append(s.power_w)
        gpu["sm_clock_mhz"].append(s.sm_clock_mhz)
        gpu["temperature_c"].append(s.temperature_c)
        gpu["reasons"].append(s.reasons)
    return out
