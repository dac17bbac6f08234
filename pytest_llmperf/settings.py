"""Options and ini keys, frozen once into :class:`Settings`.

Each value comes from the command line, else the ini file (``llmperf_*``), else the default;
invalid values raise ``pytest.UsageError`` naming the option and what is allowed.
"""

from __future__ import annotations

import enum
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

TRANSPORTS = ("aiohttp", "httpx")


class Mode(enum.Enum):
    """What a run does with the points it measures; fixtures/settle.py is the one place that
    reads it to decide (the run's other readers decide what to plan, check or write). Its
    value is what the history store keeps of a run."""

    #: The default: judge every point against its golden (and the history).
    GATE = "gate"
    #: ``--perf-update``: record every point into its golden; the run passes.
    RECORD = "update"
    #: ``--perf-measure``: measure and write the results (and the history), judge nothing.
    MEASURE = "measure"

    @property
    def option(self) -> str:
        """The option that chooses it (the default has none)."""
        return {Mode.RECORD: "--perf-update", Mode.MEASURE: "--perf-measure"}.get(self, "")


#: --perf-profile-on: which points get one more run with the server's profiler on.
PROFILE_ON = ("off", "fail", "warn", "always")


class Option(NamedTuple):
    flag: str
    ini: str
    help: str
    metavar: str
    default: str | None


#: Every option with a value, and its ini key: the one place their defaults are written.
OPTIONS = tuple(
    Option(*row)
    for row in (
        (
            "--llm-profile",
            "llmperf_profiles",
            "Profiles to run, comma-separated; repeatable. Default: ini llmperf_profiles, else the profiles "
            "file's `default`.",
            "NAME[,NAME...]",
            None,
        ),
        (
            "--llm-profiles-file",
            "llmperf_profiles_file",
            "Profiles file (TOML).",
            "PATH",
            "perf_suites/profiles.toml",
        ),
        (
            "--llm-server-url",
            "llmperf_server_url",
            "Attach to a running server (or router) for the selected profile instead of launching one.",
            "URL",
            None,
        ),
        (
            "--llm-concurrency",
            "llmperf_concurrency",
            "Override every profile's concurrency levels, e.g. 1,2,5.",
            "C[,C...]",
            None,
        ),
        (
            "--llm-request-rate",
            "llmperf_request_rate",
            "Override every profile's open-loop rate levels (requests/s), e.g. 0.5,1,2,5.",
            "R[,R...]",
            None,
        ),
        (
            "--perf-json",
            "llmperf_json",
            "Write every measured point, verdict and the speculative analysis as JSON to PATH.",
            "PATH",
            None,
        ),
        (
            "--perf-report",
            "llmperf_report",
            "Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY) and PNG plots into DIR.",
            "DIR",
            None,
        ),
        (
            "--perf-benchmark-json",
            "llmperf_benchmark_json",
            "Write the runs as pytest-benchmark JSON (readable by `pytest-benchmark compare`) to PATH.",
            "PATH",
            None,
        ),
        (
            "--perf-history",
            "llmperf_history",
            "Keep every run in a history store: a file (SQLite, created on first use) or a "
            "postgresql:// URL shared by several runners. Adds change points, a drift gate and "
            "plans from stored times; see `python -m pytest_llmperf history STORE`.",
            "STORE",
            None,
        ),
        (
            "--perf-profile-on",
            "llmperf_profile_on",
            "Profile one more run of each point that FAILs (fail), FAILs or WARNs (warn), or of "
            "every point (always) with the server's own profiler, bounded by the profile's "
            "profiler_steps; the trace and its kernel-time summary go with the point.",
            "off|fail|warn|always",
            "off",
        ),
        (
            "--perf-drift-margin",
            "llmperf_drift_margin",
            "With --perf-aba: largest base drift (before vs after) that keeps a speedup valid.",
            "FRACTION",
            "0.05",
        ),
        (
            "--perf-baseline-dir",
            "llmperf_baseline_dir",
            "Where golden baselines live: <dir>/<profile>/<hardware>.json.",
            "PATH",
            "baselines",
        ),
        (
            "--perf-update-runs",
            "llmperf_update_runs",
            "Runs per point when recording goldens: auto (5 shared among the recording's "
            "launches, at least 2 a launch; a launch adds runs up to 10 while they are cheap "
            "beside its load, and the last while the golden is not precise enough for 2-run "
            "checks) or a fixed N a launch.",
            "N",
            "auto",
        ),
        (
            "--perf-update-launches",
            "llmperf_update_launches",
            "Server launches a recording makes, each with its runs: profile (each profile's "
            "record_launches: for a launched server 2, more where its launch_cv is high; 1 for an "
            "attached one) or a fixed N.",
            "N",
            "profile",
        ),
        (
            "--perf-confirm-launches",
            "llmperf_confirm_launches",
            "Fresh launches a night may make to decide the points its launches' noise left "
            "undecided: profile (each profile's confirm_launches: 1 for a launched server, 0 "
            "for an attached one) or a fixed N (0: none; an undecided point WARNs).",
            "N",
            "profile",
        ),
        (
            "--llm-run-dir",
            "llmperf_run_dir",
            "Where each pytest run gets a directory with every server's log and exact command line.",
            "DIR",
            ".llmperf/runs",
        ),
        (
            "--llm-client-transport",
            "llmperf_client_transport",
            "httpx transport of the load generator: aiohttp (fastest, measured) or httpx (httpcore/h11).",
            "NAME",
            "aiohttp",
        ),
        (
            "--llm-client-workers",
            "llmperf_client_workers",
            "Load-generator processes; C is split across them. Raise it when runs are flagged client-bound.",
            "N",
            "1",
        ),
    )
)
DEFAULTS = {option.ini: option.default for option in OPTIONS}


