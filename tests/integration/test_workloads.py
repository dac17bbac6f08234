"""Workloads beyond one shape, end to end: exact input lengths sent as token ids, length
distributions, dataset files, the chat API, latency gates, SLO checks and goodput."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.helpers import FAST_SIM_ARGS, start_paced, start_sim

#: The paced server's TTFT: a fixed part plus a prefill cost per prompt token, then ITL_MS to
#: the first token (the paced server writes event j at arrival + TTFT + j·ITL).
TTFT_MS = 60.0
PREFILL_US = 20.0
ITL_MS = 4.0
INPUT_LEN = 2048

GATED_SUITE = """
def test_latency(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)
    llmperf.check(point, metric="ttft_p99_s")  # 16 requests a run: too few for a p99
    llmperf.check(point, metric="ttft_p50_s")
"""


def attached_profile(pytester: pytest.Pytester, body: str) -> None:
    pytester.makefile(
        ".toml",
        profiles=textwrap.dedent(
            """
            [profiles.paced]
            engine = "command"
            command = ["unused: attached", "{port}"]
            api = "sglang"
            concurrency = [4]
            request_timeout_s = 30
            """
        )
        + textwrap.dedent(body),
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")


def paced_server(ttft_ms: float, *options: str, itl_ms: float = ITL_MS):
    return start_paced(
        itl_ms, 1, "--ttft-ms", str(ttft_ms), "--prefill-us-per-token", str(PREFILL_US), *options
    )


@pytest.mark.slow
def test_input_len_2048_ttft_p50_within_5_percent_and_prompt_tokens_exact(pytester):
    attached_profile(pytester, "input_len = 2048\noutput_len = 16\nruns = 2\nmin_requests = 16\n")
    pytester.makepyfile(
        test_perf="""
