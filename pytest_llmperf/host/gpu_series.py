"""The GPUs over a point's runs: NVML sampled at a fixed interval, and what a run's window
says of them: the energy it took per output token, tok/s per watt, and whether a GPU was held
back (its clocks throttled for power or heat).

**Energy comes from the counter, not from power readings.** NVML's energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded) is monotonic and
moves in steps (every 100 ms on an H200); its power reading (``nvmlDeviceGetPowerUsage``) is a
moving average over about a second (on an H200 it reached 90 % of a load step's level 1.07 s
after it). So the sampler reads the counter alone every :data:`ENERGY_INTERVAL_S` (one NVML
call per GPU: microseconds), and the full readings every ``metrics_interval_s``. A window's
energy is the counter's rise between its opening and its close, each edge interpolated between
the instants the counter was first seen to take a new value (a reading that repeats the last
value says nothing of when the next step comes), summed over the server's GPUs; tok/s per watt
is the same joules' tokens per joule, so the two always agree. A window the readings do not
bracket has no energy figure: it is never extrapolated, and the point says so.

**Held back.** A run's line names a reason NVML gives for holding the clocks back (power cap,
thermal, power brake) when it held in at least :data:`MIN_HELD_SHARE` of the window's samples.
A GPU at its power limit under full load sets "power cap (software)" as a matter of course: it
is named only on a GPU capped below its default limit, or where its share of the window
(``power_cap_share``, kept with the golden) exceeds the golden's by at least
:data:`MIN_HELD_SHARE` (core/diagnosis.py). Hardware slowdown is named once, by its specific
cause (thermal or power brake) where NVML gives one.

The sampler is a thread of the pytest process: each sample is a handful of NVML calls that
return in microseconds, so it never holds the interpreter's lock long enough to delay a
request. Where nvidia-ml-py or a driver is missing it does nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.core.diagnosis import MIN_HELD_SHARE
from pytest_llmperf.host.nvml import Gpu, Nvml

#: NVML's clock event reasons (``nvmlClocksEventReason*``) that mean the GPU was held back by
#: power or heat, not idle or asked to: their bit and how a verdict names them.
HELD_BACK = {
    0x4: "power cap (software)",
    0x8: "slowdown (hardware)",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake (hardware)",
}
SW_POWER_CAP, HW_SLOWDOWN, HW_CAUSES = 0x4, 0x8, 0x40 | 0x80
#: An enforced power limit below this share of the default one is a cap someone set.
CAPPED_BELOW_DEFAULT = 0.98
#: How often the energy counter alone is read (it moves every 100 ms).
ENERGY_INTERVAL_S = 0.02


def held_back_names(reasons: int, capped: bool = True) -> list[str]:
    """What ``reasons`` held the clocks back for, each event once: hardware slowdown is named
    by its cause where one is set; the software power cap only on a ``capped`` GPU."""
    if reasons & HW_SLOWDOWN and reasons & HW_CAUSES:
        reasons &= ~HW_SLOWDOWN
    if not capped:
        reasons &= ~SW_POWER_CAP
    return [name for bit, name in HELD_BACK.items() if reasons & bit]


@dataclass(frozen=True)
class GpuSample:
    t: float  # CLOCK_MONOTONIC seconds
    gpu: int
    energy_mj: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    temperature_c: float | None
    reasons: int
    #: The GPU's enforced power limit is below its default one (someone capped it).
    capped: bool = False
    #: False: the energy counter alone was read (between full samples).
    full: bool = True


@dataclass
class GpuWindow:
    """What the GPUs did over one run's window."""

    energy_j: float | None
    mean_power_w: float | None
    #: How each GPU was held back, e.g. "GPU 3: power cap (software) in 40 % of samples".
    held_back: list[str] = field(default_factory=list)
    #: Why there is no energy figure although the GPUs were sampled (None: there is one).
    energy_missing: str | None = None
    #: The highest share of the window's samples in which a GPU at its default power limit was
    #: at that limit ("power cap (software)": normal at full load, so compared with the
    #: golden's, never named alone); None where no such GPU was sampled in the window.
    power_cap_share: float | None = None


