"""Metric definitions on hand-computed records (times in seconds)."""

import math

import pytest

from pytest_llmperf.core import metrics
from pytest_llmperf.core.records import RequestRecord, RunRecords


def record(index, start, chunks, *, tokens=None, spec_verify_ct=None, error=None, end=None):
    """chunks: [(time, cumulative tokens)]; end defaults to the last chunk."""
    rec = RequestRecord(index, start=start)
    rec.chunk_times = [t for t, _ in chunks]
    rec.chunk_cumulative = [c for _, c in chunks]
    rec.end = end if end is not None else (chunks[-1][0] if chunks else start)
    rec.completion_tokens = tokens if tokens is not None else (chunks[-1][1] if chunks else 0)
    rec.spec_verify_ct = spec_verify_ct
    rec.error = error
    return rec


def test_output_tok_s_is_tokens_over_first_send_to_last_finish():
    a = record(0, 0.0, [(0.1, 1), (0.2, 2), (1.0, 10)])
    b = record(1, 0.5, [(0.7, 4), (2.0, 10)])
    assert metrics.run_duration([a, b]) == 2.0
    assert metrics.output_tok_s([a, b]) == pytest.approx(20 / 2.0)


def test_failed_requests_add_no_tokens_but_stay_in_the_window():
    ok = record(0, 0.0, [(1.0, 10)])
    failed = record(1, 0.0, [(0.5, 3)], error="boom", end=4.0)
    assert metrics.output_tok_s([ok, failed]) == pytest.approx(10 / 4.0)


def test_itl_is_per_token_for_multi_token_chunks():
    # chunks of 1, 3 and 2 tokens: gaps 0.030 s (3 tokens) and 0.010 s (2 tokens)
    rec = record(0, 0.0, [(0.100, 1), (0.130, 4), (0.140, 6)])
    values, weights = metrics.itl(rec)
    assert values == pytest.approx([0.010, 0.005])
    assert weights == [3, 2]
    dist = metrics.distribution(values, weights)
    assert dist["mean"] == pytest.approx((0.010 * 3 + 0.005 * 2) / 5)
    assert dist["p50"] == pytest.approx(0.010)  # three of the five tokens waited 10 ms


def test_itl_spreads_evenly_when_the_server_gives_no_per_chunk_counts():
    rec = record(0, 0.0, [(0.1, None), (0.3, None), (0.5, None)], tokens=9)
    assert rec.chunk_tokens() == [3.0, 3.0, 3.0]
    values, weights = metrics.itl(rec)
    assert values == pytest.approx([0.2 / 3, 0.2 / 3])
    assert weights == [3.0, 3.0]


def test_ttft_tpot_and_request_tok_s():
    rec = record(0, 1.0, [(1.2, 1), (1.3, 2), (2.0, 11)])
    assert metrics.ttft(rec) == pytest.approx(0.2)
    assert metrics.tpot(rec) == pytest.approx((1.0 - 0.2) / 10)
    assert metrics.request_tok_s(rec) == pytest.approx(11 / 1.0)
    assert metrics.tpot(record(0, 0.0, [(0.1, 1)])) is None


def test_accept_length_is_scoped_to_the_run():
    a = record(0, 0.0, [(1.0, 100)], spec_verify_ct=40)
    b = record(1, 0.0, [(1.0, 100)], spec_verify_ct=60)
    failed = record(2, 0.0, [(1.0, 100)], spec_verify_ct=1, error="x")
    assert metrics.accept_length([a, b, failed]) == pytest.approx(200 / 100)
    assert metrics.accept_length([record(0, 0.0, [(1.0, 5)])]) is None


def test_accept_length_by_category_counts_each_categorys_requests_alone():
    code = [record(k, 0.0, [(1.0, 100)], spec_verify_ct=25) for k in (0, 2)]  # 4.0 a step
    chat = record(1, 0.0, [(1.0, 100)], spec_verify_ct=50)  # 2.0 a step
    plain = record(3, 0.0, [(1.0, 100)])  # answered without draft counts
    category = {0: "code", 1: "chat", 2: "code", 3: "chat"}.get
    assert metrics.accept_length_by([*code, chat, plain], category) == {"chat": 2.0, "code": 4.0}
    assert metrics.accept_length_by([plain], category) is None
    assert metrics.accept_length_by([chat], lambda i: None) is None


