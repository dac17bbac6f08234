"""What the history adds to a point's verdict: its stored nights' spread, which is the
verdict's launch spread (:func:`night_spread`: the nights are the launches), and the drift
since the golden's last recording (:meth:`Series.drift`), judged by
:func:`pytest_llmperf.core.judgement.with_drift`. Only change points after the golden's last
recording count: re-recording a golden is how a user accepts a new level.

A new user with no history (fewer than MIN_NIGHTS nights) keeps the golden's gate alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pytest_llmperf.core.judgement import with_drift
from pytest_llmperf.core.points import Point, unrecordable
from pytest_llmperf.core.verdict import LaunchSpread, Margins, Verdict
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


def night_spread(series: Series) -> LaunchSpread | None:
    """The stored nights' spread (tonight's left out) as the verdict's launch spread: with a
    history the nights are the launches. Since the last change point, at most SPREAD_NIGHTS,
    from MIN_NIGHTS on (None: fewer)."""
    stored = Series(
        series.profile, series.key, series.metric, series.lower_is_better, series.nights[:-1]
    )
    found = stored.spread()
    if found is None:
        return None
    sd, nights = found
    return LaunchSpread(sd * sd, nights - 1, f"the history's last {nights} nights")


def reference_nights(series: Series, since: float | None) -> list[Night]:
    """The stored nights that join the golden's launches as the point's reference: each a
    launch of the accepted server, since the golden's last recording and the series' last
    change point, none that FAILed and none out of line (a night further than OUT_OF_LINE_SDS
    robust sds from the median night does not set the level). Fewer than MIN_NIGHTS: none."""
    from pytest_llmperf.core.verdict import in_line
    from pytest_llmperf.history.series import MIN_NIGHTS

    stored = Series(
        series.profile, series.key, series.metric, series.lower_is_better, series.nights[:-1]
    )
    nights = [
        n
        for n in stored.since_last_change()
        if (since is None or n.started_at >= since) and n.verdict != "FAIL"
    ]
    if len(nights) < MIN_NIGHTS:
        return []
    logs = [n.log_mean(series.lower_is_better) for n in nights]
    kept = [n for n, ok in zip(nights, in_line(logs)) if ok]
    return kept if len(kept) >= MIN_NIGHTS else []


def judge(
    series: Series, result: Verdict, margins: Margins, since: float | None
) -> tuple[Verdict, list[str], dict[str, Any]]:
    """The verdict with the drift gate's word on it (core/judgement.py's rule, on the series'
    drift since the golden's last recording), the lines it adds to the message, and the point's
    ``history`` summary."""
    history = summary(series, since)
    history["golden_verdict"] = result.outcome.value  # what the golden alone said
    result, lines, gated = with_drift(result, history["drift"], margins)
    if gated is not None:
        history["drift"]["gated"] = gated  # the summary and the table say so
    return result, lines, history
