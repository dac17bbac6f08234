"""Headless Chromium (Debian's ``chromium`` package) for the pages the plugin writes.

``load(page)`` opens a file as a user would, waits for its scripts, and returns the DOM as it
stands after them and what Chromium logged (console messages and uncaught errors included);
``screenshot(page, png)`` saves what it looks like. The flags keep Chromium off the network
this machine does not have (background services, QUIC, component updates).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--enable-logging=stderr",
    "--v=0",
)


def binary() -> str:
    """The chromium binary, or skip (fail under LLMPERF_REQUIRE_CHROMIUM=1, as .ci/run sets):
    scripts/install-test-services.sh installs it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed here: bash scripts/install-test-services.sh"
        if os.environ.get("LLMPERF_REQUIRE_CHROMIUM"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@dataclass
class Loaded:
    dom: str
    log: str

    def console_errors(self) -> list[str]:
        return [
            line
            for line in self.log.splitlines()
            if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)
        ]


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="llmperf-chromium-") as profile:
        return subprocess.run(
            [binary(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )


def load(page: Path, width: int = 1400, height: int = 1000, timeout_s: float = 120) -> Loaded:
    return load_url(page.resolve().as_uri(), width, height, timeout_s)


def load_url(url: str, width: int = 1400, height: int = 1000, timeout_s: float = 120) -> Loaded:
    done = _run([f"--window-size={width},{height}", "--dump-dom", url], timeout_s)
    return Loaded(done.stdout, done.stderr)


def screenshot(
    page: Path, png: Path, width: int = 1400, height: int = 1000, timeout_s: float = 120
) -> Path:
    return screenshot_url(page.resolve().as_uri(), png, width, height, timeout_s)


def screenshot_url(
    url: str, png: Path, width: int = 1400, height: int = 1000, timeout_s: float = 120
) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--window-size={width},{height}", f"--screenshot={png.resolve()}", url], timeout_s)
    assert png.is_file() and png.stat().st_size > 0, f"chromium wrote no screenshot of {url}"
    return png
