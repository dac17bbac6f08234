"""Nights of the simulated engine with a history: a step, a quiet series, a slow drift.

Each night is its own ``pytest`` process and server launch in a scratch project (one profile,
C = 1, 10, 30, three runs a level, goldens recorded at full speed), with ``--perf-history``.
The engine's speed is set each night with the simulated engine's hidden fault knob
(``--sim-throughput-multiplier``: every step takes 1/x as long, and it is not in the
fingerprint, as a real regression would not be).

- **step**: 8 nights, 8 % slower from night 5; night 8's change points per level;
- **quiet**: 9 nights at full speed; the change points found at night 9;
- **drift**: 5 nights at full speed, then 2 % slower each night; per night, the golden's verdict
  alone and the verdict with the history (drift gate).

    python benchmarks/history_series.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROFILES = """
default = ["sim"]

[profiles.sim]
engine = "sim"
model = "sim-series"
args = ["--sim-load-time", "0.2", "--sim-throughput-multiplier", "{speed}"]
concurrency = [1, 10, 30]
runs = 3
output_len = 128
min_requests = 8
"""
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


class Project:
    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="llmperf-series-"))
        (self.path / "test_perf.py").write_text(SUITE)
        (self.path / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")
        self.night("1.0", "--perf-update")

    def night(self, speed: str, *args: str) -> list[dict]:
        (self.path / "profiles.toml").write_text(PROFILES.replace("{speed}", speed))
        out = self.path / "r.json"
        out.unlink(missing_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--perf-json", str(out), *args],
            cwd=self.path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        return sorted(json.loads(out.read_text())["points"], key=lambda p: p["concurrency"])

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def cell(point: dict) -> str:
    history = point.get("history") or {}
    golden = history.get("golden_verdict") or point["verdict"]
    drift = history.get("drift") or {}
    judged = point["verdict"]
    extra = f" (drift {drift['change'] * 100:+.1f} %)" if drift.get("gated") else ""
    return f"{golden} → {judged}{extra}" if judged != golden else golden


def step() -> None:
    project = Project()
    run_ids, points = [], []
    print("\n### A step: 8 % slower from night 5\n")
    print("| night | speed | C = 1 | C = 10 | C = 30 |")
    print("|---:|---:|---|---|---|")
    for night in range(1, 9):
        speed = "1.0" if night < 5 else "0.92"
        points = project.night(speed, "--perf-history", "h.db")
        run_ids.append(json.loads((project.path / "r.json").read_text())["run_id"])
        cells = " | ".join(f"{p['ratio'] - 1:+.1%} {cell(p)}" for p in points)
        print(f"| {night} | {speed} | {cells} |", flush=True)
    print("\nNight 8's change points:\n")
    print("| C | first bad run | = night | last good run | change | 95 % interval |")
    print("|---:|---|---:|---|---:|---|")
    for p in points:
        for cp in p["history"]["change_points"]:
            low, high = cp["interval"]
            print(
                f"| {p['concurrency']} | {cp['first_bad_run']} | {run_ids.index(cp['first_bad_run']) + 1} "
                f"| {cp['last_good_run']} | {cp['change']:+.1%} | {low:+.1%} to {high:+.1%} |"
            )
    project.close()


def quiet() -> None:
    project = Project()
    for _ in range(9):
        points = project.night("1.0", "--perf-history", "h.db")
    found = {p["concurrency"]: len(p["history"]["change_points"]) for p in points}
    drifts = {p["concurrency"]: p["history"]["drift"] for p in points}
    print(
        f"\n### Quiet: 9 nights at full speed\n\nchange points at night 9 per level: {found}; open drift: {drifts}"
    )
    project.close()


def drift() -> None:
    project = Project()
    print("\n### A slow drift: 2 % slower each night from night 6\n")
    print("| night | speed | C = 1 | C = 10 | C = 30 |")
    print("|---:|---:|---|---|---|")
    for night in range(1, 17):
        speed = f"{0.98 ** max(0, night - 5):.4f}"
        points = project.night(speed, "--perf-history", "h.db")
        cells = " | ".join(f"{p['ratio'] - 1:+.1%} {cell(p)}" for p in points)
        print(f"| {night} | {speed} | {cells} |", flush=True)
    project.close()


def main() -> None:
    print(textwrap.dedent(__doc__ or "").strip().splitlines()[0])
    print(
        "\nCells: the change against the golden, then the golden's verdict alone → the verdict with the history."
    )
    step()
    quiet()
    drift()


if __name__ == "__main__":
    main()
