"""Energy per token and held-back GPUs, end to end on the simulated engine with a fake pynvml
whose readings are known traces: each GPU draws a fixed power on the real clock, so its energy
counter rises by exactly that many joules a second, and one GPU can be at its power cap.

NVML has not run on a GPU here (these machines have none): the fake answers the calls the
sampler makes as nvidia-ml-py's bindings do, and nothing else."""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from tests.helpers import write_profiles

POWER_W = (250.0, 350.0)  # two GPUs: 600 W together
#: The simulated engine standing in for a server on this host's GPUs (else they are not read).
ON_GPUS = '"--sim-on-gpus"'
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)
    llmperf.check(point, metric="energy_j_per_token")
"""


class EnergyNVML(types.ModuleType):
    """pynvml as the sampler calls it: every GPU at a fixed power, its counter on the clock."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    def __init__(self, capped: set[int] = frozenset(), at_limit: set[int] = frozenset()) -> None:
        super().__init__("pynvml")
        self.capped, self.at_limit, self.started = capped, at_limit, time.monotonic()

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(POWER_W)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return []

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        return b"590.48.01"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(POWER_W[handle] * 1000 * (time.monotonic() - self.started))  # mJ

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(POWER_W[handle] * 1000)  # mW

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1400 if handle in self.capped else 1980

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 71

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 if handle in self.capped | self.at_limit else 0x0  # software power cap

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 450_000 if handle in self.capped else 700_000  # capped: below its default

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return 700_000


@pytest.fixture
def nvml(monkeypatch):
    def install(capped: set[int] = frozenset(), at_limit: set[int] = frozenset()) -> EnergyNVML:
        fake = EnergyNVML(capped, at_limit)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return fake

    return install


def test_energy_per_token_comes_from_the_counters_rise_and_is_gated(pytester, nvml):
    nvml()
    write_profiles(pytester, concurrency="[4]", output_len=128, runs=3, min_requests=8,
                   body="", extra_args=ON_GPUS)  # fmt: skip
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace("min_requests = 8\n", "min_requests = 8\nmetrics_interval_s = 0.05\n", 1)
    )
    pytester.makepyfile(test_perf=SUITE)
    args = ("--llm-profile", "sim-base", "-p", "no:randomly", "--perf-json", "out.json")
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    speed = next(p for p in points if p["metric"] == "output_tok_s")
    energy = next(p for p in points if p["metric"] == "energy_j_per_token")
    assert energy["verdict"] in ("PASS", "WARN"), energy["message"]
    for run in speed["runs"]:
        # 600 W over the window: joules = 600 × seconds, per token = 600 ÷ tok/s.
        assert run["energy_j"] == pytest.approx(600 * run["duration_s"], rel=0.02)
        assert run["energy_j_per_token"] == pytest.approx(600 / run["output_tok_s"], rel=0.02)
        assert run["tok_s_per_watt"] == pytest.approx(run["output_tok_s"] / 600, rel=0.02)
        # Both from the same joules: tok/s per watt is tokens per joule.
        assert run["tok_s_per_watt"] * run["energy_j_per_token"] == pytest.approx(1, rel=1e-9)
        assert run["gpu_held_back"] == []
    assert set(speed["gpu_series"]) == {"0", "1"} and speed["gpu_series"]["1"]["power_w"][0] == 350


def test_a_gpu_at_its_power_cap_is_flagged_in_the_run_and_the_verdict(pytester, nvml):
    write_profiles(pytester, concurrency="[4]", output_len=128, runs=3, min_requests=8,
                   extra_args=ON_GPUS)  # fmt: skip
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace("min_requests = 8\n", "min_requests = 8\nmetrics_interval_s = 0.05\n", 1)
    )
    pytester.makepyfile(test_perf=SUITE.replace(
        '    llmperf.check(point, metric="energy_j_per_token")\n', ""))  # fmt: skip
    args = ("--llm-profile", "sim-base", "-p", "no:randomly", "--perf-json", "out.json")
    nvml()
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    nvml(capped={1})
    # The same server, slower: its GPU 1 at its power cap (the sim slowed to match).
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace('"--sim-speed", "20"', '"--sim-speed", "20", "--sim-throughput-multiplier", "0.6"')
    )
    result = pytester.runpytest(*args)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] == "FAIL"
    assert all(run["gpu_held_back"] == ["GPU 1: power cap (software) in 100% of samples"]
               for run in point["runs"])  # fmt: skip
    result.stdout.fnmatch_lines(
        ["*the GPU was held back during its runs (GPU 1: power cap (software) in 100% of "
         "samples): slower may be the clocks', not the server's*"]
    )  # fmt: skip


