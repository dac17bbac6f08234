"""Greedy parity end to end on the simulated pair: the shipped perf_suites/test_outputs.py
passes a lossless pair run after run, and a drafter whose wrong drafts are accepted
(``--sim-wrong-token-every``) FAILs parity and the pair while its tok/s reads faster."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUTS_SUITE = (REPO_ROOT / "perf_suites" / "test_outputs.py").read_text()
SPEED_SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))


def test_speculative_speedup(llmperf_speedup):
    llmperf_speedup.check(of="test_output_throughput")
"""
PAIR = ("--llm-profile", "sim-base,sim-spec")


def test_a_lossless_pair_is_identical_on_every_prompt_with_no_golden(pytester):
    write_profiles(pytester, concurrency="[1]")
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
    for _ in range(2):  # run after run, unchanged
        result = pytester.runpytest(*PAIR, "--perf-json", "out.json", "-k", "greedy")
        result.assert_outcomes(passed=3)  # each profile's outputs, then the pair
        result.stdout.fnmatch_lines(
            ["sim-spec vs sim-base, greedy parity (greedy_parity): "
             "8 of 8 prompts identical (256 tokens compared) — PASS"]
        )  # fmt: skip
        (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
        assert parity["verdict"] == "PASS" and parity["identical_fraction"] == 1.0
        assert [p["identical"] for p in parity["per_prompt"]] == [True] * 8
        assert all(p["tokens"] == 32 for p in parity["per_prompt"])
        assert parity["tokens_compared"] == 8 * 32
        # 8 prompts cannot FAIL the share: reported, not gated (null: only measured).
        assert parity["identical_golden"]["verdict"] is None

    # The identical share is a figure with a golden, recorded with its per-prompt outcomes,
    # once there are prompts enough for it to FAIL (10 at p < 0.001).
    args = (*PAIR, "--perf-json", "out.json", "-k", "greedy")
    profiles = pytester.path / "profiles.toml"  # both profiles (the spec extends the base)
    profiles.write_text(profiles.read_text().replace("runs = ", "parity_prompts = 12\nruns = ", 1))
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=3)
    golden = json.loads((pytester.path / "baselines/sim-spec/sim.json").read_text())
    share = golden["points"]["test_outputs.py::test_greedy_parity[identical]"]
    assert (share["items"], share["correct"], share["outcomes"]) == (12, 12, "1" * 12)
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=3)
    (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
    assert parity["identical_golden"]["verdict"] == "PASS"
    again.stdout.fnmatch_lines(
        ["  against its golden: sim-spec vs sim-base identical prompts: accuracy 1.000 of 12 "
         "items*vs 1.000 golden*PASS: no significant drop*the smallest drop 12 items can FAIL "
         "is 83.3 points*"]
    )  # fmt: skip


def test_an_identical_share_over_too_few_prompts_to_fail_is_reported_not_gated(pytester):
    """8 prompts (the default): even all 8 flipped is p = 0.0039, never a FAIL at 0.001, so
    the share is not gated (no golden is asked for); the line says what would gate it."""
    write_profiles(pytester, concurrency="[1]")
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
    args = (*PAIR, "--perf-json", "out.json", "-k", "greedy")
    pytester.runpytest(*args, "--perf-update").assert_outcomes(passed=3)
    assert not (pytester.path / "baselines/sim-spec/sim.json").exists()  # nothing to record
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=3)
    (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
    assert parity["identical_golden"]["verdict"] is None, parity["identical_golden"]  # measured
    again.stdout.fnmatch_lines(
        ["*8 of 8 identical, not gated against a golden: 8 prompts cannot FAIL (p < 0.001 "
         "needs at least 10 identical then and not now); set parity_prompts to 10 or more*"]
    )  # fmt: skip


def test_a_drafter_that_accepts_wrong_tokens_is_faster_and_fails_parity_and_the_pair(pytester):
    marker = write_profiles(pytester, concurrency="[1]", runs=3, min_requests=8)
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE, test_speed=SPEED_SUITE)
    record = ("--perf-update", "--perf-update-runs", "5", "-p", "no:randomly")
    pytester.runpytest(*PAIR, *record, "-k", "not greedy and not accuracy").assert_outcomes(
        passed=3
    )

    # The drafter now has every draft accepted, right or wrong: one token in 12 is wrong, and
    # more tokens a step make it faster.
    write_profiles(pytester, marker=marker, concurrency="[1]", runs=3, min_requests=8,
                   spec_args='"--sim-accept-length", "3.5", "--sim-wrong-token-every", "12"')  # fmt: skip
    result = pytester.runpytest(
        *PAIR, "--perf-json", "out.json", "-p", "no:randomly", "-k", "not accuracy"
    )
    out = json.loads((pytester.path / "out.json").read_text())
    spec = next(p for p in out["points"] if p["profile"] == "sim-spec")
    assert spec["verdict"] in ("PASS", "IMPROVED") and spec["ratio"] > 1.1  # reads faster
    (parity,) = out["parity"]
    assert parity["verdict"] == "FAIL" and parity["identical"] < 8
    wrong = next(p for p in parity["per_prompt"] if not p["identical"] and not p["excused"])
    assert wrong["base_token"] != wrong["spec_token"] and wrong["top2_gap"] > 0.1
    text = result.stdout.str()
    assert (
        f"diverges at token {wrong['position']}: base {wrong['base_token']!r}, speculative "
        f"{wrong['spec_token']!r}" in text
    )
    (gate,) = out["speculative"][0]["gate"].values()
    assert (
        gate["verdict"] == "FAIL"
        and "the pair FAILs (speedup IMPROVED, parity FAIL)" in (gate["message"])
    )
    result.assert_outcomes(passed=4, failed=2)  # parity and the speedup
    result.stdout.fnmatch_lines(["*the pair FAILs: its speedup counts only if it answers as*"])


