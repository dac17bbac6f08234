"""The simulated engine's time model: what one scheduler step costs, and what it yields.

Continuous batching, as SGLang does it: every step the scheduler runs one forward pass over
the b running requests. The cost of a forward over ``n`` tokens is linear::

    forward(n) = base + per_token · n                              (milliseconds)

A plain decode step gives every running request one token, so ``t(b) = forward(b)`` and the
throughput at batch b is ``b / t(b)``. ``base`` and ``per_token`` are calibrated so that the
baseline reproduces the reference node's figures (Kimi-K2.5 INT4 on eight Blackwell GPUs, TP 8,
as served by SGLang): 92.6 tok/s at one stream and 773 tok/s at C = 250.

An EAGLE-style speculative step drafts ``num_steps`` tokens per request with a small drafter,
then verifies ``num_draft_tokens`` tokens per request in one target forward::

    t_spec(b) = forward(b · num_draft_tokens) + num_steps · (draft_base + draft_per_req · b)

Each request then gains ``1 + accepted`` tokens, where ``accepted`` counts consecutive draft
tokens that pass verification, each with probability p (chain drafting, topk = 1), capped at
``num_steps``. p is solved from the mean accept length. ``draft_base`` and ``draft_per_req``
are calibrated so that EAGLE-3 reproduces that node's: 96.1 tok/s at one stream and 354 tok/s at
saturation, where SGLang's default cap of 48 running requests holds the batch at 48.

Prefill adds ``prefill_per_token`` per prompt token to the step in which a request joins.

All times are divided by ``speed`` (the documented speed factor, default 10, so the simulated
figures are the reference node's × 10) and by the fault knob ``throughput_multiplier``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: The reference node's measured figures (tok/s, the seed accounts) that the default model
#: reproduces, before the speed factor; not to be confused with a profile's RNG `seed`.
REFERENCE_BASELINE_C1 = 92.6
REFERENCE_BASELINE_SATURATED = 773.0
REFERENCE_BASELINE_SATURATION_C = 250
REFERENCE_EAGLE3_C1 = 96.1
REFERENCE_EAGLE3_SATURATED = 354.0
SPEC_MAX_RUNNING_REQUESTS = 48  # SGLang's cap for EAGLE/EAGLE3 when --max-running-requests is unset
DEFAULT_ACCEPT_LENGTH = 2.1
DEFAULT_SPEED = 10.0
DEFAULT_NUM_STEPS = 3  # SGLang's auto (steps, topk, draft tokens) = (3, 1, 4) from 0.5.9 on


def _calibrate_forward() -> tuple[float, float]:
    # b / (base + k·b) hits both seed points: solve the 2×2 linear system in ms.
    t1 = 1000.0 / REFERENCE_BASELINE_C1
    b = REFERENCE_BASELINE_SATURATION_C
    tb = 1000.0 * b / REFERENCE_BASELINE_SATURATED
    per_token = (tb - t1) / (b - 1)
    return t1 - per_token, per_token


FORWARD_BASE_MS, FORWARD_PER_TOKEN_MS = _calibrate_forward()


def _calibrate_draft(
    accept_length: float, num_steps: int, num_draft_tokens: int
) -> tuple[float, float]:
    def draft_total(b: int, tok_s: float) -> float:
        step = 1000.0 * b * accept_length / tok_s
        return (step - FORWARD_BASE_MS - FORWARD_PER_TOKEN_MS * b * num_draft_tokens) / num_steps

    d1 = draft_total(1, REFERENCE_EAGLE3_C1)
    bs = SPEC_MAX_RUNNING_REQUESTS
    ds = draft_total(bs, REFERENCE_EAGLE3_SATURATED)
    per_req = (ds - d1) / (bs - 1)
    return d1 - per_req, per_req


DRAFT_BASE_MS, DRAFT_PER_REQ_MS = _calibrate_draft(
    DEFAULT_ACCEPT_LENGTH, DEFAULT_NUM_STEPS, DEFAULT_NUM_STEPS + 1
)


@dataclass(frozen=True)
class CostModel:
    """Step costs in seconds, already scaled by the speed factor and the fault multiplier."""

    speed: float = DEFAULT_SPEED
    throughput_multiplier: float = 1.0
    forward_base_ms: float = FORWARD_BASE_MS
    forward_per_token_ms: float = FORWARD_PER_TOKEN_MS
    draft_base_ms: float = DRAFT_BASE_MS
    draft_per_req_ms: float = DRAFT_PER_REQ_MS
    prefill_per_token_ms: float = 0.02

    @property
    def _scale(self) -> float:
        return 1e-3 / (self.speed * self.throughput_multiplier)

    def forward_s(self, tokens: float) -> float:
        return (self.forward_base_ms + self.forward_per_token_ms * tokens) * self._scale

    def decode_step_s(self, batch: int) -> float:
        return self.forward_s(batch)

    def spec_step_s(self, batch: int, num_steps: int, num_draft_tokens: int) -> float:
        draft = num_steps * (self.draft_base_ms + self.draft_per_req_ms * batch) * self._scale
        return self.forward_s(batch * num_draft_tokens) + draft

    def prefill_s(self, prompt_tokens: int) -> float:
        return self.prefill_per_token_ms * prompt_tokens * self._scale


@dataclass(frozen=True)
class Speculation:
    """EAGLE-style chain drafting: tokens per step = 1 + accepted drafts (≤ num_steps)."""

    num_steps: int = DEFAULT_NUM_STEPS
    accept_length: float = DEFAULT_ACCEPT_LENGTH
    #: The accept length while a request thinks (None: ``accept_length``): a drafter accepts
    #: more or less of a model's thinking than of its answers.
    thinking_accept_length: float | None = None

    @property
    def num_draft_tokens(self) -> int:
        return self.num_steps + 1

    @property
    def accept_probability(self) -> float:
        """p such that E[1 + accepted] = 1 + p + p² + … + p^num_steps = accept_length."""
        return self.probability_for(self.accept_length)

    @property
    def thinking_accept_probability(self) -> float:
        """The same p for the tokens a request thinks."""
        if self.thinking_accept_length is None:
            return self.accept_probability
        return self.probability_for(self.thinking_accept_length)

    def probability_for(self, accept_length: float) -> float:
        target = min(max(accept_length, 1.0), float(self.num_draft_tokens))
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if 1 + sum(mid**k for k in range(1, self.num_steps + 1)) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    #: SGLANG_SIMULATE_ACC_LEN (None: unset, acceptance is the drafter's): every verify step
    #: of the batch accepts this many tokens, as SGLang forces it to measure the engine alone;
    #: drawn by ``pinned_method`` as its ``sample_simulated_acc_len`` does.
    pinned: float | None = None
    #: SGLANG_SIMULATE_ACC_METHOD: "match-expected" (the default from 0.5.11: the floor or the
    #: ceiling of ``pinned``, weighted to match it) or "multinomial" (0.5.6's default: a normal
    #: draw of sd 1 about it, rounded and clamped).
    pinned_method: str = "match-expected"

    def sample_tokens(self, rng: random.Random, p: float) -> int:
        tokens = 1
        while tokens <= self.num_steps and rng.random() < p:
            tokens += 1
        return tokens

    def pinned_tokens(self, rng: random.Random) -> int:
        """One verify step's forced accept length, for the whole batch (SGLang draws it once a
        step: sample_simulated_acc_len in speculative/spec_utils.py)."""
        assert self.pinned is not None
        top = self.num_draft_tokens
        if self.pinned_method == "multinomial":
            return int(min(max(round(rng.gauss(self.pinned, 1.0)), 1), top))
        wanted = min(max(self.pinned, 1.0), float(top))
        lower = int(wanted)
        if lower >= top:
            return top
        return lower + 1 if rng.random() < wanted - lower else lower


def expected_tok_s(model: CostModel, batch: int, spec: Speculation | None = None) -> float:
    """Steady-state output tok/s of a full batch under the model (no prefill)."""
    if spec is None:
        return batch / model.decode_step_s(batch)
    return (
        batch * spec.accept_length / model.spec_step_s(batch, spec.num_steps, spec.num_draft_tokens)
    )
