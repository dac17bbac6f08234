"""The ``llmperf`` fixture's object: measure a point against the profile's server, check it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_llmperf.errors import ServerDiedError
from pytest_llmperf.loadgen import LevelPlan, Workload, flush_cache
from pytest_llmperf.metrics import summarize_run
from pytest_llmperf.profiles import Profile
from pytest_llmperf.server import ServerHandle
from pytest_llmperf.session import LLMPerfSession, PointResult
from pytest_llmperf.workers import measure


@dataclass
class LLMPerf:
    """Bound to one test, one profile and its server."""

    profile: Profile
    server: ServerHandle
    session: LLMPerfSession
    nodeid: str

    def workload(self, output_len: int | None = None) -> Workload:
        return Workload(api=self.profile.api, output_len=output_len or self.profile.output_len,
                        model=served_model(self.server))

    def measure(self, concurrency: int, *, runs: int | None = None, output_len: int | None = None,
                metric: str = "output_tok_s") -> PointResult:
        """Warm up at ``concurrency``, then run ``runs`` closed-loop runs of N = max(floor, 4·C) requests."""
        __tracebackhide__ = True
        profile, server = self.profile, self.server
        workload = self.workload(output_len)
        plan = LevelPlan(concurrency, profile.requests_per_run(concurrency), runs or profile.runs, profile.warmup)
        try:
            server.ensure_alive("before this test")
            raw_runs = measure(
                server.base_url, workload, plan, workers=self.session.settings.client_workers,
                transport=self.session.settings.transport, timeout_s=profile.request_timeout_s,
                headers=server.headers, between_runs=flush_cache if profile.api == "sglang" else None,
            )
            server.ensure_alive("while it was being measured")
        except ServerDiedError as exc:
            pytest.fail(f"{exc}\n  The remaining tests of profile {profile.name} are skipped.", pytrace=False)
        point = PointResult(
            profile=profile.name, test=self.nodeid, concurrency=concurrency, metric=metric,
            runs=[summarize_run(r, workload.output_len) for r in raw_runs], launch_id=server.launch_id,
            output_len=workload.output_len, api=workload.api,
        )
        self.session.record(point)
        return point

    def check(self, point: PointResult) -> None:
        """Fail the test if the point is INVALID: failed requests, wrong counts, a client that set the pace."""
        __tracebackhide__ = True
        if point.problems:
            s = point.summary
            pytest.fail(
                f"{point.profile} C={point.concurrency}: INVALID, {point.metric} {s.mean:,.1f} is not a "
                "measurement of the server:\n  " + "\n  ".join(point.problems),
                pytrace=False,
            )


def served_model(server: ServerHandle) -> str:
    """The ``model`` field OpenAI requests must name: what the server lists, else SGLang's "default"."""
    models = server.info.get("/v1/models") or {}
    data = models.get("data") if isinstance(models, dict) else None
    if data and isinstance(data[0], dict) and data[0].get("id"):
        return str(data[0]["id"])
    return "default"
