"""The accept length as a gated figure, end to end on the simulated pair with the shipped
perf_suites/test_throughput.py: recorded with its golden, held run after run, FAILed when the
drafter's guesses are accepted less often, held to the profile's floor on the first night, run
for speculative profiles only, and shown per category where the dataset names categories."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (REPO_ROOT / "perf_suites" / "test_throughput.py").read_text()
PAIR = ("--llm-profile", "sim-base,sim-spec", "-p", "no:randomly")
SELECT = ("-k", "output_throughput or accept_length")


def accept_points(out: dict) -> dict[str, dict]:
    return {p["profile"]: p for p in out["points"] if p["metric"] == "accept_length"}


def test_the_accept_length_is_recorded_held_and_fails_when_the_drafter_guesses_worse(pytester):
    # 192-token requests: at 3 tokens a step a 64-token one takes 20 ms, where a millisecond of
    # client scheduling on a busy 2-core machine reads as client-bound.
    marker = write_profiles(pytester, concurrency="[1]", output_len=192,
                            extra_args='"--sim-accept-length", "3.0"')  # fmt: skip
    pytester.makepyfile(test_throughput=SHIPPED)
    recorded = pytester.runpytest(*PAIR, *SELECT, "--perf-update")
    recorded.assert_outcomes(passed=3)  # throughput ×2, the accept length of sim-spec alone
    golden = json.loads((pytester.path / "baselines/sim-spec/sim.json").read_text())
    (key,) = [k for k in golden["points"] if k.endswith(" accept_length")]
    assert key == "test_throughput.py::test_output_throughput[C=1] accept_length"
    values = [run["value"] for run in golden["points"][key]["runs"]]
    assert all(2.7 < v < 3.3 for v in values), values  # the engine's own count, about 3.0
    base = json.loads((pytester.path / "baselines/sim-base/sim.json").read_text())
    assert not [k for k in base["points"] if k.endswith(" accept_length")]

    held = pytester.runpytest(*PAIR, *SELECT, "--perf-json", "out.json")
    held.assert_outcomes(passed=3)
    assert accept_points(json.loads((pytester.path / "out.json").read_text()))["sim-spec"][
        "verdict"
    ] in ("PASS", "WARN")

    # The drafter now guesses worse: 2.0 tokens a step where 3.0 were recorded.
    write_profiles(pytester, marker=marker, concurrency="[1]", output_len=192,
                   extra_args='"--sim-accept-length", "2.0"')  # fmt: skip
    worse = pytester.runpytest(*PAIR, *SELECT, "--perf-json", "out.json")
    point = accept_points(json.loads((pytester.path / "out.json").read_text()))["sim-spec"]
    assert point["verdict"] == "FAIL" and point["ratio"] < 0.8
    worse.stdout.fnmatch_lines(
        ["*sim-spec C=1 accept_length: 2.* tok/step vs golden 2.9* (−3*, lower, *) — FAIL: "
         "significantly lower by more than the 15 % fail margin; the smallest drop these runs "
         "could FAIL: * %"]
    )  # fmt: skip
    worse.assert_outcomes(passed=1, failed=2)  # its accept length, and its throughput with it


def test_a_drafter_that_stops_reporting_fails_where_its_golden_has_accept_lengths(pytester):
    """Recorded with draft counts; then the server sends none (a field renamed by an upgrade):
    the gate does not vanish as a skip, it FAILs and says why."""
    marker = write_profiles(pytester, concurrency="[1]", output_len=192,
                            extra_args='"--sim-accept-length", "3.0"')  # fmt: skip
    pytester.makepyfile(test_throughput=SHIPPED)
    pytester.runpytest(*PAIR, *SELECT, "--perf-update").assert_outcomes(passed=3)
    write_profiles(pytester, marker=marker, concurrency="[1]", output_len=192,
                   extra_args='"--sim-accept-length", "3.0", "--sim-no-draft-counts"')  # fmt: skip
    silent = pytester.runpytest(*PAIR, *SELECT, "--perf-json", "out.json")
    silent.assert_outcomes(passed=2, failed=1)
    silent.stdout.fnmatch_lines(
        ["*sim-spec C=1 accept_length: no draft counts tonight, but its golden has accept "
         "lengths (mean 2.* tok/step over * runs) — FAIL: the server stopped reporting its "
         "drafter*"]
    )  # fmt: skip
    point = accept_points(json.loads((pytester.path / "out.json").read_text()))["sim-spec"]
    assert point["verdict"] == "FAIL"
    # Without a golden or a floor nothing was promised: the figure is skipped, saying why.
    import shutil

    shutil.rmtree(pytester.path / "baselines")
    fresh = pytester.runpytest(*PAIR, *SELECT, "-rs", "--perf-measure")
    fresh.assert_outcomes(passed=2, skipped=1)
    fresh.stdout.fnmatch_lines(["*the server reported no draft counts*"])


def test_the_floor_fails_a_level_on_the_first_night_and_a_base_is_not_asked(pytester):
    write_profiles(
        pytester,
        concurrency="[1]",
        extra_args='"--sim-accept-length", "2.0"',
        body="""
        [profiles.sim-floored]
        extends = "sim-spec"
        accept_length_floor = 2.8
        """,
    )
    pytester.makepyfile(test_throughput=SHIPPED)
    result = pytester.runpytest(
        "--llm-profile", "sim-floored", "-p", "no:randomly", *SELECT, "--perf-update"
    )
    result.assert_outcomes(passed=1, failed=1)  # recorded throughput; the floor refuses
    result.stdout.fnmatch_lines(
        ["*sim-floored C=1 accept_length: 2.* tok/step (mean of * runs) is below the profile's "
         "accept_length_floor 2.8 by 0.*FAIL*"]
    )  # fmt: skip
    base = pytester.runpytest(
        "--llm-profile", "sim-base", "-p", "no:randomly", "-rs", *SELECT, "--perf-update"
    )
    base.assert_outcomes(passed=1, skipped=1)
    base.stdout.fnmatch_lines(["*runs for speculative profiles only*none of the selected*"])


def test_the_accept_length_is_shown_per_category_of_the_dataset(pytester):
    lines = [{"prompt": "def add(a, b): return a + b  # " + str(k), "category": "code"}
             for k in range(4)]  # fmt: skip
    lines += [{"prompt": f"Tell me about your day, friend number {k}.", "category": "chat"}
              for k in range(4)]  # fmt: skip
    (pytester.path / "mixed.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    write_profiles(pytester, concurrency="[2]", body="")
    profiles = (pytester.path / "profiles.toml").read_text()
    (pytester.path / "profiles.toml").write_text(
        profiles.replace("min_requests = 4\n", 'min_requests = 8\ndataset = "mixed.jsonl"\n', 1)
    )
    pytester.makepyfile(test_throughput=SHIPPED)
    result = pytester.runpytest(
        *PAIR, "-k", "output_throughput", "--perf-measure", "--perf-json", "out.json"
    )
    result.assert_outcomes(passed=2)
    out = json.loads((pytester.path / "out.json").read_text())
    spec = next(p for p in out["points"] if p["profile"] == "sim-spec")
    for run in spec["runs"]:
        by = run["accept_length_by_category"]
        assert set(by) == {"chat", "code"} and all(1.0 < v <= 5.0 for v in by.values()), by
    base = next(p for p in out["points"] if p["profile"] == "sim-base")
    assert all(run["accept_length_by_category"] is None for run in base["runs"])
    result.stdout.fnmatch_lines(
        ["sim-spec accept length by category (tok/step): C=2: chat *, code *"]
    )
