"""``python -m pytest_llmperf bisect``: the commit that made a point slower, by re-measuring.

``bisect --good REV --bad REV [--repo DIR] [--setup CMD] -- PYTEST_ARGS`` walks the commits
from REV good to REV bad (``git rev-list --ancestry-path``) as ``git bisect`` does, but each
step is a measurement, not a yes or no: at every commit it checks the commit out in a worktree
of its own, runs ``--setup`` there (an install, a build), then ``pytest PYTEST_ARGS
--perf-measure`` there, and reads the points' runs from the results JSON.

Each session is a launch of the server, and launches are the replicates: a session's runs share
its launch's offset, so a step is judged by its launches' means, not by its runs as if they were
independent. Both ends are measured first, four times each (four launches: their spread is the
launch spread the steps are judged with; more, up to six, where launches differ so much that
the ends' own error would decide the steps). The point followed is the one that got worse most, over its
noise (its change in the worse direction ÷ its standard error; name one with ``-k`` in the
pytest arguments). A step's place between the ends is ``x = (step − good) ÷ (bad − good)`` on
the launches' log means, 0 at the good end and 1 at the bad end, with a 95 % interval from
Student's t on the launch spread (pooled over every launch measured) and the runs' own spread.
Wholly below ½: good; wholly above: bad; straddling ½: the step is measured again (a fresh
launch), up to ``--rounds`` sessions, then decided by its estimate, and said so. Before the
first bad commit is printed, the last good and the first bad are measured once more, and the
search goes on if either moved to the other side. A step whose setup fails or whose session
measures nothing is skipped, as ``git bisect skip`` does, and the search takes the candidate
nearest the middle that is left.

Exit 0 with the first bad commit; 1 when skipped commits leave several candidates, or the ends
do not differ; 2 on a usage error (a revision that does not exist, no git repository).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Where a step stands between the ends: good below, bad above.
MIDDLE = 0.5
CONFIDENCE = 0.95
#: Sessions a step may take while its place holds ½ (``--rounds``).
DEFAULT_ROUNDS = 6


class BisectError(Exception):
    """A usage error: says what and how to fix it, in one line."""


@dataclass
class Step:
    """One commit measured: its runs of each point, and where it stands."""

    commit: str
    subject: str
    #: Each point's runs, by key (``profile key``), one list a session (a launch).
    launches: dict[str, list[list[float]]] = field(default_factory=dict)
    verdict: str = ""  # good, bad, skip; "good (by its estimate)" when still undecided
    x: float | None = None
    interval: tuple[float, float] | None = None
    note: str = ""

    @property
    def values(self) -> dict[str, list[float]]:
        """Each point's runs over every launch."""
        return {key: [v for g in groups for v in g] for key, groups in self.launches.items()}

    def mean(self, key: str) -> float | None:
        """The geometric mean of the launches' geometric means."""
        groups = self.launches.get(key)
        if not groups:
            return None
        return math.exp(sum(_log_mean(g) for g in groups) / len(groups))


def add_parser(commands: Any) -> None:
    bisect = commands.add_parser(
        "bisect",
        help="Find the commit that made a point slower, measuring each step as the gate does.",
    )
    bisect.add_argument("--good", required=True, metavar="REV", help="a revision that was fast")
    bisect.add_argument("--bad", required=True, metavar="REV", help="a revision that is slow")
    bisect.add_argument("--repo", type=Path, default=Path("."), help="the git repository (.)")
    bisect.add_argument("--setup", metavar="CMD", help="run in each step's checkout first")
    bisect.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"sessions (launches) a step may take while undecided ({DEFAULT_ROUNDS})",
    )
    bisect.add_argument("--json", type=Path, metavar="PATH", help="every step's figures, as JSON")
    bisect.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's")


