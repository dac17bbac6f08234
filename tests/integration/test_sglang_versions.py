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

import pytest

from tests.helpers import FAST_SIM_ARGS, fake_sglang, processes_with, write_sglang_profile


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
    assert (
        data["fingerprint"]["soft"]["gpu"]["server_version"] == version
    )  # from /server_info, as SGLang reports
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
