"""The SGLang release matrix (tests/data/sglang-releases.txt): fetch it, and derive the
stand-ins' data from it.

    python scripts/sglang_releases.py fetch .sglang/releases
        each release's pinned wheel (sha256-checked, cached in ~/.cache/pytest-llmperf), its
        ``sglang`` package unpacked into .sglang/releases/<version>/
    python scripts/sglang_releases.py regenerate
        asks each release's own parser (scripts/sglang_parser.py, in SGLang's venv) for its
        options and ServerArgs fields, and writes tests/data/sglang-cli/<version>.json, which the
        stand-in SGLang and the simulated engine build their parsers from
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fetch_sdist import download, file_url, index_url

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "tests" / "data" / "sglang-releases.txt"
CLI_DATA = ROOT / "tests" / "data" / "sglang-cli"
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "pytest-llmperf"
    / "sglang-wheels"
)


def releases() -> list[tuple[str, str, str]]:
    """(version, wheel file name, sha256) per line of the matrix."""
    out = []
    for line in MATRIX.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, wheel, sha256 = line.split()
            out.append((version, wheel, sha256))
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(dest: Path) -> None:
    index = None
    for version, wheel, sha256 in releases():
        target = dest / version
        if (target / ".sha256").exists() and (target / ".sha256").read_text() == sha256:
            continue
        cached = CACHE / wheel
        if not cached.exists() or _sha256(cached) != sha256:
            index = index or index_url()
            download(file_url(index, "sglang", wheel), sha256, cached)
        partial = dest / f".{version}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(cached) as z:
            z.extractall(partial, [n for n in z.namelist() if n.startswith("sglang/")])
        (partial / ".sha256").write_text(sha256)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        print(f"sglang_releases: {version} unpacked into {target}", file=sys.stderr)


def ask(version: str, mode: str, stdin: str | None = None, *, sglang_root: Path) -> object:
    """Run scripts/sglang_parser.py ``mode`` against one release; its JSON answer."""
    done = subprocess.run(
        [str(sglang_root / "bin" / "python"), str(ROOT / "scripts" / "sglang_parser.py"), mode],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(sglang_root / "releases" / version)},
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"SGLang {version}: sglang_parser.py {mode} failed:\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout)


SIM_FLAGS = ROOT / "pytest_llmperf" / "sim" / "sglang_flags.txt"


def all_flags(described: list[dict]) -> list[str]:
    """Every option string any of the releases has (the simulated engine refuses the rest)."""
    return sorted({flag for d in described for option in d["options"] for flag in option["flags"]})


def regenerate(sglang_root: Path) -> None:
    CLI_DATA.mkdir(parents=True, exist_ok=True)
    every = []
    for version, _, _ in releases():
        described = ask(version, "describe", sglang_root=sglang_root)
        assert isinstance(described, dict) and described["version"] == version, described
        path = CLI_DATA / f"{version}.json"
        path.write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")
        print(f"{path}: {len(described['options'])} options, {len(described['fields'])} fields")
        every.append(described)
    SIM_FLAGS.write_text("\n".join(all_flags(every)) + "\n")
    print(f"{SIM_FLAGS}: {len(all_flags(every))} flags")


if __name__ == "__main__":
    command = sys.argv[1:2]
    if command == ["fetch"] and len(sys.argv) == 3:
        fetch(Path(sys.argv[2]))
    elif command == ["regenerate"]:
        regenerate(ROOT / ".sglang")
    else:
        sys.exit(__doc__)
