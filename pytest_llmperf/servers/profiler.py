"""One more run of a point with the server's own profiler on, bounded by steps.

``--perf-profile-on=fail`` (or ``warn``, ``always``) asks the server to profile its next
``profiler_steps`` forward steps (SGLang: ``POST /start_profile`` with ``num_steps`` and an
``output_dir``; it stops by itself at the step limit: an unbounded trace of a busy server runs
to tens of GB, sgl-project/sglang#25660), runs the point's load once more (not counted in its
figures), waits for the trace file, and asks ``/stop_profile`` only when none came (the run
ended before the limit). The trace stays in the run directory beside the server's log; its kernel-time summary
(core/kernels.py) goes with the point.

The server writes the trace itself, so the directory must be one it can reach: a server
launched here, or attached on this host. One on other nodes (``launcher = "srun"``) writes it
on theirs, which this says instead of waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pytest_llmperf.core.kernels import KernelSummary, TraceError, read_trace, summarize

#: How long the server may take to write its trace once the run is over.
TRACE_WAIT_S = 120.0
#: How long to wait for the trace of a profiler that stopped by itself before asking it to stop.
FIRST_WAIT_S = 30.0


@dataclass
class Capture:
    """What one profiled run left: the trace and its summary, or why there is none."""

    directory: Path
    steps: int
    trace: Path | None = None
    summary: KernelSummary | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": str(self.trace) if self.trace else None,
            "steps": self.steps,
            "summary": self.summary.to_json() if self.summary else None,
            "problem": self.problem,
        }


def capture(
    base_url: str,
    headers: Mapping[str, str],
    body: dict[str, Any],
    directory: Path,
    run: Callable[[], None],
    wait_s: float = TRACE_WAIT_S,
) -> Capture:
    """Start the profiler with ``body`` (its ``output_dir`` is ``directory``), ``run()``, stop it
    and read the trace it wrote."""
    directory.mkdir(parents=True, exist_ok=True)
    result = Capture(directory, int(body.get("num_steps") or 0))
    with httpx.Client(base_url=base_url, headers=dict(headers), timeout=30.0) as client:
        problem = _post(client, "/start_profile", body)
        if problem is not None:
            result.problem = f"the server did not start its profiler: {problem}"
            return result
        failed = None
        try:
            run()
        except Exception as exc:  # a server that died under the profiler: said, not raised
            failed = f"the profiled run failed: {type(exc).__name__}: {exc}"
        # It stops by itself at the step limit, which a run of the point's load passes; asked
        # to stop only when no trace came (a stop after the limit is an error in its log).
        result.trace = wait_for_trace(directory, min(wait_s, FIRST_WAIT_S))
        if result.trace is None:
            _post(client, "/stop_profile", None)
    if failed is not None:
        result.problem = failed
        return result
    result.trace = result.trace or wait_for_trace(directory, wait_s)
    if result.trace is None:
        result.problem = (
            f"the server wrote no trace into {directory} within {wait_s:g} s (see its log; a "
            "server on another host writes it there)"
        )
        return result
    try:
        result.summary = summarize(read_trace(result.trace))
    except TraceError as exc:
        result.problem = str(exc)
    return result


def _post(client: httpx.Client, path: str, body: dict[str, Any] | None) -> str | None:
    try:
        response = client.post(path, json=body) if body is not None else client.post(path)
    except httpx.HTTPError as exc:
        return f"{path}: {type(exc).__name__}: {exc}"
    if response.status_code >= 400:
        return f"{path} answered {response.status_code}: {response.text.strip()[:200]}"
    return None


def wait_for_trace(directory: Path, wait_s: float, poll_s: float = 0.25) -> Path | None:
    """The first complete trace file in ``directory``: one whose size has stopped growing."""
    deadline = time.monotonic() + wait_s
    sizes: dict[Path, int] = {}
    while True:
        for path in sorted(directory.glob("*.trace.json*")):
            size = path.stat().st_size
            if size > 0 and sizes.get(path) == size:
                return path
            sizes[path] = size
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_s)
