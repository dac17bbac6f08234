"""Repository-level pytest configuration.

Running from a fresh clone without installing the plugin would silently collect no server
fixtures; say how to fix that instead.
"""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("llmperf"):
        raise pytest.UsageError(
            "pytest-llmperf is not installed in this environment: run `pip install -e .` from the repository root."
        )
