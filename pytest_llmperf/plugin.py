"""pytest entry point (``pytest11: llmperf``): hooks and fixtures, each a short hand-off.

Fixtures:

- ``llm_profile`` (session): the :class:`~pytest_llmperf.profiles.Profile` of the current
  parameter; every test that uses a server is parametrized over the selected profiles.
- ``llm_server`` (session): that profile's server, launched once per session (or attached
  with ``--llm-server-url``) and stopped after its last test. Tests are ordered by profile, so
  two servers never run at once.
- ``llm_concurrency``: a test that asks for it runs once per concurrency level of each
  profile (ids such as ``sim-eagle3-C70``).
- ``llmperf`` (function): measure a point and check it
  (:class:`~pytest_llmperf.fixtures.llmperf.LLMPerfFixture`).
- ``llmperf_speedup`` (function): gate a speculative profile's speedup over its base
  (:class:`~pytest_llmperf.fixtures.speedup.LLMPerfSpeedupFixture`).
- ``llmperf_parity`` (function): greedy parity of a speculative profile with its base, from the
  continuations ``llmperf.greedy()`` kept (:mod:`pytest_llmperf.fixtures.parity`).

Importing this module stays cheap (no scipy, numpy, httpx, aiohttp, psutil or matplotlib):
pytest imports it in every run of an environment where the plugin is installed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING

import pytest

from pytest_llmperf.fixtures import markers
from pytest_llmperf.settings import Mode, Settings, add_options

if TYPE_CHECKING:
    from pytest_llmperf.core.points import Point
    from pytest_llmperf.fixtures.llmperf import LLMPerfFixture
    from pytest_llmperf.fixtures.parity import LLMPerfParityFixture
    from pytest_llmperf.fixtures.speedup import LLMPerfSpeedupFixture
    from pytest_llmperf.profiles import Profile
    from pytest_llmperf.servers.lifecycle import ServerHandle
    from pytest_llmperf.session import LLMPerfSession

#: The run's state (session.py) in ``config.stash``.
SESSION_KEY: pytest.StashKey[LLMPerfSession] = pytest.StashKey()

#: Sorts the speedup tests after every profile's measurements.
AFTER_ALL_PROFILES = 1 << 30
#: A confirmation with nothing to confirm skips with this reason, and is not shown.
NOTHING_TO_CONFIRM = "no point of this profile was left undecided by its launches"


class LLMPerfConfirmation(pytest.Item):
    """After a profile's tests: its points that the launches' noise left undecided, measured
    again on a fresh launch and judged over tonight's launches (fixtures/confirm.py); it fails
    for each point the fresh launch confirms as a FAIL. Not shown when there is none."""

    def __init__(self, *, profile: str, location_of: pytest.Item, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.profile_name = profile
        # Reported where the profile's last test is: no file of its own in the progress line.
        self._location = location_of.reportinfo()

    def runtest(self) -> None:
        from pytest_llmperf.fixtures.confirm import confirm
        from pytest_llmperf.progress import ProgressLine

        session = self.config.stash[SESSION_KEY]
        if not session.to_confirm.get(self.profile_name):
            pytest.skip(NOTHING_TO_CONFIRM)
        profile = session.profile(self.profile_name)
        failures = confirm(session, profile, ProgressLine.of(self.config))
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        path, line, _ = self._location
        return path, line, f"llmperf: confirm {self.profile_name} on a fresh launch"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # Imported here, not with the plugin: every pytest run of an environment that has the
    # plugin installed imports it, and most of them measure nothing.
    from pytest_llmperf import preflight
    from pytest_llmperf.selection import select_profiles
    from pytest_llmperf.session import LLMPerfSession

    config.addinivalue_line("markers", markers.DESCRIPTION)
    settings = Settings.from_pytest_config(config)
    profiles, selected = select_profiles(settings)
    if selected and not settings.plan_only:
        # Before any server starts: what would otherwise fail only after the measurement.
        preflight.refuse_xdist(config)
        preflight.unresolved_secrets(selected)
        preflight.check_outputs(config, settings, selected)
        preflight.raise_open_files(selected)
        preflight.unreachable_server(settings, selected)
        health = preflight.runner_health(selected, settings)
    else:
        health = []
    datasets = preflight.load_datasets(selected)
    renamed = preflight.carry_renamed_goldens(settings)
    run_dir = settings.run_dir_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    config.stash[SESSION_KEY] = LLMPerfSession(
        settings, profiles, selected, run_dir, datasets=datasets, renamed=renamed, health=health
    )
    if selected and settings.history:
        # Opened here, before any server starts: a corrupt or unreachable store is one line now,
        # not a traceback after an hour of GPU time. --perf-plan only reads its stored times.
        state = config.stash[SESSION_KEY]
        if settings.plan_only:
            state.plan_store = preflight.open_history_store(settings)
        else:
            state.history = preflight.open_history(config, settings, run_dir)
    if selected and not settings.server_url:
        _warn_about_leftover_servers(config, settings)
        _stop_servers_on_sigterm(config)


def _warn_about_leftover_servers(config: pytest.Config, settings: Settings) -> None:
    from pytest_llmperf.errors import LLMPerfWarning
    from pytest_llmperf.servers import leftovers

    found, concurrent = leftovers.still_running(settings.run_dir_root)
    if concurrent:
        config.issue_config_time_warning(
            LLMPerfWarning(
                "another run of pytest-llmperf is measuring on this machine now; its servers and "
                "its client share the CPUs (and any GPUs) with this run, so both runs' figures "
                "may read slower than the servers are. Run one at a time:\n  "
                + "\n  ".join(concurrent)
            ),
            stacklevel=2,
        )
    if found:
        config.issue_config_time_warning(
            LLMPerfWarning(
                "servers launched by an earlier run of pytest-llmperf are still running (that run was "
                "killed before it could stop them); they may hold the GPUs and slow this run down. "
                "They are not stopped automatically; check and stop them yourself (kill PID):\n  "
                + "\n  ".join(found)
            ),
            stacklevel=2,
        )


def _stop_servers_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM to pytest (a CI runner cancelling the job) would end it without teardown and leave
    the server holding its GPUs: turn it into KeyboardInterrupt, which pytest unwinds through the
    fixtures' finalizers. Only when nobody else handles SIGTERM; restored at unconfigure."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends pytest at once
        why = "SIGTERM: stopping the servers this run started"
        level = sys.modules.get("pytest_llmperf.load.level")
        # While a point is measured: its level is cancelled and raises KeyboardInterrupt when
        # it has unwound. Raised here, inside the event loop, it can land in a transport's
        # callback and be swallowed as a broken stream (seen: uvloop with aiohttp made it a
        # ClientPayloadError 4 times in 5, and the run went on). Not through SIGINT: a shell's
        # background job (a CI script's pytest) has it ignored, and asyncio then has no Ctrl-C.
        if level is not None and level.interrupt_measurement(why):
            return
        raise KeyboardInterrupt(why)

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(restore)


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.selected or session.profiles is None:
        return []
    where = (
        f"attached to {session.settings.server_url}"
        if session.settings.server_url
        else f"logs in {session.run_dir}"
    )
    return [
        f"llmperf: profiles {', '.join(p.name for p in session.selected)} ({session.profiles.path}); {where}",
        *(f"llmperf: goldens moved: {note}" for note in session.renamed),
        *(f"llmperf: runner health: {note}" for note in session.health),
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not {"llmperf_speedup", "llmperf_parity", "llm_profile"} & set(metafunc.fixturenames):
        return
    from pytest_llmperf.selection import (
        measurement_params,
        pair_params,
        rate_params,
        speedup_params,
    )

    session = metafunc.config.stash[SESSION_KEY]
    if "llmperf_speedup" in metafunc.fixturenames:
        metafunc.parametrize(
            "llmperf_speedup", speedup_params(session.profiles, session.selected), indirect=True
        )
        return
    if "llmperf_parity" in metafunc.fixturenames:
        metafunc.parametrize(
            "llmperf_parity", pair_params(session.profiles, session.selected), indirect=True
        )
        return
    if "llm_profile" not in metafunc.fixturenames:
        return
    if not session.selected:
        # Said once, as a usage error when collection ends (pytest_collection_finish), not as a
        # collection error with pytest's traceback per test file.
        session.unprofiled_tests.append(metafunc.definition.nodeid)
        return
    if "llm_request_rate" in metafunc.fixturenames:
        values, ids = rate_params(session.selected)
        metafunc.parametrize(
            ("llm_profile", "llm_request_rate"),
            values,
            indirect=["llm_profile"],
            scope="session",
            ids=ids,
        )
        return
    with_levels = "llm_concurrency" in metafunc.fixturenames
    options = markers.MarkerOptions.from_item(metafunc.definition)
    values, ids = measurement_params(
        session.selected, with_levels, options.concurrency, speculative_only=options.speculative
    )
    names = ("llm_profile", "llm_concurrency") if with_levels else "llm_profile"
    metafunc.parametrize(names, values, indirect=["llm_profile"], scope="session", ids=ids)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        session = items[0].config.stash.get(SESSION_KEY, None)
        if session is not None:
            session.whole_suite = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Group tests by profile (a stable sort): each server starts once, never two at once; a
    gated profile's confirmation comes right after its last test (before the next server)."""
    order: dict[str, int] = {}

    def key(item: pytest.Item) -> int:
        # Parity first: the speedup's verdict counts only if the pair still answers right.
        if "llmperf_parity" in getattr(item, "fixturenames", ()):
            return AFTER_ALL_PROFILES
        if "llmperf_speedup" in getattr(item, "fixturenames", ()):
            return AFTER_ALL_PROFILES + 1
        spec = getattr(item, "callspec", None)
        name = spec.params.get("llm_profile") if spec is not None else None
        return order.setdefault(name, len(order)) if name is not None else -1

    items.sort(key=key)
    state = config.stash.get(SESSION_KEY, None)
    if state is not None and state.settings.mode is Mode.GATE and not state.settings.plan_only:
        _add_confirmations(session, state, items)