def test_accuracy_is_recorded_with_its_items_and_a_drop_fails_against_the_golden_and_the_base(
    pytester,
):
    """The simulated model answers 90 % of the built-in arithmetic right (the same items every
    time). Recorded, then unchanged: PASS. Then the speculative server answers 70 %: its own
    golden FAILs it (McNemar on the golden's items), and so does its base in the same run."""
    marker = write_profiles(pytester, concurrency="[1]")
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
    args = (*PAIR, "-p", "no:randomly", "--perf-json", "out.json")
    pytester.runpytest(*args, "-k", "accuracy", "--perf-update").assert_outcomes(passed=2)
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=5)  # outputs ×2, accuracy ×2, parity
    out = json.loads((pytester.path / "out.json").read_text())
    assert [a["verdict"] for a in out["accuracy"]] == ["PASS", "PASS"]
    base = out["accuracy"][0]
    assert base["items"] == 60 and set(base["by_category"]) == {
        "addition", "subtraction", "multiplication"
    }  # fmt: skip
    assert 0.8 <= base["accuracy"] <= 0.97 and len(base["wrong"]) == base["items"] - base["correct"]

    write_profiles(pytester, marker=marker, concurrency="[1]",
                   spec_args='"--sim-accuracy", "0.5"')  # fmt: skip
    dropped = pytester.runpytest(*args)
    dropped.assert_outcomes(passed=3, failed=2)  # its accuracy, and the pair
    dropped.stdout.fnmatch_lines(
        ["*sim-spec accuracy: accuracy 0.* of 60 items*McNemar p=*right then wrong now*"
         "— FAIL: significantly lower (p < 0.001) by at least the 3-point margin*"]
    )  # fmt: skip
    (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
    assert parity["verdict"] == "FAIL" and "the base's, same items" in parity["accuracy"]


def test_a_near_tie_excuses_a_swap_with_the_runner_up_and_never_a_third_token(pytester):
    """Every position counts as a near-tie (parity_tie_gap = 10) and one token in 6 is a
    wrong draft: where it is the base's runner-up (what a floating-point near-tie can do) each
    is excused, the speculative server is asked again from the base's token there, and the
    pair passes with every token compared; where it is a third token, no tie excuses it."""
    for kind, passed in (("runner-up", True), ("third", False)):
        write_profiles(pytester, "parity_tie_gap = 10.0\n", concurrency="[1]",
                       spec_args=f'"--sim-wrong-token-every", "6", "--sim-wrong-token", "{kind}"')  # fmt: skip
        pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
        result = pytester.runpytest(*PAIR, "--perf-json", "out.json", "-k", "greedy")
        (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
        diverged = [p for p in parity["per_prompt"] if not p["identical"]]
        assert len(diverged) == 8, kind  # one token in 6 of 32: every prompt diverges
        if passed:
            result.assert_outcomes(passed=3)
            assert parity["verdict"] == "PASS", parity["message"]
            # Continued past each swap (5 or 6 of 32 tokens: one in 6), nothing left unchecked
            # (a swap at the last token has nothing after it to ask for).
            assert all(p["position"] in (None, 31) for p in diverged), diverged
            assert all(p["excused"] for p in diverged if p["position"] == 31), diverged
            assert all(len(p["near_ties_continued"]) in (5, 6) for p in diverged), diverged
            continued = sum(len(p["near_ties_continued"]) for p in diverged)
            last = sum(p["position"] == 31 for p in diverged)
            assert parity["tokens_compared"] == 8 * 32
            assert (
                f"{continued + last} near-tie(s) excused (the base's runner-up" in parity["message"]
            )
            assert f"{continued} compared past" in parity["message"]
        else:
            result.assert_outcomes(passed=2, failed=1)
            assert parity["verdict"] == "FAIL", parity["message"]
            assert all(p["spec_is_runner_up"] is False and not p["excused"] for p in diverged)
            assert all(p["near_ties_continued"] == [] for p in diverged)
            result.stdout.fnmatch_lines(["*not the base's runner-up, so no near-tie excuses it*"])
            # Compared up to each first divergence, and said so.
            assert parity["tokens_compared"] == sum(p["position"] + 1 for p in diverged)


def test_a_wrong_token_after_an_excused_near_tie_is_found(pytester):
    """One token in 6 is the base's runner-up, and a top-2 gap of 3 makes most of those
    positions near-ties and some not: a prompt whose first swap is excused is compared on past
    it (asked again from the base's token), and a swap later where the base was sure FAILs the
    pair. Comparing only up to the first excused divergence passed those prompts."""
    write_profiles(pytester, "parity_tie_gap = 3.0\n", concurrency="[1]",
                   spec_args='"--sim-wrong-token-every", "6", "--sim-wrong-token", "runner-up"')  # fmt: skip
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
    result = pytester.runpytest(*PAIR, "--perf-json", "out.json", "-k", "greedy")
    result.assert_outcomes(passed=2, failed=1)
    (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
    assert parity["verdict"] == "FAIL", parity["message"]
    found_past = [
        p for p in parity["per_prompt"]
        if p["position"] is not None and not p["excused"] and p["near_ties_continued"]
    ]  # fmt: skip
    assert found_past, parity["per_prompt"]
    for p in found_past:
        assert p["position"] > max(p["near_ties_continued"]) and p["top2_gap"] > 3.0
        assert p["spec_is_runner_up"] is True  # a swap, but where the base was sure
    result.stdout.fnmatch_lines(
        ["*after * excused near-tie(s) (at token *), each continued from the base's token*"]
    )


def test_log_probabilities_short_of_the_tokens_generated_make_parity_invalid_not_a_fail(pytester):
    """sgl-project/sglang#14046: under speculation SGLang has returned output_token_logprobs
    for the first token only while completion_tokens counts them all. Nothing can be compared
    on that: the pair's parity is INVALID with the reason, never a FAIL blaming the drafter."""
    write_profiles(pytester, concurrency="[1]", spec_args='"--sim-short-logprobs"')
    pytester.makepyfile(test_outputs=OUTPUTS_SUITE)
    result = pytester.runpytest(*PAIR, "--perf-json", "out.json", "-k", "greedy")
    result.assert_outcomes(passed=1, failed=2)  # the spec's outputs, and the pair's parity
    result.stdout.fnmatch_lines(
        ["*sim-spec: greedy outputs: INVALID: prompt 1: its log-probabilities cover 1 of the "
         "32 tokens it generated*sglang#14046*"]
    )  # fmt: skip
    (parity,) = json.loads((pytester.path / "out.json").read_text())["parity"]
    assert parity["verdict"] == "INVALID", parity["message"]
    assert "parity cannot be checked: sim-spec's greedy outputs" in parity["message"]
    assert "During handling" not in result.stdout.str()
