"""Open-loop pieces that are pure functions: the arrival schedule, the capacity search and its
per-probe judgement, and the saturation rule (the load generator itself runs against real
servers in tests/integration/test_open_loop.py)."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics

import pytest

from pytest_llmperf.core.capacity import Capacity, judge, search
from pytest_llmperf.core.metrics import RunMetrics
from pytest_llmperf.core.open_loop_figures import open_loop_figures, saturation
from pytest_llmperf.core.records import OpenLoopRun, RequestRecord, RunRecords
from pytest_llmperf.core.schedule import Arrivals, interleave, schedule_seed


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip(offsets, offsets[1:])]


def test_each_part_of_a_run_offers_exactly_its_rate():
    parts = [1.5, 3.0, 1.5]
    offsets = Arrivals(6.0).offsets(parts, seed=1)
    counts = [
        sum(1 for t in offsets if lo <= t < hi) for lo, hi in ((0, 1.5), (1.5, 4.5), (4.5, 6.1))
    ]
    assert counts == [9, 18, 9]  # each part begins on an arrival and holds rate × its length
    assert offsets == sorted(offsets) and offsets[0] == 0.0 and offsets[9] == 1.5
    assert (6.0 - 0.0) / len(offsets) == pytest.approx(1 / 6.0)


def test_a_rate_with_a_fraction_rounds_on_the_running_total():
    offsets = Arrivals(2.5).offsets([1.0, 1.0, 1.0, 1.0], seed=3)
    assert len(offsets) == 10  # 2.5 × 4 s, not 4 × round(2.5)


@pytest.mark.parametrize(
    ("process", "burstiness", "cv"),
    [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5), ("constant", 1.0, 0.0)],
)
def test_the_gaps_have_the_process_s_spread(process, burstiness, cv):
    """Coefficient of variation of the gaps: 1 for Poisson, 1/sqrt(shape) for gamma, 0 constant."""
    offsets = Arrivals(10.0, process, burstiness).offsets([2000.0], seed=7)
    g = gaps(offsets)
    assert statistics.mean(g) == pytest.approx(0.1, rel=0.01)
    assert statistics.pstdev(g) / statistics.mean(g) == pytest.approx(cv, abs=0.08)


def test_the_same_seed_gives_the_same_schedule_and_another_run_another():
    a = Arrivals(5.0)
    seed = schedule_seed(salt=1234, run=1)
    assert a.offsets([1.0, 4.0, 1.0], seed) == a.offsets([1.0, 4.0, 1.0], seed)
    assert a.offsets([1.0, 4.0, 1.0], seed) != a.offsets([1.0, 4.0, 1.0], schedule_seed(1234, 2))


def test_interleaving_deals_every_arrival_to_exactly_one_sender():
    shares = interleave(list(range(11)), 3)
    assert sorted(i for share in shares for i in share) == list(range(11))
    assert shares[1] == [1, 4, 7, 10]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0}, "positive number"),
        ({"rate": 1.0, "process": "bursty"}, "unknown arrival process"),
        ({"rate": 1.0, "process": "gamma", "burstiness": 0.0}, "burstiness"),
    ],
)
def test_a_bad_arrival_process_is_refused_with_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Arrivals(**kwargs)


def run_metrics(
    e2e_p90: float, sustainable: bool = True, completed_req_s: float | None = None
) -> RunMetrics:
    """A run whose only figure that matters is its e2e p90 (and whether it kept up)."""
    dist = {"mean": e2e_p90, "p50": e2e_p90, "p90": e2e_p90, "p99": e2e_p90, "n": 50}
    return RunMetrics(
        concurrency=0, requests=50, failed_requests=0, output_tokens=1000, duration_s=1.0,
        output_tok_s=1000.0, request_tok_s=dist, ttft_s=dist, itl_s=dist, tpot_s=dist, e2e_s=dist,
        accept_length=None, achieved_concurrency=1.0, in_flight_while_sending=1.0,
        client_gap_s=0.0, loop_lag_s=dist, client_cpu_fraction=0.1,
        open_loop={"sustainable": sustainable, "completed_req_s": completed_req_s},
    )  # fmt: skip


def test_a_probe_holds_only_when_its_runs_are_significantly_within_the_limit():
    slo = {"e2e_s": 0.15}
    assert judge([run_metrics(0.10), run_metrics(0.11)], slo, 90).held is True
    assert judge([run_metrics(0.20), run_metrics(0.21)], slo, 90).held is False
    undecided = judge([run_metrics(0.12), run_metrics(0.17)], slo, 90)
    assert undecided.held is None and "cannot tell" in undecided.why
    # A run the server could not keep up with breaks it, whatever its figures.
    assert judge([run_metrics(0.01), run_metrics(0.01, sustainable=False)], slo, 90).held is False


def queue_server(capacity: float, limit: float, noise: float, seed: int = 0):
    """A stand-in whose e2e p90 rises as an M/M/1 queue's sojourn does, with noise per run."""
    rng = random.Random(seed)
    calls: list[tuple[float, int]] = []
    made: dict[float, list[RunMetrics]] = {}

    def measure(rate: float, runs: int) -> list[RunMetrics]:
        calls.append((rate, runs))
        for _ in range(runs):
            if rate >= capacity:
                # Saturated: it completes what it can, with a request's jitter per window.
                done = capacity * (1 + rng.gauss(0, 0.01))
                made.setdefault(rate, []).append(run_metrics(10.0, False, done))
                continue
            # p90 of an exponential sojourn with rate (capacity - rate), in seconds.
            p90 = math.log(10) / (capacity - rate) * math.exp(rng.gauss(0, noise))
            made.setdefault(rate, []).append(run_metrics(p90))
        return made[rate]

    truth = capacity - math.log(10) / limit
    return measure, calls, truth


