"""The golden side of a check, shared by measured points and speculative speedups.

``lookup`` finds a point's golden entry or fails the test (unusable file, MISSING,
INCOMPARABLE) and notes what changed in the soft fingerprint; ``conclude`` turns a verdict
into the point's outcome and, if it does not pass, a test failure that names those changes;
``record`` queues the point for its golden file under ``--perf-update``, refusing to replace a
golden with a worse one unless the user says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf import baseline, fingerprint
from pytest_llmperf.baseline import GoldenError, PendingPoint, PendingRun
from pytest_llmperf.session import LLMPerfSession, PointResult
from pytest_llmperf.verdict import Verdict, describe, format_value, signed_percent


def lookup(session: LLMPerfSession, point: PointResult, update_command: str) -> tuple[Path, dict[str, Any]]:
    """``point``'s golden entry in its profile's golden file, or fail the test saying what to do."""
    __tracebackhide__ = True
    try:
        golden = session.golden(point.profile)
    except GoldenError as exc:
        point.outcome = "INVALID"
        pytest.fail(str(exc), pytrace=False)
    path = session.golden_file(point.profile)
    key = baseline.point_key(point.test, point.concurrency)
    entry = (golden or {}).get("points", {}).get(key)
    if entry is None:
        point.outcome = "MISSING"
        point.message = f"{point.label}: no golden baseline in {path}"
        pytest.fail(f"{point.message} for {key}.\n  Record it: {update_command}", pytrace=False)
    changes = fingerprint.diff(golden["fingerprint"]["hard"], session.fingerprints[point.profile].hard)
    changes += [f"workload.{line}" for line in fingerprint.diff(entry.get("workload", {}), point.workload)]
    if changes:
        point.outcome = "INCOMPARABLE"
        point.message = f"{point.label}: INCOMPARABLE with {path}"
        pytest.fail(
            f"{point.message}: it was recorded under a different configuration:\n    " + "\n    ".join(changes)
            + f"\n  If the change is intended, re-record (and review the diff): {update_command}",
            pytrace=False,
        )
    point.environment_changes = fingerprint.diff(golden["fingerprint"].get("soft", {}),
                                                 session.fingerprints[point.profile].soft)
    return path, entry


def conclude(point: PointResult, verdict: Verdict, entry: dict[str, Any], path: Path, fail_margin: float) -> None:
    """Store the verdict on the point; fail the test unless it passes."""
    __tracebackhide__ = True
    gold_mean = entry["summary"]["mean"]
    point.outcome = verdict.name
    point.golden = {"mean": gold_mean, "n": len(entry["runs"]), "path": str(path)}
    point.ratio = verdict.ratio
    point.p_value = verdict.p_drop if verdict.ratio < 1 else verdict.p_gain
    point.message = describe(point.label, point.summary.mean, gold_mean, verdict, fail_margin, unit=point.unit)
    if not verdict.passed:
        changes = "".join(f"\n    {line}" for line in point.environment_changes)
        pytest.fail(point.message + (f"\n  Changed since the golden (not blocking):{changes}" if changes else ""),
                    pytrace=False)


def record(session: LLMPerfSession, point: PointResult, runs: list[PendingRun], warn_margin: float) -> None:
    """Queue ``point`` for its golden file (written at the end of the run)."""
    __tracebackhide__ = True
    settings = session.settings
    key = baseline.point_key(point.test, point.concurrency)
    try:
        old = ((session.golden(point.profile) or {}).get("points") or {}).get(key)
    except GoldenError as exc:
        point.outcome = "INVALID"
        pytest.fail(str(exc), pytrace=False)
    if old is not None and not settings.pool:
        ratio = point.summary.mean / old["summary"]["mean"]
        if ratio < 1 - warn_margin and not settings.accept_worse:
            point.outcome, point.ratio = "FAIL", ratio
            point.golden = {"mean": old["summary"]["mean"], "n": old["summary"]["n"]}
            point.message = (f"{point.label}: refusing to replace the golden "
                             f"{format_value(old['summary']['mean'], point.unit, bare=True)} with "
                             f"{format_value(point.summary.mean, point.unit, bare=True)} ({signed_percent(ratio - 1)} %, worse than the "
                             f"{warn_margin * 100:g} % warn margin)")
            pytest.fail(f"{point.message}.\n  If this is expected, say why: re-run with "
                        "--perf-accept-worse='<reason, e.g. driver 590 regression, tracked in #123>'; "
                        "the reason is stored in the golden's history.", pytrace=False)
    why = settings.accept_worse or ("--perf-update --perf-pool" if settings.pool else "--perf-update")
    path = session.queue_golden(PendingPoint(key, point.test, point.concurrency, point.metric, runs, why,
                                             settings.pool, point.workload), point.profile)
    point.outcome = "RECORDED"
    point.golden = {"path": str(path)}
    point.message = f"{point.label}: recorded {format_value(point.summary.mean, point.unit, bare=True)} into {path}"
