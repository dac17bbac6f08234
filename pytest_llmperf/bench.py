"""The ``llmperf`` fixture's object: measure a point against the profile's server, then check it.

``check`` decides in the test itself, so a failure carries the test's id: INVALID (the runs are
not a measurement of the server), then under ``--perf-update`` the point is queued for its golden
file, otherwise MISSING, INCOMPARABLE or the statistical verdict against the golden, adding
runs on the still-running server while it is UNCERTAIN (3 → 6 → 10).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import pytest

from pytest_llmperf import gate
from pytest_llmperf.baseline import GoldenError, PendingRun
from pytest_llmperf.errors import ServerDiedError
from pytest_llmperf.loadgen import LevelPlan, Workload, flush_cache
from pytest_llmperf.metrics import summarize_run
from pytest_llmperf.profiles import Profile
from pytest_llmperf.server import ServerHandle
from pytest_llmperf.session import LLMPerfSession, PointResult
from pytest_llmperf.verdict import STAGES, decide
from pytest_llmperf.workers import measure

MARKER_FIELDS = ("fail_margin", "warn_margin")


@dataclass
class LLMPerf:
    """Bound to one test, one profile and its server."""

    profile: Profile
    server: ServerHandle
    session: LLMPerfSession
    nodeid: str
    marker: dict[str, float] = field(default_factory=dict)  # from @pytest.mark.llmperf
    measured: list[PointResult] = field(default_factory=list)  # this test's points, for JUnit properties

    def workload(self, output_len: int | None = None) -> Workload:
        return Workload(api=self.profile.api, output_len=output_len or self.profile.output_len,
                        model=served_model(self.server), extra_body=self.profile.extra_body)

    def measure(self, concurrency: int, *, runs: int | None = None, output_len: int | None = None,
                metric: str = "output_tok_s") -> PointResult:
        """Warm up at ``concurrency``, then run ``runs`` closed-loop runs of N = max(floor, 4·C) requests.

        Under ``--perf-update`` at least ``--perf-update-runs`` runs are made, for the golden.
        """
        __tracebackhide__ = True
        profile = self.profile
        runs = runs or profile.runs
        if self.session.settings.update:
            runs = max(runs, self.session.settings.update_runs)
        workload = self.workload(output_len)
        n_requests = profile.requests_per_run(concurrency)
        point = PointResult(
            profile=profile.name, test=self.nodeid, concurrency=concurrency, metric=metric, runs=[],
            launch_id=self.server.launch_id, output_len=workload.output_len, api=workload.api,
            workload={**workload.describe(), "requests_per_run": n_requests},
        )
        self.measured.append(point)
        self._fail_if_golden_unusable()
        point.runs = self._runs(workload, LevelPlan(concurrency, n_requests, runs, profile.warmup))
        self.session.record(point)
        return point

    def _fail_if_golden_unusable(self) -> None:
        """A corrupt golden file fails before the measurement, not after minutes of it."""
        __tracebackhide__ = True
        if self.profile.rebaseline_of:
            return  # never gated
        try:
            self.session.golden(self.profile.name)
        except GoldenError as exc:
            pytest.fail(str(exc), pytrace=False)

    def _runs(self, workload: Workload, plan: LevelPlan) -> list:
        __tracebackhide__ = True
        server, settings = self.server, self.session.settings
        try:
            server.ensure_alive("before this test")
            raw = measure(
                server.base_url, workload, plan, workers=settings.client_workers, transport=settings.transport,
                timeout_s=self.profile.request_timeout_s, headers=server.headers,
                between_runs=flush_cache if self.profile.api == "sglang" else None,
            )
            server.ensure_alive("while it was being measured")
        except ServerDiedError as exc:
            pytest.fail(f"{exc}\n  The remaining tests of profile {self.profile.name} are skipped.", pytrace=False)
        return [summarize_run(r, workload.output_len) for r in raw]

    def check(self, point: PointResult, *, fail_margin: float | None = None, warn_margin: float | None = None) -> None:
        """Fail the test unless the point is valid and holds against its golden baseline.

        Margins default to the profile's, overridden by ``@pytest.mark.llmperf(fail_margin=…)``
        on the test and then by the arguments here.
        """
        __tracebackhide__ = True
        if point.problems:
            point.message = f"{point.label}: INVALID"
            pytest.fail(
                f"{point.label}: INVALID, {point.metric} {point.summary.mean:,.1f} is not a "
                "measurement of the server:\n  " + "\n  ".join(point.problems),
                pytrace=False,
            )
        if self.profile.rebaseline_of:
            return  # A/B/A: measured for the base's drift; the first measurement is the one gated
        fail_margin = fail_margin if fail_margin is not None else self.margins["fail_margin"]
        warn_margin = warn_margin if warn_margin is not None else self.margins["warn_margin"]
        if self.session.settings.update:
            runs = [PendingRun(value, point.launch_id, r.requests, r.output_tokens, r.accept_length)
                    for value, r in zip(point.values, point.runs)]
            return gate.record(self.session, point, runs, warn_margin)
        path, entry = gate.lookup(self.session, point, self._update_command())
        gold = [r["value"] for r in entry["runs"]]
        verdict = decide(point.values, gold, fail_margin=fail_margin, warn_margin=warn_margin,
                         last_stage=len(point.values) >= STAGES[-1])
        while verdict.name == "UNCERTAIN":
            target = next(n for n in STAGES if n > len(point.values))
            plan = LevelPlan(point.concurrency, self.profile.requests_per_run(point.concurrency),
                             target - len(point.values), warmup=False)
            point.runs += self._runs(self.workload(point.output_len), plan)
            if point.problems:
                return self.check(point, fail_margin=fail_margin, warn_margin=warn_margin)
            verdict = decide(point.values, gold, fail_margin=fail_margin, warn_margin=warn_margin,
                             last_stage=len(point.values) >= STAGES[-1])
        gate.conclude(point, verdict, entry, path, fail_margin)

    @property
    def margins(self) -> dict[str, float]:
        return margins(self.profile, self.marker)

    def _update_command(self) -> str:
        path = self.nodeid.split("::")[0]
        return f"pytest {shlex.quote(path)} --llm-profile {self.profile.name} --perf-update"


def margins(profile: Profile, marker: dict[str, float]) -> dict[str, float]:
    """The profile's verdict margins, overridden by ``@pytest.mark.llmperf(...)`` on the test."""
    return {"fail_margin": profile.fail_margin, "warn_margin": profile.warn_margin, **marker}