def _add_confirmations(
    session: pytest.Session, state: LLMPerfSession, items: list[pytest.Item]
) -> None:
    """After the last test of each profile whose server can be launched again, its
    confirmation (LLMPerfConfirmation)."""
    last: dict[str, int] = {}
    for k, item in enumerate(items):
        spec = getattr(item, "callspec", None)
        name = spec.params.get("llm_profile") if spec is not None else None
        if name is not None and state.can_confirm(name):
            last[name] = k
    for name, k in sorted(last.items(), key=lambda kv: -kv[1]):
        items.insert(
            k + 1,
            LLMPerfConfirmation.from_parent(
                session, name=f"llmperf-confirm[{name}]", profile=name, location_of=items[k]
            ),
        )


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A confirmation with nothing to confirm is not shown (neither a letter nor a count)."""
    if report.skipped and "llmperf-confirm[" in report.nodeid:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        if NOTHING_TO_CONFIRM in str(reason):
            return "", "", ""
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """The plan of the run, before the first server starts (see pytest_llmperf/plan.py)."""
    state = session.config.stash.get(SESSION_KEY, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if state is not None and state.unprofiled_tests:
        path = state.settings.profiles_file
        raise pytest.UsageError(
            f"{state.unprofiled_tests[0]} needs a server profile, but there is no profiles file at "
            f"{path}. Create one (`python -m pytest_llmperf init` writes a working one), or point "
            "--llm-profiles-file PATH (ini: llmperf_profiles_file) at yours."
        )
    if state is None or not state.selected or reporter is None:
        return
    from pytest_llmperf import plan

    by_name = {p.name: p for p in state.selected}
    work = plan.collected(session.items, by_name)
    points, rates, launched = work.points, work.rates, work.launched
    settings = state.settings

    rate_plan = plan.rate_lines(
        rates, recording=settings.recording, update_runs=settings.update_runs
    )
    searches = [
        search
        for search in (
            plan.capacity_search(p, settings.baseline_dir, recording=settings.recording)
            for p in work.searched
        )
        if search is not None
    ]
    if not points:
        for line in [*rate_plan, *plan.capacity_lines(searches)]:
            reporter.write_line(line)
        return
    times = state.stored_times()
    state.plan = plan.levels(
        points,
        settings.baseline_dir,
        recording=settings.recording,
        update_runs=settings.update_runs,
        pool=settings.pool,
        times=times,
    )
    from pytest_llmperf.fixtures.server import unfair_plan_lines

    open_loop = plan.open_loop_levels(
        rates, recording=settings.recording, update_runs=settings.update_runs
    )
    # The live line's time left counts them too, each until it starts.
    state.plan_beside = {
        **{("rate", name, rate): s for (name, rate), s in open_loop.items()},
        **{("capacity", search.profile, 0.0): search.seconds for search in searches},
    }
    planned = plan.lines(
        state.plan,
        recording=settings.recording,
        times=times,
        beside=plan.Beside(
            sum(open_loop.values()),
            sum(search.seconds for search in searches),
            plan.loads(launched.values(), settings.baseline_dir),
        ),
    )
    confirming = (
        [(p, state.launches_to_confirm(p)) for p in by_name.values() if state.can_confirm(p.name)]
        if settings.mode is Mode.GATE
        else []
    )
    confirm = plan.confirmation_lines(state.plan, confirming, times)
    capacity = plan.capacity_lines(searches)
    for line in [*planned, *confirm, *rate_plan, *capacity, *unfair_plan_lines(state)]:
        reporter.write_line(line)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """--perf-plan: the plan is printed, nothing runs and no server starts."""
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None and state.settings.plan_only and state.selected:
        return True
    return None


@pytest.fixture(scope="session")
def llm_profile(request: pytest.FixtureRequest) -> Profile:
    session = request.config.stash[SESSION_KEY]
    name = getattr(request, "param", None)
    for profile in session.selected:
        if profile.name == name:
            return profile
    raise pytest.UsageError(f"llm_profile: {name!r} is not a selected profile")  # pragma: no cover


@pytest.fixture(scope="session")
def llm_server(llm_profile: Profile, request: pytest.FixtureRequest) -> Iterator[ServerHandle]:
    from pytest_llmperf.fixtures.server import start_server, stop_server
    from pytest_llmperf.progress import ProgressLine

    session = request.config.stash[SESSION_KEY]
    handle = start_server(llm_profile, session, ProgressLine.of(request.config))
    ready = time.monotonic()
    try:
        yield handle
    finally:
        session.server_served(llm_profile.name, time.monotonic() - ready)
        stop_server(handle)


@pytest.fixture
def llmperf(
    llm_profile: Profile, llm_server: ServerHandle, request: pytest.FixtureRequest
) -> Iterator[LLMPerfFixture]:
    from pytest_llmperf.fixtures.llmperf import LLMPerfFixture

    if llm_server.died:
        pytest.skip(f"{llm_profile.name}: the server {llm_server.died}; see {llm_server.log_path}")
    from pytest_llmperf.progress import ProgressLine

    fixture = LLMPerfFixture(
        llm_profile,
        llm_server,
        request.config.stash[SESSION_KEY],
        request.node.nodeid,
        markers.MarkerOptions.from_item(request.node),
        progress=ProgressLine.of(request.config),
    )
    yield fixture
    session = request.config.stash[SESSION_KEY]
    for point in session.points:
        if point.test == request.node.nodeid:
            session.store(point)  # again, judged: its verdict and every run it took
    _add_junit_properties(request.node, fixture.measured)


@pytest.fixture
def llmperf_speedup(request: pytest.FixtureRequest) -> Iterator[LLMPerfSpeedupFixture]:
    """Gate a speculative profile's speedup over its base, both measured in this run."""
    from pytest_llmperf.fixtures.speedup import LLMPerfSpeedupFixture

    session = request.config.stash[SESSION_KEY]
    spec, base, concurrency = request.param
    fixture = LLMPerfSpeedupFixture(
        session.profile(spec),
        session.profile(base),
        concurrency,
        session,
        request.node.nodeid,
        markers.MarkerOptions.from_item(request.node),
    )
    yield fixture
    for point in fixture.measured:
        session.store(point)  # again, judged
    _add_junit_properties(request.node, fixture.measured)


