"""Against a server whose pacing is known exactly, the figures match the truth.

The paced server writes event j of every request at arrival + j·ITL, each with k tokens, so a
request of L tokens lasts exactly ceil(L/k)·ITL and a closed loop at C yields
C·L / (ceil(L/k)·ITL) tok/s (less only the client's gap between requests).
"""

import math

import pytest

from pytest_llmperf.core import metrics
from pytest_llmperf.load.level import ClosedPlan
from pytest_llmperf.load.workers import measure
from pytest_llmperf.load.workload import Workload
from tests.helpers import start_paced

ITL_MS = 20.0
OUTPUT_LEN = 24


@pytest.fixture(scope="module", params=[1, 3], ids=["1-token-chunks", "3-token-chunks"])
def paced(request):
    server = start_paced(ITL_MS, tokens_per_chunk=request.param)
    server.tokens_per_chunk = request.param
    yield server
    server.stop()


@pytest.mark.parametrize("api", ["sglang", "openai"])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_output_tok_s_within_5_percent_of_truth(paced, api, concurrency):
    k = paced.tokens_per_chunk
    request_s = math.ceil(OUTPUT_LEN / k) * ITL_MS / 1000
    truth = concurrency * OUTPUT_LEN / request_s
    run = measure(
        paced.url,
        Workload(api=api, output_len=OUTPUT_LEN),
        ClosedPlan(concurrency, 8 * concurrency, 1),
    )[0]
    m = metrics.summarize_run(run, expected_tokens=OUTPUT_LEN)
    assert m.valid, m.problems
    assert m.output_tok_s == pytest.approx(truth, rel=0.05)
    assert m.ttft_s["p50"] == pytest.approx(ITL_MS / 1000, abs=0.008)  # first event after one ITL
    # ITL is per token: a k-token chunk every 20 ms is 20/k ms per token.
    assert m.itl_s["p50"] == pytest.approx(ITL_MS / 1000 / k, rel=0.15)
    assert m.tpot_s["mean"] == pytest.approx(
        (request_s - ITL_MS / 1000) / (OUTPUT_LEN - 1), rel=0.1
    )
