"""Metrics: pure functions from request records to per-run figures.

Definitions (peers use the same names for different things; these are ours):

- ``output_tok_s`` (the gated metric): Σ server-reported completion tokens of the run ÷ the
  run's duration, from the first request sent to the last response finished.
- ``request_tok_s``: per request, completion tokens ÷ end-to-end latency (what a
  single-stream benchmark script reports); reported as mean and percentiles over requests.
- ``ttft_s``: send → first chunk that carries at least one token (a thinking token counts).
- ``ttfo_s``: send → first chunk that carries an answer token (TTFO): the chat API's first
  ``content`` delta after a thinking model's ``reasoning_content`` ones; none where the stream
  does not tell them apart.
- ``itl_s``: per token: the gap between two token-carrying chunks ÷ the tokens in the later
  chunk, counted once per token (an EAGLE chunk of 3 tokens after 30 ms gives three 10 ms
  values). Percentiles are token-weighted.
- ``tpot_s``: (e2e − ttft) ÷ (completion tokens − 1), per request.
- ``accept_length``: Σ completion tokens ÷ Σ ``spec_verify_ct`` over the run's requests, from
  each request's final ``meta_info`` (run-scoped; never the server's lifetime average); for
  llama.cpp, whose ``timings`` count drafts, the verify steps are the tokens less
  ``draft_n_accepted``.
- ``accept_length_observed``: the client's own count, beside the engine's: Σ completion tokens
  ÷ Σ bursts, a burst being the tokens a verify step sends back to back (chunks less than a
  tenth of the request's 90th-percentile gap apart). Only where the engine reports an
  accept length, to cross-check it.
- Validity: failed requests, short token counts, and the client checks of
  :func:`client_checks`. A run with any problem is INVALID, not a slower run.

A run measured over a steady-state window (``window_s``, see
:mod:`pytest_llmperf.load.closed_loop`) keeps these definitions, with the window as the run's
duration: ``output_tok_s`` is the server-reported tokens of the chunks that arrived inside the
window ÷ its length; TTFT covers the requests sent inside the window (one cut before its first
token counts with what it waited) and ITL the token gaps that ended inside it, so both describe
the steady state, not the run's first wave; TPOT and accept length every request that
finished; e2e and request tok/s the requests that finished at the full output length; the
in-flight check is over the window.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pytest_llmperf.core.figures import FIGURES, NVML, RUN_FIGURES, figure_of
from pytest_llmperf.core.open_loop_figures import (
    arrival_latencies,
    mean_in_flight,
    open_loop_figures,
    schedule_of,
)
from pytest_llmperf.core.records import ABANDONED, RequestRecord, RunRecords
from pytest_llmperf.core.stats import (
    CERTIFIED,
    distribution,
    finite_or_none,
    weighted_percentile,
)

__all__ = [
    "LATENCY_METRICS",
    "METRICS",
    "SLO_KEYS",
    "RunMetrics",
    "figure",
    "goodput",
    "lower_is_better",
    "meets_slo",
    "accept_length",
    "achieved_concurrency",
    "client_bound_only",
    "client_checks",
    "client_gap",
    "distribution",
    "in_flight_while_sending",
    "itl",
    "output_tok_s",
    "request_problems",
    "request_tok_s",
    "run_duration",
    "summarize_run",
    "tokens_per_chunk",
    "tpot",
    "ttft",
    "weighted_percentile",
    "window_tokens",
]

#: The client kept fewer than this fraction of C requests in flight while it was sending…
MIN_IN_FLIGHT_FRACTION = 0.95
#: …and its slots sat idle longer than this between a response and the next request (below
#: it, the gap is the ordinary cost of issuing a request, not a client that fell behind).
MAX_CLIENT_GAP_S = 0.001
#: The client process used more than this fraction of one core: it set the pace.
MAX_CLIENT_CPU_FRACTION = 0.90
#: A median event-loop lag above max(this, half the median ITL) means the loop is always
#: behind: every chunk timestamp is late and the client sets the pace. (Occasional spikes,
#: which show in the p99, are the OS scheduling another process; they are reported, not failed.)
MAX_LOOP_LAG_S = 0.010


def output_tok_s(records: Sequence[RequestRecord]) -> float:
    duration = run_duration(records)
    tokens = sum(r.completion_tokens or 0 for r in records if r.error is None)
    return tokens / duration if duration > 0 else 0.0


def tokens_per_chunk(records: Sequence[RequestRecord]) -> float | None:
    """Server-reported tokens per token-carrying chunk over the finished requests: how many
    tokens a cancelled request's chunks carried when the server did not count them as it went
    (an OpenAI server without ``continuous_usage_stats``, such as llama-server)."""
    tokens = chunks = 0
    for r in records:
        if r.error is None and not r.cancelled and r.completion_tokens and r.chunk_times:
            tokens += r.completion_tokens
            chunks += len(r.chunk_times)
    return tokens / chunks if chunks else None


def window_tokens(
    records: Sequence[RequestRecord], window: tuple[float, float]
) -> tuple[float, bool]:
    """Tokens of the chunks that arrived inside ``window``, and whether any were estimated
    (a cancelled request's chunks on a server that counts only at the end)."""
    opened, closed = window
    per_chunk = tokens_per_chunk(records)
    total = 0.0
    estimated = False
    for r in records:
        if r.error is not None:
            continue
        for t, n in zip(r.chunk_times, r.chunk_tokens(per_chunk)):
            if opened <= t < closed:
                total += n
                estimated = estimated or (r.completion_tokens is None and not r.counted_per_chunk)
    return total, estimated


def window_ttfts(records: Sequence[RequestRecord], window: tuple[float, float]) -> list[float]:
    """TTFTs of the requests sent inside the window: the steady state's, not the first wave's
    (sent together at the run's start, and after a cut run into a server still aborting).
    A request cut before its first token counts with what it waited, a lower bound, rather
    than being left out (which would drop exactly the slowest)."""
    opened, closed = window
    out = []
    for r in records:
        if opened <= r.start < closed:
            first = r.ttft
            if first is not None:
                out.append(first)
            elif r.cancelled:
                out.append(r.e2e)
    return out


def window_itl(
    records: Sequence[RequestRecord], window: tuple[float, float], per_chunk: float | None
) -> tuple[list[float], list[float]]:
    """Per-token ITLs (values, token weights) of the gaps that ended inside the window."""
    opened, closed = window
    values: list[float] = []
    weights: list[float] = []
    for r in records:
        times, tokens = r.chunk_times, r.chunk_tokens(per_chunk)
        for k in range(1, len(times)):
            n = tokens[k]
            if n > 0 and opened <= times[k] < closed:
                values.append((times[k] - times[k - 1]) / n)
                weights.append(n)
    return values, weights


def run_duration(records: Sequence[RequestRecord]) -> float:
    if not records:
        return 0.0
    return max(r.end for r in records) - min(r.start for r in records)


def ttft(rec: RequestRecord) -> float | None:
    return rec.ttft


def tpot(rec: RequestRecord) -> float | None:
    first = rec.ttft
    n = rec.completion_tokens or 0
    if first is None or n < 2:
        return None
    return (rec.e2e - first) / (n - 1)


def request_tok_s(rec: RequestRecord) -> float | None:
    if not rec.completion_tokens or rec.e2e <= 0:
        return None
    return rec.completion_tokens / rec.e2e


def itl(rec: RequestRecord, per_chunk: float | None = None) -> tuple[list[float], list[float]]:
    """Per-token inter-token latencies of one request, as (values, token weights);
    ``per_chunk``: the tokens of a cut request's chunks (see RequestRecord.chunk_tokens).

    A speculative server (one that counted verify steps) may send a step's tokens as separate
    events microseconds apart (llama.cpp does): those are one burst, as SGLang's one event of
    the step's tokens is, so the step's time is shared by its tokens, not read as 0.01 ms ITLs."""
    values: list[float] = []
    weights: list[float] = []
    times, tokens = rec.chunk_times, rec.chunk_tokens(per_chunk)
    cut = burst_cut(times) if rec.spec_verify_ct else 0.0
    last, pending = (times[0], 0.0) if times else (0.0, 0.0)
    for k in range(1, len(times)):
        pending += tokens[k]
        ends_burst = k + 1 == len(times) or times[k + 1] - times[k] >= cut
        if pending > 0 and ends_burst:
            values.append((times[k] - last) / pending)
            weights.append(pending)
            last, pending = times[k], 0.0
    return values, weights


def accept_length(records: Iterable[RequestRecord]) -> float | None:
    tokens = verify = 0
    for r in records:
        if r.error is None and r.spec_verify_ct:
            tokens += r.completion_tokens or 0
            verify += r.spec_verify_ct
    return tokens / verify if verify else None


def accept_length_by(
    records: Iterable[RequestRecord], category: Callable[[int], str | None]
) -> dict[str, float] | None:
    """:func:`accept_length` per category of the requests (``category``: a request's index →
    its category); None when no request has both a category and draft counts."""
    groups: dict[str, list[RequestRecord]] = {}
    for r in records:
        name = category(r.index)
        if name is not None:
            groups.setdefault(name, []).append(r)
    out = {name: accept_length(group) for name, group in sorted(groups.items())}
    found = {name: value for name, value in out.items() if value is not None}
    return found or None


#: Chunks closer than this share of the request's 90th-percentile gap (and than BURST_FLOOR_S)
#: belong to one verify step: a step's tokens leave the server microseconds apart, steps
#: milliseconds apart (llama.cpp on 2 cores: 0.01-0.09 ms inside, about 90 ms between drafting
#: steps, 15-24 ms for a last step with nothing to draft). A server whose compute threads fill
#: the cores deschedules its HTTP thread mid-step now and then (up to 7.5 ms inside a step with
#: ``-t 2`` on 2 cores, against 1.2 ms with ``-t 1``): benchmarks/burst_count.py measures the
#: count against llama-server's own per-token step stamps.
BURST_SHARE = 0.1
BURST_FLOOR_S = 0.001


def burst_cut(times: Sequence[float]) -> float:
    """The gap below which two chunks of a request belong to one verify step."""
    import numpy as np

    if len(times) < 2:
        return 0.0
    gaps = np.diff(np.asarray(times, dtype=float))
    return max(BURST_FLOOR_S, BURST_SHARE * float(np.percentile(gaps, 90)))


def bursts(record: RequestRecord) -> int:
    """How many verify steps the request's chunks arrived in, by their gaps."""
    times = record.chunk_times
    if len(times) < 2:
        return len(times)
    cut = burst_cut(times)
    return 1 + sum(b - a >= cut for a, b in zip(times, times[1:]))


def observed_accept_length(records: Iterable[RequestRecord]) -> float | None:
    """Σ completion tokens ÷ Σ bursts over requests the engine counted verify steps for."""
    tokens = steps = 0
    for r in records:
        if r.error is None and r.spec_verify_ct and r.chunk_times:
            tokens += r.completion_tokens or 0
            steps += bursts(r)
    return tokens / steps if steps else None


def achieved_concurrency(records: Sequence[RequestRecord]) -> float:
    """Little's law over the whole run: Σ e2e ÷ duration (includes the ramp-down tail)."""
    duration = run_duration(records)
    return sum(r.e2e for r in records) / duration if duration > 0 else 0.0


def in_flight_while_sending(records: Sequence[RequestRecord], concurrency: int) -> float:
    """Mean requests in flight from the first send to the last send.

    A closed loop keeps exactly C in flight until its last request is sent; anything less is
    time the client spent between a response and the next request.
    """
    if not records:
        return 0.0
    first = min(r.start for r in records)
    last = max(r.start for r in records)
    window = last - first
    if window <= 0:
        return float(min(concurrency, len(records)))
    busy = sum(max(0.0, min(r.end, last) - max(r.start, first)) for r in records)
    return busy / window


def client_gap(records: Sequence[RequestRecord], concurrency: int) -> float:
    """Mean idle time of a slot between a response and its next request, while sending."""
    resent = len(records) - min(concurrency, len(records))
    if resent <= 0:
        return 0.0
    window = max(r.start for r in records) - min(r.start for r in records)
    idle = (
        min(concurrency, len(records)) * window
        - in_flight_while_sending(records, concurrency) * window
    )
    return max(0.0, idle) / resent


@dataclass(frozen=True)
class RunMetrics:
    """Every figure of one run, and why it is invalid if it is."""

    concurrency: int
    requests: int
    failed_requests: int
    output_tokens: int
    duration_s: float
    output_tok_s: float
    request_tok_s: dict[str, float]
    ttft_s: dict[str, float]
    itl_s: dict[str, float]
    tpot_s: dict[str, float]
    e2e_s: dict[str, float]
    accept_length: float | None
    achieved_concurrency: float
    in_flight_while_sending: float
    client_gap_s: float
    loop_lag_s: dict[str, float]
    client_cpu_fraction: float
    problems: tuple[str, ...] = field(default=())
    #: The steady-state window, for a run measured over one: when it opened (seconds after the
    #: run's first request), its length, the tokens inside it, and the requests that finished
    #: and that were cancelled at its close.
    window: dict[str, Any] | None = None
    #: Σ server-reported prompt tokens of the finished requests, and of those the tokens its
    #: prefix cache served (None: the server did not say).
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    #: Requests per second that met every SLO of the profile (None: the profile has none).
    goodput_req_s: float | None = None
    #: An open-loop run's own figures (see :mod:`pytest_llmperf.core.open_loop_figures`), and its
    #: schedule: arrival offsets in seconds from the run's start.
    open_loop: dict[str, Any] | None = None
    schedule: list[float] | None = None
    #: The client's own count of tokens per verify step, to cross-check ``accept_length``.
    accept_length_observed: float | None = None
    #: ``accept_length`` per category of the workload's requests, where its dataset names them.
    accept_length_by_category: dict[str, float] | None = None
    #: The GPUs over the run's window, where NVML is present (host/gpu_series.py): the
    #: energy it took, per output token, the tok/s each watt bought, and how a GPU was held
    #: back (power or heat) while it ran.
    energy_j: float | None = None
    energy_j_per_token: float | None = None
    tok_s_per_watt: float | None = None
    gpu_held_back: tuple[str, ...] = ()
    #: The highest share of the window's samples in which a GPU at its default power limit
    #: was at that limit (normal at full load: compared with the golden's, core/diagnosis.py).
    gpu_power_cap_share: float | None = None
    #: The server launch that measured it (a point confirmed on a fresh launch has runs of
    #: several).
    launch_id: str | None = None
    #: Time to the first answer token (TTFO), as ``ttft_s`` is to the first token of any kind:
    #: where the stream tells a thinking model's answer from its thinking (the chat API); its
    #: ``n`` is 0 where it does not.
    ttfo_s: dict[str, float] = field(default_factory=dict)
    #: Thinking tokens per finished request, and their share of its completion tokens, from the
    #: server's own counts (None: the server did not say).
    reasoning_tokens: float | None = None
    reasoning_share: float | None = None

    @property
    def sustainable(self) -> bool:
        """False for an open-loop run whose server could not keep up with the arrivals."""
        return self.open_loop is None or bool(self.open_loop.get("sustainable", True))

    @property
    def valid(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = list(self.problems)
        data["gpu_held_back"] = list(self.gpu_held_back)
        return finite_or_none(data)


def summarize_run(
    run: RunRecords,
    expected_tokens: int | None,
    slo: Mapping[str, float] | None = None,
    category: Callable[[int], str | None] | None = None,
) -> RunMetrics:
    """All metrics of one run, with its validity problems (an empty tuple when valid): over its
    whole requests, its steady-state window, or an open loop's window (from the arrivals);
    ``slo`` (e.g. ``{"ttft_s": 2.0}``) adds ``goodput_req_s``; ``category`` (a request's index →
    its category) adds the accept length per category."""
    if run.window is not None:
        figures, problems = _window_figures(run, run.window)
    else:
        figures, problems = _whole_run_figures(run)
    finished = [r for r in run.records if r.error is None and not r.cancelled]
    cached = [r.cached_tokens for r in finished if r.cached_tokens is not None]
    lag = distribution(run.loop_lag_s)
    lag["max"] = max(run.loop_lag_s, default=math.nan)
    thinking, share = reasoning(finished)
    metrics = RunMetrics(
        ttfo_s=distribution(ttfos(run, finished)),
        reasoning_tokens=thinking,
        reasoning_share=share,
        concurrency=run.concurrency,
        loop_lag_s=lag,
        client_cpu_fraction=run.client_cpu_s / run.wall_s if run.wall_s > 0 else 0.0,
        prompt_tokens=sum(r.prompt_tokens or 0 for r in finished),
        cached_tokens=sum(cached) if cached else None,
        goodput_req_s=goodput(run, slo) if slo else None,
        accept_length_by_category=accept_length_by(finished, category) if category else None,
        **figures,
    )
    # A saturated open-loop run's requests are cut unfinished on purpose: its verdict is "not
    # sustainable", not a request problem.
    problems = request_problems(run.records, expected_tokens) + client_checks(metrics) + problems
    return replace(metrics, problems=tuple(problems))


def ttfos(run: RunRecords, finished: Sequence[RequestRecord]) -> list[float]:
    """Each request's TTFO as its TTFT is counted: over the whole run, of the requests sent
    inside a window (one cut while still thinking counts with what it waited), or from the
    scheduled arrival in an open loop. Empty where no stream told answer from thinking."""
    ok = [r for r in run.records if r.error is None]
    if not any(r.first_answer is not None for r in ok):
        return []
    if run.window is None:
        return [t for t in (r.ttfo for r in finished) if t is not None]
    opened, closed = run.window
    origin = (lambda r: r.arrival) if run.open_loop is not None else (lambda r: r.start)
    out = []
    for r in ok:
        if not opened <= origin(r) < closed:
            continue
        if r.first_answer is not None:
            out.append(r.first_answer - origin(r))
        elif r.cancelled:
            out.append(r.end - origin(r))
    return out


def reasoning(finished: Sequence[RequestRecord]) -> tuple[float | None, float | None]:
    """The thinking tokens per request (their mean) and their share of the completion tokens,
    over the finished requests whose server counted them (None, None: none did)."""
    counted = [r for r in finished if r.reasoning_tokens is not None and r.completion_tokens]
    if not counted:
        return None, None
    thinking = sum(r.reasoning_tokens or 0 for r in counted)
    return thinking / len(counted), thinking / sum(r.completion_tokens or 0 for r in counted)


def _whole_run_figures(run: RunRecords) -> tuple[dict[str, Any], list[str]]:
    """A run of N whole requests: from its first send to its last response."""
    records = run.records
    ok = [r for r in records if r.error is None]
    itl_values: list[float] = []
    itl_weights: list[float] = []
    for r in ok:
        v, w = itl(r)
        itl_values += v
        itl_weights += w
    figures = {
        "requests": len(records),
        "failed_requests": len(records) - len(ok),
        "output_tokens": sum(r.completion_tokens or 0 for r in ok),
        "duration_s": run_duration(records),
        "output_tok_s": output_tok_s(records),
        "request_tok_s": distribution([t for t in map(request_tok_s, ok) if t is not None]),
        "ttft_s": distribution([t for t in map(ttft, ok) if t is not None]),
        "itl_s": distribution(itl_values, itl_weights),
        "tpot_s": distribution([t for t in map(tpot, ok) if t is not None]),
        "e2e_s": distribution([r.e2e for r in ok]),
        "accept_length": accept_length(ok),
        "accept_length_observed": observed_accept_length(ok),
        "achieved_concurrency": achieved_concurrency(records),
        "in_flight_while_sending": in_flight_while_sending(records, run.concurrency),
        "client_gap_s": client_gap(records, run.concurrency),
    }
    return figures, []


def _window_figures(
    run: RunRecords, window: tuple[float, float]
) -> tuple[dict[str, Any], list[str]]:
    """A steady-state window: a closed loop's (see the module's docstring), or an open loop's,
    whose latencies count from the scheduled arrival (core/open_loop_figures.py)."""
    records, info = run.records, run.open_loop
    sent = [r for r in records if r.start]
    ok = [r for r in sent if r.error is None]
    finished = [r for r in ok if not r.cancelled]
    itl_values, itl_weights = window_itl(ok, window, tokens_per_chunk(records))
    tokens, estimated = window_tokens(records, window)
    seconds = window[1] - window[0]
    figures: dict[str, Any]
    if info is None:
        full = [r for r in finished if not r.staggered]
        in_window = mean_in_flight(records, window)
        figures = {
            "request_tok_s": distribution([t for t in map(request_tok_s, full) if t is not None]),
            "ttft_s": distribution(window_ttfts(ok, window)),
            "e2e_s": distribution([r.e2e for r in full]),
            "achieved_concurrency": in_window,
            "in_flight_while_sending": in_window,
            "client_gap_s": client_gap(records, run.concurrency),
        }
        origin = min((r.start for r in records), default=window[0])
        problems = _estimate_problems(records) if estimated else []
    else:
        arrived = [r for r in finished if window[0] <= r.arrival < window[1]]
        ttfts, e2es = arrival_latencies(records, window)
        send_ttfts = [r.chunk_times[0] - r.start for r in ok if r.chunk_times]
        own, problems = open_loop_figures(
            run, statistics.median(send_ttfts) if send_ttfts else math.nan
        )
        figures = {
            "request_tok_s": distribution(
                [t for t in map(request_tok_s, arrived) if t is not None]
            ),
            "ttft_s": distribution(ttfts),
            "e2e_s": distribution(e2es),
            "achieved_concurrency": own["mean_backlog"],
            "in_flight_while_sending": own["mean_backlog"],
            "client_gap_s": 0.0,
            "open_loop": own,
            "schedule": schedule_of(run),
        }
        origin = info.start
    figures |= {
        "requests": len(sent),
        "failed_requests": len(sent) - len(ok),
        "output_tokens": round(tokens),
        "duration_s": seconds,
        "output_tok_s": tokens / seconds if seconds > 0 else 0.0,
        "itl_s": distribution(itl_values, itl_weights),
        "tpot_s": distribution([t for t in map(tpot, finished) if t is not None]),
        "accept_length": accept_length(finished),
        "accept_length_observed": observed_accept_length(finished),
        "window": window_summary(window, origin, tokens, estimated, ok, finished),
    }
    return figures, problems


def window_summary(
    window: tuple[float, float],
    origin: float,
    tokens: float,
    estimated: bool,
    ok: Sequence[RequestRecord],
    finished: Sequence[RequestRecord],
) -> dict[str, Any]:
    """A run's ``window``: when it opened (seconds after ``origin``), its length, its tokens,
    and the requests that finished and that were cut at its close."""
    return {
        "opened_s": window[0] - origin,
        "seconds": window[1] - window[0],
        "tokens": round(tokens),
        "tokens_estimated": estimated,
        "finished_requests": len(finished),
        "cancelled_requests": len(ok) - len(finished),
    }


def _estimate_problems(records: Sequence[RequestRecord]) -> list[str]:
    """The estimate of a cancelled request's tokens holds only if every finished request
    carried the same tokens per chunk (one per event, as llama-server streams)."""
    ratios = {
        r.completion_tokens / len(r.chunk_times)
        for r in records
        if r.error is None and not r.cancelled and r.completion_tokens and r.chunk_times
    }
    if len(ratios) <= 1:
        return []
    return [
        "the server reports token counts only at the end of a stream and its chunks carry "
        f"{min(ratios):.2f}-{max(ratios):.2f} tokens each, so the tokens of the requests cut at "
        "the window's close are unknown: ask it for per-chunk usage (continuous_usage_stats), "
        "or measure whole requests (no window_s)"
    ]


def request_problems(records: Sequence[RequestRecord], expected_tokens: int | None) -> list[str]:
    problems = []
    failed = [r for r in records if r.error is not None]
    if failed:
        # The cause, not a request abandoned because of it.
        first = next((r for r in failed if not (r.error or "").startswith(ABANDONED)), failed[0])
        problems.append(f"{len(failed)} of {len(records)} requests failed; first: {first.error}")
    wrong_prompt = [
        r
        for r in records
        if r.error is None
        and r.sent_prompt_tokens is not None
        and r.prompt_tokens is not None
        and r.prompt_tokens != r.sent_prompt_tokens
    ]
    if wrong_prompt:
        r = wrong_prompt[0]
        problems.append(
            f"{len(wrong_prompt)} of {len(records)} requests were reported with {r.prompt_tokens} "
            f"prompt tokens for the {r.sent_prompt_tokens} token ids sent: the server changed the "
            "prompt (e.g. added a BOS token), so the input length is not what was asked for"
        )
    if expected_tokens is not None:
        short = [
            r
            for r in records
            if r.error is None
            and not r.cancelled
            and r.completion_tokens != (r.requested or expected_tokens)
        ]
        if short:
            asked = short[0].requested or expected_tokens
            problems.append(
                f"{len(short)} of {len(records)} requests returned {short[0].completion_tokens} tokens instead of "
                f"{asked}: the server must honour ignore_eos and max tokens for runs to be comparable"
            )
    return problems


def client_checks(m: RunMetrics) -> list[str]:
    """Signs that the client, not the server, set the pace of the run."""
    problems = []
    c = min(m.concurrency, m.requests)
    if m.in_flight_while_sending < MIN_IN_FLIGHT_FRACTION * c and m.client_gap_s > MAX_CLIENT_GAP_S:
        problems.append(
            f"client-bound: only {m.in_flight_while_sending:.1f} of C={c} requests were in flight on average "
            f"while the client was sending (needs >= {MIN_IN_FLIGHT_FRACTION:.0%}); each slot waited "
            f"{m.client_gap_s * 1e3:.1f} ms between a response and its next request"
        )
    if m.client_cpu_fraction > MAX_CLIENT_CPU_FRACTION:
        problems.append(
            f"client-bound: the load generator used {m.client_cpu_fraction:.0%} of a CPU core "
            f"(limit {MAX_CLIENT_CPU_FRACTION:.0%}); its timings are its own, not the server's"
        )
    lag_limit = (
        max(MAX_LOOP_LAG_S, 0.5 * m.itl_s["p50"])
        if math.isfinite(m.itl_s["p50"])
        else MAX_LOOP_LAG_S
    )
    if m.loop_lag_s["p50"] > lag_limit:
        problems.append(
            f"client-bound: the event loop ran {m.loop_lag_s['p50'] * 1e3:.1f} ms late at the median "
            f"(limit {lag_limit * 1e3:.1f} ms); chunk timestamps are late by that much"
        )
    return problems


def client_bound_only(run: RunMetrics) -> bool:
    """The run's only problems are its client's: nothing the server did made it INVALID."""
    return bool(run.problems) and all(p.startswith("client-bound") for p in run.problems)


#: SLO keys of a profile's ``slo`` table, each judged per request.
SLO_KEYS = ("ttft_s", "itl_s", "tpot_s", "e2e_s")


def meets_slo(rec: RequestRecord, slo: Mapping[str, float], per_chunk: float | None = None) -> bool:
    """Whether one finished request met every limit: its TTFT, its 99th-percentile per-token
    ITL (at most 1 % of its tokens later than ``itl_s``), its TPOT, its e2e latency; in an open
    loop TTFT and e2e count from the scheduled arrival, as the user waits."""
    origin = rec.arrival or rec.start
    first = rec.chunk_times[0] - origin if rec.chunk_times else None
    if "ttft_s" in slo and (first is None or first > slo["ttft_s"]):
        return False
    if "itl_s" in slo:
        values, weights = itl(rec, per_chunk)
        if values and weighted_percentile(values, weights, 99) > slo["itl_s"]:
            return False
    if "tpot_s" in slo:
        t = tpot(rec)
        if t is not None and t > slo["tpot_s"]:
            return False
    return not ("e2e_s" in slo and rec.end - origin > slo["e2e_s"])


def goodput(run: RunRecords, slo: Mapping[str, float]) -> float:
    """Requests per second that finished and met every SLO: over the run's duration, or over
    its steady-state window (the requests that finished inside it)."""
    finished = [r for r in run.records if r.error is None and not r.cancelled]
    per_chunk = tokens_per_chunk(run.records)
    if run.window is not None:
        opened, closed = run.window
        finished = [r for r in finished if opened <= r.end < closed]
        seconds = closed - opened
    else:
        seconds = run_duration(run.records)
    good = sum(meets_slo(r, slo, per_chunk) for r in finished)
    return good / seconds if seconds > 0 else 0.0


#: Latency figures a check can gate (lower is better): ``ttft_p99_s`` is a run's TTFT p99.
LATENCY_METRICS = tuple(n for n in RUN_FIGURES if n.endswith(("_p50_s", "_p90_s", "_p99_s")))
#: Figures of the GPUs over a run's window (host/gpu_series.py), where NVML is present.
ENERGY_METRICS = tuple(n for n in RUN_FIGURES if FIGURES[n].needs == NVML)
#: Every per-run figure a check can gate (core/figures.py says which way is better).
METRICS = RUN_FIGURES


def lower_is_better(metric: str) -> bool:
    return figure_of(metric).lower_is_better


def too_few_samples(run: RunMetrics, metric: str) -> int | None:
    """For a latency percentile: the run's number of values when too few to certify it (a
    gate needs core/stats.py's CERTIFIED floor), else None."""
    if metric not in LATENCY_METRICS:
        return None
    name, q, _ = metric.split("_")
    n = getattr(run, f"{name}_s").get("n", 0)
    return n if n < CERTIFIED[q] else None


def figure(run: RunMetrics, metric: str) -> float:
    """One run's value of ``metric`` (NaN when the run has none, e.g. goodput without an SLO)."""
    return FIGURES[metric].of(run)
