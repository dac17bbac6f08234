"""The steady-state window against a server whose pacing is known exactly.

The paced server writes one event of k tokens every ITL to every stream, including the first, so
a stream yields k/ITL tok/s whatever its phase, and C streams C·k/ITL. The window counts the
tokens of the chunks that arrive inside it, so its only error is the chunk cut at each edge.
"""

from dataclasses import replace

import pytest

from pytest_llmperf.core import metrics
from pytest_llmperf.core.staging import (
    MIN_STAGE,
    RECORD_MAX_RUNS,
    RECORD_MIN_RUNS,
    STAGES,
    golden_is_precise,
)
from pytest_llmperf.load.level import SETTLE_S, ClosedPlan
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from tests.helpers import THROUGHPUT_SUITE, start_paced

ITL_MS = 10.0
OUTPUT_LEN = 100
WINDOW_S = 3.0


@pytest.fixture(scope="module")
def paced():
    server = start_paced(ITL_MS)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def paced_3_token_chunks():
    server = start_paced(ITL_MS, tokens_per_chunk=3)
    yield server
    server.stop()


def _window_run(url, api, concurrency, output_len=OUTPUT_LEN):
    run = measure(
        url,
        Workload(api=api, output_len=output_len),
        ClosedPlan(concurrency, 0, 1, window_s=WINDOW_S),
    )[0]
    return run, metrics.summarize_run(run, expected_tokens=output_len)


@pytest.mark.parametrize("api", ["sglang", "openai"])
@pytest.mark.parametrize("concurrency", [1, 4, 64])
def test_window_output_tok_s_within_1_percent_of_truth(paced, api, concurrency):
    truth = concurrency * 1000 / ITL_MS
    run, m = _window_run(paced.url, api, concurrency)
    assert m.valid, m.problems
    assert m.output_tok_s == pytest.approx(truth, rel=0.01)
    # The window is the run's duration, opened once every slot streamed.
    assert m.duration_s == pytest.approx(WINDOW_S)
    assert m.window is not None and m.window["opened_s"] >= ITL_MS / 1000
    assert m.window["tokens"] == m.output_tokens
    # C were in flight the whole window; the ones in flight at its close were cut, not failed.
    assert m.in_flight_while_sending == pytest.approx(concurrency, rel=0.01)
    assert m.window["cancelled_requests"] == concurrency
    assert m.failed_requests == 0
    assert sum(r.cancelled for r in run.records) == concurrency
    # Latency keeps its definitions: first event after one ITL (not at once, not after two:
    # at C = 64 on 2 busy cores the client reads it up to 4 ms late), one token per ITL.
    itl = ITL_MS / 1000
    assert itl - 0.001 <= m.ttft_s["p50"] < 2 * itl, m.ttft_s
    assert m.itl_s["p50"] == pytest.approx(ITL_MS / 1000, rel=0.1)
    assert m.tpot_s["p50"] == pytest.approx(ITL_MS / 1000, rel=0.1)