def window(samples: Sequence[GpuSample], start: float, end: float) -> GpuWindow:
    """The GPUs between ``start`` and ``end`` (monotonic seconds)."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        by_gpu.setdefault(s.gpu, []).append(s)
    energy: float | None = 0.0
    missing = []
    powers: list[float] = []
    held: list[str] = []
    at_limit: list[float] = []
    for gpu, trace in sorted(by_gpu.items()):
        used = _rise(trace, start, end)
        if used is None:
            missing.append(f"GPU {gpu}")
        energy = None if used is None or energy is None else energy + used
        inside = [s for s in trace if s.full and start <= s.t <= end]
        powers += [s.power_w for s in inside if s.power_w is not None]
        held += _held(gpu, inside)
        uncapped = [s for s in inside if not s.capped]
        if uncapped:
            at_limit.append(sum(bool(s.reasons & SW_POWER_CAP) for s in uncapped) / len(uncapped))
    mean_power = sum(powers) / len(powers) * len(by_gpu) if powers else None
    why = None
    if missing and by_gpu:
        why = (
            f"no energy figure: the energy counter of {', '.join(missing)} was not read on "
            f"both sides of the window ({end - start:.2f} s)"
        )
    return GpuWindow(
        energy / 1000 if energy is not None and by_gpu else None,
        mean_power,
        held,
        why,
        max(at_limit) if at_limit else None,
    )


def _held(gpu: int, inside: Sequence[GpuSample]) -> list[str]:
    counts: dict[str, int] = {}
    for s in inside:
        for name in held_back_names(s.reasons, s.capped):
            counts[name] = counts.get(name, 0) + 1
    return [
        f"GPU {gpu}: {name} in {n / len(inside):.0%} of samples"
        for name, n in counts.items()
        if n >= MIN_HELD_SHARE * len(inside)
    ]


def _rise(trace: list[GpuSample], start: float, end: float) -> float | None:
    """The energy counter's rise (mJ) from ``start`` to ``end``; None unless readings bracket
    both. The counter holds each value until its next step: the instant a new value was first
    read is (within a read's interval) when it was true, so the edges are interpolated between
    those instants, never between two readings of one value."""
    points = [(s.t, s.energy_mj) for s in trace if s.energy_mj is not None]
    steps = points[:1] + [b for a, b in zip(points, points[1:]) if b[1] != a[1]]
    if len(steps) < 2 or steps[0][0] > start or steps[-1][0] < end:
        return None
    times = [t for t, _ in steps]

    def at(t: float) -> float:
        k = min(max(bisect.bisect_right(times, t), 1), len(steps) - 1)
        (t0, e0), (t1, e1) = steps[k - 1], steps[k]
        return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)

    return max(0.0, at(end) - at(start))


class GpuSampler:
    """NVML on the server's GPUs, sampled in a thread while a point's runs go on: every
    reading each ``interval_s``, the energy counter alone each ``energy_interval_s``."""

    def __init__(
        self,
        nv: Nvml,
        gpus: Sequence[Gpu],
        interval_s: float,
        energy_interval_s: float = ENERGY_INTERVAL_S,
    ) -> None:
        # One sample per physical GPU (two MIG slices of one GPU read the same counters).
        self.nv, self.gpus = nv, list({g.index: g for g in gpus}.values())
        self.interval_s, self.energy_interval_s = interval_s, min(energy_interval_s, interval_s)
        self.capped = {g.index: _capped(nv, g) for g in self.gpus}
        self.samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="llmperf-nvml", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            next_full = time.monotonic()
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_full:
                    self.sample()
                    next_full += self.interval_s
                else:
                    self.sample(full=False)
                wake = min(next_full, time.monotonic() + self.energy_interval_s)
                self._stop.wait(max(0.0, wake - time.monotonic()))
            self.sample()  # one after the last window closed, so that it is bracketed
        except Exception as exc:  # never a traceback from a thread: the figures go missing
            self.nv.warn(f"the NVML sampler stopped: {exc!r}")

    def sample(self, full: bool = True) -> None:
        for gpu in self.gpus:
            t = time.monotonic()
            self.samples.append(self._read(gpu, t, full))

    def _read(self, gpu: Gpu, t: float, full: bool) -> GpuSample:
        nv, h, where = self.nv, gpu.parent, gpu.label
        # A MIG slice's counter is its whole GPU's: no energy figure for a slice.
        energy = None if gpu.mig else _number(nv.read(
            where, "its energy counter", "nvmlDeviceGetTotalEnergyConsumption", h, optional=True))  # fmt: skip
        if not full:
            return GpuSample(
                t, gpu.index, energy, None, None, None, 0, self.capped[gpu.index], False
            )

        def number(what: str, call: str, *args: Any) -> float | None:
            return _number(nv.read(where, what, call, h, *args, optional=True))

        sm, sensor = getattr(nv.nv, "NVML_CLOCK_SM", 1), getattr(nv.nv, "NVML_TEMPERATURE_GPU", 0)
        return GpuSample(
            t,
            gpu.index,
            energy,
            _watts(number("its power", "nvmlDeviceGetPowerUsage")),
            number("its SM clock", "nvmlDeviceGetClockInfo", sm),
            number("its temperature", "nvmlDeviceGetTemperature", sensor),
            int(number("its clock event reasons", reasons_call(nv.nv)) or 0),
            self.capped[gpu.index],
        )

    def stop(self) -> list[GpuSample]:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):  # pynvml.NVMLError: already gone
            self.nv.nv.nvmlShutdown()
        return self.samples


def power_limits(nv: Nvml, gpu: Gpu) -> tuple[Any, Any]:
    """The GPU's enforced and default power limits (mW; None where not read)."""
    where, h = gpu.label, gpu.parent
    enforced = nv.read(where, "its power limit", "nvmlDeviceGetEnforcedPowerLimit", h,
                       optional=True)  # fmt: skip
    default = nv.read(where, "its default power limit",
                      "nvmlDeviceGetPowerManagementDefaultLimit", h, optional=True)  # fmt: skip
    return enforced, default


def is_capped(enforced: Any, default: Any) -> bool:
    """Whether an enforced power limit is below the default one (someone capped the GPU)."""
    return bool(enforced and default and enforced < CAPPED_BELOW_DEFAULT * default)


def _capped(nv: Nvml, gpu: Gpu) -> bool:
    return is_capped(*power_limits(nv, gpu))


def start_sampler(env: Mapping[str, str], interval_s: float) -> tuple[GpuSampler | None, list[str]]:
    """A sampler on the GPUs a server with ``env`` uses (its CUDA_VISIBLE_DEVICES, else the
    environment's, else all), and what NVML would not read; None where NVML is not to be had
    (no nvidia-ml-py, no driver) or names no GPU."""
    import os

    try:
        import pynvml
    except ImportError:
        return None, []
    try:
        pynvml.nvmlInit()
    except Exception:  # pynvml.NVMLError: no driver, no device
        return None, []
    nv = Nvml(pynvml)
    gpus, problems = nv.gpus({**os.environ, **env})
    if not gpus:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        return None, problems + nv.warnings
    return GpuSampler(nv, gpus, interval_s), problems


def reasons_call(nv: Any) -> str:
    """The name of the call that reads the clock event reasons: renamed in NVML 12.x ("clocks
    event reasons"); older bindings have the throttle name."""
    new = "nvmlDeviceGetCurrentClocksEventReasons"
    return new if hasattr(nv, new) else "nvmlDeviceGetCurrentClocksThrottleReasons"


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _watts(milliwatts: float | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def series_json(samples: Sequence[GpuSample], origin: float) -> dict[str, Any]:
    """The samples as the results JSON keeps them: per GPU, ``t`` from ``origin`` and each
    reading."""
    out: dict[str, Any] = {}
    for s in samples:
        if not s.full:
            continue
        gpu = out.setdefault(str(s.gpu), {"t": [], "power_w": [], "sm_clock_mhz": [],
                                          "temperature_c": [], "reasons": []})  # fmt: skip
        gpu["t"].append(round(s.t - origin, 3))
        gpu["power_w"].append(s.power_w)
        gpu["sm_clock_mhz"].append(s.sm_clock_mhz)
        gpu["temperature_c"].append(s.temperature_c)
        gpu["reasons"].append(s.reasons)
    return out
