"""The objects the plugin's fixtures return, and the server a ``llm_server`` fixture holds.

- :class:`LLMPerfFixture` (``llmperf``): measure a point against the profile's server, then
  check it in the test itself, so a failure carries the test's id: INVALID (the runs are not a
  measurement of the server), then under ``--perf-update`` the point is queued for its golden
  file, otherwise MISSING, INCOMPARABLE or the statistical verdict against the golden, adding
  runs on the still-running server while it is UNCERTAIN (3 → 6 → 10).
- :class:`LLMPerfSpeedupFixture` (``llmperf_speedup``): gate a speculative profile's speedup over
  its base. Both profiles are measured in the same pytest run (the speedup tests are ordered
  after every profile's tests), so the speedup survives drift that moves both absolute figures
  together, and fails when speculation loses its benefit although each figure stays within its
  margin. The samples are per-run ratios; the golden holds the recorded ratios in the
  speculative profile's golden file, and the verdict is decided at once (the servers are gone).
- :func:`start_server` / :func:`stop_server`: the ``llm_server`` fixture's setup and teardown.
"""

from __future__ import annotations

import math
import warnings
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.metrics import MIN_SAMPLES, summarize_run
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import MeasuredPoint, Point, SpeedupPoint
from pytest_llmperf.core.speculative import paired_ratios
from pytest_llmperf.core.verdict import (
    MIN_STAGE,
    RECORD_MAX_RUNS,
    RECORD_MIN_RUNS,
    STAGES,
    Verdict,
    decide,
    first_stage,
    golden_is_precise,
)
from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.errors import LLMPerfWarning, ServerDiedError, ServerError
from pytest_llmperf.golden import check
from pytest_llmperf.golden.store import GoldenError, PendingRun
from pytest_llmperf.profiles import Profile
from pytest_llmperf.session import LLMPerfSession

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_llmperf.core.metrics import RunMetrics
    from pytest_llmperf.engines.lifecycle import ServerHandle
    from pytest_llmperf.load.loadgen import LevelPlan, Progress
    from pytest_llmperf.load.workload import Workload
    from pytest_llmperf.progress import ProgressLine

MARKER_FIELDS = ("fail_margin", "warn_margin")


@dataclass(frozen=True)
class Margins:
    fail: float
    warn: float


def margins(
    profile: Profile,
    marker: dict[str, float],
    *,
    fail_margin: float | None = None,
    warn_margin: float | None = None,
    latency: bool = False,
) -> Margins:
    """The profile's verdict margins (its latency margins for a latency), overridden by
    ``@pytest.mark.llmperf(...)`` on the test and then by the arguments of the check."""
    fail = profile.latency_fail_margin if latency else profile.fail_margin
    warn = profile.latency_warn_margin if latency else profile.warn_margin
    return Margins(
        fail=fail_margin if fail_margin is not None else marker.get("fail_margin", fail),
        warn=warn_margin if warn_margin is not None else marker.get("warn_margin", warn),
    )


def marker_margins(node: pytest.Item) -> dict[str, float]:
    """``@pytest.mark.llmperf(fail_margin=0.2, warn_margin=0.08)``: per-test margins."""
    mark = node.get_closest_marker("llmperf")
    if mark is None:
        return {}
    if mark.args or set(mark.kwargs) - {*MARKER_FIELDS, "concurrency"}:
        raise pytest.UsageError(
            f"{node.nodeid}: @pytest.mark.llmperf takes only keyword arguments "
            f"{', '.join(MARKER_FIELDS)}, concurrency; "
            f"got args={mark.args!r} kwargs={sorted(mark.kwargs)}."
        )
    margins = {k: v for k, v in mark.kwargs.items() if k in MARKER_FIELDS}
    for name, value in margins.items():
        if not isinstance(value, (int, float)) or not 0 < value < 1:
            raise pytest.UsageError(
                f"{node.nodeid}: @pytest.mark.llmperf({name}={value!r}) must be between 0 and 1."
            )
    return margins