def test_in_flight_while_sending_measures_client_gaps():
    # C=2; request 2 is sent 0.1 s after request 0 ended: the loop lost 0.1 s of one slot.
    reqs = [record(0, 0.0, [(1.0, 1)]), record(1, 0.0, [(2.0, 1)]), record(2, 1.1, [(3.0, 1)])]
    # window 0 .. 1.1: slot A busy 1.0, slot B busy 1.1 → 2.1 / 1.1
    assert metrics.in_flight_while_sending(reqs, 2) == pytest.approx(2.1 / 1.1)
    assert metrics.achieved_concurrency(reqs) == pytest.approx((1.0 + 2.0 + 1.9) / 3.0)
    # 2 slots x 1.1 s - 2.1 busy = 0.1 s idle, over the one request sent after the first wave
    assert metrics.client_gap(reqs, 2) == pytest.approx(0.1)


def test_weighted_percentile():
    assert metrics.weighted_percentile([1, 2, 3], [1, 1, 8], 50) == 3
    assert metrics.weighted_percentile([1, 2, 3], None, 50) == 2
    assert math.isnan(metrics.weighted_percentile([], None, 50))


def run_of(records, concurrency, *, lags=(0.0001,), cpu=0.1, wall=1.0):
    return RunRecords(concurrency, records, list(lags), cpu * wall, wall)


def test_summarize_valid_run():
    recs = [record(i, 0.0, [(0.1, 1), (0.2, 2), (0.5, 4)]) for i in range(2)]
    m = metrics.summarize_run(run_of(recs, 2), expected_tokens=4)
    assert m.valid and m.output_tokens == 8 and m.output_tok_s == pytest.approx(16)
    assert m.ttft_s["p50"] == pytest.approx(0.1)
    assert m.to_json()["accept_length"] is None


def test_failed_and_short_requests_make_the_run_invalid():
    recs = [
        record(0, 0.0, [(0.5, 4)]),
        record(1, 0.0, [(0.5, 3)]),
        record(2, 0.0, [], error="HTTP 500: x", end=0.5),
    ]
    m = metrics.summarize_run(run_of(recs, 3), expected_tokens=4)
    assert not m.valid
    assert any("1 of 3 requests failed; first: HTTP 500: x" in p for p in m.problems)
    assert any("1 of 3 requests returned 3 tokens instead of 4" in p for p in m.problems)


def test_client_checks_flag_a_client_that_set_the_pace():
    # Slot A's response ends at 1.0 but its next request leaves only at 1.5.
    recs = [record(0, 0.0, [(1.0, 4)]), record(1, 0.0, [(2.0, 4)]), record(2, 1.5, [(2.0, 4)])]
    busy = metrics.summarize_run(run_of(recs, 2, cpu=0.97, lags=[0.030] * 10), expected_tokens=4)
    text = "\n".join(busy.problems)
    assert "only 1.7 of C=2 requests were in flight" in text and "each slot waited 500.0 ms" in text
    assert "used 97% of a CPU core" in text
    assert "event loop ran 30.0 ms late at the median" in text
    # Losing 5 % of a slot to a 0.5 ms per-request cost is not a client that fell behind.
    quick = [
        record(0, 0.0, [(0.010, 4)]),
        record(1, 0.0, [(0.010, 4)]),
        record(2, 0.0105, [(0.020, 4)]),
    ]
    assert metrics.summarize_run(run_of(quick, 2), expected_tokens=4).valid
    calm = metrics.summarize_run(
        run_of(recs[:2], 2, cpu=0.5, lags=[0.001] * 98 + [0.08, 0.09]), expected_tokens=4
    )
    assert calm.valid, calm.problems  # rare lag spikes are the OS, not the client


def llama_bursts(steps, per_step, gap=0.09, inside=0.00002):
    """A llama.cpp speculative stream: the first token alone, then ``steps`` steps of
    ``per_step`` tokens each sent as its own event, ``inside`` apart, steps ``gap`` apart."""
    chunks, t, n = [(0.1, 1)], 0.1, 1
    for _ in range(steps):
        t += gap
        for k in range(per_step):
            n += 1
            chunks.append((t + k * inside, n))
        t += (per_step - 1) * inside
    return chunks


def test_a_steps_tokens_sent_as_separate_events_are_one_burst():
    chunks = llama_bursts(steps=12, per_step=5)
    rec = record(0, 0.0, chunks, spec_verify_ct=13)  # the engine: 61 tokens − 48 accepted
    assert metrics.bursts(rec) == 13
    values, weights = metrics.itl(rec)
    # Each step's 90 ms shared by its 5 tokens: 18 ms, not 0.02 ms.
    assert weights == [5] * 12 and values == pytest.approx([0.09 / 5] * 12, rel=0.01)
    assert metrics.observed_accept_length([rec]) == pytest.approx(61 / 13)
    # Without the engine's count the chunks are read as they came (and nothing is observed).
    plain = record(0, 0.0, chunks)
    assert len(metrics.itl(plain)[0]) == 60
    assert metrics.observed_accept_length([plain]) is None


