"""Each shipped profile that runs on a CPU passes the shipped suite, as a user runs it:
``pytest perf_suites --llm-profile=NAME``, its goldens recorded on this host first (a CPU
engine's golden holds only for the host that recorded it, so none is committed), then gated.

A short form: one level (C = 2) for the level tests, so CI spends minutes, not an hour; the
single-stream test runs at C = 1 as shipped. The prefill test sends 2,048-token prompts, longer
than either server's context per request: it is skipped with the reason, before measuring."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_llmperf.profiles import load_profiles
from pytest_llmperf.servers.lifecycle import ServerStartError, build_command
from tests import sglang_real

REPO = Path(__file__).resolve().parents[2]
PROFILES = REPO / "perf_suites" / "profiles.toml"


def installed(name: str) -> None:
    profile = load_profiles(PROFILES).profiles[name]
    if name == "sglang-cpu":
        sglang_real.require(sglang_real.PYTHON)
        return
    try:
        build_command(profile, "127.0.0.1", 1, REPO)
    except ServerStartError as exc:
        if os.environ.get("LLMPERF_REQUIRE_LLAMA"):
            pytest.fail(str(exc))
        pytest.skip(f"llama-server is not installed here: {exc}")


@pytest.mark.parametrize("name", ["llamacpp-smollm2", "sglang-cpu"])
def test_the_shipped_suite_records_then_passes_on_the_shipped_cpu_profile(pytester, name):
    installed(name)
    pytester.makeini(
        f"[pytest]\nllmperf_profiles_file = {PROFILES}\nllmperf_baseline_dir = baselines\n"
    )
    shutil.copytree(REPO / "perf_suites", pytester.path / "perf_suites",
                    ignore=shutil.ignore_patterns("profiles.toml", "__pycache__"))  # fmt: skip
    args = [
        "perf_suites",
        f"--llm-profile={name}",
        "--llm-concurrency",
        "2",
        "-p",
        "no:cacheprovider",
    ]
    recorded = pytester.runpytest_subprocess(*args, "--perf-update", timeout=900)
    output = recorded.stdout.str()
    assert recorded.ret == 0, output[-4000:]
    recorded.stdout.fnmatch_lines(
        [f"SKIPPED * {name}: this workload needs 2,112 tokens per request (2,048 in, 64 out), but "
         "the server gives a request *"]
    )  # fmt: skip
    gated = pytester.runpytest_subprocess(*args, "-rs", "--perf-json", "out.json", timeout=900)
    output = gated.stdout.str()
    assert gated.ret == 0, output[-4000:]
    assert "Traceback" not in output + gated.stderr.str()
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    assert {p["test"].split("::")[1].split("[")[0] for p in points} == {
        "test_output_throughput", "test_latency", "test_single_stream",
    }  # fmt: skip
    assert all(p["verdict"] in ("PASS", "WARN", "IMPROVED") for p in points), [
        p["message"] for p in points
    ]
