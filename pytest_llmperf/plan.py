"""The run's plan, printed before the first server starts: per profile, the levels the collected
tests measure, the runs, the requests and tokens, and how long it should take.

The time comes from each level's golden (its recorded output tok/s: a run of N requests of
``output_len`` tokens takes N·output_len ÷ tok/s, plus the warm-up's C short requests); a level
without a golden is counted but not timed. A profile measured over steady-state windows is
timed by its windows (and the waits between them) even without a golden. The runs are the
first stage the golden allows (see :func:`pytest_llmperf.core.staging.first_stage`); an
UNCERTAIN point adds more. Loads are not included: they depend on the engine and the model,
not on the plan. ``--perf-plan`` prints it and runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_llmperf import engines
from pytest_llmperf.core.staging import (
    RECORD_MAX_RUNS,
    first_stage,
    pooled_launch_runs,
    recording_runs,
)
from pytest_llmperf.golden.store import GoldenError, golden_path, load
from pytest_llmperf.history.timing import StoredTimes
from pytest_llmperf.load.level import WARMUP_OUTPUT_LEN
from pytest_llmperf.profiles import Profile


@dataclass(frozen=True)
class PlannedLevel:
    profile: str
    concurrency: int
    runs: int
    #: None: a windowed level with no golden: it serves as many as the server does in its windows.
    requests: int | None
    tokens: int | None
    seconds: float | None  # None: no golden to time it by
    #: Recording: the most runs a level gets when its golden is not yet precise.
    up_to: int | None = None
    #: A windowed profile's window (its runs are timed, not counted in requests).
    window_s: float | None = None


def golden_runs(baseline_dir: Path, profile: Profile) -> dict[int, list[float]]:
    """Recorded output tok/s runs per level of the profile's golden on this hardware ({} if none)."""
    try:
        key = engines.of(profile).hardware(profile)["key"]
        golden = load(golden_path(baseline_dir, profile.name, key))
    except (GoldenError, OSError):
        return {}
    if golden is None:
        return {}
    return {
        point.concurrency: point.values
        for point in golden.points.values()
        if point.metric == "output_tok_s" and isinstance(point.concurrency, int)
    }


def levels(
    points: Iterable[tuple[Profile, int]],
    baseline_dir: Path,
    *,
    recording: bool = False,
    update_runs: int | None = None,
    pool: bool = False,
    times: dict[str, StoredTimes] | None = None,
) -> list[PlannedLevel]:
    """One entry per (profile, level) the collected tests measure, in run order;
    ``update_runs``: --perf-update-runs when recording (None: auto); ``pool``: --perf-pool;
    ``times``: per profile, what its earlier runs took (--perf-history), which replaces the
    golden's estimate wherever it has the level."""
    goldens: dict[str, dict[int, list[float]]] = {}
    plans = []
    points = list(points)
    launches = recording_launches(p for p, _ in points)
    # The base of an engine channel gets all its runs (fixtures/settle.py first_runs).
    pinned_bases = {p.base_profile for p, _ in points if p.pin_acceptance}
    for profile, c in points:
        if profile.name not in goldens:
            source = profile.origin  # a copy (A/B/A, a later launch) runs like its profile
            goldens[profile.name] = golden_runs(baseline_dir, _named(profile, source))
        gold = goldens[profile.name].get(c, [])
        up_to = None
        if recording:
            runs = recording_runs(profile.runs, update_runs, launches.get(profile.origin, 1))
            if update_runs is None and pool:
                runs = pooled_launch_runs(gold, runs)  # another launch for a golden with runs
            if update_runs is None and runs < RECORD_MAX_RUNS:
                up_to = RECORD_MAX_RUNS
        elif profile.name in pinned_bases:
            runs = profile.runs
        else:
            runs = first_stage(gold, profile.fail_margin, profile.runs)
        speed = sum(gold) / len(gold) if gold else None
        warmup = c * min(profile.output_len, WARMUP_OUTPUT_LEN) if profile.warmup else 0
        requests: int | None
        tokens: int | None
        if profile.window_s is None:
            n = profile.requests_per_run(c)
            requests, tokens = runs * n, runs * n * profile.output_len
            seconds = (tokens + warmup) / speed if speed else None
        else:
            measured = runs * profile.window_s
            tokens = round(speed * measured) if speed else None
            requests = round(tokens / profile.output_len) if tokens is not None else None
            seconds = measured + (runs - 1) * profile.settle_s + (warmup / speed if speed else 0.0)
        stored = (times or {}).get(profile.name)
        if stored is not None and c in stored.level_s:
            seconds = stored.level_s[c]  # what it really took, every test at this level
        plans.append(
            PlannedLevel(
                profile.name, c, runs, requests, tokens, seconds, up_to, window_s=profile.window_s
            )
        )
    return plans


def recording_launches(profiles: Iterable[Profile]) -> dict[str, int]:
    """Per profile recorded, the launches its recording makes: itself and its later launches
    (``NAME@launch2``, …) among ``profiles``."""
    from pytest_llmperf.profiles import CopyKind

    names: dict[str, set[str]] = {}
    for profile in profiles:
        copy = profile.copy_of
        if copy is None or copy.kind is CopyKind.LATER_LAUNCH:
            names.setdefault(profile.origin, set()).add(profile.name)
    return {origin: len(launch) for origin, launch in names.items()}


def _named(profile: Profile, name: str) -> Profile:
    return profile if profile.name == name else replace(profile, name=name)


