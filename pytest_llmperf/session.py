"""The plugin's state for one pytest run, kept in ``config.stash``.

It holds the settings, the selected profiles, the run directory, the servers in use, every
point of every kind (one list: a measured figure, a speedup, a capacity, a startup, an
accuracy, greedy parity's identical share) and the goldens read and queued; at the end of the
run it writes the queued goldens and hands a :class:`~pytest_llmperf.core.results.Results` to
the renderers.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from pytest_llmperf.settings import Settings

if TYPE_CHECKING:
    # What the session holds is imported where it is made: a pytest run in a project that
    # only has the plugin installed makes a session and never needs any of it.
    from pytest_llmperf.core.parity import GreedyOutput, PairParity
    from pytest_llmperf.core.points import MeasuredPoint, Point
    from pytest_llmperf.core.results import Results
    from pytest_llmperf.core.speculative import Analysis
    from pytest_llmperf.core.verdict import LaunchSpread
    from pytest_llmperf.fixtures.confirm import Launched, Pending
    from pytest_llmperf.golden.fingerprint import Fingerprint
    from pytest_llmperf.golden.model import GoldenFile
    from pytest_llmperf.golden.store import PendingFile, PendingPoint
    from pytest_llmperf.history.recorder import HistoryRecorder
    from pytest_llmperf.history.store import HistoryStore
    from pytest_llmperf.history.timing import StoredTimes
    from pytest_llmperf.load.dataset import Dataset
    from pytest_llmperf.load.workload import Workload
    from pytest_llmperf.plan import PlannedLevel
    from pytest_llmperf.profiles import Profile, ProfileSet
    from pytest_llmperf.servers.lifecycle import ServerHandle

P = TypeVar("P", bound="Point")


@dataclass
class LLMPerfSession:
    settings: Settings
    profiles: ProfileSet | None
    selected: list[Profile]
    run_dir: Path
    #: Every point of the run, of every kind, in the order they were made (:meth:`record`).
    points: list[Point] = field(default_factory=list)
    #: Each profile's launch-to-ready seconds this session (None: attached, not launched).
    load_times: dict[str, float | None] = field(default_factory=dict)
    #: Greedy continuations (llmperf.greedy), by (profile, test function), for greedy parity:
    #: what was asked, not a result.
    greedy: dict[tuple[str, str], list[GreedyOutput]] = field(default_factory=dict)
    #: Why a profile's greedy continuations could not be kept for parity (log-probabilities
    #: short of the tokens generated, a failed logprob request), by (profile, test function):
    #: its parity is INVALID with this reason, not a FAIL.
    unverifiable: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Greedy parity of each speculative profile against its base (llmperf_parity). Not a
    #: point: it compares two servers' answers prompt by prompt, with no figure of its own
    #: and no golden; its figure, the identical share, is a point of the list above.
    parities: list[PairParity] = field(default_factory=list)
    servers: dict[str, ServerHandle] = field(default_factory=dict)
    fingerprints: dict[str, Fingerprint] = field(default_factory=dict)
    goldens: dict[Path, GoldenFile | None] = field(default_factory=dict)
    pending: dict[Path, PendingFile] = field(default_factory=dict)
    golden_notes: list[str] = field(default_factory=list)
    # What --perf-report / --perf-benchmark-json wrote
    report_notes: list[str] = field(default_factory=list)
    whole_suite: bool = True  # nothing deselected: goldens nobody used can be reported
    #: Golden files found unusable in this run: under --perf-update, nothing is written then.
    golden_errors: list[str] = field(default_factory=list)
    #: Outputs (goldens, JSON, reports) that could not be written at the end of the run.
    output_failures: list[str] = field(default_factory=list)
    #: The levels still to be measured, in run order, as the plan timed them (the live line's
    #: time left in the session); a level leaves it when its measurement starts.
    plan: list[PlannedLevel] = field(default_factory=list)
    #: The open-loop levels and capacity searches still to run, as the plan timed them, by
    #: ("rate", profile, rate) and ("capacity", profile, 0.0); one leaves when it starts.
    plan_beside: dict[tuple[str, str, float], float] = field(default_factory=dict)
    #: The selected profiles' request files, read and checked at configure time.
    datasets: dict[str, Dataset] = field(default_factory=dict)
    #: The workload each point was measured with, by (profile, golden key without metric):
    #: more runs of a point (stages, top-ups, another test's checks) use exactly the same.
    workloads: dict[tuple[str, str], Workload] = field(default_factory=dict)
    #: What --perf-rename moved, one line per golden file.
    renamed: list[str] = field(default_factory=list)
    #: The runner health pre-flight's warnings (host/gpu_health.py), said in the header.
    health: list[str] = field(default_factory=list)
    #: Tests that need a server profile, collected while there is no profiles file.
    unprofiled_tests: list[str] = field(default_factory=list)
    #: Points measured for a test before it ran (``llmperf.measured_by``), by (node id, C).
    measured_ahead: dict[tuple[str, int], MeasuredPoint] = field(default_factory=dict)
    #: --perf-history: the run's writer to the store (None without one).
    history: HistoryRecorder | None = None
    #: --perf-history with --perf-plan: the store, read for its stored times only.
    plan_store: HistoryStore | None = None
    #: What the end of the run says about goldens or the history (an interrupted update).
    end_notes: list[str] = field(default_factory=list)
    #: Points the launches' noise left undecided, by profile: measured again on a fresh
    #: launch after the profile's tests (fixtures/confirm.py).
    to_confirm: dict[str, list[Pending]] = field(default_factory=dict)
    #: The confirmation launches made so far, by profile, and what each decided.
    confirm_launches_made: dict[str, int] = field(default_factory=dict)
    confirmations: list[Launched] = field(default_factory=list)
    #: The engine channel's launches (``NAME@pinned``): the accept length each was pinned at
    #: and where it came from, by the speculative profile; or why it was not launched.
    pinned_at: dict[str, tuple[float, str]] = field(default_factory=dict)
    unpinned: dict[str, str] = field(default_factory=dict)

    def engine_channel_notes(self) -> dict[str, str]:
        """Per selected speculative profile: where its engine channel was pinned, or why it was
        not measured (core/channels.py)."""
        from pytest_llmperf import engines

        out = {}
        for p in self.selected:
            if not p.speculative or p.copy_of is not None:
                continue
            if p.name in self.pinned_at:
                length, source = self.pinned_at[p.name]
                out[p.name] = f"acceptance pinned at {length:g}, from {source}"
            elif p.name in self.unpinned:
                out[p.name] = f"not measured: {self.unpinned[p.name]}"
            elif engines.of(p).pins_acceptance is None:
                out[p.name] = (
                    f"not available: the {p.engine} engine has no switch that pins acceptance"
                )
            elif not p.pin_acceptance:
                out[p.name] = (
                    "not measured: set pin_acceptance = true for the engine's speed under "
                    "acceptance pinned at the golden accept length (one more launch)"
                )
            else:
                out[p.name] = "not measured in this run"
        return out

    def profile(self, name: str) -> Profile:
        return next(p for p in self.selected if p.name == name)

    def record(self, point: Point) -> None:
        """A point was made: kept for the results, and stored in the history at once where its
        kind is kept there (a run killed later keeps it)."""
        if not any(p is point for p in self.points):
            self.points.append(point)
        self.store(point)

    def can_confirm(self, profile: str) -> bool:
        """Whether a fresh launch of ``profile``'s server can still be made tonight to decide
        an undecided point: a server the plugin launches (not one it attaches to), with
        confirmation launches left of its ``confirm_launches``."""
        from pytest_llmperf.profiles import CopyKind

        found = self.profile(profile)
        copy = found.copy_of
        if copy is not None and copy.kind is not CopyKind.CONFIRMATION:
            return False  # a recording's later launch, A/B/A's second base: never gated
        origin = self.profile(found.origin)
        if self.settings.server_url or origin.url is not None:
            return False
        return self.confirm_launches_made.get(origin.name, 0) < self.launches_to_confirm(origin)

    def launches_to_confirm(self, profile: Profile) -> int:
        """The confirmation launches ``profile`` may make tonight: --perf-confirm-launches,
        else its ``confirm_launches``."""
        fixed = self.settings.confirm_launches
        return fixed if fixed is not None else profile.launches_to_confirm

    def of(self, kind: type[P]) -> list[P]:
        """The run's points of exactly this kind."""
        return [p for p in self.points if type(p) is kind]

    @property
    def has_results(self) -> bool:
        """Whether the run has anything to show: a point of any kind, or a parity check."""
        return bool(self.points or self.parities)

    def store(self, point: Point) -> None:
        """(Again:) the point as it stands, with more runs or its verdict, into the history."""
        if self.history is not None and point.in_history and point.values:
            self.history.point(point)

    def server_started(
        self, name: str, handle: ServerHandle, fingerprint: Fingerprint, load_s: float | None = None
    ) -> None:
        self.servers[name] = handle
        self.fingerprints[name] = fingerprint
        self.load_times[name] = load_s
        if self.history is not None:
            self.history.profile(name, fingerprint, handle.profile.engine, load_s)

    def server_served(self, name: str, seconds: float) -> None:
        """``name``'s server served its tests for ``seconds`` (ready to stop: every test of the
        profile, open loop and capacity included): the history keeps it for the next plan."""
        if self.history is not None:
            self.history.timing(name, "tests", name, seconds)

    def measured_with(self, point: MeasuredPoint, workload: Workload) -> None:
        """More runs of ``point`` (stages, top-ups, another test's checks) use this workload."""
        self.workloads[(point.profile, point.node.point_key(point.concurrency))] = workload

    def workload_of(self, point: MeasuredPoint) -> Workload:
        return self.workloads[(point.profile, point.node.point_key(point.concurrency))]

    def measured_ahead_for(self, nodeid: str, concurrency: int, point: MeasuredPoint) -> None:
        """``point`` was measured for test ``nodeid`` before it ran (llmperf.measured_by)."""
        self.measured_ahead[(nodeid, concurrency)] = point

    def take_measured_ahead(self, nodeid: str, concurrency: int) -> MeasuredPoint | None:
        return self.measured_ahead.pop((nodeid, concurrency), None)

    def level_started(self, profile: str, concurrency: int) -> None:
        """A level's measurement starts: it is no longer part of what is left to do."""
        at = next(
            (
                i
                for i, p in enumerate(self.plan)
                if (p.profile, p.concurrency) == (profile, concurrency)
            ),
            None,
        )
        if at is not None:
            del self.plan[at]

    def beside_started(self, kind: str, profile: str, rate: float = 0.0) -> None:
        """An open-loop level (``kind`` "rate") or a capacity search ("capacity") starts."""
        self.plan_beside.pop((kind, profile, rate), None)

    def planned_seconds(self) -> tuple[float, int]:
        """The levels still planned (the open-loop levels and capacity searches too): their
        time, as the plan timed them, and how many it could not time (no golden)."""
        later = [p.seconds for p in self.plan]
        timed = sum(s for s in later if s is not None) + sum(self.plan_beside.values())
        return timed, sum(s is None for s in later)

    def stored_times(self) -> dict[str, StoredTimes]:
        """Per selected profile, what its earlier runs took (--perf-history; {} without)."""
        store = self.history.store if self.history is not None else self.plan_store
        if store is None:
            return {}
        from pytest_llmperf.history.store import HistoryError
        from pytest_llmperf.history.timing import stored_times

        out = {}
        for profile in self.selected:
            try:
                found = stored_times(store, profile.name, recording=self.settings.recording)
            except HistoryError:
                return {}  # the plan falls back on the goldens; the run itself will say more
            if found is not None:
                out[profile.name] = found
        return out

    def golden_owner(self, profile: str) -> str:
        """The profile whose golden file ``profile``'s points belong to: a recording's later
        launch (``NAME@launch2``) records into NAME's."""
        found = next((p for p in self.selected if p.name == profile), None)
        if found is None or found.copy_of is None or not found.copy_of.records:
            return profile
        return found.copy_of.of

    def recording_launches(self, profile: str, *, open_loop: bool = False) -> tuple[int, int]:
        """Which launch of its recording ``profile`` is, and of how many: (1, 1) for a
        recording of one launch, (2, 4) for ``NAME@launch2`` of a recording of four; of an
        ``open_loop`` point, of the launches that measure one (Profile.measures_open_loop)."""
        from pytest_llmperf.profiles import CopyKind

        owner = self.golden_owner(profile)
        launches = [owner] + [
            p.name
            for p in self.selected
            if p.copy_of is not None
            and p.copy_of.of == owner
            and p.copy_of.kind is CopyKind.LATER_LAUNCH
            and (p.measures_open_loop or not open_loop)
        ]
        return (launches.index(profile) + 1 if profile in launches else 1), len(launches)

    def recorded_launches(self, profile: str, key: str) -> list[list[float]]:
        """The values this recording's earlier launches queued for ``key`` of ``profile``'s
        golden, one list per launch ([] on a recording's first launch)."""
        entry = self.pending.get(self.golden_file(profile))
        earlier = next((p for p in entry.points if p.key == key), None) if entry else None
        by_launch: dict[str | None, list[float]] = {}
        for run in earlier.runs if earlier is not None else ():
            by_launch.setdefault(run.launch_id, []).append(run.value)
        return list(by_launch.values())

    def golden_file(self, profile: str) -> Path:
        from pytest_llmperf.golden.store import golden_path

        return golden_path(
            self.settings.baseline_dir,
            self.golden_owner(profile),
            self.fingerprints[profile].hardware_key,
        )

    def golden(self, profile: str) -> GoldenFile | None:
        """The profile's golden file, read once per session (GoldenError if unusable)."""
        from pytest_llmperf.golden import store

        path = self.golden_file(profile)
        if path not in self.goldens:
            try:
                self.goldens[path] = store.load(path)
            except store.GoldenError as exc:
                self.golden_errors.append(str(exc))
                raise
        return self.goldens[path]

    def queue_golden(self, point: PendingPoint, profile: str) -> Path:
        from pytest_llmperf.golden.store import PendingFile

        path = self.golden_file(profile)
        owner = self.golden_owner(profile)
        entry = self.pending.setdefault(
            path, PendingFile(path, owner, self.fingerprints[profile].to_json())
        )
        earlier = next((p for p in entry.points if p.key == point.key), None)
        if earlier is not None and not {r.launch_id for r in earlier.runs} & {
            r.launch_id for r in point.runs
        }:
            # Another launch of the same recording: its runs join the first launch's.
            point = replace(point, runs=[*earlier.runs, *point.runs])
        entry.points = [p for p in entry.points if p.key != point.key] + [point]
        return path

    def unused_goldens(self) -> list[str]:
        """Recorded points of the selected profiles that no test measured in this run (a copy
        of a profile, a later or a confirmation launch, measures its origin's points)."""
        measured = {(p.profile, p.key) for p in self.points}
        copies = {p.name for p in self.selected if p.copy_of is not None}
        unused = []
        for profile in [name for name in self.servers if name not in copies]:
            path = self.golden_file(profile)
            golden = self.goldens.get(path)
            for key in sorted(golden.points if golden is not None else ()):
                if (profile, key) not in measured:
                    unused.append(f"{path}: {key}")
        return unused

    def analyses(self) -> list[Analysis]:
        """Each selected speculative profile against its base, when both were measured in this run,
        with the speculative server's own version, draft steps and CUDA-graph limit."""
        from pytest_llmperf.core import speculative
        from pytest_llmperf.core.points import MeasuredPoint

        out = []
        for profile in self.selected:
            if profile.speculative and profile.base_profile and profile.origin == profile.name:
                fp = self.fingerprints.get(profile.name)
                num_steps, max_bs = fp.reader.draft_shape(fp.server_args) if fp else (None, None)
                out += [
                    replace(analysis, num_steps=num_steps, cuda_graph_max_bs=max_bs)
                    for analysis in speculative.analyse_points(
                        profile.name,
                        profile.base_profile,
                        self.of(MeasuredPoint),
                        sglang_version=fp.soft.get("server_version") if fp else None,
                    )
                ]
        return out

    def results(self, *, whole_suite: bool) -> Results:
        """Everything the renderers show; unused goldens only when the whole suite ran."""
        from pytest_llmperf.core.results import ProfileFacts, Results

        return Results(
            points=list(self.points),
            parities=list(self.parities),
            analyses=self.analyses(),
            confirmations=[c.to_json() for c in self.confirmations],
            engine_channel=self.engine_channel_notes(),
            golden_notes=list(self.golden_notes),
            # Not when levels were restricted: their other levels are expected to go unused.
            unused_goldens=self.unused_goldens()
            if whole_suite
            and not self.settings.recording
            and self.settings.concurrency is None
            and self.settings.request_rate is None
            else [],
            profiles={
                p.name: ProfileFacts(p.fail_margin, p.min_requests, p.warmup, p.base_profile)
                for p in self.selected
            },
            fingerprints={name: fp.to_json() for name, fp in self.fingerprints.items()},
            servers={name: handle.describe() for name, handle in self.servers.items()},
            run_dir=str(self.run_dir),
            run_id=self.history.run_id if self.history is not None else None,
            update=self.settings.recording,
        )

    def finish(self, exit_status: int = 0) -> int:
        """End of the run: write the queued goldens (once, never half-way; none when the run
        was interrupted), then the output files, then mark the run done in the history.
        Returns the exit-status bits the run adds: a result that could not be written fails an
        otherwise green run."""
        interrupted = exit_status == pytest.ExitCode.INTERRUPTED
        if self.settings.recording and interrupted:
            kept = sum(len(f.points) for f in self.pending.values())
            self.end_notes.append(
                f"interrupted: no golden was changed (all or nothing); the {kept} points "
                "recorded so far were not written"
                + (" (they are in the history)" if self.history is not None else "")
                + ". Run --perf-update again to record them."
            )
        recorded = bool(self.pending) and not interrupted and self._write_goldens()
        if self.history is not None:
            try:
                self._fill_history(recorded)
            except Exception as exc:  # the results files matter more than the series' summary
                self.end_notes.append(f"the points' history could not be summarised: {exc!r}")
        if self.has_results:
            from pytest_llmperf.render import write

            settings = self.settings
            notes, failures = write.outputs(
                self.results(whole_suite=False),
                write.Outputs(settings.json_path, settings.report_dir, settings.benchmark_json),
                created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            self.report_notes += notes
            self.output_failures += failures
        if self.history is not None:
            self.history.finished(exit_status, complete=not interrupted)
            self.end_notes += self.history.notes()
        return int(pytest.ExitCode.TESTS_FAILED) if self.output_failures else 0

    def _fill_history(self, goldens_recorded: bool) -> None:
        """Each point's ``history`` (stored runs, change points) where its check did not judge
        one (--perf-measure, --perf-update, a MISSING golden); golden recordings as events."""
        from pytest_llmperf.history import gate

        recorder = self.history
        assert recorder is not None
        for path, pending in self.pending.items() if goldens_recorded else ():
            why = pending.points[0].why if pending.points else "--perf-update"
            recorder.golden_recorded(pending.profile, path, [p.key for p in pending.points], why)
        for point in self.points:
            if not point.in_history or point.history is not None or not point.values:
                continue
            fingerprint = self.fingerprints.get(point.profile)
            series = recorder.series_of(point, fingerprint.hardware_key if fingerprint else None)
            point.history = gate.summary(series, None) if series is not None else None

    def _write_goldens(self) -> bool:
        """All queued goldens, or none when any golden this run touched is unusable; whether
        they were written."""
        from pytest_llmperf.golden import store

        if self.golden_errors:
            self.output_failures.append(
                f"no golden was written, because a golden file of this run is unusable: "
                f"{self.golden_errors[0]}"
            )
            return False
        try:
            self.golden_notes = store.flush(list(self.pending.values()))
        except store.GoldenError as exc:
            self.output_failures.append(f"no golden was written: {exc}")
            return False
        except store.GoldenWriteError as exc:
            self.golden_notes = exc.notes
            self.output_failures += [f"golden not written: {line}" for line in exc.failed]
            return False
        self.end_notes += self._launch_spread_notes()
        return True

    def _launch_spread_notes(self) -> list[str]:
        """What the recording's launches say of the profile's ``launch_cv``: how far they
        differed, and a line when that is far from the prior the verdict weighs beside it."""
        from pytest_llmperf.golden import store

        notes = []
        for path, pending in self.pending.items():
            profile = next((p for p in self.selected if p.name == pending.profile), None)
            try:
                written = store.load(path)
            except store.GoldenError:
                continue
            if written is None or profile is None:
                continue
            measured = written.launch_spread("output_tok_s")
            if measured is None:
                continue
            sd, prior = math.expm1(measured.sd), profile.launch_cv
            launches = int(measured.dof) + 1
            said = (
                f"{profile.name}: its {launches} recorded launches differ by {sd:.1%} (sd of "
                f"output tok/s, pooled over the file's points)"
            )
            if sd > 2 * prior or (sd < prior / 2 and launches >= 4):
                said += (
                    f"; its launch_cv is {prior:g}: set launch_cv = {max(sd, 0.005):.2f} in "
                    f"{profile.source} (more launches measure it better: "
                    "--perf-update-launches N), so that the verdict neither cries wolf nor "
                    "lets a collapse through"
                )
            runs = self._runs_per_launch_note(
                profile, written.run_variance("output_tok_s"), measured
            )
            notes.append(said + runs)
        return notes

    def _runs_per_launch_note(
        self, profile: Profile, within: float | None, between: LaunchSpread
    ) -> str:
        """The runs a launch should carry from what this recording paid and saw (core/staging
        runs_per_launch), when it is far from the profile's ``runs``."""
        from pytest_llmperf.core.points import MeasuredPoint
        from pytest_llmperf.core.staging import MIN_STAGE, runs_per_launch

        names = {p.name for p in self.selected if p.origin == profile.name}
        loads = [s for n in names if (s := self.load_times.get(n)) is not None]
        durations = [
            r.duration_s for p in self.of(MeasuredPoint) if p.profile in names for r in p.runs
        ]
        if within is None or not loads or not durations:
            return ""
        load_s, run_s = statistics.fmean(loads), statistics.fmean(durations)
        best = runs_per_launch(load_s, run_s, within, between.variance)
        if best is None or profile.runs / 2 <= best <= profile.runs * 2:
            return ""
        advice = max(MIN_STAGE, round(best))
        rather = (
            ", and more launches (record_launches, confirm_launches)" if best < profile.runs else ""
        )
        return (
            f"; with a load of {load_s:.0f} s, a run of {run_s:.1f} s and runs "
            f"{math.expm1(math.sqrt(within)):.1%} apart within a launch, {best:.1f} runs a launch "
            f"buy the most precision per minute (Kalibera and Jones): runs = {advice}{rather}, "
            f"where it is {profile.runs}"
        )
