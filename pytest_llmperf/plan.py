"""The run's plan, printed before the first server starts: per profile, the levels the collected
tests measure, the runs, the requests and tokens, and how long it should take.

The time comes from each level's golden (its recorded output tok/s: a run of N requests of
``output_len`` tokens takes N·output_len ÷ tok/s, plus the warm-up's C short requests); a level
without a golden is counted but not timed. Loads are not included: they depend on the engine
and the model, not on the plan. ``--perf-plan`` prints it and runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_llmperf.golden.store import GoldenError, golden_path, load
from pytest_llmperf.load.loadgen import WARMUP_OUTPUT_LEN
from pytest_llmperf.profiles import Profile


@dataclass(frozen=True)
class LevelPlan:
    profile: str
    concurrency: int
    runs: int
    requests: int
    tokens: int
    seconds: float | None  # None: no golden to time it by


def golden_throughput(baseline_dir: Path, profile: Profile) -> dict[int, float]:
    """Recorded output tok/s per level of the profile's golden on this hardware ({} if none)."""
    from pytest_llmperf.golden.fingerprint import hardware

    try:
        data = load(golden_path(baseline_dir, profile.name, hardware(profile)["key"])) or {}
    except (GoldenError, OSError):
        return {}
    out: dict[int, float] = {}
    for point in (data.get("points") or {}).values():
        if point.get("metric") == "output_tok_s" and isinstance(point.get("concurrency"), int):
            mean = (point.get("summary") or {}).get("mean")
            if isinstance(mean, (int, float)) and mean > 0:
                out[point["concurrency"]] = float(mean)
    return out


def levels(
    points: Iterable[tuple[Profile, int]], runs_floor: int, baseline_dir: Path
) -> list[LevelPlan]:
    """One entry per (profile, level) the collected tests measure, in run order."""
    speeds: dict[str, dict[int, float]] = {}
    plans = []
    for profile, c in points:
        if profile.name not in speeds:
            source = profile.remeasure_of or profile.name  # an A/B/A copy runs like its base
            speeds[profile.name] = golden_throughput(baseline_dir, _named(profile, source))
        runs = max(profile.runs, runs_floor)
        n = profile.requests_per_run(c)
        tokens = runs * n * profile.output_len
        warmup = c * min(profile.output_len, WARMUP_OUTPUT_LEN) if profile.warmup else 0
        speed = speeds[profile.name].get(c)
        seconds = (tokens + warmup) / speed if speed else None
        plans.append(LevelPlan(profile.name, c, runs, runs * n, tokens, seconds))
    return plans


def _named(profile: Profile, name: str) -> Profile:
    return profile if profile.name == name else replace(profile, name=name)


def lines(plans: list[LevelPlan], *, recording: bool) -> list[str]:
    """The plan as the terminal shows it: one line per profile, then the total."""
    out = [f"llmperf plan{' (recording goldens)' if recording else ''}:"]
    total = 0.0
    untimed = 0
    for name in dict.fromkeys(p.profile for p in plans):
        mine = [p for p in plans if p.profile == name]
        timed = [p.seconds for p in mine if p.seconds is not None]
        untimed += len(mine) - len(timed)
        total += sum(timed)
        when = f"about {_duration(sum(timed))}" if timed else "not timed (no golden)"
        if timed and len(timed) < len(mine):
            when += f" + {len(mine) - len(timed)} level(s) with no golden"
        out.append(
            f"  {name}: C = {', '.join(str(p.concurrency) for p in mine)}; "
            f"{'/'.join(sorted({str(p.runs) for p in mine}))} runs per level; "
            f"{sum(p.requests for p in mine):,} requests, {sum(p.tokens for p in mine):,} tokens; "
            f"{when}"
        )
    note = f", plus {untimed} level(s) with no golden to time them" if untimed else ""
    out.append(
        f"  total: about {_duration(total)} of measurement{note} (server loads not included)"
    )
    return out


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
