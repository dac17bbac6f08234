"""Download one sdist from the package index pip uses, and check its sha256.

Why not ``pip download --no-binary :all:``: pip then prepares the sdist's metadata, which
builds its build dependencies from source too; for llama-cpp-python that took 7.5 of a fresh
CI machine's minutes before the download was even saved. This only fetches the file.

    python scripts/fetch_sdist.py llama-cpp-python 0.3.36 SHA256 DEST_DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"  # PEP 691


def index_url() -> str:
    """$PIP_INDEX_URL, else pip's configured global.index-url, else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
        capture_output=True,
        text=True,
    )
    return (
        configured.stdout.strip()
        if configured.returncode == 0 and configured.stdout.strip()
        else "https://pypi.org/simple"
    )


def sdist_url(index: str, project: str, version: str) -> tuple[str, str]:
    """(filename, url) of ``project``'s sdist for ``version`` on a PEP 691 simple index."""
    wanted = f"{re.sub(r'[-_.]+', '_', project).lower()}-{version}.tar.gz"
    return wanted, file_url(index, project, wanted)


def file_url(index: str, project: str, wanted: str) -> str:
    """The URL of one of ``project``'s files, named exactly, on a PEP 691 (or 503) simple index."""
    normalized = re.sub(r"[-_.]+", "-", project).lower()
    request = urllib.request.Request(
        f"{index.rstrip('/')}/{normalized}/", headers={"Accept": SIMPLE_JSON}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read().decode()
        if response.headers.get_content_type() == SIMPLE_JSON:
            files = json.loads(body)["files"]
        else:  # an index that only speaks PEP 503 HTML
            files = [
                {"url": href, "filename": name.strip()}
                for href, name in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', body)
            ]
    for entry in files:
        if entry["filename"].lower() == wanted.lower():
            return urllib.request.urljoin(f"{index.rstrip('/')}/{normalized}/", entry["url"])
    sys.exit(f"fetch: {wanted} is not on {index}")


def download(url: str, sha256: str, target: Path) -> None:
    """``url`` to ``target``, kept only if its sha256 is ``sha256``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as response, open(partial, "wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != sha256:
        partial.unlink()
        sys.exit(
            f"fetch: {url} has sha256 {digest.hexdigest()}, expected {sha256}; nothing was kept"
        )
    partial.replace(target)


def main() -> None:
    project, version, sha256, dest = sys.argv[1:5]
    filename, url = sdist_url(index_url(), project, version)
    target = Path(dest) / filename
    download(url, sha256, target)
    print(target)


if __name__ == "__main__":
    main()
