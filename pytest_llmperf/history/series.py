"""A point's series of nights, its change points, and what changed at each.

One :class:`Night` per stored run of a (profile, golden key): the run's values of the point's
own figure, its commit, engine version and fingerprint. The change points are found on the
nights' log means, latencies negated (so that a negative change is always worse, as the
verdict reads it), and reported as a relative change of the figure itself: −0.08 is 8 % less
throughput, +0.08 8 % more latency.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from pytest_llmperf.history.changepoints import ChangePoint, detect, drift_onset

#: Nights a series needs before it says anything (a change point, or its night-to-night spread).
MIN_NIGHTS = 5
#: Change points smaller than this (on the log scale) are not reported: a 1 % move is below what
#: anyone would act on, however many nights confirm it.
MIN_MAGNITUDE = 0.01
#: The night-to-night spread is read from at most this many of the latest nights.
SPREAD_NIGHTS = 30
#: A slow drift is looked for in at most this many of the latest nights (a straight line fits
#: a few weeks of drift, not a year of nights).
DRIFT_NIGHTS = 60


@dataclass(frozen=True)
class Night:
    run_id: str
    started_at: float
    values: tuple[float, ...]
    complete: bool = True
    commit: str | None = None
    engine_version: str | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    hardware_key: str | None = None
    verdict: str | None = None
    golden_mean: float | None = None
    ci_url: str | None = None
    #: The stored point's row (the store's id): its detail (series, profile) is read by it.
    point_id: int | None = field(default=None, compare=False)

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    def log_mean(self, lower_is_better: bool) -> float:
        sign = -1.0 if lower_is_better else 1.0
        return sign * sum(math.log(v) for v in self.values) / len(self.values)

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.started_at, timezone.utc).strftime("%Y-%m-%d %H:%M")

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Night:
        golden = row.get("golden") or {}
        return cls(
            run_id=row["run_id"],
            started_at=row["started_at"],
            values=tuple(v for v in row["values"] if v is not None and v > 0),
            complete=bool(row.get("complete")),
            commit=row.get("git_commit"),
            engine_version=row.get("engine_version"),
            fingerprint=row.get("fingerprint") or {},
            hardware_key=row.get("hardware_key"),
            verdict=row.get("verdict"),
            golden_mean=golden.get("mean") if isinstance(golden, dict) else None,
            ci_url=row.get("ci_url"),
            point_id=row.get("id"),
        )


@dataclass(frozen=True)
class Series:
    profile: str
    key: str
    metric: str
    lower_is_better: bool
    nights: tuple[Night, ...]

    @property
    def logs(self) -> list[float]:
        return [n.log_mean(self.lower_is_better) for n in self.nights]

    def change_points(self) -> list[ChangePoint]:
        return list(self._change_points)

    @cached_property
    def _change_points(self) -> tuple[ChangePoint, ...]:
        # Found once per series: the spread, the open change, the report all read them.
        if len(self.nights) < MIN_NIGHTS:
            return ()
        return tuple(detect(self.logs, min_magnitude=MIN_MAGNITUDE))

    def since_last_change(self) -> list[Night]:
        """The nights since the last change point, at most SPREAD_NIGHTS of them."""
        cps = self.change_points()
        start = cps[-1].index if cps else 0
        return list(self.nights[start:][-SPREAD_NIGHTS:])

    def spread(self) -> tuple[float, int] | None:
        """The night-to-night sd of the log means since the last change point (at most
        SPREAD_NIGHTS of them), robust: a night out of line (a FAILed night, a hiccup) does not
        set it (core/verdict.py's robust_launch_spread); and how many nights it comes from.
        None below MIN_NIGHTS."""
        from pytest_llmperf.core.verdict import robust_launch_spread

        logs = [n.log_mean(self.lower_is_better) for n in self.since_last_change()]
        if len(logs) < MIN_NIGHTS:
            return None
        found = robust_launch_spread(logs, "nights")
        return (found.sd, int(found.dof) + 1) if found is not None else None

    def report(self, cp: ChangePoint) -> dict[str, Any]:
        """A change point as the results JSON and the CLI give it."""
        return self._report(cp.index, cp.shift, cp.interval(), cp.p_value, cp.n_before, cp.n_after)

    def _report(
        self,
        index: int,
        shift: float,
        interval: tuple[float, float],
        p_value: float,
        n_before: int,
        n_after: int,
    ) -> dict[str, Any]:
        """A change on the log scale (``shift``, its ``interval``) that began at night
        ``index``, as a relative change of the figure, with the nights either side of it."""
        sign = -1.0 if self.lower_is_better else 1.0
        rel = [math.exp(sign * v) - 1 for v in (shift, *interval)]
        good, bad = self.nights[index - 1], self.nights[index]
        return {
            "first_bad_run": bad.run_id,
            "first_bad_date": bad.date,
            "first_bad_commit": bad.commit,
            "last_good_run": good.run_id,
            "last_good_date": good.date,
            "last_good_commit": good.commit,
            "change": rel[0],
            "interval": sorted(rel[1:]),
            "p_value": p_value,
            "worse": shift < 0,
            "nights_before": n_before,
            "nights_after": n_after,
            "what_changed": what_changed(good, bad),
        }

    def open_change(self, since: float | None = None) -> tuple[ChangePoint, int] | None:
        """The change the latest nights make against the series before them: the last change
        point, joined with the change points before it that moved the same way (a slow drift
        is a staircase of small steps), as (the first of them, the regime before it's index).
        Only change points after ``since`` (the golden's recording: re-recording a golden is how
        a user accepts a new level) count."""
        cps = [
            c
            for c in self.change_points()
            if since is None or self.nights[c.index].started_at > since
        ]
        if not cps:
            return None
        direction = cps[-1].shift > 0
        first = len(cps) - 1
        while first > 0 and (cps[first - 1].shift > 0) == direction:
            first -= 1
        return cps[first], cps[first].index - cps[first].n_before

    def drift(self, since: float | None = None) -> dict[str, Any] | None:
        """The open change of the latest nights against the level before them: a confirmed
        step (the staircase of same-direction change points that ends the series, against the
        regime before it began), else a slow drift (:func:`drift_onset`) since the last change
        point or the golden's recording; ``change`` is relative, of the figure, with its
        interval and the first bad night. None when the series is level."""
        found = self.open_change(since)
        if found is not None:
            first, start = found
            logs = self.logs
            before = logs[start : first.index]
            after = logs[self.change_points()[-1].index :]
            return {**self.report(ChangePoint.between(before, after, first.index)), "kind": "step"}
        cps = self.change_points()
        start = cps[-1].index if cps else 0
        if since is not None:
            start = max(
                start,
                next(
                    (i for i, n in enumerate(self.nights) if n.started_at > since), len(self.nights)
                ),
            )
        start = max(start, len(self.nights) - DRIFT_NIGHTS)
        onset = drift_onset(self.logs[start:])
        if onset is None:
            return None
        report = self._report(
            start + onset.index,
            onset.shift,
            onset.interval(),
            onset.p_value,
            onset.index,
            onset.nights,
        )
        sign = -1.0 if self.lower_is_better else 1.0
        return {**report, "kind": "drift", "per_night": math.exp(sign * onset.slope) - 1}


def what_changed(good: Night, bad: Night) -> list[str]:
    """What differs between the last good night and the first bad one: the engine version,
    the tested commit, fingerprint keys, the hardware."""
    out = []
    if good.engine_version != bad.engine_version:
        out.append(f"engine version {good.engine_version} → {bad.engine_version}")
    if good.commit != bad.commit and (good.commit or bad.commit):
        out.append(f"commit {(good.commit or '?')[:10]} → {(bad.commit or '?')[:10]}")
    if good.hardware_key != bad.hardware_key:
        out.append(f"hardware {good.hardware_key} → {bad.hardware_key}")
    # The version is said once: not again as the fingerprint's server_version.
    out += [
        line
        for line in fingerprint_changes(good.fingerprint, bad.fingerprint)
        if not (line.startswith("soft.server_version") and out and out[0].startswith("engine"))
    ]
    return out


def fingerprint_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``section.key old → new`` for every fingerprint value that differs."""
    out = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
            out += [
                f"{section}.{k}: {a.get(k)!r} → {b.get(k)!r}"
                for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)
            ]
        elif a != b:
            out.append(f"{section}: {a!r} → {b!r}")
    return out


#: Runs that are not nights of a series: a recording is the golden's, and a --perf-measure
#: session (a bisect's steps, a comparison) measures something other than the nightly.
NOT_NIGHTS = ("update", "measure")


def build(rows: Iterable[dict[str, Any]]) -> list[Series]:
    """Series from the store's rows (:meth:`HistoryStore.series_rows`), one per (profile, key),
    each night once (the latest write of a point wins), nights without a value, recordings
    (--perf-update runs) and --perf-measure sessions left out (compare them with
    ``history --compare``)."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("mode") in NOT_NIGHTS:
            continue
        grouped.setdefault((row["profile"], row["key"]), []).append(row)
    out = []
    for (profile, key), group in grouped.items():
        nights = [Night.from_row(r) for r in group]
        nights = [n for n in nights if n.values]
        if nights:
            out.append(
                Series(
                    profile,
                    key,
                    group[-1]["metric"],
                    bool(group[-1]["lower_is_better"]),
                    tuple(nights),
                )
            )
    return out


def open_change_points(all_series: Sequence[Series]) -> list[dict[str, Any]]:
    """Per series, the change point its latest nights stand on, newest first."""
    found = []
    for series in all_series:
        cps = series.change_points()
        if cps:
            change = {
                "profile": series.profile,
                "point": series.key,
                "metric": series.metric,
                **series.report(cps[-1]),
            }
            change["bisect"] = bisect_command(change)
            found.append(change)
    return sorted(found, key=lambda c: c["first_bad_date"], reverse=True)


def bisect_command(change: dict[str, Any]) -> str | None:
    """The ``bisect`` command that re-measures a change point's commit range (None without
    both commits): the point's test and level, its profile."""
    good, bad = change.get("last_good_commit"), change.get("first_bad_commit")
    if not good or not bad or good == bad:
        return None
    import re
    import shlex

    key = str(change["point"]).split(" ")[0]
    test = key.split("::")[-1].split("[")[0]
    level = re.search(r"\[C=(\d+)\]", key)
    only = f" --llm-concurrency {level.group(1)}" if level else ""
    return (
        f"python -m pytest_llmperf bisect --good {good[:12]} --bad {bad[:12]} -- perf_suites "
        f"--llm-profile={shlex.quote(str(change['profile']))} -k {shlex.quote(test)}{only}"
    )
