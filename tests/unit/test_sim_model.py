import random
import statistics

import pytest

from pytest_llmperf.sim.model import (
    REFERENCE_BASELINE_C1,
    REFERENCE_BASELINE_SATURATED,
    REFERENCE_EAGLE3_C1,
    REFERENCE_EAGLE3_SATURATED,
    SPEC_MAX_RUNNING_REQUESTS,
    CostModel,
    Speculation,
    expected_tok_s,
)


def test_default_model_reproduces_the_seed_figures_times_the_speed_factor():
    model = CostModel(speed=10)
    spec = Speculation()
    assert expected_tok_s(model, 1) == pytest.approx(10 * REFERENCE_BASELINE_C1, rel=1e-9)
    assert expected_tok_s(model, 250) == pytest.approx(10 * REFERENCE_BASELINE_SATURATED, rel=1e-9)
    assert expected_tok_s(model, 1, spec) == pytest.approx(10 * REFERENCE_EAGLE3_C1, rel=1e-9)
    # Beyond 48 running requests a speculative server queues: saturation is the batch of 48.
    assert expected_tok_s(model, SPEC_MAX_RUNNING_REQUESTS, spec) == pytest.approx(
        10 * REFERENCE_EAGLE3_SATURATED, rel=1e-9
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


@pytest.mark.parametrize(
    ("version", "verify_ct", "keys"),
    [
        ("0.5.6", 0, {"spec_accept_rate", "spec_accept_length", "spec_verify_ct"}),
        ("0.5.6", 5, {"spec_accept_rate", "spec_accept_length", "spec_verify_ct", "spec_accept_token_num",
                      "spec_draft_token_num"}),
        ("0.5.19", 0, set()),
        ("0.5.19", 5, {"spec_accept_rate", "spec_accept_length", "spec_verify_ct", "spec_num_correct_drafts",
                       "spec_num_proposed_drafts", "spec_accepted_drafts", "spec_proposed_drafts"}),
        ("0.5.23", 5, {"spec_accept_rate", "spec_accept_length", "spec_verify_ct", "spec_num_correct_drafts",
                       "spec_num_proposed_drafts"}),
    ],
)  # fmt: skip
def test_the_final_events_spec_keys_are_those_of_the_release_impersonated(version, verify_ct, keys):
    from pytest_llmperf.sim.engine import SimRequest
    from pytest_llmperf.sim.flags import parse_args
    from pytest_llmperf.sim.server import SimServer

    flags = [
        "--model-path",
        "m",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-draft-tokens",
        "4",
    ]
    server = SimServer(*parse_args([*flags, "--sim-report-version", version]))
    req = SimRequest(rid="r", prompt_tokens=8, target_tokens=16, stopped_by_eos=False, received=0.0)
    req.generated, req.verify_ct, req.accepted_drafts = 11, verify_ct, 6
    meta = server.spec_meta(req)
    assert set(meta) == keys
    if verify_ct:
        assert meta["spec_verify_ct"] == 5 and meta["spec_accept_length"] == 11 / 5
