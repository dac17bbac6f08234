"""What the load generator records: one request, and one run of N requests at concurrency C."""

from __future__ import annotations

from dataclasses import dataclass, field

#: How a request cut short because another one of its run stalled is recorded (its error's start).
ABANDONED = "abandoned:"


@dataclass(slots=True)
class RequestRecord:
    index: int
    start: float = 0.0
    end: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    #: Server's cumulative completion tokens after each chunk (None where it did not say).
    chunk_cumulative: list[float | None] = field(default_factory=list)
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    #: When the last chunk that carried tokens arrived (the stall watchdog's clock: bytes that
    #: carry no token, such as SSE keep-alive comments, are not progress).
    last_token: float = 0.0
    #: The output length this request asked for (the staggered first wave asks for less).
    requested: int | None = None
    #: A window's first request of its slot, asking for a share of its length on purpose.
    staggered: bool = False
    #: The prompt tokens sent as ids, which the server must report back (None: a text prompt).
    sent_prompt_tokens: int | None = None
    #: Prompt tokens the server took from its prefix cache, where it says
    #: (SGLang's ``meta_info.cached_tokens``, OpenAI's ``usage.prompt_tokens_details``).
    cached_tokens: int | None = None
    #: Cut off by the client when the run's measurement window closed: not an error, and it
    #: has no final counts (its tokens so far are known from the chunks).
    cancelled: bool = False
    #: Open loop: when the schedule said the request arrives (``perf_counter``; 0.0 in a closed
    #: loop), and when the client released it to be sent (with a ``max_concurrency`` cap it then
    #: waits for a slot until ``start``).
    arrival: float = 0.0
    released: float = 0.0
    #: When the first answer token arrived, where the stream tells answer from thinking (the
    #: chat API: ``content`` deltas after ``reasoning_content`` ones); None where it cannot.
    first_answer: float | None = None
    #: The server's count of the thinking tokens among ``completion_tokens`` (SGLang's
    #: ``usage.reasoning_tokens``, or OpenAI's ``completion_tokens_details``); None: not said.
    reasoning_tokens: int | None = None

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def ttft(self) -> float | None:
        """Send → the first token of any kind (a thinking token included)."""
        return self.chunk_times[0] - self.start if self.chunk_times else None

    @property
    def ttfo(self) -> float | None:
        """Send → the first answer token (TTFO); None where the stream does not tell them apart
        or no answer token came."""
        return self.first_answer - self.start if self.first_answer is not None else None

    def chunk_tokens(self, per_chunk: float | None = None) -> list[float]:
        """Tokens per chunk: exact from the server's running counts, else the server's final
        count spread evenly, else (a request cancelled before its final count) ``per_chunk``."""
        cum = self.chunk_cumulative
        if cum and all(c is not None for c in cum):
            counts = [float(c) for c in cum if c is not None]
            return [c - p for c, p in zip(counts, [0.0, *counts[:-1]])]
        if not cum:
            return []
        if self.completion_tokens is None and per_chunk is not None:
            return [per_chunk] * len(cum)
        total = self.completion_tokens or 0
        return [total / len(cum)] * len(cum)

    @property
    def counted_per_chunk(self) -> bool:
        """Whether the server reported the running count with every chunk."""
        return all(c is not None for c in self.chunk_cumulative)


@dataclass
class RunRecords:
    """One measured run: N requests at concurrency C, and how the client fared."""

    concurrency: int
    records: list[RequestRecord]
    loop_lag_s: list[float]
    client_cpu_s: float
    wall_s: float
    #: Why the run was abandoned before its N requests were done (a stalled server), or None.
    aborted: str | None = None
    #: The warm-up, returned in place of the runs when it stalled (nothing was measured).
    warmup: bool = False
    #: The steady-state measurement window (``perf_counter`` open, close), or None for a run
    #: measured over its N whole requests.
    window: tuple[float, float] | None = None
    #: Open loop: the run's schedule and how it went (see :mod:`pytest_llmperf.load.open_loop`).
    open_loop: OpenLoopRun | None = None


@dataclass
class OpenLoopRun:
    """What an open-loop run was offered and how its client kept to it."""

    rate: float
    #: ``perf_counter`` of the schedule's zero, and every arrival's offset from it (seconds).
    start: float
    offsets: list[float]
    #: The pacer that woke the client ("timerfd" or "loop timer").
    pacer: str = ""
    max_concurrency: int | None = None
    #: The lead-in's length (seconds from ``start`` to the window's opening).
    lead_s: float = 0.0
    #: Why the run was stopped early as not sustainable (None: it ran its window out).
    saturated: str | None = None
