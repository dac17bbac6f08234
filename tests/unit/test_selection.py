"""Which profiles a run measures: selection, overrides, A/B/A copies and the speedup parameters."""

from __future__ import annotations

import textwrap

import pytest

from pytest_llmperf.profiles import CopyKind, ProfileCopy
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.selection import select_profiles, speedup_params, with_aba_copies
from pytest_llmperf.settings import Settings

PROFILES = """
default = ["base"]

[profiles.base]
concurrency = [1, 4, 8]

[profiles.spec]
extends = "base"
concurrency = [1, 8, 16]
extra_args = ["--speculative-algorithm", "EAGLE3"]
"""


@pytest.fixture
def profiles_file(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text(textwrap.dedent(PROFILES))
    return path


def test_the_files_default_then_the_named_profiles_with_levels_overridden(profiles_file):
    _, selected = select_profiles(Settings(profiles_file=profiles_file))
    assert [p.name for p in selected] == ["base"]
    _, selected = select_profiles(
        Settings(profiles_file=profiles_file, profile_names=("spec", "base"), concurrency=(2,))
    )
    assert [(p.name, p.concurrency) for p in selected] == [("spec", (2,)), ("base", (2,))]


def test_no_file_and_no_names_selects_nothing(tmp_path):
    assert select_profiles(Settings(profiles_file=tmp_path / "absent.toml")) == (None, [])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"profile_names": ("nope",)}, "unknown profile 'nope'"),
        (
            {"profile_names": ("base", "spec"), "server_url": "http://x"},
            "--llm-server-url attaches one server",
        ),
    ],
)
def test_a_wrong_selection_is_a_usage_error(profiles_file, kwargs, message):
    with pytest.raises(pytest.UsageError, match=message):
        select_profiles(Settings(profiles_file=profiles_file, **kwargs))


def test_aba_measures_the_base_again_after_its_speculative_profile(profiles_file):
    profiles = load_profiles(profiles_file)
    out = with_aba_copies(profiles.select(["base", "spec"]))
    assert [(p.name, p.copy_of) for p in out] == [
        ("base", None),
        ("spec", None),
        ("base@after", ProfileCopy("base", CopyKind.AFTER)),
    ]
    assert not out[-1].copy_of.records  # measured for the base's drift, judged by nobody


def test_speedup_params_cover_the_levels_both_measure_or_skip_saying_how_to_select_a_pair(
    profiles_file,
):
    profiles = load_profiles(profiles_file)
    params = speedup_params(profiles, profiles.select(["base", "spec"]))
    assert [(p.values[0], p.id) for p in params] == [
        (("spec", "base", 1), "spec-vs-base-C1"),
        (("spec", "base", 8), "spec-vs-base-C8"),
    ]
    (skipped,) = speedup_params(profiles, profiles.select(["spec"]))
    assert skipped.marks[0].kwargs["reason"] == (
        "no speculative profile was selected together with its base "
        "profile; select a pair, e.g. --llm-profile=base,spec"
    )
