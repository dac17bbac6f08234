"""The run's sections, one per kind of result, in the order the terminal summary and the results
JSON both show them: each with the results JSON's key it fills and the terminal blocks it shows.

A new kind of judged point is one more row of :data:`SECTIONS` (:func:`listed` and :func:`said`
show a point of any kind: its ``to_json()`` and its message). Its points are in the run's one
list (:attr:`Results.points <pytest_llmperf.core.results.Results.points>`), so the verdict
counts, the unused goldens and the failures need nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.core.accuracy import AccuracyPoint
from pytest_llmperf.core.capacity import CapacityPoint
from pytest_llmperf.core.format import format_value
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.points import MeasuredPoint, Point
from pytest_llmperf.core.results import Results
from pytest_llmperf.core.speculative import Analysis
from pytest_llmperf.core.startup import StartupPoint
from pytest_llmperf.core.stats import finite_or_none
from pytest_llmperf.render import terminal
from pytest_llmperf.render.rates import capacity_lines, rate_table_lines

#: A line of the terminal and its colour (None: the default).
Line = tuple[str, str | None]
#: A block of the terminal: its title (a separator line; None: none) and its lines.
Block = tuple[str | None, list[Line]]


@dataclass(frozen=True)
class Section:
    """One kind of result: its list in the results JSON (under ``key``) and its blocks on the
    terminal."""

    key: str
    json: Callable[[Results], list[Any]]
    terminal: Callable[[Results], list[Block]]


def listed(kind: type[Point]) -> Callable[[Results], list[Any]]:
    """The results JSON's list of a kind: each point's ``to_json()``."""

    def json(results: Results) -> list[Any]:
        return [finite_or_none(p.to_json()) for p in results.of(kind)]  # type: ignore[attr-defined]

    return json


def said(kind: type[Point]) -> Callable[[Results], list[Block]]:
    """A kind's terminal block: each point as its check said it (its value, when only
    measured)."""

    def blocks(results: Results) -> list[Block]:
        lines: list[Line] = [
            (p.message or f"{p.label}: {format_value(p.summary.mean, p.unit)}", None)
            for p in results.of(kind)
        ]
        return [(None, lines)] if lines else []

    return blocks


def plain(lines: list[str]) -> list[Block]:
    return [(None, [(line, None) for line in lines])] if lines else []


def measured_blocks(results: Results) -> list[Block]:
    """The closed-loop table, the open-loop table, and the points profiled once more."""
    closed = [p for p in results.measured if p.rate is None]
    rates = [p for p in results.measured if p.rate is not None]
    blocks: list[Block] = []
    if closed:
        title = "llmperf: output throughput per concurrency"
        blocks.append((title, [(line, None) for line in terminal.table_lines(closed)]))
    if rates:
        title = "llmperf: latency per request rate (open loop)"
        blocks.append((title, [(line, None) for line in rate_table_lines(rates)]))
    return blocks + plain(terminal.profile_lines(results))


def confirmation_blocks(results: Results) -> list[Block]:
    """Each fresh launch made to confirm undecided points, and what it decided."""
    lines: list[Line] = []
    for c in results.confirmations:
        counts: dict[str, int] = {}
        for outcome in c["points"].values():
            counts[outcome] = counts.get(outcome, 0) + 1
        shown = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "nothing to decide"
        load = f"loaded in {c['load_s']:,.1f} s, " if c.get("load_s") is not None else ""
        color = "red" if "FAIL" in counts else None
        lines.append(
            (
                f"{c['profile']}: confirmed on a fresh launch ({c['copy']}, {load}measured "
                f"{c['measure_s']:,.1f} s): {shown}",
                color,
            )
        )
    return [(None, lines)] if lines else []


def speculative_json(results: Results) -> list[Any]:
    return [_speculative(results, a) for a in results.analyses]


def _speculative(results: Results, analysis: Analysis) -> dict[str, Any]:
    from pytest_llmperf.core.channels import channels

    gate = {str(p.concurrency): p.to_json() for p in results.speedups_of(analysis)}
    engine = {
        str(p.concurrency): p.to_json()
        for p in results.speedups
        if p.channel == "engine" and (p.profile, p.base_profile) == (analysis.profile, analysis.base_profile)
        and NodeId(p.of_test).without_params == analysis.test
    }  # fmt: skip
    chs = channels(results, analysis.profile, analysis.base_profile, analysis.test)
    return finite_or_none(
        {
            **analysis.to_json(),
            "gate": gate,
            "engine_gate": engine or None,
            "channels": {c.name: c.to_json() for c in chs},
            "energy_ratio": _energy(results, analysis),
        }
    )


def _energy(results: Results, analysis: Analysis) -> dict[str, float] | None:
    """Per level, the speculative profile's energy per output token ÷ its base's (NVML)."""
    per_token: dict[tuple[str, int], float] = {}
    for p in results.measured:
        if p.test == analysis.test and p.gated_from is None and p.rate is None:
            value = p.run_average(lambda r: r.energy_j_per_token)
            if value == value:  # a number, not NaN: the runs had energy figures
                per_token[(p.profile, p.concurrency)] = value
    ratios = {
        str(c): per_token[(analysis.profile, c)] / per_token[(analysis.base_profile, c)]
        for c in sorted({c for _, c in per_token})
        if (analysis.profile, c) in per_token and (analysis.base_profile, c) in per_token
    }
    return ratios or None


def capacity_blocks(results: Results) -> list[Block]:
    bases = {name: facts.base_profile for name, facts in results.profiles.items()}
    return plain(capacity_lines(results.of(CapacityPoint), bases))


def parity_json(results: Results) -> list[Any]:
    return [finite_or_none(p.to_json()) for p in results.parities]


def shown_with_the_pair(results: Results) -> list[Block]:
    """Parity's lines are the speculative section's: beside the speedup they qualify."""
    return []


#: The kinds of result, in the order both the terminal and the results JSON show them.
SECTIONS = (
    Section("points", listed(MeasuredPoint), measured_blocks),
    Section("confirmations", lambda r: list(r.confirmations), confirmation_blocks),
    Section("speculative", speculative_json, lambda r: plain(terminal.speculative_lines(r))),
    Section("capacity", listed(CapacityPoint), capacity_blocks),
    Section("startup", listed(StartupPoint), said(StartupPoint)),
    Section("accuracy", listed(AccuracyPoint), lambda r: plain(terminal.accuracy_lines(r))),
    Section("parity", parity_json, shown_with_the_pair),
)


def json_sections(results: Results) -> dict[str, list[Any]]:
    """The results JSON's lists, one per section."""
    return {section.key: section.json(results) for section in SECTIONS}


def terminal_blocks(results: Results, *, verbose: bool = False) -> list[Block]:
    """The terminal summary: every section's blocks, then the verdicts (counts, the lines that
    matter, what was written and what to do next)."""
    blocks = [block for section in SECTIONS for block in section.terminal(results)]
    return [*blocks, (None, terminal.verdict_lines(results, verbose=verbose))]
