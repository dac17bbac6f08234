"""How many runs: a point's before its verdict, and a recording's before its golden is written.

A run costs GPU time, so the first stage is 2 runs when the golden's own spread says 2 already
decide (the 99 % bound on an unchanged server's ratio lies within a third of the fail margin),
else the profile's ``runs``; a point whose verdict is UNCERTAIN gets more runs on the same
server, stage by stage (3 → 6 → 10, :data:`STAGES`). A golden is recorded
(``--perf-update-runs auto``) with RECORD_MIN_RUNS runs, shared among the recording's launches
(at least MIN_STAGE on each); a launch takes more, a run at a time up to RECORD_MAX_RUNS, while
runs are cheap beside its load (Kalibera and Jones' runs per launch, from the spreads measured
so far), and the last launch while the golden is not yet precise. Which of these a run does is
its mode's (fixtures/settle.py); the rules are here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_llmperf.core.verdict import ALPHA

#: Candidate runs per stage: a point that is UNCERTAIN gets more runs on the same server.
STAGES = (3, 6, 10)
#: The first stage when the golden is precise enough, and a pooled launch's first runs; a
#: recording starts with RECORD_MIN_RUNS and ends by RECORD_MAX_RUNS.
MIN_STAGE = 2
RECORD_MIN_RUNS = 5
RECORD_MAX_RUNS = 10
#: Two runs decide when the 99 % half-width of an unchanged server's ratio is at most this
#: share of the fail margin: a collapse to the margin is then still several half-widths away.
PRECISION_SHARE = 1 / 3


def half_width(golden: Sequence[float], n_new: int, alpha: float = ALPHA) -> float:
    """The expected one-sided (1 − α) half-width, on the log scale, of the pooled t-bound for
    ``n_new`` candidate runs against ``golden``, taking the golden's spread as the runs' spread."""
    import numpy as np

    from pytest_llmperf.core.student import t_quantile

    lg = np.log(np.asarray(golden, dtype=float))
    n0 = len(lg)
    if n0 < 2:
        return math.inf
    sd = float(lg.std(ddof=1))
    return t_quantile(1 - alpha, n0 + n_new - 2) * sd * math.sqrt(1 / n_new + 1 / n0)


def first_stage(golden: Sequence[float], fail_margin: float, runs: int) -> int:
    """Runs to measure before the first verdict: MIN_STAGE when the golden (of at least
    RECORD_MIN_RUNS runs) is precise enough that they decide, else ``runs``."""
    if runs <= MIN_STAGE or len(golden) < RECORD_MIN_RUNS:
        return runs
    precise = half_width(golden, MIN_STAGE) <= PRECISION_SHARE * fail_margin
    return MIN_STAGE if precise else runs


def golden_is_precise(values: Sequence[float], fail_margin: float) -> bool:
    """Whether a golden being recorded has enough runs: RECORD_MIN_RUNS, and precise enough
    that a first stage of MIN_STAGE runs decides against it."""
    return (
        len(values) >= RECORD_MIN_RUNS
        and half_width(values, MIN_STAGE) <= PRECISION_SHARE * fail_margin
    )


def is_last_stage(runs: int) -> bool:
    """Whether ``runs`` runs are the last stage: no more are added for an UNCERTAIN verdict."""
    return runs >= STAGES[-1]


def next_stage(runs: int) -> int:
    """How many runs the next stage adds to a point that has ``runs``."""
    return next(n for n in STAGES if n > runs) - runs


def recording_runs(asked: int, update_runs: int | None, launches: int = 1) -> int:
    """A recording's first runs on each of its ``launches`` launches: ``asked`` (the test's or
    the profile's), at least ``--perf-update-runs`` or, when that is auto, RECORD_MIN_RUNS,
    shared among the launches (at least MIN_STAGE on each: the golden's within-launch spread is
    pooled over them, and the launches, not the runs on one, measure the launch spread). More
    follow where runs are cheap beside a launch, and on the last launch while the golden is not
    precise: see :func:`records_more`."""
    if update_runs is not None:
        return max(asked, update_runs)
    total = max(asked, RECORD_MIN_RUNS)
    return total if launches <= 1 else max(MIN_STAGE, math.ceil(total / launches))


def pooled_launch_runs(pooled: Sequence[float], asked: int) -> int:
    """A recording's first runs for a golden that has its runs (``--perf-pool`` another
    launch): this launch adds its offset (launch-to-launch drift), for which MIN_STAGE runs do;
    more follow only while the pooled golden is not precise."""
    return MIN_STAGE if len(pooled) >= RECORD_MIN_RUNS else asked


def records_more(
    values: Sequence[float],
    pooled: Sequence[float],
    fail_margin: float,
    *,
    estimable: bool,
    first: int = RECORD_MIN_RUNS,
    by_cost: float | None = None,
    last_launch: bool = True,
) -> bool:
    """Whether a recording (auto runs) takes one more run on this launch: it has fewer than
    RECORD_MAX_RUNS, and either fewer than ``by_cost`` (the runs a launch should carry for the
    most precision per minute, :func:`runs_by_cost`), or this is the recording's last launch
    and its ``values`` (with the earlier launches' and a golden's it is pooled into,
    ``pooled``) are not yet precise. A tail its runs cannot estimate (``estimable`` false) never
    gets precise: more runs would be wasted. A point of fewer runs than the launch's ``first``
    (:func:`recording_runs`) was measured with the runs its test asked for: none are added."""
    if len(pooled) >= RECORD_MIN_RUNS:
        first = min(first, MIN_STAGE)  # another launch of a golden that has its runs
    if not estimable or not first <= len(values) < RECORD_MAX_RUNS:
        return False
    if by_cost is not None and len(values) < math.ceil(by_cost):
        return True
    return last_launch and not golden_is_precise([*pooled, *values], fail_margin)


def runs_per_launch(load_s: float, run_s: float, within: float, between: float) -> float | None:
    """The runs a launch should carry for the most precision per minute (Kalibera and Jones,
    ISMM 2013): r* = √((launch cost ÷ run cost) × (σ²within ÷ σ²between)). A launch that is
    cheap beside a run, or launches that differ far more than runs, want few runs and more
    launches; an expensive load with noisy runs wants more runs a launch. None: a figure is
    missing or the launches did not differ at all (then runs alone decide)."""
    if min(load_s, run_s) <= 0 or within < 0 or between <= 0:
        return None
    return math.sqrt((load_s / run_s) * (within / between))


def runs_by_cost(
    launches: Sequence[Sequence[float]], load_s: float | None, run_s: float, launch_cv: float
) -> float | None:
    """:func:`runs_per_launch` from what a recording has measured of a point: ``launches``,
    its values per launch (this one last), the spread of runs about their launch's mean
    (pooled) and of the launches' means, weighed with the profile's ``launch_cv`` as the
    verdict weighs it (PRIOR_DOF degrees of freedom); ``load_s``, this launch's load. None:
    nothing to weigh yet (no launch of two runs, an attached server)."""
    from pytest_llmperf.core.verdict import PRIOR_DOF

    if any(v <= 0 for values in launches for v in values):
        return None  # not a figure runs_per_launch weighs (not recorded either)
    logs = [[math.log(v) for v in values] for values in launches if values]
    dof = sum(len(one) - 1 for one in logs)
    if load_s is None or not dof or launch_cv <= 0:
        return None
    means = [math.fsum(one) / len(one) for one in logs]
    within = math.fsum(math.fsum((x - m) ** 2 for x in one) for one, m in zip(logs, means)) / dof
    between = launch_cv**2
    if len(means) >= 2:
        grand = math.fsum(means) / len(means)
        measured = math.fsum((m - grand) ** 2 for m in means) / (len(means) - 1)
        between = (PRIOR_DOF * between + (len(means) - 1) * measured) / (PRIOR_DOF + len(means) - 1)
    return runs_per_launch(load_s, run_s, within, between)


#: A launched server's golden launches by the profile's ``launch_cv`` (the first whose spread
#: covers it): the golden's launches are half of what a night is judged against, and no number
#: of launches tonight makes up for too few of them. benchmarks/verdict_power.py, a 30 %
#: collapse at a 15 % fail margin with up to three confirmation launches: launches 10 % apart
#: and a golden of 2 launches FAIL it on 72 % of nights (even a known spread would cap it near
#: 85 %), of 6 on 96 %; at 5 % apart 2 launches already FAIL it on every night.
RECORD_LAUNCHES_BY_SPREAD = ((0.05, 2), (0.08, 4), (math.inf, 6))


def launches_to_record(launch_cv: float) -> int:
    """A launched server's golden launches when its profile names none (record_launches)."""
    return next(n for spread, n in RECORD_LAUNCHES_BY_SPREAD if launch_cv <= spread)
