"""Live lines on pytest's terminal while the plugin waits: a server loading, a point measured.

On a terminal one line is rewritten in place; without one (CI logs) a loading stage gets a
line when it changes, and a measurement a plain line at most every ``PLAIN_INTERVAL_S``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

#: Without a terminal, a measurement's progress is printed at most this often.
PLAIN_INTERVAL_S = 30.0


class ProgressLine:
    """One updating terminal line, written past pytest's output capture (fixture setup and
    tests run under it)."""

    def __init__(self, reporter: Any, capture: Any = None) -> None:
        self.reporter = reporter
        self.capture = capture
        self.stage: str | None = None
        self.shown = False
        self.last_plain = -PLAIN_INTERVAL_S

    @classmethod
    def of(cls, config: pytest.Config) -> ProgressLine:
        plugins = config.pluginmanager
        return cls(plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager"))

    def __call__(self, message: str) -> None:
        """A loading stage: ``"<profile>: <stage>, <seconds> s"``."""
        self._uncaptured(self._stage, message)

    def tick(self, message: str, now: float | None = None) -> None:
        """A measurement's progress: rewritten in place, or a plain line every 30 s at most."""
        self._uncaptured(self._tick, message, time.monotonic() if now is None else now)

    def _uncaptured(self, write: Callable[..., Any], *args: Any) -> None:
        if self.reporter is None:
            return
        if self.capture is not None:
            with self.capture.global_and_fixture_disabled():
                write(*args)
        else:
            write(*args)

    def _rewrite(self, message: str) -> None:
        if not self.shown:
            self.reporter.write("\n")
        self.reporter.rewrite(message, erase=True)
        self.shown = True

    def _stage(self, message: str) -> None:
        stage = message.rsplit(",", 1)[0]
        if self.reporter.isatty:
            self._rewrite(message)
        elif stage != self.stage:
            self.reporter.write_line(message)
        self.stage = stage

    def _tick(self, message: str, now: float) -> None:
        if self.reporter.isatty:
            self._rewrite(message)
        elif now - self.last_plain >= PLAIN_INTERVAL_S:
            self.reporter.write_line(message)
            self.last_plain = now

    def finish(self) -> None:
        if self.reporter is not None and self.reporter.isatty and self.shown:
            self._uncaptured(self.reporter.write, "\n")
        self.shown = False
