"""The simulated engine's scheduler: continuous batching on an asyncio loop.

One task plays SGLang's scheduler. Each step it admits waiting requests up to
``max_running_requests``, sleeps for the step's modelled cost (on an absolute timeline, so
timer granularity never drifts the average rate), then hands every running request its new
tokens — one per step, or ``1 + accepted`` drafts with speculation — and wakes its stream.
A stream that wakes after several steps sends one chunk with all of them, as SGLang does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_llmperf.sim.model import CostModel, Speculation

if TYPE_CHECKING:
    from pytest_llmperf.sim.gpu_work import GpuWork

log = logging.getLogger("sglang.sim")
#: Event-loop timers fire on whole milliseconds; steps shorter than that run late and are
#: caught up back to back, up to this much lateness, so the average rate stays exact.
MAX_LATENESS_S = 0.025


@dataclass(eq=False)
class SimRequest:
    rid: str
    prompt_tokens: int
    target_tokens: int  # max_new_tokens, or the natural EOS point without ignore_eos
    stopped_by_eos: bool
    received: float  # loop time
    #: Prompt tokens found in the prefix cache: only the rest is prefilled.
    cached_tokens: int = 0
    generated: int = 0
    verify_ct: int = 0
    accepted_drafts: int = 0
    first_token_at: float | None = None
    #: A thinking model's chat request: its first ``thinking`` tokens are thinking, and when
    #: the first answer token came (the truth TTFO is measured against).
    thinking: int = 0
    first_answer_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    stalled: bool = False
    internal: bool = False  # warm-up and health checks: never subject to the fault knobs
    #: Draws this request's draft acceptances. Seeded from the prompt by the server: at
    #: temperature 0 the drafts and their verification are a function of the text, so the same
    #: prompt gets the same accept length on every run, as on a real engine.
    accept_rng: random.Random | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None or self.error is not None


@dataclass
class Faults:
    """Knobs the plugin's own tests use to make the engine misbehave."""

    fail_every: int = 0  # every Nth request fails
    crash_after_requests: int = 0  # exit the process after N finished requests
    stall_after_tokens: int = 0  # streams stop (and never finish) after N tokens


