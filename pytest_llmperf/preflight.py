"""Checks made once, before any server starts, so that nothing fails after the GPU time is spent.

- :func:`refuse_xdist`: pytest-xdist would launch every profile's server in every worker and
  measure them at the same time; the plugin measures one server at a time, on its own.
- :func:`unwritable_outputs`: every file the run will write (goldens under ``--perf-update``, the
  run directory, ``--perf-json``, ``--perf-report``, ``--perf-benchmark-json``, ``--junitxml``)
  can be written, tried for real.
- :func:`unresolved_secrets`: every ``${NAME}`` a selected profile takes from the environment,
  and its ``api_key_env``, is set.
- :func:`load_datasets`: every selected profile's request file is read and checked line by line.
- :func:`unreachable_server`: the server ``--llm-server-url`` names answers.
- :func:`runner_health`: the GPUs the launches will use are fit to measure on (memory free,
  no failing memory, not hot or held back), read through NVML (host/gpu_health.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.files import OutsideDirectoryError, check_writable, confined
from pytest_llmperf.settings import Settings

if TYPE_CHECKING:
    from pytest_llmperf.history.recorder import HistoryRecorder
    from pytest_llmperf.history.store import HistoryStore
    from pytest_llmperf.load.dataset import Dataset
    from pytest_llmperf.profiles import Profile


def refuse_xdist(config: pytest.Config) -> None:
    """``-n``/``--dist`` with servers to measure: a UsageError that says why and what to do."""
    numprocesses = getattr(config.option, "numprocesses", None)
    dist = getattr(config.option, "dist", "no")
    if not (hasattr(config, "workerinput") or numprocesses or dist not in (None, "no")):
        return
    raise pytest.UsageError(
        f"pytest-llmperf cannot run under pytest-xdist (-n {numprocesses}, --dist {dist}): every worker "
        "would launch its own copy of each profile's server, the servers would be measured at the same "
        "time on the same machine, and the workers would overwrite each other's results and goldens. "
        "Run the performance suite without -n (or with -n 0). To run other tests in parallel in "
        "the same project, disable this plugin for that run: pytest -p no:llmperf -n 4 …"
    )


def unwritable_outputs(
    settings: Settings, selected: list[Profile], junitxml: str | None
) -> list[str]:
    """``path: reason`` for every output of the run that could not be written."""
    wanted: list[tuple[Path, bool, str]] = []
    if not settings.server_url:
        wanted.append((settings.run_dir_root, True, "run directory root (llmperf_run_dir)"))
    if settings.recording:
        for profile in selected:
            if profile.origin == profile.name:
                wanted.append(
                    (confined(settings.baseline_dir, profile.name), True, "golden directory")
                )
    if settings.json_path:
        wanted.append((Path(settings.json_path), False, "--perf-json"))
    if settings.report_dir:
        wanted.append((Path(settings.report_dir), True, "--perf-report"))
    if settings.benchmark_json:
        wanted.append((Path(settings.benchmark_json), False, "--perf-benchmark-json"))
    if junitxml:
        wanted.append((Path(junitxml), False, "--junitxml"))
    problems = []
    for path, directory, what in wanted:
        reason = check_writable(path, directory=directory)
        if reason is not None:
            problems.append(f"{what} {path}: {reason}")
    return problems


def check_outputs(config: pytest.Config, settings: Settings, selected: list[Profile]) -> None:
    try:
        problems = unwritable_outputs(settings, selected, getattr(config.option, "xmlpath", None))
    except OutsideDirectoryError as exc:  # pragma: no cover - profile names are checked on load
        raise pytest.UsageError(str(exc)) from None
    if problems:
        raise pytest.UsageError(
            "pytest-llmperf: these outputs of the run cannot be written, so the run would lose its "
            "results after measuring; fix them before starting:\n  " + "\n  ".join(problems)
        )


def raise_open_files(selected: list[Profile]) -> None:
    """Raise the soft open-file limit for the largest C now, before any server starts: a launched
    server inherits the limit, and one that can accept fewer connections than C leaves the rest
    waiting (they would stall). Where the hard limit is too low, the levels that need more fail
    one by one, each with the fix (fixtures: ensure_open_files before measuring)."""
    from pytest_llmperf.load.limits import ensure_open_files

    ensure_open_files(max(c for p in selected for c in p.concurrency))


def unreachable_server(settings: Settings, selected: list[Profile]) -> None:
    """``--llm-server-url``: the server answers its health endpoint now, or one UsageError
    before the plan (instead of a setup error per test after it)."""
    if not settings.server_url or len(selected) != 1:
        return
    from pytest_llmperf.secrets import resolve
    from pytest_llmperf.servers import readiness

    profile = selected[0]
    resolved = resolve(profile)
    headers = {"Authorization": f"Bearer {resolved.api_key}"} if resolved.api_key else {}
    problem = readiness.poll(
        settings.server_url.rstrip("/") + profile.readiness_path,
        timeout_s=0.0,
        headers=headers,
        request_timeout_s=10.0,
    )
    if problem is not None:
        raise pytest.UsageError(
            f"--llm-server-url {settings.server_url} {problem} (profile {profile.name!r}). Start "
            "the server, or check the URL and the profile's health_path."
        )


def runner_health(selected: list[Profile], settings: Settings) -> list[str]:
    """The GPUs of every launch on this host, read once: a UsageError that lists what makes
    measuring meaningless; the warnings, to be said in the header. Nothing without NVML."""
    from pytest_llmperf import engines

    if settings.server_url:
        return []
    local = [p for p in selected if engines.of(p).on_local_gpus(p)]
    if not local:
        return []
    import os

    from pytest_llmperf.host import gpu_health
    from pytest_llmperf.host.nvml import Gpu, session

    with session() as (nv, why_not):
        if nv is None:
            return [f"runner health not checked: {why_not}"]
        gpus: dict[str, Gpu] = {}
        problems: list[str] = []
        for p in local:
            found, unresolved = nv.gpus({**os.environ, **p.env})
            gpus.update((g.label, g) for g in found)
            problems += [f"profile {p.name}: {line}" for line in unresolved]
        waits = any(p.gpu_wait_s > 0 for p in local)
        health = gpu_health.check(nv, sorted(gpus.values(), key=lambda g: (g.index, g.label)),
                                  waits, kmsg=gpu_health.KMSG)  # fmt: skip
    health.warnings = problems + health.warnings
    if health.stops:
        raise pytest.UsageError(
            "pytest-llmperf: the runner's GPUs are not fit to measure on, so no server was "
            "started (the runner health pre-flight):\n  - "
            + "\n  - ".join(health.stops)
            + "".join(f"\n  also: {w}" for w in health.warnings)
        )
    return health.warnings


def carry_renamed_goldens(settings: Settings) -> list[str]:
    """``--perf-rename OLD=NEW``: move the goldens of a moved test file before anything runs;
    an unusable golden file is a UsageError, and then nothing is moved."""
    if not settings.renames:
        return []
    from pytest_llmperf.golden.store import GoldenError, rename

    notes = []
    try:
        for old, new in settings.renames:
            notes += rename(settings.baseline_dir, old, new) or [
                f"no golden under {settings.baseline_dir} belongs to {old}"
            ]
    except GoldenError as exc:
        raise pytest.UsageError(f"--perf-rename: {exc}") from None
    return notes


def unresolved_secrets(selected: list[Profile]) -> None:
    """Every ``${NAME}`` and ``api_key_env`` of the selected profiles is set, or a UsageError."""
    from pytest_llmperf.secrets import resolve

    for profile in selected:
        try:
            resolve(profile)
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from None


def load_datasets(selected: list[Profile]) -> dict[str, Dataset]:
    """Each selected profile's dataset, read and checked now: a malformed line is a UsageError
    that names the file, the line and the field, before any server starts."""
    out: dict[str, Dataset] = {}
    for profile in selected:
        path = profile.dataset_path
        if path is None:
            continue
        from pytest_llmperf.load.dataset import DatasetError, load_dataset

        try:
            dataset = load_dataset(path)
        except DatasetError as exc:
            raise pytest.UsageError(
                f"{exc} (profile {profile.name!r} in {profile.source}, field 'dataset')"
            ) from None
        if profile.api == "chat" and dataset.has_ids:
            raise pytest.UsageError(
                f"dataset {path} has requests given as input_ids, which the chat API (messages of "
                f"text) cannot send (profile {profile.name!r} in {profile.source}, field 'api'); "
                'use api = "sglang" or "openai", or text prompts'
            )
        out[profile.name] = dataset
    return out


def open_history(config: pytest.Config, settings: Settings, run_dir: Path) -> HistoryRecorder:
    """--perf-history: open the store and write the run's row, or one clear error now."""
    from pytest_llmperf.history.recorder import HistoryRecorder
    from pytest_llmperf.history.store import HistoryError

    assert settings.history is not None
    # Now, not at the first verdict: a SIGTERM that lands inside a lazy import of scipy leaves
    # it half-imported, and the end of the run (the history's summary) would fail on it.
    import scipy.special  # noqa: F401  (Student's t: pytest_llmperf.core.student)

    try:
        return HistoryRecorder.start(
            settings.history,
            mode=settings.mode.value,
            run_dir=run_dir,
            code_dir=Path(config.rootpath),
            command=["pytest", *config.invocation_params.args],
        )
    except HistoryError as exc:
        raise pytest.UsageError(
            f"{exc}\n(the store is opened before any server starts; fix or move it, or run "
            "without --perf-history)"
        ) from None


def open_history_store(settings: Settings) -> HistoryStore:
    """--perf-history with --perf-plan: the store, for its stored times only (no run is written)."""
    from pytest_llmperf.history.store import HistoryError, HistoryStore

    assert settings.history is not None
    try:
        return HistoryStore.open(settings.history)
    except HistoryError as exc:
        raise pytest.UsageError(str(exc)) from None
