"""The server over a point's window: its ``/metrics`` gauges sampled at a fixed interval.

Before and after (servers/metrics.py) says how much a point generated; a series says what the
server went through meanwhile: a KV cache that filled and stayed full, a queue that grew. The
sampler is a process of its own (``python -m pytest_llmperf.servers.series URL INTERVAL FILE``,
standard library only), so no sample ever waits on the load generator's event loop or holds its
interpreter's lock, and the measuring client never waits on a sample. It appends one JSON line a
sample (``t``: CLOCK_MONOTONIC seconds, the same clock in every process on Linux, and the
gauges) and exits when its parent does or when told to stop. Behind a router each worker is
read and combined per sample: requests and throughput summed, the fullest KV cache, the mean
hit rate and accept length.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The gauges a series keeps (stored names, servers/prometheus.py), in the order shown.
SERIES_GAUGES = (
    "running_requests",
    "queued_requests",
    "kv_cache_usage",
    "gen_throughput",
    "cache_hit_rate",
    "spec_accept_length",
)


@dataclass
class ServerSeries:
    """Samples of the server's gauges over a point's runs: ``t`` in seconds from the point's
    first sample, one list per gauge the server reports (None where a sample lacked it)."""

    interval_s: float
    t: list[float] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)

    def add(self, samples: list[dict[str, Any]], origin: float) -> None:
        """Samples read from a sampler's file; ``origin``: the monotonic time of t = 0."""
        for sample in samples:
            self.t.append(round(float(sample["t"]) - origin, 3))
            for name in SERIES_GAUGES:
                if name in sample or name in self.values:
                    column = self.values.setdefault(name, [None] * (len(self.t) - 1))
                    column.append(sample.get(name))

    def of(self, name: str) -> list[float]:
        """The samples of one gauge that have it."""
        return [v for v in self.values.get(name, []) if v is not None]

    def to_json(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "t": self.t, **self.values}


class Sampler:
    """One sampler process over one server: started before a point's runs, stopped after."""

    def __init__(self, urls: list[str], interval_s: float, path: Path) -> None:
        self.path = path
        self.started = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        # The URL goes on the command line, never a credential: headers are not passed (a
        # server behind an API key serves /metrics without it, or serves no series).
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest_llmperf.servers.series", str(interval_s), str(path),
             str(os.getpid()), *urls],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> list[dict[str, Any]]:
        """Stop the process (a last sample is not waited for) and return its samples."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        samples = []
        for line in self.path.read_text().splitlines():
            try:
                sample = json.loads(line)
            except ValueError:
                continue  # a line cut by the stop
            if isinstance(sample, dict) and isinstance(sample.get("t"), (int, float)):
                samples.append(sample)
        return samples


#: How one sample combines several workers' gauges.
SUMMED = ("running_requests", "queued_requests", "gen_throughput")


def combined(pages: list[dict[str, float]]) -> dict[str, float]:
    """Several workers' gauges of one moment as one server's."""
    out: dict[str, float] = {}
    for name in SERIES_GAUGES:
        values = [page[name] for page in pages if name in page]
        if not values:
            continue
        if name in SUMMED:
            out[name] = sum(values)
        elif name == "kv_cache_usage":
            out[name] = max(values)
        else:
            out[name] = sum(values) / len(values)
    return out


def _read(url: str, timeout_s: float) -> dict[str, float] | None:
    import urllib.request

    from pytest_llmperf.servers.prometheus import parse

    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=timeout_s) as response:
            return parse(response.read(8_000_000).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None  # a sample the server did not answer is a gap, not an error


def _sample_forever(urls: list[str], interval_s: float, path: Path, parent: int) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    next_at = time.monotonic()
    with path.open("a") as out:
        while os.getppid() == parent:
            t = time.monotonic()
            pages = [page for page in (_read(url, interval_s * 4) for url in urls) if page]
            found = combined(pages)
            if found:
                out.write(json.dumps({"t": t, **found}) + "\n")
                out.flush()
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))


if __name__ == "__main__":
    interval, file, parent_pid, *servers = sys.argv[1:]
    _sample_forever(servers, float(interval), Path(file), int(parent_pid))
