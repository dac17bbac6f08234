"""The run's plan, printed before the first server starts: per profile, the levels the collected
tests measure, the runs, the requests and tokens, and how long it should take.

The time comes from each level's golden (its recorded output tok/s: a run of N requests of
``output_len`` tokens takes N·output_len ÷ tok/s, plus the warm-up's C short requests); a level
without a golden is counted but not timed. A profile measured over steady-state windows is
timed by its windows (and the settle before each) even without a golden. The runs are the
first stage the golden allows (see :func:`pytest_llmperf.core.staging.first_stage`); an
UNCERTAIN point adds more. Beside the closed-loop levels, the total counts the open-loop rate
levels (their lead-ins and windows), the capacity searches (the probes the goldens let it
expect, :func:`capacity_search`) and each launch's load (its golden's startup). Once a history
has the profile's runs, the total is what they took instead. ``--perf-plan`` prints it and
runs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_llmperf import engines
from pytest_llmperf.core.staging import (
    RECORD_MAX_RUNS,
    first_stage,
    pooled_launch_runs,
    recording_runs,
)
from pytest_llmperf.golden.model import GoldenFile, GoldenPoint
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


def _golden(baseline_dir: Path, profile: Profile) -> GoldenFile | None:
    """The profile's golden on this hardware (None: none, or unreadable: the run will say)."""
    try:
        key = engines.of(profile).hardware(profile)["key"]
        return load(golden_path(baseline_dir, profile.name, key))
    except (GoldenError, OSError):
        return None


def golden_runs(baseline_dir: Path, profile: Profile) -> dict[int, list[float]]:
    """Recorded output tok/s runs per level of the profile's golden on this hardware ({} if none)."""
    golden = _golden(baseline_dir, profile)
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
            # A window opens settle_s after its run began at the earliest (load/closed_loop.py).
            seconds = measured + runs * profile.settle_s + (warmup / speed if speed else 0.0)
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


@dataclass(frozen=True)
class Beside:
    """What a session spends beside its closed-loop levels, as the plan expects it: the
    open-loop rate levels, the capacity searches, and each launch's load (None where no golden
    has its startup)."""

    open_loop_s: float = 0.0
    capacity_s: float = 0.0
    loads_s: tuple[float | None, ...] = ()


#: The llmperf calls the plan reads in a test's body, to tell what it will measure.
MEASURING_CALLS = frozenset({"measure", "measured_by", "capacity", "acceptance"})
#: Those of them that measure a level of the test's own.
OWN_LEVEL_CALLS = frozenset({"measure", "acceptance"})


@dataclass
class Collected:
    """What the collected tests will measure, per profile (a launch each): the closed-loop
    levels in run order, the open-loop rates, and the profiles whose capacity is searched."""

    points: list[tuple[Profile, int]] = field(default_factory=list)
    rates: list[tuple[Profile, float]] = field(default_factory=list)
    searched: list[Profile] = field(default_factory=list)
    launched: dict[str, Profile] = field(default_factory=dict)


def collected(items: Iterable[object], by_name: Mapping[str, Profile]) -> Collected:
    """Read the collected ``items`` (pytest's) for what they measure of the profiles
    ``by_name``: their parameters, and the llmperf calls their bodies make (:func:`calls`)."""
    out = Collected()
    seen: set[tuple[str, int, str | None]] = set()
    shared: list[tuple[Profile, int]] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        profile = by_name.get(str(params.get("llm_profile")))
        if profile is None:
            continue
        out.launched.setdefault(profile.name, profile)
        made = calls(getattr(item, "function", None))
        if params.get("llm_request_rate") is not None:
            rate = (profile, params["llm_request_rate"])
            if rate not in out.rates:
                out.rates.append(rate)
        elif "llm_concurrency" in params or made & OWN_LEVEL_CALLS:
            c = params.get("llm_concurrency", 1)  # a test of its own at one stream
            # A test that measures gets a level of its own (the prefill test's C = 10 is not
            # the throughput test's); one that checks more figures of another's runs
            # (llmperf.measured_by) spends no server time of its own where those are planned.
            if "measured_by" in made and not made & OWN_LEVEL_CALLS:
                shared.append((profile, c))
            elif (key := (profile.name, c, getattr(item, "originalname", None))) not in seen:
                seen.add(key)
                out.points.append((profile, c))
        if "capacity" in made and profile.measures_open_loop and profile not in out.searched:
            out.searched.append(profile)
    for profile, c in shared:  # measured here only where no test measures the level
        if not any(key[:2] == (profile.name, c) for key in seen):
            seen.add((profile.name, c, None))
            out.points.append((profile, c))
    return out


