"""pytest entry point (``pytest11: llmperf``): options, parametrization, fixtures, summary.

Fixtures:

- ``llm_profile`` (session): the :class:`~pytest_llmperf.profiles.Profile` of the current
  parameter; every test that uses a server is parametrized over the selected profiles.
- ``llm_server`` (session): that profile's server, launched once per session (or attached
  with ``--llm-server-url``) and stopped after its last test. Tests are ordered by profile, so
  two servers never run at once.
- ``llm_concurrency``: a test that asks for it runs once per concurrency level of each
  profile (ids such as ``sim-eagle3-C70``).
- ``llmperf`` (function): measure a point and check it (:class:`~pytest_llmperf.bench.LLMPerf`).
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Iterator

import pytest

from pytest_llmperf import baseline, fingerprint, report
from pytest_llmperf.errors import LLMPerfWarning, ProfileError, ServerError
from pytest_llmperf.profiles import Profile, load_profiles
from pytest_llmperf.files import write_json_atomic
from pytest_llmperf.session import SESSION_KEY, LLMPerfSession
from pytest_llmperf.settings import Settings, add_options


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    settings = Settings.from_pytest_config(config)
    profiles = None
    selected: list[Profile] = []
    if settings.profile_names or settings.profiles_file.exists():
        try:
            profiles = load_profiles(settings.profiles_file)
            names = list(settings.profile_names or profiles.default)
            if not names:
                raise ProfileError(
                    f"no profile selected: pass --llm-profile NAME, set ini llmperf_profiles, or add "
                    f"`default = [...]` to {settings.profiles_file}. Available profiles: {', '.join(profiles.names())}."
                )
            selected = profiles.select(names)
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.server_url and len(selected) != 1:
        raise pytest.UsageError(
            f"--llm-server-url attaches one server to one profile; {len(selected)} are selected "
            f"({', '.join(p.name for p in selected)}). Select exactly one with --llm-profile."
        )
    if settings.concurrency is not None:
        selected = [_with_concurrency(p, settings.concurrency) for p in selected]
    if settings.rebaseline:
        selected = _with_rebaselines(selected)
    run_dir = settings.run_dir_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    config.stash[SESSION_KEY] = LLMPerfSession(settings, profiles, selected, run_dir)
    _register_marker(config)
    if selected and not settings.server_url:
        _stop_servers_on_sigterm(config)


def _stop_servers_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM to pytest (a CI runner cancelling the job) would end it without teardown and leave
    the server holding its GPUs: turn it into KeyboardInterrupt, which pytest unwinds through the
    fixtures' finalizers. Only when nobody else handles SIGTERM; restored at unconfigure."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends pytest at once
        raise KeyboardInterrupt("SIGTERM: stopping the servers this run started")

    signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


def _register_marker(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "llmperf(fail_margin=0.15, warn_margin=0.05): this test's verdict margins, overriding the profile's"
    )


def _with_concurrency(profile: Profile, levels: tuple[int, ...]) -> Profile:
    from dataclasses import replace

    return replace(profile, concurrency=levels)


class _ProgressLine:
    """One updating terminal line while a server loads (a line per new stage when not a TTY)."""

    def __init__(self, config: pytest.Config) -> None:
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.stage: str | None = None

    def __call__(self, message: str) -> None:
        self._uncaptured(self._show, message)

    def _uncaptured(self, write, *args) -> None:
        if self.reporter is None:
            return
        if self.capture is not None:
            with self.capture.global_and_fixture_disabled():  # fixture setup runs under output capture
                write(*args)
        else:
            write(*args)

    def _show(self, message: str) -> None:
        stage = message.rsplit(",", 1)[0]
        if self.reporter.isatty:
            if self.stage is None:
                self.reporter.write("\n")
            self.reporter.rewrite(message, erase=True)
        elif stage != self.stage:
            self.reporter.write_line(message)
        self.stage = stage

    def finish(self) -> None:
        if self.reporter is not None and self.reporter.isatty and self.stage is not None:
            self._uncaptured(self.reporter.write, "\n")


def _warn_if_unfair(session: LLMPerfSession, spec: Profile) -> None:
    """A speculative profile should differ from its base only in the speculative flags."""
    from pytest_llmperf.sglang_args import unfair_differences

    base = next((p for p in session.selected if p.name == spec.base_profile), None)
    if not spec.speculative or base is None or spec.rebaseline_of:
        return
    diff = unfair_differences(spec.args, base.args)
    if diff:
        warnings.warn(LLMPerfWarning(
            f"{spec.name} differs from its base {base.name} beyond the speculative flags, so the speedup also "
            f"measures these: {'; '.join(diff)}. Give both profiles the same values for a fair comparison."),
            stacklevel=2)


def _with_rebaselines(selected: list[Profile]) -> list[Profile]:
    """A/B/A: after each speculative profile whose base is selected, a second copy of the base."""
    from dataclasses import replace

    by_name = {p.name: p for p in selected}
    out: list[Profile] = []
    for profile in selected:
        out.append(profile)
        base = by_name.get(profile.base_profile or "")
        if profile.speculative and base is not None:
            out.append(replace(base, name=f"{base.name}@after", rebaseline_of=base.name))
    return out


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.selected:
        return []
    where = f"attached to {session.settings.server_url}" if session.settings.server_url else f"logs in {session.run_dir}"
    return [f"llmperf: profiles {', '.join(p.name for p in session.selected)} ({session.profiles.path}); {where}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "llmperf_speedup" in metafunc.fixturenames:
        return _parametrize_speedups(metafunc)
    if "llm_profile" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash[SESSION_KEY]
    if not session.selected:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} needs a server profile, but no profiles file was found at "
            f"{session.settings.profiles_file}. Pass --llm-profiles-file PATH (ini: llmperf_profiles_file)."
        )
    if "llm_concurrency" in metafunc.fixturenames:
        pairs = [(p.name, c) for p in session.selected for c in p.concurrency]
        metafunc.parametrize(
            ("llm_profile", "llm_concurrency"), pairs, indirect=["llm_profile"], scope="session",
            ids=[f"{name}-C{c}" for name, c in pairs],
        )
    else:
        names = [p.name for p in session.selected]
        metafunc.parametrize("llm_profile", names, indirect=True, scope="session", ids=names)


def _parametrize_speedups(metafunc: pytest.Metafunc) -> None:
    """One test per (speculative profile, level both it and its base measure)."""
    session = metafunc.config.stash[SESSION_KEY]
    by_name = {p.name: p for p in session.selected}
    params = []
    for spec in session.selected:
        base = by_name.get(spec.base_profile or "")
        if spec.speculative and base is not None:
            params += [pytest.param((spec.name, base.name, c), id=f"{spec.name}-vs-{base.name}-C{c}")
                       for c in spec.concurrency if c in base.concurrency]
    if not params:
        pairs = ", ".join(f"{p.base_profile},{p.name}" for p in (session.profiles.profiles.values() if session.profiles
                                                                   else ()) if p.speculative and p.base_profile)
        reason = ("no speculative profile was selected together with its base profile"
                  + (f"; select a pair, e.g. --llm-profile={pairs.split(', ')[0]}" if pairs else ""))
        params = [pytest.param(None, id="no-pair", marks=pytest.mark.skip(reason=reason))]
    metafunc.parametrize("llmperf_speedup", params, indirect=True)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        session = items[0].config.stash.get(SESSION_KEY, None)
        if session is not None:
            session.whole_suite = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group tests by profile (a stable sort): each server starts once, never two at once."""
    order = {}

    def key(item: pytest.Item) -> int:
        if "llmperf_speedup" in getattr(item, "fixturenames", ()):
            return 1 << 30  # after every profile's measurements
        spec = getattr(item, "callspec", None)
        name = spec.params.get("llm_profile") if spec is not None else None
        return order.setdefault(name, len(order)) if name is not None else -1

    items.sort(key=key)