@pytest.mark.parametrize("start", [1.0, 20.0, 400.0])
def test_the_search_brackets_the_true_capacity_from_any_start(start):
    measure, calls, truth = queue_server(capacity=100.0, limit=0.15, noise=0.03)
    found = search("sim", measure, {"e2e_s": 0.15}, 90, start)
    assert isinstance(found, Capacity)
    assert found.low is not None and found.high is not None
    assert found.high / found.low <= 1.10 + 1e-9
    # The bracket holds the truth, or misses it by less than the noise of a probe near it.
    assert found.low * 0.95 <= truth <= found.high * 1.05, (found.low, truth, found.high)
    assert found.max_rate == found.low  # never the bracket's middle
    assert len(found.probes) == len({rate for rate, _ in calls}) <= 12


def test_a_gate_from_its_golden_bracket_ends_in_two_probes_or_searches_on():
    """From a golden's bracket (``start`` its low, ``then`` its high): a server as it was
    confirms both ends in two probes; one that lost a third searches down from the low, and
    the bracket it ends with holds its new truth."""
    measure, calls, truth = queue_server(capacity=100.0, limit=0.15, noise=0.03)
    recorded = search("sim", measure, {"e2e_s": 0.15}, 90, 20.0)
    assert recorded.low is not None and recorded.high is not None
    calls.clear()
    measure, calls, truth = queue_server(capacity=100.0, limit=0.15, noise=0.03, seed=1)
    same = search("sim", measure, {"e2e_s": 0.15}, 90, recorded.low, then=recorded.high)
    assert [p.rate for p in same.probes] == [recorded.low, recorded.high]
    assert (same.low, same.high) == (recorded.low, recorded.high)
    measure, calls, truth = queue_server(capacity=67.0, limit=0.15, noise=0.03, seed=2)
    slower = search("sim", measure, {"e2e_s": 0.15}, 90, recorded.low, then=recorded.high)
    assert slower.probes[0].rate == recorded.low and not slower.probes[0].held
    assert recorded.high not in [p.rate for p in slower.probes]  # never probed above a miss
    assert slower.low is not None and slower.high is not None
    assert slower.low * 0.95 <= truth <= slower.high * 1.05, (slower.low, truth, slower.high)


def slowly_growing_queue(capacity: float, grows_unseen: float):
    """The issue's server: up to ``grows_unseen`` × its capacity, a short window shows a queue
    that meets the SLO and whose backlog rule holds (it grows by a few requests a second);
    beyond, it is plainly saturated and completes ``capacity`` requests/s."""
    rng = random.Random(1)
    made: dict[float, list[RunMetrics]] = {}

    def measure(rate: float, runs: int) -> list[RunMetrics]:
        for _ in range(runs):
            if rate >= capacity * grows_unseen:
                done = capacity * (1 + rng.gauss(0, 0.01))
                made.setdefault(rate, []).append(run_metrics(10.0, False, done))
            else:
                p90 = 0.5 * rate / capacity * math.exp(rng.gauss(0, 0.03))
                made.setdefault(rate, []).append(run_metrics(p90))
        return made[rate]

    return measure


