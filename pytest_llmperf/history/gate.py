"""What the history adds to a point's verdict: the drift gate and the night-to-night noise.

- **Drift gate.** When the latest nights form a confirmed change point against the nights
  before them (:meth:`Series.drift`), the point WARNs beyond the warn margin and FAILs beyond
  the fail margin, even when this night passed its golden: a −8 % step or a −2 %-a-night drift
  never crosses a 15 % fail margin in one night, and the golden alone would pass it every night.
  Only change points after the golden's last recording count: re-recording a golden is how a
  user accepts a new level.
- **Night-to-night noise.** A FAIL against the golden stands only when it is also significant
  against the series' own night-to-night spread (:func:`session_p_value`): a whole session
  shifted by a busy machine, as far as nights of the series have been shifted before, is a WARN.

A new user with no history (fewer than MIN_NIGHTS nights) keeps the golden's gate alone.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import Point
from pytest_llmperf.core.verdict import ALPHA, Margins, Verdict
from pytest_llmperf.history.series import Night, Series, build

if TYPE_CHECKING:
    from pytest_llmperf.history.store import HistoryStore


def stored_series(
    store: HistoryStore, point: Point, run_id: str, hardware_key: str | None
) -> Series | None:
    """The point's stored nights on this hardware, this run's excluded."""
    rows = [
        r
        for r in store.series_rows(point.profile, point.key)
        if r["run_id"] != run_id and (hardware_key is None or r["hardware_key"] == hardware_key)
    ]
    found = build(rows)
    return found[0] if found else None


def with_tonight(stored: Series | None, point: Point, run_id: str, started_at: float) -> Series:
    """The stored series with this night's values appended."""
    night = Night(run_id, started_at, tuple(v for v in point.values if v > 0))
    nights = (*(stored.nights if stored else ()), night) if night.values else ()
    return Series(point.profile, point.key, point.metric, point.lower_is_better, tuple(nights))


def summary(series: Series, since: float | None) -> dict[str, Any]:
    """The point's ``history`` in the results JSON."""
    spread = series.spread()
    return {
        "runs": len(series.nights),
        "spread": spread[0] if spread else None,
        "change_points": [series.report(cp) for cp in series.change_points()],
        "drift": series.drift(since),
    }


def session_p_value(
    new: list[float], golden_mean: float, spread: float, nights: int, lower_is_better: bool
) -> float:
    """One-sided p that tonight's mean is worse than the golden's by more than the series'
    nights differ from each other: both are one session, so their difference has the
    variance of two nights (2·spread²), on ``nights − 1`` degrees of freedom."""
    from pytest_llmperf.core.student import t_cdf

    sign = -1.0 if lower_is_better else 1.0
    tonight = sign * sum(math.log(v) for v in new) / len(new)
    diff = tonight - sign * math.log(golden_mean)
    se = math.sqrt(2) * spread
    if not se > 0:
        return 0.0 if diff < 0 else 1.0
    return t_cdf(diff / se, nights - 1)


def golden_recorded_at(history: Any) -> float | None:
    """When the golden was last recorded (its history's last ``when``), as epoch seconds."""
    if not history:
        return None
    when = getattr(history[-1], "when", "") or ""
    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def judge(
    series: Series, result: Verdict, margins: Margins, golden_mean: float, since: float | None
) -> tuple[Verdict, list[str], dict[str, Any]]:
    """The verdict with the history's word on it, the lines it adds to the message, and the
    point's ``history`` summary."""
    lines = []
    history = summary(series, since)
    history["golden_verdict"] = result.outcome.value  # what the golden alone said
    stored = Series(
        series.profile, series.key, series.metric, series.lower_is_better, series.nights[:-1]
    )
    spread = stored.spread()
    if result.outcome is Outcome.FAIL and spread is not None:
        tonight = series.nights[-1]
        p = session_p_value(
            list(tonight.values), golden_mean, spread[0], spread[1], series.lower_is_better
        )
        if p >= ALPHA:
            result = replace(result, outcome=Outcome.WARN)
            lines.append(
                f"not failed: the series' nights differ by {spread[0] * 100:.1f} % (sd over "
                f"{spread[1]} nights), and against that tonight's change is not significant "
                f"(p = {p:.2g}); a FAIL needs a move beyond the night-to-night noise"
            )
    drift = history["drift"]
    if drift and drift["worse"] and abs(drift["change"]) >= margins.warn:
        fail = abs(drift["change"]) >= margins.fail
        drift["gated"] = "FAIL" if fail else "WARN"  # the summary and the table say so
        lines.append(drift_line(drift, "fail" if fail else "warn", margins))
        if result.outcome.passed:
            # A latency's margins are its rise, a throughput's its fall: |change| either way.
            outcome = Outcome.FAIL if fail else Outcome.WARN
            if outcome is Outcome.FAIL or result.outcome is not Outcome.WARN:
                result = replace(result, outcome=outcome)
    return result, lines, history


def drift_line(drift: dict[str, Any], which: str, margins: Margins) -> str:
    low, high = drift["interval"]
    commit = f", commit {drift['first_bad_commit'][:10]}" if drift.get("first_bad_commit") else ""
    changed = "; ".join(drift["what_changed"]) or "no fingerprint key, version or commit"
    margin = margins.fail if which == "fail" else margins.warn
    return (
        f"drift: the series moved {drift['change'] * 100:+.1f} % ({low * 100:+.1f} to "
        f"{high * 100:+.1f} %, 95 %) since run {drift['first_bad_run']} "
        f"({drift['first_bad_date']} UTC{commit}), beyond the {margin * 100:g} % {which} margin; "
        f"last good run {drift['last_good_run']}; what changed then: {changed}"
    )