def lines(
    plans: list[PlannedLevel], *, recording: bool, times: dict[str, StoredTimes] | None = None
) -> list[str]:
    """The plan as the terminal shows it: one line per profile, then the total (with the
    stored load times, when the history has them)."""
    out = [f"llmperf plan{' (recording goldens)' if recording else ''}:"]
    total = 0.0
    untimed = 0
    times = times or {}
    loads = [t.load_s for t in times.values() if t.load_s is not None]
    for name in dict.fromkeys(p.profile for p in plans):
        mine = sorted((p for p in plans if p.profile == name), key=lambda p: p.concurrency)
        timed = [p.seconds for p in mine if p.seconds is not None]
        untimed += len(mine) - len(timed)
        total += sum(timed)
        when = f"about {duration(sum(timed))}" if timed else "not timed (no golden)"
        if name in times:
            load = times[name].load_s
            loaded = f", load {duration(load)}" if load is not None else ""
            when += f" (as its last {times[name].runs} run(s) took{loaded})"
        if timed and len(timed) < len(mine):
            when += f" + {len(mine) - len(timed)} level(s) with no golden"
        out.append(
            f"  {name}: C = {', '.join(str(p.concurrency) for p in mine)}; "
            f"{'/'.join(sorted({str(p.runs) for p in mine}))} runs per level"
            f"{_up_to(mine)}; "
            f"{_served(mine)}; {when}"
        )
    note = f", plus {untimed} level(s) with no golden to time them" if untimed else ""
    names = list(dict.fromkeys(p.profile for p in plans))
    served = [times.get(name) for name in names]
    if names and all(t is not None and t.tests_s is not None for t in served):
        whole = sum((t.tests_s or 0.0) + (t.load_s or 0.0) for t in served if t is not None)
        out.append(
            f"  total: about {duration(whole)}, as the last runs took: every test (open loop, "
            "capacity and prefill too) and the loads (from the history)"
        )
    elif loads:
        total += sum(loads)
        out.append(f"  total: about {duration(total)}{note}, loads included (from the history)")
    else:
        launches = len({p.profile for p in plans})
        out.append(
            f"  total: about {duration(total)} of measurement{note} ("
            + (
                "1 server launch; its load"
                if launches == 1
                else f"{launches} server launches; their loads"
            )
            + ", warm-ups and any capacity search are timed once a history has them)"
        )
    return out


def confirmation_lines(
    plans: list[PlannedLevel],
    profiles: Iterable[tuple[Profile, int]],
    times: dict[str, StoredTimes],
) -> list[str]:
    """The fresh launches a night may make to confirm what its launches left undecided: per
    profile (with ``k``, the launches it may make), how many at most, and what one costs at
    most (a load, and its levels measured again; only the undecided are). Nothing is made on a
    night that decides everything."""
    out = []
    for profile, k in profiles:
        mine = [p for p in plans if p.profile == profile.name]
        if not mine or not k:
            continue
        timed = [p.seconds for p in mine if p.seconds is not None]
        stored = times.get(profile.name)
        load = (
            f"a load of about {duration(stored.load_s)}"
            if stored is not None and stored.load_s is not None
            else "a load"
        )
        again = f"at most {duration(sum(timed))}" if timed else "the undecided levels"
        out.append(
            f"  confirmation: {profile.name} may be launched {k} more time{'s' if k > 1 else ''} "
            f"only if its launches' noise leaves a point undecided; each: {load} and {again} "
            "measuring the undecided points again"
        )
    return out


def _served(plans: list[PlannedLevel]) -> str:
    """``48 requests, 3,072 tokens``; for windowed levels with no golden to say how fast the
    server is, the windows instead: the requests are as many as the server serves in them."""
    if any(p.requests is None or p.tokens is None for p in plans):
        windows = sorted({f"{p.window_s:g} s" for p in plans if p.window_s is not None})
        return f"windows of {'/'.join(windows)} (as many requests as the server serves in them)"
    return (
        f"{sum(p.requests or 0 for p in plans):,} requests, "
        f"{sum(p.tokens or 0 for p in plans):,} tokens"
    )


def _up_to(plans: list[PlannedLevel]) -> str:
    most = max((p.up_to for p in plans if p.up_to is not None), default=None)
    return f" (up to {most} where the golden is not yet precise)" if most else ""


def duration(seconds: float) -> str:
    """``40 s``, ``12 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def rate_lines(
    points: Iterable[tuple[Profile, float]], *, recording: bool, update_runs: int | None = None
) -> list[str]:
    """The open-loop rate levels: a run's length is set by the profile (lead-in, window and at
    most the drain, see load/open_loop.py), so they are timed without a golden (an upper bound:
    the drain ends when the window's arrivals have their first tokens)."""
    from pytest_llmperf.load.open_loop import run_parts

    by_profile: dict[str, list[tuple[Profile, float]]] = {}
    points = list(points)
    launches = recording_launches(p for p, _ in points)
    for profile, rate in points:
        by_profile.setdefault(profile.name, []).append((profile, rate))
    out = []
    for name, levels in by_profile.items():
        profile = levels[0][0]
        runs = (
            recording_runs(profile.runs, update_runs, launches.get(profile.origin, 1))
            if recording
            else profile.runs
        )
        seconds = arrivals = 0.0
        for _, rate in levels:
            lead, window, drain = run_parts(
                rate, profile.window_s or 0.0, profile.min_requests, profile.settle_s
            )
            seconds += runs * (lead + window + drain)
            arrivals += runs * rate * (lead + window + drain)
        rates = ", ".join(f"{rate:g}" for _, rate in sorted(levels, key=lambda pair: pair[1]))
        out.append(
            f"  {name}: {rates} requests/s; {runs} runs per level; at most {arrivals:,.0f} "
            f"arrivals; at most {duration(seconds)}"
        )
    return ["llmperf plan, rate levels (open loop):", *out] if out else []
