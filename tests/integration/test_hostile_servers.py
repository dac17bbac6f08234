"""Servers that break their streams, end to end through pytester: every failed request gets a
one-line reason that names what the server sent, nothing hangs, and the summary, the strict
results JSON, the report and the pytest-benchmark JSON all survive points with no valid run.

The servers are real processes (tests/standin/hostile_server.py), one behaviour each, over both
APIs; all of them run in one pytest session, as a nightly would meet them.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import THROUGHPUT_SUITE

HOSTILE = Path(__file__).resolve().parents[1] / "standin" / "hostile_server.py"
REQUEST_TIMEOUT_S = 2.0

#: behaviour → the reason each failed request must carry, per API (one string: both).
EXPECTED: dict[str, str | dict[str, str]] = {
    "http-500": "HTTP 500: Internal Server Error: the engine is gone",
    # Refused once, the point stops: no more runs (each profile asks for 2).
    "http-400": "runs were not made: the server refused every request of a run (HTTP 400:",
    "json-body": "answered with a plain JSON body (Content-Type application/json",
    "empty-body": "the server closed the stream without sending anything (empty body)",
    "not-sse": "the response is not an event stream (no 'data:' events); it began: <html>",
    "error-event": "server error: CUDA out of memory",
    "bad-json-middle": {
        "sglang": 'an event of /generate\'s stream is not a JSON object: {"text"',
        "openai": 'an event of the completion stream is not a JSON object: {"id"',
    },
    "bad-json-final": {
        "sglang": "the final event of /generate's stream is not valid JSON (Expecting",
        "openai": "the last content event of the completion stream is not valid JSON (Expecting",
    },
    "null-tokens": {
        "sglang": 'completion_tokens is not a number in the server\'s event: {"text"',
        "openai": "usage.completion_tokens is null, not a token count",
    },
    "no-counts": {
        "sglang": "the final event has no meta_info (SGLang's /generate reports the token counts there)",
        "openai": "the server reported no usage.completion_tokens",
    },
    "cut": "before [DONE]",
    "stall": "stalled: waited",
    "keepalive": "stalled: waited",
    "no-headers": "stalled: waited",
}
STALLS = ("stall", "keepalive", "no-headers")
APIS = ("sglang", "openai")


def hostile_profiles(pytester: pytest.Pytester) -> list[str]:
    names, tables = [], []
    for behaviour in EXPECTED:
        for api in APIS:
            name = f"{api}-{behaviour}"
            names.append(name)
            tables.append(
                textwrap.dedent(f"""
                [profiles.{name}]
                engine = "command"
                command = ["{sys.executable}", "{HOSTILE}", "--port", "{{port}}", "--behaviour", "{behaviour}"]
                api = "{api}"
                concurrency = [2]
                runs = 2
                output_len = 8
                min_requests = 4
                ready_timeout_s = 20
                shutdown_timeout_s = 2
                request_timeout_s = {REQUEST_TIMEOUT_S}
            """)
            )
    pytester.makefile(".toml", profiles=f"default = {json.dumps(names)}\n" + "".join(tables))
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    return names


def strict_json(path: Path) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"{path} holds {constant}, which strict JSON parsers reject")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_every_misbehaving_server_gets_a_one_line_reason_and_the_outputs_survive(pytester):
    names = hostile_profiles(pytester)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "--perf-json=out/results.json",
        "--perf-report=out/report",
        "--perf-benchmark-json=out/bench.json",
        "--junitxml=out/junit.xml",
        "-p", "no:cacheprovider",
        timeout=240,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    result.assert_outcomes(failed=len(names))
    result.stdout.fnmatch_lines(
        ["*llmperf: output throughput per concurrency*", f"*{len(names)} failed*"]
    )

    data = strict_json(pytester.path / "out/results.json")
    assert isinstance(data, dict)
    points = {p["profile"]: p for p in data["points"]}
    assert sorted(points) == sorted(names)
    matrix = []
    for name, point in sorted(points.items()):
        api, behaviour = name.split("-", 1)
        expected = EXPECTED[behaviour]
        expected = expected if isinstance(expected, str) else expected[api]
        assert point["verdict"] == "INVALID", name
        problems = point["problems"]
        assert all("\n" not in p for p in problems), problems
        reason = next((p for p in problems if expected in p), None)
        assert reason is not None, f"{name}: {problems}"
        matrix.append(f"{name:28} {reason}")
    print("\n".join(matrix))  # the matrix, for the record (pytest -s)
    assert strict_json(pytester.path / "out/bench.json")
    assert (pytester.path / "out/report/summary.md").read_text().count("INVALID") >= len(names)

    # A stalled server costs about one request_timeout_s per point, not one per request (the
    # warm-up and 2 runs, 2 waves of C = 2 each: 12 s): the first stall abandons the point.
    # Counted beyond what a server refusing every request at once costs (its start, about
    # 0.6 s), the stalled point's time holds the stall and its server's stop (aiohttp waits on
    # SIGTERM for the stalled handlers; killed after shutdown_timeout_s, 2 s): 2.0 to 5.9 s seen.
    times = {
        case.get("name"): float(case.get("time", 0))
        for case in ET.parse(pytester.path / "out/junit.xml").iter("testcase")
    }

    def spent(name: str) -> float:
        (seconds,) = [t for n, t in times.items() if f"[{name}-C2]" in n]
        return seconds

    for behaviour in STALLS:
        for api in APIS:
            beyond = spent(f"{api}-{behaviour}") - spent(f"{api}-http-500")
            assert beyond < 4 * REQUEST_TIMEOUT_S, f"{api}-{behaviour}: {beyond:.1f} s more"
    assert elapsed < 150
