"""Every GPU path of the plugin, end to end, on the simulated engine's GPU mode (no SGLang).

A project of one profile: the simulated engine reading ``--gib`` GiB of weights per decode
step on ``--device`` (sim/gpu_work.py), at C = 1 and 16, 3 runs a point of at least 16
requests, NVML sampled every 0.5 s. In order, each a pytest session as a user runs it:

1. record: ``--perf-update`` over two launches; tok/s and J/token per level;
2. a fresh launch, nothing changed: the verdicts and ratios;
3. the same server 30 % slower (``--sim-throughput-multiplier 0.7``: the weights read 1/0.7
   times a step; nothing in its launch or fingerprint shows it): the verdicts and ratios;
4. another process holding 8 GiB of the GPU: the runner health must stop the session before
   any launch, naming it;
5. the runs' energy windows against NVML's own counter over the whole of session 2.

    python benchmarks/gpu_runner.py                        # on a GPU host: cuda, 24 GiB
    python benchmarks/gpu_runner.py --device cpu --gib 0.1 --output-len 64  # the flow, on a CPU

On a CPU (``--device cpu``) there is no NVML: steps 4 and 5 say so, and there are no joules.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
print = functools.partial(print, flush=True)  # a long script: each step as it ends
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)
    if point.runs and point.runs[0].energy_j_per_token is not None:
        llmperf.check(point, metric="energy_j_per_token")
"""


def write_project(root: Path, python: str, device: str, gib: float, output_len: int) -> None:
    on_gpus = ', "--sim-on-gpus"' if device.startswith("cuda") else ""
    (root / "profiles.toml").write_text(textwrap.dedent(f"""
        [profiles.sim-gpu]
        engine = "sim"
        python = "{python}"
        model = "sim-gpu"
        args = ["--sim-load-time", "0.5", "--sim-gpu-work-gib", "{gib}", "--sim-gpu-device", "{device}"{on_gpus}]
        env = {{ PYTHONPATH = "{REPO}" }}
        concurrency = [1, 16]
        output_len = {output_len}
        runs = 3
        min_requests = 16
        metrics_interval_s = 0.5
        """))  # fmt: skip
    (root / "test_perf.py").write_text(SUITE)


def session(root: Path, *args: str) -> tuple[int, str, dict]:
    out = root / "out.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--llm-profiles-file", "profiles.toml", "--llm-profile", "sim-gpu", "--perf-json",
         "out.json", *args],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    data = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


def show(title: str, data: dict) -> None:
    print(f"\n{title}")
    for p in data.get("points", []):
        runs = p.get("runs") or []
        tok = sum(r["output_tok_s"] for r in runs) / len(runs) if runs else float("nan")
        jpt = [r.get("energy_j_per_token") for r in runs if r.get("energy_j_per_token")]
        energy = f"{sum(jpt) / len(jpt):.3f} J/token" if jpt else "no J/token"
        ratio = f"{p['ratio'] - 1:+.1%}" if p.get("ratio") else "     "
        print(f"  C={p['concurrency']:<3} {p['metric']:<20} {tok:9.1f} tok/s  {energy:<16} "
              f"{ratio:>7}  {p.get('verdict')}")  # fmt: skip


def holder(python: str) -> subprocess.Popen:
    code = "import torch, time; x = torch.empty(8 << 30, dtype=torch.uint8, device='cuda'); time.sleep(600)"
    proc = subprocess.Popen([python, "-c", code])
    time.sleep(8)  # CUDA context and allocation
    return proc


def counter_j() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        total = sum(
            pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(i))
            for i in range(pynvml.nvmlDeviceGetCount())
        )
        pynvml.nvmlShutdown()
        return total / 1000
    except Exception:  # no nvidia-ml-py, no driver
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gib", type=float, default=24.0)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--python", default=sys.executable, help="an interpreter with torch")
    opts = parser.parse_args()
    gpu = opts.device.startswith("cuda")
    with tempfile.TemporaryDirectory(prefix="llmperf-gpu-") as tmp:
        root = Path(tmp)
        python = os.path.abspath(opts.python)  # not resolved: a venv's python is a link
        write_project(root, python, opts.device, opts.gib, opts.output_len)
        rc, out, data = session(root, "--perf-update", "--perf-update-launches", "2")
        show(f"1. recorded over two launches (exit {rc})", data)
        if rc != 0:
            print(out[-3000:])
            return
        key = data["fingerprint"]["hard"]["sim-gpu"]["hardware"]["key"]
        print(f"  hardware key: {key}")
        before = counter_j()
        started = time.monotonic()
        rc, out, data = session(root)
        whole_s, after = time.monotonic() - started, counter_j()
        show(f"2. a fresh launch, nothing changed (exit {rc})", data)
        profiles = root / "profiles.toml"
        plain = profiles.read_text()
        profiles.write_text(plain.replace('"--sim-gpu-work-gib"',
                                          '"--sim-throughput-multiplier", "0.7", "--sim-gpu-work-gib"'))  # fmt: skip
        rc3, _, slow = session(root)
        show(f"3. the same server 30 % slower, invisibly (exit {rc3})", slow)
        profiles.write_text(plain)
        if not gpu:
            print("\n4. a process holding GPU memory: not run (--device cpu: no GPU here)")
            print("5. energy windows against the counter: not run (no NVML here)")
            return
        proc = holder(python)
        try:
            rc4, out4, _ = session(root)
        finally:
            proc.kill()
        stopped = [line for line in out4.splitlines() if "GPU" in line and "pid" in line]
        print(f"\n4. another process holding 8 GiB (exit {rc4}): {stopped[:1] or out4[-600:]}")
        windows = sum(r.get("energy_j") or 0 for p in data.get("points", [])
                      for r in p.get("runs") or [])  # fmt: skip
        if before is not None and after is not None:
            print(f"5. the runs' energy windows add up to {windows:,.0f} J inside the "
                  f"{after - before:,.0f} J NVML's counter read over session 2 ({whole_s:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
