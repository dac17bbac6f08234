"""The open-file limit against the connections a level needs.

Each request in flight holds a socket, so C = 8000 needs 8000 descriptors in the load generator
besides the ones pytest, the logs and the server's pipes hold. Beyond the soft limit every
further connection fails with "Too many open files", which would turn a capacity test into a
pile of failed requests. The soft limit is raised as far as the hard limit allows (as any
server does at startup): at the start of the run for the largest C of the selected profiles, so
that the servers launched after inherit it too, and again before each level. When even the hard
limit is too low, the level fails at once with the command that fixes it.
"""

from __future__ import annotations

#: Descriptors held besides the connections: pytest, logs, pipes, the event loop's own.
MARGIN = 256


def ensure_open_files(connections: int) -> str | None:
    """None when ``connections`` sockets fit (raising the soft limit if needed), else why not."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = connections + MARGIN
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    if hard == resource.RLIM_INFINITY or hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        return None
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # as far as it goes
    return (
        f"C={connections} needs about {need} open files (one socket per request in flight, plus "
        f"{MARGIN}), but this process may open only {hard} (ulimit -n: soft {soft}, hard {hard}). "
        f"Raise the limit before running pytest, e.g. `ulimit -n {max(need, 65536)}` (or "
        "LimitNOFILE in a systemd unit, nofile in /etc/security/limits.conf), or measure lower C."
    )