class Engine:
    def __init__(
        self,
        cost: CostModel,
        max_running_requests: int,
        max_total_tokens: int = 812345,
        speculation: Speculation | None = None,
        faults: Faults | None = None,
        seed: int = 0,
        decode_log_interval: int = 40,
        gpu: GpuWork | None = None,
    ) -> None:
        self.cost = cost
        #: GPU mode (sim/gpu_work.py): a decode step is real work on a device, not a sleep.
        self.gpu = gpu
        self._gpu_thread: concurrent.futures.ThreadPoolExecutor | None = None
        self.max_running = max_running_requests
        #: The KV cache in tokens: a request is admitted only while its prompt and its whole
        #: output fit beside the running ones' (SGLang reserves the same, then retracts).
        self.max_total_tokens = max_total_tokens
        self.spec = speculation
        self.faults = faults or Faults()
        self.decode_log_interval = decode_log_interval
        self._rng = random.Random(seed)
        self._p_accept = speculation.accept_probability if speculation else 0.0
        self._p_accept_thinking = speculation.thinking_accept_probability if speculation else 0.0
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._work = asyncio.Event()
        self._step_count = 0
        self._submitted = 0
        # Counters for /metrics and /server_info.
        self.requests_total = 0
        self.finished_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.spec_verify_total = 0
        self.spec_tokens_total = 0  # tokens produced by verified steps (accept length numerator)
        #: The time the simulated timeline slipped while busy: steps this host ran so late that
        #: the schedule was given up (the self-check that tells the host's speed from the model's).
        self.behind_schedule_s_total = 0.0
        self.last_gen_throughput = 0.0
        self._window_tokens = 0
        self._window_start = 0.0
        self.on_crash: Callable[[], None] | None = None  # set by the server

    def submit(self, req: SimRequest) -> None:
        self._submitted += 0 if req.internal else 1
        self.requests_total += 1
        self.prompt_tokens_total += req.prompt_tokens
        if (
            not req.internal
            and self.faults.fail_every
            and self._submitted % self.faults.fail_every == 0
        ):
            req.error = f"simulated failure of request {self._submitted} (--sim-fail-every {self.faults.fail_every})"
            req.wake.set()
            return
        self.waiting.append(req)
        self._work.set()

    def cancel(self, req: SimRequest) -> None:
        """The client went away: free the slot, as SGLang aborts a disconnected request."""
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def abort_all(self, why: str) -> None:
        """The server is stopping: every request it holds fails with ``why``, so that no
        response waits on a scheduler that no longer runs (a queued request whose client went
        away would keep its handler, and the server's exit, waiting)."""
        for req in [*self.running, *self.waiting]:
            req.error = why
            req.wake.set()
        self.running.clear()
        self.waiting.clear()

    def reset_counters(self) -> None:
        self.spec_verify_total = 0
        self.spec_tokens_total = 0

    @property
    def token_usage(self) -> float:
        """The share of the KV cache the running requests hold now (SGLang's token_usage).
        The simulation reserves a request's whole output when it admits it, so this is what it
        committed; SGLang admits on an estimate and fills its cache as far, retracting a
        request when it overflows."""
        reserved = sum(r.prompt_tokens + r.target_tokens for r in self.running)
        return min(1.0, reserved / self.max_total_tokens)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            if self.idle:
                self._work.clear()
                await self._work.wait()
                deadline = None
            step_s = 0.0
            # The KV cache: a request is admitted while its prompt and whole output fit beside
            # the running ones' (one alone always runs: larger than the cache, it would wait
            # forever). Summed once a step: the step walks the running requests anyway.
            reserved = sum(r.prompt_tokens + r.target_tokens for r in self.running)
            while self.waiting and len(self.running) < self.max_running:
                need = self.waiting[0].prompt_tokens + self.waiting[0].target_tokens
                if self.running and reserved + need > self.max_total_tokens:
                    break
                reserved += need
                req = self.waiting.popleft()
                self.running.append(req)
                step_s += self.cost.prefill_s(req.prompt_tokens - req.cached_tokens)
            batch = len(self.running)
            if self.gpu is not None:
                await self._gpu_step(loop, step_s)
                continue
            if self.spec is None:
                step_s += self.cost.decode_step_s(batch)
            else:
                step_s += self.cost.spec_step_s(
                    batch, self.spec.num_steps, self.spec.num_draft_tokens
                )
            now = loop.time()
            if deadline is not None and deadline < now - max(step_s, MAX_LATENESS_S):
                # So far behind that catching up would be a long burst: the host, not the
                # model, set this step's pace, and the modelled figures lose that much time.
                self.behind_schedule_s_total += now - deadline
                deadline = now
            elif deadline is None:
                deadline = now  # idle until now
            deadline += step_s
            delay = deadline - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            self._advance(loop.time())

    async def _gpu_step(self, loop: asyncio.AbstractEventLoop, prefill_s: float) -> None:
        """A step on the device: the modelled prefill of the requests just admitted, then the
        weights read (1 / the throughput multiplier times: the hidden slowdown knob)."""
        assert self.gpu is not None
        if self._gpu_thread is None:
            self._gpu_thread = concurrent.futures.ThreadPoolExecutor(1, "sim-gpu")
        if prefill_s > 0:
            await asyncio.sleep(prefill_s)
        reads = 1.0 / self.cost.throughput_multiplier
        await loop.run_in_executor(self._gpu_thread, self.gpu.step, reads)
        self._advance(loop.time())

    def _advance(self, now: float) -> None:
        self._step_count += 1
        produced = 0
        still_running = []
        pinned = (
            self.spec.pinned_tokens(self._rng)
            if self.spec is not None and self.spec.pinned is not None
            else None
        )
        for req in self.running:
            gain = (
                1
                if self.spec is None
                else pinned
                if pinned is not None
                else self.spec.sample_tokens(
                    req.accept_rng or self._rng,
                    self._p_accept_thinking if req.generated < req.thinking else self._p_accept,
                )
            )
            gain = min(gain, req.target_tokens - req.generated)
            if self.faults.stall_after_tokens and not req.internal:
                gain = min(gain, self.faults.stall_after_tokens - req.generated)
                if gain <= 0:
                    req.stalled = True  # never finishes, never wakes again: a hung stream
                    continue
            req.generated += gain
            produced += gain
            if self.spec is not None:
                req.verify_ct += 1
                req.accepted_drafts += gain - 1
                self.spec_verify_total += 1
                self.spec_tokens_total += gain
            if req.first_token_at is None:
                req.first_token_at = now
            if req.first_answer_at is None and req.generated > req.thinking:
                req.first_answer_at = now
            if req.generated >= req.target_tokens:
                req.finished_at = now
                self.finished_total += 0 if req.internal else 1
                if not req.internal and log.isEnabledFor(logging.DEBUG):
                    log.debug(
                        "request %s: ttft %.6f s, ttfo %s, %d thinking of %d tokens", req.rid,
                        req.first_token_at - req.received,
                        "none" if req.first_answer_at is None
                        else f"{req.first_answer_at - req.received:.6f} s",
                        min(req.thinking, req.generated), req.generated,
                    )  # fmt: skip
            else:
                still_running.append(req)
            req.wake.set()
        self.running = still_running
        self.generation_tokens_total += produced
        self._window_tokens += produced
        if self._step_count % self.decode_log_interval == 0:
            self._log_decode(now)
        crash_after = self.faults.crash_after_requests
        if crash_after and self.finished_total >= crash_after and self.on_crash is not None:
            self.on_crash()

    def _log_decode(self, now: float) -> None:
        elapsed = now - self._window_start if self._window_start else 0.0
        if elapsed > 0:
            self.last_gen_throughput = self._window_tokens / elapsed
        self._window_start, self._window_tokens = now, 0
        spec = ""
        if self.spec is not None and self.spec_verify_total:
            accept_len = self.spec_tokens_total / self.spec_verify_total
            spec = f"accept len: {accept_len:.2f}, accept rate: {(accept_len - 1) / self.spec.num_steps:.2f}, "
        log.info(
            "Decode batch, #running-req: %d, #token: %d, token usage: 0.00, %scuda graph: True, "
            "gen throughput (token/s): %.2f, #queue-req: %d,",
            len(self.running),
            sum(r.prompt_tokens + r.generated for r in self.running),
            spec,
            self.last_gen_throughput,
            len(self.waiting),
        )

    @property
    def avg_spec_accept_length(self) -> float | None:
        if self.spec is None or not self.spec_verify_total:
            return None
        return self.spec_tokens_total / self.spec_verify_total
