"""Acceptance pinned as SGLang pins it (``SGLANG_SIMULATE_ACC_LEN`` in the server's
environment), on the simulated engine, which reads it as the impersonated release does: every
verify step accepts the pinned length (match-expected: its floor or ceiling, weighted), so the
speculative profile's speed is the engine's alone, and its answers are not the model's, so
greedy parity and accuracy are refused on it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUTS_SUITE = (REPO_ROOT / "perf_suites" / "test_outputs.py").read_text()
SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""
PINNED = """
[profiles.sim-pinned]
extends = "sim-spec"
env = { SGLANG_SIMULATE_ACC_LEN = "2.5" }
"""


def test_a_pinned_accept_length_is_what_every_run_measures_and_quality_is_refused(pytester):
    # 192-token requests: enough verify steps a run for the mean to sit on the pinned 2.5, and
    # a drafter of its own (3.5) that the pin overrides.
    write_profiles(pytester, PINNED, concurrency="[1, 4]", output_len=192, runs=3,
                   extra_args='"--sim-accept-length", "3.5"')  # fmt: skip
    pytester.makepyfile(test_perf=SUITE, test_outputs=OUTPUTS_SUITE)
    result = pytester.runpytest(
        "--llm-profile", "sim-pinned", "--perf-measure", "--perf-json", "out.json", "-rs",
        "-p", "no:randomly", "-k", "output_throughput or greedy_outputs or accuracy",
    )  # fmt: skip
    result.assert_outcomes(passed=2, skipped=2)
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    accepts = [run["accept_length"] for p in points for run in p["runs"]]
    assert len(accepts) == 6
    # Each run's mean of about 60-80 steps, each 2 or 3 with equal weight: within 0.2 of 2.5,
    # and nowhere near the drafter's own 3.5.
    assert all(abs(a - 2.5) < 0.2 for a in accepts), accepts
    result.stdout.fnmatch_lines(
        ["*sim-pinned: acceptance is pinned (SGLANG_SIMULATE_ACC_LEN=2.5), which commits "
         "unchecked draft tokens*greedy parity is never judged on it*",
         "*sim-pinned: acceptance is pinned*accuracy is never judged on it*"]
    )  # fmt: skip
