"""Greedy parity: a speculative server must answer token for token as its base does.

Lossless speculation (EAGLE-3, a draft model, n-grams) verifies every drafted token against the
target model, so at temperature 0 its output is the base's. A drafter that accepts a wrong token
gets *faster* (its accept length goes up) while it answers differently, which no speed gate sees.

Per prompt the two continuations are compared token by token (ids where the API gives them,
else the tokens' text). At the first divergent position the base's log-probability gap between
its top two candidates tells a near-tie from a real fault: batching changes the order of
floating-point sums, which may flip two candidates within a hair of each other (SGLang's lossless
kit reads the same gap), while a fault flips a token the base was sure of. A divergence is
excused only where the gap is within the profile's ``parity_tie_gap`` *and* the speculative
token is the base's runner-up there: a near-tie can swap the top two, never bring in a third
token, and a verifier that accepts a wrong draft does so where the base is least sure. Any other
divergence FAILs the pair.

An excused near-tie does not end the comparison: past it the two continuations answer different
questions, so the speculative server is asked again from the prompt, the base's tokens up to and
including the base's token there (:func:`continue_past_ties`, while the speculative server is
up), and what it answers is compared with the base's own continuation, which is what the base
answers from that prefix at temperature 0. A fault after a near-tie is found; the tokens
compared count every token checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.core.accuracy import AccuracyPoint, Task, tasks_digest
from pytest_llmperf.core.outcome import Outcome

#: Tokens shown on either side of a divergence.
SHOWN_TOKENS = 8
#: Near-ties a prompt's comparison is continued past, each one more request to the speculative
#: server; past the last, the comparison ends at the next excused one.
MAX_CONTINUATIONS = 8


@dataclass(frozen=True)
class Forced:
    """A near-tie the speculative continuation was taken on past: where, and the token the
    speculative server emitted there before it was asked again from the base's."""

    position: int
    token: int | str
    text: str


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
    #: Per position, the identity of the base's second candidate (None where not given).
    runner_up: tuple[int | str | None, ...] = ()
    #: The near-ties past which this (speculative) continuation was asked again from the
    #: base's token: from each, the tokens are the base's up to it and the answer after it.
    forced: tuple[Forced, ...] = ()

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
    excused: bool = False  # a near-tie: within parity_tie_gap, the base's runner-up emitted
    #: The speculative token is the base's runner-up there (None: the base gave no runner-up).
    runner_up: bool | None = None
    base_continuation: str = ""
    spec_continuation: str = ""
    #: Excused near-ties the comparison was continued past (their positions), before the
    #: divergence above or the end.
    ties: tuple[int, ...] = ()

    @property
    def identical(self) -> bool:
        return self.position is None and not self.ties

    @property
    def compared(self) -> int:
        """Tokens compared: all of the base's where nothing stopped it, else up to the divergence
        that did (past it the continuations answer different questions)."""
        return self.tokens if self.position is None else min(self.position + 1, self.tokens)

    def describe(self) -> str:
        if self.identical:
            return f"prompt {self.index}: identical ({self.tokens} tokens)"
        if self.position is None:
            return (
                f"prompt {self.index}: identical past {len(self.ties)} excused near-tie(s) "
                f"(at token {', '.join(map(str, self.ties))}; {self.tokens} tokens compared)"
            )
        gap = "no log-probabilities" if self.gap is None else f"top-2 gap {self.gap:.3g}"
        if self.excused:
            kind = "the base's runner-up at a near-tie, excused"
        elif self.runner_up is False:
            kind = "not the base's runner-up, so no near-tie excuses it"
        else:
            kind = "not a near-tie"
        after = (
            f" after {len(self.ties)} excused near-tie(s) (at token "
            f"{', '.join(map(str, self.ties))}), each continued from the base's token"
            if self.ties
            else ""
        )
        return (
            f"prompt {self.index} ({_short(self.prompt)!r}): diverges at token {self.position}{after}: "
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
            "tokens_compared": self.compared,
            "position": self.position,
            "base_token": self.base_token,
            "spec_token": self.spec_token,
            "top2_gap": self.gap,
            "spec_is_runner_up": self.runner_up,
            "excused": self.excused,
            "near_ties_continued": list(self.ties),
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
    """The two continuations of one prompt, compared over the length both were asked for, past
    every excused near-tie the speculative one was continued from (``spec.forced``)."""
    forced = {f.position: f for f in spec.forced}

    def emitted(k: int) -> int | str | None:
        if k in forced:
            return forced[k].token
        return spec.tokens[k] if k < len(spec.tokens) else None

    shared = min(len(base.tokens), len(spec.tokens))
    ties: list[int] = []
    start = 0
    while True:
        position = next((k for k in range(start, shared) if base.tokens[k] != emitted(k)), None)
        if position is None and len(base.tokens) != len(spec.tokens):
            position = shared  # one stopped (EOS) where the other went on
        if position is None:
            return PromptParity(index, base.prompt, len(base.tokens), ties=tuple(ties))
        gap = base.gaps[position] if position < len(base.gaps) else None
        second = base.runner_up[position] if position < len(base.runner_up) else None
        token = emitted(position)
        runner_up = None if second is None else token is not None and token == second
        excused = gap is not None and gap <= tie_gap and bool(runner_up)
        if excused and position in forced:
            ties.append(position)
            start = position + 1
            continue
        at = forced.get(position)
        return PromptParity(
            index,
            base.prompt,
            len(base.tokens),
            position=position,
            base_token=_token_text(base, position),
            spec_token=(at.text or str(at.token)) if at else _token_text(spec, position),
            gap=gap,
            excused=excused,
            runner_up=runner_up,
            base_continuation=base.text_from(position),
            spec_continuation=at.text if at else spec.text_from(position),
            ties=tuple(ties),
        )


def continue_past_ties(
    base: GreedyOutput,
    spec: GreedyOutput,
    tie_gap: float,
    ask: Callable[[str, int], GreedyOutput],
    limit: int = MAX_CONTINUATIONS,
) -> GreedyOutput:
    """The speculative continuation taken on past each excused near-tie, while its server is
    up: ``ask(text, max_tokens)`` asks it again from the prompt and the base's tokens up to and
    including the base's token there, for the rest of the base's length, and the answer is
    stitched on (the base's prefix, then the answer), the near-tie kept in ``forced``. It stops
    at a divergence no near-tie excuses, at the end, after ``limit`` near-ties, or where the
    base's tokens have no text to ask with."""
    out = spec
    for _ in range(limit):
        found = compare(0, base, out, tie_gap)
        k = found.position
        if k is None or not found.excused or k + 1 >= len(base.tokens):
            break
        prefix = base.texts[: k + 1]
        if len(prefix) < k + 1 or not all(prefix):
            break
        answer = ask(base.prompt + "".join(prefix), len(base.tokens) - k - 1)
        out = replace(
            out,
            tokens=(*base.tokens[: k + 1], *answer.tokens),
            texts=(*base.texts[: k + 1], *answer.texts),
            gaps=(*out.gaps[: k + 1], *answer.gaps),
            finish=answer.finish,
            runner_up=(*out.runner_up[: k + 1], *answer.runner_up),
            forced=(
                *out.forced,
                Forced(k, out.tokens[k], out.texts[k] if k < len(out.texts) else ""),
            ),
        )
    return out


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
    #: The pair's accuracy on the same items (McNemar), where both were asked in the run, and
    #: that check's outcome.
    accuracy: str | None = None
    accuracy_outcome: Outcome | None = None
    #: The identical share as a figure with a golden (None until checked).
    share: IdenticalShare | None = None

    @property
    def identical(self) -> int:
        return sum(p.identical for p in self.prompts)

    @property
    def fraction(self) -> float:
        return self.identical / len(self.prompts) if self.prompts else 0.0

    @property
    def compared(self) -> int:
        return sum(p.compared for p in self.prompts)

    @property
    def faults(self) -> list[PromptParity]:
        return [p for p in self.prompts if p.position is not None and not p.excused]

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
            "tokens_compared": self.compared,
            "excused_near_ties": sum(p.excused + len(p.ties) for p in self.prompts),
            "near_ties_continued": sum(len(p.ties) for p in self.prompts),
            "tie_gap": self.tie_gap,
            "verdict": self.outcome.value,
            "message": self.message,
            "accuracy": self.accuracy,
            "accuracy_verdict": self.accuracy_outcome.value if self.accuracy_outcome else None,
            "identical_golden": self.share.golden_check() if self.share else None,
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
        f"{parity.label}: {parity.identical} of {len(prompts)} prompts identical at temperature 0 "
        f"({parity.compared:,} tokens compared)"
    )
    continued = sum(len(p.ties) for p in prompts)
    stopped = sum(p.excused for p in prompts)  # an excused near-tie not continued past
    if parity.faults:
        first = parity.faults[0]
        parity.outcome = Outcome.FAIL
        parity.message = (
            f"{head} — FAIL: {len(parity.faults)} diverge where no near-tie excuses it (the base "
            f"sure of its token, top-2 gap above {tie_gap:g}, or the speculative token not the "
            f"base's runner-up), so the speculative server answers differently, not only faster: "
            f"{first.describe()}"
        )
    else:
        past = (
            f", {continued} compared past (asked again from the base's token)" if continued else ""
        )
        ties = (
            f"; {continued + stopped} near-tie(s) excused (the base's runner-up, top-2 gap ≤ "
            f"{tie_gap:g}){past}"
            if continued + stopped
            else ""
        )
        parity.message = f"{head} — PASS{ties}"
    return parity


