"""Speed counts only when the output is right: greedy parity of a speculative profile with its
base, in the same run.

Each profile answers the first ``parity_prompts`` built-in prompts at temperature 0, one at a
time, with the top two candidates' log-probabilities; then every speculative profile selected
with its base is compared token by token. A divergence where the base's top two candidates were
within ``parity_tie_gap`` is a floating-point near-tie, reported and excused; any other FAILs
the pair: the speculative server answers differently, not only faster (docs/how-to/quality.md).

Accuracy: each profile answers its task set (exact answers, the last number of the response),
gated against its golden's own items; a speculative profile against its base's items in the run.
"""


def test_greedy_outputs(llmperf):
    """Keep this profile's greedy continuations for the parity check (seconds of server time)."""
    outputs = llmperf.greedy()
    assert all(o.tokens for o in outputs), "a prompt got an empty continuation"


def test_greedy_parity(llmperf_parity):
    """The speculative profile's continuations against its base's: identical, or a near-tie;
    and its accuracy on the same items as the base's (McNemar), when test_accuracy ran."""
    llmperf_parity.check(of="test_greedy_outputs")


def test_accuracy(llmperf):
    """The profile's accuracy on its task set (``accuracy_tasks``, else the built-in arithmetic
    set), each item at temperature 0, gated against its golden's own items; beside its base, a
    speculative profile's items are compared with the base's in test_greedy_parity."""
    llmperf.check_accuracy(llmperf.accuracy())