@pytest.fixture(scope="session")
def llm_profile(request: pytest.FixtureRequest) -> Profile:
    session = request.config.stash[SESSION_KEY]
    name = getattr(request, "param", None)
    for profile in session.selected:
        if profile.name == name:
            return profile
    raise pytest.UsageError(f"llm_profile: {name!r} is not a selected profile")  # pragma: no cover


@pytest.fixture(scope="session")
def llm_server(llm_profile: Profile, request: pytest.FixtureRequest) -> Iterator:
    from pytest_llmperf import server as lifecycle

    session = request.config.stash[SESSION_KEY]
    failure = None
    try:
        if session.settings.server_url:
            handle = lifecycle.attach(llm_profile, session.settings.server_url)
        else:
            _warn_if_unfair(session, llm_profile)
            handle = lifecycle.launch(llm_profile, session.run_dir)
            for note in handle.notes:
                warnings.warn(LLMPerfWarning(f"{llm_profile.name}: {note}"), stacklevel=2)
            progress = _ProgressLine(request.config)
            try:
                lifecycle.wait_ready(handle, progress=progress)
            except BaseException:
                lifecycle.stop(handle, grace_s=5.0)
                raise
            finally:
                progress.finish()
        handle.info = lifecycle.fetch_info(handle)
    except ServerError as exc:
        failure = str(exc)
    if failure is not None:
        pytest.fail(failure, pytrace=False)  # outside the except: no "during handling" chain in the report
    session.servers[llm_profile.name] = handle
    session.fingerprints[llm_profile.name] = fingerprint.take(llm_profile, handle.info, handle.command)
    try:
        yield handle
    finally:
        before = len(handle.notes)
        lifecycle.stop(handle)
        for note in handle.notes[before:]:  # GPU memory still held after teardown
            warnings.warn(LLMPerfWarning(note), stacklevel=2)


