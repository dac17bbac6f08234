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


class FakeNVML(types.ModuleType):
    """pynvml's functions the plugin uses; ``holders[i]`` = [(pid, bytes)] on GPU i."""

    class NVMLError(Exception):
        pass

    def __init__(self, holders: list[list[tuple[int, int]]], driver: bool = True) -> None:
        super().__init__("pynvml")
        self.holders, self.driver, self.initialised = holders, driver, 0

    def nvmlInit(self):
        if not self.driver:
            raise self.NVMLError("NVML Shared Library Not Found")
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return len(self.holders)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA RTX PRO 6000 Blackwell Server Edition"

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.holders[handle]]

    NVML_CLOCK_SM = 1

    def nvmlSystemGetDriverVersion(self):
        return b"590.48.01"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return 600_000  # milliwatts

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
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
    assert message.startswith("eagle3: GPU(s) 0, 1 are in use; the server would share them")
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
    with pytest.raises(ServerStartError, match=r"GPU\(s\) 1 are in use"):
        gpu.preflight("eagle3", {"CUDA_VISIBLE_DEVICES": "1"})


def test_gpu_wait_s_waits_for_the_gpus_to_be_freed(monkeypatch, sleeper):
    fake = install(monkeypatch, FakeNVML([[(sleeper.pid, 2**30)]]))
    threading.Timer(0.3, lambda: fake.holders[0].clear()).start()
    assert gpu.preflight("eagle3", {}, wait_s=5, poll_s=0.05) == []
    fake.holders[0].append((sleeper.pid, 2**30))
    with pytest.raises(ServerStartError, match=r"are in use after waiting 0.2 s \(gpu_wait_s\)"):
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
        "    GPU 1: pid 999999 holds 1,024 MiB: ? (not visible from here: another container?)"
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
