"""GPU pre-flight and release at the pynvml boundary, with a fake pynvml that has busy and free GPUs.

The processes the fake reports are real (this test's own children), so the error's command
lines come from the real process table.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from types import SimpleNamespace

import pytest

from pytest_llmperf.errors import ServerStartError
from pytest_llmperf.host import gpu


class NVMLError(Exception):
    """As nvidia-ml-py's: the NVML return code in ``value``."""

    NAMES = {3: "Not Supported", 4: "Insufficient Permissions", 6: "Not Found",
             12: "NVML Shared Library Not Found"}  # fmt: skip

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.NAMES.get(self.value, f"NVML error {self.value}")


NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND = 3, 4, 6


class FakeNVML(types.ModuleType):
    """pynvml's functions the plugin uses; ``holders[i]`` = [(pid, bytes)] on GPU i.

    As a GPU runner has it: ``refuse`` maps a call's name to the NVML error it raises
    (NO_PERMISSION in a container or a Slurm cgroup, NOT_SUPPORTED on a GPU without it);
    ``mig[i]`` lists GPU i's MIG slices as (UUID, profile); ``used[i]`` is GPU i's memory in
    use, in bytes (by default, what its holders hold)."""

    NVMLError = NVMLError

    def __init__(
        self,
        holders: list[list[tuple[int, int]]],
        driver: bool = True,
        refuse: dict[str, int] | None = None,
        mig: dict[int, list[tuple[str, str]]] | None = None,
    ) -> None:
        super().__init__("pynvml")
        self.holders, self.driver, self.initialised = holders, driver, 0
        self.refuse, self.mig = refuse or {}, mig or {}
        self.used: dict[int, int] = {}

    def __getattribute__(self, name):
        refuse = types.ModuleType.__getattribute__(self, "__dict__").get("refuse") or {}
        if name in refuse:
            code = refuse[name]

            def refused(*args):
                raise NVMLError(code)

            return refused
        return types.ModuleType.__getattribute__(self, name)

    def nvmlInit(self):
        if not self.driver:
            raise NVMLError(12)  # NVML_ERROR_LIBRARY_NOT_FOUND
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return len(self.holders)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        if isinstance(handle, tuple):  # a MIG slice: (gpu, slot)
            return self.mig[handle[0]][handle[1]][0].encode()
        return f"GPU-{handle:08x}-5f0c-7a1e-4b2d-{handle:012x}".encode()

    def nvmlDeviceGetMigMode(self, handle):
        return [1, 1] if handle in self.mig else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):
        if slot >= len(self.mig.get(handle, [])):
            raise NVMLError(NOT_FOUND)  # an empty slot, as NVML answers it
        return (handle, slot)

    def nvmlDeviceGetName(self, handle):
        if isinstance(handle, tuple):
            return f"NVIDIA H100 80GB HBM3 MIG {self.mig[handle[0]][handle[1]][1]}".encode()
        return b"NVIDIA RTX PRO 6000 Blackwell Server Edition"

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = handle[0] if isinstance(handle, tuple) else handle
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.holders[gpu]]

    def nvmlDeviceGetMemoryInfo(self, handle):
        gpu = handle[0] if isinstance(handle, tuple) else handle
        used = self.used.get(gpu, sum(b for _, b in self.holders[gpu]) + 500 * 2**20)
        return SimpleNamespace(used=used, total=96 * 2**30)

    NVML_CLOCK_SM = 1

    def nvmlSystemGetDriverVersion(self):
        return b"590.48.01"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        assert not isinstance(handle, tuple), "a MIG slice has no power limit: read its parent"
        return 600_000  # milliwatts

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM and not isinstance(handle, tuple)
        return 2617


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "leftover-sglang-scheduler"]
    )
    yield proc
    proc.kill()
    proc.wait()


