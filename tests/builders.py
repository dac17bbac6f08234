"""Hand-built runs, points and results for unit tests of the gate, the session and the renderers."""

from __future__ import annotations

from pytest_llmperf.core.judgement import GoldenRef
from pytest_llmperf.core.metrics import RunMetrics
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import MeasuredPoint, SpeedupPoint
from pytest_llmperf.core.results import ProfileFacts, Results
from pytest_llmperf.core.speculative import analyse
from pytest_llmperf.golden.model import GoldenFile

TEST = "perf_suites/test_throughput.py::test_output_throughput"


def dist(p50: float, p99: float | None = None, mean: float | None = None) -> dict[str, float]:
    return {"mean": p50 if mean is None else mean, "p50": p50, "p90": p99 or p50, "p99": p99 or p50}


def run(
    tok_s: float,
    *,
    concurrency: int = 1,
    tokens: int = 640,
    accept: float | None = None,
    ttft: float = 0.004,
    itl: float = 0.001,
    problems: tuple[str, ...] = (),
) -> RunMetrics:
    duration = tokens / tok_s
    return RunMetrics(
        concurrency=concurrency,
        requests=10,
        failed_requests=0,
        output_tokens=tokens,
        duration_s=duration,
        output_tok_s=tok_s,
        request_tok_s=dist(tok_s / concurrency),
        ttft_s=dist(ttft, ttft * 2),
        itl_s=dist(itl),
        tpot_s=dist(itl),
        e2e_s=dist(0.1),
        accept_length=accept,
        achieved_concurrency=float(concurrency),
        in_flight_while_sending=float(concurrency),
        client_gap_s=0.0,
        loop_lag_s={**dist(0.0), "max": 0.0},
        client_cpu_fraction=0.1,
        problems=problems,
    )


def measured(
    profile: str,
    concurrency: int,
    values: list[float],
    *,
    outcome: Outcome | None = None,
    golden: float | None = None,
    test: str = TEST,
    accept: float | None = None,
    problems: tuple[str, ...] = (),
    message: str | None = None,
) -> MeasuredPoint:
    point = MeasuredPoint(
        profile=profile,
        test=f"{test}[{profile}-C{concurrency}]",
        concurrency=concurrency,
        metric="output_tok_s",
        launch_id="launch-1",
        output_len=64,
        api="sglang",
        workload={"api": "sglang", "output_len": 64},
        runs=[run(v, concurrency=concurrency, accept=accept, problems=problems) for v in values],
    )
    point.outcome = outcome
    if golden is not None:
        point.golden = GoldenRef(path=f"baselines/{profile}/sim.json", mean=golden, n=10)
        point.ratio = point.summary.mean / golden
        point.p_value = 0.5
    point.message = message
    return point


def speedup(
    profile: str,
    base: str,
    concurrency: int,
    samples: list[float],
    *,
    outcome: Outcome | None = None,
    test: str = "perf_suites/test_throughput.py::test_speculative_speedup",
) -> SpeedupPoint:
    return SpeedupPoint(
        profile=profile,
        base_profile=base,
        test=f"{test}[{profile}-vs-{base}-C{concurrency}]",
        concurrency=concurrency,
        metric="speedup",
        launch_id="a/b",
        samples=tuple(samples),
        of_test=f"{TEST}[C={concurrency}]",
        outcome=outcome,
    )


def results(
    points: list[MeasuredPoint], speedups: list[SpeedupPoint] | None = None, **kwargs: object
) -> Results:
    """Results of ``points``, with the speculative analysis of sim-spec against sim-base when both are there."""
    spec = {p.concurrency: list(p.values) for p in points if p.profile == "sim-spec"}
    base = {p.concurrency: list(p.values) for p in points if p.profile == "sim-base"}
    analyses = (
        [analyse("sim-spec", "sim-base", TEST, spec, base, sglang_version="0.5.23")]
        if spec and base
        else []
    )
    profiles = {p.profile: ProfileFacts(0.15, 16, True) for p in points}
    fingerprints = {
        name: {"hard": {"hardware": {"key": "sim"}}, "soft": {}, "comparability_hash": "h"}
        for name in profiles
    }
    # Type: ignore[arg-type]
    return Results(
        points=[*points, *(speedups or [])],
        analyses=analyses,
        profiles=profiles,
        fingerprints=fingerprints,
        run_dir="/tmp/run",
        **kwargs,
    )


def golden_file(
    points: dict[str, list[float]],
    *,
    hard: dict | None = None,
    soft: dict | None = None,
    workload: dict | None = None,
) -> GoldenFile:
    """A golden file with these points' recorded values (hand-built, as the store reads one)."""
    return GoldenFile.from_json(
        {
            "fingerprint": {"hard": hard or {"hardware": {"key": "sim"}}, "soft": soft or {}},
            "points": {
                key: {
                    "runs": [{"value": v} for v in values],
                    "summary": {"mean": sum(values) / len(values), "n": len(values)},
                    "workload": workload or {},
                }
                for key, values in points.items()
            },
        }
    )
