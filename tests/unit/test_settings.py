"""Options and ini keys frozen into Settings: command line over ini over default, paths, bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.settings import OPTIONS, Settings


def settings(pytester: pytest.Pytester, *args: str, ini: str = "") -> Settings:
    pytester.makeini("[pytest]\n" + ini)
    return Settings.from_pytest_config(pytester.parseconfig(*args))


def test_defaults_come_from_the_option_table(pytester):
    got = settings(pytester)
    defaults = {o.ini: o.default for o in OPTIONS}
    assert got.profiles_file == pytester.path / defaults["llmperf_profiles_file"]
    assert got.baseline_dir == pytester.path / defaults["llmperf_baseline_dir"]
    assert got.run_dir_root == pytester.path / defaults["llmperf_run_dir"]
    assert (got.transport, got.client_workers, got.update_runs) == ("aiohttp", 1, None)
    assert got.drift_margin == 0.05 and got.json_path is None and got.profile_names == ()
    assert Settings() == Settings(
        **{f: getattr(Settings(), f) for f in Settings.__dataclass_fields__}
    )


def test_the_command_line_wins_over_the_ini_and_paths_are_relative_to_where_each_was_given(
    pytester,
):
    (pytester.path / "sub").mkdir()
    ini = "llmperf_json = from-ini.json\nllmperf_baseline_dir = gold\nllmperf_profiles = a, b\nllmperf_aba = true\n"
    pytester.makeini("[pytest]\n" + ini)
    config = pytester.parseconfig(
        "--perf-json",
        "cli.json",
        "--llm-profile",
        "c",
        "--llm-profile",
        "d,c",
        "--llm-concurrency",
        "1,2,2",
        str(pytester.path / "sub"),
    )
    got = Settings.from_pytest_config(config)
    assert got.json_path == Path(config.invocation_params.dir) / "cli.json"
    assert got.baseline_dir == pytester.path / "gold"  # relative to the ini file
    assert got.profile_names == ("c", "d") and got.concurrency == (1, 2) and got.aba is True


def test_ini_alone_selects_profiles(pytester):
    assert settings(pytester, ini="llmperf_profiles = a, b\n").profile_names == ("a", "b")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--llm-concurrency", "1,x"),
            "--llm-concurrency: 'x' is not a positive integer. Example: --llm-concurrency 1,2,5",
        ),
        (
            ("--llm-client-transport", "curl"),
            "--llm-client-transport: 'curl' is not valid. Valid values: aiohttp, httpx.",
        ),
        (("--llm-client-workers", "0"), "--llm-client-workers: '0' is not a positive integer."),
        (
            ("--perf-drift-margin", "5"),
            "--perf-drift-margin: expected a fraction between 0 and 1 such as 0.05, got '5'.",
        ),
        (
            ("--perf-pool",),
            "--perf-pool and --perf-accept-worse only make sense with --perf-update.",
        ),
        (("--perf-update", "--perf-accept-worse", " "), "--perf-accept-worse needs a reason"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option_and_what_is_allowed(pytester, args, message):
    with pytest.raises(pytest.UsageError) as excinfo:
        settings(pytester, *args)
    assert message in str(excinfo.value)
