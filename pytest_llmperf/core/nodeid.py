"""pytest node ids, parsed in one place: ``perf_suites/test_x.py::test_tput[sim-C70]``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeId:
    nodeid: str

    @property
    def without_params(self) -> str:
        """``perf_suites/test_x.py::test_tput``: the test, whatever its parameters."""
        return self.nodeid.split("[", 1)[0]

    @property
    def path(self) -> str:
        """``perf_suites/test_x.py``: the file, as a user passes it to pytest."""
        return self.nodeid.split("::", 1)[0]

    @property
    def function(self) -> str:
        """``test_tput``: the test function's name."""
        return self.without_params.rsplit("::", 1)[-1]

    @property
    def short_name(self) -> str:
        """``tput``: the function's name without its ``test_`` prefix, as tables show it."""
        name = self.function
        return name[5:] if name.startswith("test_") else name

    def point_key(self, concurrency: int, rate: float | None = None) -> str:
        """``perf_suites/test_x.py::test_tput[C=70]``: a golden point's key (``…[R=5]`` at an
        open-loop rate level of 5 requests/s)."""
        if rate is not None:
            return f"{self.without_params}[R={rate:g}]"
        return f"{self.without_params}[C={concurrency}]"
