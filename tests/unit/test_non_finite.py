"""No value crashes a writer: a NaN or an infinite figure anywhere in a run never stops the
goldens, the results JSON, the reports or the history from being written. The point that has
it says why; every other point is recorded."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pytest_llmperf.core.judgement import GoldenRef
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import PendingRun
from pytest_llmperf.golden import check, store
from pytest_llmperf.golden.store import PendingFile, PendingPoint
from pytest_llmperf.history.recorder import HistoryRecorder
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.render import write
from tests.builders import measured, results, speedup

BAD = [math.nan, math.inf, -math.inf]
#: Every figure of a run that can be a float, and every distribution's fields.
DISTRIBUTIONS = ("request_tok_s", "ttft_s", "ttfo_s", "itl_s", "tpot_s", "e2e_s", "loop_lag_s")
SCALARS = (
    "duration_s", "output_tok_s", "accept_length", "accept_length_observed", "achieved_concurrency",
    "in_flight_while_sending", "client_gap_s", "client_cpu_fraction", "goodput_req_s",
    "energy_j", "energy_j_per_token", "tok_s_per_watt", "reasoning_tokens", "reasoning_share",
    "gpu_power_cap_share",
)  # fmt: skip
#: Figures by a name of the workload's (a category of its requests).
BY_NAME = ("accept_length_by_category",)
FINGERPRINT = {"hard": {"hardware": {"key": "sim"}}, "soft": {}, "profile_keys": []}


def spoiled(bad: float, *fields: str):
    """A point whose second run has ``bad`` in ``fields`` (every key of a distribution)."""
    point = measured("sim-base", 4, [100.0, 101.0])
    second = point.runs[1]
    changes = {
        f: {k: bad for k in getattr(second, f)} | {"n": 3}
        if f in DISTRIBUTIONS
        else {"code": bad, "chat": 2.5}
        if f in BY_NAME
        else bad
        for f in fields
    }
    point.runs[1] = dataclasses.replace(second, **changes)
    point.ratio = point.p_value = bad
    point.golden = GoldenRef(path="baselines/sim-base/sim.json", mean=bad, n=3)
    return point


def written(tmp_path, bad: float, fields: tuple[str, ...], report: bool) -> None:
    """``report``: the Markdown report, its plots and the pytest-benchmark JSON too (a second
    each: pytest-benchmark reads the machine and the commit)."""
    good = measured("other", 4, [110.0, 111.0])
    data = results([spoiled(bad, *fields), good], [speedup("sim-spec", "sim-base", 4, [1.1, bad])])
    report_dir = tmp_path / "report" if report else None
    benchmark = tmp_path / "b.json" if report else None
    outputs = write.Outputs(tmp_path / "r.json", report_dir, benchmark)
    notes, failures = write.outputs(data, outputs, created="now")
    assert failures == []
    points = json.loads((tmp_path / "r.json").read_text())["points"]  # strict JSON: no NaN
    assert {p["profile"] for p in points} == {"sim-base", "other"}
    if report:
        assert json.loads((tmp_path / "b.json").read_text())["benchmarks"]
        assert (tmp_path / "report" / "summary.md").exists()


@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("field", DISTRIBUTIONS + SCALARS + BY_NAME)
def test_the_results_json_is_written(tmp_path, bad, field):
    written(tmp_path, bad, (field,), report=False)


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_the_report_its_plots_and_the_benchmark_json_are_written(tmp_path, bad):
    written(tmp_path, bad, ("ttft_s", "itl_s", "duration_s"), report=True)


def pending(key: str, values: list[float], accept: float | None = None) -> PendingPoint:
    runs = [PendingRun(v, "launch-1", 16, 1024, accept) for v in values]
    return PendingPoint(key, key, 4, "output_tok_s", runs, "--perf-update", False)


@pytest.mark.parametrize("bad", [*BAD, 0.0, -1.0], ids=repr)
def test_a_golden_file_is_written_without_the_point_that_cannot_be_recorded(tmp_path, bad):
    path = tmp_path / "sim.json"
    good = pending("t.py::test[C=1]", [100.0, 101.0], accept=math.nan)
    spoilt = pending("t.py::test[C=4]", [100.0, bad])
    notes = store.flush([PendingFile(path, "sim-base", FINGERPRINT, [good, spoilt])])
    golden = store.load(path)
    assert golden is not None and set(golden.points) == {"t.py::test[C=1]"}
    assert golden.points["t.py::test[C=1]"].runs[0].accept_length is None  # null, not NaN
    assert any("not recorded t.py::test[C=4]: run 2's value is" in n for n in notes)


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_a_point_that_cannot_be_recorded_says_why_and_is_not_queued(bad):
    point = measured("sim-base", 4, [100.0, 101.0])
    point.runs[1] = dataclasses.replace(point.runs[1], output_tok_s=bad)
    refused = check.pending(point, None, pool=False, accept_worse=None, warn_margin=0.05)
    assert not isinstance(refused, PendingPoint)
    assert refused.outcome is Outcome.INVALID
    assert f"run 2's value is {bad!r}" in (refused.failure or "")


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_the_history_stores_every_point(tmp_path, bad):
    recorder = HistoryRecorder.start(
        str(tmp_path / "h.db"), mode="gate", run_dir=tmp_path, code_dir=tmp_path, command=["pytest"]
    )
    recorder.point(spoiled(bad, "ttft_s"))
    recorder.point(speedup("sim-spec", "sim-base", 4, [1.1, bad]))
    recorder.finished(0, complete=True)
    assert recorder.failure is None and recorder.spooled == 0
    rows = HistoryStore.open(str(tmp_path / "h.db")).series_rows()
    assert {r["profile"] for r in rows} >= {"sim-base", "sim-spec"}
    assert all(math.isfinite(v) for r in rows for v in r["values"])


def test_every_run_figure_is_covered():
    """The lists above name every float figure a run has: a new one must join them."""
    from pytest_llmperf.core.metrics import RunMetrics

    floats = {
        f.name
        for f in dataclasses.fields(RunMetrics)
        if "float" in str(f.type) and f.name != "schedule"  # the arrival offsets: from a clock
    }
    covered = set(DISTRIBUTIONS + SCALARS + BY_NAME)
    assert floats <= covered, floats - covered
