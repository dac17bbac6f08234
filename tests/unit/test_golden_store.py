"""Golden files: schema, corrupt files, merging, pooling, stale points, atomic writes."""

import json

import pytest

from pytest_llmperf.engines import sglang_args
from pytest_llmperf.engines.base import executable_digest
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.golden import store as baseline
from pytest_llmperf.golden.store import GoldenError, PendingFile, PendingPoint, PendingRun


def pending(path, values, *, key="t.py::test[C=1]", hard=None, pool=False, why="--perf-update"):
    fp = {"hard": hard or {"hardware": {"key": "sim"}, "engine": "sim"}, "soft": {}}
    runs = [PendingRun(v, "launch-a", 16, 256, None) for v in values]
    return PendingFile(
        path,
        "p",
        fp,
        [
            PendingPoint(
                key, "t.py::test[p-C1]", 1, "output_tok_s", runs, why, pool, {"output_len": 16}
            )
        ],
    )


def test_record_merge_and_pool(tmp_path):
    path = tmp_path / "p" / "sim.json"
    notes = baseline.flush([pending(path, [100.0, 102.0])])
    assert notes == [f"{path}: recorded t.py::test[C=1]: 101.0 (output_tok_s, n=2)"]
    # Another point: merged, not lost
    baseline.flush([pending(path, [200.0], key="t.py::test[C=2]")])
    data = baseline.load(path)
    assert data is not None and sorted(data.points) == ["t.py::test[C=1]", "t.py::test[C=2]"]
    baseline.flush([pending(path, [104.0], pool=True, why="pooled")])
    point = baseline.load(path).point("t.py::test[C=1]")
    assert point.values == [100.0, 102.0, 104.0]
    assert point.n == 3 and point.mean == pytest.approx(102.0)
    assert point.anchor["mean"] == pytest.approx(101.0)  # the first recording, forever
    assert [h.why for h in point.history] == ["--perf-update", "pooled"]
    assert point.workload == {"output_len": 16}
    assert not list(path.parent.glob("*.tmp"))


def test_a_power_cap_share_is_kept_with_its_recording_and_dropped_by_one_without(tmp_path):
    """The share of samples a GPU sat at its power limit belongs to the recording that
    sampled it: pooling keeps the newest recording's, a recording without GPUs drops it."""
    path = tmp_path / "p" / "sim.json"
    sampled = pending(path, [100.0])
    sampled.points[0].extra = {"gpu_power_cap_share": 0.4}
    baseline.flush([sampled])
    assert baseline.load(path).point("t.py::test[C=1]").extra["gpu_power_cap_share"] == 0.4
    baseline.flush([pending(path, [101.0], pool=True)])
    assert "gpu_power_cap_share" not in baseline.load(path).point("t.py::test[C=1]").extra


def test_new_hard_keys_drop_points_recorded_under_the_old_ones(tmp_path):
    path = tmp_path / "p" / "sim.json"
    baseline.flush([pending(path, [1.0], key="a"), pending(path, [1.0], key="b")])
    notes = baseline.flush(
        [pending(path, [2.0], key="a", hard={"hardware": {"key": "sim"}, "engine": "other"})]
    )
    assert f"{path}: removed 1 point(s) recorded under the old fingerprint" in notes
    assert sorted(baseline.load(path).points) == ["a"]


def test_unusable_files_are_errors_that_name_the_file(tmp_path):
    path = tmp_path / "g.json"
    assert baseline.load(path) is None
    path.write_text("{oops")
    with pytest.raises(GoldenError, match=rf"golden file {path} is not valid JSON"):
        baseline.load(path)
    path.write_text(json.dumps({"schema": 0, "points": {}}))
    with pytest.raises(GoldenError, match=r"has schema 0, but this version reads schema 1\."):
        baseline.load(path)
    path.write_text(json.dumps({"schema": 1, "points": {}}))
    with pytest.raises(GoldenError, match=r"lacks 'fingerprint' or a 'points' table"):
        baseline.load(path)


@pytest.mark.parametrize(
    ("runs", "problem"),
    [
        ([{"value": "fast"}], "run 1 has 'value' 'fast', not a positive number"),
        ([{"value": 1.0}, {"launch_id": "x"}], "run 2 has 'value' missing"),
        ([{"value": None}], "run 1 has 'value' None"),
        ([{"value": True}], "run 1 has 'value' True"),
        ([], "has no 'runs' list"),
    ],
)
def test_a_non_numeric_or_missing_golden_value_names_the_file_and_point(tmp_path, runs, problem):
    path = tmp_path / "g.json"
    data = {"schema": 1, "fingerprint": {}, "points": {"test_x[C=4]": {"runs": runs}}}
    path.write_text(json.dumps(data))
    with pytest.raises(GoldenError) as info:
        baseline.load(path)
    assert f"golden file {path}, point 'test_x[C=4]': {problem}" in str(info.value)
    assert json.loads(path.read_text()) == data  # untouched


def test_flush_writes_nothing_when_any_file_it_would_touch_is_unusable(tmp_path):
    good, bad = tmp_path / "a" / "sim.json", tmp_path / "b" / "sim.json"
    bad.parent.mkdir()
    bad.write_text("{oops")
    pending = [
        baseline.PendingFile(path, name, {"hard": {"hardware": {"key": "sim"}}})
        for path, name in ((good, "a"), (bad, "b"))
    ]
    with pytest.raises(GoldenError, match="not valid JSON"):
        baseline.flush(pending)
    assert not good.exists() and bad.read_text() == "{oops"


