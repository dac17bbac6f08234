"""The real SGLang, for the tests that hold the plugin (and its stand-ins) to it.

``bash scripts/install-sglang-cpu.sh`` installs it under ``.sglang/``: SGLang 0.5.23 in a venv
(it serves on the CPU), and the ``sglang`` package of every release in
tests/data/sglang-releases.txt, whose own code (argument parser, ServerArgs fields, log formats)
scripts/sglang_parser.py imports in that venv. Without the install, these tests skip and say
how to enable them; with LLMPERF_REQUIRE_SGLANG=1 they fail instead (.ci/run installs it first,
so nothing is skipped there).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / ".sglang"
PYTHON = ROOT / "bin" / "python"
MATRIX = REPO / "tests" / "data" / "sglang-releases.txt"
CLI_DATA = REPO / "tests" / "data" / "sglang-cli"
INSTALL = "bash scripts/install-sglang-cpu.sh"
MODEL_DIR = ROOT / "models" / "tiny-llama"


def versions() -> list[str]:
    """The tested releases, oldest first (one line each in tests/data/sglang-releases.txt)."""
    return [
        line.split()[0]
        for line in MATRIX.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def require(what: Path) -> None:
    """Skip (or, under LLMPERF_REQUIRE_SGLANG=1, fail) when ``what`` is not installed."""
    if what.exists():
        return
    message = f"the real SGLang is not installed here ({what} is missing): run `{INSTALL}`"
    if os.environ.get("LLMPERF_REQUIRE_SGLANG") == "1":
        pytest.fail(message + " (LLMPERF_REQUIRE_SGLANG=1)")
    pytest.skip(message)


def _ask_release(version: str | None, mode: str, question: str) -> Any:
    """scripts/sglang_parser.py ``mode`` against release ``version`` (None: ``many``, which
    puts each release on its path itself), ``question`` on stdin; its JSON."""
    done = subprocess.run(
        [str(PYTHON), str(REPO / "scripts" / "sglang_parser.py"), mode],
        input=question,
        capture_output=True,
        text=True,
        # One release is put first by PYTHONPATH; ``many`` (version None) puts each itself.
        env={**os.environ, "PYTHONPATH": str(ROOT / "releases" / version) if version else ""},
        timeout=300,
    )
    assert done.returncode == 0, (
        f"SGLang {version or 'releases'}'s code could not be asked:\n{done.stderr[-3000:]}"
    )
    return json.loads(done.stdout)


#: Answers fetched ahead by :func:`ask_releases_at_once`: (version, question) -> answer.
_FETCHED: dict[tuple[str, str], dict[str, Any]] = {}


def ask_releases_at_once(asked: dict[str, tuple[list[list[str]], list[dict[str, Any]]]]) -> None:
    """Ask each installed release of ``asked`` (version -> the argvs and adaptive questions
    :func:`release` would ask) in one run of scripts/sglang_parser.py ``many``: the libraries
    every release imports are imported once, each release afresh in a process forked from it,
    two at a time (the matrix in about 17 s instead of 50). :func:`release` then answers from
    these; a release not installed is left to skip (or fail) when it is asked."""
    releases = [
        {"version": v, "path": str(ROOT / "releases" / v), "asked": _question(*questions)}
        for v, questions in asked.items()
        if (ROOT / "releases" / v / "sglang").exists()
    ]
    if not PYTHON.exists() or not releases:
        return
    answers = _ask_release(None, "many", json.dumps({"workers": 2, "releases": releases}))
    for release in releases:
        answer = answers[release["version"]]
        assert "error" not in answer, f"SGLang {release['version']}: {answer['error']}"
        _FETCHED[release["version"], json.dumps(release["asked"])] = answer


def _question(argvs: list[list[str]], adaptive: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {"argvs": argvs, "adaptive": adaptive or []}


@functools.cache
def _ask(version: str, asked: str) -> dict[str, Any]:
    fetched = _FETCHED.get((version, asked))
    answer: dict[str, Any] = fetched or _ask_release(version, "describe+parse+adaptive", asked)
    assert answer["version"] == version, f"{ROOT / 'releases' / version} holds {answer['version']}"
    return answer


def release(
    version: str, argvs: list[list[str]], adaptive: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Release ``version``'s own description (options, ServerArgs fields), its parser's answer
    to each of ``argvs`` (``parses``) and its adaptive-speculation routing for each of
    ``adaptive`` (``adaptive``): one import of that release per distinct set of questions (an
    import takes seconds: ask everything at once)."""
    require(PYTHON)
    require(ROOT / "releases" / version / "sglang")
    return _ask(version, json.dumps(_question(argvs, adaptive)))


def require_router() -> None:
    """SGLang's router (sglang-router, installed beside SGLang by the same script)."""
    require(PYTHON)
    found = list((ROOT / "venv" / "lib").glob("python*/site-packages/sglang_router"))
    require(found[0] if found else ROOT / "venv" / "lib" / "sglang_router")
