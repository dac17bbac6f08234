"""NVML as a GPU runner has it: a container that lists the host's PIDs, a MIG slice or a Slurm
cgroup that refuses readings (NVML_ERROR_NO_PERMISSION), a GPU without a reading
(NVML_ERROR_NOT_SUPPORTED), GPUs named by UUID and MIG id. Against a fake pynvml that raises
and answers as nvidia-ml-py does (these machines have no GPU), at the boundary and end to end
through pytest."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_llmperf import engines
from pytest_llmperf.host import gpu, gpu_health, hardware
from pytest_llmperf.host.nvml import Nvml
from pytest_llmperf.profiles_file import load_profiles
from tests.integration.test_gpu import NO_PERMISSION, NOT_SUPPORTED, FakeNVML, install

MIGS = {1: [("MIG-7c1f0e2a-1111-5b6c-9d7e-0123456789ab", "1g.10gb"),
            ("MIG-9e4d3b2a-2222-5b6c-9d7e-0123456789ab", "3g.40gb")]}  # fmt: skip


def gpu_profile(tmp_path, visible: str, engine: str = "sglang"):
    path = tmp_path / "profiles.toml"
    path.write_text(
        f'[profiles.g]\nengine = "{engine}"\nenv = {{ CUDA_VISIBLE_DEVICES = "{visible}" }}\n'
    )
    return load_profiles(path).profiles["g"]


def test_a_refused_process_list_is_a_warning_never_a_crash(monkeypatch):
    install(monkeypatch, FakeNVML([[], []], refuse={
        "nvmlDeviceGetComputeRunningProcesses": NO_PERMISSION}))  # fmt: skip
    notes = gpu.preflight("eagle3", {})
    assert notes == [
        "eagle3: GPU 0: NVML would not read its processes: not permitted here "
        "(NVML_ERROR_NO_PERMISSION: a container, a MIG slice or a Slurm cgroup restricts it)",
        "eagle3: GPU 1: NVML would not read its processes: not permitted here "
        "(NVML_ERROR_NO_PERMISSION: a container, a MIG slice or a Slurm cgroup restricts it)",
    ]


def test_a_gpu_the_cgroup_denies_is_passed_over_with_its_reason(monkeypatch):
    """nvmlDeviceGetHandleByIndex refused (a Slurm cgroup that denies the device): the runner
    health reads nothing of it, says why, and the hardware key cannot be the CPU's."""
    fake = FakeNVML([[], []], refuse={"nvmlDeviceGetHandleByIndex": NO_PERMISSION})
    nv = Nvml(fake)
    gpus, problems = nv.gpus({"CUDA_VISIBLE_DEVICES": "1"})
    assert gpus == [] and problems == [
        "CUDA_VISIBLE_DEVICES=1: '1' is not a GPU NVML can open here (0 it can); CUDA uses no "
        "device from there on"
    ]
    assert nv.warnings[0].startswith("GPU 0: NVML would not read its handle: not permitted")
    health = gpu_health.check(nv, gpus, kmsg=None)
    assert health.stops == [] and len(health.warnings) == 2


def test_readings_a_gpu_does_not_support_are_passed_over_and_refused_ones_named():
    from tests.integration.test_runner_health import SickNVML

    fake = SickNVML(1)
    fake.refuse = {
        "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED,  # a consumer card: nothing to say
        "nvmlDeviceGetRemappedRows": NOT_SUPPORTED,
        "nvmlDeviceGetTemperatureThreshold": NO_PERMISSION,
    }
    nv = Nvml(fake)
    gpus, _ = nv.gpus({})
    health = gpu_health.check(nv, gpus, kmsg=None)
    assert health.stops == []
    assert health.warnings == [
        "GPU 0: NVML would not read its slowdown temperature: not permitted here "
        "(NVML_ERROR_NO_PERMISSION: a container, a MIG slice or a Slurm cgroup restricts it)"
    ]