def main(args: argparse.Namespace) -> int:
    pytest_args = [a for a in args.pytest_args if a != "--"] or ["perf_suites"]
    # The steps' worktrees live here; it goes when the bisection ends, however it ends.
    with tempfile.TemporaryDirectory(prefix="llmperf-bisect-") as scratch:
        run = Bisection(
            args.repo.resolve(), args.setup, pytest_args, max(1, args.rounds), scratch=Path(scratch)
        )
        try:
            commits = run.commits(args.good, args.bad)
        except BisectError as exc:
            print(f"pytest-llmperf bisect: {exc}", file=sys.stderr)
            return 2
        found = run.search(commits)
    if args.json:
        args.json.write_text(json.dumps(run.to_json(found), indent=2) + "\n")
    return 0 if found is not None else 1


#: Sessions (launches) each end gets before the search: the launch spread's first estimate;
#: more, up to MAX_END_LAUNCHES, while the ends' own error is over END_SHARE of the span (it is
#: shared by every step: benchmarks/bisect_power.py, launches 6 % apart and a 15 % step: 50 of
#: 100 searches right with two launches an end and three a step, 96-98 with four and six).
END_LAUNCHES = 4
MAX_END_LAUNCHES = 6
END_SHARE = 1 / 10


@dataclass
class Bisection:
    repo: Path
    setup: str | None
    pytest_args: list[str]
    rounds: int
    steps: list[Step] = field(default_factory=list)
    key: str | None = None
    #: Where the steps' worktrees are checked out: set by :func:`main`, which removes it.
    scratch: Path | None = None
    #: Per key, whether lower is better (a latency): its "worse" is a rise.
    lower: dict[str, bool] = field(default_factory=dict)

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd or self.repo, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BisectError(f"git {' '.join(args)} in {cwd or self.repo}: {last}")
        return done.stdout

    def commits(self, good: str, bad: str) -> list[Step]:
        """The good end, then every commit after it up to the bad end, oldest first."""
        ends = []
        for name, rev in (("--good", good), ("--bad", bad)):
            try:
                ends.append(
                    self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
                )
            except BisectError:
                raise BisectError(f"{name} {rev}: no such commit in {self.repo}") from None
        listed = self.git("rev-list", "--reverse", "--ancestry-path", f"{ends[0]}..{ends[1]}")
        shas = [ends[0], *listed.split()]
        if len(shas) < 2:
            raise BisectError(
                f"--bad {bad} is not a descendant of --good {good}: nothing to bisect"
            )
        return [Step(sha, self.git("log", "-1", "--format=%s", sha).strip()) for sha in shas]

    def search(self, commits: list[Step]) -> Step | None:
        good, bad = commits[0], commits[-1]
        for end in (good, bad):
            for _ in range(END_LAUNCHES):
                self.measure(end)
            if end.verdict == "skip":
                print(f"the {'good' if end is good else 'bad'} end cannot be measured: {end.note}")
                return None
        self.key = self._got_worse_most(good, bad)
        if self.key is None:
            print("no point the good and the bad end both measured got worse: nothing to bisect")
            return None
        change = bad.mean(self.key) / good.mean(self.key) - 1  # type: ignore[operator]
        print(f"bisecting {self.key}: good {_short(good)} {good.mean(self.key):,.1f}, "
              f"bad {_short(bad)} {bad.mean(self.key):,.1f} ({change * 100:+.1f} %)")  # fmt: skip
        if not self._ends_differ(good, bad):
            print("the ends do not differ significantly: nothing to bisect")
            return None
        self._ends_precise(good, bad)
        good.verdict, bad.verdict = "good", "bad"
        confirmed: set[int] = set()
        while True:
            lo, hi = self._bounds(commits)
            if hi - lo > 1:
                step = self._next(commits, lo, hi)
                if step is None:
                    left = [_short(c) for c in commits[lo + 1 : hi + 1]]
                    print(f"skipped commits leave {len(left)} candidates: {', '.join(left)}")
                    return None
                self._decide(step)
                continue
            # The final pair, measured once more before it is printed (a step decided on one
            # launch's luck would name the wrong commit).
            pair = [k for k in (lo, hi) if k not in confirmed and 0 < k < len(commits) - 1]
            if not pair:
                break
            for k in pair:
                confirmed.add(k)
                self.measure(commits[k])
                self.judge(commits[k], final=True)
                self._say(commits[k], again=True)
        first = commits[hi]
        before, after = commits[lo].mean(self.key), first.mean(self.key)
        print(f"first bad commit: {first.commit} {first.subject!r}: {self.key} "
              f"{before:,.1f} → {after:,.1f} ({(after / before - 1) * 100:+.1f} %), "  # type: ignore[operator]
              f"after {len(self.steps) - 2 * END_LAUNCHES} session(s) of its steps")  # fmt: skip
        return first

    def _decide(self, step: Step) -> None:
        """Measure a step, again while its place holds ½ (up to ``rounds`` sessions)."""
        self.measure(step)
        while step.verdict == "" and self._rounds(step) < self.rounds:
            self.measure(step)
        self.judge(step, final=True)
        self._say(step)

    def _bounds(self, commits: list[Step]) -> tuple[int, int]:
        """The last commit judged good, and the first judged bad after it."""
        lo = max(k for k, c in enumerate(commits) if c.verdict.startswith("good"))
        hi = min(k for k, c in enumerate(commits) if k > lo and c.verdict.startswith("bad"))
        return lo, hi

    def _next(self, commits: list[Step], lo: int, hi: int) -> Step | None:
        """The candidate nearest the middle of (lo, hi) that was not skipped."""
        middle = (lo + hi) / 2
        open_ = [k for k in range(lo + 1, hi) if commits[k].verdict != "skip"]
        return commits[min(open_, key=lambda k: (abs(k - middle), k))] if open_ else None

    def _rounds(self, step: Step) -> int:
        return sum(1 for s in self.steps if s is step)

    def measure(self, step: Step) -> None:
        """One more session at the step's commit; a step that cannot be measured is skipped."""
        self.steps.append(step)
        found = self._session(step.commit)
        if isinstance(found, str):
            step.verdict, step.note = "skip", found
            return
        for key, (values, lower) in found.items():
            step.launches.setdefault(key, []).append(values)
            self.lower[key] = lower
        if self.key is not None:
            self.judge(step, final=False)

    def judge(self, step: Step, *, final: bool) -> None:
        """Where the step stands between the ends, and so its verdict ('' while undecided)."""
        if step.verdict == "skip" or self.key is None:
            return
        good, bad = self.steps[0], self.steps[END_LAUNCHES]
        if not step.launches.get(self.key):
            step.verdict, step.note = "skip", f"it measured no {self.key}"
            return
        x, low, high = _position(
            step.launches[self.key],
            good.launches[self.key],
            bad.launches[self.key],
            self._spread(),
        )
        step.x, step.interval = x, (low, high)
        if high < MIDDLE:
            step.verdict = "good"
        elif low > MIDDLE:
            step.verdict = "bad"
        elif final:
            step.verdict = (
                f"{'bad' if x > MIDDLE else 'good'} (by its estimate: its interval holds ½)"
            )

    def _spread(self) -> tuple[float, float]:
        """The launch spread (variance of a launch's log mean, and its degrees of freedom),
        pooled over every commit measured in two launches or more, and the runs' own spread."""
        from pytest_llmperf.core.verdict import pooled_launch_spread

        assert self.key is not None
        seen = {id(s): s for s in self.steps}.values()
        groups = [[[math.log(v) for v in g] for g in s.launches.get(self.key, [])] for s in seen]
        launches = sum(max(0, len(g) - 1) for g in groups)
        found = pooled_launch_spread(groups, "launches", launches=launches + 1)
        return (found.variance, found.dof) if found is not None else (0.0, 0.0)

    def _session(self, commit: str) -> dict[str, tuple[list[float], bool]] | str:
        """``pytest PYTEST_ARGS --perf-measure`` in a checkout of ``commit``: each point's runs,
        or why none could be measured."""
        if self.scratch is None:
            raise BisectError("no scratch directory for the steps' worktrees")
        tree = self.scratch / f"{commit[:12]}-{len(self.steps)}"
        self.git("worktree", "add", "--detach", "--force", str(tree), commit)
        try:
            if self.setup:
                done = subprocess.run(
                    self.setup, shell=True, cwd=tree, capture_output=True, text=True
                )
                if done.returncode != 0:
                    return f"--setup exited {done.returncode}: {_last_line(done)}"
            out = tree / ".llmperf-bisect.json"
            done = subprocess.run(
                [sys.executable, "-m", "pytest", *self.pytest_args, "--perf-measure",
                 "--perf-json", str(out), "-p", "no:randomly", "-p", "no:cacheprovider", "-q"],
                cwd=tree, capture_output=True, text=True,
            )  # fmt: skip
            if not out.exists():
                return f"pytest exited {done.returncode} and measured nothing: {_last_line(done)}"
            return _measured(json.loads(out.read_text())) or (
                f"pytest exited {done.returncode}; no point could be measured: {_last_line(done)}"
            )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=self.repo,
                           capture_output=True, check=False)  # fmt: skip

    def _got_worse_most(self, good: Step, bad: Step) -> str | None:
        """The point that got worse most over its noise: its change in the worse direction (a
        fall of throughput, a rise of latency) ÷ the standard error of the ends' launch means
        (a noisy tail or an improvement is not followed). None: nothing got worse."""
        best, score = None, 0.0
        for key in (k for k in good.launches if k in bad.launches):
            sign = 1.0 if self.lower.get(key) else -1.0
            a = [_log_mean(g) for g in good.launches[key]]
            b = [_log_mean(g) for g in bad.launches[key]]
            worse = sign * (statistics.fmean(b) - statistics.fmean(a))
            se = math.sqrt(_var(a) / len(a) + _var(b) / len(b)) or 1e-12
            if worse > 0 and worse / se > score:
                best, score = key, worse / se
        return best

    def _ends_precise(self, good: Step, bad: Step) -> None:
        """More launches of both ends while their shared error (the launch spread over each
        end's launches, as a step's place reads it) is over END_SHARE of the span."""
        assert self.key is not None
        while len(good.launches[self.key]) < MAX_END_LAUNCHES:
            between, _ = self._spread()
            span = abs(math.log(bad.mean(self.key) / good.mean(self.key)))  # type: ignore[operator]
            k_g, k_b = len(good.launches[self.key]), len(bad.launches[self.key])
            if math.sqrt(between * (1 / k_g + 1 / k_b) / 4) <= END_SHARE * span:
                return
            self.measure(good)
            self.measure(bad)

    def _ends_differ(self, good: Step, bad: Step) -> bool:
        """Whether the ends' launch means differ significantly (p < 0.01, two-sided, with the
        launch spread), with a launch more of each while they cannot tell (up to ``rounds``)."""
        from pytest_llmperf.core.student import t_quantile

        assert self.key is not None
        for _ in range(self.rounds):
            a = [_log_mean(g) for g in good.launches[self.key]]
            b = [_log_mean(g) for g in bad.launches[self.key]]
            between, dof = self._spread()
            se = math.sqrt(between * (1 / len(a) + 1 / len(b)))
            diff = statistics.fmean(b) - statistics.fmean(a)
            if dof >= 1 and abs(diff) > t_quantile(0.995, dof) * se:
                return True
            self.measure(good)
            self.measure(bad)
        return False

    def _say(self, step: Step, *, again: bool = False) -> None:
        if step.verdict == "skip":
            print(f"step {_short(step)} {step.subject!r}: skipped ({step.note})")
            return
        assert self.key is not None and step.interval is not None and step.x is not None
        low, high = step.interval
        launches = len(step.launches[self.key])
        print(f"{'confirmed' if again else 'step'} {_short(step)} {step.subject!r}: {self.key} "
              f"{step.mean(self.key):,.1f} ({launches} launch{'es' if launches > 1 else ''}), "
              f"{round(step.x, 2) + 0.0:.2f} of the way to bad "
              f"[{low:.2f}, {high:.2f}]: {step.verdict}")  # fmt: skip

    def to_json(self, found: Step | None) -> dict[str, Any]:
        seen: dict[str, Step] = {}
        for step in self.steps:
            seen.setdefault(step.commit, step)
        return {
            "key": self.key,
            "first_bad_commit": found.commit if found else None,
            "steps": [asdict(s) for s in seen.values()],
            "sessions": len(self.steps),
        }


