"""The golden side of a check, shared by measured points and speculative speedups.

``compare`` finds a point's entry in its golden file or fails the test (MISSING,
INCOMPARABLE) and notes what changed in the soft fingerprint; ``conclude`` turns a verdict
into the point's outcome and, if it does not pass, a test failure that names those changes;
``pending`` prepares a point for its golden file under ``--perf-update``, refusing to replace
a golden with a worse one unless the user says why.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_llmperf.core.format import format_value, signed_percent
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import Point
from pytest_llmperf.core.verdict import Margins, Verdict, describe
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.golden.model import GoldenFile, GoldenPoint
from pytest_llmperf.golden.store import PendingPoint, PendingRun


def update_command(nodeid: str, profiles: Sequence[str]) -> str:
    """The command that records the goldens of the test ``nodeid`` for ``profiles``."""
    path = NodeId(nodeid).path
    return (
        f"pytest {shlex.quote(path)} --llm-profile {shlex.quote(','.join(profiles))} --perf-update"
    )


def compare(
    point: Point,
    golden: GoldenFile | None,
    path: Path,
    current: Fingerprint,
    update_command: str,
) -> GoldenPoint:
    """``point``'s entry in its golden file (``golden``, read from ``path``), or fail the test
    saying what to do."""
    __tracebackhide__ = True
    entry = golden.point(point.key) if golden is not None else None
    if golden is None or entry is None:
        point.outcome = Outcome.MISSING
        point.message = f"{point.label}: no golden baseline in {path}"
        moved = _moved_from(point.key, golden)
        hint = (
            f"\n  Its test file moved? The golden has {moved[1]}; carry them: pytest "
            f"--perf-rename {moved[0]}={NodeId(point.key).path}"
            if moved
            else ""
        )
        pytest.fail(
            f"{point.message} for {point.key}.{hint}\n  Record it: {update_command}", pytrace=False
        )
    changes = fingerprint.hard_changes(golden.hard, current)
    changes += [
        f"workload.{line}" for line in fingerprint.diff(dict(entry.workload), point.workload)
    ]
    if changes:
        point.outcome = Outcome.INCOMPARABLE
        point.message = f"{point.label}: INCOMPARABLE with {path}"
        pytest.fail(
            f"{point.message}: it was recorded under a different configuration:\n    "
            + "\n    ".join(changes)
            + f"\n  If the change is intended, re-record (and review the diff): {update_command}",
            pytrace=False,
        )
    point.environment_changes = fingerprint.soft_changes(golden.fingerprint, current)
    return entry


def _moved_from(key: str, golden: GoldenFile | None) -> tuple[str, str] | None:
    """(old path, old key) when the golden holds this point under another test file's path."""
    if golden is None or "::" not in key:
        return None
    tail = key.split("::", 1)[1]
    for other in golden.points:
        if "::" in other and other.split("::", 1)[1] == tail and other != key:
            return other.split("::", 1)[0], other
    return None


def conclude(
    point: Point,
    verdict: Verdict,
    entry: GoldenPoint,
    path: Path,
    margins: Margins,
    extra: Sequence[str] = (),
) -> None:
    """Store the verdict on the point; fail the test unless it passes. ``extra``: lines the
    history adds (the drift gate, the night-to-night noise)."""
    __tracebackhide__ = True
    gold_mean = entry.mean
    point.outcome = verdict.outcome
    point.golden = {
        "mean": gold_mean,
        "n": entry.n,
        "path": str(path),
        "fail_margin": margins.fail,
        "warn_margin": margins.warn,
    }
    point.ratio = verdict.ratio
    point.p_value = verdict.p
    point.message = describe(
        point.label, point.summary.mean, gold_mean, verdict, margins.fail, margins.warn,
        unit=point.unit, why=point.ungated,
    ) + "".join(f"\n  {line}" for line in extra)  # fmt: skip
    if not verdict.passed:
        changes = "".join(f"\n    {line}" for line in point.environment_changes)
        pytest.fail(
            point.message
            + (f"\n  Changed since the golden (not blocking):{changes}" if changes else ""),
            pytrace=False,
        )


def pending(
    point: Point,
    runs: list[PendingRun],
    old: GoldenPoint | None,
    *,
    pool: bool,
    accept_worse: str | None,
    warn_margin: float,
) -> PendingPoint:
    """``point`` as it will be written to its golden file at the end of the run.

    Replacing a golden (not pooling into it) with a mean worse than the warn margin fails the
    test unless ``accept_worse`` says why.
    """
    __tracebackhide__ = True
    if old is not None and not pool:
        ratio = point.summary.mean / old.mean
        worse = ratio > 1 + warn_margin if point.lower_is_better else ratio < 1 - warn_margin
        if worse and not accept_worse:
            point.outcome, point.ratio = Outcome.FAIL, ratio
            point.golden = {"mean": old.mean, "n": old.n}
            point.message = (
                f"{point.label}: refusing to replace the golden "
                f"{format_value(old.mean, point.unit, bare=True)} with "
                f"{format_value(point.summary.mean, point.unit, bare=True)} ({signed_percent(ratio - 1)} %, "
                f"worse than the {warn_margin * 100:g} % warn margin)"
            )
            pytest.fail(
                f"{point.message}.\n  If this is expected, say why: re-run with "
                "--perf-accept-worse='<reason, e.g. driver 590 regression, tracked in #123>'; "
                "the reason is stored in the golden's history.",
                pytrace=False,
            )
    why = accept_worse or ("--perf-update --perf-pool" if pool else "--perf-update")
    return PendingPoint(
        point.key, point.test, point.concurrency, point.metric, runs, why, pool, point.workload,
        sustainable=getattr(point, "sustainable", True),
        extra=point.extra_golden_fields(),
    )  # fmt: skip


def recorded(point: Point, path: Path) -> None:
    """Mark ``point`` as queued for ``path``."""
    point.outcome = Outcome.RECORDED
    point.golden = {"path": str(path)}
    point.message = f"{point.label}: recorded {format_value(point.summary.mean, point.unit, bare=True)} into {path}"