@pytest.fixture
def llmperf(llm_profile: Profile, llm_server, request: pytest.FixtureRequest):
    from pytest_llmperf.bench import LLMPerf, marker_margins

    if llm_server.died:
        pytest.skip(f"{llm_profile.name}: the server {llm_server.died}; see {llm_server.log_path}")
    bench = LLMPerf(llm_profile, llm_server, request.config.stash[SESSION_KEY], request.node.nodeid,
                    marker_margins(request.node))
    yield bench
    _add_junit_properties(request.node, bench.measured)


def _add_junit_properties(node: pytest.Item, points) -> None:
    """Measured, golden, ratio and verdict per point as JUnit XML properties (pytest --junitxml)."""
    from pytest_llmperf.bench import junit_properties

    for point in points:
        node.user_properties.extend(junit_properties(point))


@pytest.fixture
def llmperf_speedup(request: pytest.FixtureRequest):
    """Gate a speculative profile's speedup over its base, both measured in this run."""
    from pytest_llmperf.bench import marker_margins
    from pytest_llmperf.speedup_gate import SpeedupGate

    session = request.config.stash[SESSION_KEY]
    spec, base, concurrency = request.param
    profiles = {p.name: p for p in session.selected}
    gate = SpeedupGate(profiles[spec], profiles[base], concurrency, session, request.node.nodeid,
                       marker_margins(request.node))
    yield gate
    _add_junit_properties(request.node, gate.measured)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.points:
        return
    terminalreporter.write_sep("=", "llmperf: output throughput per concurrency")
    for line in report.table_lines(session.points):
        terminalreporter.write_line(line)
    for line in report.speculative_lines(session):
        terminalreporter.write_line(line)
    for line, color in report.verdict_lines(session, whole_suite=session.whole_suite and exitstatus != 2):
        terminalreporter.write_line(line, **({color: True} if color else {}))
    if session.servers and not session.settings.server_url:
        terminalreporter.write_line(f"server logs and command lines: {session.run_dir}")
    if session.settings.json_path:
        terminalreporter.write_line(f"results JSON: {session.settings.json_path}")
    for note in session.report_notes:
        terminalreporter.write_line(f"report: {note}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(SESSION_KEY, None)
    if state is None:
        return
    if state.pending:
        # Goldens are written here, once, at the end: never half-way through a run.
        state.golden_notes = baseline.flush(list(state.pending.values()))
    if state.settings.json_path and state.points:
        write_json_atomic(Path(state.settings.json_path), state.results_json())
    if state.settings.report_dir and state.points:
        from pytest_llmperf import report_dir

        state.report_notes += report_dir.write(state, state.settings.report_dir)
    if state.settings.benchmark_json and state.points:
        from pytest_llmperf.benchmark_json import export

        write_json_atomic(state.settings.benchmark_json, export(state))
        state.report_notes.append(f"pytest-benchmark JSON: {state.settings.benchmark_json}")
