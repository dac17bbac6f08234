"""Judgements: what a check concludes about a point, as a value, from pure rules.

Every kind of verdict is a rule here (or, for the capacity, in core/capacity.py) that returns
one :class:`Judgement`: the outcome, the message the results and the summary show, the ratio
and p-value, a typed reference to the golden it was judged against, and, when the test fails,
what the failure adds to the message (how to fix it, what changed). The rules know nothing of
pytest: ``pytest_llmperf.fixtures.goldens.apply`` puts a judgement on its point and fails the
test unless it passes, the one place that does.

The rules: :func:`invalid` (the runs are not a measurement of the server),
:func:`against_golden` (a statistical verdict, core/verdict.py, said against its golden),
:func:`not_sustainable` and :func:`sustainable_now` (a rate level the server could not keep up
with, now or when its golden was recorded), :func:`with_drift` (the drift gate of the point's
series) and :func:`recorded`; golden/check.py adds those
about the golden file itself (MISSING, INCOMPARABLE, a refused replacement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pytest_llmperf.core.figures import figure_of
from pytest_llmperf.core.format import format_value
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.verdict import Margins, Verdict, describe


@dataclass(frozen=True)
class GoldenRef:
    """The golden a point was judged against: its file, and what the judgement read of it.
    The results JSON's ``golden`` is this, without what is unknown."""

    path: str | None = None
    mean: float | None = None
    n: int | None = None
    fail_margin: float | None = None
    warn_margin: float | None = None
    #: A rate level's: whether the server kept up when the golden was recorded.
    sustainable: bool | None = None
    #: A capacity's bracket.
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Judgement:
    """What a check concluded about one point."""

    outcome: Outcome
    message: str
    ratio: float | None = None
    p_value: float | None = None
    golden: GoldenRef | None = None
    #: The test's failure, when it is more than the message (INVALID lists the problems).
    failure: str | None = None
    #: Why the point is reported but not gated.
    ungated: str | None = None
    #: A message said as ``{head} — {OUTCOME}: {reason}`` keeps its parts, so that the rule
    #: that a figure is the host's (core/ungated.py) can say it again with its outcome changed.
    head: str | None = None
    reason: str | None = None

    @classmethod
    def said(
        cls, outcome: Outcome, head: str, reason: str, *, advice: str = "", **fields: Any
    ) -> Judgement:
        """``{head} — {OUTCOME}: {reason}``, and as the failure with ``advice`` after it."""
        message = f"{head} — {outcome.value}: {reason}"
        failure = f"{message}{advice}" if advice else None
        return cls(outcome, message, failure=failure, head=head, reason=reason, **fields)

    @property
    def passed(self) -> bool:
        return self.outcome.passed

    @property
    def failure_text(self) -> str:
        return self.failure or self.message


def below_floor(label: str, mean: float, floor: float, runs: int) -> Judgement | None:
    """An accept length under the profile's ``accept_length_floor``: a FAIL on the first night
    too, golden or not (SGLang's nightly holds its EAGLE-3 pairs to such a floor). None: at or
    above it."""
    if mean >= floor:
        return None
    return Judgement(
        Outcome.FAIL,
        f"{label}: {mean:.2f} tok/step (mean of {runs} runs) is below the profile's "
        f"accept_length_floor {floor:g} by {floor - mean:.2f} — FAIL: the drafter's guesses "
        "are accepted less often than this profile promises (a changed draft model, a workload "
        "whose text the drafter does not predict, or a broken draft path)",
    )


def invalid(label: str, what: str, problems: Sequence[str]) -> Judgement:
    """The runs are not a measurement of the server: ``what`` they are not, and why."""
    return Judgement(
        Outcome.INVALID,
        f"{label}: INVALID",
        failure=f"{label}: {what}:\n  " + "\n  ".join(problems),
    )


def against_golden(
    label: str,
    measured: float,
    metric: str,
    verdict: Verdict,
    golden: GoldenRef,
    margins: Margins,
    *,
    ungated: str | None = None,
    extra: Sequence[str] = (),
    changes: Sequence[str] = (),
) -> Judgement:
    """A statistical verdict on ``metric`` (a figure of core/figures.py: its unit and its
    words) said against its golden: ``extra``, lines the history adds (the drift gate, the
    night-to-night noise); ``changes``, the soft fingerprint keys that changed since the
    golden, which a failure lists (never blocking)."""
    assert golden.mean is not None
    figure = figure_of(metric)
    message = describe(
        label,
        measured,
        golden.mean,
        verdict,
        margins.fail,
        margins.warn,
        unit=figure.unit,
        why=ungated,
        words=figure.words,
    )
    if metric == "accept_length" and verdict.smallest_fail is not None:
        # The acceptance channel says what it could have seen (docs/how-to/quality.md).
        message += f"; the smallest drop these runs could FAIL: {verdict.smallest_fail * 100:.1f} %"
    message += "".join(f"\n  {line}" for line in extra)
    changed = "".join(f"\n    {line}" for line in changes)
    return Judgement(
        verdict.outcome,
        message,
        ratio=verdict.ratio,
        p_value=verdict.p,
        golden=replace(golden, fail_margin=margins.fail, warn_margin=margins.warn),
        failure=message
        + (f"\n  Changed since the golden (not blocking):{changed}" if changed else ""),
        ungated=ungated,
    )


def not_gated_for_too_few_values(
    verdict: Verdict, few: int, needed: int, q: str
) -> tuple[Verdict, str]:
    """A percentile whose runs had too few values to estimate it is reported, never failed:
    one slow request moves such a "p99" by all of its value."""
    return not_gated(
        verdict,
        f"reported, not gated (a run had only {few} values, too few for a {q}, which needs "
        f"{needed}; lengthen window_s or min_requests to gate it)",
    )