@pytest.mark.parametrize("load", [0.9, 1.02, 1.1])
def test_a_capacity_is_never_above_a_rate_at_which_the_queue_grows(load):
    """A server of 12.8 requests/s whose queue grows unseen by a short window up to 1.08 × that
    (an SLO of e2e 1.5 s): probes at 0.9, 1.02 and 1.1 × its capacity. The search never reports
    a capacity above what its saturated runs show the server serves, within their 99 % upper
    bound (a few runs 1 % apart: about 2 %), and a probe above that says why. (Beneath the
    bound a probe holds: a rate the server may sustain is never withdrawn.)"""
    measure = slowly_growing_queue(12.8, grows_unseen=1.08)
    found = search("known", measure, {"e2e_s": 1.5}, 90, 12.8 * load)
    resolution = 1.03
    assert found.low is not None and (found.max_rate or 0) < 12.8 * resolution
    assert found.low >= 12.8 * 0.9  # and not far below it: nothing sustainable was withdrawn
    assert found.high is not None and found.high / found.low <= 1.10 + 1e-9
    above = [p for p in found.probes if p.rate >= 12.8 * resolution]
    assert above and all(not p.held for p in above)
    unseen = [p for p in above if p.rate < 12.8 * 1.08]  # its window met the SLO
    assert all("its queue grows" in p.why for p in unseen)


def test_a_rate_the_client_cannot_pace_is_no_failure_of_the_server():
    from pytest_llmperf.core.capacity import CapacityPoint, ClientCannotPace, judge_capacity
    from pytest_llmperf.core.judgement import GoldenRef
    from pytest_llmperf.core.verdict import Margins

    measure, _, _ = queue_server(capacity=100.0, limit=0.15, noise=0.03)

    def paced_up_to_30(rate: float, runs: int) -> list[RunMetrics]:
        if rate > 30:
            raise ClientCannotPace(f"this host's client could not pace {rate:g} requests/s", runs)
        return measure(rate, runs)

    found = search("sim", paced_up_to_30, {"e2e_s": 0.15}, 90, 20.0)
    assert found.client_limited and found.low is not None and found.low <= 30
    assert any("could not pace" in p.why and not p.held for p in found.probes)
    point = CapacityPoint(profile="sim", test="t.py::test_capacity", concurrency=0,
                          metric="capacity_req_s", capacity=found)  # fmt: skip
    golden = GoldenRef(mean=80.0)
    judged = judge_capacity(point, golden, Margins(0.15, 0.05), "pytest --perf-update")
    assert judged.outcome.name == "WARN" and "not gated" in judged.message


def test_a_probe_whose_figures_were_not_measured_says_so_and_gets_more_runs():
    slo = {"e2e_s": 0.15}
    missing = judge([run_metrics(0.10), run_metrics(math.nan)], slo, 90)
    assert missing.held is None and missing.why == "e2e_s p90 not measured in 1 of 2 run(s)"


def late(run: RunMetrics, lag_max: float) -> RunMetrics:
    lag = {"p99": lag_max, "max": lag_max}
    return dataclasses.replace(run, open_loop={**(run.open_loop or {}), "lag_s": lag})


def test_a_late_client_decides_nothing_only_where_the_lag_could_have():
    from pytest_llmperf.core.capacity import lag_cannot_explain

    slo = {"e2e_s": 0.15}
    # Held with the lag counted in: the server met the SLO whatever the client did.
    assert lag_cannot_explain([late(run_metrics(0.10), 0.005)] * 2, slo, 90)
    # Broken by 50 ms with sends at most 5 ms late: broken whatever the client did.
    assert lag_cannot_explain([late(run_metrics(0.20), 0.005)] * 2, slo, 90)
    # Broken by 5 ms with sends up to 8 ms late: the lag may have broken it.
    assert not lag_cannot_explain([late(run_metrics(0.155), 0.008)] * 2, slo, 90)


def test_near_the_boundary_a_probe_gets_more_runs():
    measure, calls, truth = queue_server(capacity=100.0, limit=0.15, noise=0.2, seed=4)
    found = search("sim", measure, {"e2e_s": 0.15}, 90, 50.0)
    assert max(p.runs for p in found.probes) > 2
    assert all(p.runs in (2, 4, 6) for p in found.probes)


def test_when_no_rate_holds_the_search_says_so():
    measure, _, _ = queue_server(capacity=0.001, limit=0.15, noise=0.0)
    found = search("sim", measure, {"e2e_s": 0.15}, 90, 1.0)
    assert found.low is None and found.max_rate is None
    # The start and five halvings, down to 1/32 of it: no probe at a rate that would take minutes.
    assert [p.rate for p in found.probes] == [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]
    assert not any(p.held for p in found.probes)


