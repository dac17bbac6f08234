"""A launched server dies with the pytest that launched it, even on SIGKILL.

pytest's own teardown (and its atexit hook) cannot run when a runner SIGKILLs it after a job
timeout, or when the kernel's OOM killer takes it. So each launch gets a watchdog: a small
process in a session of its own (a kill of pytest's process group does not reach it) that reads
a pipe from pytest. The kernel closes that pipe when pytest dies, however it dies; the watchdog
then SIGTERMs the server's process group, waits the profile's grace, and SIGKILLs the group and
every descendant it saw (SGLang's schedulers and detokenizer; children that left the group too).
When pytest stops the server itself, it closes the pipe afterwards and the watchdog finds
nothing left to stop.

Run as ``python -m pytest_llmperf.servers.watchdog PGID GRACE_S``: it imports nothing of the
plugin (and psutil only), so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

#: How often the watchdog notes the server's descendants (those that may leave its group): a
#: scan of the process table, kept rare so that it costs a measured server nothing.
POLL_S = 5.0


def start(pgid: int, grace_s: float) -> subprocess.Popen:
    """The watchdog of the server whose process group is ``pgid``; keep the returned process's
    ``stdin`` open while the server runs, and call :func:`release` after stopping it."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_llmperf.servers.watchdog", str(pgid), str(grace_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def release(watchdog: subprocess.Popen) -> None:
    """The server is stopped: close the pipe and reap the watchdog."""
    try:
        if watchdog.stdin is not None:
            watchdog.stdin.close()
        watchdog.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        watchdog.kill()


def _descendants(pid: int) -> dict[int, float]:
    """pid → create time of every live descendant of ``pid`` (the create time guards against
    killing a reused pid later)."""
    import psutil

    try:
        return {p.pid: p.create_time() for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _kill(seen: dict[int, float], pgid: int, grace_s: float) -> None:
    import psutil

    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid, created in seen.items():
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) < 0.01:
                proc.kill()
        except psutil.Error:
            pass


def main(argv: list[str]) -> int:
    pgid, grace_s = int(argv[0]), float(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to pytest, which stops the server
    seen: dict[int, float] = {}
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break  # EOF: pytest closed the pipe (server stopped) or died
        seen.update(_descendants(pgid))
    _kill(seen, pgid, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