def test_a_golden_path_never_leaves_the_baseline_directory(tmp_path):
    from pytest_llmperf.files import OutsideDirectoryError

    assert baseline.golden_path(tmp_path, "sim-base", "sim") == tmp_path / "sim-base" / "sim.json"
    for profile, key in (("../../escaped", "sim"), ("/etc", "sim"), ("ok", "../../x")):
        with pytest.raises(OutsideDirectoryError, match="outside"):
            baseline.golden_path(tmp_path, profile, key)


def test_fingerprint_diff_names_each_changed_leaf():
    old = {
        "hardware": {"key": "8x-nvidia-b200"},
        "server_args": {"tp_size": 8, "mem_fraction_static": 0.88},
    }
    new = {
        "hardware": {"key": "8x-nvidia-b200"},
        "server_args": {"tp_size": 8, "mem_fraction_static": 0.9, "attention_backend": "fa3"},
    }
    assert fingerprint.diff(old, new) == [
        'server_args.attention_backend: (absent) \u2192 "fa3"',
        "server_args.mem_fraction_static: 0.88 \u2192 0.9",
    ]
    assert fingerprint.diff(old, old) == []


def test_a_launched_command_engine_records_its_executables_digest(tmp_path):
    import hashlib

    from pytest_llmperf.profiles_file import load_profiles

    binary = tmp_path / "llama-server"
    binary.write_bytes(b"build with -O1" * 1000)
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        f'[profiles.c]\nengine = "command"\ncommand = ["{binary}", "--port", "{{port}}"]\n'
    )
    profile = load_profiles(profiles).profiles["c"]
    soft = fingerprint.take(profile, {}, [str(binary), "--port", "1"]).soft
    assert (
        soft["server_binary"]
        == f"llama-server sha256:{hashlib.sha256(binary.read_bytes()).hexdigest()[:16]}"
    )
    binary.write_bytes(b"build with -O3" * 1000)  # a rebuild of the same version: a soft difference
    assert (
        fingerprint.take(profile, {}, [str(binary)]).soft["server_binary"] != soft["server_binary"]
    )
    # Attached: nothing to hash
    assert "server_binary" not in fingerprint.take(profile, {}, None).soft
    assert executable_digest([str(tmp_path / "missing")]) is None


def test_volatile_server_fields_are_not_hard_keys():
    info = {
        "port": 30001,
        "random_seed": 12345,
        "tp_size": 8,
        "version": "0.5.9",
        "internal_states": [{}],
    }
    assert sglang_args.normalized_server_args(info) == {"tp_size": 8}


PROFILE_KEYS = frozenset({"tp_size", "attention_backend"})


def sglang_fp(fields: dict, version: str = "0.5.23") -> fingerprint.Fingerprint:
    hard_args, soft_args = sglang_args.split_server_args(fields, PROFILE_KEYS)
    return fingerprint.Fingerprint(
        {"hardware": {"key": "sim"}, "engine": "sglang", "model": "m", "server_args": hard_args},
        {"server_version": version, "server_args": soft_args},
        PROFILE_KEYS,
    )


BASE = {"tp_size": 8, "attention_backend": "flashinfer", "mem_fraction_static": 0.88, "log_requests": False,
        "cuda_graph_max_bs": 128, "old_field": 1}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "hard"),
    [
        (
            {"attention_backend": "triton"},
            ['server_args.attention_backend: "flashinfer" → "triton"'],
        ),  # the profile's
        (
            {"mem_fraction_static": 0.8},
            ["server_args.mem_fraction_static: 0.88 → 0.8"],
        ),  # decides speed
        (
            {"cuda_graph_max_bs_decode": 64},
            ["server_args.cuda_graph_max_bs_decode: 128 → 64"],
        ),  # renamed field
        ({"log_requests": True}, []),  # any other field is soft
        ({"new_field": "x"}, []),  # a field one side lacks is soft
    ],
)
def test_only_what_decides_speed_makes_a_golden_incomparable(change, hard):
    golden = sglang_fp(BASE, "0.5.13").to_json()
    current = {
        k: v
        for k, v in BASE.items()
        if not (k == "cuda_graph_max_bs" and "cuda_graph_max_bs_decode" in change)
    }
    assert fingerprint.hard_changes(golden["hard"], sglang_fp({**current, **change})) == hard


def test_an_upgrade_is_summarized_softly():
    golden = sglang_fp(BASE, "0.5.19").to_json()
    new = (
        {k: v for k, v in BASE.items() if k != "old_field"}
        | {f"f{i}": 0 for i in range(10)}
        | {"log_requests": True}
    )
    lines = fingerprint.soft_changes(golden, sglang_fp(new, "0.5.23"))
    assert lines == [
        'server_version: "0.5.19" → "0.5.23"',
        "10 server field(s) added: f0, f1, f2, f3, f4, f5, f6, f7, and 2 more",
        "1 server field(s) removed: old_field",
        "server_args.log_requests: false → true",
    ]
    assert fingerprint.hard_changes(golden["hard"], sglang_fp(new, "0.5.23")) == []


def test_a_golden_recorded_before_the_split_is_read_the_same_way():
    """Older goldens hold every server field under hard: the same rule applies to them."""
    everything = {
        "hardware": {"key": "sim"},
        "engine": "sglang",
        "model": "m",
        "server_args": dict(BASE),
    }
    assert fingerprint.hard_changes(everything, sglang_fp({**BASE, "log_requests": True})) == []
    assert fingerprint.hard_changes(everything, sglang_fp({**BASE, "tp_size": 4})) == [
        "server_args.tp_size: 8 → 4"
    ]


def test_the_comparability_hash_follows_what_the_profile_sets():
    a, b = sglang_fp(BASE), sglang_fp({**BASE, "mem_fraction_static": 0.5, "new_field": 1})
    assert (
        a.comparability_hash
        == b.comparability_hash
        != sglang_fp({**BASE, "tp_size": 4}).comparability_hash
    )
