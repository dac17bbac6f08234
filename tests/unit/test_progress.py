"""The live line: rewritten in place on a terminal, a plain line at most every 30 s without one."""

from __future__ import annotations

from pytest_llmperf.progress import PLAIN_INTERVAL_S, ProgressLine


class Reporter:
    """What ProgressLine uses of pytest's TerminalReporter, recording the calls."""

    def __init__(self, isatty: bool) -> None:
        self.isatty = isatty
        self.calls: list[tuple[str, str]] = []

    def write(self, text: str) -> None:
        self.calls.append(("write", text))

    def write_line(self, text: str) -> None:
        self.calls.append(("line", text))

    def rewrite(self, text: str, erase: bool = False) -> None:
        self.calls.append(("rewrite", text))


def test_without_a_terminal_lines_are_at_least_30_s_apart():
    reporter = Reporter(isatty=False)
    line = ProgressLine(reporter)
    for second in range(0, 125):
        line.tick(f"run 1/3, {second} s", now=1000.0 + second)
    printed = [text for kind, text in reporter.calls if kind == "line"]
    assert printed == ["run 1/3, 0 s", "run 1/3, 30 s", "run 1/3, 60 s", "run 1/3, 90 s",
                       "run 1/3, 120 s"]  # fmt: skip
    assert PLAIN_INTERVAL_S == 30.0


def test_on_a_terminal_one_line_is_rewritten_in_place():
    reporter = Reporter(isatty=True)
    line = ProgressLine(reporter)
    for second in range(3):
        line.tick(f"run 1/3, {second} s", now=float(second))
    line.finish()
    assert reporter.calls == [
        ("write", "\n"),
        ("rewrite", "run 1/3, 0 s"),
        ("rewrite", "run 1/3, 1 s"),
        ("rewrite", "run 1/3, 2 s"),
        ("write", "\n"),
    ]


def test_loading_stages_print_once_each_without_a_terminal():
    reporter = Reporter(isatty=False)
    line = ProgressLine(reporter)
    for message in ("p: loading weights, 1 s", "p: loading weights, 2 s", "p: ready, 3 s"):
        line(message)
    assert [t for k, t in reporter.calls if k == "line"] == [
        "p: loading weights, 1 s",
        "p: ready, 3 s",
    ]
