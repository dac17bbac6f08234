"""The speculative verdict by channel, end to end on the simulated pair with the engine channel
asked for (``pin_acceptance``): recorded once, then three faults, each of which moves only its
own channel, and the speedup as served, which moves with the first two, names the channel.

- the speculative server's steps 10 % slower (the verify step: every step of a speculative
  server verifies): only *engine* FAILs (acceptance pinned at the golden accept length);
- its drafter's acceptance 2.88 → 2.50: only *acceptance* FAILs (the pinned launch is pinned
  at the golden's 2.88 whatever the drafter does);
- one token in 12 flipped where the base was sure: only *lossless* FAILs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUTS_SUITE = (REPO_ROOT / "perf_suites" / "test_outputs.py").read_text()
SUITE = """
import pytest


def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))


@pytest.mark.llmperf(speculative=True)
def test_accept_length(llmperf, llm_concurrency):
    point = llmperf.measured_by("test_output_throughput", llm_concurrency)
    llmperf.check(point, metric="accept_length")


@pytest.mark.llmperf(speculative=True)
def test_acceptance(llmperf):
    llmperf.check(llmperf.acceptance(), metric="accept_length")


def test_speculative_speedup(llmperf_speedup):
    llmperf_speedup.check(of="test_output_throughput")
"""
ARGS = ("--llm-profile", "sim-base,sim-spec", "--perf-json", "out.json", "-p", "no:randomly",
        "-k", "not accuracy")  # fmt: skip


def profiles(pytester, spec_args: str) -> None:
    write_profiles(
        pytester, marker="channels", concurrency="[1]", output_len=96, runs=4,
        spec_args=f'"--sim-accept-length", "2.88"{", " + spec_args if spec_args else ""}',
    )  # fmt: skip
    text = (pytester.path / "profiles.toml").read_text()
    # Margins the simulated engine's noise of a percent or two stays inside and a 10 % fault is
    # beyond; its launches differ by less than a percent.
    text = text.replace(
        "runs = 4", "runs = 4\nfail_margin = 0.06\nwarn_margin = 0.03\nlaunch_cv = 0.01", 1
    )
    text = text.replace('extends = "sim-base"', 'extends = "sim-base"\npin_acceptance = true', 1)
    (pytester.path / "profiles.toml").write_text(text)


def channels(pytester) -> dict[str, str | None]:
    (spec,) = json.loads((pytester.path / "out.json").read_text())["speculative"]
    return {name: c["verdict"] for name, c in spec["channels"].items()}


def test_three_faults_each_move_only_their_channel(pytester):
    pytester.makepyfile(test_perf=SUITE, test_outputs=OUTPUTS_SUITE)
    profiles(pytester, "")
    recorded = pytester.runpytest(*ARGS, "--perf-update")
    recorded.assert_outcomes(passed=recorded.parseoutcomes()["passed"])
    golden = json.loads((pytester.path / "baselines/sim-spec/sim.json").read_text())
    engine_keys = [k for k in golden["points"] if k.endswith(" engine")]
    assert len(engine_keys) == 1, sorted(golden["points"])  # the pinned speedup at C = 1
    recorded.stdout.fnmatch_lines(["*engine channel: acceptance pinned at 2.*, from this run*"])

    profiles(pytester, "")
    quiet = pytester.runpytest(*ARGS)
    quiet.assert_outcomes(passed=quiet.parseoutcomes()["passed"])
    assert channels(pytester) == {"engine": "PASS", "acceptance": "PASS", "lossless": "PASS"}
    quiet.stdout.fnmatch_lines(["*engine channel: acceptance pinned at 2.*, from its golden*"])

    faults = {
        "engine": '"--sim-throughput-multiplier", "0.9"',
        "acceptance": '"--sim-accept-length", "2.5"',
        "lossless": '"--sim-wrong-token-every", "12"',
    }
    for moved, args in faults.items():
        profiles(pytester, args)
        result = pytester.runpytest(*ARGS)
        verdicts = channels(pytester)
        assert verdicts[moved] == "FAIL", (moved, verdicts)
        assert all(v == "PASS" for name, v in verdicts.items() if name != moved), (moved, verdicts)
        # The speedup as served fails too, and says which channel moved.
        result.stdout.fnmatch_lines([f"*the channel that moved: {moved}; by channel: *"])
        if moved == "acceptance":  # on the shipped prompt set too, by category
            result.stdout.fnmatch_lines(
                ["sim-spec accept length by category (tok/step): C=1: chat 2.*, code 2.*, math 2.*",
                 "FAIL acceptance sim-spec C=1 accept_length: * tok/step vs golden *(−1*FAIL: "
                 "significantly lower*; the smallest drop these runs could FAIL: * %"]
            )  # fmt: skip
