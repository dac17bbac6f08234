"""The accuracy gate's pieces (core/accuracy.py): the answer extractor, the task file's
errors, the exact tests, and the verdict on hand-made outcomes."""

import json

import pytest

from pytest_llmperf.core.accuracy import (
    TaskError,
    decide,
    describe,
    last_number,
    mcnemar_p,
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
    text = describe("spec", v, 0.03, "golden")
    assert (
        "accuracy 0.840 of 200 items" in text and "12 right then wrong now, 0 the other way" in text
    )
    assert text.endswith("FAIL: significantly lower (p < 0.001) by at least the 3-point margin")


def test_items_that_differ_from_the_golden_fall_back_to_the_binomial():
    v = decide([True] * 70 + [False] * 30, None, reference_rate=0.9, margin=0.03)
    assert v.test == "binomial" and v.outcome.value == "FAIL"


def test_wilson_interval_holds_the_proportion():
    low, high = wilson_interval(180, 200)
    assert 0.85 < low < 0.9 < high < 0.94