def _position(
    step: list[list[float]],
    good: list[list[float]],
    bad: list[list[float]],
    spread: tuple[float, float],
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float]:
    """x and its ``confidence`` interval: 0 at the good end's launches' log mean, 1 at the bad
    end's. Which side of ½ a step is on is whether its mean is below or above the ends'
    midpoint, so the interval is that difference's: the launch spread over the step's k
    launches and each end's (1/k + 1/4 of each end's 1/k), and the runs' own spread pooled
    within launches, on Student's t with Welch-Satterthwaite degrees of freedom."""
    from pytest_llmperf.core.student import t_quantile

    s_mean = statistics.fmean(_log_mean(g) for g in step)
    g_mean = statistics.fmean(_log_mean(g) for g in good)
    b_mean = statistics.fmean(_log_mean(g) for g in bad)
    span = b_mean - g_mean
    x = (s_mean - g_mean) / span
    between, between_dof = spread
    logs = [[math.log(v) for v in g] for g in (*step, *good, *bad)]
    within_dof = sum(len(g) - 1 for g in logs)
    within = (
        sum(sum((v - statistics.fmean(g)) ** 2 for v in g) for g in logs) / within_dof
        if within_dof
        else 0.0
    )

    def weight(groups: list[list[float]]) -> tuple[float, float]:
        """(1/k, mean(1/n)/k): how a side's k launches of n runs weigh in the variance."""
        return 1 / len(groups), statistics.fmean(1 / len(g) for g in groups) / len(groups)

    (ls, rs), (lg, rg), (lb, rb) = weight(step), weight(good), weight(bad)
    launch_part = between * (ls + (lg + lb) / 4)
    runs_part = within * (rs + (rg + rb) / 4)
    parts = [(v, d) for v, d in ((launch_part, between_dof), (runs_part, within_dof)) if v > 0]
    variance = sum(v for v, _ in parts)
    if variance <= 0:
        return x, x, x
    dof = variance**2 / sum(v * v / d for v, d in parts if d > 0)
    half = t_quantile(1 - (1 - confidence) / 2, max(dof, 1.0)) * math.sqrt(variance) / abs(span)
    return x, x - half, x + half


def _log_mean(values: list[float]) -> float:
    return statistics.fmean(math.log(v) for v in values)


def _var(values: list[float]) -> float:
    return statistics.variance(values) if len(values) > 1 else 0.0


def _measured(data: dict[str, Any]) -> dict[str, tuple[list[float], bool]]:
    """Each measured point's runs, by ``profile key``, and whether lower is better: valid
    points of their own figure."""
    from pytest_llmperf.core.metrics import lower_is_better

    out = {}
    for point in data.get("points") or []:
        values = [v for v in point.get("values") or [] if isinstance(v, (int, float)) and v > 0]
        if point.get("gated_from") is None and not point.get("problems") and values:
            key = f"{point['profile']} {point['key']}"
            out[key] = (values, lower_is_better(str(point.get("metric"))))
    return out


def _short(step: Step) -> str:
    return step.commit[:10]


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    return shlex.quote(lines[-1][:200]) if lines else "(no output)"