def served_model(server: ServerHandle) -> str:
    """The ``model`` field OpenAI requests must name: what the server lists, else SGLang's "default"."""
    models = server.info.get("/v1/models") or {}
    data = models.get("data") if isinstance(models, dict) else None
    if data and isinstance(data[0], dict) and data[0].get("id"):
        return str(data[0]["id"])
    return "default"


#: The first SGLang that reports speculative counts over the OpenAI API (when asked).
SPEC_DETAILS_OVER_OPENAI = (0, 5, 19)


def server_sglang_version(server: ServerHandle) -> tuple[int, int, int] | None:
    """The SGLang version the server reports on /server_info (None for other servers)."""
    info = server.info.get("/server_info") or server.info.get("/get_server_info") or {}
    return parse_version(str(info.get("version"))) if isinstance(info, dict) else None


def report_body(profile: Profile, server: ServerHandle) -> dict[str, Any]:
    """What a request must ask for so that the server reports what the metrics need: over the
    OpenAI API, SGLang sends a speculative server's verify counts only when asked (0.5.19+)."""
    version = server_sglang_version(server)
    if (
        profile.api == "openai"
        and profile.speculative
        and version
        and version >= SPEC_DETAILS_OVER_OPENAI
    ):
        return {"return_spec_tokens_details": True}
    return {}


def accept_length_note(profile: Profile, server: ServerHandle) -> str | None:
    """Where the accept length cannot be had, say so instead of leaving the column empty."""
    version = server_sglang_version(server)
    if (
        profile.api == "openai"
        and profile.speculative
        and version
        and version < SPEC_DETAILS_OVER_OPENAI
    ):
        return (
            f"accept length cannot be measured over the OpenAI API on SGLang "
            f"{'.'.join(map(str, version))}: it reports speculative counts there only from 0.5.19 on. "
            'Use api = "sglang" (native /generate) to measure it.'
        )
    return None


def _golden(session: LLMPerfSession, point: Point) -> tuple[Path, dict[str, Any] | None]:
    """The point's golden file and content, or fail the test when the file is unusable."""
    __tracebackhide__ = True
    try:
        return session.golden_file(point.profile), session.golden(point.profile)
    except GoldenError as exc:
        point.outcome = Outcome.INVALID
        problem = str(exc)
    pytest.fail(problem, pytrace=False)  # outside the except: no "during handling" chain


def _record(
    session: LLMPerfSession, point: Point, runs: list[PendingRun], warn_margin: float
) -> None:
    """Under --perf-update: queue ``point`` for its golden file (written at the end of the run)."""
    __tracebackhide__ = True
    path, golden = _golden(session, point)
    old = ((golden or {}).get("points") or {}).get(point.key)
    settings = session.settings
    pending = check.pending(
        point,
        runs,
        old,
        pool=settings.pool,
        accept_worse=settings.accept_worse,
        warn_margin=warn_margin,
    )
    check.recorded(point, session.queue_golden(pending, point.profile))


def _known_metric(method: str, metric: str) -> None:
    """Fail the test when ``metric`` is not a figure a run has, naming those it has."""
    __tracebackhide__ = True
    from pytest_llmperf.core.metrics import METRICS

    if metric not in METRICS:
        pytest.fail(
            f"llmperf.{method}: unknown metric {metric!r}; choose from {', '.join(METRICS)}",
            pytrace=False,
        )


def _too_few_samples(point: MeasuredPoint) -> int | None:
    """The fewest values a run of ``point`` had for its latency percentile, when too few."""
    from pytest_llmperf.core.metrics import too_few_samples

    counts = [n for n in (too_few_samples(r, point.metric) for r in point.runs) if n is not None]
    return min(counts) if counts else None


def _fail_if_invalid(point: Point, what: str) -> None:
    __tracebackhide__ = True
    if point.problems:
        point.message = f"{point.label}: INVALID"
        pytest.fail(f"{point.label}: {what}:\n  " + "\n  ".join(point.problems), pytrace=False)


