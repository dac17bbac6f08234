import random
import statistics

import pytest

from pytest_llmperf.sim.model import (
    SEED_BASELINE_C1,
    SEED_BASELINE_SATURATED,
    SEED_EAGLE3_C1,
    SEED_EAGLE3_SATURATED,
    SPEC_MAX_RUNNING_REQUESTS,
    CostModel,
    Speculation,
    expected_tok_s,
)


def test_default_model_reproduces_the_seed_figures_times_the_speed_factor():
    model = CostModel(speed=10)
    spec = Speculation()
    assert expected_tok_s(model, 1) == pytest.approx(10 * SEED_BASELINE_C1, rel=1e-9)
    assert expected_tok_s(model, 250) == pytest.approx(10 * SEED_BASELINE_SATURATED, rel=1e-9)
    assert expected_tok_s(model, 1, spec) == pytest.approx(10 * SEED_EAGLE3_C1, rel=1e-9)
    # Beyond 48 running requests a speculative server queues: saturation is the batch of 48.
    assert expected_tok_s(model, SPEC_MAX_RUNNING_REQUESTS, spec) == pytest.approx(
        10 * SEED_EAGLE3_SATURATED, rel=1e-9
    )


def test_speculation_leads_at_one_stream_and_trails_under_load():
    model, spec = CostModel(), Speculation()
    assert expected_tok_s(model, 1, spec) > expected_tok_s(model, 1)
    assert expected_tok_s(model, 48, spec) < 0.5 * expected_tok_s(model, 250)


def test_throughput_multiplier_scales_every_step():
    slow = CostModel(throughput_multiplier=0.7)
    assert expected_tok_s(slow, 30) == pytest.approx(0.7 * expected_tok_s(CostModel(), 30))


@pytest.mark.parametrize("accept_length", [1.5, 2.1, 3.2])
def test_sampled_tokens_per_step_have_the_configured_mean(accept_length):
    spec = Speculation(num_steps=3, accept_length=accept_length)
    p = spec.accept_probability
    assert sum(p**k for k in range(4)) == pytest.approx(accept_length, abs=1e-9)  # 1 + p + p² + p³
    rng = random.Random(7)
    samples = [spec.sample_tokens(rng, p) for _ in range(40000)]
    assert statistics.fmean(samples) == pytest.approx(accept_length, rel=0.02)
    assert min(samples) == 1 and max(samples) == 4