def install(monkeypatch, fake: FakeNVML) -> FakeNVML:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_a_busy_gpu_fails_the_launch_with_pid_and_command(monkeypatch, sleeper):
    fake = install(monkeypatch, FakeNVML([[], [(sleeper.pid, 70 * 2**30)]]))
    with pytest.raises(ServerStartError) as info:
        gpu.preflight("eagle3", {})
    message = str(info.value)
    # Only the busy GPU is named (GPU 0 is free).
    assert message.startswith("eagle3: GPU 1 is in use; the server would share it")
    assert (
        f"GPU 1: pid {sleeper.pid} holds 71,680 MiB: " in message
        and "leftover-sglang-scheduler" in message
    )
    assert "CUDA_VISIBLE_DEVICES" in message and "gpu_wait_s" in message
    assert fake.initialised == 0  # NVML shut down again


def test_only_the_profiles_visible_gpus_count(monkeypatch, sleeper):
    install(monkeypatch, FakeNVML([[], [(sleeper.pid, 2**30)]]))
    assert gpu.preflight("eagle3", {"CUDA_VISIBLE_DEVICES": "0"}) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the environment's, when the profile sets none
    assert gpu.preflight("eagle3", {}) == []
    with pytest.raises(ServerStartError, match=r"eagle3: GPU 1 is in use"):
        gpu.preflight("eagle3", {"CUDA_VISIBLE_DEVICES": "1"})


def test_gpu_wait_s_waits_for_the_gpus_to_be_freed(monkeypatch, sleeper):
    fake = install(monkeypatch, FakeNVML([[(sleeper.pid, 2**30)]]))
    threading.Timer(0.3, lambda: fake.holders[0].clear()).start()
    assert gpu.preflight("eagle3", {}, wait_s=5, poll_s=0.05) == []
    fake.holders[0].append((sleeper.pid, 2**30))
    with pytest.raises(
        ServerStartError, match=r"GPU 0 is in use after waiting 0.2 s \(gpu_wait_s\)"
    ):
        gpu.preflight("eagle3", {}, wait_s=0.2, poll_s=0.05)


def test_without_driver_or_bindings_a_note_and_nothing_else(monkeypatch):
    install(monkeypatch, FakeNVML([[(1, 1)]], driver=False))
    (note,) = gpu.preflight("eagle3", {})
    assert note.startswith(
        "GPU pre-flight skipped: no NVIDIA driver answered NVML (NVML Shared Library Not Found)"
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert gpu.preflight("eagle3", {}) == [
        "GPU pre-flight skipped: nvidia-ml-py is not installed (pip install 'pytest-llmperf[gpu]')"
    ]


def test_release_waits_for_the_servers_processes_and_reports_what_is_still_held(
    monkeypatch, sleeper
):
    fake = install(monkeypatch, FakeNVML([[(sleeper.pid, 3 * 2**30)], [(999999, 2**30)]]))
    threading.Timer(0.3, lambda: fake.holders[0].clear()).start()
    notes = gpu.wait_released("eagle3", [sleeper.pid], {}, timeout_s=5, poll_s=0.05)
    assert notes == [
        "eagle3: other processes hold memory on its GPUs after teardown:\n"
        "    GPU 1: pid 999999 holds 1,024 MiB: ? (not visible from here: another container, or "
        "the host's PID?)"
    ]
    fake.holders[0].append((sleeper.pid, 3 * 2**30))
    (held, _) = gpu.wait_released("eagle3", [sleeper.pid], {}, timeout_s=0.2, poll_s=0.05)
    assert held.startswith(
        "eagle3: 1 server process(es) still hold GPU memory 0.2 s after teardown:"
    )


def test_the_hardware_key_counts_the_visible_gpus(monkeypatch, tmp_path):
    from pytest_llmperf import engines
    from pytest_llmperf.profiles_file import load_profiles

    install(monkeypatch, FakeNVML([[], [], [], []]))
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.g]\nengine = "sglang"\nenv = { CUDA_VISIBLE_DEVICES = "0,1" }\n')
    profile = load_profiles(path).profiles["g"]
    facts = engines.of(profile).hardware(profile)
    # What changes a figure: the GPUs, the driver, CUDA, the power limit and the clock.
    assert facts["key"] == (
        "2xnvidia-rtx-pro-6000-blackwell-server-edition-drv590.48.01-cuda13.0-600w-2617mhz"
    )
    assert facts["gpu_count"] == 2 and facts["power_limit_w"] == 600