@pytest.fixture
def llmperf_parity(request: pytest.FixtureRequest) -> LLMPerfParityFixture:
    """Greedy parity of a speculative profile with its base, from the continuations each kept
    with ``llmperf.greedy()`` in this run."""
    from pytest_llmperf.fixtures.parity import LLMPerfParityFixture

    session = request.config.stash[SESSION_KEY]
    spec, base = request.param
    return LLMPerfParityFixture(
        session.profile(spec), session.profile(base), session, request.node.nodeid
    )


def _add_junit_properties(node: pytest.Item, points: Sequence[Point]) -> None:
    from pytest_llmperf.render.junit import properties

    for point in points:
        node.user_properties.extend(properties(point))


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    if session.has_results:
        _write_summary(terminalreporter, session, exitstatus)
    for failure in session.output_failures:
        terminalreporter.write_line(f"llmperf: NOT WRITTEN: {failure}", red=True)
    for note in session.end_notes:
        terminalreporter.write_line(f"llmperf: {note}", yellow=True)


def _write_summary(
    terminalreporter: pytest.TerminalReporter, session: LLMPerfSession, exitstatus: int
) -> None:
    from pytest_llmperf.render.sections import terminal_blocks

    results = session.results(
        whole_suite=session.whole_suite and exitstatus != pytest.ExitCode.INTERRUPTED
    )
    verbose = terminalreporter.config.get_verbosity() > 0
    for title, lines in terminal_blocks(results, verbose=verbose):
        if title is not None:
            terminalreporter.write_sep("=", title)
        for line, color in lines:
            terminalreporter.write_line(line, **({color: True} if color else {}))
    if session.servers and not session.settings.server_url:
        terminalreporter.write_line(f"server logs and command lines: {session.run_dir}")
    if session.settings.json_path and not any(
        f.startswith("--perf-json") for f in session.output_failures
    ):
        terminalreporter.write_line(f"results JSON: {session.settings.json_path}")
    for note in session.report_notes:
        terminalreporter.write_line(f"report: {note}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None:
        failed = state.finish(int(session.exitstatus))
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = failed  # a result was lost: not a green run
