"""What the history adds to a point's verdict: the facts of its stored series (the nights'
spread, tonight's values, the drift since the golden's last recording, :meth:`Series.drift`),
judged by :func:`pytest_llmperf.core.judgement.with_history`: the drift gate and the
night-to-night noise. Only change points after the golden's last recording count:
re-recording a golden is how a user accepts a new level.

A new user with no history (fewer than MIN_NIGHTS nights) keeps the golden's gate alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pytest_llmperf.core.judgement import SeriesFacts, with_history
from pytest_llmperf.core.points import Point, unrecordable
from pytest_llmperf.core.verdict import Margins, Verdict
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
    night = Night(run_id, started_at, tuple(v for v in point.values if unrecordable([v]) is None))
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
    """The verdict with the history's word on it (core/judgement.py's rule, on what the series
    says), the lines it adds to the message, and the point's ``history`` summary."""
    history = summary(series, since)
    history["golden_verdict"] = result.outcome.value  # what the golden alone said
    stored = Series(
        series.profile, series.key, series.metric, series.lower_is_better, series.nights[:-1]
    )
    facts = SeriesFacts(
        series.nights[-1].values, stored.spread(), history["drift"], series.lower_is_better
    )
    result, lines, gated = with_history(result, facts, margins, golden_mean)
    if gated is not None:
        history["drift"]["gated"] = gated  # the summary and the table say so
    return result, lines, history
