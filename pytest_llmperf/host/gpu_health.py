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
from typing import Any

from pytest_llmperf.host.gpu_series import HELD_BACK, reasons_call

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


def check(nv: Any, indices: Sequence[int], waits: bool = False, kmsg: Path | None = KMSG) -> Health:
    """Read each GPU of ``indices`` (NVML initialised); ``waits``: a profile waits for busy GPUs."""
    health = Health()
    handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in indices}
    for index, handle in handles.items():
        _memory(nv, index, handle, waits, health)
        _ecc(nv, index, handle, health)
        _temperature(nv, index, handle, health)
        _clock_reasons(nv, index, handle, health)
    _limits(nv, handles, health)
    if kmsg is not None:
        health.warnings += xid_lines(read_kernel_log(kmsg))
    return health


def _read(call: Any, *args: Any) -> Any:
    try:
        return call(*args) if call is not None else None
    except Exception:  # pynvml.NVMLError_NotSupported and kin: not on this GPU
        return None


def _memory(nv: Any, index: int, handle: Any, waits: bool, health: Health) -> None:
    from pytest_llmperf.host.gpu import describe, processes

    procs = processes(nv, [index])
    if procs:
        what = f"GPU {index} is in use:\n{describe(procs)}"
        if waits:
            health.warnings.append(f"{what}\n  (the launch waits gpu_wait_s for them)")
        else:
            health.stops.append(
                f"{what}\n  Stop them (a leftover server?), choose other GPUs "
                "(CUDA_VISIBLE_DEVICES in the profile's env), or set gpu_wait_s to wait."
            )
        return
    info = _read(getattr(nv, "nvmlDeviceGetMemoryInfo", None), handle)
    if info is not None and info.total and info.used > INVISIBLE_SHARE * info.total:
        health.stops.append(
            f"GPU {index}: {info.used / 2**30:,.1f} of {info.total / 2**30:,.0f} GiB in use, by "
            "processes not visible from here (another container?): the server would get less "
            "memory than its golden's. Free the GPU or choose another."
        )


def _ecc(nv: Any, index: int, handle: Any, health: Health) -> None:
    uncorrected = _read(
        getattr(nv, "nvmlDeviceGetTotalEccErrors", None),
        handle,
        getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
        getattr(nv, "NVML_VOLATILE_ECC", 0),
    )
    problems = []
    if uncorrected:
        problems.append(f"{uncorrected} uncorrectable ECC error(s) since the driver loaded")
    if _read(getattr(nv, "nvmlDeviceGetRetiredPagesPendingStatus", None), handle):
        problems.append("memory pages waiting to be retired")
    rows = _read(getattr(nv, "nvmlDeviceGetRemappedRows", None), handle)
    if rows is not None and len(rows) >= 4 and (rows[2] or rows[3]):
        problems.append("a row remap " + ("that failed" if rows[3] else "waiting for a reset"))
    if problems:
        health.stops.append(
            f"GPU {index}: {'; '.join(problems)}: its memory is failing. Reset the GPU "
            f"(nvidia-smi -r -i {index}) or drain the node, then run again."
        )


def _temperature(nv: Any, index: int, handle: Any, health: Health) -> None:
    now = _read(
        getattr(nv, "nvmlDeviceGetTemperature", None),
        handle,
        getattr(nv, "NVML_TEMPERATURE_GPU", 0),
    )
    slowdown = _read(
        getattr(nv, "nvmlDeviceGetTemperatureThreshold", None),
        handle,
        getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
    )
    if now is None or not slowdown:
        return
    if now >= slowdown:
        health.stops.append(
            f"GPU {index} is at {now} °C before any load, at or past its slowdown threshold "
            f"({slowdown} °C): it is throttling now. Let it cool, or check the node's cooling."
        )
    elif now >= slowdown - WARM_MARGIN_C:
        health.warnings.append(
            f"GPU {index} idles at {now} °C, {slowdown - now} °C below its slowdown threshold: "
            "under load it may throttle (a FAIL's line says so)"
        )


def _clock_reasons(nv: Any, index: int, handle: Any, health: Health) -> None:
    reasons = _read(reasons_call(nv), handle) or 0
    named = [name for bit, name in HELD_BACK.items() if reasons & bit]
    if not named:
        return
    line = f"GPU {index} is held back now, before any load: {', '.join(named)}"
    if reasons & HARDWARE_HELD_BACK:
        health.stops.append(
            f"{line}. The hardware slows it whatever the load; check its power "
            "and cooling (nvidia-smi -q -d PERFORMANCE)."
        )
    else:
        health.warnings.append(line)


def _limits(nv: Any, handles: dict[int, Any], health: Health) -> None:
    limits, clocks = {}, {}
    for index, handle in handles.items():
        enforced = _read(getattr(nv, "nvmlDeviceGetEnforcedPowerLimit", None), handle)
        default = _read(getattr(nv, "nvmlDeviceGetPowerManagementDefaultLimit", None), handle)
        limits[index] = _read(nv.nvmlDeviceGetPowerManagementLimit, handle)
        clocks[index] = _read(nv.nvmlDeviceGetMaxClockInfo, handle, getattr(nv, "NVML_CLOCK_SM", 1))
        if enforced and default and enforced < 0.98 * default:
            health.warnings.append(
                f"GPU {index} is power-capped at {enforced // 1000} W of its default "
                f"{default // 1000} W (nvidia-smi -pl): a golden of uncapped GPUs is "
                "INCOMPARABLE on this node"
            )
    for what, values, unit, scale in (
        ("power limit", limits, "W", 1000),
        ("max SM clock", clocks, "MHz", 1),
    ):
        known = {i: v for i, v in values.items() if v}
        if len(set(known.values())) > 1:
            shown = ", ".join(f"GPU {i} {v // scale} {unit}" for i, v in known.items())
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
