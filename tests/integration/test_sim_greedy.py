"""The simulated engine's greedy answers are prefix-consistent, as a model's at temperature 0
are: asked again with a prompt it answered with log-probabilities followed by the start of its
own answer, it goes on as it went on (greedy parity's continuation past a near-tie relies on
it, core/parity.py), with the same log-probabilities and the same place to stop."""

from __future__ import annotations

from pytest_llmperf.load.greedy import greedy_outputs

PROMPT = "Explain in simple terms how a refrigerator keeps food cold."


def test_a_prompt_extended_by_the_start_of_its_answer_continues_it(sim_server):
    (whole,) = greedy_outputs(sim_server.url, "sglang", [PROMPT], 32)
    prefix = PROMPT + "".join(whole.texts[:10])
    (rest,) = greedy_outputs(sim_server.url, "sglang", [prefix], 22)
    assert rest.tokens == whole.tokens[10:] and rest.texts == whole.texts[10:]
    assert rest.gaps == whole.gaps[10:] and rest.runner_up == whole.runner_up[10:]
    # Without its length cap, the continuation stops where the whole answer stops (its EOS).
    (free,) = greedy_outputs(sim_server.url, "sglang", [PROMPT], 4096)
    (free_rest,) = greedy_outputs(
        sim_server.url, "sglang", [PROMPT + "".join(free.texts[:5])], 4096
    )
    assert free.finish == free_rest.finish == "stop"
    assert free_rest.tokens == free.tokens[5:]
    # Text that is not the start of the answer is a new prompt, answered afresh.
    (other,) = greedy_outputs(sim_server.url, "sglang", [PROMPT + " and ice"], 22)
    assert other.tokens != whole.tokens[2:24]
