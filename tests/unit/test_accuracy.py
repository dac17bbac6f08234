"""The accuracy gate's pieces (core/accuracy.py): the answer extractor, the task file's
errors, the exact tests, and the verdict on hand-made outcomes."""

import json

import pytest

from pytest_llmperf.core.accuracy import (
    TaskError,
    decide,
    describe,
    last_number,
    least_flips,
    mcnemar_p,
    smallest_failing_drop,
    wilson_interval,
)
from pytest_llmperf.fixtures.accuracy import load_tasks


@pytest.mark.parametrize(
    ("text", "answer"),
    [(" 42.", "42"), ("It is 1,234 apples, not 12", "12"), ("x = -7.0", "-7"), ("none", None),
     ("3.5 then 2.25", "2.25")],
)  # fmt: skip
def test_the_answer_is_the_last_number(text, answer):
    assert last_number(text) == answer


def test_a_task_file_is_read_and_its_errors_name_the_line_and_field(tmp_path):
    good = tmp_path / "t.jsonl"
    good.write_text(
        json.dumps({"question": "1+1?", "answer": 2, "category": "add"}) + "\n\n"
        + json.dumps({"question": "Half of 5?", "answer": "2.5"}) + "\n"
    )  # fmt: skip
    tasks = load_tasks(good)
    assert [(t.answer, t.category) for t in tasks] == [("2", "add"), ("2.5", None)]
    for line, why in [
        ("not json", ":1: not a JSON object"),
        (json.dumps({"answer": 2}), ":1: 'question' must be a non-empty string"),
        (
            json.dumps({"question": "q", "answer": True}),
            ":1: 'answer' must be a string or a number",
        ),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(line + "\n")
        with pytest.raises(TaskError, match=f"bad.jsonl{why}"):
            load_tasks(bad)
    with pytest.raises(TaskError, match="cannot read"):
        load_tasks(tmp_path / "missing.jsonl")


def test_mcnemar_counts_only_the_discordant_items():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(10, 0) == pytest.approx(0.5**10)
    assert mcnemar_p(5, 5) > 0.5


def test_the_same_answers_pass_and_a_drop_of_the_margin_fails_on_paired_items():
    golden = [True] * 180 + [False] * 20  # 0.90 on 200 items
    assert decide(golden, golden, reference_rate=0.9, margin=0.03).outcome.value == "PASS"
    dropped = [False] * 12 + golden[12:]  # 12 items right then, wrong now: −6 points
    v = decide(dropped, golden, reference_rate=0.9, margin=0.03)
    assert v.outcome.value == "FAIL" and (v.worse, v.better) == (12, 0) and v.test == "McNemar"
    small = [False] * 4 + golden[4:]  # −2 points, significant (p = 1/16 ... not below 0.01)
    assert decide(small, golden, reference_rate=0.9, margin=0.03).outcome.value == "PASS"
    within = [False] * 7 + golden[7:]  # −3.5 points, p = 0.0078: significant at 1 %, not 0.1 %
    assert decide(within, golden, reference_rate=0.9, margin=0.05).outcome.value == "WARN"
    assert decide(within, golden, reference_rate=0.9, margin=0.03).outcome.value == "WARN"
    past = [False] * 5 + golden[
        5:
    ]  # −2.5 points, p = 0.031: past a 2-point margin, not significant
    assert decide(past, golden, reference_rate=0.9, margin=0.02).outcome.value == "PASS"
    text = describe("spec", v, 0.03, "golden")
    assert (
        "accuracy 0.840 of 200 items" in text and "12 right then wrong now, 0 the other way" in text
    )
    assert "FAIL: significantly lower (p < 0.001) by at least the 3-point margin" in text
    assert text.endswith("the smallest drop 200 items can FAIL is 5.0 points (10 right then "
                         "wrong now, none back)")  # fmt: skip


def test_one_item_answered_the_other_way_is_no_finding_on_a_small_set():
    """8 prompts, one flipped: 12.5 points past a 3-point margin, but p = 0.5: not a WARN."""
    golden = [True] * 8
    v = decide([False] + golden[1:], golden, reference_rate=1.0, margin=0.03)
    assert v.outcome.value == "PASS", v
    assert (v.worse, v.p_value) == (1, 0.5)
    two_of_eight = decide([False, False] + golden[2:], golden, reference_rate=1.0, margin=0.03)
    assert two_of_eight.outcome.value == "PASS"  # p = 0.25
    text = describe("spec", v, 0.03, "golden")
    assert "8 items cannot FAIL (p < 0.001 needs at least 10 right then wrong now" in text


def test_the_smallest_failing_drop_follows_the_fail_alpha():
    assert least_flips(0.001) == 10 and least_flips(0.01) == 7
    assert smallest_failing_drop(60) == pytest.approx(10 / 60)  # 16.7 points on 60 items
    assert smallest_failing_drop(9) is None
    assert mcnemar_p(least_flips(), 0) < 0.001 <= mcnemar_p(least_flips() - 1, 0)


def test_items_that_differ_from_the_golden_fall_back_to_the_binomial():
    v = decide([True] * 70 + [False] * 30, None, reference_rate=0.9, margin=0.03)
    assert v.test == "binomial" and v.outcome.value == "FAIL"


def test_wilson_interval_holds_the_proportion():
    low, high = wilson_interval(180, 200)
    assert 0.85 < low < 0.9 < high < 0.94
