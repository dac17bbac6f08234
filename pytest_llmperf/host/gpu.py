"""GPU state around a launch, through NVML (host/nvml.py).

- ``preflight``: before an SGLang launch, processes holding memory on the GPUs the profile will
  use (its ``CUDA_VISIBLE_DEVICES``, else the environment's, else all) fail the launch with
  their PIDs and command lines (a leftover server holding GPU memory makes the next one fail
  or share the GPUs), or, with the profile's ``gpu_wait_s``, are waited for first. It notes
  each GPU's memory in use before the launch.
- ``wait_released``: after teardown, wait until the server's processes have left NVML **and**
  each GPU's memory is back to its level before the launch, then say what is still held.
  Inside a container NVML lists the host's PIDs, which are not this process's (a container
  mounts its own ``/proc``, so even ``NSpid`` cannot map them back): the server's PIDs then
  never match, and the memory is what tells that the old contexts are gone.

Where there is no nvidia-ml-py or no NVIDIA driver, both say so in a note and do nothing; a
reading the runner does not allow is a note, never a crash.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_llmperf.errors import ServerStartError
from pytest_llmperf.host.nvml import Gpu, Nvml, session

#: Memory above the level before the launch that still counts as released: the driver's own
#: bookkeeping moves by a few MiB between readings.
RELEASED_SLACK_BYTES = 256 * 2**20

#: Each profile's GPU memory in use before its last launch, by GPU label (for wait_released).
_before_launch: dict[str, dict[str, int]] = {}


@dataclass(frozen=True)
class GpuProcess:
    gpu: str  # the GPU's label: "GPU 1"
    pid: int
    used_bytes: int | None
    command: str


def processes(nv: Nvml, gpus: Iterable[Gpu]) -> list[GpuProcess]:
    """The compute processes NVML lists on ``gpus``, with the command line where this process
    can see the PID (a host PID seen from a container cannot be)."""
    import psutil

    found = []
    for gpu in gpus:
        listed = nv.read(gpu.label, "its processes", "nvmlDeviceGetComputeRunningProcesses",
                         gpu.handle) or []  # fmt: skip
        for proc in listed:
            try:
                command = " ".join(psutil.Process(proc.pid).cmdline()) or "?"
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                command = "? (not visible from here: another container, or the host's PID?)"
            used = getattr(proc, "usedGpuMemory", None)
            found.append(GpuProcess(gpu.label, proc.pid, used, command))
    return found


def memory_used(nv: Nvml, gpu: Gpu) -> int | None:
    info = nv.read(gpu.label, "its memory", "nvmlDeviceGetMemoryInfo", gpu.handle)
    return None if info is None else int(info.used)


def describe(procs: list[GpuProcess]) -> str:
    def mib(b: int | None) -> str:
        return "?" if b is None else f"{b / 2**20:,.0f} MiB"

    return "\n".join(
        f"    {p.gpu}: pid {p.pid} holds {mib(p.used_bytes)}: {p.command[:200]}" for p in procs
    )


def preflight(
    name: str, env: Mapping[str, str], wait_s: float = 0.0, poll_s: float = 2.0
) -> list[str]:
    """Fail (ServerStartError) if the GPUs this server will use are held by other processes."""
    with session() as (nv, why_not):
        if nv is None:
            return [f"GPU pre-flight skipped: {why_not}"]
        gpus, problems = nv.gpus({**os.environ, **env})
        deadline = time.monotonic() + wait_s
        while True:
            busy = processes(nv, gpus)
            if not busy:
                used = {g.label: memory_used(nv, g) for g in gpus}
                _before_launch[name] = {k: v for k, v in used.items() if v is not None}
                return [f"{name}: {p}" for p in problems] + [f"{name}: {w}" for w in nv.warnings]
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    waited = f" after waiting {wait_s:g} s (gpu_wait_s)" if wait_s else ""
    labels = list(dict.fromkeys(p.gpu for p in busy))
    one = len(labels) == 1
    raise ServerStartError(
        f"{name}: {', '.join(labels)} {'is' if one else 'are'} in use{waited}; the server would "
        f"share {'it' if one else 'them'} or fail to allocate memory:\n{describe(busy)}\n  Stop "
        "these processes (a leftover server? kill the PIDs), choose other GPUs with "
        "CUDA_VISIBLE_DEVICES in the profile's env, or set gpu_wait_s to wait for them."
    )


def wait_released(
    name: str,
    pids: Iterable[int],
    env: Mapping[str, str],
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
) -> list[str]:
    """After teardown: wait for ``pids`` to leave NVML and the GPUs' memory to come back to
    its level before the launch; notes on what is still held."""
    pids = set(pids)
    before = _before_launch.pop(name, {})
    with session() as (nv, _):
        if nv is None:
            return []
        gpus, _problems = nv.gpus({**os.environ, **env})
        deadline = time.monotonic() + timeout_s
        while True:
            held = processes(nv, gpus)
            ours = [p for p in held if p.pid in pids]
            still = _still_used(nv, gpus, before)
            if not ours and not still or time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
        warnings = nv.warnings
    notes = []
    if ours:
        notes.append(
            f"{name}: {len(ours)} server process(es) still hold GPU memory {timeout_s:g} s after teardown:\n"
            + describe(ours)
        )
    elif still:
        notes.append(
            f"{name}: {timeout_s:g} s after teardown its GPUs' memory is not back to its level "
            f"before the launch ({'; '.join(still)}): the next launch may fail to allocate"
        )
    others = [p for p in held if p.pid not in pids]
    if others:
        notes.append(
            f"{name}: other processes hold memory on its GPUs after teardown:\n{describe(others)}"
        )
    return notes + [f"{name}: {w}" for w in warnings]


def _still_used(nv: Nvml, gpus: list[Gpu], before: Mapping[str, int]) -> list[str]:
    """The GPUs whose memory in use is above its level before the launch."""
    still = []
    for gpu in gpus:
        if gpu.label not in before:
            continue
        used = memory_used(nv, gpu)
        if used is not None and used > before[gpu.label] + RELEASED_SLACK_BYTES:
            still.append(
                f"{gpu.label} {used / 2**20:,.0f} MiB, {before[gpu.label] / 2**20:,.0f} MiB before"
            )
    return still