@dataclass
class LLMPerfFixture:
    """The ``llmperf`` fixture: bound to one test, one profile and its server."""

    profile: Profile
    server: ServerHandle
    session: LLMPerfSession
    nodeid: str
    marker: dict[str, float] = field(default_factory=dict)  # from @pytest.mark.llmperf
    measured: list[MeasuredPoint] = field(
        default_factory=list
    )  # this test's points, for JUnit properties
    #: The live line while a point is measured (None: no terminal output).
    progress: ProgressLine | None = None

    def workload(self, output_len: int | None = None, input_len: int | None = None) -> Workload:
        """The profile's workload; a test's own ``output_len`` replaces its output lengths, its
        own ``input_len`` its prompts (token ids of that exact length, none shared)."""
        from pytest_llmperf.load.lengths import Lengths
        from pytest_llmperf.load.workload import Workload

        profile = self.profile
        own_input = input_len is not None
        return Workload(
            api=profile.api,
            output_len=output_len or profile.output_len,
            output_lengths=None if output_len else profile.output_lengths,
            input=Lengths.fixed(input_len) if input_len is not None else profile.input_len,
            shared_prefix_len=0 if own_input else profile.shared_prefix_len,
            seed=profile.seed,
            token_id_range=profile.token_id_range,
            dataset=None if own_input else self.session.datasets.get(profile.name),
            model=served_model(self.server),
            extra_body=profile.extra_body,
            report_body=report_body(profile, self.server),
        )

    def measure(
        self,
        concurrency: int,
        *,
        runs: int | None = None,
        output_len: int | None = None,
        input_len: int | None = None,
        metric: str = "output_tok_s",
    ) -> MeasuredPoint:
        """Warm up at ``concurrency``, then run ``runs`` closed-loop runs of N = max(floor, 4·C)
        requests (or steady-state windows). ``output_len`` and ``input_len`` (exact prompt
        tokens, sent as token ids) make the test's own workload instead of the profile's.

        Under ``--perf-update`` at least ``--perf-update-runs`` runs are made, for the golden.
        """
        __tracebackhide__ = True
        ahead = self.session.measured_ahead.pop((self.nodeid, concurrency), None)
        if ahead is not None and (runs, output_len, input_len, metric) == (
            None,
            None,
            None,
            ahead.metric,
        ):
            self.measured.append(ahead)
            return ahead
        return self._measure(concurrency, runs, output_len, input_len, metric, self.nodeid)

    def measured_by(self, test: str, concurrency: int) -> MeasuredPoint:
        """The point ``test`` (a test function of this module) measured at ``concurrency`` in
        this session, to check more of its figures without spending server time again, e.g.
        ``llmperf.check(llmperf.measured_by("test_output_throughput", c), metric="ttft_p99_s")``.
        When that test did not run (deselected), the point is measured now, as it would have."""
        __tracebackhide__ = True
        node = NodeId(self.nodeid)
        nodeid = self.nodeid.replace(f"::{node.function}", f"::{test}", 1)
        for point in reversed(self.session.points):
            if (
                point.profile == self.profile.name
                and point.concurrency == concurrency
                and point.gated_from is None
                and NodeId(point.test).without_params == NodeId(nodeid).without_params
            ):
                return point
        point = self._measure(concurrency, None, None, None, "output_tok_s", nodeid)
        # When that test runs later in the session, it gets this point instead of measuring again.
        self.session.measured_ahead[(nodeid, concurrency)] = point
        return point

    def _measure(
        self,
        concurrency: int,
        runs: int | None,
        output_len: int | None,
        input_len: int | None,
        metric: str,
        nodeid: str,
    ) -> MeasuredPoint:
        __tracebackhide__ = True
        from pytest_llmperf.load.loadgen import LevelPlan

        profile = self.profile
        asked = runs
        runs = runs or profile.runs
        if self.session.settings.update:
            fixed = self.session.settings.update_runs
            # auto: more follow in check() until the golden is precise.
            runs = max(runs, fixed if fixed is not None else RECORD_MIN_RUNS)
        workload = replace(
            self.workload(output_len, input_len),
            salt=zlib.crc32(NodeId(nodeid).point_key(concurrency).encode()),
        )
        n_requests = profile.requests_per_run(concurrency)
        point = MeasuredPoint(
            profile=profile.name,
            test=nodeid,
            concurrency=concurrency,
            metric=metric,
            launch_id=self.server.launch_id,
            output_len=workload.output_len,
            api=workload.api,
            workload={**workload.describe(), **profile.measured_over(concurrency)},
        )
        self.measured.append(point)
        self.session.workloads[(point.profile, point.node.point_key(concurrency))] = workload
        self._leave_plan(concurrency)
        if not profile.remeasure_of:  # never gated
            gold = self._golden_values(point)  # a corrupt golden fails here, before measuring
            settings = self.session.settings
            if gold and asked is None and not settings.update:
                runs = first_stage(gold, margins(profile, self.marker).fail, runs)
            elif settings.update and settings.pool and settings.update_runs is None:
                # Another launch for a golden that has its runs: this launch adds its offset
                # (launch-to-launch drift), for which MIN_STAGE runs do; check() tops up only
                # while the pooled golden is not precise.
                if len(gold) >= RECORD_MIN_RUNS:
                    runs = MIN_STAGE
        from pytest_llmperf.load.limits import ensure_open_files

        too_few = ensure_open_files(concurrency)
        if too_few:
            point.notes.append(too_few)
            self.session.record(point)
            _fail_if_invalid(point, "INVALID, not measured")
        point.runs = self._runs(
            workload,
            LevelPlan(
                concurrency, n_requests, runs, profile.warmup, profile.window_s, profile.settle_s
            ),
            point,
        )
        self.session.record(point)
        return point

    def _runs(self, workload: Workload, plan: LevelPlan, point: Point) -> list[RunMetrics]:
        __tracebackhide__ = True
        from pytest_llmperf.load.loadgen import flush_cache
        from pytest_llmperf.load.workers import measure

        server, settings = self.server, self.session.settings
        try:
            server.ensure_alive("before this test")
            raw = measure(
                server.base_url,
                workload,
                plan,
                workers=settings.client_workers,
                transport=settings.transport,
                timeout_s=self.profile.request_timeout_s,
                headers=server.headers,
                # Not between windowed runs: requests cut at a window's close are still being
                # aborted then, and a steady state is measured with the cache in its steady state.
                between_runs=flush_cache
                if self.profile.api == "sglang" and plan.window_s is None
                else None,
                progress=self._progress(plan),
            )
            server.ensure_alive("while it was being measured")
        except ServerDiedError as exc:
            pytest.fail(
                f"{exc}\n  The remaining tests of profile {self.profile.name} are skipped.",
                pytrace=False,
            )
        finally:
            if self.progress is not None:
                self.progress.finish()
        if any(r.warmup for r in raw):
            point.notes.append(
                f"the server stalled during the warm-up, so none of the {plan.runs} runs was made"
            )
            return [summarize_run(r, None, self.profile.slo) for r in raw]
        measured = [r for r in raw if r.records]
        if len(measured) < len(raw):
            point.notes.append(
                f"{len(raw) - len(measured)} of {len(raw)} runs were not made: the server stalled"
            )
        return [summarize_run(r, workload.output_len, self.profile.slo) for r in measured]

    def _workload_of(self, point: Point) -> Workload:
        """The workload ``point`` was measured with, for more runs of it."""
        return self.session.workloads[(point.profile, point.node.point_key(point.concurrency))]

    def _golden_values(self, point: Point) -> list[float]:
        """The golden's recorded values of ``point`` ([] when it has none)."""
        _, golden = _golden(self.session, point)
        entry = ((golden or {}).get("points") or {}).get(point.key) or {}
        return [r["value"] for r in entry.get("runs", [])]

    def _leave_plan(self, concurrency: int) -> None:
        """This level's measurement starts: it is no longer part of what is left to do."""
        planned = self.session.plan
        mine = (self.profile.name, concurrency)
        at = next((i for i, p in enumerate(planned) if (p.profile, p.concurrency) == mine), None)
        if at is not None:
            del planned[at]

    def _session_left(self, run_left: float, run_total: float, runs_after: int) -> str:
        """``, about 12 min in the session``: this run, this level's later runs, and every level
        still planned (as the plan timed them; levels without a golden are not counted)."""
        from pytest_llmperf.plan import duration

        later = [p.seconds for p in self.session.plan]
        timed = sum(s for s in later if s is not None)
        untimed = sum(s is None for s in later)
        total = run_left + runs_after * run_total + timed
        more = f" + {untimed} untimed level(s)" if untimed else ""
        return f", about {duration(total)} in the session{more}"

    def _more(self, point: MeasuredPoint, runs: int) -> LevelPlan:
        """The plan of ``runs`` more runs of ``point`` on the server as it is (no warm-up)."""
        from pytest_llmperf.load.loadgen import LevelPlan

        return LevelPlan(
            point.concurrency,
            self.profile.requests_per_run(point.concurrency),
            runs,
            warmup=False,
            window_s=self.profile.window_s,
            settle_s=self.profile.settle_s,
            first_run=len(point.runs) + 1,
        )

    def _progress(self, plan: LevelPlan) -> Callable[[int], Progress] | None:
        """The live line of each run: ``sim-baseline C=70: run 2/3, 212/280 requests done,
        68 in flight, 5,120 tok/s, about 14 s left in this run``."""
        line = self.progress
        if line is None:
            return None
        label = f"{self.profile.name} C={plan.concurrency}"

        def of_run(k: int) -> Progress:
            def show(done: int, in_flight: int, tokens: int, elapsed: float) -> None:
                remaining: float | None = None
                of = f"/{plan.n_requests}"
                if plan.window_s is not None:
                    # The window opens after the first prefills (and settle_s after a cut run).
                    settle = plan.settle_s if k > 1 or not plan.warmup else 0.0
                    remaining = max(0.0, settle + plan.window_s - elapsed)
                    of = ""
                elif done:
                    remaining = elapsed / done * (plan.n_requests - done)
                left = ""
                if remaining is not None:
                    left = f", about {remaining:,.0f} s left in this run" + self._session_left(
                        remaining, elapsed + remaining, plan.runs - k
                    )
                line.tick(
                    f"{label}: run {k}/{plan.runs}, {done}{of} requests done, "
                    f"{in_flight} in flight, {tokens / elapsed:,.0f} tok/s{left}"
                )

            return show

        return of_run

    def expect(self, point: MeasuredPoint, **limits: float) -> None:
        """Fail the test unless the point meets absolute limits: ``expect(point, ttft_p99_s=2.0,
        itl_p50_s=0.05)`` (a latency at most the limit, the mean over the runs) or
        ``goodput_req_s=5`` (at least). Any figure of :data:`~pytest_llmperf.core.metrics.METRICS`."""
        __tracebackhide__ = True
        from pytest_llmperf.core.format import format_value
        from pytest_llmperf.core.metrics import lower_is_better

        _fail_if_invalid(point, "INVALID, not a measurement of the server")
        missed = []
        for metric, limit in limits.items():
            _known_metric("expect", metric)
            twin = point if metric == point.metric else point.for_metric(metric)
            measured = twin.summary.mean
            if not math.isfinite(measured):
                pytest.fail(
                    f"{point.label}: {metric} was not measured"
                    + (" (goodput needs the profile's slo table)" if "goodput" in metric else ""),
                    pytrace=False,
                )
            lower = lower_is_better(metric)
            if not (measured <= limit if lower else measured >= limit):
                unit = twin.unit
                over = measured - limit
                missed.append(
                    f"{metric} {format_value(measured, unit)} (mean of {len(twin.values)} runs) is "
                    f"{'above' if lower else 'below'} the limit {format_value(limit, unit)} by "
                    f"{format_value(abs(over), unit)} ({over / limit * 100:+.1f} %)"
                )
        if missed:
            pytest.fail(f"{point.label}: misses its SLO:\n  " + "\n  ".join(missed), pytrace=False)

    def check(
        self,
        point: MeasuredPoint,
        *,
        metric: str | None = None,
        fail_margin: float | None = None,
        warn_margin: float | None = None,
    ) -> None:
        """Fail the test unless the point is valid and holds against its golden baseline.

        ``metric`` judges another figure of the same runs against its own golden, e.g.
        ``ttft_p99_s`` (latencies: lower is better, a point fails when it is significantly
        slower by more than the margin) or ``goodput_req_s``. Margins default to the profile's,
        overridden by ``@pytest.mark.llmperf(fail_margin=…)`` on the test and then by the
        arguments here.
        """
        __tracebackhide__ = True
        if metric is not None and metric != point.metric:
            _known_metric("check", metric)
            twin = point.for_metric(metric)
            self.session.record(twin)
            return self.check(twin, fail_margin=fail_margin, warn_margin=warn_margin)
        if point.problems:
            point.message = f"{point.label}: INVALID"
            pytest.fail(
                f"{point.label}: INVALID, {point.metric} {point.summary.mean:,.1f} is not a "
                "measurement of the server:\n  " + "\n  ".join(point.problems),
                pytrace=False,
            )
        if self.profile.remeasure_of:
            return  # A/B/A: measured for the base's drift; the first measurement is the one gated
        m = margins(
            self.profile,
            self.marker,
            fail_margin=fail_margin,
            warn_margin=warn_margin,
            latency=point.lower_is_better,
        )
        few = _too_few_samples(point)
        if self.session.settings.update:
            # --perf-update-runs auto: topped up, a run at a time, until the golden is precise
            # (with --perf-pool: the golden as pooled with this launch's runs). A tail that its
            # runs cannot estimate never gets precise: more runs would be spent for nothing.
            pooled = self._golden_values(point) if self.session.settings.pool else []
            first = MIN_STAGE if len(pooled) >= RECORD_MIN_RUNS else RECORD_MIN_RUNS
            while (
                few is None
                and self.session.settings.update_runs is None
                and first <= len(point.values) < RECORD_MAX_RUNS
                and not golden_is_precise([*pooled, *point.values], m.fail)
            ):
                point.runs += self._runs(self._workload_of(point), self._more(point, 1), point)
                if point.problems:
                    return self.check(point, fail_margin=m.fail, warn_margin=m.warn)
            runs = [
                PendingRun(value, point.launch_id, r.requests, r.output_tokens, r.accept_length)
                for value, r in zip(point.values, point.runs)
            ]
            return _record(self.session, point, runs, m.warn)
        path, golden = _golden(self.session, point)
        update = check.update_command(self.nodeid, [self.profile.name])
        entry = check.compare(point, golden, path, self.session.fingerprints[point.profile], update)
        gold = [r["value"] for r in entry["runs"]]

        def verdict() -> Verdict:
            return decide(
                point.values,
                gold,
                fail_margin=m.fail,
                warn_margin=m.warn,
                last_stage=few is not None or len(point.values) >= STAGES[-1],
                lower_is_better=point.lower_is_better,
            )

        result = verdict()
        while result.outcome is Outcome.UNCERTAIN:
            target = next(n for n in STAGES if n > len(point.values))
            plan = self._more(point, target - len(point.values))
            point.runs += self._runs(self._workload_of(point), plan, point)
            if point.problems:
                return self.check(point, fail_margin=m.fail, warn_margin=m.warn)
            result = verdict()
        detail = ""
        if few is not None and result.outcome is Outcome.FAIL:
            # Reported, never failed: one slow request moves such a "p99" by all of its value.
            result = replace(result, outcome=Outcome.WARN)
            q = point.metric.split("_")[1]
            detail = (
                f" (a run had only {few} values, too few for a {q}, which needs "
                f"{MIN_SAMPLES[q]}: reported, not failed; lengthen window_s or min_requests to "
                "gate it)"
            )
        check.conclude(point, result, entry, path, m.fail, detail)


