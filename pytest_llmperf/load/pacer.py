"""Waking an event loop at absolute deadlines, as precisely as the platform allows.

An open loop sends request k at ``start + offset[k]`` on the monotonic clock
(``time.perf_counter`` is CLOCK_MONOTONIC on Linux). The event loop's own timers are the wrong
tool: asyncio rounds an epoll timeout up to the next millisecond and uvloop's libuv timers
count whole milliseconds, so every send would be up to 1 ms late (AIPerf measured the same,
ai-dynamo/aiperf#1185). On Linux a ``timerfd`` armed with an absolute CLOCK_MONOTONIC deadline
becomes readable when the kernel's high-resolution timer fires (tens of microseconds), and the
loop wakes for it as for any socket. Elsewhere, the loop's ``call_at`` is used and its lag is
measured and reported all the same.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import sys
import time
from collections.abc import Callable

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = 0o4000
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux") or time.get_clock_info(
        "perf_counter"
    ).implementation != ("clock_gettime(CLOCK_MONOTONIC)"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.timerfd_create  # noqa: B018  (present since glibc 2.8)
    except (OSError, AttributeError):
        return None
    return libc


class Pacer:
    """Calls ``wake()`` at (or just after) each deadline given to :meth:`at`; one pending
    deadline at a time, the latest call replacing the earlier one."""

    kind = "loop timer"

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
        self._loop, self._wake = loop, wake
        self._handle: asyncio.TimerHandle | None = None

    def at(self, deadline: float) -> None:
        """Wake at ``deadline`` (a ``perf_counter`` time)."""
        if self._handle is not None:
            self._handle.cancel()
        delay = deadline - time.perf_counter()
        self._handle = self._loop.call_at(self._loop.time() + max(0.0, delay), self._wake)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


class TimerFdPacer(Pacer):
    """A Linux timerfd on CLOCK_MONOTONIC, watched by the loop like a socket."""

    kind = "timerfd"

    def __init__(
        self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None], libc: ctypes.CDLL
    ) -> None:
        super().__init__(loop, wake)
        self._libc = libc
        fd = libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd = fd
        loop.add_reader(fd, self._fired)

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return  # re-armed before the loop saw the old expiry
        self._wake()

    def at(self, deadline: float) -> None:
        # A deadline already past still fires: timerfd treats it as "now" (never 0, which disarms).
        sec = int(deadline)
        nsec = max(1, int((deadline - sec) * 1e9)) if deadline > 0 else 1
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(max(sec, 0), min(nsec, 999_999_999)))
        if self._libc.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)


def make_pacer(loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> Pacer:
    """The best pacer here: a timerfd on Linux, else the loop's own timer."""
    libc = _libc()
    if libc is not None:
        try:
            return TimerFdPacer(loop, wake, libc)
        except OSError:
            pass
    return Pacer(loop, wake)
