"""``python -m pytest_llmperf merge``: the legs of a matrix nightly (one results JSON per runner)
as one results file, one report with each leg's points under its hardware, one history upload.

Two legs here: the same profile name measured by a launched simulated engine (hardware key
``sim``) and, on "another runner", by a remote server (an attached SGLang-like server: hardware
key ``remote``)."""

from __future__ import annotations

import json
import sys
import textwrap

from tests.helpers import FAST_SIM_ARGS, THROUGHPUT_SUITE, start_sim

FAST = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
BODY = """
[profiles.base]
{where}
concurrency = [2]
runs = 2
output_len = 128
min_requests = 4
ready_timeout_s = 30
"""


def leg(pytester, name: str, where: str) -> None:
    pytester.makefile(".toml", profiles=textwrap.dedent(BODY.format(where=where)))
    result = pytester.runpytest(
        "--llm-profile", "base", "--perf-update", "--perf-json", f"{name}.json"
    )
    result.assert_outcomes(passed=1)


def test_two_legs_on_different_hardware_merge_into_one_report_and_history(pytester):
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    leg(pytester, "gpu-a", f'engine = "sim"\nargs = [{FAST}]')
    server = start_sim()
    try:
        leg(pytester, "gpu-b", f'engine = "sglang"\nurl = "{server.url}"')
    finally:
        server.stop()

    merged = pytester.run(
        sys.executable, "-m", "pytest_llmperf", "merge", "merged.json", "gpu-a.json",
        "gpu-b.json", "--report", "report", "--history", "history.sqlite",
    )  # fmt: skip
    assert merged.ret == 0, merged.stderr.str()
    merged.stdout.fnmatch_lines(
        [
            "merged 2 leg(s), 2 point(s): merged.json",
            "report: report*summary.md",
            "history: * record(s) of 2 run(s) into history.sqlite",
        ]
    )
    data = json.loads((pytester.path / "merged.json").read_text())
    assert [leg["hardware"] for leg in data["legs"]] == [{"base": "sim"}, {"base": "remote"}]
    assert sorted((p["hardware"], p["leg"]) for p in data["points"]) == [("remote", 1), ("sim", 0)]
    assert sorted(data["fingerprint"]["hard"]) == ["base@remote", "base@sim"]
    assert sorted(data["profiles"]) == ["base@remote", "base@sim"]
    assert data["profiles"]["base@remote"]["attached"] is True

    summary = (pytester.path / "report" / "summary.md").read_text()
    remote, sim = summary.index("## remote"), summary.index("## sim")
    assert summary.count("| base | `test_perf.py::test_output_throughput[C=2]`") == 2
    assert remote < summary.index("RECORDED", remote) < sim  # each point under its hardware

    listing = pytester.run(sys.executable, "-m", "pytest_llmperf", "history", "history.sqlite",
                           "--json")  # fmt: skip
    runs = json.loads(listing.stdout.str())["runs"]
    assert len(runs) == 2 and {r["points"] for r in runs} == {1}

    again = pytester.run(sys.executable, "-m", "pytest_llmperf", "merge", "twice.json",
                         "gpu-a.json", "gpu-a.json")  # fmt: skip
    assert again.ret == 2
    assert (
        "gpu-a.json: profile 'base' on hardware 'sim' is also in gpu-a.json" in again.stderr.str()
    )
    assert not (pytester.path / "twice.json").exists()


def test_a_file_that_is_not_a_leg_is_named(pytester):
    (pytester.path / "bad.json").write_text("{}")
    result = pytester.run(sys.executable, "-m", "pytest_llmperf", "merge", "out.json", "bad.json")
    assert result.ret == 2
    assert "bad.json: not a pytest-llmperf results file (no 'points' list)" in result.stderr.str()
