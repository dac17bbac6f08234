"""The golden side of a check, shared by every kind of point: pure rules that read a point and
its golden file and return what they found or a :class:`~pytest_llmperf.core.judgement.Judgement`.

``compare`` finds a point's entry in its golden file (MISSING, INCOMPARABLE otherwise) and notes
what changed in the soft fingerprint; ``pending`` prepares a point for its golden file under
``--perf-update``, refusing to replace a golden with a worse one unless the user says why.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.core.format import format_value, signed_percent
from pytest_llmperf.core.judgement import GoldenRef, Judgement, invalid
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import Point, unrecordable
from pytest_llmperf.core.ungated import Host, why_not_gated
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.golden.model import GoldenFile, GoldenPoint
from pytest_llmperf.golden.store import PendingPoint


def update_command(nodeid: str, profiles: Sequence[str]) -> str:
    """The command that records the goldens of the test ``nodeid`` for ``profiles``."""
    path = NodeId(nodeid).path
    return (
        f"pytest {shlex.quote(path)} --llm-profile {shlex.quote(','.join(profiles))} --perf-update"
    )


@dataclass(frozen=True)
class Found:
    """A point's entry in its golden file, the reference a judgement keeps, and the soft
    fingerprint keys that changed since it was recorded (never blocking)."""

    entry: GoldenPoint
    ref: GoldenRef
    soft_changes: list[str]


def compare(
    point: Point,
    golden: GoldenFile | None,
    path: Path,
    current: Fingerprint,
    update_command: str,
) -> Found | Judgement:
    """``point``'s entry in its golden file (``golden``, read from ``path``), or why there is
    none to judge against and what to do."""
    entry = golden.point(point.key) if golden is not None else None
    if golden is None or entry is None:
        message = f"{point.label}: no golden baseline in {path}"
        moved = _moved_from(point.key, golden)
        hint = (
            f"\n  Its test file moved? The golden has {moved[1]}; carry them: pytest "
            f"--perf-rename {moved[0]}={NodeId(point.key).path}"
            if moved
            else ""
        )
        failure = f"{message} for {point.key}.{hint}\n  Record it: {update_command}"
        return Judgement(Outcome.MISSING, message, failure=failure)
    changes = fingerprint.hard_changes(golden.hard, current)
    changes += [
        f"workload.{line}" for line in fingerprint.diff(dict(entry.workload), point.workload)
    ]
    if changes:
        message = f"{point.label}: INCOMPARABLE with {path}"
        failure = (
            f"{message}: it was recorded under a different configuration:\n    "
            + "\n    ".join(changes)
            + f"\n  If the change is intended, re-record (and review the diff): {update_command}"
        )
        return Judgement(Outcome.INCOMPARABLE, message, failure=failure)
    ref = GoldenRef(
        path=str(path),
        mean=entry.mean,
        n=entry.n,
        sustainable=entry.sustainable if point.rate is not None else None,
        low=entry.extra.get("low"),
        high=entry.extra.get("high"),
    )
    return Found(entry, ref, fingerprint.soft_changes(golden.fingerprint, current))


def _moved_from(key: str, golden: GoldenFile | None) -> tuple[str, str] | None:
    """(old path, old key) when the golden holds this point under another test file's path."""
    if golden is None or "::" not in key:
        return None
    tail = key.split("::", 1)[1]
    for other in golden.points:
        if "::" in other and other.split("::", 1)[1] == tail and other != key:
            return other.split("::", 1)[0], other
    return None


def pending(
    point: Point,
    old: GoldenPoint | None,
    *,
    pool: bool,
    accept_worse: str | None,
    warn_margin: float,
) -> PendingPoint | Judgement:
    """``point`` as it will be written to its golden file at the end of the run.

    Replacing a golden (not pooling into it) with a mean worse than the warn margin is refused
    (a FAIL) unless ``accept_worse`` says why, for a figure the gate holds the server to: one it
    reports and does not gate (a p99 of too few values a run, a simulated engine its host
    slowed: core/ungated.py) is no regression to refuse, and a recording is not failed on it.
    A point with a value no golden can hold (NaN, infinite, 0) is not recorded (INVALID), and
    the run's other points still are.
    """
    why_not = unrecordable(point.values)
    if why_not is not None:
        return invalid(point.label, "not recorded into its golden", [why_not])
    if old is not None and not pool:
        ratio = point.summary.mean / old.mean
        worse = ratio > 1 + warn_margin if point.lower_is_better else ratio < 1 - warn_margin
        gated = why_not_gated(point, Host()) is None
        if worse and gated and not accept_worse:
            message = (
                f"{point.label}: refusing to replace the golden "
                f"{format_value(old.mean, point.unit, bare=True)} with "
                f"{format_value(point.summary.mean, point.unit, bare=True)} ({signed_percent(ratio - 1)} %, "
                f"worse than the {warn_margin * 100:g} % warn margin)"
            )
            failure = (
                f"{message}.\n  If this is expected, say why: re-run with "
                "--perf-accept-worse='<reason, e.g. driver 590 regression, tracked in #123>'; "
                "the reason is stored in the golden's history."
            )
            return Judgement(
                Outcome.FAIL,
                message,
                ratio,
                golden=GoldenRef(mean=old.mean, n=old.n),
                failure=failure,
            )
    why = accept_worse or ("--perf-update --perf-pool" if pool else "--perf-update")
    return PendingPoint(
        point.key,
        point.test,
        point.concurrency,
        point.metric,
        point.pending_runs(),
        why,
        pool,
        point.workload,
        sustainable=getattr(point, "sustainable", True),
        extra=point.extra_golden_fields(),
    )
