"""The speculative verdict by channel: when a speculative profile's speed or answers change,
which of its three causes moved.

- **engine**: the speedup over the base with acceptance pinned at the golden accept length
  (``pin_acceptance``: a launch of its own, ``NAME@pinned``): the engine's speed without the
  drafter's luck (a slower verify step, a lost CUDA graph, a kernel regression);
- **acceptance**: the drafter's real accept length against its golden and the profile's
  ``accept_length_floor`` (``test_accept_length``): a drafter that guesses worse;
- **lossless**: greedy parity with the base and the pair's accuracy on the same items: a
  server that answers differently, not only at another speed.

The speedup as served (the drafter's real acceptance, ``test_speculative_speedup``) moves with
the first two; a FAIL of it names the channel that moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.core.format import signed_percent
from pytest_llmperf.core.nodeid import NodeId
from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.points import MeasuredPoint, SpeedupPoint
from pytest_llmperf.core.results import Results


@dataclass(frozen=True)
class Channel:
    """One channel of one speculative pair: its verdict (None: not judged in this run), what
    it read, and its verdict per level where it has levels."""

    name: str
    verdict: Outcome | None
    detail: str
    levels: dict[int, tuple[Outcome | None, str]] = field(default_factory=dict)

    def cell(self, concurrency: int | None = None) -> str:
        """The verdict at a level (or the channel's), '-' where not judged."""
        if concurrency is not None and self.levels:
            verdict, _ = self.levels.get(concurrency, (None, ""))
        else:
            verdict = self.verdict
        return "-" if verdict is None else verdict.value

    def describe(self, concurrency: int | None = None) -> str:
        """``acceptance FAIL (accept length 2.50 vs 2.88 golden)``, at a level where it has
        levels."""
        if concurrency is not None and concurrency in self.levels:
            verdict, detail = self.levels[concurrency]
        else:
            verdict, detail = self.verdict, self.detail
        said = "not judged" if verdict is None else verdict.value
        return f"{self.name} {said}" + (f" ({detail})" if detail else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": None if self.verdict is None else self.verdict.value,
            "detail": self.detail,
            "levels": {
                str(c): {"verdict": None if v is None else v.value, "detail": d}
                for c, (v, d) in sorted(self.levels.items())
            }
            or None,
        }


def _worst(outcomes: list[Outcome | None]) -> Outcome | None:
    judged = [o for o in outcomes if o is not None]
    return min(judged, key=lambda o: o.rank) if judged else None


def _change(point: SpeedupPoint | MeasuredPoint) -> str:
    if point.ratio is None:
        return point.message.split(": ", 1)[-1][:80] if point.message else ""
    return f"{signed_percent(point.ratio - 1)} % vs golden"


def engine(results: Results, profile: str, base: str, test: str) -> Channel:
    """The pinned speedups of the pair measured by ``test`` (a node id without parameters)."""
    points = [
        p
        for p in results.speedups
        if p.channel == "engine"
        and (p.profile, p.base_profile) == (profile, base)
        and NodeId(p.of_test).without_params == test
    ]
    if not points:
        why = results.engine_channel.get(profile, "not measured")
        return Channel("engine", None, why)
    levels = {p.concurrency: (p.outcome, _change(p)) for p in points}
    pinned = points[0].pinned_at
    detail = results.engine_channel.get(profile) or (
        f"acceptance pinned at {pinned:g}" if pinned is not None else ""
    )
    return Channel("engine", _worst([p.outcome for p in points]), detail, levels)


def acceptance(results: Results, profile: str) -> Channel:
    """The accept-length checks of ``profile``: on the shipped prompt set
    (``llmperf.acceptance()``, test_acceptance) and on each level's throughput runs
    (test_accept_length), the worse of the two at a level."""
    points = [
        p
        for p in results.measured
        if p.profile == profile and p.metric == "accept_length" and p.gated_from is not None
    ]
    if not points:
        return Channel("acceptance", None, "no accept length checked (test_accept_length)")
    levels: dict[int, tuple[Outcome | None, str]] = {}
    for p in sorted(points, key=lambda p: p.outcome.rank if p.outcome else len(Outcome)):
        if p.concurrency in levels:
            continue  # the more urgent of two checks at a level speaks for it
        golden = p.golden_mean
        read = f"accept length {p.summary.mean:.2f}" + (
            f" vs {golden:.2f} golden" if golden else ""
        )
        levels[p.concurrency] = (p.outcome, f"{read}, {p.node.short_name}")
    return Channel("acceptance", _worst([p.outcome for p in points]), "", levels)


def lossless(results: Results, profile: str, base: str) -> Channel:
    """Greedy parity with the base, and the pair's accuracy on the same items."""
    parity = results.parity_of(profile, base)
    if parity is None:
        return Channel("lossless", None, "no greedy parity checked (test_greedy_parity)")
    if not parity.prompts:
        return Channel("lossless", parity.outcome, "parity could not be checked")
    detail = (
        f"{parity.identical} of {len(parity.prompts)} prompts identical, "
        f"{parity.compared:,} tokens compared"
    )
    if parity.accuracy_outcome is not None:
        detail += f"; accuracy against the base's items {parity.accuracy_outcome.value}"
    return Channel("lossless", parity.outcome, detail)


def channels(results: Results, profile: str, base: str, test: str) -> list[Channel]:
    """The pair's three channels, for the speedup measured by ``test``."""
    return [
        engine(results, profile, base, test),
        acceptance(results, profile),
        lossless(results, profile, base),
    ]


def which_moved(chs: list[Channel], concurrency: int | None = None) -> str:
    """One line for a speculative FAIL or WARN: each channel's verdict (at the level), those
    that FAILed their own gate named first, as the channel that moved."""

    def failed(c: Channel) -> bool:
        at = c.levels.get(concurrency) if concurrency is not None else None
        verdict = at[0] if at is not None else c.verdict
        return verdict in (Outcome.FAIL, Outcome.INVALID)

    moved = [c for c in chs if failed(c)]
    rest = [c for c in chs if c not in moved]
    head = (
        f"the channel that moved: {', '.join(c.name for c in moved)}"
        if moved
        else "no channel FAILed its own gate"
    )
    return f"{head}; by channel: " + "; ".join(c.describe(concurrency) for c in [*moved, *rest])
