"""``--perf-json PATH``: every measured point, its verdict and the speculative analysis.

The layout is a documented contract (README, "Results JSON"): ``schema``, ``created``,
``run_dir``, ``fingerprint`` (hard and soft keys per profile), ``profiles`` (how each server ran),
``points`` and ``speculative``. Figures that do not exist are ``null``, never ``NaN``.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.core.results import Results
from pytest_llmperf.core.speculative import Analysis
from pytest_llmperf.core.stats import finite_or_none

SCHEMA_VERSION = 1


def render(results: Results, *, created: str) -> dict[str, Any]:
    fps = results.fingerprints
    return {
        "schema": SCHEMA_VERSION,
        "created": created,
        "run_dir": results.run_dir,
        "fingerprint": {
            "hard": {name: fp["hard"] for name, fp in fps.items()},
            "soft": {name: fp["soft"] for name, fp in fps.items()},
            "comparability_hash": {name: fp["comparability_hash"] for name, fp in fps.items()},
        },
        "profiles": finite_or_none(results.servers),
        "points": [p.to_json() for p in results.points],
        "speculative": [_speculative(results, a) for a in results.analyses],
    }


def _speculative(results: Results, analysis: Analysis) -> dict[str, Any]:
    gate = {str(p.concurrency): p.to_json() for p in results.speedups_of(analysis)}
    return finite_or_none({**analysis.to_json(), "gate": gate})
