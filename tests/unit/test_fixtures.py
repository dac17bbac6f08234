"""The fixtures' checks on hand-built points and goldens: no server is needed to decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import SpeedupPoint
from pytest_llmperf.core.verdict import Margins
from pytest_llmperf.fixtures import LLMPerfFixture, LLMPerfSpeedupFixture, MarkerOptions, margins
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.profiles import Profile
from pytest_llmperf.session import LLMPerfSession
from pytest_llmperf.settings import Mode, Settings
from tests.builders import TEST, golden_file, measured

HARD = {"hardware": {"key": "sim"}}
SPEEDUP_TEST = "perf_suites/test_throughput.py::test_speculative_speedup[sim-spec-vs-sim-base-C4]"


@pytest.fixture
def session(tmp_path: Path) -> LLMPerfSession:
    source = tmp_path / "profiles.toml"
    base = Profile("sim-base", source)
    spec = Profile(
        "sim-spec", source, args=("--speculative-algorithm", "EAGLE3"), base_profile="sim-base"
    )
    state = LLMPerfSession(
        Settings(baseline_dir=tmp_path / "baselines"), None, [base, spec], tmp_path / "run"
    )
    for name in ("sim-base", "sim-spec"):
        state.fingerprints[name] = Fingerprint(dict(HARD), {})
    return state


def golden(
    session: LLMPerfSession, profile: str, key: str, values: list[float], workload: dict
) -> None:
    session.goldens[session.golden_file(profile)] = golden_file(
        {key: values}, hard=HARD, workload=workload
    )


@pytest.mark.parametrize(
    ("marker", "kwargs", "expected"),
    [
        (MarkerOptions(), {}, Margins(0.15, 0.05)),
        (MarkerOptions(fail_margin=0.3), {}, Margins(0.3, 0.05)),
        (MarkerOptions(0.3, 0.1), {"warn_margin": 0.02}, Margins(0.3, 0.02)),
    ],
)
def test_margins_profile_then_marker_then_the_checks_arguments(marker, kwargs, expected):
    assert margins(Profile("p", Path("x")), marker, **kwargs) == expected


@pytest.mark.parametrize(
    ("values", "outcome"),
    [([100.0, 101.0, 99.0], Outcome.PASS), ([60.0, 61.0, 59.0], Outcome.FAIL)],
)
def test_llmperf_check_decides_against_the_golden(session, values, outcome):
    """One launch judged (no confirmation launch tonight): a 40 % drop is a FAIL."""
    session.settings = Settings(baseline_dir=session.settings.baseline_dir, confirm_launches=0)
    point = measured("sim-base", 4, values)
    golden(session, "sim-base", point.key, [99.0, 100.0, 101.0] * 3 + [100.0], point.workload)
    fixture = LLMPerfFixture(
        session.profile("sim-base"),
        server=None,
        session=session,  # type: ignore[arg-type]
        nodeid=point.test,
    )
    if outcome is Outcome.FAIL:
        with pytest.raises(pytest.fail.Exception, match="sim-base C=4: 60.0 tok/s vs golden 100.0"):
            fixture.check(point)
    else:
        fixture.check(point)
    assert point.outcome is outcome


def test_a_drop_one_launch_s_luck_could_make_waits_for_a_fresh_launch(session):
    """With a confirmation launch to make, the same 40 % drop against a golden of one launch
    (whose spread only the profile's 3 % launch_cv speaks for) is not decided on this launch:
    it is CONFIRMING (the test passes) and waits for the profile's fresh launch."""
    point = measured("sim-base", 4, [60.0, 61.0, 59.0])
    golden(session, "sim-base", point.key, [99.0, 100.0, 101.0] * 3 + [100.0], point.workload)
    fixture = LLMPerfFixture(session.profile("sim-base"), None, session, point.test)  # type: ignore[arg-type]
    fixture.check(point)
    assert point.outcome is Outcome.CONFIRMING and point.verdict.passed
    assert "one launch's luck could do it" in (point.message or "")
    assert [p.point for p in session.to_confirm["sim-base"]] == [point]


def test_llmperf_check_fails_an_invalid_point_before_looking_at_goldens(session):
    point = measured("sim-base", 4, [100.0], problems=("1 of 16 requests failed; first: HTTP 500",))
    fixture = LLMPerfFixture(session.profile("sim-base"), None, session, point.test)  # type: ignore[arg-type]
    with pytest.raises(
        pytest.fail.Exception, match="INVALID, output_tok_s 100.0 is not a measurement"
    ):
        fixture.check(point)
    assert point.verdict is Outcome.INVALID and not session.pending


def test_llmperf_check_under_update_queues_the_point(session):
    session.settings = Settings(baseline_dir=session.settings.baseline_dir, mode=Mode.RECORD)
    point = measured("sim-base", 4, [100.0, 102.0])
    LLMPerfFixture(session.profile("sim-base"), None, session, point.test).check(point)  # type: ignore[arg-type]
    (pending,) = session.pending.values()
    assert point.outcome is Outcome.RECORDED and [r.value for r in pending.points[0].runs] == [
        100.0,
        102.0,
    ]


def speedup_fixture(session: LLMPerfSession) -> LLMPerfSpeedupFixture:
    return LLMPerfSpeedupFixture(
        session.profile("sim-spec"), session.profile("sim-base"), 4, session, SPEEDUP_TEST
    )


def test_speedup_samples_pair_the_runs_and_pass_against_the_golden_speedup(session):
    session.points += [
        measured("sim-spec", 4, [115.0, 120.0, 125.0]),
        measured("sim-base", 4, [100.0, 100.0, 100.0]),
    ]
    workload = {
        "of": f"{TEST}[C=4]",
        "base_profile": "sim-base",
        "base_fingerprint": session.fingerprints["sim-base"].comparability_hash,
    }
    golden(
        session,
        "sim-spec",
        "perf_suites/test_throughput.py::test_speculative_speedup[C=4]",
        [1.15, 1.2, 1.25] * 3 + [1.2],  # recorded with the spread tonight's samples have
        workload,
    )
    point = speedup_fixture(session).check()
    assert point.values == pytest.approx((1.15, 1.2, 1.25))
    assert (
        point.outcome is Outcome.PASS
        and point.label == "sim-spec vs sim-base C=4"
        and point.unit == "x"
    )
    assert session.of(SpeedupPoint) == [point]


def test_a_speedup_is_invalid_when_the_base_drifted_between_its_two_measurements(session):
    session.points += [
        measured("sim-spec", 4, [110.0]),
        measured("sim-base", 4, [100.0]),
        measured("sim-base@after", 4, [90.0]),
    ]
    with pytest.raises(
        pytest.fail.Exception, match="speedup INVALID:\n  the base drifted \u221210.0 %"
    ):
        speedup_fixture(session).check()


def test_a_speedup_without_its_measurements_is_skipped_saying_which(session):
    session.points.append(measured("sim-base", 4, [100.0]))
    with pytest.raises(pytest.skip.Exception, match="sim-spec was not measured at C=4 in this run"):
        speedup_fixture(session).check()