def calls(function: object) -> frozenset[str]:
    """Which of MEASURING_CALLS a test's body makes (the names its code uses; none for a test
    that is not a plain function)."""
    code = getattr(function, "__code__", None)
    return frozenset(code.co_names) & MEASURING_CALLS if code is not None else frozenset()


def loads(profiles: Iterable[Profile], baseline_dir: Path) -> tuple[float | None, ...]:
    """Each launch's expected load: its golden's startup seconds (a later launch's are its
    first's), None where the golden has none."""
    out: list[float | None] = []
    for profile in profiles:
        golden = _golden(baseline_dir, _named(profile, profile.origin))
        startup = [
            p.mean for p in (golden.points.values() if golden else ()) if p.metric == "startup_s"
        ]
        out.append(max(startup) if startup else None)
    return tuple(out)


def expected_run_s(profile: Profile, rate: float) -> float:
    """An open-loop run's expected length: its lead-in and window (the drain ends when the
    window's last arrivals have their first tokens, about nothing on a server that keeps up)."""
    from pytest_llmperf.load.open_loop import run_parts

    lead, window, _ = run_parts(
        rate, profile.window_s or 0.0, profile.min_requests, profile.settle_s
    )
    return lead + window


def _open_loop_runs(
    profile: Profile, launches: dict[str, int], recording: bool, update_runs: int | None
) -> int:
    """A rate level's runs: the recording's first on its launch, else the profile's."""
    if recording:
        return recording_runs(profile.runs, update_runs, launches.get(profile.origin, 1))
    return profile.runs


def open_loop_levels(
    points: Iterable[tuple[Profile, float]], *, recording: bool, update_runs: int | None = None
) -> dict[tuple[str, float], float]:
    """Each rate level's expected time (its runs' lead-ins and windows), by (profile, rate)."""
    points = list(points)
    launches = recording_launches(p for p, _ in points)
    out = {}
    for profile, rate in points:
        runs = _open_loop_runs(profile, launches, recording, update_runs)
        out[(profile.name, rate)] = runs * expected_run_s(profile, rate)
    return out


def lines(
    plans: list[PlannedLevel],
    *,
    recording: bool,
    times: dict[str, StoredTimes] | None = None,
    beside: Beside | None = None,
) -> list[str]:
    """The plan as the terminal shows it: one line per profile, then the total (with the
    stored load times, when the history has them; else with ``beside``: the open loop, the
    capacity searches and the loads the goldens time)."""
    beside = beside or Beside()
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
            f"  {name}: C = {_levels(mine)}; "
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
        total += sum(loads) + beside.open_loop_s + beside.capacity_s
        out.append(f"  total: about {duration(total)}{note}, loads included (from the history)")
    else:
        out.append(_total_line(total, untimed, beside))
    return out


def _total_line(closed: float, untimed: int, beside: Beside) -> str:
    """The total of a plan with no history to time it: what the goldens and the profile time,
    part by part, and what they cannot."""
    known = [s for s in beside.loads_s if s is not None]
    total = closed + beside.open_loop_s + beside.capacity_s + sum(known)
    parts = [f"closed loop {duration(closed)}"]
    if beside.open_loop_s:
        parts.append(f"open loop {duration(beside.open_loop_s)}")
    if beside.capacity_s:
        parts.append(f"capacity {duration(beside.capacity_s)}")
    if known:
        parts.append(f"{len(known)} load(s) {duration(sum(known))} (the golden's startup)")
    left = []
    if untimed:
        left.append(f"{untimed} level(s) with no golden")
    if len(known) < len(beside.loads_s):
        left.append(f"{len(beside.loads_s) - len(known)} load(s) with no startup golden")
    if not total and left:
        return f"  total: not timed: {', '.join(left)} (no history yet)"
    left_out = f"; not timed: {', '.join(left)}" if left else ""
    return (
        f"  total: about {duration(total)}: {', '.join(parts)}{left_out} (no history yet; "
        "a point that needs more runs to decide adds them)"
    )


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