def test_prefill(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    assert not point.problems, point.problems
"""
    )
    server = paced_server(TTFT_MS)
    try:
        result = pytester.runpytest_subprocess(
            "--llm-profile", "paced", "--llm-server-url", server.url, "--perf-json", "out.json"
        )
    finally:
        server.stop()
    result.assert_outcomes(passed=1)
    point = json.loads((pytester.path / "out.json").read_text())["points"][0]
    truth = (TTFT_MS + PREFILL_US * INPUT_LEN / 1000 + ITL_MS) / 1000
    for run in point["runs"]:
        assert run["ttft_s"]["p50"] == pytest.approx(truth, rel=0.05), (run["ttft_s"], truth)
        # The server's reported prompt_tokens match what was sent, request by request (else
        # the run would have a problem), and add up to 2048 per request.
        assert run["problems"] == []
        finished = run["requests"] - run["failed_requests"]
        assert run["prompt_tokens"] == INPUT_LEN * finished
    assert point["workload"]["input_len"] == INPUT_LEN
    print("TTFT p50 per run:", [r["ttft_s"]["p50"] for r in point["runs"]], "truth", truth)


@pytest.mark.slow
def test_a_server_that_changes_the_prompt_makes_the_run_invalid(pytester):
    attached_profile(pytester, "input_len = 512\noutput_len = 8\nruns = 1\nmin_requests = 4\n")
    pytester.makepyfile(test_perf=GATED_SUITE)
    server = paced_server(1.0, "--extra-prompt-tokens", "1")  # as a server adding a BOS would
    try:
        result = pytester.runpytest_subprocess(
            "--llm-profile", "paced", "--llm-server-url", server.url
        )
    finally:
        server.stop()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*run 1: 16 of 16 requests were reported with 513 prompt tokens for the 512 token ids "
            "sent: the server changed the prompt*"
        ]
    )


@pytest.mark.slow
def test_ttft_40_percent_up_fails_the_ttft_gate_and_passes_throughput_3_percent_never_fails(
    pytester,
):
    # 512 tokens at 2 ms a token: +40 % TTFT moves a request's e2e by under 4 %.
    attached_profile(
        pytester,
        "input_len = 2048\noutput_len = 512\nruns = 3\nmin_requests = 8\n"
        "latency_fail_margin = 0.15\nlatency_warn_margin = 0.05\n",  # the throughput rule's margins
    )
    pytester.makepyfile(test_perf=GATED_SUITE)
    itl_ms = 2.0
    truth = TTFT_MS + PREFILL_US * INPUT_LEN / 1000 + itl_ms

    def run(extra_ms: float, *options: str):
        server = paced_server(TTFT_MS + extra_ms, itl_ms=itl_ms)
        try:
            return pytester.runpytest_subprocess(
                "--llm-profile", "paced", "--llm-server-url", server.url, *options
            )
        finally:
            server.stop()

    run(0.0, "--perf-update", "--perf-update-runs", "5").assert_outcomes(passed=1)
    slower40 = run(0.40 * truth)
    slower40.assert_outcomes(failed=1)
    print("\n".join(line for line in slower40.outlines if line.startswith("paced ")))
    slower40.stdout.fnmatch_lines(
        [
            "*paced C=4 ttft_p50_s: * ms vs golden * (+[34][0-9].[0-9] %, slower, p=*) \u2014 FAIL: "
            "significantly slower by more than the 15 %*"
        ]
    )
    # The throughput check ran first and passed: only the TTFT gate failed. The p99 of 16
    # requests a run is nearly their slowest: it rose as much, but is reported, not failed.
    assert not any("paced C=4: " in line and "FAIL" in line for line in slower40.outlines)
    slower40.stdout.fnmatch_lines(
        [
            "paced*latency *4*PASS",
            "paced*latency ttft_p99_s (ms)*4*WARN (not gated)",
            "paced*latency ttft_p50_s (ms)*4*FAIL",
        ]
    )
    slower40.stdout.fnmatch_lines(
        [
            "WARN latency paced C=4 ttft_p99_s: * (a run had only 16 values, too few for a p99, "
            "which needs 662: 646 more a run*"
        ]
    )
    slower3 = run(0.03 * truth)
    slower3.assert_outcomes(passed=1)
    assert not any("FAIL" in line for line in slower3.outlines)


@pytest.mark.slow
def test_shared_prefix_hits_the_cache_and_unshared_prompts_never_do(pytester):
    server = start_sim()
    pytester.makepyfile(
        test_perf="""
def test_cache(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    assert not point.problems, point.problems
"""
    )
    try:
        cached = {}
        for name, body in (("shared", "shared_prefix_len = 512\n"), ("unshared", "")):
            attached_profile(
                pytester,
                f"input_len = 640\noutput_len = 64\nruns = 2\nmin_requests = 8\n{body}",
            )
            pytester.runpytest_subprocess(
                "--llm-profile", "paced", "--llm-server-url", server.url, "--perf-json", "o.json"
            ).assert_outcomes(passed=1)
            runs = json.loads((pytester.path / "o.json").read_text())["points"][0]["runs"]
            cached[name] = [(r["cached_tokens"], r["requests"]) for r in runs]
    finally:
        server.stop()
    # Each run starts from a flushed cache: its first request computes the prefix, every
    # later one finds it (512 tokens).
    for tokens, requests in cached["shared"]:
        assert tokens == 512 * (requests - 1), cached
    assert all(tokens == 0 for tokens, _ in cached["unshared"]), cached


DATASET_SUITE = """
def test_dataset(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)
"""


def sim_profile(pytester: pytest.Pytester, body: str, output_len: str = "24") -> None:
    fast = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
    pytester.makefile(
        ".toml",
        profiles=f"""
[profiles.data]
engine = "sim"
args = [{fast}]
concurrency = [2]
runs = 2
output_len = {output_len}
min_requests = 6
ready_timeout_s = 30
shutdown_timeout_s = 5
request_timeout_s = 10
"""
        + textwrap.dedent(body),
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")


@pytest.mark.slow
def test_sharegpt_file_runs_end_to_end_over_the_chat_api(pytester):
    api = "chat"
    conversations = [
        {
            "id": f"c{k}",
            "conversations": [
                {"from": "human", "value": f"Question {k}: why is the sky blue?"},
                {"from": "gpt", "value": "Rayleigh scattering."},
            ],
        }
        for k in range(5)
    ]
    conversations.append({"id": "empty", "conversations": []})  # skipped, as bench_serving does
    (pytester.path / "sharegpt.json").write_text(json.dumps(conversations, indent=1))
    sim_profile(pytester, f'dataset = "sharegpt.json"\napi = "{api}"\n')
    pytester.makepyfile(test_perf=DATASET_SUITE)
    args = ("--llm-profile", "data", "--perf-json", "out.json")
    pytester.runpytest_subprocess(*args, "--perf-update").assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    point = json.loads((pytester.path / "out.json").read_text())["points"][0]
    dataset = point["workload"]["dataset"]
    assert dataset["format"] == "sharegpt" and len(dataset["sha256"]) == 64
    assert point["verdict"] in ("PASS", "WARN", "IMPROVED")
    # A changed file is a different workload: INCOMPARABLE, with the hash in the diff.
    conversations[0]["conversations"][0]["value"] = "Another question."
    (pytester.path / "sharegpt.json").write_text(json.dumps(conversations))
    changed = pytester.runpytest_subprocess(*args)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*INCOMPARABLE*", "*workload.dataset.sha256:*"])


@pytest.mark.slow
def test_jsonl_file_with_text_ids_and_own_lengths_runs_end_to_end(pytester):
    lines = [
        {"prompt": "Summarise the plot of Hamlet.", "output_len": 12},
        {"input_ids": list(range(1000, 1100))},
        {"prompt": "List three prime numbers.", "output_len": 30},
    ]
    (pytester.path / "requests.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    sim_profile(pytester, 'dataset = "requests.jsonl"\n')
    pytester.makepyfile(test_perf=DATASET_SUITE)
    result = pytester.runpytest_subprocess(
        "--llm-profile", "data", "--perf-json", "out.json", "--perf-update"
    )
    result.assert_outcomes(passed=1)
    point = json.loads((pytester.path / "out.json").read_text())["points"][0]
    assert point["workload"]["dataset"]["format"] == "jsonl"
    for run in point["runs"]:
        assert run["problems"] == []  # each request returned exactly its own output_len
    # Request i uses line i mod 3: the per-line lengths 12, 24 (the profile's), 30.
    tokens = point["runs"][0]["output_tokens"]
    requests = point["runs"][0]["requests"]
    assert tokens == sum((12, 24, 30)[i % 3] for i in range(requests))


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{"prompt": "ok"}\n{"prompt": 7}\n', "line 2: field 'prompt' is 7"),
        ('{"prompt": "ok"}\n\n{"input_ids": [1, "x"]}\n', "line 3: field 'input_ids'"),
        ('{"prompt": "ok", "output_len": 0}\n', "line 1: field 'output_len' is 0"),
        (
            '{"prompt": "ok"}\n{"prompt": "a", "max_tokens": 3}\n',
            "line 2: unknown field 'max_tokens'",
        ),
        ('{"prompt": "ok"}\nnot json\n', "line 2: not valid JSON"),
        (
            '[\n {"conversations": [{"from": "human", "value": "hi"}]},\n {"id": 3}\n]\n',
            "line 3: field 'conversations' is missing",
        ),
        (
            '[{"conversations": [{"from": "human", "value": "hi"}]},\n'
            ' {"conversations": [{"from": "human", "value": ""}]}]\n',
            "line 2: field 'conversations[0].value'",
        ),
    ],
)
def test_malformed_dataset_line_fails_at_load_naming_file_line_and_field(pytester, content, where):
    (pytester.path / "bad.jsonl").write_text(content)
    sim_profile(pytester, 'dataset = "bad.jsonl"\n')
    pytester.makepyfile(test_perf=DATASET_SUITE)
    result = pytester.runpytest("--llm-profile", "data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert f"dataset {pytester.path / 'bad.jsonl'}, {where}" in text, text
    assert "profile 'data'" in text and "field 'dataset'" in text


@pytest.mark.slow
def test_length_distributions_are_exact_per_request_and_recorded(pytester):
    sim_profile(
        pytester,
        "input_len = { values = [64, 256], weights = [3, 1] }\nseed = 7\n",
        output_len="{ uniform = [8, 40] }",
    )
    pytester.makepyfile(test_perf=DATASET_SUITE)
    result = pytester.runpytest_subprocess(
        "--llm-profile", "data", "--perf-json", "out.json", "--perf-update"
    )
    result.assert_outcomes(passed=1)
    point = json.loads((pytester.path / "out.json").read_text())["points"][0]
    assert point["workload"]["output_len"] == {"uniform": [8, 40]}
    assert point["workload"]["input_len"] == {"values": [64, 256], "weights": [3.0, 1.0]}
    assert point["workload"]["seed"] == 7
    for run in point["runs"]:
        assert run["problems"] == []  # every request got exactly its own drawn length
        mean_prompt = run["prompt_tokens"] / run["requests"]
        assert 64 <= mean_prompt <= 256
    assert len({r["output_tokens"] for r in point["runs"]}) > 1  # lengths differ run to run


@pytest.mark.slow
def test_expect_and_goodput(pytester):
    sim_profile(pytester, "slo = { ttft_s = 5.0, itl_s = 1.0 }\n")
    pytester.makepyfile(
        test_perf="""
def test_slo_met(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.expect(point, ttft_p99_s=5.0, itl_p50_s=1.0, goodput_req_s=0.5)

def test_slo_missed(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.expect(point, ttft_p99_s=0.000001)

def test_unknown_figure(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point, metric="ttft_p95_s")
"""
    )
    result = pytester.runpytest_subprocess("--llm-profile", "data", "--perf-json", "out.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*data C=2: misses its SLO:",
            "*ttft_p99_s * ms (mean of 2 runs) is above the limit 0.0 ms by * ms (+*%)",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*llmperf.check: unknown metric 'ttft_p95_s'; choose from output_tok_s, *ttft_p99_s*"]
    )
    assert "Traceback" not in result.stdout.str()
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    assert len(points) == 3
    for point in points:
        for run in point["runs"]:
            # Every request met limits this loose: goodput is the finished requests per second.
            finished = run["requests"] - run["failed_requests"]
            assert run["goodput_req_s"] == pytest.approx(finished / run["duration_s"], rel=1e-6)


def test_goodput_counts_only_requests_that_met_every_slo():
    from pytest_llmperf.core.metrics import goodput
    from pytest_llmperf.core.records import RequestRecord, RunRecords

    def request(start, ttft, itl_gaps):
        times = [start + ttft]
        for gap in itl_gaps:
            times.append(times[-1] + gap)
        n = len(times)
        return RequestRecord(
            0, start=start, end=times[-1], chunk_times=times,
            chunk_cumulative=list(range(1, n + 1)), completion_tokens=n,
        )  # fmt: skip

    run = RunRecords(
        2,
        [
            request(0.0, 0.1, [0.01] * 9),  # meets both
            request(0.0, 0.5, [0.01] * 9),  # TTFT too slow
            request(0.5, 0.1, [0.01] * 8 + [0.2]),  # one slow token in ten: ITL p99 too slow
            request(1.0, 0.1, [0.01] * 9),  # meets both
        ],
        [],
        0.0,
        2.0,
    )
    duration = 1.0 + 0.1 + 0.09
    assert goodput(run, {"ttft_s": 0.2, "itl_s": 0.05}) == pytest.approx(2 / duration)
    assert goodput(run, {"ttft_s": 0.2}) == pytest.approx(3 / duration)
    assert goodput(run, {"itl_s": 0.05}) == pytest.approx(3 / duration)
