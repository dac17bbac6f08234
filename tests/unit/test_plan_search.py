"""The plan's expected capacity search walks the rates the search itself probes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.core.capacity import MAX_HALVINGS, RESOLUTION, search
from pytest_llmperf.plan import _probes
from tests.unit.test_open_loop import run_metrics


def step_server(capacity: float):
    """Every rate up to ``capacity`` meets the SLO (e2e 150 ms) by far; above, e2e grows with
    the rate (halving the rate lowers it, as a queue's does, so the search halves on)."""

    def measure(rate: float, runs: int):
        e2e = 0.05 if rate <= capacity else 0.15 * (1 + rate / capacity)
        return [run_metrics(e2e) for _ in range(runs)]

    return measure


@pytest.mark.parametrize("start", [1.0, 5.0, 20.0, 400.0])
@pytest.mark.parametrize("capacity", [0.3, 3.0, 35.4, 250.0])
def test_the_planned_probes_are_the_searchs_own(start, capacity):
    found = search("sim", step_server(capacity), {"e2e_s": 0.15}, 90, start)
    planned = _probes(start, capacity, 0.0, RESOLUTION, MAX_HALVINGS)
    assert planned == pytest.approx([p.rate for p in found.probes])


@pytest.mark.parametrize("capacity", [25.0, 32.0, 40.0, 120.0])
def test_from_a_bracket_the_planned_probes_are_the_searchs_own(capacity):
    """A gate's search starts at its golden's bracket: its low, then (once that holds) its high."""
    found = search("sim", step_server(capacity), {"e2e_s": 0.15}, 90, 30.8, then=33.6)
    planned = _probes(30.8, capacity, 0.0, RESOLUTION, MAX_HALVINGS, then=33.6)
    assert planned == pytest.approx([p.rate for p in found.probes])


def test_a_gate_whose_golden_launches_straddle_its_bracket_plans_the_walk_beyond_it(tmp_path):
    """The shipped sim-baseline golden's launches read 40.0 and 30.8 requests/s, its bracket
    30.8-33.6: the README's run then walked to 47.6 in six probes (51.6 s) where the plan said
    two (6 s). A golden whose launches lie in its bracket still plans the bracket's two."""
    import json
    import shutil

    from pytest_llmperf.core.capacity import STAGES
    from pytest_llmperf.plan import capacity_search, expected_run_s
    from pytest_llmperf.profiles_file import load_profiles

    repo = Path(__file__).resolve().parents[2]
    profile = load_profiles(repo / "perf_suites" / "profiles.toml").profiles["sim-baseline"]
    path = tmp_path / "sim-baseline" / "sim.json"
    path.parent.mkdir()
    shutil.copy(repo / "baselines" / "sim-baseline" / "sim.json", path)
    golden = json.loads(path.read_text())
    (cap,) = [p for p in golden["points"].values() if p["metric"] == "capacity_req_s"]
    low, high = 30.8, 33.6
    cap["low"], cap["high"] = low, high

    def planned(values: list[float]):
        for run, value in zip(cap["runs"], values, strict=True):
            run["value"] = value
        path.write_text(json.dumps(golden))
        search = capacity_search(profile, tmp_path, recording=False)
        assert search is not None
        return search

    beyond = planned([40.0, 30.8])
    assert beyond.probes == pytest.approx(
        _probes(low, 40.0, 0.0, RESOLUTION, MAX_HALVINGS, then=high)
    )
    assert len(beyond.probes) == 6 and beyond.probes[2] == pytest.approx(2 * high)
    assert "the farthest of the golden's launches (40, 30.8 requests/s" in str(beyond.basis)
    within = planned([32.0, 31.0])
    assert within.probes == pytest.approx((low, high)) and within.basis == "the golden's bracket"
    # Each probe at the SLO's edge: its middle stage of runs.
    assert within.seconds == pytest.approx(
        sum(STAGES[1] * expected_run_s(profile, r) for r in (low, high))
    )
    assert beyond.seconds > 2.5 * within.seconds


def test_a_search_no_rate_can_pass_halves_to_its_floor_or_its_last_halving():
    """Where the search stops halving depends on how the server's e2e falls with the rate
    (core/capacity.py _unreachable); the plan stops below about one request in flight, as the
    simulated pair did at 512 tokens (benchmarks/recording_cost.py)."""
    assert _probes(20.0, None, 1.6, RESOLUTION, MAX_HALVINGS) == [20.0, 10.0, 5.0, 2.5, 1.25]
    assert _probes(20.0, None, 0.0, RESOLUTION, MAX_HALVINGS) == [
        20.0 / 2**k for k in range(MAX_HALVINGS + 1)
    ]


class Item:
    """What the plan reads of a collected pytest item: its parameters, function and name."""

    def __init__(self, function, **params):
        self.callspec = type("CallSpec", (), {"params": params})()
        self.function = function
        self.originalname = function.__name__


def test_a_test_that_measures_is_a_level_of_its_own_and_a_second_figure_is_not():
    from pytest_llmperf.plan import collected
    from pytest_llmperf.profiles_file import load_profiles

    def test_output_throughput(llmperf, llm_concurrency):
        llmperf.check(llmperf.measure(concurrency=llm_concurrency))

    def test_latency(llmperf, llm_concurrency):
        llmperf.check(llmperf.measured_by("test_output_throughput", llm_concurrency))

    def test_prefill_heavy(llmperf, llm_concurrency):
        llmperf.check(llmperf.measure(concurrency=llm_concurrency, input_len=2048))

    def test_single_stream(llmperf, llm_profile):
        llmperf.check(llmperf.measure(concurrency=1, runs=3))

    def test_rate_latency(llmperf, llm_request_rate):
        llmperf.check(llmperf.measure(rate=llm_request_rate))

    def test_capacity(llmperf, llm_profile):
        llmperf.check_capacity(llmperf.capacity())

    shipped = Path(__file__).resolve().parents[2] / "perf_suites" / "profiles.toml"
    profile = load_profiles(shipped).profiles["sim-baseline"]
    items = [
        Item(test, **{"llm_profile": "sim-baseline", **params})
        for test, params in [
            (test_latency, {"llm_concurrency": 1}),  # before the test whose runs it reads
            (test_output_throughput, {"llm_concurrency": 1}),
            (test_output_throughput, {"llm_concurrency": 10}),
            (test_latency, {"llm_concurrency": 10}),
            (test_latency, {"llm_concurrency": 30}),  # nothing else measures C = 30
            (test_prefill_heavy, {"llm_concurrency": 10}),
            (test_single_stream, {}),
            (test_rate_latency, {"llm_request_rate": 5.0}),
            (test_capacity, {}),
            (test_capacity, {"llm_profile": "not-selected"}),
        ]
    ]
    work = collected(items, {"sim-baseline": profile})
    assert [c for _, c in work.points] == [1, 10, 10, 1, 30]
    assert work.rates == [(profile, 5.0)]
    assert work.searched == [profile] and list(work.launched) == ["sim-baseline"]
