"""Accuracy beside speed: a task set with exact answers, checked per item, and its gates.

A task file is JSONL, one item a line: ``question`` (the prompt), ``answer`` (the exact answer,
a string or a number) and optionally ``category``. The answer is extracted from the response
by the "last number" rule (GSM8K's: the last number in the text, commas dropped) and compared
with the item's answer. Nothing is fetched at run time: the file is the user's; the built-in set
(``data/arithmetic.jsonl``) needs no download.

The same items are asked at temperature 0 every night, so an unchanged server answers each item
as it did: the per-item outcomes are paired. Against the golden's own outcomes (the same
items), and between a speculative profile and its base in the same run, the gate is McNemar's
exact test on the discordant items (right then, wrong now against wrong then, right now); only
where the items differ from the golden's does it fall back to an exact binomial test of
tonight's count against the golden's rate. A FAIL is a significant drop (one-sided, p <
FAIL_ALPHA) of at least ``accuracy_margin``; any other drop significant at ALPHA is a WARN. A drop
that is not significant is no finding, however many points it is on few items: one item of
eight answered the other way is p = 0.5. Paired, a FAIL needs at least :func:`least_flips`
items right then and wrong now with none the other way, so the smallest drop ``n`` items can
FAIL is that many over ``n`` (:func:`smallest_failing_drop`), and the message says it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import PendingRun, Point

#: A WARN's significance, and a FAIL's (as the speed gate's): at 200 items and 1-2 % of them
#: answered the other way from one launch to the next, p < 0.01 FAILed 0.4-2 % of unchanged
#: nights, p < 0.001 none of 20,000 (benchmarks/accuracy_power.py).
ALPHA = 0.01
FAIL_ALPHA = 0.001
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class TaskError(Exception):
    """A task file that cannot be used: says the file, the line and the fix."""


@dataclass(frozen=True)
class Task:
    question: str
    answer: str
    category: str | None = None


def normalized(answer: str) -> str:
    """``"1,234.0"`` → ``"1234"``: commas dropped, a whole number without its decimals."""
    text = answer.strip().replace(",", "").rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() else repr(value)


def last_number(text: str) -> str | None:
    """The last number in ``text`` (the answer extractor), normalized; None when there is none."""
    found = _NUMBER.findall(text)
    return normalized(found[-1]) if found else None


def parse_tasks(text: str, path: Path | str) -> list[Task]:
    """The items of a JSONL task file's ``text`` (read from ``path``); a TaskError names the
    line and the field to fix."""
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise TaskError(f"{path}:{number}: not a JSON object ({exc})") from None
        if not isinstance(item, dict):
            raise TaskError(f"{path}:{number}: not a JSON object")
        question, answer = item.get("question"), item.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise TaskError(f"{path}:{number}: 'question' must be a non-empty string")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise TaskError(f"{path}:{number}: 'answer' must be a string or a number")
        category = item.get("category")
        if category is not None and not isinstance(category, str):
            raise TaskError(f"{path}:{number}: 'category' must be a string when given")
        tasks.append(Task(question, normalized(str(answer)), category))
    if not tasks:
        raise TaskError(f"{path}: no items (one JSON object a line: question, answer)")
    return tasks


def tasks_digest(tasks: Sequence[Task]) -> str:
    """Identifies the items (questions and answers, in order): goldens pair items only if equal."""
    text = "\n".join(f"{t.question}\t{t.answer}" for t in tasks)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mcnemar_p(worse: int, better: int) -> float:
    """One-sided exact McNemar: the chance of at least ``worse`` items right-then-wrong among
    ``worse + better`` discordant ones, were either direction as likely."""
    from scipy.stats import binom

    n = worse + better
    return float(binom.sf(worse - 1, n, 0.5)) if n else 1.0


def least_flips(fail_alpha: float = FAIL_ALPHA) -> int:
    """The fewest items right then and wrong now, with none the other way, that McNemar finds
    significant at ``fail_alpha``: p = 0.5^k (10 at 0.001)."""
    k = 1
    while 0.5**k >= fail_alpha:
        k += 1
    return k


def smallest_failing_drop(items: int, fail_alpha: float = FAIL_ALPHA) -> float | None:
    """The smallest drop (a share of the items) that ``items`` paired items can FAIL at
    ``fail_alpha``; None: too few items for any drop to FAIL."""
    k = least_flips(fail_alpha)
    return k / items if items >= k else None


def binomial_p(correct: int, n: int, rate: float) -> float:
    """One-sided exact binomial: the chance of at most ``correct`` of ``n`` at ``rate``."""
    from scipy.stats import binom

    return float(binom.cdf(correct, n, min(max(rate, 0.0), 1.0)))


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (two-sided)."""
    from scipy.stats import norm

    if n == 0:
        return 0.0, 1.0
    z = float(norm.ppf(0.5 + confidence / 2))
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class AccuracyVerdict:
    outcome: Outcome
    accuracy: float
    reference: float
    p_value: float
    test: str  # "McNemar" (paired items) or "binomial" (the reference's rate)
    items: int = 0
    worse: int = 0  # discordant: right in the reference, wrong now
    better: int = 0  # discordant: wrong in the reference, right now

    @property
    def drop(self) -> float:
        return self.reference - self.accuracy


