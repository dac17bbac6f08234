"""A profiler trace in a few lines: where the server's time went, by operation.

A Chrome trace (what torch's profiler exports, and SGLang's ``/start_profile`` writes as
``*.trace.json.gz``) lists complete events (``"ph": "X"``) with a start and a duration. On a GPU
the kernels (``cat`` ``kernel``, ``gpu_memcpy``, ``gpu_memset``) are what the server spent its
time on; a CPU-only trace has the operators (``cpu_op``), nested (``aten::linear`` holds
``aten::addmm``), so each is charged its *self* time: its duration less its children's on the
same thread, as torch's own tables do. The summary keeps the top operations and their share of
the total; two summaries side by side show which operations' shares moved most, the first
place to look when a point got slower with no flag changed.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
CPU_CATEGORIES = frozenset({"cpu_op"})
#: Operations a summary keeps (the rest are summed into its total only).
TOP = 12


class TraceError(ValueError):
    """A file that is not a readable Chrome trace."""


@dataclass(frozen=True)
class KernelSummary:
    """Where the time went: ``ops`` (name, microseconds), the largest first; ``total_us`` is
    every operation's, kept or not; ``source`` says what was counted."""

    source: str  # "GPU kernels" | "CPU operators (self time)"
    total_us: float
    ops: tuple[tuple[str, float], ...]

    def share(self, name: str) -> float:
        us = dict(self.ops).get(name, 0.0)
        return us / self.total_us if self.total_us > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "total_us": round(self.total_us, 1),
            "ops": [{"name": n, "us": round(us, 1)} for n, us in self.ops],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelSummary:
        ops = tuple((str(o["name"]), float(o["us"])) for o in data.get("ops", ()))
        return cls(str(data.get("source", "")), float(data.get("total_us", 0.0)), ops)


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's events (a gzip or plain JSON Chrome trace)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not a readable Chrome trace ({exc})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: not a Chrome trace (no traceEvents list)")
    return [e for e in events if isinstance(e, dict)]


def summarize(events: Iterable[Mapping[str, Any]], top: int = TOP) -> KernelSummary:
    """The top operations of a trace's complete events: GPU kernels where there are any,
    else CPU operators by self time."""
    complete = [e for e in events if e.get("ph") == "X" and _number(e.get("dur")) is not None]
    kernels = [e for e in complete if e.get("cat") in GPU_CATEGORIES]
    if kernels:
        totals = _durations(kernels)
        source = "GPU kernels"
    else:
        totals = _self_times([e for e in complete if e.get("cat") in CPU_CATEGORIES])
        source = "CPU operators (self time)"
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return KernelSummary(source, sum(totals.values()), tuple(ranked[:top]))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def _durations(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for e in events:
        totals[str(e.get("name", "?"))] += float(e["dur"])
    return totals


def _self_times(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Each event's duration less its children's (events inside it on the same thread)."""
    by_thread: dict[tuple[Any, Any], list[Mapping[str, Any]]] = defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    totals: dict[str, float] = defaultdict(float)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (float(e.get("ts", 0.0)), -float(e["dur"])))
        stack: list[list[Any]] = []  # [end, name, self time]
        for e in thread:
            start, dur = float(e.get("ts", 0.0)), float(e["dur"])
            while stack and stack[-1][0] <= start:
                _, name, own = stack.pop()
                totals[name] += own
            if stack:
                stack[-1][2] -= min(dur, stack[-1][0] - start)
            stack.append([start + dur, str(e.get("name", "?")), dur])
        for _, name, own in stack:
            totals[name] += own
    return {name: max(us, 0.0) for name, us in totals.items()}


@dataclass(frozen=True)
class Moved:
    name: str
    share: float
    golden_share: float

    @property
    def change(self) -> float:
        return self.share - self.golden_share


def moved(now: KernelSummary, golden: KernelSummary, top: int = 5) -> list[Moved]:
    """The operations whose share of the time moved most between the golden's and now."""
    names = {n for n, _ in now.ops} | {n for n, _ in golden.ops}
    rows = [Moved(n, now.share(n), golden.share(n)) for n in names]
    rows.sort(key=lambda m: (-abs(m.change), m.name))
    return rows[:top]


def in_one_line(now: KernelSummary, golden: KernelSummary | None, top: int = 3) -> str:
    """``aten::mm 52.1 % (golden 31.0 %), …`` (the moved ones), or the top ones alone."""
    if golden is not None and golden.source == now.source:
        rows = moved(now, golden, top)
        return "moved most: " + ", ".join(
            f"{m.name} {m.share:.1%} (golden {m.golden_share:.1%})" for m in rows
        )
    return "top: " + ", ".join(f"{n} {now.share(n):.1%}" for n, _ in now.ops[:top])


def stored_shares(found: Mapping[str, Any]) -> tuple[str, str] | None:
    """A stored profiled run (a point's ``server_profile``): what its summary counted and its
    shares in one line (beside the golden's where it has one); None without a summary."""
    if found.get("problem") or not found.get("summary"):
        return None
    now = KernelSummary.from_json(found["summary"])
    golden = found.get("golden_summary")
    return now.source, in_one_line(now, KernelSummary.from_json(golden) if golden else None)


def side_by_side(now: KernelSummary, golden: KernelSummary | None, top: int = 8) -> list[str]:
    """A small table of the shares, now beside the golden's, the largest moves first."""
    if golden is None or golden.source != now.source:
        why = "no golden summary" if golden is None else f"the golden's counts {golden.source}"
        lines = [f"  {'operation':<44} {'share':>7}   ({why})"]
        lines += [f"  {n[:44]:<44} {now.share(n):>7.1%}" for n, _ in now.ops[:top]]
        return lines
    lines = [f"  {'operation':<44} {'now':>7} {'golden':>7} {'moved':>8}"]
    for m in moved(now, golden, top):
        lines.append(
            f"  {m.name[:44]:<44} {m.share:>7.1%} {m.golden_share:>7.1%} {m.change * 100:>+7.1f}pt"
        )
    return lines
