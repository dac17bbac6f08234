"""Greedy parity: a speculative server must answer token for token as its base does.

Lossless speculation (EAGLE-3, a draft model, n-grams) verifies every drafted token against the
target model, so at temperature 0 its output is the base's. A drafter that accepts a wrong token
gets *faster* (its accept length goes up) while it answers differently, which no speed gate sees.

Per prompt the two continuations are compared token by token (ids where the API gives them,
else the tokens' text). At the first divergent position the base's log-probability gap between
its top two candidates tells a near-tie from a real fault: batching changes the order of
floating-point sums, which may flip two candidates within a hair of each other (SGLang's lossless
kit reads the same gap), while a fault flips a token the base was sure of. A divergence within the
profile's ``parity_tie_gap`` is reported and excused; any other FAILs the pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.core.outcome import Outcome

#: Tokens shown on either side of a divergence.
SHOWN_TOKENS = 8


@dataclass(frozen=True)
class GreedyOutput:
    """One prompt's greedy continuation from one server."""

    prompt: str
    #: Token identities: ids, or the tokens' text where the API gives no ids.
    tokens: tuple[int | str, ...]
    #: Each token's text, where the API gives it ('' where not).
    texts: tuple[str, ...]
    #: Per position, the log-probability gap between the top two candidates (None where the
    #: API returned no top-2 log-probabilities).
    gaps: tuple[float | None, ...]
    #: Why the continuation ended ("length", "stop", …; None: not said).
    finish: str | None = None
    category: str | None = None

    def text_from(self, position: int) -> str:
        return "".join(self.texts[position : position + SHOWN_TOKENS])


@dataclass(frozen=True)
class PromptParity:
    """One prompt's comparison: identical, or where and how the continuations part."""

    index: int
    prompt: str
    tokens: int  # the base's continuation length
    position: int | None = None  # the first divergent token (None: identical)
    base_token: str | None = None
    spec_token: str | None = None
    gap: float | None = None  # the base's top-2 log-probability gap there
    excused: bool = False  # a near-tie: within the profile's parity_tie_gap
    base_continuation: str = ""
    spec_continuation: str = ""

    @property
    def identical(self) -> bool:
        return self.position is None

    def describe(self) -> str:
        if self.identical:
            return f"prompt {self.index}: identical ({self.tokens} tokens)"
        gap = "no log-probabilities" if self.gap is None else f"top-2 gap {self.gap:.3g}"
        kind = "a near-tie, excused" if self.excused else "not a near-tie"
        return (
            f"prompt {self.index} ({_short(self.prompt)!r}): diverges at token {self.position}: "
            f"base {self.base_token!r}, speculative {self.spec_token!r} ({gap}: {kind}); "
            f"base continues {self.base_continuation!r}, speculative "
            f"{self.spec_continuation!r}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "prompt": self.prompt,
            "tokens": self.tokens,
            "identical": self.identical,
            "position": self.position,
            "base_token": self.base_token,
            "spec_token": self.spec_token,
            "top2_gap": self.gap,
            "excused": self.excused,
            "base_continuation": self.base_continuation or None,
            "spec_continuation": self.spec_continuation or None,
        }


def _short(prompt: str, width: int = 40) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _token_text(output: GreedyOutput, position: int) -> str:
    if position >= len(output.tokens):
        return f"<end: {output.finish or 'stopped'}>"
    text = output.texts[position] if position < len(output.texts) else ""
    return text or str(output.tokens[position])


def compare(index: int, base: GreedyOutput, spec: GreedyOutput, tie_gap: float) -> PromptParity:
    """The two continuations of one prompt, compared over the length both were asked for."""
    shared = min(len(base.tokens), len(spec.tokens))
    position = next((k for k in range(shared) if base.tokens[k] != spec.tokens[k]), None)
    if position is None and len(base.tokens) != len(spec.tokens):
        position = shared  # one stopped (EOS) where the other went on
    if position is None:
        return PromptParity(index, base.prompt, len(base.tokens))
    gap = base.gaps[position] if position < len(base.gaps) else None
    return PromptParity(
        index,
        base.prompt,
        len(base.tokens),
        position=position,
        base_token=_token_text(base, position),
        spec_token=_token_text(spec, position),
        gap=gap,
        excused=gap is not None and gap <= tie_gap,
        base_continuation=base.text_from(position),
        spec_continuation=spec.text_from(position),
    )


@dataclass
class PairParity:
    """A speculative profile against its base over the same prompts, in the same run."""

    profile: str
    base_profile: str
    test: str
    tie_gap: float
    prompts: list[PromptParity]
    outcome: Outcome = Outcome.PASS
    message: str = ""
    #: The pair's accuracy on the same items (McNemar), where both were asked in the run.
    accuracy: str | None = None

    @property
    def identical(self) -> int:
        return sum(p.identical for p in self.prompts)

    @property
    def fraction(self) -> float:
        return self.identical / len(self.prompts) if self.prompts else 0.0

    @property
    def faults(self) -> list[PromptParity]:
        return [p for p in self.prompts if not p.identical and not p.excused]

    @property
    def label(self) -> str:
        return f"{self.profile} vs {self.base_profile}"

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "base_profile": self.base_profile,
            "test": self.test,
            "prompts": len(self.prompts),
            "identical": self.identical,
            "identical_fraction": self.fraction,
            "excused_near_ties": sum(p.excused for p in self.prompts),
            "tie_gap": self.tie_gap,
            "verdict": self.outcome.value,
            "message": self.message,
            "accuracy": self.accuracy,
            "per_prompt": [p.to_json() for p in self.prompts],
        }


def judge(
    profile: str,
    base_profile: str,
    test: str,
    base: Sequence[GreedyOutput],
    spec: Sequence[GreedyOutput],
    tie_gap: float,
) -> PairParity:
    """Every prompt compared; FAIL on any divergence that is not a near-tie."""
    prompts = [compare(k, b, s, tie_gap) for k, (b, s) in enumerate(zip(base, spec), start=1)]
    parity = PairParity(profile, base_profile, test, tie_gap, prompts)
    head = (
        f"{parity.label}: {parity.identical} of {len(prompts)} prompts identical at temperature 0"
    )
    excused = [p for p in prompts if p.excused]
    if parity.faults:
        first = parity.faults[0]
        parity.outcome = Outcome.FAIL
        parity.message = (
            f"{head} — FAIL: {len(parity.faults)} diverge where the base was sure (top-2 gap "
            f"above {tie_gap:g}), so the speculative server answers differently, not only faster: "
            f"{first.describe()}"
        )
    else:
        ties = f"; {len(excused)} near-tie(s) excused (top-2 gap ≤ {tie_gap:g})" if excused else ""
        parity.message = f"{head} — PASS{ties}"
    return parity
