"""The server's own counters, read from Prometheus /metrics as SGLang and llama-server write it
(metric names checked against SGLang 0.5.23's metrics_collector.py and llama.cpp's server)."""

from __future__ import annotations

import pytest

from pytest_llmperf.servers.metrics import delta, parse

SGLANG = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"}} {prompt}
sglang:prompt_tokens_total{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="1"}} {prompt}
sglang:generation_tokens_total{{engine_type="unified",model_name="m"}} {gen}
sglang:cached_tokens_total{{engine_type="unified",model_name="m"}} {cached}
sglang:num_requests_total{{engine_type="unified",model_name="m"}} {req}
sglang:queue_time_seconds_sum{{engine_type="unified",model_name="m"}} {qsum}
sglang:queue_time_seconds_count{{engine_type="unified",model_name="m"}} {qcount}
sglang:queue_time_seconds_bucket{{le="0.1",engine_type="unified",model_name="m"}} 3.0
sglang:token_usage{{engine_type="unified",model_name="m",tp_rank="0"}} {usage}
sglang:spec_accept_length{{engine_type="unified",model_name="m",tp_rank="0"}} NaN
"""

LLAMA = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
llamacpp:tokens_predicted_total {gen}
llamacpp:requests_processing 2
"""


def sglang(**values):
    return SGLANG.format(**values)


def test_sglang_counters_are_summed_over_ranks_and_read_as_a_run_scoped_change():
    before = parse(sglang(prompt=100, gen=50, cached=10, req=5, qsum=0.5, qcount=5, usage=0.1))
    after = parse(sglang(prompt=600, gen=4050, cached=260, req=45, qsum=2.5, qcount=45, usage=0.42))
    assert before["prompt_tokens"] == 200  # two TP ranks
    change = delta(before, after)
    assert change["prompt_tokens"] == 1000 and change["generated_tokens"] == 4000
    assert change["requests"] == 40 and change["cached_tokens"] == 250
    assert change["queue_time_mean_s"] == pytest.approx(2.0 / 40)
    assert change["prefix_cache_hit_fraction"] == pytest.approx(0.25)
    assert change["kv_cache_usage"] == 0.42  # a gauge: its value at the end
    assert "spec_accept_length" not in change  # NaN (no speculation) is left out


def test_a_counter_that_went_down_means_a_restart_and_is_left_out():
    before = parse(LLAMA.format(prompt=5000, gen=9000))
    after = parse(LLAMA.format(prompt=300, gen=12000))
    assert delta(before, after) == {"generated_tokens": 3000}


def test_a_page_with_nothing_known_reads_as_nothing():
    assert parse("# just comments\nsome_other_metric 1\n") == {}