def _levels(plans: list[PlannedLevel]) -> str:
    """``1 ×3, 2, 5, 10 ×2``: each level once, with how many tests measure one of their own."""
    counts: dict[int, int] = {}
    for p in plans:
        counts[p.concurrency] = counts.get(p.concurrency, 0) + 1
    return ", ".join(f"{c} ×{n}" if n > 1 else str(c) for c, n in counts.items())


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
        runs = _open_loop_runs(profile, launches, recording, update_runs)
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


@dataclass(frozen=True)
class PlannedSearch:
    """A capacity search as the plan expects it to go: the rates it will probe and their time."""

    profile: str
    start: float
    probes: tuple[float, ...]
    seconds: float
    #: Why the goldens say no rate can meet the SLO (the search will FAIL), else None.
    unreachable: str | None = None
    #: Where the expected end comes from ("the golden's capacity", …); None: not known.
    basis: str | None = None


def capacity_search(
    profile: Profile, baseline_dir: Path, *, recording: bool = True
) -> PlannedSearch | None:
    """The capacity search of ``profile`` as its goldens let the plan expect it (None: the
    profile has no slo, and its capacity test skips). The search (core/capacity.py) starts at
    the highest ``request_rate``, halves until a rate holds or doubles until one does not, then
    bisects to ``RESOLUTION``; each probe is a first stage of runs of the rate's run length. A
    gate starts from its golden's bracket (:func:`_from_bracket`). A recording's search is
    expected to end where the golden's capacity was (scaled by the golden's request length to
    this one's), else where the golden's saturated throughput puts the server's service rate.
    When the golden's single stream says one request takes longer than ``slo.e2e_s``, no rate
    holds: the search halves until lower rates no longer lower e2e (below about one request in
    flight), and the plan says so before any launch."""
    from pytest_llmperf.core.capacity import MAX_HALVINGS, RESOLUTION, STAGES

    if not profile.slo:
        return None
    start = float(max(profile.request_rate)) if profile.request_rate else 1.0
    golden = _golden(baseline_dir, _named(profile, profile.origin))
    points = list(golden.points.values()) if golden is not None else []

    def per_token(point: GoldenPoint) -> float:  # the golden's figure scaled to this length
        length = point.workload.get("output_len")
        return float(length) / profile.output_len if isinstance(length, (int, float)) else 1.0

    capacity = next((p for p in points if p.metric == "capacity_req_s"), None)
    throughput = [p for p in points if p.metric == "output_tok_s" and p.concurrency]
    single = min(throughput, key=lambda p: p.concurrency, default=None)
    if not recording and capacity is not None and per_token(capacity) == 1.0:
        low, high = capacity.extra.get("low"), capacity.extra.get("high")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and 0 < low < high:
            return _from_bracket(profile, capacity, low, high)
    unreachable = None
    limit = profile.slo.get("e2e_s")
    alone = (
        profile.output_len / single.mean
        if single is not None and single.concurrency == 1 and single.mean > 0
        else None
    )
    if alone is not None and limit is not None:
        if alone > limit:
            unreachable = (
                f"one {profile.output_len}-token request takes about {alone * 1000:.0f} ms at "
                f"the golden's single stream, over the slo's e2e_s of {limit * 1000:.0f} ms: "
                "no rate will meet it"
            )
    service = max(p.mean for p in throughput) / profile.output_len if throughput else None
    cap: float | None
    if unreachable is not None:
        cap, basis = None, "the golden's single stream"
    elif capacity is not None and capacity.mean > 0:
        cap, basis = capacity.mean * per_token(capacity), "the golden's capacity"
    elif service is not None:
        cap, basis = service / 2, "half the golden's saturated throughput"
    else:
        cap, basis = start / 4, None
    # Halving stops once half the arrivals no longer lower e2e: below about one request in
    # flight (a rate of 1 ÷ a request's time alone), a request has the server to itself.
    floor = 1 / alone if alone else start / 2**MAX_HALVINGS
    probes = _probes(start, cap, floor, RESOLUTION, MAX_HALVINGS)
    seconds = sum(STAGES[0] * expected_run_s(profile, rate) for rate in probes)
    return PlannedSearch(profile.name, start, tuple(probes), seconds, unreachable, basis)


