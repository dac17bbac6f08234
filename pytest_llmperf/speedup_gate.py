"""The ``llmperf_speedup`` fixture's object: gate a speculative profile's speedup over its base.

Both profiles are measured in the same pytest run (the speedup tests are ordered after every
profile's tests), so the speedup survives drift that moves both absolute figures together —
and fails when speculation loses its benefit although each figure stays within its margin.

The samples are per-run ratios (run k of the speculative profile over run k of the base); the
golden holds the recorded ratios in the speculative profile's golden file, next to its
throughput points, and the verdict is the same rule as for throughput, decided at once (the
servers are gone by then, so no runs can be added).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from pytest_llmperf import gate
from pytest_llmperf.baseline import PendingRun, point_key
from pytest_llmperf.bench import margins
from pytest_llmperf.profiles import Profile
from pytest_llmperf.session import LLMPerfSession, PointResult
from pytest_llmperf.speculative import paired_ratios
from pytest_llmperf.verdict import decide, signed_percent


@dataclass
class SpeedupGate:
    profile: Profile  # the speculative one
    base: Profile
    concurrency: int
    session: LLMPerfSession
    nodeid: str
    marker: dict[str, float] = field(default_factory=dict)
    measured: list[PointResult] = field(default_factory=list)  # for JUnit properties

    def check(self, of: str | None = None, *, fail_margin: float | None = None,
              warn_margin: float | None = None) -> PointResult:
        """Gate the speedup of the ``output_tok_s`` points measured by test ``of`` (a test function
        name such as ``test_output_throughput``; optional when only one test measures them)."""
        __tracebackhide__ = True
        spec = self._measured(self.profile.name, of)
        base = self._measured(self.base.name, of)
        after = self._measured(f"{self.base.name}@after", of, required=False)
        defaults = margins(self.profile, self.marker)
        fail_margin = fail_margin if fail_margin is not None else defaults["fail_margin"]
        warn_margin = warn_margin if warn_margin is not None else defaults["warn_margin"]

        # A/B/A: each run's base is the geometric mean of the base's run k before and after.
        base_values = ([math.sqrt(b * a) for b, a in zip(base.values, after.values)] if after is not None
                       else list(base.values))
        point = PointResult(
            profile=self.profile.name, base_profile=self.base.name, test=self.nodeid, concurrency=self.concurrency,
            metric="speedup", runs=[], launch_id=f"{spec.launch_id}/{base.launch_id}", output_len=spec.output_len,
            api=spec.api, samples=tuple(paired_ratios(spec.values, base_values)),
            workload={"of": point_key(spec.test, self.concurrency), "base_profile": self.base.name,
                      "base_fingerprint": self.session.fingerprints[self.base.name].comparability_hash},
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
                    "margin), so no speedup from this run is trustworthy")
        if point.problems:
            point.message = f"{point.label}: INVALID"
            pytest.fail(f"{point.label}: speedup INVALID:\n  " + "\n  ".join(point.problems), pytrace=False)
        if self.session.settings.update:
            accept = [r.accept_length for r in spec.runs]
            runs = [PendingRun(v, point.launch_id, 0, 0, accept[k] if k < len(accept) else None)
                    for k, v in enumerate(point.values)]
            gate.record(self.session, point, runs, warn_margin)
            return point
        path, entry = gate.lookup(self.session, point, self._update_command())
        verdict = decide(point.values, [r["value"] for r in entry["runs"]], fail_margin=fail_margin,
                         warn_margin=warn_margin, last_stage=True)
        gate.conclude(point, verdict, entry, path, fail_margin)
        return point

    def _measured(self, profile: str, of: str | None, required: bool = True) -> PointResult | None:
        __tracebackhide__ = True
        found = [p for p in self.session.points
                 if p.profile == profile and p.concurrency == self.concurrency and p.metric == "output_tok_s"
                 and (of is None or p.test.split("::")[-1].split("[")[0] == of)]
        tests = sorted({p.test.split("[")[0] for p in found})
        if len(tests) > 1:
            raise pytest.UsageError(f"{self.nodeid}: several tests measured {profile} at C={self.concurrency} "
                                    f"({', '.join(tests)}); name one: llmperf_speedup.check(of=\"test_...\").")
        if not found:
            if not required:
                return None
            pytest.skip(f"{profile} was not measured at C={self.concurrency} in this run "
                        f"({'test ' + of if of else 'output_tok_s'}): no speedup to check")
        return found[-1]

    def _update_command(self) -> str:
        path = self.nodeid.split("::")[0]
        return f"pytest {path} --llm-profile {self.base.name},{self.profile.name} --perf-update"
