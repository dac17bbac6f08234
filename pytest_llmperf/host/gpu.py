"""GPU state through NVML (``nvidia-ml-py``, the ``gpu`` extra, imported lazily).

- ``preflight``: before an SGLang launch, processes holding memory on the GPUs the profile will
  use (its ``CUDA_VISIBLE_DEVICES``, else the environment's, else all) fail the launch with
  their PIDs and command lines (a leftover server holding GPU memory makes the next one fail
  or share the GPUs), or, with the profile's ``gpu_wait_s``, are waited for first.
- ``wait_released``: after teardown, wait until the server's processes have left NVML and say
  how much memory is still held on those GPUs.

Where there is no nvidia-ml-py or no NVIDIA driver, both say so in a note and do nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import ServerStartError


@dataclass(frozen=True)
class GpuProcess:
    gpu: int
    pid: int
    used_bytes: int | None
    command: str


@contextlib.contextmanager
def nvml() -> Iterator[tuple[Any, str | None]]:
    """``(pynvml, None)`` initialised for the block, or ``(None, why not)``."""
    try:
        import pynvml
    except ImportError:
        yield None, "nvidia-ml-py is not installed (pip install 'pytest-llmperf[gpu]')"
        return
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError: no driver, no device
        yield None, f"no NVIDIA driver answered NVML ({exc})"
        return
    try:
        yield pynvml, None
    finally:
        pynvml.nvmlShutdown()


def visible_indices(count: int, env: Mapping[str, str]) -> list[int]:
    """Device indices named by CUDA_VISIBLE_DEVICES (numeric form), else all ``count``."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    return [int(i) for i in visible.split(",") if i.strip().isdigit() and int(i) < count]


def processes(pynvml: Any, indices: Iterable[int]) -> list[GpuProcess]:
    import psutil

    found = []
    for index in indices:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            try:
                command = " ".join(psutil.Process(proc.pid).cmdline()) or "?"
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                command = "? (not visible from here: another container?)"
            found.append(GpuProcess(index, proc.pid, getattr(proc, "usedGpuMemory", None), command))
    return found


def describe(procs: list[GpuProcess]) -> str:
    def mib(b: int | None) -> str:
        return "?" if b is None else f"{b / 2**20:,.0f} MiB"

    return "\n".join(
        f"    GPU {p.gpu}: pid {p.pid} holds {mib(p.used_bytes)}: {p.command[:200]}" for p in procs
    )


def preflight(
    name: str, env: Mapping[str, str], wait_s: float = 0.0, poll_s: float = 2.0
) -> list[str]:
    """Fail (ServerStartError) if the GPUs this server will use are held by other processes."""
    with nvml() as (pynvml, why_not):
        if pynvml is None:
            return [f"GPU pre-flight skipped: {why_not}"]
        indices = visible_indices(pynvml.nvmlDeviceGetCount(), {**os.environ, **env})
        deadline = time.monotonic() + wait_s
        while True:
            busy = processes(pynvml, indices)
            if not busy:
                return []
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    waited = f" after waiting {wait_s:g} s (gpu_wait_s)" if wait_s else ""
    raise ServerStartError(
        f"{name}: GPU(s) {', '.join(map(str, indices))} are in use{waited}; the server would share them or fail "
        f"to allocate memory:\n{describe(busy)}\n  Stop these processes (a leftover server? kill the PIDs), "
        "choose other GPUs with CUDA_VISIBLE_DEVICES in the profile's env, or set gpu_wait_s to wait for them."
    )


def wait_released(
    name: str,
    pids: Iterable[int],
    env: Mapping[str, str],
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
) -> list[str]:
    """After teardown: wait for ``pids`` to leave NVML; notes on what is still held."""
    pids = set(pids)
    with nvml() as (pynvml, why_not):
        if pynvml is None:
            return []
        indices = visible_indices(pynvml.nvmlDeviceGetCount(), {**os.environ, **env})
        deadline = time.monotonic() + timeout_s
        while True:
            held = processes(pynvml, indices)
            ours = [p for p in held if p.pid in pids]
            if not ours or time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    notes = []
    if ours:
        notes.append(
            f"{name}: {len(ours)} server process(es) still hold GPU memory {timeout_s:g} s after teardown:\n"
            + describe(ours)
        )
    others = [p for p in held if p.pid not in pids]
    if others:
        notes.append(
            f"{name}: other processes hold memory on its GPUs after teardown:\n{describe(others)}"
        )
    return notes
