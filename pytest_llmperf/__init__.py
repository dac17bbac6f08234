"""pytest-llmperf: LLM-serving throughput as a regression-tested pytest gate.

Importing this package is cheap: the plugin, the load generator and the simulated
engine live in submodules and pull in httpx, aiohttp or scipy only when used.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
