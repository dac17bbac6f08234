"""The simulated engine's GPU mode (sim/gpu_work.py): decode steps as real work on a device.

On these machines (no GPU) the same work runs on the CPU, with the torch of the SGLang
environment that ``scripts/install-sglang-cpu.sh`` builds (the plugin's own environment has no
torch); the tests marked ``gpu`` run it on CUDA where torch sees a device, with the GPU paths
(``--sim-on-gpus``: NVML read around it) end to end, and skip elsewhere saying why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


def torch_python() -> str:
    """An interpreter that has torch: ours, else the SGLang environment's; else skip."""
    for python in (sys.executable, str(REPO / ".sglang" / "venv" / "bin" / "python")):
        if Path(python).exists():
            found = subprocess.run([python, "-c", "import torch"], capture_output=True)
            if found.returncode == 0:
                return python
    pytest.skip("no interpreter here has torch (bash scripts/install-sglang-cpu.sh builds one)")


def cuda_python() -> str:
    python = torch_python()
    probe = subprocess.run(
        [python, "-c", "import torch; print(torch.cuda.is_available())"],
        capture_output=True, text=True,
    )  # fmt: skip
    if probe.stdout.strip() != "True":
        pytest.skip(f"no CUDA device: torch.cuda.is_available() is {probe.stdout.strip()} here")
    return python


def project(pytester, python: str, device: str, gib: float, *more: str) -> tuple[str, ...]:
    args = ", ".join(f'"{a}"' for a in ("--sim-load-time", "0.2", "--sim-gpu-work-gib", str(gib),
                                        "--sim-gpu-device", device, *more))  # fmt: skip
    pytester.makefile(".toml", profiles=f"""
[profiles.sim-gpu]
engine = "sim"
python = "{python}"
model = "sim-gpu-{pytester.path.name}"
args = [{args}]
env = {{ PYTHONPATH = "{REPO}" }}
concurrency = [4]
output_len = 64
runs = 3
min_requests = 12
""")  # fmt: skip
    pytester.makepyfile(test_perf=SUITE)
    return ("--llm-profiles-file", "profiles.toml", "--llm-profile", "sim-gpu", "-p",
            "no:randomly", "--perf-json", "out.json")  # fmt: skip


def slowed(pytester, multiplier: float = 0.6) -> None:
    """The hidden knob: the weights read 1/``multiplier`` times a step, nothing in the
    fingerprint. On a GPU a step is the device's time and 0.7 is 30 % slower; on the CPU the
    server's own work between steps is about 0.7 of the device's, so 0.7 came out about 20 %
    slower (a full run: 400.7 against 500.9 tok/s), at the edge of what one launch can FAIL
    here (18 % on launches 3 % apart): a WARN. 0.6 is 28-40 % slower, whatever that share."""
    profiles = pytester.path / "profiles.toml"
    profiles.write_text(profiles.read_text().replace(
        '"--sim-gpu-work-gib"',
        f'"--sim-throughput-multiplier", "{multiplier}", "--sim-gpu-work-gib"'))  # fmt: skip


def test_a_step_is_the_devices_time_and_the_hidden_knob_fails_the_gate(pytester):
    args = project(pytester, torch_python(), "cpu", 0.125)
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    recorded = json.loads((pytester.path / "out.json").read_text())
    args_seen = recorded["fingerprint"]["hard"]["sim-gpu"]["server_args"]
    assert args_seen["sim_gpu_work_gib"] == 0.125  # the work is configuration; the knob is not
    slowed(pytester)
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] == "FAIL" and 0.55 < point["ratio"] < 0.85, point["message"]


@pytest.mark.gpu
def test_on_a_gpu_every_gpu_path_runs_end_to_end(pytester):
    """Pre-flight, NVML's series, energy per token, the hardware key, on a real GPU."""
    args = project(pytester, cuda_python(), "cuda", 4.0, "--sim-on-gpus")
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=1)
    data = json.loads((pytester.path / "out.json").read_text())
    key = data["fingerprint"]["hard"]["sim-gpu"]["hardware"]["key"]
    assert key.startswith("1x") and "-drv" in key, key
    (point,) = data["points"]
    for run in point["runs"]:
        assert run["energy_j"] > 0 and run["tok_s_per_watt"] * run["energy_j_per_token"] == (
            pytest.approx(1, rel=1e-9)
        )
