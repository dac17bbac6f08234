"""The adaptive-speculation advice, checked by SGLang's own routing rule for every batch size."""

from __future__ import annotations

import pytest

from pytest_llmperf.core import adaptive_spec
from pytest_llmperf.core.adaptive_spec import capture_sizes, cutoff_config, padded, route


def test_capture_sizes_are_sglangs_speculative_ones():
    sizes = capture_sizes(256)
    assert sizes[:8] == list(range(1, 9)) and sizes[8:20] == list(range(10, 33, 2))
    assert sizes[20:27] == list(range(40, 65, 4)) and sizes[27:] == list(range(72, 257, 8))
    # The max is always captured
    assert capture_sizes(128)[-1] == 128 and capture_sizes(100)[-1] == 100


@pytest.mark.parametrize("max_bs", [256, 128])
@pytest.mark.parametrize("cutoff", [1, 5, 70, 100])
def test_speculation_up_to_the_cutoff_and_none_beyond_its_padded_size(cutoff, max_bs):
    config = cutoff_config(cutoff, num_steps=3, max_bs=max_bs)
    sizes = capture_sizes(max_bs)

    def speculates(batch: int) -> bool:
        return config[route(batch, config, sizes)]["candidate_steps"] != [0]

    for batch in range(1, 257):
        assert speculates(batch) is (padded(batch, sizes) <= padded(cutoff, sizes)), batch
    assert all(speculates(b) for b in range(1, cutoff + 1))
    off = adaptive_spec.first_batch_without_speculation(cutoff, max_bs)
    assert not any(speculates(b) for b in range(off, 257)) and speculates(off - 1)
    assert config["1"]["candidate_steps"] == [3]  # the measured configuration's draft steps


@pytest.mark.parametrize(("cutoff", "first_off"), [(1, 2), (5, 6), (70, 73), (100, 105)])
def test_the_granularity_is_the_capture_size(cutoff, first_off):
    assert adaptive_spec.first_batch_without_speculation(cutoff) == first_off


def test_a_config_with_only_the_no_speculation_bucket_turns_speculation_off_everywhere():
    """What the advice used to say: SGLang takes the smallest bucket when no key is small enough."""
    only_off = {"2": {"candidate_steps": [0]}}
    assert route(1, only_off, capture_sizes()) == "2"