def decide(
    outcomes: Sequence[bool],
    reference: Sequence[bool] | None,
    *,
    reference_rate: float,
    margin: float,
    alpha: float = ALPHA,
    fail_alpha: float = FAIL_ALPHA,
) -> AccuracyVerdict:
    """Tonight's per-item ``outcomes`` against the reference's (the same items: McNemar), or,
    when the items cannot be paired, against ``reference_rate`` (exact binomial)."""
    n = len(outcomes)
    correct = sum(outcomes)
    accuracy = correct / n if n else 0.0
    if reference is not None and len(reference) == n:
        worse = sum(r and not o for r, o in zip(reference, outcomes))
        better = sum(o and not r for r, o in zip(reference, outcomes))
        rate = sum(reference) / n if n else 0.0
        p, test = mcnemar_p(worse, better), "McNemar"
    else:
        worse = better = 0
        rate = reference_rate
        p, test = binomial_p(correct, n, rate), "binomial"
    drop = rate - accuracy
    if drop > 0 and drop >= margin and p < fail_alpha:
        outcome = Outcome.FAIL
    elif drop > 0 and p < alpha:
        outcome = Outcome.WARN
    else:
        outcome = Outcome.PASS
    return AccuracyVerdict(outcome, accuracy, rate, p, test, n, worse, better)


def describe(label: str, v: AccuracyVerdict, margin: float, against: str) -> str:
    """``sim-eagle3: accuracy 0.850 (170/200) vs 0.900 golden (−5.0 points, McNemar p=0.0002:
    12 right then wrong now, 2 the other way) — FAIL: ...``."""
    points = (v.accuracy - v.reference) * 100
    pairs = (
        f": {v.worse} right then wrong now, {v.better} the other way" if v.test == "McNemar" else ""
    )
    why = {
        Outcome.FAIL: f"significantly lower (p < {FAIL_ALPHA:g}) by at least the "
        f"{margin * 100:g}-point margin",
        Outcome.WARN: (
            f"significantly lower (p < {ALPHA:g}), not surely (p < {FAIL_ALPHA:g})"
            if v.drop >= margin
            else f"significantly lower, within the {margin * 100:g}-point margin"
        ),
        Outcome.PASS: "no significant drop",
    }[v.outcome]
    n = v.items
    low, high = wilson_interval(round(v.accuracy * n), n)
    return (
        (
            f"{label}: accuracy {v.accuracy:.3f} of {n} items (95 % Wilson [{low:.3f}, {high:.3f}]) "
            f"vs {v.reference:.3f} {against} ({points:+.1f} points, {v.test} p={v.p_value:.2g}"
            f"{pairs}) — {v.outcome.value}: {why}{_reach(v)}"
        )
        .replace("+-", "\u2212")
        .replace("(-", "(\u2212")
    )


def _reach(v: AccuracyVerdict) -> str:
    """What the item count can FAIL, paired: the smallest drop, or that none can."""
    if v.test != "McNemar":
        return ""
    k = least_flips()
    smallest = smallest_failing_drop(v.items)
    if smallest is None:
        return (
            f"; {v.items} items cannot FAIL (p < {FAIL_ALPHA:g} needs at least {k} right then "
            f"wrong now, none back): ask {k} or more"
        )
    return (
        f"; the smallest drop {v.items} items can FAIL is {smallest * 100:.1f} points ({k} right "
        f"then wrong now, none back)"
    )


def by_category(tasks: Sequence[Task], outcomes: Sequence[bool]) -> dict[str, dict[str, Any]]:
    """Accuracy per category of the task set (items without one under ``""``)."""
    out: dict[str, dict[str, Any]] = {}
    for task, ok in zip(tasks, outcomes):
        entry = out.setdefault(task.category or "", {"items": 0, "correct": 0})
        entry["items"] += 1
        entry["correct"] += int(ok)
    for entry in out.values():
        entry["accuracy"] = entry["correct"] / entry["items"]
    return out


@dataclass(kw_only=True)
class AccuracyPoint(Point):
    """A profile's accuracy on a task set: per-item outcomes, gated against its golden's."""

    tasks: tuple[Task, ...]
    outcomes: tuple[bool, ...]
    responses: tuple[str, ...] = ()
    source: str = "built-in arithmetic"
    launch_id: str | None = None

    @property
    def key(self) -> str:
        return f"{self.node.without_params}[accuracy]"

    @property
    def label(self) -> str:
        return f"{self.profile} accuracy"

    @property
    def correct(self) -> int:
        return sum(self.outcomes)

    @property
    def accuracy(self) -> float:
        return self.correct / len(self.outcomes) if self.outcomes else 0.0

    @property
    def unit(self) -> str:
        return "accuracy"

    @property
    def tally(self) -> str:
        """``51 of 60 right``."""
        return f"{self.correct} of {len(self.outcomes)} right"

    @property
    def values(self) -> tuple[float, ...]:
        """What the golden and the history hold: (right + ½) ÷ (items + 1), the accuracy kept
        off 0 (a model that answers none right, such as a random-weight one, is a baseline
        too, and the store holds only figures above 0). Messages use the exact counts."""
        return ((self.correct + 0.5) / (len(self.outcomes) + 1),)

    def extra_golden_fields(self) -> dict[str, Any]:
        return {
            "items": len(self.outcomes),
            "correct": self.correct,
            "tasks": tasks_digest(self.tasks),
            "outcomes": "".join("1" if o else "0" for o in self.outcomes),
        }

    def pending_runs(self) -> list[PendingRun]:
        return [PendingRun(self.values[0], self.launch_id, len(self.outcomes), None, None)]

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "test": self.test,
            "source": self.source,
            "items": len(self.outcomes),
            "correct": self.correct,
            "accuracy": self.accuracy,
            "wilson_95": list(wilson_interval(self.correct, len(self.outcomes))),
            "by_category": by_category(self.tasks, self.outcomes),
            "wrong": [
                {"question": t.question, "answer": t.answer, "response": r}
                for t, o, r in zip(
                    self.tasks, self.outcomes, self.responses or [""] * len(self.tasks)
                )
                if not o
            ][:20],
            "verdict": self.verdict_json,
            "golden": self.golden_json,
            "p_value": self.p_value,
            "message": self.message,
        }
