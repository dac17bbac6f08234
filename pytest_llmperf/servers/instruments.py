"""What is sampled around a point's runs, started and stopped as one: the server's own counters
(``/metrics`` before and after), its gauges through the runs (a process of its own,
servers/series.py), and its GPUs through NVML (host/gpu_series.py) where it runs on this host's.

:class:`Instruments` is made for one stage of a point's runs: :meth:`~Instruments.start` before
the first request, :meth:`~Instruments.stop` after the last (also when the server died: nothing
sampled outlives the stage), then :meth:`~Instruments.counters` and :meth:`~Instruments.figures`
put what they read on the point and its runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.core.points import MeasuredPoint

if TYPE_CHECKING:
    from pytest_llmperf.core.metrics import RunMetrics
    from pytest_llmperf.core.records import RunRecords
    from pytest_llmperf.host.gpu_series import GpuSample, GpuSampler
    from pytest_llmperf.servers.lifecycle import ServerHandle
    from pytest_llmperf.servers.series import Sampler


@dataclass
class Instruments:
    """The samplers of one stage of ``point``'s runs against ``server``: every
    ``interval_s`` (0: none), with NVML where ``on_local_gpus``."""

    point: MeasuredPoint
    server: ServerHandle
    interval_s: float
    on_local_gpus: bool
    #: The run's directory: the gauges' sampler writes its samples under ``series/``.
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    _series: Sampler | None = field(default=None, init=False)
    _gpus: GpuSampler | None = field(default=None, init=False)
    _gpu_samples: list[GpuSample] = field(default_factory=list, init=False)

    def start(self) -> None:
        """The counters before the point's first run, then the samplers."""
        from pytest_llmperf.servers import metrics

        point, server = self.point, self.server
        if server.serves_metrics and point.counters_at_start is None:
            point.counters_at_start = metrics.scrape_server(server)
        self._series = self._series_sampler()
        self._gpus = self._gpu_sampler()

    def stop(self) -> None:
        """Every sampler stopped (whatever happened to the runs); the gauges' samples join the
        point's series."""
        try:
            if self._series is not None:
                keep_series(self.point, self._series, self.interval_s)
        finally:
            self._series = None
            gpus, self._gpus = self._gpus, None
            if gpus is not None:
                self._gpu_samples = gpus.stop()
                self.point.notes += [w for w in gpus.nv.warnings if w not in self.point.notes]

    def counters(self) -> None:
        """The server's counters over the point's runs so far: after less before."""
        from pytest_llmperf.servers import metrics

        point = self.point
        if point.counters_at_start is not None:
            after = metrics.scrape_server(self.server)
            point.counters = metrics.server_delta(point.counters_at_start, after) if after else None

    def figures(self, runs: list[RunMetrics], raw: list[RunRecords]) -> list[RunMetrics]:
        """Each run with what the GPUs did over its window (see :func:`with_gpu_figures`)."""
        return with_gpu_figures(self.point, runs, raw, self._gpu_samples)

    def _series_sampler(self) -> Sampler | None:
        """The server's gauges through the runs, from a process of its own (None: no series
        asked for, or the server serves no /metrics)."""
        from pytest_llmperf.files import confined
        from pytest_llmperf.servers.series import Sampler

        if not (self.server.serves_metrics and self.interval_s > 0):
            return None
        point = self.point
        urls = [w.base_url for w in self.server.workers] or [self.server.base_url]
        name = f"{point.profile}-{point.node.short_name}-{point.level}-{len(point.runs)}"
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        return Sampler(urls, self.interval_s, confined(self.run_dir, "series", f"{slug}.jsonl"))

    def _gpu_sampler(self) -> GpuSampler | None:
        """NVML on the GPUs of a server launched on this host (None: not such a server, no
        series asked for, or no NVML here)."""
        server = self.server
        if not (self.interval_s > 0 and self.on_local_gpus):
            return None
        if server.process is None or server.slurm is not None:  # attached, or on other nodes
            return None
        from pytest_llmperf.host.gpu_series import start_sampler

        sampler, problems = start_sampler(self.env, self.interval_s)
        self.point.notes += [p for p in problems if p not in self.point.notes]
        return sampler


def keep_series(point: MeasuredPoint, sampler: Sampler, interval_s: float) -> None:
    """Add a sampler's samples to the point's series (a point topped up with more runs adds
    to the series it has, on the same clock)."""
    from pytest_llmperf.servers.series import ServerSeries

    samples = sampler.stop()
    if not samples:
        return
    series = ServerSeries(interval_s)
    old: dict[str, Any] | None = point.server_series
    if point.series_origin is None:
        point.series_origin = float(samples[0]["t"])
    if old:
        series.t = list(old["t"])
        series.values = {k: list(v) for k, v in old.items() if k not in ("interval_s", "t")}
    series.add(samples, point.series_origin)
    point.server_series = series.to_json()


def with_gpu_figures(
    point: MeasuredPoint,
    runs: list[RunMetrics],
    raw: list[RunRecords],
    samples: list[GpuSample],
) -> list[RunMetrics]:
    """Each run with what the GPUs did over its window (its energy per output token, tok/s
    per watt, how a GPU was held back), and the samples kept with the point."""
    if not samples:
        return runs
    from pytest_llmperf.host.gpu_series import series_json, window

    origin = point.series_origin or min(s.t for s in samples)
    point.gpu_series = series_json(samples, origin)
    out: list[RunMetrics] = []
    for run, records in zip(runs, raw):
        span = records.window or (
            min((r.start for r in records.records), default=0.0),
            max((r.end for r in records.records), default=0.0),
        )
        gpus = window(samples, *span)
        tokens = run.output_tok_s * run.duration_s
        joules = gpus.energy_j if gpus.energy_j and tokens else None
        if gpus.energy_missing and gpus.energy_missing not in point.notes:
            point.notes.append(f"run {len(out) + 1}: {gpus.energy_missing}")
        out.append(
            replace(
                run,
                energy_j=gpus.energy_j,
                # Both from the counter's joules: tok/s per watt is tokens per joule.
                energy_j_per_token=joules / tokens if joules else None,
                tok_s_per_watt=tokens / joules if joules else None,
                gpu_held_back=tuple(gpus.held_back),
                gpu_power_cap_share=gpus.power_cap_share,
            )
        )
    return out
