"""The shipped suite as a user runs it on a CPU engine: goldens recorded on this host (a CPU
engine's golden holds only for the host that recorded it, so none is committed), attached to a
server the test module started (two launches on 2 shared cores differ by up to 20 %: these tests
are about the suite, not about a CPU's launch-to-launch spread).

A short form: one level and five recorded runs a point, so CI spends minutes, not an hour. Only
the recording session runs here: the same golden gated on the same server is what the engines'
own flows test (test_sglang_cpu.py's record-then-pass with the shipped throughput suite, the
llama.cpp nightly flow over fresh launches), and a second session cost 25-50 s of CI. The
level is the engine's quickest at the profile's request count: SGLang's C = 4 (16 requests of 128
tokens at about 450 tok/s against 150 at C = 1: 175 s of CI at C = 1), llama-server's C = 1
(its 4 slots add little: 65 tok/s at C = 1, 94 at C = 4 for twice the requests).

The single-stream test is left out (it is the throughput test at C = 1 again under another
metric, 35 to 100 s of CI per engine; the simulated suite runs it, in test_scaffold.py), and so
is the accuracy test (60 items recorded then gated: 20-25 s of CI per engine; the tiny models
answer none right, and the llama.cpp pair's test asks 20 items of both, paired). The
prefill test sends 2,048-token prompts, longer than either server's context per request: it is
skipped with the reason, before measuring."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "perf_suites" / "profiles.toml"


#: Runs a point is recorded with.
RUNS = 3


def run_the_suite(
    pytester: pytest.Pytester, name: str, url: str, concurrency: int
) -> dict[str, Any]:
    """``pytest perf_suites --llm-profile=NAME --perf-update`` against ``url``: every point is
    recorded without a problem into a golden file, the prefill test is skipped with its reason,
    and no traceback is printed. Returns the session's results JSON."""
    pytester.makeini(
        f"[pytest]\nllmperf_profiles_file = {PROFILES}\nllmperf_baseline_dir = baselines\n"
    )
    shutil.copytree(REPO / "perf_suites", pytester.path / "perf_suites",
                    ignore=shutil.ignore_patterns("profiles.toml", "__pycache__"))  # fmt: skip
    args = [
        "perf_suites",
        f"--llm-profile={name}",
        f"--llm-server-url={url}",
        "--llm-concurrency",
        str(concurrency),
        "-p",
        "no:cacheprovider",
        "-k",
        "not single_stream and not accuracy",
    ]
    # Three runs a point: nothing gates this golden, and every run of a real engine here is
    # seconds of the suite's 40 minutes (five took 38-46 s on SGLang, three about 25 s).
    recorded = pytester.runpytest_subprocess(
        *args, "--perf-update", "--perf-update-runs", str(RUNS), "--perf-json", "out.json",
        timeout=900,
    )  # fmt: skip
    output = recorded.stdout.str()
    assert recorded.ret == 0, output[-4000:]
    assert "Traceback" not in output + recorded.stderr.str()
    data: dict[str, Any] = json.loads((pytester.path / "out.json").read_text())
    points = data["points"]
    # The throughput test's figures, each recorded from its runs.
    assert {(p["test"].split("::")[1].split("[")[0], p["metric"]) for p in points} == {
        ("test_output_throughput", "output_tok_s"),
        ("test_output_throughput", "ttft_p99_s"),
        ("test_output_throughput", "itl_p50_s"),
    }
    print(output[output.index("llmperf: output throughput") :])  # the figures, with -s
    assert all(p["verdict"] == "RECORDED" and p["problems"] == [] for p in points), [
        (p["message"], p["problems"]) for p in points
    ]
    (golden,) = (pytester.path / "baselines" / name).glob("*.json")
    recorded_points = json.loads(golden.read_text())["points"]
    assert len(recorded_points) == len(points) and all(
        len(point["runs"]) == RUNS for point in recorded_points.values()
    ), golden

    # The prefill test's levels are 1, 10 and 70: at C = 1 it is skipped for the server's
    # context, read from the server before anything is measured.
    args[args.index("--llm-concurrency") + 1] = "1"
    prefill = pytester.runpytest_subprocess(
        *args, "-k", "prefill", "-rs", "--junitxml", "junit.xml"
    )
    assert prefill.ret == 0, prefill.stdout.str()[-4000:]
    (why,) = [
        case.find("skipped").get("message")
        for case in ET.parse(pytester.path / "junit.xml").iter("testcase")
        if case.get("name", "").startswith("test_prefill_heavy")
    ]
    assert (
        f"{name}: this workload needs 2,112 tokens per request (2,048 in, 64 out), but the "
        "server gives a request"
    ) in why, why
    return data
