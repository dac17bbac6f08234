"""Workload sources without a server: length distributions, synthetic token ids, datasets."""

from __future__ import annotations

import json
import random

import pytest

from pytest_llmperf.core.lengths import Lengths, LengthsError, parse_lengths
from pytest_llmperf.load.dataset import DatasetError, load_dataset
from pytest_llmperf.load.trace import load_trace
from pytest_llmperf.load.workload import TOKEN_ID_RANGE, Workload


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0, "got 0"),
        ("512", "got '512'"),
        ({"uniform": [10, 5]}, "LOW <= HIGH"),
        ({"uniform": [10]}, "two positive integers"),
        ({"values": []}, "non-empty list"),
        ({"values": [1, 2], "weights": [1]}, "2 non-negative numbers"),
        ({"values": [1, 2], "weights": [0, 0]}, "not all zero"),
        ({"normal": [1, 2]}, "has keys ['normal']"),
    ],
)
def test_bad_lengths_say_what_is_wrong(value, problem):
    with pytest.raises(LengthsError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_lengths(value)


def test_distributions_draw_within_their_support_and_by_weight():
    rng = random.Random(1)
    uniform = parse_lengths({"uniform": [8, 40]})
    draws = [uniform.draw(rng) for _ in range(2000)]
    assert min(draws) == 8 and max(draws) == 40
    assert sum(draws) / len(draws) == pytest.approx(uniform.mean, rel=0.03)
    weighted = parse_lengths({"values": [64, 256], "weights": [3, 1]})
    draws = [weighted.draw(rng) for _ in range(4000)]
    assert draws.count(64) / len(draws) == pytest.approx(0.75, abs=0.03)
    assert parse_lengths(512).describe() == 512  # a fixed length reads as before


def test_synthetic_ids_are_exact_seeded_distinct_per_request_run_and_point_and_share_the_prefix():
    w = Workload(api="sglang", output_len=8, input=Lengths.fixed(300), shared_prefix_len=100)
    a, b = (json.loads(w.item(i).body)["input_ids"] for i in (0, 1))
    assert len(a) == len(b) == 300
    assert a[:100] == b[:100] and a[100] != b[100] and a[100:] != b[100:]
    assert all(TOKEN_ID_RANGE[0] <= t < TOKEN_ID_RANGE[1] for t in a)
    assert w.item(0).body == Workload(**{**w.__dict__}).item(0).body  # seeded: same every time
    assert w.item(0, run=2).body != w.item(0, run=1).body  # a later run is new to the cache
    salted = Workload(**{**w.__dict__, "salt": 7})
    assert json.loads(salted.item(0).body)["input_ids"][100:] != a[100:]  # another point
    assert w.item(0).prompt_tokens == 300
    assert w.item(0, share=0.5).output_len == 4 and w.item(0, cap=3).output_len == 3


def test_token_ids_reach_each_api_as_it_takes_them():
    ids = {"input": Lengths.fixed(5), "token_id_range": (10, 20)}
    native = json.loads(Workload(api="sglang", output_len=4, **ids).item(0).body)
    openai = json.loads(Workload(api="openai", output_len=4, **ids).item(0).body)
    chat = json.loads(Workload(api="chat", output_len=4).item(0).body)
    assert len(native["input_ids"]) == 5 and "text" not in native
    assert isinstance(openai["prompt"], list) and all(10 <= t < 20 for t in openai["prompt"])
    assert chat["messages"][0]["role"] == "user" and isinstance(chat["messages"][0]["content"], str)
    assert Workload(api="chat", output_len=4).path == "/v1/chat/completions"


def test_default_workload_definition_is_unchanged():
    # The committed goldens' workload key: adding workload kinds must not make them INCOMPARABLE.
    d = Workload(api="sglang", output_len=64).describe()
    assert set(d) == {
        "api", "path", "output_len", "prompt_set", "prompt_set_sha256", "temperature", "ignore_eos",
    }  # fmt: skip


def test_a_dataset_may_name_each_requests_category(tmp_path):
    good = tmp_path / "c.jsonl"
    good.write_text('{"prompt": "a", "category": " code "}\n{"prompt": "b"}\n')
    assert [e.category for e in load_dataset(good).entries] == ["code", None]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "category": 3}\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl, line 1: field 'category' is 3; expected"):
        load_dataset(bad)


def test_jsonl_and_sharegpt_parse_and_hash(tmp_path):
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('{"prompt": "a", "output_len": 5}\n\n{"input_ids": [1, 2, 3]}\n')
    data = load_dataset(jsonl)
    assert data.format == "jsonl" and len(data.entries) == 2 and data.has_ids
    assert data.entries[0].output_len == 5 and data.entries[1].input_ids == (1, 2, 3)
    share = tmp_path / "s.json"
    share.write_text(
        json.dumps(
            [
                {"conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "q"}]},
                {"conversations": []},
            ]
        )
    )
    data = load_dataset(share)
    assert data.format == "sharegpt" and [e.prompt for e in data.entries] == ["q"]
    assert data.skipped == 1 and len(data.sha256) == 64


def test_an_empty_or_unreadable_dataset_is_an_error_naming_it(tmp_path):
    with pytest.raises(DatasetError, match="cannot be read"):
        load_dataset(tmp_path / "missing.jsonl")
    (tmp_path / "e.json").write_text('[{"conversations": []}]')
    with pytest.raises(DatasetError, match="no requests in it .1 conversations without a user"):
        load_dataset(tmp_path / "e.json")


def load_trace_here(path):
    return load_trace(path, (10, 4000))


@pytest.mark.parametrize(
    ("read", "first"),
    [
        (load_dataset, '{"prompt": "hello"}'),
        (load_trace_here, '{"timestamp": 0, "input_length": 5, "output_length": 2}'),
    ],
)
def test_datasets_and_traces_share_one_reading_of_their_lines(tmp_path, read, first):
    """Bad UTF-8 is refused naming its line (a trace used to replace it silently), and a line
    that is not JSON is named the same way in either file."""
    path = tmp_path / "requests.jsonl"
    path.write_bytes(first.encode() + b'\n{"x": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"line 2: not UTF-8 text"):
        read(path)
    path.write_text(first + "\nnot json\n")
    with pytest.raises(DatasetError, match=r"line 2: not valid JSON .*each line must be one JSON"):
        read(path)