def test_a_session_on_a_restricted_runner_starts_with_one_line_per_refusal(pytester, monkeypatch):
    from tests.integration.test_runner_health import PROFILES, SickNVML

    fake = install(monkeypatch, SickNVML(4))
    fake.refuse = {"nvmlDeviceGetComputeRunningProcesses": NO_PERMISSION}
    monkeypatch.setattr(gpu_health, "KMSG", pytester.path / "no-kmsg")
    pytester.makefile(".toml", **{"perf_suites/profiles": PROFILES})
    pytester.makepyfile(test_x="def test_x(llmperf):\n    pass\n")
    result = pytester.runpytest_inprocess(
        "--llm-profiles-file=perf_suites/profiles.toml", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "llmperf: runner health: GPU 2: NVML would not read its processes: not permitted*",
            "llmperf: runner health: GPU 3: NVML would not read its processes: not permitted*",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_gpus_named_by_uuid_and_by_mig_id_resolve_to_their_gpus(monkeypatch):
    fake = install(monkeypatch, FakeNVML([[], [], []], mig=MIGS))
    uuid2 = fake.nvmlDeviceGetUUID(2).decode()
    nv = Nvml(fake)
    gpus, problems = nv.gpus({"CUDA_VISIBLE_DEVICES": f"{uuid2[:12]},0"})  # a unique prefix
    assert problems == [] and [g.label for g in gpus] == ["GPU 2", "GPU 0"]
    (mig,), problems = nv.gpus({"CUDA_VISIBLE_DEVICES": "MIG-9e4d3b2a"})
    assert problems == [] and (mig.index, mig.mig, mig.parent) == (1, "3g.40gb", 1)
    assert mig.label == "GPU 1 MIG 3g.40gb (MIG-9e4d3b2a…)" and mig.handle == (1, 1)


def test_the_hardware_key_of_uuid_and_mig_forms_is_the_gpus(monkeypatch, tmp_path):
    fake = install(monkeypatch, FakeNVML([[], [], []], mig=MIGS))
    uuid0 = fake.nvmlDeviceGetUUID(0).decode()
    profile = gpu_profile(tmp_path, f"{uuid0},GPU-00000002")
    facts = engines.of(profile).hardware(profile)
    assert facts["key"] == (
        "2xnvidia-rtx-pro-6000-blackwell-server-edition-drv590.48.01-cuda13.0-600w-2617mhz"
    )
    # A MIG slice: its own profile in the key, its parent's limit and clock (the fake asserts
    # that neither is asked of the slice).
    profile = gpu_profile(tmp_path, "MIG-7c1f0e2a")
    facts = engines.of(profile).hardware(profile)
    assert facts["key"] == (
        "1xnvidia-rtx-pro-6000-blackwell-server-edition-mig-1g-10gb-drv590.48.01-cuda13.0-"
        "600w-2617mhz"
    )


def test_a_gpu_engine_whose_gpus_cannot_be_resolved_never_takes_the_cpus_key(monkeypatch, tmp_path):
    install(monkeypatch, FakeNVML([[], []], mig=MIGS))
    profile = gpu_profile(tmp_path, "MIG-0000dead")
    facts = engines.of(profile).hardware(profile)
    assert facts == {
        "key": "gpus-unresolved",
        "gpus_unresolved": "CUDA_VISIBLE_DEVICES=MIG-0000dead: 'MIG-0000dead' names no MIG "
        "slice here; CUDA uses no device from there on",
    }
    # An engine that may run on the CPU (llama.cpp) falls back to the CPU's key, as before.
    profile = gpu_profile(tmp_path, "MIG-0000dead", engine="llamacpp")
    assert engines.of(profile).hardware(profile)["key"] == hardware.cpu_facts()["key"]


def test_after_a_stop_in_a_container_the_wait_watches_the_memory(monkeypatch):
    """Inside a container NVML lists the host's PIDs: the server's own PIDs never show, so
    the wait after its stop holds until the GPU's memory is back to its level before the
    launch, as long as the old contexts take to go."""
    fake = install(monkeypatch, FakeNVML([[]]))
    assert gpu.preflight("eagle3", {}) == []  # notes 500 MiB in use before the launch
    host_pid = 4_000_123  # the server as the host sees it; 4242 is its PID in here
    fake.holders[0].append((host_pid, 60 * 2**30))
    teardown = threading.Timer(0.4, lambda: fake.holders[0].clear())
    started = time.monotonic()
    teardown.start()
    notes = gpu.wait_released("eagle3", [4242], {}, timeout_s=10, poll_s=0.05)
    assert time.monotonic() - started >= 0.4 and notes == []
    # Memory that never comes back is said, with how much.
    gpu.preflight("eagle3", {})
    fake.used[0] = 20 * 2**30
    (note,) = gpu.wait_released("eagle3", [4242], {}, timeout_s=0.2, poll_s=0.05)
    assert note == (
        "eagle3: 0.2 s after teardown its GPUs' memory is not back to its level before the "
        "launch (GPU 0 20,480 MiB, 500 MiB before): the next launch may fail to allocate"
    )