def junit_properties(point: PointResult) -> list[tuple[str, object]]:
    """What a JUnit XML consumer needs per point: measured, golden, ratio, verdict."""
    measured = point.summary.mean if point.values else None
    golden = (point.golden or {}).get("mean")
    props: list[tuple[str, object]] = [
        ("llmperf_point", point.label), ("llmperf_metric", point.metric),
        ("llmperf_measured", f"{measured:.6g}" if measured is not None else ""),
        ("llmperf_golden", f"{golden:.6g}" if golden is not None else ""),
        ("llmperf_ratio", f"{point.ratio:.6g}" if point.ratio is not None else ""),
        ("llmperf_verdict", point.verdict or "measured"),
    ]
    if point.p_value is not None:
        props.append(("llmperf_p_value", f"{point.p_value:.3g}"))
    return props


def marker_margins(node: pytest.Item) -> dict[str, float]:
    """``@pytest.mark.llmperf(fail_margin=0.2, warn_margin=0.08)``: per-test margins."""
    mark = node.get_closest_marker("llmperf")
    if mark is None:
        return {}
    if mark.args or set(mark.kwargs) - set(MARKER_FIELDS):
        raise pytest.UsageError(
            f"{node.nodeid}: @pytest.mark.llmperf takes only keyword arguments {', '.join(MARKER_FIELDS)}; "
            f"got args={mark.args!r} kwargs={sorted(mark.kwargs)}."
        )
    for name, value in mark.kwargs.items():
        if not isinstance(value, (int, float)) or not 0 < value < 1:
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.llmperf({name}={value!r}) must be between 0 and 1.")
    return dict(mark.kwargs)


def served_model(server: ServerHandle) -> str:
    """The ``model`` field OpenAI requests must name: what the server lists, else SGLang's "default"."""
    models = server.info.get("/v1/models") or {}
    data = models.get("data") if isinstance(models, dict) else None
    if data and isinstance(data[0], dict) and data[0].get("id"):
        return str(data[0]["id"])
    return "default"
