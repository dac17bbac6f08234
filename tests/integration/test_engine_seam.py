"""A new engine is one file: an Engine subclass, named by a profile as
``engine = "module:Class"``. Nothing else in the plugin changes. Here the file is a toy engine
that serves with the simulated server under its own name, hardware key and health path; the
shipped suite records its goldens and passes against them, and the fingerprint and the golden
file are the toy's."""

from __future__ import annotations

import json
import textwrap

from tests.helpers import FAST_SIM_ARGS, THROUGHPUT_SUITE

TOY_ENGINE = f"""
import sys

from pytest_llmperf.engines import Engine


class ToyEngine(Engine):
    name = "toy"
    health_path = "/health_generate"
    speculative_flags = ("--speculative-algorithm",)

    def command(self, profile, host, port, run_dir):
        return [sys.executable, "-m", "pytest_llmperf.sim", "--model-path", profile.model,
                "--host", host, "--port", str(port), *{FAST_SIM_ARGS!r}, *profile.args]

    def hardware(self, profile):
        return {{"key": "toy-box"}}
"""


def test_an_engine_in_one_file_runs_the_suite_records_and_gates(pytester):
    pytester.makepyfile(toy_engine=TOY_ENGINE)
    pytester.makefile(
        ".toml",
        profiles=textwrap.dedent("""
        [profiles.toy]
        engine = "toy_engine:ToyEngine"
        model = "toy-model"
        concurrency = [2]
        runs = 2
        output_len = 32
        min_requests = 4
        ready_timeout_s = 30
        shutdown_timeout_s = 5
        """),
    )
    pytester.makeini(
        "[pytest]\npythonpath = .\nllmperf_profiles_file = profiles.toml\nllmperf_profiles = toy\n"
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    recorded = pytester.runpytest_subprocess("--perf-update", "--perf-update-runs", "3")
    recorded.assert_outcomes(passed=1)
    golden = json.loads((pytester.path / "baselines" / "toy" / "toy-box.json").read_text())
    assert golden["fingerprint"]["hard"]["engine"] == "toy_engine:ToyEngine"
    gated = pytester.runpytest_subprocess("--perf-json", "out.json")
    gated.assert_outcomes(passed=1)
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert point["verdict"] in ("PASS", "WARN", "IMPROVED"), point["message"]


def test_an_engine_that_cannot_be_imported_is_a_usage_error_naming_the_field(pytester):
    pytester.makefile(".toml", profiles='[profiles.p]\nengine = "no_such_module:Engine"\n')
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profiles-file", "profiles.toml", "--llm-profile", "p")
    result.stderr.fnmatch_lines(
        ["*profile 'p', field 'engine': got 'no_such_module:Engine', which cannot be imported*"]
    )
