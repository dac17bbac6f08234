"""Errors and warnings raised by pytest-llmperf.

LLMPerfError
├── ProfileError          a profiles file or one of its fields is wrong
└── ServerError           a server could not be started, answered wrongly or died
    ├── ServerStartError  exited or timed out while loading (carries the log tail)
    └── ServerDiedError   exited while it was being measured
"""

from __future__ import annotations

import pytest


class LLMPerfError(Exception):
    """Base class of every error pytest-llmperf raises on purpose."""


class ProfileError(LLMPerfError):
    """A profiles file, a profile or one of its fields is invalid."""


class ServerError(LLMPerfError):
    """A server under test misbehaved."""


class ServerStartError(ServerError):
    """The server exited, or did not become ready, while loading."""


class ServerDiedError(ServerError):
    """The server exited while it was being measured."""


class LLMPerfWarning(pytest.PytestWarning):
    """Warnings of pytest-llmperf; filter them with ``-W ignore::pytest_llmperf.errors.LLMPerfWarning``."""
