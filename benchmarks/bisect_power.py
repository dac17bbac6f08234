"""How often ``python -m pytest_llmperf bisect`` names the planted commit when launches differ.

A simulated repository of 17 commits (a good end, 16 after it), one of which makes the point
15 % slower; every session at a commit is a fresh launch, offset from the commit's level by
N(0, launch sd) (one offset a launch), with runs 2 % apart within it. The bisection is the
plugin's own (pytest_llmperf/bisect.py: the ends measured twice, each step placed by its
launches' means against the ends' with the launch spread, measured again while its place holds
½, the final pair confirmed); only its sessions are simulated. Prints, per launch sd, how many
searches named the planted commit, and the sessions they took.

    python benchmarks/bisect_power.py 100
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
from pathlib import Path

import numpy as np

from pytest_llmperf.bisect import Bisection, Step

COMMITS = 17
PLANTED = 11
DROP = 0.15
RUN_SD = 0.02
RUNS = 3


class Simulated(Bisection):
    """A bisection whose sessions are drawn, not measured: one launch offset each."""

    def __init__(self, rng: np.random.Generator, launch_sd: float, rounds: int) -> None:
        super().__init__(Path("."), None, [], rounds)
        self.rng, self.launch_sd = rng, launch_sd

    def _session(self, commit: str) -> dict[str, tuple[list[float], bool]]:
        level = math.log(100.0) + (math.log(1 - DROP) if int(commit) >= PLANTED else 0.0)
        offset = self.rng.normal(0.0, self.launch_sd)
        runs = np.exp(level + offset + self.rng.normal(0.0, RUN_SD, RUNS))
        return {"p t.py::test[C=1]": ([float(v) for v in runs], False)}


def search(rng: np.random.Generator, launch_sd: float, rounds: int) -> tuple[bool, int]:
    """One search: whether it named the planted commit, and the sessions it took."""
    bisection = Simulated(rng, launch_sd, rounds)
    commits = [Step(str(k), f"change {k}") for k in range(COMMITS)]
    with contextlib.redirect_stdout(io.StringIO()):
        found = bisection.search(commits)
    return found is not None and found.commit == str(PLANTED), len(bisection.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("searches", type=int, nargs="?", default=100)
    parser.add_argument("--rounds", type=int, default=None, help="default: the command's")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    from pytest_llmperf.bisect import DEFAULT_ROUNDS

    rounds = args.rounds or DEFAULT_ROUNDS
    rng = np.random.default_rng(args.seed)
    print(f"# bisect: {COMMITS} commits, a {DROP:.0%} drop planted at {PLANTED}, runs "
          f"{RUN_SD:.0%} apart, --rounds {rounds}, {args.searches} searches a row")  # fmt: skip
    print("\n| launch sd | named the planted commit | sessions (mean) | sessions (max) |")
    print("|---:|---:|---:|---:|")
    for launch_sd in (0.0, 0.02, 0.04, 0.06, 0.08):
        found, sessions = 0, []
        for _ in range(args.searches):
            ok, n = search(rng, launch_sd, rounds)
            found += ok
            sessions.append(n)
        print(f"| {launch_sd:.0%} | {found} of {args.searches} | {np.mean(sessions):.1f} | "
              f"{max(sessions)} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
