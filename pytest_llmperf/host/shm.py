"""Shared-memory files a server leaves behind in /dev/shm, and their removal.

SGLang never removes some of its /dev/shm files: 0.5.23 leaves ``sglang_loads_<hash>.shm``
(the scheduler's load report) after every run, even a clean SIGTERM, and a crashed one also
the launcher's multiprocessing semaphore ``sem.mp-<id>`` (seen here on the CPU). On a CI
runner that serves night after night, /dev/shm (RAM) fills up. The launcher notes which such
files the server's own processes have mapped or open, once it is ready and again before it is
stopped, plus those that appeared while it ran (a crashed server's), and removes those that
outlive it, never a file another live process still maps. Only names SGLang and Python's
multiprocessing use are considered. Linux only (/proc); elsewhere nothing is removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

SHM = "/dev/shm/"
#: SGLang's own files, multiprocessing's named semaphores and shared-memory blocks.
LEFTOVER_NAMES = re.compile(r"^(sglang_|sem\.mp-|psm_)")


def files_of(pids: Iterable[int]) -> set[str]:
    """The /dev/shm files of those names that ``pids`` have mapped or open."""
    found: set[str] = set()
    for pid in pids:
        found |= {path for path in _mapped(pid) if LEFTOVER_NAMES.match(path[len(SHM) :])}
    return found


def snapshot() -> set[str]:
    """The /dev/shm files of those names that exist now (taken at launch)."""
    try:
        return {SHM + name for name in os.listdir(SHM) if LEFTOVER_NAMES.match(name)}
    except OSError:
        return set()


def created_since(before: set[str], since: float) -> set[str]:
    """Files of those names, ours, that appeared after ``before`` was taken at time ``since``.

    This is how a crashed server's semaphores are found: SGLang's launcher, when a child dies,
    SIGKILLs its own tree, resource tracker included, and nobody maps ``sem.mp-*`` by then.
    A file another server made in the same window and still holds open is kept by
    :func:`remove_leftovers` (it is mapped)."""
    found = set()
    for path in snapshot() - before:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        if stat.st_uid == os.getuid() and stat.st_ctime >= since - 1:
            found.add(path)
    return found


def remove_leftovers(paths: Iterable[str]) -> list[str]:
    """Unlink each of ``paths`` that still exists and no live process maps; the ones removed."""
    candidates = [p for p in paths if os.path.exists(p)]
    if not candidates:
        return []
    in_use: set[str] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            in_use |= _mapped(int(entry.name))
    removed = []
    for path in candidates:
        if path not in in_use:
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def _mapped(pid: int) -> set[str]:
    paths: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                start = line.find(SHM)
                if start >= 0:
                    paths.add(line[start:].rstrip("\n").removesuffix(" (deleted)"))
    except OSError:  # gone, or not ours to read
        pass
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(SHM):
                paths.add(target.removesuffix(" (deleted)"))
    except OSError:
        pass
    return paths
