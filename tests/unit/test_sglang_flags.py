"""SGLang flag adaptation against the flag tables of several versions (reference §1.1–1.3)."""

from __future__ import annotations

import pytest

from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.engines.sglang_flags import adapt, unfair_differences
from pytest_llmperf.errors import ServerStartError

SEED_BASELINE = [
    "--tp",
    "8",
    "--attention-backend",
    "flashinfer",
    "--enable-flashinfer-allreduce-fusion",
    "--cuda-graph-max-bs",
    "128",
    "--disable-custom-all-reduce",
]


#: The shipped baseline profile's flags as SGLang 0.5.6 - 0.5.13 take them (the original flag names) ...
OLD_NAMES = ["--tp-size", "8", "--attention-backend", "flashinfer", "--enable-flashinfer-allreduce-fusion",
             "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce"]  # fmt: skip
#: ... and from 0.5.14 on (deprecated aliases in 0.5.14 - 0.5.19; --cuda-graph-max-bs removed in 0.5.20).
NEW_NAMES = ["--tp-size", "8", "--attention-backend", "flashinfer", "--flashinfer-allreduce-fusion-backend", "auto",
             "--cuda-graph-max-bs-decode", "128", "--disable-custom-all-reduce"]  # fmt: skip


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.5.6", OLD_NAMES), ("0.5.13", OLD_NAMES), ("0.5.14", NEW_NAMES), ("0.5.23", NEW_NAMES)],
)
def test_the_seed_flags_as_each_version_understands_them(version, expected):
    adapted = adapt(SEED_BASELINE, version, where="p")
    assert adapted.args == expected
    assert (
        "--tp rewritten to --tp-size (SGLang has no --tp flag; it only matched by prefix)"
        in adapted.notes
    )


def test_notes_say_why_a_flag_was_rewritten():
    notes = adapt(["--cuda-graph-max-bs=64"], "0.5.23", where="p")
    assert notes.args == ["--cuda-graph-max-bs-decode=64"]
    assert notes.notes == [
        "--cuda-graph-max-bs rewritten to --cuda-graph-max-bs-decode (removed in 0.5.20; SGLang 0.5.23)"
    ]
    assert adapt(["--cuda-graph-max-bs", "64"], "0.5.18", where="p").notes == [
        "--cuda-graph-max-bs rewritten to --cuda-graph-max-bs-decode (deprecated since 0.5.14; SGLang 0.5.18)"
    ]


def test_dead_flag_and_speculative_cap_are_warnings():
    notes = adapt(
        ["--num-continuous-decode-steps", "4", "--speculative-algorithm", "EAGLE3"],
        "0.5.23",
        where="p",
    ).notes
    assert any(n.startswith("warning: --num-continuous-decode-steps has no effect") for n in notes)
    assert any("cap running requests at 48 unless --max-running-requests" in n for n in notes)
    capped = adapt(
        ["--speculative-algorithm", "EAGLE3", "--max-running-requests", "256"], "0.5.23", where="p"
    )
    assert capped.notes == []


def test_adaptive_speculation_is_refused_where_it_does_not_exist():
    with pytest.raises(
        ServerStartError,
        match=r"profiles.toml: profile 'eagle3': --speculative-adaptive needs "
        r"SGLang 0.5.11 or later; this interpreter has SGLang 0.5.9",
    ):
        adapt(["--speculative-adaptive"], "0.5.9", where="profiles.toml: profile 'eagle3'")
    assert adapt(["--speculative-adaptive"], "0.5.11", where="p").args == ["--speculative-adaptive"]


def test_unknown_version_changes_nothing_but_tp_and_says_so():
    adapted = adapt(["--cuda-graph-max-bs", "8"], "main-abc123", where="p")
    assert adapted.args == ["--cuda-graph-max-bs", "8"]
    assert adapted.notes == ["SGLang version 'main-abc123' not understood; flags passed unchanged"]


def test_parse_version():
    assert parse_version("0.5.14.post2") == (0, 5, 14)
    assert parse_version("v0.5") == (0, 5, 0)
    assert parse_version("sim-0.1.0") is None and parse_version(None) is None


def test_unfair_differences_show_everything_beyond_the_speculative_flags():
    base = ["--tp-size", "8", "--mem-fraction-static", "0.85", "--cuda-graph-max-bs", "128"]
    spec = base[:2] + [
        "--mem-fraction-static",
        "0.88",
        "--cuda-graph-max-bs",
        "128",
        "--attention-backend",
        "fa3",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
    ]
    assert unfair_differences(spec, base) == [
        "--attention-backend: <unset> \u2192 fa3",
        "--mem-fraction-static: 0.85 \u2192 0.88",
    ]
    assert unfair_differences(base + ["--speculative-algorithm", "EAGLE3"], base) == []


@pytest.mark.parametrize(
    ("flag", "version", "expected", "note"),
    [
        ("--stream-output", "0.5.9", "--stream-output", None),
        ("--stream-output", "0.5.14", "--incremental-streaming-output", "deprecated since 0.5.11"),
        ("--stream-output", "0.5.23", "--incremental-streaming-output", "removed in 0.5.20"),
        ("--incremental-streaming-output", "0.5.6", "--stream-output", "its name before 0.5.11"),
        ("--incremental-streaming-output", "0.5.23", "--incremental-streaming-output", None),
    ],
)
def test_streaming_output_flag_by_version(flag, version, expected, note):
    adapted = adapt(["--tp-size", "1", flag], version, where="p")
    assert adapted.args == ["--tp-size", "1", expected]
    rewrites = [
        n
        for n in adapted.notes
        if "rewritten to --stream" in n or "rewritten to --incremental" in n
    ]
    assert (note is None and not rewrites) or (note is not None and note in rewrites[0])