@dataclass
class LLMPerfSpeedupFixture:
    """The ``llmperf_speedup`` fixture: one speculative profile, its base and one level."""

    profile: Profile  # the speculative one
    base: Profile
    concurrency: int
    session: LLMPerfSession
    nodeid: str
    marker: dict[str, float] = field(default_factory=dict)
    measured: list[SpeedupPoint] = field(default_factory=list)  # for JUnit properties

    def check(
        self,
        of: str | None = None,
        *,
        fail_margin: float | None = None,
        warn_margin: float | None = None,
    ) -> SpeedupPoint:
        """Gate the speedup of the ``output_tok_s`` points measured by test ``of`` (a test function
        name such as ``test_output_throughput``; optional when only one test measures them)."""
        __tracebackhide__ = True
        spec = self._measured(self.profile.name, of)
        base = self._measured(self.base.name, of)
        after = self._measured(f"{self.base.name}@after", of, required=False)
        assert spec is not None and base is not None
        m = margins(self.profile, self.marker, fail_margin=fail_margin, warn_margin=warn_margin)

        # A/B/A: each run's base is the geometric mean of the base's run k before and after.
        base_values = (
            [math.sqrt(b * a) for b, a in zip(base.values, after.values)]
            if after is not None
            else list(base.values)
        )
        point = SpeedupPoint(
            profile=self.profile.name,
            base_profile=self.base.name,
            test=self.nodeid,
            concurrency=self.concurrency,
            metric="speedup",
            launch_id=f"{spec.launch_id}/{base.launch_id}",
            of_test=spec.key,
            samples=tuple(paired_ratios(spec.values, base_values)),
            accept_lengths=tuple(r.accept_length for r in spec.runs),
            workload={
                "of": spec.key,
                "base_profile": self.base.name,
                "base_fingerprint": self.session.fingerprints[self.base.name].comparability_hash,
            },
        )
        self.session.speedups.append(point)
        self.measured.append(point)
        for source in (spec, base, after):
            if source is not None and source.problems:
                point.notes.append(f"{source.label} is INVALID: {source.problems[0]}")
        if after is not None:
            drift = after.summary.mean / base.summary.mean
            if abs(drift - 1) > self.session.settings.drift_margin:
                point.notes.append(
                    f"the base drifted {signed_percent(drift - 1)} % between its measurements before and after "
                    f"{self.profile.name} (more than the {self.session.settings.drift_margin * 100:g} % drift "
                    "margin), so no speedup from this run is trustworthy"
                )
        _fail_if_invalid(point, "speedup INVALID")
        if self.session.settings.update:
            accept = point.accept_lengths
            runs = [
                PendingRun(v, point.launch_id, 0, 0, accept[k] if k < len(accept) else None)
                for k, v in enumerate(point.values)
            ]
            _record(self.session, point, runs, m.warn)
            return point
        path, golden = _golden(self.session, point)
        update = check.update_command(self.nodeid, [self.base.name, self.profile.name])
        entry = check.compare(point, golden, path, self.session.fingerprints[point.profile], update)
        result = decide(
            point.values,
            [r["value"] for r in entry["runs"]],
            fail_margin=m.fail,
            warn_margin=m.warn,
            last_stage=True,
        )
        check.conclude(point, result, entry, path, m.fail)
        return point

    def _measured(
        self, profile: str, of: str | None, required: bool = True
    ) -> MeasuredPoint | None:
        __tracebackhide__ = True
        found = [
            p
            for p in self.session.points
            if p.profile == profile
            and p.concurrency == self.concurrency
            and p.metric == "output_tok_s"
            and (of is None or p.node.function == of)
        ]
        tests = sorted({p.node.without_params for p in found})
        if len(tests) > 1:
            raise pytest.UsageError(
                f"{self.nodeid}: several tests measured {profile} at C={self.concurrency} "
                f'({", ".join(tests)}); name one: llmperf_speedup.check(of="test_...").'
            )
        if not found:
            if not required:
                return None
            pytest.skip(
                f"{profile} was not measured at C={self.concurrency} in this run "
                f"({'test ' + of if of else 'output_tok_s'}): no speedup to check"
            )
        return found[-1]