def not_gated(verdict: Verdict, why: str) -> tuple[Verdict, str]:
    """A figure that says something of the point but cannot fail it (``why`` says what): a
    significant fall is a WARN; a rise, or one the runs cannot tell from noise, passes."""
    if verdict.undecided is not None:  # no launch for a figure that cannot fail, nor a WARN
        past = verdict.undecided != "collapse"  # for a collapse its runs could not rule out
        return replace(verdict, outcome=Outcome.WARN if past else Outcome.PASS, undecided=None), why
    if verdict.inconclusive or verdict.outcome is Outcome.UNCERTAIN:
        return replace(verdict, outcome=Outcome.PASS, inconclusive=False), why
    if verdict.outcome is Outcome.FAIL:
        return replace(verdict, outcome=Outcome.WARN), why
    if verdict.outcome is Outcome.IMPROVED:  # no golden of this figure's to refresh for it
        return replace(verdict, outcome=Outcome.PASS), why
    return verdict, why


def reported_not_gated(judgement: Judgement, why: str) -> Judgement:
    """A judgement on a figure that cannot fail its point (``why`` says what, see
    core/ungated.py): a FAIL is a WARN, an IMPROVED (no golden of the server's to refresh) a
    PASS, and the message says why."""
    outcome = {Outcome.FAIL: Outcome.WARN, Outcome.IMPROVED: Outcome.PASS}.get(
        judgement.outcome, judgement.outcome
    )
    if judgement.head is not None and judgement.reason is not None:
        message = f"{judgement.head} — {outcome.value}: {judgement.reason}; {why}"
    else:
        message = f"{judgement.message}; {why}"
    failure = (
        judgement.failure.replace(judgement.message, message, 1)
        if judgement.failure is not None
        else None
    )
    return replace(
        judgement, outcome=outcome, message=message, failure=failure, ungated=why, reason=None
    )


def not_sustainable(label: str, why: str, rate: float, golden: GoldenRef) -> Judgement:
    """A rate level the server could not keep up with is judged on that alone (its figures are
    those of a growing queue, not of the server): sustainable in its golden and not now, FAIL;
    not sustainable in its golden either, reported and not gated."""
    if golden.sustainable is False:
        return Judgement(
            Outcome.PASS,
            f"{label}: PASS (not gated) — NOT SUSTAINABLE, as in its golden: {why}",
            golden=golden,
            ungated="not sustainable, as when its golden was recorded",
        )
    message = (
        f"{label}: FAIL — NOT SUSTAINABLE: {why}. It was sustainable in its golden "
        f"({golden.path}): the server no longer keeps up with {rate:g} requests/s"
    )
    return Judgement(Outcome.FAIL, message, golden=golden)


def sustainable_now(label: str, golden: GoldenRef, update_command: str) -> Judgement:
    """A rate level the server keeps up with now, where its golden was a queue's figures."""
    return Judgement(
        Outcome.IMPROVED,
        f"{label}: IMPROVED — sustainable now; its golden was not (a queue's figures, not "
        f"comparable). Record it: {update_command}",
        golden=golden,
    )


def recorded(label: str, measured: float, unit: str, path: str) -> Judgement:
    """Under --perf-update: queued for its golden file, written at the end of the run."""
    return Judgement(
        Outcome.RECORDED,
        f"{label}: recorded {format_value(measured, unit, bare=True)} into {path}",
        golden=GoldenRef(path=path),
    )


def with_drift(
    verdict: Verdict, drift: Mapping[str, Any] | None, margins: Margins
) -> tuple[Verdict, list[str], str | None]:
    """The verdict with the drift gate's word on it, the line it adds to the message, and how
    the drift gated the point ("FAIL", "WARN"; None: it did not). A confirmed change since the
    golden's last recording WARNs beyond the warn margin and FAILs beyond the fail margin, even
    when tonight passes its golden: a −8 % step or a −2 %-a-night drift never crosses a 15 %
    fail margin in one night. (The nights' own spread is the verdict's launch spread, see
    core/verdict.py: a session shifted as far as nights have been shifted before is no FAIL.)"""
    if not (drift and drift["worse"] and abs(drift["change"]) >= margins.warn):
        return verdict, [], None
    # A latency's margins are its rise, a throughput's its fall: |change| either way.
    fail = abs(drift["change"]) >= margins.fail
    lines = [drift_line(drift, "fail" if fail else "warn", margins)]
    if verdict.outcome.passed:
        outcome = Outcome.FAIL if fail else Outcome.WARN
        if outcome is Outcome.FAIL or verdict.outcome is not Outcome.WARN:
            verdict = replace(verdict, outcome=outcome)
    return verdict, lines, "FAIL" if fail else "WARN"


def drift_line(drift: Mapping[str, Any], which: str, margins: Margins) -> str:
    low, high = drift["interval"]
    commit = f", commit {drift['first_bad_commit'][:10]}" if drift.get("first_bad_commit") else ""
    changed = "; ".join(drift["what_changed"]) or "no fingerprint key, version or commit"
    margin = margins.fail if which == "fail" else margins.warn
    return (
        f"drift: the series moved {drift['change'] * 100:+.1f} % ({low * 100:+.1f} to "
        f"{high * 100:+.1f} %, 95 %) since run {drift['first_bad_run']} "
        f"({drift['first_bad_date']} UTC{commit}), beyond the {margin * 100:g} % {which} margin; "
        f"last good run {drift['last_good_run']}; what changed then: {changed}"
    )