@dataclass(kw_only=True)
class IdenticalShare(AccuracyPoint):
    """The share of prompts a speculative profile answered as its base did, as a figure with
    a golden: recorded and judged as an accuracy is (the same prompts every night, so McNemar
    on the golden's own per-prompt outcomes), where "right" means identical to the base. A
    near-tie that parity excuses still counts as not identical here, so a drift towards more
    near-ties shows against the golden while parity passes."""

    base_profile: str = ""

    @property
    def key(self) -> str:
        return f"{self.node.without_params}[identical]"

    @property
    def tally(self) -> str:
        return f"{self.correct} of {len(self.outcomes)} identical"

    @property
    def label(self) -> str:
        return f"{self.profile} vs {self.base_profile} identical prompts"

    def golden_check(self) -> dict[str, Any]:
        """What the results JSON's parity entry says of the figure against its golden."""
        return {
            "verdict": self.verdict_json,
            "golden": self.golden_json,
            "p_value": self.p_value,
            "message": self.message,
        }


def identical_share(parity: PairParity, max_tokens: int, launch_id: str | None) -> IdenticalShare:
    """The pair's per-prompt identity as a point: each prompt an item, identical or not."""
    tasks = tuple(Task(p.prompt, "identical") for p in parity.prompts)
    return IdenticalShare(
        profile=parity.profile,
        base_profile=parity.base_profile,
        test=parity.test,
        concurrency=1,
        metric="identical_share",
        workload={"tasks": tasks_digest(tasks), "max_tokens": max_tokens},
        tasks=tasks,
        outcomes=tuple(p.identical for p in parity.prompts),
        source=f"greedy parity against {parity.base_profile}",
        launch_id=launch_id,
    )