def start_server(profile: Profile, session: LLMPerfSession, progress: ProgressLine) -> ServerHandle:
    """Launch (or attach to) ``profile``'s server and wait until it serves; the test fails with
    the server's own words (and its log's tail) when it cannot."""
    __tracebackhide__ = True
    from pytest_llmperf.engines import lifecycle
    from pytest_llmperf.golden import fingerprint

    failure = None
    try:
        if session.settings.server_url:
            handle = lifecycle.attach(profile, session.settings.server_url)
        else:
            _warn_if_unfair(session, profile)
            handle = lifecycle.launch(profile, session.run_dir)
            for note in handle.notes:
                warnings.warn(LLMPerfWarning(f"{profile.name}: {note}"), stacklevel=2)
            try:
                lifecycle.wait_ready(handle, progress=progress)
            except BaseException:
                lifecycle.stop(handle, grace_s=5.0)
                raise
            finally:
                progress.finish()
        handle.info = lifecycle.fetch_info(handle)
        unmeasurable = accept_length_note(profile, handle)
        if unmeasurable:
            warnings.warn(LLMPerfWarning(f"{profile.name}: {unmeasurable}"), stacklevel=2)
    except ServerError as exc:
        failure = str(exc)
    if failure is not None:
        pytest.fail(
            failure, pytrace=False
        )  # outside the except: no "during handling" chain in the report
    session.servers[profile.name] = handle
    # The launched profile: its args as adapted to the server's version.
    session.fingerprints[profile.name] = fingerprint.take(
        handle.profile, handle.info, handle.command
    )
    _warn_if_servers_differ(session, profile)
    return handle


