"""Writing files so that a reader never sees half of one, where it was meant to go, and with the
permissions any other file of the user would get."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


class OutsideDirectoryError(ValueError):
    """A path derived from input (a profile name, a hardware key) would leave its directory."""


def confined(directory: Path, *parts: str) -> Path:
    """``directory / parts…``, refused unless it resolves to a path inside ``directory``."""
    base = Path(directory).resolve()
    path = base.joinpath(*parts).resolve()
    if path == base or base not in path.parents:
        raise OutsideDirectoryError(
            f"{'/'.join(parts)!r} would be written outside {directory} (as {path}); names used in "
            "paths may hold only letters, digits, '-', '_' and '.'"
        )
    return Path(directory).joinpath(*parts)


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (other threads may be
    creating files at this moment), else by the classic set-and-restore."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same directory and rename: never half a file. The
    file gets the ordinary permissions (0666 less the umask), not mkstemp's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON, strict: a NaN or infinity is a bug upstream (they must be null), never written."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def check_writable(path: Path, *, directory: bool = False) -> str | None:
    """Why ``path`` (a file, or with ``directory`` a directory) cannot be written, or None.

    Tried for real, by creating and removing a scratch file where the output will go:
    permission bits say nothing for root, read-only mounts or full disks."""
    path = Path(path)
    target_dir = path if directory else path.parent
    if not directory and path.is_dir():
        return "it is a directory; give a file path"
    if directory and path.exists() and not path.is_dir():
        return "it is a file, not a directory"
    existing = target_dir
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, so no directory can be created under it"
    probe_dir = target_dir if target_dir.exists() else existing
    try:
        fd, tmp = tempfile.mkstemp(prefix=".llmperf-probe-", dir=probe_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"cannot write in {probe_dir}: {exc.strerror or exc}"
    if not directory and path.exists() and not os.access(path, os.W_OK):
        return "the file exists and is not writable"
    return None
