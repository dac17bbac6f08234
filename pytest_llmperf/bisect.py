"""``python -m pytest_llmperf bisect``: the commit that made a point slower, by re-measuring.

``bisect --good REV --bad REV [--repo DIR] [--setup CMD] -- PYTEST_ARGS`` walks the commits
from REV good to REV bad (``git rev-list --ancestry-path``) as ``git bisect`` does, but each
step is a measurement, not a yes or no: at every commit it checks the commit out in a worktree
of its own, runs ``--setup`` there (an install, a build), then ``pytest PYTEST_ARGS
--perf-measure`` there, and reads the points' runs from the results JSON.

Both ends are measured first. The point that moved most between them is the one bisected (name
it with ``-k`` in the pytest arguments to choose). A step's place between the ends is
``x = (log step − log good) ÷ (log bad − log good)``, 0 at the good end's mean and 1 at the bad
end's, with a 95 % interval from Welch's t on the logs of the runs. Wholly below ½: good; wholly
above: bad; straddling ½: the step is measured again (a fresh launch, whose runs join the
step's), up to ``--rounds`` times, then decided by its estimate, and said so. A step whose setup
fails or whose session measures nothing is skipped, as ``git bisect skip`` does, and the search
takes the candidate nearest the middle that is left.

Exit 0 with the first bad commit; 1 when skipped commits leave several candidates, or the ends
do not differ; 2 on a usage error (a revision that does not exist, no git repository).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Where a step stands between the ends: good below, bad above.
MIDDLE = 0.5
CONFIDENCE = 0.95


class BisectError(Exception):
    """A usage error: says what and how to fix it, in one line."""


@dataclass
class Step:
    """One commit measured: its runs of each point, and where it stands."""

    commit: str
    subject: str
    values: dict[str, list[float]] = field(default_factory=dict)
    verdict: str = ""  # good, bad, skip; "good (by its estimate)" when still undecided
    x: float | None = None
    interval: tuple[float, float] | None = None
    note: str = ""

    def mean(self, key: str) -> float | None:
        runs = self.values.get(key)
        return math.exp(sum(map(math.log, runs)) / len(runs)) if runs else None


def add_parser(commands: Any) -> None:
    bisect = commands.add_parser(
        "bisect",
        help="Find the commit that made a point slower, measuring each step as the gate does.",
    )
    bisect.add_argument("--good", required=True, metavar="REV", help="a revision that was fast")
    bisect.add_argument("--bad", required=True, metavar="REV", help="a revision that is slow")
    bisect.add_argument("--repo", type=Path, default=Path("."), help="the git repository (.)")
    bisect.add_argument("--setup", metavar="CMD", help="run in each step's checkout first")
    bisect.add_argument("--rounds", type=int, default=3, help="sessions a step may take (3)")
    bisect.add_argument("--json", type=Path, metavar="PATH", help="every step's figures, as JSON")
    bisect.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's")


def main(args: argparse.Namespace) -> int:
    pytest_args = [a for a in args.pytest_args if a != "--"] or ["perf_suites"]
    try:
        run = Bisection(args.repo.resolve(), args.setup, pytest_args, max(1, args.rounds))
        commits = run.commits(args.good, args.bad)
    except BisectError as exc:
        print(f"pytest-llmperf bisect: {exc}", file=sys.stderr)
        return 2
    found = run.search(commits)
    if args.json:
        args.json.write_text(json.dumps(run.to_json(found), indent=2) + "\n")
    return 0 if found is not None else 1


@dataclass
class Bisection:
    repo: Path
    setup: str | None
    pytest_args: list[str]
    rounds: int
    steps: list[Step] = field(default_factory=list)
    key: str | None = None
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="llmperf-bisect-")))

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
            self.measure(end)
            if end.verdict == "skip":
                print(f"the {'good' if end is good else 'bad'} end cannot be measured: {end.note}")
                return None
        self.key = self._moved_most(good, bad)
        if self.key is None:
            print("the good and the bad end measured no point in common: nothing to bisect")
            return None
        change = bad.mean(self.key) / good.mean(self.key) - 1  # type: ignore[operator]
        print(f"bisecting {self.key}: good {_short(good)} {good.mean(self.key):,.1f}, "
              f"bad {_short(bad)} {bad.mean(self.key):,.1f} ({change * 100:+.1f} %)")  # fmt: skip
        if not self._ends_differ(good, bad):
            print("the ends do not differ significantly: nothing to bisect")
            return None
        good.verdict, bad.verdict = "good", "bad"
        lo, hi = 0, len(commits) - 1  # the last known good, the first known bad
        while hi - lo > 1:
            step = self._next(commits, lo, hi)
            if step is None:
                left = [_short(c) for c in commits[lo + 1 : hi + 1]]
                print(f"skipped commits leave {len(left)} candidates: {', '.join(left)}")
                return None
            self.measure(step)
            while step.verdict == "" and self._rounds(step) < self.rounds:
                self.measure(step)
            self.judge(step, final=True)
            self._say(step)
            if step.verdict.startswith("good"):
                lo = commits.index(step)
            elif step.verdict.startswith("bad"):
                hi = commits.index(step)
        first = commits[hi]
        before, after = commits[lo].mean(self.key), first.mean(self.key)
        print(f"first bad commit: {first.commit} {first.subject!r}: {self.key} "
              f"{before:,.1f} → {after:,.1f} ({(after / before - 1) * 100:+.1f} %), "  # type: ignore[operator]
              f"after {len(self.steps) - 2} step(s)")  # fmt: skip
        return first

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
        for key, values in found.items():
            step.values.setdefault(key, []).extend(values)
        if self.key is not None:
            self.judge(step, final=False)

    def judge(self, step: Step, *, final: bool) -> None:
        """Where the step stands between the ends, and so its verdict ('' while undecided)."""
        if step.verdict == "skip" or self.key is None:
            return
        good, bad = self.steps[0], self.steps[1]
        runs = step.values.get(self.key)
        if not runs:
            step.verdict, step.note = "skip", f"it measured no {self.key}"
            return
        x, low, high = _position(runs, good.values[self.key], bad.values[self.key])
        step.x, step.interval = x, (low, high)
        if high < MIDDLE:
            step.verdict = "good"
        elif low > MIDDLE:
            step.verdict = "bad"
        elif final:
            step.verdict = (
                f"{'bad' if x > MIDDLE else 'good'} (by its estimate: its interval holds ½)"
            )

    def _session(self, commit: str) -> dict[str, list[float]] | str:
        """``pytest PYTEST_ARGS --perf-measure`` in a checkout of ``commit``: each point's runs,
        or why none could be measured."""
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

    def _moved_most(self, good: Step, bad: Step) -> str | None:
        shared = [k for k in good.values if k in bad.values]
        return max(shared, key=lambda k: abs(math.log(bad.mean(k) / good.mean(k))), default=None)  # type: ignore[operator]

    def _ends_differ(self, good: Step, bad: Step) -> bool:
        from pytest_llmperf.core.student import welch

        assert self.key is not None
        for _ in range(self.rounds):
            a = [math.log(v) for v in good.values[self.key]]
            b = [math.log(v) for v in bad.values[self.key]]
            if len(a) > 1 and len(b) > 1 and welch(a, b).p_two_sided() < 0.01:
                return True
            self.measure(good)
            self.measure(bad)
        return False

    def _say(self, step: Step) -> None:
        if step.verdict == "skip":
            print(f"step {_short(step)} {step.subject!r}: skipped ({step.note})")
            return
        assert self.key is not None and step.interval is not None and step.x is not None
        low, high = step.interval
        print(f"step {_short(step)} {step.subject!r}: {self.key} {step.mean(self.key):,.1f} "
              f"(n={len(step.values[self.key])}), {round(step.x, 2) + 0.0:.2f} of the way to bad "
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


def _position(runs: list[float], good: list[float], bad: list[float]) -> tuple[float, float, float]:
    """x and its 95 % interval: 0 at the good end's mean, 1 at the bad end's (Welch's t on the
    logs of the step's runs against the good end's; exact where neither side spreads)."""
    from statistics import fmean

    from pytest_llmperf.core.student import welch

    logs, g = [math.log(v) for v in runs], [math.log(v) for v in good]
    span = fmean(math.log(v) for v in bad) - fmean(g)
    diff = fmean(logs) - fmean(g)
    low = high = diff
    if len(logs) > 1 and len(g) > 1 and (max(logs) > min(logs) or max(g) > min(g)):
        low, high = welch(logs, g).interval(CONFIDENCE)
    ends = sorted((low / span, high / span))
    return diff / span, ends[0], ends[1]


def _measured(data: dict[str, Any]) -> dict[str, list[float]]:
    """Each measured point's runs, by ``profile key``: valid points of their own figure."""
    out = {}
    for point in data.get("points") or []:
        values = [v for v in point.get("values") or [] if isinstance(v, (int, float)) and v > 0]
        if point.get("gated_from") is None and not point.get("problems") and values:
            out[f"{point['profile']} {point['key']}"] = values
    return out


def _short(step: Step) -> str:
    return step.commit[:10]


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    return shlex.quote(lines[-1][:200]) if lines else "(no output)"