def open_run(
    rate: float, arrivals: list[float], ends: list[float], window=(1.0, 3.0), late: float = 0.0
) -> RunRecords:
    """A run offered ``arrivals`` at ``rate``; every third request sent ``late`` seconds late."""
    records = []
    for i, (a, e) in enumerate(zip(arrivals, ends)):
        sent = a + (late if i % 3 == 0 else 0.0)
        records.append(RequestRecord(i, start=sent, end=e, arrival=a, released=sent,
                                     chunk_times=[sent + 0.001]))  # fmt: skip
    return RunRecords(0, records, [], 0.1, 4.0, window=window,
                      open_loop=OpenLoopRun(rate, 0.0, arrivals))  # fmt: skip


def test_a_backlog_that_grows_through_the_window_is_not_sustainable():
    arrivals = [k * 0.02 for k in range(200)]  # 50 requests/s
    # Served at 25 requests/s, first in first out: the queue grows by 25 a second.
    ends, free = [], 0.0
    for a in arrivals:
        free = max(free, a) + 0.04
        ends.append(free)
    reason = saturation(open_run(50.0, arrivals, ends))
    assert reason is not None and "the backlog grew" in reason and "50 requests/s" in reason
    assert "TTFT rose" in reason


def test_a_stable_queue_is_sustainable():
    rng = random.Random(2)
    arrivals = sorted(rng.uniform(0, 4) for _ in range(200))
    ends = [a + rng.uniform(0.05, 0.15) for a in arrivals]
    assert saturation(open_run(50.0, arrivals, ends)) is None


def test_a_run_stopped_early_says_why():
    run = open_run(50.0, [0.5, 1.5], [0.6, 1.6])
    run.open_loop.saturated = "the backlog grew from 3 to 40 requests"  # type: ignore[union-attr]
    assert saturation(run) == "the backlog grew from 3 to 40 requests"


def fifo_ends(arrivals: list[float], service_s: float) -> list[float]:
    ends, free = [], 0.0
    for a in arrivals:
        free = max(free, a) + service_s
        ends.append(free)
    return ends


@pytest.mark.parametrize(
    ("service_s", "late", "invalid"),
    [
        (0.01, 0.004, True),  # the server kept up: late arrivals may have flattered it
        (0.04, 0.004, False),  # it fell behind a load no heavier than asked: the verdict stands
        (0.04, 0.025, True),  # sends a whole gap late could have built the backlog themselves
    ],
)
def test_a_late_client_invalidates_a_run_unless_the_server_fell_behind_anyway(
    service_s, late, invalid
):
    arrivals = [k * 0.02 for k in range(200)]  # 50 requests/s: a mean gap of 20 ms, limit 2 ms
    run = open_run(50.0, arrivals, fifo_ends(arrivals, service_s), late=late)
    figures, problems = open_loop_figures(run, ttft_send_p50=0.001)
    assert figures["sustainable"] is (service_s < 0.02)
    assert figures["lag_s"]["max"] == pytest.approx(late)
    assert bool(problems) is invalid, problems
    if invalid:
        assert problems[0].startswith(f"client-bound: the client sent {late * 1e3:.2f} ms late")


def test_a_limit_below_what_one_request_takes_stops_the_search_and_says_so():
    """The shipped SLO against 512-token requests: every rate keeps up, and the e2e p90 stays
    near 0.55 s however few arrive (what a request takes, not its wait), so halving cannot meet
    a 150 ms limit: the search stops after one halving and says why, instead of probing rates
    whose windows take minutes. A queue whose e2e still falls with the rate keeps halving."""
    rng = random.Random(3)

    def unloaded(rate: float, runs: int) -> list[RunMetrics]:
        return [
            run_metrics(0.55 * (1 + 0.005 * rate) * math.exp(rng.gauss(0, 0.02)))
            for _ in range(runs)
        ]

    found = search("sim", unloaded, {"e2e_s": 0.15}, 90, 20.0)
    assert [p.rate for p in found.probes] == [20.0, 10.0]
    assert found.low is None and found.unreachable is not None
    assert "no rate meets the 150 ms limit; raise slo.e2e_s" in found.unreachable
    measure, _, truth = queue_server(capacity=20.0, limit=0.15, noise=0.0)
    queueing = search("sim", measure, {"e2e_s": 0.15}, 90, 19.0)
    assert queueing.unreachable is None and len(queueing.probes) > 2
    assert queueing.low is not None and queueing.low <= truth