def _from_bracket(
    profile: Profile, capacity: GoldenPoint, low: float, high: float
) -> PlannedSearch:
    """A gate's search from its golden's bracket. A server as it was ends in those two probes,
    each at the SLO's edge (its middle stage of runs expected). Where the golden's launches
    read capacities outside the bracket, tonight's launch may too: the search is expected to
    walk to the farthest of them, doubling and bisecting as core/capacity.search does."""
    from pytest_llmperf.core.capacity import MAX_HALVINGS, RESOLUTION, STAGES

    outside = [
        v for v in capacity.values if not low / (1 + RESOLUTION) <= v <= high * (1 + RESOLUTION)
    ]
    if not outside:
        seconds = sum(STAGES[1] * expected_run_s(profile, r) for r in (low, high))
        return PlannedSearch(profile.name, low, (low, high), seconds, None, "the golden's bracket")
    far = max(outside, key=lambda v: abs(math.log(v / math.sqrt(low * high))))
    probes = _probes(low, far, 0.0, RESOLUTION, MAX_HALVINGS, then=high)
    seconds = sum(STAGES[1] * expected_run_s(profile, r) for r in probes)
    basis = (
        f"the farthest of the golden's launches ({', '.join(f'{v:.3g}' for v in capacity.values)}"
        f" requests/s; its bracket {low:.3g}-{high:.3g})"
    )
    return PlannedSearch(profile.name, low, tuple(probes), seconds, None, basis)


def _probes(
    start: float,
    cap: float | None,
    floor: float,
    resolution: float,
    halvings: int,
    then: float | None = None,
) -> list[float]:
    """The rates a search from ``start`` probes when every rate up to ``cap`` holds (None:
    none holds, and halving stops at ``floor``), as core/capacity.search goes; ``then``: the
    rate it probes second when ``start`` holds (a golden's bracket)."""
    probes = [start]
    low = start if cap is not None and start <= cap else None
    high = None if low is not None else start
    if low is not None and then is not None and then > start:
        probes.append(then)
        low, high = (then, None) if cap is not None and then <= cap else (low, then)
    while len(probes) < 12:
        if low is None:
            assert high is not None
            # An unreachable limit is told by a pair of probes: the search makes two at least.
            floored = cap is None and high <= floor and len(probes) > 1
            if high <= start / 2**halvings or floored:
                break
            rate = high / 2
        elif high is None:
            rate = low * 2
        elif high / low <= 1 + resolution:
            break
        else:
            rate = (low * high) ** 0.5
        probes.append(rate)
        if cap is not None and rate <= cap:
            low = rate
        else:
            high = rate
    return probes


def capacity_lines(searches: list[PlannedSearch]) -> list[str]:
    """The capacity searches as the plan expects them: the rates they will probe, their time,
    and, where the goldens say so, that no rate can meet the SLO."""
    out = []
    for search in searches:
        rates = ", ".join(f"{rate:.3g}" for rate in search.probes)
        basis = (
            f", ending where {search.basis} puts it"
            if search.basis
            else ", a guess: no golden says where it ends"
        )
        out.append(
            f"  {search.profile}: from {search.start:.3g} requests/s, about {len(search.probes)} "
            f"probes ({rates}){basis}; about {duration(search.seconds)}"
        )
        if search.unreachable:
            out.append(f"    {search.profile}: {search.unreachable}")
    return ["llmperf plan, capacity searches:", *out] if out else []