def test_evenly_paced_chunks_of_a_speculative_server_are_each_a_step():
    """SGLang's one event per step: nothing merges, and the ITL is as it was."""
    rec = record(0, 0.0, [(0.1, 1), (0.13, 4), (0.16, 6), (0.19, 9)], spec_verify_ct=4)
    assert metrics.bursts(rec) == 4
    assert metrics.itl(rec)[0] == pytest.approx([0.01, 0.015, 0.01])


def test_llama_cpp_draft_counts_become_the_verify_steps():
    """The final event of llama-server's /v1/completions stream, as the real one sent it with a
    draft model (captured here): 64 tokens, 50 drafts accepted, so 14 verify steps."""
    from pytest_llmperf.load.streams import OpenAIStream

    final = (
        b'{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],'
        b'"object":"text_completion","usage":{"completion_tokens":64,"prompt_tokens":6,'
        b'"total_tokens":70},"timings":{"predicted_n":64,"draft_n":50,"draft_n_accepted":50}}'
    )
    stream = OpenAIStream()
    stream.event(b'{"choices":[{"text":"The","index":0,"finish_reason":null}]}')
    stream.event(final)
    rec = RequestRecord(0)
    stream.finish(rec)
    assert (rec.completion_tokens, rec.spec_verify_ct) == (64, 14)
    plain = OpenAIStream()  # no draft model: timings without draft counts
    plain.event(final.replace(b',"draft_n":50,"draft_n_accepted":50', b""))
    plain.finish(rec := RequestRecord(1))
    assert rec.spec_verify_ct is None


def test_a_thinking_models_chat_stream_times_the_first_token_and_the_first_answer_token():
    """SGLang 0.5.23's chat stream with --reasoning-parser, as its sse_utils builds the chunks
    (StreamDelta: ``reasoning_content`` always serialized, null on answer deltas): thinking
    deltas carry tokens (TTFT, ITL) but only a ``content`` delta starts the answer (TTFO);
    ``usage.reasoning_tokens`` is the server's count of the thinking ones."""
    from pytest_llmperf.load.streams import OpenAIStream

    role = b'{"choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""}}]}'
    think = (
        b'{"choices":[{"index":0,"delta":{"reasoning_content":" Let me"},"finish_reason":null}]}'
    )
    answer = b'{"choices":[{"index":0,"delta":{"reasoning_content":null,"content":" 42"}}]}'
    usage = (
        b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":30,"total_tokens":39,'
        b'"reasoning_tokens":24,"completion_tokens_details":{"reasoning_tokens":24}}}'
    )
    stream = OpenAIStream()
    assert stream.event(role) is False and not stream.answered  # no token, no answer
    assert stream.event(think) is True and not stream.answered  # a token, still thinking
    assert stream.event(answer) is True and stream.answered
    stream.event(usage)
    stream.finish(rec := RequestRecord(0))
    assert (rec.completion_tokens, rec.reasoning_tokens) == (30, 24)
    # A thinking delta whose text quotes "content": the key is told by its own quotes.
    quoted = OpenAIStream()
    quoted.event(b'{"choices":[{"delta":{"reasoning_content":"the \\"content\\": key"}}]}')
    assert not quoted.answered
    # /v1/completions' text deltas cannot tell answer from thinking: no TTFO.
    text = OpenAIStream()
    text.event(b'{"choices":[{"text":" 42","index":0,"finish_reason":null}]}')
    assert not text.answered


def test_ttfo_counts_from_the_send_to_the_first_answer_chunk_and_itl_covers_every_token():
    think = [RequestRecord(k, start=0.0, end=1.0) for k in range(2)]
    for k, rec in enumerate(think):
        rec.chunk_times = [0.1, 0.2, 0.3, 0.5 + k * 0.1, 0.6 + k * 0.1]
        rec.chunk_cumulative = [1, 2, 3, 4, 5]
        rec.first_answer = 0.5 + k * 0.1  # after three thinking chunks
        rec.completion_tokens, rec.reasoning_tokens = 5, 3
    run = RunRecords(2, think, [0.0], 0.01, 1.0)
    m = metrics.summarize_run(run, None)
    assert m.ttft_s["p50"] == pytest.approx(0.1)
    assert m.ttfo_s["n"] == 2 and m.ttfo_s["mean"] == pytest.approx(0.55)
    assert m.itl_s["n"] == 8  # every token after the first, thinking ones included
    assert (m.reasoning_tokens, m.reasoning_share) == (3.0, pytest.approx(0.6))
    for rec in think:  # a stream that does not tell them apart
        rec.first_answer, rec.reasoning_tokens = None, None
    m = metrics.summarize_run(RunRecords(2, think, [0.0], 0.01, 1.0), None)
    assert m.ttfo_s["n"] == 0 and m.reasoning_tokens is None
