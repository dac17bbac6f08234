"""Prefill-heavy load: long prompts, short answers.

The throughput suite's short prompts leave prefill out of the picture; here every request sends
2,048 prompt tokens (token ids of that exact length, none shared, so the prefix cache serves
nothing) and asks for 64, so a slower prefill (a chunked-prefill change, an attention backend's
prefill kernel, a KV-cache change) shows in TTFT and in tok/s.
"""

import pytest

INPUT_LEN = 2048
OUTPUT_LEN = 64


@pytest.mark.llmperf(concurrency=[1, 10, 70])
def test_prefill_heavy(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency, input_len=INPUT_LEN, output_len=OUTPUT_LEN)
    llmperf.check(point)
    llmperf.check(point, metric="ttft_p50_s")
