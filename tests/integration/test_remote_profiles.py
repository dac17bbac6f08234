"""Profiles with a ``url``: servers someone else runs, any number of them in one session, mixed
with launched ones, a remote speculative profile paired with its remote base.

The truth comes from two exactly-paced servers (pytest_llmperf/sim/paced.py). The "base" sends a
token every 10 ms and serves 4 streams at once; the "speculative" one sends 3 tokens every 10 ms
(an accept length of 3) but serves one stream at a time. So at C = 1 the speedup is 3 (24 tokens
in 8 events instead of 24; at 12 tokens the client's 2-3 ms between a response and the next
request already took 4.6 % off the 40 ms speculative requests) and at C = 4 it is 0.75 (one 3×
stream against four 1× streams): the crossover is C = 4."""

from __future__ import annotations

import json

import pytest

from tests.helpers import (
    FAST_SIM_ARGS,
    SPEEDUP_SUITE,
    THROUGHPUT_SUITE,
    project_with,
    start_paced,
)

PACED = """
[profiles.remote-base]
engine = "remote"
url = "{base}"
api = "sglang"
concurrency = [1, 4]
runs = 3
output_len = 24
min_requests = 8
ready_timeout_s = 10

[profiles.remote-spec]
extends = "remote-base"
url = "{spec}"
speculative = true
"""


@pytest.fixture
def paced_pair():
    base = start_paced(10.0, 1, "--slots", "4")
    try:
        spec = start_paced(10.0, 3, "--slots", "1")
    except BaseException:
        base.stop()
        raise
    yield base, spec
    base.stop()
    spec.stop()


def test_two_remote_servers_in_one_session_give_the_true_speedup_and_crossover(
    pytester, paced_pair
):
    base, spec = paced_pair
    project_with(pytester, PACED.format(base=base.url, spec=spec.url), SPEEDUP_SUITE)
    result = pytester.runpytest(
        "--llm-profile",
        "remote-base,remote-spec",
        "--perf-update",
        "--perf-update-runs",
        "3",
        "--perf-json",
        "out.json",
    )
    result.assert_outcomes(passed=6)
    data = json.loads((pytester.path / "out.json").read_text())
    (pair,) = data["speculative"]
    assert (pair["profile"], pair["base_profile"]) == ("remote-spec", "remote-base")
    print(  # the figures, with -s
        f"speedup C=1 {pair['speedup']['1']['ratio']:.3f} (truth 3), "
        f"C=4 {pair['speedup']['4']['ratio']:.3f} (truth 0.75), "
        f"crossover C={pair['crossover_concurrency']}"
    )
    assert pair["speedup"]["1"]["ratio"] == pytest.approx(3.0, rel=0.05)
    assert pair["speedup"]["4"]["ratio"] == pytest.approx(0.75, rel=0.05)
    assert pair["crossover_concurrency"] == 4
    for name, server in (("remote-base", base), ("remote-spec", spec)):
        described = data["profiles"][name]
        assert described["attached"] and described["base_url"] == server.url
        assert data["fingerprint"]["hard"][name]["hardware"] == {"key": "remote"}
    # Nothing was launched: the run directory holds no server log, and both servers still serve.
    assert not list(pytester.path.glob(".llmperf/runs/*/*.log"))
    # The goldens are keyed by the remote hardware, and a second session gates against them.
    assert (pytester.path / "baselines" / "remote-spec" / "remote.json").exists()
    again = pytester.runpytest("--llm-profile", "remote-base,remote-spec")
    again.assert_outcomes(passed=6)


def test_a_remote_profile_runs_beside_a_launched_one(pytester):
    server = start_paced(5.0, 1)
    try:
        fast = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
        project_with(
            pytester,
            f"""
            [profiles.launched]
            engine = "sim"
            args = [{fast}]
            concurrency = [2]
            runs = 2
            output_len = 64
            min_requests = 4
            ready_timeout_s = 30

            [profiles.elsewhere]
            engine = "sglang"
            url = "{server.url}"
            health_path = "/health"
            args = ["--tp", "8"]
            concurrency = [2]
            runs = 2
            output_len = 16
            min_requests = 4
            """,
            THROUGHPUT_SUITE,
        )
        result = pytester.runpytest(
            "--llm-profile", "launched,elsewhere", "--perf-update", "--perf-json", "out.json"
        )
        result.assert_outcomes(passed=2)
        profiles = json.loads((pytester.path / "out.json").read_text())["profiles"]
        assert profiles["elsewhere"]["attached"] and not profiles["launched"]["attached"]
        assert (pytester.path / "baselines" / "launched" / "sim.json").exists()
        assert (pytester.path / "baselines" / "elsewhere" / "remote.json").exists()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ('engine = "remote"', "field 'url': missing; engine = \"remote\" attaches"),
        ('url = "10.0.0.5:30000"', "field 'url': got '10.0.0.5:30000'; expected the server's"),
        (
            'engine = "command"\nurl = "http://h:1"\ncommand = ["srv", "--port", "{port}"]',
            "field 'command': a profile with a url launches nothing; remove command.",
        ),
    ],
)
def test_a_bad_remote_profile_names_the_field(pytester, fields, message):
    project_with(pytester, f"[profiles.bad]\n{fields}\n", THROUGHPUT_SUITE)
    result = pytester.runpytest("--llm-profile", "bad")
    assert result.ret != 0
    assert message in result.stderr.str() + result.stdout.str()