def test_first_wave_is_staggered_so_completions_spread_out(paced):
    """Slot k's first request asks for (k + 1)/C of the output length: the first C requests
    end at evenly spread times instead of all together."""
    concurrency = 10
    run, m = _window_run(paced.url, "sglang", concurrency)
    assert m.valid, m.problems
    first = sorted(run.records[:concurrency], key=lambda r: r.end)
    assert [r.requested for r in first] == [OUTPUT_LEN * (k + 1) // concurrency for k in range(10)]
    assert [r.completion_tokens for r in first] == [r.requested for r in first]
    ends = [r.end - r.start for r in first]
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    step = OUTPUT_LEN / concurrency * ITL_MS / 1000  # 0.1 s between completions
    assert all(g == pytest.approx(step, abs=0.02) for g in gaps), gaps
    # Only full-length requests count towards e2e: the staggered ones are shorter on purpose.
    assert m.e2e_s["p50"] == pytest.approx(OUTPUT_LEN * ITL_MS / 1000, rel=0.05)


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_multi_token_chunks_are_counted_by_the_servers_counts(paced_3_token_chunks, api):
    """Three tokens per event, as EAGLE streams: the window counts the server's counts, and the
    per-token ITL is a third of the gap between events."""
    run, m = _window_run(paced_3_token_chunks.url, api, 4, output_len=99)
    assert m.valid, m.problems
    assert m.output_tok_s == pytest.approx(4 * 3 * 1000 / ITL_MS, rel=0.02)
    assert m.itl_s["p50"] == pytest.approx(ITL_MS / 1000 / 3, rel=0.1)
    assert not m.window["tokens_estimated"]


def test_a_run_after_a_cut_one_waits_for_the_servers_aborts(paced):
    """SGLang aborts a disconnected request 2 s later: the window of a run that follows one whose
    requests were cut opens SETTLE_S after it began; the first run (after the warm-up, whose
    requests all finished) need not wait."""
    runs = measure(
        paced.url, Workload(api="sglang", output_len=OUTPUT_LEN), ClosedPlan(4, 0, 2, window_s=1.0)
    )
    first, second = (metrics.summarize_run(r, OUTPUT_LEN) for r in runs)
    assert first.valid and second.valid, (first.problems, second.problems)
    assert first.window["opened_s"] < 0.5
    assert second.window["opened_s"] >= SETTLE_S - 0.01  # counted from the run's start
    assert second.output_tok_s == pytest.approx(first.output_tok_s, rel=0.02)


#: The windowed profile's fail margin (the profile default), which sizes its recording.
FAIL_MARGIN = 0.15


def windowed_profiles(pytester, multiplier: float | None = None) -> None:
    fault = f', "--sim-throughput-multiplier", "{multiplier}"' if multiplier else ""
    pytester.makefile(
        ".toml",
        profiles=f"""
        [profiles.sim-window]
        engine = "sim"
        model = "sim/window"
        args = ["--sim-speed", "20", "--sim-load-time", "0.1"{fault}]
        concurrency = [1, 8]
        output_len = 64
        window_s = 0.5
        settle_s = 0.2  # the sim aborts a cut request 2 s / 20 later
        ready_timeout_s = 30
        shutdown_timeout_s = 5
        request_timeout_s = 10
        """,
    )


def test_a_windowed_profile_records_few_precise_runs_then_gates_with_two(pytester):
    """End to end as users run it: --perf-update stops at 5 runs when the golden is precise;
    the check then starts with 2 runs, passes on the same engine and fails it 30 % slower; the
    results JSON has every run's window."""
    import json

    windowed_profiles(pytester)
    pytester.makeini(
        "[pytest]\nllmperf_profiles_file = profiles.toml\nllmperf_profiles = sim-window\n"
    )
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    record = pytester.runpytest_subprocess("--perf-update", "--perf-json", "rec.json")
    record.assert_outcomes(passed=2)
    recorded = json.loads((pytester.path / "rec.json").read_text())["points"]
    for point in recorded:
        # The recording stopped at the first run count at which its golden was precise (5 on a
        # quiet host; a busy one spreads the runs and the rule rightly takes more): the rule of
        # core/staging.py, recomputed on the runs it took.
        values = point["values"]
        precise = [
            n for n in range(RECORD_MIN_RUNS, RECORD_MAX_RUNS + 1)
            if golden_is_precise(values[:n], FAIL_MARGIN)
        ]  # fmt: skip
        assert len(values) == (precise[0] if precise else RECORD_MAX_RUNS), values
        for run in point["runs"]:
            window = run["window"]
            assert window["seconds"] == pytest.approx(0.5)
            assert window["cancelled_requests"] == point["concurrency"]
            assert run["duration_s"] == pytest.approx(0.5)
    (golden,) = (pytester.path / "baselines" / "sim-window").glob("*.json")
    entry = next(iter(json.loads(golden.read_text())["points"].values()))
    assert entry["workload"]["measured_over"] == "steady-state window"

    same = pytester.runpytest_subprocess("--perf-json", "out.json")
    same.assert_outcomes(passed=2)
    same.stdout.fnmatch_lines(["*sim-window: C = 1, 8; 2 runs per level*"])  # the plan
    points = json.loads((pytester.path / "out.json").read_text())["points"]
    # It starts with 2 runs (the plan above); a busy 2-core host can spread them so that it
    # tops up through the stages (seen once in a full run: C = 8 to 10 runs, PASS at -0.2 %).
    assert all(len(p["values"]) in (MIN_STAGE, *STAGES) for p in points), points
    assert {p["verdict"] for p in points} == {"PASS"}

    windowed_profiles(pytester, multiplier=0.7)
    slower = pytester.runpytest_subprocess()
    slower.assert_outcomes(failed=2)
    slower.stdout.fnmatch_lines(["*sim-window C=8: * tok/s vs golden * (\u2212*%*) \u2014 FAIL*"])


def test_worker_processes_measure_one_window_together(paced):
    """C split over two load-generator processes: each staggers and windows its share, and the
    merged run is measured over the window in which every process had all its streams going."""
    from pytest_llmperf.load.workers import measure

    (run,) = measure(
        paced.url,
        Workload(api="sglang", output_len=OUTPUT_LEN),
        ClosedPlan(8, 0, 1, window_s=WINDOW_S),
        workers=2,
    )
    m = metrics.summarize_run(run, OUTPUT_LEN)
    assert m.valid, m.problems
    assert WINDOW_S - 0.2 < m.duration_s <= WINDOW_S  # the intersection of the two windows
    assert m.output_tok_s == pytest.approx(8 * 1000 / ITL_MS, rel=0.01)
    assert m.in_flight_while_sending == pytest.approx(8, rel=0.01)
    assert m.window["cancelled_requests"] == 8


@pytest.fixture(scope="module")
def paced_4_slots():
    server = start_paced(ITL_MS, 1, "--slots", "4")
    yield server
    server.stop()


def test_a_capped_server_staggers_only_what_it_runs_and_opens_its_window_at_once(paced_4_slots):
    """C = 12 against a server that runs 4 at once (the rest queue, in arrival order): told so
    (``in_service``), the first 4 slots' first requests are staggered over 1/4 … 4/4 of the
    output length and the others ask for the whole, and the window opens once those 4 stream,
    measuring what 4 streams give; staggering all 12 instead makes the window wait until the
    last slot's first request is admitted behind 8 shorter ones."""
    url, plan = paced_4_slots.url, ClosedPlan(12, 0, 1, window_s=WINDOW_S)
    workload = Workload(api="sglang", output_len=OUTPUT_LEN)
    (capped,) = measure(url, workload, replace(plan, in_service=4))
    (every,) = measure(url, workload, plan)
    m, m_every = metrics.summarize_run(capped, OUTPUT_LEN), metrics.summarize_run(every, OUTPUT_LEN)
    assert m.valid and m_every.valid, (m.problems, m_every.problems)
    first = capped.records[:12]
    assert [r.requested for r in first] == [25, 50, 75, 100] + [OUTPUT_LEN] * 8
    assert m.output_tok_s == pytest.approx(4 * 1000 / ITL_MS, rel=0.01)
    # Opened as soon as the first 4 stream (an ITL after the run began, not after the queue's
    # first completions); all 12 staggered waits for slot 11, admitted after 8 completions.
    assert m.window["opened_s"] < 0.1
    assert m_every.window["opened_s"] > 0.3
