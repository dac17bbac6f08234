"""Capacity under the SLO: the highest arrival rate at which each profile still meets its
``slo`` limits (TTFT and e2e from the arrival, ITL, TPOT) at its ``slo_percentile``.

The headline figure of a capacity plan, and for speculative decoding the fair comparison: at
equal arrival rate, up to which rate does EAGLE-3 keep latency within the SLO? Select it alone
with ``-k capacity``. Gated against its golden like throughput: lower is worse.
"""


def test_capacity(llmperf, llm_profile):
    """Bracket on log-rate from the profile's highest request_rate, then bisect; each probe is
    decided by a significance test of its runs' percentiles against the limits."""
    point = llmperf.capacity()
    llmperf.check_capacity(point)