def stop_server(handle: ServerHandle) -> None:
    """Stop a launched server (an attached one is left alone); warn about GPU memory still held."""
    from pytest_llmperf.engines import lifecycle

    before = len(handle.notes)
    lifecycle.stop(handle)
    for note in handle.notes[before:]:
        warnings.warn(LLMPerfWarning(note), stacklevel=2)


def _warn_if_servers_differ(session: LLMPerfSession, profile: Profile) -> None:
    """Once both servers of a speculative pair have run: what their own /server_info says
    differs beyond the speculative settings and beyond what the profiles set differently (the
    launch warned about those). SGLang may change a setting itself when it speculates: 0.5.6
    and 0.5.9 turn overlap scheduling off for EAGLE-3, so the speedup also measures that."""
    from pytest_llmperf.engines.sglang import server_differences
    from pytest_llmperf.golden.fingerprint import flag_fields

    selected = {p.name for p in session.selected}
    pairs = [(p, session.profile(p.base_profile)) for p in session.selected
             if p.speculative and p.base_profile in selected and not p.remeasure_of
             and profile.name in (p.name, p.base_profile)]  # fmt: skip
    for spec, base in pairs:
        spec_fp, base_fp = session.fingerprints.get(spec.name), session.fingerprints.get(base.name)
        if spec_fp is None or base_fp is None or not spec_fp.profile_keys:
            continue
        set_by_profiles = flag_fields(spec.args) | flag_fields(base.args)
        diff = server_differences(base_fp.server_args, spec_fp.server_args, skip=set_by_profiles)
        if diff:
            warnings.warn(
                LLMPerfWarning(
                    f"{spec.name} and its base {base.name} run with different server settings, by their "
                    f"own /server_info, so the speedup also measures these: {'; '.join(diff)}. Set them "
                    "explicitly and identically in both profiles for a fair comparison."
                ),
                stacklevel=3,
            )


def _warn_if_unfair(session: LLMPerfSession, spec: Profile) -> None:
    """A speculative profile should differ from its base only in the speculative flags."""
    from pytest_llmperf.engines.sglang import unfair_differences

    base = next((p for p in session.selected if p.name == spec.base_profile), None)
    if not spec.speculative or base is None or spec.remeasure_of:
        return
    diff = unfair_differences(spec.args, base.args)
    if diff:
        warnings.warn(
            LLMPerfWarning(
                f"{spec.name} differs from its base {base.name} beyond the speculative flags, so the speedup also "
                f"measures these: {'; '.join(diff)}. Give both profiles the same values for a fair comparison."
            ),
            stacklevel=3,
        )
