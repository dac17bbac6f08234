"""Servers an earlier run left behind.

Each launched server is recorded in its run directory (``<profile>.pid``: its PID, its start
time and its masked command line) and the record is removed when the plugin stops it. A record
that outlives its run means that run was killed before it could stop its server (SIGKILL, an OOM
kill, a lost CI runner): at the start of the next run each such server that still runs, and is
still the same process (same start time, not a reused PID), is named with its PID in a warning.
Nothing is killed automatically: it may be someone's on purpose.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_llmperf.servers.lifecycle import ServerHandle

RECORD_SUFFIX = ".pid"


def remember(run_dir: Path, handle: ServerHandle) -> None:
    import psutil

    assert handle.process is not None and handle.log_path is not None
    try:
        started = psutil.Process(handle.process.pid).create_time()
    except psutil.NoSuchProcess:
        return  # already gone: nothing can be left behind
    me = psutil.Process()
    record = {
        "pid": handle.process.pid,
        "create_time": started,
        # The run that launched it: while that still runs, its servers are not left behind.
        "run_pid": me.pid,
        "run_create_time": me.create_time(),
        "profile": handle.profile.name,
        "command": shlex.join(handle.redactor.command(handle.command)),
    }
    path = handle.log_path.with_suffix(RECORD_SUFFIX)
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")


def forget(handle: ServerHandle) -> None:
    if handle.log_path is not None:
        handle.log_path.with_suffix(RECORD_SUFFIX).unlink(missing_ok=True)


def _alive(pid: object, started: object) -> bool:
    """Whether process ``pid`` that started at ``started`` still runs (not a reused PID)."""
    import psutil

    try:
        proc = psutil.Process(int(pid))  # type: ignore[call-overload]
        return abs(proc.create_time() - float(started)) < 1.0 and (  # type: ignore[arg-type]
            proc.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.NoSuchProcess, TypeError, ValueError):
        return False
    except psutil.AccessDenied:
        return True


def still_running(runs_root: Path) -> tuple[list[str], list[str]]:
    """Recorded servers that still run, one line each: those whose run was killed (left
    behind), and those of another run that is measuring now. Records of servers that are gone
    are removed."""
    if not runs_root.is_dir():
        return [], []
    found: list[str] = []
    concurrent: list[str] = []
    for path in sorted(runs_root.glob(f"*/*{RECORD_SUFFIX}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            pid, started = int(record["pid"]), float(record["create_time"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours to judge
        if not _alive(pid, started):
            path.unlink(missing_ok=True)  # gone, or the PID now belongs to another process
            continue
        line = f"PID {pid} ({record.get('profile')}, from {path.parent}): {record.get('command')}"
        if _alive(record.get("run_pid"), record.get("run_create_time")):
            concurrent.append(f"{line} [run PID {record['run_pid']}]")
        else:
            found.append(line)
    return found, concurrent
