"""What each outcome means for the test, the summary's colour and its order."""

import pytest

from pytest_llmperf.core.outcome import Outcome


@pytest.mark.parametrize(
    ("outcome", "passed", "color", "noteworthy"),
    [
        (Outcome.FAIL, False, "red", True),
        (Outcome.INVALID, False, "red", True),
        (Outcome.INCOMPARABLE, False, "red", True),
        (Outcome.MISSING, False, "red", True),
        (Outcome.UNCERTAIN, False, None, True),
        (Outcome.WARN, True, "yellow", True),
        (Outcome.IMPROVED, True, "green", True),
        (Outcome.PASS, True, None, False),
        (Outcome.RECORDED, True, None, False),
        (Outcome.MEASURED, True, None, False),
    ],
)
def test_outcomes(outcome, passed, color, noteworthy):
    assert (outcome.passed, outcome.color, outcome.noteworthy) == (passed, color, noteworthy)
    assert f"{outcome}" == str(outcome) == outcome.value


def test_most_urgent_first():
    ranked = sorted(Outcome, key=lambda o: o.rank)
    assert ranked[:4] == [Outcome.FAIL, Outcome.INVALID, Outcome.INCOMPARABLE, Outcome.MISSING]
    assert ranked[-1] is Outcome.MEASURED
