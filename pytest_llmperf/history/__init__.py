"""The history of a suite's runs (``--perf-history STORE``): the store, what a run writes to
it, the change points and drift of each point's series, and what the CLI shows of it.

Nothing here is imported unless a store is named (or ``python -m pytest_llmperf history`` runs).
"""

#: The formats ``history STORE --export FORMAT FILE`` writes (history/export.py).
EXPORT_FORMATS = ("otava", "bmf", "github-action-benchmark")
