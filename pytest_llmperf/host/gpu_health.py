"""The runner's GPUs before any server starts: a few seconds of NVML that save an hour of GPU
time measuring a node that cannot give a meaningful figure.

Each GPU the selected profiles will use is read once:

- memory already in use, and by which process; memory held by processes this host cannot
  see (another container) is a **stop**, as are visible holders unless the profile waits for
  them (``gpu_wait_s``; the launch's own check waits, host/gpu.py);
- ECC: uncorrectable errors since the driver loaded, pages waiting to be retired, rows
  waiting to be remapped or a failed remap: the memory is failing, a **stop**;
- temperature: at or past the slowdown threshold before any load is a **stop**, within
  20 °C of it a warning;
- the clock event reasons now, idle: held back by the hardware (slowdown, thermal, power
  brake) is a **stop**, by software (power cap, thermal) a warning;
- power limits and clocks against the fingerprint's: a GPU capped below its default limit, or
  one whose limit or maximum SM clock differs from the others', is a warning (the hardware
  key takes the lowest, so a golden of uncapped GPUs is INCOMPARABLE, not a false FAIL);
- the kernel log's NVIDIA Xid errors since boot (``/dev/kmsg``, where it is readable), a
  warning with their count and the last one: an Xid from hours ago may have been dealt with.

Readings a GPU does not support (ECC on a consumer card) are passed over.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmperf.host.gpu_series import (
    held_back_names,
    is_capped,
    power_limits,
    reasons_call,
)
from pytest_llmperf.host.nvml import Gpu, Nvml

KMSG = Path("/dev/kmsg")
#: Held back by the hardware: the GPU cannot give its speed, whatever the load.
HARDWARE_HELD_BACK = 0x8 | 0x40 | 0x80
#: Within this many °C of the slowdown threshold at idle: it will reach it under load.
WARM_MARGIN_C = 20
#: Memory in use with no process to show for it, beyond this share of the GPU's: not the driver's.
INVISIBLE_SHARE = 0.05
XID = re.compile(r"NVRM: Xid \((?P<bus>[^)]*)\): (?P<code>\d+),?(?P<rest>.*)")


@dataclass
class Health:
    """What the pre-flight found: ``stops`` make measuring meaningless, ``warnings`` are said."""

    stops: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check(nv: Nvml, gpus: Sequence[Gpu], waits: bool = False, kmsg: Path | None = KMSG) -> Health:
    """Read each of ``gpus``; ``waits``: a profile waits for busy GPUs. A reading the runner
    does not allow (a container, a MIG slice, a Slurm cgroup) is a warning naming it."""
    health = Health()
    for gpu in gpus:
        _memory(nv, gpu, waits, health)
        _ecc(nv, gpu, health)
        _temperature(nv, gpu, health)
        _clock_reasons(nv, gpu, health)
    _limits(nv, gpus, health)
    if kmsg is not None:
        health.warnings += xid_lines(read_kernel_log(kmsg))
    health.warnings += nv.warnings
    return health


def _const(nv: Nvml, name: str, default: int) -> int:
    return int(getattr(nv.nv, name, default))


def _memory(nv: Nvml, gpu: Gpu, waits: bool, health: Health) -> None:
    from pytest_llmperf.host.gpu import describe, processes

    procs = processes(nv, [gpu])
    if procs:
        what = f"{gpu.label} is in use:\n{describe(procs)}"
        if waits:
            health.warnings.append(f"{what}\n  (the launch waits gpu_wait_s for them)")
        else:
            health.stops.append(
                f"{what}\n  Stop them (a leftover server?), choose other GPUs "
                "(CUDA_VISIBLE_DEVICES in the profile's env), or set gpu_wait_s to wait."
            )
        return
    info = nv.read(gpu.label, "its memory", "nvmlDeviceGetMemoryInfo", gpu.handle)
    if info is not None and info.total and info.used > INVISIBLE_SHARE * info.total:
        health.stops.append(
            f"{gpu.label}: {info.used / 2**30:,.1f} of {info.total / 2**30:,.0f} GiB in use, by "
            "processes not visible from here (another container?): the server would get less "
            "memory than its golden's. Free the GPU or choose another."
        )


def _ecc(nv: Nvml, gpu: Gpu, health: Health) -> None:
    where, h = gpu.label, gpu.parent
    uncorrected = nv.read(
        where, "its ECC errors", "nvmlDeviceGetTotalEccErrors", h,
        _const(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), _const(nv, "NVML_VOLATILE_ECC", 0),
        optional=True,
    )  # fmt: skip
    problems = []
    if uncorrected:
        problems.append(f"{uncorrected} uncorrectable ECC error(s) since the driver loaded")
    pending = "nvmlDeviceGetRetiredPagesPendingStatus"
    if nv.read(where, "its retired pages", pending, h, optional=True):
        problems.append("memory pages waiting to be retired")
    rows = nv.read(where, "its remapped rows", "nvmlDeviceGetRemappedRows", h, optional=True)
    if rows is not None and len(rows) >= 4 and (rows[2] or rows[3]):
        problems.append("a row remap " + ("that failed" if rows[3] else "waiting for a reset"))
    if problems:
        health.stops.append(
            f"{where}: {'; '.join(problems)}: its memory is failing. Reset the GPU "
            f"(nvidia-smi -r -i {gpu.index}) or drain the node, then run again."
        )


def _temperature(nv: Nvml, gpu: Gpu, health: Health) -> None:
    where, h = gpu.label, gpu.parent
    now = nv.read(where, "its temperature", "nvmlDeviceGetTemperature", h,
                  _const(nv, "NVML_TEMPERATURE_GPU", 0), optional=True)  # fmt: skip
    slowdown = nv.read(where, "its slowdown temperature", "nvmlDeviceGetTemperatureThreshold", h,
                       _const(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1), optional=True)  # fmt: skip
    if now is None or not slowdown:
        return
    if now >= slowdown:
        health.stops.append(
            f"{where} is at {now} °C before any load, at or past its slowdown threshold "
            f"({slowdown} °C): it is throttling now. Let it cool, or check the node's cooling."
        )
    elif now >= slowdown - WARM_MARGIN_C:
        health.warnings.append(
            f"{where} idles at {now} °C, {slowdown - now} °C below its slowdown threshold: "
            "under load it may throttle (a FAIL's line says so)"
        )


def _clock_reasons(nv: Nvml, gpu: Gpu, health: Health) -> None:
    reasons = nv.read(gpu.label, "its clock event reasons", reasons_call(nv.nv), gpu.parent,
                      optional=True) or 0  # fmt: skip
    named = held_back_names(int(reasons))
    if not named:
        return
    line = f"{gpu.label} is held back now, before any load: {', '.join(named)}"
    if reasons & HARDWARE_HELD_BACK:
        health.stops.append(
            f"{line}. The hardware slows it whatever the load; check its power "
            "and cooling (nvidia-smi -q -d PERFORMANCE)."
        )
    else:
        health.warnings.append(line)


def _limits(nv: Nvml, gpus: Sequence[Gpu], health: Health) -> None:
    limits, clocks = {}, {}
    for gpu in gpus:
        where, h = gpu.label, gpu.parent
        enforced, default = power_limits(nv, gpu)
        limits[where] = nv.read(where, "its power limit", "nvmlDeviceGetPowerManagementLimit", h,
                                optional=True)  # fmt: skip
        clocks[where] = nv.read(where, "its max SM clock", "nvmlDeviceGetMaxClockInfo", h,
                                _const(nv, "NVML_CLOCK_SM", 1), optional=True)  # fmt: skip
        if is_capped(enforced, default):
            health.warnings.append(
                f"{where} is power-capped at {enforced // 1000} W of its default "
                f"{default // 1000} W (nvidia-smi -pl): a golden of uncapped GPUs is "
                "INCOMPARABLE on this node"
            )
    for what, values, unit, scale in (
        ("power limit", limits, "W", 1000),
        ("max SM clock", clocks, "MHz", 1),
    ):
        known = {g: v for g, v in values.items() if v}
        if len(set(known.values())) > 1:
            shown = ", ".join(f"{g} {v // scale} {unit}" for g, v in known.items())
            health.warnings.append(
                f"the GPUs differ in {what} ({shown}): the hardware key takes the lowest"
            )


def read_kernel_log(path: Path) -> list[str]:
    """The kernel log's lines (``/dev/kmsg``: read without blocking; nothing when it cannot
    be read here, as in most containers)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    lines = []
    try:
        while True:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while reading: go on
                    continue
                break
            if not chunk:
                break
            lines.append(chunk.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return "".join(lines).splitlines()


def xid_lines(lines: Iterable[str]) -> list[str]:
    """One warning for the NVIDIA Xid errors in the kernel log: how many, and the last."""
    found = [m for m in (XID.search(line) for line in lines) if m is not None]
    if not found:
        return []
    last = found[-1]
    codes = sorted({int(m.group("code")) for m in found})
    return [
        f"the kernel log has {len(found)} NVIDIA Xid error(s) since boot (Xid "
        f"{', '.join(map(str, codes))}; the last: Xid {last.group('code')} on {last.group('bus')}"
        f"{last.group('rest').rstrip()}): check nvidia-smi -q and the node's health"
    ]
