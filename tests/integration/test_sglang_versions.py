"""engine = "sglang" against a stand-in SGLang package of a chosen version.

The stand-in (tests/standin/launch_server.py) refuses the flags its version does not have, as
SGLang's argparse does, and otherwise runs the simulated engine; the plugin asks the profile's
interpreter for the installed SGLang version and adapts the profile's flags before launching.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.helpers import (
    FAST_SIM_ARGS,
    THROUGHPUT_SUITE,
    fake_sglang,
    processes_with,
    write_sglang_profile,
)


def project(pytester, version: str | None, args: list[str]) -> str:
    return write_sglang_profile(pytester, [*args, *FAST_SIM_ARGS], version=version)


SEED_FLAGS = ["--tp", "1", "--cuda-graph-max-bs", "8", "--enable-flashinfer-allreduce-fusion"]


def test_the_stand_in_refuses_a_removed_flag_as_sglang_does(pytester):
    site = fake_sglang(pytester.path, "0.5.23")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--cuda-graph-max-bs",
            "8",
        ],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode"
        in done.stderr
    )


@pytest.mark.parametrize(
    ("version", "expected", "notes"),
    [
        (
            "0.5.23",
            "--tp-size 1 --cuda-graph-max-bs-decode 8 --flashinfer-allreduce-fusion-backend auto",
            [
                "--cuda-graph-max-bs rewritten to --cuda-graph-max-bs-decode (removed in 0.5.20; SGLang 0.5.23)",
                "--enable-flashinfer-allreduce-fusion rewritten to --flashinfer-allreduce-fusion-backend auto",
            ],
        ),
        ("0.5.9", "--tp-size 1 --cuda-graph-max-bs 8 --enable-flashinfer-allreduce-fusion", []),
    ],
)
def test_flags_are_adapted_to_the_installed_version(pytester, version, expected, notes):
    marker = project(pytester, version, SEED_FLAGS)
    result = pytester.runpytest(
        "--perf-update", "--perf-update-runs", "2", "-W", "always", "--perf-json", "out.json"
    )
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "out.json").read_text())
    # From /server_info, as SGLang reports
    assert data["fingerprint"]["soft"]["gpu"]["server_version"] == version
    (cmd,) = (pytester.path / ".llmperf" / "runs").glob("*/gpu.cmd")
    assert (
        f"-m sglang.launch_server --model-path {marker} --host 127.0.0.1 --port " in cmd.read_text()
    )
    assert expected in cmd.read_text()
    out = result.stdout.str()
    assert (
        "gpu: --tp rewritten to --tp-size (SGLang has no --tp flag; it only matched by prefix)"
        in out
    )
    for note in notes:
        assert note in out
    assert processes_with(marker) == []


def test_adaptive_speculation_on_an_sglang_without_it_is_refused_before_launch(pytester):
    marker = project(
        pytester, "0.5.9", ["--speculative-algorithm", "EAGLE3", "--speculative-adaptive"]
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)  # at the server fixture's setup, before anything was started
    result.stdout.fnmatch_lines(
        [
            "*profiles.toml: profile 'gpu', field 'args': --speculative-adaptive needs SGLang "
            "0.5.11 or later; this interpreter has SGLang 0.5.9*"
        ]
    )
    assert processes_with(marker) == []


def test_missing_sglang_says_where_it_was_looked_for_and_what_to_do(pytester):
    project(pytester, None, [])
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(
        [
            f"*gpu: SGLang is not installed for {sys.executable} (*profiles.toml, profile 'gpu', "
            "field 'python'). Install it there*"
        ]
    )


def test_a_golden_survives_an_sglang_upgrade_but_not_a_changed_attention_backend(pytester):
    """Recorded against the stand-in as SGLang 0.5.19, checked against it as 0.5.23: the server
    reports the 0.5.23 field set (56 fields added, 0.5.19's removed ones gone), which is soft;
    a different attention backend is not."""
    args = [
        "--tp-size",
        "1",
        "--attention-backend",
        "flashinfer",
        "--sim-load-time",
        "0.2",
        "--sim-speed",
        "20",
    ]
    # 256-token requests (about 150 ms at sim speed 20): with 64 (38 ms), a full run of the
    # suite had the client 2.1 ms late between a response and its next request, 0.9 of C = 1 in
    # flight, and the plugin rightly called the run client-bound.
    marker = write_sglang_profile(pytester, args, version="0.5.19", output_len=256)
    pytester.runpytest("--perf-update", "--perf-update-runs", "4").assert_outcomes(passed=1)

    write_sglang_profile(pytester, args, version="0.5.23", marker=marker, output_len=256)
    upgraded = pytester.runpytest("--perf-json", "out.json")
    upgraded.assert_outcomes(passed=1)
    upgraded.stdout.fnmatch_lines(
        [
            "llmperf verdicts: 1 PASS",
            "Changed since the goldens (not blocking):",
            '  gpu: server_version: "0.5.19" → "0.5.23"',
            "  gpu: * server field(s) added: *",
            "  gpu: * server field(s) removed: *",
        ]
    )
    (point,) = json.loads((pytester.path / "out.json").read_text())["points"]
    assert (
        point["verdict"] == "PASS"
        and 'server_version: "0.5.19" → "0.5.23"' in point["environment_changes"]
    )

    triton = [a if a != "flashinfer" else "triton" for a in args]
    write_sglang_profile(pytester, triton, version="0.5.23", marker=marker, output_len=256)
    changed = pytester.runpytest()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        [
            "*gpu C=1: INCOMPARABLE with *",
            '    server_args.attention_backend: "flashinfer" → "triton"',
        ]
    )


@pytest.mark.parametrize(("version", "unfair"), [("0.5.9", True), ("0.5.23", False)])
def test_overlap_scheduling_turned_off_by_speculation_is_warned_about(pytester, version, unfair):
    """The profiles differ only in the speculative flags; SGLang 0.5.9 turns overlap scheduling off
    for EAGLE-3 by itself, and only the servers' own /server_info says so."""
    site = fake_sglang(pytester.path, version)
    pytester.makefile(
        ".toml",
        profiles=f"""
[profiles.base]
engine = "sglang"
model = "standin-fair"
args = ["--tp-size", "1", "--max-running-requests", "64", "{'", "'.join(FAST_SIM_ARGS)}"]
env = {{ PYTHONPATH = "{site}" }}
concurrency = [1]
runs = 2
output_len = 128
min_requests = 4
ready_timeout_s = 30
shutdown_timeout_s = 5

[profiles.spec]
extends = "base"
extra_args = ["--speculative-algorithm", "EAGLE3"]
""",
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    result = pytester.runpytest(
        "--llm-profile", "base,spec", "--perf-update", "--perf-update-runs", "2", "-W", "always"
    )
    result.assert_outcomes(passed=2)
    warning = (
        "*spec and its base base run with different server settings, by their own /server_info*"
    )
    if unfair:
        result.stdout.fnmatch_lines([warning + "disable_overlap_schedule: null \u2192 true*"])
    else:
        result.stdout.no_fnmatch_line(warning)


def test_an_unknown_flag_fails_fast_with_sglangs_argparse_message(pytester):
    """The stand-in, like SGLang, accepts only the flags its release's parser has (its ServerArgs
    fields, read from the wheel, and their aliases): anything else exits 2 at once."""
    write_sglang_profile(pytester, ["--tp-size", "1", "--no-such-flag", "1"], version="0.5.23")
    started = time.monotonic()
    result = pytester.runpytest()
    assert time.monotonic() - started < 20
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*gpu: the server exited with code 2 while loading*",
            "*sglang serve: error: unrecognized arguments: --no-such-flag*",
        ]
    )
