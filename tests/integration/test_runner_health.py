"""The runner health pre-flight, on a fake pynvml whose GPUs are set to each known problem,
and end to end: a session on a failing GPU stops before any server starts; a warning is in
the header."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_llmperf.host import gpu_health, hardware
from pytest_llmperf.host.nvml import Nvml
from tests.integration.test_gpu import FakeNVML, install


class SickNVML(FakeNVML):
    """FakeNVML with each GPU's health readings, healthy by default; ``gpus[i]`` overrides."""

    def __init__(self, count: int, **gpus: dict) -> None:
        super().__init__([[] for _ in range(count)])
        self.gpus = {i: {**self.HEALTHY, **gpus.get(f"gpu{i}", {})} for i in range(count)}

    HEALTHY = {
        "used": 600 * 2**20,
        "total": 80 * 2**30,
        "ecc": 0,
        "pending_pages": 0,
        "rows": (0, 0, 0, 0),
        "temp": 35,
        "slowdown": 90,
        "reasons": 0x1,  # GPU idle: not held back
        "limit": 700_000,
        "default": 700_000,
        "clock": 1980,
    }

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self.gpus[h]["used"], total=self.gpus[h]["total"])

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        assert (kind, counter) == (1, 0)  # uncorrected, volatile
        return self.gpus[h]["ecc"]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self.gpus[h]["pending_pages"]

    def nvmlDeviceGetRemappedRows(self, h):
        return self.gpus[h]["rows"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self.gpus[h]["temp"]

    def nvmlDeviceGetTemperatureThreshold(self, h, kind):
        assert kind == 1  # slowdown
        return self.gpus[h]["slowdown"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.gpus[h]["reasons"]

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.gpus[h]["limit"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.gpus[h]["limit"]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self.gpus[h]["default"]

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self.gpus[h]["clock"]


def check(fake: FakeNVML, indices, kmsg=None) -> gpu_health.Health:
    """The pre-flight on GPUs ``indices`` of ``fake``, as the session reads them."""
    nv = Nvml(fake)
    gpus, _ = nv.gpus({"CUDA_VISIBLE_DEVICES": ",".join(map(str, indices))})
    return gpu_health.check(nv, gpus, kmsg=kmsg)


def test_a_healthy_node_has_nothing_to_say():
    assert check(SickNVML(8), range(8)) == gpu_health.Health([], [])


@pytest.mark.parametrize(
    "gpu, expected",
    [
        ({"ecc": 3}, "GPU 1: 3 uncorrectable ECC error(s) since the driver loaded: its memory is "
         "failing. Reset the GPU (nvidia-smi -r -i 1) or drain the node, then run again."),
        ({"pending_pages": 1, "rows": (0, 1, 1, 0)}, "GPU 1: memory pages waiting to be "
         "retired; a row remap waiting for a reset: its memory is failing."),
        ({"temp": 91}, "GPU 1 is at 91 °C before any load, at or past its slowdown threshold "
         "(90 °C): it is throttling now."),
        ({"reasons": 0x8}, "GPU 1 is held back now, before any load: slowdown (hardware). The "
         "hardware slows it whatever the load"),
        ({"used": 40 * 2**30}, "GPU 1: 40.0 of 80 GiB in use, by processes not visible from "
         "here (another container?)"),
    ],
)  # fmt: skip
def test_what_makes_measuring_meaningless_stops(gpu, expected):
    health = check(SickNVML(2, gpu1=gpu), [0, 1])
    (stop,) = health.stops
    assert stop.startswith(expected), stop


def test_what_a_user_should_know_is_a_warning():
    nv = SickNVML(
        3,
        gpu0={"temp": 75},
        gpu1={"reasons": 0x4, "limit": 450_000},
        gpu2={"clock": 1755},
    )
    health = check(nv, [0, 1, 2])
    assert health.stops == []
    assert health.warnings == [
        "GPU 0 idles at 75 °C, 15 °C below its slowdown threshold: under load it may throttle "
        "(a FAIL's line says so)",
        "GPU 1 is held back now, before any load: power cap (software)",
        "GPU 1 is power-capped at 450 W of its default 700 W (nvidia-smi -pl): a golden of "
        "uncapped GPUs is INCOMPARABLE on this node",
        "the GPUs differ in power limit (GPU 0 700 W, GPU 1 450 W, GPU 2 700 W): the hardware "
        "key takes the lowest",
        "the GPUs differ in max SM clock (GPU 0 1980 MHz, GPU 1 1980 MHz, GPU 2 1755 MHz): the "
        "hardware key takes the lowest",
    ]


def test_the_hardware_key_takes_the_lowest_limit_and_clock(monkeypatch):
    install(monkeypatch, SickNVML(2, gpu1={"limit": 450_000, "clock": 1755}))
    facts, _ = hardware.gpu_facts({})
    assert facts is not None and facts["key"].endswith("-450w-1755mhz"), facts


def test_xid_errors_from_the_kernel_log(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text(
        "6,1,100,-;usb 1-1: new device\n"
        "4,2,200,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, name=python, Ch 00000008, "
        "intr 10000000. MMU Fault\n"
        "4,3,300,-;NVRM: Xid (PCI:0000:86:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    health = check(SickNVML(1), [0], kmsg=log)
    assert health.warnings == [
        "the kernel log has 2 NVIDIA Xid error(s) since boot (Xid 31, 79; the last: Xid 79 on "
        "PCI:0000:86:00 pid=0, GPU has fallen off the bus.): check nvidia-smi -q and the "
        "node's health"
    ]
    assert gpu_health.read_kernel_log(tmp_path / "absent") == []


PROFILES = """
default = "gpu"
[profiles.gpu]
engine = "sglang"
model = "meta-llama/Llama-3.1-8B-Instruct"
args = ["--tp", "2"]
env = { CUDA_VISIBLE_DEVICES = "2,3" }
concurrency = [1]
"""


def test_a_session_on_a_failing_gpu_stops_before_any_server_starts(pytester, monkeypatch):
    fake = install(monkeypatch, SickNVML(4, gpu3={"ecc": 2}, gpu0={"ecc": 9}))
    monkeypatch.setattr(gpu_health, "KMSG", pytester.path / "no-kmsg")
    pytester.makefile(".toml", **{"perf_suites/profiles": PROFILES})
    pytester.makepyfile(test_x="def test_x(llmperf):\n    raise AssertionError('ran')\n")
    result = pytester.runpytest_inprocess("--llm-profiles-file=perf_suites/profiles.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "the runner's GPUs are not fit to measure on, so no server was started" in errors
    # Only the profile's GPUs (2 and 3) were read: GPU 0's errors are not this run's business.
    assert "GPU 3: 2 uncorrectable ECC error(s)" in errors and "GPU 0" not in errors
    assert "Traceback" not in errors and fake.initialised == 0


def test_a_warning_is_in_the_header_and_the_run_goes_on(pytester, monkeypatch):
    install(monkeypatch, SickNVML(4, gpu2={"limit": 450_000}))
    monkeypatch.setattr(gpu_health, "KMSG", pytester.path / "no-kmsg")
    pytester.makefile(".toml", **{"perf_suites/profiles": PROFILES})
    pytester.makepyfile(test_x="def test_x(llmperf):\n    pass\n")
    result = pytester.runpytest_inprocess(
        "--llm-profiles-file=perf_suites/profiles.toml", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "llmperf: runner health: GPU 2 is power-capped at 450 W of its default 700 W*",
            "llmperf: runner health: the GPUs differ in power limit (GPU 2 450 W, GPU 3 700 W)*",
        ]
    )