class Flag(NamedTuple):
    flag: str
    dest: str
    ini: str | None  # a boolean ini key of the same meaning, or None
    help: str
    metavar: str | None = None  # a flag that takes a value (not a switch)


#: The switches (and --perf-accept-worse, which only makes sense on the command line).
FLAGS = (
    Flag(
        "--perf-update",
        "perf_update",
        None,
        "Measure, then write golden baselines for every point that ran; the run passes.",
    ),
    Flag(
        "--perf-pool",
        "perf_pool",
        None,
        "With --perf-update: add this server launch's runs to the golden's instead of "
        "replacing them (record 2 launches x 5 runs).",
    ),
    Flag(
        "--perf-accept-worse",
        "llmperf_accept_worse",
        None,
        "With --perf-update: allow replacing a golden with a worse one; REASON is stored "
        "in the golden's history.",
        "REASON",
    ),
    Flag(
        "--perf-rename",
        "llmperf_rename",
        None,
        "Move the goldens of test file OLD to NEW (paths as in node ids, e.g. "
        "perf_suites/test_old.py=perf_suites/test_new.py) after moving the file; repeatable.",
        "OLD=NEW",
    ),
    Flag(
        "--perf-measure",
        "perf_measure",
        "llmperf_measure",
        "Measure every point and write the results (and the history), judging nothing: no "
        "golden is needed and none is written. Compare two such runs with "
        "`python -m pytest_llmperf history STORE --compare A B`.",
    ),
    Flag(
        "--perf-aba",
        "llmperf_aba",
        "llmperf_aba",
        "Measure each speculative profile's base before and after it (A/B/A) and report the "
        "base's drift; drift beyond --perf-drift-margin makes the speedup INVALID.",
    ),
    Flag(
        "--perf-plan",
        "llmperf_plan",
        "llmperf_plan",
        "Print the run's plan (levels, runs, requests, tokens and the estimated time per "
        "profile, from each golden's throughput) and run nothing: no server is started.",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmperf", "LLM-serving performance (pytest-llmperf)")
    for switch in FLAGS:
        if switch.metavar is not None:
            repeated = {"action": "append"} if switch.flag == "--perf-rename" else {}
            group.addoption(
                switch.flag,
                dest=switch.dest,
                metavar=switch.metavar,
                default=None,
                help=switch.help,
                **repeated,
            )
            continue
        # A switch with an ini key: None when not given, so the ini decides.
        unset = None if switch.ini else False
        group.addoption(
            switch.flag, action="store_true", default=unset, dest=switch.dest, help=switch.help
        )
        if switch.ini:
            parser.addini(switch.ini, f"Like {switch.flag}.", type="bool", default=False)
    for flag, ini, help_text, metavar, default in OPTIONS:
        shown = f" Default: {default}." if default else ""
        if flag == "--llm-profile":
            group.addoption(
                flag, action="append", dest="llmperf_profiles", metavar=metavar, help=help_text
            )
        else:
            group.addoption(flag, dest=ini, metavar=metavar, default=None, help=help_text + shown)
        parser.addini(ini, help_text + shown, default=default)


def _default(ini: str) -> str:
    value = DEFAULTS[ini]
    assert value is not None
    return value


@dataclass(frozen=True)
class Settings:
    """Every option, resolved; the defaults are OPTIONS', so a test can build one with keywords."""

    profiles_file: Path = Path(_default("llmperf_profiles_file"))
    profile_names: tuple[str, ...] = ()  # empty: use the file's default
    server_url: str | None = None
    concurrency: tuple[int, ...] | None = None
    request_rate: tuple[float, ...] | None = None
    json_path: Path | None = None
    run_dir_root: Path = Path(_default("llmperf_run_dir"))
    transport: str = _default("llmperf_client_transport")
    client_workers: int = int(_default("llmperf_client_workers"))
    #: What the run does with its points (--perf-update records, --perf-measure only measures).
    mode: Mode = Mode.GATE
    pool: bool = False
    accept_worse: str | None = None
    baseline_dir: Path = Path(_default("llmperf_baseline_dir"))
    update_runs: int | None = None  # None: auto (see core/staging.py, golden_is_precise)
    #: --perf-update-launches: the launches every profile records (None: its record_launches).
    launches: int | None = None
    #: --perf-confirm-launches: the confirmation launches every profile may make (None: its
    #: confirm_launches).
    confirm_launches: int | None = None
    report_dir: Path | None = None
    benchmark_json: Path | None = None
    aba: bool = False  # --perf-aba: measure each speculative profile's base again after it
    drift_margin: float = float(_default("llmperf_drift_margin"))
    #: --perf-plan: print the plan of a run in ``mode`` (a recording's, with --perf-update) and
    #: run nothing. Not a mode of its own: it is a run of a mode that is only planned.
    plan_only: bool = False
    #: --perf-rename OLD=NEW: goldens of moved test files, carried before the run.
    renames: tuple[tuple[str, str], ...] = ()
    #: --perf-history: a path (resolved) or a database URL, as given.
    history: str | None = None
    #: --perf-profile-on: which points get a profiled run (off, fail, warn, always).
    profile_on: str = "off"

    @property
    def recording(self) -> bool:
        """Whether the run records goldens (--perf-update)."""
        return self.mode is Mode.RECORD

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> Settings:
        def value(ini: str) -> tuple[str | None, Path]:
            """The option's value (command line, else ini, else default) and the directory a
            relative path is relative to."""
            cli = config.getoption(ini)
            if cli is not None:
                return cli, Path(config.invocation_params.dir)
            base = config.inipath.parent if config.inipath else config.rootpath
            raw = config.getini(ini)
            return (str(raw) if raw not in (None, "") else DEFAULTS[ini]), base

        def path(ini: str) -> Path | None:
            raw, base = value(ini)
            return _resolve(base, raw) if raw else None

        cli_profiles = config.getoption("llmperf_profiles")
        raw_profiles = (
            ",".join(cli_profiles) if cli_profiles else value("llmperf_profiles")[0] or ""
        )
        names = [n for n in re.split(r"[,\s]+", raw_profiles) if n]

        update = bool(config.getoption("perf_update"))
        pool = bool(config.getoption("perf_pool"))
        accept_worse = config.getoption("llmperf_accept_worse")
        measure_only = config.getoption("perf_measure")
        if measure_only is None:
            measure_only = bool(config.getini("llmperf_measure"))
        _check_update_options(update, pool, accept_worse, bool(measure_only))
        aba = config.getoption("llmperf_aba")
        plan_only = config.getoption("llmperf_plan")
        if plan_only is None:
            plan_only = bool(config.getini("llmperf_plan"))
        profiles_file, run_dir_root, baseline_dir = (
            path("llmperf_profiles_file"),
            path("llmperf_run_dir"),
            path("llmperf_baseline_dir"),
        )
        # Defaulted
        assert profiles_file is not None and run_dir_root is not None and baseline_dir is not None
        return cls(
            profiles_file=profiles_file,
            profile_names=tuple(dict.fromkeys(names)),
            server_url=value("llmperf_server_url")[0],
            concurrency=_parse_concurrency(value("llmperf_concurrency")[0]),
            request_rate=_parse_rates(value("llmperf_request_rate")[0]),
            json_path=path("llmperf_json"),
            run_dir_root=run_dir_root,
            transport=_parse_choice(
                "--llm-client-transport", value("llmperf_client_transport")[0], TRANSPORTS
            ),
            client_workers=_parse_positive(
                "--llm-client-workers", value("llmperf_client_workers")[0]
            ),
            mode=Mode.RECORD if update else Mode.MEASURE if measure_only else Mode.GATE,
            pool=pool,
            accept_worse=accept_worse,
            baseline_dir=baseline_dir,
            update_runs=_parse_runs("--perf-update-runs", value("llmperf_update_runs")[0]),
            launches=_parse_runs(
                "--perf-update-launches", value("llmperf_update_launches")[0], auto="profile"
            ),
            confirm_launches=_parse_count(
                "--perf-confirm-launches", value("llmperf_confirm_launches")[0]
            ),
            plan_only=bool(plan_only),
            report_dir=path("llmperf_report"),
            benchmark_json=path("llmperf_benchmark_json"),
            aba=bool(aba if aba is not None else config.getini("llmperf_aba")),
            drift_margin=_parse_fraction("--perf-drift-margin", value("llmperf_drift_margin")[0]),
            renames=_parse_renames(config.getoption("llmperf_rename") or []),
            history=_history_store(*value("llmperf_history")),
            profile_on=_parse_choice(
                "--perf-profile-on", value("llmperf_profile_on")[0], PROFILE_ON
            ),
        )


def _check_update_options(
    update: bool, pool: bool, accept_worse: str | None, measure_only: bool
) -> None:
    """The recording options make sense together, or a usage error says which do not."""
    if (pool or accept_worse) and not update:
        raise pytest.UsageError(
            "--perf-pool and --perf-accept-worse only make sense with --perf-update."
        )
    if accept_worse is not None and not accept_worse.strip():
        raise pytest.UsageError(
            "--perf-accept-worse needs a reason, e.g. --perf-accept-worse='driver 590, see #123'."
        )
    if measure_only and update:
        raise pytest.UsageError(
            "--perf-measure judges nothing and writes no golden; --perf-update records "
            "goldens. Use one of them."
        )


def _history_store(raw: str | None, base: Path) -> str | None:
    """A database URL as given, a path resolved as every other path option is."""
    if not raw:
        return None
    return raw if "://" in raw else str(_resolve(base, raw))


def _resolve(base: Path, value: str) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path


def _parse_concurrency(raw: str | None) -> tuple[int, ...] | None:
    if raw is None:
        return None
    levels = []
    for part in re.split(r"[,\s]+", raw.strip()):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise pytest.UsageError(
                f"--llm-concurrency: {part!r} is not a positive integer. Example: --llm-concurrency 1,2,5"
            )
        levels.append(int(part))
    if not levels:
        raise pytest.UsageError(
            "--llm-concurrency: no levels given. Example: --llm-concurrency 1,2,5"
        )
    return tuple(dict.fromkeys(levels))


def _parse_rates(raw: str | None) -> tuple[float, ...] | None:
    if raw is None:
        return None
    rates: list[float] = []
    for part in re.split(r"[,\s]+", raw.strip()):
        if not part:
            continue
        try:
            rate = float(part)
        except ValueError:
            rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            raise pytest.UsageError(
                f"--llm-request-rate: {part!r} is not a positive number of requests/s. "
                "Example: --llm-request-rate 0.5,1,2,5"
            )
        rates.append(rate)
    if not rates:
        raise pytest.UsageError(
            "--llm-request-rate: no rates given. Example: --llm-request-rate 0.5,1,2,5"
        )
    return tuple(dict.fromkeys(rates))


def _parse_choice(option: str, raw: str | None, choices: tuple[str, ...]) -> str:
    if raw is None or raw not in choices:
        raise pytest.UsageError(
            f"{option}: {raw!r} is not valid. Valid values: {', '.join(choices)}."
        )
    return raw


def _parse_fraction(option: str, raw: str | None) -> float:
    try:
        fraction = float(raw or "")
    except ValueError:
        fraction = -1.0
    if not 0 < fraction < 1:
        raise pytest.UsageError(
            f"{option}: expected a fraction between 0 and 1 such as 0.05, got {raw!r}."
        )
    return fraction


def _parse_renames(raw: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in raw:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip() or "::" in item:
            raise pytest.UsageError(
                f"--perf-rename: {item!r} is not OLD=NEW; give the test file's old and new paths "
                "as node ids write them, e.g. --perf-rename perf_suites/test_a.py=perf_suites/test_b.py"
            )
        pairs.append((old.strip(), new.strip()))
    return tuple(pairs)


def _parse_runs(option: str, raw: str | None, auto: str = "auto") -> int | None:
    if raw == auto:
        return None
    if raw is None or not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{option}: {raw!r} is neither {auto!r} nor a positive integer.")
    return int(raw)


def _parse_count(option: str, raw: str | None) -> int | None:
    """``profile`` (None: each profile's own), or a whole number, 0 or more."""
    if raw == "profile":
        return None
    if raw is None or not raw.isdigit():
        raise pytest.UsageError(f"{option}: {raw!r} is neither 'profile' nor a whole number.")
    return int(raw)


def _parse_positive(option: str, raw: str | None) -> int:
    if raw is None or not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{option}: {raw!r} is not a positive integer.")
    return int(raw)