def test_a_gpu_at_its_default_limit_is_named_only_for_more_of_the_time_than_the_golden(
    pytester, nvml
):
    """A GPU at its own default power limit under load is normal operation: a slower night at
    the limit as much as when the golden was recorded blames nothing; one at it for more of the
    time than the golden's share (the field the golden point keeps) names it."""
    args = energy_project(pytester, suite=SUITE.replace(
        '    llmperf.check(point, metric="energy_j_per_token")\n', ""))  # fmt: skip
    nvml(at_limit={1})
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    path = next((pytester.path / "baselines" / "sim-base").glob("*.json"))
    golden = json.loads(path.read_text())
    (entry,) = golden["points"].values()
    assert entry["gpu_power_cap_share"] == 1.0
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace('"--sim-speed", "20"', '"--sim-speed", "20", "--sim-throughput-multiplier", "0.6"')
    )
    pytester.runpytest(*args).assert_outcomes(failed=1)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] == "FAIL" and "held back" not in point["message"], point["message"]
    assert [run["gpu_power_cap_share"] for run in point["runs"]] == [1.0] * len(point["runs"])
    # The same night against a golden whose GPUs were at their limit a quarter of the time.
    entry["gpu_power_cap_share"] = 0.25
    path.write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n")
    pytester.runpytest(*args).assert_outcomes(failed=1)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] == "FAIL"
    assert (
        "the GPU was held back during its runs (at its power limit, power cap (software), in "
        "100% of samples, 25% when the golden was recorded): slower may be the clocks'"
    ) in point["message"], point["message"]


ENERGY_ONLY = """
def test_output_throughput(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point, metric="energy_j_per_token")
"""


def energy_project(pytester, on_gpus: bool = True, suite: str = ENERGY_ONLY) -> tuple[str, ...]:
    write_profiles(pytester, concurrency="[4]", output_len=128, runs=3, min_requests=8,
                   extra_args=ON_GPUS if on_gpus else "")  # fmt: skip
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace("min_requests = 8\n", "min_requests = 8\nmetrics_interval_s = 0.05\n", 1)
    )
    pytester.makepyfile(test_perf=suite)
    return ("--llm-profile", "sim-base", "-p", "no:randomly", "--perf-json", "out.json")


def test_more_energy_per_token_fails_in_the_words_of_energy(pytester, nvml):
    """The same watts over fewer tokens: energy per token rises, and the FAIL says it as
    energy ("more energy per token"), not as speed."""
    nvml()
    args = energy_project(pytester)
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    (pytester.path / "profiles.toml").write_text(
        (pytester.path / "profiles.toml")
        .read_text()
        .replace('"--sim-speed", "20"', '"--sim-speed", "20", "--sim-throughput-multiplier", "0.6"')
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    (point,) = [p for p in json.loads((pytester.path / "out.json").read_text())["points"]
                if p["metric"] == "energy_j_per_token"]  # fmt: skip
    assert point["verdict"] == "FAIL" and point["ratio"] > 1.5
    assert ", more energy per token," in point["message"]
    assert "significantly more energy per token by more than" in point["message"]
    assert "slower" not in point["message"]


def test_without_nvml_the_energy_check_is_skipped_saying_why(pytester, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails: no NVML here
    args = energy_project(pytester)
    result = pytester.runpytest(*args, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED *sim-base C=4 energy_j_per_token: NVML did not read the server's GPUs here*"]
    )
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["metric"] == "output_tok_s" and point["verdict"] is None  # measured, not gated


def test_the_simulated_engine_is_not_sampled_unless_it_stands_in_for_gpus(pytester, nvml):
    """The README's first command on a GPU host: the simulated engine touches no GPU, so its
    runs carry no GPU figure and its energy check is skipped, whatever NVML reads."""
    nvml()
    args = energy_project(pytester, on_gpus=False)
    result = pytester.runpytest(*args, "-rs")
    result.assert_outcomes(skipped=1)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["gpu_series"] is None
    assert all(run.get("energy_j") is None for run in point["runs"])
