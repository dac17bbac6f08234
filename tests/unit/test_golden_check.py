"""The golden side of a check and the judgements it comes to, table-driven on hand-built points
and golden files: each rule returns a judgement, and ``apply`` puts it on the point and fails
the test unless it passes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_llmperf.core.judgement import GoldenRef, against_golden, recorded
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.verdict import Margins, decide
from pytest_llmperf.fixtures.goldens import apply
from pytest_llmperf.golden import check
from pytest_llmperf.golden.check import Found
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.golden.store import PendingPoint, PendingRun
from tests.builders import dist, measured
from tests.builders import golden_file as built_golden

PATH = Path("baselines/p/sim.json")
HARD = {"hardware": {"key": "sim"}, "engine": "sim", "model": "m", "server_args": {"tp_size": 8}}
SOFT = {"server_version": "0.5.19", "python": "3.11.7"}


def golden_file(point, values=(100.0,) * 10, workload=None, hard=None, soft=None):
    return built_golden(
        {point.key: list(values)},
        hard=hard or HARD,
        soft=soft or SOFT,
        workload=point.workload if workload is None else workload,
    )


def fails(point, judgement) -> str:
    with pytest.raises(pytest.fail.Exception) as excinfo:
        apply(point, judgement)
    return str(excinfo.value)


def test_a_missing_golden_or_point_fails_with_the_command_that_records_it():
    point = measured("p", 4, [100.0])
    for golden in (None, built_golden({}, hard=HARD)):
        found = check.compare(
            point, golden, PATH, Fingerprint(HARD, SOFT), "pytest x --perf-update"
        )
        message = fails(point, found)
        assert point.outcome is Outcome.MISSING
        assert message == (
            f"p C=4: no golden baseline in {PATH} for {point.key}.\n"
            "  Record it: pytest x --perf-update"
        )


@pytest.mark.parametrize(
    ("hard", "workload", "expected"),
    [
        ({**HARD, "server_args": {"tp_size": 4}}, None, "server_args.tp_size: 4 → 8"),
        ({**HARD, "model": "other"}, None, 'model: "other" → "m"'),
        (None, {"api": "openai", "output_len": 64}, 'workload.api: "openai" → "sglang"'),
    ],
)
def test_a_hard_difference_is_incomparable_with_the_diff_and_the_fix(hard, workload, expected):
    point = measured("p", 4, [100.0])
    golden = golden_file(point, hard=hard, workload=workload)
    found = check.compare(point, golden, PATH, Fingerprint(HARD, SOFT), "pytest x --perf-update")
    message = fails(point, found)
    assert point.outcome is Outcome.INCOMPARABLE
    assert (
        expected in message and "re-record (and review the diff): pytest x --perf-update" in message
    )


def test_soft_differences_are_noted_never_blocking():
    point = measured("p", 4, [100.0])
    golden = golden_file(point, soft={**SOFT, "server_version": "0.5.19"})
    found = check.compare(
        point, golden, PATH, Fingerprint(HARD, {**SOFT, "server_version": "0.5.23"}), "cmd"
    )
    assert isinstance(found, Found) and found.entry is golden.point(point.key)
    assert found.ref == GoldenRef(path=str(PATH), mean=100.0, n=10)
    assert found.soft_changes == ['server_version: "0.5.19" → "0.5.23"']


@pytest.mark.parametrize(
    ("values", "outcome", "fails_test"),
    [
        ([100.0, 101.0, 99.0], Outcome.PASS, False),
        ([90.0, 90.5, 89.5], Outcome.WARN, False),
        ([70.0, 70.5, 69.5], Outcome.FAIL, True),
        ([120.0, 121.0, 119.0], Outcome.IMPROVED, False),
    ],
)
def test_a_verdict_against_its_golden_fails_only_what_does_not_pass(values, outcome, fails_test):
    point = measured("p", 4, values)
    golden_values = [99.0, 100.0, 101.0] * 3 + [100.0]
    verdict = decide(
        point.values, golden_values, fail_margin=0.15, warn_margin=0.05, last_stage=True
    )
    judgement = against_golden(
        point.label, point.summary.mean, point.unit, verdict,
        GoldenRef(path=str(PATH), mean=100.0, n=10), Margins(0.15, 0.05),
        changes=["python: a → b"],
    )  # fmt: skip
    if fails_test:
        message = fails(point, judgement)
        assert message.startswith("p C=4: 70.0 tok/s vs golden 100.0 (\u221230.0 %")
        assert message.endswith("Changed since the golden (not blocking):\n    python: a → b")
    else:
        apply(point, judgement)
    assert point.outcome is outcome and point.golden_json == {
        "mean": 100.0,
        "n": 10,
        "path": str(PATH),
        "fail_margin": 0.15,
        "warn_margin": 0.05,
    }
    assert point.ratio == pytest.approx(sum(values) / 300.0)


@pytest.mark.parametrize(
    ("new", "pool", "accept_worse", "refused", "why"),
    [
        (100.0, False, None, False, "--perf-update"),
        (80.0, False, None, True, None),
        (80.0, False, "driver 590, #123", False, "driver 590, #123"),
        (80.0, True, None, False, "--perf-update --perf-pool"),
    ],
)
def test_a_worse_golden_replaces_the_old_one_only_when_the_user_says_why(
    new, pool, accept_worse, refused, why
):
    point = measured("p", 4, [new, new])
    old = built_golden({"k": [100.0] * 10}).point("k")
    runs = [PendingRun(new, "launch-1", 10, 640, None)] * 2
    pending = check.pending(point, old, pool=pool, accept_worse=accept_worse, warn_margin=0.05)
    if refused:
        message = fails(point, pending)
        assert point.outcome is Outcome.FAIL
        assert "refusing to replace the golden 100.0 with 80.0 (\u221220.0 %" in message
        assert "--perf-accept-worse=" in message
        return
    assert (pending.key, pending.why, pending.pool, pending.runs) == (point.key, why, pool, runs)
    apply(point, recorded(point.label, point.summary.mean, point.unit, str(PATH)))
    assert (
        point.outcome is Outcome.RECORDED
        and point.message == f"p C=4: recorded {new:,.1f} into {PATH}"
    )


@pytest.mark.parametrize(("per_run", "refused"), [(40, False), (700, True)])
def test_a_worse_tail_blocks_a_re_recording_only_where_the_gate_holds_the_server_to_it(
    per_run, refused
):
    """A p99 of 40 values a run is reported, not gated (662 certify it): 50 % worse, it is no
    regression to refuse, and the recording is not failed on it; of 700 values it is."""
    point = replace(measured("p", 4, [100.0, 100.0]), metric="ttft_p99_s")
    point.runs = [
        replace(r, ttft_s={**dist(0.006, 0.012), "n": per_run}) for r in point.runs
    ]  # p99 12 ms
    old = built_golden({"k": [0.008] * 10}).point("k")  # 8 ms
    pending = check.pending(point, old, pool=False, accept_worse=None, warn_margin=0.2)
    if refused:
        assert "refusing to replace the golden 8.0 with 12.0 (+50.0 %" in fails(point, pending)
    else:
        assert isinstance(pending, PendingPoint) and pending.why == "--perf-update"


def test_update_command_is_shell_quoted():
    assert check.update_command("perf suites/t.py::test_x[p-C1]", ["base", "spec"]) == (
        "pytest 'perf suites/t.py' --llm-profile base,spec --perf-update"
    )
    assert (
        check.update_command("t.py::test_x", ["p"]) == "pytest t.py --llm-profile p --perf-update"
    )
