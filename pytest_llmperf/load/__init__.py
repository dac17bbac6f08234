"""Load generation: the closed loop, its HTTP transport, worker processes, prompts and streams.

This layer speaks HTTP to a server and produces :class:`~pytest_llmperf.core.records.RunRecords`;
it knows nothing of pytest, goldens or verdicts.
"""
