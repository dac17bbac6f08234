"""Live lines on pytest's terminal while the plugin waits (a server loading)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


class ProgressLine:
    """One updating terminal line (a line per new stage when the terminal is not a TTY).

    Written past pytest's output capture, since fixture setup runs under it.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.stage: str | None = None

    def __call__(self, message: str) -> None:
        self._uncaptured(self._show, message)

    def _uncaptured(self, write: Callable[..., Any], *args: Any) -> None:
        if self.reporter is None:
            return
        if self.capture is not None:
            with self.capture.global_and_fixture_disabled():
                write(*args)
        else:
            write(*args)

    def _show(self, message: str) -> None:
        assert self.reporter is not None  # _uncaptured calls only with a reporter
        stage = message.rsplit(",", 1)[0]
        if self.reporter.isatty:
            if self.stage is None:
                self.reporter.write("\n")
            self.reporter.rewrite(message, erase=True)
        elif stage != self.stage:
            self.reporter.write_line(message)
        self.stage = stage

    def finish(self) -> None:
        if self.reporter is not None and self.reporter.isatty and self.stage is not None:
            self._uncaptured(self.reporter.write, "\n")
