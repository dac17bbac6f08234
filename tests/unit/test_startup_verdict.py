"""The startup verdict: one launch's seconds against the golden's launches (core/startup.py)."""

from __future__ import annotations

import pytest

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.startup import judge
from pytest_llmperf.core.verdict import Margins

MARGINS = Margins(fail=0.30, warn=0.10)
GOLDEN = [100.0, 104.0]  # two launches, 4 % apart


@pytest.mark.parametrize(
    "seconds, outcome",
    [(103.0, Outcome.PASS), (125.0, Outcome.PASS), (150.0, Outcome.WARN),
     (250.0, Outcome.FAIL), (60.0, Outcome.IMPROVED)],
)  # fmt: skip
def test_one_launch_against_the_goldens_launches(seconds, outcome):
    verdict = judge(seconds, GOLDEN, MARGINS, startup_cv=0.1)
    assert verdict.outcome is outcome, verdict
    assert verdict.lower_is_better and verdict.n_new == 1 and verdict.n_golden == 2
    assert verdict.ratio == pytest.approx(seconds / 102.0)


def test_a_noisier_launch_history_needs_a_larger_slowdown_to_fail():
    assert judge(250.0, GOLDEN, MARGINS, startup_cv=0.1).outcome is Outcome.FAIL
    # Launches known to differ by 40 %: 2.5x is not beyond their noise at the FAIL's level.
    assert judge(250.0, GOLDEN, MARGINS, startup_cv=0.4).outcome is not Outcome.FAIL
    # One golden launch: the prior alone says how far a launch moves, and the golden's own
    # mean is one launch's: 2x only WARNs (where two launches FAIL it), 2.5x FAILs.
    assert judge(200.0, GOLDEN, MARGINS, startup_cv=0.1).outcome is Outcome.FAIL
    assert judge(200.0, [100.0], MARGINS, startup_cv=0.1).outcome is Outcome.WARN
    assert judge(250.0, [100.0], MARGINS, startup_cv=0.1).outcome is Outcome.FAIL
