"""The outcome of a point: the verdict's name, whether it passes and how it is shown."""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    """What a checked (or only measured) point came to, most urgent first."""

    FAIL = "FAIL"
    INVALID = "INVALID"
    INCOMPARABLE = "INCOMPARABLE"
    MISSING = "MISSING"
    UNCERTAIN = "UNCERTAIN"
    #: Undecided by the launches' noise: measured again on a fresh launch of the server after
    #: the profile's tests, which decides it (provisional: its test passes, the confirmation
    #: fails if it is a FAIL).
    CONFIRMING = "CONFIRMING"
    WARN = "WARN"
    IMPROVED = "IMPROVED"
    PASS = "PASS"
    RECORDED = "RECORDED"
    #: Measured, never checked against a golden.
    MEASURED = "measured"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def passed(self) -> bool:
        return self in _PASSING

    @property
    def color(self) -> str | None:
        """The terminal colour of a line that reports it (None: the default colour)."""
        return _COLORS.get(self)

    @property
    def rank(self) -> int:
        """Sort key: the most urgent outcome first."""
        return _ORDER.index(self)

    @property
    def noteworthy(self) -> bool:
        """Worth a line of its own in a summary (anything but a plain pass or a recording)."""
        return self not in (Outcome.PASS, Outcome.RECORDED, Outcome.MEASURED)


_PASSING = frozenset(
    {
        Outcome.PASS,
        Outcome.WARN,
        Outcome.IMPROVED,
        Outcome.RECORDED,
        Outcome.MEASURED,
        Outcome.CONFIRMING,
    }
)
_COLORS = {
    Outcome.FAIL: "red",
    Outcome.INVALID: "red",
    Outcome.MISSING: "red",
    Outcome.INCOMPARABLE: "red",
    Outcome.WARN: "yellow",
    Outcome.CONFIRMING: "yellow",
    Outcome.IMPROVED: "green",
}
_ORDER = tuple(Outcome)
