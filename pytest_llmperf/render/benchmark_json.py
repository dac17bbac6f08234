"""``--perf-benchmark-json PATH``: the runs in pytest-benchmark's JSON format.

pytest-benchmark's tools (``pytest-benchmark compare``, ``--benchmark-compare``, its CSV and
histogram exports) read timings in seconds per round, lower is better. One measured point
becomes one benchmark and each of its runs one round whose "time" is **seconds per output
token** (run duration ÷ completion tokens = 1 / output tok/s). Field by field:

- ``name``: ``<test>[<profile>-C<c>]``; ``fullname``: the test's node id with that id;
  ``group``: ``<profile>``, so compare tables group profiles; ``param``/``params``: the
  profile and concurrency.
- ``stats``: pytest-benchmark's own statistics over the rounds (min, max, mean, stddev,
  median, iqr, q1, q3, outliers, ld15iqr, hd15iqr, total, ``data``), in seconds per token;
  ``ops`` = 1 / mean is therefore a throughput in tok/s (the harmonic mean of the runs'
  tok/s); ``rounds`` = runs; ``iterations`` = 1.
- ``extra_info``: the plugin's own figures for the point: ``output_tok_s`` (per run and mean),
  ``verdict``, ``golden_mean``, ``ratio``, ``p_value``, ``concurrency``, ``requests_per_run``,
  ``output_len``, ``accept_length``, ``ttft_p50_s``, ``itl_p50_s``.
- ``options``: what the runs were (``runs``, ``min_requests``, ``warmup``, ``timer`` =
  ``"seconds per output token"``), so nobody mistakes the rounds for wall-clock calls.
- INVALID points (no valid run) are left out: their figures measure the failure, not the server.
- ``machine_info`` and ``commit_info``: from pytest-benchmark's own helpers, plus
  ``machine_info["llmperf"]``: the fingerprint's hardware key per profile.

Needs ``pytest-benchmark`` (the ``report`` extra); imported lazily.
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.core.results import Results
from pytest_llmperf.core.stats import finite_or_none


def render(results: Results) -> dict[str, Any]:
    from pytest_benchmark import __version__ as benchmark_version
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
    from pytest_benchmark.stats import Stats
    from pytest_benchmark.utils import get_commit_info

    benchmarks = []
    # A figure checked besides throughput (ttft_p99_s) shares its point's runs: it goes into
    # that point's extra_info, not into a benchmark of its own.
    gated: dict[tuple[str, str, int], dict[str, Any]] = {}
    for point in results.measured:
        if point.gated_from is not None:
            gated.setdefault((point.profile, point.test, point.concurrency), {})[point.metric] = {
                "values": finite_or_none(list(point.values)),
                "verdict": point.verdict_json,
                "golden_mean": point.golden_mean,
                "ratio": point.ratio,
            }
    for point in results.measured:
        if point.gated_from is not None:
            continue
        if point.problems or not point.runs or not all(_timed(r) for r in point.runs):
            continue  # INVALID, or a run without a time per token: not a benchmark either
        stats = Stats()
        for run in point.runs:
            stats.update(run.duration_s / run.output_tokens)
        profile = point.profile
        ident = f"{profile}-C{point.concurrency}"
        data = stats.as_dict()
        data.update(data=list(stats.data), iterations=1)
        facts = results.profiles.get(profile)
        benchmarks.append(
            {
                "group": profile,
                "name": f"{point.node.function}[{ident}]",
                "fullname": f"{point.node.without_params}[{ident}]",
                "params": {"profile": profile, "concurrency": point.concurrency},
                "param": ident,
                "extra_info": {
                    "metric": point.metric,
                    "output_tok_s": [r.output_tok_s for r in point.runs],
                    "output_tok_s_mean": statistics.fmean(r.output_tok_s for r in point.runs),
                    "verdict": point.verdict_json,
                    "golden_mean": point.golden_mean,
                    "ratio": point.ratio,
                    "p_value": point.p_value,
                    "concurrency": point.concurrency,
                    "requests_per_run": point.workload.get("requests_per_run"),
                    "output_len": point.output_len,
                    "accept_length": finite_or_none(point.run_average(lambda r: r.accept_length)),
                    "ttft_p50_s": finite_or_none(point.run_average(lambda r: r.ttft_s["p50"])),
                    "itl_p50_s": finite_or_none(point.run_average(lambda r: r.itl_s["p50"])),
                    "gated": gated.get((point.profile, point.test, point.concurrency), {}),
                },
                "options": {
                    "timer": "seconds per output token",
                    "runs": len(point.runs),
                    "min_requests": facts.min_requests if facts else None,
                    "warmup": facts.warmup if facts else None,
                    "disable_gc": False,
                    "min_rounds": len(point.runs),
                    "max_time": None,
                    "min_time": None,
                },
                "stats": data,
            }
        )
    machine = pytest_benchmark_generate_machine_info()
    machine["llmperf"] = {name: results.hardware_key(name) for name in results.fingerprints}
    return {
        "machine_info": machine,
        "commit_info": get_commit_info(),
        "benchmarks": benchmarks,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": benchmark_version,
    }


def _timed(run: Any) -> bool:
    """Whether a run has a time per token: a finite duration over its tokens."""
    return run.output_tokens > 0 and math.isfinite(run.duration_s) and run.duration_s > 0
